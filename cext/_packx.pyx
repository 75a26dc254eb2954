"""Hot loops of the ``pack-x`` pass (``drawopt._packx``).

The model lives in :mod:`drawopt.passes.pack_x`; this module only runs its two
sequential loops. ``runs`` and ``records`` are the public wrappers (they fix
dtypes and contiguity and allocate the outputs); ``_runs`` and ``_records`` are
the typed kernels, run without the GIL. The pure-Python twins are
``drawopt.passes.pack_x._runs_py`` and ``_records_py``; the tests check that both
give identical arrays.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint32_t

__all__ = ["runs", "records"]


def runs(link, ncalls, cap):
    """Cut the draws into packed runs.

    Parameters
    ----------
    link : uint8[D-1]
        ``link[i]``: draws ``i`` and ``i+1`` may share a run.
    ncalls : int64[D]
        DrawIndexedX calls each draw becomes (one per instance).
    cap : int64[D]
        Most calls a run of each draw's pipeline may hold (draw-id bits, CBV size).

    Returns
    -------
    run : int64[D]
        Run number of each draw (runs are numbered from 0 in order).
    split : uint8[D-1]
        ``split[i]``: ``link[i]`` held but the run was cut there because it was full.
    """
    cdef const uint8_t[::1] lk = np.ascontiguousarray(link, dtype=np.uint8)
    cdef const int64_t[::1] nc = np.ascontiguousarray(ncalls, dtype=np.int64)
    cdef const int64_t[::1] cp = np.ascontiguousarray(cap, dtype=np.int64)
    cdef Py_ssize_t d = nc.shape[0]
    if lk.shape[0] != max(d - 1, 0) or cp.shape[0] != d:
        raise ValueError("runs: link must have D-1 entries and cap D")
    run = np.empty(d, dtype=np.int64)
    split = np.zeros(max(d - 1, 0), dtype=np.uint8)
    cdef int64_t[::1] rv = run
    cdef uint8_t[::1] sv = split
    with nogil:
        _runs(lk, nc, cp, rv, sv)
    return run, split


cdef void _runs(const uint8_t[::1] link, const int64_t[::1] ncalls, const int64_t[::1] cap,
                int64_t[::1] run, uint8_t[::1] split) noexcept nogil:
    cdef Py_ssize_t i, d = ncalls.shape[0]
    cdef int64_t r = -1, used = 0
    for i in range(d):
        if i > 0 and link[i - 1] and used + ncalls[i] <= cap[i]:
            used += ncalls[i]
        else:
            if i > 0 and link[i - 1]:
                split[i - 1] = 1
            r += 1
            used = ncalls[i]
        run[i] = r


def records(first, ncalls, low, kbits, words, nwords, align_words):
    """DrawIndexedX calls and per-draw records of the packed draws.

    Parameters
    ----------
    first : uint8[M]
        1 where a draw starts a run (draws are given run after run, in order).
    ncalls : int64[M]
        Calls of each draw (its instance count; 1 for an input DrawIndexedX).
    low : int64[M]
        IndexOffset low bits of each call (the base vertex under ``base=vertex``).
    kbits : int64[M]
        ``vertex_bits`` K of each draw's pipeline.
    words : int64[M, W]
        The record of the draw's first instance: ``[base_vertex, start_instance,
        lifted...]``; the i-th instance's record has ``start_instance + i``.
    nwords : int64[M]
        Words of each record (``<= W``).
    align_words : int64[M]
        Alignment of a run's first record, in words (taken from its first draw).

    Returns
    -------
    index_offset : int64[C]
        IndexOffset of each call: ``slot << K | low``.
    src : int64[C]
        The draw (0..M-1) each call comes from.
    data : uint32[T]
        All records, run after run, each run at an aligned word offset.
    run_offset : int64[R]
        Word offset of each run's first record in ``data``.
    """
    cdef const uint8_t[::1] fv = np.ascontiguousarray(first, dtype=np.uint8)
    cdef const int64_t[::1] nc = np.ascontiguousarray(ncalls, dtype=np.int64)
    cdef const int64_t[::1] lo = np.ascontiguousarray(low, dtype=np.int64)
    cdef const int64_t[::1] kb = np.ascontiguousarray(kbits, dtype=np.int64)
    cdef const int64_t[:, ::1] wv = np.ascontiguousarray(words, dtype=np.int64)
    cdef const int64_t[::1] nw = np.ascontiguousarray(nwords, dtype=np.int64)
    cdef const int64_t[::1] al = np.ascontiguousarray(align_words, dtype=np.int64)
    cdef Py_ssize_t m = nc.shape[0], i
    if not (fv.shape[0] == lo.shape[0] == kb.shape[0] == wv.shape[0] == nw.shape[0] == al.shape[0] == m):
        raise ValueError("records: inputs must have one row per draw")
    cdef int64_t ncall = 0, nrun = 0, total = 0, pad
    for i in range(m):
        if nc[i] < 0 or nw[i] < 0 or nw[i] > wv.shape[1] or al[i] < 1:
            raise ValueError("records: bad call count, record width or alignment")
        if fv[i]:
            nrun += 1
            pad = (al[i] - total % al[i]) % al[i]
            total += pad
        elif i == 0:
            raise ValueError("records: the first draw must start a run")
        ncall += nc[i]
        total += nc[i] * nw[i]
    io = np.empty(ncall, dtype=np.int64)
    src = np.empty(ncall, dtype=np.int64)
    data = np.zeros(total, dtype=np.uint32)
    run_offset = np.empty(nrun, dtype=np.int64)
    cdef int64_t[::1] iov = io
    cdef int64_t[::1] srv = src
    cdef uint32_t[::1] dv = data
    cdef int64_t[::1] rov = run_offset
    with nogil:
        _records(fv, nc, lo, kb, wv, nw, al, iov, srv, dv, rov)
    return io, src, data, run_offset


cdef void _records(const uint8_t[::1] first, const int64_t[::1] ncalls, const int64_t[::1] low,
                   const int64_t[::1] kbits, const int64_t[:, ::1] words, const int64_t[::1] nwords,
                   const int64_t[::1] align, int64_t[::1] io, int64_t[::1] src, uint32_t[::1] data,
                   int64_t[::1] run_offset) noexcept nogil:
    cdef Py_ssize_t i, j, c = 0, r = -1
    cdef int64_t pos = 0, slot = 0, inst, w
    for i in range(ncalls.shape[0]):
        if first[i]:
            r += 1
            pos += (align[i] - pos % align[i]) % align[i]
            run_offset[r] = pos
            slot = 0
        for inst in range(ncalls[i]):
            io[c] = (slot << kbits[i]) | low[i]
            src[c] = i
            for j in range(nwords[i]):
                w = words[i, j]
                if j == 1:
                    w += inst
                data[pos + j] = <uint32_t>w  # two's complement truncation
            pos += nwords[i]
            slot += 1
            c += 1
