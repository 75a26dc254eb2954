"""Rules a single stream must follow, checked on the optimized stream.

* **Flushes** (``multidraw-indirect-and-flushes.txt``): a buffer a shader wrote must
  be drained and written back from L2 before the GPU front end reads it (indirect
  args, a GPU-written draw count, index data):

  =========================  ==================================================
  writer                     what must come between the writer and the read
  =========================  ==================================================
  graphics ``Dispatch``      ``FlushGpuCacheRange DEFAULT_PFP``, preceded by
                             ``GpuSendPipelinedEvent CS_PARTIAL_FLUSH`` when fast
                             semantics or ``CSEnableAutomaticGpuFlush FALSE`` is
                             in force at the Dispatch
  VS / HS / DS / GS writer   ``VS_PARTIAL_FLUSH`` then ``FlushGpuCacheRange DEFAULT_PFP``
  PS writer                  ``PS_PARTIAL_FLUSH`` then ``FlushGpuCacheRange DEFAULT_PFP``
  async compute Dispatch     ``FlushGpuCachesBottomOfPipe DEFAULT`` after it
  =========================  ==================================================

  A ``ResourceBarrier`` of the buffer to ``INDIRECT_ARGUMENT`` or ``INDEX_BUFFER``
  also satisfies the rule. A buffer declared ``frontend`` is read by the front end
  of another list, so its writes must be flushed before the end of this one.
* **Bundles** set their descriptor heaps at most once (the same heaps again is fine).
* **Pipelines**: a draw or dispatch needs a usable pipeline (one set, of its kind; a bundle
  inherits none). One the stream does not know (after an ``Opaque`` command) is not checked.
* **DrawIndexedX** needs a vertex-pulling pipeline; under an ``x(...)`` contract the
  draw id must address a record inside the bound per-draw array, the low bits plus
  the largest index must stay below ``2^vertex_bits`` (``max_index``, the index format
  or the CPU-known index data must prove it: an index that may reach ``2^vertex_bits``
  carries into the draw id, which is then ambiguous), and ``base=none`` leaves the low
  bits zero.

Re-binding rules (the index buffer after ``DrawIndexedX``, descriptor tables after a
heap change) are part of the effective records: a draw that sees an undefined
binding where the original saw a value differs from it.

Violations carry a key; the validator reports one only when the optimized stream
has more violations of that key than the original (it does not blame a rewrite for
what its input already did). Uncovered front-end reads are compared reader by reader
instead (:func:`first_new_uncovered_read`): a read may be uncovered only where the
original's read by the same draws was.
"""

from __future__ import annotations

__all__ = ["Violation", "check_rules", "first_new_no_pipeline", "first_new_violation", "first_new_uncovered_read"]

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from drawopt.ir.arrayset import unique
from drawopt.ir.decls import Buffer
from drawopt.ir.ops import BARRIER_STATES, BY_NAME, FLUSH_MODES, PIPELINED_EVENTS, Op
from drawopt.verify.model import PipeInfo
from drawopt.verify.records import FE_NAMES, IMAX_DATA, IMAX_DECLARED, F, Records
from drawopt.verify.slots import Col, cid_of, op_index

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_STAGE_EVENT = ("CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH")
_FE_STATES = {BARRIER_STATES.index("INDIRECT_ARGUMENT"), BARRIER_STATES.index("INDEX_BUFFER")}
_PFP, _DEFAULT = FLUSH_MODES.index("DEFAULT_PFP"), FLUSH_MODES.index("DEFAULT")


@dataclass
class Violation:
    """A broken rule: ``key`` identifies it across streams, ``cmd`` is where it shows."""

    key: tuple
    message: str
    cmd: int
    details: dict = field(default_factory=dict)
    act: int = -1
    """For an uncovered front-end read: the reading action (compared per reader, not by key)."""
    reader: tuple = ()
    """For an uncovered front-end read: ``(resource id, front-end read kind)``."""

    @property
    def per_reader(self) -> bool:
        return self.act >= 0


