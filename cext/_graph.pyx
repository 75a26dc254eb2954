"""Hot loops of the dependency-graph builder (``drawopt._graph``).

The model lives in :mod:`drawopt.analysis.graph`; this module only runs its sequential
loops. Each public function fixes dtypes and contiguity and calls a typed
kernel that runs without the GIL. The pure-Python twins are
``drawopt.analysis.graph._assign_nodes_py``, ``drawopt.analysis.graph._two_path_reduce_py``,
``drawopt.analysis.graph._act_setter_events_py``, ``drawopt.analysis.graph._state_reads_py``,
``drawopt.analysis.graph._hazard_pairs_py``, ``drawopt.analysis.graph._action_signatures_py`` and
``drawopt.analysis.graph._spread_accesses_py``;
the tests check that both give identical arrays.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

__all__ = ["assign_nodes", "two_path_reduce", "act_setter_events", "state_reads", "hazard_pairs",
           "action_signatures", "spread_accesses"]


def assign_nodes(kind, solo, maxpred, wsig):
    """Node of every segment: a new node starts at a segment whose kind differs from the
    previous one, whose kind is ``solo`` (never shares a node), which has a hazard
    predecessor at or after the node's first segment, or whose write signature differs.

    Parameters
    ----------
    kind : int64[S]
        Segment kind.
    solo : bool[S]
        Segments that are always a node of their own.
    maxpred : int64[S]
        Latest segment with a hazard edge into each segment (-1: none).
    wsig : uint64[S]
        Signature of the resources each segment writes.

    Returns
    -------
    int64[S]
        Node ids, 0-based and non-decreasing.
    """
    kind = np.ascontiguousarray(kind, dtype=np.int64)
    solo = np.ascontiguousarray(solo, dtype=np.uint8)
    maxpred = np.ascontiguousarray(maxpred, dtype=np.int64)
    wsig = np.ascontiguousarray(wsig, dtype=np.uint64)
    n = kind.shape[0]
    if not (solo.shape[0] == maxpred.shape[0] == wsig.shape[0] == n):
        raise ValueError("kind, solo, maxpred and wsig must have the same length")
    out = np.empty(n, dtype=np.int64)
    _assign_nodes(kind, solo, maxpred, wsig, out)
    return out


cdef void _assign_nodes(const int64_t[::1] kind, const uint8_t[::1] solo, const int64_t[::1] maxpred,
                        const uint64_t[::1] wsig, int64_t[::1] out) noexcept nogil:
    cdef Py_ssize_t i, n = kind.shape[0]
    cdef int64_t cur = -1, first = 0
    for i in range(n):
        if (cur < 0 or kind[i] != kind[i - 1] or solo[i] or maxpred[i] >= first
                or wsig[i] != wsig[i - 1]):
            cur += 1
            first = i
        out[i] = cur


def two_path_reduce(u, v, state_only, int64_t nn, int64_t cap):
    """Keep-mask of edges not implied by a path of two edges (``drawopt.analysis.graph._two_path_reduce``).

    Parameters
    ----------
    u, v : int64[E]
        Edges between nodes ``0 .. nn-1``, no duplicates.
    state_only : bool[E]
        Edges whose only reason is ``state``.
    nn : int
        Number of nodes.
    cap : int
        A middle node with more than ``cap`` (predecessor, successor) pairs is not used.

    Returns
    -------
    bool[E]
        A hazard edge is dropped when a path of two hazard edges joins its ends, a
        ``state``-only edge when any path of two edges does.
    """
    u = np.ascontiguousarray(u, dtype=np.int64)
    v = np.ascontiguousarray(v, dtype=np.int64)
    so = np.ascontiguousarray(state_only, dtype=np.uint8)
    m = u.shape[0]
    if not (v.shape[0] == so.shape[0] == m):
        raise ValueError("u, v and state_only must have the same length")
    if m and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= nn):
        raise ValueError("node id out of range")
    keep = np.ones(m, dtype=np.uint8)
    if m < 2:
        return keep.astype(bool)
    # CSR of all edges by source (counting sort keeps the input order within a row)
    start = np.zeros(nn + 1, dtype=np.int64)
    np.add.at(start, u + 1, 1)
    np.cumsum(start, out=start)
    order = np.argsort(u, kind="stable").astype(np.int64)
    indeg = np.zeros(nn, dtype=np.int64)
    outdeg = np.zeros(nn, dtype=np.int64)
    stamp = np.empty(nn, dtype=np.int64)
    where = np.empty(nn, dtype=np.int64)
    for hazard in (1, 0):
        _two_path(u, v, so, start, order, hazard, cap, indeg, outdeg, stamp, where, keep)
    return keep.astype(bool)


cdef void _two_path(const int64_t[::1] u, const int64_t[::1] v, const uint8_t[::1] so,
                    const int64_t[::1] start, const int64_t[::1] order, int hazard, int64_t cap,
                    int64_t[::1] indeg, int64_t[::1] outdeg, int64_t[::1] stamp, int64_t[::1] where,
                    uint8_t[::1] keep) noexcept nogil:
    """One round: edges of the round are hazard edges (``hazard``) or all edges; a middle
    node must have in x out <= cap over them; the edges it may drop are the hazard
    edges (``hazard``) or the state-only ones."""
    cdef Py_ssize_t nn = indeg.shape[0], m = u.shape[0]
    cdef Py_ssize_t e, x, w, a, b, e1, e2, y, hit
    cdef int64_t di, do
    for x in range(nn):
        indeg[x] = 0
        outdeg[x] = 0
        stamp[x] = -1
    for e in range(m):
        if hazard and so[e]:
            continue
        outdeg[u[e]] += 1
        indeg[v[e]] += 1
    for x in range(nn):
        a = start[x]
        b = start[x + 1]
        if a == b:
            continue
        for e in range(a, b):  # every edge out of x, round or not: the edges a path may imply
            e1 = order[e]
            stamp[v[e1]] = x
            where[v[e1]] = e1
        for e in range(a, b):
            e1 = order[e]
            if hazard and so[e1]:
                continue
            w = v[e1]
            di = indeg[w]
            do = outdeg[w]
            if di == 0 or do == 0 or di * do > cap:
                continue
            for e2 in range(start[w], start[w + 1]):
                y = order[e2]
                if hazard and so[y]:
                    continue
                y = v[y]
                if stamp[y] == x:
                    hit = where[y]
                    if hazard:
                        if not so[hit]:
                            keep[hit] = 0
                    elif so[hit]:
                        keep[hit] = 0


def act_setter_events(ev_cmd, ev_slot, slots, act_cmd, opq):
    """For every slot of ``slots`` and every action: the index of the last event writing the
    slot strictly before the action (``drawopt.analysis.graph._setter_events``), -1 for none or when
    an Opaque command lies between them; and that event's command (-1 for none).

    Parameters
    ----------
    ev_cmd, ev_slot : int64[E]
        Events (command, slot), sorted by slot then command.
    slots : int64[K]
        The slots wanted.
    act_cmd : int64[A]
        Action commands, non-decreasing.
    opq : int64[O]
        Opaque commands, increasing.

    Returns
    -------
    events, commands : int64[K, A]
    """
    ev_cmd = np.ascontiguousarray(ev_cmd, dtype=np.int64)
    ev_slot = np.ascontiguousarray(ev_slot, dtype=np.int64)
    slots = np.ascontiguousarray(slots, dtype=np.int64)
    act_cmd = np.ascontiguousarray(act_cmd, dtype=np.int64)
    opq = np.ascontiguousarray(opq, dtype=np.int64)
    if ev_cmd.shape[0] != ev_slot.shape[0]:
        raise ValueError("ev_cmd and ev_slot must have the same length")
    if act_cmd.shape[0] > 1 and (np.diff(act_cmd) < 0).any():
        raise ValueError("act_cmd must be non-decreasing")
    lo = np.searchsorted(ev_slot, slots, side="left").astype(np.int64)
    hi = np.searchsorted(ev_slot, slots, side="right").astype(np.int64)
    out_e = np.empty((slots.shape[0], act_cmd.shape[0]), dtype=np.int64)
    out_c = np.empty((slots.shape[0], act_cmd.shape[0]), dtype=np.int64)
    _act_setter_events(ev_cmd, lo, hi, act_cmd, opq, out_e, out_c)
    return out_e, out_c


cdef void _act_setter_events(const int64_t[::1] ev_cmd, const int64_t[::1] lo, const int64_t[::1] hi,
                             const int64_t[::1] act_cmd, const int64_t[::1] opq,
                             int64_t[:, ::1] out_e, int64_t[:, ::1] out_c) noexcept nogil:
    cdef Py_ssize_t j, a, p, q, e, nact = act_cmd.shape[0], nopq = opq.shape[0]
    cdef int64_t x
    for j in range(lo.shape[0]):
        p = lo[j]
        q = 0
        for a in range(nact):
            x = act_cmd[a]
            while p < hi[j] and ev_cmd[p] < x:
                p += 1
            e = p - 1 if p > lo[j] else -1
            if nopq:
                while q < nopq and opq[q] < x:
                    q += 1
                if e >= 0 and q > 0 and opq[q - 1] >= ev_cmd[e]:
                    e = -1
            out_e[j, a] = e
            out_c[j, a] = ev_cmd[e] if e >= 0 else -1


def state_reads(ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch, act_node,
                act_group, grp_off, grp_slots):
    """The state edges of the reads: for every action and every slot its group reads (in the
    group's order), the setter event of the slot (the last event of the slot before the action,
    in the action's Opaque epoch); a read-after-write edge from that event's node to the action's
    and a write-after-read edge from the action's node to the node of the slot's next write.

    Edges are listed block by block (block ``j``: the ``j``-th entry of ``grp_slots``, so group
    by group, slot by slot), each block in action order, leaving out an edge of an action that
    an earlier slot of the same action already gave, and an edge equal to the block's previous
    one (so the first of every edge is kept); ``drawopt.analysis.graph._state_reads_py`` is the twin.

    Parameters
    ----------
    ev_cmd, ev_epoch : int64[E]
        Events, sorted by slot then command; the Opaque epoch of each.
    slot_lo, slot_hi : int64[S]
        The events of slot ``s`` are ``slot_lo[s] .. slot_hi[s] - 1``.
    raw_src, war_dst : int64[E]
        Per event: the node of its command (-1: outside the graph); the node of the slot's next
        write (-1: none, another epoch or outside the graph).
    first_dup : int64[E]
        The first event of the same (slot, command) as each.
    act_cmd, act_epoch, act_node, act_group : int64[A]
        Actions in command order: command, epoch, node, group (-1: none).
    grp_off, grp_slots : int64[G + 1], int64[K]
        The slots group ``g`` reads are ``grp_slots[grp_off[g]:grp_off[g + 1]]``.

    Returns
    -------
    raw_block, raw_u, raw_v, war_block, war_u, war_v : int64[...]
        The read-after-write and the write-after-read edges with their blocks.
    read : bool[E]
        The events that are the first of their (slot, command) and are read by some action.
    """
    (ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch, act_node, act_group,
     grp_off, grp_slots) = [np.ascontiguousarray(x, dtype=np.int64) for x in (
        ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch, act_node, act_group,
        grp_off, grp_slots)]
    ne, na, ns = ev_cmd.shape[0], act_cmd.shape[0], slot_lo.shape[0]
    ng, nk = grp_off.shape[0] - 1, grp_slots.shape[0]
    if not (ev_epoch.shape[0] == raw_src.shape[0] == war_dst.shape[0] == first_dup.shape[0] == ne):
        raise ValueError("the event arrays must have the same length")
    if not (act_epoch.shape[0] == act_node.shape[0] == act_group.shape[0] == na) or slot_hi.shape[0] != ns:
        raise ValueError("the action arrays (and slot_lo, slot_hi) must have the same lengths")
    if ng < 0 or grp_off[0] != 0 or grp_off[ng] != nk or (np.diff(grp_off) < 0).any():
        raise ValueError("grp_off must be offsets into grp_slots")
    if na and (act_group.max() >= ng or act_group.min() < -1):
        raise ValueError("act_group out of range")
    if nk and (grp_slots.min() < 0 or grp_slots.max() >= ns):
        raise ValueError("grp_slots out of range")
    if ns and (slot_lo.min() < 0 or slot_hi.max() > ne or (slot_hi < slot_lo).any()):
        raise ValueError("bad slot ranges")
    if ne and (first_dup.min() < 0 or first_dup.max() >= ne):
        raise ValueError("first_dup out of range")
    if na > 1 and (np.diff(act_cmd) < 0).any():
        raise ValueError("act_cmd must be non-decreasing")
    read = np.zeros(ne, dtype=np.uint8)
    ptr = slot_lo.copy()
    last = np.empty((4, max(nk, 1)), dtype=np.int64)
    width = int(np.diff(grp_off).max()) if ng else 0
    seen = np.empty((2, max(width, 1)), dtype=np.int64)
    cursor = np.zeros((2, nk + 1), dtype=np.int64)
    z = np.zeros(0, dtype=np.int64)
    # one pass to count the edges of each block, one to write them at their block's place
    _state_reads(ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch,
                 act_node, act_group, grp_off, grp_slots, ptr, last, seen, read, cursor, z, z, z, z, z, z, 0)
    np.cumsum(cursor, axis=1, out=cursor)
    nr, nw = int(cursor[0, nk]), int(cursor[1, nk])  # cursor[k, j]: where block j starts
    rb, ru, rv = np.empty(nr, dtype=np.int64), np.empty(nr, dtype=np.int64), np.empty(nr, dtype=np.int64)
    wb, wu, wv = np.empty(nw, dtype=np.int64), np.empty(nw, dtype=np.int64), np.empty(nw, dtype=np.int64)
    ptr[:] = slot_lo
    _state_reads(ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch,
                 act_node, act_group, grp_off, grp_slots, ptr, last, seen, read, cursor, rb, ru, rv, wb, wu, wv, 1)
    return rb, ru, rv, wb, wu, wv, read.astype(bool)


cdef void _state_reads(const int64_t[::1] ev_cmd, const int64_t[::1] ev_epoch, const int64_t[::1] slot_lo,
                       const int64_t[::1] slot_hi, const int64_t[::1] raw_src, const int64_t[::1] war_dst,
                       const int64_t[::1] first_dup, const int64_t[::1] act_cmd, const int64_t[::1] act_epoch,
                       const int64_t[::1] act_node, const int64_t[::1] act_group, const int64_t[::1] grp_off,
                       const int64_t[::1] grp_slots, int64_t[::1] ptr, int64_t[:, ::1] last,
                       int64_t[:, ::1] seen, uint8_t[::1] read, int64_t[:, ::1] cursor,
                       int64_t[::1] rb, int64_t[::1] ru, int64_t[::1] rv,
                       int64_t[::1] wb, int64_t[::1] wu, int64_t[::1] wv, int fill) noexcept nogil:
    """Pass ``fill == 0``: count each block's edges into ``cursor[k, j + 1]``; pass 1: write
    them from ``cursor[k, j]`` on (k: 0 read-after-write, 1 write-after-read)."""
    cdef Py_ssize_t a, j, s, p, e, nk = grp_slots.shape[0], na = act_cmd.shape[0]
    cdef Py_ssize_t n0, n1
    cdef int64_t g, x, u, v, w
    for j in range(nk):
        last[0, j] = -1
        last[1, j] = -1
        last[2, j] = -1
        last[3, j] = -1
    for a in range(na):
        g = act_group[a]
        if g < 0:
            continue
        x = act_cmd[a]
        w = act_node[a]
        n0 = 0
        n1 = 0
        for j in range(grp_off[g], grp_off[g + 1]):
            s = grp_slots[j]
            p = ptr[s]
            while p < slot_hi[s] and ev_cmd[p] < x:
                p += 1
            ptr[s] = p
            e = p - 1
            if e < slot_lo[s] or ev_epoch[e] != act_epoch[a]:
                continue
            read[first_dup[e]] = 1
            u = raw_src[e]
            if u >= 0 and u != w:
                n0 = _take(seen, last, cursor, 0, n0, u, j, u, w, rb, ru, rv, fill)
            v = war_dst[e]
            if v >= 0 and v != w:
                n1 = _take(seen, last, cursor, 1, n1, v, j, w, v, wb, wu, wv, fill)


cdef inline Py_ssize_t _take(int64_t[:, ::1] seen, int64_t[:, ::1] last, int64_t[:, ::1] cursor, int k,
                             Py_ssize_t n, int64_t other, Py_ssize_t j, int64_t u, int64_t v, int64_t[::1] ob,
                             int64_t[::1] ou, int64_t[::1] ov, int fill) noexcept nogil:
    """Edge ``u -> v`` of kind ``k`` in block ``j``, unless the action already had one with the
    node ``other`` (its ``n`` such nodes are ``seen[k, :n]``) or the block's last edge is the same;
    returns the new ``n``."""
    cdef Py_ssize_t t, q
    for t in range(n):
        if seen[k, t] == other:
            return n
    seen[k, n] = other
    if u != last[2 * k, j] or v != last[2 * k + 1, j]:
        last[2 * k, j] = u
        last[2 * k + 1, j] = v
        if fill:
            q = cursor[k, j]
            ob[q] = j
            ou[q] = u
            ov[q] = v
            cursor[k, j] = q + 1
        else:
            cursor[k, j + 1] += 1
    return n + 1


def hazard_pairs(seg, res, cls, ep, seg_kind, int64_t fan_cap, codes):
    """The hazard edges between segments from their accesses (``drawopt.analysis.graph._hazard_pairs``).

    Parameters
    ----------
    seg, res, cls, ep : int64[N]
        Accesses sorted by (epoch, resource, segment): segment, resource, class (0 read,
        1 ordered write, >= 2 a commuting write class), Opaque epoch.
    seg_kind : int64[S]
        Kind code of every segment.
    fan_cap : int
        A previous group larger than this gives its edges to the first member of a group only.
    codes : int64[9]
        Reason codes raw, war, order, waw, barrier, flush; kind codes draws, barrier, flush.

    Returns
    -------
    u, v, reason, resource : int64[E]
        Edges between distinct segments: first every member of the previous group to each
        access (by access), then the anchored ones (group's first member to the access).
    """
    seg, res, cls, ep, seg_kind, codes = [np.ascontiguousarray(x, dtype=np.int64)
                                          for x in (seg, res, cls, ep, seg_kind, codes)]
    n = seg.shape[0]
    if not (res.shape[0] == cls.shape[0] == ep.shape[0] == n) or codes.shape[0] != 9:
        raise ValueError("seg, res, cls and ep must have the same length; codes has 9 entries")
    if n and (seg.min() < 0 or seg.max() >= seg_kind.shape[0]):
        raise ValueError("segment out of range")
    psz = np.empty(n, dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)
    z = np.zeros(0, dtype=np.int64)
    _hazard_pairs(seg, res, cls, ep, seg_kind, fan_cap, codes, psz, counts, z, z, z, z, 0)
    m = int(counts[0] + counts[1])
    u, v, r, rr = (np.empty(m, dtype=np.int64) for _ in range(4))
    _hazard_pairs(seg, res, cls, ep, seg_kind, fan_cap, codes, psz, counts, u, v, r, rr, 1)
    return u, v, r, rr


cdef void _hazard_pairs(const int64_t[::1] seg, const int64_t[::1] res, const int64_t[::1] cls,
                        const int64_t[::1] ep, const int64_t[::1] seg_kind, int64_t fan_cap,
                        const int64_t[::1] codes, int64_t[::1] psz, int64_t[::1] counts,
                        int64_t[::1] ou, int64_t[::1] ov, int64_t[::1] orr, int64_t[::1] ores,
                        int fill) noexcept nogil:
    """Pass ``fill == 0``: count the kept full and anchored edges into ``counts``; pass 1:
    write the full ones from 0 and the anchored ones from ``counts[0]``."""
    cdef Py_ssize_t i, j, n = seg.shape[0]
    cdef Py_ssize_t nfull = 0, nanc = 0, qa
    cdef int64_t cur = -1, prev = -1, first, psize, su, sv
    cdef bint newkey, hp
    if fill:
        qa = counts[0]
    for i in range(n):
        newkey = i == 0 or ep[i] != ep[i - 1] or res[i] != res[i - 1]
        if newkey or cls[i] != cls[i - 1] or cls[i] == 1:  # a new group
            prev = cur if not newkey else -1   # the previous group of the same key, if any
            cur = i
            if prev >= 0:
                psz[prev] = cur - prev   # the size of the group that just ended, kept at its start
        first = cur
        hp = prev >= 0
        if not hp:
            continue
        psize = psz[prev]
        sv = seg[i]
        if psize <= fan_cap or i == first:
            for j in range(prev, prev + psize):
                su = seg[j]
                if su == sv:
                    continue
                if fill:
                    _put(ou, ov, orr, ores, nfull, j, i, seg, res, cls, seg_kind, codes)
                nfull += 1
        else:
            if seg[first] == sv:
                continue
            if fill:
                _put(ou, ov, orr, ores, qa, first, i, seg, res, cls, seg_kind, codes)
                qa += 1
            nanc += 1
    if not fill:
        counts[0] = nfull
        counts[1] = nanc


cdef inline void _put(int64_t[::1] ou, int64_t[::1] ov, int64_t[::1] orr, int64_t[::1] ores, Py_ssize_t q,
                      Py_ssize_t j, Py_ssize_t i, const int64_t[::1] seg, const int64_t[::1] res,
                      const int64_t[::1] cls, const int64_t[::1] seg_kind, const int64_t[::1] codes) noexcept nogil:
    """Edge ``q``: from access ``j``'s segment to access ``i``'s, with its reason and ``j``'s resource."""
    cdef int64_t su = seg[j], sv = seg[i]
    ou[q] = su
    ov[q] = sv
    orr[q] = _reason(cls[j], cls[i], seg_kind[su], seg_kind[sv], codes)
    ores[q] = res[j]


cdef inline int64_t _reason(int64_t cu, int64_t cv, int64_t ku, int64_t kv, const int64_t[::1] codes) noexcept nogil:
    """raw (a read after), war (a write after a read), order (two draws), waw; barrier and then flush
    when either end is one."""
    if ku == codes[8] or kv == codes[8]:
        return codes[5]
    if ku == codes[7] or kv == codes[7]:
        return codes[4]
    if cv == 0:
        return codes[0]
    if cu == 0:
        return codes[1]
    if ku == codes[6] and kv == codes[6]:
        return codes[2]
    return codes[3]


def action_signatures(ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, tail):
    """Intern the binding signature of every action (``drawopt.analysis.graph._action_signatures``).

    The signature of action ``a`` is the row ``head[a], value[0, a], .., value[K-1, a], tail[a]``
    where ``value[k, a]`` is ``crank`` of the command of the last event writing ``slots[k]``
    strictly before the action in its Opaque epoch (``act_setter_events``), ``crank[-1]``
    for none.

    Parameters
    ----------
    ev_cmd, ev_slot : int64[E]
        Events (command, slot), sorted by slot then command.
    slots : int64[K]
        The slots of the signature, in column order.
    act_cmd : int64[A]
        Action commands, non-decreasing.
    opq : int64[O]
        Opaque commands, increasing.
    crank : int64[N + 1]
        Per command, the value its setting contributes; the last entry: no setter.
    head, tail : int64[A, H], int64[A, T]
        The signature's columns before and after the slot values.

    Returns
    -------
    ids : int64[A]
        Id of each action's signature, numbered in order of first appearance.
    first : int64[U]
        The first action of each id.
    rows : int64[U, H + K + T]
        The signatures.
    """
    ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, tail = [
        np.ascontiguousarray(x, dtype=np.int64) for x in (ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, tail)]
    na = act_cmd.shape[0]
    if ev_cmd.shape[0] != ev_slot.shape[0]:
        raise ValueError("ev_cmd and ev_slot must have the same length")
    if head.ndim != 2 or tail.ndim != 2 or head.shape[0] != na or tail.shape[0] != na:
        raise ValueError("head and tail must have one row per action")
    if na > 1 and (np.diff(act_cmd) < 0).any():
        raise ValueError("act_cmd must be non-decreasing")
    if crank.shape[0] < 1 or (ev_cmd.shape[0] and (ev_cmd.min() < 0 or ev_cmd.max() >= crank.shape[0] - 1)):
        raise ValueError("crank must have an entry for every event's command, and one more")
    lo = np.searchsorted(ev_slot, slots, side="left").astype(np.int64)
    hi = np.searchsorted(ev_slot, slots, side="right").astype(np.int64)
    width = head.shape[1] + slots.shape[0] + tail.shape[1]
    ids = np.empty(na, dtype=np.int64)
    cap = min(na, 1 << 14)
    # the events of the signature's slots in command order, each with the column it sets (an event
    # once per column of its slot)
    col = np.repeat(np.arange(slots.shape[0], dtype=np.int64), hi - lo)
    ev = (np.repeat(lo - (np.cumsum(hi - lo) - (hi - lo)), hi - lo) + np.arange(col.shape[0])).astype(np.int64)
    o = np.argsort(ev_cmd[ev], kind="stable")  # (the slots' runs are sorted: a merge)
    m_cmd = np.ascontiguousarray(ev_cmd[ev][o])
    m_col = np.ascontiguousarray(col[o])
    while True:  # the distinct signatures are few; a larger store only if they are not
        nb = 1
        while nb < 2 * max(cap, 1):
            nb *= 2
        table = np.full(nb, -1, dtype=np.int64)
        store = np.empty((max(cap, 1), width), dtype=np.int64)
        first = np.empty(max(cap, 1), dtype=np.int64)
        cur = np.empty(max(width, 1), dtype=np.int64)
        u = _action_signatures(m_cmd, m_col, act_cmd, opq, crank, head, tail, cur, table, store, first, ids,
                               slots.shape[0])
        if u >= 0:
            return ids, first[:u].copy(), store[:u].copy()
        cap = na


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    """A 64-bit finaliser (murmur3's): every input bit moves every output bit."""
    x ^= x >> 33
    x *= 0xFF51AFD7ED558CCDULL
    x ^= x >> 33
    x *= 0xC4CEB9FE1A85EC53ULL
    x ^= x >> 33
    return x


cdef inline uint64_t _slot_term(Py_ssize_t k, int64_t v) noexcept nogil:
    """Slot ``k``'s share of a signature's hash when it holds ``v`` (the shares are summed, so
    that one slot's change updates the sum without rehashing the others)."""
    return _mix(<uint64_t>v ^ (<uint64_t>(k + 1) * 0x9E3779B97F4A7C15ULL))


def spread_accesses(aseg, inv, counts, flat, tail_seg, tail_res):
    """The accesses of every action from those of its signature (``drawopt.analysis.graph._spread_accesses``).

    Parameters
    ----------
    aseg, inv : int64[A]
        Segment and signature of every action.
    counts : int64[U]
        Accesses of each signature: signature ``j`` has the next ``counts[j]`` rows of ``flat``.
    flat : int64[K, 2]
        (resource, class) of the signatures' accesses, signature by signature.
    tail_seg, tail_res : int64[T]
        Accesses listed after the actions' (class 1: writes).

    Returns
    -------
    seg, res, cls : int64[sum(counts[inv]) + T]
        Action by action, each action's accesses in its signature's order, then the tail.
    """
    aseg, inv, counts, tail_seg, tail_res = [np.ascontiguousarray(x, dtype=np.int64)
                                             for x in (aseg, inv, counts, tail_seg, tail_res)]
    flat = np.ascontiguousarray(flat, dtype=np.int64).reshape(-1, 2)
    na, nu, nt = aseg.shape[0], counts.shape[0], tail_seg.shape[0]
    if inv.shape[0] != na or tail_res.shape[0] != nt:
        raise ValueError("aseg and inv (tail_seg and tail_res) must have the same length")
    if na and (inv.min() < 0 or inv.max() >= nu):
        raise ValueError("inv out of range")
    if nu and (counts.min() < 0 or int(counts.sum()) != flat.shape[0]):
        raise ValueError("counts must add up to the rows of flat")
    offs = np.cumsum(counts) - counts
    total = int(counts[inv].sum()) if na else 0
    seg = np.empty(total + nt, dtype=np.int64)
    res = np.empty(total + nt, dtype=np.int64)
    cls = np.empty(total + nt, dtype=np.int64)
    _spread(aseg, inv, offs, counts, flat, seg, res, cls)
    seg[total:] = tail_seg
    res[total:] = tail_res
    cls[total:] = 1
    return seg, res, cls


cdef void _spread(const int64_t[::1] aseg, const int64_t[::1] inv, const int64_t[::1] offs,
                  const int64_t[::1] counts, const int64_t[:, ::1] flat, int64_t[::1] seg, int64_t[::1] res,
                  int64_t[::1] cls) noexcept nogil:
    cdef Py_ssize_t a, j, q = 0, r, lo, hi
    cdef int64_t s
    for a in range(aseg.shape[0]):
        j = inv[a]
        s = aseg[a]
        lo = offs[j]
        hi = lo + counts[j]
        for r in range(lo, hi):
            seg[q] = s
            res[q] = flat[r, 0]
            cls[q] = flat[r, 1]
            q += 1


cdef inline Py_ssize_t _intern(int64_t[::1] cur, Py_ssize_t w, uint64_t hv, int64_t[::1] table,
                               int64_t[:, ::1] store, int64_t[::1] first, Py_ssize_t a, Py_ssize_t nu) noexcept nogil:
    """The id of the row ``cur[:w]`` (hash ``hv``), a new one (``nu``) stored for action ``a`` if it
    is new; -1 when the store is full."""
    cdef Py_ssize_t h = <Py_ssize_t>(hv & <uint64_t>(table.shape[0] - 1)), t, c
    cdef bint same
    while True:
        t = table[h]
        if t < 0:
            if nu >= store.shape[0]:
                return -1
            table[h] = nu
            for c in range(w):
                store[nu, c] = cur[c]
            first[nu] = a
            return nu
        same = True
        for c in range(w):
            if store[t, c] != cur[c]:
                same = False
                break
        if same:
            return t
        h = (h + 1) & (table.shape[0] - 1)


cdef Py_ssize_t _action_signatures(const int64_t[::1] m_cmd, const int64_t[::1] m_col,
                                   const int64_t[::1] act_cmd, const int64_t[::1] opq,
                                   const int64_t[::1] crank, const int64_t[:, ::1] head,
                                   const int64_t[:, ::1] tail, int64_t[::1] cur, int64_t[::1] table,
                                   int64_t[:, ::1] store, int64_t[::1] first, int64_t[::1] ids,
                                   Py_ssize_t nk) noexcept nogil:
    """Returns the number of distinct signatures, or -1 when ``store`` is too small for them.

    The signature ``cur`` is kept from one action to the next, with the sum of its slots' hash
    shares: the events (``m_cmd``, in command order, each setting column ``m_col`` of the slot
    values) that pass before an action are applied, an Opaque command resets every slot to none
    (a setter before it no longer counts; an event at the Opaque command's own index comes first),
    and an action whose signature did not change gets the previous action's id."""
    cdef Py_ssize_t a, k, p = 0, q = 0, c, nu = 0, got
    cdef Py_ssize_t na = act_cmd.shape[0], m = m_cmd.shape[0], nopq = opq.shape[0]
    cdef Py_ssize_t nh = head.shape[1], nt = tail.shape[1], w = nh + nk + nt
    cdef int64_t x, v, none = crank[crank.shape[0] - 1]
    cdef uint64_t hslots = 0
    cdef bint changed
    for k in range(nk):
        cur[nh + k] = none
        hslots += _slot_term(k, none)
    for a in range(na):
        x = act_cmd[a]
        changed = a == 0
        while True:
            if p < m and m_cmd[p] < x and (q >= nopq or m_cmd[p] <= opq[q]):
                k = m_col[p]
                v = crank[m_cmd[p]]
                p += 1
            elif q < nopq and opq[q] < x:
                q += 1
                for k in range(nk):
                    if cur[nh + k] != none:
                        hslots += _slot_term(k, none) - _slot_term(k, cur[nh + k])
                        cur[nh + k] = none
                        changed = True
                continue
            else:
                break
            if v != cur[nh + k]:
                hslots += _slot_term(k, v) - _slot_term(k, cur[nh + k])
                cur[nh + k] = v
                changed = True
        if not (_set_ends(cur, head, tail, a, nk) or changed):
            ids[a] = ids[a - 1]
            continue
        got = _intern(cur, w, _row_hash(cur, hslots, nh, nk, w), table, store, first, a, nu)
        if got < 0:
            return -1
        nu += got == nu
        ids[a] = got
    return nu


cdef inline bint _set_ends(int64_t[::1] cur, const int64_t[:, ::1] head, const int64_t[:, ::1] tail, Py_ssize_t a,
                           Py_ssize_t nk) noexcept nogil:
    """Put action ``a``'s head and tail columns around the ``nk`` slot values of ``cur``; whether
    any changed."""
    cdef Py_ssize_t c, nh = head.shape[1]
    cdef bint changed = False
    for c in range(nh):
        if cur[c] != head[a, c]:
            cur[c] = head[a, c]
            changed = True
    for c in range(tail.shape[1]):
        if cur[nh + nk + c] != tail[a, c]:
            cur[nh + nk + c] = tail[a, c]
            changed = True
    return changed


cdef inline uint64_t _row_hash(int64_t[::1] cur, uint64_t hslots, Py_ssize_t nh, Py_ssize_t nk,
                               Py_ssize_t w) noexcept nogil:
    """The hash of the row ``cur``: the head and tail columns folded into the slots' summed shares."""
    cdef Py_ssize_t c
    cdef uint64_t hv = hslots
    for c in range(nh):
        hv = _mix(hv ^ <uint64_t>cur[c]) + <uint64_t>c
    for c in range(nh + nk, w):
        hv = _mix(hv ^ <uint64_t>cur[c]) + <uint64_t>c
    return _mix(hv)
