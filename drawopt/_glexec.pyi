"""Type stub of the compiled OpenGL tape executor (``cext/_glexec.pyx``)."""

import numpy as np
import numpy.typing as npt

def run_tape(tape: npt.NDArray[np.int64], table: npt.NDArray[np.uint64]) -> int:
    """Issue every row of ``tape`` (``int64[n, 8]``) through the GL entry points in ``table``; rows issued."""
    ...
