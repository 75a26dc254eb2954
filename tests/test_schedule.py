"""``schedule``: the list scheduler, the state re-emission and the pass on real streams."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drawopt.analysis.state import compare_effective_state, track
from drawopt.errors import UsageError
from drawopt.gen import generate
from drawopt.ir.stream import StreamBuilder
from drawopt.passes.schedule import Restater, SchedulePass, _rebuild, check_restated, schedule_order
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.stats import compute_stats
from drawopt.validate import findings
from drawopt.verify import verify


def run(stream, reorder="declared", target="d3d12", verify_each=True):
    pm = PassManager(parse_pipeline("schedule"), verify_each=verify_each, reorder=reorder, target=target)
    out = pm.run(stream)
    return out, pm.records[0]


# ---------------------------------------------------------------------- the list scheduler
@st.composite
def dags(draw):
    n = draw(st.integers(1, 40))
    unit = np.sort(np.array(draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))))
    _, unit = np.unique(unit, return_inverse=True)
    nu = int(unit.max()) + 1
    pairs = draw(st.lists(st.tuples(st.integers(0, nu - 1), st.integers(0, nu - 1)), max_size=3 * nu))
    edges = np.array([(a, b) for a, b in pairs if a < b], np.int64).reshape(-1, 2)
    rank = np.array(draw(st.permutations(list(range(n)))), np.int64)
    groups = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64)
    return unit.reshape(-1).astype(np.int64), edges, rank, groups


@settings(max_examples=150, deadline=None)
@given(dags())
def test_schedule_order_is_a_permutation_respecting_every_edge(case) -> None:
    unit, edges, rank, groups = case
    order = schedule_order(rank, unit, edges, [groups])
    assert sorted(order.tolist()) == list(range(unit.size))
    pos = np.empty(unit.size, np.int64)
    pos[order] = np.arange(unit.size)
    for a, b in edges.tolist():
        if (unit == a).any() and (unit == b).any():
            assert pos[unit == a].max() < pos[unit == b].min()


def test_schedule_order_prefers_the_current_group() -> None:
    # five independent units; ranks would alternate groups, stickiness keeps group 0 together
    unit = np.arange(5)
    rank = np.arange(5)
    groups = np.array([0, 1, 0, 1, 0])
    order = schedule_order(rank, unit, np.zeros((0, 2), np.int64), [groups])
    assert order.tolist() == [0, 2, 4, 1, 3]
    # a constraint wins over stickiness: 4 must wait for 1
    order = schedule_order(rank, unit, np.array([[1, 4]]), [groups])
    assert order.tolist() == [0, 2, 1, 3, 4]


# ---------------------------------------------------------------------- the restater
@pytest.mark.parametrize("kind,n", [("quads", 200), ("frame", 1500), ("gpu-driven", 800), ("bundle", 400)])
def test_restater_in_input_order_reproduces_every_state(kind: str, n: int) -> None:
    s = generate(kind, n, seed=11)
    t = track(s)
    draws = t.draws.astype(np.int64)
    ident = np.arange(draws.size)
    out, kept = _rebuild(s, t, draws, ident.copy(), ident, ident, ident + 1)
    assert out is not None and kept == 0
    assert check_restated(s, out, ident, t) is None
    assert compare_effective_state(s, out) is None
    assert compute_stats(out)["state_changes"] <= compute_stats(s)["state_changes"]


def _partial_constants() -> StreamBuilder:
    """Order-independent draws whose root constants are built by partial updates."""
    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.rootsig("r", "constants(4)")
    b.pipeline("p", vs="v", ps="p", blend="additive", root="r", contract="order_independent")
    b.pipeline("q", vs="v", ps="q", blend="additive", root="r", contract="order_independent")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("r")
    b.SetGraphicsRoot32BitConstants(0, 4, 1, 2, 3, 4)
    for i, p in enumerate("pqpqpq"):
        b.SetPipelineState(p)
        b.SetGraphicsRoot32BitConstants(0, 1, 10 + (i % 3), dest=2)  # word 2 only
        b.DrawInstanced(3, 1, 3 * i, 0)
    return b


def test_partial_root_constant_updates_are_recreated_exactly() -> None:
    s = _partial_constants().build()
    out, rec = run(s)
    assert rec.report["moved"] > 0
    assert verify(s, out, reorder="declared").equivalent
    names = [c.name for c in out.commands()]
    assert names.count("SetPipelineState") == 2  # grouped by pipeline


# A bundle inherits its root arguments (unknown). Root parameter 0 is first a root view, so
# the constants written over it start a fresh chain: every word defined, and defined past
# them. Copying the constants alone over the inherited value leaves a partial update of an
# unknown value instead (found by the random-stream tests: the self-check caught it and the
# pass kept its input, even in input order).
_FULL_CONSTANTS_AFTER_A_VIEW = """\
drawopt 1 context=graphics kind=bundle
buffer   cb size=256
rootsig  r constants(2)
pipeline p vs=v ps=p blend=additive root=r contract=order_independent
pipeline q vs=v ps=q blend=additive root=r contract=order_independent

