"""``mdi``: multi-draw-indirect batches.

multidraw-indirect-and-flushes.txt: ``MultiDraw[Indexed]InstancedIndirect`` with
count N, offset O and stride S is N single indirect draws reading their
arguments at ``O + i*S``; group draws by material. The pass does four things,
none of which moves a draw across anything but state commands:

1. **Batches of direct draws.** A *run* is a maximal sequence of draws with the
   same normalised state id (:func:`drawopt.analysis.state.track`) and the same kind
   (``DrawInstanced`` or ``DrawIndexedInstanced``), with only state commands
   between consecutive members. A run becomes ``MultiDraw[Indexed]InstancedIndirect
   N mdi_argsK O S`` at the position of its first draw, reading N records the
   pass writes into one generated, CPU-written args buffer (``mdi_args0``, or the
   first free ``mdi_argsK``): ``D3D12_DRAW_ARGUMENTS`` (VertexCountPerInstance,
   InstanceCount, StartVertexLocation, StartInstanceLocation: 16 bytes) or
   ``D3D12_DRAW_INDEXED_ARGUMENTS`` (IndexCountPerInstance, InstanceCount,
   StartIndexLocation, BaseVertexLocation as a two's-complement 32-bit word,
   StartInstanceLocation: 20 bytes), tightly packed (stride = record size), every
   batch at a 4-byte-aligned offset. The state commands between the draws stay
   where they were: every draw of the run sees the same state, so the one call
   sees it too, and whatever follows the run sees what it saw before.
2. **Per-draw data under a ``draw_data`` / ``instance_data`` contract.** Such a
   pipeline (docs/architecture.md, "Rewrite contracts") promises that, when a buffer
   is bound at root parameter P, instance i of a draw reads the record at index
   ``StartInstanceLocation + i`` of it: ``2 + len(lift)`` 32-bit words holding the
   base vertex, the instance the shader sees, then each lift item (``Q.k``: word k of
   root constants Q; ``Q`` / ``Q.0`` of a descriptor table: its heap slot, bindless
   access; word k of a root view's byte offset) -- instead of reading those from the
   draw and the root arguments. A pipeline that also declares ``x`` reads through
   ``x`` only in ``DrawIndexedX`` calls (pack-x's); every draw this pass touches reads
   through the array clause. On an input-layout pipeline the clause also promises
   that the record index is its only StartInstanceLocation-dependent input (the
   engine's per-draw id stream), so renumbering StartInstanceLocation is allowed there
   as with vertex pulling.

   *Lifted runs.* Direct draws of such a pipeline that see nothing bound at P and
   differ only in lifted values form one run (a lifted table must stay in one heap, a
   lifted root view on one buffer, the other words of a lifted parameter equal);
   every batch of a lifted run is a multi-draw call whose args records carry, as
   StartInstanceLocation, the index of each draw's first record in its stretch's
   array (below). The root argument sets stay in place; a draw reading its record from
   a bound array does not observe the lifted words (:mod:`drawopt.analysis.state` masks them),
   so the final ``dedupe-state`` removes the sets no other draw reads.

   *One array per stretch.* Nothing can unbind a root view, so a generated binding
   stays visible to every later *reader* of P -- a draw whose pipeline reads P as
   state or names it in a per-draw clause (``DrawIndexedX`` calls of a pipeline whose
   ``x`` clause does not name P excepted) -- until P is *redefined* (set again, the
   root signature changes, an ``Opaque`` command). Per *stretch* between two
   redefinitions of P, every reader after the first lifted draw must read exactly
   what it read before from that array. Readers that can:

   - members of lifted runs (their args records are renumbered);
   - a single direct draw of a pipeline whose array clause names P (it reads its lift
     items natively): its StartInstanceLocation argument is **renumbered** to its
     first record (the clause allows it on vertex-pulling and on input-layout
     pipelines, see docs/architecture.md), one record per instance (base vertex,
     the original StartInstanceLocation + i, its lift values);
   - a *pinned* such draw (``@nomerge``, ``never_merge``) keeps its command: its
     records are put at its own StartInstanceLocation + i of the array (zeros before
     them; at most :data:`MAX_RESTORE_RECORDS`), in the open section if the layout has
     not passed that index yet, else in a new section bound right before it (a
     *restoring* binding).

   Any other reader (a pipeline reading P as ordinary state, an indirect draw,
   undefined lift values) *blocks*. A stretch's *zone* starts at its first reader
   after its last blocking one, provided a run worth lifting (at least the batch
   minimum, lifted values not all equal) follows; from there to the end of the
   stretch every run of two or more draws is lifted and every single draw renumbered
   (a renumbered draw costs nothing; a one-draw multi-draw call would). A reader thus
   cancels only the zone of its own stretch.

   The zone's readers, in command order, get consecutive records of one generated
   array *section* (``mdi_perdrawK``; a section starts 16-byte aligned, 256 for a root
   CBV), bound once with ``SetGraphicsRootShaderResourceView P``
   (``...ConstantBufferView`` for a CBV parameter) right before its first reader.
   Pipelines with different lift lists have different record strides S: a reader's
   records start at the first multiple of S not yet used, so that index
   ``StartInstanceLocation + i`` addresses them. A section holds at most what one
   binding addresses -- a root CBV 64 KiB (:data:`CBV_MAX_BYTES`; a lifted batch that
   needs more is split), a root SRV :data:`MAX_SECTION_RECORDS` records -- and a new
   section (one more bind) starts where the next reader does not fit.

   Draws that already see a buffer at P keep their StartInstanceLocation and so read
   the same records: they merge as they are, lifted words may differ. Bundles are not
   lifted (their final bindings are the caller's state).
3. **Consecutive indirect draws.** Consecutive same-state indirect draws of one
   kind (indexed or not) reading one args buffer at offsets ``O, O+S, O+2S, ...``
   (single ``Draw[Indexed]InstancedIndirect`` calls, or plain ``MultiDraw`` calls
   whose own stride is S and that continue the progression) become one
   ``MultiDraw[Indexed]InstancedIndirect`` with count N, offset O and stride S.
   This covers GPU-written args: the records are not read, only their addresses
   are kept. S must be a multiple of 4 and at least the record size.
4. ``...Auto`` variants keep their GPU-written count: they are never merged with
   anything and never turned into fixed-count calls (nor the reverse).

Limits and cost: a batch never exceeds ``max_count`` (the target's
``mdi_max_count`` unless the option is smaller); a longer run is split into
consecutive batches of ``max_count`` and a remainder. A run of direct draws is
batched only if it has at least ``max(min_batch, costmodel.mdi_min_batch(target))``
draws, the size from which one multi-draw call plus its CPU-written records costs
less than the separate draws; a remainder below that stays direct (except in
lifted runs, see 2). Indirect merges are made when the merged call costs less than
the calls it replaces (:func:`drawopt.analysis.costmodel.cost_by_command`). Targets without
multi-draw-indirect are left alone.

Never merged: draws flagged ``nomerge``, draws of pipelines whose contract says
``never_merge``, ``DrawIndexedX`` (pack-x's business), the ``Auto`` variants,
zero-count multi-draws. Without such a contract, draws whose root
constants differ have different state ids and stay apart.

Implementation: columnar throughout (no Python object per draw or per command; the
plan is arrays, :class:`MdiPlan`). The three sequential loops -- greedy record groups,
progressions of indirect draws, the per-draw array's section layout -- and the hottest
per-draw gathers -- the state columns that vary, the key rows of draws under a per-draw
contract and their lifted root-constant words, the per-run facts of the lift decision,
the per-instance records of the per-draw array -- run in the Cython kernel
``drawopt._mdi`` (``cext/_mdi.pyx``); their pure-Python twins (``_greedy_py``,
``_indirect_groups_py``, ``_layout_py``, ``_varying_columns_py``, ``_key_rows_py``,
``_chain_words_py``, ``_run_facts_py``, ``_perdraw_records_py``; ``DRAWOPT_PURE=1``) give
identical results and the tests (tests/test_mdi.py, tests/test_mdi_kernels.py) compare
the two.
"""

from __future__ import annotations

__all__ = ["MdiPass", "MdiPlan", "plan_mdi", "args_records", "DrawDataContract", "draw_data_contracts"]

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.access import gpu_writes
from drawopt.analysis.costmodel import TargetModel, cost_by_command, get_target, mdi_min_batch
from drawopt.analysis.flushrules import forward_fill
from drawopt.analysis.mergeclass import fence_mask
from drawopt.analysis.state import MASKED, NSLOTS, OBS_DRAW, ROOT0, UNDEFINED, StateTable, intern_rows
from drawopt.ir.arrayset import isin, unique
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig
from drawopt.ir.ops import BY_NAME, COL_INSTANCES, COL_MULTI_ARGS, COL_PIPELINE, Op, shared_col
from drawopt.ir.stream import ARGS_SIZE, FLAG_NOMERGE, Stream, splice
from drawopt.passmanager import AnalysisManager, Pass, PassResult, option

_DI = BY_NAME["DrawInstanced"].code
_DII = BY_NAME["DrawIndexedInstanced"].code
_I = BY_NAME["DrawInstancedIndirect"].code
_II = BY_NAME["DrawIndexedInstancedIndirect"].code
_M = BY_NAME["MultiDrawInstancedIndirect"].code
_MI = BY_NAME["MultiDrawIndexedInstancedIndirect"].code
_SRV = BY_NAME["SetGraphicsRootShaderResourceView"].code
_CBV = BY_NAME["SetGraphicsRootConstantBufferView"].code
_IS_P_SET = np.zeros(1 << 16, bool)   # by opcode: sets a graphics root argument
_IS_P_SET[[BY_NAME[n].code for n in (
    "SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants", "SetGraphicsRootConstantBufferView",
    "SetGraphicsRootShaderResourceView")]] = True
