"""Type stub of the compiled OpenGL tape executor (``cext/_glexec.pyx``)."""

import numpy as np
import numpy.typing as npt

def run_tape(tape: npt.NDArray[np.int64], table: npt.NDArray[np.uint64]) -> int:
    """Issue every row of ``tape`` (``int64[n, 8]``) through the GL entry points in ``table``; rows issued."""
    ...

def run_tape_timed(tape: npt.NDArray[np.int64], table: npt.NDArray[np.uint64], stamps: npt.NDArray[np.int64]) -> int:
    """``run_tape`` that also writes ``stamps[i]`` (ns, before row ``i``; ``stamps[n]`` at the end)."""
    ...
