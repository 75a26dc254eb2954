"""Type stubs of the compiled ``drawopt._mdi`` kernels (cext/_mdi.pyx).

Pure-Python twins: ``drawopt.passes.mdi._greedy_py``, ``_indirect_groups_py``, ``_layout_py``.
"""

import numpy as np
import numpy.typing as npt

__all__ = ["greedy", "indirect_groups", "layout"]

def greedy(values: npt.ArrayLike, new_run: npt.ArrayLike, limit: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Group of each element: consecutive elements of one run summing to at most their limit."""
    ...

def indirect_groups(
    cnt: npt.ArrayLike,
    buf: npt.ArrayLike,
    off: npt.ArrayLike,
    stride: npt.ArrayLike,
    new_run: npt.ArrayLike,
    rec: int,
    limit: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(group of each indirect draw, stride of each group)``: one args buffer at a fixed stride."""
    ...

def layout(
    zone: npt.ArrayLike,
    stride: npt.ArrayLike,
    nrec: npt.ArrayLike,
    restore: npt.ArrayLike,
    limit: npt.ArrayLike,
    align: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """``(index, section)`` of each reader, ``(first reader, offset)`` of each section, total bytes."""
    ...
