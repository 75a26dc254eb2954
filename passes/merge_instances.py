"""``merge-instances``: fold runs of consecutive draws into one instanced or one ranged draw.

Two rules of :mod:`drawopt.analysis.mergeclass` (the exact tests live there, shared with
``explain`` and the lower bound):

* ``instances``: consecutive ``DrawInstanced`` / ``DrawIndexedInstanced`` with the
  same normalised state and equal arguments except the instance range, where
  each ``start_instance`` continues the previous range, become one draw with the
  summed ``instance_count``. ``SV_InstanceID`` restarts at 0 in every draw, so
  only pipelines whose per-draw contract (``instance_data``, ``draw_data``, ``x``
  on a vertex-pulling pipeline) makes the instance number unobservable qualify.
* ``ranges``: consecutive single-instance draws with the same state, the same
  ``start_instance`` and ``base_vertex``, whose vertex (index) ranges continue
  each other, a list topology and whole primitives in each draw, become one draw
  over the union of the ranges, where the pipeline declares ``no_primitive_id``
  (``SV_PrimitiveID`` of the later draws' primitives changes).

Before comparing, vertex-buffer windows are normalised
(:func:`drawopt.analysis.mergeclass.draw_facts`): for an input-layout ``no_primitive_id``
pipeline whose only vertex buffer is slot 0, a rebind ``IASetVertexBuffers 0 vb
off stride`` is the same draw as binding ``vb`` at ``off mod stride`` and adding
``off div stride`` to the start vertex (base vertex for indexed draws). A run of
"one draw per quad, each in its own window of an upload buffer" (the quads
post's method 1) therefore becomes one draw: the merged draw keeps the first
draw's window and start and draws the whole range.

Runs never cross a non-state command (only state commands may lie between two
members), never include ``@nomerge`` draws or ``never_merge`` pipelines, and are
split so that no count exceeds 2^32-1. A run merges one way only (instances or
ranges).

The rewrite: the first draw of a run takes the merged arguments; the other
draws go. The state commands between the members stay where they were, which
is after the merged draw (the merged draw sees the first member's state, and
everything after the run sees exactly what it saw before), except those that a
later command of the same run overwrites completely before any draw reads them
(the window rebinds of a quad run, say), which go too.
"""

from __future__ import annotations

__all__ = ["MergeInstancesPass", "plan_merges", "MergePlan"]

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from drawopt.analysis.mergeclass import INSTANCES, RANGES, DrawFacts, adjacent_links, draw_facts
from drawopt.analysis.state import CRS, GFX_RS, HEAPS, StateTable, retrack
from drawopt.ir import arrayset
from drawopt.ir.ops import BY_NAME, COL_DRAW_COUNT, COL_INSTANCES, U32_MAX, Cat, Op, shared_col
from drawopt.ir.stream import Stream
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_CONST_OPS = (_OP["SetGraphicsRoot32BitConstants"], _OP["SetComputeRoot32BitConstants"])
_VB_OP = _OP["IASetVertexBuffers"]
_VB_SLOT = Op.IASetVertexBuffers.col("slot")
_CONST_DEST, _CONST_COUNT = (shared_col(("SetGraphicsRoot32BitConstants", a), ("SetComputeRoot32BitConstants", a))
                             for a in ("dest", "count"))
_INST, _RANGE = 1, 2


@dataclass
class MergePlan:
    """Runs to merge: ``head[r]``..``last[r]`` (draw indices), ``kind[r]`` 1 instances / 2 ranges,
    ``total[r]`` the merged count (instances or vertices / indices)."""

    head: np.ndarray
    last: np.ndarray
    kind: np.ndarray
    total: np.ndarray
    split_by_limit: int = 0
    links: dict[str, int] = field(default_factory=dict)


