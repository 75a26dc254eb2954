"""The ``mdi`` pass (multidraw-indirect-and-flushes.txt).

Exact outputs for each case live in ``tests/golden/mdi/``. Here every output also
goes through an independent expansion: each multi-draw call is unrolled into the
draws it performs (records decoded from the CPU-written args buffer; GPU-written
records kept as (buffer, offset)), and the list of (state seen, draw) pairs must
equal the input's, in order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import multi_draws, streams

from drawopt.analysis.costmodel import MODELS, mdi_min_batch
from drawopt.analysis.state import OBS_DRAW, ROOT0, track
from drawopt.errors import InputError
from drawopt.gen import generate
from drawopt.ir.ops import BY_NAME, MULTI_DRAW_OPS, Cat
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes import mdi
from drawopt.passes.mdi import MAX_LIFTED_RECORDS, MdiPass, args_records, draw_data_contracts, plan_mdi
from drawopt.passmanager import AnalysisManager, PassManager, PipelineContext, get_pass, parse_pipeline
from drawopt.validate import findings
from drawopt.verify import verify

_DIRECT = {"DrawInstanced": False, "DrawIndexedInstanced": True}
_SINGLE = {"DrawInstancedIndirect": False, "DrawIndexedInstancedIndirect": True}
_MULTI = {"MultiDrawInstancedIndirect": False, "MultiDrawIndexedInstancedIndirect": True}
MAX_ORACLE_RECORDS = 1 << 16
"""Most multi-draw records :func:`expand` lists in the random-stream property."""


def expand(s: Stream) -> list[tuple]:
    """Every draw a stream performs, with the state it sees: ``(state, kind, args, ...)``.

    For a pipeline with a ``draw_data`` / ``instance_data`` contract (docs/architecture.md)
    each instance is listed with what its shader reads: base vertex, instance and lift
    items from the record at index StartInstanceLocation + i of the buffer bound at the
    contract's root parameter when one is bound, else from the draw arguments and the
    root constants (StartInstanceLocation itself is then unobservable).
    """
    table = track(s)
    contracts = draw_data_contracts(s.decls)
    out: list[tuple] = []
    for d, sid in zip(table.draws.tolist(), table.state.tolist()):
        c = s.command(d)
        desc = table.describe(int(sid))
        pipe = desc["pipeline"]
        con = contracts.get(s.decls.index[pipe]) if isinstance(pipe, str) and pipe in s.decls else None
        ctx = _Seen(s, con, desc)
        if c.name in _DIRECT:
            out += ctx.draw("indexed" if _DIRECT[c.name] else "plain", tuple(c.args), _DIRECT[c.name])
        elif c.name in _SINGLE:
            out += ctx.record(c["args_buffer"], c["offset"], _SINGLE[c.name])
        elif c.name in _MULTI:
            for i in range(c["count"]):
                out += ctx.record(c["args_buffer"], c["offset"] + i * c["stride"], _MULTI[c.name])
        else:  # Auto variants, DrawIndexedX: the call itself
            out.append((ctx.st, c.name, tuple(c.args)))
    return out


def _value_word(v, k: int):
    """Lift item word ``k`` of a root argument as ``StateTable.describe`` gives it: word k of
    root constants, a table's heap slot, half k of a root view's byte offset."""
    if not isinstance(v, tuple) or not v:
        return None
    if v[0] == "constants":
        return (tuple(v[1]) + (None,) * (k + 1))[k]
    if v[0] == "table":
        return v[2] if k == 0 else None
    return (v[2] >> (32 * k)) & 0xFFFFFFFF


def _value_rest(v, ks: list[int]):
    """What a lift leaves of a root argument: the other constant words, a table's heap, a
    root view's buffer and unlifted offset half."""
    if not isinstance(v, tuple) or not v:
        return v
    if v[0] == "constants":
        return tuple(w for j, w in enumerate(v[1]) if j not in ks)
    if v[0] == "table":
        return ("table", v[1])
    return (v[0], v[1], tuple((v[2] >> (32 * k)) & 0xFFFFFFFF for k in (0, 1) if k not in ks))


class _Seen:
    """What the draws of one call observe (see :func:`expand`)."""

    def __init__(self, s: Stream, con, desc: dict) -> None:
        self.s, self.con = s, con
        self.bound = desc.get(f"root{con.perdraw}") if con else None
        self.items: tuple = ()
        if con:
            vals = {q: desc.get(f"root{q}") for q in con.params}
            self.items = tuple(_value_word(vals[q], k) for q, k in con.items)
            for q in con.params:   # the rest of a lifted parameter is still state
                ks = [k for qq, k in con.items if qq == q]
                rest = _value_rest(vals[q], ks)
                if con.kind(q) == "table" or vals[q] == "<masked>" or rest == ():
                    # a lifted table's heap slot indexes the bound heap (the "heaps" slot); a draw
                    # reading a bound array does not observe a fully lifted parameter at all
                    desc.pop(f"root{q}")
                else:
                    desc[f"root{q}"] = rest
            desc.pop(f"root{con.perdraw}")
        self.st = repr(sorted(desc.items()))

    def draw(self, kind: str, args: tuple, indexed: bool) -> list[tuple]:
        con = self.con
        if con is None:
            return [(self.st, kind, args)]
        si = 4 if indexed else 3
        core = (args[0], args[2])
        if args[1] > MAX_LIFTED_RECORDS:
            # too many instances to list one by one (random u32 counts): mdi never lifts nor
            # renumbers such a draw, so both streams keep it in one form; compare it whole
            how = ("native", args[3] if indexed else 0, self.items) if self.bound is None else \
                ("bound", *(self.bound[1:] if isinstance(self.bound, tuple) else (self.bound,)), con.words)
            return [(self.st, kind, core, ("instances", args[si], args[1]), how)]
        out = []
        for i in range(args[1]):
            if self.bound is None:   # native: the draw arguments and the root constants
                out.append((self.st, kind, core, args[3] if indexed else 0, args[si] + i, self.items))
                continue
            if not isinstance(self.bound, tuple):
                # a view the state does not know ("<unknown>": a bundle's inherited binding): the shader
                # reads record StartInstanceLocation + i of whatever the caller bound there
                out.append((self.st, kind, core, ("record of", self.bound), args[si] + i))
                continue
            _, buf, off = self.bound
            w = [int(x) for x in self.s.decls[buf].words(off + (args[si] + i) * 4 * con.words, con.words)]
            base = w[0] - (1 << 32) if w[0] >= 1 << 31 else w[0]
            out.append((self.st, kind, core, base, w[1], tuple(w[2:])))
        return out

    def record(self, buf: str, off: int, indexed: bool) -> list[tuple]:
        b = self.s.decls[buf]
        if b.cpu and b.data is not None:
            w = [int(x) for x in b.words(off, 5 if indexed else 4)]
            if indexed:
                w[3] = w[3] - (1 << 32) if w[3] >= 1 << 31 else w[3]
            return self.draw("indexed" if indexed else "plain", tuple(w), indexed)
        return [(self.st, "gpu-indexed" if indexed else "gpu-plain", (buf, off))]


