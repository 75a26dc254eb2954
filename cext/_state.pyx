"""Linear scan of the state tracker (``drawopt._state``).

The model lives in :mod:`drawopt.analysis.state`; this module only runs its hot loops.
``scan`` is the public wrapper (fixes dtypes and contiguity, allocates the
outputs); ``_scan`` is the typed kernel, run without the GIL. The pure-Python
twin is :func:`drawopt.analysis.state._scan_py`, and the tests check that both give
identical arrays.

The other kernels work on the scan's results, each with a pure twin in
:mod:`drawopt.analysis.state` (tested against each other): ``fill_chains`` (the
words after every command of the partial-update chains of a merge slot; twin
``_Chains.fill``), ``hash_rows``
(``_hash_rows_py``), ``intern_rows`` (exact row interning with an open-addressing
hash table; twin ``_intern_rows_py``), ``observer_rows`` (normalised value rows of
observers; twin ``Scan._rows_py``), ``intern_observers`` (those rows plus the epoch
column, interned without building the full matrix; twin ``_intern_observers_py``),
``observed_setters`` (which setters observers read; twin ``_observed_setters_py``),
``const_writes`` (the word writes of root-constants commands; twin ``_const_writes``'s numpy
lines), ``chain_values`` (the values a merge slot's chains leave, interned as the walk
goes; twin: ``fill_chains`` rows interned, in ``_resolve``), ``command_values`` (kernel
code, slot and interned value key of every command, one pass; twin ``_command_values_py``)
``diff_state_rows`` (two state tables' rows compared through value maps; twin
``_diff_state_rows_py``) and ``renumber_rows`` (setter rows with their commands renumbered
after a removal; twin ``_renumber_rows_py``).

Kernel codes (one per command, see ``drawopt.analysis.state``): 0 none, 1 set a slot,
2 SetDescriptorHeaps, 3 SetGraphicsRootSignature, 4 SetComputeRootSignature,
5 draw, 6 DrawIndexedX, 7 Dispatch, 8 Opaque. Codes >= 5 are observers: each
gets one row of ``setter`` (command index that last set each slot, -1 none)
and one ``unknown`` bitmask (bit s: slot s is unknown after an Opaque), and its
command, kind, Opaque epoch and pipeline (declaration and mask row).

The interning kernels (``intern_observers``, ``chain_values``, ``intern_rows``) hide the
cache misses of their hash tables: the keys of the next few rows are built (or hashed)
ahead and their table slots prefetched, while the lookups stay in row order, so the ids
(first-appearance order) do not depend on it.
"""

import numpy as np

cimport cython
from libc.string cimport memcpy


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    void __builtin_prefetch(const void*) nogil
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t, uint16_t, uint64_t

__all__ = ["scan", "fill_chains", "hash_rows", "intern_rows", "observer_rows", "intern_observers",
           "observed_setters", "const_writes", "chain_values", "command_values",
           "diff_state_rows", "renumber_rows"]

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
    RING = 8      # observers whose keys intern_observers builds ahead of their lookups


def scan(code, slot, val, is_table, layout, int64_t init_unknown, bint final_row, pipe_decl, pcompact):
    """Run the state scan.

    Parameters
    ----------
    code, slot, val : int64[N]
        Kernel code, slot set, and value id (used for heaps / root signatures) per command.
    is_table : uint8[N]
        1 where the command sets a descriptor table.
    layout : int64[10]
        ``(n_slots, heaps, gfx_rootsig, compute_rootsig, index_buffer, root0, croot0, n_root,
        pipeline, no-pipeline row)``: the pipeline slot and the ``pidx`` of an observer
        without a valid pipeline.
    init_unknown : int
        Bitmask of the slots unknown at the start (inherited by a bundle).
    final_row : bool
        Append one row for the state at the end of the stream.
    pipe_decl : int64[P]
        The declaration of each pipeline value (``val`` of a pipeline setter indexes it).
    pcompact : int64[n_decls]
        Per declaration, its row of the pipeline masks (the no-pipeline row for others).

    Returns
    -------
    setter : int32[O, n_slots]
    unknown : int64[O]
    prev : int64[N]
        For each set: the setter of its slot just before it (-1 undefined, -3 unknown);
        -2 for commands that set nothing.
    obs : int64[O]
        Each observer's command (-1: the final row).
    kind : uint8[O]
        0 draw, 1 dispatch, 2 opaque command, 3 the final row.
    epoch : int64[O]
        The opaque commands strictly before each observer.
    pipe : int64[O]
        The pipeline declaration at each observer (-1 undefined, -3 unknown).
    pidx : int64[O]
        ``pcompact[pipe]``, the no-pipeline row where ``pipe`` is a marker.
    """
    code = np.ascontiguousarray(code, dtype=np.int64)
    slot = np.ascontiguousarray(slot, dtype=np.int64)
    val = np.ascontiguousarray(val, dtype=np.int64)
    is_table = np.ascontiguousarray(is_table, dtype=np.uint8)
    layout = np.ascontiguousarray(layout, dtype=np.int64)
    cdef const int64_t[::1] pd = np.ascontiguousarray(pipe_decl, dtype=np.int64)
    cdef const int64_t[::1] pc = np.ascontiguousarray(pcompact, dtype=np.int64)
    if layout.shape[0] != 10 or not 0 < layout[0] <= MAX_SLOTS or not 0 <= layout[8] < layout[0]:
        raise ValueError("bad layout")
    n = code.shape[0]
    if not (slot.shape[0] == val.shape[0] == is_table.shape[0] == n):
        raise ValueError("code, slot, val and is_table must have the same length")
    if pc.shape[0] < 1:
        raise ValueError("pcompact needs an entry")
    nobs = int(np.count_nonzero(code >= K_DRAW)) + (1 if final_row else 0)
    if n >= (1 << 31) - 1:
        raise ValueError("too many commands for int32 setters")
    setter = np.empty((nobs, int(layout[0])), dtype=np.int32)
    unknown = np.empty(nobs, dtype=np.int64)
    prev = np.full(n, -2, dtype=np.int64)
    obs = np.empty(nobs, dtype=np.int64)
    kind = np.empty(nobs, dtype=np.uint8)
    epoch = np.empty(nobs, dtype=np.int64)
    pipe = np.empty(nobs, dtype=np.int64)
    pidx = np.empty(nobs, dtype=np.int64)
    if _scan(code, slot, val, is_table, layout, init_unknown, final_row, pd, pc,
             setter, unknown, prev, obs, kind, epoch, pipe, pidx) < 0:
        raise IndexError("a pipeline setter's value is outside pipe_decl, or its declaration outside pcompact")
    return setter, unknown, prev, obs, kind, epoch, pipe, pidx


cdef struct _ObsOut:
    # the observer outputs of :func:`scan` (raw pointers: no memoryview passed per observer)
    int32_t* setter
    int64_t* unknown
    int64_t* obs
    uint8_t* kind
    int64_t* epoch
    int64_t* pipe
    int64_t* pidx
    const int64_t* pc
    Py_ssize_t npc


