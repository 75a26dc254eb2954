"""Dependency graph: nodes, edge reasons, reduction, policies, export, CLI."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drawopt.analysis.graph import (
    EDGE_REASONS,
    NODE_KINDS,
    build_graph,
    commute_class,
    graph_summary,
    hazard_view,
    node_of_command,
    to_dot,
    write_graph,
)
from drawopt.cli import main
from drawopt.errors import UsageError
from drawopt.ir.formats import loads
from drawopt.ir.ops import Cat
from drawopt.ir.stream import Stream

try:
    from strategies import streams
except ImportError:  # pragma: no cover
    streams = None

HEAD = """drawopt 1
buffer verts size=65536
buffer args size=4096
buffer tex size=4096
target a 16x16 R8G8B8A8_UNORM
target b 16x16 R8G8B8A8_UNORM
depth z 16x16 D32_FLOAT
heap res CBV_SRV_UAV 8
view res[0] srv tex
view res[1] uav tex
rootsig rs table(srv,1) constants(1)
rootsig rw table(uav,1)
pipeline al vs=v ps=f blend=alpha root=rs
pipeline al2 vs=v2 ps=f2 blend=alpha root=rs
pipeline oi vs=v ps=f blend=additive root=rs contract=order_independent
pipeline op vs=v ps=f depth=less,write root=rs
pipeline op2 vs=v2 ps=f2 depth=less,write root=rs
pipeline wr vs=v ps=f root=rw
pipeline cs cs=c writes=args
"""


def G(body: str, reorder: str = "declared", **kw) -> tuple[nx.DiGraph, Stream]:
    s = loads(HEAD + body)
    return build_graph(s, reorder, **kw), s


def edges(g: nx.DiGraph) -> list[tuple[int, int, str, str]]:
    return sorted((u, v, d["reason"], d["resource"]) for u, v, d in g.edges(data=True))


def check_structure(g: nx.DiGraph, s: Stream) -> None:
    """Nodes cover the range exactly, in order; edges go forward; it is a DAG."""
    start, stop = g.graph["start"], g.graph["stop"]
    spans = sorted((d["first"], d["last"], v) for v, d in g.nodes(data=True))
    pos = start
    for k, (f, last, v) in enumerate(spans):
        assert f == pos and last >= f and v == k
        assert g.nodes[v]["kind"] in NODE_KINDS
        pos = last + 1
    assert pos == stop or (not spans and start == stop)
    assert all(u < v for u, v in g.edges)
    assert all(d["reason"] in EDGE_REASONS for _, _, d in g.edges(data=True))
    nodes = node_of_command(g)
    assert (nodes[start:stop] >= 0).all() and (nodes[:start] == -1).all() and (nodes[stop:] == -1).all()
    assert nx.is_directed_acyclic_graph(g)


def test_blended_draws_form_a_chain() -> None:
    g, s = G("OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n"
             "DrawInstanced 3 1 6 0\n")
    check_structure(g, s)
    assert edges(g) == [(0, 1, "order", "a"), (1, 2, "order", "a")]
    assert g.nodes[0]["first"] == 0 and g.nodes[0]["last"] == 2 and g.nodes[0]["actions"] == 1


def test_commuting_draws_share_a_node() -> None:
    body = "OMSetRenderTargets a z\nSetPipelineState {p}\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n" \
           "SetPipelineState {q}\nDrawInstanced 3 1 6 0\n"
    g, _ = G(body.format(p="oi", q="oi"))
    assert g.number_of_nodes() == 1 and g.nodes[0]["actions"] == 3
    g, _ = G(body.format(p="oi", q="al"))
    assert g.number_of_nodes() == 2 and edges(g)[0][2] == "order"
    for pol, n in (("none", 3), ("declared", 3), ("opaque", 1)):
        g, _ = G(body.format(p="op", q="op2"), pol)
        assert g.number_of_nodes() == n, pol
    g, _ = G(body.format(p="oi", q="oi"), "none")
    assert g.number_of_nodes() == 3


def test_unrelated_targets_stay_independent() -> None:
    g, s = G("SetPipelineState al\nOMSetRenderTargets a\nDrawInstanced 3 1 0 0\nOMSetRenderTargets b\n"
             "DrawInstanced 3 1 0 0\nOMSetRenderTargets a\nDrawInstanced 3 1 3 0\nOMSetRenderTargets b\n"
             "DrawInstanced 3 1 3 0\n")
    check_structure(g, s)
    h = hazard_view(g)
    n = node_of_command(g)
    da, db, da2, db2 = (int(n[i]) for i in np.flatnonzero(s.cats() == int(Cat.DRAW)))
    assert nx.has_path(h, da, da2) and nx.has_path(h, db, db2)
    assert not nx.has_path(h, da, db) and not nx.has_path(h, db, da2)   # free to group a's and b's


def test_uav_hazards_and_state_edges() -> None:
    g, s = G("""SetDescriptorHeaps res
SetGraphicsRootSignature rw
SetGraphicsRootDescriptorTable 0 res[1]
SetPipelineState wr
OMSetRenderTargets b
DrawInstanced 3 1 0 0
SetGraphicsRootSignature rs
SetGraphicsRootDescriptorTable 0 res[0]
SetPipelineState al
OMSetRenderTargets a
DrawInstanced 3 1 0 0
SetGraphicsRootSignature rw
SetGraphicsRootDescriptorTable 0 res[1]
SetPipelineState wr
OMSetRenderTargets b
DrawInstanced 3 1 3 0
""")
    check_structure(g, s)
    e = edges(g)
    assert (0, 1, "raw", "tex") in e          # the sampler reads what the UAV draw wrote
    assert (1, 2, "war", "tex") in e          # the next UAV write waits for that read
    assert not any(d["reason"] == "state" for _, _, d in hazard_view(g).edges(data=True))


def test_state_edges_name_the_state() -> None:
    g, _ = G("SetPipelineState al\nOMSetRenderTargets a\nDrawInstanced 3 1 0 0\nOMSetRenderTargets b\n"
             "DrawInstanced 3 1 0 0\n")
    assert edges(g) == [(0, 1, "state", "pipeline")]
    assert hazard_view(g).number_of_edges() == 0


def test_flushes_pin_writers_and_front_end_reads() -> None:
    g, s = G("""SetPipelineState cs