def check_rules(R: Records) -> list[Violation]:
    """Every rule violation of the stream behind ``R``, in stream order."""
    out = _flushes(R) + _bundle(R) + _drawindexedx(R)
    out.sort(key=lambda v: v.cmd)
    return out


def first_new_violation(orig: list[Violation], opt: list[Violation]) -> Violation | None:
    """The first violation of ``opt`` beyond what ``orig`` already has (by key).

    Uncovered front-end reads (:attr:`Violation.per_reader`) are left out: they are
    compared reader by reader once the records match (:func:`first_new_uncovered_read`)."""
    budget = Counter(v.key for v in orig if not v.per_reader)
    for v in opt:
        if v.per_reader:
            continue
        if budget[v.key] > 0:
            budget[v.key] -= 1
            continue
        return v
    return None


def first_new_uncovered_read(orig: list[Violation], opt: list[Violation],
                             matched: Callable[[int], list[np.ndarray] | None]) -> Violation | None:
    """The first front-end read of ``opt`` left uncovered (no flush after the GPU write it
    reads) where the corresponding read of ``orig`` was covered.

    Reads are compared reader by reader, not counted: ``matched(b)`` gives, per record
    entry of action ``b`` of the optimized stream (each of its draws, through the matched
    write sequences), the actions of the original that entry stands for. The read of
    buffer ``X`` by ``b`` may be uncovered only if, for every such entry, one of those
    actions' reads of ``X`` (of the same kind: args, count or index data) was. A flush moved
    from one reader to another is therefore caught even though the number of uncovered
    reads stays the same. A reader without records (nothing it writes) is compared by
    count among such readers.
    """
    bad_a: dict[int, set[tuple]] = {}
    for v in orig:
        if v.per_reader:
            bad_a.setdefault(v.act, set()).add(v.reader)
    unmatched = Counter(v.key for v in orig if v.per_reader)
    for v in opt:
        if not v.per_reader:
            continue
        entries = matched(v.act)
        if entries is None:
            if unmatched[v.key] > 0:
                unmatched[v.key] -= 1
                continue
            return v
        if not all(any(v.reader in bad_a.get(a, ()) for a in acts.tolist()) for acts in entries):
            return v
    return None


# --------------------------------------------------------------------------- flushes
@dataclass
class _Write:
    cmd: int
    stage: int
    needs_partial: bool
    drained: bool = False
    notes: list[str] = field(default_factory=list)


