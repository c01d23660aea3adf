"""The ``nodewright nodes`` loop: build a view, draw it, redraw when a watch event arrives.

On a terminal (and without ``--once``) the screen is a ``rich`` :class:`~rich.live.Live` display on the
alternate screen, redrawn at most :data:`MAX_REDRAWS_PER_SECOND` times a second after watch events (and once a
second so ages move); keys: ``n``/``p`` (or the arrow and page keys) page through node rows, ``q`` quits.
Otherwise (``--once``, output to a pipe or file) one plain-text view is printed and the command exits.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live

from nodewright.pricing import PricingPolicy
from nodewright.state.cluster import snapshot
from nodewright.viewer.render import Style, render
from nodewright.viewer.source import WatchedOnly, live_cluster, load_snapshot
from nodewright.viewer.view import Pricer, build_view, check_selector, parse_sort

MAX_REDRAWS_PER_SECOND = 4
#: Plain-text width when the output is not a terminal (a terminal's own width otherwise).
PLAIN_WIDTH = 200
_NEXT = {b"n", b"j", b" ", b"\x1b[B", b"\x1b[C", b"\x1b[6~"}
_PREV = {b"p", b"k", b"\x1b[A", b"\x1b[D", b"\x1b[5~"}


@dataclass
class Options:
    """The command's flags (see ``nodewright nodes --help``)."""

    kubeconfig: str | None = None
    context: str | None = None
    snapshot: str | None = None
    selector: str = ""
    sort: str = "creation"
    policy: PricingPolicy | None = None
    policy_source: str = ""
    region: str | None = None
    once: bool = False


def _keys(stop: threading.Event, on_key: Callable[[bytes], None]) -> threading.Thread | None:
    """Read keys from stdin (a terminal) in a daemon thread until ``stop``."""
    if not sys.stdin.isatty():
        return None
    fd = sys.stdin.fileno()

    def loop() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                data = os.read(fd, 16)
                if not data:
                    return
                on_key(data)

    thread = threading.Thread(target=loop, name="viewer-keys", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def _cbreak() -> Iterator[None]:
    """Keys arrive one by one, unechoed, while the viewer runs; the terminal is restored after."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def run(options: Options, out: Any = None) -> int:
    """Run the viewer; returns the exit code (0).

    Raises:
        NodewrightValidationError: a bad flag, snapshot or kubeconfig (one line each, from the CLI).
    """
    check_selector(options.selector)
    parse_sort(options.sort)
    stream = out or sys.stdout
    interactive = not options.once and stream.isatty()
    pricer = Pricer(options.policy, options.region)
    stop = threading.Event()
    changed = threading.Event()
    if options.snapshot:
        source: Any = load_snapshot(options.snapshot)
        taken = source.time

        def clock() -> float:
            return taken if taken is not None else time.time()
    else:
        clock = time.time
        source = WatchedOnly(live_cluster(options.kubeconfig, options.context, changed.set, stop, clock))

    def view() -> Any:
        return build_view(snapshot(source), pricer, clock(), options.selector, options.sort, options.policy_source)

    try:
        if not interactive:
            buffer = io.StringIO()
            console = Console(file=buffer, width=PLAIN_WIDTH, color_system=None, force_terminal=False,
                              highlight=False, emoji=False)
            console.print(render(view(), Style(plain=True))[0], crop=False, soft_wrap=False)
            stream.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
            stream.flush()
            return 0
        return _interactive(view, changed, stop, stream)
    finally:
        stop.set()


def _interactive(view: Callable[[], Any], changed: threading.Event, stop: threading.Event, stream: Any) -> int:
    console = Console(file=stream, highlight=False, emoji=False)
    state = {"page": 0, "pages": 1}
    quit_ = threading.Event()

    def on_key(data: bytes) -> None:
        if data in (b"q", b"Q", b"\x03"):
            quit_.set()
        elif data in _NEXT:
            state["page"] = min(state["page"] + 1, state["pages"] - 1)
        elif data in _PREV:
            state["page"] = max(state["page"] - 1, 0)
        else:
            return
        changed.set()

    with _cbreak(), Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
        _keys(stop, on_key)
        while not quit_.is_set():
            started = time.monotonic()
            changed.clear()
            renderable, state["pages"] = render(view(), Style(), console.size.height, state["page"])
            live.update(renderable, refresh=True)
            changed.wait(1.0)  # a watch event or a key; else redraw once a second (ages)
            rest = 1.0 / MAX_REDRAWS_PER_SECOND - (time.monotonic() - started)
            if rest > 0 and not quit_.is_set():
                quit_.wait(rest)  # coalesce bursts of events into one redraw
    return 0
