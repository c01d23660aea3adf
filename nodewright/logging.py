"""Logging setup: JSON lines in a container, readable lines in a terminal.

Every record carries ``time``, ``level``, ``logger`` and ``message``; keyword context passed with
``extra={...}`` (e.g. ``nodepool``, ``nodeclaim``, ``pods``) becomes extra JSON fields, and is appended as
``key=value`` in text mode. The user-facing sentences ("Found N provisionable pod(s)", ...) are the
``message`` itself so that ``grep`` works in both formats.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO

# LogRecord attributes that are not user context.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING,
          "error": logging.ERROR}


def _context(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``{"time", "level", "logger", "message", ...context, "error"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update(_context(record))
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class TextFormatter(logging.Formatter):
    """``HH:MM:SS LEVEL logger: message key=value ...`` for humans."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        context = " ".join(f"{k}={v}" for k, v in _context(record).items())
        line = f"{stamp} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if context:
            line += f"  {context}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _open_outputs(paths: tuple[str, ...] | list[str]) -> list[TextIO]:
    """Karpenter's ``LOG_OUTPUT_PATHS`` entries: ``stdout``, ``stderr`` or a file path (appended to)."""
    from nodewright.errors import NodewrightValidationError

    streams: list[TextIO] = []
    for path in paths:
        if path in ("stdout", "stderr"):
            streams.append(sys.stdout if path == "stdout" else sys.stderr)
            continue
        try:
            streams.append(open(path, "a", encoding="utf-8", buffering=1))  # noqa: SIM115 - lives with the process
        except OSError as err:
            raise NodewrightValidationError("LOG_OUTPUT_PATHS", f"cannot open {path!r} for logging: "
                                                                f"{err.strerror}") from None
    return streams


def setup_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None,
                  output_paths: tuple[str, ...] | list[str] | None = None) -> None:
    """Configure the root logger once for the process.

    Args:
        level: ``debug``, ``info``, ``warn``/``warning`` or ``error`` (Karpenter's ``LOG_LEVEL`` values).
        fmt: ``json``, ``text`` or ``auto`` (text when ``stream`` is a TTY, JSON otherwise, e.g. in a pod).
        stream: where to write (default ``sys.stderr``).
        output_paths: Karpenter's ``LOG_OUTPUT_PATHS`` (``stdout``, ``stderr``, file paths); replaces ``stream``.

    Raises:
        NodewrightValidationError: unknown ``level`` or ``fmt``.
    """
    from nodewright.errors import NodewrightValidationError

    if level.lower() not in LEVELS:
        raise NodewrightValidationError("LOG_LEVEL", f"unknown level {level!r}; use one of {', '.join(LEVELS)}")
    if fmt not in ("auto", "json", "text"):
        raise NodewrightValidationError("LOG_FORMAT", f"unknown format {fmt!r}; use auto, json or text")
    outs = _open_outputs(output_paths) if output_paths else [stream or sys.stderr]
    if fmt == "auto":
        out = outs[0]
        fmt = "text" if (hasattr(out, "isatty") and out.isatty()) or os.environ.get("NODEWRIGHT_LOG_TEXT") else "json"
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for out in outs:
        handler = logging.StreamHandler(out)
        handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
        root.addHandler(handler)
    root.setLevel(LEVELS[level.lower()])
    # The kubernetes client and botocore are chatty at debug; keep them at warning unless asked.
    for noisy in ("urllib3", "botocore", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING if level.lower() != "debug" else logging.INFO)
    # urllib3 warns on every connection retry; the failure itself is reported once by the caller.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR if level.lower() != "debug" else logging.INFO)


# --- repeated messages ----------------------------------------------------------------------------------------


class RateLimiter:
    """One log line per cause per ``interval`` seconds, with a count of the ones held back.

    A fault repeats the same sentence from many places at once: a cut connection fails every informer's watch
    (one per kind), an API outage fails every Lease renewal attempt, a refused write fails on every pass. The first
    line of a cause is written at once; later ones within ``interval`` are counted, not written; the first one
    after the interval is written with ``repeated=N`` (the number held back) and the sentence
    ``"(N similar in the last Ts)"``. Like klog's and zap's samplers, which Karpenter's logger uses, but per cause.

    Args:
        interval: seconds (default 30).
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, interval: float = 30.0, clock: Any = time.monotonic) -> None:
        import threading

        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._causes: dict[str, tuple[float, int]] = {}  # cause -> (last written, held back since)

    def allow(self, cause: str) -> int | None:
        """None when a line for ``cause`` must be held back now; else how many were held back before it."""
        now = self.clock()
        with self._lock:
            entry = self._causes.get(cause)
            if entry is not None and now - entry[0] < self.interval:
                self._causes[cause] = (entry[0], entry[1] + 1)
                return None
            self._causes[cause] = (now, 0)
            if len(self._causes) > 4096:  # bounded: forget causes quiet for an interval
                self._causes = {k: v for k, v in self._causes.items() if now - v[0] < self.interval}
            return entry[1] if entry is not None else 0

    def reset(self) -> None:
        """Forget every cause (tests)."""
        with self._lock:
            self._causes.clear()

    def held_back(self, cause: str) -> int:
        """Lines of ``cause`` held back since the last one written."""
        with self._lock:
            entry = self._causes.get(cause)
            return entry[1] if entry else 0


#: The process's limiter (``warn_limited``); tests may replace its clock or interval.
LIMITER = RateLimiter()


def warn_limited(logger: logging.Logger, cause: str, message: str, *args: Any, level: int = logging.WARNING,
                 extra: dict[str, Any] | None = None, limiter: RateLimiter | None = None) -> bool:
    """Log ``message % args`` at ``level`` unless a line of the same ``cause`` was written less than the
    limiter's interval ago (:class:`RateLimiter`). Returns whether a line was written."""
    limiter = limiter or LIMITER
    held = limiter.allow(cause)
    if held is None:
        return False
    fields = dict(extra or {})
    if held:
        message = f"{message} (%d similar in the last %.0fs)"
        args = (*args, held, limiter.interval)
        fields["repeated"] = held
    logger.log(level, message, *args, extra=fields)
    return True
