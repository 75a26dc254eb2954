"""Hot loops of the translation validator (``drawopt._verify``).

The model lives in :mod:`drawopt.verify`; this module only runs loops that numpy
would do in many passes. Each function has a pure-numpy twin in the module named
in its docstring, and the tests check that both give identical arrays.
"""

import numpy as np

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

__all__ = ["hash_columns", "factorize", "group_sort", "buffer_words", "write_entries", "by_opcode", "record_rows",
           "set_rows", "count_before", "count_below", "hash_sum", "fill_at", "group_ids", "merge_runs", "state_hashes",
           "const_events"]

cdef uint64_t _G = 0x9E3779B97F4A7C15ULL
cdef uint64_t _C1 = 0xBF58476D1CE4E5B9ULL
cdef uint64_t _C2 = 0x94D049BB133111EBULL


cdef enum:
    _BLOCK = 256


cdef inline uint64_t _mix(uint64_t h, uint64_t c) noexcept nogil:
    cdef uint64_t z = h * _G + c
    z = (z ^ (z >> 30)) * _C1
    z = (z ^ (z >> 27)) * _C2
    return z ^ (z >> 31)


def hash_columns(Py_ssize_t n, uint64_t seed, list vals, list idxs, const uint8_t[::1] kinds,
                 const uint64_t[::1] scalars, int64_t lo, int64_t hi, int64_t to, init=None):
    """One hash per row, all columns folded in one pass: ``h = seed`` (``init[i]`` if given), then for each column
    ``c`` in order ``h = fmix64(h * G + x)``, ``x`` being ``vals[c][i]`` (kind 0),
    ``vals[c][idxs[c][i]]`` read as ``to`` where ``lo < x < hi`` (kind 1) or ``scalars[c]``
    (kind 2). Twin: the pure path of ``drawopt.verify._hash.hash_cols``."""
    cdef Py_ssize_t k = kinds.shape[0], c, i, i0, i1, blk = _BLOCK
    cdef int64_t x, j, m
    cdef uint64_t sc
    cdef uint64_t hb[_BLOCK]
    cdef const int64_t* v
    cdef const int64_t* ix
    cdef uint8_t kd
    cdef int bad = 0
    cdef const int64_t[::1] h0
    cdef bint has_init = init is not None
    if len(vals) != k or len(idxs) != k or scalars.shape[0] != k:
        raise ValueError("hash_columns: length mismatch")
    out = np.empty(n, np.uint64)
    if n == 0:
        return out
    cdef uint64_t[::1] o = out
    if has_init:
        h0 = init
        if h0.shape[0] != n:
            raise ValueError("hash_columns: init length mismatch")
    else:
        h0 = np.zeros(1, np.int64)
    cdef const int64_t** vp = <const int64_t**>malloc(k * sizeof(int64_t*) + 1)
    cdef const int64_t** ip = <const int64_t**>malloc(k * sizeof(int64_t*) + 1)
    cdef int64_t* vlen = <int64_t*>malloc(k * sizeof(int64_t) + 1)
    cdef const int64_t[::1] mv
    if vp == NULL or ip == NULL or vlen == NULL:
        free(vp); free(ip); free(vlen)
        raise MemoryError()
    try:
        for c in range(k):
            vp[c] = NULL
            ip[c] = NULL
            vlen[c] = 0
            if kinds[c] == 2:
                continue
            if kinds[c] > 2:
                raise ValueError("hash_columns: bad column kind")
            mv = vals[c]
            vlen[c] = mv.shape[0]
            if mv.shape[0]:
                vp[c] = &mv[0]
            if kinds[c] == 0:
                if mv.shape[0] != n:
                    raise ValueError("hash_columns: length mismatch")
            else:
                mv = idxs[c]
                if mv.shape[0] != n:
                    raise ValueError("hash_columns: length mismatch")
                ip[c] = &mv[0]
        with nogil:
            # column by column over blocks of rows: the hashes of a block stay in L1 and the
            # rows of a column are independent (pipelined), instead of one long chain per row
            i0 = 0
            while i0 < n:
                i1 = min(i0 + blk, n)
                if has_init:
                    for i in range(i0, i1):
                        hb[i - i0] = <uint64_t>h0[i]
                else:
                    for i in range(i0, i1):
                        hb[i - i0] = seed
                for c in range(k):
                    kd = kinds[c]
                    v = vp[c]
                    if kd == 0:
                        for i in range(i0, i1):
                            hb[i - i0] = _mix(hb[i - i0], <uint64_t>v[i])
                    elif kd == 1:
                        ix = ip[c]
                        m = vlen[c]
                        for i in range(i0, i1):
                            j = ix[i]
                            if j < 0 or j >= m:
                                bad = 1
                                x = 0
                            else:
                                x = v[j]
                                if lo < x < hi:
                                    x = to
                            hb[i - i0] = _mix(hb[i - i0], <uint64_t>x)
                    else:
                        sc = scalars[c]
                        for i in range(i0, i1):
                            hb[i - i0] = _mix(hb[i - i0], sc)
                for i in range(i0, i1):
                    o[i] = hb[i - i0]
                i0 = i1
    finally:
        free(vp)
        free(ip)
        free(vlen)
    if bad:
        raise IndexError("hash_columns: index out of range")
    return out