def run(s: Stream, passes: str = "mdi", target: str = "d3d12") -> tuple[Stream, dict]:
    pm = PassManager(parse_pipeline(passes), verify_each=True, target=target)
    out = pm.run(s)
    assert expand(out) == expand(s)
    return out, pm.records[-1].report


def calls(s: Stream) -> list[str]:
    return [c.name for c in s.commands() if c.spec.cat == Cat.DRAW]


def base(fast: bool = False) -> StreamBuilder:
    b = StreamBuilder(fast_semantics=fast)
    b.buffer("verts", 1 << 20)
    b.buffer("ib", 1 << 16)
    b.buffer("cullargs", 1 << 16)
    b.buffer("counts", 64)
    b.target("rt", 64, 64)
    b.target("rt2", 64, 64)
    b.heap("res", size=8)
    b.texture("t0", 64, 64, "BC7_UNORM")
    b.texture("t1", 64, 64, "BC7_UNORM")
    b.view("res", 0, "srv", "t0")
    b.view("res", 1, "srv", "t1")
    b.rootsig("main", "table(srv,1)", "constants(4)")
    b.pipeline("p", vs="v", ps="p", root="main", layout="pos")
    b.pipeline("q", vs="v", ps="q", root="main", layout="pos")
    b.pipeline("cull", cs="cull", root="main", writes=("cullargs", "counts"))
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRoot32BitConstants(1, 4, 0, 0, 0, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.IASetVertexBuffers(0, "verts", 0, 32)
    return b


def test_registered() -> None:
    assert get_pass("mdi") is MdiPass and MdiPass.name == "mdi"


def test_records_are_the_d3d12_structures() -> None:
    b = base()
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.DrawIndexedInstanced(36, 2, 6, -5, 7)
    b.DrawInstanced(3, 4, 5, 6)
    s = b.build()
    draws = track(s).draws
    rec = args_records(s, draws[:1], indexed=True)
    assert rec.dtype == np.uint32 and rec.tolist() == [[36, 2, 6, 0xFFFFFFFB, 7]]
    assert args_records(s, draws[1:], indexed=False).tolist() == [[3, 4, 5, 6]]


def test_per_material_batches() -> None:
    b = base()
    for pipe, tables in (("p", (0, 0, 1)), ("q", (1,))):
        b.SetPipelineState(pipe)
        for t in tables:
            b.SetGraphicsRootDescriptorTable(0, f"res[{t}]")
            for k in range(4):
                b.DrawIndexedInstanced(36, 1 + k % 2, 36 * k, 10 * k - 15, k)
    s = b.build()
    out, rep = run(s)
    assert calls(out) == ["MultiDrawIndexedInstancedIndirect"] * 3    # material p/t0 (8 draws), p/t1, q/t1
    assert [c["count"] for c in out.commands() if c.name.startswith("Multi")] == [8, 4, 4]
    assert rep["direct_draws_batched"] == 16 and rep["args_buffer"] == "mdi_args0"
    gen = out.decls["mdi_args0"]
    assert gen.cpu and gen.size == 16 * 20 and gen.data.size == 16 * 5
    offsets = [c["offset"] for c in out.commands() if c.name.startswith("Multi")]
    assert offsets == [0, 160, 240] and all(o % 4 == 0 for o in offsets)
    assert all(c["stride"] == 20 for c in out.commands() if c.name.startswith("Multi"))
    # the state commands between the draws are all still there, in order
    state = [c for c in s.commands() if c.spec.cat == Cat.STATE]
    assert [c for c in out.commands() if c.spec.cat == Cat.STATE] == state


def test_limit_splits_cleanly() -> None:
    b = base()
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    for k in range(11):
        b.DrawInstanced(6, 1, 6 * k, 0)
    s = b.build()
    out, _ = run(s, "mdi{max-count=4}", target="xbox-one")
    assert [(c.name, c.args[0]) for c in out.commands() if c.spec.cat == Cat.DRAW] == [
        ("MultiDrawInstancedIndirect", 4), ("MultiDrawInstancedIndirect", 4), ("MultiDrawInstancedIndirect", 3)]
    # the target's own limit applies too
    small = dataclasses.replace(MODELS["vulkan"], mdi_max_count=5)
    t = track(s)
    plan = plan_mdi(s, t, target=small)
    assert sorted(plan.replace[:, 2].tolist()) == [5, 5]   # the last draw is a remainder of 1
    assert plan.direct_draws == 10


@pytest.mark.parametrize("target", ["d3d12", "xbox-one", "xbox-series", "vulkan", "gl"])
def test_cost_model_minimum(target: str) -> None:
    need = max(2, mdi_min_batch(target))
    for n in (need - 1, need):
        b = base()
        b.SetPipelineState("p")
        b.SetGraphicsRootDescriptorTable(0, "res[0]")
        for k in range(n):
            b.DrawInstanced(6, 1, 6 * k, 0)
        out, _ = run(b.build(), "mdi", target=target)
        assert calls(out) == (["MultiDrawInstancedIndirect"] if n >= need else ["DrawInstanced"] * n)


def test_different_state_not_merged() -> None:
    b = base()
    b.pipeline("nm", vs="v", ps="p", root="main", layout="pos", contract="never_merge")
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    for k in range(3):                            # root constants differ: no draw_data contract
        b.SetGraphicsRoot32BitConstants(1, 1, k)
        b.DrawInstanced(6, 1, 0, 0)
    b.DrawInstanced(6, 1, 0, 0)
    b.DrawInstanced(6, 1, 0, 0, flags="nomerge")  # breaks the run
    b.DrawInstanced(6, 1, 0, 0)
    b.DrawInstanced(6, 1, 0, 0)
    b.OMSetRenderTargets("rt2")
    b.DrawInstanced(6, 1, 0, 0)
    b.SetPipelineState("nm")
    for _ in range(4):
        b.DrawInstanced(6, 1, 0, 0)
    s = b.build()
    out, _ = run(s, "mdi", target="xbox-one")        # xbox-one batches from 2 draws
    assert calls(out) == ["DrawInstanced", "DrawInstanced", "MultiDrawInstancedIndirect", "DrawInstanced",
                          "MultiDrawInstancedIndirect", "DrawInstanced"] + ["DrawInstanced"] * 4
    assert out.flags[[i for i, c in enumerate(out.commands()) if c.flags]].size == 1


def test_nothing_but_state_between() -> None:
    """A Dispatch, a flush or an Opaque command between two same-state draws keeps them apart."""
    b = base(fast=True)
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.DrawInstanced(6, 1, 0, 0)
    b.GpuSendPipelinedEvent("PS_PARTIAL_FLUSH")
    b.DrawInstanced(6, 1, 0, 0)
    b.Opaque("Marker")
    b.DrawInstanced(6, 1, 0, 0)
    b.ResourceBarrier("rt", "RENDER_TARGET", "RENDER_TARGET")
    b.DrawInstanced(6, 1, 0, 0)
    s = b.build()
    pm = PassManager([MdiPass()], verify_each=True, target="xbox-one")
    assert pm.run(s) is s


def test_indirect_draws_at_a_fixed_stride() -> None:
    b = base(fast=True)
    b.SetComputeRootSignature("main")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    for k in range(3):
        b.DrawIndexedInstancedIndirect("cullargs", 64 + 24 * k)
    b.MultiDrawIndexedInstancedIndirect(3, "cullargs", 64 + 72, 24)       # continues the progression
    b.DrawIndexedInstancedIndirect("cullargs", 64 + 24 * 7)               # a gap: new call
    b.DrawIndexedInstancedIndirect("cullargs", 64 + 24 * 8)
    b.DrawIndexedInstancedIndirect("cullargs", 64 + 24 * 9)
    b.DrawInstancedIndirect("cullargs", 4096)                             # other kind: apart
    b.DrawInstancedIndirect("cullargs", 4104)                             # stride 8 < 16: not mergeable
    b.DrawInstancedIndirect("cullargs", 4112)
    s = b.build()
    out, rep = run(s)
    got = [(c.name, *c.args) for c in out.commands() if c.spec.cat == Cat.DRAW]
    assert got == [("MultiDrawIndexedInstancedIndirect", 6, "cullargs", 64, 24),
                   ("MultiDrawIndexedInstancedIndirect", 3, "cullargs", 64 + 24 * 7, 24),
                   ("DrawInstancedIndirect", "cullargs", 4096), ("DrawInstancedIndirect", "cullargs", 4104),
                   ("DrawInstancedIndirect", "cullargs", 4112)]
    assert rep["indirect_merges"] == 2 and "args_buffer" not in rep     # no records generated
    assert not [f for f in findings(out) if f.rule == "missing-flush"]


def test_auto_variants_keep_their_count() -> None:
    b = base()
    b.SetComputeRootSignature("main")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.MultiDrawInstancedIndirectAuto("counts", 0, 8, "cullargs", 0, 16)
    b.MultiDrawInstancedIndirectAuto("counts", 4, 8, "cullargs", 128, 16)
    b.DrawInstancedIndirect("cullargs", 256)
    b.MultiDrawInstancedIndirectAuto("counts", 8, 8, "cullargs", 272, 16)
    s = b.build()
    pm = PassManager([MdiPass()], verify_each=True, target="xbox-one")
    assert pm.run(s) is s


def test_generated_name_is_fresh_and_output_is_a_fixpoint() -> None:
    b = base()
    b.buffer("mdi_args0", 16, cpu=True, data=[1, 1, 0, 0])
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[1]")
    for k in range(4):
        b.DrawInstanced(3, 1, 3 * k, 0)
    s = b.build()
    out, rep = run(s)
    assert rep["args_buffer"] == "mdi_args1"
    pm = PassManager([MdiPass()], verify_each=True)
    assert pm.run(out) is out


@pytest.mark.parametrize("flushes", ["missing", "correct"])
def test_gpu_driven_then_flush(flushes: str) -> None:
    s = generate("gpu-driven", 1500, seed=2, flushes=flushes, fast_semantics=True)
    out, rep = run(s, "mdi,flush", target="xbox-one")
    assert not [f for f in findings(out) if f.rule == "missing-flush"]
    n_in, n_out = len(calls(s)), len(calls(out))
    assert n_out < n_in
    # Auto variants are all still there, unchanged
    auto = [BY_NAME[n].code for n in ("MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto")]
    assert np.array_equal(s.args[np.isin(s.op, auto)], out.args[np.isin(out.op, auto)])
    assert set(np.unique(out.op[out.cats() == int(Cat.DRAW)]).tolist()) <= \
        set(np.unique(s.op[s.cats() == int(Cat.DRAW)]).tolist()) | set(MULTI_DRAW_OPS)


def test_frame_100k() -> None:
    # speed is measured by bench/, not asserted here (the machine is shared)
    s = generate("frame", 100_000, seed=7)
    pm = PassManager([MdiPass()], target="xbox-one")
    out = pm.run(s)
    assert len(calls(out)) < len(calls(s))
    assert pm.verified and not pm.records[0].rejected


# --------------------------------------------------------------------------- draw_data lifting
def _objects(later: str = "", n: int = 5, bound: bool = False) -> Stream:
    """Draws of a ``draw_data(perdraw=2,lift=1.0+1.1)`` pipeline that differ only in words 0
    and 1 of root constants 1."""
    b = StreamBuilder()
    b.buffer("ib", 1 << 16)
    b.buffer("objs", 1 << 16, cpu=True, data=list(range(64)))
    b.target("rt", 64, 64)
    b.heap("res", size=4)
    b.texture("t0", 64, 64, "BC7_UNORM")
    b.view("res", 0, "srv", "t0")
    b.rootsig("main", "table(srv,1)", "constants(4)", "srv")
    b.pipeline("obj", vs="pull", ps="lit", root="main", contract="draw_data(perdraw=2,lift=1.0+1.1)")
    b.pipeline("other", vs="pull", ps="lit", root="main")
    b.pipeline("nop", vs="pull", ps="lit", root="main", params=(0, 1))
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    if bound:
        b.SetGraphicsRootShaderResourceView(2, "objs", 0)
    b.SetPipelineState("obj")
    for k in range(n):
        b.SetGraphicsRoot32BitConstants(1, 4, k, 10 * k, 0, 0x3F800000)
        b.DrawIndexedInstanced(36, 1 + (k == 2), 36 * k, -k, 7 * k)
    if later == "reader":        # reads root parameter 2 with nothing set again: no lifting
        b.SetPipelineState("other")
        b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    elif later == "redefined":   # parameter 2 set again before the next reader: lifting is safe
        b.SetGraphicsRootShaderResourceView(2, "objs", 0)
        b.SetPipelineState("other")
        b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    elif later == "nonreader":   # a pipeline that does not read parameter 2
        b.SetPipelineState("nop")
        b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    return b.build()


@pytest.mark.parametrize("later", ["", "redefined", "nonreader"])
def test_draw_data_lifts_root_constants(later: str) -> None:
    s = _objects(later)
    out, rep = run(s)
    assert rep["lifted_draws"] == 5 and rep["perdraw_buffer"] == "mdi_perdraw0"
    t = names(out)
    i = t.index("MultiDrawIndexedInstancedIndirect 5 mdi_args0 0 20")
    assert t[i - 1] == "SetGraphicsRootShaderResourceView 2 mdi_perdraw0 0"
    # one record per instance (draw 2 has two): base vertex, the instance the shader saw,
    # then words 0 and 1 of root constants 1
    rec = out.decls["mdi_perdraw0"].data.reshape(6, 4)
    assert rec[:, 0].tolist() == [0, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFC]
    assert rec[:, 1].tolist() == [0, 7, 14, 15, 21, 28]
    assert rec[:, 2].tolist() == [0, 1, 2, 2, 3, 4] and rec[:, 3].tolist() == [0, 10, 20, 20, 30, 40]
    # StartInstanceLocation now indexes those records
    assert out.decls["mdi_args0"].data.reshape(5, 5)[:, 4].tolist() == [0, 1, 2, 4, 5]
    # the root constant sets stay: later draws see the same root constants as before
    assert sum(x.startswith("SetGraphicsRoot32BitConstants") for x in t) == 5


def test_draw_data_not_lifted_when_a_later_draw_would_see_the_binding() -> None:
    s = _objects("reader")
    pm = PassManager([MdiPass()], verify_each=True, target="xbox-one")
    assert pm.run(s) is s


def test_draw_data_array_already_bound() -> None:
    """Draws that already read their records from a bound array (index StartInstanceLocation)
    merge as they are: StartInstanceLocation is kept, so is every record they read, and
    the root constants they no longer read may differ."""
    s = _objects(bound=True)
    out, rep = run(s, "mdi{lift=false}", target="xbox-one")
    assert calls(out) == ["MultiDrawIndexedInstancedIndirect"]
    assert "perdraw_buffer" not in rep and rep["lifted_batches"] == 0
    assert out.decls["mdi_args0"].data.reshape(5, 5)[:, 4].tolist() == [0, 7, 14, 21, 28]


def test_lift_option_off() -> None:
    s = _objects()
    assert PassManager([MdiPass(lift=False)], verify_each=True).run(s) is s


def names(s: Stream) -> list[str]:
    return [" ".join([c.name, *(str(a) for a in c.args)]) for c in s.commands()]


def test_cpu_written_indirect_draws_join_direct_batches() -> None:
    b = base()
    b.buffer("cpuargs", 256, cpu=True, data=[36, 1, 0, 0, 0, 0, 0, 0, 12, 2, 36, 5, 3, 0, 0, 0,
                                             6, 1, 48, 2, 9, 0, 0, 0, 6, 1, 54, 2, 10])
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.DrawIndexedInstanced(36, 1, 0, 0, 0)
    b.DrawIndexedInstancedIndirect("cpuargs", 32)                     # (12, 2, 36, 5, 3)
    b.MultiDrawIndexedInstancedIndirect(2, "cpuargs", 64, 32)         # (6,1,48,2,9), (6,1,54,2,10)
    b.DrawIndexedInstanced(3, 1, 9, -1, 0)
    s = b.build()
    out, rep = run(s)
    assert calls(out) == ["MultiDrawIndexedInstancedIndirect"]
    assert [c.args[0] for c in out.commands() if c.spec.cat == Cat.DRAW] == [5]
    assert out.decls["mdi_args0"].data.reshape(5, 5).tolist() == [
        [36, 1, 0, 0, 0], [12, 2, 36, 5, 3], [6, 1, 48, 2, 9], [6, 1, 54, 2, 10], [3, 1, 9, 0xFFFFFFFF, 0]]


def test_cpu_written_progression_merged_without_copy_and_gpu_overwrite_respected() -> None:
    b = base()
    b.buffer("cpuargs", 256, cpu=True, data=list(range(64)))
    b.pipeline("fill", cs="fill", root="main", writes=("cpuargs",))
    b.SetPipelineState("p")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    for k in range(3):
        b.DrawInstancedIndirect("cpuargs", 32 * k)
    b.SetComputeRootSignature("main")
    b.SetPipelineState("fill")
    b.Dispatch(1, 1, 1)                         # the GPU overwrites the args from here on
    b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("p")
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawInstancedIndirect("cpuargs", 0)       # not CPU-known any more: stays apart
    b.DrawInstanced(3, 1, 3, 0)
    s = b.build()
    out, rep = run(s)
    assert [(c.name, *c.args) for c in out.commands() if c.spec.cat == Cat.DRAW] == [
        ("MultiDrawInstancedIndirect", 3, "cpuargs", 0, 32), ("DrawInstanced", 3, 1, 0, 0),
        ("DrawInstancedIndirect", "cpuargs", 0), ("DrawInstanced", 3, 1, 3, 0)]
    assert "args_buffer" not in rep


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=50), st.sampled_from(["xbox-one", "d3d12", "vulkan"]), st.sampled_from([None, 2, 3]))
def test_random_streams_draw_the_same(s: Stream, target: str, max_count: int | None) -> None:
    """On any valid stream the draws performed, and what each sees, are unchanged; besides
    draws, only binds of the generated per-draw buffer are added."""
    try:
        track(s)
    except InputError:
        assume(False)
    # the oracle lists every record of a multi-draw: keep to streams whose multi-draws it can
    # list (random u32 counts reach 2^32; one such stream took a CI run's memory)
    assume(multi_draws(s) <= MAX_ORACLE_RECORDS)
    res = MdiPass(max_count=max_count).apply(s, AnalysisManager(PipelineContext(target)))
    out = res.stream
    out.check()
    assert expand(out) == expand(s)
    other = out.cats() != int(Cat.DRAW)
    if "perdraw_buffer" in res.report:
        views = np.isin(out.op, [BY_NAME["SetGraphicsRootShaderResourceView"].code,
                                 BY_NAME["SetGraphicsRootConstantBufferView"].code])
        other &= ~(views & (out.args[:, 1] == out.decls.index[res.report["perdraw_buffer"]]))
    a, b = out.take(np.flatnonzero(other)), s.take(np.flatnonzero(s.cats() != int(Cat.DRAW)))
    assert np.array_equal(a.op, b.op) and np.array_equal(a.args, b.args) and np.array_equal(a.flags, b.flags)
    assert np.array_equal(a.var_values(), b.var_values())


