"""State tracker: slot semantics, masking, interning, both kernels, comparison, speed.

Besides hand-built cases, a plain per-command reference interpreter of the
state model (``reference_states``) is checked against ``track`` on random
streams, and the Cython kernel against its pure-Python twin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drawopt._accel import load_cext
from drawopt.analysis.state import (
    SLOTS,
    StateTable,
    compare_effective_state,
    intern_rows,
    track,
)
from drawopt.errors import InputError
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_NAME, GS_MODES, INDEX_FORMATS, NARGS, TOPOLOGIES
from drawopt.ir.stream import Stream, StreamBuilder, StreamCheckError, concat

HAS_CEXT = load_cext("_state", False) is not None


# ---------------------------------------------------------------------- fixtures
def declare(b: StreamBuilder) -> None:
    """A small world: buffers, targets, heaps, two root signatures, pipelines of every kind."""
    b.buffer("verts", size=1 << 16)
    b.buffer("ib", size=4096)
    b.buffer("args", size=4096, frontend=True)
    b.buffer("cnt", size=256)
    b.target("rt0", 64, 64)
    b.target("rt1", 64, 64)
    b.depth("z", 64, 64)
    b.heap("h0", "CBV_SRV_UAV", 16)
    b.heap("h1", "CBV_SRV_UAV", 16)
    b.heap("s0", "SAMPLER", 4)
    for i in range(4):
        b.view("h0", i, "srv", "verts")
        b.view("h1", i, "srv", "verts")
    b.view("h0", 4, "uav", "args")
    b.view("h0", 5, "uav", "ib")
    b.view("s0", 0, "sampler")
    b.rootsig("rsA", "table(srv,1)", "constants(4)", "cbv", "table(srv,4)")
    b.rootsig("rsB", "constants(2)", "table(srv,1)")
    b.pipeline("pull", vs="v", ps="p", root="rsA", params=[0, 1])
    b.pipeline("lay", vs="v", ps="p", root="rsA", layout="pos")
    b.pipeline("gsp", vs="v", gs="g", ps="p", root="rsB")
    b.pipeline("tess", vs="v", hs="h", ds="d", ps="p", root="rsA", params=[1])
    b.pipeline("noroot", vs="v", ps="p")
    b.pipeline("psw", vs="v", ps="p", root="rsA", params=[1], writes=["args"])
    b.pipeline("vsw", vs="v", ps="p", root="rsA", params=[1], writes=["h0[4]"], uav_stage="vs")
    b.pipeline("cull", cs="c", root="rsA", writes=["h0[4]", "ib"])
    b.pipeline("cullB", cs="c", root="rsB")
    # array clauses (P = 2): all of constants 1 and table 0's heap slot lifted / only word 1
    b.pipeline("arr", vs="v", ps="p", root="rsA", contract="draw_data(perdraw=2,lift=0+1.0+1.1+1.2+1.3)")
    b.pipeline("arrp", vs="v", ps="p", root="rsA", layout="pos", contract="instance_data(perdraw=2,lift=1.1)")


def builder(**kw) -> StreamBuilder:
    b = StreamBuilder(**kw)
    declare(b)
    return b


_CMD = st.sampled_from
COMMANDS = st.one_of(
    st.tuples(st.just("SetPipelineState"), st.tuples(_CMD(["pull", "lay", "gsp", "tess", "noroot", "psw", "vsw",
                                                           "cull", "cullB", "arr", "arrp"]))),
    st.tuples(st.just("SetGraphicsRootSignature"), st.tuples(_CMD(["rsA", "rsB"]))),
    st.tuples(st.just("SetComputeRootSignature"), st.tuples(_CMD(["rsA", "rsB"]))),
    st.tuples(st.just("SetDescriptorHeaps"), _CMD([("h0",), ("h1",), ("h0", "s0"), ("s0", "h0"), ("s0",)])),
    st.tuples(st.just("SetGraphicsRootDescriptorTable"), st.tuples(st.integers(0, 4), _CMD(["h0[0]", "h0[1]",
                                                                                         "h1[0]"]))),
    st.tuples(st.just("SetComputeRootDescriptorTable"), st.tuples(st.integers(0, 3), _CMD(["h0[0]", "h1[0]"]))),
    st.tuples(st.just("root-constants"), st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 3),
                                                   st.lists(st.integers(0, 2), min_size=1, max_size=4))),
    st.tuples(st.just("SetGraphicsRootConstantBufferView"), st.tuples(st.integers(0, 3), _CMD(["verts"]),
                                                                       _CMD([0, 256]))),
    st.tuples(st.just("SetGraphicsRootShaderResourceView"), st.tuples(st.integers(0, 3), _CMD(["verts"]),
                                                                       _CMD([0]))),
    st.tuples(st.just("IASetIndexBuffer"), st.tuples(_CMD(["ib"]), _CMD(INDEX_FORMATS), _CMD([0, 16]))),
    st.tuples(st.just("IASetVertexBuffers"), st.tuples(st.integers(0, 2), _CMD(["verts"]), _CMD([0, 64]),
                                                       _CMD([16]))),
    st.tuples(st.just("IASetPrimitiveTopology"), st.tuples(_CMD(["TRIANGLELIST", "TRIANGLESTRIP"]))),
    st.tuples(st.just("OMSetRenderTargets"), _CMD([("rt0",), ("rt1",), ("rt0", "z")])),
    st.tuples(st.just("RSSetViewports"), _CMD([(0, 0, 64, 64), (0, 0, 32, 32)])),
    st.tuples(st.just("RSSetScissorRects"), _CMD([(0, 0, 64, 64)])),
    st.tuples(st.just("OMSetBlendFactor"), _CMD([(1, 1, 1, 1), (0, 0, 0, 0)])),
    st.tuples(st.just("OMSetStencilRef"), st.tuples(st.integers(0, 1))),
    st.tuples(st.just("GSSetParameters"), _CMD([("null",), ("onchip",), ("offchip",)])),
    st.tuples(st.just("CSEnableAutomaticGpuFlush"), st.tuples(st.booleans())),
    st.tuples(st.just("DrawInstanced"), _CMD([(3, 1, 0, 0)])),
    st.tuples(st.just("DrawIndexedInstanced"), _CMD([(6, 1, 0, 0, 0), (6, 1, 3000, 0, 0)])),
    st.tuples(st.just("DrawIndexedX"), _CMD([("ib", 0, "R16_UINT", 6, 0), ("ib", 16, "R32_UINT", 3, 65536)])),
    st.tuples(st.just("DrawInstancedIndirect"), _CMD([("args", 0)])),
    st.tuples(st.just("DrawIndexedInstancedIndirect"), _CMD([("args", 0)])),
    st.tuples(st.just("MultiDrawIndexedInstancedIndirect"), _CMD([(4, "args", 0, 20)])),
    st.tuples(st.just("MultiDrawInstancedIndirectAuto"), _CMD([("cnt", 0, 8, "args", 0, 16)])),
    st.tuples(st.just("Dispatch"), _CMD([(1, 1, 1)])),
    st.tuples(st.just("GpuSendPipelinedEvent"), st.tuples(_CMD(["CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH",
                                                                "PS_PARTIAL_FLUSH"]))),
    st.tuples(st.just("FlushGpuCacheRange"), st.tuples(_CMD(["DEFAULT_PFP", "DEFAULT"]))),
    st.tuples(st.just("FlushGpuCachesBottomOfPipe"), st.tuples(_CMD(["DEFAULT", "DEFAULT_PFP"]))),
    st.tuples(st.just("ResourceBarrier"), _CMD([("args", "UNORDERED_ACCESS", "INDIRECT_ARGUMENT")])),
    st.tuples(st.just("CopyBufferRegion"), _CMD([("args", 0, "verts", 0, 64)])),
    st.tuples(st.just("Opaque"), _CMD([("ClearState",), ("Other",)])),
)


def add(b: StreamBuilder, name: str, a: tuple) -> None:
    if name == "root-constants":
        gfx, idx, dest, vals = a
        nm = "SetGraphicsRoot32BitConstants" if gfx else "SetComputeRoot32BitConstants"
        b.cmd(nm, idx, len(vals), *vals, dest=dest)
    elif name == "GSSetParameters" and a[0] == "onchip":
        b.cmd(name, "onchip", vps=64, pps=32)
    else:
        b.cmd(name, *a)


@st.composite
def semantic_streams(draw, max_commands: int = 60) -> Stream:
    """Random valid streams over the small world of :func:`declare`, with small value
    domains, so that re-sets, resets, partial updates and masks collide often."""
    b = builder(context=draw(st.sampled_from(["graphics", "graphics", "compute"])),
                kind=draw(st.sampled_from(["list", "list", "bundle"])),
                fast_semantics=draw(st.booleans()), auto_gpu_flush=draw(st.booleans()))
    for name, a in draw(st.lists(COMMANDS, max_size=max_commands)):
        add(b, name, a)
    return b.build()


try:
    from strategies import streams as shared_streams
except ImportError:  # pragma: no cover - the shared strategy is part of the suite
    shared_streams = None


# ---------------------------------------------------------------------- reference model
U, M = "<unknown>", "<masked>"


def _ref_value(s: Stream, i: int) -> tuple[str, object]:
    """(slot, canonical value) that command i sets, for non-merging commands."""
    c = s.command(i)
    a = s.args[i]
    nm = c.name
    if nm == "SetPipelineState":
        return "pipeline", c.args[0]
    if nm == "SetGraphicsRootSignature":
        return "gfx_rootsig", c.args[0]
    if nm == "SetComputeRootSignature":
        return "compute_rootsig", c.args[0]
    if nm == "SetDescriptorHeaps":
        return "heaps", tuple(sorted(c.var, key=lambda h: s.decls[h].type))
    if nm in ("SetGraphicsRootDescriptorTable", "SetComputeRootDescriptorTable"):
        heap, slot = c.args[1][:-1].split("[")
        pre = "root" if "Graphics" in nm else "croot"
        return f"{pre}{c.args[0]}", ("table", heap, int(slot))
    if nm in ("SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView"):
        return f"root{c.args[0]}", ("cbv" if "Constant" in nm else "srv", c.args[1], c.args[2])
    if nm == "IASetIndexBuffer":
        return "index_buffer", (c.args[0], c.args[1], c.args[2])
    if nm == "IASetPrimitiveTopology":
        return "topology", c.args[0]
    if nm == "OMSetRenderTargets":
        return "render_targets", tuple(c.var)
    if nm == "RSSetViewports":
        return "viewport", tuple(int(x) for x in a[:6])
    if nm in ("RSSetScissorRects", "OMSetBlendFactor"):
        return ("scissor" if "Scissor" in nm else "blend_factor"), tuple(int(x) for x in a[:4])
    if nm == "OMSetStencilRef":
        return "stencil_ref", int(a[0])
    if nm == "GSSetParameters":
        return "gs_params", ("null",) if a[0] == 0 else (GS_MODES[a[0]], *(int(x) for x in a[1:5]))
    raise AssertionError(nm)


def reference_states(s: Stream) -> list[tuple[int, dict]]:
    """(command, normalised described state) of every draw and dispatch, by direct
    interpretation of the model in drawopt.analysis.state's docstring."""
    bundle = s.header.kind == "bundle"
    cur: dict[str, object] = dict.fromkeys(SLOTS)
    cur["gs_params"] = ("null",)
    if bundle:
        cur = {k: (None if k in ("pipeline", "topology") else U) for k in SLOTS}
    heaps_seen = False
    # merging slots: per-slot word vectors of the width used in the whole stream
    width: dict[str, int] = {}
    vb_slots = sorted({int(s.args[i, 0]) for i in range(len(s)) if s.spec(i).name == "IASetVertexBuffers"})
    for i in range(len(s)):
        nm = s.spec(i).name
        if nm.endswith("32BitConstants"):
            key = ("root" if "Graphics" in nm else "croot") + str(int(s.args[i, 0]))
            width[key] = max(width.get(key, 0), int(s.args[i, 1] + s.args[i, 2]))
    words: dict[str, list] = {}
    from_unknown: dict[str, bool] = {}  # the current chain of a merging slot started from unknown
    out = []
    roots = [f"root{i}" for i in range(16)]
    croots = [f"croot{i}" for i in range(16)]
    for i in range(len(s)):
        c = s.command(i)
        nm = c.name
        if nm in ("SetGraphicsRootSignature", "SetComputeRootSignature"):
            slot, new = _ref_value(s, i)
            old = cur[slot]
            side = roots if slot == "gfx_rootsig" else croots
            for r in side:
                if old == U and cur[r] is not None:
                    cur[r] = U
                    words.pop(r, None)
                elif old != U and old != new:
                    cur[r] = None
                    words.pop(r, None)
            cur[slot] = new
        elif nm == "SetDescriptorHeaps":
            slot, new = _ref_value(s, i)
            old = cur[slot]
            first_in_bundle = s.header.kind == "bundle" and not heaps_seen
            heaps_seen = True
            if not first_in_bundle and (old == U or old != new):  # a bundle's first heaps are the caller's
                for r in roots + croots:
                    v = cur[r]
                    if isinstance(v, tuple) and v[0] == "table":
                        cur[r] = U if old == U else None
            cur[slot] = new
        elif nm.endswith("32BitConstants"):
            r = ("root" if "Graphics" in nm else "croot") + str(c.args[0])
            w = words.get(r)
            if w is None:  # a new chain: after a reset, another kind of value, or an Opaque
                w = [U if cur[r] == U else None] * width[r]
                from_unknown[r] = cur[r] == U
            for k, v in enumerate(c.var):
                w[c.args[2] + k] = v
            words[r] = w
            cur[r] = _constants(w, from_unknown[r] if r in from_unknown else False)
        elif nm == "IASetVertexBuffers":
            w = words.get("vertex_buffers")
            if w is None:
                w = [None] * len(vb_slots)
                from_unknown["vertex_buffers"] = cur["vertex_buffers"] == U
            w[vb_slots.index(c.args[0])] = (c.args[1], c.args[2], c.args[3])
            words["vertex_buffers"] = w
            vb = tuple((vb_slots[k], *v) for k, v in enumerate(w) if v)
            cur["vertex_buffers"] = vb + (U,) if from_unknown["vertex_buffers"] else vb
        elif s.spec(i).cat == 0 and nm != "CSEnableAutomaticGpuFlush":
            slot, v = _ref_value(s, i)
            cur[slot] = v
            if slot.startswith(("root", "croot")):
                words.pop(slot, None)
        elif s.spec(i).cat in (1, 2):
            out.append((i, _normalise(s, i, dict(cur))))
            if nm == "DrawIndexedX":
                cur["index_buffer"] = None
        elif nm == "Opaque":
            cur = dict.fromkeys(SLOTS, U)
            words = {}
    return out


