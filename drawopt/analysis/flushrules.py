"""THE flush model: what a GPU write needs before the front end reads it, and what covers it.

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

Both consumers call this module: :func:`drawopt.validate.findings` reports what is
missing (``missing-flush``, through :func:`flush_needs`) and :mod:`drawopt.passes.flush`
inserts it (its planner runs :class:`FlushTracker`'s transitions). Nothing else
decides who writes, who reads, what a flush command does or when a write is visible.

**Events** (:func:`flush_access`, columnar). Writers and readers: the writes are THE
resource-access rule of :mod:`drawopt.analysis.access` -- a ``Dispatch`` with a compute
pipeline writes (stage class CS), a draw with a graphics pipeline writes from its
``uav_stage`` (VS for vs/gs/hs/ds, PS), the resources its pipeline declares in
``writes=`` plus every UAV reachable through the descriptor tables and root UAVs
bound when it runs; only buffers count. The front end reads the args buffer of
every indirect draw, the count buffer of the ``Auto`` variants, the bound index
buffer of an indexed draw and the explicit buffer of ``DrawIndexedX``; a buffer
declared ``frontend`` is also read at the end of the stream (by another list's front
end). Byte ranges are not compared: a write anywhere in a buffer reaches every
front-end read of it.

**Writer classes** (:data:`CLASS_NAMES`): ``cs`` (a graphics-context Dispatch drained
by the driver's automatic flush: only the L2 flush is needed), ``cs+partial`` (a
Dispatch under fast semantics or ``CSEnableAutomaticGpuFlush FALSE``), ``vs``, ``ps``
and ``async`` (any write on the async compute context).

**Transitions** (:class:`FlushTracker`; ``cext/_flush.pyx`` is its compiled twin). Per
buffer and writer class the latest pending write is *undrained* (its class's partial
flush has not run since), *drained* (waves done, data possibly still in L2) or
visible (no longer pending):

* ``GpuSendPipelinedEvent <S>_PARTIAL_FLUSH`` (graphics) drains the pending writes of
  stage class S issued before it, and only those;
* ``FlushGpuCacheRange DEFAULT_PFP`` (graphics) makes every *drained* write visible;
  undrained ones stay pending (the flush came too early for them);
* ``FlushGpuCachesBottomOfPipe DEFAULT`` (async compute) makes every pending write visible;
* ``ResourceBarrier`` of a buffer to ``INDIRECT_ARGUMENT`` or ``INDEX_BUFFER`` makes
  that buffer's pending writes visible (D3D12 semantics);
* other flush commands (``FlushGpuCacheRange DEFAULT`` or a bottom-of-pipe flush on
  graphics, a PFP flush or an event on async compute) do nothing here.

**What the model cannot know** is explicit, and each consumer resolves it in its own
safe direction (:class:`Doubt`). The spec's rule for commands drawopt does not model is
"rejected or treated as full barriers, never guessed": an ``Opaque`` command may do
anything, so neither "it flushed" nor "it did not" may be assumed. Unknown are:

* a pending write with an ``Opaque`` command after it: it *may* have been flushed
  (:meth:`Pending.unknown`);
* the automatic-flush setting from an ``Opaque`` command to the next
  ``CSEnableAutomaticGpuFlush``: a graphics Dispatch there *may* need its
  ``CS_PARTIAL_FLUSH`` (``FlushAccess.w_auto_unknown``);
* the index buffer after an ``Opaque`` command (the state tracker's *unknown*): the one
  bound before it *may* still be bound and read (``FlushAccess.r_certain`` False);
* a draw on the async compute context (that context runs only dispatches;
  ``draw-on-compute`` reports it): it *may* write (``FlushAccess.w_certain`` False).

:attr:`Doubt.LENIENT` (validate): a finding must be certain, so an unknown never gives
one -- the write counts as possibly flushed, the Dispatch as drained by the automatic
flush, the uncertain read and write as absent. :attr:`Doubt.STRICT` (the flush pass): a
flush must not rely on a guess, so every unknown is taken at its worst -- the write
stays pending, the Dispatch needs ``CS_PARTIAL_FLUSH``, the read and the write happen.
What an ``Opaque`` command itself writes or reads through the front end is the
business of the program that recorded it (drawopt keeps it verbatim and moves nothing
across it); the pass never drops a flush such a command could need.
"""

from __future__ import annotations

