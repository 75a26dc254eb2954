"""Type stub of the flush model's compiled transitions (``cext/_flush.pyx``; pure twins
``drawopt.analysis.flushrules._pending_py`` and ``drawopt.passes.flush._plan_py``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["pending", "plan"]

def pending(
    cmd: npt.ArrayLike,
    kind: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    nbuf: int,
    graphics: bool,
    frontend: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], ...]:
    """``(row, buf, class, writer, state, unknown)``: the pending writes at every read; see
    ``drawopt.analysis.flushrules.pending_reads``."""
    ...

def plan(
    cmd: npt.ArrayLike,
    kind: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    nbuf: int,
    graphics: bool,
    frontend: npt.ArrayLike,
    n: int,
    rd_start: npt.ArrayLike,
    rd_cmd: npt.ArrayLike,
    write_cmds: npt.ArrayLike,
    flush_cmds: npt.ArrayLike,
    drop_redundant: bool,
    coalesce: bool,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(insert commands, stage masks, drops)``: the flush pass's plan; see
    ``drawopt.passes.flush.plan_flushes``."""
    ...