Dispatch 1 1 1
GpuSendPipelinedEvent CS_PARTIAL_FLUSH
FlushGpuCacheRange DEFAULT_PFP
OMSetRenderTargets a
SetPipelineState al
DrawInstanced 3 1 0 0
MultiDrawInstancedIndirect 4 args 0 16
""")
    check_structure(g, s)
    kinds = [g.nodes[v]["kind"] for v in g]
    assert kinds == ["dispatch", "flush", "flush", "draws", "draws"]
    e = edges(g)
    assert (0, 1, "flush", "") in e and (1, 2, "flush", "") in e and (2, 4, "flush", "") in e
    assert (3, 4, "order", "a") in e
    assert not nx.has_path(hazard_view(g), 1, 3)   # the plain draw is not pinned by the flushes


def test_barriers_and_opaque_commands() -> None:
    g, s = G("""SetPipelineState al
OMSetRenderTargets a
DrawInstanced 3 1 0 0
ResourceBarrier a RENDER_TARGET SHADER_RESOURCE
OMSetRenderTargets b
DrawInstanced 3 1 0 0
Opaque SomethingUnknown
DrawInstanced 3 1 3 0
""")
    check_structure(g, s)
    kinds = [g.nodes[v]["kind"] for v in g]
    assert kinds == ["draws", "barrier", "draws", "opaque", "draws"]
    e = edges(g)
    assert (0, 1, "barrier", "a") in e
    assert (2, 3, "opaque", "") in e and (3, 4, "opaque", "") in e
    assert nx.has_path(g, 0, 4) and nx.has_path(g, 1, 3)


def test_range_and_errors() -> None:
    body = "OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n" \
           "DrawInstanced 3 1 6 0\n"
    g, s = G(body, start=3, stop=5)
    check_structure(g, s)
    assert g.number_of_nodes() == 2 and edges(g) == [(0, 1, "order", "a")]
    with pytest.raises(UsageError):
        build_graph(s, "declared", 3, 99)
    with pytest.raises(UsageError):
        build_graph(s, "always")


def test_commute_class() -> None:
    s = loads(HEAD)
    d = s.decls
    assert commute_class(d["oi"], "declared") == "oi" and commute_class(d["oi"], "none") is None
    assert commute_class(d["op"], "declared", "z") is None
    assert commute_class(d["op"], "opaque", "z") == "opaque:less:z"
    assert commute_class(d["al"], "opaque", "z") is None


def _draw_nodes(s: Stream, g: nx.DiGraph) -> np.ndarray:
    return node_of_command(g)[np.flatnonzero(s.cats() == int(Cat.DRAW))]


def test_generated_frame_small_sound_and_reduced() -> None:
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate("frame", 3000, seed=4)
    draws = int(np.count_nonzero(s.cats() == int(Cat.DRAW)))
    gd = build_graph(s, "declared")
    go = build_graph(s, "opaque")
    check_structure(gd, s)
    check_structure(go, s)
    assert gd.number_of_nodes() <= draws + 64
    assert go.number_of_nodes() < 0.6 * draws        # opaque depth-tested draws share nodes
    assert gd.number_of_edges() < 2 * gd.number_of_nodes()
    # no hazard edge is implied by a path of two hazard edges
    h = hazard_view(gd)
    for u, v in h.edges:
        assert not any(h.has_edge(w, v) for w in h.successors(u) if w != v)
    # soundness against the verifier's model: draws writing a common target in an observable
    # order are connected; draws of commuting order-independent pipelines are not forced apart
    from drawopt.verify.model import Canon
    from drawopt.verify.records import expand
    from drawopt.verify.slots import column_universe
    R = expand(s, Canon(), column_universe([s]), "declared")
    node = node_of_command(gd)
    rng = np.random.default_rng(0)
    for res in np.unique(R.w_res):
        w = np.flatnonzero(R.w_res == res)
        ordered = w[R.w_lab[w] == 0]
        for i in rng.choice(np.arange(ordered.size - 1), size=min(20, max(ordered.size - 1, 0)), replace=False) \
                if ordered.size > 1 else []:
            a, b = (int(node[R.a_cmd[R.w_act[ordered[k]]]]) for k in (i, i + 1))
            assert a == b or nx.has_path(h, a, b)


def test_hundred_thousand_draws_give_a_small_graph() -> None:
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate("frame", 100_000, seed=1)
    g = build_graph(s, "opaque")
    sm = graph_summary(g)
    assert sm["nodes"] < 40_000 and sm["edges"] < 2 * sm["nodes"]


def test_export_formats(tmp_path) -> None:
    g, s = G("OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n")
    for ext in ("dot", "graphml", "json"):
        write_graph(g, tmp_path / f"g.{ext}", s)
    assert "n0 -> n1" in (tmp_path / "g.dot").read_text()
    assert "order:a" in to_dot(g, s)
    back = nx.read_graphml(tmp_path / "g.graphml")
    assert back.number_of_edges() == 1
    js = json.loads((tmp_path / "g.json").read_text())
    assert nx.node_link_graph(js, edges="links").number_of_nodes() == 2
    with pytest.raises(UsageError):
        write_graph(g, tmp_path / "g.png")


def test_cli(tmp_path, capsys) -> None:
    f = tmp_path / "s.dstream"
    f.write_text(HEAD + "OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n")
    out = tmp_path / "g.json"
    assert main(["graph", str(f), "-o", str(out)]) == 0
    assert "2 nodes (draws 2), 1 edges (order 1)" in capsys.readouterr().out
    assert main(["graph", str(f), "-o", str(tmp_path / "g.dot"), "--range", "1:4", "--reorder", "opaque"]) == 0
    assert main(["graph", str(f), "-o", str(tmp_path / "g.xyz")]) == 2
    assert main(["graph", str(f), "-o", str(out), "--range", "x"]) == 2
    assert main(["graph", str(tmp_path / "nope.dstream"), "-o", str(out)]) == 2


@pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=50) if streams is not None else None)
def test_random_streams_give_well_formed_graphs(s: Stream) -> None:
    for pol in ("none", "declared", "opaque"):
        check_structure(build_graph(s, pol), s)


# ---------------------------------------------------------------------- kernels: compiled vs pure
def _compiled_graph_module():
    from drawopt._accel import load_cext
    mod = load_cext("_graph", pure=False)
    if mod is None:  # pragma: no cover - extension not built
        pytest.skip("drawopt._graph is not built")
    return mod


def _draws_and_segments(s: Stream) -> tuple[np.ndarray, np.ndarray]:
    """The draws of ``s`` (commands) and their dependency segments, as the passes see them."""
    from types import SimpleNamespace

    from drawopt.analysis.mergeclass import draw_segments
    from drawopt.analysis.state import track
    from drawopt.passes.schedule import _draw_pipes
    t = track(s)
    draws = t.draws.astype(np.int64)
    pipe, pinned = _draw_pipes(s, t)
    return draws, draw_segments(s, SimpleNamespace(cmd=draws, pipe=pipe, pinned=pinned))


def _random_dag_edges(rng: np.random.Generator, nn: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, nn, m)
    b = rng.integers(0, nn, m)
    u, v = np.minimum(a, b), np.maximum(a, b)
    key = np.unique((u * nn + v)[u != v])
    return key // nn, key % nn


@pytest.mark.parametrize("seed", range(8))
def test_two_path_reduce_compiled_matches_pure(seed: int) -> None:
    from drawopt.analysis.graph import _R_CODE, _two_path_reduce
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    nn = int(rng.integers(2, 60))
    u, v = _random_dag_edges(rng, nn, int(rng.integers(1, 6 * nn)))
    mask = np.where(rng.random(u.size) < 0.5, 1 << _R_CODE["state"],
                    rng.integers(1, 1 << len(EDGE_REASONS), u.size)).astype(np.int64)
    a = _two_path_reduce(u, v, mask, nn, pure=False)
    b = _two_path_reduce(u, v, mask, nn, pure=True)
    assert a.dtype == b.dtype == bool and np.array_equal(a, b)


def test_two_path_reduce_rules() -> None:
    from drawopt.analysis.graph import _R_CODE, _two_path_reduce
    st, order = 1 << _R_CODE["state"], 1 << _R_CODE["order"]
    # 0->1->2 hazard path implies the hazard edge 0->2; a path through a state edge does not
    u, v = np.array([0, 0, 1, 0, 3, 4]), np.array([1, 2, 2, 4, 4, 5])
    mask = np.array([order, order, order, st, order, order])
    for pure in (True, False):
        if not pure:
            _compiled_graph_module()
        keep = _two_path_reduce(u, v, mask, 6, pure=pure)
        assert keep.tolist() == [True, False, True, True, True, True]
    # a state-only edge goes for any path of two edges
    u, v, mask = np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([st, st, order])
    for pure in (True, False):
        assert _two_path_reduce(u, v, mask, 3, pure=pure).tolist() == [True, False, True]


@pytest.mark.parametrize("seed", range(4))
def test_assign_nodes_compiled_matches_pure(seed: int) -> None:
    from drawopt.analysis.graph import _assign_nodes
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    n = 500
    kind = rng.integers(0, 3, n)
    solo = rng.random(n) < 0.05
    maxpred = np.where(rng.random(n) < 0.3, np.arange(n) - rng.integers(1, 5, n), -1)
    wsig = rng.integers(0, 2, n).astype(np.uint64)
    a = _assign_nodes(kind, solo, maxpred, wsig, pure=False)
    b = _assign_nodes(kind, solo, maxpred, wsig, pure=True)
    assert np.array_equal(a, b) and a[0] == 0 and (np.diff(a) >= 0).all()


def _graph_key(g: nx.DiGraph) -> tuple:
    return (sorted(g.nodes(data=True)), sorted((u, v, sorted(d.items())) for u, v, d in g.edges(data=True)), g.graph)


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_build_graph_pure_and_compiled_agree(kind: str, monkeypatch) -> None:
    gen = pytest.importorskip("drawopt.gen")
    _compiled_graph_module()
    s = gen.generate(kind, 1500, seed=5)
    for pol in ("declared", "opaque"):
        monkeypatch.setenv("DRAWOPT_PURE", "0")
        a = build_graph(s, pol)
        monkeypatch.setenv("DRAWOPT_PURE", "1")
        b = build_graph(s, pol)
        assert _graph_key(a) == _graph_key(b)


def test_unique_rows_is_numpy_unique() -> None:
    from drawopt.analysis.graph import _unique_rows
    rng = np.random.default_rng(3)
    m = rng.integers(-3, 3, (400, 5)).astype(np.int64)
    m[:, 4] = rng.integers(-(1 << 40), 1 << 40, 400) * (rng.random(400) < 0.1)
    first, inv = _unique_rows(m)
    _, f2, i2 = np.unique(m, axis=0, return_index=True, return_inverse=True)
    assert np.array_equal(first, f2) and np.array_equal(inv, i2.reshape(-1))


def test_graph_is_an_ordinary_networkx_graph() -> None:
    gen = pytest.importorskip("drawopt.gen")
    g = build_graph(gen.generate("frame", 400, seed=9))
    h = nx.DiGraph(**g.graph)
    h.add_nodes_from(g.nodes(data=True))
    h.add_edges_from(g.edges(data=True))
    assert nx.utils.graphs_equal(g, h)
    assert all(g.pred[v][u] is g.succ[u][v] for u, v in g.edges)  # one attribute dict per edge
    u, v = next(iter(g.edges))
    g.remove_edge(u, v)  # mutable as usual
    assert not g.has_edge(u, v) and u not in g.pred[v]


@pytest.mark.parametrize("reorder", ["none", "declared", "opaque"])
def test_stream_without_any_state_set(reorder: str) -> None:
    """No setter events at all (found by the random-stream property): the draws' setters are all
    'none' and the graph is still well formed, with the flush ordered before the draw."""
    g, s = G("GpuSendPipelinedEvent CS_PARTIAL_FLUSH\nDrawInstancedIndirect args 0\n", reorder)
    check_structure(g, s)
    assert g.number_of_nodes() >= 1


# ---------------------------------------------------------------------- the hazard graph (arrays)
def _same_as_hazard_view(s: Stream, pol: str) -> None:
    from drawopt.analysis.graph import hazard_graph
    g = build_graph(s, pol)
    h = hazard_graph(s, pol)
    assert h.graph == g.graph
    assert h.number_of_nodes() == g.number_of_nodes()
    assert [(v, d["first"], d["last"], d["kind"]) for v, d in g.nodes(data=True)] == \
        [(v, d["first"], d["last"], d["kind"]) for v, d in h.nodes(data=True)]
    hv = hazard_view(g)
    assert list(hv.edges(data="reason")) == list(h.edges(data="reason"))  # same edges, same order
    assert list(hv.edges()) == list(h.edges()) and h.number_of_edges() == hv.number_of_edges()
    assert [(u, v, d) for u, v, d in h.edges(data=True)] == [(u, v, {"reason": r}) for u, v, r in
                                                               hv.edges(data="reason")]
    assert np.array_equal(node_of_command(h), node_of_command(g))
    assert "state" not in {r for _, _, r in h.edges(data="reason")}
    # the edges found by their ends, with build_graph's resource
    eu, ev = np.array([u for u, _ in hv.edges()], np.int64), np.array([v for _, v in hv.edges()], np.int64)
    assert np.array_equal(h.find_edges(eu, ev), np.arange(eu.size))
    assert [h.resource(i) for i in range(eu.size)] == [d["resource"] for _, _, d in hv.edges(data=True)]
    nn = h.number_of_nodes()
    assert (h.find_edges(ev, eu) == -1).all() and (h.find_edges(np.array([-1, nn]), np.array([0, 0])) == -1).all()


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_hazard_graph_is_the_graph_without_state_edges(kind: str) -> None:
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate(kind, 1200, seed=8)
    for pol in ("none", "declared", "opaque"):
        _same_as_hazard_view(s, pol)


@pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=50) if streams is not None else None)
def test_hazard_graph_on_random_streams(s: Stream) -> None:
    for pol in ("none", "declared", "opaque"):
        _same_as_hazard_view(s, pol)


def test_hazard_graph_ranges_and_errors() -> None:
    from drawopt.analysis.graph import hazard_graph
    g, s = G("OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n")
    h = hazard_graph(s, start=1, stop=3)
    assert h.graph["start"] == 1 and h.graph["stop"] == 3
    assert hazard_graph(s, start=2, stop=2).number_of_nodes() == 0
    with pytest.raises(UsageError):
        hazard_graph(s, "sideways")
    with pytest.raises(UsageError):
        hazard_graph(s, start=3, stop=1)


def test_segment_units_from_either_graph_agree() -> None:
    from drawopt.analysis.graph import hazard_graph
    from drawopt.analysis.lowerbound import segment_units
    gen = pytest.importorskip("drawopt.gen")
    for kind in ("frame", "gpu-driven"):
        s = gen.generate(kind, 1500, seed=2)
        draws, seg = _draws_and_segments(s)
        for pol in ("declared", "opaque"):
            ua, ea = segment_units(build_graph(s, pol), draws, seg)
            ub, eb = segment_units(hazard_graph(s, pol), draws, seg)
            assert np.array_equal(ua, ub) and np.array_equal(ea, eb)


def test_frontend_buffers_are_the_buffers_the_front_end_reads() -> None:
    """_frontend_buffers: the buffers declared ``frontend`` and every buffer an indirect draw reads
    its arguments or count from or an index buffer names, as a per-command walk finds them."""
    from drawopt.analysis.graph import _INDIRECT, _frontend_buffers
    from drawopt.ir.decls import Buffer
    gen = pytest.importorskip("drawopt.gen")
    for kind in ("gpu-driven", "frame"):
        s = gen.generate(kind, 400, seed=1)
        want = {d.name for d in s.decls.items if isinstance(d, Buffer) and d.frontend}
        for i in range(len(s)):
            sp = s.spec(i)
            cols = [c for c in ("args_buffer", "count_buffer") if sp.name in _INDIRECT and c in sp.fields]
            cols += ["buffer"] if sp.name in ("IASetIndexBuffer", "DrawIndexedX") else []
            want |= {s.decls.items[int(s.args[i, sp.col(c)])].name for c in cols}
        assert _frontend_buffers(s) == want and want


def test_segment_units_match_their_definition() -> None:
    """segment_units' units (one per (node, segment) of the draws, numbered in order of first
    appearance) and constraints (a pair of units of one segment per constraint edge), against a
    dictionary walk; also for draws passed out of stream order (the interning path)."""
    from drawopt.analysis.graph import EDGE_REASONS, hazard_graph
    from drawopt.analysis.lowerbound import CONSTRAINT_REASONS, segment_units
    gen = pytest.importorskip("drawopt.gen")
    streams = [gen.generate(kind, 800, seed=3) for kind in ("frame", "gpu-driven")]
    # a node holding draws of several segments (order-independent draws, a pinned one between):
    # a constraint's target node then has several units
    streams.append(loads(HEAD + "OMSetRenderTargets a\nSetPipelineState al\nDrawInstanced 3 1 0 0\n"
                         "SetPipelineState oi\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 0 0 @nomerge\n"
                         "DrawInstanced 3 1 0 0\nSetPipelineState al\nDrawInstanced 3 1 0 0\n"))
    multi = False
    for s in streams:
        draws, seg = _draws_and_segments(s)
        g = hazard_graph(s, "declared")
        node_of = node_of_command(g)
        nd = node_of[draws]
        multi |= bool((np.bincount(nd[np.r_[True, (nd[1:] != nd[:-1]) | (seg[1:] != seg[:-1])]]) > 1).any())
        for perm in (np.arange(draws.size), np.random.default_rng(1).permutation(draws.size)):
            d, sg = draws[perm], seg[perm]
            unit, edges = segment_units(g, d, sg)
            ids: dict[tuple[int, int], int] = {}
            want = [ids.setdefault((int(node_of[c]), int(x)), len(ids)) for c, x in zip(d, sg)]
            assert unit.tolist() == want
            units_of: dict[int, list[tuple[int, int]]] = {}
            for (nv, x), u in ids.items():
                units_of.setdefault(nv, []).append((x, u))
            pairs = set()
            for a, b, r in zip(g.eu.tolist(), g.ev.tolist(), g.reason.tolist()):
                if EDGE_REASONS[r] in CONSTRAINT_REASONS:
                    pairs |= {(ua, ub) for xa, ua in units_of.get(a, []) for xb, ub in units_of.get(b, []) if xa == xb}
            assert {tuple(e) for e in edges.tolist()} == pairs and len(edges) == len(pairs)
    assert multi


@pytest.mark.parametrize("seed", range(6))
def test_act_setter_events_compiled_matches_pure(seed: int) -> None:
    from drawopt.analysis.graph import _act_setter_events
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    n = 400
    m = int(rng.integers(0, 300))
    ev_slot = rng.integers(0, 12, m)
    ev_cmd = rng.integers(0, n, m)
    o = np.lexsort((ev_cmd, ev_slot))
    ev_slot, ev_cmd = ev_slot[o], ev_cmd[o]
    act = np.sort(rng.integers(0, n, int(rng.integers(0, 120))))
    opq = np.unique(rng.integers(0, n, int(rng.integers(0, 4))))
    opq = opq[~np.isin(opq, ev_cmd)]
    slots = np.array(sorted(set(rng.integers(0, 14, 6).tolist())), np.int64)
    ea, ca = _act_setter_events(ev_cmd, ev_slot, slots, act, opq, pure=False)
    eb, cb = _act_setter_events(ev_cmd, ev_slot, slots, act, opq, pure=True)
    assert np.array_equal(ea, eb) and np.array_equal(ca, cb)
    assert ea.shape == (slots.size, act.size)
    ok = ea >= 0
    assert np.array_equal(ca[ok], ev_cmd[ea[ok]]) and (ca[~ok] == -1).all()


@pytest.mark.parametrize("seed", range(8))
def test_state_reads_compiled_matches_pure(seed: int) -> None:
    """The state-edge kernel and its twin: same edges, same order, same read marks, on random
    events (duplicated (slot, command) keys, Opaque epochs), actions, groups and nodes."""
    from drawopt.analysis.graph import _state_reads
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    n, ns = 300, 10
    m = int(rng.integers(0, 250))
    ev_slot, ev_cmd = rng.integers(0, ns, m), rng.integers(0, n, m)
    o = np.lexsort((ev_cmd, ev_slot))
    ev_slot, ev_cmd = ev_slot[o], ev_cmd[o]
    key = ev_slot * n + ev_cmd
    first_dup = np.maximum.accumulate(np.where(np.r_[True, key[1:] != key[:-1]], np.arange(m), 0)) if m else key
    opq = np.unique(rng.integers(0, n, int(rng.integers(0, 4))))
    ev_epoch = np.searchsorted(opq, ev_cmd)
    lo, hi = np.searchsorted(ev_slot, np.arange(ns)), np.searchsorted(ev_slot, np.arange(ns), "right")
    nn = 40
    raw_src = np.where(rng.random(m) < 0.8, rng.integers(0, nn, m), -1)
    war_dst = np.where(rng.random(m) < 0.6, rng.integers(0, nn, m), -1)
    na = int(rng.integers(0, 150))
    act_cmd = np.sort(rng.integers(0, n, na))
    act_node = np.sort(rng.integers(0, nn, na))
    ng = int(rng.integers(1, 5))
    act_group = rng.integers(-1, ng, na)
    lens = rng.integers(0, 6, ng)
    grp_off = np.r_[0, np.cumsum(lens)].astype(np.int64)
    grp_slots = np.concatenate([rng.permutation(ns)[:k] for k in lens.tolist()]).astype(np.int64)
    args = (ev_cmd, ev_epoch, lo, hi, raw_src, war_dst, first_dup, act_cmd, np.searchsorted(opq, act_cmd),
            act_node, act_group, grp_off, grp_slots)
    a = _state_reads(*args, pure=False)
    b = _state_reads(*args, pure=True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    rb, ru, rv, wb, wu, wv, _ = a
    assert (np.diff(rb) >= 0).all() and (np.diff(wb) >= 0).all()  # block by block
    assert (ru != rv).all() and (wu != wv).all()
    for blk, u, v in ((rb, ru, rv), (wb, wu, wv)):  # no edge twice in a row within a block
        same = (blk[1:] == blk[:-1]) & (u[1:] == u[:-1]) & (v[1:] == v[:-1])
        assert not same.any()


@pytest.mark.parametrize("seed", range(8))
def test_action_signatures_compiled_matches_pure(seed: int) -> None:
    """The signature kernel and its twin (the packed columns and ``_unique_rows``): the same first
    actions and ranks, on random events (Opaque epochs, repeated commands), actions and columns,
    with few distinct signatures and with more than the kernel's first store holds."""
    from drawopt.analysis.graph import _action_signatures
    mod = _compiled_graph_module()
    rng = np.random.default_rng(seed)
    n = 3000
    m = int(rng.integers(0, 2000))
    ev_slot, ev_cmd = rng.integers(0, 12, m), rng.integers(0, n, m)
    o = np.lexsort((ev_cmd, ev_slot))
    ev_slot, ev_cmd = ev_slot[o], ev_cmd[o]
    na = 40000 if seed == 0 else int(rng.integers(0, 3000))
    act = np.sort(rng.integers(0, n, na))
    opq = np.unique(rng.integers(0, n, int(rng.integers(0, 4))))
    opq = opq[~np.isin(opq, ev_cmd)]
    slots = np.array(sorted(set(rng.integers(0, 14, 5).tolist())), np.int64)
    crank = np.append(rng.integers(0, int(rng.integers(1, 6)), n), -1)
    wide = seed == 0  # distinct tails for most actions: past the first store
    head = np.stack([rng.integers(0, 3, na), rng.integers(-1, 2, na)], axis=1)
    tail = rng.integers(0, 1 << 40 if wide else 2, (na, 3))
    a = _action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail, pure=False)
    b = _action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail, pure=True)
    assert all(x.dtype == y.dtype == np.int64 and np.array_equal(x, y) for x, y in zip(a, b))
    ids, first, rows = mod.action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail)
    assert np.array_equal(rows[ids][:, :2], head) and np.array_equal(rows[ids][:, -3:], tail)
    assert (first.size > 1 << 14) == wide  # (the kernel's first store holds 2^14 signatures)
    # the kernel walks the events in command order; with a slot listed twice it scans slot by slot
    opq_also = opq if seed % 2 else np.unique(np.r_[opq, ev_cmd[:3]])  # (an Opaque command at an event's)
    for sl in (slots, np.r_[slots, slots[:1]] if slots.size else slots):
        a = _action_signatures(ev_cmd, ev_slot, sl, act, opq_also, crank, head, tail, pure=False)
        b = _action_signatures(ev_cmd, ev_slot, sl, act, opq_also, crank, head, tail, pure=True)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("seed", range(8))
