"""The seed's flush requirements for GPU-written data read by the front end, as data.

Source: ``multidraw-indirect-and-flushes.txt``. The GPU front end (the command
processor's prefetch parser, PFP) reads indirect arguments, GPU-written draw
counts and index data without going through the shader caches, so a buffer a
shader wrote must be *drained* (the writing waves finished) and *written back*
from L2 before the front end reads it:

=========================  ===================================================
writer                     sequence between the writer and the reader
=========================  ===================================================
graphics ``Dispatch``      ``FlushGpuCacheRange DEFAULT_PFP``; with fast
                           semantics or ``CSEnableAutomaticGpuFlush FALSE`` in
                           force at the Dispatch, ``GpuSendPipelinedEvent
                           CS_PARTIAL_FLUSH`` first
VS / GS / HS / DS writer   ``GpuSendPipelinedEvent VS_PARTIAL_FLUSH`` then
                           ``FlushGpuCacheRange DEFAULT_PFP``
PS writer                  ``GpuSendPipelinedEvent PS_PARTIAL_FLUSH`` then
                           ``FlushGpuCacheRange DEFAULT_PFP``
async compute ``Dispatch`` ``FlushGpuCachesBottomOfPipe DEFAULT`` after it
                           (there is no PFP flush on that context)
=========================  ===================================================

The model (:class:`FlushTracker`) gives every pending GPU write of a buffer a
stage class (CS, VS or PS) and a state: *undrained* (its stage's partial flush
has not run since), *drained* (waves done, data possibly still in L2) or
*visible* (written back; no longer pending):

* ``GpuSendPipelinedEvent <S>_PARTIAL_FLUSH`` drains the pending writes of stage
  class S issued before it, and only those (a PS partial flush does not drain
  VS-only work; no event drains another class's work).
* ``FlushGpuCacheRange DEFAULT_PFP`` (graphics) makes every *drained* write
  visible; undrained ones stay pending (the flush came too early for them).
* ``FlushGpuCachesBottomOfPipe DEFAULT`` (async compute) waits for all work, so
  it makes every pending write visible.
* A CS write issued while neither fast semantics nor ``CSEnableAutomaticGpuFlush
  FALSE`` is in force is drained when issued (the driver's automatic flush).
* ``ResourceBarrier`` of a buffer to ``INDIRECT_ARGUMENT`` or ``INDEX_BUFFER``
  makes that buffer's pending writes visible (D3D12 semantics), as
  :mod:`drawopt.validate` accepts.
* Other flush commands (``FlushGpuCacheRange DEFAULT`` or a bottom-of-pipe flush
  on graphics, a PFP flush or an event on async compute) satisfy none of the
  seed's requirements.

Writers and readers are those of :mod:`drawopt.validate`'s ``missing-flush`` rule:
the writes are THE resource-access rule of :mod:`drawopt.analysis.access` -- a ``Dispatch``
with a compute pipeline writes (stage class CS), and a draw with a graphics pipeline
writes from its ``uav_stage``, the resources its pipeline declares in ``writes=`` plus
every UAV reachable through the descriptor tables and root UAVs bound when it runs;
the front end reads the args buffer of every indirect draw, the
count buffer of the ``Auto`` variants, the bound index buffer of an indexed draw
and the explicit buffer of ``DrawIndexedX``. Byte ranges are not compared: a write
anywhere in a buffer reaches every front-end read of it.

This module holds the shared pieces; :mod:`drawopt.passes.flush` inserts what is
missing and :func:`drawopt.validate.findings` reports it.
"""

from __future__ import annotations