__all__ = [
    "CS", "VS", "PS", "STAGES", "STAGE_NAMES", "EVENT_STAGE", "STAGE_EVENT", "STAGE_OF_UAV",
    "READ_ARGS", "READ_COUNT", "READ_INDEX", "READ_KIND_NAMES",
    "K_CS", "K_CS_PARTIAL", "K_VS", "K_PS", "K_ASYNC", "CLASS_NAMES", "UNDRAINED", "DRAINED",
    "EFF_L2", "EFF_BOP", "Doubt",
    "FlushStep", "GRAPHICS_L2", "COMPUTE_BOP", "required_sequence", "needs_cs_partial", "writer_stage",
    "FlushAccess", "flush_access", "flush_effect", "flush_effects", "forward_fill", "last_access",
    "EV_READ", "EV_WRITE", "EV_BARRIER", "EV_USE", "EV_FLUSH", "EV_OPAQUE", "FlushEvents", "model_events",
    "FlushTracker", "Pending", "pending_reads", "FlushNeed", "flush_needs",
]

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.access import CS, PS, STAGE_NAMES, STAGE_OF_UAV, STAGES, VS, GpuWrites, gpu_writes, writer_stage
from drawopt.analysis.state import IB, Scan, scan
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig, View
from drawopt.ir.ops import (
    BARRIER_STATES,
    BY_NAME,
    COL_MULTI_ARGS,
    COL_PIPELINE,
    FLUSH_MODES,
    INDEXED_DRAW_OPS,
    INDIRECT_DRAW_OPS,
    PIPELINED_EVENTS,
    Cat,
    Op,
    shared_col,
)
from drawopt.ir.stream import Stream

STAGE_EVENT = {CS: "CS_PARTIAL_FLUSH", VS: "VS_PARTIAL_FLUSH", PS: "PS_PARTIAL_FLUSH"}
EVENT_STAGE = {v: k for k, v in STAGE_EVENT.items()}

READ_ARGS, READ_COUNT, READ_INDEX = 0, 1, 2
READ_KIND_NAMES = ("indirect args", "draw count", "index data")

K_CS, K_CS_PARTIAL, K_VS, K_PS, K_ASYNC = range(5)
"""Writer classes: a graphics Dispatch drained by the automatic flush, one that needs
``CS_PARTIAL_FLUSH``, VS/GS/HS/DS and PS writers, writes on the async compute context.
The class of a partial flush's stage ``s`` (:data:`CS`, :data:`VS`, :data:`PS`) is ``s + 1``."""
CLASS_NAMES = ("cs", "cs+partial", "vs", "ps", "async")
UNDRAINED, DRAINED = 2, 1
"""States of a pending write (a visible one is no longer pending)."""

EFF_L2, EFF_BOP = 3, 4
"""Flush effects (:func:`flush_effects`): 0-2 the partial flush of stage class 0-2 (graphics),
:data:`EFF_L2` ``FlushGpuCacheRange DEFAULT_PFP`` (graphics), :data:`EFF_BOP`
``FlushGpuCachesBottomOfPipe DEFAULT`` (async compute); -1 none of the seed's."""


class Doubt(enum.Enum):
    """How a consumer resolves what the model cannot know (module docstring)."""

    LENIENT = "lenient"
    """An unknown is taken at its best: validate (a finding must be certain)."""
    STRICT = "strict"
    """An unknown is taken at its worst: the flush pass (a flush must not rely on a guess)."""


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
# argument columns (drawopt.ir.ops), looked up once
_FLUSH_ARG = shared_col(("GpuSendPipelinedEvent", "event"), ("FlushGpuCacheRange", "mode"),
                        ("FlushGpuCachesBottomOfPipe", "mode"))
_AUTOFLUSH_ENABLE = Op.CSEnableAutomaticGpuFlush.col("enable")
_IB_BUF = Op.IASetIndexBuffer.col("buffer")
_DX_BUF = Op.DrawIndexedX.col("buffer")
_IND_ARGS = shared_col(("DrawInstancedIndirect", "args_buffer"), ("DrawIndexedInstancedIndirect", "args_buffer"))
_AUTO_ARGS, _AUTO_COUNT = (
    shared_col(("MultiDrawInstancedIndirectAuto", a), ("MultiDrawIndexedInstancedIndirectAuto", a))
    for a in ("args_buffer", "count_buffer"))
_BARRIER_RES, _BARRIER_AFTER = Op.ResourceBarrier.col("resource"), Op.ResourceBarrier.col("after")
_TABLE_INDEX, _TABLE_REF = (shared_col(("SetGraphicsRootDescriptorTable", a), ("SetComputeRootDescriptorTable", a))
                            for a in ("index", "table"))
_BOUND_BUF = shared_col(("SetGraphicsRootConstantBufferView", "buffer"),
                        ("SetGraphicsRootShaderResourceView", "buffer"), ("IASetVertexBuffers", "buffer"))
_COPY_RES = (Op.CopyBufferRegion.col("dst"), Op.CopyBufferRegion.col("src"))


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


