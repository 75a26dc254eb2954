"""``flush``: insert exactly the flushes and index-buffer re-binds the seeds require.

Two rewrites, both linear in the stream:

1. **Index-buffer re-binds.** ``DrawIndexedX`` leaves the index buffer undefined
   (drawindexedx.txt). Where an indexed draw (one that reads the bound index
   buffer) follows a ``DrawIndexedX`` with no ``IASetIndexBuffer`` between them,
   the ``IASetIndexBuffer`` in force before that ``DrawIndexedX`` is re-issued
   right after it (after the last ``DrawIndexedX`` of the run, so that a later
   ``Opaque`` command that might bind its own index buffer still wins). Nothing is
   inserted when no index buffer was ever set before the run.

2. **Flushes** (multidraw-indirect-and-flushes.txt, modelled in
   :mod:`drawopt.analysis.flushrules`). A linear scan tracks every GPU write of a buffer
   that some later command reads through the front end (indirect args, draw
   counts, index data) or that is declared ``frontend``. Before each front-end
   read of a buffer whose write is not yet visible, the pass inserts what is
   missing from the seed's sequence for the writer's stage, context and
   fast-semantics setting — nothing that is already in force (a partial flush
   already in the input is used; only the L2 flush is added after it, and so on).
   The insertion point is as late as possible: immediately before the reading
   command. One inserted sequence covers every write it can: its L2 flush covers
   every drained write, its partial flushes every write of their stage, and it
   also takes the partial flush of another stage when a pending write of that
   stage is read before any new relevant GPU write (and, unless redundant flushes
   are dropped, before the next flush already in the input) — flushing it there
   costs one event and saves a later event plus an L2 flush. On the async compute
   context, writes of ``frontend`` buffers get one ``FlushGpuCachesBottomOfPipe
   DEFAULT`` at the end of the stream, which covers them all (the front end that
   reads them runs on another context after this list); on the graphics context
   ``frontend`` buffers still pending at the end get the graphics sequence there.

``drop_redundant_flushes``: also remove input flushes that cover nothing. A
recognised flush (one of the seed's commands on its right context) is redundant
when it makes progress on no pending write that a later consumer can observe —
a front-end read in this stream, a ``frontend`` buffer, or any ``Opaque`` command
after the write (an unknown command may read anything). Conservative on purpose:

* ``GpuSendPipelinedEvent <S>_PARTIAL_FLUSH`` (and, on async compute, a
  bottom-of-pipe flush) is kept whenever it drains a UAV write of any resource
  that a later command of the stream may access (:func:`drawopt.analysis.flushrules.last_access`):
  a partial flush is also the execution barrier that orders those accesses after
  the write. A CS write counts only under fast semantics or ``CSEnableAutomaticGpuFlush
  FALSE``: otherwise the driver orders Dispatches itself.
* Flush commands the model does not recognise (``FlushGpuCacheRange DEFAULT`` on
  graphics, a bottom-of-pipe flush on graphics, any flush on the wrong context)
  are never dropped, nor is a flush that covers a write a later flush would also
  cover.
* A stream is self-contained: a flush before anything is written covers nothing.
  Consumers outside the stream synchronise through fences (CPU readback) or get
  their flushes from the writer's list (a buffer another list reads through its
  front end is declared ``frontend``).

The pass runs THE flush model (:mod:`drawopt.analysis.flushrules`), the one
:mod:`drawopt.validate` reports by, read with
:attr:`~drawopt.analysis.flushrules.Doubt.STRICT`: it never relies on what the model
cannot know. A write pending before an ``Opaque`` command stays pending after it (validate
gives it the benefit of the doubt); a graphics Dispatch after an ``Opaque`` command, before
the next ``CSEnableAutomaticGpuFlush``, needs ``CS_PARTIAL_FLUSH`` (the command may have
turned the automatic flush off); the index buffer bound before an ``Opaque`` command is
still read after it; a draw on async compute writes. The scan itself is compiled
(``drawopt._flush.plan``; pure twin :func:`_plan_py`).
"""

from __future__ import annotations

