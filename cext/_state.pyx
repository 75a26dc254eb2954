"""Linear scan of the state tracker (``drawopt._state``).

The model lives in :mod:`drawopt.analysis.state`; this module only runs its hot loop.
``scan`` is the public wrapper (fixes dtypes and contiguity, allocates the
outputs); ``_scan`` is the typed kernel, run without the GIL. The pure-Python
twin is :func:`drawopt.analysis.state._scan_py`, and the tests check that both give
identical arrays.

Kernel codes (one per command, see ``drawopt.analysis.state``): 0 none, 1 set a slot,
2 SetDescriptorHeaps, 3 SetGraphicsRootSignature, 4 SetComputeRootSignature,
5 draw, 6 DrawIndexedX, 7 Dispatch, 8 Opaque. Codes >= 5 are observers: each
gets one row of ``setter`` (command index that last set each slot, -1 none)
and one ``unknown`` bitmask (bit s: slot s is unknown after an Opaque).
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

__all__ = ["scan", "hash_rows"]

cdef enum:
    K_NONE = 0
    K_SET = 1
    K_HEAPS = 2
    K_GRS = 3
    K_CRS = 4
    K_DRAW = 5
    K_DRAWX = 6
    K_DISPATCH = 7
    K_OPAQUE = 8
    MAX_SLOTS = 63


def scan(code, slot, val, is_table, layout, int64_t init_unknown, bint final_row):
    """Run the state scan.

    Parameters
    ----------
    code, slot, val : int64[N]
        Kernel code, slot set, and value id (used for heaps / root signatures) per command.
    is_table : uint8[N]
        1 where the command sets a descriptor table.
    layout : int64[8]
        ``(n_slots, heaps, gfx_rootsig, compute_rootsig, index_buffer, root0, croot0, n_root)``.
    init_unknown : int
        Bitmask of the slots unknown at the start (inherited by a bundle).
    final_row : bool
        Append one row for the state at the end of the stream.

    Returns
    -------
    setter : int64[O, n_slots]
    unknown : int64[O]
    prev : int64[N]
        For each set: the setter of its slot just before it (-1 undefined, -3 unknown);
        -2 for commands that set nothing.
    """
    code = np.ascontiguousarray(code, dtype=np.int64)
    slot = np.ascontiguousarray(slot, dtype=np.int64)
    val = np.ascontiguousarray(val, dtype=np.int64)
    is_table = np.ascontiguousarray(is_table, dtype=np.uint8)
    layout = np.ascontiguousarray(layout, dtype=np.int64)
    if layout.shape[0] != 8 or not 0 < layout[0] <= MAX_SLOTS:
        raise ValueError("bad layout")
    n = code.shape[0]
    if not (slot.shape[0] == val.shape[0] == is_table.shape[0] == n):
        raise ValueError("code, slot, val and is_table must have the same length")
    nobs = int(np.count_nonzero(code >= K_DRAW)) + (1 if final_row else 0)
    setter = np.empty((nobs, int(layout[0])), dtype=np.int64)
    unknown = np.empty(nobs, dtype=np.int64)
    prev = np.full(n, -2, dtype=np.int64)
    _scan(code, slot, val, is_table, layout, init_unknown, final_row, setter, unknown, prev)
    return setter, unknown, prev


cdef void _scan(const int64_t[::1] code, const int64_t[::1] slot, const int64_t[::1] val,
                const uint8_t[::1] is_table, const int64_t[::1] layout, int64_t init_unknown,
                bint final_row, int64_t[:, ::1] setter, int64_t[::1] unknown,
                int64_t[::1] prev) noexcept nogil:
    cdef:
        Py_ssize_t n = code.shape[0]
        Py_ssize_t i, o = 0, s, r, k, lo
        int64_t ns = layout[0], heaps = layout[1], grs = layout[2], crs = layout[3]
        int64_t ib = layout[4], root0 = layout[5], croot0 = layout[6], nroot = layout[7]
        int64_t cur[MAX_SLOTS]
        int64_t unk = init_unknown
        int64_t allbits = ((<int64_t>1) << ns) - 1
        int64_t c, p, bit, curv, rb
        Py_ssize_t[2] roots
    roots[0] = root0
    roots[1] = croot0
    for s in range(ns):
        cur[s] = -1
    for i in range(n):
        c = code[i]
        if c == K_NONE:
            continue
        if c <= K_CRS:
            s = slot[i]
            bit = (<int64_t>1) << s
            p = -3 if (unk & bit) else cur[s]
            prev[i] = p
            if c == K_HEAPS:
                curv = -1
                if p >= 0:
                    curv = val[p]
                if p == -3 or curv != val[i]:
                    # tables become undefined (known change) or unknown (change from unknown heaps)
                    for k in range(2):
                        for r in range(roots[k], roots[k] + nroot):
                            rb = (<int64_t>1) << r
                            if (unk & rb) == 0 and cur[r] >= 0 and is_table[cur[r]]:
                                if p == -3:
                                    unk |= rb  # maybe changed: unknown, and its setter may still be observed
                                else:
                                    cur[r] = -1
            elif c == K_GRS or c == K_CRS:
                lo = root0 if c == K_GRS else croot0
                curv = -1
                if p >= 0:
                    curv = val[p]
                if p == -3:
                    for r in range(lo, lo + nroot):
                        rb = (<int64_t>1) << r
                        if (unk & rb) == 0 and cur[r] >= 0:
                            unk |= rb  # maybe changed: unknown, and its setter may still be observed
                elif curv != val[i]:
                    for r in range(lo, lo + nroot):
                        cur[r] = -1
                        unk &= ~((<int64_t>1) << r)
            cur[s] = i
            unk &= ~bit
        else:
            for s in range(ns):
                setter[o, s] = cur[s]
            unknown[o] = unk
            o += 1
            if c == K_DRAWX:
                cur[ib] = -1
                unk &= ~((<int64_t>1) << ib)
            elif c == K_OPAQUE:
                for s in range(ns):
                    cur[s] = -1
                unk = allbits
    if final_row:
        for s in range(ns):
            setter[o, s] = cur[s]
        unknown[o] = unk


def hash_rows(mat):
    """64-bit splitmix hash of every row of an int32 or int64 matrix (identical to
    ``drawopt.analysis.state._hash_rows_py``)."""
    m = np.ascontiguousarray(mat, dtype=np.int64)
    if m.ndim != 2:
        raise ValueError("hash_rows needs a matrix")
    out = np.empty(m.shape[0], dtype=np.uint64)
    _hash_rows(m, out)
    return out


cdef void _hash_rows(const int64_t[:, ::1] m, uint64_t[::1] out) noexcept nogil:
    cdef:
        Py_ssize_t i, j, n = m.shape[0], k = m.shape[1]
        uint64_t h
    for i in range(n):
        h = 0x243F6A8885A308D3ULL
        for j in range(k):
            h ^= <uint64_t>m[i, j]
            h += 0x9E3779B97F4A7C15ULL
            h ^= h >> 30
            h *= 0xBF58476D1CE4E5B9ULL
            h ^= h >> 27
            h *= 0x94D049BB133111EBULL
            h ^= h >> 31
        out[i] = h