def _flushes(R: Records) -> list[Violation]:
    s = R.stream
    compute_ctx = s.header.context == "compute"
    fast = s.header.fast_semantics
    bufs = {int(R.cmap[i]): d for i, d in enumerate(s.decls.items) if isinstance(d, Buffer)}
    frontend = {b for b, d in bufs.items() if d.frontend}
    fe_bufs = set(unique(R.fe_res).tolist()) | frontend
    if not fe_bufs:
        return []
    af = R.state.value(cid_of(Col.AF))
    # events: (command, order, kind, payload)
    ev: list[tuple[int, int, str, tuple]] = []
    wm = np.isin(R.w_res, list(fe_bufs))
    for a, res in zip(R.w_act[wm].tolist(), R.w_res[wm].tolist()):
        if res not in bufs:
            continue
        p = R.pipe(a)
        if p is None:
            continue
        disp = int(R.a_op[a]) == _OP["Dispatch"]
        stage = 0 if disp else p.stage
        needs = (fast or af[a] == 0) if disp else True
        ev.append((int(R.a_cmd[a]), 2, "w", (res, stage, bool(needs))))
    written = {r for (_, _, _, (r, *_)) in ev}
    rm = np.isin(R.fe_res, list(written)) if written else np.zeros(R.fe_res.size, bool)
    for a, res, kind in zip(R.fe_act[rm].tolist(), R.fe_res[rm].tolist(), R.fe_kind[rm].tolist()):
        ev.append((int(R.a_cmd[a]), 1, "r", (res, kind, a)))
    for op, arg in ((Op.GpuSendPipelinedEvent, "event"), (Op.FlushGpuCacheRange, "mode"),
                    (Op.FlushGpuCachesBottomOfPipe, "mode")):
        code, col = int(op), op.col(arg)
        for c in op_index(s).of(code).tolist():
            ev.append((c, 0, "f", (code, int(s.args[c, col]))))
    b_res, b_after = Op.ResourceBarrier.col("resource"), Op.ResourceBarrier.col("after")
    for c in op_index(s).of(_OP["ResourceBarrier"]).tolist():
        r = int(R.cmap[s.args[c, b_res]])
        if r in fe_bufs and int(s.args[c, b_after]) in _FE_STATES:
            ev.append((c, 0, "b", (r,)))
    for c in op_index(s).of(_OP["Opaque"]).tolist():
        ev.append((c, 0, "o", ()))
    ev.sort(key=lambda e: (e[0], e[1]))
    pending: dict[int, list[_Write]] = {}
    out: list[Violation] = []
    name = R.canon.name

    def writer_desc(w: _Write) -> str:
        what = "Dispatch" if s.op[w.cmd] == _OP["Dispatch"] else f"{('CS', 'VS', 'PS')[w.stage]}-stage draw"
        return f"{what} at {R.where(w.cmd)}"

    def violate(res: int, w: _Write, reader: str, cmd: int, kind: str, act: int = -1, fe: int = -1) -> None:
        if compute_ctx:
            step = "FlushGpuCachesBottomOfPipe DEFAULT"
            msg = f"async compute: missing {step} after the {writer_desc(w)} writing {name(res)}, before {reader}"
        elif w.needs_partial and not w.drained:
            step = _STAGE_EVENT[w.stage]
            msg = f"missing {step} before {reader} ({name(res)} written by the {writer_desc(w)})"
        else:
            step = "FlushGpuCacheRange DEFAULT_PFP"
            msg = f"missing {step} (L2 flush) before {reader} ({name(res)} written by the {writer_desc(w)})"
        if w.notes:
            msg += "; " + "; ".join(dict.fromkeys(w.notes))
        out.append(Violation(("flush", name(res), step, kind), msg, cmd,
                             {"rule": "flush", "resource": name(res), "missing": step, "writer": w.cmd},
                             act, (res, fe)))

    for cmd, _, kind, pay in ev:
        if kind == "w":
            res, stage, needs = pay
            pending.setdefault(res, []).append(_Write(cmd, stage, needs))
        elif kind == "b":
            pending.pop(pay[0], None)
        elif kind == "o":
            pass  # an unknown command orders, but is not assumed to flush anything
        elif kind == "f":
            code, val = pay
            for lst in pending.values():
                for w in lst:
                    _apply_flush(w, code, val, compute_ctx, R.where(cmd))
            for res in list(pending):
                pending[res] = [w for w in pending[res] if not getattr(w, "_done", False)]
                if not pending[res]:
                    del pending[res]
        else:  # read: every read until the writes are flushed is uncovered (each reader counts)
            res, fe_kind, act = pay
            lst = pending.get(res)
            if lst:
                violate(res, lst[0], f"the {FE_NAMES[fe_kind]} read of {name(res)} at {R.where(cmd)}", cmd,
                        "read", act, fe_kind)
    for res, lst in pending.items():
        if res in frontend and lst:
            violate(res, lst[0], f"the end of the list ({name(res)} is declared frontend: another "
                    f"list's front end reads it)", len(s), "end")
    return out