def _constants(w: list, unknown_rest: bool) -> tuple:
    """Canonical root constants: trailing unwritten words dropped; a chain that started
    from an unknown value says so (its other words are unknown)."""
    w = list(w)
    fill = U if unknown_rest else None
    while w and w[-1] == fill:
        w.pop()
    return ("constants", tuple(w), U) if unknown_rest else ("constants", tuple(w))


def _normalise(s: Stream, i: int, cur: dict) -> dict:
    nm = s.spec(i).name
    p = cur["pipeline"]
    pipe = s.decls[p] if isinstance(p, str) and p != U else None
    compute = nm == "Dispatch"
    if pipe is not None and pipe.is_compute != compute:
        pipe = None
    gfx = set(SLOTS[:SLOTS.index("compute_rootsig")])
    cmp_ = {"pipeline", "heaps", "compute_rootsig", *(f"croot{k}" for k in range(16))}
    seen = set(cmp_ if compute else gfx)
    if pipe is not None:
        assert isinstance(pipe, Pipeline)
        n = len(s.decls[pipe.root].params) if pipe.root else 0
        # params= (all by default) and, always, every per-draw clause's perdraw parameter (SPEC)
        reads = {*(range(n) if pipe.params is None else pipe.params),
                 *pipe.contract.perdraw_params}
        pre = "croot" if compute else "root"
        seen -= {f"{pre}{k}" for k in range(16)}
        seen |= {f"{pre}{k}" for k in reads}
        if not compute:
            if pipe.vertex_pulling:
                seen.discard("vertex_buffers")
            if pipe.gs is None and pipe.hs is None:  # onchip GS mode forces tessellation offchip
                seen.discard("gs_params")
            if pipe.blend == "opaque":  # blending off: the blend factor is not read
                seen.discard("blend_factor")
    if nm not in ("DrawIndexedInstanced", "DrawIndexedInstancedIndirect", "MultiDrawIndexedInstancedIndirect",
                  "MultiDrawIndexedInstancedIndirectAuto"):
        seen.discard("index_buffer")
    if pipe is not None and not compute and pipe.contract.array is not None \
            and not (nm == "DrawIndexedX" and pipe.x_clause is not None):
        # a draw reading its record from a buffer bound at the array clause's P does not
        # observe the slots the clause lifts entirely (docs/architecture.md)
        c = pipe.contract.array
        bound = cur[f"root{c.perdraw}"]
        if isinstance(bound, tuple) and (bound[0] in ("cbv", "srv") or (
                bound[0] == "table" and s.decls[f"{bound[1]}[{bound[2]}]"].resource in s.decls
                and s.decls[s.decls[f"{bound[1]}[{bound[2]}]"].resource].kind == "buffer")):
            rs = s.decls[pipe.root]
            items = [t.partition(".") for t in c.lift_text.split("+") if t]
            for q, prm in enumerate(rs.params):
                ks = {int(k or 0) for qq, _, k in items if int(qq) == q}
                if (prm.kind == "constants" and ks >= set(range(prm.count))) or (prm.kind == "table" and 0 in ks):
                    seen.discard(f"root{q}")
    return {k: (v if k in seen else M) for k, v in cur.items()}


