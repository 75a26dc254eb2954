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
) -> tuple[int, int, int] | None:
    """Emit input commands ``cmds`` in order into the restater ``rs`` (its ``out`` an ``OutBuffer``),
    as ``for c in cmds: rs.emit(c)`` does; ``(code, slot, value)`` where an observer's state cannot
    be re-created."""
    ...