def plan_merges(facts: DrawFacts, limit: int = U32_MAX) -> MergePlan:
    """The runs of consecutive mergeable draws (module docstring), split at ``limit``."""
    n = len(facts)
    if n < 2:
        z = np.zeros(0, np.int64)
        return MergePlan(z, z, z, z)
    inst = adjacent_links(facts, INSTANCES).ok
    rng = adjacent_links(facts, RANGES).ok
    typ = np.where(inst, _INST, np.where(rng, _RANGE, 0)).astype(np.int64)
    # a run merges one way only: cut where the link type changes
    change = np.zeros(typ.shape[0], bool)
    change[1:] = (typ[1:] > 0) & (typ[:-1] > 0) & (typ[1:] != typ[:-1])
    typ[change] = 0
    # counts: instance_count for instance runs; vertex/index count for ranges
    args = facts.args
    link_pos = np.flatnonzero(typ > 0)
    heads, lasts, kinds, totals = (np.zeros(0, np.int64),) * 4
    split = 0
    if link_pos.size:
        # maximal runs of one link type: draws a..b where typ[a..b-1] are all > 0 (a type change
        # between two links was cut above, so a run is a stretch of consecutive link positions)
        first = np.flatnonzero(np.r_[True, np.diff(link_pos) > 1])
        a = link_pos[first]
        b = link_pos[np.r_[first[1:], link_pos.size] - 1] + 1
        k = typ[a]
        col = np.where(k == _INST, COL_INSTANCES, COL_DRAW_COUNT)
        cum = np.zeros((n + 1, 2), np.int64)
        np.cumsum(args[:, [COL_DRAW_COUNT, COL_INSTANCES]], axis=0, out=cum[1:])
        which = (col == COL_INSTANCES).astype(np.int64)
        total = cum[b + 1, which] - cum[a, which]
        fits = total <= limit
        heads, lasts, kinds, totals = a[fits], b[fits], k[fits], total[fits]
        big = np.flatnonzero(~fits)
        if big.size:  # runs over the limit: cut them where the running sum would pass it
            h, la, kd, tt = [heads], [lasts], [kinds], [totals]
            for r in big.tolist():
                runs, cuts = _split_at_limit(int(a[r]), int(b[r]), args[:, int(col[r])], limit)
                split += cuts
                for s0, s1, acc in runs:
                    h.append(np.array([s0]))
                    la.append(np.array([s1]))
                    kd.append(np.array([int(k[r])]))
                    tt.append(np.array([acc]))
            heads, lasts, kinds, totals = (np.concatenate(x).astype(np.int64) for x in (h, la, kd, tt))
            order = np.argsort(heads, kind="stable")
            heads, lasts, kinds, totals = heads[order], lasts[order], kinds[order], totals[order]
    plan = MergePlan(heads, lasts, kinds, totals, split)
    plan.links = {"instances": int(np.count_nonzero(typ == _INST)), "ranges": int(np.count_nonzero(typ == _RANGE))}
    return plan


def _split_at_limit(a: int, b: int, counts: np.ndarray, limit: int) -> tuple[list[tuple[int, int, int]], int]:
    """The runs ``(first, last, total)`` of draws ``a..b`` cut where the running count would pass
    ``limit`` (a draw that alone passes it stays by itself, unmerged), and how many cuts."""
    runs: list[tuple[int, int, int]] = []
    cuts = 0
    start, acc = a, 0
    for i, c in zip(range(a, b + 1), counts[a:b + 1].tolist()):
        if acc + c > limit and i > start:
            if i - 1 > start:
                runs.append((start, i - 1, acc))
            cuts += 1
            start, acc = i, 0
        acc += c
    if b > start:
        runs.append((start, b, acc))
    return runs, cuts