def check_against_reference(s: Stream, pure: bool | None = None) -> StateTable:
    t = track(s, pure=pure)
    ref = reference_states(s)
    obs = {int(c): ("d", k) for k, c in enumerate(t.draws)}
    obs.update({int(c): ("x", k) for k, c in enumerate(t.dispatches)})
    assert sorted(obs) == [c for c, _ in ref]
    for c, want in ref:
        kind, k = obs[c]
        sid = int(t.state[k] if kind == "d" else t.dispatch_state[k])
        got = t.describe(sid)
        assert got == want, (c, {x: (got[x], want[x]) for x in SLOTS if got[x] != want[x]})
    return t


# ---------------------------------------------------------------------- basics
def test_slots_order():
    assert SLOTS[:12] == ("pipeline", "gfx_rootsig", "heaps", "topology", "render_targets", "viewport", "scissor",
                          "blend_factor", "stencil_ref", "gs_params", "index_buffer", "vertex_buffers")
    assert SLOTS[12:28] == tuple(f"root{i}" for i in range(16))
    assert SLOTS[28] == "compute_rootsig" and SLOTS[29:] == tuple(f"croot{i}" for i in range(16))


def test_start_of_list_undefined_except_gs_default():
    b = builder()
    b.SetPipelineState("gsp")
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    d = t.describe(int(t.state[0]))
    assert d["pipeline"] == "gsp"
    assert d["gs_params"] == ("null",)
    assert d["heaps"] is None and d["gfx_rootsig"] is None and d["root0"] is None
    assert d["vertex_buffers"] == "<masked>"  # vertex pulling
    assert t.setter[0, SLOTS.index("pipeline")] == 0 and (t.setter[0, 1:] == -1).all()


def test_gs_null_equals_driver_default():
    b = builder()
    b.SetPipelineState("gsp")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("onchip")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null", vps=5)  # null whatever the fields say
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    assert t.state.tolist() == [0, 1, 0]
    assert t.describe(1)["gs_params"] == ("onchip", 0, 0, 0, 0)


def test_masking():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.GSSetParameters("onchip")
    b.SetPipelineState("pull")  # params 0,1; vertex pulling; no GS
    b.SetGraphicsRootDescriptorTable(3, "h0[0]")  # not read by pull
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.SetPipelineState("lay")  # reads all of rsA, has a layout
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    d0, d1, d2, d3 = (t.describe(int(x)) for x in t.state)
    assert d0["index_buffer"] == "<masked>" and d1["index_buffer"] == ("ib", "R16_UINT", 0)
    assert d2["index_buffer"] == "<masked>"
    assert d0["root3"] == "<masked>" and d0["root1"] is None and d0["root4"] == "<masked>"
    assert d0["vertex_buffers"] == "<masked>" and d0["gs_params"] == "<masked>"
    assert d0["compute_rootsig"] == "<masked>" and d0["croot0"] == "<masked>"
    assert d3["root3"] == ("table", "h0", 0) and d3["vertex_buffers"] == ((0, "verts", 0, 16),)
    assert d3["root4"] == "<masked>"  # rsA has 4 parameters
    # DrawInstanced and DrawIndexedX with the same visible state share a state id and a pack class
    assert t.state[0] == t.state[2] and t.pack[1] == t.pack[0]
    assert t.state[1] != t.state[0]


def _array_stream() -> Stream:
    b = builder()
    b.pipeline("xarr", vs="v", ps="p", root="rsA",
               contract="x(vertex_bits=16,perdraw=3,lift=1.0),draw_data(perdraw=2,lift=0+1.0+1.1+1.2+1.3)")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.SetGraphicsRootDescriptorTable(0, "h0[1]")
    b.SetGraphicsRoot32BitConstants(1, 4, 1, 2, 3, 4)
    b.SetPipelineState("arr")
    b.DrawInstanced(3, 1, 0, 0)                           # 0: nothing at P: reads its root arguments
    b.SetGraphicsRootConstantBufferView(2, "verts", 256)
    b.DrawInstanced(3, 1, 0, 0)                           # 1: reads a record: tables 0 and constants 1 not
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)             # 2: arr has no x clause: the array's record
    b.SetPipelineState("xarr")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)             # 3: reads through x: everything observed
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)                 # 4: through draw_data
    b.SetPipelineState("arrp")
    b.DrawInstanced(3, 1, 0, 0)                           # 5: only word 1 lifted: the slot stays
    b.SetGraphicsRootDescriptorTable(2, "h0[0]")          # a table whose first view is a buffer
    b.SetPipelineState("arr")
    b.DrawInstanced(3, 1, 0, 0)                           # 6: bound too
    b.SetPipelineState("pull")
    b.DrawInstanced(3, 1, 0, 0)                           # 7: no contract: reads both
    b.Opaque("x")
    b.SetPipelineState("arr")
    b.DrawInstanced(3, 1, 0, 0)                           # 8: P unknown: not bound
    return b.build()


