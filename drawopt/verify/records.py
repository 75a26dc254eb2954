"""Effective records: what every draw, dispatch and copy of a stream does.

An *action* is a draw, dispatch or copy command. It expands to *records*:

* a direct draw: one record per run of instances that differ only in their instance
  number (``inst`` is the first, ``ninst`` how many); a draw whose per-draw values
  come from a generated array (a pipeline contract in its array form) gets one
  record per instance, since every instance reads its own array entry;
* an indirect draw whose args (and, for ``Auto``, count) buffer the CPU wrote
  (``Buffer.cpu`` with ``data``, and no GPU write of it earlier in the stream): the
  draws it performs (``MultiDraw*`` with count N, offset O and stride S is N single
  indirect draws at ``O + i*S``), expanded as direct draws;
* an indirect draw with GPU-written args: one *symbolic* record per draw slot (the
  args buffer and byte offset); an ``Auto`` draw one record naming its count source;
* a dispatch: one record (its thread groups); a copy: one record (both ranges).

A record's *key* (:data:`KEY_FIELDS`) holds everything the shaders and the
fixed-function stages can observe, normalised (see ``docs/verification.md``):
the state its pipeline reads, the index source (buffer, byte offset, format) or
first vertex, the count, the vertex bias, the instance, and the values delivered
through the pipeline's per-draw contract, decoded from ``DrawIndexedX``
``IndexOffset`` bits and the generated per-draw arrays.
"""

from __future__ import annotations

__all__ = ["Records", "ReadSets", "expand", "KEY_FIELDS", "F", "KIND_NAMES", "MAX_RECORDS"]

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from drawopt._accel import load_cext
from drawopt.errors import UsageError
from drawopt.ir.arrayset import unique
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig, View
from drawopt.ir.ops import (
    BY_NAME,
    COL_AUTO_MAX,
    COL_DRAW_COUNT,
    COL_INSTANCES,
    COL_MULTI_ARGS,
    OPS,
    TOPOLOGIES,
    Cat,
    Op,
    shared_col,
)
from drawopt.ir.stream import FLAG_NOMERGE, Stream
from drawopt.ir.stream import ragged_index as ragged
from drawopt.verify._hash import Column, hash_cols, unique_inverse
from drawopt.verify.model import NEVER, OPQ_BASE, VERTS_PER_PRIM, Canon, PipeInfo, commute_label, pipe_info
from drawopt.verify.slots import (
    IB_BUF,
    IB_FMT,
    IB_OFF,
    RV_BUF,
    RV_OFF,
    VB_BUF,
    VB_OFF,
    VB_STRIDE,
    Col,
    StateAt,
    cid_of,
    op_index,
    track,
)

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_CAT = {o.code: o.cat for o in OPS}
_MASK63 = np.int64(0x7FFFFFFFFFFFFFFF)

# argument columns, by name (drawopt.ir.ops; the setters' ones in drawopt.verify.slots)
_DI, _DII, _DX = Op.DrawInstanced, Op.DrawIndexedInstanced, Op.DrawIndexedX
_CP, _DSP = Op.CopyBufferRegion, Op.Dispatch
_CP_DST, _CP_DOFF, _CP_SRC, _CP_SOFF, _CP_SIZE = (_CP.col(n)
                                                  for n in ("dst", "dst_offset", "src", "src_offset", "size"))
_IND_ARGS, _IND_OFF = (shared_col(("DrawInstancedIndirect", n), ("DrawIndexedInstancedIndirect", n))
                       for n in ("args_buffer", "offset"))
"""Args buffer and offset of a single indirect draw."""
_MULTI_OFF, _MULTI_STRIDE = (shared_col(("MultiDrawInstancedIndirect", n), ("MultiDrawIndexedInstancedIndirect", n))
                             for n in ("offset", "stride"))
_AUTO_CBUF, _AUTO_COFF, _AUTO_ABUF, _AUTO_OFF, _AUTO_STRIDE = (
    shared_col(("MultiDrawInstancedIndirectAuto", n), ("MultiDrawIndexedInstancedIndirectAuto", n))
    for n in ("count_buffer", "count_offset", "args_buffer", "offset", "stride"))
UNKNOWN = -7
"""Field value: not known statically (GPU-written data)."""
OOB = -5
"""Word value: read past the end of the buffer."""
NOT_INDEXED = -100
"""``src_buf`` of records that read no index buffer."""
EXPAND_CAP = 1 << 16
"""A draw of more instances than this that reads a per-draw array per instance is one record
naming the array (multi-draws are expanded draw by draw at any count, up to :data:`MAX_RECORDS`)."""
MAX_RECORDS = 1 << 24
"""Most records one stream may expand to (per-instance array reads are the only way to get many)."""
MAX_WELD_POSITIONS = 1 << 27
"""Most index positions the validator reads to recognise welded draws (beyond: compared as indexed)."""

IMAX_DECLARED, IMAX_FORMAT, IMAX_DATA, IMAX_UNKNOWN = range(4)
"""What proves the largest index of a ``DrawIndexedX`` (``Records.x['imax_from']``): the
contract's ``max_index``, the index format, the CPU-known index data, nothing (the format's
bound, which the data may reach)."""

KEY_FIELDS = ("state", "kind", "src_buf", "src_off", "fmt", "count", "bias", "inst", "ninst", "rel",
              "svoff", "lift", "sym", "ia", "epoch")
"""Columns of a record key, in order."""
F = {n: i for i, n in enumerate(KEY_FIELDS)}
KIND_NAMES = ("draw", "indexed draw", "indirect draw", "indirect draw with a GPU count", "dispatch", "copy")
KD_DRAW, KD_INDEXED, KD_SYM, KD_SYMAUTO, KD_DISPATCH, KD_COPY = range(6)

INDIRECT = {  # op name -> (indexed, multi, auto)
    "DrawInstancedIndirect": (False, False, False), "DrawIndexedInstancedIndirect": (True, False, False),
    "MultiDrawInstancedIndirect": (False, True, False), "MultiDrawIndexedInstancedIndirect": (True, True, False),
    "MultiDrawInstancedIndirectAuto": (False, True, True),
    "MultiDrawIndexedInstancedIndirectAuto": (True, True, True),
}
INDEXED_NATIVE = frozenset(_OP[n] for n in (
    "DrawIndexedInstanced", "DrawIndexedInstancedIndirect", "MultiDrawIndexedInstancedIndirect",
    "MultiDrawIndexedInstancedIndirectAuto"))
"""Draws that read the bound index buffer."""
_INDEXED_LUT = np.zeros(max(o.code for o in OPS) + 1, bool)
_INDEXED_LUT[list(INDEXED_NATIVE)] = True

INHERITED_TARGETS = "(inherited render targets)"
INHERITED_DEPTH = "(inherited depth target)"
"""Pseudo-resources written by draws that run without setting render targets (bundles)."""

FE_ARGS, FE_COUNT, FE_INDEX = 0, 1, 2
FE_NAMES = ("indirect args", "draw count", "index data")


def norm(v: np.ndarray, bundle: bool = False) -> np.ndarray:
    """State values with every "undefined" sentinel folded into :data:`NEVER`, in a list.

    In a bundle "never set" is the caller's value, not undefined: a value lost to a root
    signature, heap or kind change there is a difference from it, so nothing folds."""
    return v if bundle else np.where((v < 0) & (v > OPQ_BASE), NEVER, v)


_NORM = (OPQ_BASE, 0, NEVER)
""":func:`norm` as a ``fold=`` of :func:`hash_cols` (applied to its ``(array, idx)`` columns)."""
_NO_FOLD = (0, 0, NEVER)
"""The ``fold=`` of a bundle: nothing lies strictly between 0 and 0."""


