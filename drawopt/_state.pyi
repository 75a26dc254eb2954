"""Type stub of the compiled state-scan kernel (``cext/_state.pyx``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["scan", "hash_rows"]

def scan(
    code: npt.ArrayLike,
    slot: npt.ArrayLike,
    val: npt.ArrayLike,
    is_table: npt.ArrayLike,
    layout: npt.ArrayLike,
    init_unknown: int,
    final_row: bool,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(setter[O, n_slots], unknown[O], prev[N])``; see ``drawopt.analysis.state._scan_py``."""
    ...

def hash_rows(mat: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """64-bit splitmix hash of every row of an integer matrix."""
    ...
