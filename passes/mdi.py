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
"""

from __future__ import annotations

__all__ = ["MdiPass", "MdiPlan", "plan_mdi", "args_records", "DrawDataContract", "draw_data_contracts"]

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from drawopt.passes.flush import splice

from drawopt.analysis.costmodel import TargetModel, cost_by_command, get_target, mdi_min_batch
from drawopt.analysis.flushrules import flush_access, forward_fill
from drawopt.analysis.mergeclass import fence_mask
from drawopt.analysis.state import MASKED, NSLOTS, OBS_DRAW, ROOT0, UNDEFINED, StateTable, intern_rows
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig, lift_items, resolve_lift
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import ARGS_SIZE, FLAG_NOMERGE, Stream
from drawopt.passmanager import AnalysisManager, Pass, PassResult, option

_DI = BY_NAME["DrawInstanced"].code
_DII = BY_NAME["DrawIndexedInstanced"].code
_I = BY_NAME["DrawInstancedIndirect"].code
_II = BY_NAME["DrawIndexedInstancedIndirect"].code
_M = BY_NAME["MultiDrawInstancedIndirect"].code
_MI = BY_NAME["MultiDrawIndexedInstancedIndirect"].code
_SRV = BY_NAME["SetGraphicsRootShaderResourceView"].code
_CBV = BY_NAME["SetGraphicsRootConstantBufferView"].code
_P_SETS = np.array([BY_NAME[n].code for n in (
    "SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants", "SetGraphicsRootConstantBufferView",
    "SetGraphicsRootShaderResourceView")], np.uint16)
_GRS = BY_NAME["SetGraphicsRootSignature"].code
_OPAQUE = BY_NAME["Opaque"].code
_COPY = BY_NAME["CopyBufferRegion"].code
_DX = BY_NAME["DrawIndexedX"].code

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
    width = 5 if indexed else 4
    rows = stream.args[cmds, :width]
    return (rows & 0xFFFFFFFF).astype(np.uint32)


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
    """Per pipeline with a ``draw_data`` or ``instance_data`` clause (``Pipeline.array_clause``):
    its contract, or None when the pass cannot use it (P is not a root SRV/CBV of its
    root signature, or a lift item names no value of a root parameter: a word of root
    constants, word 0 of a descriptor table, word 0 or 1 of a root CBV/SRV)."""
    out: dict[int, DrawDataContract | None] = {}
    for i, p in enumerate(decls.items):
        if not isinstance(p, Pipeline) or p.is_compute:
            continue
        clause = p.array_clause
        if clause is None:
            continue
        c = p.contract[clause]
        rs = decls[p.root] if p.root is not None and p.root in decls else None
        out[i] = None
        if not isinstance(rs, RootSig):
            continue
        pd = int(c["perdraw"])
        if not (0 <= pd < len(rs.params) and rs.params[pd].kind in ("srv", "cbv")):
            continue
        try:
            items, kinds = resolve_lift(c.get("lift", ""), rs, pd)
        except ValueError:
            continue
        out[i] = DrawDataContract(pd, _SRV if rs.params[pd].kind == "srv" else _CBV, items,
                                  p.vertex_pulling, tuple(sorted(dict(zip((q for q, _ in items), kinds)).items())))
    return out


def _split_value(v: Any, kind: str, ks: list[int]) -> tuple[list[int], tuple] | None:
    """A root argument's decoded value (:meth:`drawopt.analysis.state.Scan.values`) split into the
    lifted words ``ks`` and the rest, which must be equal across a lifted run (the other
    words of root constants, a table's heap, a root view's buffer and unlifted offset
    word); None when a lifted word is not defined."""
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
        return [int(v[2])], ("table", v[1])
    off = int(v[2])
    return ([(off >> (32 * k)) & 0xFFFFFFFF for k in ks],
            (kind, v[1], tuple((off >> (32 * k)) & 0xFFFFFFFF for k in (0, 1) if k not in ks)))


# --------------------------------------------------------------------------- planning
@dataclass
class MdiPlan:
    """The rewrite.

    ``replace[c] = (opcode, count, buffer, offset, stride)`` puts a multi-draw call at
    command ``c`` (``buffer`` -1: the generated args buffer); ``bind[c] = (opcode,
    root parameter, offset)`` binds the generated per-draw buffer right before it;
    ``sinst[c] = (column, value)`` renumbers direct draw ``c``'s StartInstanceLocation
    (argument ``column``) into its stretch's per-draw array; ``remove``: the draw
    commands absorbed; ``args_words`` / ``perdraw_words``: the generated buffers'
    contents (``args_bytes`` / ``perdraw_bytes`` long).
    """

    replace: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    bind: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    sinst: dict[int, tuple[int, int]] = field(default_factory=dict)
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


@dataclass
class _Draws:
    """Per-draw columns used while planning."""

    cmd: np.ndarray
    state: np.ndarray
    kind: np.ndarray
    eligible: np.ndarray
    key: np.ndarray
    pipe: np.ndarray
    lift_words: dict[int, np.ndarray]  # draw position -> record words 2.. (lifted constants)
    nrec: np.ndarray                   # records each draw command contributes (a multi-draw: its count)
    cpu_ind: np.ndarray                # an indirect draw whose args the CPU wrote (decoded into records)
    nat_words: dict[int, np.ndarray]   # every direct draw reading its lift items natively, pinned ones too
    pinned: np.ndarray                 # @nomerge, never_merge or no graphics pipeline: the draw is kept as it is


def plan_mdi(stream: Stream, table: StateTable, *, target: str | TargetModel = "d3d12",
             max_count: int = 0, min_batch: int = 2, lift: bool = True) -> MdiPlan:
    """Decide the batches (see the module docstring).

    ``table``: the stream's :class:`drawopt.analysis.state.StateTable`. ``lift``: allow
    per-draw data under ``draw_data`` / ``instance_data`` contracts.
    """
    plan = MdiPlan()
    model = get_target(target)
    draws = np.asarray(table.draws, np.int64)
    if not model.mdi or draws.size == 0:
        return plan
    limit = model.mdi_max_count if max_count <= 0 else min(max_count, model.mdi_max_count)
    limit = max(1, int(limit))
    dr = _draw_columns(stream, table, lift and stream.header.kind == "list")
    min_direct = {k: max(int(min_batch), mdi_min_batch(model, indexed=(k == _DIRECT_IDX)), 2)
                  for k in (_DIRECT, _DIRECT_IDX)}
    between_ok = _only_state_between(stream, draws)

    runs = _runs(dr, between_ok)
    contracts = draw_data_contracts(stream.decls)
    lifted = _lifted_runs(stream, table, dr, runs, min_direct, contracts)
    singles = np.zeros(0, np.int64)
    zone_of = np.full(dr.cmd.size, -1, np.int64)
    if lifted is not None:
        dr.key, lifted_first, singles, zone_of = lifted
        dr.eligible[singles] = False   # a zone's single draw stays a direct draw
        runs = _runs(dr, between_ok)
    else:
        lifted_first = set()
    users: list[_User] = []

    first, length = runs
    run_kind = dr.kind[first]
    cpu_before = np.r_[0, np.cumsum(dr.cpu_ind)]
    costs = cost_by_command(stream, model)
    for k in (_DIRECT, _DIRECT_IDX):
        sel = np.flatnonzero((run_kind == k) & dr.eligible[first])
        if not sel.size:
            continue
        is_lift = np.isin(first[sel], np.fromiter(lifted_first, np.int64, len(lifted_first)))
        simple = cpu_before[first[sel] + length[sel]] == cpu_before[first[sel]]   # no CPU-indirect member
        # runs of direct draws only: vectorised split
        vs = simple & (is_lift | (length[sel] >= min_direct[k]))
        if vs.any():
            bf, bl, blift = _split(first[sel[vs]], length[sel[vs]], is_lift[vs], limit, min_direct[k])
            bf, bl, blift = _split_cbv(stream, dr, bf, bl, blift, contracts)
            if bf.size:
                _emit_direct(stream, dr, plan, k, bf, bl, blift, contracts, users, zone_of)
        # runs with CPU-written indirect draws: one progression on one buffer is merged as it
        # is (no copy); anything else is decoded into generated records, batch by batch
        for r in sel[~simple].tolist():
            f, n = int(first[r]), int(length[r])
            pos = np.arange(f, f + n)
            if dr.cpu_ind[pos].all():
                before = plan.indirect_merges
                _merge_indirect(stream, dr.cmd[pos], _IND if k == _DIRECT else _IND_IDX, limit, costs, model, plan,
                                whole=True)
                if plan.indirect_merges > before:
                    continue
            for bpos in _greedy(dr.nrec[pos], limit):
                members = pos[bpos]
                if members.size < 2:
                    continue
                recs = int(dr.nrec[members].sum())
                if model.mdi_call_us + recs * model.mdi_record_us >= float(costs[dr.cmd[members]].sum()):
                    continue
                _emit_direct(stream, dr, plan, k, members[:1], np.array([members.size]), np.zeros(1, bool),
                             contracts, users, zone_of)

    for k in (_IND, _IND_IDX):
        for r in np.flatnonzero((run_kind == k) & (length >= 2) & dr.eligible[first]).tolist():
            idx = draws[first[r]:first[r] + length[r]]
            _merge_indirect(stream, idx, k, limit, costs, model, plan)
    if users or singles.size:
        _emit_sections(stream, dr, plan, users, singles, zone_of, contracts)
    return plan


@dataclass
class _User:
    """A reader of one stretch's per-draw array: a lifted batch, a renumbered single draw
    (``fill`` gives it its first record index) or a pinned draw that gets a restoring
    binding (``restore``: its StartInstanceLocation, records below it are zeros)."""

    cmd: int
    zone: int
    words: np.ndarray                       # one record per instance, in order
    fill: Callable[[int], None] | None = None
    restore: int = -1


def _record_bytes_limit(c: DrawDataContract) -> int:
    """Most bytes one binding of the per-draw array may address: a root CBV sees at most
    :data:`CBV_MAX_BYTES`; a root SRV :data:`MAX_SECTION_RECORDS` records."""
    return CBV_MAX_BYTES if c.view_op == _CBV else MAX_SECTION_RECORDS * 4 * c.words


def _split_cbv(stream: Stream, dr: _Draws, bf: np.ndarray, bl: np.ndarray, blift: np.ndarray,
               contracts: dict[int, DrawDataContract | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lifted batches whose per-instance records one binding cannot address (a root CBV:
    64 KiB) split greedily into batches that it can."""
    if not blift.any():
        return bf, bl, blift
    lim = np.array([_record_bytes_limit(c) // (4 * c.words) if c is not None else 1 << 62
                    for c in (contracts.get(int(p)) for p in dr.pipe[bf].tolist())], np.int64)
    members = _ranges(bf, bl)
    starts = np.r_[0, np.cumsum(bl[:-1])].astype(np.int64)
    ninst = stream.args[dr.cmd[members], 1]     # lifted members are direct draws: one record per instance
    nrec = np.add.reduceat(ninst, starts) if bf.size else np.zeros(0, np.int64)
    over = np.flatnonzero(blift & (nrec > lim))
    if not over.size:
        return bf, bl, blift
    out_f: list[np.ndarray] = []
    out_l: list[np.ndarray] = []
    out_x: list[np.ndarray] = []
    prev = 0
    for b in over.tolist():
        out_f.append(bf[prev:b])
        out_l.append(bl[prev:b])
        out_x.append(blift[prev:b])
        pos = members[starts[b]:starts[b] + bl[b]]
        groups = _greedy(ninst[starts[b]:starts[b] + bl[b]], int(lim[b]))
        out_f.append(np.array([int(pos[g[0]]) for g in groups], np.int64))
        out_l.append(np.array([g.size for g in groups], np.int64))
        out_x.append(np.ones(len(groups), bool))
        prev = b + 1
    out_f.append(bf[prev:])
    out_l.append(bl[prev:])
    out_x.append(blift[prev:])
    return np.concatenate(out_f), np.concatenate(out_l), np.concatenate(out_x)


