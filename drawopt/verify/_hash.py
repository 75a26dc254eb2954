"""Vectorised 64-bit hashing of integer columns (splitmix64 finalizer).

The validator compares millions of records; it folds every record's fields into
one 64-bit key with :func:`hash_cols` and compares keys. Two different rows collide
with probability about 2**-64 per pair (below 1e-9 for 10**5 distinct values).
"""

from __future__ import annotations

__all__ = ["hash_cols", "hash_cols_at", "hash_rows", "unique_inverse", "SEED"]

from collections.abc import Sequence

import numpy as np

from drawopt._accel import load_cext

_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_G = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
SEED = 0x243F6A8885A308D3
_M64 = 0xFFFFFFFFFFFFFFFF


def _fold(h: np.ndarray, c: np.ndarray | int, t: np.ndarray) -> None:
    """``h = fmix64(h * G + c)`` in place, fmix64 being splitmix64's finalizer (``t``: scratch).

    The pure twin of one column of ``drawopt._verify.hash_columns``."""
    np.multiply(h, _G, out=h)
    if isinstance(c, np.ndarray) and c.ndim:
        np.add(h, _as_i64(c).view(np.uint64), out=h)
    else:
        np.add(h, np.uint64(int(c) & _M64), out=h)
    for shift, mul in ((_S30, _C1), (_S27, _C2)):
        np.right_shift(h, shift, out=t)
        np.bitwise_xor(h, t, out=h)
        np.multiply(h, mul, out=h)
    np.right_shift(h, _S31, out=t)
    np.bitwise_xor(h, t, out=h)


def _as_i64(c: np.ndarray) -> np.ndarray:
    if c.dtype == np.uint64:
        c = c.view(np.int64)
    elif c.dtype != np.int64:
        c = c.astype(np.int64)
    return c


Column = np.ndarray | int | tuple[np.ndarray, np.ndarray]
"""A column of :func:`hash_cols`: an array, a scalar, or ``(array, idx)`` standing for ``array[idx]``."""


def hash_cols(cols: Sequence[Column], n: int, seed: int = SEED, pure: bool | None = None,
              fold: tuple[int, int, int] | None = None, init: Column | None = None) -> np.ndarray:
    """One ``int64`` hash per row of the columns ``cols`` (each length ``n`` or a scalar;
    ``(array, idx)`` is ``array[idx]``, read without gathering it first; ``fold = (lo, hi,
    to)``: values of such a column strictly between ``lo`` and ``hi`` read as ``to``).
    ``init``: per-row hashes to go on from (instead of ``seed``): ``hash_cols(b, n,
    init=hash_cols(a, n))`` is ``hash_cols(a + b, n)``, so a prefix shared by many rows is
    hashed once (an array, or ``(array, idx)``).

    ``pure``: force (True) or forbid (False) the pure-numpy path; default: the
    compiled kernel unless ``DRAWOPT_PURE=1`` or it is not built. Both give identical hashes.

    >>> h = hash_cols([np.array([1, 2, 1]), 7], 3)
    >>> bool(h[0] == h[2]), bool(h[0] == h[1])
    (True, False)
    >>> bool((hash_cols([(np.array([4, 1, 2]), np.array([1, 2, 1])), 7], 3) == h).all())
    True
    >>> bool((hash_cols([7], 3, init=hash_cols([np.array([1, 2, 1])], 3)) == h).all())
    True
    """
    lo, hi, to = fold if fold is not None else (0, 0, 0)
    k = load_cext("_verify", pure)
    if k is not None:
        vals: list[np.ndarray | None] = []
        idxs: list[np.ndarray | None] = []
        kinds = np.zeros(len(cols), np.uint8)
        scalars = np.zeros(len(cols), np.uint64)
        for j, c in enumerate(cols):
            if isinstance(c, tuple):
                vals.append(np.ascontiguousarray(_as_i64(c[0])))
                idxs.append(np.ascontiguousarray(c[1], np.int64))
                kinds[j] = 1
            elif isinstance(c, np.ndarray) and c.ndim:
                vals.append(np.ascontiguousarray(_as_i64(c)))
                idxs.append(None)
            else:
                vals.append(None)
                idxs.append(None)
                kinds[j] = 2
                scalars[j] = int(c) & _M64
        h0 = None if init is None else np.ascontiguousarray(_as_i64(_gather(init)))
        return k.hash_columns(n, seed & _M64, vals, idxs, kinds, scalars, lo, hi, to, h0).view(np.int64)
    if init is None:
        h = np.full(n, seed & _M64, np.uint64)
    else:
        h = _as_i64(_gather(init)).view(np.uint64).copy()
        if h.size != n:
            raise ValueError("hash_cols: init length mismatch")
    t = np.empty(n, np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            if isinstance(c, tuple):
                x = _as_i64(c[0])[c[1]]
                c = np.where((x > lo) & (x < hi), to, x) if fold is not None else x
            _fold(h, c, t)
    return h.view(np.int64)


def _gather(c: Column) -> np.ndarray:
    return c[0][c[1]] if isinstance(c, tuple) else np.asarray(c)


def hash_cols_at(cols: Sequence[np.ndarray | int], idx: np.ndarray, fold: tuple[int, int, int] | None = None,
                 seed: int = SEED, pure: bool | None = None) -> np.ndarray:
    """``hash_cols`` of the columns read at rows ``idx`` (scalars as they are), without
    gathering them first; ``fold = (lo, hi, to)``: values strictly between ``lo`` and
    ``hi`` read as ``to``.

    >>> v = np.array([5, -3, 7])
    >>> bool((hash_cols_at([1, v], np.array([2, 1]), (-10, 0, -1)) == hash_cols([1, np.array([7, -1])], 2)).all())
    True
    """
    idx = np.ascontiguousarray(idx, np.int64)
    return hash_cols([(c, idx) if isinstance(c, np.ndarray) and c.ndim else c for c in cols], idx.size, seed, pure,
                     fold)


def hash_rows(m: np.ndarray, seed: int = SEED) -> np.ndarray:
    """One ``int64`` hash per row of the 2-D integer array ``m``."""
    m = np.asarray(m, np.int64)
    return hash_cols([m[:, j] for j in range(m.shape[1])], m.shape[0], seed)


def unique_inverse(x: np.ndarray, pure: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(x, return_index=True, return_inverse=True)`` of the ``int64`` array ``x``
    (its pure twin): the sorted distinct values, the first index of each, and each element's
    position among them. Compiled: one hash-table pass (``drawopt._verify.factorize``), then
    a sort of the distinct values only (hashes of records and signatures repeat a lot).

    >>> [a.tolist() for a in unique_inverse(np.array([7, 3, 7, 5, 3]))]
    [[3, 5, 7], [1, 3, 0], [2, 0, 2, 1, 0]]
    """
    k = load_cext("_verify", pure)
    if k is None:
        u, first, inv = np.unique(x, return_index=True, return_inverse=True)
        return u, first.astype(np.int64), inv.astype(np.int64)
    vals, first, codes = k.factorize(np.ascontiguousarray(x, np.int64))
    order = np.argsort(vals)
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return vals[order], first[order], rank[codes]