@pytest.mark.parametrize("pure", [True, False] if HAS_CEXT else [True])
def test_array_clause_masks_lifted_slots(pure):
    """A draw that reads its per-draw record from a buffer bound at its array clause's P
    does not observe what the clause lifts: a table's heap slot (the table binding), root
    constants all of whose words are lifted; a partly lifted parameter stays a slot."""
    s = _array_stream()
    t = check_against_reference(s, pure=pure)
    d = [t.describe(int(x)) for x in t.state]
    m = "<masked>"
    assert d[0]["root0"] == ("table", "h0", 1) and d[0]["root1"] == ("constants", (1, 2, 3, 4))
    for k in (1, 2, 4, 6):
        assert d[k]["root0"] == m and d[k]["root1"] == m, k
        assert d[k]["root2"] != m and d[k]["root3"] != m, k
    assert d[3]["root0"] != m and d[3]["root1"] != m
    assert d[5]["root1"] == ("constants", (1, 2, 3, 4)) and d[5]["root0"] != m
    assert d[7]["root0"] != m and d[7]["root1"] != m
    assert d[8]["root0"] == "<unknown>"
    sc = t.scan
    rows, slots, bits = sc.unobserved_words(np.arange(sc.obs.shape[0]))
    assert rows.tolist() == [5] and slots.tolist() == [SLOTS.index("root1")] and bits.tolist() == [2]
    if HAS_CEXT:
        assert_same_tables(t, track(s, pure=not pure))


def _lift_facts_agree(s: Stream) -> int:
    """``Scan.lifted_setters`` are the setters of ``lifted_slots`` (every observer), and the
    cached ``unobserved_words`` of every observer are those of an explicit selection; returns
    how many lifted setters there are."""
    from drawopt.analysis.state import scan
    for pure in ([True, False] if HAS_CEXT else [True]):
        sc = scan(s, pure=pure)
        r, lm = sc.lifted_slots(slice(None))
        st_ = sc.setter[r][lm]
        want = np.zeros(len(s), bool)
        want[st_[st_ >= 0]] = True
        got = sc.lifted_setters()
        assert got.dtype == bool and np.array_equal(got, want)
        every = sc.unobserved_words(np.arange(sc.obs.shape[0]))
        for _ in range(2):  # computed, then cached
            for x, y in zip(sc.unobserved_words(slice(None)), every):
                assert x.dtype == y.dtype and np.array_equal(x, y)
    return int(want.sum())


def test_lifted_setters_of_an_array_stream():
    assert _lift_facts_agree(_array_stream()) > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_lifted_setters_and_unobserved_words_on_random_streams(s):
    _lift_facts_agree(s)


def test_radix_column_by_column():
    """``_radix`` (per-column lows and spans) equals the whole-matrix reduction it replaced,
    wide ranges (spans past 2**62 in total) included."""
    from drawopt.analysis.state import _radix
    rng = np.random.default_rng(3)
    for shape, lim in (((1, 1), 5), ((50, 3), 7), ((200, 5), 1 << 40), ((9, 9), 1 << 62)):
        keys = rng.integers(-lim, lim, shape, dtype=np.int64)
        lo, span, total = _radix(keys)
        assert lo.dtype == keys.dtype and np.array_equal(lo, keys.min(axis=0))
        assert span == [int(b) - int(a) + 1 for a, b in zip(keys.min(axis=0).tolist(), keys.max(axis=0).tolist())]
        assert total == math.prod(span)


def assert_same_scans(a, b) -> None:
    """Two scans are equal in every field (value registry and chains included)."""
    for name in ("kcode", "slot", "cval", "prev", "obs", "obs_kind", "setter", "unknown", "pipe", "epoch",
                 "init_val", "heap_type", "_draw_mask", "_disp_mask", "_pidx", "read_bits"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
    assert (a._binds_buf is None) == (b._binds_buf is None)
    if a._binds_buf is not None:
        assert a._binds_buf.dtype == b._binds_buf.dtype and np.array_equal(a._binds_buf, b._binds_buf)
    assert (a.vb_table is None) == (b.vb_table is None)
    if a.vb_table is not None:
        for name in ("single", "buffer", "offset", "stride"):
            assert np.array_equal(getattr(a.vb_table, name), getattr(b.vb_table, name)), name
        assert a.vb_table.base == b.vb_table.base
    va, vb = a.values, b.values
    assert (va.starts, va.next, va.partial) == (vb.starts, vb.next, vb.partial)
    assert [va.decode(v) for v in range(va.next)] == [vb.decode(v) for v in range(vb.next)]
    assert [(k, base) for k, base, _ in a._blocks] == [(k, base) for k, base, _ in b._blocks]
    for (_, _, u), (_, _, w) in zip(a._blocks, b._blocks):
        assert u.dtype == w.dtype and np.array_equal(u, w)
    assert a.chains.keys() == b.chains.keys()
    for k, ch in a.chains.items():
        other = b.chains[k]
        for name in ("cmds", "start", "init", "owner", "col", "wv", "rows"):
            x, y = getattr(ch, name), getattr(other, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (k, name)
        assert (ch.width, ch.base) == (other.width, other.base)
    for x, y in zip(a.observed_setters(), b.observed_setters()):
        for u, v in (zip(x, y) if isinstance(x, tuple) else [(x, y)]):
            assert u.dtype == v.dtype and np.array_equal(u, v)


def _rescans_agree(s: Stream, seed: int) -> None:
    """``rescan`` of kept commands equals the full scan of the kept stream: random subsets of all
    commands, of the state commands (what dedupe-state removes), and dedupe-state's own rounds."""
    from drawopt.analysis.state import rescan, scan
    from drawopt.passes.dedupe_state import dead_state_commands
    rng = np.random.default_rng(seed)
    n = len(s)
    state = s.cats() == 0
    for pure in ([True, False] if HAS_CEXT else [True]):
        sc = scan(s, pure=pure)
        drop = [rng.random(n) < 0.3, state & (rng.random(n) < 0.5), np.zeros(n, bool), dead_state_commands(s, sc)]
        for d in drop:
            keep = np.flatnonzero(~d)
            t = s.take(keep)
            assert_same_scans(rescan(sc, keep, t), scan(t, pure=pure))
            assert_same_scans(rescan(sc, keep), scan(t, pure=pure))
        cur, cs = s, sc  # the pass's rounds: each rescan starts from the previous one
        for _ in range(4):
            d = dead_state_commands(cur, cs)
            if not d.any():
                break
            keep = np.flatnonzero(~d)
            cur = cur.take(keep)
            cs = rescan(cs, keep, cur)
            assert_same_scans(cs, scan(cur, pure=pure))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams(), st.integers(0, 2**32 - 1))
def test_rescan_equals_the_full_scan(s, seed):
    _rescans_agree(s, seed)


@pytest.mark.parametrize("kind", ["frame", "quads", "gpu-driven", "bundle"])
def test_rescan_equals_the_full_scan_on_generated_streams(kind):
    from drawopt.gen import generate
    _rescans_agree(generate(kind, 1500, seed=3), 1)


def test_rescan_of_wide_keys_numbers_them_anew(monkeypatch):
    """Viewports whose keys span more than 2**62 in total are numbered in order of first
    appearance, which the kept commands alone decide: the scan starts over (and agrees);
    once the kept ones span less, their ids are their ranks again."""
    import drawopt.analysis.state as S
    from drawopt.analysis.state import rescan, scan
    b = builder()
    b.SetPipelineState("lay")
    for vp in [(0, 0, 1 << 30, 7), (5, 1 << 29, 3, 1 << 31), (1 << 30, 0, 0, 0), (0, 0, 1 << 30, 7)]:
        b.RSSetViewports(*vp, 0, 1)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    sc = scan(s)
    assert any(S._radix(u)[2] >= 1 << 62 for _, _, u in sc._blocks if u.shape[0])
    retaken = []
    real = S._retaken_values

    def spy(*a):
        got = real(*a)
        retaken.append(got is not None)
        return got
    monkeypatch.setattr(S, "_retaken_values", spy)
    # three viewports: still too wide; one (a narrow block, sorted again) or none: renumbered
    for keep in (np.array([0, 3, 4, 5, 6, 7, 8]), np.array([0, 5, 6, 1, 2]), np.arange(len(s)),
                 np.array([0, 1, 2, 7, 8]), np.array([0, 5, 6]), np.array([0, 2, 4])):
        assert_same_scans(rescan(sc, keep), scan(s.take(keep)))
    assert retaken == [False, False, False, True, True, True]


def test_heaps_change_undefines_tables_same_heaps_keep():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetGraphicsRoot32BitConstants(1, 1, 5)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h0")  # same heaps: tables kept
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h1")  # different: tables undefined, constants kept
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h0", "s0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("s0", "h0")  # the same set in another order
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    ds = [t.describe(int(x)) for x in t.state]
    assert ds[0]["root0"] == ("table", "h0", 0) and t.state[1] == t.state[0]
    assert ds[2]["root0"] is None and ds[2]["root1"] == ("constants", (5,))
    assert ds[3]["heaps"] == ("h0", "s0") and t.state[4] == t.state[3]
    assert t.setter[1, SLOTS.index("heaps")] == 6  # the setter is the latest set, even a same-value one
    root0 = SLOTS.index("root0")
    assert t.setter[2, root0] == -1 and t.setter[1, root0] == 3


def test_rootsig_change_undefines_root_arguments_of_that_side():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetComputeRootSignature("rsA")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetComputeRootDescriptorTable(0, "h0[0]")
    b.SetPipelineState("lay")
    b.SetGraphicsRootSignature("rsA")  # same: nothing changes
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("rsB")
    b.SetGraphicsRootSignature("rsA")  # changed twice: undefined
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)  # compute side untouched by graphics root signature changes
    t = track(b.build())
    assert t.describe(int(t.state[0]))["root0"] == ("table", "h0", 0)
    assert t.describe(int(t.state[1]))["root0"] is None
    assert t.describe(int(t.dispatch_state[0]))["croot0"] == ("table", "h0", 0)


