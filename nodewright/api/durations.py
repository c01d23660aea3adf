"""Durations as Karpenter writes them: Go ``time.Duration`` strings restricted to whole
``h``/``m``/``s`` parts (``"30s"``, ``"15m"``, ``"720h"``, ``"1h30m"``), plus ``"Never"``.

Source: Karpenter v1 CRD patterns ``^(([0-9]+(s|m|h))+|Never)$`` (expireAfter, consolidateAfter)
and ``^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`` (budget duration).
"""

from __future__ import annotations

import re

NEVER = "Never"

_DURATION_RE = re.compile(r"^([0-9]+(s|m|h))+$")
_PART_RE = re.compile(r"([0-9]+)(s|m|h)")
_BUDGET_DURATION_RE = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def is_duration(text: str) -> bool:
    """True when ``text`` is one or more ``<digits><s|m|h>`` parts (``"Never"`` is not)."""
    return bool(_DURATION_RE.match(text))


def is_budget_duration(text: str) -> bool:
    """True for a disruption-budget duration: minutes and/or hours only (``"8h"``, ``"1h30m"``)."""
    return bool(_BUDGET_DURATION_RE.match(text))


def to_seconds(text: str) -> int | None:
    """Seconds in a duration string; ``None`` for ``"Never"``.

    Raises:
        ValueError: when ``text`` is neither a duration nor ``"Never"``.
    """
    if text == NEVER:
        return None
    if not is_duration(text):
        raise ValueError(f"{text!r} is not a duration")
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _PART_RE.findall(text))


def from_seconds(seconds: int) -> str:
    """Render whole seconds as Karpenter would accept it, the shortest exact way: 30 -> ``"30s"``,
    900 -> ``"15m"``, 2592000 -> ``"720h"``, 5400 -> ``"1h30m"``, 0 -> ``"0s"``."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds}")
    if seconds == 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs:
        out += f"{secs}s"
    return out