SetGraphicsRootConstantBufferView 0 cb 0
SetGraphicsRoot32BitConstants 0 2 1 2
SetPipelineState p
DrawInstanced 3 1 0 0
SetPipelineState q
DrawInstanced 3 1 3 0
SetPipelineState p
DrawInstanced 3 1 6 0
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_constants_written_in_full_over_an_unknown_value_are_restarted(monkeypatch, pure: str) -> None:
    from drawopt.ir.formats import loads
    if pure == "0":
        _compiled_schedule_kernel()
    monkeypatch.setenv("DRAWOPT_PURE", pure)
    s = loads(_FULL_CONSTANTS_AFTER_A_VIEW)
    t = track(s)
    draws = t.draws.astype(np.int64)
    for order in ([0, 1, 2], [0, 2, 1], [1, 0, 2]):
        new = np.array(order)
        out, kept = _rebuild(s, t, draws, new, np.zeros(3, np.int64), np.array([0]), np.array([3]))
        assert out is not None and kept == 0 and new.tolist() == order
        assert check_restated(s, out, new, t) is None
    out, rec = run(s)
    assert rec.report["moved"] == 2 and "fallback" not in rec.report
    assert verify(s, out, reorder="declared").equivalent
    names = [c.name for c in out.commands()]
    # the view is copied again before the constants (nothing reads it: it only resets the chain)
    assert names[:4] == ["SetPipelineState", "SetGraphicsRootConstantBufferView", "SetGraphicsRoot32BitConstants",
                         "DrawInstanced"]
    assert names.count("SetPipelineState") == 3 and names.count("SetGraphicsRoot32BitConstants") == 1


def test_a_heap_change_never_leaves_a_table_undefined() -> None:
    b = StreamBuilder()
    b.texture("a", 4, 4, "R8G8B8A8_UNORM")
    b.texture("c", 4, 4, "R8G8B8A8_UNORM")
    b.target("rt", 64, 64)
    b.heap("h1", size=4)
    b.heap("h2", size=4)
    b.view("h1", 0, "srv", "a")
    b.view("h2", 0, "srv", "c")
    b.rootsig("r", "table(srv,1)", "table(srv,1)")
    b.pipeline("p", vs="v", ps="p", blend="additive", root="r", contract="order_independent")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("r")
    b.SetPipelineState("p")
    for i in range(6):
        h = "h1" if i % 2 == 0 else "h2"
        b.SetDescriptorHeaps(h)
        b.SetGraphicsRootDescriptorTable(0, f"{h}[0]")
        b.SetGraphicsRootDescriptorTable(1, f"{h}[0]")
        b.DrawInstanced(3, 1, 3 * i, 0)
    s = b.build()
    out, rec = run(s)
    assert rec.report["moved"] > 0
    assert not [f for f in findings(out) if f.rule == "table-undefined"]
    assert [c.name for c in out.commands()].count("SetDescriptorHeaps") == 2


def test_blended_draws_and_reorder_none_do_not_move() -> None:
    s = generate("frame", 800, seed=3)
    out, rec = run(s, reorder="none")
    assert out is s and rec.report["moved"] == 0
    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.pipeline("a", vs="v", ps="a", blend="alpha")
    b.pipeline("b", vs="v", ps="b", blend="alpha")
    b.OMSetRenderTargets("rt")
    for i, p in enumerate("abab"):
        b.SetPipelineState(p)
        b.DrawInstanced(3, 1, 3 * i, 0)
    s = b.build()
    out, rec = run(s, reorder="opaque")
    assert rec.report["moved"] == 0 and out is s


def test_nomerge_draw_is_a_barrier() -> None:
    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.pipeline("a", vs="v", ps="a", blend="additive", contract="order_independent")
    b.pipeline("b", vs="v", ps="b", blend="additive", contract="order_independent")
    b.OMSetRenderTargets("rt")
    for i, p in enumerate("abab"):
        b.SetPipelineState(p)
        b.DrawInstanced(3, 1, 3 * i, 0, flags="nomerge" if i == 2 else 0)
    for i, p in enumerate("ba"):
        b.SetPipelineState(p)
        b.DrawInstanced(3, 1, 100 + 3 * i, 0)
    s = b.build()
    out, _ = run(s)
    starts = [int(c.args[2]) for c in out.commands() if c.name == "DrawInstanced"]
    pinned = starts.index(6)
    assert sorted(starts[:pinned]) == [0, 3] and starts[pinned] == 6
    assert sorted(starts[pinned + 1:]) == [9, 100, 103]


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_schedule_verifies_on_generated_streams(kind: str) -> None:
    s = generate(kind, 700, seed=2)
    out, rec = run(s, reorder="declared")
    assert "fallback" not in rec.report
    assert compute_stats(out)["draw_calls"] == compute_stats(s)["draw_calls"]


