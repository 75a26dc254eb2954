"""Progress reporting on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

__all__ = ["Progress"]

import sys
import time
from typing import TextIO


class Progress:
    """A one-line progress indicator: ``with Progress("optimize", total=5) as p: p.step("schedule")``.

    Silent unless ``stream`` (default stderr) is a TTY, so pipes, CI logs and
    ``--json`` output stay clean.
    """

    def __init__(self, label: str, total: int, stream: TextIO | None = None, enabled: bool | None = None):
        self.label, self.total, self.done = label, max(int(total), 1), 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.t0 = time.perf_counter()

    def step(self, what: str = "", n: int = 1) -> None:
        self.done += n
        if self.enabled:
            width = 24
            fill = int(width * min(self.done, self.total) / self.total)
            self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] "
                              f"{self.done}/{self.total} {what[:40]:<40}")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stream.write(f"\r{self.label}: done in {time.perf_counter() - self.t0:.2f} s{' ' * 60}\n")
            self.stream.flush()
