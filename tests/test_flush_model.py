"""THE flush model (:mod:`drawopt.analysis.flushrules`) and its two consumers.

validate's ``missing-flush`` rule and the ``flush`` pass run the same events
(:func:`flush_access`) through the same transitions (:class:`FlushTracker`, compiled
twin ``drawopt._flush``); what the model cannot know (after an ``Opaque`` command, a
draw on async compute) is resolved by :class:`Doubt`: LENIENT for validate (no finding
on an unknown), STRICT for the pass (no flush relies on one). Checked here:

* both directions of every unknown, on one stream each (validate silent, the pass
  flushing, its output clean);
* the one deliberate change of behaviour (the pass used to take the automatic-flush
  setting across an ``Opaque`` command as known);
* the findings against a brute-force reading of the seed's table, and the compiled
  kernels against their pure twins, on random streams dense in writers, readers and flushes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_flush import base as flush_world
from test_flush import flush_lines, missing
from test_state import builder

from drawopt._accel import load_cext
from drawopt.analysis.flushrules import (
    CS,
    EFF_BOP,
    EFF_L2,
    K_ASYNC,
    K_CS,
    K_CS_PARTIAL,
    UNDRAINED,
    VS,
    Doubt,
    FlushTracker,
    flush_access,
    flush_effect,
    flush_effects,
    flush_needs,
    model_events,
    pending_reads,
)
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes.flush import FlushPass, plan_flushes
from drawopt.validate import findings, missing_flushes

HAS_CEXT = load_cext("_flush", False) is not None
needs_cext = pytest.mark.skipif(not HAS_CEXT, reason="drawopt._flush is not built (setup.py build_ext --inplace)")


def base(fast: bool = False, auto: bool = True, context: str = "graphics") -> StreamBuilder:
    """tests/test_flush's world plus a CS writer of the index buffer and a PS writer of a
    ``frontend`` buffer."""
    b = flush_world(fast, auto, context)
    b.buffer("fe", 4096, frontend=True)
    b.pipeline("cullib", cs="cull", root="main", writes=("ib",))
    b.pipeline("few", vs="v", ps="gen", root="main", writes=("fe",))
    return b


def flushed(s: Stream) -> Stream:
    out = FlushPass().apply(s, None).stream
    assert not missing(out)
    return out


# --------------------------------------------------------------------------- the unknowns, both directions
def test_opaque_between_write_and_read_is_unknown() -> None:
    """An Opaque command may have flushed: validate reports nothing, the pass does not count on it."""
    b = base(fast=True)
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    b.Opaque("MaybeFlush()")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    s = b.build()
    assert missing(s) == []
    acc = flush_access(s)
    p = pending_reads(model_events(reads=(acc.r_cmd, acc.r_buf, np.arange(acc.r_cmd.size)),
                                   writes=(acc.w_cmd, acc.w_res, acc.classes(Doubt.STRICT)),
                                   opaques=acc.opaque_cmd), len(s.decls) + 1, "graphics", acc.frontend)
    assert p.unknown.tolist() == [True] and p.state.tolist() == [UNDRAINED] and p.klass.tolist() == [K_CS_PARTIAL]
    assert len(flush_needs(s, acc, Doubt.STRICT)) == 1  # taken at its worst, it is missing
    assert flush_lines(flushed(s)) == ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]


@pytest.mark.parametrize("l2_in_input", [False, True])
def test_automatic_flush_unknown_after_opaque(l2_in_input: bool) -> None:
    """The automatic-flush setting after an Opaque command is unknown (it may have turned it off).

    validate: the Dispatch counts as drained by the automatic flush (only a missing L2 flush is
    certain). The pass: it needs CS_PARTIAL_FLUSH. This is the deliberate change: the pass used to
    keep the setting in force before the Opaque command (here on) and insert the L2 flush alone,
    or nothing when the input had one."""
    b = base(auto=True)
    b.Opaque("ClearState()")
    b.SetPipelineState("cull")
    b.Dispatch(1, 1, 1)
    if l2_in_input:
        b.FlushGpuCacheRange("DEFAULT_PFP")
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    s = b.build()
    acc = flush_access(s)
    assert acc.w_auto_unknown.tolist() == [True] and acc.w_partial.tolist() == [False]
    assert acc.classes(Doubt.LENIENT).tolist() == [K_CS] and acc.classes(Doubt.STRICT).tolist() == [K_CS_PARTIAL]
    f = missing(s)
    if l2_in_input:
        assert f == []
    else:
        assert len(f) == 1 and f[0].message.endswith("missing FlushGpuCacheRange DEFAULT_PFP")
    out = flushed(s)
    want = ["GpuSendPipelinedEvent CS_PARTIAL_FLUSH", "FlushGpuCacheRange DEFAULT_PFP"]
    assert flush_lines(out) == (["FlushGpuCacheRange DEFAULT_PFP"] if l2_in_input else []) + want
    # a CSEnableAutomaticGpuFlush after the Opaque command makes the setting known again
    b2 = base(auto=True)
    b2.Opaque("ClearState()")
    b2.CSEnableAutomaticGpuFlush(True)
    b2.SetPipelineState("cull")
    b2.Dispatch(1, 1, 1)
    b2.SetPipelineState("draw")
    b2.DrawInstancedIndirect("args", 0)
    assert flush_lines(flushed(b2.build())) == ["FlushGpuCacheRange DEFAULT_PFP"]


def test_index_buffer_unknown_after_opaque() -> None:
    """After an Opaque command the index buffer is unknown: the one bound before may still be read."""
    b = base()
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.SetPipelineState("cullib")
    b.Dispatch(1, 1, 1)
    b.Opaque("Something()")
    b.SetPipelineState("draw")
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    s = b.build()
    acc = flush_access(s)
    assert acc.r_kind.tolist() == [2] and acc.r_certain.tolist() == [False]
    assert missing(s) == []
    out = flushed(s)
    assert flush_lines(out) == ["FlushGpuCacheRange DEFAULT_PFP"]
    assert [c.name for c in out.commands()][-2:] == ["FlushGpuCacheRange", "DrawIndexedInstanced"]


def test_draw_on_async_compute_may_write() -> None:
    """A draw cannot run on async compute: validate reports the draw, not its flush; the pass flushes it."""
    b = base(context="compute")
    b.SetPipelineState("few")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    acc = flush_access(s)
    assert acc.w_certain.tolist() == [False] and acc.classes(Doubt.STRICT).tolist() == [K_ASYNC]
    assert [f.rule for f in findings(s)] == ["draw-on-compute"]
    out = FlushPass().apply(s, None).stream
    assert flush_lines(out) == ["FlushGpuCachesBottomOfPipe DEFAULT"]


def test_known_state_is_the_same_for_both() -> None:
    """Without an unknown, both consumers see the same pending writes: what validate reports is
    exactly what the pass fills (its output has no finding, and nothing is inserted where validate
    is silent)."""
    b = base(fast=True)
    b.SetPipelineState("vsw")
    b.DrawInstanced(3, 1, 0, 0)
    b.FlushGpuCacheRange("DEFAULT_PFP")  # too early: VS work not drained
    b.SetPipelineState("draw")
    b.DrawInstancedIndirect("args", 0)
    s = b.build()
    acc = flush_access(s)
    lenient, strict = flush_needs(s, acc, Doubt.LENIENT), flush_needs(s, acc, Doubt.STRICT)
    assert lenient == strict and [n.missing for n in lenient] == [(("GpuSendPipelinedEvent", "VS_PARTIAL_FLUSH"),)]
    assert lenient[0].before == 5  # before the L2 flush that came too early
    assert flush_lines(flushed(s)) == ["FlushGpuCacheRange DEFAULT_PFP", "GpuSendPipelinedEvent VS_PARTIAL_FLUSH",
                                       "FlushGpuCacheRange DEFAULT_PFP"]


# --------------------------------------------------------------------------- the transitions
def test_tracker_keeps_classes_apart() -> None:
    tr = FlushTracker()
    tr.write(0, 5, CS, True)       # needs CS_PARTIAL_FLUSH
    tr.write(1, 5, CS, False)      # drained by the automatic flush
    assert [(k, w, st) for k, w, st, _ in tr.pending_of(5)] == [(K_CS, 1, 1), (K_CS_PARTIAL, 0, UNDRAINED)]
    assert tr.missing([5]) == ({CS}, True)
    assert tr.l2() and tr.missing([5]) == ({CS}, True)  # the automatic-flush write is visible, the other not
    tr.write(2, 5, VS, True)
    assert tr.event(VS) and not tr.event(VS)
    tr.opaque(3)
    assert all(u for *_, u in tr.pending_of(5))
    assert tr.barrier(5) and not tr.pending()


def test_flush_effects_match_the_single_command_form() -> None:
    for ctx in ("graphics", "compute"):
        b = base(context=ctx)
        first = len(b.build())
        for e in ("CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH"):
            b.GpuSendPipelinedEvent(e)
        for m in ("DEFAULT_PFP", "DEFAULT"):
            b.FlushGpuCacheRange(m)
            b.FlushGpuCachesBottomOfPipe(m)
        s = b.build()
        cmds = np.arange(first, len(s))
        eff = flush_effects(s, cmds).tolist()
        assert eff == ([0, 1, 2, EFF_L2, -1, -1, -1] if ctx == "graphics" else [-1] * 6 + [EFF_BOP])
        for c, e in zip(cmds.tolist(), eff):
            assert flush_effect(s, c) == (None if e < 0 else ("l2", -1) if e == EFF_L2 else ("bop", -1)
                                          if e == EFF_BOP else ("event", e))


# --------------------------------------------------------------------------- random streams
_CMDS = [
    (6, st.tuples(st.just("SetPipelineState"), st.sampled_from(["cull", "cull", "psw", "vsw", "lay", "pull"]))),
    (4, st.just(("Dispatch", 1, 1, 1))),
    (3, st.just(("DrawInstanced", 3, 1, 0, 0))),
    (3, st.just(("DrawInstancedIndirect", "args", 0))),
    (2, st.just(("DrawIndexedInstancedIndirect", "args", 0))),
    (2, st.just(("MultiDrawInstancedIndirectAuto", "cnt", 0, 8, "args", 0, 16))),
    (2, st.just(("IASetIndexBuffer", "ib", "R16_UINT", 0))),
    (2, st.just(("DrawIndexedInstanced", 6, 1, 0, 0, 0))),
    (1, st.just(("DrawIndexedX", "ib", 0, "R16_UINT", 6, 0))),
    (4, st.tuples(st.just("GpuSendPipelinedEvent"),
                  st.sampled_from(["CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH"]))),
    (3, st.tuples(st.just("FlushGpuCacheRange"), st.sampled_from(["DEFAULT_PFP", "DEFAULT_PFP", "DEFAULT"]))),
    (2, st.tuples(st.just("FlushGpuCachesBottomOfPipe"), st.sampled_from(["DEFAULT", "DEFAULT", "DEFAULT_PFP"]))),
    (1, st.tuples(st.just("ResourceBarrier"), st.sampled_from(["args", "ib"]), st.just("UNORDERED_ACCESS"),
                  st.sampled_from(["INDIRECT_ARGUMENT", "INDEX_BUFFER", "UNORDERED_ACCESS"]))),
    (2, st.tuples(st.just("Opaque"), st.sampled_from(["ClearState", "Other"]))),
    (2, st.tuples(st.just("CSEnableAutomaticGpuFlush"), st.booleans())),
    (1, st.tuples(st.just("SetComputeRootDescriptorTable"), st.sampled_from([0, 3]),
                  st.sampled_from(["h0[0]", "h0[4]", "h1[0]"]))),
]
_COMMAND = st.one_of(*[s for w, s in _CMDS for _ in range(w)])


@st.composite
def flush_streams(draw: st.DrawFn) -> Stream:
    """Random streams over tests/test_state's small world, dense in GPU writers (``cull`` writes
    args through a table and ib, ``psw`` / ``vsw`` args), front-end readers, flushes, barriers,
    ``Opaque`` commands and automatic-flush toggles."""
    b = builder(context=draw(st.sampled_from(["graphics", "graphics", "graphics", "compute"])),
                kind=draw(st.sampled_from(["list", "list", "bundle"])),
                fast_semantics=draw(st.booleans()), auto_gpu_flush=draw(st.booleans()))
    if draw(st.booleans()):
        b.SetDescriptorHeaps("h0")
        b.SetComputeRootSignature("rsA")
        b.SetGraphicsRootSignature("rsA")
        b.SetComputeRootDescriptorTable(0, "h0[4]")
    for name, *a in draw(st.lists(_COMMAND, min_size=1, max_size=50)):
        b.cmd(name, *a)
    return b.build()


def _reference_needs(s: Stream) -> set[tuple[int, int, str, str]]:
    """``(reader, writer, buffer, what)`` by a direct reading of the seed's table: for each certain
    front-end read and writer class, the latest write before it, and the commands in between
    searched for a barrier, an Opaque command or the class's sequence (quadratic; independent of
    the model's transitions)."""
    acc = flush_access(s)
    n = len(s)
    op, a0 = s.op, s.args[:, 0]
    code = {k: BY_NAME[k].code for k in ("GpuSendPipelinedEvent", "FlushGpuCacheRange", "FlushGpuCachesBottomOfPipe",
                                         "ResourceBarrier", "Opaque")}
    graphics = s.header.context == "graphics"
    wm = acc.write_mask(Doubt.LENIENT)
    wc, wb, wk = acc.w_cmd[wm].tolist(), acc.w_res[wm].tolist(), acc.classes(Doubt.LENIENT)[wm].tolist()
    reads = [(int(c), int(b), ("args", "count", "index data")[int(k)])
             for c, b, k, ok in zip(acc.r_cmd, acc.r_buf, acc.r_kind, acc.r_certain) if ok]
    reads += [(n, b, "frontend") for b in sorted(set(wb)) if acc.frontend[b]]

    def covered(w: int, r: int, b: int, k: int) -> bool:
        between = range(w + 1, r)
        if any(op[i] == code["Opaque"] for i in between):
            return True
        if any(op[i] == code["ResourceBarrier"] and a0[i] == b and s.args[i, 2] in (6, 7) for i in between):
            return True
        pfp = [i for i in between if graphics and op[i] == code["FlushGpuCacheRange"] and a0[i] == 0]
        if k == K_ASYNC:
            return any(op[i] == code["FlushGpuCachesBottomOfPipe"] and a0[i] == 1 for i in between)
        if k == K_CS:
            return bool(pfp)
        ev = [i for i in between if graphics and op[i] == code["GpuSendPipelinedEvent"] and a0[i] == k - 1]
        return bool(ev) and any(p > ev[0] for p in pfp)

    out = set()
    names = [d.name for d in s.decls.items]
    for r, b, what in reads:
        for k in set(wk):
            ws = [w for w, bb, kk in zip(wc, wb, wk) if bb == b and kk == k and w < r]
            if not ws or covered(ws[-1], r, b, k):
                continue
            if what == "frontend" and any(rb == b and w < rc < n for rc, rb, _ in reads for w in ws[-1:]):
                continue  # a front-end read of this stream follows: it needs (and reports) the same
            out.add((r if r < n else -1, ws[-1], names[b], what))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flush_streams())
def test_missing_flushes_match_the_reference(s: Stream) -> None:
    got = {(x.reader, x.writer, x.buffer, x.what) for x in missing_flushes(s)}
    assert got == _reference_needs(s)
    assert len(missing(s)) == len(missing_flushes(s))


@needs_cext
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flush_streams())
def test_compiled_model_matches_its_pure_twin(s: Stream) -> None:
    acc = flush_access(s)
    for doubt in Doubt:
        assert flush_needs(s, acc, doubt, pure=True) == flush_needs(s, acc, doubt, pure=False)
    for drop in (False, True):
        for coalesce in (False, True):
            a = plan_flushes(s, drop, coalesce, acc, pure=True)
            b = plan_flushes(s, drop, coalesce, acc, pure=False)
            assert (a.inserts, a.drops) == (b.inserts, b.drops)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flush_streams())
def test_the_pass_leaves_nothing_for_validate(s: Stream) -> None:
    """Whatever validate reports (LENIENT) the pass fills (STRICT covers more), and the pass's
    output gives the model nothing more to insert."""
    out = FlushPass().apply(s, None).stream
    assert missing(out) == []
    assert not plan_flushes(out).inserts