def test_schedule_opaque_on_gpu_driven_verifies() -> None:
    s = generate("gpu-driven", 900, seed=4)
    out, rec = run(s, reorder="opaque")
    assert rec.report["moved"] > 0 and "fallback" not in rec.report


def test_bundle_with_inherited_state_keeps_its_order_when_it_must() -> None:
    s = generate("bundle", 300, seed=7)
    out, rec = run(s, reorder="opaque")
    # either the draws moved and the bundle verifies, or the pass kept the input
    assert out is s or verify(s, out, reorder="opaque").equivalent
    assert rec.report.get("fallback", "").startswith("the input state") or "fallback" not in rec.report


def test_target_and_policy_are_pipeline_context_not_options() -> None:
    # the pipeline's context decides; a pass-level policy could exceed the run's (issue 13)
    for opt in ("reorder=opaque", "target=xbox-one"):
        with pytest.raises(UsageError, match=f"unknown option '{opt}'"):
            parse_pipeline(f"schedule{{{opt}}}")
    with pytest.raises(UsageError, match="unknown target"):
        PassManager([SchedulePass()], target="ps5")
    with pytest.raises(UsageError, match="unknown reorder policy"):
        PassManager([SchedulePass()], reorder="random")


def test_restater_rollback() -> None:
    s = _partial_constants().build()
    t = track(s)
    rs = Restater(s, t)
    m = rs.mark()
    for c in t.draws[:3].tolist():
        rs.emit(int(c))
    assert len(rs.out) > 3
    rs.rollback(m)
    assert rs.out == [] and len(rs.synth) == 0


# ---------------------------------------------------------------------- chains: no graph needed
def test_a_stream_that_cannot_reorder_builds_no_graph(monkeypatch) -> None:
    import drawopt.analysis.graph as graph_mod
    s = generate("quads", 3000, seed=1)  # one blended pipeline on one target: a chain

    def boom(*a, **k):
        raise AssertionError("the dependency graph was built")

    import drawopt.passes.schedule as sched_mod
    monkeypatch.setattr(graph_mod, "build_graph", boom)
    monkeypatch.setattr(graph_mod, "hazard_graph", boom)
    monkeypatch.setattr(sched_mod, "hazard_graph_within", boom)
    out, rec = run(s, verify_each=False)
    assert out is s and rec.report == {"draws": 3000, "moved": 0, "segments": 1, "kept_order": 0, "parts": 0}
    # a stream that can reorder still needs the graph
    with pytest.raises(Exception, match="was built"):
        run(generate("frame", 300, seed=1), verify_each=False)


@pytest.mark.parametrize("kind,seed", [("frame", 1), ("gpu-driven", 3), ("bundle", 4), ("frame", 5)])
@pytest.mark.parametrize("reorder", ["declared", "opaque"])
@pytest.mark.parametrize("how", ["margins", "prefix"])
def test_the_graph_of_the_free_segments_schedules_as_the_whole_graph(kind: str, seed: int, reorder: str, how: str,
                                                                     monkeypatch) -> None:
    """The pass builds the graph of the segments that can reorder only (hazard_graph_within, with
    context margins, or one range of the prefix when there are many); its output is the one the
    whole stream's graph gives (the oracle: every range's graph replaced by the whole graph)."""
    import drawopt.analysis.graph as gm
    import drawopt.passes.schedule as sched_mod
    s = generate(kind, 1500, seed=seed)
    monkeypatch.setattr(gm, "_CONTEXT_MARGINS", (0, 2, 40))  # small margins: the context check decides
    if how == "prefix":
        monkeypatch.setattr(sched_mod, "_RANGE_LIMIT", 0)
    got = SchedulePass().apply(s, _am(reorder))
    calls = []

    def whole(stream, pol, ranges):
        calls.append(len(ranges))
        return [gm.hazard_graph(stream, pol)] * len(ranges)

    monkeypatch.setattr(sched_mod, "hazard_graph_within", whole)
    want = SchedulePass().apply(s, _am(reorder))
    assert got.report == want.report and got.stream == want.stream
    assert calls, "no segment could reorder: the test tests nothing"


def _am(reorder: str):
    from drawopt.passmanager import AnalysisManager, PipelineContext
    return AnalysisManager(PipelineContext("d3d12", reorder))


