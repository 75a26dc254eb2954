"""Progress reporting on stderr: a live line on a terminal, optional log lines elsewhere.

On a terminal the line names the step that is *running* (not the one that
finished) and its elapsed time, refreshed twice a second::

    optimize [3/8] schedule  1.4 s

Off a terminal nothing is shown, unless ``log=True`` (``-v``): then one line per
finished step, so a CI log says where the time went. An interrupted run (Ctrl-C,
an error) clears the live line and prints no "done".
"""

from __future__ import annotations

__all__ = ["Progress"]

import sys
import threading
import time
from typing import TextIO


class Progress:
    """``with Progress("optimize", total=5) as p: p.start("schedule"); ...; p.finish("schedule: 2 ms")``.

    ``step(what)`` (start of the next step) is kept for simple callers.

    >>> import io
    >>> log = io.StringIO()
    >>> with Progress("optimize", 2, stream=log, enabled=False, log=True) as p:
    ...     p.start("weld")
    ...     p.finish("no change")
    >>> log.getvalue().startswith("optimize [1/2] weld: no change")
    True
    """

    def __init__(self, label: str, total: int, stream: TextIO | None = None, enabled: bool | None = None,
                 log: bool = False, interval: float = 0.5) -> None:
        self.label, self.total, self.done = label, max(int(total), 1), 0
        self.stream = stream or sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.log = log and not self.enabled
        self.t0 = time.perf_counter()
        self.interval = interval
        self._what = ""
        self._t_step = self.t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, what: str) -> None:
        """Step ``what`` begins: the live line names it from now on."""
        with self._lock:
            self._what, self._t_step = what, time.perf_counter()
        if self.enabled:
            self._draw()
            if self._thread is None:
                self._thread = threading.Thread(target=self._tick, name="drawopt-progress", daemon=True)
                self._thread.start()

    def finish(self, note: str = "") -> None:
        """The running step ended (``note``: what it did, for the ``-v`` log line)."""
        self.done += 1
        if self.log:
            took = time.perf_counter() - self._t_step
            self.stream.write(f"{self.label} [{self.done}/{self.total}] {self._what}: "
                              f"{note + ', ' if note else ''}{took:.2f} s\n")
            self.stream.flush()

    def step(self, what: str = "", n: int = 1) -> None:
        """Start step ``what``; ``n=0`` names it without counting a finished step."""
        if n and self._what:
            self.finish()
        self.start(what)

    def _line(self) -> str:
        with self._lock:
            what, t = self._what, time.perf_counter() - self._t_step
        return f"{self.label} [{min(self.done + 1, self.total)}/{self.total}] {what[:48]}  {t:5.1f} s"

    def _draw(self) -> None:
        self.stream.write("\r\x1b[K" + self._line())
        self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._draw()
            except (OSError, ValueError):  # stream closed under us
                return

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            self.stream.write("\r\x1b[K")  # leave the terminal as it was: the verdict follows
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
