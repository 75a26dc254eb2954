"""Hot loop of the IR check ``Stream.check`` (``drawopt._streamcheck``).

The rules live in :mod:`drawopt.ir.stream`; this module only answers, in one pass over the
commands, whether every fixed argument and variadic value is in range and names a declaration
of the right kind, and every variadic tail has a length its opcode takes (the tables
``drawopt.ir.stream._stream_tables`` builds from the vocabulary and the stream). It says yes or
no: on a no, ``Stream.check`` runs its numpy rules, which name the first offending command. Its
pure-numpy twin is ``drawopt.ir.stream._values_ok_py``; the tests check that both give identical
answers. Branch-free per value (the opcodes of a stream interleave: a branch per column kind
mispredicts), one branch per command with a heap reference.
"""

import numpy as np

from libc.stdint cimport int8_t, int32_t, int64_t, uint16_t

__all__ = ["values_ok"]

cdef int64_t SLOT = 0xFFFFFFFF  # the slot half of a heap reference


cdef inline bint _bad(int64_t v, int64_t lo, int64_t hi, int64_t mask, const int8_t* kinds, int64_t ndecl) \
        noexcept nogil:
    """``v`` outside ``[lo, hi]``, or (read as a declaration) of a kind ``mask`` lacks."""
    cdef int64_t di = v if (v >= 0) & (v < ndecl) else 0
    return (v < lo) | (v > hi) | (((mask >> kinds[di]) & 1) == 0)


cdef inline bint _bad_heapref(int64_t v, int64_t mask, const int8_t* kinds, const int64_t* hsizes,
                              int64_t ndecl) noexcept nogil:
    cdef int64_t di = v >> 32
    if di < 0 or di >= ndecl:
        return True
    return (((mask >> kinds[di]) & 1) == 0) or (v & SLOT) >= hsizes[di]


def values_ok(op, args, var_off, var_len, pool, lo, hi, mask, hcol, hmask, vlo, vhi, vmask, vheap, vmin, vmax,
              kinds, hsizes, int64_t ndecl):
    """Whether every value of the stream's columns passes its (opcode, column) check: ``bool``.

    ``lo``/``hi``/``mask`` ``[opcode, column]``: the value's bounds and the declaration kinds it
    may name (bit ``k``: kind code ``k``; every bit where it names none); ``hcol[opcode]``: the
    column holding a heap reference (-1: none), ``hmask[opcode]`` the kinds it may name;
    ``vlo``/``vhi``/``vmask``/``vheap`` ``[opcode]`` the same for the variadic values (``vheap``:
    they are heap references), ``vmin``/``vmax`` the tail lengths it takes. ``kinds[d]``: the kind
    code of declaration ``d``, ``hsizes[d]`` its size (heap slots). The opcodes are known and the
    tails inside ``pool`` (checked before).
    """
    cdef const uint16_t[::1] o = np.ascontiguousarray(op, dtype=np.uint16)
    cdef const int64_t[:, ::1] a = np.ascontiguousarray(args, dtype=np.int64)
    cdef const int64_t[::1] off = np.ascontiguousarray(var_off, dtype=np.int64)
    cdef const int32_t[::1] ln = np.ascontiguousarray(var_len, dtype=np.int32)
    cdef const int64_t[::1] pl = np.ascontiguousarray(pool, dtype=np.int64)
    cdef const int64_t[:, ::1] tlo = np.ascontiguousarray(lo, dtype=np.int64)
    cdef const int64_t[:, ::1] thi = np.ascontiguousarray(hi, dtype=np.int64)
    cdef const int64_t[:, ::1] tm = np.ascontiguousarray(mask, dtype=np.int64)
    cdef const int64_t[::1] hc = np.ascontiguousarray(hcol, dtype=np.int64)
    cdef const int64_t[::1] hm = np.ascontiguousarray(hmask, dtype=np.int64)
    cdef const int64_t[::1] vl = np.ascontiguousarray(vlo, dtype=np.int64)
    cdef const int64_t[::1] vh = np.ascontiguousarray(vhi, dtype=np.int64)
    cdef const int64_t[::1] vm = np.ascontiguousarray(vmask, dtype=np.int64)
    cdef const int8_t[::1] vhp = np.ascontiguousarray(vheap, dtype=np.int8)
    cdef const int64_t[::1] vmn = np.ascontiguousarray(vmin, dtype=np.int64)
    cdef const int64_t[::1] vmx = np.ascontiguousarray(vmax, dtype=np.int64)
    cdef const int8_t[::1] kd = np.ascontiguousarray(kinds, dtype=np.int8)
    cdef const int64_t[::1] hs = np.ascontiguousarray(hsizes, dtype=np.int64)
    cdef Py_ssize_t n = o.shape[0], ncol = a.shape[1], i, j, k, c, h
    cdef int64_t start, count, v
    cdef bint bad = False
    cdef const int8_t* kp
    cdef const int64_t* hp
    cdef const int64_t* row
    cdef const int64_t* rlo
    cdef const int64_t* rhi
    cdef const int64_t* rm
    if a.shape[0] != n or off.shape[0] != n or ln.shape[0] != n or tlo.shape[1] != ncol \
            or thi.shape[1] != ncol or tm.shape[1] != ncol or kd.shape[0] < 1 or kd.shape[0] < ndecl \
            or hs.shape[0] < ndecl or ncol < 1:
        raise ValueError("op/args/var_off/var_len and the tables must have matching shapes")
    kp, hp = &kd[0], &hs[0]
    with nogil:
        for i in range(n):
            c = o[i]
            row, rlo, rhi, rm = &a[i, 0], &tlo[c, 0], &thi[c, 0], &tm[c, 0]
            for j in range(ncol):
                bad |= _bad(row[j], rlo[j], rhi[j], rm[j], kp, ndecl)
            h = hc[c]
            if h >= 0:
                bad |= _bad_heapref(a[i, h], hm[c], kp, hp, ndecl)
            count = ln[i]
            bad |= (count < vmn[c]) | (count > vmx[c])
            if bad:
                break
            start = off[i]
            for k in range(count):
                v = pl[start + k]
                if vhp[c]:
                    bad |= _bad_heapref(v, vm[c], kp, hp, ndecl)
                else:
                    bad |= _bad(v, vl[c], vh[c], vm[c], kp, ndecl)
            if bad:
                break
    return not bad
