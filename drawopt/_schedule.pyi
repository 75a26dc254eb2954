"""Type stub of schedule's compiled loops (``cext/_schedule.pyx``): the restater emit loop (pure twin
``Restater._emit_all_py``) and two sort-key steps (``_key_columns_py``, ``_stable_rank_py``)."""

from typing import Any

import numpy.typing as npt

__all__ = ["emit_run", "key_columns", "stable_rank"]

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

def key_columns(rows: npt.ArrayLike, sel: npt.ArrayLike | None, cols: npt.ArrayLike) -> npt.NDArray[Any]:
    """``rows[sel][:, cols].T`` as ``int32[len(cols), len(sel)]`` (``sel`` None: every row)."""
    ...

def stable_rank(key: npt.ArrayLike, nkeys: int) -> npt.NDArray[Any]:
    """Each element's position in a stable sort of ``key`` (values in ``0 .. nkeys-1``)."""
    ...