__all__ = ["FlushPass", "FlushPlan", "plan_flushes", "index_rebinds"]

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.flushrules import (
    CS,
    EFF_BOP,
    EFF_L2,
    EV_BARRIER,
    EV_FLUSH,
    EV_READ,
    EV_USE,
    EV_WRITE,
    STAGES,
    Doubt,
    FlushAccess,
    FlushStep,
    FlushTracker,
    flush_access,
    forward_fill,
    last_access,
    model_events,
    required_sequence,
)
from drawopt.analysis.state import IB, OBS_DRAW, Scan, scan
from drawopt.ir import arrayset
from drawopt.ir.ops import BY_NAME, INDEXED_DRAW_OPS, Op
from drawopt.ir.stream import Encoded, Stream, splice
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_IA = BY_NAME["IASetIndexBuffer"].code
_DX = BY_NAME["DrawIndexedX"].code
_INDEXED = np.array(sorted(INDEXED_DRAW_OPS), np.uint16)

"""A new command: ``(opcode, fixed args, variadic args)``."""


# --------------------------------------------------------------------------- re-binds
def index_rebinds(stream: Stream) -> list[tuple[int, int]]:
    """``(after, source)`` pairs: re-issue ``IASetIndexBuffer`` command ``source`` right
    after the ``DrawIndexedX`` at ``after``, because a later indexed draw reads the
    index buffer that ``DrawIndexedX`` left undefined. Sorted by ``after``."""
    n = len(stream)
    op = stream.op
    ia = np.flatnonzero(op == _IA)
    dx = np.flatnonzero(op == _DX)
    if dx.size == 0 or ia.size == 0:
        return []
    where = np.concatenate([ia, dx])
    vals = np.concatenate([ia, -(dx + 2)])  # >= 0: that IASetIndexBuffer; <= -2: undefined since DrawIndexedX
    order = np.argsort(where, kind="stable")
    state = forward_fill(n, where[order], vals[order])
    d = np.flatnonzero(np.isin(op, _INDEXED))
    v = state[d]
    x = np.unique(-(v[v <= -2] + 2))
    src = forward_fill(n, ia, ia)[x]
    ok = src >= 0
    return list(zip(x[ok].tolist(), src[ok].tolist()))


def _rebinds_in_range(stream: Stream, rebinds: list[tuple[int, int]], sc: Scan | None = None) -> list[tuple[int, int]]:
    """``rebinds`` less those that would make a draw read what no input draw read.

    pack-x re-issues the index buffer after its own runs; a re-bind here is for an input that
    already reads an undefined index buffer after a ``DrawIndexedX``. It is left out when the
    re-bound buffer is written anywhere in the stream (a copy or a GPU write: the draw would read a
    written buffer where the input read nothing, a new hazard with that write before or after it,
    which the verifier rejects), or when a draw would read
    past the buffer's end (trading an ``index-buffer-undefined`` finding for an ``index-range``
    one; no pass may add a finding of any rule). ``validate`` owns that rule: the draws a re-bind
    would give an index buffer are checked with :func:`drawopt.validate.index_range_violations`
    under the binding the re-bind puts in force (a re-bind changes what no other draw reads).
    ``sc``: the stream's :func:`drawopt.analysis.state.scan`, if known.
    """
    if not rebinds:
        return rebinds
    from drawopt.analysis.access import gpu_writes
    from drawopt.validate import index_range_violations

    # a buffer something writes (a copy or a GPU write), before or after the re-bind point: the draw reading
    # it there would add a hazard with that write that the input (reading an undefined index buffer) did not
    # have: when unsure, don't re-bind
    sc = sc if sc is not None else scan(stream)
    w = gpu_writes(stream, sc)
    written = np.zeros(len(stream.decls) + 1, bool)
    copies = np.flatnonzero(stream.op == BY_NAME["CopyBufferRegion"].code)
    written[np.r_[w.res, stream.args[copies, Op.CopyBufferRegion.col("dst")]].astype(np.int64)] = True
    buf = Op.IASetIndexBuffer.col("buffer")
    rebinds = [(after, src) for after, src in rebinds if not written[int(stream.args[src, buf])]]
    if not rebinds:
        return rebinds

    # the draws each re-bind would bind: those reading the index buffer its DrawIndexedX left undefined
    # (the scan's: an Opaque command in between leaves it unknown, which no re-bind changes)
    d = np.flatnonzero(sc.obs_kind == OBS_DRAW)
    d = d[(sc.setter[d, IB] == -1) & (((sc.unknown[d] >> IB) & 1) == 0)]
    cmds = sc.obs[d]
    dx = np.flatnonzero(stream.op == _DX)
    k = np.searchsorted(dx, cmds) - 1
    after = np.where(k >= 0, dx[np.maximum(k, 0)] if dx.size else -1, -1)
    src_of = np.full(len(stream) + 1, -1, np.int64)
    pairs = np.array(rebinds, np.int64).reshape(-1, 2)
    src_of[pairs[:, 0]] = pairs[:, 1]
    src = src_of[after]
    m = src >= 0
    out_of_range = set(after[m][np.isin(cmds[m], index_range_violations(stream, cmds[m], src[m], w).cmd)].tolist())
    return [pair for pair in rebinds if pair[0] not in out_of_range]


