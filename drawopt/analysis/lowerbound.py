"""Dependency parts and the lower bound on draw calls (docs/passes.md, "The lower bound").

Draws are cut into dependency *segments* (:func:`drawopt.analysis.mergeclass.draw_segments`);
the hazard graph's constraints (:data:`CONSTRAINT_REASONS`) between the *scheduling units*
of a segment (:func:`segment_units`) give its *cuts* (:func:`cut_units`), which split it
into *parts* (:func:`draw_parts`) that no pass can interleave. ``schedule`` plans one part
at a time; :func:`lower_bound_parts` counts the calls a part needs per call class.
"""

from __future__ import annotations

__all__ = [
    "CONSTRAINT_REASONS", "segment_units", "cut_units", "draw_parts", "LowerBound", "lower_bound_parts",
    "lower_bound", "report_figures",
]

from dataclasses import dataclass
from typing import Any

import numpy as np

from drawopt.analysis.costmodel import TargetModel, estimate_cpu_cost, get_target
from drawopt.analysis.graph import EDGE_REASONS, HazardGraph, hazard_graph, node_of_command, segments_are_chains
from drawopt.analysis.mergeclass import DrawFacts, call_classes, draw_facts, draw_segments
from drawopt.analysis.state import StateTable, intern_rows, track
from drawopt.ir.stream import Stream, ragged_index

CONSTRAINT_REASONS = frozenset({"raw", "war", "waw", "order", "flush", "barrier", "opaque"})
"""Graph edge reasons no pass reorders across (``state`` edges are re-created, not kept)."""


def _constraint_edges(graph: Any) -> tuple[np.ndarray, np.ndarray]:
    """Sources and targets of the edges of ``graph`` whose reason is a constraint (arrays read
    straight from a :class:`~drawopt.analysis.graph.HazardGraph`; a networkx graph is walked)."""
    if isinstance(graph, HazardGraph):
        keep = np.isin(graph.reason, [EDGE_REASONS.index(r) for r in CONSTRAINT_REASONS])
        if keep.all():  # (a hazard graph has no state edges)
            return graph.eu.astype(np.int64, copy=False), graph.ev.astype(np.int64, copy=False)
        return graph.eu[keep].astype(np.int64, copy=False), graph.ev[keep].astype(np.int64, copy=False)
    eu, ev = [], []
    for u, v, r in graph.edges(data="reason"):
        if r in CONSTRAINT_REASONS:
            eu.append(u)
            ev.append(v)
    return np.asarray(eu, np.int64), np.asarray(ev, np.int64)


