"""The stage table of ``drawopt optimize --time-passes`` (LLVM ``-time-passes`` style, on stderr).

Every stage of the command, in order, with its milliseconds and share of the command's
time: ``load``, ``passes`` (each pass below it), ``post-condition (finding counts)`` (the
pass manager's finding counts of the input and of each changed stream, with the state
tracking they need), ``verify`` (the translation validator: the final check, and each
pass's under ``--verify-each``), ``report`` (the before/after figures, the explanation and
the ``--report`` file), ``save``, ``other`` (what no stage names: argument checks, per-pass
call counts) and ``total`` (from the command's start to the table; the interpreter's start
and imports are outside it).

>>> c = StageClock(start=0.0)
>>> c.add("load", 0.010); c.add("save", 0.002)
>>> c.stages(passes=[("weld", 0.5)], total=0.52)["other"]
0.008
>>> print(c.table(passes=[("weld", 0.5)], total=0.52))
stage timings:
  stage                                          ms   share
  load                                         10.0    1.9%
  passes                                      500.0   96.2%
    weld                                      500.0   96.2%
  post-condition (finding counts)               0.0    0.0%
  verify                                        0.0    0.0%
  report                                        0.0    0.0%
  save                                          2.0    0.4%
  other                                         8.0    1.5%
  total                                       520.0  100.0%
"""

from __future__ import annotations

__all__ = ["STAGES", "StageClock"]

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

STAGES = {"load": "load", "passes": "passes", "findings": "post-condition (finding counts)", "verify": "verify",
          "report": "report", "save": "save", "other": "other", "total": "total"}
"""The stages' keys (``--json``'s ``time_passes.stages``) and their labels in the table, in order."""


class StageClock:
    """Seconds per stage of one command; ``start`` is when the command began (``perf_counter``)."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to ``stage`` (a key of :data:`STAGES`)."""
        if stage not in STAGES:
            raise KeyError(f"unknown stage '{stage}' (known: {', '.join(STAGES)})")
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def stages(self, passes: Sequence[tuple[str, float]], total: float | None = None) -> dict[str, float]:
        """Every stage's seconds (rounded to microseconds), ``passes`` the sum of the passes' own,
        ``other`` the rest of ``total`` (default: now minus :attr:`start`)."""
        t = time.perf_counter() - self.start if total is None else total
        got = {k: self.seconds.get(k, 0.0) for k in STAGES if k not in ("other", "total")}
        got["passes"] = sum(s for _, s in passes)
        got["other"] = max(t - sum(got.values()), 0.0)
        got["total"] = t
        return {k: round(got[k], 6) for k in STAGES}

    def table(self, passes: Sequence[tuple[str, float]], total: float | None = None) -> str:
        """The table ``--time-passes`` prints: a row per stage, the passes indented under ``passes``."""
        st = self.stages(passes, total)
        whole = st["total"] or 1.0

        def row(label: str, s: float) -> str:
            return f"  {label[:40]:<40} {s * 1000:10.1f} {s / whole:7.1%}"

        lines = ["stage timings:", f"  {'stage':<40} {'ms':>10} {'share':>7}"]
        for k, label in STAGES.items():
            lines.append(row(label, st[k]))
            if k == "passes":
                lines.extend(row("  " + name, s) for name, s in passes)
        return "\n".join(lines)
