"""The state tracker: what every draw sees, as interned, comparable state ids.

State model (SPEC "State" and the seeds)
----------------------------------------
The state is a fixed tuple of **slots** (:data:`SLOTS`)::

    pipeline, gfx_rootsig, heaps, topology, render_targets, viewport, scissor,
    blend_factor, stencil_ref, gs_params, index_buffer, vertex_buffers,
    root0..root15 (graphics root arguments),
    compute_rootsig, croot0..croot15 (compute root arguments)

Each slot holds an interned **value id** (>= 0) or a marker: :data:`UNDEFINED`
(-1), :data:`MASKED` (-2, the draw cannot observe the slot) or :data:`UNKNOWN`
(-3, after an ``Opaque`` command). A root argument is a descriptor table
(heap, slot), root constants (the 32-bit words; a partial update with
``dest=`` merges into the current words) or a root CBV/SRV (buffer, offset).
Vertex buffers merge per input slot the same way.

Rules:

* At the start of a command list everything is undefined except ``gs_params``,
  which is the driver default (``GSSetParameters null``). A **bundle** inherits
  the calling list's state (D3D12 bundle semantics), except the pipeline state
  and the primitive topology; inherited slots start *unknown*.
* ``SetDescriptorHeaps`` with different heaps than the current ones makes every
  root argument that holds a descriptor table undefined (graphics and compute);
  the same heaps again change nothing (d3d12-descriptor-tables-ru.txt). A
  **bundle**'s first ``SetDescriptorHeaps`` changes no table: a bundle may set its
  heaps once, and they must be the calling list's (a second, different set is the
  ``bundle-heaps`` finding, and is tracked like any change).
* ``Set{Graphics,Compute}RootSignature`` with a different root signature makes
  every root argument of that side undefined; the same one changes nothing.
* ``DrawIndexedX`` leaves the index buffer undefined (drawindexedx.txt).
* ``CSEnableAutomaticGpuFlush`` is tracked by the flush rules, not here.
* A change from an *unknown* root signature or heaps (a bundle's inherited ones,
  or after ``Opaque``) makes the affected root arguments unknown, not undefined:
  they may still hold the value set before, so that set stays observed.
* After an ``Opaque`` command every slot is unknown. Unknown is never a finding,
  and state ids of rows holding unknowns are distinct on either side of each
  Opaque command, so nothing merges across one. A partial update (root constants
  at ``dest=``, one vertex-buffer slot) of an unknown value is a distinct, partly
  unknown value: ``("constants", (<unknown>, 5), "<unknown>")``.

Each draw's row is **normalised** before interning: slots the draw cannot observe
are masked: root arguments its pipeline does not read (:meth:`Pipeline.read_params
<drawopt.ir.decls.Pipeline.read_params>`: ``params=``, all of its root signature by default,
and always the ``perdraw`` parameter of each per-draw contract clause), the index
buffer for non-indexed draws and for DrawIndexedX (which brings its own), vertex
buffers for vertex-pulling pipelines, the blend factor when the pipeline's blending is off
(``blend=opaque``), GS parameters when the pipeline has neither a GS
nor tessellation (:attr:`Pipeline.observes_gs_params
<drawopt.ir.decls.Pipeline.observes_gs_params>`: onchip GS mode forces tessellation
always-offchip, so a tessellation draw observes the mode), and the compute side.
A draw of a pipeline with an array clause (``draw_data`` / ``instance_data``, see
docs/architecture.md "Rewrite contracts") that sees a buffer bound at the clause's
P -- a root CBV/SRV, or a table whose descriptor views a buffer -- reads its lift
items from the record, so the slots those items cover entirely are masked too: root
constants all of whose words are lifted, and a descriptor table whose heap slot
(``Q.0``) is lifted (the table binding itself is not read). A partly lifted
constants parameter stays observed as a slot; :meth:`Scan.unobserved_words` gives
its lifted words (dedupe-state uses them). A root view whose offset is lifted keeps
its buffer observed. ``DrawIndexedX`` calls of a pipeline whose ``x`` clause applies
read through ``x`` and are not masked. (:class:`ArrayMasks`; computed with numpy
after the scan, so the Cython kernel and its pure twin share it.)
The **state id** interns that row (ids in first-appearance order); the **pack
class** interns it with the index buffer masked too (consecutive DrawIndexedX
may change only the index buffer and format).

Implementation: one pass over the commands gives each its slot and the key of the
value it sets (:data:`_BLOCKS`; Cython ``drawopt._state.command_values``, pure twin
:func:`_command_values_py`), keys are numbered per block; one linear scan
(Cython kernel :mod:`drawopt._state`, pure-Python twin :func:`_scan_py`) gives,
for every observer (draw, dispatch, opaque command), the command that last set
each slot (a re-set of the same value is the setter too), and its kind, Opaque
epoch and pipeline; partial updates are
resolved afterwards per slot (``const_writes``, ``chain_values``).
"""

from __future__ import annotations

__all__ = [
    "SLOTS", "NSLOTS", "UNDEFINED", "MASKED", "UNKNOWN", "SLOT_INDEX", "StateTable", "Scan",
    "track", "scan", "rescan", "retrack", "compare_effective_state", "intern_rows", "describe_value",
    "OBS_DRAW", "OBS_DISPATCH", "OBS_OPAQUE", "OBS_END", "ArrayMasks", "array_masks", "diff_state_rows",
]

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drawopt._accel import load_cext
from drawopt.errors import InputError
from drawopt.ir.decls import Buffer, Pipeline, RootSig, View
from drawopt.ir.ops import (
    BY_CODE,
    COL_PIPELINE,
    GS_MODES,
    INDEX_FORMATS,
    INDEXED_DRAW_OPS,
    MAX_OPCODE,
    NARGS,
    OPS,
    TOPOLOGIES,
    Cat,
    Op,
    shared_col,
)
from drawopt.ir.stream import Stream, ragged_index

NROOT = 16
SLOTS: tuple[str, ...] = (
    "pipeline", "gfx_rootsig", "heaps", "topology", "render_targets", "viewport", "scissor",
    "blend_factor", "stencil_ref", "gs_params", "index_buffer", "vertex_buffers",
    *(f"root{i}" for i in range(NROOT)),
    "compute_rootsig",
    *(f"croot{i}" for i in range(NROOT)),
)
"""Slot names, in row order."""
NSLOTS = len(SLOTS)
SLOT_INDEX: dict[str, int] = {s: i for i, s in enumerate(SLOTS)}

(PIPELINE, GFX_RS, HEAPS, TOPOLOGY, RTS, VIEWPORT, SCISSOR, BLEND, STENCIL, GS, IB, VB) = range(12)
ROOT0 = SLOT_INDEX["root0"]
CRS = SLOT_INDEX["compute_rootsig"]
CROOT0 = SLOT_INDEX["croot0"]

UNDEFINED = -1
MASKED = -2
UNKNOWN = -3

MASKED_DESC = "<masked>"
UNKNOWN_DESC = "<unknown>"

# observer kinds
OBS_DRAW, OBS_DISPATCH, OBS_OPAQUE, OBS_END = 0, 1, 2, 3

# kernel codes (cext/_state.pyx)
K_NONE, K_SET, K_HEAPS, K_GRS, K_CRS, K_DRAW, K_DRAWX, K_DISPATCH, K_OPAQUE = range(9)
_LAYOUT = np.array([NSLOTS, HEAPS, GFX_RS, CRS, IB, ROOT0, CROOT0, NROOT, PIPELINE, -1], dtype=np.int64)
"""The scan kernel's layout; the last entry, the pipeline-mask row of no pipeline, is set per stream."""
_ALL_BITS = (1 << NSLOTS) - 1
_ROOT_BITS = sum(1 << k for k in (*range(ROOT0, ROOT0 + NROOT), *range(CROOT0, CROOT0 + NROOT)))
_SHIFTS = np.arange(NSLOTS, dtype=np.int64)


def _bit_rows(mask: np.ndarray) -> np.ndarray:
    """Each row of a bool[k, NSLOTS] matrix as an int64 bitmask (bit ``s``: column ``s``)."""
    return (mask.astype(np.int64) << _SHIFTS).sum(axis=1)

_GFX_SLOTS = np.zeros(NSLOTS, bool)
_GFX_SLOTS[:CRS] = True
_CMP_SLOTS = np.zeros(NSLOTS, bool)
_CMP_SLOTS[[PIPELINE, HEAPS, CRS]] = True
_CMP_SLOTS[CROOT0:CROOT0 + NROOT] = True


_OP = {o.name: o.code for o in OPS}
_KCODE = np.zeros(MAX_OPCODE + 1, np.int64)
_FIXED_SLOT = np.full(MAX_OPCODE + 1, -1, np.int64)
for _o in OPS:
    if _o.cat == Cat.STATE and _o.name != "CSEnableAutomaticGpuFlush":
        _KCODE[_o.code] = K_SET
    elif _o.cat == Cat.DRAW:
        _KCODE[_o.code] = K_DRAWX if _o.name == "DrawIndexedX" else K_DRAW
    elif _o.cat == Cat.DISPATCH:
        _KCODE[_o.code] = K_DISPATCH
    elif _o.cat == Cat.OPAQUE:
        _KCODE[_o.code] = K_OPAQUE
_KCODE[_OP["SetDescriptorHeaps"]] = K_HEAPS
_KCODE[_OP["SetGraphicsRootSignature"]] = K_GRS
_KCODE[_OP["SetComputeRootSignature"]] = K_CRS
for _name, _slot in (("SetPipelineState", PIPELINE), ("SetGraphicsRootSignature", GFX_RS),
                     ("SetComputeRootSignature", CRS), ("SetDescriptorHeaps", HEAPS),
                     ("IASetPrimitiveTopology", TOPOLOGY), ("OMSetRenderTargets", RTS),
                     ("RSSetViewports", VIEWPORT), ("RSSetScissorRects", SCISSOR),
                     ("OMSetBlendFactor", BLEND), ("OMSetStencilRef", STENCIL),
                     ("GSSetParameters", GS), ("IASetIndexBuffer", IB), ("IASetVertexBuffers", VB)):
    _FIXED_SLOT[_OP[_name]] = _slot
_GFX_ROOT_OPS = ("SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants",
                 "SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView")
_CMP_ROOT_OPS = ("SetComputeRootDescriptorTable", "SetComputeRoot32BitConstants")
_TABLE_OPS = (_OP["SetGraphicsRootDescriptorTable"], _OP["SetComputeRootDescriptorTable"])
_COL_ROOT_INDEX = shared_col(*((nm, "index") for nm in (*_GFX_ROOT_OPS, *_CMP_ROOT_OPS)))
_COL_CONST_COUNT = shared_col(("SetGraphicsRoot32BitConstants", "count"), ("SetComputeRoot32BitConstants", "count"))
_COL_CONST_DEST = shared_col(("SetGraphicsRoot32BitConstants", "dest"), ("SetComputeRoot32BitConstants", "dest"))
_COL_VB_SLOT = Op.IASetVertexBuffers.col("slot")
_VB_BINDING = slice(Op.IASetVertexBuffers.col("buffer"), Op.IASetVertexBuffers.col("stride") + 1)
"""The columns of a vertex-buffer binding's value: buffer, offset, stride."""
_CONST_OPS = (_OP["SetGraphicsRoot32BitConstants"], _OP["SetComputeRoot32BitConstants"])
_IS_INDEXED = np.zeros(MAX_OPCODE + 2, bool)
_IS_INDEXED[list(INDEXED_DRAW_OPS)] = True
_IS_MERGE = np.zeros(MAX_OPCODE + 1, bool)
_IS_MERGE[[*_CONST_OPS, _OP["IASetVertexBuffers"]]] = True


# ---------------------------------------------------------------------- interning
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _hash_rows(mat: np.ndarray, pure: bool | None = None) -> np.ndarray:
    """A 64-bit mixing hash of every row of an integer matrix (splitmix64 steps);
    ``drawopt._state.hash_rows`` computes the same."""
    mod = load_cext("_state", pure)
    if mod is not None and hasattr(mod, "hash_rows"):
        return mod.hash_rows(mat)
    return _hash_rows_py(mat)