def set_rows(inv: np.ndarray, off: np.ndarray, cnt: np.ndarray, *vals: np.ndarray,
             pure: bool | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Sets stored once per signature, spelled out per owner: owner ``a`` (set ``s = inv[a]``)
    gets rows ``off[s] .. off[s] + cnt[s] - 1`` of each of ``vals``. Returns the owner of each
    row, and each array's rows (compiled: ``drawopt._verify.set_rows``, one pass).

    >>> o, (v,) = set_rows(np.array([1, 0, 1]), np.array([0, 2]), np.array([2, 1]), np.array([7, 8, 9]))
    >>> o.tolist(), v.tolist()
    ([0, 1, 1, 2], [9, 7, 8, 9])
    """
    k = load_cext("_verify", pure)
    if k is not None:
        return k.set_rows(*(np.ascontiguousarray(x, np.int64) for x in (inv, off, cnt)),
                          [np.ascontiguousarray(v, np.int64) for v in vals])
    n = cnt[inv]
    at = ragged(off[inv], n)
    return np.repeat(np.arange(inv.size, dtype=np.int64), n), [v[at] for v in vals]


@dataclass
class ReadSets:
    """The reads of every action, stored once per access signature: action ``a`` reads the
    sorted resources ``res[off[s]:off[s] + cnt[s]]``, ``s = inv[a]`` (actions with the same
    bindings read the same, and most actions share their signature with many)."""

    inv: np.ndarray
    off: np.ndarray
    cnt: np.ndarray
    res: np.ndarray

    def pairs(self, only: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(action, resource)`` of every read (of a resource in ``only``), by action then resource."""
        res, cnt, off = self.res, self.cnt, self.off
        if only is not None:
            keep = np.isin(res, only)
            sig = np.repeat(np.arange(cnt.size, dtype=np.int64), cnt)
            res, cnt = res[keep], np.bincount(sig[keep], minlength=cnt.size).astype(np.int64)
            off = np.cumsum(cnt) - cnt
        owner, (r,) = set_rows(self.inv, off, cnt, res)
        return owner, r


@dataclass
class Records:
    """The effective records of one stream.

    Actions (A, stream order): ``a_cmd`` command, ``a_op`` opcode, ``a_pipe`` index
    into ``pipes`` (-1: no usable pipeline), ``a_state`` normalised state hash,
    ``a_first``/``a_nrec`` their records, ``a_vpp`` vertices per primitive of the
    topology in force (0: a strip or unknown). Records (R, stream order): ``r_act``,
    ``r_sub`` (draw within a multi-draw), ``r_xslot`` (DrawIndexedX draw id, -1),
    ``r_nomerge`` (never merged by the canonical form), ``key`` (R x len(KEY_FIELDS)).
    Accesses per action: writes ``w_act``/``w_res``/``w_lab`` (commutation label, 0:
    ordered), reads ``rd_act``/``rd_res`` (built from ``reads`` when asked for); front-end reads ``fe_act``/``fe_res``/
    ``fe_kind``. ``observed[k]``: state columns the actions with ``a_observer`` ``k`` observe
    (``k`` = ``a_pipe`` where there is a usable pipeline; -1 / -2 draws / dispatches with none,
    -3 / -4 those whose pipeline is unknown, after an Opaque command).
    ``x``: per DrawIndexedX action of an x-contract pipeline: ``act``, ``slot``,
    ``low``, ``buf``/``off`` (its per-draw binding, -1 if none). ``weld``: see the field.
    """

    stream: Stream
    canon: Canon
    cmap: np.ndarray
    pipes: list[PipeInfo]
    state: StateAt
    a_cmd: np.ndarray
    a_op: np.ndarray
    a_pipe: np.ndarray
    a_state: np.ndarray
    a_first: np.ndarray
    a_nrec: np.ndarray
    a_vpp: np.ndarray
    r_act: np.ndarray
    r_sub: np.ndarray
    r_xslot: np.ndarray
    r_nomerge: np.ndarray
    key: np.ndarray
    w_act: np.ndarray
    w_res: np.ndarray
    w_lab: np.ndarray
    reads: ReadSets
    fe_act: np.ndarray
    fe_res: np.ndarray
    fe_kind: np.ndarray
    observed: dict[int, list[int]]
    x: dict[str, np.ndarray]
    weld: dict[str, np.ndarray] = field(default_factory=dict)
    """Indexed draws recognised as welded (:meth:`_Expander._deweld`): ``act``; and the
    first index position where one that was not fetches other bytes: ``fail_act``,
    ``fail_pos``, ``fail_vertex`` (fetched), ``fail_want`` (the vertex a non-indexed
    draw would fetch there; -1 when the contents are out of range)."""
    exit: StateAt | None = None
    """For a bundle: every state column at its end (one query), the state it hands back to
    the caller, whose draws after ExecuteBundle observe it. None for a list."""
    a_observer: np.ndarray | None = None
    """Per action: the key of ``observed`` that lists the state columns it observes: its
    pipeline's index, or for an action without a usable pipeline -1 (draw) / -2 (dispatch),
    -3 / -4 when the pipeline is unknown (after an Opaque command: every root argument)."""

    @property
    def bundle(self) -> bool:
        """Whether these are a bundle's records (its unset state is the caller's)."""
        return self.stream.header.kind == "bundle"

    @property
    def never_text(self) -> str:
        """How a value never set in this stream reads in a message."""
        return "never set (the caller's value)" if self.bundle else "never set"

    @cached_property
    def root_signatures(self) -> dict[int, RootSig]:
        """The stream's root signatures by canonical id (the value a root-signature column holds)."""
        return {int(self.cmap[i]): d for i, d in enumerate(self.stream.decls.items) if isinstance(d, RootSig)}

    @cached_property
    def rd_act(self) -> np.ndarray:
        """Per read pair (one per action and resource it reads, by action then resource): the action."""
        return self._read_pairs[0]

    @cached_property
    def rd_res(self) -> np.ndarray:
        """Per read pair: the resource."""
        return self._read_pairs[1]

    @cached_property
    def _read_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.reads.pairs()

    def line(self, cmd: int) -> int:
        return int(self.stream.line[cmd]) if 0 <= cmd < len(self.stream) else 0

    def where(self, cmd: int) -> str:
        """``line N``, or ``command i`` when the stream carries no line numbers."""
        ln = self.line(cmd)
        return f"line {ln}" if ln > 0 else f"command {cmd}"

    def pipe(self, a: int) -> PipeInfo | None:
        p = int(self.a_pipe[a])
        return self.pipes[p] if p >= 0 else None

    def ordinal(self, a: int) -> tuple[str, int]:
        """``('draw', n)``: action ``a`` is the n-th draw (or dispatch, copy) of the stream."""
        cat = _CAT[int(self.a_op[a])]
        same = np.array([_CAT[int(o)] == cat for o in np.unique(self.a_op)], bool)
        codes = np.unique(self.a_op)[same]
        n = int(np.count_nonzero(np.isin(self.a_op[:a], codes)))
        return {Cat.DRAW: "draw", Cat.DISPATCH: "dispatch", Cat.COPY: "copy"}[cat], n


# --------------------------------------------------------------------------- views
_HEAP_SHIFT = np.int64(1) << np.int64(34)


class Views:
    """``heap[slot]`` -> (view kind, resource id) of one stream's declarations, as sorted
    columns: ``keys`` (``heap << 34 | slot``), ``kinds``, ``rids`` (-1: a view of no resource)."""

    def __init__(self, decls: Decls, canon: Canon):
        flat: list[tuple[int, int, str, int]] = []
        for d in decls.items:
            if isinstance(d, View):
                rid = canon.id(d.resource) if d.resource is not None else -1
                flat.append((canon.id(d.heap), d.slot, d.view, rid))
        flat.sort()
        self.keys = np.array([h * _HEAP_SHIFT + slot for h, slot, _, _ in flat], np.int64)
        self.kinds = np.array([k for _, _, k, _ in flat] + [""])
        self.rids = np.array([r for _, _, _, r in flat], np.int64)

    def at(self, heap: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Resource id of the view in ``slot`` of ``heap``, for every pair (-2: no view there;
        -1: a view of no resource)."""
        if not self.keys.size:
            return np.full(heap.size, -2, np.int64)
        k = heap * _HEAP_SHIFT + slot
        i = np.minimum(np.searchsorted(self.keys, k, "left"), self.keys.size - 1)
        return np.where(self.keys[i] == k, self.rids[i], -2)

    def in_ranges(self, heap: np.ndarray, lo: np.ndarray, n: int | np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
        """The views in slots ``lo[i] .. lo[i] + n - 1`` (``n[i]``, an array) of ``heap[i]``, for every ``i``:
        ``(i, view kind, resource id)``, in order of ``i`` then slot."""
        a = np.searchsorted(self.keys, heap * _HEAP_SHIFT + lo, "left")
        b = np.searchsorted(self.keys, heap * _HEAP_SHIFT + lo + n, "left")
        cnt = b - a
        j = ragged(a, cnt)
        return np.repeat(np.arange(heap.size, dtype=np.int64), cnt), self.kinds[j], self.rids[j]


def by_pipeline(pipe: np.ndarray, npipes: int) -> list[tuple[int, np.ndarray]]:
    """``(p, positions with pipe == p)`` for every pipeline index present (-1 first), positions
    ascending: one stable sort instead of a mask per pipeline."""
    key = pipe + 1
    order = np.argsort(key.astype(np.int16) if npipes < 1 << 15 else key, kind="stable")   # radix sort
    bounds = np.searchsorted(pipe[order], np.arange(-1, npipes + 1)).tolist()
    return [(p, order[a:b]) for p, a, b in zip(range(-1, npipes), bounds[:-1], bounds[1:]) if b > a]


def safe_ref(cmap: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``cmap[idx]`` where ``idx`` may be garbage at positions the caller masks out."""
    return cmap[np.clip(idx, 0, cmap.size - 1)]


# --------------------------------------------------------------------------- expansion
def expand(s: Stream, canon: Canon, universe: list[int], reorder: str = "declared") -> Records:
    """Expand ``s`` into its effective :class:`Records` (state columns ``universe``)."""
    return _Expander(s, canon, universe, reorder).run()


class _Expander:
    def __init__(self, s: Stream, canon: Canon, universe: list[int], reorder: str):
        self.s, self.canon, self.universe, self.reorder = s, canon, universe, reorder
        self.bundle = s.header.kind == "bundle"
        self.fold = _NO_FOLD if self.bundle else _NORM   # the undefined sentinels fold in a list only
        self.decls = s.decls
        self.cmap = canon.map_decls(s.decls)
        cats = s.cats()
        self.act = np.flatnonzero((cats == int(Cat.DRAW)) | (cats == int(Cat.DISPATCH)) |
                                  (cats == int(Cat.COPY)))
        self.a_cat = cats[self.act]
        self.a_op = s.op[self.act].astype(np.int64)
        self.nA = self.act.size
        self.st = track(s, canon, self.cmap, universe, self.act)
        self.views = Views(s.decls, canon)
        self.bufdecl: dict[int, Buffer] = {int(self.cmap[i]): d for i, d in enumerate(s.decls.items)
                                           if isinstance(d, Buffer)}

    # ------------------------------------------------------------------ pipeline + state
    def _pipelines(self) -> None:
        s, canon = self.s, self.canon
        self.pipes: list[PipeInfo] = []
        pipe_of: dict[int, int] = {}
        for d in s.decls.items:
            if isinstance(d, Pipeline):
                pipe_of[canon.id(d.name)] = len(self.pipes)
                self.pipes.append(pipe_info(d, s.decls, canon))
        pso = self.st.value(cid_of(Col.PSO))
        a_pipe = np.full(self.nA, -1, np.int64)
        if pipe_of:
            keys = np.array(sorted(pipe_of), np.int64)
            vals = np.array([pipe_of[k] for k in sorted(pipe_of)], np.int64)
            pos = np.clip(np.searchsorted(keys, pso), 0, keys.size - 1)
            hit = keys[pos] == pso
            a_pipe[hit] = vals[pos[hit]]
        comp = np.array([p.compute for p in self.pipes] + [False], bool)[a_pipe]
        is_draw = self.a_cat == int(Cat.DRAW)
        is_disp = self.a_cat == int(Cat.DISPATCH)
        a_pipe[(is_draw & comp) | (is_disp & ~comp) | (self.a_cat == int(Cat.COPY))] = -1
        self.a_pipe = a_pipe

    def _vertex_windows(self) -> None:
        """Vertex-buffer bindings as the input assembler uses them.

        With exactly one vertex buffer bound, ``IASetVertexBuffers slot vb off stride``
        fetches what binding ``vb`` at ``off mod stride`` with the vertex index moved by
        ``off div stride`` fetches; the binding is compared in that normal form and the
        shift goes to the vertex bias (indexed draws) or the fetch base (non-indexed)."""
        st, s = self.st, self.s
        cols = [c for c in self.universe if (c >> 20) == Col.VB]
        self.vb_override: dict[int, np.ndarray] = {}
        self.vb_shift = np.zeros(self.nA, np.int64)
        if not cols:
            return
        vals = [st.value(c) for c in cols]
        nset = np.zeros(self.nA, np.int64)
        for v in vals:
            nset += v >= 0
        single = nset == 1
        for c, v in zip(cols, vals):
            # the normal form of each setting command, then of the one each action sees
            ei, _ = st.events(c)
            if not ei.size:   # never set in this stream
                self.vb_override[c] = v.copy()
                continue
            buf = safe_ref(self.cmap, s.args[ei, VB_BUF])
            off, stride = s.args[ei, VB_OFF], s.args[ei, VB_STRIDE]
            strd = np.maximum(stride, 1)
            e_form = hash_cols([buf, off % strd, stride], ei.size) & _MASK63
            at = np.maximum(st.event_index(c), 0)   # (v >= 0: there is an event, a setter)
            ok = single & (v >= 0) & (stride > 0)[at]
            self.vb_override[c] = np.where(ok, e_form[at], v)
            self.vb_shift += np.where(ok, (off // strd)[at], 0)

    def _state(self) -> None:
        self._vertex_windows()
        st, universe = self.st, self.universe
        self.observed: dict[int, list[int]] = {}
        gfx_fixed = [cid_of(f) for f in (Col.PSO, Col.RSG, Col.HEAPS, Col.TOPO, Col.RTS, Col.VP, Col.SC, Col.SR)]
        cmp_fixed = [cid_of(f) for f in (Col.PSO, Col.RSC, Col.HEAPS)]
        # the actions of each pipeline, in stream order (copies have none: a_pipe -1)
        groups: list[tuple[int, list[int], np.ndarray]] = []
        self.a_observer = self.a_pipe.copy()
        for p, sel in by_pipeline(self.a_pipe, len(self.pipes)):
            if p < 0:
                # no usable pipeline: nothing says which root arguments it would read. Never set
                # or of the wrong kind, it is a no-pipeline finding; unknown (after an Opaque
                # command) it may be any pipeline, so it observes every root argument too
                unknown = st.value(cid_of(Col.PSO))[sel] <= OPQ_BASE
                for cat, fixed, fams, every in ((Cat.DRAW, gfx_fixed, (Col.VB, Col.BF), (Col.TG, Col.CG, Col.VG)),
                                                (Cat.DISPATCH, cmp_fixed, (), (Col.TC, Col.CC))):
                    for unk in (False, True):
                        sub = sel[(self.a_cat[sel] == int(cat)) & (unknown == unk)]
                        if not sub.size:
                            continue
                        seen = fams + every if unk else fams
                        cols = fixed + [c for c in universe if Col(c >> 20) in seen and c not in fixed]
                        key = -1 - int(cat == Cat.DISPATCH) - 2 * int(unk)
                        self.observed[key] = cols
                        self.a_observer[sub] = key
                        groups.append((-1, cols, sub))
                continue
            cols = _observed_cols(self.pipes[p], universe, gfx_fixed, cmp_fixed)
            self.observed[p] = cols
            groups.append((self.pipes[p].cid, cols, sel))
        self.a_state = st.hashes(groups, self.vb_override, self.fold)
        del self.vb_override   # (read by the state hashes only)

    # ------------------------------------------------------------------ accesses
    def _accesses(self) -> None:
        s, st, cmap, nA = self.s, self.st, self.cmap, self.nA
        bufa = np.full(nA, -1, np.int64)
        bufb = np.full(nA, -1, np.int64)
        for name, (_, multi, auto) in INDIRECT.items():
            m = np.flatnonzero(self.a_op == _OP[name])
            args = s.args[self.act[m]]
            if auto:
                bufa[m], bufb[m] = cmap[args[:, _AUTO_ABUF]], cmap[args[:, _AUTO_CBUF]]
            else:
                bufa[m] = cmap[args[:, COL_MULTI_ARGS] if multi else args[:, _IND_ARGS]]
        m = np.flatnonzero(self.a_op == _OP["DrawIndexedX"])
        bufa[m] = cmap[s.args[self.act[m], _DX.col("buffer")]]
        m = np.flatnonzero(self.a_op == _OP["CopyBufferRegion"])
        args = s.args[self.act[m]]
        bufa[m], bufb[m] = cmap[args[:, _CP_DST]], cmap[args[:, _CP_SRC]]
        self.bufa, self.bufb = bufa, bufb
        self.cpu_known = np.zeros(len(self.canon.names) + 1, bool)
        """Per resource id: a buffer the CPU wrote (``cpu`` with ``data``)."""
        self.is_buffer = np.zeros(self.cpu_known.size, bool)
        """Per resource id: a buffer this stream declares."""
        for b, d in self.bufdecl.items():
            self.cpu_known[b] = d.cpu and d.data is not None
            self.is_buffer[b] = True
        self.args_decoded = np.zeros(nA, bool)
        """Per action: an indirect draw whose arguments (and count) are CPU-known where it runs
        (:meth:`decodable`): its records hold the decoded draws, so it does not read them."""
        # access sets depend on tables and on which buffers are bound, not on offsets
        self.vb_cols = [c for c in self.universe if (c >> 20) == Col.VB]
        parts = [self.a_op, self.a_pipe, bufa, bufb, st.value(cid_of(Col.RTS))]
        parts += [st.value(c) for c in self.universe if (c >> 20) in (Col.TG, Col.TC)]
        for c in [cid_of(Col.IB)] + self.vb_cols + [c for c in self.universe if (c >> 20) == Col.VG]:
            # the buffer argument of the setter
            col = {Col.IB: IB_BUF, Col.VB: VB_BUF, Col.VG: RV_BUF}[Col(c >> 20)]
            parts.append(st.of_setter(c, lambda cmd, col=col: cmap[s.args[cmd, col]]))
        self._access_sets(hash_cols(parts, nA))
        # an indirect draw before any write of its CPU-known arguments: the same writes, fewer
        # reads (the first writes come from the writes alone, so one more round settles it)
        ind = np.flatnonzero(np.isin(self.a_op, [_OP[n] for n in INDIRECT]))
        auto = np.isin(self.a_op[ind], [_OP[n] for n, (_, _, au) in INDIRECT.items() if au])
        dec = self.decodable(bufa[ind], ind) & (~auto | self.decodable(bufb[ind], ind))
        if dec.any():
            self.args_decoded[ind[dec]] = True
            self._access_sets(hash_cols(parts + [self.args_decoded.astype(np.int64)], nA))

    def _access_sets(self, sig: np.ndarray) -> None:
        """The write and read sets of every action, built once per access signature ``sig``, and
        the first write of each resource."""
        _, first_of, inv = unique_inverse(sig)
        # the access sets of one action per signature, in signature order (columnar)
        w_sig, w_res_s, w_lab_s, r_sig, r_res_s = self._access_rows(first_of)
        U = first_of.size
        nw_sig = np.bincount(w_sig, minlength=U).astype(np.int64)
        nr_sig = np.bincount(r_sig, minlength=U).astype(np.int64)
        woff = (np.cumsum(nw_sig) - nw_sig).astype(np.int64)
        roff = (np.cumsum(nr_sig) - nr_sig).astype(np.int64)
        self.w_act, (self.w_res, self.w_lab) = set_rows(inv, woff, nw_sig, w_res_s, w_lab_s)
        self.reads = ReadSets(inv, roff, nr_sig, r_res_s)
        # the first action writing each resource: the first of the signatures writing it
        self.first_write = np.full(len(self.canon.names) + 1, np.iinfo(np.int64).max, np.int64)
        if w_sig.size:
            np.minimum.at(self.first_write, w_res_s, first_of[w_sig])

    def _access_rows(self, acts: np.ndarray) -> tuple[np.ndarray, ...]:
        """What the actions ``acts`` write and read: ``(w_i, w_res, w_lab, r_i, r_res)``,
        ``i`` indexing ``acts``, sorted by (``i``, resource); one write per resource with its
        smallest commutation label; a resource a pipeline's action writes is not also a read
        (an action without a usable pipeline keeps both)."""
        s, st, cmap, decls, canon = self.s, self.st, self.cmap, self.decls, self.canon
        n = acts.size
        op, cat, p = self.a_op[acts], self.a_cat[acts], self.a_pipe[acts]
        cmd = self.act[acts]
        ws: list[tuple[np.ndarray, np.ndarray, np.ndarray | int]] = []   # (i, resource, label)
        rs: list[tuple[np.ndarray, np.ndarray]] = []                       # (i, resource)
        # a copy writes its destination and reads its source
        i = np.flatnonzero(op == _OP["CopyBufferRegion"])
        ws.append((i, cmap[s.args[cmd[i], _CP_DST]], 0))
        rs.append((i, cmap[s.args[cmd[i], _CP_SRC]]))
        # draws: render targets, depth, index and vertex buffers, indirect arguments
        d = np.flatnonzero(cat == int(Cat.DRAW))
        rts_cmd = st.source_at(cid_of(Col.RTS), acts[d])
        rv = st.value_at(cid_of(Col.RTS), acts[d])
        has = (rts_cmd >= 0) & (s.op[np.maximum(rts_cmd, 0)] == _OP["OMSetRenderTargets"])
        rc = rts_cmd[has]
        lens = s.var_len[rc].astype(np.int64)
        rts = s.pool[ragged(s.var_off[rc], lens)].astype(np.int64)
        owner = np.repeat(d[has], lens)
        kinds = np.array([x.kind for x in decls.items] + [""])
        is_tgt, is_dep = kinds[rts] == "target", kinds[rts] == "depth"
        depth = np.full(n, -1, np.int64)
        _, fi = np.unique(owner[is_dep], return_index=True)
        depth[owner[is_dep][fi]] = cmap[rts[is_dep][fi]]
        # a bundle (or a list that never sets them) draws into the caller's targets; after an
        # Opaque command into unknown ones (the same in both streams)
        inh = d[rv < 0]
        inh_t = np.zeros(n, np.int64)
        if inh.size:
            vals, first = np.unique(rv[rv < 0], return_index=True)
            for v in vals[np.argsort(first)].tolist():
                tag = "" if v > OPQ_BASE else f" after Opaque {OPQ_BASE - v}"
                m = inh[rv[rv < 0] == v]
                depth[m] = canon.id(INHERITED_DEPTH + tag)
                inh_t[m] = canon.id(INHERITED_TARGETS + tag)
        lab = np.zeros(n, np.int64)
        if d.size:   # the label of each (pipeline, depth target) pair drawn with, spread to its draws
            span = int(depth[d].max()) + 2
            pairs, at = np.unique((p[d] + 1) * span + depth[d] + 1, return_inverse=True)
            lab[d] = np.array([commute_label(self.pipes[pp - 1], self.reorder, dd - 1) if pp > 0 else 0
                               for pp, dd in zip((pairs // span).tolist(), (pairs % span).tolist())], np.int64)[at]
        ws.append((inh, inh_t[inh], lab[inh]))
        ws.append((owner[is_tgt], cmap[rts[is_tgt]], lab[owner[is_tgt]]))
        dw = np.array([x.depth_write for x in self.pipes] + [False], bool)[p]
        dt = np.array([x.depth_test for x in self.pipes] + [False], bool)[p]
        k = d[(depth[d] >= 0) & (p[d] >= 0) & dw[d]]
        ws.append((k, depth[k], lab[k]))
        k = d[(depth[d] >= 0) & (p[d] >= 0) & ~dw[d] & dt[d]]
        rs.append((k, depth[k]))
        k = d[(depth[d] >= 0) & (p[d] < 0)]
        ws.append((k, depth[k], 0))
        ib_src = st.source_at(cid_of(Col.IB), acts)
        k = d[np.isin(op[d], list(INDEXED_NATIVE)) & (ib_src[d] >= 0)]
        k = k[(s.op[ib_src[k]] == _OP["IASetIndexBuffer"]) & (st.value_at(cid_of(Col.IB), acts[k]) >= 0)]
        rs.append((k, cmap[s.args[ib_src[k], IB_BUF]]))
        for b in (self.bufa[acts], self.bufb[acts]):
            k = d[(b[d] >= 0) & ~self.args_decoded[acts[d]]]
            rs.append((k, b[k]))
        pulls = np.array([x.layout_none for x in self.pipes] + [False], bool)[p]
        fetch = d[~pulls[d]]
        for c in self.vb_cols:
            k = fetch[st.value_at(c, acts[fetch]) >= 0]
            rs.append((k, cmap[s.args[st.source_at(c, acts[k]), VB_BUF]]))
        # the pipeline: declared writes and reads, UAVs and views reachable through its root arguments
        self._pipeline_accesses(acts, p, ws, rs)
        # one write per (action, resource) with its smallest label, sorted by (action, resource)
        nres = len(canon.names) + 2
        wi = np.concatenate([x[0] for x in ws]).astype(np.int64)
        wr = np.concatenate([x[1] for x in ws]).astype(np.int64)
        wl = np.concatenate([np.broadcast_to(np.asarray(x[2], np.int64), x[0].shape) for x in ws])
        wkey = wi * nres + (wr + 1)
        o = np.lexsort((wl, wkey))
        wkey, wl = wkey[o], wl[o]
        head = np.ones(wkey.size, bool)
        head[1:] = wkey[1:] != wkey[:-1]
        wkey, wl = wkey[head], wl[head]
        rkey = unique(np.concatenate([x[0] for x in rs]).astype(np.int64) * nres +
                         (np.concatenate([x[1] for x in rs]).astype(np.int64) + 1))
        if wkey.size:   # both sorted: "rkey in wkey" by one search
            pos = np.minimum(np.searchsorted(wkey, rkey), wkey.size - 1)
            rkey = rkey[~((wkey[pos] == rkey) & (p[rkey // nres] >= 0))]
        return wkey // nres, wkey % nres - 1, wl, rkey // nres, rkey % nres - 1

    def _pipeline_accesses(self, acts: np.ndarray, p: np.ndarray,
                           ws: list[tuple[np.ndarray, np.ndarray, np.ndarray | int]],
                           rs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Append to ``ws`` / ``rs`` (see :meth:`_access_rows`) what the actions ``acts`` (pipeline
        ``p``) access through their pipeline: its declared writes and reads, and the views
        reachable through its root arguments (the views in each table range; a root view's
        buffer; UAVs are also written).

        Columnar over all the pipelines at once: per pipeline a list of *tasks* (a declared
        resource, a table range, a root view) from its declaration, then one row per (action,
        task of its pipeline), each state column read once for all the actions. The rows are
        those of a loop over pipelines and tasks, in another order (the caller sorts them)."""
        s, st, cmap, decls, canon = self.s, self.st, self.cmap, self.decls, self.canon
        n, npp = acts.size, len(self.pipes)
        lab = np.zeros(npp + 1, np.int64)   # a UAV write's label, per pipeline ([-1]: none)
        decl_w: list[list[int]] = [[] for _ in range(npp + 1)]
        decl_r: list[list[int]] = [[] for _ in range(npp + 1)]
        tables: list[list[tuple[int, int, int, bool]]] = [[] for _ in range(npp + 1)]   # (column, first, n, uav)
        views: list[list[tuple[int, bool]]] = [[] for _ in range(npp + 1)]               # (column, uav)
        for pp in unique(p[p >= 0]).tolist():
            pi = self.pipes[pp]
            lab[pp] = 1 if (pi.oi and self.reorder != "none") else 0
            decl_w[pp], decl_r[pp] = list(pi.writes), list(pi.reads)
            if not pi.params:
                continue
            root = decls[canon.name(pi.root_cid)] if pi.root_cid >= 0 else None
            tfam = Col.TC if pi.compute else Col.TG
            for q, kind, _count in pi.params:
                if kind == "table":
                    if root is None:
                        continue
                    first = 0
                    for rkind, cnt in root.params[q].ranges:
                        tables[pp].append((cid_of(tfam, q), first, cnt, rkind == "uav"))
                        first += cnt
                elif kind in ("cbv", "srv", "uav") and not pi.compute:
                    views[pp].append((cid_of(Col.VG, q), kind == "uav"))

        def rows(tasks: list[list[Any]]) -> tuple[np.ndarray, np.ndarray, list[Any]]:
            """``(action, task)`` for every task of each action's pipeline, and the tasks."""
            cnt = np.array([len(t) for t in tasks], np.int64)
            flat = [x for t in tasks for x in t]
            per = cnt[p]   # (p == -1: the last list, empty)
            return np.repeat(np.arange(n, dtype=np.int64), per), ragged(np.cumsum(cnt)[p] - per, per), flat

        for tasks, out in ((decl_w, ws), (decl_r, rs)):
            a, t, flat = rows(tasks)
            if a.size:
                res = np.array(flat, np.int64)[t]
                out.append((a, res, lab[p[a]]) if out is ws else (a, res))
        a, t, flat = rows(tables)
        if a.size:
            cols = sorted({x[0] for x in flat})
            ci = np.array([cols.index(x[0]) for x in flat], np.int64)[t]
            t_first, t_n = (np.array([x[j] for x in flat], np.int64)[t] for j in (1, 2))
            t_uav = np.array([x[3] for x in flat], bool)[t]
            href = np.stack([st.value_at(c, acts) for c in cols])[ci, a]
            ok = href >= 0
            a, href, t_first, t_n, t_uav = a[ok], href[ok], t_first[ok], t_n[ok], t_uav[ok]
            vi, vk, vr = self.views.in_ranges(href >> 32, (href & 0xFFFFFFFF) + t_first, t_n)
            keep = vr >= 0
            ti, vk, vr, vu = a[vi[keep]], vk[keep], vr[keep], t_uav[vi[keep]]
            u = vu & (vk == "uav")
            ws.append((ti[u], vr[u], lab[p[ti[u]]]))
            rs.append((ti, vr))
        a, t, flat = rows(views)
        if a.size:
            cols = sorted({x[0] for x in flat})
            ci = np.array([cols.index(x[0]) for x in flat], np.int64)[t]
            t_uav = np.array([x[1] for x in flat], bool)[t]
            ok = np.stack([st.value_at(c, acts) for c in cols])[ci, a] >= 0
            k, ci, t_uav = a[ok], ci[ok], t_uav[ok]
            r = cmap[s.args[np.stack([st.source_at(c, acts) for c in cols])[ci, k], RV_BUF]]
            ws.append((k[t_uav], r[t_uav], lab[p[k[t_uav]]]))
            rs.append((k, r))

    # ------------------------------------------------------------------ buffers
    def decodable(self, buf: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Whether buffer ``buf`` holds CPU-known data when action ``a`` runs."""
        known = self.cpu_known
        ok = (buf >= 0) & (buf < known.size)
        b = np.where(ok, buf, 0)
        return ok & known[b] & (a < self.first_write[b])

    def words(self, buf: np.ndarray, byte_off: np.ndarray, nwords: int, pure: bool | None = None) -> np.ndarray:
        """``nwords`` 32-bit words at each (buffer, byte offset); :data:`OOB` past the end
        (compiled: ``drawopt._verify.buffer_words``, one pass per buffer)."""
        out = np.full((buf.size, nwords), OOB, np.int64)
        ok = (buf >= 0) & (buf < self.is_buffer.size)
        ids = np.flatnonzero(np.bincount(buf[ok])) if ok.any() else np.zeros(0, np.int64)
        k = load_cext("_verify", pure)
        for b in ids.tolist():
            d = self.bufdecl.get(b)
            if d is None:
                continue
            whole = ids.size == 1 and bool(ok.all())
            m = slice(None) if whole else np.flatnonzero(buf == b)
            data = d.data if d.data is not None else np.zeros(0, np.uint32)
            bo = byte_off[m]
            if k is not None:
                out[m] = k.buffer_words(data, d.size, np.ascontiguousarray(bo, np.int64), nwords, OOB)
                continue
            aligned = (bo % 4 == 0) & (bo >= 0)
            for j in range(nwords):
                wi = bo // 4 + j
                inb = aligned & (wi * 4 + 4 <= d.size)
                have = inb & (wi < data.size)
                v = np.where(inb, 0, OOB)
                if data.size:
                    v = np.where(have, data[np.where(have, wi, 0)], v)
                out[m, j] = v
        return out

    def data_bytes(self, buf: int) -> np.ndarray:
        """The CPU-written contents of buffer ``buf`` as bytes (empty without ``data``)."""
        d = self.bufdecl.get(int(buf))
        if d is None or d.data is None:
            return np.zeros(0, np.uint8)
        return d.data.astype("<u4", copy=False).view(np.uint8)

    # ------------------------------------------------------------------ welded draws
    def _deweld(self, sd: dict[str, np.ndarray]) -> None:
        """Recognise indexed draws that fetch exactly what a non-indexed draw fetches.

        Under ``no_vertex_id`` (docs/architecture.md) a vertex shader with an input layout
        sees only the bytes the input assembler fetches (plus instance and root state), so
        an indexed draw whose index position ``i`` fetches, in every bound vertex buffer,
        the same bytes as vertex ``S + i`` — ``S`` being the vertex its first index fetches —
        renders what ``DrawInstanced count inst S sinst`` renders, primitive for primitive
        (list topologies only: a strip's cut value would end a strip). Such sub-draws
        become that non-indexed draw in ``sd`` (in place), so a welded draw (the ``weld``
        pass) compares equal to the draw it replaced, and a weld pointing at a vertex
        with other bytes does not. Required, or the draw stays indexed (as strict as
        without this rule): a pipeline with an input layout, ``no_vertex_id`` and no
        per-draw contract; a list topology; no ``Opaque`` command before it; the index
        buffer and every bound vertex buffer CPU-written with known contents, no GPU
        write of them before it, and every byte read inside those contents. Rows are
        compared byte for byte over each binding's stride (an input layout reads a
        vertex's elements inside its stride).
        """
        self.weld = {k: np.zeros(0, np.int64) for k in ("act", "fail_act", "fail_pos", "fail_vertex", "fail_want")}
        s, st = self.s, self.st
        cand = np.flatnonzero((sd["kind"] == KD_INDEXED) & (sd["count"] > 0) & (sd["ninst"] > 0))
        if not cand.size or not self.pipes:
            return
        a = sd["act"][cand]
        pipe_ok = np.array([(not p.compute) and (not p.layout_none) and p.no_vertex_id and not p.has_perdraw
                            for p in self.pipes] + [False], bool)
        ok = pipe_ok[self.a_pipe[a]] & (self.a_op[a] != _OP["DrawIndexedX"])
        cand, a = cand[ok], a[ok]   # the cheap test first: most pipelines do not qualify
        if not cand.size:
            return
        ok = np.ones(cand.size, bool)
        topo = st.value(cid_of(Col.TOPO))[a]
        vpp_lut = np.array([VERTS_PER_PRIM.get(t, 0) for t in TOPOLOGIES] + [0], np.int64)
        ok &= vpp_lut[np.where((topo >= 0) & (topo < len(TOPOLOGIES)), topo, len(TOPOLOGIES))] > 0
        opq = op_index(s).of(_OP["Opaque"])
        if opq.size:
            ok &= self.act[a] < opq[0]
        fmt = sd["fmt"][cand]
        isz = np.where(fmt == 1, 4, 2)
        soff = sd["soff"][cand]
        ok &= ((fmt == 0) | (fmt == 1)) & (soff >= 0) & (soff % isz == 0)
        ok &= self.decodable(sd["sbuf"][cand], a)
        # vertex buffers: every bound slot CPU-known, at least one bound
        nbound = np.zeros(a.size, np.int64)
        vbs: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for c in self.vb_cols:
            v, src = st.value(c)[a], st.source(c)[a]
            ok &= v > OPQ_BASE
            bound = v >= 0
            srcc = np.maximum(src, 0)
            buf = np.where(bound, safe_ref(self.cmap, s.args[srcc, VB_BUF]), -1)
            ok &= ~bound | self.decodable(buf, a)
            nbound += bound
            vbs.append((bound, buf, s.args[srcc, VB_OFF], s.args[srcc, VB_STRIDE]))
        ok &= nbound > 0
        cnt = sd["count"][cand]
        if int(cnt[ok].sum()) > MAX_WELD_POSITIONS:
            return
        k = np.flatnonzero(ok)
        if not k.size:
            return
        ci, cnt, n = cand[k], cnt[k], k.size
        P = int(cnt.sum())
        d = np.repeat(np.arange(n), cnt)
        j = np.arange(P, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        # the index values, then the fetched vertex v and the vertex S + j of the non-indexed form
        ibuf, isz_k, byte = sd["sbuf"][ci], isz[k][d], soff[k][d] + j * isz[k][d]
        idx = np.zeros(P, np.int64)
        good = np.ones(P, bool)
        oob = np.zeros(P, bool)
        for b in unique(ibuf).tolist():
            sel = np.flatnonzero(ibuf[d] == b)
            raw = self.data_bytes(b)
            bo, sz = byte[sel], isz_k[sel]
            inb = bo + sz <= raw.size
            oob[sel[~inb]] = True
            bo = np.where(inb, bo, 0)
            if not raw.size:
                continue
            val = raw[bo].astype(np.int64) | (raw[np.minimum(bo + 1, raw.size - 1)].astype(np.int64) << 8)
            wide = sz == 4
            if wide.any():
                hi = raw[np.minimum(bo + 2, raw.size - 1)].astype(np.int64) | \
                    (raw[np.minimum(bo + 3, raw.size - 1)].astype(np.int64) << 8)
                val = np.where(wide, val | (hi << 16), val)
            idx[sel] = val
        v = idx + sd["base"][ci][d]
        first = np.cumsum(cnt) - cnt
        S = v[first]
        t = S[d] + j
        oob |= (v < 0) | (t < 0)
        good &= ~oob
        for bound, buf, off, stride in vbs:
            bd, bufd, offd, strd = bound[k][d], buf[k][d], off[k][d], stride[k][d]
            for b, w in {(int(x), int(y)) for x, y in zip(buf[k][bound[k]].tolist(), stride[k][bound[k]].tolist())}:
                sel = np.flatnonzero(bd & (bufd == b) & (strd == w) & good)
                if not sel.size or w == 0:
                    continue
                raw = self.data_bytes(b)
                av, at = offd[sel] + v[sel] * w, offd[sel] + t[sel] * w
                inb = (av >= 0) & (at >= 0) & (av + w <= raw.size) & (at + w <= raw.size)
                oob[sel[~inb]] = True
                good[sel[~inb]] = False
                sel, av, at = sel[inb], av[inb], at[inb]
                cols = np.arange(w, dtype=np.int64)
                step = max(1, (1 << 24) // w)
                for lo in range(0, sel.size, step):
                    x, y = av[lo:lo + step], at[lo:lo + step]
                    same = (x == y) | (raw[x[:, None] + cols] == raw[y[:, None] + cols]).all(axis=1)
                    good[sel[lo:lo + step][~same]] = False
        bad_d = np.zeros(n, bool)
        bad_d[d[~good]] = True
        if bad_d.any():
            # the first position of each failing draw, to explain a mismatch
            fp = np.flatnonzero(~good)
            fp = fp[np.r_[True, d[fp[1:]] != d[fp[:-1]]]]
            self.weld.update(fail_act=sd["act"][ci][d[fp]], fail_pos=j[fp], fail_vertex=v[fp],
                             fail_want=np.where(oob[fp], -1, t[fp]))
        w_ = ci[~bad_d]
        self.weld["act"] = sd["act"][w_]
        sd["kind"][w_] = KD_DRAW
        sd["start"][w_] = S[~bad_d]
        sd["soff"][w_] = S[~bad_d]
        sd["base"][w_] = 0
        sd["sbuf"][w_] = NOT_INDEXED
        sd["fmt"][w_] = -1

    # ------------------------------------------------------------------ sub-draws
    def _subdraws(self) -> dict[str, np.ndarray]:
        s, st, cmap = self.s, self.st, self.cmap
        a_op = self.a_op
        parts: list[tuple[np.ndarray, dict[str, np.ndarray | int]]] = []

        def add(a, **kw) -> None:
            parts.append((np.asarray(a, np.int64), kw))

        def of(op: int) -> tuple[np.ndarray, np.ndarray]:
            """The actions with opcode ``op`` and their argument rows (read by column below)."""
            m = np.flatnonzero(a_op == op)
            return m, s.args[self.act[m]]

        ib = cid_of(Col.IB)
        self.ib_buf = st.of_setter(ib, lambda cmd: cmap[s.args[cmd, IB_BUF]])
        self.ib_fmt = st.of_setter(ib, lambda cmd: s.args[cmd, IB_FMT], -1)
        self.ib_off = st.of_setter(ib, lambda cmd: s.args[cmd, IB_OFF], 0)
        isz = np.where(self.ib_fmt == 1, 4, 2)

        m, args = of(_DI)
        start = args[:, _DI.col("start_vertex")]
        add(m, kind=KD_DRAW, count=args[:, COL_DRAW_COUNT], start=start, ninst=args[:, COL_INSTANCES],
            sinst=args[:, _DI.col("start_instance")], soff=start)
        m, args = of(_DII)
        start = args[:, _DII.col("start_index")]
        add(m, kind=KD_INDEXED, count=args[:, COL_DRAW_COUNT], start=start, base=args[:, _DII.col("base_vertex")],
            ninst=args[:, COL_INSTANCES], sinst=args[:, _DII.col("start_instance")], sbuf=self.ib_buf[m],
            soff=self.ib_off[m] + start * isz[m], fmt=self.ib_fmt[m])
        m, args = of(_DX)
        add(m, kind=KD_INDEXED, count=args[:, _DX.col("index_count")], base=args[:, _DX.col("index_offset")], ninst=1,
            sbuf=cmap[args[:, _DX.col("buffer")]], soff=args[:, _DX.col("offset")], fmt=args[:, _DX.col("format")])
        m, args = of(_DSP)
        add(m, kind=KD_DISPATCH, ninst=1, sym=hash_cols([args[:, _DSP.col(n)] for n in ("x", "y", "z")], m.size))
        m, args = of(_CP)
        add(m, kind=KD_COPY, ninst=1,
            sym=hash_cols([cmap[args[:, _CP_DST]], args[:, _CP_DOFF], cmap[args[:, _CP_SRC]], args[:, _CP_SOFF],
                           args[:, _CP_SIZE]], m.size))
        for name, (indexed, multi, auto) in INDIRECT.items():
            m, args = of(_OP[name])
            if m.size:
                self._indirect(m, args, indexed, multi, auto, add, isz)
        sd = self._rows(parts)
        self._deweld(sd)
        del self.ib_fmt, self.ib_off   # (the sub-draws' index sources are in sd; _frontend reads ib_buf)
        return sd

    _ROW_DEFAULTS = {"ord": 0, "kind": -1, "count": -1, "start": 0, "base": 0, "ninst": -1, "sinst": 0, "sym": 0,
                     "sbuf": NOT_INDEXED, "soff": -1, "fmt": -1}

    def _rows(self, parts: list[tuple[np.ndarray, dict[str, np.ndarray | int]]]) -> dict[str, np.ndarray]:
        """The sub-draw columns of ``parts`` (``(actions, fields)``, a field an array or a
        scalar), by action then ``ord``. Each action's rows come from one part, in ``ord``
        order, so row ``ord`` of action ``a`` goes to ``first[a] + ord``: a scatter, no sort."""
        n_rows = np.zeros(self.nA, np.int64)
        for a, _ in parts:
            n_rows += np.bincount(a, minlength=self.nA)
        first = np.cumsum(n_rows) - n_rows
        total = int(n_rows.sum())
        dest = [first[a] + np.asarray(kw.get("ord", 0), np.int64) for a, kw in parts]
        sd = {"act": np.empty(total, np.int64)}
        for (a, _), d in zip(parts, dest):
            sd["act"][d] = a
        for k, dflt in self._ROW_DEFAULTS.items():
            col = np.full(total, dflt, np.int64) if any(k not in kw for _, kw in parts) else np.empty(total, np.int64)
            for (_, kw), d in zip(parts, dest):
                if k in kw:
                    col[d] = kw[k]
            sd[k] = col
        return sd

    def _indirect(self, m, margs, indexed, multi, auto, add, isz) -> None:
        cmap = self.cmap
        if auto:
            cbuf, coff, maxc = cmap[margs[:, _AUTO_CBUF]], margs[:, _AUTO_COFF], margs[:, COL_AUTO_MAX]
            abuf, aoff, stride = cmap[margs[:, _AUTO_ABUF]], margs[:, _AUTO_OFF], margs[:, _AUTO_STRIDE]
            cnt_ok = self.decodable(cbuf, m)
            cw = self.words(cbuf, coff, 1)[:, 0]
            cnt = np.where(cnt_ok & (cw >= 0), np.minimum(np.maximum(cw, 0), maxc), 0)
        else:
            abuf = cmap[margs[:, COL_MULTI_ARGS] if multi else margs[:, _IND_ARGS]]
            aoff = margs[:, _MULTI_OFF] if multi else margs[:, _IND_OFF]
            stride = margs[:, _MULTI_STRIDE] if multi else np.zeros(m.size, np.int64)
            cnt = margs[:, COL_DRAW_COUNT] if multi else np.ones(m.size, np.int64)
            cnt_ok = np.ones(m.size, bool)
        src = ({"sbuf": self.ib_buf[m], "soff": self.ib_off[m], "fmt": self.ib_fmt[m]} if indexed else {})
        dec = self.decodable(abuf, m) & cnt_ok
        # every multi-draw is expanded draw by draw, whatever its count (columnar: one row per
        # draw), so the verdict does not depend on how a rewrite sized its batches
        total = int(np.maximum(cnt, 0).sum())
        if total > MAX_RECORDS:
            raise UsageError(f"the stream's indirect draws perform {total} draws; the validator handles at most "
                             f"{MAX_RECORDS}")
        # symbolic records keep the index buffer in the index-source fields (src above)
        if auto and (~dec).any():
            k = ~dec
            add(m[k], kind=KD_SYMAUTO, ninst=1, **{f: v[k] for f, v in src.items()},
                sym=hash_cols([cbuf[k], coff[k], maxc[k], abuf[k], aoff[k], stride[k],
                               int(indexed)], int(k.sum())))
        per = np.where(dec, cnt, 0 if auto else cnt)
        j = np.repeat(np.arange(m.size), per)
        if j.size == 0:
            return
        ordv = np.arange(j.size) - np.repeat(np.cumsum(per) - per, per)
        a = m[j]
        off = aoff[j] + ordv * stride[j]
        d = dec[j]
        if (~d).any():
            k = ~d
            add(a[k], ord=ordv[k], kind=KD_SYM, ninst=1, **{f: v[j][k] for f, v in src.items()},
                sym=hash_cols([abuf[j][k], off[k], int(indexed)], int(k.sum())))
        if d.any():
            aa, oo = a[d], ordv[d]
            if indexed:
                w = self.words(abuf[j][d], off[d], 5)
                base = np.where(w[:, 3] >= 2**31, w[:, 3] - 2**32, w[:, 3])
                add(aa, ord=oo, kind=KD_INDEXED, count=w[:, 0], start=w[:, 2], base=base, ninst=w[:, 1],
                    sinst=w[:, 4], sbuf=self.ib_buf[aa], soff=self.ib_off[aa] + w[:, 2] * isz[aa],
                    fmt=self.ib_fmt[aa])
            else:
                w = self.words(abuf[j][d], off[d], 4)
                add(aa, ord=oo, kind=KD_DRAW, count=w[:, 0], start=w[:, 2], ninst=w[:, 1], sinst=w[:, 3],
                    soff=w[:, 2])

    # ------------------------------------------------------------------ records
    def _binding(self, perdraw: int, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(buffer id, byte offset) bound at root parameter ``perdraw`` (a pipeline's
        ``PipeInfo.perdraw``; -1: none) for ``acts`` (-1: nothing bound)."""
        s, st = self.s, self.st
        buf = np.full(acts.size, -1, np.int64)
        off = np.zeros(acts.size, np.int64)
        if perdraw < 0:
            return buf, off
        c = cid_of(Col.VG, perdraw)
        ok = st.value(c)[acts] >= 0
        e = st.event_index(c)[acts[ok]]   # the root view's setting command, as an event
        ei = st.events(c)[0]
        buf[ok] = safe_ref(self.cmap, s.args[ei, RV_BUF])[e]
        off[ok] = s.args[ei, RV_OFF][e]
        t = st.value(cid_of(Col.TG, perdraw))[acts]
        i = np.flatnonzero(~ok & (t >= 0))
        if i.size:
            # a table: the buffer the view in its first slot shows
            rid = self.views.at(t[i] >> 32, t[i] & 0xFFFFFFFF)
            hit = (rid >= 0) & (rid < self.is_buffer.size)
            hit &= self.is_buffer[np.where(hit, rid, 0)]
            buf[i[hit]] = rid[hit]
        return buf, off

    def _records(self, sd: dict[str, np.ndarray]) -> None:
        """The records of the sub-draws ``sd`` (consumed: once the rows are built, ``sd`` keeps
        only the :data:`_CONTRACT_SD` columns, the ones :meth:`_contract` reads)."""
        s, nA = self.s, self.nA
        drawlike_sd = (sd["kind"] == KD_DRAW) | (sd["kind"] == KD_INDEXED)
        sd["ninst"] = np.where(drawlike_sd & (sd["count"] <= 0), 0, np.maximum(sd["ninst"], 0))
        # which sub-draws read a per-draw array entry per instance (array form)
        sd_pipe = self.a_pipe[sd["act"]]
        array_form = np.zeros(sd["act"].size, bool)
        self.sd_buf = np.full(sd["act"].size, -1, np.int64)
        self.sd_off = np.zeros(sd["act"].size, np.int64)
        # the binding of each pipeline form's sub-draws, read once per per-draw parameter (for the
        # sub-draws of every form that has it): the binding depends on the parameter only
        forms: dict[int, list[tuple[bool, np.ndarray]]] = {}   # perdraw -> (x contract, sub-draws)
        for p, sel_all in by_pipeline(sd_pipe, len(self.pipes)):
            if p < 0 or not self.pipes[p].has_perdraw:
                continue
            sel_all = sel_all[drawlike_sd[sel_all]]
            is_x = self.a_op[sd["act"][sel_all]] == _OP["DrawIndexedX"]
            for pi, sel in ((self.pipes[p].for_draws(True), sel_all[is_x]),
                            (self.pipes[p].for_draws(False), sel_all[~is_x])):
                forms.setdefault(pi.perdraw, []).append((pi.contract == "x", sel))
        for perdraw, fs in forms.items():
            sel = np.concatenate([x for _, x in fs])
            self.sd_buf[sel], self.sd_off[sel] = self._binding(perdraw, sd["act"][sel])
            for x_form, sel in fs:
                if x_form:
                    array_form[sel] = self.a_op[sd["act"][sel]] == _OP["DrawIndexedX"]
                else:
                    array_form[sel] = self.sd_buf[sel] >= 0
        # per-instance array reads of very many instances: one record naming the binding
        self.sd_bigarr = array_form & (sd["ninst"] > EXPAND_CAP)
        array_form &= ~self.sd_bigarr
        # native draws of such pipelines expand per instance too, so both forms merge alike
        perdraw_pipe = np.array([p.has_perdraw for p in self.pipes] + [False], bool)[sd_pipe]
        per_inst = array_form | (perdraw_pipe & drawlike_sd & (sd["ninst"] <= EXPAND_CAP))
        per = np.where(per_inst, sd["ninst"], np.minimum(sd["ninst"], 1))
        if int(per.sum()) > MAX_RECORDS:
            raise UsageError(f"the stream expands to {int(per.sum())} per-instance records; the validator "
                             f"handles at most {MAX_RECORDS}")
        key, r_act, r_ord, inst, sub, af, nomerge = _record_rows(
            sd, per, per_inst, array_form, self.a_state, self.a_op, self.act, s.flags, op_index(s).of(_OP["Opaque"]))
        # from here on the sub-draws are read through _contract only (their sinst and base)
        del per, per_inst, array_form, sd_pipe, perdraw_pipe, drawlike_sd
        for f in [f for f in sd if f not in _CONTRACT_SD]:
            del sd[f]
        R = r_act.size
        kind = key[:, F["kind"]]
        drawlike = (kind == KD_DRAW) | (kind == KD_INDEXED)
        is_x_rec = self.a_op[r_act] == _OP["DrawIndexedX"]
        r_pipe = self.a_pipe[r_act]
        self.r_xslot = np.full(R, -1, np.int64)
        self.x = {k: [] for k in ("act", "slot", "low", "buf", "off", "rec", "imax", "imax_from")}
        # an array-clause form's records are filled by what the form declares (_CONTRACT_FIELDS),
        # the same for every pipeline declaring it alike: once per such group of pipelines (an x
        # form records its draws in self.x, in pipeline order: one pipeline at a time)
        alike: dict[tuple[object, ...], tuple[PipeInfo, list[np.ndarray]]] = {}
        for p, sel in by_pipeline(r_pipe, len(self.pipes)):
            if p < 0:
                continue
            pi = self.pipes[p]
            if pi.never_merge:
                nomerge[sel] = True
            if pi.has_perdraw:
                dsel = sel[drawlike[sel]]
                is_x = is_x_rec[dsel]
                self._contract(pi.for_draws(True), dsel[is_x], key, sd, r_act, inst, af, sub)
                pa = pi.for_draws(False)
                if pa.contract == "x":
                    self._contract(pa, dsel[~is_x], key, sd, r_act, inst, af, sub)
                else:
                    alike.setdefault(tuple(getattr(pa, f) for f in _CONTRACT_FIELDS), (pa, []))[1].append(dsel[~is_x])
        for pa, sels in alike.values():
            self._contract(pa, np.concatenate(sels), key, sd, r_act, inst, af, sub)
        # the input assembler's vertex-window shift (see _vertex_windows): pipelines with a layout
        layout = np.array([not p.layout_none for p in self.pipes] + [True], bool)[r_pipe]
        shift = np.where(layout, self.vb_shift[r_act], 0)
        if shift.any():
            ind = layout & (kind == KD_INDEXED) & (key[:, F["svoff"]] != -1)
            key[:, F["bias"]] += np.where(ind, shift, 0)
            nonind = layout & ~ind & drawlike
            # a non-indexed draw's SV_VertexID counts from StartVertexLocation: the shift may move
            # into the start only where the shaders declare they do not read SV_VertexID
            novid = np.array([p.no_vertex_id for p in self.pipes] + [False], bool)[r_pipe]
            fold = nonind & novid & (kind == KD_DRAW)
            key[:, F["src_off"]][fold] += shift[fold]
            # only where there is a shift: a record's key must not depend on whether another one has one
            rest = nonind & ~fold & (shift != 0)
            key[:, F["ia"]][rest] = hash_cols([key[:, F["ia"]][rest], shift[rest]], int(rest.sum()))
        self.r_act, self.r_sub, self.key, self.r_nomerge = r_act, r_ord, key, nomerge
        self.a_nrec = np.bincount(r_act, minlength=nA).astype(np.int64)
        self.a_first = np.cumsum(self.a_nrec) - self.a_nrec
        self.x = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in self.x.items()}

    def _lift_native(self, pi: PipeInfo, acts: np.ndarray) -> tuple[list[Column], list[np.ndarray]]:
        """The lift items of ``pi`` as the root arguments hold them at ``acts``, and the
        identity parts a lifted table (its heap) or root view (its buffer) keeps, as
        :func:`hash_cols` columns to hash with ``fold=`` ``self.fold`` (a root constant is
        ``(its column, acts)``: read, and normalised (:func:`norm`), by the hash only)."""
        st, s, bundle = self.st, self.s, self.bundle
        items, ident = [], []
        for q, k, kind in pi.lift_all:
            if kind == "table":
                v = st.value(cid_of(Col.TG, q))[acts]
                items.append(np.where(v >= 0, v & 0xFFFFFFFF, norm(v, bundle)) if k == 0 else np.full(acts.size, NEVER))
                ident.append(np.where(v >= 0, v >> 32, norm(v, bundle)))
            elif kind in ("cbv", "srv", "uav"):
                c = cid_of(Col.VG, q)
                v, src = st.value(c)[acts], st.source(c)[acts]
                ok = v >= 0
                off = np.where(ok, s.args[np.maximum(src, 0), RV_OFF], 0)
                word = (off >> (32 * k)) & 0xFFFFFFFF if k in (0, 1) else np.zeros(acts.size, np.int64)
                items.append(np.where(ok, word, norm(v, bundle)))
                ident.append(np.where(ok, safe_ref(self.cmap, s.args[np.maximum(src, 0), RV_BUF]), norm(v, bundle)))
            else:
                items.append((st.value(cid_of(Col.CG, q * 64 + k)), acts))
        return items, ident

    def _contract(self, pi: PipeInfo, sel: np.ndarray, key: np.ndarray, sd: dict[str, np.ndarray],
                  r_act: np.ndarray, inst: np.ndarray, af: np.ndarray, sub: np.ndarray) -> None:
        """Fill the abstract fields of records ``sel`` of a pipeline with a per-draw contract.

        What the shader observes is ``(base vertex, instance, lift items)`` (and, with an
        input layout, what the input assembler fetches), however it is delivered: from
        the draw arguments and root arguments (native form) or from the per-draw
        record (array form: ``DrawIndexedX`` under ``x``; a bound per-draw array under
        ``instance_data`` / ``draw_data``, indexed by StartInstanceLocation + instance).
        """
        layout = not pi.layout_none
        nitems = len(pi.lift_all)
        if not sel.size:
            return
        key[:, F["rel"]][sel] = -1
        key[:, F["svoff"]][sel] = -1
        native = sel[~af[sel]]
        if native.size:
            an = r_act[native]
            items, ident = self._lift_native(pi, an)
            key[:, F["lift"]][native] = hash_cols([nitems, *items, *ident], native.size, fold=self.fold)
            big = self.sd_bigarr[sub[native]]
            if big.any():
                nb = native[big]
                key[:, F["lift"]][nb] = hash_cols([UNKNOWN, self.sd_buf[sub[nb]], self.sd_off[sub[nb]]], nb.size)
            if layout:
                key[:, F["ia"]][native] = hash_cols([key[:, F["bias"]][native], 0], native.size)
        k = sel[af[sel]]
        if not k.size:
            return
        ak = r_act[k]
        nwords = pi.rec_words
        b, o = self.sd_buf[sub[k]], self.sd_off[sub[k]]
        call_bias = key[:, F["bias"]][k]
        ia_inst = sd["sinst"][sub[k]] + inst[k]
        if pi.contract == "x":
            io = sd["base"][sub[k]]
            idx = io >> pi.k_bits
            low = io & ((1 << pi.k_bits) - 1)
            self.r_xslot[k] = idx
            imax = self._largest_index(pi, key[:, F["src_buf"]][k], key[:, F["src_off"]][k], key[:, F["fmt"]][k],
                                       key[:, F["count"]][k], low, ak)
            for name, v in (("act", ak), ("slot", idx), ("low", low), ("buf", b), ("off", o), ("rec", k),
                            ("imax", imax[0]), ("imax_from", imax[1])):
                self.x[name].append(v)
        else:
            idx = ia_inst
        addr = o + idx * (4 * nwords)
        dec = self.decodable(b, ak) & (b >= 0)
        w = np.full((k.size, nwords), UNKNOWN, np.int64)
        if dec.any():
            w[dec] = self.words(b[dec], addr[dec], nwords)
        # items this clause does not lift (another clause does) keep their root-argument values
        nat, ident = self._lift_native(pi, ak)
        col = {it: j for j, it in enumerate(pi.lift)}
        vals = [w[:, 2 + col[it]] if it in col else nat[j] for j, it in enumerate(pi.lift_all)]
        lift = hash_cols([nitems, *vals, *ident], k.size, fold=self.fold)
        lift = np.where(dec, lift, hash_cols([UNKNOWN, b, addr, *ident], k.size))
        rec0 = np.where(w[:, 0] >= 2**31, w[:, 0] - 2**32, w[:, 0])
        if pi.contract == "x" and pi.base == "vertex":
            bias = low
        elif pi.contract == "x":
            bias = np.where(w[:, 0] < 0, w[:, 0], rec0 + low)
        else:
            bias = rec0
        key[:, F["bias"]][k] = bias
        key[:, F["inst"]][k] = w[:, 1]
        key[:, F["lift"]][k] = lift
        if layout:
            # an array clause on an input-layout pipeline promises that the record index is the
            # only StartInstanceLocation-dependent input (docs/architecture.md): the input
            # assembler's per-vertex fetch follows the call's base vertex, nothing else
            shift = ia_inst - w[:, 1] if pi.contract == "x" else 0
            key[:, F["ia"]][k] = hash_cols([call_bias, shift], k.size)

    def _largest_index(self, pi: PipeInfo, sbuf: np.ndarray, soff: np.ndarray, fmt: np.ndarray,
                       count: np.ndarray, low: np.ndarray, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The largest index value each ``DrawIndexedX`` may read, and what proves it
        (:data:`IMAX_DECLARED`, :data:`IMAX_FORMAT`, :data:`IMAX_DATA`, :data:`IMAX_UNKNOWN`).

        The bound is the smaller of the contract's ``max_index`` and the index format's
        largest value (65535 for R16, 2^32 - 1 for R32). Where that bound plus the
        IndexOffset low bits does not fit ``vertex_bits`` and the index data is CPU-known
        (no GPU write before the draw), the largest index actually read is used instead;
        where it is not known the bound stands (and the draw is reported as ambiguous).
        """
        n = sbuf.size
        fmt_max = np.where(fmt == 1, (1 << 32) - 1, np.where(fmt == 0, (1 << 16) - 1, (1 << 32) - 1))
        if pi.max_index:
            bound = np.minimum(fmt_max, pi.max_index)
            src = np.where(pi.max_index <= fmt_max, IMAX_DECLARED, IMAX_FORMAT)
        else:
            bound, src = fmt_max, np.full(n, IMAX_FORMAT, np.int64)
        lim = 1 << pi.k_bits
        need = np.flatnonzero((bound + np.maximum(low, 0) >= lim) & (sbuf >= 0))
        if need.size:
            known = self.decodable(sbuf[need], acts[need])
            data_max = self._range_max(sbuf[need], soff[need], fmt[need], count[need])
            ok = known & (data_max >= -1)
            bound = bound.copy()
            bound[need[ok]] = data_max[ok]
            src = src.copy()
            src[need[ok]] = IMAX_DATA
            src[need[~ok]] = np.where(src[need[~ok]] == IMAX_DECLARED, IMAX_DECLARED, IMAX_UNKNOWN)
        return bound, src

    def _range_max(self, buf: np.ndarray, soff: np.ndarray, fmt: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Largest index value in each range of ``count`` indices at byte ``soff`` of ``buf``
        (-1: an empty range; -2: a range past the end of the buffer or misaligned)."""
        out = np.full(buf.size, -2, np.int64)
        for b, f in {(int(x), int(y)) for x, y in zip(buf.tolist(), fmt.tolist())}:
            d = self.bufdecl.get(b)
            if d is None or f not in (0, 1):
                continue
            m = np.flatnonzero((buf == b) & (fmt == f))
            isz = 4 if f == 1 else 2
            raw = self.data_bytes(b)
            # the buffer's indices: its CPU-written data, then zeros up to its declared size (which a
            # stream may declare far larger than its data: the zeros are not allocated)
            nvals = d.size // isz
            have = min(raw.size // isz, nvals)
            vals = raw[:have * isz].view("<u4" if f == 1 else "<u2").astype(np.int64)
            start, cnt = soff[m] // isz, np.maximum(count[m], 0)
            ok = (soff[m] >= 0) & (soff[m] % isz == 0) & (start + cnt <= nvals)
            out[m[ok & (cnt == 0)]] = -1
            q = np.flatnonzero(ok & (cnt > 0))
            if q.size:
                # a range past the data also reads zeros, which no index value is below
                lo, hi = start[q], start[q] + cnt[q]
                mx = np.zeros(q.size, np.int64)
                d_in = lo < have
                if d_in.any():
                    mx[d_in] = _range_max_query(vals, lo[d_in], np.minimum(hi[d_in], have))
                out[m[q]] = mx
        return out

    # ------------------------------------------------------------------ front end
    def _frontend(self) -> None:
        a_op = self.a_op
        acts, res, kinds = [], [], []
        for name, (_, _, auto) in INDIRECT.items():
            m = np.flatnonzero(a_op == _OP[name])
            acts.append(m)
            res.append(self.bufa[m])
            kinds.append(np.full(m.size, FE_ARGS, np.int64))
            if auto:
                acts.append(m)
                res.append(self.bufb[m])
                kinds.append(np.full(m.size, FE_COUNT, np.int64))
        m = np.flatnonzero(_INDEXED_LUT[a_op] & (self.st.value(cid_of(Col.IB)) >= 0))
        acts.append(m)
        res.append(self.ib_buf[m])   # (the index buffer's setter's buffer where one is bound)
        kinds.append(np.full(m.size, FE_INDEX, np.int64))
        m = np.flatnonzero(a_op == _OP["DrawIndexedX"])
        acts.append(m)
        res.append(self.bufa[m])
        kinds.append(np.full(m.size, FE_INDEX, np.int64))
        a = np.concatenate(acts).astype(np.int64)
        o = np.argsort(a, kind="stable")
        self.fe_act, self.fe_res, self.fe_kind = a[o], np.concatenate(res)[o], np.concatenate(kinds)[o]

    def run(self) -> Records:
        self._pipelines()
        self._state()
        self._accesses()
        # the filled state columns are dropped between the phases (each reads a few of its own;
        # a column asked for again is filled again, one merge pass): they are 8 bytes per
        # action each, and the phases that follow build the largest arrays
        self.st.release()
        sd = self._subdraws()
        self.st.release()
        self._records(sd)   # (consumes sd)
        del sd
        self.st.release()
        self._frontend()
        topo = self.st.value(cid_of(Col.TOPO))
        vpp_lut = np.array([VERTS_PER_PRIM.get(t, 0) for t in TOPOLOGIES] + [0], np.int64)
        a_vpp = vpp_lut[np.where((topo >= 0) & (topo < len(TOPOLOGIES)), topo, len(TOPOLOGIES))]
        self.st.release()   # the records hold what the actions observe; a later question fills a column again
        return Records(
            stream=self.s, canon=self.canon, cmap=self.cmap, pipes=self.pipes, state=self.st,
            a_cmd=self.act, a_op=self.a_op, a_pipe=self.a_pipe, a_state=self.a_state, a_first=self.a_first,
            a_nrec=self.a_nrec, a_vpp=a_vpp, r_act=self.r_act, r_sub=self.r_sub, r_xslot=self.r_xslot,
            r_nomerge=self.r_nomerge, key=self.key, w_act=self.w_act, w_res=self.w_res, w_lab=self.w_lab,
            reads=self.reads, fe_act=self.fe_act, fe_res=self.fe_res,
            fe_kind=self.fe_kind, observed=self.observed, x=self.x, weld=self.weld,
            exit=(track(self.s, self.canon, self.cmap, self.universe, np.array([len(self.s)], np.int64))
                  if self.bundle else None),
            a_observer=self.a_observer)


_ROW_FIELDS = ("kind", "src_buf", "src_off", "fmt", "count", "sym", "state", "epoch", "bias", "inst", "ninst", "rel",
               "svoff")
"""The key fields :func:`_record_rows` fills (in the order drawopt._verify.record_rows takes their columns)."""


def _record_rows(sd: dict[str, np.ndarray], per: np.ndarray, per_inst: np.ndarray, array_form: np.ndarray,
                 a_state: np.ndarray, a_op: np.ndarray, a_cmd: np.ndarray, flags: np.ndarray, opq: np.ndarray,
                 pure: bool | None = None) -> tuple[np.ndarray, ...]:
    """The records of the sub-draws ``sd``: sub-draw ``i`` becomes ``per[i]`` records (its
    instances one by one where ``per_inst``). Returns the key (the :data:`_ROW_FIELDS`
    filled; lift and ia 0) and per record: action, ``ord``, instance within the sub-draw,
    sub-draw, array form, nomerge. Compiled: ``drawopt._verify.record_rows``, one pass."""
    k = load_cext("_verify", pure)
    if k is not None:
        c64 = [np.ascontiguousarray(sd[f], np.int64) for f in ("act", "kind", "sbuf", "soff", "fmt", "count", "sym",
                                                               "base", "sinst", "ninst", "ord")]
        return k.record_rows(np.ascontiguousarray(per, np.int64), *c64, per_inst.view(np.uint8),
                             array_form.view(np.uint8), np.ascontiguousarray(a_state, np.int64),
                             np.ascontiguousarray(a_op, np.int64), np.ascontiguousarray(a_cmd, np.int64), flags,
                             np.ascontiguousarray(opq, np.int64), np.array([F[f] for f in _ROW_FIELDS], np.int64),
                             len(KEY_FIELDS), KD_DRAW, KD_INDEXED, _OP["DrawIndexedX"], FLAG_NOMERGE)
    if bool((per == 1).all()):   # one record per sub-draw: no gathers
        sub, inst = np.arange(per.size), np.zeros(per.size, np.int64)

        def rep(v: np.ndarray) -> np.ndarray:
            return v
    else:   # record j of sub-draw i: its columns repeated (v[sub], without the gather)
        sub = np.repeat(np.arange(per.size), per)
        inst = np.arange(sub.size) - np.repeat(np.cumsum(per) - per, per)

        def rep(v: np.ndarray) -> np.ndarray:
            return np.repeat(v, per)
    key = np.zeros((sub.size, len(KEY_FIELDS)), np.int64, order="F")   # columns contiguous: read field by field
    for f, c in (("kind", "kind"), ("src_buf", "sbuf"), ("src_off", "soff"), ("fmt", "fmt"), ("count", "count"),
                 ("sym", "sym")):
        key[:, F[f]] = rep(sd[c])
    kind, r_act, base = key[:, F["kind"]], rep(sd["act"]), rep(sd["base"])
    key[:, F["state"]] = a_state[r_act]
    if opq.size:   # (0 before the first Opaque command)
        key[:, F["epoch"]] = np.searchsorted(opq, a_cmd[r_act])
    drawlike = (kind == KD_DRAW) | (kind == KD_INDEXED)
    key[:, F["bias"]] = np.where(kind == KD_INDEXED, base, np.where(drawlike, 0, -1))
    key[:, F["inst"]] = np.where(drawlike, rep(sd["sinst"]) + inst, -1)
    key[:, F["ninst"]] = np.where(rep(per_inst), 1, np.where(drawlike, rep(sd["ninst"]), 1))
    key[:, F["rel"]] = np.where(drawlike, inst, -1)
    key[:, F["svoff"]] = np.where(a_op[r_act] == _OP["DrawIndexedX"], base, 0)
    nomerge = (flags[a_cmd[r_act]] & FLAG_NOMERGE) != 0
    return key, r_act, rep(sd["ord"]), inst, sub, rep(array_form), nomerge


_CONTRACT_SD = ("sinst", "base")
"""The sub-draw columns :meth:`_Expander._contract` reads (the others are dropped once the
record rows are built)."""

_CONTRACT_FIELDS = ("contract", "layout_none", "lift", "lift_all")
"""The fields of a pipeline form that :meth:`_Expander._contract` reads for an array clause
(``rec_words`` follows ``lift``); its records' own columns give the rest."""


def _range_max_query(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(vals[lo[i]:hi[i]])`` for every non-empty range (a sparse table: O(n log n) once).

    >>> _range_max_query(np.array([3, 1, 4, 1, 5, 9, 2, 6]), np.array([0, 1, 6]), np.array([3, 4, 8]))
    array([4, 4, 6])
    """
    levels = [vals]
    length = hi - lo
    top = int(length.max()).bit_length() - 1
    for j in range(1, top + 1):
        prev, h = levels[-1], 1 << (j - 1)
        levels.append(np.maximum(prev[:-h], prev[h:]))
    lg = np.zeros(lo.size, np.int64)
    for j in range(1, top + 1):
        lg[length >= (1 << j)] = j
    out = np.empty(lo.size, np.int64)
    for j in np.unique(lg).tolist():
        m = lg == j
        t = levels[j]
        out[m] = np.maximum(t[lo[m]], t[hi[m] - (1 << j)])
    return out


def _observed_cols(pi: PipeInfo, universe: list[int], gfx_fixed: list[int], cmp_fixed: list[int]) -> list[int]:
    """State columns the actions of pipeline ``pi`` observe."""
    if pi.compute:
        cols = list(cmp_fixed)
        tfam, cfam, vfam = Col.TC, Col.CC, None
    else:
        cols = list(gfx_fixed)
        if pi.blend != "opaque":
            cols.append(cid_of(Col.BF))
        if not pi.layout_none:
            cols += [c for c in universe if Col(c >> 20) == Col.VB]
        tfam, cfam, vfam = Col.TG, Col.CG, Col.VG
    excluded = pi.excluded_params()
    # the columns of each root parameter, by kind, that the universe has (a parameter set as
    # another kind than its pipeline reads holds that binding: a table read where a root view
    # was set reads the view, as the validator and the state oracle have it)
    kinds_of: dict[int, dict[Col, list[int]]] = {}
    for c in universe:
        f = Col(c >> 20)
        if f in (tfam, cfam, vfam):
            kinds_of.setdefault((c & 0xFFFFF) // 64 if f == cfam else c & 0xFFFFF, {}).setdefault(f, []).append(c)
    for q, kind, count in pi.params:
        if q in excluded:
            continue
        if kind == "table":
            own = tfam
            cols.append(cid_of(tfam, q))
        elif kind == "constants":
            own = cfam
            lifted = pi.lifted_words(q) if not pi.compute else set()
            cols += [cid_of(cfam, q * 64 + w) for w in range(count) if w not in lifted]
        elif vfam is not None:
            own = vfam
            cols.append(cid_of(vfam, q))
        else:
            continue
        cols += [c for f, fcols in kinds_of.get(q, {}).items() if f != own for c in fcols]
    return cols
