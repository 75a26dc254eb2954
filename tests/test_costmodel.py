"""The per-target cost model, the default pipeline, the lower bound and the report figures."""

from __future__ import annotations

import numpy as np
import pytest

from drawopt.analysis.costmodel import (
    MODELS,
    PIPELINE_ORDER,
    TARGETS,
    cost_by_command,
    default_pipeline,
    estimate_cpu_cost,
    get_target,
    mdi_min_batch,
    pack_x_pays_off,
)
from drawopt.analysis.lowerbound import cut_units, lower_bound, lower_bound_parts, report_figures
from drawopt.errors import UsageError
from drawopt.gen import generate
from drawopt.ir.ops import OPS
from drawopt.ir.stream import StreamBuilder
from drawopt.passmanager import PASSES, get_pass, parse_pipeline


def test_every_target_is_modelled_and_consistent() -> None:
    assert set(MODELS) == set(TARGETS)
    for name, m in MODELS.items():
        assert m.name == name
        costs = m.op_costs()
        assert all(costs[o.code] > 0 for o in OPS), name
        assert m.mdi and m.mdi_max_count >= 65535
        # a pipeline change costs more than a table bind; a draw more than a stencil ref
        assert m.state_us["SetPipelineState"] > m.state_us["SetGraphicsRootDescriptorTable"]
        assert m.draw_us > m.state_us["OMSetStencilRef"]
    from drawopt.cli.commands.optimize import TARGETS as CLI_TARGETS
    assert tuple(CLI_TARGETS) == TARGETS


def test_drawindexedx_capabilities() -> None:
    assert MODELS["xbox-one"].has_x and MODELS["xbox-one"].wave_packs_x
    assert MODELS["xbox-series"].has_x and not MODELS["xbox-series"].wave_packs_x
    for t in ("d3d12", "vulkan", "gl"):
        assert not MODELS[t].has_x
    assert pack_x_pays_off("xbox-one")
    assert not pack_x_pays_off("xbox-series") and pack_x_pays_off("xbox-series", force=True)
    for t in ("d3d12", "vulkan", "gl"):
        assert not pack_x_pays_off(t, force=True)


def test_mdi_min_batch_is_the_break_even() -> None:
    for t in TARGETS:
        m = get_target(t)
        n = mdi_min_batch(t)
        assert n >= 2
        assert m.mdi_call_us + n * m.mdi_record_us < n * m.draw_us
        if n > 2:
            assert m.mdi_call_us + (n - 1) * m.mdi_record_us >= (n - 1) * m.draw_us
    assert mdi_min_batch("d3d12") == 3 and mdi_min_batch("xbox-one") == 2


def test_unknown_target_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown target 'ps5'"):
        get_target("ps5")


def _mdi_stream(cpu: bool) -> StreamBuilder:
    b = StreamBuilder()
    b.buffer("args", 4096, cpu=cpu, data=[3, 1, 0, 0] * 10 if cpu else None)
    b.target("rt", 64, 64)
    b.pipeline("p", vs="v", ps="p")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("p")
    b.MultiDrawInstancedIndirect(10, "args", 0, 16)
    return b


def test_cpu_cost_counts_cpu_written_records_only() -> None:
    m = get_target("d3d12")
    base = m.state_us["OMSetRenderTargets"] + m.state_us["SetPipelineState"] + m.mdi_call_us
    assert estimate_cpu_cost(_mdi_stream(cpu=False).build(), "d3d12") == pytest.approx(base)
    assert estimate_cpu_cost(_mdi_stream(cpu=True).build(), "d3d12") == pytest.approx(base + 10 * m.mdi_record_us)
    # root constants pay per value
    b = StreamBuilder()
    b.rootsig("r", "constants(8)")
    b.SetGraphicsRootSignature("r")
    b.SetGraphicsRoot32BitConstants(0, 8, *range(8))
    c = cost_by_command(b.build(), "gl")
    gl = MODELS["gl"]
    assert c[1] == pytest.approx(gl.state_us["SetGraphicsRoot32BitConstants"] + 8 * gl.root_value_us)


def test_drawindexedx_is_costed_as_its_emulation_where_absent() -> None:
    b = StreamBuilder()
    b.buffer("ib", 4096)
    b.DrawIndexedX("ib", 0, "R16_UINT", 36, 0)
    s = b.build(check=False)
    assert cost_by_command(s, "xbox-one")[0] == pytest.approx(MODELS["xbox-one"].x_draw_us)
    d = MODELS["d3d12"]
    assert cost_by_command(s, "d3d12")[0] == pytest.approx(d.draw_us + d.state_us["IASetIndexBuffer"])


def test_default_pipeline_per_target() -> None:
    for t in TARGETS:
        names = default_pipeline(t).split(",")
        for n in names:
            assert n in PASSES
            get_pass(n)  # importable
        assert names[0] == "dedupe-state" and names[-1] == "dedupe-state"
        assert [n for n in PIPELINE_ORDER if n in names] == names  # order kept
        parse_pipeline(",".join(names), target=t)
        assert ("pack-x" in names) == (t == "xbox-one")
        if "pack-x" in names and "mdi" in names:
            assert names.index("pack-x") < names.index("mdi")
    from drawopt.passmanager import default_pipeline as pm_default
    assert pm_default("xbox-series") == default_pipeline("xbox-series")


def test_every_registered_pass_loads() -> None:
    """A pass that fails to import is an error, never a silently shorter default pipeline."""
    for n in PASSES:
        get_pass(n)
    assert {"schedule", "merge-instances", "mdi", "flush"} <= set(default_pipeline("d3d12").split(","))