cdef inline int _observer(_ObsOut* out, Py_ssize_t o, Py_ssize_t i, uint8_t kd, int64_t nopq, const int64_t* cur,
                          int64_t unk, Py_ssize_t ns, Py_ssize_t ps, int64_t d, int64_t pnone) noexcept nogil:
    """Row ``o`` of the observer outputs of :func:`scan` (the observer at command ``i``; ``d`` the
    declaration the pipeline's setter names); -1 for a declaration outside ``pc``."""
    cdef Py_ssize_t s
    cdef int32_t* row = out.setter + o * ns
    for s in range(ns):
        row[s] = <int32_t>cur[s]
    out.unknown[o] = unk
    out.obs[o] = i
    out.kind[o] = kd
    out.epoch[o] = nopq
    if (unk >> ps) & 1:
        out.pipe[o] = -3
        out.pidx[o] = pnone
    elif cur[ps] >= 0:
        if d < 0 or d >= out.npc:
            return -1
        out.pipe[o] = d
        out.pidx[o] = out.pc[d]
    else:
        out.pipe[o] = -1
        out.pidx[o] = pnone
    return 0


cdef int _scan(const int64_t[::1] code, const int64_t[::1] slot, const int64_t[::1] val,
               const uint8_t[::1] is_table, const int64_t[::1] layout, int64_t init_unknown,
               bint final_row, const int64_t[::1] pd, const int64_t[::1] pc, int32_t[:, ::1] setter,
               int64_t[::1] unknown, int64_t[::1] prev, int64_t[::1] obs, uint8_t[::1] kind,
               int64_t[::1] epoch, int64_t[::1] pipe, int64_t[::1] pidx) noexcept nogil:
    cdef:
        Py_ssize_t n = code.shape[0]
        Py_ssize_t i, o = 0, s, r, k, lo
        int64_t ns = layout[0], heaps = layout[1], grs = layout[2], crs = layout[3]
        int64_t ib = layout[4], root0 = layout[5], croot0 = layout[6], nroot = layout[7]
        Py_ssize_t ps = layout[8]
        int64_t pnone = layout[9]
        int64_t cur[MAX_SLOTS]
        int64_t unk = init_unknown, nopq = 0, pdecl = -1
        int64_t allbits = ((<int64_t>1) << ns) - 1
        int64_t c, p, bit, curv, rb
        uint8_t kd
        Py_ssize_t[2] roots
        _ObsOut out
    out.setter = &setter[0, 0] if setter.shape[0] else NULL
    out.unknown = &unknown[0] if unknown.shape[0] else NULL
    out.obs = &obs[0] if obs.shape[0] else NULL
    out.kind = &kind[0] if kind.shape[0] else NULL
    out.epoch = &epoch[0] if epoch.shape[0] else NULL
    out.pipe = &pipe[0] if pipe.shape[0] else NULL
    out.pidx = &pidx[0] if pidx.shape[0] else NULL
    out.pc = &pc[0]
    out.npc = pc.shape[0]
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
            if s == ps:  # its declaration, from the value (no read of the command's arguments)
                if val[i] < 0 or val[i] >= pd.shape[0]:
                    return -1
                pdecl = pd[val[i]]
            unk &= ~bit
        else:
            kd = 1 if c == K_DISPATCH else (2 if c == K_OPAQUE else 0)
            if _observer(&out, o, i, kd, nopq, &cur[0], unk, ns, ps, pdecl, pnone) < 0:
                return -1
            o += 1
            if c == K_DRAWX:
                cur[ib] = -1
                unk &= ~((<int64_t>1) << ib)
            elif c == K_OPAQUE:
                for s in range(ns):
                    cur[s] = -1
                unk = allbits
                nopq += 1
    if final_row:
        if _observer(&out, o, -1, 3, nopq, &cur[0], unk, ns, ps, pdecl, pnone) < 0:
            return -1
    return 0


def fill_chains(start, init, owner, col, wv, Py_ssize_t width):
    """The words of a merge slot after each of its ``m`` set commands: ``int64[m, width]``.

    ``start[r]``: command ``r`` starts a chain (every word becomes ``init[r]``: -1 undefined,
    -3 unknown); then its writes apply, ``wv[k]`` to word ``col[k]`` for each ``k`` with
    ``owner[k] == r`` (``owner`` non-decreasing; a later write of a word wins). Identical
    to ``drawopt.analysis.state._Chains.fill``.
    """
    cdef const uint8_t[::1] st = np.ascontiguousarray(start, dtype=np.uint8)
    cdef const int64_t[::1] ini = np.ascontiguousarray(init, dtype=np.int64)
    cdef const int64_t[::1] ow = np.ascontiguousarray(owner, dtype=np.int64)
    cdef const int64_t[::1] cl = np.ascontiguousarray(col, dtype=np.int64)
    cdef const int64_t[::1] v = np.ascontiguousarray(wv, dtype=np.int64)
    cdef Py_ssize_t m = st.shape[0], nw = ow.shape[0], r, j, k = 0
    if ini.shape[0] != m or cl.shape[0] != nw or v.shape[0] != nw or width < 1:
        raise ValueError("start/init and owner/col/wv must have matching lengths, width >= 1")
    for k in range(nw):
        if ow[k] < 0 or ow[k] >= m or (k and ow[k] < ow[k - 1]) or cl[k] < 0 or cl[k] >= width:
            raise ValueError("owner must be non-decreasing in 0..m-1 and col in 0..width-1")
    out = np.empty((m, width), dtype=np.int64)
    cdef int64_t[:, ::1] o = out
    cdef int64_t[::1] cur = np.full(width, -1, dtype=np.int64)
    k = 0
    with nogil:
        for r in range(m):
            if st[r] or r == 0:  # (the first command starts a chain whatever ``start`` says)
                for j in range(width):
                    cur[j] = ini[r]
            while k < nw and ow[k] == r:
                cur[cl[k]] = v[k]
                k += 1
            for j in range(width):
                o[r, j] = cur[j]
    return out


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


# ---------------------------------------------------------------------- interning
ctypedef fused introw:
    int32_t
    int64_t


cdef inline uint64_t _fmix(uint64_t h) noexcept nogil:
    h ^= h >> 30
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 27
    h *= 0x94D049BB133111EBULL
    h ^= h >> 31
    return h


cdef inline uint64_t _slot_term(Py_ssize_t s, int64_t v) noexcept nogil:
    """Slot ``s``'s term of a row hash that is a sum over the slots (updated slot by slot)."""
    return _fmix(<uint64_t>v * 0x9E3779B97F4A7C15ULL + <uint64_t>s * 0xD6E8FEB86659FD93ULL + 1)


cdef inline uint64_t _row_hash(const int64_t* x, Py_ssize_t k) noexcept nogil:
    """Hash of a row for the interning tables: two multiply-xor lanes (each step a bijection
    of the lane, so rows differing in one column never collide), mixed at the end. Only
    the table's probe order depends on it, never an id."""
    cdef uint64_t a = 0x243F6A8885A308D3ULL, b = 0x13198A2E03707344ULL
    cdef Py_ssize_t j = 0
    while j + 1 < k:
        a = (a ^ <uint64_t>x[j]) * 0x9E3779B97F4A7C15ULL
        b = (b ^ <uint64_t>x[j + 1]) * 0xC2B2AE3D27D4EB4FULL
        j += 2
    if j < k:
        a = (a ^ <uint64_t>x[j]) * 0x9E3779B97F4A7C15ULL
    return _fmix(a ^ _fmix(b + <uint64_t>k))