def flush_effects(stream: Stream, cmds: np.ndarray) -> np.ndarray:
    """What each flush command of ``cmds`` does in the model (int8; see :data:`EFF_L2`).

    >>> import drawopt
    >>> s = drawopt.loads('''drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
    ... GpuSendPipelinedEvent PS_PARTIAL_FLUSH
    ... FlushGpuCacheRange DEFAULT_PFP
    ... FlushGpuCacheRange DEFAULT
    ... FlushGpuCachesBottomOfPipe DEFAULT''')
    >>> flush_effects(s, np.arange(4)).tolist()
    [2, 3, -1, -1]
    """
    cmds = np.asarray(cmds, np.int64)
    code, v = stream.op[cmds], stream.args[cmds, _FLUSH_ARG]
    out = np.full(cmds.size, -1, np.int8)
    if stream.header.context == "graphics":
        ev = code == _OP["GpuSendPipelinedEvent"]
        # PIPELINED_EVENTS is in stage-class order (CS, VS, PS)
        out[ev] = np.array([EVENT_STAGE[e] for e in PIPELINED_EVENTS], np.int8)[v[ev]]
        out[(code == _OP["FlushGpuCacheRange"]) & (v == _PFP)] = EFF_L2
    else:
        out[(code == _OP["FlushGpuCachesBottomOfPipe"]) & (v == _DEFAULT)] = EFF_BOP
    return out


def flush_effect(stream: Stream, i: int) -> tuple[str, int] | None:
    """What flush command ``i`` does in the model, or None if it meets no seed requirement.

    ``("event", stage)``: a partial flush on the graphics context; ``("l2", -1)``:
    ``FlushGpuCacheRange DEFAULT_PFP`` on the graphics context; ``("bop", -1)``:
    ``FlushGpuCachesBottomOfPipe DEFAULT`` on the compute context (:func:`flush_effects`).
    """
    e = int(flush_effects(stream, np.array([i]))[0])
    if e < 0:
        return None
    return ("l2", -1) if e == EFF_L2 else ("bop", -1) if e == EFF_BOP else ("event", e)


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
    """The model's events of one stream: GPU writes, front-end reads, barriers, flushes.

    Arrays are sorted by command index. Writes (one row per command and resource):
    ``w_cmd``, ``w_res`` (resource declaration index), ``w_stage`` (stage class),
    ``w_pipe`` (the writer's pipeline), ``w_partial`` (the write certainly needs its
    class's partial flush: always for VS/PS, for CS under fast semantics or a known
    ``CSEnableAutomaticGpuFlush FALSE``), ``w_auto_unknown`` (a graphics-context CS write
    while the automatic-flush setting is unknown, after an ``Opaque`` command),
    ``w_certain`` (False: a draw on the async compute context, which may not run),
    ``w_isbuf`` (the resource is a buffer). Front-end reads: ``r_cmd``, ``r_buf``,
    ``r_kind`` (:data:`READ_ARGS`, :data:`READ_COUNT`, :data:`READ_INDEX`), ``r_certain``
    (False: the index buffer is unknown there and ``r_buf`` is the one bound before the
    ``Opaque`` command that made it so). ``barriers``: ``(command, buffer)`` of every
    ``ResourceBarrier`` to ``INDIRECT_ARGUMENT`` / ``INDEX_BUFFER``. ``flush_cmd``: every
    flush command, ``flush_eff`` its :func:`flush_effects` code. ``opaque_cmd``: every
    ``Opaque`` command. ``frontend``: bool per declaration (plus one), buffers declared
    ``frontend``. ``context``: the stream's.
    """

    w_cmd: np.ndarray
    w_res: np.ndarray
    w_stage: np.ndarray
    w_pipe: np.ndarray
    w_partial: np.ndarray
    w_auto_unknown: np.ndarray
    w_certain: np.ndarray
    w_isbuf: np.ndarray
    r_cmd: np.ndarray
    r_buf: np.ndarray
    r_kind: np.ndarray
    r_certain: np.ndarray
    barriers: np.ndarray
    flush_cmd: np.ndarray
    flush_eff: np.ndarray
    opaque_cmd: np.ndarray
    frontend: np.ndarray
    context: str

    def partial(self, doubt: Doubt) -> np.ndarray:
        """Per write: it needs its class's partial flush (an unknown automatic-flush setting
        resolved by ``doubt``)."""
        return self.w_partial | self.w_auto_unknown if doubt is Doubt.STRICT else self.w_partial

    def write_mask(self, doubt: Doubt) -> np.ndarray:
        """Per write: a buffer write the model counts under ``doubt``."""
        return self.w_isbuf & self.w_certain if doubt is Doubt.LENIENT else self.w_isbuf.copy()

    def read_mask(self, doubt: Doubt) -> np.ndarray:
        """Per read: a read the model counts under ``doubt``."""
        return self.r_certain.copy() if doubt is Doubt.LENIENT else np.ones(self.r_cmd.size, bool)

    def classes(self, doubt: Doubt) -> np.ndarray:
        """Per write: its writer class (:data:`K_CS` ... :data:`K_ASYNC`) under ``doubt``."""
        if self.context == "compute":
            return np.full(self.w_cmd.size, K_ASYNC, np.int64)
        k = self.w_stage.astype(np.int64) + 1  # the class of a partial flush's stage
        k[(self.w_stage == CS) & ~self.partial(doubt)] = K_CS
        return k


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
    return forward_fill(len(stream), pso, stream.args[pso, COL_PIPELINE])