def test_oracle_lists_the_records_of_an_inherited_per_draw_view() -> None:
    """A bundle's draws through a ``draw_data`` pipeline whose per-draw view the caller binds (the
    state says ``'<unknown>'``) read record StartInstanceLocation + i of that view: the oracle lists
    those indices (it used to unpack the string as a view), and a rewrite that renumbers them differs."""
    b = StreamBuilder(kind="bundle")
    b.rootsig("main", "constants(2)", "srv")
    b.pipeline("obj", vs="v", ps="p", root="main", contract="draw_data(perdraw=1,lift=0.0)")
    b.SetGraphicsRootSignature("main")
    b.SetPipelineState("obj")
    b.SetGraphicsRoot32BitConstants(0, 2, 7, 8)
    b.DrawInstanced(3, 2, 0, 0)
    b.DrawInstanced(3, 1, 0, 2)
    s = b.build()
    assert track(s).describe(int(track(s).state[0]))["root1"] == "<unknown>"
    assert [d[3:] for d in expand(s)] == [(("record of", "<unknown>"), i) for i in range(3)]
    moved = s.copy()
    di = BY_NAME["DrawInstanced"]
    moved.args[np.flatnonzero(moved.op == di.code)[1], di.col("start_instance")] = 5
    assert expand(moved) != expand(s)
    for target in ("xbox-one", "d3d12"):
        out = MdiPass().apply(s, AnalysisManager(PipelineContext(target))).stream
        assert expand(out) == expand(s)