@pytest.mark.parametrize("kind,seed", [("frame", 1), ("quads", 2), ("gpu-driven", 3), ("bundle", 4), ("frame", 5)])
@pytest.mark.parametrize("reorder", ["declared", "opaque"])
def test_ordered_chains_agree_with_the_graph(kind: str, seed: int, reorder: str) -> None:
    """Where the cheap test says a segment is a chain, the graph makes every draw a part of its own."""
    from drawopt.analysis.graph import build_graph, ordered_chains
    from drawopt.analysis.lowerbound import draw_parts, segment_units
    from drawopt.analysis.mergeclass import draw_segments
    from drawopt.passes.schedule import _draw_pipes
    s = generate(kind, 600, seed=seed)
    t = track(s)
    draws = t.draws.astype(np.int64)
    pipe, pinned = _draw_pipes(s, t)
    from types import SimpleNamespace
    seg = draw_segments(s, SimpleNamespace(cmd=draws, pipe=pipe, pinned=pinned))
    chained = ordered_chains(s, t, pipe, seg, reorder)
    unit, edges = segment_units(build_graph(s, reorder=reorder), draws, seg)
    part = draw_parts(unit, edges, seg)
    starts = np.r_[0, np.flatnonzero(np.diff(seg)) + 1]
    for a in starts[chained[starts]].tolist():
        b = a + int(np.count_nonzero(seg == seg[a]))
        assert np.unique(part[a:b]).size == b - a, f"segment at draw {a} is not a chain in the graph"
    if kind == "quads":
        assert chained.all()


def test_schedule_pure_and_compiled_agree(monkeypatch) -> None:
    s = generate("frame", 2500, seed=6)
    outs = []
    for pure in ("0", "1"):
        monkeypatch.setenv("DRAWOPT_PURE", pure)
        out, rec = run(s, verify_each=False)
        outs.append((out, rec.report))
    assert outs[0][1] == outs[1][1] and outs[0][1]["moved"] > 0
    assert outs[0][0] == outs[1][0]


# ---------------------------------------------------------------------- fast paths vs references
def _segments(s):
    """Draw commands, segments and segment bounds of ``s`` as the pass computes them."""
    from types import SimpleNamespace

    from drawopt.analysis.mergeclass import draw_segments
    from drawopt.passes.schedule import _draw_pipes
    t = track(s)
    draws = t.draws.astype(np.int64)
    pipe, pinned = _draw_pipes(s, t)
    seg = draw_segments(s, SimpleNamespace(cmd=draws, pipe=pipe, pinned=pinned))
    bounds = np.flatnonzero(np.diff(seg)) + 1
    return t, draws, seg, np.r_[0, bounds], np.r_[bounds, draws.size]


def _shuffled(starts, ends, rng) -> np.ndarray:
    new = np.arange(int(ends[-1]) if ends.size else 0)
    for a, b in zip(starts.tolist(), ends.tolist()):
        if b - a > 1 and rng.random() < 0.8:
            new[a:b] = a + rng.permutation(b - a)
    return new


def _reference_rebuild(s, t, draws, new, starts, ends):
    """The restatement walk the pass did before it was vectorised: every non-state command in
    input order, each segment's draws emitted where its first draw was (one command at a time,
    pure Python), a segment that cannot be re-created in the new order kept in input order."""
    from drawopt.ir.ops import BY_NAME, Cat
    from drawopt.passes.schedule import CannotRestate
    rs = Restater(s, t, pure=True)
    cats = s.cats()
    keep = s.op == BY_NAME["CSEnableAutomaticGpuFlush"].code
    nonstate = np.flatnonzero((cats != int(Cat.STATE)) | keep)
    pos = {int(c): i for i, c in enumerate(draws.tolist())}
    span = {int(a): (int(a), int(b)) for a, b in zip(starts.tolist(), ends.tolist())}
    new = new.copy()
    kept = 0
    try:
        for c in nonstate.tolist():
            if cats[c] != int(Cat.DRAW):
                rs.emit(c)
                continue
            sp = span.get(pos[c])
            if sp is None:
                continue
            a, b = sp
            m = rs.mark()
            try:
                for j in new[a:b].tolist():
                    rs.emit(int(draws[j]))
            except CannotRestate:
                rs.rollback(m)
                kept += 1
                new[a:b] = np.arange(a, b)
                for j in range(a, b):
                    rs.emit(int(draws[j]))
        rs.finish()
    except CannotRestate:
        return None, kept, new
    return rs.build(), kept, new


def _compiled_schedule_kernel() -> None:
    from drawopt._accel import load_cext
    if load_cext("_schedule", pure=False) is None:  # pragma: no cover - extension not built
        pytest.skip("drawopt._schedule is not built")


def _same_stream(a, b) -> bool:
    return a is None and b is None or (a is not None and b is not None and a == b
                                       and np.array_equal(a.op, b.op) and np.array_equal(a.args, b.args)
                                       and np.array_equal(a.pool, b.pool) and np.array_equal(a.var_len, b.var_len))