def _hash_rows_py(mat: np.ndarray) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._state.hash_rows``."""
    cols = np.ascontiguousarray(np.asarray(mat).T, dtype=np.int64).view(np.uint64)
    h = np.full(cols.shape[1], 0x243F6A8885A308D3, dtype=np.uint64)
    tmp = np.empty_like(h)
    with np.errstate(over="ignore"):
        for j in range(cols.shape[0]):
            h ^= cols[j]
            h += _M1
            np.right_shift(h, np.uint64(30), out=tmp)
            h ^= tmp
            h *= _M2
            np.right_shift(h, np.uint64(27), out=tmp)
            h ^= tmp
            h *= _M3
            np.right_shift(h, np.uint64(31), out=tmp)
            h ^= tmp
    return h


def intern_rows(mat: np.ndarray, hashes: np.ndarray | None = None,
                chunk: int = 1 << 16, pure: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Intern the rows of an integer matrix.

    Parameters
    ----------
    mat : ndarray, shape (M, k)
        Integer rows.
    hashes : uint64[M], optional
        ``_hash_rows(mat)`` if already known (the pure path uses it).
    pure : bool, optional
        Force (True) or forbid (False) the pure-numpy path; default: the compiled
        kernel (``drawopt._state.intern_rows``) unless ``DRAWOPT_PURE=1``.

    Returns
    -------
    ids : int64[M]
        Id of each row; ids are numbered in order of first appearance.
    first : int64[U]
        Row index of the first occurrence of each id.

    >>> ids, first = intern_rows(np.array([[1, 2], [3, 4], [1, 2]]))
    >>> ids.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])

    The kernel interns with a hash table, comparing every row with its id's first
    row; the pure path groups rows by a 64-bit hash and then compares them the same
    way (a hash collision falls back to ``np.unique(axis=0)``). Both are exact.
    """
    mat = np.asarray(mat)
    mod = load_cext("_state", pure)
    if mod is not None and mat.dtype.kind in "iub":
        return mod.intern_rows(mat)
    return _intern_rows_py(mat, hashes, chunk)