def _observer(sc: Scan, cmds: np.ndarray) -> np.ndarray:
    """Observer index (row of ``sc.setter``) of each draw or dispatch command of ``cmds``."""
    m = sc.obs.size - int(sc.obs.size > 0 and sc.obs[-1] < 0)  # a bundle's end row (-1) comes last
    return np.searchsorted(sc.obs[:m], cmds)


def flush_access(stream: Stream, sc: Scan | None = None, writes: GpuWrites | None = None) -> FlushAccess:
    """The model's events of ``stream`` (see :class:`FlushAccess`). Vectorised.

    The writes are :func:`drawopt.analysis.access.gpu_writes` (``writes``, if known); the
    index buffer in force is the state tracker's (``sc``: the stream's
    :func:`drawopt.analysis.state.scan`, if known).

    >>> import drawopt
    >>> s = drawopt.loads('''drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
    ... buffer args size=64
    ... rootsig r constants(1)
    ... pipeline cull cs=c root=r writes=args
    ... pipeline draw vs=v ps=p root=r
    ... Opaque Something
    ... SetComputeRootSignature r
    ... SetPipelineState cull
    ... Dispatch 1 1 1
    ... SetPipelineState draw
    ... DrawInstancedIndirect args 0''')
    >>> acc = flush_access(s)
    >>> acc.w_cmd.tolist(), acc.w_partial.tolist(), acc.w_auto_unknown.tolist(), acc.r_cmd.tolist()
    ([3], [False], [True], [5])
    """
    n = len(stream)
    decls = stream.decls
    op, args = stream.op, stream.args
    if sc is None:
        sc = scan(stream)
    cats = stream.cats() if n else np.zeros(0, np.uint8)
    graphics = stream.header.context == "graphics"
    fast = bool(stream.header.fast_semantics)
    is_buf = np.array([isinstance(d, Buffer) for d in decls.items] + [False], bool)
    frontend = np.array([isinstance(d, Buffer) and d.frontend for d in decls.items] + [False], bool)
    opq = np.flatnonzero(op == _OP["Opaque"])

    # ---- UAV writes: THE rule of drawopt.analysis.access (declared writes= plus the UAVs reachable
    # through the tables and root views bound when each draw / dispatch runs)
    gw = writes if writes is not None else gpu_writes(stream, sc)
    w_cmd, w_res, w_stage = gw.cmd, gw.res, gw.stage
    # CSEnableAutomaticGpuFlush in force at each write: 1 on, 0 off, -1 unknown (after an Opaque command)
    en = np.flatnonzero(op == _OP["CSEnableAutomaticGpuFlush"])
    where = np.concatenate([en, opq])
    vals = np.concatenate([args[en, _AUTOFLUSH_ENABLE], np.full(opq.size, -1, np.int64)])
    order = np.argsort(where, kind="stable")
    auto = forward_fill(n, where[order], vals[order], int(stream.header.auto_gpu_flush))[w_cmd]
    cs = w_stage == CS
    w_partial = ~cs | fast | (auto == 0)
    w_auto_unknown = cs & ~w_partial & (auto == -1) & graphics
    # a draw cannot run on the async compute context (draw-on-compute): whether it writes is unknown
    w_certain = cs | graphics

    # ---- front-end reads
    indirect = np.isin(op, np.array(sorted(INDIRECT_DRAW_OPS), np.uint16))
    autos = (op == _OP["MultiDrawInstancedIndirectAuto"]) | (op == _OP["MultiDrawIndexedInstancedIndirectAuto"])
    indexed = np.isin(op, np.array(sorted(INDEXED_DRAW_OPS), np.uint16))
    dx = op == _OP["DrawIndexedX"]
    # the index buffer that may be bound: the last IASetIndexBuffer, none after a DrawIndexedX (an Opaque
    # command makes it unknown: the state tracker says whether it is known, below)
    ia = np.flatnonzero(op == _OP["IASetIndexBuffer"])
    ib_events = np.concatenate([ia, np.flatnonzero(dx)])
    ib_vals = np.concatenate([args[ia, _IB_BUF], np.full(int(dx.sum()), -1, np.int64)])
    order = np.argsort(ib_events, kind="stable")
    ib_at = forward_fill(n, ib_events[order], ib_vals[order])

    single_multi = np.flatnonzero(indirect & ~autos)
    a = np.flatnonzero(autos)
    ix = np.flatnonzero(indexed)
    ix = ix[ib_at[ix] >= 0]
    # known (the state tracker's), not after an Opaque command; without one, every binding found is known
    ix_known = sc.setter[_observer(sc, ix), IB] >= 0 if opq.size else np.ones(ix.size, bool)
    x = np.flatnonzero(dx)
    col = np.where(np.isin(op[single_multi], _MULTI_PLAIN), COL_MULTI_ARGS, _IND_ARGS)
    r_cmd = np.concatenate([single_multi, a, a, ix, x]).astype(np.int64)
    r_buf = np.concatenate([args[single_multi, col], args[a, _AUTO_ARGS], args[a, _AUTO_COUNT], ib_at[ix],
                            args[x, _DX_BUF]]).astype(np.int64)
    r_kind = np.concatenate([np.full(single_multi.size + a.size, READ_ARGS), np.full(a.size, READ_COUNT),
                             np.full(ix.size + x.size, READ_INDEX)]).astype(np.int8)
    r_certain = np.concatenate([np.ones(single_multi.size + 2 * a.size, bool), ix_known, np.ones(x.size, bool)])
    order = np.lexsort((r_kind, r_cmd))

    bar = np.flatnonzero((op == _OP["ResourceBarrier"]) & np.isin(args[:, _BARRIER_AFTER], _FRONTEND_STATES))
    barriers = np.stack([bar, args[bar, _BARRIER_RES]], axis=1) if bar.size else np.zeros((0, 2), np.int64)
    flush = np.flatnonzero(cats == int(Cat.FLUSH)) if n else np.zeros(0, np.int64)
    return FlushAccess(w_cmd, w_res, w_stage, gw.pipe, np.asarray(w_partial, bool), np.asarray(w_auto_unknown, bool),
                       np.asarray(w_certain, bool), is_buf[w_res],
                       r_cmd[order], r_buf[order], r_kind[order], r_certain[order], barriers, flush,
                       flush_effects(stream, flush), opq, frontend, stream.header.context)


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
    for name in ("SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView", "IASetVertexBuffers"):
        sel = np.flatnonzero(op == _OP[name])
        for r in np.unique(args[sel, _BOUND_BUF]).tolist():
            bump(int(r), n)
    for i in np.flatnonzero(op == _OP["OMSetRenderTargets"]).tolist():
        for r in stream.var(i).tolist():
            bump(int(r), n)
    cp = np.flatnonzero(op == _OP["CopyBufferRegion"])
    for cidx in _COPY_RES:
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
            at = sets[args[sets, _TABLE_INDEX] == k]
            where = np.concatenate([at, heaps])
            vals = np.concatenate([args[at, _TABLE_REF], np.full(heaps.size, -1, np.int64)])
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
EV_READ, EV_WRITE, EV_BARRIER, EV_USE, EV_FLUSH, EV_OPAQUE = range(6)
"""Event kinds, in their order at one command: front-end reads (a draw reads its args before
its shaders run), writes, barriers, UAV uses (the flush pass's redundancy bookkeeping),
flushes, ``Opaque`` commands."""


