"""Findings: every seed rule with a failing and a passing example, and the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from test_state import builder, semantic_streams

from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.validate import RULES, Finding, findings, missing_flushes

try:
    from drawopt.ir import formats
except ImportError:  # pragma: no cover - formats is part of the package
    formats = None


def rules(s: Stream) -> list[str]:
    return [f.rule for f in findings(s)]


def only(s: Stream, rule: str) -> list[Finding]:
    return [f for f in findings(s) if f.rule == rule]


def gfx(**kw) -> StreamBuilder:
    b = builder(**kw)
    b.pipeline("cntw", cs="c", root="rsA", params=[], writes=["cnt"])
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.SetComputeRootSignature("rsA")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetGraphicsRootDescriptorTable(3, "h0[1]")
    b.SetComputeRootDescriptorTable(0, "h0[0]")
    b.SetComputeRootDescriptorTable(3, "h0[0]")
    return b


def test_rules_are_described():
    assert set(RULES) == {"no-pipeline", "table-undefined", "bundle-heaps", "index-buffer-undefined",
                          "index-range", "missing-flush", "gs-onchip-tessellation", "draw-on-compute"}
    assert all(isinstance(v, str) and v for v in RULES.values())


# ---------------------------------------------------------------------- draw-on-compute
def test_draw_on_compute():
    b = gfx(context="compute")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    ok = b.build()
    assert "draw-on-compute" not in rules(ok)
    b.SetPipelineState("psw")
    b.DrawInstanced(3, 1, 0, 0)
    bad = only(b.build(), "draw-on-compute")
    assert len(bad) == 1 and bad[0].cmd == len(ok) + 1 and "async compute" in bad[0].message
    # a draw that cannot run writes nothing: the flush findings are the dispatch's alone
    assert [f.message for f in only(b.build(), "missing-flush")] == [f.message for f in only(ok, "missing-flush")]


# ---------------------------------------------------------------------- no-pipeline
def test_no_pipeline():
    b = gfx()
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("cull")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("lay")
    b.Dispatch(1, 1, 1)
    f = only(b.build(), "no-pipeline")
    assert [x.cmd for x in f] == [7, 9, 11]
    assert "no pipeline state set" in f[0].message
    assert "compute pipeline 'cull'" in f[1].message and "graphics pipeline 'lay'" in f[2].message


def test_no_pipeline_passing():
    b = gfx()
    b.SetPipelineState("lay")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.Opaque("SetPipelineState(x)")
    b.DrawInstanced(3, 1, 0, 0)  # unknown pipeline: no finding
    assert findings(b.build()) == []


# ---------------------------------------------------------------------- table-undefined
def test_table_undefined_at_start_of_list():
    b = builder()
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("pull", line=9)
    b.DrawInstanced(3, 1, 0, 0, line=10)
    f = only(b.build(), "table-undefined")
    assert [(x.cmd, x.line) for x in f] == [(3, 10)]
    assert "root parameter 0" in f[0].message and "never set" in f[0].message


def test_table_undefined_after_heap_change_and_kept_by_same_heaps():
    b = gfx()
    b.SetPipelineState("pull")
    b.SetDescriptorHeaps("h0")  # the same heaps: tables kept (seed)
    b.DrawInstanced(3, 1, 0, 0)
    assert only(b.build(), "table-undefined") == []
    b.SetDescriptorHeaps("h1", line=20)
    b.DrawInstanced(3, 1, 0, 0)
    f = only(b.build(), "table-undefined")
    assert [x.cmd for x in f] == [11]
    assert "SetDescriptorHeaps at line 20 changed the descriptor heaps" in f[0].message
    b.SetGraphicsRootDescriptorTable(0, "h1[0]")
    b.DrawInstanced(3, 1, 0, 0)
    assert [x.cmd for x in only(b.build(), "table-undefined")] == [11]


def test_table_undefined_after_root_signature_change():
    b = gfx()
    b.SetPipelineState("pull")
    b.SetGraphicsRootSignature("rsA")  # same: kept
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("rsB", line=5)
    b.SetGraphicsRootSignature("rsA", line=6)
    b.DrawInstanced(3, 1, 0, 0)
    f = only(b.build(), "table-undefined")
    assert [x.cmd for x in f] == [12]
    assert "SetGraphicsRootSignature at line 6 changed the root signature" in f[0].message


def test_table_undefined_only_for_parameters_the_pipeline_reads():
    b = builder()
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("tess")  # reads only root parameter 1 (constants)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("lay")  # reads 0..3: tables 0 and 3
    b.DrawInstanced(3, 1, 0, 0)
    f = only(b.build(), "table-undefined")
    assert [(x.cmd, "parameter 0" in x.message, "parameter 3" in x.message) for x in f] == [
        (5, True, False), (5, False, True)]


def test_table_undefined_for_dispatch_and_not_after_opaque():
    b = builder()
    b.SetDescriptorHeaps("h0")
    b.SetComputeRootSignature("rsB")
    b.SetPipelineState("cullB")
    b.Dispatch(1, 1, 1)
    b.Opaque("SetComputeRootDescriptorTable(...)")
    b.Dispatch(1, 1, 1)
    f = only(b.build(), "table-undefined")
    assert [x.cmd for x in f] == [3] and "parameter 1 of pipeline 'cullB'" in f[0].message


# ---------------------------------------------------------------------- bundle-heaps
def test_bundle_heaps():
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0", line=2)
    b.SetDescriptorHeaps("h0")  # the same heaps again: legal
    b.SetDescriptorHeaps("h1", "s0", line=4)
    f = only(b.build(), "bundle-heaps")
    assert [x.cmd for x in f] == [2]
    assert "only once" in f[0].message and "h1 s0" in f[0].message and "line 2" in f[0].message


def test_bundle_heaps_passing():
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0", "s0")
    b.SetDescriptorHeaps("s0", "h0")
    assert only(b.build(), "bundle-heaps") == []
    b = builder()  # a list may change heaps
    b.SetDescriptorHeaps("h0")
    b.SetDescriptorHeaps("h1")
    assert only(b.build(), "bundle-heaps") == []


# ---------------------------------------------------------------------- index-buffer-undefined
def test_index_buffer_undefined_after_drawindexedx():
    b = gfx()
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0, line=30)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.MultiDrawIndexedInstancedIndirect(2, "args", 0, 20)
    b.DrawInstanced(3, 1, 0, 0)  # not indexed: fine
    f = only(b.build(), "index-buffer-undefined")
    assert [x.cmd for x in f] == [11, 12]
    assert "DrawIndexedX at line 30" in f[0].message and "IASetIndexBuffer" in f[0].message
    assert f[1].message.startswith("MultiDrawIndexedInstancedIndirect after DrawIndexedX")


def test_index_buffer_undefined_never_set_and_passing():
    b = gfx()
    b.SetPipelineState("pull")
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    f = only(b.build(), "index-buffer-undefined")
    assert len(f) == 1 and "no index buffer set" in f[0].message
    b = gfx()
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)  # re-bound after DrawIndexedX
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    assert findings(b.build()) == []
    b = builder(kind="bundle")  # a bundle inherits the index buffer
    b.SetPipelineState("noroot")
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    assert findings(b.build()) == []


# ---------------------------------------------------------------------- index-range
def test_index_range():
    b = gfx()
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 96, line=3)
    b.DrawIndexedInstanced(2000, 1, 0, 0, 0)  # 96 + 4000 <= 4096
    b.DrawIndexedInstanced(2000, 1, 1, 0, 0)  # 96 + 4002 > 4096
    b.IASetIndexBuffer("ib", "R32_UINT", 0)
    b.DrawIndexedInstanced(1024, 1, 0, 0, 0)  # exactly the buffer
    b.DrawIndexedInstanced(0, 1, 5000, 0, 0)  # reads nothing
    f = only(b.build(), "index-range")
    assert [x.cmd for x in f] == [10]
    assert "4098" in f[0].message and "'ib' (4096 bytes, bound at line 3)" in f[0].message


# ---------------------------------------------------------------------- gs-onchip-tessellation
def test_gs_onchip_tessellation():
    b = gfx()
    b.SetPipelineState("tess")
    b.GSSetParameters("onchip", vps=64, line=4)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("gsp")
    b.DrawInstanced(3, 1, 0, 0)  # onchip GS without tessellation: fine
    b.SetPipelineState("tess")
    b.GSSetParameters("null")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("offchip")
    b.DrawInstanced(3, 1, 0, 0)
    f = only(b.build(), "gs-onchip-tessellation")
    assert [x.cmd for x in f] == [9]
    assert "'tess'" in f[0].message and "line 4" in f[0].message and "always-offchip" in f[0].message


# ---------------------------------------------------------------------- missing-flush
def _cs_then_read(fast: bool = False, between: tuple = (), auto_off_before: bool = False) -> Stream:
    b = gfx(fast_semantics=fast)
    if auto_off_before:
        b.CSEnableAutomaticGpuFlush(False)
    b.SetPipelineState("cull")  # writes args (through h0[4]) and ib
    b.Dispatch(64, 1, 1, line=7)
    for name, *a in between:
        b.cmd(name, *a)
    b.SetPipelineState("lay")
    b.DrawInstancedIndirect("args", 0, line=20)
    return b.build()


def test_missing_flush_after_dispatch():
    f = only(_cs_then_read(), "missing-flush")
    assert len(f) == 1 and f[0].line == 20
    assert ("DrawInstancedIndirect reads args from 'args' written by Dispatch at line 7 (compute shader)"
            in f[0].message)
    assert f[0].message.endswith("missing FlushGpuCacheRange DEFAULT_PFP")
    assert only(_cs_then_read(between=[("FlushGpuCacheRange", "DEFAULT_PFP")]), "missing-flush") == []
    # FlushGpuCacheRange DEFAULT (not PFP) does not make the data visible to the front end
    assert len(only(_cs_then_read(between=[("FlushGpuCacheRange", "DEFAULT")]), "missing-flush")) == 1


def test_missing_flush_fast_semantics_needs_cs_partial_flush():
    f = only(_cs_then_read(fast=True), "missing-flush")
    assert f[0].message.endswith("missing GpuSendPipelinedEvent CS_PARTIAL_FLUSH then FlushGpuCacheRange DEFAULT_PFP")
    assert "fast semantics" in f[0].message
    f = only(_cs_then_read(fast=True, between=[("FlushGpuCacheRange", "DEFAULT_PFP")]), "missing-flush")
    assert f[0].message.endswith("missing GpuSendPipelinedEvent CS_PARTIAL_FLUSH")
    f = only(_cs_then_read(fast=True, between=[("FlushGpuCacheRange", "DEFAULT_PFP"),
                                               ("GpuSendPipelinedEvent", "CS_PARTIAL_FLUSH")]), "missing-flush")
    assert f[0].message.endswith("missing FlushGpuCacheRange DEFAULT_PFP")  # the L2 flush must come after
    ok = _cs_then_read(fast=True, between=[("GpuSendPipelinedEvent", "CS_PARTIAL_FLUSH"),
                                           ("FlushGpuCacheRange", "DEFAULT_PFP")])
    assert only(ok, "missing-flush") == []


def test_missing_flush_auto_gpu_flush_off():
    f = only(_cs_then_read(auto_off_before=True, between=[("FlushGpuCacheRange", "DEFAULT_PFP")]), "missing-flush")
    assert len(f) == 1 and "CSEnableAutomaticGpuFlush(FALSE)" in f[0].message
    # turned off only after the Dispatch: not in force at the write
    s = _cs_then_read(between=[("CSEnableAutomaticGpuFlush", False), ("FlushGpuCacheRange", "DEFAULT_PFP")])
    assert only(s, "missing-flush") == []
    b = gfx(auto_gpu_flush=False)  # off in the header
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("lay")
    b.DrawInstancedIndirect("args", 0)
    assert "CS_PARTIAL_FLUSH" in only(b.build(), "missing-flush")[0].message


def test_missing_flush_draw_writers():
    for pipe, need, wrong in (("psw", "PS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH"),
                              ("vsw", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH")):
        b = gfx()
        b.SetPipelineState(pipe)
        b.DrawInstanced(3, 1, 0, 0)
        b.GpuSendPipelinedEvent(wrong)
        b.FlushGpuCacheRange("DEFAULT_PFP")
        b.SetPipelineState("lay")
        b.MultiDrawInstancedIndirectAuto("cnt", 0, 8, "args", 0, 16)
        f = only(b.build(), "missing-flush")
        assert len(f) == 1 and f[0].message.endswith(f"missing GpuSendPipelinedEvent {need}"), f
        b = gfx()
        b.SetPipelineState(pipe)
        b.DrawInstanced(3, 1, 0, 0)
        b.GpuSendPipelinedEvent(need)
        b.FlushGpuCacheRange("DEFAULT_PFP")
        b.SetPipelineState("lay")
        b.MultiDrawInstancedIndirectAuto("cnt", 0, 8, "args", 0, 16)
        assert only(b.build(), "missing-flush") == []
    assert "(vs shader)" in _vs_message()


def _vs_message() -> str:
    b = gfx()
    b.SetPipelineState("vsw")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("lay")
    b.DrawInstancedIndirect("args", 0)
    return only(b.build(), "missing-flush")[0].message


def test_missing_flush_count_buffer_and_index_data():
    b = gfx()
    b.SetPipelineState("cntw")
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("lay")
    b.MultiDrawIndexedInstancedIndirectAuto("cnt", 0, 8, "args", 0, 20)
    f = only(b.build(), "missing-flush")
    assert len(f) == 1 and "reads count from 'cnt'" in f[0].message
    b = gfx()
    b.SetPipelineState("cull")  # writes ib
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    f = only(b.build(), "missing-flush")
    assert [x.cmd for x in f] == [11, 12] and all("index data from 'ib'" in x.message for x in f)


def test_missing_flush_satisfied_by_barrier_and_opaque_not_by_copy():
    s = _cs_then_read(fast=True, between=[("ResourceBarrier", "args", "UNORDERED_ACCESS", "INDIRECT_ARGUMENT")])
    assert only(s, "missing-flush") == []
    s = _cs_then_read(fast=True, between=[("ResourceBarrier", "ib", "UNORDERED_ACCESS", "INDEX_BUFFER")])
    assert len(only(s, "missing-flush")) == 1  # another buffer
    s = _cs_then_read(between=[("Opaque", "Flush()")])
    assert only(s, "missing-flush") == []
    s = _cs_then_read(between=[("CopyBufferRegion", "args", 0, "verts", 0, 64)])
    assert len(only(s, "missing-flush")) == 1
    b = gfx()  # a copy alone is front-end coherent
    b.CopyBufferRegion("args", 0, "verts", 0, 64)
    b.SetPipelineState("lay")
    b.DrawInstancedIndirect("args", 0)
    assert findings(b.build()) == []


def test_missing_flush_async_compute():
    b = builder(context="compute")
    b.SetDescriptorHeaps("h0")
    b.SetComputeRootSignature("rsA")
    b.SetComputeRootDescriptorTable(0, "h0[0]")
    b.SetComputeRootDescriptorTable(3, "h0[0]")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1, line=6)
    s = b.build()
    f = only(s, "missing-flush")
    assert [x.cmd for x in f] == [5] and "FlushGpuCachesBottomOfPipe DEFAULT" in f[0].message
    assert "'args'" in f[0].message and "frontend" in f[0].message  # ib is not declared frontend
    need = missing_flushes(s)
    assert need[0].reader == -1 and need[0].missing == (("FlushGpuCachesBottomOfPipe", "DEFAULT"),)
    assert need[0].before == 6 and need[0].stage == "async"
    b.FlushGpuCachesBottomOfPipe("DEFAULT_PFP")  # no PFP on async compute: not the one
    assert len(only(b.build(), "missing-flush")) == 1
    b.FlushGpuCachesBottomOfPipe("DEFAULT")
    assert findings(b.build()) == []


def test_missing_flushes_structured():
    need = missing_flushes(_cs_then_read(fast=True, between=[("FlushGpuCacheRange", "DEFAULT_PFP")]))
    assert len(need) == 1
    n = need[0]
    assert (n.reader, n.writer, n.buffer, n.what, n.stage) == (11, 8, "args", "args", "cs+partial")
    assert n.missing == (("GpuSendPipelinedEvent", "CS_PARTIAL_FLUSH"),) and n.before == 9


# ---------------------------------------------------------------------- ordering, robustness
def test_findings_are_sorted_and_reuse_state():
    from drawopt.analysis.state import track
    b = builder()
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.SetPipelineState("lay")
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    s = b.build()
    f = findings(s)
    assert [(x.cmd, x.rule) for x in f] == [(0, "no-pipeline"), (0, "index-buffer-undefined"),
                                            (2, "table-undefined"), (2, "table-undefined"),
                                            (2, "index-buffer-undefined")]
    assert findings(s, track(s)) == f


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_findings_on_random_streams(s):
    f = findings(s)
    assert f == sorted(f, key=lambda x: x.cmd) and all(x.rule in RULES for x in f)
    assert all(0 <= x.cmd < len(s) for x in f)
    assert findings(s) == f


# ---------------------------------------------------------------------- CLI
needs_formats = pytest.mark.skipif(formats is None, reason="drawopt.ir.formats is not available")


@needs_formats
def test_cli_validate(tmp_path, capsys):
    from drawopt.cli import main
    b = gfx()
    b.SetPipelineState("pull")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    bad = tmp_path / "bad.dstream"
    formats.save(b.build(), bad)
    lines = bad.read_text().splitlines()
    want_line = next(k for k, t in enumerate(lines, 1) if t.startswith("DrawIndexedInstanced"))
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{bad}:{want_line}:1: warning: [index-buffer-undefined] DrawIndexedInstanced after "
                   f"DrawIndexedX at line {want_line - 1}, which left the index buffer undefined: "
                   f"IASetIndexBuffer must be issued again before it"]
    assert main(["validate", "--json", str(bad)]) == 1
    js = json.loads(capsys.readouterr().out)
    assert js[0]["rule"] == "index-buffer-undefined" and js[0]["line"] == want_line
    good = tmp_path / "good.json"
    g = gfx()
    g.SetPipelineState("lay")
    g.DrawInstanced(3, 1, 0, 0)
    formats.save(g.build(), good)
    assert main(["validate", str(good)]) == 0
    assert capsys.readouterr().out == ""
    broken = tmp_path / "broken.dstream"
    broken.write_text("drawopt 1\nDrawInstanced 1 2\n")
    assert main(["validate", str(broken)]) == 2
    err = capsys.readouterr().err
    assert f"{broken}:2:" in err and "Traceback" not in err


@needs_formats
def test_cli_validate_root_index_error(tmp_path, capsys):
    from drawopt.cli import main
    b = builder()
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    p = tmp_path / "r.dstream"
    formats.save(b.build(), p)
    text = p.read_text().replace("SetGraphicsRootDescriptorTable 0 h0[0]", "SetGraphicsRootDescriptorTable 17 h0[0]")
    p.write_text(text)
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "root parameter index must be below 16" in err and f"{p}:" in err


# ---------------------------------------------------------------------- issue 12, item 8
_FRONTEND_GFX = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   cullargs size=64 frontend
heap     res      CBV_SRV_UAV 1
view     res[0]   uav cullargs
rootsig  cr       table(uav,1)
pipeline cull     cs=c root=cr writes=cullargs

SetDescriptorHeaps res
SetComputeRootSignature cr
SetComputeRootDescriptorTable 0 res[0]
SetPipelineState cull
Dispatch 1 1 1
{tail}"""


