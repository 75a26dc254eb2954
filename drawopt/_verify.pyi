"""Type stub of the translation validator's compiled kernels (``cext/_verify.pyx``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["hash_columns", "factorize", "group_sort", "buffer_words", "write_entries", "by_opcode", "record_rows",
           "set_rows", "count_before", "count_below", "hash_sum", "fill_at", "group_ids", "merge_runs", "state_hashes",
           "const_events"]

def hash_columns(n: int, seed: int, vals: list[npt.NDArray[np.int64] | None],
                 idxs: list[npt.NDArray[np.int64] | None], kinds: npt.NDArray[np.uint8],
                 scalars: npt.NDArray[np.uint64], lo: int, hi: int, to: int,
                 init: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.uint64]:
    """One hash per row of the columns (array, gathered array or scalar), in one pass; see
    ``drawopt.verify._hash.hash_cols``."""
    ...

def fill_at(ev_at: npt.NDArray[np.int64], ev_val: npt.NDArray[np.int64], q: npt.NDArray[np.int64],
            before: int) -> npt.NDArray[np.int64]:
    """``ev_val`` of the last event before each query (``before``: none); both ascending."""
    ...

def group_ids(e_res: npt.NDArray[np.int64], e_lab: npt.NDArray[np.int64], e_act: npt.NDArray[np.int64],
              rk: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Commuting-group number of every write entry; see ``drawopt.verify.compare._group_ids``."""
    ...

def merge_runs(e_res: npt.NDArray[np.int64], e_lab: npt.NDArray[np.int64], e_gid: npt.NDArray[np.int64],
               e_rec: npt.NDArray[np.int64], e_act: npt.NDArray[np.int64], rk: npt.NDArray[np.int64],
               rest: npt.NDArray[np.int64], kind: npt.NDArray[np.int64], fmt: npt.NDArray[np.int64],
               src_off: npt.NDArray[np.int64], count: npt.NDArray[np.int64], inst: npt.NDArray[np.int64],
               ninst: npt.NDArray[np.int64], rel: npt.NDArray[np.int64], nomerge: npt.NDArray[np.uint8],
               hz: npt.NDArray[np.uint64], noprim: npt.NDArray[np.uint8], vpp: npt.NDArray[np.int64],
               kd_draw: int, kd_indexed: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                       npt.NDArray[np.int64]]:
    """``(run heads, merged InstanceCount, merged count)``; see ``drawopt.verify.compare._merge_runs``."""
    ...

def state_hashes(ev_at: npt.NDArray[np.int64], ev_val: npt.NDArray[np.int64], col_off: npt.NDArray[np.int64],
                 before: npt.NDArray[np.int64], q: npt.NDArray[np.int64], grp: npt.NDArray[np.int64],
                 g_off: npt.NDArray[np.int64], g_pos: npt.NDArray[np.int64], g_cid: npt.NDArray[np.int64],
                 g_pcid: npt.NDArray[np.int64], ov_row: npt.NDArray[np.int64], ov: npt.NDArray[np.int64],
                 lo: int, hi: int, to: int, seed: int) -> npt.NDArray[np.uint64]:
    """State hash of every query; see ``drawopt.verify.slots.StateAt.hashes``."""
    ...

def const_events(idx: npt.NDArray[np.int64], base: npt.NDArray[np.int64], cnt: npt.NDArray[np.int64],
                 voff: npt.NDArray[np.int64], pool: npt.NDArray[np.int64]) -> tuple[
                     npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(off, ev_idx, ev_val)``: root-constant words by key; see ``drawopt.verify.slots._const_columns``."""
    ...

def factorize(x: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(values, first, codes)`` in order of first occurrence; see ``drawopt.verify._hash.unique_inverse``."""
    ...

def group_sort(gid: npt.NDArray[np.int64], keys: list[npt.NDArray[np.int64]],
               at: list[npt.NDArray[np.int64] | None] | None = None,
               unsigned: npt.NDArray[np.uint8] | None = None) -> npt.NDArray[np.int64]:
    """``np.lexsort((*keys, gid))`` for a non-decreasing ``gid`` (key ``c`` read as ``keys[c][at[c]]`` where
    given, ``unsigned[c]``: ``uint64`` order); see ``drawopt.verify.compare._group_order``."""
    ...

def buffer_words(data: npt.NDArray[np.uint32], size: int, byte_off: npt.NDArray[np.int64], nwords: int,
                 oob: int) -> npt.NDArray[np.int64]:
    """``(n, nwords)`` words at each byte offset; see ``drawopt.verify.records._Expander.words``."""
    ...

def write_entries(order: npt.NDArray[np.int64], w_res: npt.NDArray[np.int64], w_lab: npt.NDArray[np.int64],
                  w_act: npt.NDArray[np.int64], a_first: npt.NDArray[np.int64], a_nrec: npt.NDArray[np.int64]) -> tuple[
                      npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(e_res, e_lab, e_act, e_rec)``; see ``drawopt.verify.compare._entries``."""
    ...

def by_opcode(op: npt.NDArray[np.uint16], ncodes: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(order, off)``: command indices grouped by opcode; see ``drawopt.verify.slots.OpIndex``."""
    ...

def record_rows(per: npt.NDArray[np.int64], s_act: npt.NDArray[np.int64], s_kind: npt.NDArray[np.int64],
                s_sbuf: npt.NDArray[np.int64], s_soff: npt.NDArray[np.int64], s_fmt: npt.NDArray[np.int64],
                s_count: npt.NDArray[np.int64], s_sym: npt.NDArray[np.int64], s_base: npt.NDArray[np.int64],
                s_sinst: npt.NDArray[np.int64], s_ninst: npt.NDArray[np.int64], s_ord: npt.NDArray[np.int64],
                per_inst: npt.NDArray[np.uint8], array_form: npt.NDArray[np.uint8], a_state: npt.NDArray[np.int64],
                a_op: npt.NDArray[np.int64], a_cmd: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8],
                opq: npt.NDArray[np.int64], fcol: npt.NDArray[np.int64], nfields: int, kd_draw: int,
                kd_indexed: int, op_x: int, flag_nomerge: int) -> tuple[npt.NDArray[np.int64], ...]:
    """The records of the sub-draws (key, action, ord, instance, sub-draw, array form, nomerge);
    see ``drawopt.verify.records._record_rows``."""
    ...

def set_rows(inv: npt.NDArray[np.int64], off: npt.NDArray[np.int64], cnt: npt.NDArray[np.int64],
             vals: list[npt.NDArray[np.int64]]) -> tuple[npt.NDArray[np.int64], list[npt.NDArray[np.int64]]]:
    """Per-signature sets spelled out per owner; see ``drawopt.verify.records.set_rows``."""
    ...

def count_before(keys: npt.NDArray[np.int64], res: npt.NDArray[np.int64], act: npt.NDArray[np.int64],
                 a_cmd: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Barriers on each access's resource before its command; see ``drawopt.verify.compare._barriers_before``."""
    ...

def count_below(e_res: npt.NDArray[np.int64], e_act: npt.NDArray[np.int64], res: npt.NDArray[np.int64],
                act: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """How many entries of each query's resource have an action below the query's (``e_act`` in
    any order within a resource); see ``drawopt.verify.compare._before``."""
    ...

def hash_sum(idx: npt.NDArray[np.int64], nbins: int, seed: int, vals: list[npt.NDArray[np.int64] | None],
             kinds: npt.NDArray[np.uint8], scalars: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Wrapping per-bin sums of the row hashes of the columns; see ``drawopt.verify.compare._mix_sum``."""
    ...