__all__ = [
    "CS", "VS", "PS", "STAGES", "STAGE_NAMES", "EVENT_STAGE", "STAGE_EVENT", "STAGE_OF_UAV",
    "READ_ARGS", "READ_COUNT", "READ_INDEX", "READ_KIND_NAMES",
    "FlushStep", "GRAPHICS_L2", "COMPUTE_BOP", "required_sequence", "needs_cs_partial", "writer_stage",
    "FlushAccess", "flush_access", "flush_effect", "forward_fill", "last_access", "FlushTracker",
]

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from drawopt.analysis.access import CS, PS, STAGE_NAMES, STAGE_OF_UAV, STAGES, VS, gpu_writes, writer_stage
from drawopt.analysis.state import Scan
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig, View
from drawopt.ir.ops import (
    BARRIER_STATES,
    BY_NAME,
    FLUSH_MODES,
    INDEXED_DRAW_OPS,
    INDIRECT_DRAW_OPS,
    PIPELINED_EVENTS,
    Cat,
)
from drawopt.ir.stream import Stream

STAGE_EVENT = {CS: "CS_PARTIAL_FLUSH", VS: "VS_PARTIAL_FLUSH", PS: "PS_PARTIAL_FLUSH"}
EVENT_STAGE = {v: k for k, v in STAGE_EVENT.items()}

READ_ARGS, READ_COUNT, READ_INDEX = 0, 1, 2
READ_KIND_NAMES = ("indirect args", "draw count", "index data")

_OP = {name: BY_NAME[name].code for name in (
    "SetPipelineState", "IASetIndexBuffer", "DrawIndexedX", "Dispatch", "GpuSendPipelinedEvent",
    "FlushGpuCacheRange", "FlushGpuCachesBottomOfPipe", "CSEnableAutomaticGpuFlush", "Opaque",
    "SetGraphicsRootDescriptorTable", "SetComputeRootDescriptorTable", "SetDescriptorHeaps",
    "MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto", "ResourceBarrier",
    "SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView", "IASetVertexBuffers",
    "OMSetRenderTargets", "CopyBufferRegion",
)}
_MULTI_PLAIN = np.array([BY_NAME["MultiDrawInstancedIndirect"].code,
                         BY_NAME["MultiDrawIndexedInstancedIndirect"].code], np.uint16)
_PFP = FLUSH_MODES.index("DEFAULT_PFP")
_DEFAULT = FLUSH_MODES.index("DEFAULT")
_FRONTEND_STATES = (BARRIER_STATES.index("INDIRECT_ARGUMENT"), BARRIER_STATES.index("INDEX_BUFFER"))


@dataclass(frozen=True)
class FlushStep:
    """One command of a flush sequence: ``op`` with its single enum argument ``value``."""

    op: str
    value: str

    def encoded(self) -> tuple[int, int]:
        """``(opcode, stored argument)`` as :class:`drawopt.ir.stream.CommandBuffer` takes them."""
        sp = BY_NAME[self.op]
        return sp.code, sp.args[0].values.index(self.value)

    def __str__(self) -> str:
        return f"{self.op} {self.value}"


GRAPHICS_L2 = FlushStep("FlushGpuCacheRange", "DEFAULT_PFP")
"""The L2 write-back the graphics-context front end needs."""
COMPUTE_BOP = FlushStep("FlushGpuCachesBottomOfPipe", "DEFAULT")
"""The async-compute flush (bottom of pipe: all work done, then L2 written back)."""


def needs_cs_partial(fast_semantics: bool, auto_gpu_flush: bool) -> bool:
    """Whether a graphics-context Dispatch needs ``CS_PARTIAL_FLUSH`` before the L2 flush."""
    return bool(fast_semantics or not auto_gpu_flush)


