"""The flush model's transitions, compiled (``drawopt._flush``).

The model lives in :mod:`drawopt.analysis.flushrules`: :class:`~drawopt.analysis.flushrules.FlushTracker`
is its pure-Python form and this module its twin, run over the same events
(:class:`~drawopt.analysis.flushrules.FlushEvents`) by its two consumers:

* ``pending``: the pending writes at every front-end read and, for ``frontend``
  buffers, at the end (``flushrules.pending_reads``; twin ``flushrules._pending_py``),
  what validate's ``missing-flush`` rule reports;
* ``plan``: the flush pass's planner, which inserts sequences as it goes
  (``drawopt.passes.flush.plan_flushes``; twin ``drawopt.passes.flush._plan_py``).

State per writer class ``k`` (0 cs, 1 cs+partial, 2 vs, 3 ps, 4 async) and buffer ``b``:
``und[k, b]`` / ``dra[k, b]`` the latest write, undrained / drained and not yet visible
(-1: none), and ``drained[b]``: some write of ``b`` drained, not yet visible (what an
L2 flush makes progress on). Lists of the buffers holding an entry (stale entries are
skipped) let a flush visit only what it changes. The tests check that both paths give
identical results.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t

__all__ = ["pending", "plan"]

cdef enum:
    EV_READ = 0
    EV_WRITE = 1
    EV_BARRIER = 2
    EV_USE = 3
    EV_FLUSH = 4
    EV_OPAQUE = 5
    K_CS = 0
    K_ASYNC = 4
    NK = 5
    EFF_L2 = 3
    EFF_BOP = 4
    UNDRAINED = 2
    DRAINED = 1


cdef class _Model:
    cdef int64_t nb, cap
    cdef int64_t[::1] und, dra, ulist, dlist
    cdef uint8_t[::1] drained
    cdef int64_t ulen[NK]
    cdef int64_t n_und[NK]
    cdef int64_t dlen, n_drained, last_opaque

    def __init__(self, int64_t nb, int64_t cap):
        self.nb = nb
        self.cap = cap + 1
        self.und = np.full(NK * nb, -1, np.int64)
        self.dra = np.full(NK * nb, -1, np.int64)
        self.ulist = np.zeros(NK * self.cap, np.int64)
        self.dlist = np.zeros(self.cap, np.int64)
        self.drained = np.zeros(nb, np.uint8)
        for k in range(NK):
            self.ulen[k] = 0
            self.n_und[k] = 0
        self.dlen = 0
        self.n_drained = 0
        self.last_opaque = -1

    cdef inline void mark_drained(self, int64_t b) noexcept:
        if not self.drained[b]:
            self.drained[b] = 1
            self.n_drained += 1
            self.dlist[self.dlen] = b
            self.dlen += 1

    cdef inline void add(self, int64_t cmd, int64_t b, int64_t k) noexcept:
        cdef int64_t idx = k * self.nb + b
        if k == K_CS:
            self.dra[idx] = cmd
            self.mark_drained(b)
            return
        if self.und[idx] < 0:
            self.ulist[k * self.cap + self.ulen[k]] = b
            self.ulen[k] += 1
            self.n_und[k] += 1
        self.und[idx] = cmd
        self.dra[idx] = -1

    cdef bint event(self, int64_t s) noexcept:
        cdef int64_t k = s + 1, i, b, idx
        if self.n_und[k] == 0:
            self.ulen[k] = 0
            return False
        for i in range(self.ulen[k]):
            b = self.ulist[k * self.cap + i]
            idx = k * self.nb + b
            if self.und[idx] >= 0:
                self.dra[idx] = self.und[idx]
                self.und[idx] = -1
                self.mark_drained(b)
        self.ulen[k] = 0
        self.n_und[k] = 0
        return True

    cdef bint l2(self) noexcept:
        cdef int64_t i, b, k
        if self.n_drained == 0:
            self.dlen = 0
            return False
        for i in range(self.dlen):
            b = self.dlist[i]
            if self.drained[b]:
                self.drained[b] = 0
                for k in range(NK):
                    self.dra[k * self.nb + b] = -1
        self.dlen = 0
        self.n_drained = 0
        return True

    cdef bint pending_any(self) noexcept:
        cdef int64_t k
        if self.n_drained:
            return True
        for k in range(NK):
            if self.n_und[k]:
                return True
        return False

    cdef bint bop(self) noexcept:
        cdef bint changed = self.pending_any()
        cdef int64_t k, i
        self.l2()
        for k in range(NK):
            for i in range(self.ulen[k]):
                self.und[k * self.nb + self.ulist[k * self.cap + i]] = -1
            self.ulen[k] = 0
            self.n_und[k] = 0
        return changed

    cdef bint barrier(self, int64_t b) noexcept:
        cdef bint changed = False
        cdef int64_t k, idx
        if self.drained[b]:
            self.drained[b] = 0
            self.n_drained -= 1
            changed = True
        for k in range(NK):
            idx = k * self.nb + b
            if self.und[idx] >= 0:
                self.und[idx] = -1
                self.n_und[k] -= 1
                changed = True
            self.dra[idx] = -1
        return changed

    cdef bint apply(self, int64_t eff) noexcept:
        if eff == EFF_L2:
            return self.l2()
        if eff == EFF_BOP:
            return self.bop()
        return self.event(eff)

    cdef inline bint need(self, int64_t b) noexcept:
        cdef int64_t k
        if self.drained[b]:
            return True
        for k in range(NK):
            if self.und[k * self.nb + b] >= 0:
                return True
        return False

    cdef inline int64_t stage_mask(self, int64_t b) noexcept:
        """Bit s: an undrained write of stage class s (graphics classes 1-3)."""
        cdef int64_t s, m = 0
        for s in range(3):
            if self.und[(s + 1) * self.nb + b] >= 0:
                m |= 1 << s
        return m

    cdef void cover(self, int64_t mask, bint graphics) noexcept:
        cdef int64_t s
        if not graphics:
            self.bop()
            return
        for s in range(3):
            if mask & (1 << s):
                self.event(s)
        self.l2()


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def pending(cmd, kind, a, b, int64_t nbuf, bint graphics, frontend):
    """``(row, buf, class, writer, state, unknown)`` int64 columns; see ``flushrules._pending_py``."""
    cdef const int64_t[::1] c_ = _i64(cmd), k_ = _i64(kind), a_ = _i64(a), b_ = _i64(b)
    cdef const uint8_t[::1] fe = np.ascontiguousarray(frontend, dtype=np.uint8)
    cdef int64_t m = c_.shape[0], i, j, kk, w, st, cap = 16, nout = 0, nw = 0
    for i in range(m):
        if k_[i] == EV_WRITE:
            nw += 1
    cdef _Model md = _Model(nbuf, nw)
    out = np.empty((6, cap), np.int64)
    cdef int64_t[:, ::1] o = out
    cdef int64_t buf
    for i in range(m + nbuf):
        if i < m:
            if k_[i] == EV_WRITE:
                md.add(c_[i], a_[i], b_[i])
                continue
            if k_[i] == EV_BARRIER:
                md.barrier(a_[i])
                continue
            if k_[i] == EV_FLUSH:
                md.apply(a_[i])
                continue
            if k_[i] == EV_OPAQUE:
                md.last_opaque = c_[i]
                continue
            if k_[i] != EV_READ:
                continue
            buf = a_[i]
            j = b_[i]
        else:
            buf = i - m
            if not fe[buf]:
                continue
            j = -1
        for kk in range(NK):
            w = md.und[kk * nbuf + buf]
            st = UNDRAINED
            if w < 0:
                w = md.dra[kk * nbuf + buf]
                st = DRAINED
            if w < 0:
                continue
            if nout == cap:
                cap *= 2
                out2 = np.empty((6, cap), np.int64)
                out2[:, :nout] = out[:, :nout]
                out = out2
                o = out
            o[0, nout] = j
            o[1, nout] = buf
            o[2, nout] = kk
            o[3, nout] = w
            o[4, nout] = st
            o[5, nout] = 1 if md.last_opaque > w else 0
            nout += 1
    return tuple(np.ascontiguousarray(out[r, :nout]) for r in range(6))


def plan(cmd, kind, a, b, int64_t nbuf, bint graphics, frontend, int64_t n, rd_start, rd_cmd, write_cmds,
         flush_cmds, bint drop_redundant, bint coalesce):
    """``(insert command, stage mask, drops)``; see ``drawopt.passes.flush._plan_py``."""
    cdef const int64_t[::1] c_ = _i64(cmd), k_ = _i64(kind), a_ = _i64(a), b_ = _i64(b)
    cdef const uint8_t[::1] fe = np.ascontiguousarray(frontend, dtype=np.uint8)
    cdef const int64_t[::1] rs = _i64(rd_start), rcm = _i64(rd_cmd), wcm = _i64(write_cmds), fcm = _i64(flush_cmds)
    cdef int64_t m = c_.shape[0], i, c, s, bb, mask, h, nr, idx, t, nw = 0, nins = 0, ndrop = 0
    cdef int64_t wptr = 0, fptr = 0, nwc = wcm.shape[0], nfc = fcm.shape[0]
    cdef int64_t umax[3]
    cdef bint need, useful, hit
    for i in range(m):
        if k_[i] == EV_WRITE:
            nw += 1
    cdef _Model md = _Model(nbuf, nw)
    cursor_a = _i64(rd_start)[:nbuf].copy()
    cdef int64_t[::1] cursor = cursor_a
    ins_c_a = np.empty(m + 1, np.int64)
    ins_m_a = np.empty(m + 1, np.int64)
    drops_a = np.empty(m + 1, np.int64)
    cdef int64_t[::1] ins_c = ins_c_a, ins_m = ins_m_a, drops = drops_a
    for s in range(3):
        umax[s] = -1
    i = 0
    while i < m:
        c = c_[i]
        if k_[i] == EV_READ:
            need = False
            mask = 0
            while i < m and c_[i] == c and k_[i] == EV_READ:
                bb = a_[i]
                if md.need(bb):
                    need = True
                    if graphics:
                        mask |= md.stage_mask(bb)
                i += 1
            if need:
                if coalesce and graphics:
                    # horizon: the next relevant write at or after c, or (keeping input flushes) the next input
                    # flush after c
                    while wptr < nwc and wcm[wptr] < c:
                        wptr += 1
                    h = wcm[wptr] if wptr < nwc else n + 1
                    if not drop_redundant:
                        while fptr < nfc and fcm[fptr] <= c:
                            fptr += 1
                        if fptr < nfc and fcm[fptr] < h:
                            h = fcm[fptr]
                    for s in range(3):
                        if mask & (1 << s):
                            continue
                        hit = False
                        for t in range(md.ulen[s + 1]):
                            bb = md.ulist[(s + 1) * md.cap + t]
                            if md.und[(s + 1) * nbuf + bb] < 0:
                                continue
                            while cursor[bb] < rs[bb + 1] and rcm[cursor[bb]] <= c:
                                cursor[bb] += 1
                            nr = rcm[cursor[bb]] if cursor[bb] < rs[bb + 1] else (n if fe[bb] else n + 1)
                            if nr < h:
                                hit = True
                                break
                        if hit:
                            mask |= 1 << s
                ins_c[nins] = c
                ins_m[nins] = mask
                nins += 1
                md.cover(mask, graphics)
                for s in range(3):
                    if not graphics or mask & (1 << s):
                        umax[s] = -1
            continue
        if k_[i] == EV_WRITE:
            md.add(c, a_[i], b_[i])
        elif k_[i] == EV_BARRIER:
            md.barrier(a_[i])
        elif k_[i] == EV_USE:
            if b_[i] > umax[a_[i]]:
                umax[a_[i]] = b_[i]
        elif k_[i] == EV_FLUSH:
            useful = md.apply(a_[i])
            for s in range(3):
                if a_[i] == s or a_[i] == EFF_BOP:
                    if umax[s] > c:
                        useful = True
                    umax[s] = -1
            if drop_redundant and not useful:
                drops[ndrop] = c
                ndrop += 1
        i += 1
    # the end of the stream: buffers another command list reads through its front end
    mask = 0
    need = False
    for bb in range(nbuf):
        if fe[bb] and md.need(bb):
            need = True
            if graphics:
                mask |= md.stage_mask(bb)
    if need:
        ins_c[nins] = n
        ins_m[nins] = mask
        nins += 1
    return ins_c_a[:nins].copy(), ins_m_a[:nins].copy(), drops_a[:ndrop].copy()
