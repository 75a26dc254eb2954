"""Regression streams from the pipeline property (tests/test_optimize_props.py, dev profile): each
is a pass whose own output failed verify or added a finding, cut down by hand to the commands that
matter. Each test fails on the code before its fix."""

from __future__ import annotations

from drawopt import loads
from drawopt.ir.ops import BY_NAME
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.verify import verify

HEAD = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off
buffer ib size=64
buffer ibx size=64
buffer args size=64
target rt 64x64 R8G8B8A8_UNORM
pipeline x vs=pull ps=f
pipeline p vs=v ps=f layout=pos
"""


def _run(text: str, passes: str, **kw: str):
    """The pass's own output (no rollback: ``verify=False``) and its pass records."""
    s = loads(text, file="<t>")
    pm = PassManager(parse_pipeline(passes, **kw), verify=False, **kw)
    return s, pm.run(s), pm


def test_flush_does_not_rebind_an_index_buffer_written_after_the_draw() -> None:
    """The draw after ``DrawIndexedX`` reads an undefined index buffer. flush re-bound ``ib`` because
    nothing wrote it *before* the re-bind; the copy after the draw writes it, so the re-bound draw
    had a new read of a written buffer (a hazard with that copy the input did not have) and the
    output failed verify ("reads ib ... moved across the write")."""
    text = HEAD + """OMSetRenderTargets rt
IASetIndexBuffer ib R16_UINT 0
SetPipelineState x
DrawIndexedX ibx 0 R16_UINT 3 0
SetPipelineState p
DrawIndexedInstancedIndirect args 0
CopyBufferRegion ib 0 args 0 4
"""
    s, out, pm = _run(text, "flush")
    assert [r.rejected for r in pm.records if r.rejected] == []
    r = verify(s, out, reorder=pm.reorder)
    assert r.equivalent, r.reason
    ia = BY_NAME["IASetIndexBuffer"].code
    assert (out.op == ia).sum() == (s.op == ia).sum() == 1  # no re-bind