def _apply_flush(w: _Write, code: int, val: int, compute_ctx: bool, at: str) -> None:
    if code == _OP["GpuSendPipelinedEvent"]:
        if not compute_ctx and _STAGE_EVENT[w.stage] == PIPELINED_EVENTS[val]:
            w.drained = True
        elif not compute_ctx and w.needs_partial and not w.drained:
            w.notes.append(f"{PIPELINED_EVENTS[val]} at {at} does not drain {_STAGE_EVENT[w.stage][:2]}-stage work")
        return
    if compute_ctx:
        if code == _OP["FlushGpuCachesBottomOfPipe"] and val == _DEFAULT:
            w._done = True  # type: ignore[attr-defined]
        elif code == _OP["FlushGpuCacheRange"]:
            w.notes.append(f"FlushGpuCacheRange {FLUSH_MODES[val]} at {at} is the graphics-context flush "
                           f"(no PFP flush on async compute)")
        else:
            w.notes.append(f"FlushGpuCachesBottomOfPipe DEFAULT_PFP at {at}: async compute has no PFP flush")
        return
    if code == _OP["FlushGpuCacheRange"] and val == _PFP:
        if w.drained or not w.needs_partial:
            w._done = True  # type: ignore[attr-defined]
        else:
            w.notes.append(f"the L2 flush at {at} does not cover it: no {_STAGE_EVENT[w.stage]} drained the "
                           f"writer before it")
    elif code == _OP["FlushGpuCacheRange"]:
        w.notes.append(f"FlushGpuCacheRange DEFAULT at {at} does not reach the prefetch parser (DEFAULT_PFP needed)")
    else:
        w.notes.append(f"FlushGpuCachesBottomOfPipe at {at} is the async-compute flush")


# --------------------------------------------------------------------------- bundles
def _bundle(R: Records) -> list[Violation]:
    s = R.stream
    if s.header.kind != "bundle":
        return []
    idx = op_index(s).of(_OP["SetDescriptorHeaps"])
    out = []
    first: tuple[str, ...] | None = None
    first_cmd = -1
    for c in idx.tolist():
        heaps = tuple(sorted(s.decls[int(h)].name for h in s.var(c)))
        if first is None:
            first, first_cmd = heaps, c
        elif heaps != first:
            out.append(Violation(("bundle-heaps",), f"a bundle sets its descriptor heaps only once: "
                                 f"SetDescriptorHeaps {' '.join(heaps)} at {R.where(c)} after "
                                 f"SetDescriptorHeaps {' '.join(first)} at {R.where(first_cmd)}", c,
                                 {"rule": "bundle-heaps"}))
    return out


# --------------------------------------------------------------------------- pipelines
def first_new_no_pipeline(orig: Records, opt: Records) -> Violation | None:
    """The first draw (then dispatch) of ``opt`` with no usable pipeline beyond the number
    ``orig`` has: none set (a bundle inherits none: D3D12's ExecuteBundle passes on all state but
    the pipeline and the topology) or one of the other kind. One the stream does not know (after
    an Opaque command) is not counted. Counted, not matched, like the keyed rules (columnar: no
    object per draw), so a rewrite may not make an action lose its pipeline even where it writes
    nothing (such an action has no records)."""
    assert orig.a_observer is not None and opt.a_observer is not None
    for key, what in ((-1, "draw"), (-2, "dispatch")):
        allowed = int(np.count_nonzero(orig.a_observer == key))
        lacking = np.flatnonzero(opt.a_observer == key)
        if lacking.size > allowed:
            cmd = int(opt.a_cmd[lacking[allowed]])
            return Violation(("no-pipeline", what), f"{opt.stream.spec(cmd).name} at {opt.where(cmd)} has no "
                             f"usable pipeline state (none set, or a pipeline of the other kind)", cmd,
                             {"rule": "no-pipeline"})
    return None