def test_drawindexedx_leaves_index_buffer_undefined():
    b = builder()
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    t = track(b.build())
    ib = SLOTS.index("index_buffer")
    assert t.describe(int(t.state[2]))["index_buffer"] is None
    assert t.setter[2, ib] == -1 and t.setter[3, ib] == 5
    assert t.state[3] == t.state[0]


def test_partial_root_constants_merge():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetGraphicsRoot32BitConstants(1, 2, 7, 8, dest=1)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 9, dest=0)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 4, 9, 7, 8, 0)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 0, dest=3)  # merges to the words of draw 1
    b.SetGraphicsRoot32BitConstants(1, 1, 1, dest=3)
    b.SetGraphicsRootConstantBufferView(1, "verts", 0)  # another kind: words discarded
    b.SetGraphicsRoot32BitConstants(1, 1, 4, dest=2)
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    r1 = [t.describe(int(x))["root1"] for x in t.state]
    assert r1 == [("constants", (None, 7, 8)), ("constants", (9, 7, 8)), ("constants", (9, 7, 8, 0)),
                  ("constants", (None, None, 4))]


def test_vertex_buffers_merge_per_slot():
    b = builder()
    b.SetPipelineState("lay")
    b.IASetVertexBuffers(1, "verts", 64, 16)
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    assert [t.describe(int(x))["vertex_buffers"] for x in t.state] == [
        ((1, "verts", 64, 16),), ((0, "verts", 0, 16), (1, "verts", 64, 16))]


def test_opaque_makes_everything_unknown_and_separates_states():
    b = builder()
    b.SetPipelineState("noroot")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("ClearState")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("ClearState")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("noroot")
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    d1 = t.describe(int(t.state[1]))
    assert d1["pipeline"] == "<unknown>" and d1["root0"] == "<unknown>"
    assert len(set(t.state.tolist())) == 4  # identical unknown rows, different Opaque epochs
    assert (t.rows[t.state[1]] == t.rows[t.state[2]]).all()
    assert t.first_difference(int(t.state[1]), int(t.state[2])) == "pipeline"  # the first unknown slot
    assert t.describe(int(t.state[3]))["pipeline"] == "noroot"
    assert t.setter[1, 0] == -1


def test_partial_updates_of_unknown_values_are_distinct_values():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.Opaque("ClearState")
    b.SetPipelineState("lay")
    b.SetGraphicsRootSignature("rsA")  # from unknown: root arguments stay unknown
    b.SetGraphicsRoot32BitConstants(1, 1, 5, dest=1)
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 6, dest=1)  # another partly known value: another state
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 4, 1, 2, 3, 4)  # every word written, the rest still unknown
    b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    d = [t.describe(int(x)) for x in t.state]
    assert d[0]["root1"] == ("constants", ("<unknown>", 5), "<unknown>")
    assert d[0]["vertex_buffers"] == ((0, "verts", 0, 16), "<unknown>")
    assert d[1]["root1"] == ("constants", ("<unknown>", 6), "<unknown>")
    assert d[2]["root1"] == ("constants", (1, 2, 3, 4), "<unknown>")
    assert len(set(t.state.tolist())) == 3
    assert t.first_difference(int(t.state[0]), int(t.state[1])) == "root1"


def test_bundle_inherits_all_but_pipeline_and_topology():
    b = builder(kind="bundle")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("lay")
    b.SetGraphicsRootSignature("rsA")
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    t = track(b.build())
    d0, d1 = (t.describe(int(x)) for x in t.state)
    assert d0["pipeline"] is None and d0["topology"] is None and d0["heaps"] == "<unknown>"
    assert d0["gs_params"] == "<unknown>" and d1["index_buffer"] == "<unknown>"
    assert d1["root0"] == "<unknown>"  # the inherited root signature might have been rsA
    assert d1["gfx_rootsig"] == "rsA"


def test_dispatch_rows_and_pack_classes():
    b = builder()
    b.SetComputeRootSignature("rsB")
    b.SetPipelineState("cullB")
    b.SetComputeRoot32BitConstants(0, 2, 1, 2)
    b.Dispatch(1, 1, 1)
    b.SetPipelineState("pull")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.DrawIndexedX("ib", 16, "R32_UINT", 3, 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 3)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    t = track(b.build())
    assert t.draws.tolist() == [5, 6, 8] and t.dispatches.tolist() == [3]
    assert t.pack.tolist() == [0, 0, 1] and t.state.tolist() == [0, 0, 1]
    assert t.dispatch_state.tolist() == [2] and t.rows.shape == (3, len(SLOTS))
    dd = t.describe(2)
    assert dd["croot0"] == ("constants", (1, 2)) and dd["topology"] == "<masked>"
    assert t.dispatch_setter.shape == (1, len(SLOTS))
    assert t.first_difference(0, 1) == "root1" and t.first_difference(0, 0) is None