def test_missing_flush_frontend_on_graphics_context():
    """A frontend buffer written on the graphics context is read by another list's front
    end: the graphics sequence must follow before the list ends (the flush pass and the
    verifier say so too)."""
    s = formats.loads(_FRONTEND_GFX.format(tail=""))
    f = only(s, "missing-flush")
    assert [x.cmd for x in f] == [4] and "before the end of this command list" in f[0].message
    assert "FlushGpuCacheRange DEFAULT_PFP" in f[0].message
    assert missing_flushes(s)[0].reader == -1
    assert findings(formats.loads(_FRONTEND_GFX.format(tail="FlushGpuCacheRange DEFAULT_PFP\n"))) == []


def test_index_range_inside_a_multi_draw_with_cpu_args():
    """mdi folds direct draws into a multi-draw over CPU-written args: an out-of-range
    draw stays reported, per record."""
    text = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib       size=280
buffer   args     size=40 cpu
data     args     36 1 0 0 0 36 1 108 0 0
target   rt       64x64 R8G8B8A8_UNORM
pipeline p        vs=pull ps=p

OMSetRenderTargets rt
RSSetViewports 0 0 64 64 0 1
RSSetScissorRects 0 0 64 64
IASetPrimitiveTopology TRIANGLELIST
SetPipelineState p
IASetIndexBuffer ib R16_UINT 0
MultiDrawIndexedInstancedIndirect 2 args 0 20
DrawIndexedInstancedIndirect args 20
"""
    s = formats.loads(text)
    f = only(s, "index-range")
    assert [x.cmd for x in f] == [6, 7]
    assert "draw 1 of its CPU-written args" in f[0].message and "288" in f[0].message
    # GPU-written args are not known: nothing to check
    s2 = formats.loads(text.replace("data     args     36 1 0 0 0 36 1 108 0 0\n", ""))
    assert only(s2, "index-range") == []


def test_index_range_skips_draws_of_no_instance_and_reads_zeros_past_the_args_data():
    """A draw or CPU-written record of no instance reads no index (mdi folds an indirect draw whose
    args draw nothing into a multi-draw: found by the pipeline property, 2026-12-03); a record's
    words past the args data read zeros, so a record whose start index is past the data still
    draws its count from index 0."""
    head = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib       size=20
buffer   args     size=40 cpu
buffer   part     size=40 cpu
data     args     1000000 0 0 0 0 1000000 1 0 0 0
data     part     1000000 1
IASetIndexBuffer ib R16_UINT 0
"""
    quiet = formats.loads(head + "DrawIndexedInstanced 1000000 0 0 0 0\nDrawIndexedInstancedIndirect args 0\n"
                                 "MultiDrawIndexedInstancedIndirect 1 args 0 20\n")
    assert only(quiet, "index-range") == []
    loud = formats.loads(head + "DrawIndexedInstanced 1000000 1 0 0 0\nMultiDrawIndexedInstancedIndirect 2 args 0 20\n"
                                "DrawIndexedInstancedIndirect part 0\nMultiDrawIndexedInstancedIndirect 2 part 0 20\n")
    f = only(loud, "index-range")
    assert [(x.cmd, x.message.split(" reads")[0]) for x in f] == [
        (1, "DrawIndexedInstanced"),
        (2, "MultiDrawIndexedInstancedIndirect (draw 1 of its CPU-written args)"),
        (3, "DrawIndexedInstancedIndirect (its CPU-written args)"),
        (4, "MultiDrawIndexedInstancedIndirect (draw 0 of its CPU-written args)")], f