# --------------------------------------------------------------------------- both clauses, tables, layouts
def _planted(out: Stream, name: str, word: int, delta: int = 1) -> Stream:
    """``out`` with word ``word`` of generated buffer ``name`` changed."""
    decls = out.decls.copy()
    b = decls[name]
    data = b.data.copy()
    data[word] = (int(data[word]) + delta) & 0xFFFFFFFF
    decls.replace(dataclasses.replace(b, data=data))
    return Stream(out.header, decls, out.op, out.args, out.var_off, out.var_len, out.pool, out.flags,
                  out.line, out.strings)


def _scene(contract: str, layout: str = "none", bindless: bool = False) -> StreamBuilder:
    b = StreamBuilder()
    b.buffer("ib", 1 << 16)
    b.buffer("verts", 1 << 20)
    b.buffer("ids", 1 << 12)
    b.buffer("xrec", 64, cpu=True, data=[5, 0, 9])
    b.target("rt", 64, 64)
    b.heap("res", size=8)
    b.heap("res2", size=8)
    b.texture("t0", 64, 64, "BC7_UNORM")
    for k in range(8):
        b.view("res", k, "srv", "t0")
        b.view("res2", k, "srv", "t0")
    b.rootsig("main", "table(srv,1)", "constants(2)", "srv", "srv")
    b.rootsig("other", "constants(1)")
    b.pipeline("obj", vs="v", ps="p", root="main", layout=layout, contract=contract)
    b.pipeline("plain", vs="v", ps="p", root="main", layout=layout)
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    if layout != "none":
        b.IASetVertexBuffers(0, "verts", 0, 32)
        b.IASetVertexBuffers(1, "ids", 0, 4)   # the per-draw id stream (instance rate)
    b.SetPipelineState("obj")
    return b