def test_state_ids_in_first_appearance_order():
    b = builder()
    b.SetPipelineState("noroot")
    for topo in ("TRIANGLESTRIP", "TRIANGLELIST", "TRIANGLESTRIP", "POINTLIST", "TRIANGLELIST"):
        b.IASetPrimitiveTopology(topo)
        b.DrawInstanced(3, 1, 0, 0)
    t = track(b.build())
    assert t.state.tolist() == [0, 1, 0, 2, 1]
    assert t.state.dtype == np.int32 and t.pack.dtype == np.int32
    assert t.rows.dtype == np.int32 and t.setter.dtype == np.int32 and t.draws.dtype == np.int64  # setters: int32


def test_describe_is_stream_independent():
    def make(order: int) -> Stream:
        b = StreamBuilder()
        names = ["a", "b"] if order else ["b", "a"]
        for nm in names:
            b.buffer(nm, size=1024)
        b.pipeline("p", vs="v", ps="p", layout="l")
        b.SetPipelineState("p")
        b.IASetVertexBuffers(0, "a", 0, 16)
        b.DrawInstanced(3, 1, 0, 0)
        return b.build()
    x, y = track(make(0)), track(make(1))
    assert x.describe(0) == y.describe(0)
    assert compare_effective_state(make(0), make(1)) is None


def test_root_index_out_of_range_is_an_input_error():
    b = builder()
    b.SetGraphicsRootDescriptorTable(16, "h0[0]", line=7)
    with pytest.raises(StreamCheckError, match="root parameter index must be below 16"):
        b.build()
    for pure in (True, False) if HAS_CEXT else (True,):
        with pytest.raises(InputError, match="root parameter index 16") as e:
            track(b.build(check=False), pure=pure)
        assert e.value.loc.line == 7


def test_empty_streams():
    for kind in ("list", "bundle"):
        t = track(StreamBuilder(kind=kind).build())
        assert t.draws.size == 0 and t.rows.shape == (0, len(SLOTS)) and t.setter.shape == (0, len(SLOTS))
        assert compare_effective_state(StreamBuilder(kind=kind).build(), StreamBuilder(kind=kind).build()) is None


def test_intern_values_wide_ranges():
    from drawopt.analysis.state import _intern_values
    big = np.array([[-1, 2**63 - 1], [0, 0], [-1, 2**63 - 1], [2**62, -(2**63)]], np.int64)
    ids, uniq = _intern_values(big)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 3 and (uniq[ids] == big).all()
    small = np.array([[3, 1], [3, 2], [3, 1]], np.int64)
    ids, uniq = _intern_values(small)
    assert ids[0] == ids[2] != ids[1] and (uniq[ids] == small).all()


def test_intern_rows_matches_unique():
    rng = np.random.default_rng(1)
    m = rng.integers(-3, 3, (5000, 7))
    ids, first = intern_rows(m)
    assert (m[first][ids] == m).all()
    assert first.tolist() == sorted(first.tolist())
    assert len(first) == len(np.unique(m, axis=0))
    ids1, _ = intern_rows(m[:, :1])
    assert (ids1 == intern_rows(m[:, 0])[0]).all()


# ---------------------------------------------------------------------- comparison
def test_compare_effective_state_reports_first_difference():
    def make(const: int, extra: bool = False) -> Stream:
        b = builder()
        b.SetGraphicsRootSignature("rsA")
        b.SetPipelineState("pull", line=3)
        b.DrawInstanced(3, 1, 0, 0, line=4)
        b.SetGraphicsRoot32BitConstants(1, 1, const, line=5)
        b.DrawInstanced(3, 1, 0, 0, line=6)
        if extra:
            b.DrawInstanced(3, 1, 0, 0, line=7)
        return b.build()
    assert compare_effective_state(make(1), make(1)) is None
    r = compare_effective_state(make(1), make(2))
    assert r is not None and "draw #1" in r and "root1" in r and "line 6" in r
    assert "(1,)" in r and "(2,)" in r
    r = compare_effective_state(make(1), make(1, True))
    assert r is not None and "draw #2" in r and "only after" in r
    # arguments
    b = builder()
    b.SetPipelineState("pull")
    b.DrawInstanced(6, 1, 0, 0)
    r = compare_effective_state(make(1), b.build())
    assert r is not None and "draw #0" in r and "arguments differ" in r


def test_compare_sees_state_at_opaque_and_bundle_end():
    def make(topo: str, kind: str = "list") -> Stream:
        b = builder(kind=kind)
        b.IASetPrimitiveTopology(topo)
        b.Opaque("ExecuteIndirect")
        return b.build()
    r = compare_effective_state(make("POINTLIST"), make("TRIANGLELIST"))
    assert r is not None and "opaque command #0" in r and "topology" in r
    r = compare_effective_state(make("POINTLIST", "bundle"), make("POINTLIST", "bundle"))
    assert r is None
    a, c = builder(kind="bundle"), builder(kind="bundle")
    a.IASetPrimitiveTopology("POINTLIST")
    r = compare_effective_state(a.build(), c.build())
    assert r is not None and "end of bundle" in r


# ---------------------------------------------------------------------- both kernels, reference model
def assert_same_tables(x: StateTable, y: StateTable) -> None:
    for f in ("draws", "state", "pack", "rows", "setter", "dispatches", "dispatch_state", "dispatch_setter"):
        a, b = getattr(x, f), getattr(y, f)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), f
    assert np.array_equal(x.scan.prev, y.scan.prev) and np.array_equal(x.scan.unknown, y.scan.unknown)


def _hand_a() -> Stream:
    b = builder()
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetGraphicsRoot32BitConstants(1, 1, 3, dest=2)
    b.SetPipelineState("lay")
    b.Opaque("x")
    b.SetDescriptorHeaps("h1")
    b.SetGraphicsRoot32BitConstants(1, 1, 3, dest=1)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("rsB")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    return b.build()