# --------------------------------------------------------------------------- DrawIndexedX
def _drawindexedx(R: Records) -> list[Violation]:
    s = R.stream
    out: list[Violation] = []
    xa = np.flatnonzero(R.a_op == _OP["DrawIndexedX"])
    if not xa.size:
        return out
    for a in xa.tolist():
        pi = R.pipe(a)
        if pi is not None and not pi.layout_none:
            cmd = int(R.a_cmd[a])
            out.append(Violation(("x-layout", pi.name), f"DrawIndexedX at {R.where(cmd)} uses pipeline "
                                 f"'{pi.name}', which has an input layout ({pi.layout}): IndexOffset would shift "
                                 f"its vertex fetch; only vertex-pulling pipelines (layout=none) can be packed",
                                 cmd, {"rule": "x-layout"}))
    x = R.x
    bufs = {int(R.cmap[i]): d for i, d in enumerate(s.decls.items) if isinstance(d, Buffer)}
    seen_acts: set[int] = set()
    for i in range(x["act"].size):
        a = int(x["act"][i])
        if a in seen_acts:
            continue
        seen_acts.add(a)
        pi = R.pipe(a)
        if pi is None:
            continue
        cmd = int(R.a_cmd[a])
        slot, low, b, off = int(x["slot"][i]), int(x["low"][i]), int(x["buf"][i]), int(x["off"][i])
        k = pi.k_bits
        if b < 0:
            out.append(Violation(("x-perdraw", pi.name), f"DrawIndexedX at {R.where(cmd)}: nothing is bound at "
                                 f"root parameter {pi.perdraw}, the per-draw array of pipeline '{pi.name}'", cmd,
                                 {"rule": "x-perdraw"}))
            continue
        stride = 4 * pi.rec_words
        d = bufs.get(b)
        if d is not None and off + (slot + 1) * stride > d.size:
            out.append(Violation(("x-slot", pi.name), f"DrawIndexedX at {R.where(cmd)}: draw id {slot} addresses "
                                 f"a per-draw record past the end of '{d.name}' ({d.size} bytes; records of "
                                 f"{stride} bytes from offset {off}); vertex_bits={k} leaves {32 - k} bits of "
                                 f"draw id", cmd, {"rule": "x-slot"}))
        if pi.base == "none" and low != 0:
            out.append(Violation(("x-base", pi.name), f"DrawIndexedX at {R.where(cmd)}: pipeline '{pi.name}' "
                                 f"declares base=none but IndexOffset carries low bits {low}", cmd,
                                 {"rule": "x-base"}))
        v = _index_overflow(R, i, pi, cmd, low)
        if v is not None:
            out.append(v)
    return out


def _index_overflow(R: Records, i: int, pi: PipeInfo, cmd: int, low: int) -> Violation | None:
    """An index (plus the IndexOffset low bits) of the i-th ``DrawIndexedX`` record that
    may reach ``2^vertex_bits``: the slot ``IndexOffset >> K`` its vertices decode to is
    then ambiguous. What proves the largest index: the contract's ``max_index``, the index
    format (R16: 65535), or the CPU-known index data (:meth:`records._Expander._largest_index`);
    an R32 draw with neither a ``max_index`` nor known data is reported."""
    k = pi.k_bits
    imax, why = int(R.x["imax"][i]), int(R.x["imax_from"][i])
    if imax + low < (1 << k):  # every index + low stays below 2^K
        return None
    where = f"DrawIndexedX at {R.where(cmd)}"
    if why == IMAX_DECLARED:
        return Violation(("x-max-index", pi.name), f"{where}: IndexOffset low bits {low} + max_index "
                         f"{pi.max_index} overflow vertex_bits={k} into the draw id", cmd, {"rule": "x-max-index"})
    fmt = ("R16_UINT", "R32_UINT")[int(R.key[int(R.x["rec"][i]), F["fmt"]]) == 1]
    plus = f" plus IndexOffset low bits {low}" if low else ""
    if why == IMAX_DATA:
        what = (f"its index data holds index {imax}, which{plus} overflows vertex_bits={k}: it would carry into "
                f"the draw id")
    else:  # IMAX_UNKNOWN: only the format bounds the indices
        what = (f"an {fmt} index may reach {imax}{plus}, past vertex_bits={k}: it would carry into the draw id "
                f"(pipeline '{pi.name}' declares no max_index and the index data is not known), so the record "
                f"its vertices read is ambiguous")
    return Violation(("x-index-overflow", pi.name), f"{where}: {what}", cmd, {"rule": "x-index-overflow"})
