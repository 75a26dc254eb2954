"""Merge classes: the exact test behind every merging rewrite, and the lower bound they imply.

Each rewrite that turns several draws into one call has one exact test, written
as data (a :class:`MergeRule`): "equal except these named fields", the fields
that must continue each other, and what the pipeline's contract must promise.
``merge-instances``, ``mdi``, ``pack-x``, ``schedule`` (its sort key),
``explain`` and the lower bound all read the same rules, so what a pass does,
what the report promises and what ``explain`` says never drift apart.

The rules (docs/passes.md has the reasoning)
--------------------------------------------
``instances``
    ``DrawInstanced`` / ``DrawIndexedInstanced`` with the same normalised state and
    equal arguments except ``instance_count`` / ``start_instance``, where the next
    draw's ``start_instance`` continues the previous one's range. ``SV_InstanceID``
    restarts at 0 for each draw (it excludes StartInstanceLocation), so the merge is
    invisible only to a shader that does not see it: a pipeline with a per-draw
    contract (``instance_data``, ``draw_data``, or ``x`` on a vertex-pulling
    pipeline), which is what the verifier accepts.
``ranges``
    The same draw with equal arguments except the vertex (index) range, where the
    next range starts where the previous one ended, one instance each at the same
    ``start_instance``, the same ``base_vertex``, a list topology (points, lines,
    triangles, patches: strips would join across the seam) and a whole number of
    primitives in the first draw. ``SV_PrimitiveID`` of the second draw's
    primitives changes, so the pipeline must declare ``no_primitive_id``.
    ``SV_VertexID`` is unchanged (the index value for indexed draws, the absolute
    vertex for non-indexed ones).
``mdi``
    Direct draws of one kind (indexed or not) and CPU-known indirect draws with the
    same normalised state become one multi-draw call; any arguments. Under a
    ``draw_data`` / ``instance_data`` contract the root arguments it lifts may differ
    (mdi moves them into a generated per-draw array). ``Auto`` variants (a GPU-written
    count) never merge.
``mdi-indirect``
    Consecutive indirect draws of one kind, same state, reading one args buffer at
    offsets ``O, O+S, O+2S, ...`` become one multi-draw call (GPU-written args too).
``pack-x``
    ``DrawIndexedInstanced`` / ``DrawIndexedX`` of a vertex-pulling pipeline with an
    ``x`` contract, equal state except the index buffer and the contract's per-draw
    root parameters (``perdraw``, ``lift``; whole parameters here, while pack-x
    itself compares the words a lift leaves): consecutive ``DrawIndexedX`` calls the
    GPU wave-packs (one GPU batch, still one call each). The pass's own test is in
    docs/pack-x.md.

Normalisation before comparing: **vertex-buffer windows**. For a pipeline with an
input layout that declares ``no_primitive_id``, a draw whose only vertex buffer is
input slot 0, bound at byte offset ``off`` with stride ``s``, is compared as if
bound at ``off mod s`` with ``start_vertex`` (``base_vertex`` for indexed draws)
increased by ``off div s``: the input assembler fetches vertex ``v`` from
``off + v*s`` either way. This assumes (and is the reading of the contract that
the verifier must share) that such a pipeline's slot 0 carries per-vertex data and
that its shaders do not read ``SV_PrimitiveID``; for a non-indexed draw, whose
``SV_VertexID`` counts from ``start_vertex``, the pipeline must also declare
``no_vertex_id`` (indexed draws keep their SV_VertexID: it excludes the base).

Draws flagged ``@nomerge`` and draws of ``never_merge`` pipelines are in no class
with any other draw.
"""

from __future__ import annotations

__all__ = [
    "MergeRule", "RULES", "INSTANCES", "RANGES", "MDI", "MDI_INDIRECT", "PACK_X", "VERTS_PER_PRIM",
    "DrawFacts", "draw_facts", "state_keys", "call_classes", "adjacent_links", "Link",
    "fence_mask", "draw_segments", "perdraw_params",
]

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from drawopt.analysis.state import (
    MASKED,
    NSLOTS,
    PIPELINE,
    ROOT0,
    SLOT_INDEX,
    TOPOLOGY,
    UNKNOWN,
    VB,
    Scan,
    StateTable,
    intern_rows,
)
from drawopt.ir.arrayset import unique
from drawopt.ir.decls import PERDRAW_CLAUSES, Buffer, Pipeline
from drawopt.ir.ops import BY_NAME, COL_DRAW_COUNT, COL_INSTANCES, COL_PIPELINE, MAX_OPCODE, Cat, Op
from drawopt.ir.stream import FLAG_NOMERGE, Stream