_GRS = BY_NAME["SetGraphicsRootSignature"].code
_OPAQUE = BY_NAME["Opaque"].code
_COPY = BY_NAME["CopyBufferRegion"].code
_DX = BY_NAME["DrawIndexedX"].code
_M32 = 0xFFFFFFFF

# argument columns (drawopt.ir.ops), looked up once
_DI_SI = Op.DrawInstanced.col("start_instance")
_DII_SI = Op.DrawIndexedInstanced.col("start_instance")
_DII_BV = Op.DrawIndexedInstanced.col("base_vertex")
_IND_ARGS = shared_col(("DrawInstancedIndirect", "args_buffer"), ("DrawIndexedInstancedIndirect", "args_buffer"))
_IND_OFF = shared_col(("DrawInstancedIndirect", "offset"), ("DrawIndexedInstancedIndirect", "offset"))
_MULTI_COUNT = shared_col(("MultiDrawInstancedIndirect", "count"), ("MultiDrawIndexedInstancedIndirect", "count"))
_MULTI_OFF = shared_col(("MultiDrawInstancedIndirect", "offset"), ("MultiDrawIndexedInstancedIndirect", "offset"))
_MULTI_STRIDE = shared_col(("MultiDrawInstancedIndirect", "stride"), ("MultiDrawIndexedInstancedIndirect", "stride"))
_P_INDEX = shared_col(*((n, "index") for n in (
    "SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants", "SetGraphicsRootConstantBufferView",
    "SetGraphicsRootShaderResourceView")))
_TABLE_REF = Op.SetGraphicsRootDescriptorTable.col("table")
_VIEW_BUF = shared_col(("SetGraphicsRootConstantBufferView", "buffer"), ("SetGraphicsRootShaderResourceView", "buffer"))
_VIEW_OFF = shared_col(("SetGraphicsRootConstantBufferView", "offset"), ("SetGraphicsRootShaderResourceView", "offset"))
_GRS_ROOTSIG = Op.SetGraphicsRootSignature.col("rootsig")
_COPY_DST = Op.CopyBufferRegion.col("dst")
# an indirect-args record (D3D12_DRAW_ARGUMENTS / D3D12_DRAW_INDEXED_ARGUMENTS) is its direct
# draw's arguments in column order: _records_of takes the leading columns
_DI_RECORD = tuple(Op.DrawInstanced.col(a) for a in ("vertex_count", "instance_count", "start_vertex",
                                                     "start_instance"))
_DII_RECORD = tuple(Op.DrawIndexedInstanced.col(a) for a in ("index_count", "instance_count", "start_index",
                                                             "base_vertex", "start_instance"))
assert _DI_RECORD == tuple(range(4)) and _DII_RECORD == tuple(range(5))
_SI_FIELD = {False: _DI_RECORD.index(_DI_SI), True: _DII_RECORD.index(_DII_SI)}
"""StartInstanceLocation's word in a (non-indexed, indexed) args record."""

# kinds of draws for batching
_NONE, _DIRECT, _DIRECT_IDX, _IND, _IND_IDX = 0, 1, 2, 3, 4
_KIND = np.zeros(1 << 16, np.int8)
_KIND[_DI], _KIND[_DII] = _DIRECT, _DIRECT_IDX
_KIND[_I], _KIND[_M] = _IND, _IND
_KIND[_II], _KIND[_MI] = _IND_IDX, _IND_IDX
_MULTI_OF = {_DIRECT: _M, _DIRECT_IDX: _MI, _IND: _M, _IND_IDX: _MI}
_REC = {_DIRECT: 16, _DIRECT_IDX: 20, _IND: 16, _IND_IDX: 20}
assert ARGS_SIZE["MultiDrawInstancedIndirect"] == 16 and ARGS_SIZE["MultiDrawIndexedInstancedIndirect"] == 20
PERDRAW_ALIGN = 256
"""Alignment of each batch's per-draw array bound as a root CBV (D3D12's CBV alignment)."""
PERDRAW_ALIGN_SRV = 16
"""Alignment of each batch's per-draw array bound as a root SRV."""
MAX_LIFTED_RECORDS = 1 << 20
"""Most per-instance records one lifted run may generate."""
MAX_RESTORE_RECORDS = 1 << 12
"""Most records (StartInstanceLocation + instance count) a restoring binding may lay out."""
MAX_SECTION_RECORDS = 1 << 20
"""Most records one binding of a stretch's per-draw array (a root SRV) addresses."""
CBV_MAX_BYTES = 1 << 16
"""Most bytes a root CBV addresses (4096 16-byte constants): a CBV-bound array is split there."""


def args_records(stream: Stream, cmds: np.ndarray, indexed: bool) -> np.ndarray:
    """The indirect-args records of direct draws ``cmds`` as ``uint32[len(cmds), 4 or 5]``.

    ``DrawInstanced`` -> (VertexCountPerInstance, InstanceCount, StartVertexLocation,
    StartInstanceLocation); ``DrawIndexedInstanced`` -> (IndexCountPerInstance,
    InstanceCount, StartIndexLocation, BaseVertexLocation, StartInstanceLocation),
    the signed base vertex stored as its two's-complement 32-bit word.
    """
    return _records_of(stream.args[cmds], indexed)


def _records_of(rows: np.ndarray, indexed: bool) -> np.ndarray:
    """:func:`args_records` of draws whose argument rows are ``rows``."""
    return (rows[:, :len(_DII_RECORD if indexed else _DI_RECORD)] & _M32).astype(np.uint32)


# --------------------------------------------------------------------------- per-draw contracts

@dataclass(frozen=True)
class DrawDataContract:
    """A pipeline's usable ``draw_data`` / ``instance_data`` clause (docs/architecture.md).

    ``perdraw``: root parameter P (a root SRV or CBV); ``view_op``: the opcode that
    binds it; ``items``: the lift items ``(parameter, word)`` in record order;
    ``kinds``: the root-parameter kind of each lifted parameter (``constants``,
    ``table``: word 0 is the table's heap slot, ``cbv`` / ``srv``: words 0 and 1 are
    the low / high halves of the byte offset); ``pulling``: the pipeline has no input
    layout (on an input-layout pipeline the clause promises that the record index is
    the only StartInstanceLocation-dependent input, so the pass renumbers either).
    """

    perdraw: int
    view_op: int
    items: tuple[tuple[int, int], ...]
    pulling: bool
    kinds: tuple[tuple[int, str], ...] = ()

    @property
    def words(self) -> int:
        """32-bit words per record: base vertex, start instance, one per lift item."""
        return 2 + len(self.items)

    @property
    def params(self) -> tuple[int, ...]:
        """The root parameters with lifted words (sorted)."""
        return tuple(sorted({q for q, _ in self.items}))

    def kind(self, q: int) -> str:
        """Root-parameter kind of lifted parameter ``q``."""
        return dict(self.kinds).get(q, "constants")


def draw_data_contracts(decls: Decls) -> dict[int, DrawDataContract | None]:
    """Per pipeline with a ``draw_data`` or ``instance_data`` clause (``Contract.array``):
    its contract, or None when the pass cannot use it (P is not a root SRV/CBV of its
    root signature, or a lift item names no value of a root parameter: a word of root
    constants, word 0 of a descriptor table, word 0 or 1 of a root CBV/SRV)."""
    out: dict[int, DrawDataContract | None] = {}
    for i, p in enumerate(decls.items):
        if not isinstance(p, Pipeline) or p.is_compute:
            continue
        c = p.contract.array
        if c is None:
            continue
        rs = decls[p.root] if p.root is not None and p.root in decls else None
        out[i] = None
        if not isinstance(rs, RootSig):
            continue
        pd = c.perdraw
        if not (0 <= pd < len(rs.params) and rs.params[pd].kind in ("srv", "cbv")):
            continue
        try:
            items, kinds = c.resolve(rs)
        except ValueError:
            continue
        out[i] = DrawDataContract(pd, _SRV if rs.params[pd].kind == "srv" else _CBV, items,
                                  p.vertex_pulling, tuple(sorted(dict(zip((q for q, _ in items), kinds)).items())))
    return out


_TABLE = BY_NAME["SetGraphicsRootDescriptorTable"].code
_VIEW_OP = {"table": _TABLE, "cbv": _CBV, "srv": _SRV}