def _append_perdraw(plan: MdiPlan, words: np.ndarray, view_op: int, lead: int = 0) -> int:
    """Append ``lead`` zero words and then ``words`` to the generated per-draw buffer at the
    next :data:`PERDRAW_ALIGN` (CBV) / :data:`PERDRAW_ALIGN_SRV` boundary; returns that
    boundary's byte offset."""
    align = PERDRAW_ALIGN if view_op == _CBV else PERDRAW_ALIGN_SRV
    at = -(-plan.perdraw_bytes // align) * align
    pad = (at - plan.perdraw_bytes) // 4 + lead   # the buffer holds perdraw_bytes // 4 words so far
    if pad:
        plan.perdraw_words.append(np.zeros(pad, np.uint32))
    plan.perdraw_words.append(words.reshape(-1).astype(np.uint32))
    plan.perdraw_bytes = at + max((lead + words.size) * 4, 4)
    if not lead + words.size:
        plan.perdraw_words.append(np.zeros(1, np.uint32))
    return at


def _single_words(stream: Stream, dr: _Draws, d: int, c: DrawDataContract) -> tuple[np.ndarray, int, int]:
    """The records direct draw ``d`` reads natively, one per instance (base vertex,
    StartInstanceLocation + i, its lift items), its StartInstanceLocation and that
    argument's column."""
    cmd = int(dr.cmd[d])
    a = stream.args[cmd]
    indexed = int(stream.op[cmd]) == _DII
    col = 4 if indexed else 3
    sil = int(a[col]) & 0xFFFFFFFF
    ninst = int(a[1])
    words = np.zeros((ninst, c.words), np.int64)
    words[:, 0] = (int(a[3]) & 0xFFFFFFFF) if indexed else 0
    words[:, 1] = (sil + np.arange(ninst)) & 0xFFFFFFFF
    if c.items:
        words[:, 2:] = dr.nat_words[d] & 0xFFFFFFFF
    return words, sil, col


def _emit_sections(stream: Stream, dr: _Draws, plan: MdiPlan, users: list[_User], singles: np.ndarray,
                   zone_of: np.ndarray, contracts: dict[int, DrawDataContract | None]) -> None:
    """Lay out each stretch's per-draw array and bind it (the module docstring, 2).

    The readers of a stretch's zone, in command order, get consecutive records of one
    array section; a record of stride S sits at a multiple of S from the section start,
    so that each reader's records are at index ``StartInstanceLocation + i``. A pinned
    draw's records go at its own StartInstanceLocation (a new section when the open one
    has passed it). Each section is bound right before its first reader; a new section
    starts where one binding cannot address more (:func:`_record_bytes_limit`).
    """
    for d in singles.tolist():
        c = contracts[int(dr.pipe[d])]
        assert c is not None
        words, sil, col = _single_words(stream, dr, d, c)
        cmd = int(dr.cmd[d])
        if dr.pinned[d]:
            users.append(_User(cmd, int(zone_of[d]), words, restore=sil))
        else:
            def fill(base: int, cmd: int = cmd, col: int = col) -> None:
                plan.sinst[cmd] = (col, base)
            users.append(_User(cmd, int(zone_of[d]), words, fill=fill))
    pipe_of = dict(zip(dr.cmd.tolist(), dr.pipe.tolist()))
    users.sort(key=lambda u: (u.zone, u.cmd))
    i = 0
    while i < len(users):
        j = i
        while j < len(users) and users[j].zone == users[i].zone:
            j += 1
        zone = users[i:j]
        i = j
        c0 = contracts[pipe_of[zone[0].cmd]]
        assert c0 is not None
        vop, pd = c0.view_op, c0.perdraw
        parts: list[np.ndarray] = []
        nbytes = 0
        bound: list[int] = []     # readers that bind the open section
        need_bind = True
        for u in zone:
            c = contracts[pipe_of[u.cmd]]
            assert c is not None and c.perdraw == pd and c.view_op == vop
            stride = 4 * c.words
            if u.restore >= 0:
                # a pinned draw reads records StartInstanceLocation + i: put them there in the
                # open section if it has not reached that index yet, else in a new section
                idx = u.restore
                if idx * stride < nbytes or (idx + u.words.shape[0]) * stride > _record_bytes_limit(c):
                    _close_section(plan, parts, bound, vop, pd)
                    nbytes, need_bind = 0, True
                plan.restored_draws += 1
            else:
                idx = -(-nbytes // stride)
                if parts and (idx + u.words.shape[0]) * stride > _record_bytes_limit(c):
                    _close_section(plan, parts, bound, vop, pd)
                    nbytes, idx, need_bind = 0, 0, True
            if idx * stride > nbytes:
                parts.append(np.zeros((idx * stride - nbytes) // 4, np.int64))
            parts.append(u.words.reshape(-1))
            nbytes = (idx + u.words.shape[0]) * stride
            if u.fill is not None:
                u.fill(idx)
            if need_bind:
                bound.append(u.cmd)
                need_bind = False
        _close_section(plan, parts, bound, vop, pd)
    plan.renumbered_draws = len(plan.sinst)


def _close_section(plan: MdiPlan, parts: list[np.ndarray], bound: list[int], vop: int, pd: int) -> None:
    """Append the open section ``parts`` to the per-draw buffer and bind it at root
    parameter ``pd`` before each command of ``bound``; both lists are emptied."""
    if not parts:
        return
    off = _append_perdraw(plan, np.concatenate(parts), vop)
    for cmd in bound:
        plan.bind[cmd] = (vop, pd, off)
    plan.perdraw_binds += len(bound)
    parts.clear()
    bound.clear()


def _draw_columns(stream: Stream, table: StateTable, lift: bool) -> _Draws:
    decls = stream.decls
    op = stream.op
    draws = np.asarray(table.draws, np.int64)
    state = np.asarray(table.state, np.int64)
    kind = _KIND[op[draws]].astype(np.int8)
    # pinned: @nomerge, never_merge pipelines, and draws without a graphics pipeline
    never = np.array([not isinstance(d, Pipeline) or d.never_merge or d.is_compute for d in decls.items] + [True],
                     bool)
    pso = np.flatnonzero(op == BY_NAME["SetPipelineState"].code)
    pipe = forward_fill(len(stream), pso, stream.args[pso, 0])[draws]
    pinned = ((stream.flags[draws] & FLAG_NOMERGE) != 0) | never[pipe]
    eligible = (kind != _NONE) & ~pinned
    multi = (op[draws] == _M) | (op[draws] == _MI)
    eligible &= ~(multi & (stream.args[draws, 0] == 0))
    key = state.copy()
    lift_words: dict[int, np.ndarray] = {}
    # indirect draws reading args the CPU wrote (declared cpu, with data, no GPU write before)
    nrec = np.where(multi, stream.args[draws, 0], 1).astype(np.int64)
    ind = np.flatnonzero((kind == _IND) | (kind == _IND_IDX))
    cpu_ind = np.zeros(draws.size, bool)
    if ind.size:
        buf = np.where(multi[ind], stream.args[draws[ind], 1], stream.args[draws[ind], 0])
        known = np.array([isinstance(d, Buffer) and d.cpu and d.data is not None for d in decls.items] + [False])
        first_write = _first_writes(stream, table.scan)
        cpu_ind[ind] = known[buf] & (draws[ind] < first_write[buf])
        kind[cpu_ind & (kind == _IND)] = _DIRECT
        kind[cpu_ind & (kind == _IND_IDX)] = _DIRECT_IDX

    contracts = draw_data_contracts(decls)
    nat_words: dict[int, np.ndarray] = {}
    if contracts and table.scan is not None:
        sc = table.scan
        dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
        next_key = int(state.max()) + 1 if state.size else 0
        for i, c in contracts.items():
            # direct draws of the pipeline (pinned ones too: they may get a restoring binding)
            mine = np.flatnonzero((pipe == i) & ((kind == _DIRECT) | (kind == _DIRECT_IDX)) & ~cpu_ind)
            if c is None or not mine.size:
                continue
            raw = sc.values_of(dsel[mine])
            pv = raw[:, ROOT0 + c.perdraw]
            native = (pv == UNDEFINED) & lift   # nothing bound at P: the shader reads the root arguments
            arrayf = pv >= 0           # a buffer is bound at P: the draws already read their records
            # the lifted words, and the rest of each lifted parameter (which must stay equal)
            vals = np.zeros((mine.size, len(c.items)), np.int64)
            rest = np.zeros((mine.size, len(c.params)), np.int64)
            ok = native | arrayf
            rest_ids: dict[tuple, int] = {}
            for j, q in enumerate(c.params):
                ks = [k for qq, k in c.items if qq == q]
                cols = [n for n, (qq, _) in enumerate(c.items) if qq == q]
                qkind = c.kind(q)
                cache: dict[int, tuple[list[int], tuple] | None] = {}
                for r, vid in enumerate(raw[:, ROOT0 + q].tolist()):
                    if vid not in cache:
                        cache[vid] = _split_value(sc.values.decode(vid) if vid >= 0 else None, qkind, ks)
                    got = cache[vid]
                    if got is None:
                        ok[r] = False
                        continue
                    vals[r, cols] = got[0]
                    rest[r, j] = rest_ids.setdefault((q, got[1]), len(rest_ids))
            for d, v in zip(mine[ok & native].tolist(), vals[ok & native]):
                nat_words[d] = v
            sel = ok & eligible[mine]
            if not sel.any():
                continue
            cand = mine[sel]
            nat = native[sel]
            rows = table.rows[state[cand]].copy()
            for q in c.params:
                rows[:, ROOT0 + q] = MASKED
            rows[nat, ROOT0 + c.perdraw] = MASKED
            rows = np.concatenate([rows, rest[sel], np.full((cand.size, 1), i, np.int64),
                                   nat[:, None].astype(np.int64)], axis=1)
            ids, _ = intern_rows(rows)
            key[cand] = next_key + ids
            next_key += int(ids.max()) + 1
            for d in cand[nat].tolist():
                lift_words[d] = nat_words[d]
    assert table.rows.shape[1] == NSLOTS
    return _Draws(draws, state, kind, eligible, key, pipe, lift_words, nrec, cpu_ind, nat_words, pinned)


def _first_writes(stream: Stream, sc: Any = None) -> np.ndarray:
    """Per declaration index (plus one): the first command that writes it on the GPU
    (a UAV write by :mod:`drawopt.analysis.access`'s rule, or a copy destination); ``int64`` max
    where none does. ``sc``: the stream's state scan, if known."""
    acc = flush_access(stream, sc)
    out = np.full(len(stream.decls) + 1, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, acc.w_res, acc.w_cmd)
    cp = np.flatnonzero(stream.op == _COPY)
    np.minimum.at(out, stream.args[cp, 0], cp)
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
    sc = table.scan
    assert sc is not None
    dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
    mask = sc.read_mask(dsel)[:, ROOT0 + pd].copy()
    is_x = stream.op[dr.cmd] == _DX
    for i, p in enumerate(stream.decls.items):
        if not isinstance(p, Pipeline):
            continue
        named = [n for n, c in p.contract.items() if n in ("x", "instance_data", "draw_data")
                 and c.get("perdraw") == str(pd)]
        if not named:
            continue
        mine = dr.pipe == i
        mask |= mine
        ac = p.array_clause
        x = p.contract.get("x")
        if ac in named and x is not None and p.vertex_pulling and x.get("perdraw") != str(pd) and \
                pd not in {q for q, _ in lift_items(x.get("lift", ""))}:
            mask &= ~(mine & is_x)
    return np.flatnonzero(mask)


def _lifted_runs(stream: Stream, table: StateTable, dr: _Draws, runs: tuple[np.ndarray, np.ndarray],
                 min_direct: dict[int, int], contracts: dict[int, DrawDataContract | None]
                 ) -> tuple[np.ndarray, set[int], np.ndarray, np.ndarray] | None:
    """Decide each stretch's zone: which runs are lifted and which single draws read the
    stretch's array (renumbered, or restored when pinned) (the module docstring, 2).

    Returns the keys to batch with (runs not lifted fall back to their state ids), the
    first draw position of each lifted run, the zone's single draws, and per draw
    position its zone (-1: none; one id per parameter and stretch).
    """
    if not dr.lift_words:
        return None
    first, length = runs
    decls = stream.decls
    op, args = stream.op, stream.args
    n = dr.cmd.size
    run_of = np.repeat(np.arange(first.size), length)
    direct = np.isin(op[dr.cmd], (_DI, _DII))
    inst = np.where(direct, args[dr.cmd, 1], 0)
    sil = np.where(op[dr.cmd] == _DII, args[dr.cmd, 4], args[dr.cmd, 3]) & 0xFFFFFFFF
    run_inst = np.add.reduceat(inst, first) if first.size else np.zeros(0, np.int64)
    pd_of = np.full(len(decls) + 1, -1, np.int64)
    cap_of = np.zeros(len(decls) + 1, np.int64)   # records one binding of the array may address
    for i, c in contracts.items():
        if c is not None:
            pd_of[i] = c.perdraw
            cap_of[i] = _record_bytes_limit(c) // (4 * c.words)
    draw_pd = pd_of[dr.pipe]
    cap = cap_of[dr.pipe]
    fits = inst <= cap
    in_lift = np.zeros(n, bool)
    in_lift[np.fromiter(dr.lift_words, np.int64, len(dr.lift_words))] = True
    run_fits = np.minimum.reduceat(fits.astype(np.int8), first) == 1 if first.size else np.zeros(0, bool)
    liftable_run = in_lift[first] & dr.eligible[first] & (run_inst <= MAX_LIFTED_RECORDS) & run_fits
    # single draws that can read the array: renumbered (StartInstanceLocation rewritten) or,
    # when pinned, restored (bound at an offset where record StartInstanceLocation + i is theirs)
    restorable = np.zeros(n, bool)
    if dr.nat_words:
        nw = np.fromiter(dr.nat_words, np.int64, len(dr.nat_words))
        reach = sil[nw] + inst[nw]
        restorable[nw] = direct[nw] & np.where(dr.pinned[nw], (reach <= MAX_RESTORE_RECORDS) & (reach <= cap[nw]),
                                               fits[nw])
    run_pd = np.where(liftable_run, draw_pd[first], -1)
    beneficial = np.zeros(first.size, bool)
    for k, m in min_direct.items():
        beneficial |= (dr.kind[first] == k) & (length >= m)
    if n:
        same = np.r_[True, dr.state[1:] == dr.state[:-1]]
        differs = np.add.reduceat((~same).astype(np.int64), first) - (~same[first]).astype(np.int64) > 0
        beneficial &= differs   # same state everywhere: nothing to lift (an ordinary batch)
    key = dr.key.copy()
    lifted_run = np.zeros(first.size, bool)
    zone_of = np.full(n, -1, np.int64)
    restored: list[np.ndarray] = []
    rs_cmds = np.flatnonzero(op == _GRS)
    rs_change = rs_cmds[np.r_[True, args[rs_cmds[1:], 0] != args[rs_cmds[:-1], 0]]] if rs_cmds.size else rs_cmds
    opaque = np.flatnonzero(op == _OPAQUE)
    sets = np.flatnonzero(np.isin(op, _P_SETS))
    zid = 0
    for pd in np.unique(run_pd[(run_pd >= 0) & beneficial]).tolist():
        readers = _readers(stream, table, dr, pd)
        # segments: the stretches between redefinitions of pd (nothing unbinds a root view)
        redef = np.unique(np.concatenate([sets[args[sets, 0] == pd], rs_change, opaque]))
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
    for r in np.flatnonzero(in_lift[first] & ~lifted_run).tolist():
        f, ln = int(first[r]), int(length[r])
        key[f:f + ln] = dr.state[f:f + ln]
    rest = np.unique(np.concatenate(restored)) if restored else np.zeros(0, np.int64)
    return key, set(first[lifted_run].tolist()), rest, zone_of



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


def _greedy(nrec: np.ndarray, limit: int) -> list[np.ndarray]:
    """Consecutive groups of members (indices into ``nrec``) holding at most ``limit`` records."""
    out: list[np.ndarray] = []
    cur: list[int] = []
    total = 0
    for i, r in enumerate(nrec.tolist()):
        if cur and total + r > limit:
            out.append(np.asarray(cur, np.int64))
            cur, total = [], 0
        cur.append(i)
        total += r
    if cur:
        out.append(np.asarray(cur, np.int64))
    return out


def _member_records(stream: Stream, dr: _Draws, members: np.ndarray, indexed: bool) -> np.ndarray:
    """The args records of ``members`` in order: a direct draw's arguments, or the records
    a CPU-written indirect draw reads (decoded from its buffer's data)."""
    cmds = dr.cmd[members]
    if not dr.cpu_ind[members].any():
        return args_records(stream, cmds, indexed)
    width = 5 if indexed else 4
    rows: list[np.ndarray] = []
    for m, c in zip(members.tolist(), cmds.tolist()):
        if not dr.cpu_ind[m]:
            rows.append(args_records(stream, np.array([c]), indexed))
            continue
        a = stream.args[c]
        if int(stream.op[c]) in (_M, _MI):
            cnt, buf, off, stride = int(a[0]), int(a[1]), int(a[2]), int(a[3])
        else:
            cnt, buf, off, stride = 1, int(a[0]), int(a[1]), 0
        d = stream.decls[buf]
        rows.append(np.stack([d.words(off + i * stride, width) for i in range(cnt)]))
    return np.concatenate(rows).astype(np.uint32)


def _emit_direct(stream: Stream, dr: _Draws, plan: MdiPlan, k: int, bf: np.ndarray, bl: np.ndarray,
                 blift: np.ndarray, contracts: dict[int, DrawDataContract | None], users: list[_User],
                 zone_of: np.ndarray) -> None:
    """Batches of members ``bf[b] .. bf[b] + bl[b] - 1`` (draw positions) over generated records.

    A lifted batch renumbers StartInstanceLocation: draw d of the batch starts at the
    batch's first record in its stretch's array plus the number of instances before it
    (filled in by :func:`_emit_sections`), and the array holds one record per instance at
    that index (base vertex, the instance the shader saw, lift items).
    """
    rec = _REC[k]
    indexed = k == _DIRECT_IDX
    sinst_col = 4 if indexed else 3
    members = _ranges(bf, bl)
    cmds = dr.cmd[members]
    recs = _member_records(stream, dr, members, indexed)
    starts = np.r_[0, np.cumsum(bl[:-1])].astype(np.int64)
    nrec = np.add.reduceat(dr.nrec[members], starts)
    rec_starts = np.r_[0, np.cumsum(nrec[:-1])].astype(np.int64)
    batch_off = plan.args_bytes + rec_starts * rec
    code = _MULTI_OF[k]
    for b, (f, cnt, o) in enumerate(zip(dr.cmd[bf].tolist(), nrec.tolist(), batch_off.tolist())):
        plan.replace[f] = (code, cnt, -1, o, rec)
        if not blift[b]:
            continue
        c = contracts[int(dr.pipe[bf[b]])]
        assert c is not None
        ln = int(bl[b])
        pos = members[starts[b]:starts[b] + ln]
        a = stream.args[dr.cmd[pos]]
        ninst = a[:, 1]
        first = np.r_[0, np.cumsum(ninst[:-1])].astype(np.int64)
        rows = slice(int(rec_starts[b]), int(rec_starts[b]) + ln)   # lifted members are direct draws
        owner = np.repeat(np.arange(ln), ninst)
        inst = np.arange(owner.size) - first[owner]
        words = np.zeros((owner.size, c.words), np.int64)
        words[:, 0] = (a[owner, 3] & 0xFFFFFFFF) if indexed else 0           # BaseVertexLocation
        words[:, 1] = (a[owner, sinst_col] + inst) & 0xFFFFFFFF                # the instance seen
        if c.items:
            lw = np.stack([dr.lift_words[int(p)] for p in pos.tolist()])
            words[:, 2:] = lw[owner] & 0xFFFFFFFF

        def fill(base: int, rows: slice = rows, first: np.ndarray = first) -> None:
            recs[rows, sinst_col] = (base + first).astype(np.uint32)
        users.append(_User(f, int(zone_of[bf[b]]), words, fill=fill))
        plan.lifted_batches += 1
        plan.lifted_draws += ln
    plan.args_words.append(recs)
    plan.args_bytes += int(recs.shape[0]) * rec
    absorbed = np.ones(members.size, bool)
    absorbed[starts] = False
    plan.remove.append(cmds[absorbed])
    plan.direct_batches += int(bf.size)
    plan.direct_draws += int(bl.sum())


def _merge_indirect(stream: Stream, idx: np.ndarray, kind: int, limit: int, costs: np.ndarray,
                    model: TargetModel, plan: MdiPlan, whole: bool = False) -> None:
    """Greedy merge of one same-state run of indirect draws (command indices ``idx``).

    ``whole``: merge only if the whole run is one progression (else change nothing).
    """
    rec = _REC[kind]
    code = _MULTI_OF[kind]
    args = stream.args
    groups: list[tuple[list[int], int, int, int, int]] = []  # (commands, buffer, offset, count, stride)
    cur: list[int] = []
    g_buf = g_off = g_n = 0
    g_stride = -1
    for c in idx.tolist():
        if int(stream.op[c]) in (_M, _MI):
            cnt, buf, off, st = (int(x) for x in args[c, :4])
        else:
            buf, off = int(args[c, 0]), int(args[c, 1])
            cnt, st = 1, -1
        if cur:
            ok = buf == g_buf and g_n + cnt <= limit
            if ok:
                want = off - g_off
                if g_stride < 0:  # stride not fixed yet: the group is one single draw
                    ok = want >= rec and want % 4 == 0 and (cnt == 1 or st == want)
                    if ok:
                        g_stride = want
                else:
                    ok = want == g_n * g_stride and (cnt == 1 or st == g_stride)
            if ok:
                cur.append(c)
                g_n += cnt
                continue
            groups.append((cur, g_buf, g_off, g_n, g_stride))
        cur = [c]
        g_buf, g_off, g_n = buf, off, cnt
        g_stride = st if cnt > 1 else -1
    if cur:
        groups.append((cur, g_buf, g_off, g_n, g_stride))
    if whole and len(groups) != 1:
        return
    for g, buf, off, total, stride in groups:
        if len(g) < 2:
            continue
        d = stream.decls[buf]
        after = model.mdi_call_us + (total * model.mdi_record_us if getattr(d, "cpu", False) else 0.0)
        if after >= float(costs[np.asarray(g)].sum()):
            continue
        plan.replace[g[0]] = (code, total, buf, off, stride)
        plan.remove.append(np.asarray(g[1:], np.int64))
        plan.indirect_merges += 1
        plan.indirect_calls += len(g)


# --------------------------------------------------------------------------- rewriting
def apply_plan(stream: Stream, plan: MdiPlan, args_name: str, perdraw_name: str) -> Stream:
    """The rewritten stream: multi-draw calls in place of the first draws (after their
    per-draw binds), absorbed draws removed, generated buffers declared."""
    decls = stream.decls.copy()
    args_index = perdraw_index = -1
    if plan.args_bytes:
        words = np.concatenate([w.reshape(-1) for w in plan.args_words])
        args_index = decls.add(Buffer(args_name, plan.args_bytes, cpu=True, data=words))
    if plan.perdraw_bytes:
        words = np.concatenate(plan.perdraw_words)
        perdraw_index = decls.add(Buffer(perdraw_name, plan.perdraw_bytes, cpu=True, data=words))
    op = stream.op.copy()
    args = stream.args.copy()
    flags = stream.flags.copy()
    if plan.replace:
        at = np.fromiter(plan.replace.keys(), np.int64, len(plan.replace))
        vals = np.array(list(plan.replace.values()), np.int64)
        op[at] = vals[:, 0]
        args[at] = 0
        args[at, 0] = vals[:, 1]
        args[at, 1] = np.where(vals[:, 2] < 0, args_index, vals[:, 2])
        args[at, 2] = vals[:, 3]
        args[at, 3] = vals[:, 4]
        flags[at] = 0
    if plan.sinst:
        at = np.fromiter(plan.sinst.keys(), np.int64, len(plan.sinst))
        vals = np.array(list(plan.sinst.values()), np.int64).reshape(-1, 2)
        args[at, vals[:, 0]] = vals[:, 1]
    out = Stream(stream.header, decls, op, args, stream.var_off, stream.var_len, stream.pool, flags,
                 stream.line, stream.strings)
    binds = {c: [(vop, (param, perdraw_index, off), ())] for c, (vop, param, off) in plan.bind.items()}
    removed = np.concatenate(plan.remove) if plan.remove else np.zeros(0, np.int64)
    return splice(out, binds, removed)


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
        if not plan.replace:
            return PassResult.unchanged(stream, **report)
        args_name = stream.decls.free_name("mdi_args")
        perdraw_name = stream.decls.free_name("mdi_perdraw")
        if plan.args_bytes:
            report["args_buffer"] = args_name
        if plan.perdraw_bytes:
            report["perdraw_buffer"] = perdraw_name
        return PassResult(apply_plan(stream, plan, args_name, perdraw_name), True, frozenset(), report)