# --------------------------------------------------------------------------- flushes
@dataclass
class FlushPlan:
    """What the flush scan decided.

    ``inserts``: command index -> steps to insert before it (``len(stream)`` = at the
    end). ``drops``: input flush commands to remove. ``points``: number of places
    where a sequence was inserted.
    """

    inserts: dict[int, list[FlushStep]] = field(default_factory=dict)
    drops: list[int] = field(default_factory=list)

    @property
    def points(self) -> int:
        return len(self.inserts)

    @property
    def inserted(self) -> int:
        return sum(len(v) for v in self.inserts.values())


def _relevant(acc: FlushAccess, decls: Any) -> np.ndarray:
    """Mask over the UAV writes: buffer writes a later front-end read, a ``frontend``
    declaration or a later ``Opaque`` command can observe (every write the model may count:
    :attr:`~drawopt.analysis.flushrules.Doubt.STRICT`)."""
    if acc.w_cmd.size == 0:
        return np.zeros(0, bool)
    last_read = np.full(len(decls) + 1, -1, np.int64)
    np.maximum.at(last_read, acc.r_buf, acc.r_cmd)
    rel = acc.frontend[acc.w_res] | (last_read[acc.w_res] > acc.w_cmd)
    if acc.opaque_cmd.size:
        rel |= acc.w_cmd < acc.opaque_cmd[-1]
    return rel & acc.write_mask(Doubt.STRICT)


