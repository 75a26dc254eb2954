"""``schedule``: the list scheduler, the state re-emission and the pass on real streams."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drawopt.errors import UsageError
from drawopt.gen import generate
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.state import compare_effective_state, track
from drawopt.stats import compute_stats
from drawopt.stream import StreamBuilder
from drawopt.validate import findings
from drawopt.verify import verify
from passes.schedule import Restater, SchedulePass, _rebuild, check_restated, schedule_order


def run(stream, reorder="declared", target="d3d12", verify_each=True):
    pm = PassManager(parse_pipeline("schedule", reorder=reorder, target=target), verify_each=verify_each,
                     reorder=reorder)
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


def test_options_are_checked() -> None:
    with pytest.raises(UsageError, match="reorder must be one of"):
        SchedulePass(reorder="random")
    with pytest.raises(UsageError, match="unknown target"):
        SchedulePass(target="ps5")


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
    import drawopt.graph as graph_mod
    s = generate("quads", 3000, seed=1)  # one blended pipeline on one target: a chain

    def boom(*a, **k):
        raise AssertionError("the dependency graph was built")

    monkeypatch.setattr(graph_mod, "build_graph", boom)
    out, rec = run(s, verify_each=False)
    assert out is s and rec.report == {"draws": 3000, "moved": 0, "segments": 1, "kept_order": 0, "parts": 0}
    # a stream that can reorder still needs the graph
    with pytest.raises(Exception, match="was built"):
        run(generate("frame", 300, seed=1), verify_each=False)


@pytest.mark.parametrize("kind,seed", [("frame", 1), ("quads", 2), ("gpu-driven", 3), ("bundle", 4), ("frame", 5)])
@pytest.mark.parametrize("reorder", ["declared", "opaque"])
def test_ordered_chains_agree_with_the_graph(kind: str, seed: int, reorder: str) -> None:
    """Where the cheap test says a segment is a chain, the graph makes every draw a part of its own."""
    from drawopt.graph import build_graph, ordered_chains
    from drawopt.mergeclass import draw_parts, draw_segments, segment_units
    from passes.schedule import _draw_pipes
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
