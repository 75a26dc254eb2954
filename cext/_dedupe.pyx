"""Hot loop of the ``dedupe-state`` pass (``drawopt._dedupe``).

The rule lives in :mod:`drawopt.passes.dedupe_state`; this module only runs its walk over
the partial-update chains of a merge slot. ``chain_writers`` finds, for the commands some
observer reads, the last command that changed each word they leave (the writes that must
stay); ``origins`` follows runs of redundant re-sets back to their first command. Their
pure-numpy twins are ``drawopt.passes.dedupe_state._chain_writers_py`` and
``_origins_py``; the tests check that both give identical results.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

__all__ = ["chain_writers", "origins"]


def chain_writers(start, init, owner, col, wv, Py_ssize_t width, observed, words):
    """The writes observers see in one merge slot's chains: ``uint8[m]``.

    The slot's ``m`` set commands write ``wv[k]`` to word ``col[k]`` of command ``owner[k]``
    (``owner`` non-decreasing); ``start[r]``: command ``r`` starts a chain (every word becomes
    ``init[r]``; the first command always does). A write is *effective* when it changes its
    word. For every command ``r`` with ``observed[r]``, and every word ``w`` (with bit ``w`` of
    ``words[r]``, when ``words`` is given), the command of the last effective write of ``w`` at
    or before ``r`` in its chain (if any) is marked.
    """
    cdef const uint8_t[::1] st = np.ascontiguousarray(start, dtype=np.uint8)
    cdef const int64_t[::1] ini = np.ascontiguousarray(init, dtype=np.int64)
    cdef const int64_t[::1] ow = np.ascontiguousarray(owner, dtype=np.int64)
    cdef const int64_t[::1] cl = np.ascontiguousarray(col, dtype=np.int64)
    cdef const int64_t[::1] v = np.ascontiguousarray(wv, dtype=np.int64)
    cdef const uint8_t[::1] ob = np.ascontiguousarray(observed, dtype=np.uint8)
    cdef bint use_words = words is not None
    cdef const uint64_t[::1] wd = np.ascontiguousarray(words if use_words else np.zeros(0), dtype=np.uint64)
    cdef Py_ssize_t m = st.shape[0], nw = ow.shape[0], r, j, k
    if ini.shape[0] != m or ob.shape[0] != m or cl.shape[0] != nw or v.shape[0] != nw or width < 1 \
            or (use_words and (wd.shape[0] != m or width > 64)):
        raise ValueError("start/init/observed/words and owner/col/wv must have matching lengths, width >= 1")
    for k in range(nw):
        if ow[k] < 0 or ow[k] >= m or (k and ow[k] < ow[k - 1]) or cl[k] < 0 or cl[k] >= width:
            raise ValueError("owner must be non-decreasing in 0..m-1 and col in 0..width-1")
    out = np.zeros(m, dtype=np.uint8)
    cdef uint8_t[::1] o = out
    cdef int64_t[::1] cur = np.full(width, -1, dtype=np.int64)
    cdef int64_t[::1] last = np.full(width, -1, dtype=np.int64)  # last effective writer of each word
    k = 0
    with nogil:
        for r in range(m):
            if st[r] or r == 0:
                for j in range(width):
                    cur[j] = ini[r]
                    last[j] = -1
            while k < nw and ow[k] == r:
                if v[k] != cur[cl[k]]:
                    cur[cl[k]] = v[k]
                    last[cl[k]] = r
                k += 1
            if ob[r]:
                for j in range(width):
                    if last[j] >= 0 and (not use_words or (wd[r] >> j) & 1):
                        o[last[j]] = 1
    return out


def origins(red, prev):
    """For each command, the first command of its run of redundant re-sets: ``int64[n]``.

    A command that is not ``red`` is its own origin; a red one has the origin of ``prev``
    (the command that set its slot before it, ``prev[i] < i``), -1 when that is negative
    (the initial value).
    """
    cdef const uint8_t[::1] r = np.ascontiguousarray(red, dtype=np.uint8)
    cdef const int64_t[::1] p = np.ascontiguousarray(prev, dtype=np.int64)
    cdef Py_ssize_t n = r.shape[0], i
    if p.shape[0] != n:
        raise ValueError("red and prev must have the same length")
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef bint bad = False
    with nogil:
        for i in range(n):
            if not r[i]:
                o[i] = i
            elif p[i] < 0:
                o[i] = -1
            elif p[i] >= i:
                bad = True
                break
            else:
                o[i] = o[p[i]]
    if bad:
        raise ValueError("a redundant set's previous setter must come before it")
    return out
