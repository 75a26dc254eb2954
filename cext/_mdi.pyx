"""Sequential loops and fused per-draw gathers of the ``mdi`` pass (``drawopt._mdi``).

The model lives in :mod:`drawopt.passes.mdi`; this module only runs its three
greedy loops (``greedy``, ``indirect_groups``, ``layout``) and five fused chains
of numpy operations that were its hottest per-draw work (``varying_columns`` and
``key_rows``: the batching keys of draws under a per-draw contract, ``key_rows`` also
their raw slot values; ``chain_words``: their lifted root-constant words;
``perdraw_records``: writing the per-draw array's records; ``run_facts``: the per-run
facts of the lift decision). The public functions are
the wrappers (they fix dtypes and contiguity, check bounds and allocate the
outputs); the ``_`` functions are the typed kernels, run without the GIL. The
pure-Python twins are ``drawopt.passes.mdi._greedy_py``, ``_indirect_groups_py``,
``_layout_py``, ``_varying_columns_py``, ``_key_rows_py``, ``_chain_words_py``,
``_perdraw_records_py`` and ``_run_facts_py``;
the tests check that both give identical arrays.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

__all__ = ["chain_words", "greedy", "indirect_groups", "key_rows", "layout", "perdraw_records", "run_facts",
           "varying_columns"]


def greedy(values, new_run, limit):
    """Group of each element: consecutive elements of one run (``new_run`` starts one)
    whose ``values`` sum to at most their ``limit`` (a group holds at least one element).

    Parameters
    ----------
    values, limit : int64[n]
    new_run : uint8[n]

    Returns
    -------
    gid : int64[n]
        Group numbers from 0, in order.
    """
    cdef const int64_t[::1] v = np.ascontiguousarray(values, dtype=np.int64)
    cdef const uint8_t[::1] nr = np.ascontiguousarray(new_run, dtype=np.uint8)
    cdef const int64_t[::1] lim = np.ascontiguousarray(limit, dtype=np.int64)
    cdef Py_ssize_t n = v.shape[0]
    if nr.shape[0] != n or lim.shape[0] != n:
        raise ValueError("greedy: values, new_run and limit must have one length")
    gid = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] g = gid
    with nogil:
        _greedy(v, nr, lim, g)
    return gid


cdef void _greedy(const int64_t[::1] v, const uint8_t[::1] nr, const int64_t[::1] lim,
                  int64_t[::1] gid) noexcept nogil:
    cdef Py_ssize_t i, n = v.shape[0]
    cdef int64_t g = -1, total = 0
    for i in range(n):
        if i == 0 or nr[i] or total + v[i] > lim[i]:
            g += 1
            total = 0
        total += v[i]
        gid[i] = g


def indirect_groups(cnt, buf, off, stride, new_run, int64_t rec, int64_t limit):
    """Greedy groups of consecutive indirect draws of one run reading one args buffer at
    ``O, O+S, O+2S, ...`` (at most ``limit`` records; S a multiple of 4, at least ``rec``).

    Parameters
    ----------
    cnt, buf, off, stride : int64[n]
        Each draw's records, args buffer, offset and own stride (a single indirect draw:
        count 1, stride -1).
    new_run : uint8[n]
        A run starts here (groups never cross runs).

    Returns
    -------
    gid : int64[n]
        Group of each draw (from 0, in order).
    gstride : int64[groups]
        Stride S of each group (-1: not fixed, a one-draw group).
    """
    cdef const int64_t[::1] c = np.ascontiguousarray(cnt, dtype=np.int64)
    cdef const int64_t[::1] b = np.ascontiguousarray(buf, dtype=np.int64)
    cdef const int64_t[::1] o = np.ascontiguousarray(off, dtype=np.int64)
    cdef const int64_t[::1] s = np.ascontiguousarray(stride, dtype=np.int64)
    cdef const uint8_t[::1] nr = np.ascontiguousarray(new_run, dtype=np.uint8)
    cdef Py_ssize_t n = c.shape[0]
    if b.shape[0] != n or o.shape[0] != n or s.shape[0] != n or nr.shape[0] != n:
        raise ValueError("indirect_groups: all columns must have one length")
    gid = np.empty(n, dtype=np.int64)
    gstride = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] g = gid
    cdef int64_t[::1] gs = gstride
    cdef Py_ssize_t ng
    with nogil:
        ng = _indirect_groups(c, b, o, s, nr, rec, limit, g, gs)
    return gid, gstride[:ng].copy()


cdef Py_ssize_t _indirect_groups(const int64_t[::1] cnt, const int64_t[::1] buf, const int64_t[::1] off,
                                 const int64_t[::1] st, const uint8_t[::1] nr, int64_t rec, int64_t limit,
                                 int64_t[::1] gid, int64_t[::1] gstride) noexcept nogil:
    cdef Py_ssize_t i, n = cnt.shape[0]
    cdef Py_ssize_t g = -1
    cdef int64_t g_buf = 0, g_off = 0, g_n = 0, g_stride = -1, want, c
    cdef bint ok
    for i in range(n):
        c = cnt[i]
        ok = False
        if i > 0 and not nr[i] and buf[i] == g_buf and g_n + c <= limit:
            want = off[i] - g_off
            if g_stride < 0:  # stride not fixed yet: the group is one single draw
                ok = want >= rec and want % 4 == 0 and (c == 1 or st[i] == want)
                if ok:
                    g_stride = want
            elif g_stride == 0:
                ok = want == 0 and (c == 1 or st[i] == 0)
            else:  # want == g_n * g_stride, without overflowing
                ok = want % g_stride == 0 and want / g_stride == g_n and (c == 1 or st[i] == g_stride)
        if ok:
            g_n += c
        else:
            if g >= 0:
                gstride[g] = g_stride
            g += 1
            g_buf = buf[i]
            g_off = off[i]
            g_n = c
            g_stride = st[i] if c > 1 else -1
        gid[i] = g
    if g >= 0:
        gstride[g] = g_stride
    return g + 1


def layout(zone, stride, nrec, restore, limit, align):
    """Lay out the per-draw array sections of readers sorted by zone.

    Parameters
    ----------
    zone, stride, nrec, restore, limit, align : int64[u]
        Each reader's zone, record stride (bytes), records, index its records must sit at
        (-1: the first multiple of its stride not yet used), most bytes one binding
        addresses, and the buffer alignment of a section it starts.

    Returns
    -------
    idx, section : int64[u]
        Each reader's first record index in its section, and that section.
    first, offset : int64[sections]
        Each section's first reader and byte offset in the buffer.
    total : int
        The buffer's size in bytes (each section at least 4 bytes).
    """
    cdef const int64_t[::1] z = np.ascontiguousarray(zone, dtype=np.int64)
    cdef const int64_t[::1] s = np.ascontiguousarray(stride, dtype=np.int64)
    cdef const int64_t[::1] n = np.ascontiguousarray(nrec, dtype=np.int64)
    cdef const int64_t[::1] rs = np.ascontiguousarray(restore, dtype=np.int64)
    cdef const int64_t[::1] lim = np.ascontiguousarray(limit, dtype=np.int64)
    cdef const int64_t[::1] al = np.ascontiguousarray(align, dtype=np.int64)
    cdef Py_ssize_t u = z.shape[0]
    if s.shape[0] != u or n.shape[0] != u or rs.shape[0] != u or lim.shape[0] != u or al.shape[0] != u:
        raise ValueError("layout: all columns must have one length")
    idx = np.empty(u, dtype=np.int64)
    sec = np.empty(u, dtype=np.int64)
    first = np.empty(u, dtype=np.int64)
    offset = np.empty(u, dtype=np.int64)
    cdef int64_t[::1] iv = idx
    cdef int64_t[::1] sv = sec
    cdef int64_t[::1] fv = first
    cdef int64_t[::1] ov = offset
    cdef Py_ssize_t ns
    cdef int64_t total = 0
    with nogil:
        ns = _layout(z, s, n, rs, lim, al, iv, sv, fv, ov, &total)
    return idx, sec, first[:ns].copy(), offset[:ns].copy(), int(total)


cdef inline int64_t _close(Py_ssize_t ns, int64_t nbytes, int64_t total, const int64_t[::1] align,
                           int64_t[::1] first, int64_t[::1] offset) noexcept nogil:
    """Place open section ``ns - 1`` (``nbytes`` long) after ``total`` bytes: the new total."""
    cdef int64_t a = align[first[ns - 1]]
    cdef int64_t at = ((total + a - 1) // a) * a
    offset[ns - 1] = at
    return at + (nbytes if nbytes > 4 else 4)


cdef Py_ssize_t _layout(const int64_t[::1] zone, const int64_t[::1] stride, const int64_t[::1] nrec,
                        const int64_t[::1] restore, const int64_t[::1] limit, const int64_t[::1] align,
                        int64_t[::1] idx, int64_t[::1] sec, int64_t[::1] first, int64_t[::1] offset,
                        int64_t* total) noexcept nogil:
    cdef Py_ssize_t u, n = zone.shape[0]
    cdef Py_ssize_t ns = 0
    cdef int64_t nbytes = 0, i, s, t = 0
    cdef bint is_open = False
    for u in range(n):
        if u > 0 and zone[u] != zone[u - 1]:
            if is_open:
                t = _close(ns, nbytes, t, align, first, offset)
                is_open = False
            nbytes = 0
        s = stride[u]
        if restore[u] >= 0:
            i = restore[u]
            if i * s < nbytes or (i + nrec[u]) * s > limit[u]:
                if is_open:
                    t = _close(ns, nbytes, t, align, first, offset)
                    is_open = False
                nbytes = 0
        else:
            i = (nbytes + s - 1) // s
            if is_open and (i + nrec[u]) * s > limit[u]:
                t = _close(ns, nbytes, t, align, first, offset)
                is_open = False
                nbytes = 0
                i = 0
        if not is_open:
            first[ns] = u
            ns += 1
            is_open = True
        idx[u] = i
        sec[u] = ns - 1
        nbytes = (i + nrec[u]) * s
    if is_open:
        t = _close(ns, nbytes, t, align, first, offset)
    total[0] = t
    return ns


ctypedef fused rowint:
    int32_t
    int64_t


cdef object _rows_arg(object rows):
    """``rows`` as a C-contiguous int32 matrix where it is int32 (a state table's rows: read in
    place), else as int64."""
    r = np.asarray(rows)
    return np.ascontiguousarray(r, dtype=np.int32 if r.dtype == np.int32 else np.int64)


def varying_columns(rows):
    """Columns of the integer matrix ``rows`` where some row differs from the first
    (``np.flatnonzero((rows != rows[:1]).any(axis=0))``).

    Returns
    -------
    cols : int64[c]
        Increasing column indices.
    """
    r = _rows_arg(rows)
    if r.ndim != 2:
        raise ValueError("varying_columns needs a matrix")
    diff = np.zeros(r.shape[1], dtype=np.uint8)
    if r.shape[0]:
        if r.dtype == np.int32:
            _varying[int32_t](r, diff)
        else:
            _varying[int64_t](r, diff)
    return np.flatnonzero(diff).astype(np.int64)


cdef void _varying(const rowint[:, ::1] r, uint8_t[::1] d) noexcept nogil:
    cdef Py_ssize_t i, j, n = r.shape[0], k = r.shape[1]
    cdef Py_ssize_t left = k
    for i in range(1, n):
        for j in range(k):
            d[j] |= r[i, j] != r[0, j]
        if (i & 63) == 0:   # every column already varies: nothing more to learn
            left = 0
            for j in range(k):
                left += not d[j]
            if left == 0:
                return


def key_rows(rows, sidx, keep, int64_t mask_col, int64_t masked, nat, extra):
    """Key rows of draws: row ``sidx[i]`` of ``rows`` restricted to columns ``keep``
    (column ``mask_col`` of that set to ``masked`` where ``nat[i]``; -1: none), then
    the row ``extra[i]``.

    Parameters
    ----------
    rows : int32[s, NSLOTS] (a state table's) or int64
    sidx : int64[m]
        Row of ``rows`` of each key row.
    keep : int64[k]
    nat : uint8[m]
    extra : int64[m, e]

    Returns
    -------
    out : int64[m, k + e]
    """
    r = _rows_arg(rows)
    if r.ndim != 2:
        raise ValueError("key_rows: rows must be a matrix")
    cdef const int64_t[::1] si = np.ascontiguousarray(sidx, dtype=np.int64)
    cdef const int64_t[::1] kp = np.ascontiguousarray(keep, dtype=np.int64)
    cdef const uint8_t[::1] nt = np.ascontiguousarray(nat, dtype=np.uint8)
    cdef const int64_t[:, ::1] ex = np.ascontiguousarray(extra, dtype=np.int64)
    cdef Py_ssize_t m = si.shape[0], k = kp.shape[0], e = ex.shape[1]
    if nt.shape[0] != m or ex.shape[0] != m:
        raise ValueError("key_rows: sidx, nat and extra must have one length")
    if m and (np.min(sidx) < 0 or np.max(sidx) >= r.shape[0]):
        raise ValueError("key_rows: row index out of range")
    if k and (np.min(keep) < 0 or np.max(keep) >= r.shape[1]):
        raise ValueError("key_rows: column index out of range")
    if mask_col >= k:
        raise ValueError("key_rows: mask column out of range")
    out = np.empty((m, k + e), dtype=np.int64)
    if r.dtype == np.int32:
        _key_rows[int32_t](r, si, kp, mask_col, masked, nt, ex, out)
    else:
        _key_rows[int64_t](r, si, kp, mask_col, masked, nt, ex, out)
    return out


cdef void _key_rows(const rowint[:, ::1] r, const int64_t[::1] si, const int64_t[::1] kp, int64_t mask_col,
                    int64_t masked, const uint8_t[::1] nt, const int64_t[:, ::1] ex,
                    int64_t[:, ::1] o) noexcept nogil:
    cdef Py_ssize_t i, j, m = si.shape[0], k = kp.shape[0], e = ex.shape[1]
    cdef int64_t s
    for i in range(m):
        s = si[i]
        for j in range(k):
            o[i, j] = r[s, kp[j]]
        if mask_col >= 0 and nt[i]:
            o[i, mask_col] = masked
        for j in range(e):
            o[i, k + j] = ex[i, j]


def perdraw_records(data, base, ninst, words, bv, seen, lift, row):
    """Write the per-draw array's records into ``data`` (uint32, in place): member ``m``
    has ``ninst[m]`` records of ``words[m]`` words from word ``base[m]``; record ``i``
    holds ``bv[m]``, ``seen[m] + i`` and ``lift[row[m], :words[m] - 2]`` (each as its
    low 32 bits).

    Parameters
    ----------
    data : uint32[N]
    base, ninst, words, bv, seen, row : int64[m]
    lift : int64[D, W]
    """
    cdef uint32_t[::1] d = data
    cdef const int64_t[::1] b = np.ascontiguousarray(base, dtype=np.int64)
    cdef const int64_t[::1] ni = np.ascontiguousarray(ninst, dtype=np.int64)
    cdef const int64_t[::1] w = np.ascontiguousarray(words, dtype=np.int64)
    cdef const int64_t[::1] v = np.ascontiguousarray(bv, dtype=np.int64)
    cdef const int64_t[::1] sn = np.ascontiguousarray(seen, dtype=np.int64)
    cdef const int64_t[:, ::1] lv = np.ascontiguousarray(lift, dtype=np.int64)
    cdef const int64_t[::1] rw = np.ascontiguousarray(row, dtype=np.int64)
    cdef Py_ssize_t m = b.shape[0]
    if ni.shape[0] != m or w.shape[0] != m or v.shape[0] != m or sn.shape[0] != m or rw.shape[0] != m:
        raise ValueError("perdraw_records: all member columns must have one length")
    cdef Py_ssize_t bad
    with nogil:
        bad = _perdraw_records(d, b, ni, w, v, sn, lv, rw)
    if bad >= 0:
        raise ValueError(f"perdraw_records: member {bad} writes outside the array")


cdef Py_ssize_t _perdraw_records(uint32_t[::1] d, const int64_t[::1] b, const int64_t[::1] ni,
                                 const int64_t[::1] w, const int64_t[::1] v, const int64_t[::1] sn,
                                 const int64_t[:, ::1] lv, const int64_t[::1] rw) noexcept nogil:
    """Returns -1, or the first member whose records fall outside ``d`` (nothing written
    for it or after it)."""
    cdef Py_ssize_t m, i, j, p, n = d.shape[0], mm = b.shape[0]
    cdef int64_t nw, cnt, r
    cdef uint32_t bvw
    for m in range(mm):
        nw = w[m]
        cnt = ni[m]
        r = rw[m]
        if cnt <= 0:
            continue
        if nw < 2 or b[m] < 0 or b[m] + cnt * nw > n or (nw > 2 and (r < 0 or r >= lv.shape[0]
                                                                      or nw - 2 > lv.shape[1])):
            return m
        bvw = <uint32_t>v[m]   # the low 32 bits (conversion to unsigned is modular)
        p = b[m]
        for i in range(cnt):
            d[p] = bvw
            d[p + 1] = <uint32_t>(sn[m] + i)
            for j in range(nw - 2):
                d[p + 2 + j] = <uint32_t>lv[r, j]
            p += nw
    return -1


def chain_words(vids, row_of, partial, filled, ks, other):
    """Root-constant words of values ``vids`` from their chain (``row_of``: row of
    ``filled`` of each value id, -1: none), split into the words ``ks`` and ``other``.

    Value ``i`` is ``ok`` when ``vids[i] >= 0``, it has a row, it is not a partial
    update (``partial``) and its words ``ks`` are all defined (>= 0). A value without a
    row reads row 0 (its words are not used).

    Parameters
    ----------
    vids : int64[m]
    row_of : int64[values + 1]
    partial : bool[values + 1]
    filled : int64[rows, W]
    ks, other : int64[k], int64[r]
        Word columns (each < W).

    Returns
    -------
    ok : bool[m]
    lifted : int64[m, k]
    rest : int64[m, r]
    """
    cdef const int64_t[::1] v = np.ascontiguousarray(vids, dtype=np.int64)
    cdef const int64_t[::1] ro = np.ascontiguousarray(row_of, dtype=np.int64)
    cdef const uint8_t[::1] pa = np.ascontiguousarray(partial, dtype=np.bool_).view(np.uint8)
    cdef const int64_t[:, ::1] f = np.ascontiguousarray(filled, dtype=np.int64)
    cdef const int64_t[::1] kk = np.ascontiguousarray(ks, dtype=np.int64)
    cdef const int64_t[::1] oo = np.ascontiguousarray(other, dtype=np.int64)
    cdef Py_ssize_t m = v.shape[0], k = kk.shape[0], r = oo.shape[0]
    if m and (np.max(vids) >= ro.shape[0] or pa.shape[0] < ro.shape[0] or f.shape[0] == 0):
        raise ValueError("chain_words: value id out of range")
    if (k and (np.min(ks) < 0 or np.max(ks) >= f.shape[1])) or (r and (np.min(other) < 0 or
                                                                      np.max(other) >= f.shape[1])):
        raise ValueError("chain_words: word column out of range")
    if m and np.max(row_of) >= f.shape[0]:
        raise ValueError("chain_words: row out of range")
    ok = np.empty(m, dtype=np.bool_)
    lifted = np.empty((m, k), dtype=np.int64)
    rest = np.empty((m, r), dtype=np.int64)
    cdef uint8_t[::1] o = ok.view(np.uint8)
    cdef int64_t[:, ::1] lv = lifted
    cdef int64_t[:, ::1] rv = rest
    with nogil:
        _chain_words(v, ro, pa, f, kk, oo, o, lv, rv)
    return ok, lifted, rest


cdef void _chain_words(const int64_t[::1] v, const int64_t[::1] ro, const uint8_t[::1] pa,
                       const int64_t[:, ::1] f, const int64_t[::1] kk, const int64_t[::1] oo,
                       uint8_t[::1] ok, int64_t[:, ::1] lv, int64_t[:, ::1] rv) noexcept nogil:
    cdef Py_ssize_t i, j, m = v.shape[0], k = kk.shape[0], r = oo.shape[0]
    cdef int64_t vid, row, w
    cdef bint good
    for i in range(m):
        vid = v[i]
        good = vid >= 0
        if vid < 0:
            vid = 0
        row = ro[vid] if good else -1
        good = good and row >= 0 and not pa[vid]
        if row < 0:
            row = 0
        for j in range(k):
            w = f[row, kk[j]]
            lv[i, j] = w
            if w < 0:
                good = False
        for j in range(r):
            rv[i, j] = f[row, oo[j]]
        ok[i] = good


def run_facts(op, args, pipe, first, length, kind, state, has_lift, eligible, has_nat, pinned, decl_pd, decl_cap,
              int64_t di, int64_t dii, int64_t col_inst, int64_t col_si_di, int64_t col_si_dii,
              int64_t min_di, int64_t min_dii, int64_t max_lifted, int64_t max_restore):
    """Per-draw and per-run facts of the lift decision (``drawopt.passes.mdi._lifted_runs``).

    A draw of opcode ``di`` / ``dii`` is direct: its instances are ``args[:, col_inst]``
    (else 0) and its StartInstanceLocation the low 32 bits of ``args[:, col_si_di]`` /
    ``args[:, col_si_dii]``; its pipeline ``pipe`` gives its per-draw parameter
    ``decl_pd`` (-1: none) and the records one binding addresses ``decl_cap`` (0 without a
    parameter); it fits when its instances are at most that.

    Returns
    -------
    draw_pd : int64[n]
    restorable : bool[n]
        A draw with ``has_nat``, direct, that fits (pinned: whose StartInstanceLocation +
        instances is at most ``max_restore`` and the cap).
    run_pd : int64[R]
        The parameter of a run whose first draw has ``has_lift`` and ``eligible``, whose
        instances sum to at most ``max_lifted`` and whose draws all fit; else -1.
    beneficial : bool[R]
        A run of kind 1 (2) of at least ``min_di`` (``min_dii``) draws whose state changes
        somewhere after its first draw.
    """
    cdef const int64_t[::1] o = np.ascontiguousarray(op, dtype=np.int64)
    cdef const int64_t[:, ::1] a = np.ascontiguousarray(args, dtype=np.int64)
    cdef const int64_t[::1] pp = np.ascontiguousarray(pipe, dtype=np.int64)
    cdef const int64_t[::1] fi = np.ascontiguousarray(first, dtype=np.int64)
    cdef const int64_t[::1] ln = np.ascontiguousarray(length, dtype=np.int64)
    cdef const int64_t[::1] kd = np.ascontiguousarray(kind, dtype=np.int64)
    cdef const int64_t[::1] st = np.ascontiguousarray(state, dtype=np.int64)
    cdef const uint8_t[::1] hl = np.ascontiguousarray(has_lift, dtype=np.uint8)
    cdef const uint8_t[::1] el = np.ascontiguousarray(eligible, dtype=np.uint8)
    cdef const uint8_t[::1] hn = np.ascontiguousarray(has_nat, dtype=np.uint8)
    cdef const uint8_t[::1] pn = np.ascontiguousarray(pinned, dtype=np.uint8)
    cdef const int64_t[::1] dpd = np.ascontiguousarray(decl_pd, dtype=np.int64)
    cdef const int64_t[::1] dcap = np.ascontiguousarray(decl_cap, dtype=np.int64)
    cdef Py_ssize_t n = o.shape[0], nr = fi.shape[0]
    if (a.shape[0] != n or pp.shape[0] != n or kd.shape[0] != n or st.shape[0] != n or hl.shape[0] != n
            or el.shape[0] != n or hn.shape[0] != n or pn.shape[0] != n or ln.shape[0] != nr):
        raise ValueError("run_facts: per-draw columns must have one length, first and length another")
    if n and (np.min(pipe) < -dpd.shape[0] or np.max(pipe) >= dpd.shape[0] or dcap.shape[0] != dpd.shape[0]):
        raise ValueError("run_facts: pipeline index out of range")
    if max(col_inst, col_si_di, col_si_dii) >= a.shape[1] or min(col_inst, col_si_di, col_si_dii) < 0:
        raise ValueError("run_facts: argument column out of range")
    fa, la = np.asarray(first, np.int64), np.asarray(length, np.int64)
    if (n and not nr) or (nr and (fa[0] != 0 or fa[nr - 1] + la[nr - 1] != n or np.min(la) < 1
                                  or not np.array_equal(fa[1:], fa[:-1] + la[:-1]))):
        raise ValueError("run_facts: the runs must cover the draws, in order")
    draw_pd = np.empty(n, dtype=np.int64)
    restorable = np.zeros(n, dtype=np.bool_)
    run_pd = np.empty(nr, dtype=np.int64)
    beneficial = np.zeros(nr, dtype=np.bool_)
    cdef int64_t[::1] dp = draw_pd
    cdef uint8_t[::1] rs = restorable.view(np.uint8)
    cdef int64_t[::1] rp = run_pd
    cdef uint8_t[::1] bf = beneficial.view(np.uint8)
    with nogil:
        _run_facts(o, a, pp, fi, ln, kd, st, hl, el, hn, pn, dpd, dcap, di, dii, col_inst, col_si_di, col_si_dii,
                   min_di, min_dii, max_lifted, max_restore, dp, rs, rp, bf)
    return draw_pd, restorable, run_pd, beneficial


cdef void _run_facts(const int64_t[::1] o, const int64_t[:, ::1] a, const int64_t[::1] pp, const int64_t[::1] fi,
                     const int64_t[::1] ln, const int64_t[::1] kd, const int64_t[::1] st, const uint8_t[::1] hl,
                     const uint8_t[::1] el, const uint8_t[::1] hn, const uint8_t[::1] pn, const int64_t[::1] dpd,
                     const int64_t[::1] dcap, int64_t di, int64_t dii, int64_t col_inst, int64_t col_si_di,
                     int64_t col_si_dii, int64_t min_di, int64_t min_dii, int64_t max_lifted, int64_t max_restore,
                     int64_t[::1] dp, uint8_t[::1] rs, int64_t[::1] rp, uint8_t[::1] bf) noexcept nogil:
    cdef Py_ssize_t r, i, f, e, nr = fi.shape[0], nd = dpd.shape[0]
    cdef int64_t inst, cap, pdv, reach, total, p
    cdef bint direct, allfit, differs
    for r in range(nr):
        f = fi[r]
        e = f + ln[r]
        total = 0
        allfit = True
        differs = False
        for i in range(f, e):
            direct = o[i] == di or o[i] == dii
            inst = a[i, col_inst] if direct else 0
            p = pp[i]
            if p < 0:
                p += nd
            pdv = dpd[p]
            cap = dcap[p] if pdv >= 0 else 0
            dp[i] = pdv
            total += inst
            if inst > cap:
                allfit = False
            if i > f and st[i] != st[i - 1]:
                differs = True
            if hn[i] and direct:
                if pn[i]:
                    reach = <int64_t><uint32_t>(a[i, col_si_dii] if o[i] == dii else a[i, col_si_di]) + inst
                    rs[i] = reach <= max_restore and reach <= cap
                else:
                    rs[i] = inst <= cap
        rp[r] = dp[f] if (hl[f] and el[f] and total <= max_lifted and allfit) else -1
        bf[r] = ((kd[f] == 1 and ln[r] >= min_di) or (kd[f] == 2 and ln[r] >= min_dii)) and differs
