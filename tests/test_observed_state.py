"""What draws observe, as the state masks own it (issue 12, items 1, 6 and 7).

Each case is a stream a user could write in a few lines whose optimized output was
broken or added a finding; the rule lives in the state tracker (:mod:`drawopt.analysis.state`,
with :meth:`drawopt.ir.decls.Pipeline.read_params` / ``observes_gs_params``), so every
consumer -- dedupe-state, the passes' restores, validate, the verifier -- agrees.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import drawopt
from drawopt.analysis.state import GS, OBS_DRAW, ROOT0, scan
from drawopt.result import optimize
from drawopt.validate import findings
from drawopt.verify import verify

HEAD = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib       size=65536
target   rt       64x64 R8G8B8A8_UNORM
depth    z        64x64 D32_FLOAT
"""
SETUP = """
OMSetRenderTargets rt z
RSSetViewports 0 0 64 64 0 1
RSSetScissorRects 0 0 64 64
IASetPrimitiveTopology TRIANGLELIST
"""


def by_rule(s: drawopt.Stream) -> Counter:
    return Counter(f.rule for f in findings(s))


def check_output(s: drawopt.Stream, out: drawopt.Stream) -> None:
    """The output verifies and adds no finding of any rule."""
    r = verify(s, out)
    assert r.equivalent, r.reason
    before, after = by_rule(s), by_rule(out)
    assert all(after[k] <= before[k] for k in after), (before, after)


# ---------------------------------------------------------------------- item 1: perdraw observed
PERDRAW_NOT_IN_PARAMS = HEAD + """buffer   verts    size=1048576
rootsig  main     constants(4) srv srv
pipeline x        vs=pull ps=p root=main params=0,1 depth=less,write contract={contract}
""" + SETUP + """SetGraphicsRootSignature main
SetGraphicsRootShaderResourceView 1 verts 0
SetPipelineState x
IASetIndexBuffer ib R16_UINT 0
SetGraphicsRoot32BitConstants 0 4 0 0 0 0
DrawIndexedInstanced 36 1 0 0 0
SetGraphicsRoot32BitConstants 0 4 1 0 0 0
DrawIndexedInstanced 36 1 36 100 0
SetGraphicsRoot32BitConstants 0 4 2 0 0 0
DrawIndexedInstanced 36 1 72 200 0
SetGraphicsRoot32BitConstants 0 4 3 0 0 0
DrawIndexedInstanced 36 1 108 300 0
"""


@pytest.mark.parametrize("target,rewrite,contract", [
    # pack-x binds its per-draw array at perdraw=2; dedupe-state used to drop it as unobserved
    ("xbox-one", "pack-x", "x(vertex_bits=16,perdraw=2,lift=0.0+0.1+0.2+0.3)"),
    # mdi binds the lifted constants' array at perdraw=2; the same
    ("d3d12", "mdi", "draw_data(perdraw=2,lift=0.0+0.1+0.2+0.3)"),
])
def test_perdraw_parameter_left_out_of_params_is_observed(target, rewrite, contract):
    s = drawopt.loads(PERDRAW_NOT_IN_PARAMS.format(contract=contract))
    # the passes themselves, without the pass manager's safety net (which would roll back)
    out = optimize(s, passes=f"{rewrite},dedupe-state", target=target, verify=False).stream
    binds = [c for c in out.commands() if c.name == "SetGraphicsRootShaderResourceView" and c.args[0] == 2]
    assert binds, "the generated per-draw array is bound at the contract's perdraw parameter"
    check_output(s, out)
    check_output(s, optimize(s, target=target).stream)


def test_perdraw_parameter_is_in_the_state_mask():
    s = drawopt.loads(PERDRAW_NOT_IN_PARAMS.format(contract="draw_data(perdraw=2,lift=0.0)"))
    sc = scan(s)
    m = sc.read_mask(np.flatnonzero(sc.obs_kind == OBS_DRAW))
    assert m[:, ROOT0 + 2].all() and m[:, ROOT0 + 1].all()
    p = s.decls["x"]
    assert p.read_params(3) == (0, 1, 2) and p.perdraw_params == (2,)


def test_perdraw_out_of_range_is_a_load_error():
    text = PERDRAW_NOT_IN_PARAMS.format(contract="x(vertex_bits=16,perdraw=3)")
    with pytest.raises(drawopt.InputError) as e:
        drawopt.loads(text, file="bad.dstream")
    msg = str(e.value)
    assert msg.startswith("bad.dstream:7:") and "perdraw=3 is not a root parameter" in msg


# ---------------------------------------------------------------------- item 6: DrawIndexedX and the IB
def test_index_buffer_rebind_after_drawindexedx_run_is_kept():
    text = HEAD + """buffer   ibx      size=65536
buffer   pd       size=4096
rootsig  main     constants(4) srv
pipeline x        vs=pull ps=p root=main contract=x(vertex_bits=16,perdraw=1)
pipeline draw     vs=v ps=p root=main layout=pos
""" + SETUP + """SetGraphicsRootSignature main
SetGraphicsRoot32BitConstants 0 4 0 0 0 0
SetGraphicsRootShaderResourceView 1 pd 0
IASetIndexBuffer ib R16_UINT 64
SetPipelineState x
DrawIndexedX ibx 0 R16_UINT 36 0
DrawIndexedX ibx 72 R16_UINT 36 65536
IASetIndexBuffer ib R16_UINT 64
SetPipelineState draw
DrawIndexedInstanced 36 1 36 0 0
"""
    s = drawopt.loads(text)
    sc = scan(s)
    ia = [i for i, c in enumerate(s.commands()) if c.name == "IASetIndexBuffer"]
    # the re-set after the run replaces an undefined value: never a redundant re-set
    assert sc.prev[ia[1]] == -1
    for target in ("xbox-one", "d3d12"):
        out = optimize(s, passes="dedupe-state", target=target).stream
        assert [c.name for c in out.commands()].count("IASetIndexBuffer") == 1
        assert not by_rule(out)["index-buffer-undefined"]
        check_output(s, optimize(s, target=target).stream)


# ---------------------------------------------------------------------- item 7: GS parameters
def test_tessellation_draws_observe_gs_parameters():
    text = HEAD + """rootsig  main     constants(4)
pipeline gsp      vs=v gs=g ps=p layout=pos root=main gs_maxverts=12 gs_vertsize=32
pipeline tess     vs=v hs=h ds=d ps=p layout=pos topology=patch root=main
""" + SETUP + """SetGraphicsRootSignature main
SetGraphicsRoot32BitConstants 0 4 0 0 0 0
IASetIndexBuffer ib R16_UINT 0
SetPipelineState gsp
GSSetParameters onchip vps=64 pps=32 lds=16384
DrawIndexedInstanced 36 1 0 0 0
GSSetParameters null
SetPipelineState tess
IASetPrimitiveTopology PATCHLIST_3
DrawIndexedInstanced 36 1 0 0 0
"""
    s = drawopt.loads(text)
    out = optimize(s, passes="dedupe-state").stream
    assert [c.name for c in out.commands()].count("GSSetParameters") == 2
    assert not by_rule(out)["gs-onchip-tessellation"]
    sc = scan(s)
    assert sc.read_mask(np.flatnonzero(sc.obs_kind == OBS_DRAW))[:, GS].all()
    assert s.decls["tess"].observes_gs_params and s.decls["gsp"].observes_gs_params
    for target in ("xbox-one", "d3d12"):
        check_output(s, optimize(s, target=target).stream)