@dataclass(frozen=True)
class FlushEvents:
    """The model's input, in stream order (sorted by command, kind, row).

    ``kind`` (:data:`EV_READ` ...) and two operands: a read ``(buffer, row)`` (``row``: the
    caller's index of the read), a write ``(buffer, writer class)``, a barrier ``(buffer, 0)``,
    a UAV use ``(stage class, last later access)``, a flush ``(effect, 0)``
    (:func:`flush_effects`), an ``Opaque`` command ``(0, 0)``."""

    cmd: np.ndarray
    kind: np.ndarray
    a: np.ndarray
    b: np.ndarray

    def __len__(self) -> int:
        return int(self.cmd.size)


def model_events(reads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 writes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 barriers: tuple[np.ndarray, np.ndarray] | None = None,
                 uses: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 flushes: tuple[np.ndarray, np.ndarray] | None = None,
                 opaques: np.ndarray | None = None) -> FlushEvents:
    """Merge the event columns into :class:`FlushEvents` (one stable sort).

    ``reads``: ``(cmd, buffer, row)``; ``writes``: ``(cmd, buffer, class)``; ``barriers``:
    ``(cmd, buffer)``; ``uses``: ``(cmd, stage class, last later access)``; ``flushes``:
    ``(cmd, effect)`` (effects < 0 are left out); ``opaques``: commands."""
    z = np.zeros(0, np.int64)
    parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    if reads is not None:
        parts.append((EV_READ, *reads))
    if writes is not None:
        parts.append((EV_WRITE, *writes))
    if barriers is not None:
        parts.append((EV_BARRIER, barriers[0], barriers[1], np.zeros(np.size(barriers[0]), np.int64)))
    if uses is not None:
        parts.append((EV_USE, *uses))
    if flushes is not None:
        ok = np.asarray(flushes[1]) >= 0
        fc, fe = np.asarray(flushes[0])[ok], np.asarray(flushes[1])[ok]
        parts.append((EV_FLUSH, fc, fe, np.zeros(fc.size, np.int64)))
    if opaques is not None:
        parts.append((EV_OPAQUE, opaques, np.zeros(np.size(opaques), np.int64), np.zeros(np.size(opaques), np.int64)))
    if not parts:
        return FlushEvents(z, z.copy(), z.copy(), z.copy())
    cmd = np.concatenate([np.asarray(p[1], np.int64) for p in parts])
    kind = np.concatenate([np.full(np.size(p[1]), p[0], np.int64) for p in parts])
    a = np.concatenate([np.asarray(p[2], np.int64) for p in parts])
    b = np.concatenate([np.asarray(p[3], np.int64) for p in parts])
    seq = np.arange(cmd.size, dtype=np.int64)
    order = np.lexsort((seq, kind, cmd))
    return FlushEvents(cmd[order], kind[order], a[order], b[order])