def test_x_and_draw_data_pipeline() -> None:
    """Non-DrawIndexedX draws of a pipeline with both clauses read through draw_data (root
    parameter 3 here), DrawIndexedX through x (parameter 2): a DrawIndexedX after the run
    does not see the generated binding, so the run is lifted."""
    b = _scene("x(vertex_bits=16,perdraw=2,lift=1.0),draw_data(perdraw=3,lift=1.0)")
    for k in range(4):
        b.SetGraphicsRoot32BitConstants(1, 2, 10 + k, 7)
        b.DrawIndexedInstanced(36, 1 + (k == 1), 36 * k, 4 * k, k)
    b.SetGraphicsRootShaderResourceView(2, "xrec", 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 36, 0)
    s = b.build()
    contracts = draw_data_contracts(s.decls)
    assert contracts[s.decls.index["obj"]].perdraw == 3
    out, rep = run(s)
    assert rep["lifted_draws"] == 4 and rep["lifted_batches"] == 1
    t = names(out)
    assert "SetGraphicsRootShaderResourceView 3 mdi_perdraw0 0" in t and t[-1].startswith("DrawIndexedX")
    # records [base vertex, instance seen, 1.0]; a wrong one shows
    assert out.decls["mdi_perdraw0"].data.reshape(5, 3)[:, 2].tolist() == [10, 11, 11, 12, 13]
    assert not verify(s, _planted(out, "mdi_perdraw0", 3 * 2 + 2)).equivalent
    assert not verify(s, _planted(out, "mdi_perdraw0", 3 * 4 + 1)).equivalent
    # the x record the DrawIndexedX reads is still checked
    assert not verify(s, _planted(out, "xrec", 2)).equivalent


def test_both_clauses_verify_items_lifted_by_one_only() -> None:
    """With different lift lists the shader observes their union: an item the clause in use
    does not lift comes from the root arguments (here 1.1 under draw_data)."""
    def build(last: int) -> Stream:
        b = _scene("x(vertex_bits=16,perdraw=2,lift=1.0+1.1),draw_data(perdraw=3,lift=1.0)")
        for k in range(4):
            b.SetGraphicsRoot32BitConstants(1, 2, 10 + k, 7 if k < 3 else last)
            b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
        return b.build()

    s = build(8)
    out, rep = run(s)
    assert rep["lifted_draws"] == 3          # 1.1 differs at the last draw: not in draw_data's list
    wrong, rep = run(build(7))
    assert rep["lifted_draws"] == 4
    assert not verify(s, wrong).equivalent   # the last draw would see 1.1 = 7


def test_bindless_table_slot_is_lifted() -> None:
    """draw_data(lift=0+...): the heap slot of the table at root parameter 0 goes into the
    record; draws differing only in it (and lifted constants) form one lifted run, but not
    across another heap (a table's heap is not lifted)."""
    b = _scene("draw_data(perdraw=2,lift=0+1.0)")
    for k, slot in enumerate((3, 4, 4, 5)):
        b.SetGraphicsRootDescriptorTable(0, f"res[{slot}]")
        b.SetGraphicsRoot32BitConstants(1, 2, 100 + k, 0)
        b.DrawIndexedInstanced(36, 1, 36 * k, 10 * k, 0)
    b.SetDescriptorHeaps("res2")
    for k in range(3):
        b.SetGraphicsRootDescriptorTable(0, f"res2[{k}]")
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    s = b.build()
    out, rep = run(s)
    assert rep["lifted_batches"] == 2 and rep["lifted_draws"] == 7
    rec = out.decls["mdi_perdraw0"].data
    assert rec[:16].reshape(4, 4)[:, 2].tolist() == [3, 4, 4, 5]
    assert rec[:16].reshape(4, 4)[:, 3].tolist() == [100, 101, 102, 103]
    assert not verify(s, _planted(out, "mdi_perdraw0", 4 + 2)).equivalent   # slot 4 -> 5
    # a lift list naming a table word other than 0, or the perdraw parameter: a load error
    # (Decls.add; tests/test_format_errors.py has the file:line:col cases)
    for bad, why in (("draw_data(perdraw=2,lift=0.1)", "has no value 1"),
                     ("draw_data(perdraw=2,lift=2)", "names the perdraw parameter")):
        b2 = StreamBuilder()
        b2.rootsig("main", "table(srv,1)", "constants(2)", "srv")
        with pytest.raises(ValueError, match=why):
            b2.pipeline("obj", vs="v", ps="p", root="main", contract=bad)


def test_input_layout_pipeline_with_draw_data() -> None:
    """On an input-layout pipeline the clause promises the record index is the only
    StartInstanceLocation-dependent input: mdi renumbers it as for vertex pulling, and the
    verifier accepts it; the per-vertex fetch still follows each draw's base vertex."""
    b = _scene("draw_data(perdraw=2,lift=1.0+1.1)", layout="pos_nrm_uv")
    for k in range(4):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 100 * k)
        b.DrawIndexedInstanced(36, 1 + (k == 2), 36 * k, 50 * k, 5 + 7 * k)
    s = b.build()
    out, rep = run(s)
    assert rep["lifted_draws"] == 4
    args = out.decls["mdi_args0"].data.reshape(4, 5)
    assert args[:, 4].tolist() == [0, 1, 2, 4] and args[:, 3].tolist() == [0, 50, 100, 150]
    rec = out.decls["mdi_perdraw0"].data.reshape(5, 4)
    assert rec[:, 1].tolist() == [5, 12, 19, 20, 26]
    assert not verify(s, _planted(out, "mdi_perdraw0", 4 * 2 + 1)).equivalent   # instance seen
    assert not verify(s, _planted(out, "mdi_args0", 5 + 3)).equivalent          # IA base vertex
    # without the clause StartInstanceLocation stays observable: same-state batches only
    b = _scene("no_primitive_id", layout="pos_nrm_uv")
    for k in range(4):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 100 * k)
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    s2 = b.build()
    assert PassManager([MdiPass()], verify_each=True).run(s2) is s2


