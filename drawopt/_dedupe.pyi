"""Type stub of dedupe-state's compiled walks (``cext/_dedupe.pyx``; pure twins ``_chain_writers_py``,
``_origins_py``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["chain_writers", "origins"]

def chain_writers(
    start: npt.ArrayLike,
    init: npt.ArrayLike,
    owner: npt.ArrayLike,
    col: npt.ArrayLike,
    wv: npt.ArrayLike,
    width: int,
    observed: npt.ArrayLike,
    words: npt.ArrayLike | None,
) -> npt.NDArray[np.uint8]:
    """Per set command of one merge slot: whether it is the last effective write of a word some
    observer reads."""
    ...

def origins(red: npt.ArrayLike, prev: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """For each command, the first command of its run of redundant re-sets (-1: the initial value)."""
    ...
