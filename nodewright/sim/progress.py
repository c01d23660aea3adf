"""A progress bar for long simulations, drawn on stderr only when stdout is a terminal."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """Callable matching :data:`nodewright.sim.runner.Progress`; draws ``name [#####.....] 45%``.

    Args:
        stream: where to draw (stderr by default, so JSON on stdout stays clean).
        width: bar width in characters.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._last: tuple[str, int] | None = None

    def __call__(self, name: str, done: float, total: float) -> None:
        fraction = 0.0 if total <= 0 else min(1.0, done / total)
        percent = int(fraction * 100)
        if self._last == (name, percent):
            return
        self._last = (name, percent)
        filled = int(fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if fraction >= 1.0 else ""
        self.stream.write(f"\r{name:<20} [{bar}] {percent:3d}%{end}")
        self.stream.flush()


def progress_for_terminal() -> ProgressBar | None:
    """A :class:`ProgressBar` when stderr (where it draws) is a terminal, else None (CI logs and files get no bar;
    ``-o json | jq`` at a terminal still shows it)."""
    return ProgressBar() if sys.stderr.isatty() else None
