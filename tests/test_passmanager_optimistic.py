"""The pass manager's optimistic post-condition and its shared analyses (issue 13).

The passes run unchecked and the output is checked once (findings per rule against the input,
then verify); only when that fails is the pipeline re-run with today's per-pass checks. Held
here: the result (stream and records) equals the per-pass run's on generated streams and with
a wrong pass in the pipeline; a clean run counts findings of its input and output only; no
stream is scanned twice (passes share the scan and the state table through the manager); the
analysis manager keeps a pinned stream's analyses apart from the stream being optimized.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from test_passmanager import DropIndexBufferPass, S, SwapBlendedPass

import drawopt
import drawopt.analysis.state as state_mod
from drawopt.gen import generate
from drawopt.ir.formats import dumps
from drawopt.ir.stream import Stream
from drawopt.passmanager import AnalysisManager, Pass, PassManager, PassResult, default_pipeline, parse_pipeline
from drawopt.validate import finding_counts


def _records(pm: PassManager) -> list[tuple[Any, ...]]:
    return [(r.name, r.modified, r.commands_before, r.commands_after, r.rejected, r.verified) for r in pm.records]


def _both(passes: list[Pass], s: Stream, **kw: Any) -> tuple[PassManager, Stream, PassManager, Stream]:
    """The optimistic run and the per-pass (checked) run of the same pipeline."""
    fast = PassManager(passes, **kw)
    out = fast.run(s)
    checked = PassManager(passes, **kw)
    ref = checked._checked_run(s)
    return fast, out, checked, ref


@pytest.mark.parametrize("target", ["d3d12", "xbox-one"])
@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_the_optimistic_run_equals_the_per_pass_run(kind: str, target: str) -> None:
    s = generate(kind, 1500, seed=3)
    fast, out, checked, ref = _both(parse_pipeline(default_pipeline(target)), s, target=target)
    assert out is not s
    assert dumps(fast.final, "text") == dumps(ref, "text")
    assert _records(fast) == _records(checked)
    assert fast.verified is checked.verified is True


@pytest.mark.parametrize("bad", [DropIndexBufferPass(), SwapBlendedPass()], ids=str)
@pytest.mark.parametrize("verify", [True, False])
def test_a_wrong_pass_falls_back_to_the_per_pass_result(bad: Pass, verify: bool) -> None:
    """A pass that adds a finding, or (with verify) one the verifier rejects: the run is repeated
    with the per-pass checks, and its stream and records are the result."""
    s = S()
    passes = [*parse_pipeline("dedupe-state"), bad, *parse_pipeline("dedupe-state,schedule")]
    fast, out, checked, ref = _both(passes, s, verify=verify)
    assert dumps(fast.final, "text") == dumps(ref, "text")
    assert _records(fast) == _records(checked)
    assert fast.verified is checked.verified
    if verify or isinstance(bad, DropIndexBufferPass):
        assert fast.records[1].rejected is not None and str(bad) in fast.records[1].rejected
        assert finding_counts(out) == Counter() and drawopt.verify(s, out).equivalent


@dataclass(frozen=True)
class RestorePass(Pass):
    """Puts back the test stream (removes what drop-ib added)."""

    name: ClassVar[str] = "restore"

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        return PassResult(S(), True)


def test_a_finding_that_a_later_pass_removes_is_not_rolled_back() -> None:
    """The documented difference from per-pass checking: drop-ib adds findings, restore removes
    them; the output adds none and verifies, so nothing is rolled back (per pass: drop-ib was)."""
    s = S()
    pm = PassManager([DropIndexBufferPass(), RestorePass()])
    out = pm.run(s)
    assert [r.rejected for r in pm.records] == [None, None]
    assert finding_counts(out) == finding_counts(s) and drawopt.verify(s, out).equivalent
    checked = PassManager([DropIndexBufferPass(), RestorePass()])
    checked._checked_run(s)
    assert checked.records[0].rejected is not None  # per pass, drop-ib is rolled back
    with pytest.raises(drawopt.passmanager.PassError, match="drop-ib"):
        PassManager([DropIndexBufferPass(), RestorePass()], verify_each=True).run(s)  # strict: per pass


def _count_finding_counts(monkeypatch: pytest.MonkeyPatch) -> list[Stream]:
    """The streams ``validate.finding_counts`` is called on, from now on."""
    import drawopt.validate as validate

    seen: list[Stream] = []
    real = validate.finding_counts

    def counting(stream: Stream, state: Any = None) -> Counter[str]:
        seen.append(stream)
        return real(stream, state)

    monkeypatch.setattr(validate, "finding_counts", counting)
    return seen


def test_a_clean_run_counts_the_findings_of_its_input_and_output_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _count_finding_counts(monkeypatch)
    s = generate("frame", 2000, seed=1)
    pm = PassManager(parse_pipeline(default_pipeline("d3d12")))
    pm.run(s)
    assert sum(r.modified for r in pm.records) >= 4
    assert len(seen) == 2 and seen[0] is s and seen[1] is pm.final


@pytest.mark.parametrize("target", ["d3d12", "xbox-one"])
@pytest.mark.parametrize("kind", ["frame", "gpu-driven"])
def test_no_stream_is_scanned_twice(kind: str, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stream of the pipeline (input, intermediate, output) is scanned at most once: the
    passes and the post-condition share its scan and state table through the analysis manager."""
    real = state_mod.scan
    scanned: list[Stream] = []

    def counting(stream: Stream, pure: bool | None = None) -> Any:
        scanned.append(stream)
        return real(stream, pure)

    for mod in list(sys.modules.values()):  # every module that imported scan by name
        if getattr(mod, "__name__", "").startswith("drawopt") and getattr(mod, "scan", None) is real:
            monkeypatch.setattr(mod, "scan", counting)
    s = generate(kind, 2000, seed=2)
    PassManager(parse_pipeline(default_pipeline(target)), target=target).run(s)
    assert scanned
    counts = Counter(id(x) for x in scanned)
    assert max(counts.values()) == 1, [len(x) for x in scanned]


