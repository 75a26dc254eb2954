"""Type stubs of the compiled ``drawopt._mdi`` kernels (cext/_mdi.pyx).

Pure-Python twins: ``drawopt.passes.mdi._greedy_py``, ``_indirect_groups_py``, ``_layout_py``,
``_varying_columns_py``, ``_key_rows_py``, ``_chain_words_py``, ``_perdraw_records_py``, ``_run_facts_py``.
"""

import numpy as np
import numpy.typing as npt

__all__ = ["chain_words", "greedy", "indirect_groups", "key_rows", "layout", "perdraw_records", "run_facts",
           "varying_columns"]

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

def varying_columns(rows: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Columns of an int64 matrix where some row differs from the first (increasing)."""
    ...

def key_rows(
    rows: npt.ArrayLike,
    sidx: npt.ArrayLike,
    keep: npt.ArrayLike,
    mask_col: int,
    masked: int,
    nat: npt.ArrayLike,
    extra: npt.ArrayLike,
) -> npt.NDArray[np.int64]:
    """``rows[sidx][:, keep]`` (column ``mask_col`` set to ``masked`` where ``nat``), then ``extra``."""
    ...

def perdraw_records(
    data: npt.NDArray[np.uint32],
    base: npt.ArrayLike,
    ninst: npt.ArrayLike,
    words: npt.ArrayLike,
    bv: npt.ArrayLike,
    seen: npt.ArrayLike,
    lift: npt.ArrayLike,
    row: npt.ArrayLike,
) -> None:
    """Write each member's per-instance records (base vertex, instance seen, lift words) into ``data``."""
    ...

def chain_words(
    vids: npt.ArrayLike,
    row_of: npt.ArrayLike,
    partial: npt.ArrayLike,
    filled: npt.ArrayLike,
    ks: npt.ArrayLike,
    other: npt.ArrayLike,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(ok, words ks, words other)`` of root-constant values from their chain's filled words."""
    ...

def run_facts(
    op: npt.ArrayLike,
    args: npt.ArrayLike,
    pipe: npt.ArrayLike,
    first: npt.ArrayLike,
    length: npt.ArrayLike,
    kind: npt.ArrayLike,
    state: npt.ArrayLike,
    has_lift: npt.ArrayLike,
    eligible: npt.ArrayLike,
    has_nat: npt.ArrayLike,
    pinned: npt.ArrayLike,
    decl_pd: npt.ArrayLike,
    decl_cap: npt.ArrayLike,
    di: int,
    dii: int,
    col_inst: int,
    col_si_di: int,
    col_si_dii: int,
    min_di: int,
    min_dii: int,
    max_lifted: int,
    max_restore: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """``(draw_pd, restorable, run_pd, beneficial)``: the per-draw and per-run facts of the lift decision."""
    ...
