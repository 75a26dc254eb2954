"""Type stub of the translation validator's compiled kernels (``cext/_verify.pyx``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["fold", "fold_scalar"]

def fold(h: npt.NDArray[np.uint64], c: npt.NDArray[np.int64]) -> None:
    """``h[i] = fmix64(h[i] * G + c[i])`` in place; see ``drawopt.verify._hash._fold``."""
    ...

def fold_scalar(h: npt.NDArray[np.uint64], c: int) -> None:
    """``h[i] = fmix64(h[i] * G + c)`` in place; see ``drawopt.verify._hash._fold``."""
    ...