def test_hazard_pairs_compiled_matches_pure(seed: int) -> None:
    """The hazard-edge kernel and its twin: same edges in the same order, on random accesses
    with groups past the fan cap (anchored edges), ordered writes, epochs and every segment kind."""
    from drawopt.analysis.graph import _hazard_pairs, lex_order
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    nseg = int(rng.integers(1, 400))
    seg_kind = rng.integers(0, 7, nseg)
    n = int(rng.integers(0, 3000))
    seg = rng.integers(0, nseg, n)
    res = rng.integers(0, int(rng.integers(1, 6)), n)   # few resources: long runs per key
    cls = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 4, n))
    ep = np.searchsorted(np.sort(rng.integers(0, nseg, int(rng.integers(0, 3)))), seg)
    o = lex_order([ep, res, seg])
    args = (seg[o], res[o], cls[o], ep[o], seg_kind)
    a = _hazard_pairs(*args, pure=False)
    b = _hazard_pairs(*args, pure=True)
    assert all(x.dtype == y.dtype == np.int64 and np.array_equal(x, y) for x, y in zip(a, b))
    u, v, r, rr = a
    assert (u != v).all() and np.isin(r, [EDGE_REASONS.index(x) for x in
                                          ("raw", "war", "order", "waw", "barrier", "flush")]).all()