def required_sequence(stages: Iterable[int], context: str = "graphics") -> list[FlushStep]:
    """The seed's sequence that makes writes of ``stages`` readable by the front end.

    ``stages``: the stage classes whose writes still need their partial flush (a CS
    write needs one only under fast semantics / automatic flush off). On the
    graphics context: one ``GpuSendPipelinedEvent`` per class, in CS, VS, PS order,
    then one ``FlushGpuCacheRange DEFAULT_PFP``. On the async compute context:
    ``FlushGpuCachesBottomOfPipe DEFAULT`` alone.

    >>> [str(s) for s in required_sequence({PS, VS})]  # doctest: +NORMALIZE_WHITESPACE
    ['GpuSendPipelinedEvent VS_PARTIAL_FLUSH', 'GpuSendPipelinedEvent PS_PARTIAL_FLUSH',
     'FlushGpuCacheRange DEFAULT_PFP']
    >>> [str(s) for s in required_sequence((), "compute")]
    ['FlushGpuCachesBottomOfPipe DEFAULT']
    """
    if context == "compute":
        return [COMPUTE_BOP]
    return [FlushStep("GpuSendPipelinedEvent", STAGE_EVENT[s]) for s in sorted(set(stages))] + [GRAPHICS_L2]


def flush_effect(stream: Stream, i: int) -> tuple[str, int] | None:
    """What flush command ``i`` does in the model, or None if it meets no seed requirement.

    ``("event", stage)``: a partial flush on the graphics context; ``("l2", -1)``:
    ``FlushGpuCacheRange DEFAULT_PFP`` on the graphics context; ``("bop", -1)``:
    ``FlushGpuCachesBottomOfPipe DEFAULT`` on the compute context.
    """
    code, v = int(stream.op[i]), int(stream.args[i, 0])
    graphics = stream.header.context == "graphics"
    if code == _OP["GpuSendPipelinedEvent"] and graphics:
        return "event", EVENT_STAGE[PIPELINED_EVENTS[v]]
    if code == _OP["FlushGpuCacheRange"] and graphics and v == _PFP:
        return "l2", -1
    if code == _OP["FlushGpuCachesBottomOfPipe"] and not graphics and v == _DEFAULT:
        return "bop", -1
    return None


# --------------------------------------------------------------------------- accesses
def forward_fill(n: int, where: np.ndarray, values: np.ndarray, initial: int = -1) -> np.ndarray:
    """``out[i]`` = ``values[k]`` for the last ``where[k] <= i``, else ``initial``.

    ``where`` must be increasing. Linear; used for "the state in force at command i".
    """
    pos = np.full(n, -1, np.int64)
    if where.size:
        pos[where] = np.arange(where.size)
        np.maximum.accumulate(pos, out=pos)
    table = np.concatenate([np.asarray(values, np.int64).reshape(-1), np.array([initial], np.int64)])
    return table[pos]  # pos == -1 picks the trailing ``initial``


@dataclass
class FlushAccess:
    """Who writes which resource through a UAV and who reads which buffer through the front end.

    Arrays are sorted by command index. UAV writes: ``w_cmd`` (command), ``w_res``
    (resource declaration index), ``w_stage`` (stage class), ``w_partial`` (the
    write needs its class's partial flush: always for VS/PS, for CS under fast
    semantics or ``CSEnableAutomaticGpuFlush FALSE``), ``w_isbuf`` (the resource is
    a buffer). Front-end reads: ``r_cmd``, ``r_buf``, ``r_kind`` (:data:`READ_ARGS`,
    :data:`READ_COUNT`, :data:`READ_INDEX`). ``barriers``: ``(command, buffer)`` of
    every ``ResourceBarrier`` to ``INDIRECT_ARGUMENT`` / ``INDEX_BUFFER``.
    ``flush_cmd``: every flush command. ``opaque_cmd``: every ``Opaque`` command.
    """

    w_cmd: np.ndarray
    w_res: np.ndarray
    w_stage: np.ndarray
    w_partial: np.ndarray
    w_isbuf: np.ndarray
    r_cmd: np.ndarray
    r_buf: np.ndarray
    r_kind: np.ndarray
    barriers: np.ndarray
    flush_cmd: np.ndarray
    opaque_cmd: np.ndarray


def _resolve(decls: Decls, names: Iterable[str]) -> list[int]:
    out = set()
    for name in names:
        try:
            out.add(decls.index[decls.resource_of(name)])
        except (ValueError, KeyError):
            continue
    return sorted(out)


