"""Type stub of the compiled state kernels (``cext/_state.pyx``; pure twins in ``drawopt.analysis.state``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["scan", "fill_chains", "hash_rows", "intern_rows", "observer_rows", "intern_observers",
           "observed_setters", "const_writes", "chain_values", "command_values",
           "diff_state_rows", "renumber_rows"]

def scan(
    code: npt.ArrayLike,
    slot: npt.ArrayLike,
    val: npt.ArrayLike,
    is_table: npt.ArrayLike,
    layout: npt.ArrayLike,
    init_unknown: int,
    final_row: bool,
    pipe_decl: npt.ArrayLike,
    pcompact: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
           npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(setter int32[O, n_slots], unknown[O], prev[N], obs[O], kind uint8[O], epoch[O], pipe[O],
    pidx[O])``; see ``drawopt.analysis.state._scan_py``."""
    ...

def fill_chains(
    start: npt.ArrayLike,
    init: npt.ArrayLike,
    owner: npt.ArrayLike,
    col: npt.ArrayLike,
    wv: npt.ArrayLike,
    width: int,
) -> npt.NDArray[np.int64]:
    """The words of a merge slot after each of its set commands; see ``_Chains.fill``."""
    ...

def hash_rows(mat: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """64-bit splitmix hash of every row of an integer matrix."""
    ...

def intern_rows(mat: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(ids[M], first[U])``, ids in first-appearance order; see ``_intern_rows_py``."""
    ...

def observer_rows(
    setter: npt.ArrayLike,
    unknown: npt.ArrayLike,
    cval: npt.ArrayLike,
    init_val: npt.ArrayLike,
    readbits: npt.ArrayLike,
    sel: npt.ArrayLike,
    masked: int,
    unknown_marker: int,
) -> npt.NDArray[np.int64]:
    """Value rows ``int64[k, n_slots]`` of observers ``sel``; see ``Scan._rows_py``."""
    ...

def intern_observers(
    setter: npt.ArrayLike,
    unknown: npt.ArrayLike,
    cval: npt.ArrayLike,
    init_val: npt.ArrayLike,
    readbits: npt.ArrayLike,
    epoch: npt.ArrayLike,
    partial: npt.ArrayLike,
    sel: npt.ArrayLike,
    masked: int,
    unknown_marker: int,
    pack_slot: int = -1,
) -> tuple[npt.NDArray[np.int64], ...]:
    """``(ids[k], first[U], rows[U, n_slots], epochs[U])``, and ``pack[U]`` with ``pack_slot``;
    see ``_intern_observers_py`` and ``_pack_classes_py``."""
    ...

def observed_setters(
    setter: npt.ArrayLike,
    readbits: npt.ArrayLike,
    partbits: npt.ArrayLike,
    rootbits: int,
    n: int,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(observed[n], full[n], reset_obs[R], reset_slot[R])``; see ``_observed_setters_py``."""
    ...

def const_writes(
    cmds: npt.ArrayLike,
    args: npt.ArrayLike,
    var_off: npt.ArrayLike,
    var_len: npt.ArrayLike,
    pool: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int] | None:
    """``(owner[W], col[W], wv[W], width)`` of root-constants commands ``cmds`` (None: a count is
    not the number of values); see ``drawopt.analysis.state._const_writes``."""
    ...

def chain_values(
    start: npt.ArrayLike,
    init: npt.ArrayLike,
    owner: npt.ArrayLike,
    col: npt.ArrayLike,
    wv: npt.ArrayLike,
    width: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(ids[m], rows[U, width + 1])``: the value each command of a merge slot's chains leaves
    (its words and the unknown flag), interned in first-appearance order."""
    ...

def command_values(
    op: npt.ArrayLike,
    args: npt.ArrayLike,
    var_off: npt.ArrayLike,
    var_len: npt.ArrayLike,
    pool: npt.ArrayLike,
    heap_type: npt.ArrayLike,
    optab: npt.ArrayLike,
    gs_block: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64],
           npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """``(kcode[N], slot[N], is_table[N], gid[N], ublock[U], ukeys[U, 9])`` (None: a root parameter
    index out of range); see ``drawopt.analysis.state._command_values_py``."""
    ...

def diff_state_rows(
    rows_a: npt.ArrayLike,
    ia: npt.ArrayLike,
    rows_b: npt.ArrayLike,
    ib: npt.ArrayLike,
    map_a: npt.ArrayLike,
    map_b: npt.ArrayLike,
    ask_code: int,
) -> npt.NDArray[np.int64]:
    """Per pair ``(ia[i], ib[i])``: the bitmask of slots whose mapped values differ (or ask);
    see ``drawopt.analysis.state._diff_state_rows_py``."""
    ...

def renumber_rows(
    setter: npt.ArrayLike,
    sel: npt.ArrayLike,
    lut: npt.ArrayLike,
) -> npt.NDArray[np.int32]:
    """Rows ``sel`` of ``setter`` with each command ``c >= 0`` replaced by ``lut[c]``; see
    ``drawopt.analysis.state._renumber_rows_py``."""
    ...