def _overwritten(stream: Stream, table: StateTable, cmds: np.ndarray) -> np.ndarray:
    """Of the state commands ``cmds`` (consecutive, no observer between them), those a later
    one of them overwrites completely. Nothing goes when a root-signature or heap change is
    among them (they reset other slots)."""
    assert table.scan is not None
    slot = table.scan.slot[cmds]
    if np.isin(slot, (GFX_RS, CRS, HEAPS)).any():
        return np.zeros(0, np.int64)
    drop: list[int] = []
    seen_simple: set[int] = set()
    seen_vb: set[int] = set()
    covered: dict[int, list[tuple[int, int]]] = {}
    for c, k in zip(cmds[::-1].tolist(), slot[::-1].tolist()):
        op = int(stream.op[c])
        if k < 0:
            continue
        if op == _VB_OP:
            key = int(stream.args[c, _VB_SLOT])
            if key in seen_vb:
                drop.append(c)
            seen_vb.add(key)
        elif op in _CONST_OPS:
            lo = int(stream.args[c, _CONST_DEST])
            hi = lo + int(stream.args[c, _CONST_COUNT])
            if any(a <= lo and hi <= b for a, b in covered.get(k, [])):
                drop.append(c)
            covered.setdefault(k, []).append((lo, hi))
            if k in seen_simple:  # a table / root view set later replaces the whole slot
                drop.append(c)
        else:
            if k in seen_simple:
                drop.append(c)
            seen_simple.add(k)
    return arrayset.unique(np.asarray(drop, np.int64))


@dataclass(frozen=True)
class MergeInstancesPass(Pass):
    """Merge consecutive draws with contiguous instance or vertex/index ranges (module docstring).

    Options: ``fold_windows`` (normalise vertex-buffer window rebinds, default on).
    """

    name: ClassVar[str] = "merge-instances"
    requires: ClassVar[tuple[str, ...]] = ("state",)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "fold consecutive draws with contiguous instance or index ranges into one draw"

    fold_windows: bool = True

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        table: StateTable = am.get("state", stream)
        facts = draw_facts(stream, table, fold=self.fold_windows)
        plan = plan_merges(facts)
        report: dict[str, Any] = {"runs": int(plan.head.size), "draws_removed": 0,
                                  "instance_runs": int(np.count_nonzero(plan.kind == _INST)),
                                  "range_runs": int(np.count_nonzero(plan.kind == _RANGE)),
                                  "split_by_limit": plan.split_by_limit}
        if plan.head.size == 0:
            return PassResult.unchanged(stream, **report)
        n = len(stream)
        keep = np.ones(n, bool)
        cmd = facts.cmd
        del facts  # (its columns are not needed past here: less at the pass's peak, the table's derivation)
        # members after the head go
        lens = plan.last - plan.head
        offs = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        members = np.repeat(plan.head, lens) + offs + 1
        keep[cmd[members]] = False
        # state commands a later one of the same run overwrites
        is_state = stream.cats() == int(Cat.STATE)
        states_before = np.cumsum(is_state)   # state commands up to and including each command
        dropped_state = 0
        lo, hi = cmd[plan.head] + 1, cmd[plan.last]
        several = np.flatnonzero(states_before[hi - 1] - states_before[lo - 1] > 1)   # two or more to compare
        for a, b in zip(lo[several].tolist(), hi[several].tolist()):
            st = np.flatnonzero(is_state[a:b]) + a
            d = _overwritten(stream, table, st)
            keep[d] = False
            dropped_state += int(d.size)
        idx = np.flatnonzero(keep)
        out = stream.take(idx)
        # the head takes the merged count; it keeps its own arguments otherwise (a folded range
        # keeps the head's window and start: the fold only served the comparison)
        pos = np.searchsorted(idx, cmd[plan.head])
        col = np.where(plan.kind == _INST, 1, 0)
        out.args[pos, col] = plan.total
        report["draws_removed"] = int(members.size)
        report["state_commands_removed"] = dropped_state
        # the output keeps commands of the input, only draws' counts changed: its state table follows
        # from the input's (state.retrack) instead of a full scan by the next pass
        am.put("state", out, retrack(table, idx, out))
        return PassResult(out, True, frozenset(), report)