VERTS_PER_PRIM = {"POINTLIST": 1, "LINELIST": 2, "TRIANGLELIST": 3, "LINELIST_ADJ": 4,
                  "TRIANGLELIST_ADJ": 6, "PATCHLIST_3": 3, "PATCHLIST_4": 4}
"""Topologies whose draws split cleanly into primitives (strips do not)."""

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_DI, _DII, _DX = _OP["DrawInstanced"], _OP["DrawIndexedInstanced"], _OP["DrawIndexedX"]
_SINGLE_IND = (_OP["DrawInstancedIndirect"], _OP["DrawIndexedInstancedIndirect"])
_MULTI = (_OP["MultiDrawInstancedIndirect"], _OP["MultiDrawIndexedInstancedIndirect"])
_AUTO = (_OP["MultiDrawInstancedIndirectAuto"], _OP["MultiDrawIndexedInstancedIndirectAuto"])


def opcode_mask(codes: tuple[int, ...] | np.ndarray) -> np.ndarray:
    """``bool[1 << 16]`` by opcode: whether it is one of ``codes`` (``mask[op]`` is
    ``np.isin(op, codes)`` by one lookup instead of a sort; opcodes are ``uint16``).

    >>> opcode_mask((3, 5))[np.array([3, 4, 5])].tolist()
    [True, False, True]
    """
    m = np.zeros(1 << 16, bool)
    m[np.asarray(codes, np.int64)] = True
    m.flags.writeable = False
    return m


_IS_DIRECT = opcode_mask((_DI, _DII))
_IS_MULTI = opcode_mask(_MULTI)
_IS_INDIRECT = opcode_mask((*_SINGLE_IND, *_MULTI))
_IS_AUTO = opcode_mask(_AUTO)
_DI_START_VERTEX = Op.DrawInstanced.col("start_vertex")
_DII_BASE_VERTEX = Op.DrawIndexedInstanced.col("base_vertex")
_SINGLE_ARGS_BUFFER = Op.DrawInstancedIndirect.col("args_buffer")  # the same in the indexed variants
_MULTI_ARGS_BUFFER = Op.MultiDrawInstancedIndirect.col("args_buffer")
_INDEXED = np.zeros(MAX_OPCODE + 1, bool)
_INDEXED[[_DII, _DX, _OP["DrawIndexedInstancedIndirect"], _OP["MultiDrawIndexedInstancedIndirect"],
          _OP["MultiDrawIndexedInstancedIndirectAuto"]]] = True


@dataclass(frozen=True)
class MergeRule:
    """One rewrite's exact merge test: equal except ``differ``, with ``contiguous`` fields continuing.

    Attributes
    ----------
    name : str
        The rule's name (``explain`` and docs use it).
    pass_name : str
        The pass that applies it.
    differ : mapping
        Draw command name -> the arguments that may differ; every other argument of
        the two draws must be equal. Commands not listed are outside the rule.
    contiguous : mapping
        Command name -> ``(start, count)``: the next draw's ``start`` must equal the
        previous draw's ``start + count``.
    state_except : tuple of str
        State slots (:data:`drawopt.analysis.state.SLOTS`) that may differ; ``"perdraw"``
        stands for the root parameters a pipeline's per-draw contract names
        (``perdraw`` and ``lift``).
    requires : tuple of str
        Conditions on the pipeline / draws (see :data:`REQUIREMENTS`).
    """

    name: str
    pass_name: str
    differ: Mapping[str, tuple[str, ...]]
    contiguous: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    state_except: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    doc: str = ""

    def codes(self) -> np.ndarray:
        return np.array(sorted(_OP[n] for n in self.differ), np.int64)


REQUIREMENTS = {
    "instance_id_free": "the pipeline has a per-draw contract (instance_data, draw_data, or x on a "
                        "vertex-pulling pipeline): its shaders do not see SV_InstanceID restart",
    "no_primitive_id": "the pipeline's contract declares no_primitive_id",
    "list_topology": "the topology in force is a list (points, lines, triangles, patches)",
    "whole_primitives": "the first draw's count is a whole number of primitives",
    "single_instance": "both draws draw one instance, at the same start_instance",
    "x_contract": "the pipeline pulls its vertices and declares an x contract",
    "same_args_buffer": "both read one args buffer, at offsets in a fixed-stride progression",
}
"""What each ``requires`` entry means (for docs and ``explain``)."""