def _pipe_at(stream: Stream) -> np.ndarray:
    pso = np.flatnonzero(stream.op == _OP["SetPipelineState"])
    return forward_fill(len(stream), pso, stream.args[pso, 0])


def flush_access(stream: Stream, sc: Scan | None = None) -> FlushAccess:
    """The UAV writes and front-end reads of ``stream`` (see :class:`FlushAccess`). Vectorised.

    The writes are :func:`drawopt.analysis.access.gpu_writes` (``sc``: the stream's
    :func:`drawopt.analysis.state.scan`, if known)."""
    n = len(stream)
    decls = stream.decls
    op, args = stream.op, stream.args
    cats = stream.cats() if n else np.zeros(0, np.uint8)
    en = np.flatnonzero(op == _OP["CSEnableAutomaticGpuFlush"])
    auto_at = forward_fill(n, en, args[en, 0], int(stream.header.auto_gpu_flush))
    fast = bool(stream.header.fast_semantics)
    is_buf = np.array([isinstance(d, Buffer) for d in decls.items] + [False], bool)

    # ---- UAV writes: THE rule of drawopt.analysis.access (declared writes= plus the UAVs reachable
    # through the tables and root views bound when each draw / dispatch runs)
    gw = gpu_writes(stream, sc)
    w_cmd, w_res, w_stage = gw.cmd, gw.res, gw.stage
    w_partial = (w_stage != CS) | fast | (auto_at[w_cmd] == 0)

    # ---- front-end reads
    indirect = np.isin(op, np.array(sorted(INDIRECT_DRAW_OPS), np.uint16))
    autos = (op == _OP["MultiDrawInstancedIndirectAuto"]) | (op == _OP["MultiDrawIndexedInstancedIndirectAuto"])
    indexed = np.isin(op, np.array(sorted(INDEXED_DRAW_OPS), np.uint16))
    dx = op == _OP["DrawIndexedX"]
    ia = np.flatnonzero(op == _OP["IASetIndexBuffer"])
    ib_events = np.concatenate([ia, np.flatnonzero(dx)])
    ib_vals = np.concatenate([args[ia, 0], np.full(int(dx.sum()), -1, np.int64)])
    order = np.argsort(ib_events, kind="stable")
    ib_at = forward_fill(n, ib_events[order], ib_vals[order])

    single_multi = np.flatnonzero(indirect & ~autos)
    a = np.flatnonzero(autos)
    ix = np.flatnonzero(indexed)
    ix = ix[ib_at[ix] >= 0]
    x = np.flatnonzero(dx)
    col = np.where(np.isin(op[single_multi], _MULTI_PLAIN), 1, 0)
    r_cmd = np.concatenate([single_multi, a, a, ix, x]).astype(np.int64)
    r_buf = np.concatenate([args[single_multi, col], args[a, 3], args[a, 0], ib_at[ix], args[x, 0]]).astype(np.int64)
    r_kind = np.concatenate([np.full(single_multi.size + a.size, READ_ARGS), np.full(a.size, READ_COUNT),
                             np.full(ix.size + x.size, READ_INDEX)]).astype(np.int8)
    order = np.lexsort((r_kind, r_cmd))

    bar = np.flatnonzero((op == _OP["ResourceBarrier"]) & np.isin(args[:, 2], _FRONTEND_STATES))
    barriers = np.stack([bar, args[bar, 0]], axis=1) if bar.size else np.zeros((0, 2), np.int64)
    flush = np.flatnonzero(cats == int(Cat.FLUSH)) if n else np.zeros(0, np.int64)
    return FlushAccess(w_cmd, w_res, w_stage, np.asarray(w_partial, bool), is_buf[w_res],
                       r_cmd[order], r_buf[order], r_kind[order], barriers, flush,
                       np.flatnonzero(op == _OP["Opaque"]))