def _check_rebuild_and_restated(s, seed: int) -> tuple[int, bool]:
    """_rebuild (compiled and pure) against the reference walk for a random in-segment order, and
    check_restated's fast path and its decoding of every pair: both find the restatement right,
    and the same first difference for a wrong permutation; returns (segments kept, failed)."""
    from drawopt.passes.schedule import check_restated
    t, draws, seg, starts, ends = _segments(s)
    if not draws.size:
        return 0, False
    rng = np.random.default_rng(seed)
    new = _shuffled(starts, ends, rng)
    ref, ref_kept, ref_new = _reference_rebuild(s, t, draws, new, starts, ends)
    for pure in (True, False):
        nw = new.copy()
        out, kept = _rebuild(s, t, draws, nw, seg, starts, ends, pure=pure)
        assert _same_stream(out, ref)
        if ref is not None:  # (with no result the pass keeps its input: the count does not matter)
            assert kept == ref_kept and np.array_equal(nw, ref_new)
    if ref is None:
        return ref_kept, True
    # the restatement is right (the self-check never has to catch a mistake), on random streams too,
    # except where a root argument may still hold a value across a root signature or heaps change from
    # an unknown one: the restatement does not re-create those, the self-check makes the pass keep its input
    from drawopt.passes.schedule import _unknown_resets
    if _unknown_resets(t.scan):
        msg = check_restated(s, ref, ref_new, t)
        assert msg is None or "may still hold" in msg, msg
        return ref_kept, False
    assert check_restated(s, ref, ref_new, t) is None
    assert check_restated(s, ref, ref_new, t, decode_all=True) is None
    # a wrong permutation: the two checks report the same first difference
    if draws.size > 1:
        bad = ref_new.copy()
        i, j = rng.choice(draws.size, 2, replace=False)
        bad[i], bad[j] = bad[j], bad[i]
        assert check_restated(s, ref, bad, t) == check_restated(s, ref, bad, t, decode_all=True)
    return ref_kept, False


@pytest.mark.parametrize("kind,n", [("frame", 1200), ("gpu-driven", 700), ("bundle", 400), ("quads", 200)])
@pytest.mark.parametrize("seed", [0, 1])
def test_rebuild_and_check_match_their_references_on_generated_streams(kind: str, n: int, seed: int) -> None:
    _compiled_schedule_kernel()
    _check_rebuild_and_restated(generate(kind, n, seed=seed + 3), seed)


def test_rebuild_matches_its_reference_on_hand_made_streams() -> None:
    from drawopt.ir.formats import loads
    _compiled_schedule_kernel()
    for s in (_partial_constants().build(), loads(_FULL_CONSTANTS_AFTER_A_VIEW)):
        for seed in range(6):
            assert _check_rebuild_and_restated(s, seed) == (0, False)


def test_rebuild_keeps_a_segment_in_input_order_when_it_must() -> None:
    """A draw that read an undefined table cannot come after the draw that sets it: the segment
    is kept in input order, by the vectorised rebuild as by the reference walk."""
    _compiled_schedule_kernel()
    b = StreamBuilder()
    b.texture("a", 4, 4, "R8G8B8A8_UNORM")
    b.target("rt", 64, 64)
    b.heap("h", size=4)
    b.view("h", 0, "srv", "a")
    b.rootsig("r", "table(srv,1)")
    b.pipeline("p", vs="v", ps="p", blend="additive", root="r", contract="order_independent")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("r")
    b.SetPipelineState("p")
    b.SetDescriptorHeaps("h")
    b.DrawInstanced(3, 1, 0, 0)  # reads root parameter 0 undefined
    b.SetGraphicsRootDescriptorTable(0, "h[0]")
    b.DrawInstanced(3, 1, 3, 0)
    s = b.build()
    t, draws, seg, starts, ends = _segments(s)
    new = np.array([1, 0])
    ref, ref_kept, ref_new = _reference_rebuild(s, t, draws, new, starts, ends)
    assert ref is not None and ref_kept == 1 and ref_new.tolist() == [0, 1]
    for pure in (True, False):
        nw = new.copy()
        out, kept = _rebuild(s, t, draws, nw, seg, starts, ends, pure=pure)
        assert _same_stream(out, ref) and kept == 1 and nw.tolist() == [0, 1]


try:
    from strategies import streams
except ImportError:  # pragma: no cover
    streams = None


@pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")
@settings(max_examples=120, deadline=None)
@given(streams(max_commands=60) if streams is not None else st.nothing(), st.integers(0, 2**16))
def test_rebuild_and_check_match_their_references_on_random_streams(s, seed: int) -> None:
    _compiled_schedule_kernel()
    _check_rebuild_and_restated(s, seed)


