"""Type stub of the compiled dependency-graph kernels (``cext/_graph.pyx``; pure twins in
``drawopt.analysis.graph``)."""

import numpy as np
import numpy.typing as npt

__all__ = ["assign_nodes", "two_path_reduce", "act_setter_events", "state_reads", "hazard_pairs", "action_signatures",
           "spread_accesses"]

def assign_nodes(
    kind: npt.ArrayLike, solo: npt.ArrayLike, maxpred: npt.ArrayLike, wsig: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Node of every segment (``drawopt.analysis.graph._assign_nodes_py``)."""
    ...

def two_path_reduce(
    u: npt.ArrayLike, v: npt.ArrayLike, state_only: npt.ArrayLike, nn: int, cap: int
) -> npt.NDArray[np.bool_]:
    """Keep-mask of edges not implied by a path of two edges (``drawopt.analysis.graph._two_path_reduce_py``)."""
    ...

def act_setter_events(
    ev_cmd: npt.ArrayLike, ev_slot: npt.ArrayLike, slots: npt.ArrayLike, act_cmd: npt.ArrayLike, opq: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(event[K, A], command[K, A])``: the last event writing each slot before each action (-1: none)."""
    ...

def state_reads(
    ev_cmd: npt.ArrayLike, ev_epoch: npt.ArrayLike, slot_lo: npt.ArrayLike, slot_hi: npt.ArrayLike,
    raw_src: npt.ArrayLike, war_dst: npt.ArrayLike, first_dup: npt.ArrayLike, act_cmd: npt.ArrayLike,
    act_epoch: npt.ArrayLike, act_node: npt.ArrayLike, act_group: npt.ArrayLike, grp_off: npt.ArrayLike,
    grp_slots: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
           npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """``(raw_block, raw_u, raw_v, war_block, war_u, war_v, read)``: the state edges of the reads, block by
    block (``drawopt.analysis.graph._state_reads_py``)."""
    ...

def hazard_pairs(
    seg: npt.ArrayLike, res: npt.ArrayLike, cls: npt.ArrayLike, ep: npt.ArrayLike, seg_kind: npt.ArrayLike,
    fan_cap: int, codes: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(u, v, reason, resource)``: the hazard edges between segments from their sorted accesses
    (``drawopt.analysis.graph._hazard_pairs_py``)."""
    ...

def action_signatures(
    ev_cmd: npt.ArrayLike, ev_slot: npt.ArrayLike, slots: npt.ArrayLike, act_cmd: npt.ArrayLike, opq: npt.ArrayLike,
    crank: npt.ArrayLike, head: npt.ArrayLike, tail: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(ids, first, rows)``: the actions' binding signatures interned
    (``drawopt.analysis.graph._action_signatures``)."""
    ...

def spread_accesses(
    aseg: npt.ArrayLike, inv: npt.ArrayLike, counts: npt.ArrayLike, flat: npt.ArrayLike, tail_seg: npt.ArrayLike,
    tail_res: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(seg, res, cls)``: every action's accesses from its signature's, then the tail's
    (``drawopt.analysis.graph._spread_accesses_py``)."""
    ...