class FlushTracker:
    """The transitions of the model (module docstring), one event at a time.

    Per writer class and buffer: the latest pending write, undrained or drained. Record
    writes with :meth:`add` (or :meth:`write`); apply flush commands with :meth:`event`,
    :meth:`l2`, :meth:`bop` (or :meth:`apply` on a :func:`flush_effects` code), barriers
    with :meth:`barrier` and ``Opaque`` commands with :meth:`opaque`. Each flush returns
    whether it made progress on some recorded write (False: it covered nothing the
    caller recorded). :meth:`missing` says what a read of some buffers still needs,
    :meth:`pending_of` which writes it finds pending. This is the model's pure-Python
    form; ``drawopt._flush`` (``cext/_flush.pyx``) is its compiled twin.

    >>> tr = FlushTracker()
    >>> tr.write(0, 7, VS, True)
    >>> tr.missing([7])
    ({1}, True)
    >>> tr.l2(), tr.event(VS), tr.l2(), tr.missing([7])
    (False, True, True, (set(), False))
    """

    def __init__(self, context: str = "graphics") -> None:
        self.context = context
        self.und: list[dict[int, int]] = [{} for _ in CLASS_NAMES]
        """Per class: buffer -> its latest write, undrained."""
        self.dra: list[dict[int, int]] = [{} for _ in CLASS_NAMES]
        """Per class: buffer -> its latest write, drained and not yet visible."""
        self.drained: dict[int, int] = {}
        """Buffers with some drained write not yet visible (an L2 flush makes progress on them)."""
        self.last_opaque = -1

    def add(self, cmd: int, buf: int, klass: int) -> None:
        """Record that command ``cmd`` writes buffer ``buf`` as writer class ``klass``."""
        if klass == K_CS:  # drained by the driver's automatic flush when issued
            self.dra[klass][buf] = cmd
            self.drained.setdefault(buf, cmd)
        else:
            self.und[klass][buf] = cmd
            self.dra[klass].pop(buf, None)

    def write(self, cmd: int, buf: int, stage: int, partial: bool) -> None:
        """Record that command ``cmd`` writes buffer ``buf`` from ``stage`` (``partial``: it
        needs its class's partial flush)."""
        if self.context == "compute":
            self.add(cmd, buf, K_ASYNC)
        else:
            self.add(cmd, buf, stage + 1 if partial or stage != CS else K_CS)

    def event(self, stage: int) -> bool:
        """A ``<stage>_PARTIAL_FLUSH`` (graphics): drains that class's pending writes."""
        k = stage + 1
        u = self.und[k]
        if not u:
            return False
        for b, c in u.items():
            self.dra[k][b] = c
            self.drained.setdefault(b, c)
        u.clear()
        return True

    def l2(self) -> bool:
        """``FlushGpuCacheRange DEFAULT_PFP`` (graphics): drained writes become visible."""
        if not self.drained:
            return False
        self.drained.clear()
        for d in self.dra:
            d.clear()
        return True

    def bop(self) -> bool:
        """``FlushGpuCachesBottomOfPipe DEFAULT`` (compute): every pending write becomes visible."""
        changed = self.pending()
        self.drained.clear()
        for d in (*self.und, *self.dra):
            d.clear()
        return changed

    def barrier(self, buf: int) -> bool:
        """A ``ResourceBarrier`` of ``buf`` to a front-end state: its writes become visible."""
        changed = self.drained.pop(buf, None) is not None
        for u, d in zip(self.und, self.dra):
            changed |= u.pop(buf, None) is not None
            d.pop(buf, None)
        return changed

    def opaque(self, cmd: int) -> None:
        """An ``Opaque`` command: what was pending before it may have been flushed (:meth:`pending_of`)."""
        self.last_opaque = cmd

    def apply(self, effect: int | tuple[str, int]) -> bool:
        """Apply a :func:`flush_effects` code (or a :func:`flush_effect` result)."""
        if isinstance(effect, tuple):
            kind, stage = effect
            effect = stage if kind == "event" else EFF_L2 if kind == "l2" else EFF_BOP
        if effect == EFF_L2:
            return self.l2()
        if effect == EFF_BOP:
            return self.bop()
        return self.event(effect)

    def missing(self, bufs: Iterable[int]) -> tuple[set[int], bool]:
        """``(stage classes needing a partial flush, whether any flush is needed)`` before a read of ``bufs``."""
        stages: set[int] = set()
        need = False
        for b in bufs:
            if b in self.drained:
                need = True
            for k in (K_ASYNC,) if self.context == "compute" else (K_CS_PARTIAL, K_VS, K_PS):
                if b in self.und[k]:
                    need = True
                    stages.add(k - 1)
        if self.context == "compute":
            stages.clear()
        return stages, need

    def undrained(self, stage: int) -> list[int]:
        """The buffers with an undrained write of ``stage``'s class."""
        return list(self.und[stage + 1])

    def pending_of(self, buf: int) -> list[tuple[int, int, int, bool]]:
        """``(class, latest write, UNDRAINED or DRAINED, unknown)`` for each writer class with a
        pending write of ``buf``, in class order; ``unknown``: an ``Opaque`` command came after
        that write (it may have flushed it)."""
        out = []
        for k in range(len(CLASS_NAMES)):
            w = self.und[k].get(buf)
            st = UNDRAINED
            if w is None:
                w, st = self.dra[k].get(buf), DRAINED
            if w is not None:
                out.append((k, w, st, self.last_opaque > w))
        return out

    def pending(self) -> bool:
        """Whether any recorded write is not yet visible."""
        return bool(self.drained) or any(bool(u) for u in self.und)

    def cover(self, stages: Iterable[int]) -> None:
        """Apply the sequence :func:`required_sequence` emits for ``stages``."""
        if self.context == "compute":
            self.bop()
            return
        for s in sorted(set(stages)):
            self.event(s)
        self.l2()