def last_access(stream: Stream, resources: Iterable[int]) -> dict[int, int]:
    """For each resource, the last command that may access it other than through the front end.

    Accesses counted (conservatively): a draw or dispatch whose pipeline names the
    resource in ``reads=`` / ``writes=``, or that reads (per ``Pipeline.read_params``) a descriptor
    table in force holding a view of it; a ``CopyBufferRegion`` of it; an ``Opaque``
    command (may access anything). A resource ever bound as a root CBV/SRV, a vertex
    buffer or a render/depth target counts as accessed at the end of the stream.
    Returns ``{resource: command index}`` (``-1``: never accessed).
    """
    want = sorted(set(int(r) for r in resources))
    out = {r: -1 for r in want}
    if not want:
        return out
    n = len(stream)
    decls = stream.decls
    op, args = stream.op, stream.args
    cats = stream.cats() if n else np.zeros(0, np.uint8)
    wanted = np.zeros(len(decls) + 1, bool)
    wanted[want] = True

    def bump(r: int, c: int) -> None:
        if r in out and c > out[r]:
            out[r] = c

    opq = np.flatnonzero(op == _OP["Opaque"])
    if opq.size:
        for r in want:
            bump(r, int(opq[-1]))
    # bound for the rest of the stream: root views, vertex buffers, targets
    for name, cols in (("SetGraphicsRootConstantBufferView", (1,)), ("SetGraphicsRootShaderResourceView", (1,)),
                       ("IASetVertexBuffers", (1,))):
        sel = np.flatnonzero(op == _OP[name])
        for cidx in cols:
            for r in np.unique(args[sel, cidx]).tolist():
                bump(int(r), n)
    for i in np.flatnonzero(op == _OP["OMSetRenderTargets"]).tolist():
        for r in stream.var(i).tolist():
            bump(int(r), n)
    cp = np.flatnonzero(op == _OP["CopyBufferRegion"])
    for cidx in (0, 2):
        for c, r in zip(cp.tolist(), args[cp, cidx].tolist()):
            bump(int(r), c)

    work = np.flatnonzero((cats == int(Cat.DRAW)) | (cats == int(Cat.DISPATCH)))
    if not work.size:
        return out
    pipe_at = _pipe_at(stream)
    wp = pipe_at[work]
    views = _views_by_heap(decls, wanted)
    for i, p in enumerate(decls.items):
        if not isinstance(p, Pipeline):
            continue
        mine = work[wp == i]
        if not mine.size:
            continue
        for r in _resolve(decls, (*p.reads, *p.writes)):
            bump(r, int(mine[-1]))
        if not views:
            continue
        rs = decls[p.root] if p.root is not None and p.root in decls else None
        if not isinstance(rs, RootSig):
            continue
        code = _OP["SetComputeRootDescriptorTable"] if p.is_compute else _OP["SetGraphicsRootDescriptorTable"]
        sets = np.flatnonzero(op == code)
        heaps = np.flatnonzero(op == _OP["SetDescriptorHeaps"])
        for k in p.read_params(len(rs.params)):
            prm = rs.params[k]
            if prm.kind != "table":
                continue
            at = sets[args[sets, 0] == k]
            where = np.concatenate([at, heaps])
            vals = np.concatenate([args[at, 1], np.full(heaps.size, -1, np.int64)])
            o = np.argsort(where, kind="stable")
            tv = forward_fill(n, where[o], vals[o])[mine]
            uniq, inv = np.unique(tv, return_inverse=True)
            last = np.full(uniq.size, -1, np.int64)
            np.maximum.at(last, inv.reshape(-1), mine)
            for v, c in zip(uniq.tolist(), last.tolist()):
                if v < 0:
                    continue
                hv = views.get(v >> 32)
                if hv is None:
                    continue
                slots, res = hv
                lo = v & 0xFFFFFFFF
                a, b = np.searchsorted(slots, lo), np.searchsorted(slots, lo + prm.table_size)
                for r in res[a:b].tolist():
                    bump(int(r), int(c))
    return out