def fill_at(const int64_t[::1] ev_at, const int64_t[::1] ev_val, const int64_t[::1] q, int64_t before):
    """``ev_val[j]`` of the last ``ev_at[j] < q[i]`` for each query, ``before`` where none.

    ``ev_at`` and ``q`` ascending; one merge pass (twin: ``drawopt.verify.slots.fill_at``)."""
    cdef Py_ssize_t i, j = 0, n = q.shape[0], m = ev_at.shape[0]
    if ev_val.shape[0] != m:
        raise ValueError("fill_at: length mismatch")
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    with nogil:
        for i in range(n):
            while j < m and ev_at[j] < q[i]:
                j += 1
            o[i] = ev_val[j - 1] if j > 0 else before
    return out


cdef inline Py_ssize_t _lower(const int64_t* a, Py_ssize_t lo, Py_ssize_t hi, int64_t x) noexcept nogil:
    """The first ``p`` in ``[lo, hi)`` with ``a[p] >= x`` (``a[lo:hi]`` ascending), else ``hi``."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _lower_from(const int64_t[::1] a, int64_t x, Py_ssize_t h) noexcept nogil:
    """The first ``p`` with ``a[p] >= x`` (``a`` ascending), searched by galloping from the
    hint ``h`` (consecutive queries are near each other: O(log distance), not O(log n))."""
    cdef Py_ssize_t n = a.shape[0], lo, hi, step = 1
    if h > n:
        h = n
    if h < n and a[h] < x:
        lo = h + 1
        while lo + step - 1 < n and a[lo + step - 1] < x:
            lo += step
            step <<= 1
        hi = min(lo + step - 1, n)
    else:
        hi = h
        while hi - step >= 0 and a[hi - step] >= x:
            hi -= step
            step <<= 1
        lo = max(hi - step, 0)
    return _lower(&a[0], lo, hi, x) if lo < hi else lo


cdef inline bint _read_between(const int64_t[::1] rk, int64_t res, int64_t lo, int64_t hi,
                               Py_ssize_t* hint) noexcept nogil:
    """A key ``res << 40 | a`` with ``lo <= a <= hi`` among the sorted ``rk``: the first key
    from ``res << 40 | lo`` on is at most ``res << 40 | hi`` (``hint``: where the last
    search ended, updated)."""
    cdef Py_ssize_t p = _lower_from(rk, res * (<int64_t>1 << 40) + lo, hint[0])
    hint[0] = p
    return p < rk.shape[0] and rk[p] <= res * (<int64_t>1 << 40) + hi


def group_ids(const int64_t[::1] e_res, const int64_t[::1] e_lab, const int64_t[::1] e_act,
              const int64_t[::1] rk):
    """Commuting-group number of every write entry (twin: ``drawopt.verify.compare._group_ids``)."""
    cdef Py_ssize_t i, n = e_res.shape[0]
    out = np.empty(n, np.int64)
    cdef int64_t[::1] g = out
    cdef int64_t cur = 0
    cdef Py_ssize_t p, hint = 0
    cdef bint start
    if e_lab.shape[0] != n or e_act.shape[0] != n:
        raise ValueError("group_ids: length mismatch")
    with nogil:
        for i in range(n):
            p = i - 1 if i > 0 else 0
            start = (i == 0 or e_res[i] != e_res[i - 1] or e_lab[i] == 0 or e_lab[i] != e_lab[p] or
                     _read_between(rk, e_res[i], e_act[p], e_act[i], &hint))
            if start:
                cur += 1
            g[i] = cur
    return out


def merge_runs(const int64_t[::1] e_res, const int64_t[::1] e_lab, const int64_t[::1] e_gid,
               const int64_t[::1] e_rec, const int64_t[::1] e_act, const int64_t[::1] rk,
               const int64_t[::1] rest, const int64_t[::1] kind, const int64_t[::1] fmt,
               const int64_t[::1] src_off, const int64_t[::1] count, const int64_t[::1] inst,
               const int64_t[::1] ninst, const int64_t[::1] rel, const uint8_t[::1] nomerge,
               const uint64_t[::1] hz, const uint8_t[::1] noprim, const int64_t[::1] vpp,
               int64_t kd_draw, int64_t kd_indexed):
    """Runs of mergeable neighbours: ``(head position, ninst, count)`` of every run
    (twin: ``drawopt.verify.compare._merge_runs``). Entry arrays (``e_*``) in canonical
    order; ``rest`` .. ``nomerge`` per record, ``hz`` .. ``vpp`` per action."""
    cdef Py_ssize_t i, n = e_res.shape[0], m = 0, nr = rest.shape[0], na = hz.shape[0]
    link_a = np.empty(n, np.uint8)   # per entry: 0 (a run's head), 1 (instances) or 2 (ranges)
    cdef uint8_t[::1] link = link_a
    cdef int64_t r, q, a, b, k, pk, isz, step, v
    cdef int typ, raw_prev = 0
    cdef Py_ssize_t hint = 0
    cdef bint ok, drawlike, inst_link, range_link
    if not (e_lab.shape[0] == n and e_gid.shape[0] == n and e_rec.shape[0] == n and e_act.shape[0] == n and
            kind.shape[0] == nr and fmt.shape[0] == nr and src_off.shape[0] == nr and count.shape[0] == nr and
            inst.shape[0] == nr and ninst.shape[0] == nr and rel.shape[0] == nr and nomerge.shape[0] == nr and
            noprim.shape[0] == na and vpp.shape[0] == na):
        raise ValueError("merge_runs: length mismatch")
    for i in range(n):
        if not (0 <= e_rec[i] < nr and 0 <= e_act[i] < na):
            raise IndexError("merge_runs: index out of range")
    with nogil:
        for i in range(n):
            r = e_rec[i]
            typ = 0
            if i > 0:
                q = e_rec[i - 1]
                a = e_act[i - 1]
                b = e_act[i]
                k = kind[r]
                drawlike = k == kd_draw or k == kd_indexed
                ok = (drawlike and e_res[i] == e_res[i - 1] and rest[q] == rest[r] and hz[a] == hz[b] and
                      e_lab[i - 1] == e_lab[i] and not nomerge[q] and not nomerge[r])
                if ok and e_gid[i] != e_gid[i - 1]:
                    # across groups: no label, no read of the resource in between
                    ok = e_lab[i] == 0 and not _read_between(rk, e_res[i], a, b, &hint)
                if ok:
                    inst_link = (src_off[q] == src_off[r] and count[q] == count[r] and inst[r] >= 0 and
                                 inst[q] >= 0 and inst[r] == inst[q] + ninst[q] and
                                 ((rel[q] == -1 and rel[r] == -1) or
                                  (rel[q] >= 0 and rel[r] == rel[q] + ninst[q])))
                    range_link = False
                    if not inst_link and noprim[b] and vpp[a] > 0 and ninst[q] == 1 and ninst[r] == 1 and \
                            inst[q] == inst[r] and rel[q] == rel[r] and count[q] > 0 and count[q] % vpp[a] == 0:
                        pk = kind[q]
                        isz = 4 if fmt[q] == 1 else 2
                        step = count[q] * isz if pk == kd_indexed else count[q]
                        range_link = src_off[r] == src_off[q] + step
                    typ = 1 if inst_link else (2 if range_link else 0)
            v = typ
            if typ > 0 and raw_prev > 0 and typ != raw_prev:
                v = 0   # a run merges one way only: cut where the link type changes
            raw_prev = typ
            link[i] = <uint8_t>v
            if v == 0:
                m += 1
    # the runs, in arrays of their number (a second pass: no arrays of n entries cut down after)
    heads = np.empty(m, np.int64)
    tn = np.empty(m, np.int64)
    tc = np.empty(m, np.int64)
    cdef int64_t[::1] H = heads, TN = tn, TC = tc
    m = 0
    with nogil:
        for i in range(n):
            r = e_rec[i]
            if link[i] == 0:
                H[m] = i
                TN[m] = ninst[r]
                TC[m] = count[r]
                m += 1
            elif link[i] == 1:
                TN[m - 1] += ninst[r]
            else:
                TC[m - 1] += count[r]
    return heads, tn, tc


def state_hashes(const int64_t[::1] ev_at, const int64_t[::1] ev_val, const int64_t[::1] col_off,
                 const int64_t[::1] before, const int64_t[::1] q, const int64_t[::1] grp,
                 const int64_t[::1] g_off, const int64_t[::1] g_pos, const int64_t[::1] g_cid,
                 const int64_t[::1] g_pcid, const int64_t[::1] ov_row, const int64_t[:, ::1] ov,
                 int64_t lo, int64_t hi, int64_t to, uint64_t seed):
    """State hash of every query (twin: the pure path of ``drawopt.verify.slots.StateAt.hashes``).

    Column ``c``'s events are ``ev_at[col_off[c]:col_off[c + 1]]`` (ascending) with values
    ``ev_val``; before its first event it holds ``before[c]``. Query ``i`` (``q`` ascending)
    of group ``g = grp[i]`` (-1: none, hash 0) hashes ``g_pcid[g]``, then for each of the
    group's columns ``g_pos[g_off[g]:g_off[g + 1]]`` its id ``g_cid`` and its value at the
    query (row ``ov_row[c]`` of ``ov`` where that is >= 0), read as ``to`` where ``lo < v < hi``."""
    cdef Py_ssize_t n = q.shape[0], C = col_off.shape[0] - 1, G = g_off.shape[0] - 1
    cdef Py_ssize_t i, k, c, j, e
    cdef int64_t g, v, r
    cdef uint64_t h
    if grp.shape[0] != n or before.shape[0] != C or ov_row.shape[0] != C or g_pcid.shape[0] != G or \
            g_cid.shape[0] != g_pos.shape[0] or ev_val.shape[0] != ev_at.shape[0]:
        raise ValueError("state_hashes: length mismatch")
    if ov.shape[0] and ov.shape[1] != n:
        raise ValueError("state_hashes: override length mismatch")
    for c in range(C):
        if not (0 <= col_off[c] <= col_off[c + 1] <= ev_at.shape[0]) or ov_row[c] >= ov.shape[0]:
            raise IndexError("state_hashes: bad column layout")
    for k in range(G):
        if not (0 <= g_off[k] <= g_off[k + 1] <= g_pos.shape[0]):
            raise IndexError("state_hashes: bad group layout")
    for k in range(g_pos.shape[0]):
        if not (0 <= g_pos[k] < C):
            raise IndexError("state_hashes: column out of range")
    for i in range(n):
        if grp[i] >= G:
            raise IndexError("state_hashes: group out of range")
    out = np.zeros(n, np.uint64)
    ptr_a = np.asarray(col_off)[:C].copy()
    cdef uint64_t[::1] o = out
    cdef int64_t[::1] ptr = ptr_a
    cdef uint64_t hb[_BLOCK]
    cdef uint64_t h0, cid
    cdef Py_ssize_t i2, t, blk = _BLOCK, s0
    with nogil:
        # runs of consecutive queries of one group (most draws follow one of their pipeline),
        # hashed column by column: the queries' hash chains are independent (pipelined),
        # where one query at a time is one long chain of dependent multiplications
        i = 0
        while i < n:
            g = grp[i]
            if g < 0:
                i += 1
                continue
            i2 = i + 1
            while i2 < n and i2 - i < blk and grp[i2] == g:
                i2 += 1
            h0 = _mix(seed, <uint64_t>g_pcid[g])
            for t in range(i2 - i):
                hb[t] = h0
            for k in range(g_off[g], g_off[g + 1]):
                c = g_pos[k]
                r = ov_row[c]
                cid = <uint64_t>g_cid[k]
                if r >= 0:
                    for t in range(i, i2):
                        v = ov[r, t]
                        if lo < v < hi:
                            v = to
                        hb[t - i] = _mix(_mix(hb[t - i], cid), <uint64_t>v)
                    continue
                j = ptr[c]
                e = col_off[c + 1]
                s0 = col_off[c]
                for t in range(i, i2):
                    while j < e and ev_at[j] < q[t]:
                        j += 1
                    v = ev_val[j - 1] if j > s0 else before[c]
                    if lo < v < hi:
                        v = to
                    hb[t - i] = _mix(_mix(hb[t - i], cid), <uint64_t>v)
                ptr[c] = j
            for t in range(i, i2):
                o[t] = hb[t - i]
            i = i2
    return out


def const_events(const int64_t[::1] idx, const int64_t[::1] base, const int64_t[::1] cnt,
                 const int64_t[::1] voff, const int64_t[::1] pool):
    """Root-constant words as per-column events (twin: the numpy path of
    ``drawopt.verify.slots._const_columns``): command ``idx[i]`` sets the words with keys
    ``base[i] .. base[i] + cnt[i] - 1`` to ``pool[voff[i]:voff[i] + cnt[i]]``. Returns
    ``(off, ev_idx, ev_val)``: the events of key ``k`` are ``off[k]:off[k + 1]``, commands
    ascending (a counting sort by key, stable in ``idx`` order)."""
    cdef Py_ssize_t n = idx.shape[0], i, w, total = 0, p
    cdef int64_t nk = 0, k
    if base.shape[0] != n or cnt.shape[0] != n or voff.shape[0] != n:
        raise ValueError("const_events: length mismatch")
    for i in range(n):
        if base[i] < 0 or cnt[i] < 0 or voff[i] < 0 or voff[i] + cnt[i] > pool.shape[0]:
            raise IndexError("const_events: bad range")
        if base[i] + cnt[i] > nk:
            nk = base[i] + cnt[i]
        total += cnt[i]
    off_a = np.zeros(nk + 1, np.int64)
    ev_idx_a = np.empty(total, np.int64)
    ev_val_a = np.empty(total, np.int64)
    cdef int64_t[::1] off = off_a, ev_idx = ev_idx_a, ev_val = ev_val_a
    pos_a = np.zeros(nk + 1, np.int64)
    cdef int64_t[::1] pos = pos_a
    with nogil:
        for i in range(n):
            for w in range(cnt[i]):
                off[base[i] + w + 1] += 1
        for k in range(nk):
            off[k + 1] += off[k]
        for k in range(nk + 1):
            pos[k] = off[k]
        for i in range(n):
            for w in range(cnt[i]):
                k = base[i] + w
                p = pos[k]
                pos[k] += 1
                ev_idx[p] = idx[i]
                ev_val[p] = pool[voff[i] + w]
    return off_a, ev_idx_a, ev_val_a


def factorize(const int64_t[::1] x):
    """``(values, first, codes)``: the distinct values of ``x`` in order of first occurrence,
    the index of each one's first occurrence, and each element's value number (one pass,
    open addressing). ``drawopt.verify._hash.unique_inverse`` sorts the (few) values to give
    ``np.unique(x, return_index=True, return_inverse=True)``, its pure twin."""
    cdef Py_ssize_t n = x.shape[0], i, cap = 1024, u = 0, s, t
    cdef uint64_t mask, hh
    cdef int64_t v
    codes_a = np.empty(n, np.int64)
    vals_a = np.empty(max(n, 1), np.int64)
    first_a = np.empty(max(n, 1), np.int64)
    table_a = np.full(cap, -1, np.int64)
    cdef int64_t[::1] codes = codes_a, vals = vals_a, first = first_a, table = table_a
    mask = cap - 1
    for i in range(n):
        v = x[i]
        hh = _mix(0x243F6A8885A308D3ULL, <uint64_t>v) & mask
        while True:
            t = table[hh]
            if t < 0:
                table[hh] = u
                vals[u] = v
                first[u] = i
                codes[i] = u
                u += 1
                break
            if vals[t] == v:
                codes[i] = t
                break
            hh = (hh + 1) & mask
        if 2 * u > cap:   # keep the load under 1/2: rehash into a table twice the size
            cap <<= 1
            mask = cap - 1
            table_a = np.full(cap, -1, np.int64)
            table = table_a
            for s in range(u):
                hh = _mix(0x243F6A8885A308D3ULL, <uint64_t>vals[s]) & mask
                while table[hh] >= 0:
                    hh = (hh + 1) & mask
                table[hh] = s
    return vals_a[:u].copy(), first_a[:u].copy(), codes_a


cdef struct _Keys:
    const int64_t** val   # per key: its values
    const int64_t** at    # per key: the positions to read them at (NULL: position p reads val[p])
    uint64_t* flip        # per key: XORed into each value (the sign bit: unsigned order)
    Py_ssize_t n


cdef inline int64_t _key(const _Keys* k, Py_ssize_t c, int64_t p) noexcept nogil:
    if k.at[c] != NULL:
        p = k.at[c][p]
    return <int64_t>(<uint64_t>k.val[c][p] ^ k.flip[c])


cdef inline bint _key_less(int64_t a, int64_t b, const _Keys* k) noexcept nogil:
    """Whether position ``a`` sorts before ``b``: the last key first (as ``np.lexsort``)."""
    cdef Py_ssize_t c = k.n - 1
    cdef int64_t x, y
    while c >= 0:
        x = _key(k, c, a)
        y = _key(k, c, b)
        if x != y:
            return x < y
        c -= 1
    return False


cdef void _merge_sort(int64_t* a, int64_t* tmp, Py_ssize_t n, const _Keys* kp) noexcept nogil:
    """Stable sort of the positions ``a[0:n]`` by the keys (insertion sort of runs of 16, then
    bottom-up merges through ``tmp``)."""
    cdef Py_ssize_t i, j, lo, mid, hi, p, q, w
    cdef int64_t x
    cdef int64_t* src = a
    cdef int64_t* dst = tmp
    cdef int64_t* sw
    for lo in range(0, n, 16):
        hi = min(lo + 16, n)
        for i in range(lo + 1, hi):
            x = a[i]
            j = i - 1
            while j >= lo and _key_less(x, a[j], kp):
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = x
    w = 16
    while w < n:
        lo = 0
        while lo < n:
            mid = min(lo + w, n)
            hi = min(lo + 2 * w, n)
            p, q, i = lo, mid, lo
            while p < mid and q < hi:
                if _key_less(src[q], src[p], kp):
                    dst[i] = src[q]
                    q += 1
                else:
                    dst[i] = src[p]
                    p += 1
                i += 1
            while p < mid:
                dst[i] = src[p]
                p += 1
                i += 1
            while q < hi:
                dst[i] = src[q]
                q += 1
                i += 1
            lo = hi
        sw = src
        src = dst
        dst = sw
        w *= 2
    if src != a:
        for i in range(n):
            a[i] = src[i]


def group_sort(const int64_t[::1] gid, list keys, list at=None, const uint8_t[::1] unsigned=None):
    """The order ``np.lexsort((*keys, gid))`` (twin: ``drawopt.verify.compare._group_order``'s
    pure path) for a non-decreasing ``gid`` and ``int64`` keys: each run of equal ``gid``
    sorted on its own, stably, by the last key first.

    ``at[c]`` (where given and not None): key ``c`` is ``keys[c][at[c]]``, read in place (no
    gathered copy); ``unsigned[c]``: key ``c`` holds ``uint64`` values (viewed as ``int64``),
    ordered as unsigned."""
    cdef Py_ssize_t n = gid.shape[0], nk = len(keys), c, i, lo, m
    cdef int64_t j
    for i in range(1, n):
        if gid[i] < gid[i - 1]:
            raise ValueError("group_sort: gid must not decrease")
    if at is not None and len(at) != nk:
        raise ValueError("group_sort: length mismatch")
    if unsigned is not None and unsigned.shape[0] != nk:
        raise ValueError("group_sort: length mismatch")
    order_a = np.arange(n, dtype=np.int64)
    tmp_a = np.empty(n, np.int64)
    if n < 2:
        return order_a
    cdef int64_t[::1] order = order_a, tmp = tmp_a
    cdef const int64_t[::1] mv
    cdef const int64_t[::1] iv
    cdef _Keys kp
    kp.n = nk
    kp.val = <const int64_t**>malloc(nk * sizeof(int64_t*) + 1)
    kp.at = <const int64_t**>malloc(nk * sizeof(int64_t*) + 1)
    kp.flip = <uint64_t*>malloc(nk * sizeof(uint64_t) + 1)
    if kp.val == NULL or kp.at == NULL or kp.flip == NULL:
        free(kp.val); free(kp.at); free(kp.flip)
        raise MemoryError()
    try:
        for c in range(nk):
            mv = keys[c]
            kp.at[c] = NULL
            kp.flip[c] = 0x8000000000000000ULL if unsigned is not None and unsigned[c] else 0
            if at is not None and at[c] is not None:
                iv = at[c]
                if iv.shape[0] != n:
                    raise ValueError("group_sort: length mismatch")
                m = mv.shape[0]
                for i in range(n):
                    j = iv[i]
                    if j < 0 or j >= m:
                        raise IndexError("group_sort: position out of range")
                kp.at[c] = &iv[0]
                kp.val[c] = &mv[0]
            else:
                if mv.shape[0] != n:
                    raise ValueError("group_sort: length mismatch")
                kp.val[c] = &mv[0]
        with nogil:
            lo = 0
            for i in range(1, n + 1):
                if i == n or gid[i] != gid[lo]:
                    if i - lo > 1:
                        _merge_sort(&order[lo], &tmp[lo], i - lo, &kp)
                    lo = i
    finally:
        free(kp.val)
        free(kp.at)
        free(kp.flip)
    return order_a


def buffer_words(const uint32_t[::1] data, int64_t size, const int64_t[::1] byte_off, Py_ssize_t nwords,
                 int64_t oob):
    """``nwords`` 32-bit words at each byte offset of a buffer of ``size`` bytes whose first
    words are ``data`` (zeros after them; ``oob`` for a misaligned offset or a word past the
    end), as an ``(n, nwords)`` array (twin: the pure path of
    ``drawopt.verify.records._Expander.words``; offsets wrap as numpy's int64 arithmetic does)."""
    cdef Py_ssize_t n = byte_off.shape[0], i, j, nd = data.shape[0]
    cdef int64_t bo, wi, end
    out_a = np.empty((n, nwords), np.int64)
    cdef int64_t[:, ::1] out = out_a
    with nogil:
        for i in range(n):
            bo = byte_off[i]
            for j in range(nwords):
                if bo < 0 or bo % 4 != 0:
                    out[i, j] = oob
                    continue
                wi = bo // 4 + j
                end = <int64_t>(<uint64_t>wi * 4 + 4)
                if end > size:
                    out[i, j] = oob
                elif wi < nd:
                    out[i, j] = data[wi]
                else:
                    out[i, j] = 0
    return out_a


def write_entries(const int64_t[::1] order, const int64_t[::1] w_res, const int64_t[::1] w_lab,
                  const int64_t[::1] w_act, const int64_t[::1] a_first, const int64_t[::1] a_nrec):
    """The write entries ``(e_res, e_lab, e_act, e_rec)``: the writes in ``order``, each
    repeated for every record of its action (twin: ``drawopt.verify.compare._entries``)."""
    cdef Py_ssize_t n = order.shape[0], nw = w_res.shape[0], na = a_first.shape[0], i, j, t = 0, p
    cdef int64_t o, a, r0, cnt
    if w_lab.shape[0] != nw or w_act.shape[0] != nw or a_nrec.shape[0] != na:
        raise ValueError("write_entries: length mismatch")
    for i in range(n):
        o = order[i]
        if not (0 <= o < nw) or not (0 <= w_act[o] < na) or a_nrec[w_act[o]] < 0:
            raise IndexError("write_entries: index out of range")
        t += a_nrec[w_act[o]]
    er_a, el_a, ea_a, ec_a = (np.empty(t, np.int64) for _ in range(4))
    cdef int64_t[::1] er = er_a, el = el_a, ea = ea_a, ec = ec_a
    p = 0
    with nogil:
        for i in range(n):
            o = order[i]
            a = w_act[o]
            r0 = a_first[a]
            cnt = a_nrec[a]
            for j in range(cnt):
                er[p] = w_res[o]
                el[p] = w_lab[o]
                ea[p] = a
                ec[p] = r0 + j
                p += 1
    return er_a, el_a, ea_a, ec_a


def by_opcode(const uint16_t[::1] op, Py_ssize_t ncodes):
    """``(order, off)``: the command indices grouped by opcode, ascending within one (a
    counting sort; twin: ``np.argsort(op, kind="stable")`` and the opcodes' counts, in
    ``drawopt.verify.slots.OpIndex``); opcode ``c``'s commands are ``order[off[c]:off[c + 1]]``."""
    cdef Py_ssize_t n = op.shape[0], i
    off_a = np.zeros(ncodes + 1, np.int64)
    order_a = np.empty(n, np.int64)
    cdef int64_t[::1] off = off_a, order = order_a
    for i in range(n):
        if op[i] >= ncodes:
            raise IndexError("by_opcode: opcode out of range")
    pos_a = np.zeros(ncodes + 1, np.int64)
    cdef int64_t[::1] pos = pos_a
    with nogil:
        for i in range(n):
            off[op[i] + 1] += 1
        for i in range(ncodes):
            off[i + 1] += off[i]
        for i in range(ncodes + 1):
            pos[i] = off[i]
        for i in range(n):
            order[pos[op[i]]] = i
            pos[op[i]] += 1
    return order_a, off_a


def record_rows(const int64_t[::1] per, const int64_t[::1] s_act, const int64_t[::1] s_kind,
                const int64_t[::1] s_sbuf, const int64_t[::1] s_soff, const int64_t[::1] s_fmt,
                const int64_t[::1] s_count, const int64_t[::1] s_sym, const int64_t[::1] s_base,
                const int64_t[::1] s_sinst, const int64_t[::1] s_ninst, const int64_t[::1] s_ord,
                const uint8_t[::1] per_inst, const uint8_t[::1] array_form, const int64_t[::1] a_state,
                const int64_t[::1] a_op, const int64_t[::1] a_cmd, const uint8_t[::1] flags,
                const int64_t[::1] opq, const int64_t[::1] fcol, Py_ssize_t nfields, int64_t kd_draw,
                int64_t kd_indexed, int64_t op_x, uint8_t flag_nomerge):
    """The records of the sub-draws, in one pass (twin: the pure path of
    ``drawopt.verify.records._record_rows``): sub-draw ``i`` (``s_*[i]``) becomes ``per[i]``
    records. Returns the key (records x ``nfields``, Fortran order; the fields at ``fcol``:
    kind, src_buf, src_off, fmt, count, sym, state, epoch, bias, inst, ninst, rel, svoff; the
    others 0) and per record: action, ord, instance within the sub-draw, sub-draw, array
    form, nomerge."""
    cdef Py_ssize_t nsd = per.shape[0], na = a_state.shape[0], nc = flags.shape[0], i, j, r = 0, R = 0
    cdef int64_t a, k, cmd, ep, st, b
    cdef bint drawlike, isx
    cdef uint8_t nm
    if not (s_act.shape[0] == nsd and s_kind.shape[0] == nsd and s_sbuf.shape[0] == nsd and
            s_soff.shape[0] == nsd and s_fmt.shape[0] == nsd and s_count.shape[0] == nsd and
            s_sym.shape[0] == nsd and s_base.shape[0] == nsd and s_sinst.shape[0] == nsd and
            s_ninst.shape[0] == nsd and s_ord.shape[0] == nsd):
        raise ValueError("record_rows: length mismatch")
    if per_inst.shape[0] != nsd or array_form.shape[0] != nsd or a_op.shape[0] != na or \
            a_cmd.shape[0] != na or fcol.shape[0] != 13:
        raise ValueError("record_rows: length mismatch")
    for i in range(13):
        if not (0 <= fcol[i] < nfields):
            raise IndexError("record_rows: field out of range")
    for i in range(nsd):
        if per[i] < 0 or not (0 <= s_act[i] < na) or not (0 <= a_cmd[s_act[i]] < nc):
            raise IndexError("record_rows: bad sub-draw")
        R += per[i]
    key_a = np.zeros((R, nfields), np.int64, order="F")
    r_act_a, r_ord_a, inst_a, sub_a = (np.empty(R, np.int64) for _ in range(4))
    af_a = np.empty(R, np.uint8)
    nm_a = np.empty(R, np.uint8)
    cdef int64_t[::1, :] key = key_a
    cdef int64_t[::1] r_act = r_act_a, r_ord = r_ord_a, inst = inst_a, sub = sub_a
    cdef uint8_t[::1] af = af_a, nomerge = nm_a
    cdef int64_t c_kind = fcol[0], c_sbuf = fcol[1], c_soff = fcol[2], c_fmt = fcol[3], c_count = fcol[4]
    cdef int64_t c_sym = fcol[5], c_state = fcol[6], c_epoch = fcol[7], c_bias = fcol[8], c_inst = fcol[9]
    cdef int64_t c_ninst = fcol[10], c_rel = fcol[11], c_svoff = fcol[12]
    with nogil:
        for i in range(nsd):
            a = s_act[i]
            k = s_kind[i]
            cmd = a_cmd[a]
            ep = _lower_from(opq, cmd, 0)   # the Opaque commands before it
            st = a_state[a]
            nm = 1 if flags[cmd] & flag_nomerge else 0
            drawlike = k == kd_draw or k == kd_indexed
            isx = a_op[a] == op_x
            b = s_base[i]
            for j in range(per[i]):
                key[r, c_kind] = k
                key[r, c_sbuf] = s_sbuf[i]
                key[r, c_soff] = s_soff[i]
                key[r, c_fmt] = s_fmt[i]
                key[r, c_count] = s_count[i]
                key[r, c_sym] = s_sym[i]
                key[r, c_state] = st
                key[r, c_epoch] = ep
                key[r, c_bias] = b if k == kd_indexed else (0 if drawlike else -1)
                key[r, c_inst] = s_sinst[i] + j if drawlike else -1
                key[r, c_ninst] = 1 if per_inst[i] else (s_ninst[i] if drawlike else 1)
                key[r, c_rel] = j if drawlike else -1
                key[r, c_svoff] = b if isx else 0
                r_act[r] = a
                r_ord[r] = s_ord[i]
                inst[r] = j
                sub[r] = i
                af[r] = array_form[i]
                nomerge[r] = nm
                r += 1
    return key_a, r_act_a, r_ord_a, inst_a, sub_a, af_a.view(bool), nm_a.view(bool)


def set_rows(const int64_t[::1] inv, const int64_t[::1] off, const int64_t[::1] cnt, list vals):
    """Per-signature sets spelled out per owner: owner ``a`` (``inv[a]`` its set ``s``) gets
    the rows ``off[s] .. off[s] + cnt[s] - 1`` of each array of ``vals``. Returns the owner
    of each row and each array's rows (twin: ``drawopt.verify.records.set_rows``)."""
    cdef Py_ssize_t n = inv.shape[0], ns = off.shape[0], nv = len(vals), i, j, t = 0, p, c
    cdef int64_t s, o, m
    if cnt.shape[0] != ns:
        raise ValueError("set_rows: length mismatch")
    for i in range(ns):
        if cnt[i] < 0 or off[i] < 0:
            raise IndexError("set_rows: bad set")
    for i in range(n):
        if not (0 <= inv[i] < ns):
            raise IndexError("set_rows: set out of range")
        t += cnt[inv[i]]
    cdef const int64_t[::1] src
    cdef int64_t[::1] dst
    for c in range(nv):
        src = vals[c]
        for i in range(ns):
            if cnt[i] and off[i] + cnt[i] > src.shape[0]:
                raise IndexError("set_rows: set past the end of its values")
    owner_a = np.empty(t, np.int64)
    cdef int64_t[::1] owner = owner_a
    with nogil:
        p = 0
        for i in range(n):
            m = cnt[inv[i]]
            for j in range(m):
                owner[p + j] = i
            p += m
    outs = []
    for c in range(nv):
        src = vals[c]
        out_a = np.empty(t, np.int64)
        dst = out_a
        with nogil:
            p = 0
            for i in range(n):
                s = inv[i]
                o = off[s]
                m = cnt[s]
                for j in range(m):
                    dst[p + j] = src[o + j]
                p += m
        outs.append(out_a)
    return owner_a, outs


def count_before(const int64_t[::1] keys, const int64_t[::1] res, const int64_t[::1] act,
                 const int64_t[::1] a_cmd):
    """How many of the sorted ``keys`` (``resource << 40 | command``) lie in
    ``[res[i] << 40, res[i] << 40 | a_cmd[act[i]])``, for every ``i`` (twin:
    ``drawopt.verify.compare._barriers_before``): the barriers on each access's resource
    before its command, by two searches among the (few) keys."""
    cdef Py_ssize_t n = res.shape[0], na = a_cmd.shape[0], i
    cdef int64_t base
    if act.shape[0] != n:
        raise ValueError("count_before: length mismatch")
    for i in range(n):
        if not (0 <= act[i] < na):
            raise IndexError("count_before: action out of range")
    out_a = np.zeros(n, np.int64)
    if keys.shape[0] == 0:
        return out_a
    cdef int64_t[::1] out = out_a
    with nogil:
        for i in range(n):
            base = res[i] * (<int64_t>1 << 40)
            out[i] = _lower_from(keys, base + a_cmd[act[i]], 0) - _lower_from(keys, base, 0)
    return out_a


def count_below(const int64_t[::1] e_res, const int64_t[::1] e_act, const int64_t[::1] res,
                const int64_t[::1] act):
    """For each ``i``: how many ``j`` with ``e_res[j] == res[i]`` have ``e_act[j] < act[i]``
    (``e_res`` ascending; ``e_act`` in any order within a resource). Twin: the pure path of
    ``drawopt.verify.compare._before`` (a sort of each resource's ``e_act``, then a search).

    Exact for any order: with ``pmax`` the running maximum and ``smin`` the running minimum
    from the end of a resource's ``e_act`` (both ascending), every position before the first
    ``p`` with ``pmax[p] >= act[i]`` is below ``act[i]`` and none from the first ``q`` with
    ``smin[q] >= act[i]`` on is (so ``p <= q``): the count is ``p`` plus the ones below among
    ``[p, q)``, counted one by one. That window is short where ``e_act`` is sorted up to
    permutations inside short runs (the canonical order: groups in stream order)."""
    cdef Py_ssize_t n = e_res.shape[0], nq = res.shape[0], i, j, lo, hi, p, q
    cdef int64_t x, c, top = 0x7FFFFFFFFFFFFFFF
    if e_act.shape[0] != n or act.shape[0] != nq:
        raise ValueError("count_below: length mismatch")
    for j in range(1, n):
        if e_res[j] < e_res[j - 1]:
            raise ValueError("count_below: e_res must not decrease")
    out_a = np.zeros(nq, np.int64)
    if n == 0 or nq == 0:
        return out_a
    pmax_a = np.empty(n, np.int64)
    smin_a = np.empty(n, np.int64)
    built_a = np.zeros(n, np.uint8)
    cdef int64_t[::1] out = out_a, pmax = pmax_a, smin = smin_a
    cdef uint8_t[::1] built = built_a
    with nogil:
        for i in range(nq):
            lo = _lower(&e_res[0], 0, n, res[i])
            hi = n
            if res[i] < top:
                hi = _lower(&e_res[0], lo, n, res[i] + 1)
            if lo < hi and not built[lo]:
                # the running bounds of this resource's entries only (the queried ones)
                built[lo] = 1
                pmax[lo] = e_act[lo]
                for j in range(lo + 1, hi):
                    pmax[j] = e_act[j] if e_act[j] > pmax[j - 1] else pmax[j - 1]
                smin[hi - 1] = e_act[hi - 1]
                j = hi - 2
                while j >= lo:
                    smin[j] = e_act[j] if e_act[j] < smin[j + 1] else smin[j + 1]
                    j -= 1
            x = act[i]
            p = _lower(&pmax[0], lo, hi, x)
            q = _lower(&smin[0], p, hi, x)
            c = p - lo
            for j in range(p, q):
                if e_act[j] < x:
                    c += 1
            out[i] = c
    return out_a


def hash_sum(const int64_t[::1] idx, Py_ssize_t nbins, uint64_t seed, list vals, const uint8_t[::1] kinds,
             const uint64_t[::1] scalars):
    """Wrapping per-bin sums of row hashes: ``out[idx[i]] += h[i]``, ``h`` the row hashes of
    ``hash_columns`` over the columns ``vals`` (kind 0: an array; kind 2: ``scalars[c]``), without
    the hash array (twin: ``drawopt.verify.compare._mix_sum``'s pure path)."""
    cdef Py_ssize_t n = idx.shape[0], k = kinds.shape[0], c, i, i0, i1, blk = _BLOCK
    cdef uint64_t hb[_BLOCK]
    cdef uint64_t sc
    cdef const int64_t* v
    cdef const int64_t[::1] mv
    if len(vals) != k or scalars.shape[0] != k:
        raise ValueError("hash_sum: length mismatch")
    for i in range(n):
        if not (0 <= idx[i] < nbins):
            raise IndexError("hash_sum: index out of range")
    out_a = np.zeros(nbins, np.uint64)
    if n == 0:
        return out_a
    cdef uint64_t[::1] out = out_a
    cdef const int64_t** vp = <const int64_t**>malloc(k * sizeof(int64_t*) + 1)
    if vp == NULL:
        raise MemoryError()
    try:
        for c in range(k):
            vp[c] = NULL
            if kinds[c] == 2:
                continue
            if kinds[c] != 0:
                raise ValueError("hash_sum: bad column kind")
            mv = vals[c]
            if mv.shape[0] != n:
                raise ValueError("hash_sum: length mismatch")
            vp[c] = &mv[0]
        with nogil:
            i0 = 0
            while i0 < n:
                i1 = min(i0 + blk, n)
                for i in range(i0, i1):
                    hb[i - i0] = seed
                for c in range(k):
                    v = vp[c]
                    if kinds[c] == 0:
                        for i in range(i0, i1):
                            hb[i - i0] = _mix(hb[i - i0], <uint64_t>v[i])
                    else:
                        sc = scalars[c]
                        for i in range(i0, i1):
                            hb[i - i0] = _mix(hb[i - i0], sc)
                for i in range(i0, i1):
                    out[idx[i]] += hb[i - i0]
                i0 = i1
    finally:
        free(vp)
    return out_a