def test_the_state_table_and_the_scan_give_each_other() -> None:
    s = generate("quads", 16)
    am = AnalysisManager()
    sc = am.get("scan", s)
    table = am.get("state", s)
    assert table.scan is sc and am.computed == {"scan": 1, "state": 1}
    am2 = AnalysisManager()
    table = am2.get("state", s)
    assert am2.get("scan", s) is table.scan and am2.computed == {"state": 1}
    # a pass that keeps the state table keeps its scan
    t = s.take(np.arange(len(s)))
    am2.invalidate(PassResult(t, True, frozenset({"state"})))
    assert am2.cached("scan", t) is table.scan and am2.cached("state", t) is table


def test_a_pinned_streams_analyses_stay_its_own() -> None:
    s = generate("quads", 16)
    am = AnalysisManager()
    table = am.get("state", s)
    am.pin(s)
    am.put("finding_counts", s, Counter())
    t = s.take(np.arange(len(s)))
    am.invalidate(PassResult(t, True, frozenset({"*"})))  # keeps everything, in a cache of its own
    assert am.cached("state", t) is table
    am.put("finding_counts", t, Counter({"no-pipeline": 1}))
    # the passes left s: it keeps its finding counts, not its scan and table (issue 13: memory)
    assert am.cached("finding_counts", s) == Counter() and am.cached("state", s) is None
    assert am.cached("scan", s) is None
    u = t.take(np.arange(len(t)))
    am.invalidate(PassResult(u, True, frozenset()))  # keeps nothing; the pinned input keeps its counts
    assert am.cached("state", u) is None and am.cached("finding_counts", s) == Counter()
    assert am.cached("finding_counts", t) is None  # t is neither pinned nor current
    assert am.get("state", s) is not table and am.cached("state", s) is not None  # recomputed, pinned again


def test_the_inputs_table_is_released_and_the_report_is_unchanged() -> None:
    """Issue 13: mid-pipeline, the input's scan and state table are gone (the peak held them
    with the current stream's); the report tracks the input again and gives the same figures."""
    from drawopt.analysis.state import track
    from drawopt.result import optimize, stream_figures

    s = generate("frame", 400, seed=1)
    res = optimize(s)
    assert res.stream is not s
    assert res._state_of is not None and res._state_of(s) is None  # released by the pass manager
    assert res.report.before == stream_figures(s, "d3d12", "declared")
    assert res.analyses(s).table.rows.shape == track(s).rows.shape


def test_a_fallback_reuses_the_inputs_analyses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-pass re-run starts from the input's state table and finding counts of the
    optimistic run: the input is analysed once."""
    seen = _count_finding_counts(monkeypatch)
    s = S()
    pm = PassManager([DropIndexBufferPass(), *parse_pipeline("dedupe-state")])
    pm.run(s)
    assert pm.records[0].rejected is not None  # the fallback ran
    assert sum(x is s for x in seen) == 1
    assert pm.analyses.computed.get("state", 0) <= 1  # not the input's again (dedupe-state hands its own)
