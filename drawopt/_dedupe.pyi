"""Type stub of dedupe-state's compiled chain walk (``cext/_dedupe.pyx``; pure twin ``_chain_writers_py``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["chain_writers"]

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