# ---------------------------------------------------------------------- lower bound
def _oi_stream(order_independent: bool, barrier: bool = False) -> StreamBuilder:
    b = StreamBuilder()
    b.texture("t", 4, 4, "R8G8B8A8_UNORM")
    b.target("rt", 64, 64)
    contract = "order_independent" if order_independent else ""
    b.pipeline("a", vs="v", ps="a", blend="additive", contract=contract)
    b.pipeline("b", vs="v", ps="b", blend="additive", contract=contract)
    b.OMSetRenderTargets("rt")
    for i, p in enumerate("ababab"):
        if barrier and i == 3:
            b.ResourceBarrier("t", "SHADER_RESOURCE", "COPY_DEST")
        b.SetPipelineState(p)
        b.DrawInstanced(3, 1, 3 * i, 0)
    return b


def test_lower_bound_commuting_draws_one_call_per_class() -> None:
    s = _oi_stream(True).build()
    assert lower_bound(s, "d3d12", "declared") == 2
    assert lower_bound(s, "d3d12", "none") == 6  # nothing moves: runs of one draw


def test_lower_bound_ordered_draws_count_runs() -> None:
    s = _oi_stream(False).build()
    lb = lower_bound_parts(s, "d3d12", "declared")
    assert lb.bound == 6 and lb.parts == 6  # every draw is a cut


def test_lower_bound_segments_at_fences() -> None:
    s = _oi_stream(True, barrier=True).build()
    lb = lower_bound_parts(s, "d3d12", "declared")
    assert lb.segments == 2 and lb.bound == 4  # a and b on each side of the barrier


def test_cut_units() -> None:
    # units 0..4 in one segment: 0 -> 2, 1 -> 2, 2 -> 3, 2 -> 4: unit 2 is the only cut
    unit = np.arange(5)
    edges = np.array([[0, 2], [1, 2], [2, 3], [2, 4]])
    assert cut_units(unit, edges, np.zeros(5, np.int64)).tolist() == [False, False, True, False, False]
    # a chain: every unit is a cut; two segments are independent
    chain = np.array([[0, 1], [1, 2], [3, 4]])
    assert cut_units(unit, chain, np.array([0, 0, 0, 1, 1])).all()


@pytest.mark.parametrize("seed", range(10))
def test_cut_units_is_the_reachability_definition(seed: int) -> None:
    """A unit is a cut when every earlier unit of its segment reaches it and it reaches every
    later one: checked by brute force over random DAGs of several segments (all segments at once)."""
    rng = np.random.default_rng(seed)
    nu = int(rng.integers(1, 40))
    useg = np.sort(rng.integers(0, 5, nu))
    a, b = rng.integers(0, nu, 2 * nu), rng.integers(0, nu, 2 * nu)
    u, v = np.minimum(a, b), np.maximum(a, b)
    keep = (u != v) & (useg[u] == useg[v])
    edges = np.stack([u[keep], v[keep]], axis=1).reshape(-1, 2)
    reach = np.eye(nu, dtype=bool)
    for i in reversed(range(nu)):  # edges go forward: reach[j] is final when i < j
        for j in edges[edges[:, 0] == i, 1].tolist():
            reach[i] |= reach[j]
    same = useg[:, None] == useg[None, :]
    earlier = np.tril(np.ones((nu, nu), bool), -1)  # earlier[i, j]: j < i
    want = [bool((reach[:, i] | ~(same[i] & earlier[i])).all() and (reach[i] | ~(same[i] & earlier.T[i])).all())
            for i in range(nu)]
    assert cut_units(np.arange(nu), edges, useg).tolist() == want


def test_lower_bound_quads_is_one_call() -> None:
    s = generate("quads", 300, seed=1)
    assert lower_bound(s, "d3d12", "declared") == 1


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_lower_bound_is_not_beaten_by_the_default_pipeline(kind: str) -> None:
    from drawopt.result import optimize
    from drawopt.stats import compute_stats

    s = generate(kind, 600, seed=5)
    for target in ("d3d12", "xbox-one"):
        lb = lower_bound(s, target, "declared")
        out = optimize(s, None, target=target, reorder="declared").stream
        assert compute_stats(out)["draw_calls"] >= lb
        assert lb <= compute_stats(s)["draw_calls"]


def test_report_figures() -> None:
    s = _oi_stream(True).build()
    f = report_figures(s, "xbox-one", "declared")
    assert set(f) == {"cpu_cost", "lower_bound"}
    assert f["lower_bound"] == 2
    assert f["cpu_cost"] == pytest.approx(estimate_cpu_cost(s, "xbox-one"), abs=1e-3)


@pytest.mark.parametrize("kind,opts", [("quads", {}), ("frame", {}), ("gpu-driven", {}), ("bundle", {})])
def test_lower_bound_without_graph_on_chains(kind: str, opts: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams whose segments are all chains (one blended pipeline on one target: the quads) get
    one part per draw without a dependency graph; everywhere the bound equals the graph's."""
    import drawopt.analysis.graph as graph_mod

    s = generate(kind, 400, seed=5, **opts)
    for reorder in ("declared", "opaque"):
        with_graph = lower_bound_parts(s, "d3d12", reorder, graph=graph_mod.build_graph(s, reorder=reorder))
        assert lower_bound_parts(s, "d3d12", reorder).bound == with_graph.bound
    if kind == "quads":
        def no_graph(*a: object, **k: object) -> None:
            raise AssertionError("the lower bound of a chain-only stream built a graph")
        monkeypatch.setattr(graph_mod, "build_graph", no_graph)
        assert lower_bound_parts(s, "d3d12", "declared").bound == 1