INSTANCES = MergeRule(
    "instances", "merge-instances",
    differ={"DrawInstanced": ("instance_count", "start_instance"),
            "DrawIndexedInstanced": ("instance_count", "start_instance")},
    contiguous={"DrawInstanced": ("start_instance", "instance_count"),
                "DrawIndexedInstanced": ("start_instance", "instance_count")},
    requires=("instance_id_free",),
    doc="consecutive identical draws with contiguous instance ranges become one instanced draw")
RANGES = MergeRule(
    "ranges", "merge-instances",
    differ={"DrawInstanced": ("vertex_count", "start_vertex"),
            "DrawIndexedInstanced": ("index_count", "start_index")},
    contiguous={"DrawInstanced": ("start_vertex", "vertex_count"),
                "DrawIndexedInstanced": ("start_index", "index_count")},
    requires=("no_primitive_id", "list_topology", "whole_primitives", "single_instance"),
    doc="consecutive draws with contiguous vertex (index) ranges and the same base become one")
_ALL_ARGS = {n: tuple(a.name for a in BY_NAME[n].args) for n in (
    "DrawInstanced", "DrawIndexedInstanced", "DrawInstancedIndirect", "DrawIndexedInstancedIndirect",
    "MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect")}
MDI = MergeRule(
    "mdi", "mdi", differ=_ALL_ARGS, state_except=("draw_data", "instance_data"),
    doc="same-state draws of one kind become one MultiDraw[Indexed]InstancedIndirect over generated args; "
        "under a draw_data contract the lifted root constants may differ (they move into a per-draw array)")
MDI_INDIRECT = MergeRule(
    "mdi-indirect", "mdi",
    differ={n: ("offset", "count") for n in ("DrawInstancedIndirect", "DrawIndexedInstancedIndirect",
                                             "MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect")},
    requires=("same_args_buffer",),
    doc="consecutive indirect draws reading one args buffer at a fixed stride become one multi-draw")
PACK_X = MergeRule(
    "pack-x", "pack-x",
    differ={"DrawIndexedInstanced": _ALL_ARGS["DrawIndexedInstanced"],
            "DrawIndexedX": tuple(a.name for a in BY_NAME["DrawIndexedX"].args)},
    state_except=("index_buffer", "x"), requires=("x_contract",),
    doc="consecutive DrawIndexedX of one pack class share waves (one GPU batch)")
RULES: dict[str, MergeRule] = {r.name: r for r in (INSTANCES, RANGES, MDI, MDI_INDIRECT, PACK_X)}
"""Every rule, by name."""


# ---------------------------------------------------------------------- per-draw facts
@dataclass(eq=False)
class DrawFacts:
    """Columnar facts about every draw of a stream that the merge tests read.

    Attributes
    ----------
    cmd : int64[D]
        Command index of each draw.
    op : int64[D]
        Opcode.
    args : int64[D, 6]
        Fixed arguments (with ``start_vertex`` / ``base_vertex`` shifted by the
        vertex-buffer window fold where it applies: see ``shift``).
    sid : int64[D]
        State id (:attr:`drawopt.analysis.state.StateTable.state`).
    nstate : int64[D]
        Normalised state id: equal for draws whose states are equal after the
        vertex-buffer window fold (ids in first-appearance order).
    pipe : int64[D]
        Pipeline declaration index (-1: none or unknown).
    pinned : bool[D]
        ``@nomerge`` or a ``never_merge`` pipeline.
    vpp : int64[D]
        Vertices per primitive of the topology in force (0: a strip or unknown).
    shift : int64[D]
        Vertices the window fold adds to the start vertex (0 where it does not apply).
    folded : bool[D]
        The window fold applies.
    indexed : bool[D]
        The draw reads indices.
    """

    stream: Stream
    table: StateTable
    cmd: np.ndarray
    op: np.ndarray
    args: np.ndarray
    sid: np.ndarray
    nstate: np.ndarray
    pipe: np.ndarray
    pinned: np.ndarray
    vpp: np.ndarray
    shift: np.ndarray
    folded: np.ndarray
    indexed: np.ndarray
    nrows: np.ndarray = field(repr=False)
    """Normalised rows (``int32[U, NSLOTS]`` like the table's; ``int64`` where a vertex-buffer
    window was folded: its key is below -2**40) of each ``nstate`` (read-only: it may be the
    table's)."""
    between: np.ndarray | None = field(default=None, repr=False)
    """Per consecutive pair of draws: a non-state command lies between them (computed by the
    first :func:`adjacent_links` and kept: every rule reads it)."""
    pipe_facts: dict[str, np.ndarray] | None = field(default=None, repr=False)
    """The stream's per-declaration pipeline facts (``_pipe_facts``), as :func:`draw_facts` found
    them: :func:`adjacent_links` reads them for every rule instead of walking the declarations again."""

    def __len__(self) -> int:
        return int(self.cmd.shape[0])

    def pipeline(self, i: int) -> Pipeline | None:
        p = int(self.pipe[i])
        d = self.stream.decls[p] if p >= 0 else None
        return d if isinstance(d, Pipeline) else None


