"""Type stub of the translation validator's compiled kernels (``cext/_verify.pyx``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["fold", "fold_scalar", "fold_at", "last_before"]

def fold(h: npt.NDArray[np.uint64], c: npt.NDArray[np.int64]) -> None:
    """``h[i] = fmix64(h[i] * G + c[i])`` in place; see ``drawopt.verify._hash._fold``."""
    ...

def fold_scalar(h: npt.NDArray[np.uint64], c: int) -> None:
    """``h[i] = fmix64(h[i] * G + c)`` in place; see ``drawopt.verify._hash._fold``."""
    ...

def last_before(ev: npt.NDArray[np.int64], q: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of the last ``ev`` element below each ``q[i]`` (-1: none); both ascending."""
    ...

def fold_at(h: npt.NDArray[np.uint64], v: npt.NDArray[np.int64], idx: npt.NDArray[np.int64], lo: int, hi: int,
            to: int) -> None:
    """``h[i] = fmix64(h[i] * G + x)``, ``x = v[idx[i]]`` (``to`` where ``lo < x < hi``), in place."""
    ...
