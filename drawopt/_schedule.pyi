"""Type stub of schedule's compiled restater emit loop (``cext/_schedule.pyx``; pure twin ``Restater._emit_all_py``)."""

from typing import Any

import numpy.typing as npt

__all__ = ["emit_run"]

def emit_run(
    rs: Any,
    cmds: npt.ArrayLike,
    tables: tuple[Any, ...],
    inforce: npt.ArrayLike,
    is_table: npt.ArrayLike,
    layout: npt.ArrayLike,
) -> None:
    """Emit input commands ``cmds`` in order into the restater ``rs``, as ``for c in cmds: rs.emit(c)`` does."""
    ...