def _views_by_heap(decls: Decls, wanted: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per heap: sorted slots and resources of the views of ``wanted`` resources."""
    per: dict[int, list[tuple[int, int]]] = {}
    for d in decls.items:
        if isinstance(d, View) and d.resource is not None and d.resource in decls:
            r = decls.index[d.resource]
            if wanted[r]:
                per.setdefault(decls.index[d.heap], []).append((d.slot, r))
    out = {}
    for h, items in per.items():
        items.sort()
        out[h] = (np.array([s for s, _ in items], np.int64), np.array([r for _, r in items], np.int64))
    return out


# --------------------------------------------------------------------------- the model
class FlushTracker:
    """Pending GPU writes of buffers as the front end sees them (see the module docstring).

    Record writes with :meth:`write`; apply flush commands with :meth:`event`,
    :meth:`l2`, :meth:`bop` (or :meth:`apply` on a :func:`flush_effect`) and barriers
    with :meth:`barrier`; each returns whether it made progress on some recorded
    write (False: it covered nothing the caller recorded). :meth:`missing` says what
    a read of some buffers still needs.
    """

    def __init__(self, context: str = "graphics") -> None:
        self.context = context
        self.undrained: tuple[dict[int, int], dict[int, int], dict[int, int]] = ({}, {}, {})
        self.drained: dict[int, int] = {}

    def write(self, cmd: int, buf: int, stage: int, partial: bool) -> None:
        """Record that command ``cmd`` writes buffer ``buf`` from ``stage``."""
        if self.context == "compute":
            self.undrained[CS].setdefault(buf, cmd)
        elif partial:
            self.undrained[stage].setdefault(buf, cmd)
        else:
            self.drained.setdefault(buf, cmd)

    def event(self, stage: int) -> bool:
        """A ``<stage>_PARTIAL_FLUSH`` (graphics): drains that class's pending writes."""
        u = self.undrained[stage]
        if not u:
            return False
        for b, c in u.items():
            self.drained.setdefault(b, c)
        u.clear()
        return True

    def l2(self) -> bool:
        """``FlushGpuCacheRange DEFAULT_PFP`` (graphics): drained writes become visible."""
        if not self.drained:
            return False
        self.drained.clear()
        return True

    def bop(self) -> bool:
        """``FlushGpuCachesBottomOfPipe DEFAULT`` (compute): every pending write becomes visible."""
        changed = self.pending()
        self.drained.clear()
        for u in self.undrained:
            u.clear()
        return changed

    def barrier(self, buf: int) -> bool:
        """A ``ResourceBarrier`` of ``buf`` to a front-end state: its writes become visible."""
        changed = self.drained.pop(buf, None) is not None
        for u in self.undrained:
            changed |= u.pop(buf, None) is not None
        return changed

    def apply(self, effect: tuple[str, int]) -> bool:
        """Apply a :func:`flush_effect` result."""
        kind, stage = effect
        if kind == "event":
            return self.event(stage)
        if kind == "l2":
            return self.l2()
        return self.bop()

    def missing(self, bufs: Iterable[int]) -> tuple[set[int], bool]:
        """``(classes needing a partial flush, whether any flush is needed)`` before a read of ``bufs``."""
        stages: set[int] = set()
        need = False
        for b in bufs:
            if b in self.drained:
                need = True
            for s in STAGES:
                if b in self.undrained[s]:
                    need = True
                    stages.add(s)
        if self.context == "compute":
            stages.clear()
        return stages, need

    def pending(self) -> bool:
        """Whether any recorded write is not yet visible."""
        return bool(self.drained) or any(bool(u) for u in self.undrained)

    def cover(self, stages: Iterable[int]) -> None:
        """Apply the sequence :func:`required_sequence` emits for ``stages``."""
        if self.context == "compute":
            self.bop()
            return
        for s in sorted(set(stages)):
            self.event(s)
        self.l2()