def test_restater_compiled_and_pure_agree_step_by_step() -> None:
    """emit_all (compiled) and emit one command at a time (pure) leave the same output, the
    same state in force and raise the same errors, chunk after chunk, with rollbacks."""
    from drawopt.ir.ops import Cat
    from drawopt.passes.schedule import CannotRestate, OutBuffer
    _compiled_schedule_kernel()
    for kind, n, seed in (("frame", 600, 1), ("bundle", 300, 2), ("gpu-driven", 500, 3)):
        s = generate(kind, n, seed=seed)
        t = track(s)
        rng = np.random.default_rng(seed)
        cmds = np.flatnonzero(s.cats() != int(Cat.STATE))
        d = np.flatnonzero(s.cats()[cmds] == int(Cat.DRAW))
        for lo in range(0, d.size, 7):  # draws shuffled in small windows
            w = d[lo:lo + 7]
            cmds[w] = cmds[rng.permutation(w)]
        rp, rc = Restater(s, t, pure=True), Restater(s, t, pure=False)
        rc.out = OutBuffer(16)  # the compiled loop grows its output buffer as it goes
        errors = 0
        pos = 0
        while pos < cmds.size:
            step = int(rng.integers(1, 40))
            chunk = cmds[pos:pos + step]
            pos += step
            marks = rp.mark(), rc.mark()
            got = []
            for rs in (rp, rc):
                try:
                    rs.emit_all(chunk)
                    got.append(None)
                except CannotRestate as e:
                    got.append(str(e))
            assert got[0] == got[1]
            assert rp.out == rc.out and rp.emitted_state == rc.emitted_state and rp.last == rc.last
            assert list(rp.inforce) == list(rc.inforce) and [bool(x) for x in rp.is_table] == \
                [bool(x) for x in rc.is_table]
            assert rp.synth.op == rc.synth.op and rp.synth.args == rc.synth.args
            if got[0] is not None:
                errors += 1
                rp.rollback(marks[0])
                rc.rollback(marks[1])
        assert rp.build() == rc.build()


