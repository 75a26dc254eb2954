"""numpy's set routines for integer arrays, without importing ``numpy.ma``.

numpy 2.x's plain ``np.unique(a)`` (no ``return_*`` flag) asks ``np.ma.is_masked(a)`` before
its hash path, and ``np.isin`` / ``np.intersect1d`` reach that ``np.unique``: the first such
call imports ``numpy.ma`` (15-40 ms, most of it the module's docstring processing), a fixed
cost of every ``drawopt optimize`` and ``drawopt verify`` run that no draw needs. These sort
the array instead and give exactly numpy's result (values, order, dtype, shape); an array of
another kind (float, string, object) goes to numpy's own routine.

>>> unique(np.array([3, 1, 3, -1], np.int32))
array([-1,  1,  3], dtype=int32)
>>> isin(np.array([[1, 5], [7, 1]]), (1, 7))
array([[ True, False],
       [ True,  True]])
>>> intersect1d(np.array([4, 2, 2, 9]), np.array([9, 4, 0]))
array([4, 9])
>>> unique_columns(np.array([[2, 1, 2], [0, 5, 0]]))
array([[1, 2],
       [5, 0]])
"""

from __future__ import annotations

__all__ = ["unique", "isin", "intersect1d", "unique_columns"]

from typing import Any

import numpy as np

_SORTED_KINDS = "biu"  # exact equality and a total order: sorting gives numpy's answer


def unique(a: Any) -> np.ndarray:
    """``np.unique(a)``: the sorted distinct values of ``a`` flattened, in ``a``'s dtype."""
    a = np.asarray(a)
    if a.dtype.kind not in _SORTED_KINDS:
        return np.unique(a)
    s = np.sort(a, axis=None)
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def isin(element: Any, test_elements: Any) -> np.ndarray:
    """``np.isin(element, test_elements)``: whether each value of ``element`` is one of ``test_elements``
    (a bool array of ``element``'s shape)."""
    a, b = np.asarray(element), np.asarray(test_elements)
    if a.dtype.kind not in _SORTED_KINDS or b.dtype.kind not in _SORTED_KINDS:
        return np.isin(a, b)
    u = unique(b)
    if not u.size:
        return np.zeros(a.shape, bool)
    common = np.result_type(a.dtype, u.dtype)  # compare in one dtype, as numpy's isin does
    flat, u = a.astype(common, copy=False).ravel(), u.astype(common, copy=False)
    at = np.searchsorted(u, flat)
    at[at == u.size] = 0
    return (u[at] == flat).reshape(a.shape)


def intersect1d(ar1: Any, ar2: Any) -> np.ndarray:
    """``np.intersect1d(ar1, ar2)``: the sorted values found in both."""
    a, b = np.asarray(ar1), np.asarray(ar2)
    if a.dtype.kind not in _SORTED_KINDS or b.dtype.kind not in _SORTED_KINDS:
        return np.intersect1d(a, b)
    aux = np.concatenate((unique(a), unique(b)))
    aux.sort()
    return aux[:-1][aux[1:] == aux[:-1]]


def unique_columns(a: Any) -> np.ndarray:
    """``np.unique(a, axis=1)`` of a 2-D array: its distinct columns, ordered by the first row,
    then the second, and so on."""
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype.kind not in _SORTED_KINDS or not a.shape[0]:
        return np.unique(a, axis=1)
    order = np.lexsort(a[::-1])
    s = a[:, order]
    keep = np.ones(s.shape[1], bool)
    if s.shape[1] > 1:
        keep[1:] = (s[:, 1:] != s[:, :-1]).any(axis=0)
    return s[:, keep]