def test_run_interrupted_by_an_unbatched_draw() -> None:
    """A @nomerge draw of the pipeline between a lifted run and a single draw keeps its
    command: its records sit at its StartInstanceLocation of the stretch's array (6 and 7
    here, after the batch's 0..2), so the one binding serves it too; the single draw after
    it is renumbered into the same array. A reader that cannot read the array (a pipeline
    reading the parameter as ordinary state) cancels only the runs of its stretch (up to
    the parameter's redefinition)."""
    b = _scene("draw_data(perdraw=2,lift=1.0)")
    for k in range(3):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 0)
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 2, 50, 0)
    b.DrawIndexedInstanced(36, 2, 0, 3, 6, flags="nomerge")
    b.SetGraphicsRoot32BitConstants(1, 2, 60, 0)
    b.DrawIndexedInstanced(12, 1, 0, 0, 0)                     # a single draw: renumbered
    b.SetGraphicsRootShaderResourceView(2, "xrec", 0)          # parameter 2 redefined before ...
    b.SetPipelineState("plain")
    b.DrawInstanced(3, 1, 0, 0)                                # ... this reader of it
    s_ok = b.build()
    out, rep = run(s_ok)
    assert rep["lifted_batches"] == 1 and rep["restored_draws"] == 1 and rep["renumbered_draws"] == 1
    assert rep["perdraw_binds"] == 1
    t = names(out)
    assert [x for x in t if "mdi_perdraw0" in x] == ["SetGraphicsRootShaderResourceView 2 mdi_perdraw0 0"]
    assert "DrawIndexedInstanced 36 2 0 3 6" in t                 # the pinned draw is unchanged
    assert "DrawIndexedInstanced 12 1 0 0 8" in t                 # record 8: after the pinned draw's
    rec = out.decls["mdi_perdraw0"].data.reshape(-1, 3)
    assert rec[:3, 2].tolist() == [0, 1, 2]
    assert rec[6:9].tolist() == [[3, 6, 50], [3, 7, 50], [0, 0, 60]]   # what each instance read
    assert not verify(s_ok, _planted(out, "mdi_perdraw0", 3 * 7 + 2)).equivalent
    assert not verify(s_ok, _planted(out, "mdi_perdraw0", 3 * 8 + 2)).equivalent
    # a pinned draw whose StartInstanceLocation the array has passed gets a section of its own
    b = _scene("draw_data(perdraw=2,lift=1.0)")
    for k in range(3):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 0)
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 2, 50, 0)
    b.DrawIndexedInstanced(36, 1, 0, 3, 1, flags="nomerge")
    b.SetGraphicsRoot32BitConstants(1, 2, 60, 0)
    b.DrawIndexedInstanced(12, 1, 0, 0, 0)
    s2 = b.build()
    out, rep = run(s2)
    assert rep["perdraw_binds"] == 2 and rep["restored_draws"] == 1
    t = names(out)
    i = t.index("DrawIndexedInstanced 36 1 0 3 1")
    assert t[i - 1].startswith("SetGraphicsRootShaderResourceView 2 mdi_perdraw0 ")
    off = int(t[i - 1].split()[-1]) // 4
    assert out.decls["mdi_perdraw0"].data[off + 3:off + 6].tolist() == [3, 1, 50]
    assert "DrawIndexedInstanced 12 1 0 0 2" in t                 # after the pinned draw's record 1
    # the plain draw reads parameter 2 while nothing redefined it: the run before it is not
    # lifted, but a run after the next redefinition (a root-signature change) is
    b = _scene("draw_data(perdraw=2,lift=1.0)")
    for k in range(3):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 0)
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    b.SetPipelineState("plain")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("other")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.SetPipelineState("obj")
    for k in range(3):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 0)
        b.DrawIndexedInstanced(36, 1, 36 * k, 0, 0)
    s = b.build()
    out, rep = run(s)
    assert rep["lifted_batches"] == 1 and rep["lifted_draws"] == 3 and rep["restored_draws"] == 0
    assert calls(out) == ["DrawIndexedInstanced"] * 3 + ["DrawInstanced", "MultiDrawIndexedInstancedIndirect"]


# --------------------------------------------------------------------------- one array per stretch
def _stretch(view: str = "srv") -> StreamBuilder:
    """Pipelines reading one per-draw array at root parameter 2 with different record
    strides (3 words, 4 words with the bindless table slot, an input layout), and one
    without a contract that reads the root constants."""
    b = StreamBuilder()
    b.buffer("ib", 1 << 16)
    b.buffer("verts", 1 << 20)
    b.buffer("ids", 1 << 12)
    b.target("rt", 64, 64)
    b.heap("res", size=8)
    b.texture("t0", 64, 64, "BC7_UNORM")
    for k in range(8):
        b.view("res", k, "srv", "t0")
    b.rootsig("main", "table(srv,1)", "constants(2)", view)
    b.pipeline("a", vs="v", ps="p", root="main", contract="draw_data(perdraw=2,lift=1.0+1.1)")
    b.pipeline("bl", vs="v", ps="p", root="main", contract="draw_data(perdraw=2,lift=0+1.0+1.1)")
    b.pipeline("il", vs="v", ps="p", root="main", layout="pos_nrm_uv", contract="instance_data(perdraw=2,lift=1.0)")
    b.pipeline("plain", vs="v", ps="p", root="main", params=(0, 1))
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.IASetVertexBuffers(0, "verts", 0, 32)
    b.IASetVertexBuffers(1, "ids", 0, 4)
    return b


def _stretch_stream(plain_at_end: bool = True) -> Stream:
    b = _stretch()
    b.SetPipelineState("a")
    for k in range(3):                                          # a lifted run
        b.SetGraphicsRoot32BitConstants(1, 2, k, 10 * k)
        b.DrawIndexedInstanced(36, 1, 36 * k, k, 5)
    b.SetPipelineState("bl")
    b.SetGraphicsRootDescriptorTable(0, "res[3]")
    b.SetGraphicsRoot32BitConstants(1, 2, 7, 70)
    b.DrawIndexedInstanced(12, 2, 0, 4, 9)                      # a single draw, two instances
    b.SetPipelineState("il")
    b.SetGraphicsRoot32BitConstants(1, 2, 8, 80)
    b.DrawIndexedInstanced(6, 1, 0, 0, 0)                       # a single input-layout draw
    b.SetPipelineState("bl")
    for k in range(3):                                          # another lifted run, stride 4 words
        b.SetGraphicsRootDescriptorTable(0, f"res[{4 + k}]")
        b.SetGraphicsRoot32BitConstants(1, 2, 20 + k, 0)
        b.DrawIndexedInstanced(36, 1, 0, 0, 0)
    b.SetPipelineState("a")
    b.SetGraphicsRoot32BitConstants(1, 2, 30, 31)
    b.DrawInstanced(3, 1, 0, 2)                                 # a single non-indexed draw
    if plain_at_end:
        b.SetGraphicsRoot32BitConstants(1, 2, 40, 41)
        b.SetPipelineState("plain")                             # no contract: reads table 0 and constants 1
        b.DrawInstanced(3, 1, 0, 0)
    return b.build()