def segment_units(graph: Any, draw_cmd: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scheduling units of the draws and the constraints between them.

    A unit is the set of draws of one graph node inside one segment: the graph
    promises no hazard inside a node other than ``state``, so they may go in any
    order. Every edge ``u -> v`` of the graph whose reason is not ``state`` becomes
    a constraint between the units of ``u`` and ``v`` in each segment holding
    draws of both.

    Returns
    -------
    unit : int64[D]
        Unit of every draw.
    edges : int64[E, 2]
        Unit-level constraints ``(a, b)``: every draw of ``a`` before every draw of ``b``.
    """
    node = _nodes_of(graph, draw_cmd)
    if draw_cmd.size and (node < 0).any():
        raise ValueError("the dependency graph does not cover every draw")
    # (draws in stream order have non-decreasing nodes and segments: the (node, segment) pairs are
    # then sorted, each unit one run of draws, and the units sorted by node and by key)
    ordered = bool((np.diff(node) >= 0).all() and (np.diff(seg) >= 0).all())
    if not draw_cmd.size:
        unit, first = np.zeros(0, np.int64), np.zeros(0, np.int64)
    elif ordered:
        new = np.r_[True, (node[1:] != node[:-1]) | (seg[1:] != seg[:-1])]
        unit, first = np.cumsum(new) - 1, np.flatnonzero(new)  # = intern_rows of the sorted pairs
    else:
        unit, first = intern_rows(np.stack([node, seg], axis=1))
    u_node, u_seg = node[first], seg[first]
    eu_a, ev_a = _constraint_edges(graph)
    if not eu_a.size or not first.size:
        return unit, np.zeros((0, 2), np.int64)
    if ordered:
        return unit, _ordered_unit_edges(u_node, u_seg, eu_a, ev_a, int(node.max()) + 1)
    nseg = int(seg.max()) + 1
    key = u_node * nseg + u_seg
    korder = np.argsort(key, kind="stable")
    ksorted = key[korder]
    # units of each edge's source node (a node usually has one)
    bynode = np.argsort(u_node, kind="stable")
    nsorted = u_node[bynode]
    lo = np.searchsorted(nsorted, eu_a, "left")
    hi = np.searchsorted(nsorted, eu_a, "right")
    cnt = hi - lo
    rep = np.repeat(np.arange(eu_a.size), cnt)
    src_units = bynode[np.repeat(lo, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))]
    want = ev_a[rep] * nseg + u_seg[src_units]
    pos = np.clip(np.searchsorted(ksorted, want), 0, max(ksorted.size - 1, 0))
    hit = ksorted[pos] == want
    edges = np.stack([src_units[hit], korder[pos[hit]]], axis=1)
    return unit, edges


def _nodes_of(graph: Any, cmd: np.ndarray) -> np.ndarray:
    """The node of each command of ``cmd`` (-1 outside the graph): :func:`node_of_command`'s
    table, or for a :class:`HazardGraph` (nodes are disjoint runs in stream order) a search of
    the node ends, without a table over every command."""
    if not isinstance(graph, HazardGraph):
        return node_of_command(graph)[cmd]
    pos = np.searchsorted(graph.last, cmd)
    inside = pos < graph.last.shape[0]
    inside[inside] = graph.first[pos[inside]] <= cmd[inside]
    return np.where(inside, pos, -1)


def _ordered_unit_edges(u_node: np.ndarray, u_seg: np.ndarray, eu: np.ndarray, ev: np.ndarray,
                        nn: int) -> np.ndarray:
    """:func:`segment_units`' constraints when the units are sorted by (node, segment): the units of
    a node are one range of them (no search for an edge's source units), and a target node with a
    single unit needs no search either; in the order the general path lists them."""
    cnt = np.bincount(u_node, minlength=nn)
    start = np.cumsum(cnt) - cnt
    ok = (eu < nn) & (ev < nn)  # (an edge between nodes without draws gives nothing)
    eu, ev = eu[ok], ev[ok]
    n_src = cnt[eu]
    src = ragged_index(start[eu], n_src)  # every unit of each edge's source node, edge by edge
    tv = np.repeat(ev, n_src)
    want_seg = u_seg[src]
    tcnt = cnt[tv]
    pos = start[tv]
    hit = (tcnt == 1) & (u_seg[np.minimum(pos, u_seg.shape[0] - 1)] == want_seg)
    multi = np.flatnonzero(tcnt > 1)
    if multi.size:  # the target node's units, by segment: a search among them
        nseg = int(u_seg.max()) + 1
        key = u_node * nseg + u_seg
        want = tv[multi] * nseg + want_seg[multi]
        p = np.minimum(np.searchsorted(key, want), key.shape[0] - 1)
        pos[multi] = p
        hit[multi] = key[p] == want
    return np.stack([src[hit], pos[hit]], axis=1)





@dataclass(eq=False)
class LowerBound:
    """The lower bound on draw calls and how it was reached.

    ``bound``: the number; ``segments``: dependency segments holding draws;
    ``parts``: parts of those segments; ``classes``: call classes;
    ``part``: part id of every draw; ``cls``: class of every draw.
    """

    bound: int
    segments: int
    parts: int
    classes: int
    part: np.ndarray
    cls: np.ndarray


def cut_units(unit: np.ndarray, edges: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Which scheduling units are *cuts* of their segment.

    Units are numbered in stream order within each segment. A unit is a cut when
    every earlier unit of its segment must precede it and it must precede every
    later one (by paths of constraint edges): nothing can be moved across it.
    With the units in topological order, that holds exactly when every later unit
    has a direct predecessor at or after it and every earlier unit a direct
    successor at or before it.
    """
    nu = int(unit.max()) + 1 if unit.size else 0
    useg = np.zeros(nu, np.int64)
    useg[unit] = seg
    maxpred = np.full(nu, -1, np.int64)
    minsucc = np.full(nu, np.iinfo(np.int64).max, np.int64)
    if edges.size:
        np.maximum.at(maxpred, edges[:, 1], edges[:, 0])
        np.minimum.at(minsucc, edges[:, 0], edges[:, 1])
    if not nu:
        return np.zeros(0, bool)
    # all segments at once: unit values offset by segment, so that a running min (max) never
    # crosses into the segment before (after) it
    start = np.r_[True, useg[1:] != useg[:-1]]
    last = np.r_[useg[1:] != useg[:-1], True]
    off = (np.cumsum(start) - 1) * (nu + 3)
    u = np.arange(nu)
    # A(s): min over later units j of its segment of maxpred[j] >= s
    suf = np.minimum.accumulate((maxpred + 1 + off)[::-1])[::-1] - off - 1  # min over j >= s
    after = np.where(last, np.iinfo(np.int64).max, np.r_[suf[1:], 0])
    # B(s): max over earlier units i of its segment of minsucc[i] <= s
    pre = np.maximum.accumulate(np.minimum(minsucc, nu + 1) + off) - off  # max over i <= s
    before = np.where(start, np.iinfo(np.int64).min, np.r_[0, pre[:-1]])
    return (after >= u) & (before <= u)


def draw_parts(unit: np.ndarray, edges: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Part of every draw: segments split at cut units (:func:`cut_units`), each cut a part.

    In any order that respects ``edges``, every draw of a part comes after every
    draw of the parts before it, so parts can be scheduled independently. Ids
    increase along the stream.
    """
    if unit.size == 0:
        return np.zeros(0, np.int64)
    cut = cut_units(unit, edges, seg)
    du = cut[unit]
    new_unit = np.r_[True, unit[1:] != unit[:-1]]
    new_seg = np.r_[True, seg[1:] != seg[:-1]]
    prev_cut = np.r_[False, du[:-1]]
    start = new_seg | (new_unit & (du | prev_cut))
    return (np.cumsum(start) - 1).astype(np.int64)


def lower_bound_parts(stream: Stream, target: Any, reorder: str = "declared", table: StateTable | None = None,
                      graph: Any = None, facts: DrawFacts | None = None,
                      classes: np.ndarray | None = None) -> LowerBound:
    """The lower bound on draw calls (docs/passes.md, "The lower bound").

    Draws are cut into **segments** (:func:`draw_segments`: dispatches, flushes,
    barriers, copies, ``Opaque``, ``CSEnableAutomaticGpuFlush`` and pinned draws
    separate them; no pass moves a draw across one). Within a segment, a scheduling
    unit that the dependency graph (``reorder`` policy) places after everything
    before it and before everything after it is a **cut**; the cuts split the
    segment into **parts**, each cut being a part of its own; under ``reorder=none``
    every draw is a part. In any order the passes can produce, every draw of a part
    comes after every draw of the parts before it. A part needs at least one call
    per **call class** it holds (:func:`call_classes`: the draws some pass could
    fold into one call on ``target``), ``ceil(n / mdi_max_count)`` for a class of
    ``n`` draws; one call may continue across a part boundary when both sides hold
    its class. The bound is the sum over parts, less one for each boundary whose two
    sides share a class.

    ``table``, ``facts``, ``classes`` (:func:`call_classes` of ``facts`` on ``target``) and
    ``graph`` may pass analyses already computed; ``graph`` may also be a function that
    returns the hazard graph, called only when the bound needs it.
    """
    model = get_target(target)
    table = table if table is not None else track(stream)
    facts = facts if facts is not None else draw_facts(stream, table)
    d = len(facts)
    if d == 0:
        z = np.zeros(0, np.int64)
        return LowerBound(0, 0, 0, 0, z, z)
    mdi = bool(model.mdi)
    cls = classes if classes is not None else call_classes(facts, mdi=mdi)
    seg = draw_segments(stream, facts)
    lazy = graph is None or callable(graph)
    if reorder == "none" or (lazy and segments_are_chains(stream, table, facts.pipe, seg, reorder)):
        # (a stream whose segments are all chains has one part per draw: no graph needed)
        part = np.arange(d, dtype=np.int64)
    else:
        if graph is None:  # the hazard edges are all it reads: no state edges, no networkx
            graph = hazard_graph(stream, reorder=reorder)
        elif callable(graph):
            graph = graph()
        unit, edges = segment_units(graph, facts.cmd, seg)
        part = draw_parts(unit, edges, seg)
    limit = max(int(model.mdi_max_count), 1) if mdi else 1 << 62
    ncls = int(cls.max()) + 1
    pkey, counts = np.unique(part * ncls + cls, return_counts=True)  # the (part, class) pairs, sorted
    uniq = np.stack([pkey // ncls, pkey % ncls], axis=1)
    calls = int(np.sum(-(-counts // limit)))
    # boundaries: part p and p+1 of one segment sharing a class
    pseg = np.zeros(int(part.max()) + 1, np.int64)
    pseg[part] = seg
    keys = uniq[:, 0] * ncls + uniq[:, 1]
    nxt = uniq[:, 0] + 1
    valid = nxt <= part.max()
    want = nxt[valid] * ncls + uniq[valid, 1]
    pos = np.clip(np.searchsorted(keys, want), 0, keys.size - 1)
    hit = (keys[pos] == want) & (pseg[uniq[valid, 0]] == pseg[np.minimum(nxt[valid], part.max())])
    shared = _distinct_sorted(uniq[valid, 0][hit])  # (parts in order: pkey is sorted)
    return LowerBound(calls - shared, _distinct_sorted(seg), int(part.max()) + 1, ncls, part, cls)


def _distinct_sorted(x: np.ndarray) -> int:
    """Distinct values of the non-decreasing array ``x`` (``np.unique(x).size`` without a sort or hash)."""
    return int(np.count_nonzero(x[1:] != x[:-1])) + 1 if x.size else 0


def lower_bound(stream: Stream, target: str | TargetModel = "d3d12", reorder: str = "declared",
                table: Any = None, graph: Any = None, facts: DrawFacts | None = None,
                classes: np.ndarray | None = None) -> int:
    """The fewest draw calls any pipeline of drawopt's passes could reach (docs/passes.md).

    One call per *merge class* per *part* of each *dependency segment*, less one
    for every part boundary a call can span, and more where a hard limit (the
    target's multi-draw count) forces splits. :func:`lower_bound_parts`
    has the definition; ``table`` / ``graph`` / ``facts`` / ``classes`` may pass analyses already computed.
    """
    return lower_bound_parts(stream, get_target(target), reorder, table=table, graph=graph, facts=facts,
                             classes=classes).bound


def report_figures(stream: Stream, target: str | TargetModel = "d3d12", reorder: str = "declared",
                   table: Any = None, graph: Any = None, facts: DrawFacts | None = None,
                   classes: np.ndarray | None = None) -> dict[str, Any]:
    """The report rows the cost model owns: ``{"cpu_cost": us, "lower_bound": calls}``.

    ``drawopt optimize`` merges this dict into :func:`drawopt.stats.compute_stats`'s
    for the before and the after column (analyses as for :func:`lower_bound_parts`).
    """
    return {
        "cpu_cost": round(estimate_cpu_cost(stream, target), 3),
        "lower_bound": lower_bound(stream, target, reorder, table=table, graph=graph, facts=facts, classes=classes),
    }