@dataclass(frozen=True)
class Pending:
    """Pending writes the model finds at front-end reads, one row per (read, writer class).

    ``row``: the read's row in the caller's reads (-1: the end of the stream, for a
    ``frontend`` buffer); ``buf``; ``klass``; ``writer``: the latest write of that class to
    the buffer before the read; ``state``: :data:`UNDRAINED` or :data:`DRAINED`;
    ``unknown``: an ``Opaque`` command came after the write (it may have flushed it:
    :class:`Doubt` decides). Sorted by read, then class (end rows last, by buffer)."""

    row: np.ndarray
    buf: np.ndarray
    klass: np.ndarray
    writer: np.ndarray
    state: np.ndarray
    unknown: np.ndarray


def _pending_py(ev: FlushEvents, nbuf: int, graphics: bool, frontend: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pure-Python twin of ``drawopt._flush.pending`` (identical results)."""
    tr = FlushTracker("graphics" if graphics else "compute")
    rows: list[tuple[int, int, int, int, int, bool]] = []
    for c, kind, a, b in zip(ev.cmd.tolist(), ev.kind.tolist(), ev.a.tolist(), ev.b.tolist()):
        if kind == EV_READ:
            rows.extend((b, a, k, w, st, u) for k, w, st, u in tr.pending_of(a))
        elif kind == EV_WRITE:
            tr.add(c, a, b)
        elif kind == EV_BARRIER:
            tr.barrier(a)
        elif kind == EV_FLUSH:
            tr.apply(a)
        elif kind == EV_OPAQUE:
            tr.opaque(c)
    for buf in np.flatnonzero(frontend[:nbuf]).tolist():
        rows.extend((-1, buf, k, w, st, u) for k, w, st, u in tr.pending_of(buf))
    cols = np.array(rows, np.int64).reshape(-1, 6).T
    return cols[0], cols[1], cols[2], cols[3], cols[4], cols[5].astype(bool)


def pending_reads(ev: FlushEvents, nbuf: int, context: str, frontend: np.ndarray,
                  pure: bool | None = None) -> Pending:
    """Run the model over ``ev``: the pending writes at every read (and, for ``frontend``
    buffers, at the end of the stream). ``nbuf``: buffer indices are below it;
    ``frontend``: bool per buffer index. Compiled (``drawopt._flush``) unless ``pure``."""
    mod = load_cext("_flush", pure)
    fe = np.ascontiguousarray(frontend[:nbuf], np.uint8)
    graphics = context == "graphics"
    if mod is None:
        return Pending(*_pending_py(ev, nbuf, graphics, fe))
    cols = mod.pending(ev.cmd, ev.kind, ev.a, ev.b, nbuf, graphics, fe)
    return Pending(*cols[:5], cols[5].astype(bool))


# --------------------------------------------------------------------------- findings' view
@dataclass(frozen=True)
class FlushNeed:
    """A front-end read (or, for a ``frontend`` buffer, a stream end) missing flushes.

    ``reader``: command index of the read (-1: the end of the stream);
    ``writer``: the writing command; ``buffer``: its name; ``what``: ``args``,
    ``count``, ``index data`` or ``frontend``; ``stage``: the writer's stage and
    class: ``cs``, ``cs+partial`` (a CS_PARTIAL_FLUSH is needed), ``vs``, ``gs``,
    ``hs``, ``ds``, ``ps`` or ``async``; ``missing``: the commands to insert, in order, as
    ``(command name, argument)``; ``before``: where the last one must go (a command
    index, before which it must be inserted; ``len(stream)`` for the end).
    """

    reader: int
    writer: int
    buffer: str
    what: str
    stage: str
    missing: tuple[tuple[str, str], ...]
    before: int


_WHAT = ("args", "count", "index data")


def flush_needs(stream: Stream, acc: FlushAccess, doubt: Doubt = Doubt.LENIENT,
                pure: bool | None = None) -> list[FlushNeed]:
    """Every front-end read of GPU-written data that lacks the flushes its writer needs.

    What the model finds pending under ``doubt`` (validate's ``missing-flush`` rule uses
    :attr:`Doubt.LENIENT`: no finding on an unknown), per read and writer class the
    latest write, with what is missing and where it must go: a partial flush and the L2
    flush after it before the read, or only the partial flush before an L2 flush that
    came too early, or only the L2 flush; on async compute a bottom-of-pipe flush right
    after the write. A ``frontend`` buffer's write needs its sequence before the end of
    the stream unless a front-end read of the stream follows it (that read needs the
    same sequence). In reader order (the end last), then writer.
    """
    n = len(stream)
    wm = acc.write_mask(doubt)
    if not wm.any():
        return []
    decls = stream.decls
    wc, wb, wk = acc.w_cmd[wm], acc.w_res[wm], acc.classes(doubt)[wm]
    written = np.zeros(len(decls) + 1, bool)
    written[wb] = True
    rsel = np.flatnonzero(acc.read_mask(doubt) & written[acc.r_buf])
    rc, rb = acc.r_cmd[rsel], acc.r_buf[rsel]
    bar = acc.barriers
    bsel = written[bar[:, 1]]
    ev = model_events(reads=(rc, rb, np.arange(rc.size)), writes=(wc, wb, wk), barriers=(bar[bsel, 0], bar[bsel, 1]),
                      flushes=(acc.flush_cmd, acc.flush_eff), opaques=acc.opaque_cmd)
    fe = acc.frontend & written
    p = pending_reads(ev, len(decls) + 1, acc.context, fe, pure)
    keep = ~p.unknown if doubt is Doubt.LENIENT else np.ones(p.row.size, bool)
    end = p.row < 0
    if end.any():
        # the end of the list needs a write flushed only when no front-end read of this stream
        # follows it (that read needs the same sequence, and is reported if it lacks it)
        big = n + 1
        key = np.sort(rb * big + rc)
        k = np.searchsorted(key, p.buf * big + p.writer, side="right")
        nxt = key[np.minimum(k, max(key.size - 1, 0))] if key.size else np.full(k.size, -1)
        keep &= ~(end & (k < key.size) & (nxt // big == p.buf))
    sel = np.flatnonzero(keep)
    row, buf, klass, w, state = p.row[sel], p.buf[sel], p.klass[sel], p.writer[sel], p.state[sel]
    r = np.where(row >= 0, rc[np.maximum(row, 0)] if rc.size else n, n)
    what = np.where(row >= 0, acc.r_kind[rsel][np.maximum(row, 0)] if rc.size else 3, 3)

    # what is missing, and where it must go
    l2 = acc.flush_cmd[acc.flush_eff == EFF_L2]
    k = np.searchsorted(l2, w, side="right")
    l2_after = np.where(k < l2.size, l2[np.minimum(k, max(l2.size - 1, 0))] if l2.size else n + 1, n + 1)
    partial = (klass == K_CS_PARTIAL) | (klass == K_VS) | (klass == K_PS)
    undrained = partial & (state == UNDRAINED)
    early = undrained & (l2_after < r)  # an L2 flush came too early: only the partial flush is missing
    before = np.where(klass == K_ASYNC, np.minimum(w + 1, r), np.where(early, l2_after, r))
    pipe_stage = np.array([(d.uav_stage or "ps") if isinstance(d, Pipeline) else "" for d in decls.items] + [""],
                          object)
    wpipe = np.full(n + 1, len(decls), np.int64)
    wpipe[acc.w_cmd] = acc.w_pipe
    gfx_stage = pipe_stage[wpipe[w]]
    names = [d.name for d in decls.items]
    l2_item = ("FlushGpuCacheRange", "DEFAULT_PFP")
    out = []
    for j, (rj, wj, bj, wh, kj, und, ea, bf) in enumerate(zip(
            r.tolist(), w.tolist(), buf.tolist(), what.tolist(), klass.tolist(), undrained.tolist(), early.tolist(),
            before.tolist())):
        if kj == K_ASYNC:
            items: tuple[tuple[str, str], ...] = (("FlushGpuCachesBottomOfPipe", "DEFAULT"),)
        elif und:
            items = (("GpuSendPipelinedEvent", STAGE_EVENT[kj - 1]),) if ea else \
                (("GpuSendPipelinedEvent", STAGE_EVENT[kj - 1]), l2_item)
        else:
            items = (l2_item,)
        stage = gfx_stage[j] if kj in (K_VS, K_PS) else CLASS_NAMES[kj]
        out.append(FlushNeed(rj if rj < n else -1, wj, names[bj], _WHAT[wh] if wh < 3 else "frontend", stage,
                             items, bf))
    order = sorted(range(len(out)), key=lambda j: (int(r[j]), out[j].writer, out[j].what, int(buf[j])))
    return [out[j] for j in order]