def _pipe_facts(stream: Stream) -> dict[str, np.ndarray]:
    """Per declaration index (plus a trailing "no pipeline" entry): pipeline facts."""
    n = len(stream.decls) + 1
    out = {k: np.zeros(n, bool) for k in ("never_merge", "no_prim", "no_vid", "layout", "inst_free", "x_ok",
                                          "compute")}
    for i, d in enumerate(stream.decls.items):
        if not isinstance(d, Pipeline):
            continue
        out["never_merge"][i] = d.never_merge
        out["no_prim"][i] = d.contract.no_primitive_id
        out["no_vid"][i] = d.contract.no_vertex_id
        out["layout"][i] = not d.vertex_pulling
        out["x_ok"][i] = d.x_clause is not None
        out["inst_free"][i] = out["x_ok"][i] or d.contract.array is not None
        out["compute"][i] = d.is_compute
    return out


def perdraw_params(p: Pipeline | None, clauses: tuple[str, ...] = PERDRAW_CLAUSES) -> tuple[int, ...]:
    """Root parameters a pipeline's per-draw contract names (``perdraw`` and every ``lift`` source).

    ``clauses``: the contract clauses that count (an ``x`` contract counts only on a
    vertex-pulling pipeline).
    """
    if p is None:
        return ()
    for clause in PERDRAW_CLAUSES:
        c = p.contract.clause(clause) if clause in clauses else None
        if c is not None and (clause != "x" or p.vertex_pulling):
            return c.named_params
    return ()


