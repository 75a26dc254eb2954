"""THE resource-access rule (:mod:`drawopt.analysis.access`): GPU writes are the pipeline's declared
``writes=`` plus every UAV reachable through the tables and root UAVs bound when it runs
(issue 12, item 4). validate, the flush pass, the graph (hazards, schedule) and the
verifier's own implementation must all agree on it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from strategies import VERIFIABLE_DRAWS, multi_draws, streams

import drawopt
from drawopt.analysis.access import VIA_DECLARED, VIA_ROOT, VIA_TABLE, gpu_writes, may_gpu_write
from drawopt.analysis.graph import build_graph
from drawopt.ir.decls import Buffer
from drawopt.result import optimize
from drawopt.validate import findings, missing_flushes
from drawopt.verify import verify
from drawopt.verify.model import Canon
from drawopt.verify.records import expand
from drawopt.verify.slots import column_universe

# the SPEC illustration with the cull pipeline writing cullargs through a bound UAV table
# (root parameter 3) instead of a declared writes=
CULL = """drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer   verts    size=67108864
buffer   ib16     size=1048576
buffer   cullargs size=65536 frontend
target   hdr      1920x1080 R16G16B16A16_FLOAT
depth    zbuf     1920x1080 D32_FLOAT
heap     res      CBV_SRV_UAV 4096
view     res[0]   srv verts
view     res[1]   uav cullargs
rootsig  main     table(srv,1) constants(4) table(srv,64) table(uav,1)
pipeline cull     cs=cull root=main params=1,3
pipeline opaque   vs=pull ps=lit layout=none blend=opaque depth=less,write root=main params=0,1

SetDescriptorHeaps res
SetComputeRootSignature main
SetComputeRoot32BitConstants 1 4 100 0 0 0
SetComputeRootDescriptorTable 3 res[1]
SetPipelineState cull
Dispatch 64 1 1
{flushes}OMSetRenderTargets hdr zbuf
RSSetViewports 0 0 1920 1080 0 1
RSSetScissorRects 0 0 1920 1080
SetGraphicsRootSignature main
SetGraphicsRootDescriptorTable 0 res[0]
SetPipelineState opaque
IASetPrimitiveTopology TRIANGLELIST
IASetIndexBuffer ib16 R16_UINT 0
SetGraphicsRoot32BitConstants 1 4 0x3f800000 0 0 0
MultiDrawIndexedInstancedIndirect 100 cullargs 0 20
"""
FLUSHES = "GpuSendPipelinedEvent CS_PARTIAL_FLUSH\nFlushGpuCacheRange DEFAULT_PFP\n"


def names(s: drawopt.Stream, cmds) -> list[str]:
    return [s.spec(int(i)).name for i in cmds]


def test_table_uav_is_a_gpu_write():
    s = drawopt.loads(CULL.format(flushes=""))
    w = gpu_writes(s)
    assert names(s, w.cmd) == ["Dispatch"]
    assert s.decls.items[int(w.res[0])].name == "cullargs" and int(w.via[0]) == VIA_TABLE
    assert may_gpu_write(s)[s.decls.index["cullargs"]]


def test_table_writes_follow_each_bound_table():
    """Dispatches under two uav tables (one reaching two views, one a single view) and a third
    binding of an srv-only table: each dispatch writes what its own table reaches, the srv table
    nothing (only a ``uav`` range writes), listed by command then resource."""
    s = drawopt.loads("""drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer a size=64