def test_one_array_per_stretch() -> None:
    """Every reader of a stretch reads one array section bound once before the first:
    batches through their args records, single draws through a renumbered
    StartInstanceLocation; each reader's records sit at a multiple of its stride."""
    s = _stretch_stream()
    out, rep = run(s)
    assert rep["lifted_batches"] == 2 and rep["renumbered_draws"] == 3 and rep["restored_draws"] == 0
    assert rep["perdraw_binds"] == 1
    t = names(out)
    assert [x for x in t if "mdi_perdraw0" in x] == ["SetGraphicsRootShaderResourceView 2 mdi_perdraw0 0"]
    assert t.index("SetGraphicsRootShaderResourceView 2 mdi_perdraw0 0") == \
        t.index("MultiDrawIndexedInstancedIndirect 3 mdi_args0 0 20") - 1
    data = out.decls["mdi_perdraw0"].data
    # the first batch: records 0..2 of 4 words (16 bytes); the bindless draw: 5 words (20
    # bytes) from index 3 (byte 60 >= 48), two instances; the input-layout draw: 3 words
    # (12 bytes) at index 9 (byte 108 >= 100)
    assert data[:12].reshape(3, 4).tolist() == [[0, 5, 0, 0], [1, 5, 1, 10], [2, 5, 2, 20]]
    assert "DrawIndexedInstanced 12 2 0 4 3" in t
    assert data[15:25].reshape(2, 5).tolist() == [[4, 9, 3, 7, 70], [4, 10, 3, 7, 70]]
    assert "DrawIndexedInstanced 6 1 0 0 9" in t
    assert data[27:30].tolist() == [0, 0, 8]
    # the second batch: 5-word records from index 6 (byte 120); the last single draw at 12 (byte 192)
    args = out.decls["mdi_args0"].data.reshape(-1, 5)
    assert args[3:, 4].tolist() == [6, 7, 8]
    assert data[30:45].reshape(3, 5)[:, 2:].tolist() == [[4, 20, 0], [5, 21, 0], [6, 22, 0]]
    assert "DrawInstanced 3 1 0 12" in t
    assert data[48:52].tolist() == [0, 2, 30, 31]
    # planted wrong rewrites: a single draw's StartInstanceLocation, record words
    i = t.index("DrawIndexedInstanced 6 1 0 0 9")
    bad = out.take(np.arange(len(out)))
    bad.args[i, 4] = 8
    assert not verify(s, bad).equivalent
    assert not verify(s, _planted(out, "mdi_perdraw0", 15 + 5 + 1)).equivalent    # instance seen
    assert not verify(s, _planted(out, "mdi_perdraw0", 15 + 2)).equivalent        # bindless slot
    assert not verify(s, _planted(out, "mdi_perdraw0", 48 + 3)).equivalent        # a lifted constant
    assert not verify(s, _planted(out, "mdi_perdraw0", 27)).equivalent            # IL draw's base vertex


def test_stretch_then_dedupe_drops_lifted_sets() -> None:
    """After mdi, the root-constant and bindless-table sets that only array-reading draws
    saw are dead: dedupe-state removes them; the ones a contract-less draw reads stay."""
    s = _stretch_stream()
    out, _ = run(s, "mdi,dedupe-state")
    t = names(out)
    consts = [c for c in out.commands() if c.name == "SetGraphicsRoot32BitConstants"]
    # the first set stays (the array readers see the parameter set, as before: the
    # replayer compares that); word 1 of (8, 80) is read by the input-layout draw (its
    # clause lifts word 0 only), all of (40, 41) by the plain draw
    assert [tuple(c.var) for c in consts] == [(0, 0), (8, 80), (40, 41)]
    tables = [x for x in t if x.startswith("SetGraphicsRootDescriptorTable")]
    # res[0] is read by pipeline a (table 0 not lifted), res[3] by the input-layout draw,
    # res[6] by the plain draw; res[4] and res[5] only by the bindless batch: gone
    assert tables == ["SetGraphicsRootDescriptorTable 0 res[0]", "SetGraphicsRootDescriptorTable 0 res[3]",
                      "SetGraphicsRootDescriptorTable 0 res[6]"]
    # without the contract-less draw the first set and the input-layout draw's word 1 are left
    out, _ = run(_stretch_stream(False), "mdi,dedupe-state")
    assert [tuple(c.var) for c in out.commands() if c.name == "SetGraphicsRoot32BitConstants"] == [(0, 0), (8, 80)]


def test_cbv_array_split_at_64k() -> None:
    """A root CBV addresses at most 64 KiB: a lifted batch whose records need more is split,
    each part reading its own 256-byte-aligned section."""
    b = _stretch("cbv")
    b.SetPipelineState("a")
    for k in range(6):
        b.SetGraphicsRoot32BitConstants(1, 2, k, 0)
        b.DrawIndexedInstanced(36, 1000, 0, 0, 0)              # 1000 records of 16 bytes each
    s = b.build()
    out, rep = run(s)
    binds = [c for c in out.commands() if c.name == "SetGraphicsRootConstantBufferView"]
    assert rep["lifted_batches"] == 2 and rep["perdraw_binds"] == 2 and len(binds) == 2
    assert [c.args[0] for c in out.commands() if c.name.startswith("MultiDraw")] == [4, 2]  # 4096 records fit
    offs = [c.args[2] for c in binds]
    assert offs == [0, 4000 * 16] and offs[1] % 256 == 0
    assert out.decls["mdi_args0"].data.reshape(-1, 5)[:, 4].tolist() == [0, 1000, 2000, 3000, 0, 1000]


def test_draws_with_billions_of_instances_compare_whole() -> None:
    """A draw with 2^32-1 instances, native and reading an engine-bound array (what the random
    streams generate): mdi leaves both as they are, and the oracle compares them without
    listing every instance (it used to, and a CI run exhausted memory)."""
    b = _scene("draw_data(perdraw=2,lift=1.0)")
    b.SetGraphicsRoot32BitConstants(1, 2, 7, 0)
    b.DrawIndexedInstanced(36, 0xFFFFFFFF, 0, 0, 0)
    b.SetGraphicsRootShaderResourceView(2, "xrec", 0)
    b.DrawIndexedInstanced(36, 0xFFFFFFFF, 0, 0, 5)
    s = b.build()
    out, rep = run(s)
    assert rep["lifted_draws"] == 0
    forms = [e[3] for e in expand(s)]
    assert forms == [("instances", 0, 0xFFFFFFFF), ("instances", 5, 0xFFFFFFFF)]


# --------------------------------------------------------------------------- kernels and columnar facts
def _reference_split(v, kind: str, ks: list[int]):
    """The rule ``_ValueSplit`` implements, on decoded values (``Scan.values.decode``): the
    lifted words ``ks`` and the rest of a root argument, or None when a lifted word is not
    defined (or the value is of another kind)."""
    if not isinstance(v, tuple) or not v:
        return None
    if kind == "constants":
        if len(v) != 2 or v[0] != "constants":
            return None
        w = tuple(v[1]) + (None,) * (max(ks) + 1 - len(v[1]))
        lifted = [w[k] for k in ks]
        if not all(isinstance(x, int) for x in lifted):
            return None
        return lifted, tuple(x for n, x in enumerate(w) if n not in ks)
    if len(v) != 3 or v[0] != kind:
        return None
    if kind == "table":
        return [int(v[2])] * len(ks), ("table", v[1])
    off = int(v[2])
    return ([(off >> (32 * k)) & 0xFFFFFFFF for k in ks],
            (kind, v[1], tuple((off >> (32 * k)) & 0xFFFFFFFF for k in (0, 1) if k not in ks)))