def plan_flushes(stream: Stream, drop_redundant: bool = False, coalesce: bool = True,
                 acc: FlushAccess | None = None, pure: bool | None = None) -> FlushPlan:
    """Decide the flushes to insert (and, with ``drop_redundant``, to drop); see the module docstring.

    The flush model's events under :attr:`~drawopt.analysis.flushrules.Doubt.STRICT` (nothing an
    ``Opaque`` command may have done is relied on), run through the planner: ``drawopt._flush.plan``
    (compiled), or its pure twin :func:`_plan_py` (``pure``, or ``DRAWOPT_PURE=1``)."""
    acc = acc if acc is not None else flush_access(stream)
    n = len(stream)
    ctx = acc.context
    decls = stream.decls
    rel = _relevant(acc, decls)
    wc, wb, wk = acc.w_cmd[rel], acc.w_res[rel], acc.classes(Doubt.STRICT)[rel]
    written = np.zeros(len(decls) + 1, bool)
    written[wb] = True
    rmask = written[acc.r_buf]
    rc, rb = acc.r_cmd[rmask], acc.r_buf[rmask]
    bmask = written[acc.barriers[:, 1]] if acc.barriers.size else np.zeros(0, bool)
    plan = FlushPlan()
    if wc.size == 0 and not (drop_redundant and acc.flush_cmd.size):
        return plan

    # UAV writes a later command may access: a partial flush draining them may be their barrier
    if drop_redundant:
        uses = last_access(stream, np.unique(acc.w_res).tolist())
        later = np.array([uses.get(int(r), -1) for r in acc.w_res.tolist()], np.int64)
        um = (later > acc.w_cmd) & (acc.partial(Doubt.STRICT) | (ctx == "compute"))
    else:
        later = np.zeros(acc.w_cmd.size, np.int64)
        um = np.zeros(acc.w_cmd.size, bool)
    ustage = np.full(int(um.sum()), CS, np.int64) if ctx == "compute" else acc.w_stage[um].astype(np.int64)

    ev = model_events(reads=(rc, rb, np.arange(rc.size)), writes=(wc, wb, wk),
                      barriers=(acc.barriers[bmask, 0], acc.barriers[bmask, 1]),
                      uses=(acc.w_cmd[um], ustage, later[um]), flushes=(acc.flush_cmd, acc.flush_eff))
    nbuf = len(decls) + 1
    # lookahead tables: reads per buffer (in stream order), relevant write commands, recognised input flushes
    r = ev.kind == EV_READ
    by_buf = np.argsort(ev.a[r], kind="stable")
    rd_cmd = ev.cmd[r][by_buf]
    rd_start = np.searchsorted(ev.a[r][by_buf], np.arange(nbuf + 1))
    write_cmds = arrayset.unique(ev.cmd[ev.kind == EV_WRITE])
    flush_cmds = ev.cmd[ev.kind == EV_FLUSH]
    fe = acc.frontend.astype(np.uint8)
    mod = load_cext("_flush", pure)
    run = mod.plan if mod is not None else _plan_py
    ins_cmd, ins_mask, drops = run(ev.cmd, ev.kind, ev.a, ev.b, nbuf, ctx == "graphics", fe, n, rd_start, rd_cmd,
                                   write_cmds, flush_cmds, drop_redundant, coalesce)
    for c, m in zip(np.asarray(ins_cmd).tolist(), np.asarray(ins_mask).tolist()):
        _insert(plan, c, required_sequence([s for s in STAGES if m >> s & 1], ctx))
    plan.drops.extend(np.asarray(drops).tolist())
    return plan


def _plan_py(cmd: np.ndarray, kind: np.ndarray, a: np.ndarray, b: np.ndarray, nbuf: int, graphics: bool,
             frontend: np.ndarray, n: int, rd_start: np.ndarray, rd_cmd: np.ndarray, write_cmds: np.ndarray,
             flush_cmds: np.ndarray, drop_redundant: bool, coalesce: bool) -> tuple[list[int], list[int], list[int]]:
    """Pure-Python twin of ``drawopt._flush.plan``: ``(insert commands, stage masks, drops)``.

    One scan of the model's events (:class:`~drawopt.analysis.flushrules.FlushEvents`) through
    :class:`~drawopt.analysis.flushrules.FlushTracker`, inserting before each read group that
    finds a pending write the sequence it needs (plus, with ``coalesce``, the partial flushes of
    classes whose pending writes are read before the horizon: the next relevant write or,
    keeping input flushes, the next input flush), and bookkeeping, per stage class, the last
    later access of the UAV writes a partial flush orders (``drop_redundant``)."""
    tr = FlushTracker("graphics" if graphics else "compute")
    rd_l, rs_l = rd_cmd.tolist(), rd_start.tolist()
    wcs, fls = write_cmds.tolist(), flush_cmds.tolist()

    def next_read(buf: int, p: int) -> int:
        lo, hi = rs_l[buf], rs_l[buf + 1]
        k = bisect_right(rd_l, p, lo, hi)
        if k < hi:
            return rd_l[k]
        return n if frontend[buf] else n + 1

    def horizon(p: int) -> int:
        k = bisect_right(wcs, p - 1)  # a write at p itself happens after the flush point
        h = wcs[k] if k < len(wcs) else n + 1
        if not drop_redundant:
            k = bisect_right(fls, p)
            if k < len(fls):
                h = min(h, fls[k])
        return h

    ins_c: list[int] = []
    ins_m: list[int] = []
    drops: list[int] = []
    umax = [-1, -1, -1]  # per stage class: the last later access of the UAV writes it has not drained
    cmds_l, kinds_l, a_l, b_l = cmd.tolist(), kind.tolist(), a.tolist(), b.tolist()
    k, m = 0, len(cmds_l)
    while k < m:
        c, ki = cmds_l[k], kinds_l[k]
        if ki == EV_READ:
            bufs = []
            while k < m and cmds_l[k] == c and kinds_l[k] == EV_READ:
                bufs.append(a_l[k])
                k += 1
            stages, need = tr.missing(bufs)
            if need:
                if coalesce and graphics:
                    h = horizon(c)
                    for s in STAGES:
                        if s not in stages and any(next_read(x, c) < h for x in tr.undrained(s)):
                            stages.add(s)
                ins_c.append(c)
                ins_m.append(sum(1 << s for s in stages))
                tr.cover(stages)
                for s in (stages if graphics else STAGES):
                    umax[s] = -1
            continue
        k += 1
        if ki == EV_WRITE:
            tr.add(c, a_l[k - 1], b_l[k - 1])
        elif ki == EV_BARRIER:
            tr.barrier(a_l[k - 1])
        elif ki == EV_USE:
            umax[a_l[k - 1]] = max(umax[a_l[k - 1]], b_l[k - 1])
        elif ki == EV_FLUSH:
            eff = a_l[k - 1]
            useful = tr.apply(eff)
            for s in ((eff,) if eff < EFF_L2 else STAGES if eff == EFF_BOP else ()):
                useful |= umax[s] > c
                umax[s] = -1
            if drop_redundant and not useful:
                drops.append(c)
    # the end of the stream: buffers another command list reads through its front end
    pend = [x for x in np.flatnonzero(frontend[:nbuf]).tolist() if tr.missing((x,))[1]]
    if pend:
        stages, _ = tr.missing(pend)
        ins_c.append(n)
        ins_m.append(sum(1 << s for s in stages))
    return ins_c, ins_m, drops