def _vb_fold(sc: Scan, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vertex-buffer window fold of value ids ``ids``: ``(ok, shift, key)``.

    A value folds when it is exactly one binding, in slot 0, with a stride > 0 and no
    unknown part; its window is ``(buffer, offset % stride, stride)`` and its shift
    ``offset // stride``. ``key``: ``-(1 << 40) - k`` with ``k`` the window numbered in
    first-appearance order along ``ids`` (distinct from every value id and marker).
    """
    ok, buf, off, stride = sc.vb_single_binding(ids)
    ok &= stride > 0
    n = ok.shape[0]
    shift = np.zeros(n, np.int64)
    key = np.zeros(n, np.int64)
    if ok.any():
        st = stride[ok]
        kid, _ = intern_rows(np.stack([buf[ok], off[ok] % st, st], axis=1))
        shift[ok] = off[ok] // st
        key[ok] = -(1 << 40) - kid
    return ok, shift, key


def _first_appearance(ids: np.ndarray) -> bool:
    """``ids`` are ``0..k`` numbered in order of first appearance (each new id is one more
    than every id before it).

    >>> _first_appearance(np.array([0, 1, 0, 2, 1])), _first_appearance(np.array([0, 2, 1]))
    (True, False)
    """
    if ids.size == 0:
        return True
    if int(ids[0]) != 0 or int(ids.min()) < 0:
        return False
    return bool((ids[1:] <= np.maximum.accumulate(ids)[:-1] + 1).all())


def _distinct_rows(sc: Scan, rows: np.ndarray) -> bool:
    """Whether the draw states ``rows`` (a state table's) are known to be pairwise distinct
    without interning them: the table interns a draw's row with an Opaque epoch only where
    the row holds an unknown (or partly unknown) value
    (:meth:`drawopt.analysis.state.StateTable.first_difference`), so rows without one are
    distinct. False: not known (the caller interns them)."""
    return not sc.values.partial_mask().any() and not (rows == UNKNOWN).any()


def _is_arange(a: np.ndarray) -> bool:
    return bool(a.ndim == 1 and (a == np.arange(a.shape[0])).all())


def _verts_per_prim(sc: Scan, topo: np.ndarray) -> np.ndarray:
    """Vertices per primitive (:data:`VERTS_PER_PRIM`; 0: a strip or unknown) of each topology value id."""
    out = np.zeros(topo.shape[0], np.int64)
    if not topo.size:
        return out
    lo = min(int(topo.min()), 0)
    span = int(topo.max()) - lo + 1
    if span > 4 * topo.size + 4096:  # sparse ids: a mask per distinct value
        for v in np.unique(topo).tolist():
            out[topo == v] = _vpp_of(sc, v)
        return out
    lut = np.zeros(span, np.int64)  # value id - lo -> vertices per primitive
    for v in (np.flatnonzero(np.bincount(topo - lo, minlength=span)) + lo).tolist():
        lut[v - lo] = _vpp_of(sc, v)
    return lut[topo - lo]


def _vpp_of(sc: Scan, v: int) -> int:
    name = sc.values.decode(v) if v >= 0 else None
    return VERTS_PER_PRIM.get(name, 0) if isinstance(name, str) else 0


def draw_facts(stream: Stream, table: StateTable, fold: bool = True) -> DrawFacts:
    """Gather :class:`DrawFacts` of ``stream`` from its state ``table``.

    ``fold``: apply the vertex-buffer window normalisation (module docstring).
    """
    assert table.scan is not None
    sc = table.scan
    cmd = table.draws.astype(np.int64)
    d = cmd.shape[0]
    op = stream.op[cmd].astype(np.int64)
    args = stream.args.take(cmd, axis=0)  # a copy, ours to shift (take copies whole rows: faster than [cmd])
    sid = table.state.astype(np.int64)
    ps = table.setter[:, PIPELINE] if d else np.zeros(0, np.int64)
    pipe = np.where(ps >= 0, stream.args[np.maximum(ps, 0), COL_PIPELINE], -1) if d else np.zeros(0, np.int64)
    pf = _pipe_facts(stream)
    pidx = np.where(pipe >= 0, pipe, len(stream.decls))
    pinned = ((stream.flags[cmd] & FLAG_NOMERGE) != 0) | pf["never_merge"][pidx]
    rows = table.rows
    # topology -> vertices per primitive
    vpp = _verts_per_prim(sc, rows[sid, TOPOLOGY] if d else np.zeros(0, np.int64))
    # vertex-buffer window fold
    shift = np.zeros(d, np.int64)
    folded = np.zeros(d, bool)
    # a copy (fancy indexing), int64: a folded window's key (``_vb_fold``) is below -2**40
    vbcol = rows[sid, VB].astype(np.int64) if d else np.zeros(0, np.int64)
    if fold and d:
        # a non-indexed draw's SV_VertexID counts from StartVertexLocation, so folding its window
        # into the start is invisible only to shaders that declare no_vertex_id
        vid_ok = (op == _DII) | pf["no_vid"][pidx]
        cand = pf["layout"][pidx] & pf["no_prim"][pidx] & vid_ok & _IS_DIRECT[op] & (vbcol >= 0)
        if cand.any():
            ci = np.flatnonzero(cand)
            uniq, inv = np.unique(vbcol[ci], return_inverse=True)
            inv = inv.reshape(-1)
            ok_u, shift_u, key_u = _vb_fold(sc, uniq)  # per distinct binding, then scatter by inverse
            hit = ok_u[inv]
            sel = ci[hit]
            folded[sel] = True
            shift[sel] = shift_u[inv[hit]]
            vbcol[sel] = key_u[inv[hit]]
            col = np.where(op == _DI, _DI_START_VERTEX, _DII_BASE_VERTEX)
            fi = np.flatnonzero(folded)
            args[fi, col[fi]] += shift[fi]
    # normalised state: the state id with the folded vertex-buffer key
    if d and not folded.any() and _first_appearance(sid):
        # nothing folded: each pair (sid, vbcol) is its state's, and state ids are numbered in
        # first-appearance order (as track numbers them), so the pairs intern to sid itself and
        # their rows are the table's first rows, shared (a view: 250 MB less at 1M draws)
        pid = sid.copy()
        prow = rows[:int(sid.max()) + 1].view()
        prow.flags.writeable = False
        distinct = _distinct_rows(sc, prow)
    else:
        pair = np.stack([sid, vbcol], axis=1) if d else np.zeros((0, 2), np.int64)
        pid, pfirst = intern_rows(pair)
        # a copy (fancy indexing) of the table's int32 rows; int64 where it takes a folded key
        prow = rows[sid[pfirst]] if d else np.zeros((0, NSLOTS), rows.dtype)
        if folded.any():
            prow = prow.astype(np.int64)
        if d:
            prow[:, VB] = vbcol[pfirst]
        distinct = False
    if distinct:
        same = True
    else:
        uid, ufirst = intern_rows(prow)
        same = _is_arange(uid) and _is_arange(ufirst)  # the rows are distinct already
    nstate = pid if same else (uid[pid] if d else np.zeros(0, np.int64))
    nrows = prow if same else prow[ufirst]
    indexed = _INDEXED[op]
    return DrawFacts(stream, table, cmd, op, args, sid, nstate, pipe, pinned, vpp, shift, folded, indexed, nrows,
                     pipe_facts=pf)


def state_keys(facts: DrawFacts, except_slots: tuple[str, ...] = ()) -> np.ndarray:
    """Per draw, an id equal for draws whose normalised states are equal except ``except_slots``.

    ``"perdraw"`` in ``except_slots`` masks the root parameters of each draw's
    pipeline's per-draw contract (:func:`perdraw_params`); a contract clause name
    (``"x"``, ``"draw_data"``, ``"instance_data"``) masks them only for that
    clause. Ids are in first-appearance order.
    """
    if not except_slots:
        return facts.nstate.copy()
    rows = facts.nrows.copy()
    cols = [SLOT_INDEX[s] for s in except_slots if s in SLOT_INDEX]
    rows[:, cols] = MASKED
    clauses = PERDRAW_CLAUSES if "perdraw" in except_slots else tuple(c for c in except_slots
                                                                      if c in PERDRAW_CLAUSES)
    if clauses and rows.shape[0]:
        # the pipeline is part of the state: one pipeline per normalised state
        first_draw = np.zeros(rows.shape[0], np.int64)
        first_draw[facts.nstate[::-1]] = np.arange(len(facts))[::-1]
        pipes = facts.pipe[first_draw]
        for p in unique(pipes):
            params = perdraw_params(facts.stream.decls[int(p)] if p >= 0 else None, clauses)
            if params:
                sel = pipes == p
                rows[np.ix_(sel, [ROOT0 + q for q in params if q < 16])] = MASKED
    ids, _ = intern_rows(rows)
    return ids[facts.nstate] if len(facts) else np.zeros(0, np.int64)


# ---------------------------------------------------------------------- call classes
FAMILY_DIRECT, FAMILY_DIRECT_IDX, FAMILY_X, FAMILY_AUTO = 0, 1, 2, 3


def _cpu_args(stream: Stream, facts: DrawFacts) -> np.ndarray:
    """Indirect draws whose args the CPU wrote (declared ``cpu`` with data, no GPU write before)."""
    out = np.zeros(len(facts), bool)
    ind = np.flatnonzero(_IS_INDIRECT[facts.op])
    if not ind.size:
        return out
    cpu = np.array([isinstance(d, Buffer) and d.cpu and d.data is not None for d in stream.decls.items] or [False])
    col = np.where(_IS_MULTI[facts.op[ind]], _MULTI_ARGS_BUFFER, _SINGLE_ARGS_BUFFER)
    buf = facts.args[ind, col]
    out[ind] = cpu[buf]
    return out


def call_classes(facts: DrawFacts, mdi: bool = True, keys: np.ndarray | None = None) -> np.ndarray:
    """Per draw, its *call class*: draws that some pass could turn into one API call.

    Two draws share a class when ``mdi`` (the target has multi-draw-indirect and
    the pipeline runs the mdi pass) could batch them: the same normalised state
    (except what a ``draw_data`` contract lifts into a per-draw array) and the same
    kind (indexed or not), direct or CPU-known indirect; or, for indirect
    draws with GPU-written args, the same state, kind and args buffer. Without
    ``mdi``, the classes of ``instances`` and ``ranges`` apply (same normalised
    state and draw command). ``DrawIndexedX`` calls, ``Auto`` variants, pinned
    draws and draws without a pipeline are alone in their class. Ids are in
    first-appearance order. ``keys``: ``state_keys(facts, MDI.state_except)`` if already known
    (read only with ``mdi``).
    """
    n = len(facts)
    if n == 0:
        return np.zeros(0, np.int64)
    stream = facts.stream
    alone = facts.pinned | (facts.pipe < 0) | (facts.op == _DX) | _IS_AUTO[facts.op]
    gpu_ind = _IS_INDIRECT[facts.op] & ~_cpu_args(stream, facts)
    buf = np.full(n, -1, np.int64)
    if gpu_ind.any():
        col = np.where(_IS_MULTI[facts.op], _MULTI_ARGS_BUFFER, _SINGLE_ARGS_BUFFER)
        buf[gpu_ind] = facts.args[np.flatnonzero(gpu_ind), col[gpu_ind]]
    if mdi:
        kind = facts.indexed.astype(np.int64)
    else:
        kind = facts.op.copy()
        buf[:] = np.where(_IS_DIRECT[facts.op], -1, np.arange(n))  # indirect: alone
    uniq = np.where(alone, np.arange(n) + 1, 0)
    state = (keys if keys is not None else state_keys(facts, MDI.state_except)) if mdi else facts.nstate
    # a lifted (draw_data) batch needs every member CPU-known: GPU-written indirect draws keep their state
    state = np.where(gpu_ind, -1 - facts.nstate, state)
    key = np.stack([state, kind, buf, uniq], axis=1)
    ids, _ = intern_rows(key)
    return ids


# ---------------------------------------------------------------------- adjacent pairs
@dataclass(eq=False)
class Link:
    """Which consecutive draws (``i``, ``i+1`` in stream order) a rule merges.

    ``ok[i]``: draws ``i`` and ``i+1`` merge under ``rule``; ``fail[i]``: the first
    failing test (``""`` where ``ok``): ``"between"`` (a non-state command lies
    between them), ``"pinned"``, ``"op"``, ``"state"``, ``"args"``,
    ``"contiguous"`` or the name of a requirement.
    """

    rule: MergeRule
    ok: np.ndarray
    code: np.ndarray = field(repr=False)
    """``uint8`` per pair: 0 where ``ok``, else 1 + the index of its first failing test in ``reasons``."""
    reasons: tuple[str, ...] = field(default=(), repr=False)

    @cached_property
    def fail(self) -> np.ndarray:
        """The first failing test of each pair as ``object`` strings (built when first read:
        the passes read only ``ok``)."""
        return np.array(("", *self.reasons), dtype=object)[self.code]


def _between(stream: Stream, facts: DrawFacts) -> np.ndarray:
    """For each consecutive pair of draws: a command other than a state command lies between."""
    cats = stream.cats()
    nonstate = np.cumsum(cats != int(Cat.STATE))
    c = facts.cmd
    if c.shape[0] < 2:
        return np.zeros(0, bool)
    # non-state commands in (c[i], c[i+1]) = nonstate[c[i+1]-1] - nonstate[c[i]]
    return (nonstate[c[1:] - 1] - nonstate[c[:-1]]) > 0


def adjacent_links(facts: DrawFacts, rule: MergeRule) -> Link:
    """Evaluate ``rule`` on every pair of consecutive draws of the stream.

    Draws ``i`` and ``i+1`` (in stream order) merge when only state commands lie
    between them, neither is pinned, both are the same command listed in
    ``rule.differ``, their normalised states are equal except ``rule.state_except``,
    their arguments are equal except ``rule.differ``, the ``contiguous`` fields
    continue, and every requirement holds.
    """
    n = len(facts)
    m = max(n - 1, 0)
    code = np.zeros(m, np.uint8)
    reasons: list[str] = []
    ok = np.ones(m, bool)
    if m == 0:
        return Link(rule, ok, code)
    def check(mask: np.ndarray, why: str) -> None:
        bad = ok & ~mask
        reasons.append(why)
        code[bad] = len(reasons)
        ok[bad] = False

    if facts.between is None:
        facts.between = _between(facts.stream, facts)
    check(~facts.between, "between")
    # pair i is (draw i, draw i+1): the "a" side is every draw but the last, "b" every draw but the first
    op_a, op_b = facts.op[:-1], facts.op[1:]
    args_a, args_b = facts.args[:-1], facts.args[1:]
    check(~(facts.pinned[:-1] | facts.pinned[1:]), "pinned")
    check((op_a == op_b) & opcode_mask(rule.codes())[op_a], "op")
    sk = state_keys(facts, rule.state_except)
    check(sk[:-1] == sk[1:], "state")
    eq_args = np.ones(m, bool)
    cont = np.ones(m, bool)
    for name, differ in rule.differ.items():
        sp = BY_NAME[name]
        sel = op_a == sp.code
        if not sel.any():
            continue
        # compare whole columns (strided views, no gathered copies), then keep this command's pairs
        same_cols = [j for j, arg in enumerate(sp.args) if arg.name not in differ]
        if same_cols:
            eq = args_a[:, same_cols[0]] == args_b[:, same_cols[0]]
            for j in same_cols[1:]:
                eq &= args_a[:, j] == args_b[:, j]
            eq_args[sel] = eq[sel]
        if name in rule.contiguous:
            s, c = (sp.col(x) for x in rule.contiguous[name])
            cont[sel] = (args_b[:, s] == args_a[:, s] + args_a[:, c])[sel]
    check(eq_args, "args")
    check(cont, "contiguous")
    pf = facts.pipe_facts if facts.pipe_facts is not None else _pipe_facts(facts.stream)
    pipe_a = facts.pipe[:-1]
    pidx = np.where(pipe_a >= 0, pipe_a, len(facts.stream.decls))
    for req in rule.requires:
        if req == "instance_id_free":
            check(pf["inst_free"][pidx], req)
        elif req == "no_primitive_id":
            check(pf["no_prim"][pidx], req)
        elif req == "list_topology":
            check(facts.vpp[:-1] > 0, req)
        elif req == "whole_primitives":
            cnt = args_a[:, COL_DRAW_COUNT]  # vertex_count / index_count
            check(cnt % np.maximum(facts.vpp[:-1], 1) == 0, req)
        elif req == "single_instance":
            si = np.where(op_a == _DI, Op.DrawInstanced.col("start_instance"),
                          Op.DrawIndexedInstanced.col("start_instance"))
            pairs = np.arange(m)
            check((args_a[:, COL_INSTANCES] == 1) & (args_b[:, COL_INSTANCES] == 1) &
                  (args_a[pairs, si] == args_b[pairs, si]), req)
        elif req == "x_contract":
            check(pf["x_ok"][pidx], req)
        elif req == "same_args_buffer":
            bcol = np.where(_IS_MULTI[op_a], _MULTI_ARGS_BUFFER, _SINGLE_ARGS_BUFFER)
            pairs = np.arange(m)
            check(args_a[pairs, bcol] == args_b[pairs, bcol], req)
        else:  # pragma: no cover - a rule naming an unknown requirement
            raise ValueError(f"unknown requirement {req!r}")
    return Link(rule, ok, code, tuple(reasons))


# ---------------------------------------------------------------------- segments
_AUTOFLUSH = _OP["CSEnableAutomaticGpuFlush"]


def fence_mask(stream: Stream) -> np.ndarray:
    """Commands no pass moves a draw across: everything but draws and state commands,
    and ``CSEnableAutomaticGpuFlush`` (it changes what the flush rules require)."""
    cats = stream.cats()
    return ~((cats == int(Cat.DRAW)) | (cats == int(Cat.STATE))) | (stream.op == _AUTOFLUSH)


def draw_segments(stream: Stream, facts: DrawFacts) -> np.ndarray:
    """Segment of every draw as the passes see it: fences cut (:func:`fence_mask`), and a
    pinned draw (``@nomerge``, ``never_merge``, no usable pipeline) is a segment of its own.
    Ids increase along the stream."""
    cut = fence_mask(stream)
    pinned = np.zeros(len(stream), bool)
    pinned[facts.cmd[facts.pinned | (facts.pipe < 0)]] = True
    cut = cut | pinned
    before = np.cumsum(cut) + np.cumsum(np.r_[False, cut[:-1]])  # a pinned draw: its own id
    return before[facts.cmd].astype(np.int64)