def _hand_b() -> Stream:
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0")
    b.SetComputeRootSignature("rsA")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.IASetVertexBuffers(2, "verts", 0, 16)
    return b.build()


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built (python setup.py build_ext --inplace)")
@pytest.mark.parametrize("make", [_hand_a, _hand_b, lambda: big_stream(500)])
def test_kernels_agree_on_hand_built_streams(make):
    s = make()
    assert_same_tables(track(s, pure=True), track(s, pure=False))
    check_against_reference(s)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_kernels_agree_and_match_reference(s):
    t = check_against_reference(s, pure=False)
    assert_same_tables(t, track(s, pure=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_pure_path_matches_reference(s):
    check_against_reference(s, pure=True)
    assert compare_effective_state(s, s) is None


@pytest.mark.skipif(shared_streams is None, reason="tests/strategies.py not available")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_shared_strategy_streams(data):
    s = data.draw(shared_streams(max_commands=50))
    t = check_against_reference(s, pure=None)
    if HAS_CEXT:
        assert_same_tables(t, track(s, pure=True))


# ---------------------------------------------------------------------- the other kernels vs their twins
def assert_same_scan_facts(s: Stream, seed: int = 0) -> None:
    """Every fact the compiled kernels give about ``s`` (rows, masks, interning, the setters
    observers read, row differences, chains) equals its pure twin's."""
    from drawopt.analysis.state import UNKNOWN, scan
    a, b = scan(s, pure=False), scan(s, pure=True)
    for name in ("kcode", "slot", "cval", "prev", "obs", "obs_kind", "setter", "unknown", "pipe", "epoch", "_pidx"):
        x, y = getattr(a, name), getattr(b, name)  # the scan kernel's outputs, its twin's
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
    o = a.obs.shape[0]
    rng = np.random.default_rng(seed)
    sel = rng.integers(0, max(o, 1), 2 * o) if o else np.zeros(0, np.int64)
    for x, y in ((a.normalised(slice(None)), b.normalised(slice(None))), (a.values_of(sel), b.values_of(sel)),
                 (a.normalised(sel), b.normalised(sel)), (a.read_mask(sel), b.read_mask(sel))):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    for k in range(len(SLOTS)):  # one column of the rows
        assert np.array_equal(a.slot_values(sel, k), a.normalised(sel)[:, k])
    for x, y in zip(a.observed_setters(), b.observed_setters()):
        for u, v in (zip(x, y) if isinstance(x, tuple) else [(x, y)]):
            assert u.dtype == v.dtype and np.array_equal(u, v)
    # array readers of a selection: those of everyone, found at their places in the selection
    rows, pj = a.array_readers(slice(None))
    r, q = a.array_readers(sel)
    reader = dict(zip(rows.tolist(), pj.tolist()))
    want = [(i, reader[int(v)]) for i, v in enumerate(sel.tolist()) if int(v) in reader]
    assert list(zip(r.tolist(), q.tolist())) == want
    for k, ch in a.chains.items():
        assert np.array_equal(ch.filled(), b.chains[k].matrices()[2])
        # the values the chains leave: ch.base + j, row j (words, then the unknown flag)
        assert ch.base == b.chains[k].base and np.array_equal(ch.rows, b.chains[k].rows)
        cv = a.cval[ch.cmds] - ch.base
        assert np.array_equal(ch.rows[cv, :-1], ch.filled()) and np.array_equal(np.unique(cv), np.arange(len(ch.rows)))
    # row differences between two tables' states, through random value maps
    t = track(s)
    dsel = np.flatnonzero(a.obs_kind == 0)
    if dsel.size and t.rows.shape[0]:
        from drawopt.analysis.state import diff_state_rows
        ref = rng.integers(0, t.rows.shape[0], dsel.shape[0])
        nv = int(a.values.next) + 1
        ma = np.r_[rng.integers(-10, 3, nv), UNKNOWN, -2, -1]
        mb = np.r_[rng.integers(-10, 3, nv), UNKNOWN, -2, -1]
        x = diff_state_rows(t.rows, ref, t.rows, t.state, ma, mb, -10, pure=False)
        y = diff_state_rows(t.rows, ref, t.rows, t.state, ma, mb, -10, pure=True)
        assert np.array_equal(x, y)
        # the tables' int32 rows are read in place; other rows (int64, or one of each) the same
        wide = t.rows.astype(np.int64)
        assert np.array_equal(diff_state_rows(wide, ref, t.rows, t.state, ma, mb, -10, pure=False), x)
        assert np.array_equal(diff_state_rows(wide, ref, wide, t.state, ma, mb, -10, pure=False), x)
        ka, kb = ma[t.rows[ref]], mb[a.normalised(dsel)]
        want = ((ka != kb) | (ka == -10)) @ (1 << np.arange(len(SLOTS), dtype=np.int64))
        assert np.array_equal(x, want)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_row_kernels_agree_with_pure_twins(s):
    assert_same_scan_facts(s)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@pytest.mark.parametrize("kind", ["frame", "quads", "gpu-driven", "bundle"])
def test_row_kernels_agree_on_generated_streams(kind):
    from drawopt.gen import generate
    assert_same_scan_facts(generate(kind, 1500, seed=4), seed=1)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_compiled_table_rows_hold_only_the_distinct_states():
    """Issue 13: the compiled ``intern_observers`` fills a block with room for every observer;
    the table's ``rows`` must not be a view of it (that kept the room, a third more memory
    than the distinct rows at 1M draws, alive with every table)."""
    from drawopt.gen import generate
    t = track(generate("frame", 3000, seed=1), pure=False)
    assert t.rows.shape[0] < t.draws.shape[0]  # states repeat: the block had room to spare
    block = t.rows
    while block.base is not None:  # the memory the rows keep alive
        block = block.base
    assert block.nbytes == t.rows.nbytes
    assert np.array_equal(t.rows, track(generate("frame", 3000, seed=1), pure=True).rows)


@pytest.mark.parametrize("pure", [False, True])
def test_table_rows_are_int32_and_a_value_id_past_it_is_refused(pure):
    """Issue 13: a table keeps its rows as int32 (half the memory of the largest array it
    holds); both interning paths give int32 rows and refuse a value id that would not fit
    rather than wrap it."""
    from types import SimpleNamespace

    from drawopt.analysis.state import MASKED, UNKNOWN, _intern_observers_py
    from drawopt.gen import generate
    if not pure and not HAS_CEXT:
        pytest.skip("drawopt._state is not built")
    t = track(generate("frame", 800, seed=2), pure=pure)
    assert t.rows.dtype == np.int32 and t.rows.shape[1] == len(SLOTS)
    sc = t.scan
    sel = np.flatnonzero(sc.obs_kind == 0)
    big = sc.cval.copy()
    big[int(sc.setter[sel[0], 0])] = 2**31  # the pipeline value the first draw sees
    if pure:
        def wide_rows(idx: np.ndarray, bits: np.ndarray) -> np.ndarray:
            v = sc._rows_py(idx, bits)
            v[0, 0] = 2**31
            return v

        fake = SimpleNamespace(read_bits=sc.read_bits, epoch=sc.epoch, _rows_py=wide_rows)
        with pytest.raises(ValueError, match="32 bits"):
            _intern_observers_py(fake, sel, sc.values.partial_mask())  # type: ignore[arg-type]
    else:
        from drawopt import _state
        with pytest.raises(ValueError, match="32 bits"):
            _state.intern_observers(sc.setter, sc.unknown, big, sc.init_val, sc.read_bits, sc.epoch,
                                    sc.values.partial_mask().view(np.uint8), sel, MASKED, UNKNOWN)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_intern_rows_kernel_matches_pure_twin():
    from drawopt.analysis.state import _intern_rows_py
    rng = np.random.default_rng(3)
    cases = [rng.integers(-3, 3, (4000, 7)), rng.integers(-3, 3, (4000, 7)).astype(np.int32),
             rng.integers(0, 5, 3000), rng.integers(-(2**62), 2**62, (2000, 1)),  # one column: small, wide range
             rng.integers(0, 2, (500, 3)).astype(bool), rng.integers(0, 2**63, (500, 2), dtype=np.uint64),
             np.zeros((0, 4), np.int64), np.zeros((5, 0), np.int64), np.repeat(rng.integers(0, 9, (50, 45)), 7, axis=0)]
    for m in cases:
        ids, first = intern_rows(m, pure=False)
        rid, rfirst = _intern_rows_py(m)
        assert ids.dtype == rid.dtype == first.dtype == rfirst.dtype == np.int64
        assert np.array_equal(ids, rid) and np.array_equal(first, rfirst), m.dtype


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_chain_kernels_match_pure_twins():
    """``const_writes`` and ``chain_values`` (the compiled scan's merge-slot chains) give what
    the numpy lines of the scan give: the same writes, and the rows of ``fill_chains`` plus
    the unknown flag, interned in first-appearance order."""
    from drawopt import _state
    from drawopt.analysis.state import _const_writes, _intern_rows_py, scan
    from drawopt.gen import generate
    for kind in ("frame", "gpu-driven", "bundle"):
        s = generate(kind, 800, seed=2)
        sc = scan(s, pure=True)
        for k, ch in sc.chains.items():
            if SLOTS[k] != "vertex_buffers":
                got, want = _const_writes(s, ch.cmds, False), _const_writes(s, ch.cmds, True)
                assert all(np.array_equal(x, y) for x, y in zip(got[:3], want[:3])) and got[3] == want[3]
            filled = ch.matrices()[2]
            seg = np.maximum.accumulate(np.where(ch.start, np.arange(ch.start.shape[0]), 0))
            rows = np.concatenate([filled, (ch.init[seg] == -3)[:, None].astype(np.int64)], axis=1)
            ids, first = _intern_rows_py(rows)
            fa, urows = _state.chain_values(ch.start, ch.init, ch.owner, ch.col, ch.wv, ch.width)
            assert np.array_equal(fa, ids) and np.array_equal(urows, rows[first])
    # a count that is not the number of values: no kernel result (the numpy lines decide)
    s = big_stream(3)
    c = np.flatnonzero(s.op == BY_NAME["SetGraphicsRoot32BitConstants"].code)
    bad = s.var_len.copy()
    bad[c[0]] = 3
    assert _state.const_writes(c, s.args, s.var_off, bad, s.pool) is None
    with pytest.raises(ValueError):
        _state.chain_values([1, 0], [-1, -1], [1, 0], [0, 0], [5, 6], 1)


def _generated(kind: str) -> Stream:
    from drawopt.gen import generate
    return generate(kind, 700, seed=5)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@pytest.mark.parametrize("make", [_hand_a, _hand_b, lambda: big_stream(300),
                                  *(lambda k=k: _generated(k) for k in ("frame", "quads", "gpu-driven", "bundle"))])
def test_command_values_kernel_matches_pure_twin(make):
    """``command_values`` (slot, kernel code, table flag and the interned value key of every
    command) equals its numpy twin, array for array."""
    from drawopt import _state
    from drawopt.analysis.state import _GS_BLOCK, _OPTAB, _command_values_py
    s = make()
    ht = np.array([(0 if getattr(d, "type", "") == "CBV_SRV_UAV" else 1) if d.kind == "heap" else -1
                   for d in s.decls.items] or [-1], np.int64)
    got = _state.command_values(s.op, s.args, s.var_off, s.var_len, s.pool, ht, _OPTAB, _GS_BLOCK)
    want = _command_values_py(s, ht)
    for x, y in zip(got, want):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def _many_values(n: int = 3000) -> Stream:
    """``n`` draws, each with its own scissor rect, constants and table: thousands of distinct
    keys and values (the kernels' tables grow several times)."""
    b = builder()
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    for i in range(n):
        b.RSSetScissorRects(i, i % 7, i + 1, 9)
        b.SetGraphicsRoot32BitConstants(1, 2, i, i // 3)
        b.SetGraphicsRootDescriptorTable(0, f"h0[{i % 4}]")
        b.DrawInstanced(3, 1, 0, 0)
        if i % 500 == 250:
            b.Opaque("x")
    return b.build()


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_kernels_agree_when_their_tables_grow():
    """Thousands of distinct keys, values, states: the command_values and intern_rows tables
    start small and grow; ids, rows and every scan fact stay those of the pure twins."""
    from drawopt import _state
    from drawopt.analysis.state import _GS_BLOCK, _OPTAB, _command_values_py
    s = _many_values()
    ht = np.array([(0 if getattr(d, "type", "") == "CBV_SRV_UAV" else 1) if d.kind == "heap" else -1
                   for d in s.decls.items] or [-1], np.int64)
    got = _state.command_values(s.op, s.args, s.var_off, s.var_len, s.pool, ht, _OPTAB, _GS_BLOCK)
    assert got[4].shape[0] > 3000  # distinct keys: the table grew from 1024 slots
    for x, y in zip(got, _command_values_py(s, ht)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert_same_tables(track(s, pure=True), track(s, pure=False))
    assert_same_scan_facts(s)
    # a root index out of range answers None even after an out-of-range heap list
    bad = s.var_off.copy()
    bad[np.flatnonzero(s.op == BY_NAME["SetDescriptorHeaps"].code)[0]] = s.pool.shape[0]  # its list past the pool
    args = s.args.copy()
    args[np.flatnonzero(s.op == BY_NAME["SetGraphicsRootDescriptorTable"].code)[-1], 0] = 16
    assert _state.command_values(s.op, args, bad, s.var_len, s.pool, ht, _OPTAB, _GS_BLOCK) is None
    with pytest.raises(IndexError):
        _state.command_values(s.op, s.args, bad, s.var_len, s.pool, ht, _OPTAB, _GS_BLOCK)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_kernels_reject_out_of_range_input():
    from drawopt import _state
    st_ = np.full((2, 3), 9, np.int64)  # setters past cval
    z = np.zeros(2, np.int64)
    with pytest.raises(IndexError):
        _state.observer_rows(st_, z, np.zeros(4, np.int64), np.zeros(3, np.int64), np.full(2, 7), [0], -2, -3)
    with pytest.raises(IndexError):
        _state.observed_setters(st_, np.full(2, 7), z, 0, 4)
    with pytest.raises(ValueError):
        _state.fill_chains([1, 0], [-1, -1], [1, 0], [0, 0], [5, 6], 1)  # owner not non-decreasing


# ---------------------------------------------------------------------- speed
def big_stream(ndraw: int, seed: int = 0) -> Stream:
    """``ndraw`` draws of 4 commands each (pipeline, per-draw constants, table, draw), columnar."""
    rng = np.random.default_rng(seed)
    b = builder()
    b.OMSetRenderTargets("rt0")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootSignature("rsA")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    head = b.build()
    d = head.decls
    n = ndraw * 4
    op = np.zeros(n, np.uint16)
    args = np.zeros((n, NARGS), np.int64)
    var_len = np.zeros(n, np.int32)
    var_off = np.zeros(n, np.int64)
    k = np.arange(ndraw) * 4
    pipes = np.array([d.index[p] for p in ("pull", "lay", "tess", "psw")])
    op[k] = BY_NAME["SetPipelineState"].code
    args[k, 0] = pipes[rng.integers(0, 4, ndraw)]
    op[k + 1] = BY_NAME["SetGraphicsRoot32BitConstants"].code
    args[k + 1, 0], args[k + 1, 1] = 1, 4
    var_len[k + 1] = 4
    var_off[k + 1] = np.arange(ndraw) * 4
    op[k + 2] = BY_NAME["SetGraphicsRootDescriptorTable"].code
    args[k + 2, 1] = (d.index["h0"] << 32) | rng.integers(0, 4, ndraw)
    op[k + 3] = BY_NAME["DrawIndexedInstanced"].code
    args[k + 3, 0], args[k + 3, 1] = 36, 1
    body = Stream(head.header, d, op, args, var_off, var_len, rng.integers(0, 16, ndraw * 4),
                  np.zeros(n, np.uint8), np.zeros(n, np.int32), head.strings)
    return concat([head, body], head.header, d, head.strings)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_track_100k_draws():
    """Tracking 100k draws works (its speed is bench/run.py's: no wall-clock assertion here)."""
    s = big_stream(100_000)
    t = track(s)
    assert t.draws.shape == (100_000,) and len(s) == 400_004


@pytest.mark.slow
@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_track_1m_draws():
    s = big_stream(1_000_000)
    t = track(s)
    assert t.draws.shape == (1_000_000,)


_ = (TOPOLOGIES,)
