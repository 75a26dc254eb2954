"""Hot loops of the translation validator (``drawopt._verify``).

The model lives in :mod:`drawopt.verify`; this module only runs loops that numpy
would do in many passes. Each function has a pure-numpy twin in the module named
in its docstring, and the tests check that both give identical arrays.
"""

import numpy as np

cimport cython
from libc.stdint cimport int64_t, uint64_t

__all__ = ["fold", "fold_scalar", "fold_at", "last_before"]

cdef uint64_t _G = 0x9E3779B97F4A7C15ULL
cdef uint64_t _C1 = 0xBF58476D1CE4E5B9ULL
cdef uint64_t _C2 = 0x94D049BB133111EBULL


cdef inline uint64_t _mix(uint64_t h, uint64_t c) noexcept nogil:
    cdef uint64_t z = h * _G + c
    z = (z ^ (z >> 30)) * _C1
    z = (z ^ (z >> 27)) * _C2
    return z ^ (z >> 31)


def fold(uint64_t[::1] h, const int64_t[::1] c):
    """``h[i] = fmix64(h[i] * G + c[i])`` in place (twin: ``drawopt.verify._hash._fold``)."""
    cdef Py_ssize_t i, n = h.shape[0]
    if c.shape[0] != n:
        raise ValueError("fold: length mismatch")
    with nogil:
        for i in range(n):
            h[i] = _mix(h[i], <uint64_t>c[i])


def fold_scalar(uint64_t[::1] h, uint64_t c):
    """``h[i] = fmix64(h[i] * G + c)`` in place (twin: ``drawopt.verify._hash._fold``)."""
    cdef Py_ssize_t i, n = h.shape[0]
    with nogil:
        for i in range(n):
            h[i] = _mix(h[i], c)


def last_before(const int64_t[::1] ev, const int64_t[::1] q):
    """For each query ``q[i]``: the index of the last ``ev`` element below it (-1: none).

    ``ev`` and ``q`` ascending; one merge pass (twin: ``np.searchsorted(ev, q) - 1``,
    in ``drawopt.verify.slots.StateAt``)."""
    cdef Py_ssize_t i, j = 0, n = q.shape[0], m = ev.shape[0]
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    with nogil:
        for i in range(n):
            while j < m and ev[j] < q[i]:
                j += 1
            o[i] = j - 1
    return out


def fold_at(uint64_t[::1] h, const int64_t[::1] v, const int64_t[::1] idx, int64_t lo, int64_t hi, int64_t to):
    """``h[i] = fmix64(h[i] * G + x)``, ``x = v[idx[i]]`` read as ``to`` where ``lo < x < hi``
    (twin: the pure path of ``drawopt.verify._hash.hash_cols_at``)."""
    cdef Py_ssize_t i, n = h.shape[0], m = v.shape[0]
    cdef int64_t x, j
    if idx.shape[0] != n:
        raise ValueError("fold_at: length mismatch")
    for i in range(n):
        if idx[i] < 0 or idx[i] >= m:
            raise IndexError("fold_at: index out of range")
    with nogil:
        for i in range(n):
            x = v[idx[i]]
            if lo < x < hi:
                x = to
            h[i] = _mix(h[i], <uint64_t>x)