def _intern_rows_py(mat: np.ndarray, hashes: np.ndarray | None = None,
                    chunk: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Pure-numpy twin of ``drawopt._state.intern_rows`` (see :func:`intern_rows`)."""
    mat = np.asarray(mat)
    if mat.ndim == 1:
        mat = mat[:, None]
    m = mat.shape[0]
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if mat.shape[1] == 1 and hashes is None:
        _, first, inv = np.unique(mat[:, 0], return_index=True, return_inverse=True)
    else:
        h = _hash_rows(mat, pure=True) if hashes is None else hashes
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        rep = first[inv]
        ok = True
        for lo in range(0, m, chunk):
            if not np.array_equal(mat[lo:lo + chunk], mat[rep[lo:lo + chunk]]):
                ok = False
                break
        if not ok:  # pragma: no cover - a 64-bit collision
            _, first, inv = np.unique(mat, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return rank[inv], first[order].astype(np.int64)


def _intern_values(keys: np.ndarray, pure: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ids for the distinct rows of ``keys`` (any order; used for value ids, where only
    distinctness matters): ``(ids, unique_rows)``.

    Rows whose columns fit a mixed-radix int64 are combined into one key, and small
    key ranges are compacted with a lookup table instead of a sort: the ids are then the
    rank of each row in lexicographic order, a function of the set of distinct rows only;
    past that range they are interned in order of first appearance. The compiled path
    interns the rows first (``drawopt._state.intern_rows``, first-appearance order) and
    numbers only the distinct rows (:func:`_number_distinct`), which gives the same ids.
    """
    keys = np.asarray(keys, np.int64)
    if keys.ndim == 1:
        keys = keys[:, None]
    m = keys.shape[0]
    if m == 0:
        return np.zeros(0, np.int64), keys[:0]
    mod = load_cext("_state", pure)
    if mod is not None:
        fa, first = mod.intern_rows(keys)
        rank, uniq = _number_distinct(np.take(keys, first, axis=0))
        return rank[fa], uniq
    lo, span, total = _radix(keys)
    if total >= 1 << 62:
        ids, first = intern_rows(keys, pure=pure)
        return ids, np.take(keys, first, axis=0)
    comb = _combine(keys, lo, span)
    if total <= max(4 * m, 1 << 16):
        present = np.zeros(total, bool)
        present[comb] = True
        remap = np.cumsum(present) - 1
        ids = remap[comb]
        first = np.empty(int(present.sum()), np.int64)
        first[ids] = np.arange(m)
    else:
        first, ids = _sorted_ids(comb, pure)
    return ids.astype(np.int64, copy=False), np.take(keys, first, axis=0)


def _radix(keys: np.ndarray) -> tuple[np.ndarray, list[int], int]:
    """``(lo, span, total)``: per column the smallest value and the number of values from it
    to the largest, and the product of the spans (Python ints: no wrap)."""
    # column by column: a reduction over axis 0 of a tall, narrow matrix is several times slower
    los = [int(keys[:, j].min()) for j in range(keys.shape[1])]
    lo = np.array(los, dtype=keys.dtype)
    span = [int(keys[:, j].max()) - a + 1 for j, a in enumerate(los)]
    total = 1
    for x in span:
        total *= x
    return lo, span, total


def _combine(keys: np.ndarray, lo: np.ndarray, span: list[int]) -> np.ndarray:
    """Each row as one mixed-radix int64 (lexicographic order kept)."""
    comb = np.zeros(keys.shape[0], np.int64)
    mult = 1
    for j in range(keys.shape[1] - 1, -1, -1):
        comb += (keys[:, j] - lo[j]) * mult
        mult *= span[j]
    return comb


def _number_distinct(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_intern_values` of distinct rows given in order of first appearance:
    ``(rank of each row, the rows in id order)``, without interning them again."""
    if rows.shape[0] == 0:
        return np.zeros(0, np.int64), rows
    lo, span, total = _radix(rows)
    if total >= 1 << 62:
        return np.arange(rows.shape[0], dtype=np.int64), rows
    order = np.argsort(_combine(rows, lo, span), kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return rank, np.take(rows, order, axis=0)


def _sorted_ids(col: np.ndarray, pure: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(col, return_index=True, return_inverse=True)[1:]`` (ids in sorted value
    order, first occurrences), found by interning (:func:`intern_rows`) and sorting only
    the distinct values."""
    fid, first = intern_rows(col, pure=pure)
    order = np.argsort(col[first], kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return first[order], rank[fid]


class _Values:
    """Registry of value ids: blocks of consecutive ids, each with a decoder."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.decoders: list[Callable[[int], Any]] = []
        self.next = 0
        self._cache: dict[int, Any] = {}
        self.partial: list[int] = []  # ids of values that are partly unknown
        self._partial_key: tuple[int, int] = (-1, -1)
        self._partial_m = np.zeros(1, bool)

    def partial_mask(self) -> np.ndarray:
        """bool[n_values + 1]: partly unknown values (the last entry, for markers, is False).
        Read-only (one array, rebuilt when values are added)."""
        key = (self.next, len(self.partial))
        if self._partial_key != key:
            m = np.zeros(self.next + 1, bool)
            m[self.partial] = True
            m.flags.writeable = False
            self._partial_m, self._partial_key = m, key
        return self._partial_m

    def add(self, n: int, decode: Callable[[int], Any]) -> int:
        start = self.next
        self.starts.append(start)
        self.decoders.append(decode)
        self.next += n
        return start

    def decode(self, vid: int) -> Any:
        vid = int(vid)
        if vid == UNDEFINED:
            return None
        if vid == MASKED:
            return MASKED_DESC
        if vid == UNKNOWN:
            return UNKNOWN_DESC
        v = self._cache.get(vid, self)
        if v is self:
            k = bisect.bisect_right(self.starts, vid) - 1
            if k < 0 or vid >= self.next:
                raise KeyError(vid)
            v = self.decoders[k](vid - self.starts[k])
            self._cache[vid] = v
        return v


def describe_value(scan_: Scan, vid: int) -> Any:
    """Canonical, stream-independent value of value id ``vid`` of ``scan_``."""
    return scan_.values.decode(vid)


# ---------------------------------------------------------------------- the scan
def _scan_py(code: np.ndarray, slot: np.ndarray, val: np.ndarray, is_table: np.ndarray,
             layout: np.ndarray, init_unknown: int, final_row: bool, pipe_decl: np.ndarray,
             pcompact: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pure-Python twin of ``drawopt._state.scan`` (identical results): the setters in a Python
    loop, the other observer facts from them with numpy."""
    code_l = np.asarray(code, np.int64).tolist()
    slot_l = np.asarray(slot, np.int64).tolist()
    val_l = np.asarray(val, np.int64).tolist()
    tab_l = np.asarray(is_table, np.uint8).tolist()
    ns, _heaps, _grs, _crs, ib, root0, croot0, nroot, ps, pnone = (int(x) for x in layout)
    n = len(code_l)
    nobs = sum(1 for c in code_l if c >= K_DRAW) + (1 if final_row else 0)
    setter = np.empty((nobs, ns), np.int32)
    unknown = np.empty(nobs, np.int64)
    prev = [-2] * n
    cur = [-1] * ns
    unk = int(init_unknown)
    allbits = (1 << ns) - 1
    root_ranges = (range(root0, root0 + nroot), range(croot0, croot0 + nroot))
    rows: list[list[int]] = []
    unks: list[int] = []
    for i in range(n):
        c = code_l[i]
        if c == K_NONE:
            continue
        if c <= K_CRS:
            s = slot_l[i]
            bit = 1 << s
            p = -3 if unk & bit else cur[s]
            prev[i] = p
            if c == K_HEAPS:
                curv = val_l[p] if p >= 0 else -1
                if p == -3 or curv != val_l[i]:
                    for rr in root_ranges:
                        for r in rr:
                            rb = 1 << r
                            if not unk & rb and cur[r] >= 0 and tab_l[cur[r]]:
                                if p == -3:
                                    unk |= rb  # maybe changed: unknown, and its setter may still be observed
                                else:
                                    cur[r] = -1
            elif c == K_GRS or c == K_CRS:
                rr = root_ranges[0] if c == K_GRS else root_ranges[1]
                curv = val_l[p] if p >= 0 else -1
                if p == -3:
                    for r in rr:
                        rb = 1 << r
                        if not unk & rb and cur[r] >= 0:
                            unk |= rb  # maybe changed: unknown, and its setter may still be observed
                elif curv != val_l[i]:
                    for r in rr:
                        cur[r] = -1
                        unk &= ~(1 << r)
            cur[s] = i
            unk &= ~bit
        else:
            rows.append(list(cur))
            unks.append(unk)
            if c == K_DRAWX:
                cur[ib] = -1
                unk &= ~(1 << ib)
            elif c == K_OPAQUE:
                cur = [-1] * ns
                unk = allbits
    if final_row:
        rows.append(list(cur))
        unks.append(unk)
    if nobs:
        setter[:] = np.array(rows, dtype=np.int64).reshape(nobs, ns)
        unknown[:] = np.array(unks, dtype=np.int64)
    code_a = np.asarray(code, np.int64)
    obs = np.flatnonzero(code_a >= K_DRAW)
    okc = code_a[obs]
    kind = np.where(okc == K_DISPATCH, OBS_DISPATCH, np.where(okc == K_OPAQUE, OBS_OPAQUE, OBS_DRAW))
    if final_row:
        obs = np.append(obs, -1)
        kind = np.append(kind, OBS_END)
    # Opaque commands strictly before each observer
    epoch = np.searchsorted(np.flatnonzero(code_a == K_OPAQUE), np.where(obs >= 0, obs, n)).astype(np.int64)
    st = setter[:, ps]
    pipe = np.full(nobs, UNDEFINED, np.int64)
    pv = np.asarray(pipe_decl, np.int64)
    if n and pv.shape[0]:  # the declaration of the value the pipeline's setter set
        pipe = np.where(st >= 0, pv[np.where(st >= 0, np.asarray(val, np.int64)[np.maximum(st, 0)], 0)], UNDEFINED)
    pipe[((unknown >> ps) & 1) == 1] = UNKNOWN
    pidx = np.where(pipe >= 0, np.asarray(pcompact)[np.maximum(pipe, 0)], pnone)
    return (setter, unknown, np.array(prev, dtype=np.int64), obs.astype(np.int64), kind.astype(np.uint8), epoch,
            pipe.astype(np.int64), pidx.astype(np.int64))


def _kernel(pure: bool | None) -> Callable[..., tuple[np.ndarray, ...]]:
    mod = load_cext("_state", pure)
    return mod.scan if mod is not None else _scan_py


@dataclass
class _Chains:
    """The partial-update chains of one merge slot (root constants or vertex buffers).

    ``cmds[k]`` is the k-th command writing the slot; ``start[k]`` whether it starts a
    chain (the slot was reset or held another kind of value before it); ``init[k]``
    the fill of words no command of the chain wrote (-1 undefined, -3 unknown);
    ``owner``/``col``/``wv`` the words written (row, column, value). The values the
    chains leave are value ids ``base .. base + len(rows) - 1``; ``rows[j]`` is value
    ``base + j``: its words, then 1 if it is a partial update of an unknown value.
    """

    slot: int
    cmds: np.ndarray
    start: np.ndarray
    init: np.ndarray
    owner: np.ndarray
    col: np.ndarray
    wv: np.ndarray
    width: int
    cached: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    pure: bool | None = field(default=None, repr=False)
    _filled: np.ndarray | None = field(default=None, repr=False)
    base: int = field(default=-1, repr=False)
    rows: np.ndarray | None = field(default=None, repr=False)

    def matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(wmask, wval, filled)``: words written by each command and the words after it."""
        if self.cached is not None:
            return self.cached
        m, w = self.cmds.shape[0], self.width
        wmask = np.zeros((m, w), bool)
        wval = np.zeros((m, w), np.int64)
        wmask[self.owner, self.col] = True
        wval[self.owner, self.col] = self.wv
        filled = self._filled if self._filled is not None else self.fill(wmask, wval)
        self.cached = (wmask, wval, filled)
        return self.cached

    def filled(self) -> np.ndarray:
        """The words after each command (``matrices()[2]``), without the other two matrices
        (``drawopt._state.fill_chains``; its pure twin is :meth:`fill`)."""
        if self.cached is not None:
            return self.cached[2]
        if self._filled is None:
            mod = load_cext("_state", self.pure)
            if mod is not None and self.cmds.shape[0]:
                self._filled = mod.fill_chains(self.start, self.init, self.owner, self.col, self.wv, self.width)
            else:
                self._filled = self.matrices()[2]
        return self._filled

    def fill(self, wmask: np.ndarray, wval: np.ndarray) -> np.ndarray:
        """Pure-numpy twin of ``drawopt._state.fill_chains``."""
        m = wmask.shape[0]
        rows = np.arange(m, dtype=np.int64)[:, None]
        idx = np.where(wmask | self.start[:, None], rows, 0)
        np.maximum.accumulate(idx, axis=0, out=idx)
        hit = np.take_along_axis(wmask, idx, 0)
        return np.where(hit, np.take_along_axis(wval, idx, 0), self.init[idx])


@dataclass(eq=False)
class VBTable:
    """Columnar facts of the vertex-buffer values: value ids ``base .. base + n - 1``.

    ``single[j]``: value ``base + j`` is exactly one binding, in slot 0, with no unknown
    part; ``buffer``, ``offset``, ``stride`` that binding (``buffer`` a declaration index,
    the first of its name, so equal buffers have equal names; -1 and zeros where not
    ``single``).
    """

    base: int
    single: np.ndarray
    buffer: np.ndarray
    offset: np.ndarray
    stride: np.ndarray


@dataclass(eq=False)
class Scan:
    """Everything one linear pass over a stream gives (shared by the tracker, the
    validator and the passes).

    Attributes
    ----------
    stream : Stream
    kcode : int8[N]
        Kernel code of each command.
    slot : int8[N]
        Slot each state command sets (-1: none).
    cval : int64[N]
        Value id the command leaves in its slot (-1: sets nothing).
    prev : int64[N]
        Command that last set the slot before this one (-1 undefined, -3 unknown,
        -2 not a state command).
    obs, obs_kind : int64[O], uint8[O]
        Observers: draws, dispatches and Opaque commands (which may read any state),
        plus, for a bundle, the end of the stream (index -1), whose state the calling
        list inherits.
    setter : int32[O, NSLOTS]
        Command that last set each slot as seen by each observer (-1 none); int32, half
        the memory of the scan's largest array (a stream has fewer than 2**31 commands).
    unknown : int64[O]
        Bit ``s`` set when slot ``s`` is unknown at the observer.
    pipe : int64[O]
        Pipeline declaration index at each observer (-1 undefined, -3 unknown).
    epoch : int64[O]
        Opaque commands before each observer (separates states holding unknowns).
    init_val : int64[NSLOTS]
        Value of each slot with no setter: undefined, except ``gs_params`` (the
        driver default, ``GSSetParameters null``).
    values : _Values
        The value registry: ``values.decode(vid)`` gives the canonical value;
        ``values.partial_mask()`` flags partly unknown values.
    chains : dict[int, _Chains]
        Per merging slot (root constants, vertex buffers), its partial-update chains.
    heap_type : int64[n_decls]
        0 CBV_SRV_UAV heap, 1 SAMPLER heap, -1 not a heap.
    vb_table : VBTable or None
        Columnar facts of the vertex-buffer values (None: the stream binds none); see
        :meth:`vb_single_binding`.

    ``values_of``, ``read_mask``, ``normalised`` give per-observer rows;
    ``value_before`` the value a set command replaces.
    """

    stream: Stream
    kcode: np.ndarray
    slot: np.ndarray
    cval: np.ndarray
    prev: np.ndarray
    obs: np.ndarray
    obs_kind: np.ndarray
    setter: np.ndarray
    unknown: np.ndarray
    pipe: np.ndarray
    epoch: np.ndarray
    init_val: np.ndarray
    values: _Values
    chains: dict[int, _Chains]
    heap_type: np.ndarray
    _draw_mask: np.ndarray = field(repr=False)
    _disp_mask: np.ndarray = field(repr=False)
    _pidx: np.ndarray = field(repr=False)
    _arr: ArrayMasks | None = field(default=None, repr=False)
    _binds_buf: np.ndarray | None = field(default=None, repr=False)
    vb_table: VBTable | None = field(default=None, repr=False)
    pure: bool | None = field(default=None, repr=False)
    """The kernel choice the scan was made with (its rows and interning use the same)."""
    _decl: _DeclFacts | None = field(default=None, repr=False)
    _blocks: list[tuple[int, int, np.ndarray]] = field(default_factory=list, repr=False)
    """The value blocks of the keyed sets: ``(block of _BLOCKS, first value id, keys in id order)``."""

    def vb_single_binding(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For value ids ``ids`` (any, markers included): ``(ok, buffer, offset, stride)``.

        ``ok``: the id is a vertex-buffer value that is exactly one binding, in slot 0,
        with no unknown part (what ``values.decode`` gives as ``((0, buffer, offset,
        stride),)``); ``buffer`` a declaration index equal for equal buffer names. Other
        ids (other slots' values, markers) give ``ok`` False, -1 and zeros.
        """
        ids = np.asarray(ids, np.int64)
        tb = self.vb_table
        if tb is None:
            z = np.zeros(ids.shape, np.int64)
            return np.zeros(ids.shape, bool), z - 1, z, z.copy()
        j = ids - tb.base
        inside = (j >= 0) & (j < tb.single.shape[0])
        j = np.where(inside, j, 0)
        ok = inside & tb.single[j]  # the table has a row: a stream binding vertex buffers has a value
        return ok, np.where(ok, tb.buffer[j], -1), np.where(ok, tb.offset[j], 0), np.where(ok, tb.stride[j], 0)

    @property
    def _cval_ext(self) -> np.ndarray:
        ext = self.__dict__.get("_cval_ext_")
        if ext is None or ext.shape[0] != self.cval.shape[0] + 1:
            ext = np.append(self.cval, UNDEFINED)
            self.__dict__["_cval_ext_"] = ext
        return ext

    @property
    def read_bits(self) -> np.ndarray:
        """int64[O]: bit ``s`` set where the observer can observe slot ``s`` (what
        :meth:`read_mask` gives as a bool matrix); computed once."""
        bits = self.__dict__.get("_read_bits_")
        if bits is None:
            bits = self._read_bits()
            self.__dict__["_read_bits_"] = bits
        return bits

    def _read_bits(self) -> np.ndarray:
        kind = self.obs_kind
        bits = np.full(kind.shape[0], _ALL_BITS, np.int64)
        pidx = self._pidx
        d = np.flatnonzero(kind == OBS_DRAW)
        if d.size:
            ib = np.int64(1 << IB)
            indexed = _IS_INDEXED[self.stream.op[self.obs[d]]]
            bits[d] = (_bit_rows(self._draw_mask)[pidx[d]] & ~ib) | np.where(indexed, ib, np.int64(0))
            rows, pj = self.array_readers(slice(None))
            if rows.size:
                bits[rows] &= ~_bit_rows(self._arr.lifted)[pj]
        x = np.flatnonzero(kind == OBS_DISPATCH)
        if x.size:
            bits[x] = _bit_rows(self._disp_mask)[pidx[x]]
        return bits

    def _obs_index(self, sel: np.ndarray | slice) -> np.ndarray:
        """``sel`` as observer indices (int64)."""
        if isinstance(sel, slice):
            return np.arange(self.obs.shape[0], dtype=np.int64)[sel]
        sel = np.asarray(sel)
        if sel.dtype == bool:
            return np.flatnonzero(sel)
        return sel.astype(np.int64, copy=False).reshape(-1)

    def _rows(self, sel: np.ndarray | slice, bits: np.ndarray) -> np.ndarray:
        """Value rows at observers ``sel``: slots whose bit is clear in ``bits`` (per
        observer) :data:`MASKED`, unknown ones :data:`UNKNOWN`; int64[k, NSLOTS]."""
        idx = self._obs_index(sel)
        mod = load_cext("_state", self.pure)
        if mod is not None:
            return mod.observer_rows(self.setter, self.unknown, self.cval, self.init_val, bits, idx,
                                     MASKED, UNKNOWN)
        return self._rows_py(idx, bits)

    def _rows_py(self, idx: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """Pure-numpy twin of ``drawopt._state.observer_rows``."""
        st = self.setter[idx]
        # index -1 (no setter) reads the appended dummy, replaced by the slot's initial value
        v = np.where(st >= 0, self._cval_ext[st], self.init_val[None, :])
        unk = self.unknown[idx]
        if unk.any():
            v[((unk[:, None] >> _SHIFTS) & 1).astype(bool)] = UNKNOWN
        b = bits[idx]
        if (b != _ALL_BITS).any():
            v[((b[:, None] >> _SHIFTS) & 1) == 0] = MASKED
        return v

    def values_of(self, sel: np.ndarray | slice) -> np.ndarray:
        """Raw (unmasked) value ids of every slot at observers ``sel``: int64[k, NSLOTS]."""
        return self._rows(sel, np.full(self.obs.shape[0], _ALL_BITS, np.int64))

    def read_mask(self, sel: np.ndarray | slice) -> np.ndarray:
        """Which slots observers ``sel`` can observe: bool[k, NSLOTS]."""
        b = self.read_bits[sel]
        return ((b[:, None] >> _SHIFTS) & 1).astype(bool)

    def array_readers(self, sel: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """The draws among observers ``sel`` that read their per-draw record from a bound
        array (an array clause with a buffer bound at its P, not a ``DrawIndexedX`` that
        reads through ``x``): their rows in ``sel`` and their pipelines' rows of
        :class:`ArrayMasks`. The lift items of the clause are not observed there."""
        rows, pj = self._array_readers_all()
        if isinstance(sel, slice) and sel == slice(None) or not rows.size:
            return rows, pj
        pj_of = np.full(self.obs.shape[0], -1, np.int64)
        pj_of[rows] = pj
        at = pj_of[self._obs_index(sel)]
        r = np.flatnonzero(at >= 0)
        return r, at[r]

    def _array_readers_all(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`array_readers` of every observer (computed once)."""
        got = self.__dict__.get("_array_readers_")
        if got is not None:
            return got
        arr = self._arr
        none = np.zeros(0, np.int64)
        got = (none, none)
        if arr is not None and self._binds_buf is not None:
            pidx = self._pidx
            pd = arr.perdraw[pidx]
            rows = np.flatnonzero((self.obs_kind == OBS_DRAW) & (pd >= 0))
            if rows.size:
                ops = self.stream.op[np.maximum(self.obs[rows], 0)]
                rows = rows[~(arr.x_reads[pidx[rows]] & (ops == _OP["DrawIndexedX"]))]
                col = ROOT0 + pd[rows]
                st = self.setter[rows, col]
                unk = ((self.unknown[rows] >> col) & 1) == 1
                bound = (st >= 0) & ~unk & self._binds_buf[np.maximum(st, 0)]
                rows = rows[bound]
                got = (rows, pidx[rows])
        self.__dict__["_array_readers_"] = got
        return got

    def lifted_slots(self, sel: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """At the draws among ``sel`` that read a bound array (:meth:`array_readers`): the
        root slots holding lift items (wholly or in part), as ``(rows in sel,
        bool[k, NSLOTS])``."""
        rows, pj = self.array_readers(sel)
        m = np.zeros((rows.size, NSLOTS), bool)
        if rows.size:
            m[:] = self._arr.lifted[pj]
            m[:, ROOT0:ROOT0 + NROOT] |= self._arr.words[pj] != 0
        return rows, m

    def unobserved_words(self, sel: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Root constants an observer reads only in part: the lifted words of a parameter
        whose other words stay observed, at draws that read a bound array
        (:meth:`array_readers`). Returns ``(row in sel, slot, bitmask of the unobserved
        words as uint64)``, one entry per such (observer, slot)."""
        everyone = isinstance(sel, slice) and sel == slice(None)
        got = self.__dict__.get("_unobserved_words_") if everyone else None
        if got is not None:
            return got
        rows, pj = self.array_readers(sel)
        if rows.size:
            some = self._arr.words.any(axis=1)[pj]  # (most pipelines lift no single word)
            rows, pj = rows[some], pj[some]
        if not rows.size:
            got = rows, rows, np.zeros(0, np.uint64)
        else:
            bits = self._arr.words[pj]                  # uint64[k, NROOT]
            r, q = np.nonzero(bits)
            got = rows[r], ROOT0 + q, bits[r, q]
        if everyone:
            self.__dict__["_unobserved_words_"] = got
        return got

    def lifted_setters(self) -> np.ndarray:
        """bool[N]: the commands that are the setter of a slot holding lift items (wholly or in
        part) at some draw that reads a bound array (the setters of :meth:`lifted_slots` of
        every observer, one root slot at a time)."""
        out = np.zeros(self.cval.shape[0], bool)
        rows, pj = self.array_readers(slice(None))
        if not rows.size:
            return out
        arr = self._arr
        held = arr.lifted[:, ROOT0:ROOT0 + NROOT] | (arr.words != 0)  # per pipeline and root slot
        for q in np.flatnonzero(held.any(axis=0)):
            st = self.setter[rows[held[pj, q]], ROOT0 + q]
            out[st[st >= 0]] = True
        return out

    def normalised(self, sel: np.ndarray | slice) -> np.ndarray:
        """Normalised rows (unobservable slots :data:`MASKED`) at observers ``sel``: int64[k, NSLOTS]."""
        return self._rows(sel, self.read_bits)

    def slot_values(self, sel: np.ndarray | slice, k: int) -> np.ndarray:
        """The normalised values of slot ``k`` at observers ``sel`` (column ``k`` of
        :meth:`normalised`): int64[len(sel)]."""
        idx = self._obs_index(sel)
        st = self.setter[idx, k]
        v = np.where(st >= 0, self._cval_ext[st], self.init_val[k])
        v[((self.unknown[idx] >> k) & 1) == 1] = UNKNOWN
        v[((self.read_bits[idx] >> k) & 1) == 0] = MASKED
        return v

    def observed_setters(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Which set commands observers read, from one walk over all of them.

        Returns ``(observed, full, (reset_obs, reset_slot))``: ``observed`` bool[N], the
        commands that are the setter of a slot some observer can observe; ``full``
        bool[N], those that some observer reads whole (a slot not among the partly read
        root constants of :meth:`unobserved_words`); ``reset_obs``, ``reset_slot``
        int64[R], the observers and root-argument slots (graphics and compute) read with
        no setter (left undefined or unknown by a reset, or never set), observer by
        observer.
        """
        n = self.cval.shape[0]
        part = np.zeros(self.obs.shape[0], np.int64)
        r, q, _ = self.unobserved_words(slice(None))
        if r.size:
            np.bitwise_or.at(part, r, np.left_shift(np.int64(1), q.astype(np.int64)))
        mod = load_cext("_state", self.pure)
        if mod is not None:
            o, f, ro, rs = mod.observed_setters(self.setter, self.read_bits, part, _ROOT_BITS, n)
            return o.view(bool), f.view(bool), (ro, rs)
        return _observed_setters_py(self.setter, self.read_bits, part, _ROOT_BITS, n)

    def value_before(self, cmds: np.ndarray) -> np.ndarray:
        """Value of each command's slot just before it (-1 undefined, -3 unknown)."""
        p = self.prev[cmds]
        s = self.slot[cmds]
        return np.where(p >= 0, self.cval[np.maximum(p, 0)], np.where(p == -3, UNKNOWN, self.init_val[s]))

    def describe_row(self, row: np.ndarray) -> dict[str, Any]:
        return {SLOTS[k]: self.values.decode(int(row[k])) for k in range(NSLOTS)}


@dataclass(eq=False)
class StateTable:
    """Per-draw interned state of a stream (see the module docstring).

    Attributes
    ----------
    draws : int64[D]
        Command index of each draw command (``Cat.DRAW``).
    state : int32[D]
        State id of each draw (ids in first-appearance order).
    pack : int32[D]
        Pack class of each draw (the state with the index buffer masked).
    rows : int32[S, NSLOTS]
        Normalised value ids of each distinct state (-1 undefined, -2 masked, -3 unknown);
        int32 because value ids are below 2**31 (the interning checks it) and the rows are
        the largest array a table keeps.
        States of dispatches follow those of draws.
    setter : int32[D, NSLOTS]
        Command that last set each slot as seen by each draw (-1 none).
    dispatches, dispatch_state, dispatch_setter :
        The same for ``Dispatch`` commands.
    scan : Scan
        The underlying scan (values, observers), for the validator and passes.
    """

    draws: np.ndarray
    state: np.ndarray
    pack: np.ndarray
    rows: np.ndarray
    setter: np.ndarray
    dispatches: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dispatch_state: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    dispatch_setter: np.ndarray = field(default_factory=lambda: np.zeros((0, NSLOTS), np.int32))
    scan: Scan | None = field(default=None, repr=False)

    def describe(self, sid: int) -> dict[str, Any]:
        """Slot -> canonical, stream-independent value of state ``sid``.

        Values use names, not indices: ``pipeline`` a pipeline name, ``heaps`` a
        tuple of heap names, a root argument ``("table", heap, slot)``,
        ``("constants", words)`` (None for undefined words) or ``("cbv"|"srv",
        buffer, offset)``, ``index_buffer`` ``(buffer, format, offset)``,
        ``vertex_buffers`` a tuple of ``(slot, buffer, offset, stride)``, floats as
        their IEEE bits. Undefined is None, masked ``"<masked>"``, unknown
        ``"<unknown>"``; a partial update of an unknown value ends with a
        ``"<unknown>"`` item (root constants: a third item; vertex buffers: a last
        element).
        """
        assert self.scan is not None
        return self.scan.describe_row(self.rows[sid])

    def first_difference(self, a: int, b: int) -> str | None:
        """The first slot whose values differ between states ``a`` and ``b``.

        None if ``a == b``. Two states with identical rows that hold unknown values
        are distinct only because an Opaque command separates them; the first
        unknown slot is returned then.
        """
        if a == b:
            return None
        ra, rb = self.rows[a], self.rows[b]
        diff = np.flatnonzero(ra != rb)
        if diff.size:
            return SLOTS[int(diff[0])]
        partial = self.scan.values.partial_mask() if self.scan is not None else np.zeros(1, bool)
        unk = np.flatnonzero((ra == UNKNOWN) | partial[np.where(ra >= 0, ra, -1)])
        return SLOTS[int(unk[0])] if unk.size else None


# ---------------------------------------------------------------------- building the scan
def _names(decls) -> list[str]:
    return [d.name for d in decls.items]


# The value blocks: every command of one opcode (a row here) sets a value whose identity is
# its key, read by a recipe; blocks get value ids in this order, and within a block the ids
# follow :func:`_intern_values`. Row: (opcode name, recipe, first argument column, key width,
# block only if the stream has such a command, decoder factory: names -> key row -> value).
_R_ARGS, _R_HEAPS, _R_RTS, _R_GS = range(4)
_KEYW = 9


def _decode_gs(r: np.ndarray) -> tuple:
    return ("null",) if r[0] == 0 else (GS_MODES[int(r[0])], *(int(x) for x in r[1:]))


def _name_of(names: list[str]) -> Callable[[np.ndarray], Any]:
    return lambda r: names[int(r[0])]


_BLOCKS: tuple[tuple[str, int, int, int, bool, Callable[[list[str]], Callable[[np.ndarray], Any]]], ...] = (
    ("SetPipelineState", _R_ARGS, 0, 1, False, _name_of),
    ("SetGraphicsRootSignature", _R_ARGS, 0, 1, False, _name_of),
    ("SetComputeRootSignature", _R_ARGS, 0, 1, False, _name_of),
    ("SetDescriptorHeaps", _R_HEAPS, 0, 2, True, lambda nm: lambda r: tuple(nm[int(h)] for h in r if h >= 0)),
    ("IASetPrimitiveTopology", _R_ARGS, 0, 1, False, lambda nm: lambda r: TOPOLOGIES[int(r[0])]),
    ("OMSetRenderTargets", _R_RTS, 0, _KEYW, True, lambda nm: lambda r: tuple(nm[int(t)] for t in r if t >= 0)),
    ("RSSetViewports", _R_ARGS, 0, 6, False, lambda nm: lambda r: tuple(int(x) for x in r)),
    ("RSSetScissorRects", _R_ARGS, 0, 4, False, lambda nm: lambda r: tuple(int(x) for x in r)),
    ("OMSetBlendFactor", _R_ARGS, 0, 4, False, lambda nm: lambda r: tuple(int(x) for x in r)),
    ("OMSetStencilRef", _R_ARGS, 0, 1, False, lambda nm: lambda r: int(r[0])),
    # null (field 0 zero) is the driver default whatever the other fields say; its key is
    # interned before every command (the value of gs_params at the start)
    ("GSSetParameters", _R_GS, 0, 5, False, lambda nm: _decode_gs),
    ("IASetIndexBuffer", _R_ARGS, 0, 3, False,
     lambda nm: lambda r: (nm[int(r[0])], INDEX_FORMATS[int(r[1])], int(r[2]))),
    ("SetGraphicsRootDescriptorTable", _R_ARGS, 1, 1, False,
     lambda nm: lambda r: ("table", nm[int(r[0]) >> 32], int(r[0]) & 0xFFFFFFFF)),
    ("SetComputeRootDescriptorTable", _R_ARGS, 1, 1, False,
     lambda nm: lambda r: ("table", nm[int(r[0]) >> 32], int(r[0]) & 0xFFFFFFFF)),
    ("SetGraphicsRootConstantBufferView", _R_ARGS, 1, 2, False, lambda nm: lambda r: ("cbv", nm[int(r[0])], int(r[1]))),
    ("SetGraphicsRootShaderResourceView", _R_ARGS, 1, 2, False, lambda nm: lambda r: ("srv", nm[int(r[0])], int(r[1]))),
)
_GS_BLOCK = [b[0] for b in _BLOCKS].index("GSSetParameters")
_PIPE_BLOCK = [b[0] for b in _BLOCKS].index("SetPipelineState")
assert _BLOCKS[_PIPE_BLOCK][1:4] == (_R_ARGS, COL_PIPELINE, 1)  # its key: the pipeline declaration
_ROOT_BASE = np.full(MAX_OPCODE + 1, -1, np.int64)
_ROOT_BASE[[_OP[nm] for nm in _GFX_ROOT_OPS]] = ROOT0
_ROOT_BASE[[_OP[nm] for nm in _CMP_ROOT_OPS]] = CROOT0
_OPTAB = np.zeros((MAX_OPCODE + 1, 8), np.int64)
"""Per opcode, as ``drawopt._state.command_values`` reads it: kernel code, fixed slot, root slot
base, value block, key recipe, first key column, key width, sets a descriptor table."""
_OPTAB[:, 0] = _KCODE
_OPTAB[:, 1] = _FIXED_SLOT
_OPTAB[:, 2] = _ROOT_BASE
_OPTAB[:, 3] = -1
for _b, (_nm, _rcp, _c0, _w, _, _) in enumerate(_BLOCKS):
    _OPTAB[_OP[_nm], 3:7] = (_b, _rcp, _c0, _w)
_OPTAB[list(_TABLE_OPS), 7] = 1


def _command_values(s: Stream, heap_type: np.ndarray, pure: bool | None) -> tuple[np.ndarray, ...] | None:
    """``(kcode, slot, is_table, gid, ublock, ukeys)`` of every command (see
    ``drawopt._state.command_values``), None if a root parameter index is out of range."""
    mod = load_cext("_state", pure)
    if mod is not None:
        return mod.command_values(s.op, s.args, s.var_off, s.var_len, s.pool, heap_type, _OPTAB, _GS_BLOCK)
    return _command_values_py(s, heap_type)


def _command_values_py(s: Stream, heap_type: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Pure-numpy twin of ``drawopt._state.command_values``: the keys of every block built per
    opcode, then interned together in command order (the GS default's key first)."""
    n = len(s)
    op = s.op
    tab = _OPTAB[op] if n else np.zeros((0, 8), np.int64)
    a = s.args
    root = np.flatnonzero(tab[:, 2] >= 0)
    if (a[root, _COL_ROOT_INDEX] >= NROOT).any():
        return None
    kcode = tab[:, 0].copy()
    slot = np.where(tab[:, 2] >= 0, tab[:, 2] + a[:, _COL_ROOT_INDEX], tab[:, 1]) if n else np.zeros(0, np.int64)
    is_table = tab[:, 7].astype(np.uint8)
    blk = tab[:, 3]
    keyed = np.flatnonzero(blk >= 0)
    keys = np.zeros((keyed.shape[0] + 1, 1 + _KEYW), np.int64)  # row 0: the GS default
    keys[0, 0] = _GS_BLOCK
    row_of = np.zeros(n, np.int64)
    row_of[keyed] = np.arange(1, keyed.shape[0] + 1)
    for b, (nm, rcp, c0, w, _, _) in enumerate(_BLOCKS):
        idx = np.flatnonzero(op == _OP[nm])
        if not idx.size:
            continue
        r = row_of[idx]
        keys[r, 0] = b
        if rcp == _R_ARGS:
            keys[r, 1:1 + w] = a[idx, c0:c0 + w]
        elif rcp == _R_GS:
            k = a[idx, :5].copy()
            k[k[:, 0] == 0] = 0
            keys[r, 1:1 + w] = k
        else:
            lens = s.var_len[idx].astype(np.int64)
            vals = s.pool[ragged_index(s.var_off[idx], lens)]
            owner = np.repeat(r, lens)
            keys[r, 1:1 + w] = -1
            if rcp == _R_HEAPS:
                keys[owner, 1 + heap_type[vals] % 2] = vals  # (heap_type -1, not a heap: the last column)
            else:
                pos = np.arange(vals.size) - np.repeat(np.cumsum(lens) - lens, lens)
                if (pos >= w).any():
                    raise IndexError("more than 9 render targets")
                keys[owner, 1 + pos] = vals
    ids, first = _intern_rows_py(keys)
    gid = np.full(n, -1, np.int64)
    gid[keyed] = ids[1:]
    return kcode, slot, is_table, gid, keys[first, 0], keys[first, 1:]


def _number_values(values: _Values, names: list[str], gid: np.ndarray, ublock: np.ndarray,
                   ukeys: np.ndarray) -> tuple[np.ndarray, int, np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """``(cval, gs_null, pipe_decl, blocks)``: the value id of every command's key, a block of
    :data:`_BLOCKS` at a time (each registered in ``values`` with its decoder), that of the GS
    default, the declaration of each pipeline value (the first block: value ids from 0), and
    the blocks registered: ``(block, first value id, keys in id order)`` (:func:`rescan`)."""
    lut = np.empty(ublock.shape[0] + 1, np.int64)
    lut[-1] = -1  # gid -1: no value
    gs_null = -1
    pipe_decl = np.zeros(0, np.int64)
    blocks: list[tuple[int, int, np.ndarray]] = []
    for b, (_, _, _, w, only_present, _) in enumerate(_BLOCKS):
        sel = np.flatnonzero(ublock == b)
        if only_present and not sel.size:
            continue
        rank, uniq = _number_distinct(ukeys[sel, :w])
        base, pd = _add_block(values, names, b, uniq)
        blocks.append((b, base, uniq))
        lut[sel] = base + rank
        if b == _GS_BLOCK:
            gs_null = base + int(rank[0])
        if pd is not None:
            pipe_decl = pd
    return lut[gid], gs_null, pipe_decl, blocks


def _add_block(values: _Values, names: list[str], b: int, uniq: np.ndarray) -> tuple[int, np.ndarray | None]:
    """Register value block ``b`` of :data:`_BLOCKS` (its keys ``uniq`` in id order) in
    ``values``: its first value id, and for the pipeline block the declaration of each value."""
    decode = _BLOCKS[b][5](names)
    base = values.add(uniq.shape[0], lambda j, u=uniq, d=decode: d(u[j]))
    if b == _PIPE_BLOCK:
        assert base == 0
        return base, uniq[:, 0].copy()
    return base, None


def _retaken_values(sc: Scan, keep: np.ndarray, op: np.ndarray,
                    values: _Values) -> tuple[np.ndarray, int, np.ndarray, list[tuple[int, int, np.ndarray]]] | None:
    """:func:`_number_values` of the commands ``keep`` of ``sc``'s stream (``op`` their opcodes),
    from ``sc``'s value blocks instead of the commands' keys: equal keys had equal value ids,
    and a block's ids are the ranks of its distinct keys in lexicographic order, a function of
    the set of keys present (:func:`_intern_values`), so the kept keys are ``sc``'s block rows
    whose ids some kept command (or, for GS parameters, the driver default) holds, in the same
    order. None where a block's keys span too wide a range for that order (ids in order of
    first appearance, which the kept commands alone tell): the caller numbers the keys anew."""
    blk = _OPTAB[op, 3] if op.shape[0] else np.zeros(0, np.int64)
    keyed = np.flatnonzero(blk >= 0)
    old = sc.cval[keep[keyed]]
    present = np.zeros(sc.values.next + 1, bool)
    present[old] = True
    present[sc.init_val[GS]] = True  # the driver default's key is numbered with every stream
    remap = np.full(sc.values.next + 1, -1, np.int64)
    gs_null = -1
    pipe_decl = np.zeros(0, np.int64)
    blocks: list[tuple[int, int, np.ndarray]] = []
    for b, base0, uniq0 in sc._blocks:
        idx = np.flatnonzero(present[base0:base0 + uniq0.shape[0]])
        if _BLOCKS[b][4] and not idx.size:
            continue
        if idx.size:  # the kept keys in lexicographic order (sc's are, unless they spanned too wide a range)
            lo, span, total = _radix(np.take(uniq0, idx, axis=0))
            if total >= 1 << 62:
                return None  # numbered in order of first appearance
            idx = idx[np.argsort(_combine(np.take(uniq0, idx, axis=0), lo, span), kind="stable")]
        uniq = np.take(uniq0, idx, axis=0)
        base, pd = _add_block(values, sc._decl.names, b, uniq)
        blocks.append((b, base, uniq))
        remap[base0 + idx] = base + np.arange(idx.shape[0])
        if b == _GS_BLOCK:
            gs_null = int(remap[sc.init_val[GS]])
        if pd is not None:
            pipe_decl = pd
    cval = np.full(op.shape[0], -1, np.int64)
    cval[keyed] = remap[old]
    return cval, gs_null, pipe_decl, blocks


def _raise_bad_root_index(s: Stream) -> None:
    """Raise the input error for the first root parameter index out of range (0..15), by
    opcode (graphics, then compute) and then position."""
    for nm in (*_GFX_ROOT_OPS, *_CMP_ROOT_OPS):
        idx = np.flatnonzero(s.op == _OP[nm])
        bad = s.args[idx, _COL_ROOT_INDEX] >= NROOT
        if bad.any():
            i = int(idx[np.argmax(bad)])
            q = int(s.args[i, _COL_ROOT_INDEX])
            raise InputError(f"{nm}: root parameter index {q} is out of range (0..{NROOT - 1})",
                             "<stream>", int(s.line[i]), 1)
    raise AssertionError("no root parameter index out of range")  # pragma: no cover


@dataclass(frozen=True, eq=False)
class _DeclFacts:
    """What a scan needs of the declarations alone (shared by :func:`rescan` with the scan it
    starts from: a stream's ``take`` keeps its declarations)."""

    names: list[str]
    heap_type: np.ndarray
    draw_mask: np.ndarray
    disp_mask: np.ndarray
    pcompact: np.ndarray
    arr: ArrayMasks | None
    buf_keys: np.ndarray | None
    """The heaprefs of the views of buffers (None: no array clause, so nothing asks)."""


def _decl_facts(decls) -> _DeclFacts:
    heap_type = np.array([(0 if getattr(d, "type", "") == "CBV_SRV_UAV" else 1) if d.kind == "heap" else -1
                          for d in decls.items] or [-1], dtype=np.int64)
    draw_mask, disp_mask, pcompact = _pipeline_masks(decls)
    arr = array_masks(decls)
    buf_keys = None
    if arr is not None:
        buf_keys = np.array([(h << 32) | v for h, v in _buffer_views(decls)], np.int64)  # heapref encoding
    return _DeclFacts(_names(decls), heap_type, draw_mask, disp_mask, pcompact, arr, buf_keys)


def scan(stream: Stream, pure: bool | None = None) -> Scan:
    """Run the linear state scan over ``stream`` (see :class:`Scan`).

    Raises
    ------
    InputError
        A root parameter index outside 0..15.
    """
    return _scan_stream(stream, pure, None, None)


def rescan(sc: Scan, keep: np.ndarray, stream: Stream | None = None) -> Scan:
    """``scan(sc.stream.take(keep), sc.pure)``, without what the commands and declarations alone
    determine: the declarations' facts, each command's slot and kernel code and, for the sets
    whose value is a key of their arguments (every set but the partial updates), the value ids,
    renumbered from ``sc``'s (:func:`_retaken_values`). The scan kernel and the partial-update
    chains run again. ``stream``: ``sc.stream.take(keep)`` if already made. The result equals
    :func:`scan`'s in every field (tests/test_state.py compares them).

    >>> from drawopt.gen import generate
    >>> s = generate("frame", 50, seed=1)
    >>> keep = np.flatnonzero(np.arange(len(s)) % 3 != 1)
    >>> a, b = rescan(scan(s), keep), scan(s.take(keep))
    >>> bool(np.array_equal(a.cval, b.cval) and np.array_equal(a.setter, b.setter))
    True
    """
    keep = np.asarray(keep, np.int64).reshape(-1)
    s = sc.stream.take(keep) if stream is None else stream
    if s.decls is not sc.stream.decls or s.header.kind != sc.stream.header.kind or len(s) != keep.shape[0] \
            or sc._decl is None or not np.array_equal(s.op, sc.stream.op[keep]):
        return scan(s, sc.pure)  # not the commands ``keep`` of sc's stream
    return _scan_stream(s, sc.pure, sc, keep)


def _scan_stream(s: Stream, pure: bool | None, base: Scan | None, keep: np.ndarray | None) -> Scan:
    """:func:`scan`; with ``base`` and ``keep``, :func:`rescan`."""
    n = len(s)
    op = s.op
    df = base._decl if base is not None and base._decl is not None else _decl_facts(s.decls)
    names = df.names
    values = _Values()
    got = None
    if base is not None and keep is not None:
        got = _retaken_values(base, keep, op, values)
    if got is not None and base is not None and keep is not None:
        cval, gs_null, pipe_decl, blocks = got
        kcode = _OPTAB[op, 0].copy() if n else np.zeros(0, np.int64)
        slot = base.slot[keep]
        is_table = _OPTAB[op, 7].astype(np.uint8) if n else np.zeros(0, np.uint8)
        gid = ukeys = None
    else:
        base = None
        values = _Values()
        cv = _command_values(s, df.heap_type, pure)
        if cv is None:  # a root parameter index out of range: name the first (as the pure path would)
            _raise_bad_root_index(s)
        kcode, slot, is_table, gid, ublock, ukeys = cv
        cval, gs_null, pipe_decl, blocks = _number_values(values, names, gid, ublock, ukeys)

    def where(name: str) -> np.ndarray:
        return np.flatnonzero(s.op == _OP[name])

    a = s.args
    # the linear scan
    bundle = s.header.kind == "bundle"
    if bundle:  # a bundle's first heaps are the caller's: that set changes no table
        kcode[np.flatnonzero(kcode == K_HEAPS)[:1]] = K_SET
    init_unknown = 0
    if bundle:
        init_unknown = _ALL_BITS & ~((1 << PIPELINE) | (1 << TOPOLOGY))
    draw_mask, disp_mask, pcompact = df.draw_mask, df.disp_mask, df.pcompact
    layout = _LAYOUT.copy()
    layout[-1] = draw_mask.shape[0] - 1  # a pipeline of the wrong kind reads like none (masks' rows)
    setter, unknown, prev, obs_all, kind, epoch, pipe, pidx = _kernel(pure)(
        kcode, slot, cval, is_table, layout, init_unknown, bundle, pipe_decl, pcompact)

    # partial updates (root constants, vertex buffers), resolved per slot
    chains: dict[int, _Chains] = {}
    vb_table: VBTable | None = None
    merge_cmds = np.flatnonzero(_IS_MERGE[op]) if n else np.zeros(0, np.int64)
    if merge_cmds.size:
        vb_mask = op[merge_cmds] == _OP["IASetVertexBuffers"]  # (the others set root constants)
        cc = merge_cmds[~vb_mask]
        vbc = merge_cmds[vb_mask]
        if vbc.size:
            trip_ids, trip = _intern_values(a[vbc, _VB_BINDING], pure)
            tbase = values.add(trip.shape[0], lambda j, u=trip: (names[int(u[j][0])], int(u[j][1]),
                                                                       int(u[j][2])))
            vb_slots, vcol = np.unique(a[vbc, _COL_VB_SLOT], return_inverse=True)
            ch = _make_chains(VB, vbc, prev, np.arange(vbc.size), vcol.reshape(-1), tbase + trip_ids,
                              vb_slots.shape[0], pure)
            chains[VB] = ch

            def dec_vb(row: np.ndarray, slots: np.ndarray = vb_slots) -> tuple:
                out: tuple = tuple((int(slots[k]), *values.decode(int(v))) for k, v in enumerate(row[:-1]) if v >= 0)
                return out + (UNKNOWN_DESC,) if row[-1] else out
            vb_base, vb_rows = _resolve(ch, cval, values, dec_vb)
            # canonical buffer of each decl: the first decl of its name (values compare names)
            first_of: dict[str, int] = {}
            buf_canon = np.array([first_of.setdefault(nm, i) for i, nm in enumerate(names)] or [-1], np.int64)
            vb_table = _vb_table(vb_base, vb_rows, vb_slots, trip, tbase, buf_canon)
        if cc.size:
            scc = slot[cc]
            for sl in np.flatnonzero(np.bincount(scc)):
                c = cc[scc == sl]
                owner, col, wv, width = _const_writes(s, c, pure)
                ch = _make_chains(int(sl), c, prev, owner, col, wv, width, pure)
                chains[int(sl)] = ch
                _resolve(ch, cval, values, _decode_constants)

    init_val = np.full(NSLOTS, UNDEFINED, np.int64)
    init_val[GS] = gs_null
    arr = df.arr
    binds_buf = None
    if arr is not None:
        if base is not None and base._binds_buf is not None and keep is not None:
            binds_buf = base._binds_buf[keep]  # a fact of each command and the declarations
        else:
            binds_buf = np.zeros(n, bool)
            binds_buf[where("SetGraphicsRootConstantBufferView")] = True
            binds_buf[where("SetGraphicsRootShaderResourceView")] = True
            idx = where("SetGraphicsRootDescriptorTable")
            if idx.size and gid is not None and ukeys is not None:
                # per interned key (ukeys: a table command's heapref), not per command
                binds_buf[idx] = np.isin(ukeys[:, 0], df.buf_keys)[gid[idx]]
    # kept narrow (codes < 16, slots < 64): 14 bytes a command less than int64 (47 MB of a 1M-draw frame's scan)
    return Scan(s, kcode.astype(np.int8), slot.astype(np.int8), cval, prev, obs_all, kind, setter, unknown, pipe,
                epoch, init_val, values, chains, df.heap_type, draw_mask, disp_mask, pidx, arr, binds_buf, vb_table,
                pure, df, blocks)


@dataclass(frozen=True)
class ArrayMasks:
    """Per pipeline (compact index, as :func:`_pipeline_masks`; the last row: no valid
    pipeline): what a draw does not observe when it reads its per-draw record from a
    bound array (docs/architecture.md, "Rewrite contracts").

    ``perdraw[j]``: root parameter P of pipeline ``j``'s array clause (``instance_data``,
    else ``draw_data``; -1: none); ``lifted[j]``: the slots whose every observable value
    is a lift item of that clause -- root constants all of whose words are lifted, and
    descriptor tables whose heap slot (``Q.0``) is lifted (the table binding itself is
    not read then; a root view keeps its buffer, so it stays observed); ``words[j, q]``:
    for root constants ``q`` only some of whose words are lifted, those words as a
    bitmask (uint64; the slot stays observed, dedupe-state drops writes of only
    those words); ``x_reads[j]``:
    ``DrawIndexedX`` calls read through the pipeline's ``x`` clause instead (it declares
    one and pulls its vertices), so the array clause's mask does not apply to them.
    """

    perdraw: np.ndarray
    lifted: np.ndarray
    x_reads: np.ndarray
    words: np.ndarray


def array_masks(decls) -> ArrayMasks | None:
    """The :class:`ArrayMasks` of ``decls``, or None when no pipeline has an array clause
    with something to mask."""
    pipes = [d for d in decls.items if isinstance(d, Pipeline)]
    p = len(pipes)
    perdraw = np.full(p + 1, -1, np.int64)
    lifted = np.zeros((p + 1, NSLOTS), bool)
    x_reads = np.zeros(p + 1, bool)
    words = np.zeros((p + 1, NROOT), np.uint64)
    for j, d in enumerate(pipes):
        c = d.contract.array
        if c is None or d.is_compute or d.root is None or d.root not in decls:
            continue
        rs = decls[d.root]
        if not isinstance(rs, RootSig):
            continue
        pd = c.perdraw  # an array clause names one (checked at load: Decls.add)
        if rs.params[pd].kind == "constants":
            continue
        items: dict[int, set[int]] = {}
        for q, k in c.resolve(rs)[0]:
            items.setdefault(q, set()).add(k)
        reads = set(d.read_params(len(rs.params)))
        for q, ks in items.items():
            if q not in reads:
                continue
            rp = rs.params[q]
            if (rp.kind == "constants" and ks >= set(range(rp.count))) or (rp.kind == "table" and 0 in ks):
                lifted[j, ROOT0 + q] = True
            elif rp.kind == "constants":
                words[j, q] = sum(1 << k for k in ks if k < rp.count)
        if lifted[j].any() or words[j].any():
            perdraw[j] = pd
            x_reads[j] = d.x_clause is not None
    return ArrayMasks(perdraw, lifted, x_reads, words) if (perdraw >= 0).any() else None


def _buffer_views(decls) -> set[tuple[int, int]]:
    """``(heap index, slot)`` of every view of a buffer."""
    out: set[tuple[int, int]] = set()
    for d in decls.items:
        if isinstance(d, View) and d.resource is not None and d.resource in decls \
                and isinstance(decls[d.resource], Buffer) and d.heap in decls:
            out.add((decls.index[d.heap], d.slot))
    return out


def _decode_constants(row: np.ndarray) -> tuple:
    """Canonical root constants: ``("constants", words)`` with None for undefined words,
    trailing ones dropped. A partial update of an unknown value (``row[-1]`` set) keeps
    ``"<unknown>"`` for the words its chain did not write, and has a third item
    ``"<unknown>"``: the words after the last written one are unknown too."""
    unknown_rest = bool(row[-1])
    w = [int(x) if x >= 0 else (UNKNOWN_DESC if x == UNKNOWN else None) for x in row[:-1]]
    fill = UNKNOWN_DESC if unknown_rest else None
    while w and w[-1] == fill:
        w.pop()
    return ("constants", tuple(w), UNKNOWN_DESC) if unknown_rest else ("constants", tuple(w))


def _const_writes(s: Stream, c: np.ndarray, pure: bool | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(owner, col, wv, width)`` of the root-constants commands ``c`` of one slot (see
    :class:`_Chains`); ``drawopt._state.const_writes`` when built."""
    mod = load_cext("_state", pure)
    if mod is not None:
        got = mod.const_writes(c, s.args, s.var_off, s.var_len, s.pool)
        if got is not None:
            return got
    a = s.args
    cnt = a[c, _COL_CONST_COUNT]
    dest = a[c, _COL_CONST_DEST]
    lens = cnt.astype(np.int64)
    owner = np.repeat(np.arange(c.size), lens)
    col = np.repeat(dest, lens) + (np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens))
    wv = s.pool[ragged_index(s.var_off[c], s.var_len[c])]
    return owner, col, wv, int((dest + cnt).max())


def _make_chains(sl: int, cmds: np.ndarray, prev: np.ndarray, owner: np.ndarray, col: np.ndarray,
                 wv: np.ndarray, width: int, pure: bool | None = None) -> _Chains:
    p = prev[cmds]
    start = np.ones(cmds.shape[0], bool)
    start[1:] = p[1:] != cmds[:-1]
    init = np.where(p == -3, UNKNOWN, UNDEFINED).astype(np.int64, copy=False)
    return _Chains(sl, cmds, start, init, np.asarray(owner, np.int64), np.asarray(col, np.int64),
                   np.asarray(wv, np.int64), max(int(width), 1), pure=pure)


def _resolve(ch: _Chains, cval: np.ndarray, values: _Values,
             decode: Callable[[np.ndarray], Any]) -> tuple[int, np.ndarray]:
    """Value ids of the merged values of a chain; values holding unknown words (a partial
    update of an unknown value) are distinct values, listed in ``values.partial``.

    Returns the first value id of the new block and its rows (the words, then the
    unknown flag): row ``j`` is value ``base + j``.

    The compiled path interns the rows as it walks the chains (``drawopt._state.chain_values``,
    no matrix of every command's words) and numbers the distinct rows as
    :func:`_intern_values` numbers them all (:func:`_number_distinct`)."""
    mod = load_cext("_state", ch.pure)
    if mod is not None and ch.cmds.shape[0]:
        fa, rows_fa = mod.chain_values(ch.start, ch.init, ch.owner, ch.col, ch.wv, ch.width)
        uid, uniq = _number_distinct(rows_fa)
        ids = uid[fa]
    else:
        filled = ch.filled()
        rows = np.arange(filled.shape[0], dtype=np.int64)
        seg_start = np.maximum.accumulate(np.where(ch.start, rows, 0))
        from_unknown = (ch.init[seg_start] == UNKNOWN).astype(np.int64)
        ids, uniq = _intern_values(np.concatenate([filled, from_unknown[:, None]], axis=1), ch.pure)
    base = values.add(uniq.shape[0], lambda j: decode(uniq[j]))
    ch.base, ch.rows = base, uniq
    cval[ch.cmds] = base + ids
    values.partial.extend((base + np.flatnonzero(uniq[:, -1])).tolist())
    return base, uniq


def _vb_table(base: int, rows: np.ndarray, slots: np.ndarray, trip: np.ndarray, tbase: int,
              buf_canon: np.ndarray) -> VBTable:
    """The :class:`VBTable` of the vertex-buffer values ``base ..``, from their rows (one
    word per slot in ``slots``: a binding's value id ``tbase + k`` with ``trip[k]`` its
    ``(buffer, offset, stride)``, or -1 / -3; then the unknown flag)."""
    m = rows.shape[0]
    words = rows[:, :-1]
    bound = words >= 0
    col = np.argmax(bound, axis=1)
    single = (bound.sum(axis=1) == 1) & (rows[:, -1] == 0) & (slots[col] == 0)
    t = trip[np.where(single, words[np.arange(m), col] - tbase, 0)]
    return VBTable(base, single, np.where(single, buf_canon[t[:, 0]], -1),
                   np.where(single, t[:, 1], 0), np.where(single, t[:, 2], 0))


def _pipeline_masks(decls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pipeline: the slots a draw / a dispatch with it can observe.

    Row ``P`` (the last) is for no valid pipeline (undefined, unknown or of the wrong
    kind): everything of that side is read.
    """
    pipes = [(i, d) for i, d in enumerate(decls.items) if isinstance(d, Pipeline)]
    compact = np.full(max(len(decls), 1), len(pipes), np.int64)
    p = len(pipes)
    draw = np.zeros((p + 1, NSLOTS), bool)
    disp = np.zeros((p + 1, NSLOTS), bool)
    draw[p] = _GFX_SLOTS
    disp[p] = _CMP_SLOTS
    for j, (i, d) in enumerate(pipes):
        compact[i] = j
        nparams = 0
        if d.root is not None:
            rs = decls[d.root]
            assert isinstance(rs, RootSig)
            nparams = len(rs.params)
        reads = [q for q in d.read_params(nparams) if q < NROOT]
        if d.is_compute:
            draw[j] = draw[p]
            disp[j, [PIPELINE, HEAPS, CRS]] = True
            disp[j, [CROOT0 + q for q in reads]] = True
        else:
            disp[j] = disp[p]
            draw[j] = _GFX_SLOTS
            draw[j, ROOT0:ROOT0 + NROOT] = False
            draw[j, [ROOT0 + q for q in reads]] = True
            draw[j, VB] = not d.vertex_pulling
            draw[j, GS] = d.observes_gs_params
            draw[j, BLEND] = d.blend != "opaque"   # (blending off: the factor is not read)
    return draw, disp, compact


# ---------------------------------------------------------------------- the table
_CHUNK = 1 << 16


def _observed_setters_py(setter: np.ndarray, readbits: np.ndarray, partbits: np.ndarray, rootbits: int,
                         n: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Pure-numpy twin of ``drawopt._state.observed_setters`` (see :meth:`Scan.observed_setters`)."""
    observed = np.zeros(n, bool)
    full = np.zeros(n, bool)
    root = ((np.int64(rootbits) >> _SHIFTS) & 1).astype(bool)
    ro, rs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for lo in range(0, setter.shape[0], _CHUNK):
        st = setter[lo:lo + _CHUNK]
        m = ((readbits[lo:lo + _CHUNK, None] >> _SHIFTS) & 1).astype(bool)
        part = ((partbits[lo:lo + _CHUNK, None] >> _SHIFTS) & 1).astype(bool)
        observed[st[m & (st >= 0)]] = True
        full[st[m & ~part & (st >= 0)]] = True
        o, k = np.nonzero(m & (st == -1) & root[None, :])
        ro.append(lo + o)
        rs.append(k)
    return observed, full, (np.concatenate(ro).astype(np.int64), np.concatenate(rs).astype(np.int64))


def diff_state_rows(rows_a: np.ndarray, ia: np.ndarray, rows_b: np.ndarray, ib: np.ndarray, map_a: np.ndarray,
                    map_b: np.ndarray, ask_code: int, pure: bool | None = None) -> np.ndarray:
    """Which slots of state rows ``rows_b[ib]`` may differ from ``rows_a[ia]`` (two tables'
    rows, compared through value maps): int64[k] bitmasks, bit ``s`` set where ``map_a[va] !=
    map_b[vb]`` or ``map_a[va] == ask_code`` (the maps' last three entries stand for the
    markers -3, -2, -1).

    >>> rows = np.array([[0, 1], [0, 2]])
    >>> ident = np.r_[np.arange(3), UNKNOWN, MASKED, UNDEFINED]
    >>> diff_state_rows(rows, np.array([0, 0]), rows, np.array([0, 1]), ident, ident, -10).tolist()
    [0, 2]
    """
    mod = load_cext("_state", pure)
    if mod is not None:
        return mod.diff_state_rows(rows_a, ia, rows_b, ib, map_a, map_b, ask_code)
    return _diff_state_rows_py(rows_a, ia, rows_b, ib, map_a, map_b, ask_code)


def _diff_state_rows_py(rows_a: np.ndarray, ia: np.ndarray, rows_b: np.ndarray, ib: np.ndarray, map_a: np.ndarray,
                        map_b: np.ndarray, ask_code: int) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._state.diff_state_rows`` (see :func:`diff_state_rows`)."""
    out = np.zeros(ia.shape[0], np.int64)
    for lo in range(0, ia.shape[0], _CHUNK):
        ka = map_a[rows_a[ia[lo:lo + _CHUNK]]]
        kb = map_b[rows_b[ib[lo:lo + _CHUNK]]]
        out[lo:lo + ka.shape[0]] = _bit_rows((ka != kb) | (ka == ask_code))
    return out


def _intern_observers(sc: Scan, sel: np.ndarray, packs: bool = False) -> tuple[np.ndarray, ...]:
    """Intern the keys of observers ``sel``: their normalised rows plus an epoch (the Opaque
    epoch when the row holds unknown values, else -1). Returns ``(ids, first, rows,
    epochs)``: ids in order of first appearance, ``first`` the position in ``sel`` of each
    id's first observer, ``rows`` int32[U, NSLOTS] and ``epochs`` int64[U] each id's key;
    with ``packs``, a fifth array: each id's pack class (:func:`_pack_classes_py`)."""
    mod = load_cext("_state", sc.pure)
    partial = sc.values.partial_mask()
    if mod is not None:
        return mod.intern_observers(sc.setter, sc.unknown, sc.cval, sc.init_val, sc.read_bits, sc.epoch,
                                    partial.view(np.uint8), sel, MASKED, UNKNOWN, IB if packs else -1)
    got = _intern_observers_py(sc, sel, partial)
    return (*got, _pack_classes_py(got[2], got[3], partial)) if packs else got


def _pack_classes_py(rows: np.ndarray, epochs: np.ndarray, partial: np.ndarray) -> np.ndarray:
    """Pack class of each state (``rows``, ``epochs``: the keys of :func:`_intern_observers`):
    a function of the state row with the index buffer masked, interned over the states in
    state-id order, which keeps first-appearance order among draws. Masking the index buffer
    may leave a row that held unknowns without any: its epoch goes. (Pure twin of the
    ``pack_slot`` output of ``drawopt._state.intern_observers``.)"""
    pk = np.empty((rows.shape[0], NSLOTS + 1), np.int32)  # value ids and epochs are < 2**31
    pk[:, :NSLOTS] = rows
    pk[:, IB] = MASKED
    pk[:, NSLOTS] = epochs
    cand = np.flatnonzero(epochs != -1)
    if cand.size:
        sub = pk[cand, :NSLOTS]
        known = (sub != UNKNOWN).all(axis=1) & ~partial[np.where(sub >= 0, sub, -1)].any(1)
        pk[cand[known], NSLOTS] = -1
    return _intern_rows_py(pk)[0]


def _intern_observers_py(sc: Scan, sel: np.ndarray, partial: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                   np.ndarray, np.ndarray]:
    """Pure-numpy twin of ``drawopt._state.intern_observers``."""
    out = np.empty((sel.shape[0], NSLOTS + 1), np.int64)
    for lo in range(0, sel.shape[0], _CHUNK):
        part = sel[lo:lo + _CHUNK]
        hi = lo + part.shape[0]
        v = sc._rows_py(part, sc.read_bits)
        has_unk = (v == UNKNOWN).any(axis=1)
        if partial.any():
            has_unk |= partial[np.where(v >= 0, v, -1)].any(axis=1)
        out[lo:hi, :NSLOTS] = v
        out[lo:hi, NSLOTS] = np.where(has_unk, sc.epoch[part], -1)
    ids, first = _intern_rows_py(out)
    rows = out[first, :NSLOTS]
    if rows.size and (rows.max() >= 2**31 - 1 or rows.min() < -2**31):
        raise ValueError("a value id does not fit in 32 bits")
    return ids, first, rows.astype(np.int32), out[first, NSLOTS]


def track(stream: Stream, pure: bool | None = None, sc: Scan | None = None) -> StateTable:
    """Track the state of every draw of ``stream``.

    Parameters
    ----------
    stream : Stream
    pure : bool, optional
        Force (True) or forbid (False) the pure-Python scan; default: the compiled
        kernel unless ``DRAWOPT_PURE=1``.
    sc : Scan, optional
        ``scan(stream, pure)`` if already known (the table is built from it).

    Returns
    -------
    StateTable
    """
    if sc is None:
        sc = scan(stream, pure)
    elif sc.stream is not stream:
        raise ValueError("the scan is of another stream")
    dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
    xsel = np.flatnonzero(sc.obs_kind == OBS_DISPATCH)
    dstate, _, drows, depoch, pack_of_state = _intern_observers(sc, dsel, packs=True)
    xstate, _, xrows, _ = _intern_observers(sc, xsel)
    rows = np.concatenate([drows, xrows]) if xrows.shape[0] else drows
    all_draws = dsel.shape[0] == sc.obs.shape[0]
    return StateTable(
        draws=sc.obs[dsel],
        state=dstate.astype(np.int32),
        pack=pack_of_state[dstate].astype(np.int32),
        rows=rows.reshape(-1, NSLOTS),
        setter=sc.setter if all_draws else sc.setter[dsel],
        dispatches=sc.obs[xsel],
        dispatch_state=(xstate + drows.shape[0]).astype(np.int32),
        dispatch_setter=sc.setter[xsel],
        scan=sc,
    )


def retrack(table: StateTable, keep: np.ndarray, stream: Stream | None = None) -> StateTable:
    """``track(table.scan.stream.take(keep), pure)`` from ``table``: the state table of a stream that
    keeps the commands ``keep`` (increasing) of ``table``'s stream. ``stream``: that take, if made
    already; its draws' fixed arguments may differ from the input's (no scan reads them: a draw only
    observes, merge-instances rewrites the counts of the draws it keeps).

    Where only draws other than ``DrawIndexedX`` (which resets the index buffer) go, every kept
    command sees what it saw: the scan's facts are the input's at the kept commands and observers,
    command indices renumbered, the values and chains the same; a draw's state id is its input's,
    renumbered in order of first appearance only where a dropped draw was the first of its state
    (:func:`_first_ids`), and the pack classes with it. Otherwise: :func:`track` of :func:`rescan`.
    The result equals :func:`track`'s in every field (tests/test_handoff.py compares them).

    >>> from drawopt.gen import generate
    >>> s = generate("frame", 50, seed=1)
    >>> t = track(s)
    >>> keep = np.setdiff1d(np.arange(len(s)), t.draws[1::3])
    >>> a, b = retrack(t, keep), track(s.take(keep))
    >>> bool(np.array_equal(a.state, b.state) and np.array_equal(a.setter, b.setter))
    True
    """
    sc = table.scan
    keep = np.asarray(keep, np.int64).reshape(-1)
    if sc is None:
        raise ValueError("the state table has no scan")
    old = sc.stream
    s = old.take(keep) if stream is None else stream
    n_old = len(old)
    if s.decls is not old.decls or s.header.kind != old.header.kind or len(s) != keep.shape[0] \
            or sc._decl is None or (keep.size and (keep[0] < 0 or keep[-1] >= n_old)) \
            or (keep.size > 1 and not (np.diff(keep) > 0).all()) or not np.array_equal(s.op, old.op[keep]):
        return track(s, sc.pure)  # not a removal of commands of table's stream
    kept = np.zeros(n_old, bool)
    kept[keep] = True
    if (sc.kcode[~kept] != K_DRAW).any():
        return track(s, sc.pure, sc=rescan(sc, keep, s))
    return _drop_draws(table, sc, s, keep, kept)


def _drop_draws(table: StateTable, sc: Scan, s: Stream, keep: np.ndarray, kept: np.ndarray) -> StateTable:
    """:func:`retrack` where only plain draws go (its docstring)."""
    n_old = kept.shape[0]
    lut = np.full(n_old + 1, -1, np.int64)  # old command -> new one; index -1 (none, end of bundle) stays -1
    lut[keep] = np.arange(keep.shape[0], dtype=np.int64)
    ko = np.flatnonzero((lut[sc.obs] >= 0) | (sc.obs < 0))  # the observers kept (-1: the end of a bundle)
    setter = _renumber_rows(sc.setter, ko, lut.astype(np.int32), sc.pure)
    prev = sc.prev[keep]
    prev = np.where(prev >= 0, lut[np.maximum(prev, 0)], prev)
    chains = {k: _replace_cmds(ch, lut[ch.cmds]) for k, ch in sc.chains.items()}
    new = Scan(s, sc.kcode[keep], sc.slot[keep], sc.cval[keep], prev, lut[sc.obs[ko]], sc.obs_kind[ko], setter,
               sc.unknown[ko], sc.pipe[ko], sc.epoch[ko], sc.init_val, _fresh_values(sc.values), chains, sc.heap_type,
               sc._draw_mask, sc._disp_mask, sc._pidx[ko], sc._arr,
               sc._binds_buf[keep] if sc._binds_buf is not None else None, sc.vb_table, sc.pure, sc._decl,
               sc._blocks)
    bits = sc.__dict__.get("_read_bits_")
    if bits is not None:  # a function of each observer's command, pipeline and setters: the same
        new.__dict__["_read_bits_"] = bits[ko]
    dk = kept[table.draws]
    state = table.state[dk]
    pack = table.pack[dk]
    nd_old = int(table.state.max()) + 1 if table.state.size else 0
    rows = table.rows
    nd = nd_old
    # a dropped draw that was the first of its state: the states are numbered anew (first appearance)
    run = np.maximum.accumulate(table.state) if table.state.size else table.state
    firsts = np.ones(table.state.shape[0], bool)
    firsts[1:] = run[1:] > run[:-1]
    if (firsts & ~dk).any():
        state, was = _first_ids(state, sc.pure)
        pack = _first_ids(pack, sc.pure)[0]
        nd = was.shape[0]
        rows = np.concatenate([rows[was], rows[nd_old:]])
    dsel = np.flatnonzero(new.obs_kind == OBS_DRAW)
    xsel = np.flatnonzero(new.obs_kind == OBS_DISPATCH)
    all_draws = dsel.shape[0] == new.obs.shape[0]
    return StateTable(
        draws=new.obs[dsel],
        state=state.astype(np.int32, copy=False),
        pack=pack.astype(np.int32, copy=False),
        rows=rows,
        setter=new.setter if all_draws else new.setter[dsel],
        dispatches=new.obs[xsel],
        dispatch_state=(table.dispatch_state.astype(np.int64) - nd_old + nd).astype(np.int32),
        dispatch_setter=new.setter[xsel],
        scan=new,
    )


def _renumber_rows(setter: np.ndarray, sel: np.ndarray, lut: np.ndarray, pure: bool | None) -> np.ndarray:
    """Rows ``sel`` of ``setter`` (int32) with each command ``c >= 0`` replaced by ``lut[c]``
    (``drawopt._state.renumber_rows``; pure twin :func:`_renumber_rows_py`)."""
    mod = load_cext("_state", pure)
    if mod is not None:
        return mod.renumber_rows(setter, sel, lut)
    return _renumber_rows_py(setter, sel, lut)


def _renumber_rows_py(setter: np.ndarray, sel: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._state.renumber_rows``, in chunks (no full-size temporaries)."""
    out = np.empty((sel.shape[0], setter.shape[1]), np.int32)
    lut = np.asarray(lut, np.int32)
    for lo in range(0, sel.shape[0], _CHUNK):
        st = setter[sel[lo:lo + _CHUNK]]
        out[lo:lo + st.shape[0]] = np.where(st >= 0, lut[np.maximum(st, 0)], st)
    return out


def _replace_cmds(ch: _Chains, cmds: np.ndarray) -> _Chains:
    """``ch`` with its commands renumbered (the words and starts are the same; the matrices that
    consumers of ``ch`` computed are left behind, as a fresh scan has none)."""
    return _Chains(ch.slot, cmds, ch.start, ch.init, ch.owner, ch.col, ch.wv, ch.width, pure=ch.pure,
                   base=ch.base, rows=ch.rows)


def _fresh_values(values: _Values) -> _Values:
    """The registry ``values`` without the decoded values its consumers cached."""
    out = _Values()
    out.starts, out.decoders, out.next, out.partial = list(values.starts), list(values.decoders), values.next, \
        list(values.partial)
    return out


def _first_ids(ids: np.ndarray, pure: bool | None) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` numbered anew in order of first appearance: ``(new ids, the old id of each new one)``."""
    new, first = intern_rows(np.asarray(ids, np.int64), pure=pure)
    return new, np.asarray(ids, np.int64)[first]


# ---------------------------------------------------------------------- comparison
_OBS_NAMES = {OBS_DRAW: "draw", OBS_DISPATCH: "dispatch", OBS_OPAQUE: "opaque command", OBS_END: "end of bundle"}


def _canon_args(s: Stream, cmds: np.ndarray, name_id: dict[str, int], str_id: dict[str, int]) -> np.ndarray:
    """Fixed arguments of commands ``cmds`` with declaration refs and strings replaced by
    ids shared between streams (so two streams with different declaration orders compare)."""
    valid = cmds >= 0
    rows = np.zeros((cmds.shape[0], NARGS), np.int64)
    rows[valid] = s.args[cmds[valid]]
    if not valid.any():
        return rows
    dmap = np.array([name_id.setdefault(d.name, len(name_id)) for d in s.decls.items] or [0], np.int64)
    ops = np.full(cmds.shape[0], -1, np.int64)
    ops[valid] = s.op[cmds[valid]]
    for code in np.unique(ops[valid]):
        sp = BY_CODE[int(code)]
        sel = ops == code
        for j, arg in enumerate(sp.args):
            col = rows[sel, j]
            if arg.kind == "ref":
                rows[sel, j] = dmap[col]
            elif arg.kind == "heapref":
                rows[sel, j] = (dmap[col >> 32] << 32) | (col & 0xFFFFFFFF)
            elif arg.kind == "str":
                rows[sel, j] = [str_id.setdefault(s.strings[int(v)], len(str_id)) for v in col]
    return rows


def _line(s: Stream, cmd: int) -> str:
    if cmd < 0:
        return "end"
    ln = int(s.line[cmd])
    return f"line {ln}" if ln > 0 else f"command {cmd}"


def refines(x: Any, y: Any) -> bool:
    """Whether a slot's value ``y`` (after a rewrite) is ``x`` (before) or refines it.

    Undefined may become anything (docs/verification.md, "Undefined may become anything"):
    an undefined slot (None) is refined by any value, and root constants by words equal where
    ``x`` defines them, including the words after ``x``'s last one when they are undefined
    (no ``"<unknown>"`` third item: a list's never-set words, or words lost when the
    parameter was set as another kind). Unknown (a bundle's inherited value) is not undefined.

    >>> refines(("constants", (5,)), ("constants", (5, 8)))
    True
    >>> refines(("constants", (5, 8)), ("constants", (5,)))
    False
    >>> refines(("constants", (0,), "<unknown>"), ("constants", (0, 1), "<unknown>"))
    False
    >>> refines(None, ("table", "h0", 0)), refines(("table", "h0", 0), None)
    (True, False)
    """
    if x == y or x is None:
        return True
    if not (isinstance(x, tuple) and isinstance(y, tuple) and x[:1] == y[:1] == ("constants",)):
        return False
    (wx, *tail_x), (wy, *tail_y) = x[1:], y[1:]
    if tail_x and (tail_x != tail_y or len(wx) != len(wy)):
        return False   # x's words past its last are the caller's: y must leave them and set no more
    if len(wy) < len(wx) and (tail_y or any(w is not None for w in wx[len(wy):])):
        return False
    return all(a is None or a == b for a, b in zip(wx, wy))


def compare_effective_state(before: Stream, after: Stream, ignore: tuple[str, ...] = ("gs_params",),
                            refine: bool = False) -> str | None:
    """Compare what every draw sees in two streams.

    Slots named in ``ignore`` are not compared: GS parameters (the default) change
    how fast a frame renders, not what it renders, so gs-plan may change them.
    With ``refine``, a value of ``after`` need only :func:`refines` that of ``before``
    (the translation validator's rule); by default they must be equal.

    Every observer (draw, dispatch, Opaque command, and for a bundle its final
    state) must appear in the same order, with the same arguments (declarations
    compared by name) and the same normalised state, compared slot by slot through
    the canonical values of :meth:`StateTable.describe`.

    Returns
    -------
    str or None
        None if equivalent, else a one-line reason naming the draw (its index among
        the draws) and its line in each stream.
    """
    a, b = scan(before), scan(after)
    differs: Callable[[Any, Any], bool] = (lambda x, y: not refines(x, y)) if refine else (lambda x, y: x != y)
    na, nb = a.obs.shape[0], b.obs.shape[0]
    n = min(na, nb)
    rank_a, rank_b = _kind_rank(a.obs_kind), _kind_rank(b.obs_kind)

    def where(k: int) -> str:
        sa = (a, before, rank_a) if k < na else (b, after, rank_b)
        sc, st, rk = sa
        kind = int(sc.obs_kind[k])
        cmd = int(sc.obs[k])
        nm = f" {st.spec(cmd).name}" if cmd >= 0 else ""
        la = _line(before, int(a.obs[k])) if k < na else "none"
        lb = _line(after, int(b.obs[k])) if k < nb else "none"
        return f"{_OBS_NAMES[kind]} #{int(rk[k])}{nm} (before: {la}; after: {lb})"

    name_id: dict[str, int] = {}
    str_id: dict[str, int] = {}
    ca = _canon_args(before, a.obs[:n], name_id, str_id)
    cb = _canon_args(after, b.obs[:n], name_id, str_id)
    opa = np.full(n, -1, np.int64)
    opb = np.full(n, -1, np.int64)
    opa[a.obs[:n] >= 0] = before.op[a.obs[:n][a.obs[:n] >= 0]]
    opb[b.obs[:n] >= 0] = after.op[b.obs[:n][b.obs[:n] >= 0]]
    bad = (opa != opb) | (ca != cb).any(axis=1) | (a.obs_kind[:n] != b.obs_kind[:n])
    first_bad = int(np.argmax(bad)) if bad.any() else n

    for lo in range(0, first_bad, _CHUNK):
        hi = min(first_bad, lo + _CHUNK)
        sel = np.arange(lo, hi)
        va, vb = a.normalised(sel), b.normalised(sel)
        diff = np.zeros(hi - lo, bool)
        slot_of = np.zeros(hi - lo, np.int64)
        for k in range(NSLOTS):
            if SLOTS[k] in ignore:
                continue
            key = ((va[:, k] + 3) << 32) | (vb[:, k] + 3)
            uniq, inv = np.unique(key, return_inverse=True)
            neq = np.fromiter((differs(a.values.decode(int(x >> 32) - 3), b.values.decode(int(x & 0xFFFFFFFF) - 3))
                               for x in uniq), bool, uniq.shape[0])
            if neq.any():
                d = neq[inv.reshape(-1)]
                slot_of[d & ~diff] = k
                diff |= d
        if diff.any():
            j = int(np.argmax(diff))
            k = int(slot_of[j])
            x, y = a.values.decode(int(va[j, k])), b.values.decode(int(vb[j, k]))
            return f"{where(lo + j)}: {SLOTS[k]} differs: {x!r} before, {y!r} after"
    if first_bad < n:
        k = first_bad
        if opa[k] != opb[k] or a.obs_kind[k] != b.obs_kind[k]:
            nmb = after.spec(int(b.obs[k])).name if b.obs[k] >= 0 else "the end of the bundle"
            return f"{where(k)}: is {nmb} after"
        return f"{where(k)}: arguments differ"
    if na != nb:
        k = n
        side = "before" if na > nb else "after"
        return f"{where(k)}: only {side} ({na} observers before, {nb} after)"
    return None


def _kind_rank(kind: np.ndarray) -> np.ndarray:
    """Index of each observer among the observers of its kind."""
    out = np.zeros(kind.shape[0], np.int64)
    for k in np.unique(kind):
        m = kind == k
        out[m] = np.arange(int(m.sum()))
    return out