def _insert(plan: FlushPlan, at: int, steps: list[FlushStep]) -> None:
    plan.inserts.setdefault(at, []).extend(steps)




# --------------------------------------------------------------------------- the pass
@dataclass(frozen=True)
class FlushPass(Pass):
    """Insert the seed's flush sequences and ``IASetIndexBuffer`` re-binds (see the module docstring).

    Options: ``drop_redundant_flushes`` (remove input flushes that cover nothing),
    ``coalesce`` (let one inserted sequence take other stages' pending writes). The rules
    are the seed's on every target (the stream's commands are the D3D12.X ones).
    """

    name: ClassVar[str] = "flush"
    requires: ClassVar[tuple[str, ...]] = ()
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "insert required partial/L2 flushes and IASetIndexBuffer re-binds"

    drop_redundant_flushes: bool = False
    coalesce: bool = True

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        sc = am.get("scan", stream) if am is not None else None  # shared: the pipeline's, or kept for the next pass
        rebinds = index_rebinds(stream)
        if rebinds:
            rebinds = _rebinds_in_range(stream, rebinds, sc)
        s1 = stream
        if rebinds:
            s1 = splice(stream, {after + 1: [_copy(stream, src)] for after, src in rebinds})
        plan = plan_flushes(s1, self.drop_redundant_flushes, self.coalesce,
                            flush_access(s1, sc if s1 is stream else None))
        report: dict[str, Any] = {
            "index_rebinds": len(rebinds), "flush_points": plan.points,
            "flushes_inserted": plan.inserted, "flushes_dropped": len(plan.drops),
        }
        if not rebinds and not plan.inserts and not plan.drops:
            return PassResult.unchanged(stream, **report)
        out = s1
        if plan.inserts or plan.drops:
            out = splice(s1, {at: [_step(st) for st in steps] for at, steps in plan.inserts.items()}, plan.drops)
        return PassResult(out, True, frozenset(), report)


def _copy(s: Stream, i: int) -> Encoded:
    return int(s.op[i]), s.args[i].tolist(), s.var(i).tolist()


def _step(st: FlushStep) -> Encoded:
    code, v = st.encoded()
    return code, (v,), ()