def test_hazard_pairs_past_the_fan_cap() -> None:
    """Reads of one resource by k > cap draws, then k commuting writes: the first write waits for
    every read (war), each later one for the first write only (its group's first member)."""
    from drawopt.analysis.graph import _FAN_CAP, _K_DRAWS, _hazard_pairs
    k = _FAN_CAP + 6
    seg = np.arange(2 * k)
    cls = np.r_[np.zeros(k, np.int64), np.full(k, 2)]
    z = np.zeros(2 * k, np.int64)
    for pure in (True, False):
        if not pure:
            _compiled_graph_module()
        u, v, r, res = _hazard_pairs(seg, z, cls, z, np.full(2 * k, _K_DRAWS), pure=pure)
        assert u.tolist() == list(range(k)) + [k] * (k - 1)
        assert v.tolist() == [k] * k + list(range(k + 1, 2 * k))
        assert [EDGE_REASONS[x] for x in r.tolist()] == ["war"] * k + ["order"] * (k - 1)
        assert (res == 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_pack_columns_keeps_equality_and_lexicographic_order(seed: int) -> None:
    from drawopt.analysis.graph import pack_columns
    rng = np.random.default_rng(seed)
    n = 300
    cols = [rng.integers(-3, 4, n), rng.integers(0, 1 << 20, n) * (rng.random(n) < 0.2),
            rng.integers(-(1 << 62), 1 << 62, n) * (rng.random(n) < 0.1), rng.integers(0, 2, n),
            rng.integers(-5, 70000, n), rng.integers(0, 3, n)]
    mat = np.stack(cols, axis=1)
    packed = pack_columns(cols)
    assert packed.shape[0] == n and packed.shape[1] < mat.shape[1]
    _, inv_a = np.unique(mat, axis=0, return_inverse=True)
    _, inv_b = np.unique(packed, axis=0, return_inverse=True)
    assert np.array_equal(inv_a.reshape(-1), inv_b.reshape(-1))  # same classes, same order
    assert np.array_equal(np.lexsort(mat.T[::-1]), np.lexsort(packed.T[::-1]))


@pytest.mark.parametrize("seed", range(4))
def test_lex_order_is_lexsort(seed: int) -> None:
    """One packed word (argsort) or several (lexsort over the words): the stable order of np.lexsort."""
    from drawopt.analysis.graph import lex_order
    rng = np.random.default_rng(seed)
    n = 400
    narrow = [rng.integers(-3, 4, n), rng.integers(0, 5, n), rng.integers(0, 2, n)]
    wide = narrow + [rng.integers(-(1 << 62), 1 << 62, n) * (rng.random(n) < 0.1), rng.integers(0, 1 << 40, n)]
    for cols in (narrow, wide, [np.zeros(0, np.int64)] * 2):
        assert np.array_equal(lex_order(cols), np.lexsort(cols[::-1]))


def test_cli_writes_stdout_with_dash(tmp_path, capsys) -> None:
    """``graph -o -`` (as the README says): the graph on stdout, the counts on stderr, no file named '-'."""
    import json as _json
    from pathlib import Path

    from drawopt.cli import main
    example = Path(__file__).resolve().parent.parent / "examples" / "frame.dstream"
    assert main(["graph", str(example), "--range", "0:200", "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("digraph drawopt {") and out.rstrip().endswith("}")
    assert err.startswith("-: ") and " nodes " in err
    assert main(["graph", str(example), "--range", "0:50", "-o", "-", "--format", "json"]) == 0
    assert _json.loads(capsys.readouterr().out)["directed"] is True
    assert main(["graph", str(example), "--range", "0:50", "-o", str(tmp_path / "g.txt"), "--format", "graphml"]) == 0
    assert "<graphml" in (tmp_path / "g.txt").read_text()
    assert not Path("-").exists()


@pytest.mark.parametrize("seed", range(6))
def test_spread_accesses_compiled_matches_pure(seed: int) -> None:
    """The access-spreading kernel and its twin: every action gets its signature's accesses in
    order (signatures with none included), then the tail as writes; the same arrays, dtypes too."""
    from drawopt.analysis.graph import _spread_accesses, _spread_accesses_py
    mod = _compiled_graph_module()
    assert mod.spread_accesses is not None
    rng = np.random.default_rng(seed)
    nu = int(rng.integers(1, 40))
    counts = rng.integers(0, 5, nu)
    flat = rng.integers(0, 300, (int(counts.sum()), 2))
    na = int(rng.integers(0, 2000))
    aseg = np.sort(rng.integers(0, 5000, na))
    inv = rng.integers(0, nu, na)
    nt = int(rng.integers(0, 10))
    tail_seg, tail_res = rng.integers(0, 5000, nt), rng.integers(0, 300, nt)
    a = _spread_accesses(aseg, inv, counts, flat, tail_seg, tail_res, pure=False)
    b = _spread_accesses_py(aseg, inv, counts, flat, tail_seg, tail_res)
    assert all(np.array_equal(x, y) and x.dtype == y.dtype == np.int64 for x, y in zip(a, b))
    want = [(int(s), int(r), int(c)) for s, j in zip(aseg, inv)
            for r, c in flat[int(counts[:j].sum()):int(counts[:j + 1].sum())]]
    want += [(int(s), int(r), 1) for s, r in zip(tail_seg, tail_res)]
    assert list(zip(*(x.tolist() for x in a))) == want


# ---------------------------------------------------------------------- the graph of command ranges
def _reach(nn: int, eu: list[int], ev: list[int]) -> list[set[int]]:
    """Per node: the nodes a path of edges leads to (edges go forward: one backward sweep)."""
    succ: list[list[int]] = [[] for _ in range(nn)]
    for u, v in zip(eu, ev):
        succ[u].append(v)
    out: list[set[int]] = [set() for _ in range(nn)]
    for u in range(nn - 1, -1, -1):
        for v in succ[u]:
            out[u] |= {v} | out[v]
    return out


def _same_within(s: Stream, pol: str, start: int, stop: int, h=None) -> None:
    """hazard_graph_within of ``start .. stop-1`` (or ``h``, its graph of that range among others):
    the whole graph's nodes there, and the same order."""
    from drawopt.analysis.graph import hazard_graph, hazard_graph_within
    full = hazard_graph(s, pol)
    if h is None:
        [h] = hazard_graph_within(s, pol, [(start, stop)])
    assert h.graph["start"] <= start and h.graph["stop"] >= stop
    nf, nh = node_of_command(full)[start:stop], node_of_command(h)[start:stop]
    assert (nh >= 0).all()
    assert np.array_equal(np.diff(nf) != 0, np.diff(nh) != 0), "different nodes"
    rf = _reach(full.number_of_nodes(), full.eu.tolist(), full.ev.tolist())
    rh = _reach(h.number_of_nodes(), h.eu.tolist(), h.ev.tolist())
    # a node is named by the first command of the range it holds
    name_f = {int(v): start + i for i, v in reversed(list(enumerate(nf.tolist())))}
    name_h = {int(v): start + i for i, v in reversed(list(enumerate(nh.tolist())))}
    pf = {(name_f[u], name_f[v]) for u in name_f for v in rf[u] if v in name_f}
    ph = {(name_h[u], name_h[v]) for u in name_h for v in rh[u] if v in name_h}
    assert pf == ph, "different order"


def _action_ends(s: Stream) -> list[int]:
    """The range ends ``hazard_graph_within`` takes: after an action, or the stream's end."""
    return [int(i) + 1 for i in np.flatnonzero(s.cats() != int(Cat.STATE))] + [len(s)]


@pytest.fixture
def little_context(monkeypatch):
    """Tiny context margins and fan-out cap, so that small streams exercise the context check
    (every margin, the whole-prefix fallback, and groups larger than the cap)."""
    import drawopt.analysis.graph as gm
    monkeypatch.setattr(gm, "_CONTEXT_MARGINS", (0, 1, 3))
    monkeypatch.setattr(gm, "_FAN_CAP", 2)


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_hazard_graph_within_is_the_graph_there(kind: str, little_context) -> None:
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate(kind, 300, seed=3)
    ends = _action_ends(s)
    rng = np.random.default_rng(7)
    from drawopt.analysis.graph import hazard_graph_within
    for pol in ("declared", "opaque"):
        for _ in range(6):
            stop = int(rng.choice(ends))
            _same_within(s, pol, int(rng.integers(0, stop)), stop)
        # several ranges at once (the state events shared; a whole-prefix graph given to later ranges)
        stops = sorted(int(x) for x in rng.choice(ends, 4))
        ranges = [(int(rng.integers(0, b)), b) for b in stops]
        for (a, b), h in zip(ranges, hazard_graph_within(s, pol, ranges)):
            _same_within(s, pol, a, b, h)


@pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(s=streams(max_commands=60) if streams is not None else None, data=st.data())
def test_hazard_graph_within_on_random_streams(s: Stream, data) -> None:
    import drawopt.analysis.graph as gm
    if not len(s):
        return
    stop = data.draw(st.sampled_from(_action_ends(s)))
    start = data.draw(st.integers(0, stop))
    with pytest.MonkeyPatch.context() as mp:  # (as little_context: a fixture would outlive the examples)
        mp.setattr(gm, "_CONTEXT_MARGINS", (0, 1, 3))
        mp.setattr(gm, "_FAN_CAP", 2)
        for pol in ("none", "declared", "opaque"):
            _same_within(s, pol, start, stop)


def test_hazard_graph_within_takes_the_whole_node_at_the_range_end() -> None:
    """A range that ends inside a node: the draw after the partial flush has no access of its
    own, but the indirect draw after it (outside the range) joins its node and orders that node
    after the flush in the whole graph. The range's graph is built on to the node's end, so the
    draw is after the flush there too (it had no edge: found by the random-stream test)."""
    from drawopt.analysis.graph import hazard_graph_within
    g, s = G("OMSetRenderTargets\nGpuSendPipelinedEvent CS_PARTIAL_FLUSH\nDrawInstanced 3 1 0 0\n"
             "DrawInstancedIndirect args 0\n")
    [h] = hazard_graph_within(s, "none", [(0, 3)])
    assert h.graph["stop"] == 4 and node_of_command(h).tolist() == [0, 0, 1, 1]
    assert list(zip(h.eu.tolist(), h.ev.tolist())) == [(0, 1)]
    for pol in ("none", "declared", "opaque"):
        _same_within(s, pol, 0, 3)


def test_hazard_graph_within_needs_the_context(monkeypatch) -> None:
    """Three dispatches write the front end's data (one commuting group, larger than the cap), then
    three order-independent indirect draws read it: the later two get their edge from the first
    draw, which is a node of its own. A range from the first draw does not see the dispatches'
    group (its graph would make the three draws one node): the context check fails there and the
    range is widened (here to the whole prefix), giving the same nodes."""
    import drawopt.analysis.graph as gm
    from drawopt.analysis.graph import hazard_graph_within
    monkeypatch.setattr(gm, "_CONTEXT_MARGINS", (0,))
    monkeypatch.setattr(gm, "_FAN_CAP", 2)
    g, s = G("SetPipelineState cs\n" + "Dispatch 1 1 1\n" * 3 + "SetPipelineState oi\n"
             + "DrawInstancedIndirect args 0\n" * 3)
    built = []
    real = gm._Builder.arrays

    def spy(self):
        got = real(self)
        built.append((self.start, self.inexact))
        return got

    monkeypatch.setattr(gm._Builder, "arrays", spy)
    [h] = hazard_graph_within(s, "declared", [(4, len(s))])
    assert built == [(4, True), (0, False)]  # from the first draw (a node starts there), then all
    assert node_of_command(h)[4:].tolist() == [3, 3, 4, 4]
    _same_within(s, "declared", 4, len(s))
    assert hazard_graph_within(s, "declared", []) == []


# ---------------------------------------------------------------------- access classes (signatures merged)
def _hazard_key(h) -> tuple:
    return (h.first.tolist(), h.last.tolist(), h.kind.tolist(), h.eu.tolist(), h.ev.tolist(), h.reason.tolist(),
            [h.resource(i) for i in range(h.number_of_edges())], h.graph)


def _graphs_with_and_without_classes(s: Stream, pol: str, mp: pytest.MonkeyPatch) -> tuple[tuple, tuple]:
    """(build_graph, hazard_graph) keys with the access classes and with one class per signature
    (``_merge_tails`` the identity: every distinct argument row its own, as before the classes)."""
    import drawopt.analysis.graph as gm
    from drawopt.analysis.graph import hazard_graph
    new = (_graph_key(build_graph(s, pol)), _hazard_key(hazard_graph(s, pol)))
    with mp.context() as m:
        m.setattr(gm, "_merge_tails", lambda first, inv, rows, keep: (first, inv))
        old = (_graph_key(build_graph(s, pol)), _hazard_key(hazard_graph(s, pol)))
    return new, old


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_access_classes_give_the_graph_of_full_signatures(kind: str, monkeypatch) -> None:
    """Signatures equal but in arguments no access reads (an indirect draw's offsets and counts) share
    one access list: the graph (nodes, edges, reasons, resources: the numbering of the resources
    decides which resource an edge names) is the one of one access list per signature, compiled and
    pure; on gpu-driven streams (indirect draws at many offsets) the classes are fewer."""
    gen = pytest.importorskip("drawopt.gen")
    import drawopt.analysis.graph as gm
    s = gen.generate(kind, 1500, seed=11)
    merged = []
    real = gm._merge_tails

    def spy(first, inv, rows, keep):
        got = real(first, inv, rows, keep)
        merged.append((first.size, got[0].size))
        return got

    monkeypatch.setattr(gm, "_merge_tails", spy)
    for pure in ("0", "1"):
        monkeypatch.setenv("DRAWOPT_PURE", pure)
        for pol in ("none", "declared", "opaque"):
            new, old = _graphs_with_and_without_classes(s, pol, monkeypatch)
            assert new == old
    if kind == "gpu-driven":
        assert any(after < before for before, after in merged)


@pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=60) if streams is not None else None)
def test_access_classes_on_random_streams(s: Stream) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for pol in ("none", "declared", "opaque"):
            new, old = _graphs_with_and_without_classes(s, pol, mp)
            assert new == old


@pytest.mark.parametrize("seed", range(4))
def test_action_signature_classes_compiled_matches_pure(seed: int) -> None:
    """``_action_signatures`` with ``tail_keep``: the same classes from the kernel's rows and from the
    twin's (rebuilt from the first actions); each class's actions are those whose signatures agree in
    the kept columns, classes in order of their first signature."""
    from drawopt.analysis.graph import _action_signatures
    _compiled_graph_module()
    rng = np.random.default_rng(seed)
    n, m, na = 2000, 1500, 40000 if seed == 0 else 2500
    ev_slot, ev_cmd = rng.integers(0, 8, m), rng.integers(0, n, m)
    o = np.lexsort((ev_cmd, ev_slot))
    ev_slot, ev_cmd = ev_slot[o], ev_cmd[o]
    act = np.sort(rng.integers(0, n, na))
    opq = np.unique(rng.integers(0, n, 2))
    opq = opq[~np.isin(opq, ev_cmd)]
    slots = np.array([0, 3, 5], np.int64)
    crank = np.append(rng.integers(0, 3, n), -1)
    head = rng.integers(0, 3, (na, 2))
    # seed 0: more distinct signatures than the kernel's first store (2^14), few classes; odd seeds:
    # negative arguments (a zeroed column is then not the least); seed 2: no unkept column set
    tail = rng.integers(-2 if seed % 2 else 0, 4, (na, 3))
    keep = np.stack([head[:, 0] != 1, np.ones(na, bool), head[:, 0] == 2], axis=1)  # (by "opcode", as _TAIL_KEEP)
    if seed == 0:
        tail[~keep] = rng.integers(0, 1 << 40, int((~keep).sum()))
    if seed == 2:
        tail[~keep] = 0
    full = _action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail, pure=False)
    a = _action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail, pure=False, tail_keep=keep)
    b = _action_signatures(ev_cmd, ev_slot, slots, act, opq, crank, head, tail, pure=True, tail_keep=keep)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    first, cls = a
    assert (first.size < full[0].size) == (seed != 2)
    assert (full[0].size > 1 << 14) == (seed == 0) and (seed != 0 or first.size < 1 << 14)
    # a class: the signatures equal once their first action's unkept columns are zeroed
    masked = np.where(keep, tail, 0)
    pairs = {tuple(r) for r in np.c_[full[1], cls].tolist()}
    assert len(dict(pairs)) == len(pairs)  # a signature lies in one class
    for j, f in enumerate(first.tolist()):
        members = np.flatnonzero(cls == j)
        assert full[1][f] == full[1][members].min()  # the first action of the class's first signature
        assert (masked[members] == masked[f]).all() and (head[members] == head[f]).all()
    assert (np.diff(full[1][first]) > 0).all()  # in order of their first signature
