"""Hot loops of the ``schedule`` pass (``drawopt._schedule``): its state re-emission and two
steps of its sort key.

The model lives in :class:`drawopt.passes.schedule.Restater`; this module only
runs its emit loop over a run of input commands. ``emit_run`` is the public
wrapper; the typed loop handles the common cases (copying a setter, a root
constants command that writes every word, the state effects of a copy) and
calls back into the restater for the rare ones (partial root constants, vertex
buffers). The pure-Python twin is ``Restater._emit_all_py`` (a loop over
``Restater.emit``); the tests check that both give identical outputs.

``key_columns`` and ``stable_rank`` are steps of ``drawopt.passes.schedule.sort_keys``; their
pure twins are ``schedule._key_columns_py`` and ``schedule._stable_rank_py``.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t

__all__ = ["emit_run", "key_columns", "stable_rank", "F_CONST", "F_TABLE", "F_DRAWX", "F_OPAQUE", "F_STATE"]

# per-command flags (``flags`` argument)
F_CONST = 1    # sets root constants (a merge slot)
F_TABLE = 2    # sets a descriptor table
F_DRAWX = 4    # DrawIndexedX: leaves the index buffer undefined
F_OPAQUE = 8   # Opaque: every slot unknown
F_STATE = 16   # a state command (kept in place when emitted)

cdef enum:
    C_CONST = 1
    C_TABLE = 2
    C_DRAWX = 4
    C_OPAQUE = 8
    C_STATE = 16


cdef struct Layout:
    Py_ssize_t nslots
    int64_t gfx_rs, crs, heaps, ib, vb, root0, croot0, nroot
    int64_t masked, undefined, unknown


cdef bint _effect(int64_t src, const int64_t[::1] slot, const int64_t[::1] cval, const uint8_t[::1] flags,
                  int64_t[::1] inforce, uint8_t[::1] is_table, Layout* L) noexcept nogil:
    """State in force after input state command ``src`` is copied; True if other slots were reset
    (``Restater._effect_of_copy``)."""
    cdef int64_t k = slot[src], v, before, r, lo
    cdef int j
    cdef bint reset = False
    if k < 0:
        return False
    v = cval[src]
    before = inforce[k]
    if k == L.gfx_rs or k == L.crs:
        lo = L.root0 if k == L.gfx_rs else L.croot0
        if before == L.unknown:
            for r in range(lo, lo + L.nroot):
                if inforce[r] >= 0:
                    inforce[r] = L.unknown
                    reset = True
        elif before != v:
            for r in range(lo, lo + L.nroot):
                inforce[r] = L.undefined
                is_table[r] = 0
            reset = True
    elif k == L.heaps and (before == L.unknown or before != v):
        for j in range(2):
            lo = L.root0 if j == 0 else L.croot0
            for r in range(lo, lo + L.nroot):
                if inforce[r] >= 0 and is_table[r]:
                    inforce[r] = L.unknown if before == L.unknown else L.undefined
                    is_table[r] = 0
                    reset = True
    inforce[k] = v
    is_table[k] = 1 if flags[src] & C_TABLE else 0
    return reset


cdef inline bint _partly_unknown(int64_t x, const uint8_t[::1] partial, int64_t unknown) noexcept nogil:
    """Whether value ``x`` (or the marker) is, or continues, a partial update of an unknown
    value (``Restater._partial``)."""
    return x == unknown or (x >= 0 and x < partial.shape[0] and partial[x] != 0)


ctypedef fused rowint:
    int32_t
    int64_t


def emit_run(rs, cmds, tables, inforce, is_table, layout):
    """Emit input commands ``cmds`` in order, as ``for c in cmds: rs.emit(c)`` does.

    Parameters
    ----------
    rs : Restater
        The restater: its ``out`` buffer (``drawopt.passes.schedule.OutBuffer``: ``buf``,
        ``n``, ``reserve``) grows, ``last`` and ``emitted_state`` are updated; ``rs._set_constants`` / ``rs._set_vb`` are called for partial root
        constants and vertex buffers.
    cmds : int64[K]
        Input command indices.
    tables : tuple
        ``(obs_of int64[N+1], flags uint8[N], slot int64[N], cval int64[N], full uint8[N],
        oid int64[O], urows int32[U, S], setter int32[O, S], partial uint8[V])`` (``partial``:
        whether each value id is a partial update of an unknown value).
    inforce : int64[S]
        The value in force of every slot (updated in place; shared with ``rs``).
    is_table : uint8[S]
        Whether the value in force is a descriptor table (updated in place).
    layout : int64[11]
        ``(gfx_rootsig, compute_rootsig, heaps, index_buffer, vertex_buffers, root0,
        croot0, n_root, masked, undefined, unknown)``.

    Returns
    -------
    None, or ``(code, slot, value)`` when an observer's state cannot be re-created:
    code 1 the value it saw is undefined or unknown, code 2 no command sets it.
    Everything emitted before that point stays emitted (as the pure loop leaves it).
    """
    cdef const int64_t[::1] c = np.ascontiguousarray(cmds, dtype=np.int64)
    cdef const int64_t[::1] obs_of = tables[0]
    cdef const uint8_t[::1] flags = tables[1]
    cdef const int64_t[::1] slot = tables[2]
    cdef const int64_t[::1] cval = tables[3]
    cdef const uint8_t[::1] full = tables[4]
    cdef const int64_t[::1] oid = tables[5]
    cdef const int32_t[:, ::1] urows = tables[6]
    cdef const int32_t[:, ::1] setter = tables[7]
    cdef const uint8_t[::1] partial = tables[8]
    cdef int64_t[::1] inf = inforce
    cdef uint8_t[::1] tab = is_table
    cdef const int64_t[::1] lay = np.ascontiguousarray(layout, dtype=np.int64)
    cdef Layout L
    L.nslots = inf.shape[0]
    L.gfx_rs, L.crs, L.heaps, L.ib, L.vb = lay[0], lay[1], lay[2], lay[3], lay[4]
    L.root0, L.croot0, L.nroot = lay[5], lay[6], lay[7]
    L.masked, L.undefined, L.unknown = lay[8], lay[9], lay[10]
    if urows.shape[1] != L.nslots or setter.shape[1] != L.nslots or tab.shape[0] != L.nslots:
        raise ValueError("urows, setter, inforce and is_table must have one column per slot")
    out = rs.out  # an OutBuffer: written here directly, synced around calls back into rs
    cdef int64_t[::1] ob
    cdef Py_ssize_t n_out
    cdef int64_t last = rs.last
    cdef int64_t emitted = 0
    cdef Py_ssize_t i, k, n = c.shape[0], nobs = oid.shape[0], ncmd = flags.shape[0]
    cdef int64_t cmd, o, sid, v, src
    cdef uint8_t f
    out.reserve(L.nslots + 1)
    ob = out.buf
    n_out = out.n
    for i in range(n):
        cmd = c[i]
        if cmd < 0 or cmd >= ncmd:
            out.n = n_out
            raise IndexError(f"command {cmd} out of range")
        if n_out + L.nslots + 1 > ob.shape[0]:  # room for every setter of an observer and the command
            out.n = n_out
            out.reserve(L.nslots + 1)
            ob = out.buf
        o = obs_of[cmd]
        if o >= 0:
            if o >= nobs:
                out.n = n_out
                raise IndexError(f"observer {o} out of range")
            sid = oid[o]
            if sid != last:
                for k in range(L.nslots):
                    v = urows[sid, k]
                    if v == L.masked or v == inf[k]:
                        continue
                    if v < 0:
                        out.n = n_out
                        rs.last = last
                        rs.emitted_state += emitted
                        return (1, k, v)
                    src = setter[o, k]
                    if src < 0:
                        out.n = n_out
                        rs.last = last
                        rs.emitted_state += emitted
                        return (2, k, v)
                    f = flags[src]
                    if f & C_CONST:
                        # a write of every word leaves its words; copied alone it also keeps the
                        # chain's unknown flag right only if that flag is the same in force
                        if full[src] and (inf[k] == L.unknown or (_partly_unknown(inf[k], partial, L.unknown)
                                                                  and not tab[k])) \
                                == _partly_unknown(v, partial, L.unknown):
                            ob[n_out] = src
                            n_out += 1
                            emitted += 1
                            inf[k] = v
                            tab[k] = 0
                        else:
                            out.n = n_out
                            rs.last = last
                            rs.emitted_state += emitted
                            emitted = 0
                            rs._set_constants(k, v, src)
                            out.reserve(L.nslots + 1)
                            ob = out.buf
                            n_out = out.n
                        continue
                    if k == L.vb:
                        out.n = n_out
                        rs.last = last
                        rs.emitted_state += emitted
                        emitted = 0
                        rs._set_vb(v, src)
                        out.reserve(L.nslots + 1)
                        ob = out.buf
                        n_out = out.n
                        continue
                    ob[n_out] = src
                    n_out += 1
                    emitted += 1
                    _effect(src, slot, cval, flags, inf, tab, &L)
                last = sid
        ob[n_out] = cmd
        n_out += 1
        f = flags[cmd]
        if f & C_DRAWX:
            inf[L.ib] = L.undefined
            last = -1
        elif f & C_OPAQUE:
            for k in range(L.nslots):
                inf[k] = L.unknown
                tab[k] = 0
            last = -1
        elif f & C_STATE:
            _effect(cmd, slot, cval, flags, inf, tab, &L)
            last = -1
    out.n = n_out
    rs.last = last
    rs.emitted_state += emitted
    return None


def key_columns(rows, sel, cols):
    """``rows[sel][:, cols].T`` as ``int32[len(cols), len(sel)]`` (value ids and markers; one walk
    over the selected rows, each read once). ``sel`` None: every row; int32 ``rows`` (a state
    table's) are read in place, others as int64. Identical to
    ``drawopt.passes.schedule._key_columns_py``."""
    r = np.asarray(rows)
    r = np.ascontiguousarray(r, dtype=np.int32 if r.dtype == np.int32 else np.int64)
    if r.ndim != 2:
        raise ValueError("key_columns needs a matrix")
    cdef const int64_t[::1] cv = np.ascontiguousarray(cols, dtype=np.int64)
    cdef const int64_t[::1] sv
    cdef Py_ssize_t nrow = r.shape[0], ncol = r.shape[1], nc = cv.shape[0], u, i, j
    cdef bint every = sel is None
    if every:
        sv = np.zeros(0, np.int64)
        u = nrow
    else:
        sv = np.ascontiguousarray(sel, dtype=np.int64)
        u = sv.shape[0]
        for i in range(u):
            if sv[i] < 0 or sv[i] >= nrow:
                raise IndexError(f"row {sv[i]} out of range")
    for j in range(nc):
        if cv[j] < 0 or cv[j] >= ncol:
            raise IndexError(f"column {cv[j]} out of range")
    out = np.empty((nc, u), np.int32)
    if r.dtype == np.int32:
        _key_columns[int32_t](r, sv, cv, every, u, out)
    else:
        _key_columns[int64_t](r, sv, cv, every, u, out)
    return out


cdef void _key_columns(const rowint[:, ::1] r, const int64_t[::1] sv, const int64_t[::1] cv, bint every,
                       Py_ssize_t u, int32_t[:, ::1] o) noexcept nogil:
    """The walk of :func:`key_columns` (indices checked)."""
    cdef Py_ssize_t i, j, nc = cv.shape[0]
    cdef const rowint* row
    for i in range(u):
        row = &r[i if every else sv[i], 0]
        for j in range(nc):
            o[j, i] = <int32_t>row[cv[j]]


def stable_rank(key, Py_ssize_t nkeys):
    """Each element's position in a stable sort of ``key`` (values in ``0 .. nkeys-1``): a
    counting sort, ``int64[n]``. Identical to ``drawopt.passes.schedule._stable_rank_py``."""
    cdef const int64_t[::1] k = np.ascontiguousarray(key, dtype=np.int64)
    cdef Py_ssize_t n = k.shape[0], i
    for i in range(n):
        if k[i] < 0 or k[i] >= nkeys:
            raise IndexError(f"key {k[i]} out of range")
    start = np.zeros(nkeys + 1, np.int64)
    cdef int64_t[::1] st = start
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    cdef int64_t acc = 0, c
    with nogil:
        for i in range(n):
            st[k[i] + 1] += 1
        for i in range(nkeys + 1):
            acc += st[i]
            st[i] = acc
        for i in range(n):
            c = k[i]
            o[i] = st[c]
            st[c] += 1
    return out