cdef inline uint64_t _row_hash32(const int32_t* x, Py_ssize_t k) noexcept nogil:
    """:func:`_row_hash` of an int32 row (the same values give the same hash)."""
    cdef uint64_t a = 0x243F6A8885A308D3ULL, b = 0x13198A2E03707344ULL
    cdef Py_ssize_t j = 0
    while j + 1 < k:
        a = (a ^ <uint64_t>(<int64_t>x[j])) * 0x9E3779B97F4A7C15ULL
        b = (b ^ <uint64_t>(<int64_t>x[j + 1])) * 0xC2B2AE3D27D4EB4FULL
        j += 2
    if j < k:
        a = (a ^ <uint64_t>(<int64_t>x[j])) * 0x9E3779B97F4A7C15ULL
    return _fmix(a ^ _fmix(b + <uint64_t>k))


cdef inline Py_ssize_t _table_size(Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t size = 16
    while size < 2 * n:
        size <<= 1
    return size


cdef inline uint64_t _find_tagged(const uint64_t[::1] table, const int64_t* eps, const introw[:, ::1] rows,
                                  const int64_t* rep, const introw* key, Py_ssize_t ns, Py_ssize_t skip, uint64_t h,
                                  int64_t e) noexcept nogil:
    """:func:`_find_row` for a table whose entries hold the id plus one (0: empty) in the low 32
    bits and the high 32 bits of the key's hash ``h`` in the high ones (no array of hashes to
    read on a probe), and keys that are a row of ``ns`` words (word ``skip`` not compared; -1:
    none) plus, where ``eps`` is not NULL, an epoch ``e``: id ``u``'s key is row ``rep[u]`` of
    ``rows`` (``u`` itself where ``rep`` is NULL) and epoch ``eps[u]``. ``rows`` and ``key`` are
    both int32 or both int64."""
    cdef uint64_t b = h & <uint64_t>(table.shape[0] - 1), t, tag = h & 0xFFFFFFFF00000000ULL
    cdef Py_ssize_t u, j
    cdef const introw* rp
    cdef bint eq
    while True:
        t = table[b]
        if t == 0:
            return b
        if (t & 0xFFFFFFFF00000000ULL) == tag:
            u = <Py_ssize_t>(t & 0xFFFFFFFFULL) - 1
            if eps == NULL or eps[u] == e:
                rp = &rows[rep[u] if rep != NULL else u, 0]
                eq = True
                for j in range(ns):
                    if j != skip and rp[j] != key[j]:
                        eq = False
                        break
                if eq:
                    return b
        b = (b + 1) & <uint64_t>(table.shape[0] - 1)


cdef inline uint64_t _find_row(const int32_t[::1] table, const uint64_t[::1] hv, const int64_t[:, ::1] rows,
                               const int64_t* key, Py_ssize_t w, uint64_t h) noexcept nogil:
    """The slot of open-addressing ``table`` (ids into ``rows``, with hashes ``hv``) holding the id
    of the row equal to the first ``w`` words of ``key`` (hash ``h``), or the empty slot (-1)
    where it would go."""
    cdef uint64_t b = h & <uint64_t>(table.shape[0] - 1)
    cdef int32_t u
    cdef Py_ssize_t j
    cdef bint eq
    while True:
        u = table[b]
        if u < 0:
            return b
        if hv[u] == h:
            eq = True
            for j in range(w):
                if rows[u, j] != key[j]:
                    eq = False
                    break
            if eq:
                return b
        b = (b + 1) & <uint64_t>(table.shape[0] - 1)


cdef inline uint64_t _introw_hash(const introw[:, ::1] m, Py_ssize_t i, Py_ssize_t k) noexcept nogil:
    if introw is int32_t:
        return _row_hash32(&m[i, 0], k)
    else:
        return _row_hash(&m[i, 0], k)


cdef Py_ssize_t _intern(const introw[:, ::1] m, int64_t[::1] ids, int64_t[::1] first, uint64_t[::1] hu,
                        int32_t[::1] table, Py_ssize_t* pi, Py_ssize_t nu) noexcept nogil:
    """Ids of the rows of ``m`` in order of first appearance, from row ``pi[0]`` with ``nu`` ids
    given; returns the number of ids. Stops (``pi[0]`` the row to do next) when the table
    would be more than half full."""
    cdef:
        Py_ssize_t i, j, r, n = m.shape[0], k = m.shape[1]
        uint64_t h, b, mask = <uint64_t>(table.shape[0] - 1)
        uint64_t rh[RING]  # the hashes of the next rows, their table slots prefetched
        int32_t u
        bint eq
    for i in range(pi[0], min(pi[0] + RING - 1, n)):
        rh[i % RING] = _introw_hash(m, i, k)
        __builtin_prefetch(&table[rh[i % RING] & mask])
    for i in range(pi[0], n):
        j = i + RING - 1
        if j < n:
            rh[j % RING] = _introw_hash(m, j, k)
            __builtin_prefetch(&table[rh[j % RING] & mask])
        h = rh[i % RING]
        b = h & mask
        while True:
            u = table[b]
            if u < 0:
                if 2 * (nu + 1) > table.shape[0]:
                    pi[0] = i
                    return nu
                table[b] = <int32_t>nu
                first[nu] = i
                hu[nu] = h
                ids[i] = nu
                nu += 1
                break
            if hu[u] == h:
                r = first[u]
                eq = True
                for j in range(k):
                    if m[r, j] != m[i, j]:
                        eq = False
                        break
                if eq:
                    ids[i] = u
                    break
            b = (b + 1) & mask
    pi[0] = n
    return nu


cdef Py_ssize_t _intern_direct(const introw[:, ::1] m, int64_t[::1] ids, int64_t[::1] first, int64_t lo,
                               int32_t[::1] table) noexcept nogil:
    """:func:`_intern` of one column whose values lie in ``lo .. lo + len(table) - 1``."""
    cdef Py_ssize_t i, n = m.shape[0], nu = 0
    cdef int64_t v
    cdef int32_t u
    for i in range(n):
        v = <int64_t>m[i, 0] - lo
        u = table[v]
        if u < 0:
            u = <int32_t>nu
            table[v] = u
            first[nu] = i
            nu += 1
        ids[i] = u
    return nu


def intern_rows(mat):
    """Intern the rows of an integer matrix: ``(ids int64[M], first int64[U])``, ids in order of
    first appearance, ``first[u]`` the first row of id ``u`` (identical to
    ``drawopt.analysis.state._intern_rows_py``)."""
    m = np.asarray(mat)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2:
        raise ValueError("intern_rows needs a matrix")
    if m.dtype != np.int32:
        m = np.ascontiguousarray(m, dtype=np.int64)
    else:
        m = np.ascontiguousarray(m)
    n = m.shape[0]
    if n >= (1 << 31) - 1:
        raise ValueError("too many rows")
    ids = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    cdef Py_ssize_t nu
    if m.shape[1] == 1 and n:
        lo, hi = int(m.min()), int(m.max())
        if hi - lo < max(2 * n, 1 << 16):  # a small range (value ids, ranks): a direct table
            if m.dtype == np.int32:
                nu = _intern_direct[int32_t](m, ids, first, lo, np.full(hi - lo + 1, -1, dtype=np.int32))
            else:
                nu = _intern_direct[int64_t](m, ids, first, lo, np.full(hi - lo + 1, -1, dtype=np.int32))
            return ids, first[:nu].copy()
    hu = np.empty(n, dtype=np.uint64)
    # the table grows with the ids (from one that fits a cache level): few distinct rows among
    # many would otherwise probe a table sized for every row
    table = np.full(_table_size(min(n, max(1024, n >> 4))), -1, dtype=np.int32)
    cdef Py_ssize_t at = 0
    nu = 0
    while True:
        if m.dtype == np.int32:
            nu = _intern[int32_t](m, ids, first, hu, table, &at, nu)
        else:
            nu = _intern[int64_t](m, ids, first, hu, table, &at, nu)
        if at >= n:
            break
        table = _regrow(hu, nu, 2 * table.shape[0])
    return ids, first[:nu].copy()


cdef _regrow(const uint64_t[::1] hu, Py_ssize_t nu, Py_ssize_t size):
    """A table of ``size`` slots (a power of two) holding ids ``0 .. nu - 1`` by their hashes."""
    table = np.full(size, -1, dtype=np.int32)
    cdef int32_t[::1] tv = table
    cdef Py_ssize_t u
    cdef uint64_t b, mask = <uint64_t>(size - 1)
    with nogil:
        for u in range(nu):
            b = hu[u] & mask
            while tv[b] >= 0:
                b = (b + 1) & mask
            tv[b] = <int32_t>u
    return table


# ---------------------------------------------------------------------- observer rows
@cython.final
cdef class _Rows:
    """The scan's per-observer facts a row is built from (checked once), and the row builder."""

    cdef const int32_t[:, ::1] setter
    cdef const int64_t[::1] unknown
    cdef const int64_t[::1] cval
    cdef const int64_t[::1] init_val
    cdef const int64_t[::1] readbits
    cdef const uint8_t[::1] partial
    cdef Py_ssize_t ns, nobs
    cdef int64_t masked, unknown_marker

    def __init__(self, setter, unknown, cval, init_val, readbits, partial, int64_t masked,
                 int64_t unknown_marker):
        self.setter = np.ascontiguousarray(setter, dtype=np.int32)
        self.unknown = np.ascontiguousarray(unknown, dtype=np.int64)
        self.cval = np.ascontiguousarray(cval, dtype=np.int64)
        self.init_val = np.ascontiguousarray(init_val, dtype=np.int64)
        self.readbits = np.ascontiguousarray(readbits, dtype=np.int64)
        self.partial = np.ascontiguousarray(partial, dtype=np.uint8)
        self.ns = self.setter.shape[1]
        self.nobs = self.setter.shape[0]
        self.masked = masked
        self.unknown_marker = unknown_marker
        if self.ns > MAX_SLOTS:
            raise ValueError("too many slots")
        if self.init_val.shape[0] != self.ns or self.unknown.shape[0] != self.nobs \
                or self.readbits.shape[0] != self.nobs:
            raise ValueError("setter, unknown, init_val and readbits disagree")

    cdef check(self, const int64_t[::1] ix):
        cdef Py_ssize_t i
        for i in range(ix.shape[0]):
            if ix[i] < 0 or ix[i] >= self.nobs:
                raise IndexError(f"observer {ix[i]} out of range")

    cdef inline int is_unk(self, int64_t v) noexcept nogil:
        """1 if value ``v`` (or the marker) is unknown or partly unknown, else 0."""
        return 1 if v == self.unknown_marker or (v >= 0 and v < self.partial.shape[0] and self.partial[v]) else 0

    cdef inline int row(self, Py_ssize_t o, int64_t* out) noexcept nogil:
        """Normalised row of observer ``o`` into ``out``; 1 if it holds an unknown or partly
        unknown value, 0 if not, -1 for a setter outside ``cval``."""
        cdef:
            Py_ssize_t s
            int64_t rb = self.readbits[o], unk = self.unknown[o], st, v
            int has_unk = 0
        for s in range(self.ns):
            if not (rb >> s) & 1:
                out[s] = self.masked
                continue
            if (unk >> s) & 1:
                out[s] = self.unknown_marker
                has_unk = 1
                continue
            st = self.setter[o, s]
            if st >= self.cval.shape[0]:
                return -1
            v = self.cval[st] if st >= 0 else self.init_val[s]
            out[s] = v
            if v >= 0 and v < self.partial.shape[0] and self.partial[v]:
                has_unk = 1
        return has_unk


def observer_rows(setter, unknown, cval, init_val, readbits, sel, int64_t masked, int64_t unknown_marker):
    """Value rows of observers ``sel``: ``int64[k, n_slots]``; a slot whose bit is clear in
    ``readbits[o]`` is ``masked``, an unknown one (bit set in ``unknown[o]``) ``unknown_marker``,
    else the value its setter left (``cval[setter]``) or ``init_val`` without a setter
    (identical to ``drawopt.analysis.state.Scan._rows_py``)."""
    cdef _Rows R = _Rows(setter, unknown, cval, init_val, readbits, np.zeros(0, np.uint8), masked, unknown_marker)
    cdef const int64_t[::1] ix = np.ascontiguousarray(sel, dtype=np.int64)
    R.check(ix)
    cdef Py_ssize_t i, k = ix.shape[0]
    out = np.empty((k, R.ns), dtype=np.int64)
    if k == 0:
        return out
    cdef int64_t[:, ::1] o = out
    cdef int bad = 0
    with nogil:
        for i in range(k):
            if R.row(ix[i], &o[i, 0]) < 0:
                bad = 1
                break
    if bad:
        raise IndexError("a setter is outside cval")
    return out


def intern_observers(setter, unknown, cval, init_val, readbits, epoch, partial, sel, int64_t masked,
                     int64_t unknown_marker, Py_ssize_t pack_slot=-1):
    """Intern the keys of observers ``sel``: each its :func:`observer_rows` row plus an epoch
    (``epoch[o]`` when the row holds an unknown value or a partly unknown one, ``partial[v]``
    set; else -1). Returns ``(ids int64[k], first int64[U], rows int32[U, n_slots],
    epochs int64[U])``: ids in order of first appearance, ``first`` the position in ``sel``
    of each id's first observer, ``rows`` and ``epochs`` each id's key (identical to
    ``drawopt.analysis.state._intern_observers_py``).

    With ``pack_slot`` (a slot index), a fifth array ``pack int64[U]``: each id's *pack class*,
    its key with slot ``pack_slot`` masked and the epoch kept only where the rest of the row
    holds an unknown or partly unknown value, interned over the ids in id order (identical
    to ``drawopt.analysis.state._pack_classes_py``)."""
    cdef _Rows R = _Rows(setter, unknown, cval, init_val, readbits, partial, masked, unknown_marker)
    cdef const int64_t[::1] ep = np.ascontiguousarray(epoch, dtype=np.int64)
    cdef const int64_t[::1] ix = np.ascontiguousarray(sel, dtype=np.int64)
    if ep.shape[0] != R.nobs:
        raise ValueError("epoch must have one entry per observer")
    R.check(ix)
    if ix.shape[0] >= (1 << 31) - 1:
        raise ValueError("too many observers")
    # the rows are int32: the markers, and every value id read into a row (checked where it is read), must fit
    if masked != <int32_t>masked or unknown_marker != <int32_t>unknown_marker:
        raise ValueError("the markers do not fit in 32 bits")
    cdef Py_ssize_t i, j, k = ix.shape[0], ns = R.ns, nu = 0
    ids = np.empty(k, dtype=np.int64)
    first = np.empty(k, dtype=np.int64)
    # room for every row; the pages past the distinct ones are never touched (views returned)
    rows = np.empty((k, ns), dtype=np.int32)
    epochs = np.empty(k, dtype=np.int64)
    cdef int64_t[::1] idv = ids
    cdef int64_t[::1] fv = first
    cdef uint64_t[::1] tv = np.zeros(_table_size(k), dtype=np.uint64)
    cdef int32_t[:, ::1] rv = rows
    cdef int64_t[::1] ev = epochs
    cdef uint64_t h, b, tmask = <uint64_t>(tv.shape[0] - 1)
    cdef int64_t u
    cdef int flag = 0
    cdef bint packing = pack_slot >= 0
    if pack_slot >= ns:
        raise ValueError("pack_slot is not a slot")
    pack = np.empty(k if packing else 0, dtype=np.int64)
    cdef int64_t[::1] pv = pack
    # per pack class: the state whose key it is (its row read with the slot masked) and its epoch
    cdef int64_t[::1] prep = np.empty(k if packing else 0, dtype=np.int64)
    cdef int64_t[::1] pep = np.empty(k if packing else 0, dtype=np.int64)
    cdef uint64_t[::1] ptv = np.zeros(_table_size(k) if packing else 1, dtype=np.uint64)
    cdef uint64_t pmask = <uint64_t>(ptv.shape[0] - 1)
    cdef Py_ssize_t npk = 0
    # The key of each observer is built from the previous one's: only the slots whose setter,
    # read bit or unknown bit changed are read again. The row hash is a sum of one term per
    # slot (updated with the slot), mixed with the epoch; it only orders the probes.
    # The keys go through a ring of RING entries: the key of observer i is built (and its
    # table slots prefetched) RING - 1 observers before it is looked up, so the lookups,
    # done in observer order as before, rarely wait for memory. An observer whose key is
    # its predecessor's takes its id without a lookup.
    cdef int32_t cur[MAX_SLOTS]
    cdef int32_t ring[RING][MAX_SLOTS]
    cdef uint64_t rh[RING]
    cdef uint64_t rhp[RING]
    cdef int64_t re[RING]
    cdef int64_t rpe[RING]
    cdef bint rsame[RING]
    cdef uint64_t term[MAX_SLOTS]
    cdef uint64_t hsum = 0, hp
    cdef int nunk = 0, punk_n
    cdef int64_t rb, unk, prb = 0, punk = 0, chg, st, v, ekey = -1, pe, pekey = -2
    cdef Py_ssize_t o, po = -1, s, q
    cdef const int32_t* so
    cdef const int32_t* sp = NULL
    cdef const int32_t* key
    cdef uint64_t todo, allbits = (<uint64_t>1) << ns
    cdef bint changed
    allbits -= 1
    with nogil:
        for i in range(k + RING - 1):
            if i < k:  # build observer i's key into the ring
                o = ix[i]
                rb = R.readbits[o]
                unk = R.unknown[o]
                so = &R.setter[o, 0]
                chg = -1 if po < 0 else (rb ^ prb) | (unk ^ punk)
                changed = po < 0
                # a slot masked here and at the previous observer stays masked: only the slots read
                # now, or whose read or unknown bit changed, are looked at
                todo = <uint64_t>((rb | chg) & allbits)
                while todo:
                    s = __builtin_ctzll(todo)
                    todo &= todo - 1
                    if not ((chg >> s) & 1) and so[s] == sp[s]:
                        continue
                    if not (rb >> s) & 1:
                        v = masked
                    elif (unk >> s) & 1:
                        v = unknown_marker
                    else:
                        st = so[s]
                        if st >= R.cval.shape[0]:
                            flag = -1
                            break
                        v = R.cval[st] if st >= 0 else R.init_val[s]
                        if v != <int32_t>v or v == INT32_MAX:   # (as the pure twin: below 2**31 - 1)
                            flag = -2
                            break
                    if po >= 0:
                        if v == cur[s]:
                            continue
                        hsum -= term[s]
                        nunk -= R.is_unk(cur[s])
                    cur[s] = <int32_t>v
                    term[s] = _slot_term(s, v)
                    hsum += term[s]
                    nunk += R.is_unk(v)
                    changed = True
                if flag < 0:
                    break
                po, prb, punk, sp = o, rb, unk, so
                pekey = ekey
                ekey = ep[o] if nunk else -1
                q = i % RING
                rsame[q] = not changed and ekey == pekey
                if not rsame[q]:
                    memcpy(&ring[q][0], &cur[0], ns * sizeof(int32_t))
                    h = _fmix(hsum ^ _fmix(<uint64_t>ekey + 0x2545F4914F6CDD1DULL))
                    rh[q] = h
                    re[q] = ekey
                    __builtin_prefetch(&tv[h & tmask])
                    if packing:  # its pack class's key: the slot masked, the epoch where unknowns stay
                        punk_n = nunk - R.is_unk(cur[pack_slot])
                        pe = ekey if punk_n else -1
                        hp = hsum - term[pack_slot] + _slot_term(pack_slot, masked)
                        hp = _fmix(hp ^ _fmix(<uint64_t>pe + 0x2545F4914F6CDD1DULL))
                        rhp[q] = hp
                        rpe[q] = pe
                        __builtin_prefetch(&ptv[hp & pmask])
            j = i - (RING - 1)
            if j < 0:
                continue
            q = j % RING  # look observer j up
            if rsame[q]:
                idv[j] = idv[j - 1]
                continue
            key = &ring[q][0]
            h = rh[q]
            b = _find_tagged(tv, &ev[0], rv, NULL, key, ns, -1, h, re[q])
            if tv[b]:
                idv[j] = <int64_t>(tv[b] & 0xFFFFFFFFULL) - 1
                continue
            tv[b] = (h & 0xFFFFFFFF00000000ULL) | <uint64_t>(nu + 1)
            fv[nu] = j
            memcpy(&rv[nu, 0], key, ns * sizeof(int32_t))
            ev[nu] = re[q]
            idv[j] = nu
            if packing:  # the new state's pack class
                hp = rhp[q]
                b = _find_tagged(ptv, &pep[0], rv, &prep[0], key, ns, pack_slot, hp, rpe[q])
                if ptv[b]:
                    u = <int64_t>(ptv[b] & 0xFFFFFFFFULL) - 1
                else:
                    u = npk
                    ptv[b] = (hp & 0xFFFFFFFF00000000ULL) | <uint64_t>(npk + 1)
                    prep[npk] = nu
                    pep[npk] = rpe[q]
                    npk += 1
                pv[nu] = u
            nu += 1
    if flag == -2:
        raise ValueError("a value id does not fit in 32 bits")
    if flag < 0:
        raise IndexError("a setter is outside cval")
    # the distinct rows as arrays of their own: a view would keep every observer's room alive
    # with the table (a third of ``rows`` at 1M draws); resized in place, the tail goes back
    rv = None
    fv = None
    ev = None
    pv = None
    rows = _shrink(rows, nu)
    if packing:
        return ids, _shrink(first, nu), rows, _shrink(epochs, nu), _shrink(pack, nu)
    return ids, _shrink(first, nu), rows, _shrink(epochs, nu)


cdef object _shrink(object a, Py_ssize_t n):
    """``a[:n]``, ``a`` resized in place (``realloc``: the tail is freed, no copy). ``a`` must
    own its data and export no buffer."""
    if n != a.shape[0]:
        a.resize((n,) + a.shape[1:], refcheck=False)
    return a


cdef inline Py_ssize_t _at(int64_t v, Py_ssize_t n) noexcept nogil:
    """Index of value ``v`` in a map of length ``n`` whose last three entries stand for the
    markers -3, -2, -1 (numpy's negative indexing); -1 when outside."""
    if v >= 0:
        return v if v < n - 3 else -1
    return n + v if v >= -3 else -1


# ---------------------------------------------------------------------- observed setters
def observed_setters(setter, readbits, partbits, int64_t rootbits, Py_ssize_t n):
    """Which setters observers read: ``(observed uint8[n], full uint8[n], reset_obs int64[R],
    reset_slot int64[R])``.

    ``observed[c]``: command ``c`` is ``setter[o, s]`` for an observer ``o`` whose
    ``readbits[o]`` has bit ``s``; ``full[c]``: so for a slot whose bit is clear in
    ``partbits[o]`` (read whole); ``(reset_obs[r], reset_slot[r])``: the observers and slots
    of ``rootbits`` read with no setter, observer by observer, slots in order (identical to
    ``drawopt.analysis.state._observed_setters_py``)."""
    cdef const int32_t[:, ::1] st = np.ascontiguousarray(setter, dtype=np.int32)
    cdef const int64_t[::1] rbits = np.ascontiguousarray(readbits, dtype=np.int64)
    cdef const int64_t[::1] pbits = np.ascontiguousarray(partbits, dtype=np.int64)
    cdef Py_ssize_t nobs = st.shape[0], ns = st.shape[1], o, s, nr = 0, r
    if ns > MAX_SLOTS or rbits.shape[0] != nobs or pbits.shape[0] != nobs:
        raise ValueError("setter, readbits and partbits disagree")
    observed = np.zeros(n, dtype=np.uint8)
    full = np.zeros(n, dtype=np.uint8)
    reset = np.zeros(nobs, dtype=np.int64)
    cdef uint8_t[::1] ov = observed
    cdef uint8_t[::1] fv = full
    cdef int64_t[::1] rv = reset
    cdef int64_t rb, pb, c, rr, prb = 0, ppb = 0
    cdef uint64_t todo
    cdef const int32_t* so
    cdef const int32_t* sp = NULL
    cdef bint bad = False
    with nogil:
        for o in range(nobs):
            rb = rbits[o]
            pb = pbits[o]
            so = &st[o, 0]
            rr = 0
            todo = <uint64_t>rb & ((<uint64_t>1 << ns) - 1)
            while todo:  # the slots read
                s = __builtin_ctzll(todo)
                todo &= todo - 1
                c = so[s]
                if c >= 0:
                    # the previous observer read the same setter, and as whole if this one does
                    if sp != NULL and sp[s] == c and (prb >> s) & 1 and ((pb >> s) & 1 or not (ppb >> s) & 1):
                        continue
                    if c >= n:
                        bad = True
                        break
                    ov[c] = 1
                    if not (pb >> s) & 1:
                        fv[c] = 1
                elif c == -1 and (rootbits >> s) & 1:
                    rr |= (<int64_t>1) << s
                    nr += 1
            rv[o] = rr
            if bad:
                break
            sp, prb, ppb = so, rb, pb
    if bad:
        raise IndexError("a setter is outside 0..n-1")
    reset_obs = np.empty(nr, dtype=np.int64)
    reset_slot = np.empty(nr, dtype=np.int64)
    cdef int64_t[::1] ro = reset_obs
    cdef int64_t[::1] rs = reset_slot
    r = 0
    with nogil:
        for o in range(nobs):
            rr = rv[o]
            s = 0
            while rr:
                if rr & 1:
                    ro[r] = o
                    rs[r] = s
                    r += 1
                rr >>= 1
                s += 1
    return observed, full, reset_obs, reset_slot


# ---------------------------------------------------------------------- merge-slot chains
def const_writes(cmds, args, var_off, var_len, pool):
    """The word writes of root-constants commands ``cmds`` (one slot, in stream order):
    ``(owner int64[W], col int64[W], wv int64[W], width)``, or None when some command's
    ``count`` (``args[c, 1]``) is not its number of values (``var_len[c]``).

    ``owner[k]`` is the position in ``cmds`` of write ``k``, ``col[k]`` its word
    (``dest + j``, ``dest = args[c, 2]``), ``wv[k]`` the value (``pool[var_off[c] + j]``);
    ``width`` is ``max(dest + count)`` (at least 1). Identical to the numpy lines of
    ``drawopt.analysis.state.scan`` it replaces.
    """
    cdef const int64_t[::1] c = np.ascontiguousarray(cmds, dtype=np.int64)
    cdef const int64_t[:, ::1] a = np.ascontiguousarray(args, dtype=np.int64)
    cdef const int64_t[::1] off = np.ascontiguousarray(var_off, dtype=np.int64)
    cdef const int32_t[::1] ln = np.ascontiguousarray(var_len, dtype=np.int32)
    cdef const int64_t[::1] pl = np.ascontiguousarray(pool, dtype=np.int64)
    cdef Py_ssize_t m = c.shape[0], n = a.shape[0], i, j, k = 0, total = 0
    cdef int64_t ci, cnt, dest, width = 1, o
    if a.shape[1] < 3 or off.shape[0] != n or ln.shape[0] != n:
        raise ValueError("args needs 3 columns; var_off and var_len one entry per command")
    for i in range(m):
        ci = c[i]
        if ci < 0 or ci >= n:
            raise IndexError(f"command {ci} out of range")
        cnt = a[ci, 1]
        if cnt != ln[ci]:
            return None
        dest = a[ci, 2]
        if cnt < 0 or dest < 0 or off[ci] < 0 or off[ci] + cnt > pl.shape[0]:
            raise ValueError(f"command {ci}: bad count, dest or values")
        total += cnt
        if dest + cnt > width:
            width = dest + cnt
    owner = np.empty(total, dtype=np.int64)
    col = np.empty(total, dtype=np.int64)
    wv = np.empty(total, dtype=np.int64)
    cdef int64_t[::1] ow = owner
    cdef int64_t[::1] cl = col
    cdef int64_t[::1] v = wv
    with nogil:
        for i in range(m):
            ci = c[i]
            cnt = a[ci, 1]
            dest = a[ci, 2]
            o = off[ci]
            for j in range(cnt):
                ow[k] = i
                cl[k] = dest + j
                v[k] = pl[o + j]
                k += 1
    return owner, col, wv, int(width)


def chain_values(start, init, owner, col, wv, Py_ssize_t width):
    """Intern the value every command of a merge slot's chains leaves: ``(ids int64[m],
    rows int64[U, width + 1])``, ids in order of first appearance.

    The value after command ``r`` is the row of words ``fill_chains`` gives for it plus
    one column: 1 when its chain started from an unknown value (``init`` of the chain's
    first command is -3), else 0. ``rows[u]`` is id ``u``'s row. The words are kept as the
    walk goes (no ``m x width`` matrix). Identical to ``intern_rows`` of those rows
    (``fill_chains`` beside the flag column).
    """
    cdef const uint8_t[::1] st = np.ascontiguousarray(start, dtype=np.uint8)
    cdef const int64_t[::1] ini = np.ascontiguousarray(init, dtype=np.int64)
    cdef const int64_t[::1] ow = np.ascontiguousarray(owner, dtype=np.int64)
    cdef const int64_t[::1] cl = np.ascontiguousarray(col, dtype=np.int64)
    cdef const int64_t[::1] v = np.ascontiguousarray(wv, dtype=np.int64)
    cdef Py_ssize_t m = st.shape[0], nw = ow.shape[0], r, j, k = 0, w = width + 1, nu = 0
    if ini.shape[0] != m or cl.shape[0] != nw or v.shape[0] != nw or width < 1:
        raise ValueError("start/init and owner/col/wv must have matching lengths, width >= 1")
    for k in range(nw):
        if ow[k] < 0 or ow[k] >= m or (k and ow[k] < ow[k - 1]) or cl[k] < 0 or cl[k] >= width:
            raise ValueError("owner must be non-decreasing in 0..m-1 and col in 0..width-1")
    ids = np.empty(m, dtype=np.int64)
    rows = np.empty((m, w), dtype=np.int64)  # pages past the distinct rows are never touched
    cdef int64_t[::1] idv = ids
    cdef int64_t[:, ::1] rv = rows
    cdef uint64_t[::1] tv = np.zeros(_table_size(m), dtype=np.uint64)
    cdef uint64_t tmask = <uint64_t>(tv.shape[0] - 1)
    cdef int64_t[::1] cur = np.full(w, -1, dtype=np.int64)
    # the rows go through a ring, built (and their table slots prefetched) RING - 1 commands
    # before they are looked up, in command order (see intern_observers)
    cdef int64_t[:, ::1] ring = np.empty((RING, w), dtype=np.int64)
    cdef uint64_t rh[RING]
    cdef uint64_t h, b
    cdef Py_ssize_t q
    if m >= (1 << 31) - 1:
        raise ValueError("too many commands")
    k = 0
    with nogil:
        for r in range(m + RING - 1):
            if r < m:
                if st[r] or r == 0:  # (the first command starts a chain whatever ``start`` says)
                    for j in range(width):
                        cur[j] = ini[r]
                    cur[width] = 1 if ini[r] == -3 else 0
                while k < nw and ow[k] == r:
                    cur[cl[k]] = v[k]
                    k += 1
                q = r % RING
                memcpy(&ring[q, 0], &cur[0], w * sizeof(int64_t))
                rh[q] = _row_hash(&cur[0], w)
                __builtin_prefetch(&tv[rh[q] & tmask])
            j = r - (RING - 1)
            if j < 0:
                continue
            q = j % RING
            h = rh[q]
            b = _find_tagged(tv, NULL, rv, NULL, &ring[q, 0], w, -1, h, 0)
            if tv[b]:
                idv[j] = <int64_t>(tv[b] & 0xFFFFFFFFULL) - 1
                continue
            tv[b] = (h & 0xFFFFFFFF00000000ULL) | <uint64_t>(nu + 1)
            memcpy(&rv[nu, 0], &ring[q, 0], w * sizeof(int64_t))
            idv[j] = nu
            nu += 1
    return ids, rows[:nu]


# ---------------------------------------------------------------------- per-command facts
cdef enum:
    R_ARGS = 0    # key: args[c, c0:c0 + w]
    R_HEAPS = 1   # key: two columns, each heap of the list in the column of its type
    R_RTS = 2     # key: the listed targets, then -1 up to 9 columns
    R_GS = 3      # key: args[c, 0:5], all zero when args[c, 0] == 0 (null)
    KEYW = 9      # the widest key


def command_values(op, args, var_off, var_len, pool, heap_type, optab, Py_ssize_t gs_block):
    """Per command: kernel code, slot, descriptor-table flag and the interned key of the value
    it sets; one pass over the stream (``drawopt.analysis.state._command_values_py`` is the
    pure twin, the numpy code the scan used before).

    Parameters
    ----------
    op : uint16[N]
    args, var_off, var_len, pool :
        The stream's columns (``var_len`` int32).
    heap_type : int64[n_decls]
        0 CBV_SRV_UAV heap, 1 SAMPLER heap, -1 not a heap.
    optab : int64[n_opcodes, 8]
        Per opcode: ``(kernel code, fixed slot or -1, root slot base or -1, value block or -1,
        key recipe, first argument column, key width, sets a descriptor table)``.
    gs_block : int
        The block of GSSetParameters: its all-zero key (the driver default) is interned first.

    Returns
    -------
    None when a root parameter index is 16 or more (the caller raises the input error), else
    ``(kcode int64[N], slot int64[N], is_table uint8[N], gid int64[N], ublock int64[U],
    ukeys int64[U, 9])``: ``gid[c]`` the id of command ``c``'s key (-1: sets no value), ids
    in order of first appearance over all blocks, ``ublock``/``ukeys`` each id's block and
    key (zero past the block's width).
    """
    cdef const uint16_t[::1] o = np.ascontiguousarray(op, dtype=np.uint16)
    cdef const int64_t[:, ::1] a = np.ascontiguousarray(args, dtype=np.int64)
    cdef const int64_t[::1] off = np.ascontiguousarray(var_off, dtype=np.int64)
    cdef const int32_t[::1] ln = np.ascontiguousarray(var_len, dtype=np.int32)
    cdef const int64_t[::1] pl = np.ascontiguousarray(pool, dtype=np.int64)
    cdef const int64_t[::1] ht = np.ascontiguousarray(heap_type, dtype=np.int64)
    cdef const int64_t[:, ::1] tab = np.ascontiguousarray(optab, dtype=np.int64)
    cdef Py_ssize_t n = o.shape[0], nop = tab.shape[0], na = a.shape[1], i, j, nkey = 1, nu = 0, w
    cdef int64_t c, blk, rcp, c0, ri, v, hcol
    if a.shape[0] != n or off.shape[0] != n or ln.shape[0] != n or tab.shape[1] != 8:
        raise ValueError("op, args, var_off, var_len disagree, or optab is not n_opcodes x 8")
    for i in range(nop):
        if tab[i, 3] >= 0 and (tab[i, 6] < 1 or tab[i, 6] > KEYW or (tab[i, 4] == R_ARGS and tab[i, 5] + tab[i, 6] > na)
                               or (tab[i, 4] == R_GS and na < 5)):
            raise ValueError(f"optab row {i}: bad key recipe")
    for i in range(n):
        if o[i] >= nop:
            raise IndexError(f"command {i}: opcode {o[i]} out of range")
        if tab[o[i], 3] >= 0:
            nkey += 1
    kcode = np.empty(n, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    is_table = np.empty(n, dtype=np.uint8)
    gid = np.empty(n, dtype=np.int64)
    ukeys = np.zeros((nkey, 1 + KEYW), dtype=np.int64)  # the block, then the key
    cdef int64_t[::1] kc = kcode
    cdef int64_t[::1] sl = slot
    cdef uint8_t[::1] it = is_table
    cdef int64_t[::1] g = gid
    cdef int64_t[:, ::1] uk = ukeys
    cdef uint64_t[::1] hv = np.empty(nkey, dtype=np.uint64)
    # the table grows with the distinct keys (a few thousand in a frame of millions of commands:
    # a table sized for every command would make each probe a cache miss)
    cdef int32_t[::1] tv = np.full(_table_size(min(nkey, 512)), -1, dtype=np.int32)
    cdef int64_t key[KEYW + 1]
    cdef uint64_t h, b
    cdef int32_t u
    cdef bint bad = False, grow = False, rootbad = False
    cdef Py_ssize_t first = -1  # (the GS default key before command 0)
    i = first
    while True:
      with nogil:
        while i < n:
            if i < 0:
                if gs_block < 0:
                    i += 1
                    continue
                blk = gs_block
                w = 5
                for j in range(w + 1):
                    key[j] = 0
                key[0] = blk
            else:
                c = o[i]
                kc[i] = tab[c, 0]
                it[i] = <uint8_t>tab[c, 7]
                if tab[c, 2] >= 0:
                    if a[i, 0] >= 16:
                        rootbad = True
                        break
                    sl[i] = tab[c, 2] + a[i, 0]
                else:
                    sl[i] = tab[c, 1]
                blk = tab[c, 3]
                if blk < 0:
                    g[i] = -1
                    i += 1
                    continue
                rcp = tab[c, 4]
                c0 = tab[c, 5]
                w = tab[c, 6]
                key[0] = blk
                if rcp == R_ARGS:
                    for j in range(w):
                        key[1 + j] = a[i, c0 + j]
                elif rcp == R_GS:
                    for j in range(w):
                        key[1 + j] = a[i, j] if a[i, 0] != 0 else 0
                else:
                    for j in range(w):
                        key[1 + j] = -1
                    if off[i] < 0 or off[i] + ln[i] > pl.shape[0]:
                        bad = True
                        break
                    for j in range(ln[i]):
                        v = pl[off[i] + j]
                        if rcp == R_HEAPS:
                            if v < 0 or v >= ht.shape[0]:
                                bad = True
                                break
                            hcol = ht[v]
                            if hcol < 0:
                                hcol += 2  # (the numpy twin indexes column -1: the last)
                            if hcol < 0 or hcol >= w:
                                bad = True
                                break
                            key[1 + hcol] = v
                        else:
                            if j >= w:
                                bad = True
                                break
                            key[1 + j] = v
                    if bad:
                        break
            h = _row_hash(&key[0], w + 1)
            b = _find_row(tv, hv, uk, &key[0], w + 1, h)  # (the block first: keys of two blocks differ)
            u = tv[b]
            if u < 0:
                if 2 * (nu + 1) > tv.shape[0]:
                    grow = True  # (this command again after the table grew)
                    break
                u = <int32_t>nu
                tv[b] = u
                hv[nu] = h
                for j in range(w + 1):
                    uk[nu, j] = key[j]
                nu += 1
            if i >= 0:
                g[i] = u
            i += 1
      if not grow:
        break
      grow = False
      tv = _regrow(hv, nu, 2 * tv.shape[0])
    if rootbad:
        return None
    if bad:
        for j in range(i + 1, n):  # a root parameter index out of range anywhere answers None first
            if tab[o[j], 2] >= 0 and a[j, 0] >= 16:
                return None
        raise IndexError(f"command {i}: a heap or render-target list out of range")
    return kcode, slot, is_table, gid, ukeys[:nu, 0].copy(), ukeys[:nu, 1:]


def diff_state_rows(rows_a, ia, rows_b, ib, map_a, map_b, int64_t ask_code):
    """Which slots of rows ``rows_b[ib[i]]`` may differ from rows ``rows_a[ia[i]]``: ``int64[k]``
    bitmasks, bit ``s`` set where ``map_a[va] != map_b[vb]`` or ``map_a[va] == ask_code``
    (the maps index markers -3..-1 from their ends, as numpy does). Identical to
    ``drawopt.analysis.state._diff_state_rows_py``; :func:`diff_observers` with the rows
    already interned (two state tables: int32 rows, read in place; other integer rows are
    read as int64)."""
    both32 = np.asarray(rows_a).dtype == np.int32 and np.asarray(rows_b).dtype == np.int32
    ra = np.ascontiguousarray(rows_a, dtype=np.int32 if both32 else np.int64)
    rb = np.ascontiguousarray(rows_b, dtype=np.int32 if both32 else np.int64)
    cdef const int64_t[::1] xa = np.ascontiguousarray(ia, dtype=np.int64)
    cdef const int64_t[::1] xb = np.ascontiguousarray(ib, dtype=np.int64)
    cdef const int64_t[::1] ma = np.ascontiguousarray(map_a, dtype=np.int64)
    cdef const int64_t[::1] mb = np.ascontiguousarray(map_b, dtype=np.int64)
    cdef Py_ssize_t i, k = xa.shape[0], ns = ra.shape[1]
    if ra.ndim != 2 or rb.ndim != 2 or rb.shape[1] != ns or xb.shape[0] != k or ns > MAX_SLOTS:
        raise ValueError("rows_a and rows_b need the same slots, ia and ib the same length")
    for i in range(k):
        if xa[i] < 0 or xa[i] >= ra.shape[0] or xb[i] < 0 or xb[i] >= rb.shape[0]:
            raise IndexError(f"row index out of range at {i}")
    out = np.zeros(k, dtype=np.int64)
    cdef bint bad
    if both32:
        bad = _diff_rows[int32_t](ra, rb, xa, xb, ma, mb, ask_code, out)
    else:
        bad = _diff_rows[int64_t](ra, rb, xa, xb, ma, mb, ask_code, out)
    if bad:
        raise IndexError("a value id is outside its map")
    return out


cdef bint _diff_rows(const introw[:, ::1] ra, const introw[:, ::1] rb, const int64_t[::1] xa,
                     const int64_t[::1] xb, const int64_t[::1] ma, const int64_t[::1] mb, int64_t ask_code,
                     int64_t[::1] ov) noexcept nogil:
    """The loop of :func:`diff_state_rows`; True where a value id is outside its map."""
    cdef Py_ssize_t i, j, k = xa.shape[0], ns = ra.shape[1], na = ma.shape[0], nb = mb.shape[0], pa, pb
    cdef int64_t ka, kb, bits
    cdef const introw* pra
    cdef const introw* prb
    for i in range(k):
        bits = 0
        pra = &ra[xa[i], 0]
        prb = &rb[xb[i], 0]
        for j in range(ns):
            pa = _at(pra[j], na)
            pb = _at(prb[j], nb)
            if pa < 0 or pb < 0:
                return True
            ka = ma[pa]
            kb = mb[pb]
            if ka != kb or ka == ask_code:
                bits |= (<int64_t>1) << j
        ov[i] = bits
    return False


def renumber_rows(setter, sel, lut):
    """Rows ``sel`` of an ``int32[O, n_slots]`` setter matrix with each command index ``c >= 0``
    replaced by ``lut[c]`` (negative entries kept): ``int32[k, n_slots]``, one pass over the rows
    (identical to ``drawopt.analysis.state._renumber_rows_py``; ``state.retrack`` renumbers the
    commands a removal keeps)."""
    cdef const int32_t[:, ::1] st = np.ascontiguousarray(setter, dtype=np.int32)
    cdef const int64_t[::1] ix = np.ascontiguousarray(sel, dtype=np.int64)
    cdef const int32_t[::1] lu = np.ascontiguousarray(lut, dtype=np.int32)
    cdef Py_ssize_t i, j, k = ix.shape[0], ns = st.shape[1], no = st.shape[0], nl = lu.shape[0]
    cdef int32_t c
    for i in range(k):
        if ix[i] < 0 or ix[i] >= no:
            raise IndexError(f"row index out of range at {i}")
    out = np.empty((k, ns), dtype=np.int32)
    if k == 0 or ns == 0:
        return out
    cdef int32_t[:, ::1] o = out
    cdef bint bad = False
    cdef const int32_t* src
    cdef int32_t* dst
    with nogil:
        for i in range(k):
            src = &st[ix[i], 0]
            dst = &o[i, 0]
            for j in range(ns):
                c = src[j]
                if c >= 0:
                    if c >= nl:
                        bad = True
                        break
                    c = lu[c]
                dst[j] = c
            if bad:
                break
    if bad:
        raise IndexError("a command index is outside lut")
    return out