class _ValueSplit:
    """Root argument values split into lifted words and the rest, columnar (see ``__call__``).

    Root constants come from the scan's resolved partial-update chains
    (:attr:`drawopt.analysis.state.Scan.chains`), the other kinds from the command that set
    the value (equal value ids are equal arguments)."""

    def __init__(self, stream: Stream, sc: Any, kern: Any = None) -> None:
        self.stream, self.sc = stream, sc
        self.kern = kern if kern is not None else _kernels(None)
        self.source = np.full(sc.values.next + 1, -1, np.int64)   # per value id: a command that sets it
        setc = np.flatnonzero(sc.cval >= 0)
        self.source[sc.cval[setc]] = setc
        self.partial = sc.values.partial_mask()
        first: dict[str, int] = {}   # per declaration: the first of its name (values compare names)
        self.canon = np.array([first.setdefault(d.name, i) for i, d in enumerate(stream.decls.items)] + [-1],
                              np.int64)
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _chain(self, slot: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(row of each value id, filled words)`` of the root-constants chains of ``slot``."""
        if slot not in self._rows:
            ch = self.sc.chains.get(slot)
            if ch is None:
                return None
            row_of = np.full(self.sc.values.next + 1, -1, np.int64)
            row_of[self.sc.cval[ch.cmds]] = np.arange(ch.cmds.shape[0])
            self._rows[slot] = (row_of, ch.filled())   # words after each command (-1 undefined, -3 unknown)
        return self._rows[slot]

    def __call__(self, vids: np.ndarray, q: int, kind: str, ks: list[int]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values ``vids`` of graphics root parameter ``q`` (of kind ``kind``; markers
        included) split into the lifted words ``ks`` and the rest, which must be equal
        across a lifted run (the other words of root constants, a table's heap, a root
        view's buffer and unlifted offset word): ``(ok, lifted[m, len(ks)], rest[m, r])``,
        ``ok`` False where a lifted word is not defined or the value is of another kind;
        equal ``rest`` rows are equal rests."""
        m = vids.shape[0]
        ok = vids >= 0
        v = np.maximum(vids, 0)
        none = (np.zeros(m, bool), np.zeros((m, len(ks)), np.int64), np.zeros((m, 0), np.int64))
        if kind == "constants":
            chain = self._chain(ROOT0 + q)
            if chain is None or max(ks) >= chain[1].shape[1]:
                return none
            row_of, filled = chain
            return self.kern.chain_words(vids, row_of, self.partial, filled, np.asarray(ks, np.int64),
                                         np.array([n for n in range(filled.shape[1]) if n not in ks], np.int64))
        c = self.source[v]
        ok &= (c >= 0) & (self.stream.op[np.maximum(c, 0)] == _VIEW_OP[kind])
        a = self.stream.args[np.maximum(c, 0)]
        if kind == "table":   # heapref: heap index << 32 | slot
            ref = a[:, _TABLE_REF]
            return ok, np.repeat((ref & _M32)[:, None], len(ks), axis=1), self.canon[ref >> 32][:, None]
        off = a[:, _VIEW_OFF]
        lifted = np.stack([(off >> (32 * k)) & _M32 for k in ks], axis=1)
        rest = np.stack([self.canon[a[:, _VIEW_BUF]], *((off >> (32 * k)) & _M32 for k in (0, 1) if k not in ks)],
                        axis=1)
        return ok, lifted, rest


# --------------------------------------------------------------------------- kernels (pure twins)
def _kernels(pure: bool | None) -> Any:
    """The compiled kernels (``drawopt._mdi``) or their pure-Python twins below."""
    mod = load_cext("_mdi", pure)
    return mod if mod is not None else SimpleNamespace(
        greedy=_greedy_py, indirect_groups=_indirect_groups_py, layout=_layout_py,
        varying_columns=_varying_columns_py, key_rows=_key_rows_py, perdraw_records=_perdraw_records_py,
        chain_words=_chain_words_py, run_facts=_run_facts_py)


def _run_facts_py(op: np.ndarray, args: np.ndarray, pipe: np.ndarray, first: np.ndarray, length: np.ndarray,
                  kind: np.ndarray, state: np.ndarray, has_lift: np.ndarray, eligible: np.ndarray,
                  has_nat: np.ndarray, pinned: np.ndarray, decl_pd: np.ndarray, decl_cap: np.ndarray, di: int,
                  dii: int, col_inst: int, col_si_di: int, col_si_dii: int, min_di: int, min_dii: int,
                  max_lifted: int, max_restore: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-draw and per-run facts of the lift decision (:func:`_lifted_runs`; runs
    ``first``/``length`` cover the draws in order): ``(draw_pd, restorable, run_pd,
    beneficial)`` -- each draw's per-draw parameter (-1: none); whether a single draw reading
    its lift items natively can read the array (direct, its instances fit one binding;
    pinned: StartInstanceLocation + instances at most ``max_restore`` and the cap); each
    run's parameter where it may be lifted (its first draw lifts, its instances sum to at
    most ``max_lifted``, every draw fits; else -1); whether the run is long enough for its
    kind (1: ``min_di``, 2: ``min_dii``) and its state changes after its first draw."""
    n = op.shape[0]
    direct = (op == di) | (op == dii)
    inst = np.where(direct, args[:, col_inst], 0)
    sil = np.where(op == dii, args[:, col_si_dii], args[:, col_si_di]) & _M32
    run_inst = np.add.reduceat(inst, first) if first.size else np.zeros(0, np.int64)
    draw_pd = decl_pd[pipe]
    cap = np.where(draw_pd >= 0, decl_cap[pipe], 0)   # records one binding of the array may address
    fits = inst <= cap
    run_fits = np.minimum.reduceat(fits.astype(np.int8), first) == 1 if first.size else np.zeros(0, bool)
    liftable_run = has_lift[first] & eligible[first] & (run_inst <= max_lifted) & run_fits
    restorable = np.zeros(n, bool)
    nw = np.flatnonzero(has_nat)
    if nw.size:
        reach = sil[nw] + inst[nw]
        restorable[nw] = direct[nw] & np.where(pinned[nw], (reach <= max_restore) & (reach <= cap[nw]), fits[nw])
    run_pd = np.where(liftable_run, draw_pd[first], -1)
    beneficial = ((kind[first] == _DIRECT) & (length >= min_di)) | ((kind[first] == _DIRECT_IDX) & (length >= min_dii))
    if n:
        same = np.r_[True, state[1:] == state[:-1]]
        differs = np.add.reduceat((~same).astype(np.int64), first) - (~same[first]).astype(np.int64) > 0
        beneficial &= differs   # same state everywhere: nothing to lift (an ordinary batch)
    return draw_pd, restorable, run_pd, beneficial


def _chain_words_py(vids: np.ndarray, row_of: np.ndarray, partial: np.ndarray, filled: np.ndarray,
                    ks: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Root-constant words of values ``vids`` from their chain (``row_of``: row of
    ``filled`` of each value id, -1: none), split into words ``ks`` and ``other``:
    ``(ok, lifted, rest)``; ``ok`` where the value has a row, is not a partial update and
    its words ``ks`` are defined (>= 0). A value without a row reads row 0 (unused).

    >>> _chain_words_py(np.array([1, -1, 0]), np.array([-1, 0, -1]), np.zeros(3, bool),
    ...                 np.array([[5, -1, 7]]), np.array([0, 2]), np.array([1]))[0].tolist()
    [True, False, False]
    """
    ok = vids >= 0
    v = np.maximum(vids, 0)
    r = np.where(ok, row_of[v], -1)
    ok &= (r >= 0) & ~partial[v]
    words = filled[np.maximum(r, 0)]
    lifted = words[:, ks]
    ok &= (lifted >= 0).all(axis=1)
    return ok, lifted, words[:, other]


def _varying_columns_py(rows: np.ndarray) -> np.ndarray:
    """Columns of ``rows`` where some row differs from the first (increasing)."""
    return np.flatnonzero((rows != rows[:1]).any(axis=0))


def _key_rows_py(rows: np.ndarray, sidx: np.ndarray, keep: np.ndarray, mask_col: int, masked: int,
                 nat: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """Key rows of draws: row ``sidx[i]`` of ``rows`` at columns ``keep`` (column
    ``mask_col`` of those set to ``masked`` where ``nat[i]``; -1: none), then ``extra[i]``.

    >>> _key_rows_py(np.array([[1, 2, 3], [4, 5, 6]]), np.array([1, 0]), np.array([0, 2]), 1, -2,
    ...              np.array([True, False]), np.array([[7], [8]])).tolist()
    [[4, -2, 7], [1, 3, 8]]
    """
    out = rows.take(sidx, axis=0)[:, keep]   # whole rows, then the columns: faster than one 2-d gather
    if mask_col >= 0:
        out[nat.astype(bool), mask_col] = masked
    return np.concatenate([out, extra], axis=1).astype(np.int64, copy=False)


def _perdraw_records_py(data: np.ndarray, base: np.ndarray, ninst: np.ndarray, words: np.ndarray, bv: np.ndarray,
                        seen: np.ndarray, lift: np.ndarray, row: np.ndarray) -> None:
    """Write the per-draw array's records into ``data`` (in place): member ``m`` has
    ``ninst[m]`` records of ``words[m]`` words from word ``base[m]``; record ``i`` holds
    ``bv[m]``, ``seen[m] + i`` and ``lift[row[m], :words[m] - 2]`` (low 32 bits each).

    >>> d = np.zeros(8, np.uint32)
    >>> _perdraw_records_py(d, np.array([0, 6]), np.array([2, 1]), np.array([3, 2]), np.array([-1, 5]),
    ...                     np.array([10, 0]), np.array([[9], [0]]), np.array([0, 1]))
    >>> d.tolist()
    [4294967295, 10, 9, 4294967295, 11, 9, 5, 0]
    """
    owner = np.repeat(np.arange(base.size), ninst)
    inst = np.arange(owner.size) - np.repeat(np.cumsum(ninst) - ninst, ninst)
    mw = words[owner]
    rpos = base[owner] + inst * mw
    data[rpos] = bv[owner] & _M32
    data[rpos + 1] = (seen[owner] + inst) & _M32
    for w in unique(words).tolist():
        if w == 2:
            continue
        r = np.flatnonzero(mw == w)
        data[rpos[r, None] + np.arange(2, w)] = lift[row[owner[r]], :w - 2] & _M32   # one record per instance


def _greedy_py(values: np.ndarray, new_run: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Group of each element: consecutive elements of one run (``new_run`` starts one) whose
    ``values`` sum to at most their ``limit`` (a group holds at least one element)."""
    gid = np.zeros(values.shape[0], np.int64)
    g, total = -1, 0
    for i, (x, nr, lim) in enumerate(zip(values.tolist(), new_run.tolist(), limit.tolist())):
        if i == 0 or nr or total + x > lim:
            g += 1
            total = 0
        total += x
        gid[i] = g
    return gid


def _indirect_groups_py(cnt: np.ndarray, buf: np.ndarray, off: np.ndarray, stride: np.ndarray,
                        new_run: np.ndarray, rec: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy groups of consecutive indirect draws of one run that read one args buffer at
    ``O, O+S, O+2S, ...`` (at most ``limit`` records; S a multiple of 4, at least ``rec``):
    ``(group of each draw, stride S of each group)``. A draw is ``cnt`` records at ``off``
    with its own ``stride`` (a single indirect draw: 1 and -1); S is fixed by the first
    multi-draw of count > 1 or the second draw of the group (-1: not fixed)."""
    n = cnt.shape[0]
    gid = np.zeros(n, np.int64)
    gstride: list[int] = []
    g_buf = g_off = g_n = 0
    g_stride = -1
    for i, (c, b, o, st, nr) in enumerate(zip(cnt.tolist(), buf.tolist(), off.tolist(), stride.tolist(),
                                              new_run.tolist())):
        ok = False
        if i and not nr and b == g_buf and g_n + c <= limit:
            want = o - g_off
            if g_stride < 0:  # stride not fixed yet: the group is one single draw
                ok = want >= rec and want % 4 == 0 and (c == 1 or st == want)
                if ok:
                    g_stride = want
            else:
                ok = want == g_n * g_stride and (c == 1 or st == g_stride)
        if ok:
            g_n += c
        else:
            if i:
                gstride.append(g_stride)
            g_buf, g_off, g_n = b, o, c
            g_stride = st if c > 1 else -1
        gid[i] = len(gstride)
    if n:
        gstride.append(g_stride)
    return gid, np.array(gstride, np.int64)


def _layout_py(zone: np.ndarray, stride: np.ndarray, nrec: np.ndarray, restore: np.ndarray, limit: np.ndarray,
               align: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Lay out the per-draw array sections of readers sorted by zone (the module docstring, 2).

    Reader u has ``nrec[u]`` records of ``stride[u]`` bytes; one binding addresses at most
    ``limit[u]`` bytes; ``restore[u]`` >= 0: a pinned draw whose records must sit at that
    index. Within a zone each reader's records start at the first multiple of its stride not
    yet used (a restored one at its own index, in a new section when the open one has passed
    it); a new section starts where the next reader does not fit. Sections follow each other
    in the buffer at the ``align`` (of their first reader) boundary, each at least 4 bytes.

    Returns ``(index, section)`` of each reader (its first record's index in its section),
    ``(first reader, byte offset)`` of each section, and the buffer's size in bytes.
    """
    u_n = zone.shape[0]
    idx = np.zeros(u_n, np.int64)
    sec = np.zeros(u_n, np.int64)
    sec_first: list[int] = []
    sec_off: list[int] = []
    total = nbytes = 0
    is_open = False

    def close() -> None:
        nonlocal total, is_open
        if is_open:
            al = int(align[sec_first[-1]])
            at = -(-total // al) * al
            sec_off.append(at)
            total = at + max(nbytes, 4)
        is_open = False

    for u, (z, s, n, rs, lim) in enumerate(zip(zone.tolist(), stride.tolist(), nrec.tolist(), restore.tolist(),
                                               limit.tolist())):
        if u and z != int(zone[u - 1]):
            close()
            nbytes = 0
        if rs >= 0:
            i = rs
            if i * s < nbytes or (i + n) * s > lim:
                close()
                nbytes = 0
        else:
            i = -(-nbytes // s)
            if is_open and (i + n) * s > lim:
                close()
                nbytes, i = 0, 0
        if not is_open:
            sec_first.append(u)
            is_open = True
        idx[u] = i
        sec[u] = len(sec_first) - 1
        nbytes = (i + n) * s
    close()
    return idx, sec, np.array(sec_first, np.int64), np.array(sec_off, np.int64), total


# --------------------------------------------------------------------------- planning
@dataclass
class MdiPlan:
    """The rewrite, as arrays (no object per command).

    ``replace`` rows ``(command, opcode, count, buffer, offset, stride)`` put a multi-draw
    call at the command (``buffer`` -1: the generated args buffer); ``bind`` rows
    ``(command, opcode, root parameter, offset)`` bind the generated per-draw buffer right
    before the command; ``sinst`` rows ``(command, column, value)`` renumber a direct draw's
    StartInstanceLocation (argument ``column``) into its stretch's per-draw array;
    ``remove``: the draw commands absorbed; ``args_words`` / ``perdraw_words``: the
    generated buffers' contents (``args_bytes`` / ``perdraw_bytes`` long).
    """

    replace_parts: list[np.ndarray] = field(default_factory=list)
    bind: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))
    sinst: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    remove: list[np.ndarray] = field(default_factory=list)
    args_words: list[np.ndarray] = field(default_factory=list)
    perdraw_words: list[np.ndarray] = field(default_factory=list)
    args_bytes: int = 0
    perdraw_bytes: int = 0
    direct_batches: int = 0
    direct_draws: int = 0
    lifted_batches: int = 0
    lifted_draws: int = 0
    restored_draws: int = 0
    renumbered_draws: int = 0
    perdraw_binds: int = 0
    indirect_merges: int = 0
    indirect_calls: int = 0

    @property
    def replace(self) -> np.ndarray:
        """``int64[k, 6]``: every multi-draw call the plan writes (see the class docstring)."""
        return np.concatenate(self.replace_parts) if self.replace_parts else np.zeros((0, 6), np.int64)


@dataclass
class _Draws:
    """Per-draw columns used while planning."""

    cmd: np.ndarray
    op: np.ndarray          # opcode of each draw
    args: np.ndarray        # int64[D, NARGS]: its arguments
    state: np.ndarray
    kind: np.ndarray
    eligible: np.ndarray
    key: np.ndarray
    pipe: np.ndarray
    lift_vals: np.ndarray   # int64[D, items]: the lift items' values of a draw reading them natively
    has_nat: np.ndarray     # every direct draw reading its lift items natively, pinned ones too
    has_lift: np.ndarray    # such draws that may be lifted (eligible)
    nrec: np.ndarray        # records each draw command contributes (a multi-draw: its count)
    cpu_ind: np.ndarray     # an indirect draw whose args the CPU wrote (decoded into records)
    pinned: np.ndarray      # @nomerge, never_merge or no graphics pipeline: the draw is kept as it is


@dataclass
class _Users:
    """Readers of the stretches' per-draw arrays, columnar, in the order found: lifted
    batches (draw positions ``first .. first + ndraws - 1``), then single draws (renumbered,
    or restored when pinned: ``restore`` is their StartInstanceLocation, else -1).
    ``fills``: per lifted-batch block, ``(args records, rows, column, first user)``: the rows'
    StartInstanceLocation is set once the layout gives each batch its first record."""

    first: list[np.ndarray] = field(default_factory=list)
    ndraws: list[np.ndarray] = field(default_factory=list)
    restore: list[np.ndarray] = field(default_factory=list)
    fills: list[tuple[np.ndarray, np.ndarray, int, int]] = field(default_factory=list)
    count: int = 0

    def add(self, first: np.ndarray, ndraws: np.ndarray, restore: np.ndarray) -> int:
        """Append readers; returns the index of the first one."""
        at = self.count
        self.first.append(first)
        self.ndraws.append(ndraws)
        self.restore.append(restore)
        self.count += int(first.size)
        return at


def plan_mdi(stream: Stream, table: StateTable, *, target: str | TargetModel = "d3d12",
             max_count: int = 0, min_batch: int = 2, lift: bool = True, pure: bool | None = None) -> MdiPlan:
    """Decide the batches (see the module docstring).

    ``table``: the stream's :class:`drawopt.analysis.state.StateTable`. ``lift``: allow
    per-draw data under ``draw_data`` / ``instance_data`` contracts. ``pure``: force (True)
    or refuse (False) the pure-Python kernels (default: ``DRAWOPT_PURE``).
    """
    plan = MdiPlan()
    model = get_target(target)
    draws = np.asarray(table.draws, np.int64)
    if not model.mdi or draws.size == 0:
        return plan
    kern = _kernels(pure)
    limit = model.mdi_max_count if max_count <= 0 else min(max_count, model.mdi_max_count)
    limit = max(1, int(limit))
    contracts = draw_data_contracts(stream.decls)
    dr = _draw_columns(stream, table, lift and stream.header.kind == "list", contracts, kern)
    min_direct = {k: max(int(min_batch), mdi_min_batch(model, indexed=(k == _DIRECT_IDX)), 2)
                  for k in (_DIRECT, _DIRECT_IDX)}
    between_ok = _only_state_between(stream, draws)

    runs = _runs(dr, between_ok)
    lifted = _lifted_runs(stream, table, dr, runs, min_direct, contracts, kern)
    singles = np.zeros(0, np.int64)
    zone_of = np.full(dr.cmd.size, -1, np.int64)
    if lifted is not None:
        dr.key, lifted_first, singles, zone_of = lifted
        dr.eligible[singles] = False   # a zone's single draw stays a direct draw
        runs = _runs(dr, between_ok)
    else:
        lifted_first = np.zeros(0, np.int64)
    users = _Users()

    first, length = runs
    run_kind = dr.kind[first]
    cpu_before = np.r_[0, np.cumsum(dr.cpu_ind)]
    costs: np.ndarray | None = None
    for k in (_DIRECT, _DIRECT_IDX):
        sel = np.flatnonzero((run_kind == k) & dr.eligible[first])
        if not sel.size:
            continue
        is_lift = isin(first[sel], lifted_first)
        simple = cpu_before[first[sel] + length[sel]] == cpu_before[first[sel]]   # no CPU-indirect member
        # runs of direct draws only: vectorised split
        vs = simple & (is_lift | (length[sel] >= min_direct[k]))
        if vs.any():
            bf, bl, blift = _split(first[sel[vs]], length[sel[vs]], is_lift[vs], limit, min_direct[k])
            bf, bl, blift = _split_cbv(stream, dr, bf, bl, blift, contracts, kern)
            if bf.size:
                _emit_direct(stream, dr, plan, k, bf, bl, blift, users)
        # runs with CPU-written indirect draws: one progression on one buffer is merged as it
        # is (no copy); anything else is decoded into generated records, batch by batch
        cpu_runs = sel[~simple]
        if cpu_runs.size:
            if costs is None:
                costs = cost_by_command(stream, model)
            _cpu_runs(stream, dr, plan, k, first[cpu_runs], length[cpu_runs], limit, costs, model, users, kern)

    for k in (_IND, _IND_IDX):
        rr = np.flatnonzero((run_kind == k) & (length >= 2) & dr.eligible[first])
        if rr.size:
            if costs is None:
                costs = cost_by_command(stream, model)
            pos, new_run = _ranges_runs(first[rr], length[rr])
            _merge_indirect(stream, draws[pos], new_run, k, limit, costs, model, plan, False, kern)
    if users.count or singles.size:
        _emit_sections(stream, dr, plan, users, singles, zone_of, contracts, kern)
    return plan


def _ranges_runs(firsts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of runs ``firsts[r] .. firsts[r] + lens[r] - 1`` in order, and a flag
    (uint8) where each run starts."""
    pos = _ranges(firsts, lens)
    new_run = np.zeros(pos.size, np.uint8)
    new_run[np.r_[0, np.cumsum(lens[:-1])].astype(np.int64)] = 1
    return pos, new_run


def _group_starts(gid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each group of consecutive equal ``gid``."""
    n = gid.shape[0]
    gs = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]]) if n else np.zeros(0, np.int64)
    return gs, np.diff(np.r_[gs, n])


def _cheaper(after: np.ndarray, costs: np.ndarray, gs: np.ndarray, glen: np.ndarray) -> np.ndarray:
    """``after[g] < costs[gs[g]:gs[g] + glen[g]].sum()`` for each group, each sum exactly as
    ``ndarray.sum`` gives it (pairwise): the vectorised sequential sum is used where it is
    clearly on one side, the exact one near a tie."""
    before = np.add.reduceat(costs, gs) if gs.size else np.zeros(0)
    out = after < before
    near = np.flatnonzero(np.abs(after - before) <= 1e-6 * (np.abs(after) + np.abs(before)) + 1e-12)
    for g in near.tolist():
        out[g] = float(after[g]) < float(costs[gs[g]:gs[g] + glen[g]].sum())
    return out


def _cpu_runs(stream: Stream, dr: _Draws, plan: MdiPlan, k: int, firsts: np.ndarray, lens: np.ndarray, limit: int,
              costs: np.ndarray, model: TargetModel, users: _Users, kern: Any) -> None:
    """Runs of direct draws of kind ``k`` holding CPU-written indirect draws: a run of only
    those that is one progression on one buffer is merged as it is (no copy); the others
    are cut greedily into batches of at most ``limit`` records, each batched over
    generated records (decoded from the buffers' data) when that is cheaper."""
    merged = np.zeros(firsts.size, bool)
    allcpu = np.minimum.reduceat(dr.cpu_ind[_ranges(firsts, lens)].astype(np.int8),
                                 np.r_[0, np.cumsum(lens[:-1])].astype(np.int64)) == 1
    wr = np.flatnonzero(allcpu)
    if wr.size:
        pos, new_run = _ranges_runs(firsts[wr], lens[wr])
        merged[wr] = _merge_indirect(stream, dr.cmd[pos], new_run, _IND if k == _DIRECT else _IND_IDX, limit,
                                     costs, model, plan, True, kern)
    rr = np.flatnonzero(~merged)
    if not rr.size:
        return
    pos, new_run = _ranges_runs(firsts[rr], lens[rr])
    gs, glen = _group_starts(kern.greedy(dr.nrec[pos], new_run, np.full(pos.size, limit, np.int64)))
    recs = np.add.reduceat(dr.nrec[pos], gs) if gs.size else np.zeros(0, np.int64)
    ok = glen >= 2
    ok &= _cheaper(model.mdi_call_us + recs * model.mdi_record_us, costs[dr.cmd[pos]], gs, glen)
    if ok.any():
        _emit_direct(stream, dr, plan, k, pos[gs[ok]], glen[ok], np.zeros(int(ok.sum()), bool), users)


def _record_bytes_limit(c: DrawDataContract) -> int:
    """Most bytes one binding of the per-draw array may address: a root CBV sees at most
    :data:`CBV_MAX_BYTES`; a root SRV :data:`MAX_SECTION_RECORDS` records."""
    return CBV_MAX_BYTES if c.view_op == _CBV else MAX_SECTION_RECORDS * 4 * c.words


def _contract_columns(decls: Decls, contracts: dict[int, DrawDataContract | None]) -> dict[str, np.ndarray]:
    """Per declaration index (plus one), facts of its usable array clause: ``pd`` root
    parameter (-1: none), ``vop`` binding opcode, ``words`` per record, ``limit`` bytes one
    binding addresses, ``cap`` records one binding addresses (``1 << 62`` without a clause)."""
    n = len(decls) + 1
    out = {"pd": np.full(n, -1, np.int64), "vop": np.zeros(n, np.int64), "words": np.ones(n, np.int64),
           "limit": np.zeros(n, np.int64), "cap": np.full(n, 1 << 62, np.int64)}
    for i, c in contracts.items():
        if c is not None:
            out["pd"][i], out["vop"][i], out["words"][i] = c.perdraw, c.view_op, c.words
            out["limit"][i] = _record_bytes_limit(c)
            out["cap"][i] = _record_bytes_limit(c) // (4 * c.words)
    return out


def _split_cbv(stream: Stream, dr: _Draws, bf: np.ndarray, bl: np.ndarray, blift: np.ndarray,
               contracts: dict[int, DrawDataContract | None], kern: Any
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lifted batches whose per-instance records one binding cannot address (a root CBV:
    64 KiB) split greedily into batches that it can."""
    if not blift.any():
        return bf, bl, blift
    lim = _contract_columns(stream.decls, contracts)["cap"][dr.pipe[bf]]
    members = _ranges(bf, bl)
    starts = np.r_[0, np.cumsum(bl[:-1])].astype(np.int64)
    ninst = dr.args[members, COL_INSTANCES]     # lifted members are direct draws: one record per instance
    nrec = np.add.reduceat(ninst, starts) if bf.size else np.zeros(0, np.int64)
    over = blift & (nrec > lim)
    if not over.any():
        return bf, bl, blift
    ob = np.flatnonzero(over)
    om, new_run = _ranges_runs(starts[ob], bl[ob])     # indices into members
    gs, glen = _group_starts(kern.greedy(ninst[om], new_run, np.repeat(lim[ob], bl[ob])))
    keep = np.flatnonzero(~over)
    batch = np.concatenate([keep, np.repeat(ob, bl[ob])[gs]])
    order = np.argsort(batch, kind="stable")     # a split batch's parts in place of it, in order
    return (np.concatenate([bf[keep], members[om[gs]]])[order], np.concatenate([bl[keep], glen])[order],
            np.concatenate([blift[keep], np.ones(gs.size, bool)])[order])


def _emit_sections(stream: Stream, dr: _Draws, plan: MdiPlan, users: _Users, singles: np.ndarray,
                   zone_of: np.ndarray, contracts: dict[int, DrawDataContract | None], kern: Any) -> None:
    """Lay out each stretch's per-draw array and bind it (the module docstring, 2).

    The readers of a stretch's zone, in command order, get consecutive records of one
    array section; a record of stride S sits at a multiple of S from the section start,
    so that each reader's records are at index ``StartInstanceLocation + i``. A pinned
    draw's records go at its own StartInstanceLocation (a new section when the open one
    has passed it). Each section is bound right before its first reader; a new section
    starts where one binding cannot address more (:func:`_record_bytes_limit`). The
    layout is the kernel's (:func:`_layout_py`); the records are written with numpy.
    """
    n_lifted = users.count
    if singles.size:
        sil = np.where(dr.op[singles] == _DII, dr.args[singles, _DII_SI], dr.args[singles, _DI_SI]) & _M32
        users.add(singles, np.ones(singles.size, np.int64), np.where(dr.pinned[singles], sil, -1))
    first = np.concatenate(users.first)
    nd = np.concatenate(users.ndraws)
    restore = np.concatenate(users.restore)
    cc = _contract_columns(stream.decls, contracts)
    pipe = dr.pipe[first]
    assert (cc["pd"][pipe] >= 0).all()
    words = cc["words"][pipe]
    vop, pd = cc["vop"][pipe], cc["pd"][pipe]
    zone = zone_of[first]
    cmd = dr.cmd[first]
    members = _ranges(first, nd)
    ninst = dr.args[members, COL_INSTANCES]
    mstart = np.r_[0, np.cumsum(nd[:-1])].astype(np.int64)
    nrec = np.add.reduceat(ninst, mstart)
    order = np.lexsort((cmd, zone))
    zs = zone[order]
    zfirst = order[np.r_[0, np.flatnonzero(zs[1:] != zs[:-1]) + 1]]
    zof = np.repeat(zfirst, np.diff(np.r_[np.flatnonzero(np.r_[True, zs[1:] != zs[:-1]]), zs.size]))
    assert (pd[order] == pd[zof]).all() and (vop[order] == vop[zof]).all()   # one array per zone
    align = np.where(vop == _CBV, PERDRAW_ALIGN, PERDRAW_ALIGN_SRV).astype(np.int64)
    idx_s, sec_s, sf_s, sec_off, total = kern.layout(zs, (4 * words)[order], nrec[order], restore[order],
                                                     cc["limit"][pipe][order], align[order])
    idx = np.empty_like(idx_s)
    idx[order] = idx_s
    sec = np.empty_like(sec_s)
    sec[order] = sec_s
    sf = order[sf_s]
    plan.bind = np.stack([cmd[sf], vop[sf], pd[sf], sec_off], axis=1).astype(np.int64)
    plan.perdraw_binds += int(sf.size)
    plan.restored_draws += int((restore >= 0).sum())
    plan.perdraw_bytes = int(total)
    # the records: one per instance (base vertex, the instance the shader saw, lift items) at
    # index idx + (instances before it in its reader) of its section
    data = np.zeros(int(total) // 4, np.uint32)
    user_of = np.repeat(np.arange(first.size), nd)
    before = np.cumsum(ninst) - ninst
    before -= np.repeat(before[mstart], nd)
    mw = words[user_of]
    mbase = sec_off[sec[user_of]] // 4 + (idx[user_of] + before) * mw
    indexed = dr.op[members] == _DII
    bv = np.where(indexed, dr.args[members, _DII_BV], 0)
    seen = np.where(indexed, dr.args[members, _DII_SI], dr.args[members, _DI_SI])
    assert dr.has_nat[members[mw > 2]].all()   # the lift items: read natively
    kern.perdraw_records(data, mbase, ninst, mw, bv, seen, dr.lift_vals, members)
    plan.perdraw_words = [data]
    # lifted batches: each member's args record starts at its batch's first record + the
    # instances before it; single draws: StartInstanceLocation renumbered, pinned ones kept
    for recs, rows, col, u0 in users.fills:
        mi = np.arange(mstart[u0], mstart[u0] + rows.size)
        recs[rows, col] = (idx[user_of[mi]] + before[mi]).astype(np.uint32)
    ren = np.flatnonzero(restore[n_lifted:] < 0) + n_lifted
    if ren.size:
        col = np.where(dr.op[first[ren]] == _DII, _DII_SI, _DI_SI)
        plan.sinst = np.stack([cmd[ren], col, idx[ren]], axis=1).astype(np.int64)
    plan.renumbered_draws = int(ren.size)


def _draw_columns(stream: Stream, table: StateTable, lift: bool,
                  all_contracts: dict[int, DrawDataContract | None], kern: Any) -> _Draws:
    """The per-draw columns of :class:`_Draws`; ``all_contracts``: :func:`draw_data_contracts`;
    ``kern``: :func:`_kernels`."""
    decls = stream.decls
    op = stream.op
    draws = np.asarray(table.draws, np.int64)
    state = np.asarray(table.state, np.int64)
    dop = op[draws]
    dargs = stream.args.take(draws, axis=0)   # row gather: take copies whole rows, faster than [draws]
    kind = _KIND[dop].astype(np.int8)
    # pinned: @nomerge, never_merge pipelines, and draws without a graphics pipeline
    never = np.array([not isinstance(d, Pipeline) or d.never_merge or d.is_compute for d in decls.items] + [True],
                     bool)
    pso = np.flatnonzero(op == BY_NAME["SetPipelineState"].code)
    pipe = forward_fill(len(stream), pso, stream.args[pso, COL_PIPELINE])[draws]
    pinned = ((stream.flags[draws] & FLAG_NOMERGE) != 0) | never[pipe]
    eligible = (kind != _NONE) & ~pinned
    multi = (dop == _M) | (dop == _MI)
    eligible &= ~(multi & (dargs[:, _MULTI_COUNT] == 0))
    key = state.copy()
    # indirect draws reading args the CPU wrote (declared cpu, with data, no GPU write before)
    nrec = np.where(multi, dargs[:, _MULTI_COUNT], 1).astype(np.int64)
    ind = np.flatnonzero((kind == _IND) | (kind == _IND_IDX))
    cpu_ind = np.zeros(draws.size, bool)
    if ind.size:
        buf = np.where(multi[ind], dargs[ind, COL_MULTI_ARGS], dargs[ind, _IND_ARGS])
        known = np.array([isinstance(d, Buffer) and d.cpu and d.data is not None for d in decls.items] + [False])
        if known[buf].any():
            first_write = _first_writes(stream, table.scan)
            cpu_ind[ind] = known[buf] & (draws[ind] < first_write[buf])
        kind[cpu_ind & (kind == _IND)] = _DIRECT
        kind[cpu_ind & (kind == _IND_IDX)] = _DIRECT_IDX

    contracts = {i: c for i, c in all_contracts.items() if c is not None}
    width = max((len(c.items) for c in contracts.values()), default=0)
    lift_vals = np.zeros((draws.size, width), np.int64)
    has_nat = np.zeros(draws.size, bool)
    has_lift = np.zeros(draws.size, bool)
    sc = table.scan
    # pipelines with one clause (P, lift items) are keyed together, with the pipeline in the key
    groups: dict[tuple, list[int]] = {}
    for i, c in contracts.items():
        groups.setdefault((c.perdraw, c.items, c.kinds), []).append(i)
    direct = ((kind == _DIRECT) | (kind == _DIRECT_IDX)) & ~cpu_ind
    split = _ValueSplit(stream, sc, kern) if groups and sc is not None else None
    varying = kern.varying_columns(table.rows) if split else np.zeros(0, np.int64)
    next_key = int(state.max()) + 1 if state.size else 0
    for pipes in groups.values() if split else ():
        c = contracts[pipes[0]]
        # direct draws of the pipelines (pinned ones too: they may get a restoring binding)
        of_group = np.zeros(len(decls) + 1, bool)   # by declaration index (-1: the last, False)
        of_group[pipes] = True
        mine = np.flatnonzero(of_group[pipe] & direct)
        if not mine.size:
            continue
        raw = _raw_slots(table, mine, [ROOT0 + c.perdraw, *(ROOT0 + q for q in c.params)], kern)
        native = (raw[:, 0] == UNDEFINED) & lift   # nothing bound at P: the shader reads the root arguments
        arrayf = raw[:, 0] >= 0       # a buffer is bound at P: the draws already read their records
        # the lifted words, and the rest of each lifted parameter (which must stay equal)
        vals = np.zeros((mine.size, len(c.items)), np.int64)
        ok = native | arrayf
        rests: list[np.ndarray] = []
        for j, q in enumerate(c.params):
            ks = [k for qq, k in c.items if qq == q]
            got, lifted, rest = split(raw[:, 1 + j], q, c.kind(q), ks)
            ok &= got
            vals[:, [n for n, (qq, _) in enumerate(c.items) if qq == q]] = lifted
            rests.append(rest)
        nat = ok & native
        lift_vals[mine[nat], :len(c.items)] = vals[nat]
        has_nat[mine[nat]] = True
        sel = ok & eligible[mine]
        if not sel.any():
            continue
        cand = mine[sel]
        nat = native[sel]
        # the key: the state with the lifted parameters masked (and P where nothing is bound),
        # the rest of each lifted parameter, the pipeline and whether the draw is native
        keep = varying[~np.isin(varying, [ROOT0 + q for q in c.params])]
        mask_col = int(np.searchsorted(keep, ROOT0 + c.perdraw)) if ROOT0 + c.perdraw in keep else -1
        extra = np.concatenate([*(r[sel] for r in rests), pipe[cand, None], nat[:, None]], axis=1)
        ids, _ = intern_rows(kern.key_rows(table.rows, state[cand], keep, mask_col, MASKED, nat, extra))
        key[cand] = next_key + ids
        next_key += int(ids.max()) + 1
        has_lift[cand[nat]] = True
    assert table.rows.shape[1] == NSLOTS
    return _Draws(draws, dop, dargs, state, kind, eligible, key, pipe, lift_vals, has_nat, has_lift, nrec, cpu_ind,
                  pinned)


def _first_writes(stream: Stream, sc: Any = None) -> np.ndarray:
    """Per declaration index (plus one): the first command that writes it on the GPU
    (a UAV write by :func:`drawopt.analysis.access.gpu_writes`, or a copy destination); ``int64``
    max where none does. ``sc``: the stream's state scan, if known."""
    w = gpu_writes(stream, sc)
    out = np.full(len(stream.decls) + 1, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, w.res, w.cmd)
    cp = np.flatnonzero(stream.op == _COPY)
    np.minimum.at(out, stream.args[cp, _COPY_DST], cp)
    return out


def _only_state_between(stream: Stream, draws: np.ndarray) -> np.ndarray:
    """``ok[k]``: only state commands lie between draws ``k`` and ``k+1`` (and no
    ``CSEnableAutomaticGpuFlush``: :func:`drawopt.analysis.mergeclass.fence_mask`)."""
    if draws.size < 2:
        return np.zeros(0, bool)
    fences = np.cumsum(fence_mask(stream), dtype=np.int64)
    return (fences[draws[1:] - 1] - fences[draws[:-1]]) == 0


def _runs(dr: _Draws, between_ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first draw position, length)`` of each maximal run of one key and kind."""
    n = dr.cmd.size
    adj = between_ok & dr.eligible[1:] & dr.eligible[:-1] & (dr.key[1:] == dr.key[:-1]) & \
        (dr.kind[1:] == dr.kind[:-1])
    start = np.ones(n, bool)
    start[1:] = ~adj
    first = np.flatnonzero(start)
    return first, np.diff(np.r_[first, n])


def _readers(stream: Stream, table: StateTable, dr: _Draws, pd: int) -> np.ndarray:
    """Draw positions that can observe a binding at graphics root parameter ``pd``: draws
    whose pipeline reads ``pd`` as state or names it in a per-draw clause, except
    ``DrawIndexedX`` calls of a pipeline whose array clause (not its ``x`` clause) names
    it (they read their record through ``x``: docs/architecture.md)."""
    mask = _observes(table, ROOT0 + pd)
    named = np.zeros(len(stream.decls) + 1, bool)
    through_x = np.zeros(len(stream.decls) + 1, bool)
    for i, p in enumerate(stream.decls.items):
        if not isinstance(p, Pipeline):
            continue
        if pd not in p.contract.perdraw_params:
            continue
        named[i] = True
        ac, x = p.contract.array, p.x_clause
        through_x[i] = ac is not None and ac.perdraw == pd and x is not None and pd not in x.named_params
    mask |= named[dr.pipe]
    mask &= ~(through_x[dr.pipe] & (stream.op[dr.cmd] == _DX))
    return np.flatnonzero(mask)


def _observes(table: StateTable, slot: int) -> np.ndarray:
    """Per draw: whether it can observe ``slot`` (its normalised row does not hold
    :data:`MASKED` there: :meth:`drawopt.analysis.state.Scan.read_mask`)."""
    return table.rows[:, slot][table.state] != MASKED


def _raw_slots(table: StateTable, pos: np.ndarray, slots: list[int], kern: Any = None) -> np.ndarray:
    """Raw value ids (:meth:`drawopt.analysis.state.Scan.values_of`) of ``slots`` at draw
    positions ``pos``: the normalised row where the draw observes the slot (the two agree
    there), the scan's value where it does not. ``kern``: :func:`_kernels` (default: as
    ``DRAWOPT_PURE`` says)."""
    kern = kern if kern is not None else _kernels(None)
    v = kern.key_rows(table.rows, np.asarray(table.state)[pos], np.asarray(slots, np.int64), -1, MASKED,
                      np.zeros(pos.size, bool), np.zeros((pos.size, 0), np.int64))
    hid = np.flatnonzero((v == MASKED).any(axis=1))
    if hid.size:
        sc = table.scan
        assert sc is not None
        dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
        v[hid] = sc.values_of(dsel[pos[hid]])[:, slots]
    return v


def _lifted_runs(stream: Stream, table: StateTable, dr: _Draws, runs: tuple[np.ndarray, np.ndarray],
                 min_direct: dict[int, int], contracts: dict[int, DrawDataContract | None], kern: Any
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Decide each stretch's zone: which runs are lifted and which single draws read the
    stretch's array (renumbered, or restored when pinned) (the module docstring, 2).

    Returns the keys to batch with (runs not lifted fall back to their state ids), the
    first draw position of each lifted run, the zone's single draws, and per draw
    position its zone (-1: none; one id per parameter and stretch). ``kern``: :func:`_kernels`.
    """
    if not dr.has_lift.any():
        return None
    first, length = runs
    op, args = stream.op, stream.args
    n = dr.cmd.size
    run_of = np.repeat(np.arange(first.size), length)
    in_lift = dr.has_lift
    cc = _contract_columns(stream.decls, contracts)
    # single draws that can read the array: renumbered (StartInstanceLocation rewritten) or,
    # when pinned, restored (bound at an offset where record StartInstanceLocation + i is theirs)
    draw_pd, restorable, run_pd, beneficial = kern.run_facts(
        dr.op, dr.args, dr.pipe, first, length, dr.kind, dr.state, in_lift, dr.eligible, dr.has_nat, dr.pinned,
        cc["pd"], cc["cap"], _DI, _DII, COL_INSTANCES, _DI_SI, _DII_SI, min_direct[_DIRECT], min_direct[_DIRECT_IDX],
        MAX_LIFTED_RECORDS, MAX_RESTORE_RECORDS)
    key = dr.key.copy()
    lifted_run = np.zeros(first.size, bool)
    zone_of = np.full(n, -1, np.int64)
    restored: list[np.ndarray] = []
    rs_cmds = np.flatnonzero(op == _GRS)
    rs_sig = args[rs_cmds, _GRS_ROOTSIG]
    rs_change = rs_cmds[np.r_[True, rs_sig[1:] != rs_sig[:-1]]] if rs_cmds.size else rs_cmds
    opaque = np.flatnonzero(op == _OPAQUE)
    sets = np.flatnonzero(_IS_P_SET[op])
    zid = 0
    for pd in unique(run_pd[(run_pd >= 0) & beneficial]).tolist():
        readers = _readers(stream, table, dr, pd)
        # segments: the stretches between redefinitions of pd (nothing unbinds a root view)
        redef = unique(np.concatenate([sets[args[sets, _P_INDEX] == pd], rs_change, opaque]))
        seg = np.searchsorted(redef, dr.cmd)
        nseg = redef.size + 1
        ok_lift = (run_pd[run_of] == pd)
        ok_restore = restorable & (draw_pd == pd)
        blocking = readers[~(ok_lift[readers] | ok_restore[readers])]
        last_block = np.full(nseg, -1, np.int64)
        np.maximum.at(last_block, seg[blocking], blocking)
        cand = np.flatnonzero((run_pd == pd) & beneficial)
        cand = cand[first[cand] > last_block[seg[first[cand]]]]
        # the zone of a stretch with a run worth lifting: from its first reader after the
        # last blocking one (every reader from there on can read the array)
        has = np.zeros(nseg, bool)
        has[seg[first[cand]]] = True
        after = readers[(readers > last_block[seg[readers]]) & has[seg[readers]]]
        zone = np.full(nseg, n, np.int64)
        np.minimum.at(zone, seg[after], after)
        runs_pd = np.flatnonzero(run_pd == pd)
        take = first[runs_pd] >= zone[seg[first[runs_pd]]]
        take &= (length[runs_pd] >= 2) | ~restorable[first[runs_pd]]   # a single draw: renumbering is cheaper
        lifted_run[runs_pd[take]] = True
        zr = readers[readers >= zone[seg[readers]]]
        zone_of[zr] = zid + seg[zr]
        zid += nseg
        restored.append(zr[~lifted_run[run_of[zr]]])
    fall_back = (in_lift[first] & ~lifted_run)[run_of]   # runs not lifted batch on their state ids
    key[fall_back] = dr.state[fall_back]
    rest = restored[0] if len(restored) == 1 else np.unique(np.concatenate(restored or [np.zeros(0, np.int64)]))
    return key, first[lifted_run], rest, zone_of


def _split(firsts: np.ndarray, lens: np.ndarray, lifted: np.ndarray, limit: int,
           minimum: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batches ``(first draw position, length, lifted)`` of runs split at ``limit``.

    A batch shorter than ``minimum`` (a run's remainder) is left out, except in a
    lifted run, where every draw must be in a multi-draw call.
    """
    nb = (lens + limit - 1) // limit
    rep = np.repeat(np.arange(firsts.size), nb)
    within = np.arange(int(nb.sum())) - np.repeat(np.cumsum(nb) - nb, nb)
    bf = firsts[rep] + within * limit
    bl = np.minimum(lens[rep] - within * limit, limit)
    bli = lifted[rep]
    keep = (bl >= minimum) | bli
    return bf[keep], bl[keep], bli[keep]


def _ranges(firsts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    total = int(lens.sum())
    return np.repeat(firsts - np.r_[0, np.cumsum(lens[:-1])], lens) + np.arange(total)


def _member_records(stream: Stream, dr: _Draws, members: np.ndarray, indexed: bool) -> np.ndarray:
    """The args records of ``members`` in order: a direct draw's arguments, or the records
    a CPU-written indirect draw reads (decoded from its buffer's data: zeros past it)."""
    cpu = dr.cpu_ind[members]
    a = dr.args.take(members, axis=0)
    if not cpu.any():
        return _records_of(a, indexed)
    width = len(_DII_RECORD if indexed else _DI_RECORD)
    multi = (dr.op[members] == _M) | (dr.op[members] == _MI)
    cnt = np.where(cpu & multi, a[:, _MULTI_COUNT], 1)
    buf = np.where(multi, a[:, COL_MULTI_ARGS], a[:, _IND_ARGS])
    owner = np.repeat(np.arange(members.size), cnt)
    i = np.arange(owner.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    byte = np.where(multi, a[:, _MULTI_OFF], a[:, _IND_OFF])[owner] + i * np.where(multi, a[:, _MULTI_STRIDE], 0)[owner]
    out = _records_of(a[owner], indexed)     # a direct draw's own arguments
    rows = np.flatnonzero(cpu[owner])
    if (byte[rows] % 4).any():
        raise ValueError("unaligned word read")
    for b in np.unique(buf[owner[rows]]).tolist():
        r = rows[buf[owner[rows]] == b]
        data = stream.decls[b].data
        w = byte[r, None] // 4 + np.arange(width)
        inside = (w >= 0) & (w < data.size)
        out[r] = np.where(inside, data[np.clip(w, 0, max(data.size - 1, 0))] if data.size else 0, 0)
    return out


def _emit_direct(stream: Stream, dr: _Draws, plan: MdiPlan, k: int, bf: np.ndarray, bl: np.ndarray,
                 blift: np.ndarray, users: _Users) -> None:
    """Batches of members ``bf[b] .. bf[b] + bl[b] - 1`` (draw positions) over generated records.

    A lifted batch renumbers StartInstanceLocation: draw d of the batch starts at the
    batch's first record in its stretch's array plus the number of instances before it
    (filled in by :func:`_emit_sections`), and the array holds one record per instance at
    that index (base vertex, the instance the shader saw, lift items).
    """
    rec = _REC[k]
    indexed = k == _DIRECT_IDX
    members = _ranges(bf, bl)
    cmds = dr.cmd[members]
    recs = _member_records(stream, dr, members, indexed)
    starts = np.r_[0, np.cumsum(bl[:-1])].astype(np.int64)
    nrec = np.add.reduceat(dr.nrec[members], starts)
    rec_starts = np.r_[0, np.cumsum(nrec[:-1])].astype(np.int64)
    nb = bf.size
    plan.replace_parts.append(np.stack([dr.cmd[bf], np.full(nb, _MULTI_OF[k]), nrec, np.full(nb, -1),
                                        plan.args_bytes + rec_starts * rec, np.full(nb, rec)], axis=1).astype(np.int64))
    lb = np.flatnonzero(blift)
    if lb.size:
        u0 = users.add(bf[lb], bl[lb], np.full(lb.size, -1, np.int64))
        rows = _ranges(rec_starts[lb], bl[lb])     # lifted members are direct draws: one record each
        users.fills.append((recs, rows, _SI_FIELD[indexed], u0))
        plan.lifted_batches += int(lb.size)
        plan.lifted_draws += int(bl[lb].sum())
    plan.args_words.append(recs)
    plan.args_bytes += int(recs.shape[0]) * rec
    absorbed = np.ones(members.size, bool)
    absorbed[starts] = False
    plan.remove.append(cmds[absorbed])
    plan.direct_batches += int(nb)
    plan.direct_draws += int(bl.sum())


def _merge_indirect(stream: Stream, cmds: np.ndarray, new_run: np.ndarray, kind: int, limit: int,
                    costs: np.ndarray, model: TargetModel, plan: MdiPlan, whole: bool, kern: Any) -> np.ndarray:
    """Greedy merge of same-state runs of indirect draws (commands ``cmds``, a run starting
    where ``new_run`` is set): each group that :func:`_indirect_groups_py` forms of two or
    more draws becomes one multi-draw call where that costs less. ``whole``: merge a run
    only if all of it is one group. Returns whether each run had a merge."""
    args = stream.args
    multi = (stream.op[cmds] == _M) | (stream.op[cmds] == _MI)
    a = args.take(cmds, axis=0)
    cnt = np.where(multi, a[:, _MULTI_COUNT], 1)
    buf = np.where(multi, a[:, COL_MULTI_ARGS], a[:, _IND_ARGS])
    off = np.where(multi, a[:, _MULTI_OFF], a[:, _IND_OFF])
    gid, gstride = kern.indirect_groups(cnt, buf, off, np.where(multi, a[:, _MULTI_STRIDE], -1), new_run, _REC[kind],
                                        limit)
    gs, glen = _group_starts(gid)
    run = np.cumsum(new_run, dtype=np.int64) - 1
    grun = run[gs]
    nruns = int(run[-1]) + 1 if run.size else 0
    ok = glen >= 2
    if whole:
        ok &= np.bincount(grun, minlength=nruns)[grun] == 1
    total = np.add.reduceat(cnt, gs) if gs.size else np.zeros(0, np.int64)
    gbuf = buf[gs]
    cpu = np.array([bool(getattr(d, "cpu", False)) for d in stream.decls.items] + [False])
    after = model.mdi_call_us + np.where(cpu[gbuf], total * model.mdi_record_us, 0.0)
    ok &= _cheaper(after, costs[cmds], gs, glen)
    g = np.flatnonzero(ok)
    merged = np.zeros(nruns, bool)
    if not g.size:
        return merged
    merged[grun[g]] = True
    plan.replace_parts.append(np.stack([cmds[gs[g]], np.full(g.size, _MULTI_OF[kind]), total[g], gbuf[g],
                                        off[gs[g]], gstride[g]], axis=1).astype(np.int64))
    absorbed = ok[gid]
    absorbed[gs] = False
    plan.remove.append(cmds[absorbed])
    plan.indirect_merges += int(g.size)
    plan.indirect_calls += int(glen[g].sum())
    return merged


# --------------------------------------------------------------------------- rewriting
def apply_plan(stream: Stream, plan: MdiPlan, args_name: str, perdraw_name: str) -> Stream:
    """The rewritten stream: multi-draw calls in place of the first draws (after their
    per-draw binds), absorbed draws removed, generated buffers declared.

    The stream is spliced first (binds inserted, absorbed draws dropped: one gather of its
    columns), then the kept commands the plan rewrites are changed in place at their new
    positions."""
    decls = stream.decls.copy()
    args_index = perdraw_index = -1
    if plan.args_bytes:
        words = np.concatenate([w.reshape(-1) for w in plan.args_words])
        args_index = decls.add(Buffer(args_name, plan.args_bytes, cpu=True, data=words))
    if plan.perdraw_bytes:
        words = np.concatenate(plan.perdraw_words)
        perdraw_index = decls.add(Buffer(perdraw_name, plan.perdraw_bytes, cpu=True, data=words))
    base = Stream(stream.header, decls, stream.op, stream.args, stream.var_off, stream.var_len, stream.pool,
                  stream.flags, stream.line, stream.strings)
    binds = {c: [(vop, (param, perdraw_index, off), ())] for c, vop, param, off in plan.bind.tolist()}
    removed = np.concatenate(plan.remove) if plan.remove else np.zeros(0, np.int64)
    out = splice(base, binds, removed)
    if out.op is stream.op:   # nothing inserted or dropped: the columns are still the input's
        out = Stream(out.header, decls, out.op.copy(), out.args.copy(), out.var_off, out.var_len, out.pool,
                     out.flags.copy(), out.line, out.strings)
    # where each kept command went: after the kept commands and the binds before it
    keep = np.ones(len(stream), np.int64)
    keep[removed] = 0
    kept_before = np.cumsum(keep) - keep
    bind_at = np.sort(plan.bind[:, 0])

    def moved(cmds: np.ndarray) -> np.ndarray:
        assert keep[cmds].all()
        return kept_before[cmds] + np.searchsorted(bind_at, cmds, side="right")

    rep = plan.replace
    if rep.size:
        at = moved(rep[:, 0])
        out.op[at] = rep[:, 1]
        out.args[at] = 0
        out.args[at, _MULTI_COUNT] = rep[:, 2]
        out.args[at, COL_MULTI_ARGS] = np.where(rep[:, 3] < 0, args_index, rep[:, 3])
        out.args[at, _MULTI_OFF] = rep[:, 4]
        out.args[at, _MULTI_STRIDE] = rep[:, 5]
        out.flags[at] = 0
    if plan.sinst.size:
        out.args[moved(plan.sinst[:, 0]), plan.sinst[:, 1]] = plan.sinst[:, 2]
    return out


@dataclass(frozen=True)
class MdiPass(Pass):
    """Turn same-state draws into multi-draw-indirect batches (see the module docstring).

    The pipeline's target (``am.target``) gives the cost model and limits. Options: ``max_count`` (at least 1; unset =
    the target's limit; otherwise the smaller of the two), ``min_batch`` (fewest direct draws
    per batch; the cost model may ask for more), ``lift`` (per-draw data under
    ``draw_data`` contracts).
    """

    name: ClassVar[str] = "mdi"
    requires: ClassVar[tuple[str, ...]] = ("state",)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "batch same-state draws into MultiDraw*Indirect calls"

    max_count: int | None = option(None, min=1, kind=int)
    min_batch: int = option(2, min=1)
    lift: bool = True

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        table = am.get("state", stream)
        plan = plan_mdi(stream, table, target=am.target, max_count=self.max_count or 0,
                        min_batch=self.min_batch, lift=self.lift)
        report: dict[str, Any] = {
            "direct_batches": plan.direct_batches, "direct_draws_batched": plan.direct_draws,
            "lifted_batches": plan.lifted_batches, "lifted_draws": plan.lifted_draws,
            "restored_draws": plan.restored_draws, "renumbered_draws": plan.renumbered_draws,
            "perdraw_binds": plan.perdraw_binds,
            "indirect_merges": plan.indirect_merges, "indirect_calls_merged": plan.indirect_calls,
            "args_bytes": plan.args_bytes, "perdraw_bytes": plan.perdraw_bytes,
        }
        if not plan.replace.size:
            return PassResult.unchanged(stream, **report)
        args_name = stream.decls.free_name("mdi_args")
        perdraw_name = stream.decls.free_name("mdi_perdraw")
        if plan.args_bytes:
            report["args_buffer"] = args_name
        if plan.perdraw_bytes:
            report["perdraw_buffer"] = perdraw_name
        return PassResult(apply_plan(stream, plan, args_name, perdraw_name), True, frozenset(), report)