def check_columnar_facts(s: Stream) -> None:
    """mdi's columnar reads of the state agree with the state module's own: raw values and
    observed slots from the normalised rows (``Scan.values_of`` / ``read_mask``), and the
    lifted words and rests of every contract's lifted parameters (``values.decode``)."""
    table = track(s)
    sc = table.scan
    dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
    if not dsel.size:
        return
    raw = sc.values_of(dsel)
    read = sc.read_mask(dsel)
    pos = np.arange(dsel.size)
    for slot in range(ROOT0, ROOT0 + 16):
        assert np.array_equal(mdi._observes(table, slot), read[:, slot])
        assert np.array_equal(mdi._raw_slots(table, pos, [slot])[:, 0], raw[:, slot])
    split = mdi._ValueSplit(s, sc)
    for c in draw_data_contracts(s.decls).values():
        if c is None:
            continue
        for q in c.params:
            ks = [k for qq, k in c.items if qq == q]
            vids = raw[:, ROOT0 + q]
            ok, lifted, rest = split(vids, q, c.kind(q), ks)
            ref = [_reference_split(sc.values.decode(int(v)) if v >= 0 else None, c.kind(q), ks)
                   for v in vids.tolist()]
            assert ok.tolist() == [r is not None for r in ref]
            good = np.flatnonzero(ok)
            assert lifted[good].tolist() == [ref[g][0] for g in good]
            tuples = [ref[g][1] for g in good]   # equal rests <=> equal rest rows
            rows = [tuple(r) for r in rest[good].tolist()]
            assert len(set(tuples)) == len(set(rows)) == len(set(zip(tuples, rows)))


def test_columnar_facts_on_contract_streams() -> None:
    for s in (_stretch_stream(), _stretch_stream(False), _objects(bound=True), _objects("reader"),
              generate("frame", 2000, seed=3)):
        check_columnar_facts(s)
    b = _scene("draw_data(perdraw=2,lift=0+1.0+3.1)")
    b.buffer("huge", 1 << 34)
    for k, slot in enumerate((3, 4, 4, 5)):
        b.SetGraphicsRootDescriptorTable(0, f"res[{slot}]")
        b.SetGraphicsRoot32BitConstants(1, 2, 100 + k, k % 2)
        b.SetGraphicsRootShaderResourceView(3, "huge", (k << 32) + 16 * (k % 2))   # offset halves
        b.DrawIndexedInstanced(36, 1, 0, 0, 0)
    check_columnar_facts(b.build())


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=60))
def test_columnar_facts_on_random_streams(s: Stream) -> None:
    try:
        track(s)
    except InputError:
        assume(False)
    check_columnar_facts(s)


def _compiled():
    fast, pure = mdi._kernels(False), mdi._kernels(True)
    assert fast.layout is not mdi._layout_py, "drawopt._mdi is not built"
    return fast, pure


@pytest.mark.parametrize("seed", range(6))
def test_kernels_match_pure_twins(seed: int) -> None:
    fast, pure = _compiled()
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    new_run = (rng.random(n) < 0.1).astype(np.uint8)
    values = rng.integers(0, 50, n)
    limit = rng.integers(1, 120, n)
    assert np.array_equal(fast.greedy(values, new_run, limit), pure.greedy(values, new_run, limit))
    # indirect draws: mostly progressions on few buffers, some multi-draws, odd strides and gaps
    cnt = np.where(rng.random(n) < 0.3, rng.integers(0, 5, n), 1)
    stride = np.where(cnt == 1, -1, rng.choice([0, 8, 16, 20, 24, 32], n))
    step = rng.choice([0, 4, 16, 20, 24, 32, -24], n)
    off = np.cumsum(step * np.maximum(cnt, 1))
    buf = rng.integers(0, 2, n)
    for rec in (16, 20):
        for lim in (1, 3, 0xFFFFFFFF):
            a = fast.indirect_groups(cnt, buf, off, stride, new_run, rec, lim)
            b = pure.indirect_groups(cnt, buf, off, stride, new_run, rec, lim)
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # the per-draw array layout: zones sorted, strides of 2..6 words, pinned draws
    zone = np.sort(rng.integers(-1, 4 + n // 4, n))     # some zones of one reader
    stride = 4 * rng.integers(2, 7, n)
    nrec = np.where(rng.random(n) < 0.3, 0, rng.integers(0, 40, n))   # empty readers and sections too
    restore = np.where(rng.random(n) < 0.2, rng.integers(0, 60, n), -1)
    limit = np.where(rng.random(n) < 0.5, 1 << 16, 400)
    align = np.where(zone % 2 == 0, 256, 16)
    a = fast.layout(zone, stride, nrec, restore, limit, align)
    b = pure.layout(zone, stride, nrec, restore, limit, align)
    assert all(np.array_equal(x, y) for x, y in zip(a[:4], b[:4])) and a[4] == b[4]


def _plan_arrays(p) -> tuple:
    return (p.replace.tolist(), p.bind.tolist(), p.sinst.tolist(), np.concatenate(p.remove or [[]]).tolist(),
            [w.tolist() for w in p.args_words], [w.tolist() for w in p.perdraw_words],
            {k: v for k, v in vars(p).items() if isinstance(v, int)})


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle", "quads"])
def test_pure_and_compiled_plans_agree(kind: str) -> None:
    _compiled()
    s = generate(kind, 3000, seed=4)
    t = track(s)
    for target in ("d3d12", "xbox-one"):
        assert _plan_arrays(plan_mdi(s, t, target=target, pure=True)) == \
            _plan_arrays(plan_mdi(s, t, target=target, pure=False))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=60), st.sampled_from(["xbox-one", "d3d12"]), st.sampled_from([0, 2, 3]))
def test_pure_and_compiled_plans_agree_on_random_streams(s: Stream, target: str, max_count: int) -> None:
    _compiled()
    try:
        t = track(s)
    except InputError:
        assume(False)
    assume(multi_draws(s) <= MAX_ORACLE_RECORDS)
    assert _plan_arrays(plan_mdi(s, t, target=target, max_count=max_count, pure=True)) == \
        _plan_arrays(plan_mdi(s, t, target=target, max_count=max_count, pure=False))


def test_stretch_plan_layout() -> None:
    """The columnar plan of the one-array-per-stretch case: one bind before the first
    batch, renumbered single draws as (command, column, record index) rows."""
    s = _stretch_stream()
    p = plan_mdi(s, track(s))
    assert p.bind.shape == (1, 4) and p.bind[0, 1:].tolist() == [BY_NAME["SetGraphicsRootShaderResourceView"].code,
                                                                  2, 0]
    assert sorted(p.sinst[:, 2].tolist()) == [3, 9, 12] and p.renumbered_draws == 3