buffer b size=64
buffer c size=64
heap res CBV_SRV_UAV 8
view res[0] uav a
view res[1] uav b
view res[2] uav c
view res[4] srv c
rootsig cr table(uav,2) table(srv,1)
pipeline k cs=k root=cr
pipeline r cs=r root=cr params=1
SetDescriptorHeaps res
SetComputeRootSignature cr
SetComputeRootDescriptorTable 1 res[4]
SetPipelineState k
SetComputeRootDescriptorTable 0 res[0]
Dispatch 1 1 1
SetComputeRootDescriptorTable 0 res[2]
Dispatch 1 1 1
SetComputeRootDescriptorTable 0 res[0]
Dispatch 1 1 1
SetPipelineState r
Dispatch 1 1 1
""")
    w = gpu_writes(s)
    got = [(int(c), s.decls.items[int(r)].name, int(v)) for c, r, v in zip(w.cmd, w.res, w.via)]
    assert got == [(5, "a", VIA_TABLE), (5, "b", VIA_TABLE), (7, "c", VIA_TABLE), (9, "a", VIA_TABLE),
                   (9, "b", VIA_TABLE)]


def test_validate_reports_the_unflushed_read():
    s = drawopt.loads(CULL.format(flushes=""))
    needs = missing_flushes(s)
    assert any(n.what == "args" and n.buffer == "cullargs" for n in needs)
    assert [f.rule for f in findings(s)].count("missing-flush") >= 1


def test_flush_inserts_the_sequence():
    s = drawopt.loads(CULL.format(flushes=""))
    out = optimize(s, passes="flush", verify=False).stream
    got = [c.name for c in out.commands()]
    k = got.index("MultiDrawIndexedInstancedIndirect")
    assert got[k - 2:k] == ["GpuSendPipelinedEvent", "FlushGpuCacheRange"]
    assert not [f for f in findings(out) if f.rule == "missing-flush"]
    assert verify(s, out).equivalent


def test_drop_redundant_flushes_keeps_needed_ones():
    s = drawopt.loads(CULL.format(flushes=FLUSHES))
    assert not findings(s)
    out = optimize(s, passes="flush{drop-redundant-flushes=true}", verify=False).stream  # the pass itself
    assert len(out) == len(s)
    assert verify(s, out).equivalent


def test_root_uav_and_declared_writes():
    text = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   a        size=64
buffer   b        size=64
target   rt       64x64 R8G8B8A8_UNORM
rootsig  main     uav constants(1)
pipeline w        vs=v ps=p root=main writes=b

OMSetRenderTargets rt
RSSetViewports 0 0 64 64 0 1
RSSetScissorRects 0 0 64 64
IASetPrimitiveTopology TRIANGLELIST
SetGraphicsRootSignature main
SetGraphicsRootShaderResourceView 0 a 0
SetGraphicsRoot32BitConstants 1 1 0
SetPipelineState w
DrawInstanced 3 1 0 0
"""
    s = drawopt.loads(text)
    w = gpu_writes(s)
    got = {(s.decls.items[int(r)].name, int(v)) for r, v in zip(w.res, w.via)}
    assert got == {("a", VIA_ROOT), ("b", VIA_DECLARED)}


def test_graph_orders_the_table_write_before_the_read():
    s = drawopt.loads(CULL.format(flushes=""))
    g = build_graph(s)
    disp = next(i for i, c in enumerate(s.commands()) if c.name == "Dispatch")
    mdi = len(s) - 1
    node = {c: n for n, d in g.nodes(data=True) for c in range(d["first"], d["last"] + 1)}
    import networkx as nx
    assert nx.has_path(g, node[disp], node[mdi])


def _verifier_buffer_writes(s: drawopt.Stream) -> set[tuple[int, str]]:
    canon = Canon()
    R = expand(s, canon, column_universe([s]))
    bufs = {d.name for d in s.decls.items if isinstance(d, Buffer)}
    out = set()
    for a, r in zip(R.w_act.tolist(), R.w_res.tolist()):
        cmd = int(R.a_cmd[a])
        nm = canon.name(r)
        if nm in bufs and s.spec(cmd).name != "CopyBufferRegion":
            out.add((cmd, nm))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=40, min_decls=True))
def test_agrees_with_the_verifiers_implementation(s):
    """The verifier implements the same documented rule on its own state tracker."""
    assume(multi_draws(s) < VERIFIABLE_DRAWS)  # under the verifier's multi-draw limit
    w = gpu_writes(s)
    mine = {(int(c), s.decls.items[int(r)].name) for c, r in zip(w.cmd, w.res)
            if isinstance(s.decls.items[int(r)], Buffer)}
    assert mine == _verifier_buffer_writes(s)


@pytest.mark.parametrize("pure", [True, False])
def test_pure_and_compiled_scans_agree(pure, monkeypatch):
    from drawopt.analysis.state import scan
    s = drawopt.loads(CULL.format(flushes=""))
    a, b = gpu_writes(s, scan(s, pure=True)), gpu_writes(s, scan(s, pure=False))
    assert (a.cmd == b.cmd).all() and (a.res == b.res).all()
