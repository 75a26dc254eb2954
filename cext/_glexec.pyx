# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Native loop over a replay tape (see :mod:`drawopt.replay.tape`): one C call per row.

``run_tape(tape, table)``: ``tape`` is the ``int64[n, 8]`` tape, ``table[op]`` the
address of the GL entry point of opcode ``op`` (0 = missing; the caller checks).
The opcode numbers and argument orders are those of ``tape.Op`` / ``OP_SPECS``;
float arguments travel as IEEE-754 single bits. Runs without the GIL.

``run_tape_timed(tape, table, stamps)``: the same calls, and ``stamps[i]`` the
``CLOCK_MONOTONIC`` time in nanoseconds just before row ``i`` (``stamps[n]`` after the
last), so ``np.diff(stamps)`` is the CPU time of every row (one clock read per row:
drawopt replay --profile).

Build in place (optional; the Python loop is used when this is absent)::

    cythonize -i drawopt/replay/_glexec.pyx
"""

from libc.stdint cimport int64_t, uint64_t, uint32_t, intptr_t
from libc.string cimport memcpy
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

ctypedef void (*f_u)(unsigned int) noexcept nogil
ctypedef void (*f_uu)(unsigned int, unsigned int) noexcept nogil
ctypedef void (*f_uuu)(unsigned int, unsigned int, unsigned int) noexcept nogil
ctypedef void (*f_uuuu)(unsigned int, unsigned int, unsigned int, unsigned int) noexcept nogil
ctypedef void (*f_iu)(int, unsigned int) noexcept nogil
ctypedef void (*f_ii)(int, int) noexcept nogil
ctypedef void (*f_ui)(unsigned int, int) noexcept nogil
ctypedef void (*f_iff)(int, float, float) noexcept nogil
ctypedef void (*f_iuuuu)(int, unsigned int, unsigned int, unsigned int, unsigned int) noexcept nogil
ctypedef void (*f_iiii)(int, int, int, int) noexcept nogil
ctypedef void (*f_ff)(float, float) noexcept nogil
ctypedef void (*f_b)(unsigned char) noexcept nogil
ctypedef void (*f_vbuf)(unsigned int, unsigned int, intptr_t, int) noexcept nogil
ctypedef void (*f_arrays)(unsigned int, int, int, int, unsigned int) noexcept nogil
ctypedef void (*f_elements)(unsigned int, int, unsigned int, const void*, int, int, unsigned int) noexcept nogil
ctypedef void (*f_mda)(unsigned int, const void*, int, int) noexcept nogil
ctypedef void (*f_mde)(unsigned int, unsigned int, const void*, int, int) noexcept nogil
ctypedef void (*f_mdac)(unsigned int, const void*, intptr_t, int, int) noexcept nogil
ctypedef void (*f_mdec)(unsigned int, unsigned int, const void*, intptr_t, int, int) noexcept nogil
ctypedef void (*f_copy)(unsigned int, unsigned int, intptr_t, intptr_t, intptr_t) noexcept nogil

TAPE_VERSION = 3
"""The opcode set this loop knows (``tape.TAPE_VERSION``; 2 added 33, glVertexAttribIFormat; 3 added
34, glQueryCounter, which profiling tapes use)."""


cdef inline float _f(int64_t bits) noexcept nogil:
    cdef uint32_t b = <uint32_t>bits
    cdef float f
    memcpy(&f, &b, 4)
    return f


cdef inline void _call(void* fn, int64_t op, const int64_t* r) noexcept nogil:
    """Issue one row (``op`` is known to be in range and ``fn`` not NULL)."""
    if op == 21:
        (<f_elements>fn)(<unsigned int>r[1], <int>r[2], <unsigned int>r[3], <const void*><intptr_t>r[4],
                         <int>r[5], <int><uint32_t>r[6], <unsigned int>r[7])
    elif op == 20:
        (<f_arrays>fn)(<unsigned int>r[1], <int>r[2], <int>r[3], <int>r[4], <unsigned int>r[5])
    elif op == 2:
        (<f_iu>fn)(<int>r[1], <unsigned int>r[2])
    elif op == 15:
        (<f_vbuf>fn)(<unsigned int>r[1], <unsigned int>r[2], <intptr_t>r[3], <int>r[4])
    elif op == 1 or op == 7 or op == 8 or op == 10 or op == 11 or op == 17 or op == 18 \
            or op == 26 or op == 29:
        (<f_u>fn)(<unsigned int>r[1])
    elif op == 3 or op == 13 or op == 16 or op == 34:
        (<f_uu>fn)(<unsigned int>r[1], <unsigned int>r[2])
    elif op == 14 or op == 27:
        (<f_uuu>fn)(<unsigned int>r[1], <unsigned int>r[2], <unsigned int>r[3])
    elif op == 9 or op == 33:
        (<f_uuuu>fn)(<unsigned int>r[1], <unsigned int>r[2], <unsigned int>r[3], <unsigned int>r[4])
    elif op == 4 or op == 5:
        (<f_iiii>fn)(<int>r[1], <int>r[2], <int>r[3], <int>r[4])
    elif op == 6:
        (<f_ff>fn)(_f(r[1]), _f(r[2]))
    elif op == 12:
        (<f_b>fn)(<unsigned char>r[1])
    elif op == 19:
        (<f_ui>fn)(<unsigned int>r[1], <int>r[2])
    elif op == 22:
        (<f_mda>fn)(<unsigned int>r[1], <const void*><intptr_t>r[2], <int>r[3], <int>r[4])
    elif op == 23:
        (<f_mde>fn)(<unsigned int>r[1], <unsigned int>r[2], <const void*><intptr_t>r[3], <int>r[4], <int>r[5])
    elif op == 24:
        (<f_mdac>fn)(<unsigned int>r[1], <const void*><intptr_t>r[2], <intptr_t>r[3], <int>r[4], <int>r[5])
    elif op == 25:
        (<f_mdec>fn)(<unsigned int>r[1], <unsigned int>r[2], <const void*><intptr_t>r[3], <intptr_t>r[4],
                     <int>r[5], <int>r[6])
    elif op == 28:
        (<f_copy>fn)(<unsigned int>r[1], <unsigned int>r[2], <intptr_t>r[3], <intptr_t>r[4], <intptr_t>r[5])
    elif op == 30:
        (<f_ii>fn)(<int>r[1], <int><uint32_t>r[2])
    elif op == 31:
        (<f_iff>fn)(<int>r[1], _f(r[2]), _f(r[3]))
    elif op == 32:
        (<f_iuuuu>fn)(<int>r[1], <unsigned int>r[2], <unsigned int>r[3], <unsigned int>r[4],
                      <unsigned int>r[5])

cdef inline int64_t _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef Py_ssize_t _run(const int64_t[:, ::1] tape, const uint64_t[::1] table, int64_t* stamps) noexcept nogil:
    """Issue every row; with ``stamps`` (not NULL), the clock before each row and after the last."""
    cdef Py_ssize_t i, n = tape.shape[0]
    cdef const int64_t* r
    cdef int64_t op
    cdef void* fn
    for i in range(n):
        if stamps != NULL:
            stamps[i] = _now()
        r = &tape[i, 0]
        op = r[0]
        if op < 0 or op >= table.shape[0]:
            continue
        fn = <void*><intptr_t>table[op]
        if fn == NULL:
            continue
        _call(fn, op, r)
    if stamps != NULL:
        stamps[n] = _now()
    return n


def run_tape(const int64_t[:, ::1] tape, const uint64_t[::1] table):
    """Issue every row of ``tape`` (returns the number of rows issued)."""
    cdef Py_ssize_t n
    if tape.shape[1] != 8:
        raise ValueError("tape must be int64[n, 8]")
    with nogil:
        n = _run(tape, table, NULL)
    return n


def run_tape_timed(const int64_t[:, ::1] tape, const uint64_t[::1] table, int64_t[::1] stamps):
    """``run_tape`` that also writes ``stamps[i]`` (ns, before row ``i``; ``stamps[n]`` at the end)."""
    if tape.shape[1] != 8:
        raise ValueError("tape must be int64[n, 8]")
    if stamps.shape[0] < tape.shape[0] + 1:
        raise ValueError("stamps must hold n + 1 values")
    cdef Py_ssize_t n
    with nogil:
        n = _run(tape, table, &stamps[0])
    return n
