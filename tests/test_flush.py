"""The ``flush`` pass and :mod:`drawopt.analysis.flushrules` (multidraw-indirect-and-flushes.txt).

Exact outputs for each case live in ``tests/golden/flush/``; these tests check the
rules on built streams and the acceptance on generated gpu-driven streams: every
required flush is present (``drawopt.validate`` finds no ``missing-flush``), every
flush in the output is needed (removing any one makes validate complain) and the
output is a fixpoint (nothing left to insert or drop).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from strategies import streams

from drawopt.analysis.flushrules import (
    COMPUTE_BOP,
    CS,
    GRAPHICS_L2,
    PS,
    VS,
    FlushTracker,
    flush_access,
    needs_cs_partial,
    required_sequence,
    writer_stage,
)
from drawopt.analysis.state import track
from drawopt.errors import InputError
from drawopt.gen import generate
from drawopt.ir.ops import BY_NAME, Cat
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes.flush import FlushPass, _rebinds_in_range, index_rebinds, plan_flushes
from drawopt.passmanager import AnalysisManager, PassManager, parse_pipeline
from drawopt.validate import findings


def run(stream: Stream, passes: str = "flush") -> tuple[Stream, dict]:
    pm = PassManager(parse_pipeline(passes), verify_each=True)
    out = pm.run(stream)
    return out, pm.records[-1].report


def missing(stream: Stream) -> list:
    return [f for f in findings(stream) if f.rule == "missing-flush"]


def names(stream: Stream) -> list[str]:
    """Every command as ``Name arg ...`` (decoded; variadics left out)."""
    return [" ".join([c.name, *(str(a) for a in c.args)]) for c in stream.commands()]


def flush_lines(stream: Stream) -> list[str]:
    return [t for t in names(stream) if t.split()[0] in ("GpuSendPipelinedEvent", "FlushGpuCacheRange",
                                                           "FlushGpuCachesBottomOfPipe")]


def base(fast: bool = False, auto: bool = True, context: str = "graphics") -> StreamBuilder:
    b = StreamBuilder(context=context, fast_semantics=fast, auto_gpu_flush=auto)
    b.buffer("ib", 1 << 16)
    b.buffer("args", 4096)
    b.buffer("args2", 4096)
    b.buffer("idx", 1 << 16)
    b.buffer("count", 16)
    b.target("rt", 64, 64)
    b.rootsig("main", "constants(4)")
    b.pipeline("cull", cs="cull", root="main", writes=("args",))
    b.pipeline("cull2", cs="cull2", root="main", writes=("args2",))
    b.pipeline("vsw", vs="gen", ps="p", root="main", writes=("args",), uav_stage="vs")
    b.pipeline("gsw", vs="v", gs="g", ps="p", root="main", writes=("args2",), uav_stage="gs")
    b.pipeline("psw", vs="v", ps="gen", root="main", writes=("idx",))
    b.pipeline("draw", vs="v", ps="p", root="main")
    if context == "graphics":
        b.OMSetRenderTargets("rt")
        b.SetGraphicsRootSignature("main")
    b.SetComputeRootSignature("main")
    return b


# --------------------------------------------------------------------------- the rules as data
def test_required_sequences_match_the_seed() -> None:
    assert required_sequence(()) == [GRAPHICS_L2]
    assert [str(s) for s in required_sequence({CS})] == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH",
                                                         "FlushGpuCacheRange DEFAULT_PFP"]
    assert [str(s) for s in required_sequence({VS})][0] == "GpuSendPipelinedEvent VS_PARTIAL_FLUSH"
    assert [str(s) for s in required_sequence({PS, CS, VS})] == [
        "GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "GpuSendPipelinedEvent VS_PARTIAL_FLUSH",
        "GpuSendPipelinedEvent PS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]
    assert required_sequence({CS, VS}, "compute") == [COMPUTE_BOP]
    assert needs_cs_partial(True, True) and needs_cs_partial(False, False) and not needs_cs_partial(False, True)


def test_writer_stage_classes() -> None:
    b = base()
    d = b.decls
    assert writer_stage(d["cull"]) == CS
    assert writer_stage(d["vsw"]) == VS and writer_stage(d["gsw"]) == VS
    assert writer_stage(d["psw"]) == PS


def test_tracker_partial_before_l2_only() -> None:
    tr = FlushTracker()
    tr.write(0, 7, VS, True)
    assert tr.missing([7]) == ({VS}, True)
    assert not tr.event(PS)              # another class's event drains nothing
    assert not tr.l2()                   # too early: the VS work is not drained
    assert tr.event(VS) and tr.missing([7]) == (set(), True)
    assert tr.l2() and tr.missing([7]) == (set(), False)
    tr.write(1, 8, CS, False)            # automatic flush on: drained when issued
    assert tr.missing([8]) == (set(), True)
    assert tr.barrier(8) and not tr.pending()


def test_access_tables() -> None:
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("draw")
    b.IASetIndexBuffer("idx", "R16_UINT", 0)
    b.MultiDrawIndexedInstancedIndirectAuto("count", 0, 10, "args", 0, 20)
    s = b.build()
    acc = flush_access(s)
    assert acc.w_cmd.tolist() == [4] and s.decls[int(acc.w_res[0])].name == "args" and acc.w_partial.all()
    got = sorted((int(c), s.decls[int(r)].name, int(k)) for c, r, k in zip(acc.r_cmd, acc.r_buf, acc.r_kind))
    assert got == [(7, "args", 0), (7, "count", 1), (7, "idx", 2)]


# --------------------------------------------------------------------------- insertion
@pytest.mark.parametrize("fast,auto,want", [
    (False, True, ["FlushGpuCacheRange DEFAULT_PFP"]),
    (True, True, ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]),
    (False, False, ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]),
])
def test_graphics_cs_writer(fast: bool, auto: bool, want: list[str]) -> None:
    b = base(fast, auto)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    b.DrawInstancedIndirect("args", 16)
    s = b.build()
    assert missing(s)
    out, rep = run(s)
    assert names(out)[-3 - len(want):] == ["SetPipelineState draw", *want, "DrawInstancedIndirect args 0",
                                           "DrawInstancedIndirect args 16"][-3 - len(want):]
    assert flush_lines(out) == want and rep["flush_points"] == 1
    assert not missing(out)


def test_cs_enable_automatic_gpu_flush_false_midstream() -> None:
    b = base()
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    b.CSEnableAutomaticGpuFlush(False)
    b.SetPipelineState("cull2")
    b.Dispatch(1, 1, 1)
    b.CSEnableAutomaticGpuFlush(True)    # turning it back on later does not help the earlier Dispatch
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args2", 0)
    out, _ = run(b.build())
    assert flush_lines(out) == ["FlushGpuCacheRange DEFAULT_PFP", "GpuSendPipelinedEvent CS_PARTIAL_FLUSH",
                                "FlushGpuCacheRange DEFAULT_PFP"]
    assert not missing(out)


@pytest.mark.parametrize("pipe,event", [("vsw", "VS_PARTIAL_FLUSH"), ("gsw", "VS_PARTIAL_FLUSH"),
                                        ("psw", "PS_PARTIAL_FLUSH")])
def test_graphics_stage_writers(pipe: str, event: str) -> None:
    b = base()
    b.SetPipelineState(pipe)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("draw")
    buf = {"vsw": "args", "gsw": "args2"}.get(pipe)
    if buf:
        b.DrawInstancedIndirect(buf, 0)
    else:  # the PS writer writes index data
        b.IASetIndexBuffer("idx", "R16_UINT", 0)
        b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    out, _ = run(b.build())
    assert flush_lines(out) == [f"GpuSendPipelinedEvent {event}", "FlushGpuCacheRange DEFAULT_PFP"]
    i = names(out).index(f"GpuSendPipelinedEvent {event}")
    assert names(out)[i + 2].startswith("Draw")      # as late as possible: right before the reader
    assert not missing(out)


def test_mixed_writers_one_point() -> None:
    b = base(fast=True)
    b.SetPipelineState("vsw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("psw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("cull2")
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("draw")
    b.IASetIndexBuffer("idx", "R16_UINT", 0)
    b.DrawIndexedInstancedIndirect("args", 0)
    b.DrawInstancedIndirect("args2", 0)
    out, rep = run(b.build())
    assert flush_lines(out) == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "GpuSendPipelinedEvent VS_PARTIAL_FLUSH",
                                "GpuSendPipelinedEvent PS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]
    assert rep["flush_points"] == 1 and not missing(out)


def test_no_coalescing_across_a_new_write() -> None:
    """A pending PS write read only after another PS write waits for that later point."""
    b = base()
    b.SetPipelineState("vsw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("psw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)           # needs VS; idx (PS) is read only after the next PS write
    b.SetPipelineState("psw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("draw")
    b.IASetIndexBuffer("idx", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    out, rep = run(b.build())
    assert flush_lines(out) == ["GpuSendPipelinedEvent VS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP",
                                "GpuSendPipelinedEvent PS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]
    assert rep["flush_points"] == 2 and not missing(out)


def test_async_compute_frontend_buffers() -> None:
    b = StreamBuilder(context="compute", fast_semantics=True)
    b.buffer("args", 4096, frontend=True)
    b.buffer("tmp", 4096)
    b.rootsig("main", "constants(4)")
    b.pipeline("cull", cs="cull", root="main", writes=("args",))
    b.pipeline("blur", cs="blur", root="main", writes=("tmp",))
    b.SetComputeRootSignature("main")
    b.SetPipelineState("cull")
    b.Dispatch(4, 1, 1)
    b.SetPipelineState("blur")
    b.Dispatch(4, 1, 1)
    s = b.build()
    assert missing(s)
    out, _ = run(s)
    assert names(out)[-1] == "FlushGpuCachesBottomOfPipe DEFAULT"
    assert flush_lines(out) == ["FlushGpuCachesBottomOfPipe DEFAULT"] and not missing(out)
    # a graphics-context flush does not count on async compute
    b.FlushGpuCacheRange("DEFAULT_PFP")
    out, _ = run(b.build())
    assert flush_lines(out) == ["FlushGpuCacheRange DEFAULT_PFP", "FlushGpuCachesBottomOfPipe DEFAULT"]


def test_already_correct_is_unchanged_and_barrier_counts() -> None:
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    b.SetPipelineState("cull2")
    b.Dispatch(1, 1, 1)
    b.ResourceBarrier("args2", "UNORDERED_ACCESS", "INDIRECT_ARGUMENT")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args2", 0)
    s = b.build()
    for opts in ("flush", "flush{drop-redundant-flushes=true}"):
        pm = PassManager(parse_pipeline(opts), verify_each=True)
        assert pm.run(s) is s and not pm.records[0].modified


def test_inserts_only_what_is_missing() -> None:
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    out, rep = run(b.build())
    assert flush_lines(out) == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]
    assert rep["flushes_inserted"] == 1


def _redundant_stream() -> Stream:
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.FlushGpuCacheRange("DEFAULT_PFP")          # before the drain: covers nothing
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")  # nothing pending
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.FlushGpuCacheRange("DEFAULT")              # not a seed flush: never touched
    b.DrawInstancedIndirect("args", 16)
    return b.build()


def test_redundant_flushes_dropped_only_with_the_option() -> None:
    s = _redundant_stream()
    pm = PassManager(parse_pipeline("flush"), verify_each=True)
    assert pm.run(s) is s
    out, rep = run(s, "flush{drop-redundant-flushes=true}")
    assert rep["flushes_dropped"] == 3 and rep["flushes_inserted"] == 0
    assert flush_lines(out) == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP",
                                "FlushGpuCacheRange DEFAULT"]
    assert not missing(out)


def test_partial_flush_kept_as_uav_barrier() -> None:
    """Fast semantics: a CS_PARTIAL_FLUSH between a Dispatch and one reading its UAV stays."""
    b = base(fast=True)
    b.buffer("tmp", 256)
    b.pipeline("sim", cs="sim", root="main", writes=("tmp",))
    b.pipeline("use", cs="use", root="main", reads=("tmp",))
    b.SetPipelineState("sim")
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("use")
    b.Dispatch(1, 1, 1)
    out, rep = run(b.build(), "flush{drop-redundant-flushes=true}")
    assert flush_lines(out) == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH"] and rep["flushes_dropped"] == 1


def test_opaque_is_conservative() -> None:
    """An Opaque command neither satisfies a read (insertion still happens) nor lets a
    flush before it be dropped (it may read anything)."""
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.Opaque("ExecuteIndirectSomething")
    b.SetPipelineState("cull2")
    b.Dispatch(1, 1, 1)
    b.Opaque("UnknownCall")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args2", 0)
    out, rep = run(b.build(), "flush{drop-redundant-flushes=true}")
    assert rep["flushes_dropped"] == 0
    assert flush_lines(out)[2:] == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]


# --------------------------------------------------------------------------- DrawIndexedX re-binds
def _x_stream(with_later_indexed: bool = True) -> Stream:
    b = StreamBuilder()
    b.buffer("ib", 1 << 16)
    b.buffer("ibx", 1 << 16)
    b.buffer("verts", 1 << 20)
    b.target("rt", 64, 64)
    b.rootsig("main", "constants(4)", "srv")
    b.pipeline("x", vs="pull", ps="p", root="main", contract="x(vertex_bits=16,perdraw=1)")
    b.pipeline("draw", vs="v", ps="p", root="main", layout="pos")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("main")
    b.IASetIndexBuffer("ib", "R16_UINT", 64)
    b.SetPipelineState("draw")
    b.DrawIndexedInstanced(36, 1, 0, 0, 0)
    b.SetPipelineState("x")
    b.DrawIndexedX("ibx", 0, "R16_UINT", 36, 0)
    b.DrawIndexedX("ibx", 72, "R16_UINT", 36, 1 << 16)
    b.SetPipelineState("draw")
    b.DrawInstanced(3, 1, 0, 0)                 # not indexed: no re-bind for it
    if with_later_indexed:
        b.DrawIndexedInstanced(36, 1, 36, 0, 0)
    return b.build()


def test_index_buffer_reissued_after_drawindexedx() -> None:
    s = _x_stream()
    assert any(f.rule == "index-buffer-undefined" for f in findings(s))
    assert index_rebinds(s) == [(7, 2)]           # after the last DrawIndexedX of the run
    out = FlushPass().apply(s, AnalysisManager()).stream
    t = names(out)
    assert t[8] == "IASetIndexBuffer ib R16_UINT 64" and t[7].startswith("DrawIndexedX")
    assert len(out) == len(s) + 1
    assert not findings(out)


def test_index_buffer_reissue_verifies() -> None:
    out, rep = run(_x_stream())          # with --verify-each
    assert rep["index_rebinds"] == 1


def test_no_rebind_without_a_later_indexed_draw() -> None:
    s = _x_stream(with_later_indexed=False)
    assert index_rebinds(s) == []
    pm = PassManager([FlushPass()], verify_each=True)
    assert pm.run(s) is s


# --------------------------------------------------------------------------- generated streams
MODES = list(itertools.product(("graphics", "compute"), (False, True), ("on", "off", "toggle"),
                               ("missing", "redundant", "correct")))


def _gen(ctx: str, fast: bool, auto: str, fl: str, n: int = 600, seed: int = 11) -> Stream:
    return generate("gpu-driven", n, seed=seed, flushes=fl, context=ctx, fast_semantics=fast, auto_gpu_flush=auto)


def _flush_cmds(s: Stream) -> np.ndarray:
    return np.flatnonzero(s.cats() == int(Cat.FLUSH))


@pytest.mark.parametrize("ctx,fast,auto,fl", MODES, ids=["-".join(map(str, m)) for m in MODES])
def test_gpu_driven_every_required_flush_and_no_redundant_one(ctx: str, fast: bool, auto: str, fl: str) -> None:
    s = _gen(ctx, fast, auto, fl)
    out, _ = run(s, "flush{drop-redundant-flushes=true}")
    assert not missing(out)
    again = plan_flushes(out, drop_redundant=True)
    assert again.inserts == {} and again.drops == []          # nothing left to add or drop
    correct = _gen(ctx, fast, auto, "correct")
    if fl == "correct":
        assert out is s
    elif fl == "redundant":
        assert out == correct                                  # exactly the generator's correct stream
    else:
        assert _flush_cmds(out).size <= _flush_cmds(correct).size
    # every flush is needed: without any one of them, a front-end read goes unflushed. (On
    # async compute the input's bottom-of-pipe flushes after each writer group, as the seed
    # shows them, are kept although one at the end would cover every group: they cover
    # writes, so they are not redundant; the count check above bounds what is inserted.)
    if fl != "correct" and ctx == "graphics":
        for i in _flush_cmds(out).tolist():
            cut = out.take(np.delete(np.arange(len(out)), i))
            assert missing(cut), f"flush at {i} ({names(out)[i]}) is not needed"


def test_gpu_driven_idempotent_without_drop() -> None:
    s = _gen("graphics", True, "toggle", "missing")
    out, _ = run(s)
    pm = PassManager(parse_pipeline("flush"), verify_each=True)
    assert pm.run(out) is out


def test_100k_draws() -> None:
    # speed is measured by bench/, not asserted here (the machine is shared)
    s = generate("gpu-driven", 100_000, seed=5, flushes="missing", fast_semantics=True)
    out = FlushPass(drop_redundant_flushes=True).apply(s, None).stream  # type: ignore[arg-type]
    assert not missing(out)


# --------------------------------------------------------------------------- random streams
def _subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def _without(s: Stream, *names: str) -> Stream:
    drop = s.cats() == int(Cat.FLUSH)
    for n in names:
        drop |= s.op == BY_NAME[n].code
    return s.take(np.flatnonzero(~drop))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=50))
def test_random_streams_get_every_flush_and_keep_everything_else(s: Stream) -> None:
    """On any valid stream: only flushes and index-buffer re-binds are added, only flushes
    removed (and only with the option), everything else keeps its order, and validate
    finds no missing flush afterwards."""
    try:
        track(s)
    except InputError:
        assume(False)
    for drop in (False, True):
        out = FlushPass(drop_redundant_flushes=drop).apply(s, AnalysisManager()).stream
        out.check()
        assert not missing(out)
        rebinds = _rebinds_in_range(s, index_rebinds(s))
        if rebinds:
            assert _without(s, "IASetIndexBuffer") == _without(out, "IASetIndexBuffer")
            assert len(_without(out)) == len(_without(s)) + len(rebinds)
        else:
            assert _without(s) == _without(out)
        if not drop:
            assert _subsequence(flush_lines(s), flush_lines(out))
        else:
            assert not plan_flushes(out, drop_redundant=True).drops


def test_no_rebind_that_reads_past_the_end() -> None:
    """An input draw that read an undefined index buffer after DrawIndexedX is not "fixed" with a re-bind
    under which it reads past the buffer's end: that would add an index-range finding (no pass may)."""
    text = """drawopt 1
buffer ib size=64
buffer ibx size=65536
buffer pd size=64 cpu
target rt 64x64 R8G8B8A8_UNORM
rootsig rs srv
pipeline x vs=pull ps=f root=rs params=0 contract=x(vertex_bits=16,perdraw=0)
pipeline p vs=v ps=f layout=pos
OMSetRenderTargets rt
IASetIndexBuffer ib R16_UINT 0
SetPipelineState x
SetGraphicsRootSignature rs
SetGraphicsRootShaderResourceView 0 pd 0
DrawIndexedX ibx 0 R16_UINT 3 0
SetPipelineState p
DrawIndexedInstanced 300 1 0 0 0
"""
    from drawopt.ir.formats import loads
    from drawopt.validate import findings

    s = loads(text, file="<t>")
    assert [f.rule for f in findings(s)] == ["index-buffer-undefined"]
    assert index_rebinds(s) and not _rebinds_in_range(s, index_rebinds(s))
    out = FlushPass().apply(s, AnalysisManager()).stream
    assert [f.rule for f in findings(out)] == ["index-buffer-undefined"]
    ok = loads(text.replace("DrawIndexedInstanced 300", "DrawIndexedInstanced 30"), file="<t>")
    assert _rebinds_in_range(ok, index_rebinds(ok)) == index_rebinds(ok)     # in range: re-bound
    assert findings(FlushPass().apply(ok, AnalysisManager()).stream) == []