def test_check_restated_catches_a_corrupted_restatement() -> None:
    """The self-check finds a wrong state in the output, whichever slot it is in, with the fast
    path (content ids) and by decoding every value alike."""
    import drawopt.passes.schedule as sched  # the module the pass manager runs
    from drawopt.ir.ops import BY_NAME
    from drawopt.ir.stream import concat
    from drawopt.passes.schedule import check_restated
    s = generate("frame", 1500, seed=6)
    seen = {}
    real = sched.check_restated

    def spy(before, after, perm, table=None, **kw):
        seen["perm"] = perm.copy()
        return real(before, after, perm, table, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(sched, "check_restated", spy)
    try:
        out, rec = run(s, verify_each=False)
    finally:
        mp.undo()
    assert rec.report["moved"] > 0 and "fallback" not in rec.report
    t = track(s)
    perm = seen["perm"]
    assert check_restated(s, out, perm, t) is None
    assert check_restated(s, out, perm, t, decode_all=True) is None
    checked = 0
    for name, col in (("SetPipelineState", 0), ("SetGraphicsRootDescriptorTable", 1),
                      ("SetGraphicsRootConstantBufferView", 2), ("IASetIndexBuffer", 2), ("RSSetScissorRects", 2)):
        where = np.flatnonzero(out.op == BY_NAME[name].code)
        if not where.size:
            continue
        bad = concat([out], out.header, out.decls, out.strings)
        bad.args = bad.args.copy()
        c = int(where[where.size // 2])
        other = np.flatnonzero(bad.args[where, col] != bad.args[c, col])
        bad.args[c, col] = bad.args[where[other[0]], col] if other.size else bad.args[c, col] + 1
        got = check_restated(s, bad, perm, t)
        assert got is not None and got == check_restated(s, bad, perm, t, decode_all=True), name
        checked += 1
    # a variadic tail (render targets, heaps: content ids from the command's tail): one render
    # target replaced by another (a different value), the two heaps swapped (the same value: the
    # contents differ, so the pair is decoded and found equal)
    caught = 0
    for c in np.flatnonzero(out.op == BY_NAME["OMSetRenderTargets"].code).tolist():
        bad = concat([out], out.header, out.decls, out.strings)
        bad.pool = bad.pool.copy()
        p0 = int(bad.var_off[c])
        bad.pool[p0] = 15 if int(bad.pool[p0]) != 15 else 14  # frame: targets hdr (14) and ui (15)
        got = check_restated(s, bad, perm, t)
        assert got == check_restated(s, bad, perm, t, decode_all=True)
        caught += got is not None and "render_targets" in got
    assert caught >= 1
    heaps = np.flatnonzero(out.op == BY_NAME["SetDescriptorHeaps"].code)
    assert heaps.size and all(int(out.var_len[h]) == 2 for h in heaps.tolist())
    bad = concat([out], out.header, out.decls, out.strings)
    bad.pool = bad.pool.copy()
    for h in heaps.tolist():
        p0 = int(bad.var_off[h])
        bad.pool[p0:p0 + 2] = bad.pool[p0:p0 + 2][::-1].copy()
    assert check_restated(s, bad, perm, t) is None and check_restated(s, bad, perm, t, decode_all=True) is None
    # root constants: one word of one command changed
    cc = np.flatnonzero(out.op == BY_NAME["SetGraphicsRoot32BitConstants"].code)
    bad = concat([out], out.header, out.decls, out.strings)
    bad.pool = bad.pool.copy()
    bad.pool[int(bad.var_off[cc[cc.size // 2]])] += 1
    got = check_restated(s, bad, perm, t)
    assert got is not None and "root" in got and got == check_restated(s, bad, perm, t, decode_all=True)
    # a setter dropped
    keep = np.ones(len(out), bool)
    keep[int(np.flatnonzero(out.op == BY_NAME["SetPipelineState"].code)[3])] = False
    bad = out.take(np.flatnonzero(keep))
    got = check_restated(s, bad, perm, t)
    assert got is not None and got == check_restated(s, bad, perm, t, decode_all=True)
    assert checked >= 3


def test_a_failed_self_check_leaves_the_stream_unchanged(monkeypatch) -> None:
    """The pass keeps its input when the self-check finds a difference (here a restater that
    sometimes believes it set the pipeline without emitting the command)."""
    import drawopt.passes.schedule as sched  # the module the pass manager runs
    from drawopt.analysis.state import PIPELINE
    s = generate("frame", 800, seed=4)
    monkeypatch.setattr(sched, "load_cext", lambda name, pure=None: None)  # the pure loop, patched below
    real = sched.Restater._set
    calls = [0]

    def forgetful(self, o, k, v):
        calls[0] += 1
        if k == PIPELINE and calls[0] % 3 == 0:
            self.inforce[k] = v  # claims the value without emitting its setter
            return False
        return real(self, o, k, v)

    monkeypatch.setattr(sched.Restater, "_set", forgetful)
    out, rec = run(s, verify_each=False)
    assert out is s and rec.report["fallback"].startswith("self-check failed (draw ")
    assert "pipeline" in rec.report["fallback"]


def test_first_seen_rank_lookup_and_sort_paths_agree() -> None:
    from drawopt.passes.schedule import _first_seen_rank
    rng = np.random.default_rng(2)
    for span in (3, 100, 10**6, 2**40):
        col = rng.integers(-3, span, 3000)
        got = _first_seen_rank(col)
        seen: dict[int, int] = {}
        want = [seen.setdefault(int(x), len(seen)) for x in col.tolist()]
        assert got.tolist() == want
        # values placed at distinct positions of a longer sequence: ranked in position order
        at = rng.choice(5000, col.size, replace=False)
        seen = {}
        rank = {}
        for i in np.argsort(at).tolist():
            rank[i] = seen.setdefault(int(col[i]), len(seen))
        assert _first_seen_rank(col, at, 5000).tolist() == [rank[i] for i in range(col.size)]
        # positions in sequence order (states in first-appearance order): ranked as they come
        at = np.sort(at)
        assert _first_seen_rank(col, at, 5000).tolist() == want


def test_sort_key_kernels_agree_with_their_pure_twins() -> None:
    from drawopt._accel import load_cext
    from drawopt.passes.schedule import _key_columns_py, _stable_rank_py
    k = load_cext("_schedule", pure=False)
    if k is None:  # pragma: no cover - extension not built
        pytest.skip("drawopt._schedule is not built")
    rng = np.random.default_rng(5)
    rows = rng.integers(-3, 2**31 - 1, (5000, 45))
    cols = np.array([3, 0, 44, 7, 7], np.int64)
    for sel in (None, rng.choice(5000, 1234, replace=False), np.zeros(0, np.int64)):
        got, want = k.key_columns(rows, sel, cols), _key_columns_py(rows, sel, cols)
        assert got.dtype == want.dtype == np.int32 and np.array_equal(got, want)
        assert np.array_equal(want, (rows if sel is None else rows[sel])[:, cols].T.astype(np.int32))
        # a state table's int32 rows (read in place) give the same
        assert np.array_equal(k.key_columns(rows.astype(np.int32), sel, cols), want)
    with pytest.raises(IndexError):
        k.key_columns(rows, np.array([5000]), cols)
    for n, nkeys in ((0, 1), (1, 1), (7000, 3), (7000, 5000)):
        key = rng.integers(0, nkeys, n)
        got, want = k.stable_rank(key, nkeys), _stable_rank_py(key, nkeys)
        assert np.array_equal(got, want)
        assert np.array_equal(np.sort(got), np.arange(n))  # a permutation (stable: equal to the twin)
    with pytest.raises(IndexError):
        k.stable_rank(np.array([0, 3]), 3)


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_sort_keys_pure_and_compiled_agree(kind: str) -> None:
    from drawopt.passes.schedule import sort_keys
    s = generate(kind, 3000, seed=4)
    t = track(s)
    got, want = sort_keys(s, t, pure=False), sort_keys(s, t, pure=True)
    assert np.array_equal(got, want) and np.array_equal(np.sort(got), np.arange(got.shape[0]))


def test_out_buffer_behaves_like_the_list_it_replaces() -> None:
    from drawopt.passes.schedule import OutBuffer
    out, ref = OutBuffer(16), []
    for k in range(100):
        out.append(k)
        ref.append(k)
        if k % 7 == 0:
            out.extend(np.arange(k, k + 30))
            ref.extend(range(k, k + 30))
        if k % 11 == 0:
            out.truncate(len(ref) - 5)
            del ref[len(ref) - 5:]
    assert out == ref and len(out) == len(ref) and out.array().dtype == np.int64
    assert OutBuffer() == [] and not (out == OutBuffer(4))


def test_check_restated_compares_the_exit_state_of_a_bundle() -> None:
    """A bundle hands its final state to the caller: a restatement that drops or changes a
    trailing set (after the last draw) is wrong even though every draw sees its state; in a
    list the same output is fine (issue 12 item 5)."""
    from drawopt.ir.formats import loads
    from drawopt.passes.schedule import check_restated
    text = """drawopt 1 context=graphics kind={kind}
target rt 64x64 R8G8B8A8_UNORM
rootsig main constants(2)
pipeline a vs=v ps=f blend=alpha root=main params=0
OMSetRenderTargets rt
SetGraphicsRootSignature main
SetPipelineState a
SetGraphicsRoot32BitConstants 0 2 1 2
DrawInstanced 3 1 0 0
SetGraphicsRoot32BitConstants 0 1 9
"""
    for kind, ok in (("list", True), ("bundle", False)):
        s = loads(text.format(kind=kind))
        ident = np.arange(1, dtype=np.int64)
        assert check_restated(s, s, ident) is None
        for bad in (s.take(list(range(len(s) - 1))), s.take(list(range(len(s) - 1)) + [3])):
            got = check_restated(s, bad, ident)
            assert (got is None) == ok, (kind, got)
            if not ok:
                assert got.startswith("end of bundle: root"), got


def test_passes_hand_the_state_of_their_output_to_the_pipeline() -> None:
    """dedupe-state's last round and schedule's self-check scan the stream they return: the
    pipeline takes that stream's state table from them (the same table track would build)
    instead of scanning it again for the post-condition and the next pass."""
    from test_state import assert_same_tables
    s = generate("frame", 3000, seed=2)
    pm = PassManager(parse_pipeline("dedupe-state,schedule"))
    out = pm.run(s)
    assert [r.modified for r in pm.records] == [True, True]
    assert pm.analyses.computed == {"scan": 1}  # the input's scan only (the post-condition reads no more of it)
    assert_same_tables(pm.analyses.cached("state", pm.final), track(pm.final))
    assert verify(s, out).equivalent


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_sort_keys_of_some_draws_order_them_as_the_whole_key(kind: str) -> None:
    """``need``: the draws selected are ranked 0..k-1 in the order the key of every draw gives
    them (first appearance still along the whole stream); the others keep their index."""
    from drawopt.passes.schedule import sort_keys
    s = generate(kind, 3000, seed=4)
    t = track(s)
    full = sort_keys(s, t)
    d = full.shape[0]
    rng = np.random.default_rng(3)
    for frac in (0.0, 0.05, 0.5, 1.0):
        need = rng.random(d) < frac
        for pure in (False, True):
            got = sort_keys(s, t, pure=pure, need=need)
            assert np.array_equal(got[~need], np.flatnonzero(~need))
            assert np.array_equal(np.argsort(got[need]), np.argsort(full[need]))
            assert np.array_equal(np.sort(got[need]), np.arange(int(need.sum())))


HELD_AT_OPAQUE = """drawopt 1 context=graphics kind=bundle fast_semantics=off auto_gpu_flush=off
buffer   buf   size=256
rootsig  rs5   constants(1) cbv
pipeline oi    vs=v ps=p contract=order_independent
pipeline oj    vs=v ps=q contract=order_independent

SetGraphicsRootConstantBufferView 1 buf 0
SetGraphicsRootSignature rs5
SetPipelineState oi
DrawInstanced 3 1 0 0
SetPipelineState oj
DrawInstanced 3 1 0 0
SetPipelineState oi
DrawInstanced 3 1 0 0
Opaque x
"""


def test_a_value_an_opaque_command_may_still_see_is_not_dropped() -> None:
    """A bundle's root view set before its first root signature may still hold there (if that is the
    caller's), and the Opaque command may read it. The restated output dropped the set (no draw reads
    it): the verifier rejects that (state at Opaque commands, test_verify_held_state), and now the
    pass's self-check does too, so the pass keeps its input (found by test_optimize_props)."""
    from drawopt.ir import formats

    s = formats.loads(HELD_AT_OPAQUE)
    res = SchedulePass().apply(s, _am("declared"))
    assert "self-check failed (Opaque command #0: root1 may still hold" in res.report["fallback"]
    assert verify(s, res.stream).equivalent


def test_decoded_differ_keys_int32_rows_in_64_bits() -> None:
    """A state table's rows are int32 (session 12): the pair key ``(a + 3) << 32 | (b + 3)`` of a
    value meeting two others lost ``a`` in 32 bits, so schedule's self-check took pipeline 'p'
    against '<unknown>' for '<unknown>' against '<unknown>' and missed the difference (a random
    stream and a wrong permutation, session 14: the fast path and the decode-all reference
    reported different first differences)."""
    from drawopt.passes.schedule import _decoded_differ
    dec = {0: "p", 1: "q", -3: "<unknown>"}.get
    for dt in (np.int32, np.int64):
        a, b = np.array([0, 0, -3, 1], dt), np.array([0, -3, 0, 1], dt)
        assert _decoded_differ(a, b, dec, dec).tolist() == [False, True, True, False]
