"""The dependency graph of a stream: what may not be reordered, and why.

:func:`build_graph` returns a :class:`networkx.DiGraph`. A **node** is a run of
consecutive commands of the stream (``first`` .. ``last``, inclusive): the state
commands that prepare an action and the action (a draw, dispatch, copy, flush,
barrier or opaque command), possibly several such segments when no hazard links
them. Node ids are integers in stream order. Node attributes:

``first``, ``last``  command indices (inclusive)
``kind``             ``draws``, ``dispatch``, ``copy``, ``flush``, ``barrier``, ``opaque``
                     or ``state`` (state commands after the last action)
``commands``         number of commands; ``actions``: draws/dispatches/copies in it

An **edge** ``u -> v`` says that some command of ``v`` must stay after some
command of ``u``. Edge attributes: ``reason`` (the strongest of ``reasons``),
``reasons`` (comma-separated) and ``resource`` (the resource or state the
strongest reason is about, where there is one). Reasons:

=========  ===============================================================
``raw``    ``v`` reads a resource ``u`` wrote (render/depth target, UAV, buffer,
           args, index data, copy destination)
``war``    ``v`` writes a resource ``u`` reads
``waw``    both write a resource (copies, dispatches)
``order``  both draw into a common target and their order is observable under
           the reorder policy (``none``: always; ``declared``: unless both
           pipelines are ``order_independent``; ``opaque``: also unless both are
           opaque, depth-tested, depth-writing draws against the same depth)
``flush``  a flush pins the GPU writes it covers before it and the front-end
           reads after it (indirect args, draw counts, index data)
``barrier````v`` or ``u`` is a ``ResourceBarrier`` of a resource the other accesses
``opaque`` an ``Opaque`` command (unknown to the model) orders everything
``state``  ``v``'s draw sees state a command of ``u`` sets (read-after-write), or
           ``v`` sets state ``u``'s draw saw (write-after-read / -write)
=========  ===============================================================

Only ``state`` edges are about command placement rather than rendering: a pass
that re-establishes every moved draw's state (from the state table) may ignore
them (see :func:`hazard_view`); no pass may reorder across any other edge. The
commands of one node have no hazard between them other than ``state``, so such
a pass may also reorder the draws inside a node.

The graph is kept small: accesses are tracked per resource as the most recent
write plus the accesses since (as Vulkan's synchronization validation does), so
an access depends only on the previous group of conflicting accesses, and edges
implied by a path of two others are dropped (hazard edges only through hazard
paths). Commuting accesses (reads; order-independent draws) form one group.

Implementation: everything is columnar (numpy) over segments, accesses and
events; the sequential steps, the bindings every action sees, the node
assignment, the state edges of the reads and the two-path edge reduction, run in
``drawopt._graph`` (``cext/_graph.pyx``) with pure-Python twins (:func:`_act_setter_events_py`,
:func:`_assign_nodes_py`, :func:`_state_reads_py`, :func:`_two_path_reduce_py`; ``DRAWOPT_PURE=1``).
State edges are found in node space after the nodes (which only hazards decide), an edge a
read already gave not listed again.
Accesses to resources that nothing writes are not kept (they can order nothing).
:func:`hazard_graph` gives the nodes and the non-``state`` edges as arrays,
without networkx, for passes that re-emit state.
"""

from __future__ import annotations

__all__ = [
    "build_graph", "hazard_graph", "hazard_graph_within", "HazardGraph", "node_of_command", "hazard_view",
    "commute_class",
    "ordered_chains", "segments_are_chains", "pack_columns", "lex_order", "graph_bytes",
    "EDGE_REASONS", "NODE_KINDS",
    "graph_summary", "to_dot", "to_json", "write_graph",
]

import json
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.access import declared_writes, heap_views, table_access
from drawopt.analysis.state import RTS, StateTable, intern_rows
from drawopt.errors import UsageError
from drawopt.ir.decls import Buffer, Pipeline
from drawopt.ir.ops import BARRIER_STATES, BY_CODE, BY_NAME, COL_PIPELINE, NARGS, Cat, Op, shared_col
from drawopt.ir.stream import Stream, ragged_index

if TYPE_CHECKING:  # networkx is imported where a graph is built or written (0.3 s, not on optimize's path)
    import networkx as nx

EDGE_REASONS = ("raw", "war", "waw", "order", "flush", "barrier", "opaque", "state")
"""Edge reasons, strongest first."""
NODE_KINDS = ("draws", "dispatch", "copy", "flush", "barrier", "opaque", "state")
_OP = {n: BY_NAME[n].code for n in BY_NAME}
_FE_VIRTUAL = "(front-end data)"
_INHERITED = "(inherited render targets)"
_INHERITED_DEPTH = "(inherited depth target)"
_FAN_CAP = 64
_COMMUTING_DEPTH = ("less", "lequal", "greater", "gequal")
_INDIRECT = ("DrawInstancedIndirect", "DrawIndexedInstancedIndirect", "MultiDrawInstancedIndirect",
             "MultiDrawIndexedInstancedIndirect", "MultiDrawInstancedIndirectAuto",
             "MultiDrawIndexedInstancedIndirectAuto")
"""Draws that read their arguments (and ``Auto``: their count) from a buffer through the front end."""
_INDEXED_NATIVE = {_OP[n] for n in ("DrawIndexedInstanced", "DrawIndexedInstancedIndirect",
                                    "MultiDrawIndexedInstancedIndirect", "MultiDrawIndexedInstancedIndirectAuto")}


def commute_class(pipeline: Pipeline | None, reorder: str, depth: str | None = None) -> str | None:
    """The class within which draws of ``pipeline`` commute on their targets, or None.

    Two draws writing a common target may swap when both have the same non-None
    class: ``"oi"`` for ``order_independent`` pipelines (policies ``declared`` and
    ``opaque``), and under ``opaque`` ``"opaque:<func>:<depth>"`` for opaque,
    depth-tested, depth-writing draws with a less/lequal/greater/gequal test into
    the same depth target (equal depths can then resolve differently).
    """
    if pipeline is None or reorder == "none":
        return None
    if pipeline.order_independent:
        return "oi"
    func = pipeline.depth.split(",")[0]
    if (reorder == "opaque" and not pipeline.is_compute and pipeline.blend == "opaque" and pipeline.depth_write
            and func in _COMMUTING_DEPTH and depth is not None):
        return f"opaque:{func}:{depth}"
    return None



def ordered_chains(stream: Stream, table: StateTable, pipe: np.ndarray, seg: np.ndarray,
                   reorder: str) -> np.ndarray:
    """Per draw: True when every later draw of its segment must stay after the one before it.

    Two consecutive draws of a segment are ordered when both write the colour targets of one
    ``OMSetRenderTargets`` command and neither pipeline can commute under ``reorder``
    (:func:`drawopt.analysis.graph.commute_class` gives None whatever the depth target): the
    dependency graph then has an ``order`` edge between their (distinct) nodes, with no
    other node between them. A segment whose draws are all so linked is a chain that no
    schedule can reorder, and its graph is not needed. The test is conservative: False
    only means "ask the graph".
    """
    d = pipe.shape[0]
    if d == 0:
        return np.zeros(0, bool)
    decls = stream.decls
    free = np.ones(len(decls) + 1, bool)  # may commute with another draw (or no pipeline)
    for p in np.flatnonzero(np.bincount(pipe[pipe >= 0], minlength=1)).tolist():  # (the pipelines used)
        pi = decls[p]
        if isinstance(pi, Pipeline):
            free[p] = commute_class(None if pi.is_compute else pi, reorder, "depth") is not None
    fr = free[np.where(pipe >= 0, pipe, len(decls))]
    rts = table.setter[:, RTS].astype(np.int64)
    ok = rts >= 0
    ok[ok] = stream.op[rts[ok]] == _OP["OMSetRenderTargets"]
    # the OMSetRenderTargets commands that name a colour target (a target that is not a depth one)
    uc = _unique_int(rts[ok])
    lens = stream.var_len[uc].astype(np.int64)
    not_depth = np.array([dc.kind != "depth" for dc in decls.items], bool)
    hit = not_depth[stream.pool[ragged_index(stream.var_off[uc], lens)]] if len(decls.items) else np.zeros(0, bool)
    has_colour = np.bincount(np.repeat(np.arange(uc.size), lens), weights=hit, minlength=uc.size) > 0
    colour = np.zeros(d, bool)
    colour[ok] = has_colour[np.searchsorted(uc, rts[ok])]
    link = (seg[1:] == seg[:-1]) & (rts[1:] == rts[:-1]) & colour[1:] & ~fr[1:] & ~fr[:-1]
    # chained[i]: every draw after i in its segment is linked to its predecessor
    last = np.r_[seg[1:] != seg[:-1], True]
    bad = np.r_[~link, True] & ~last  # a missing link after draw i (i not the last of its segment)
    nxt_bad = np.minimum.accumulate(np.where(bad, np.arange(d), d)[::-1])[::-1]
    seg_end = np.minimum.accumulate(np.where(last, np.arange(d), d)[::-1])[::-1]
    return nxt_bad >= seg_end


def segments_are_chains(stream: Stream, table: StateTable, pipe: np.ndarray, seg: np.ndarray, reorder: str) -> bool:
    """Every segment of more than one draw is a chain (:func:`ordered_chains`): no schedule can
    reorder anything, and each draw is a cut (a part of its own) without building the graph."""
    starts = np.r_[0, np.flatnonzero(np.diff(seg)) + 1] if seg.size else np.zeros(0, np.int64)
    multi = np.diff(np.r_[starts, seg.shape[0]]) > 1
    return bool(ordered_chains(stream, table, pipe, seg, reorder)[starts[multi]].all()) if multi.any() else True


def node_of_command(G: nx.DiGraph | HazardGraph) -> np.ndarray:
    """``out[i]``: the node holding command ``i`` (-1 outside the graph's range)."""
    n = int(G.graph.get("commands", 0))
    out = np.full(n, -1, np.int64)
    if isinstance(G, HazardGraph):
        if G.first.size:
            lens = G.last - G.first + 1
            out[ragged_index(G.first, lens)] = np.repeat(np.arange(G.first.shape[0], dtype=np.int64), lens)
        return out
    for v, d in G.nodes(data=True):
        out[d["first"]:d["last"] + 1] = v
    return out


def hazard_view(G: nx.DiGraph) -> nx.DiGraph:
    """A read-only view of ``G`` without ``state``-only edges (for passes that re-emit state)."""
    import networkx as nx
    return nx.subgraph_view(G, filter_edge=lambda u, v: G.edges[u, v]["reason"] != "state")


# --------------------------------------------------------------------------- state slots
_S_PSO, _S_RSG, _S_RSC, _S_HEAPS, _S_IB, _S_TOPO, _S_RTS, _S_VP, _S_SC, _S_BF, _S_SR, _S_GS, _S_AF = range(13)
_S_VB, _S_RG, _S_RC = 32, 64, 80
_SIMPLE_SLOT = {
    "SetPipelineState": _S_PSO, "SetGraphicsRootSignature": _S_RSG, "SetComputeRootSignature": _S_RSC,
    "SetDescriptorHeaps": _S_HEAPS, "IASetIndexBuffer": _S_IB, "IASetPrimitiveTopology": _S_TOPO,
    "OMSetRenderTargets": _S_RTS, "RSSetViewports": _S_VP, "RSSetScissorRects": _S_SC, "OMSetBlendFactor": _S_BF,
    "OMSetStencilRef": _S_SR, "GSSetParameters": _S_GS, "CSEnableAutomaticGpuFlush": _S_AF,
}
_ROOT_G = ("SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants", "SetGraphicsRootConstantBufferView",
           "SetGraphicsRootShaderResourceView")
_ROOT_C = ("SetComputeRootDescriptorTable", "SetComputeRoot32BitConstants")
_SLOT_NAMES = {_S_PSO: "pipeline", _S_RSG: "graphics root signature", _S_RSC: "compute root signature",
               _S_HEAPS: "descriptor heaps", _S_IB: "index buffer", _S_TOPO: "primitive topology",
               _S_RTS: "render targets", _S_VP: "viewport", _S_SC: "scissor", _S_BF: "blend factor",
               _S_SR: "stencil ref", _S_GS: "GS parameters", _S_AF: "CSEnableAutomaticGpuFlush"}
_K_DRAWS, _K_DISPATCH, _K_COPY, _K_FLUSH, _K_BARRIER, _K_OPAQUE, _K_STATE = range(7)
_KIND_OF_CAT = {int(Cat.DRAW): _K_DRAWS, int(Cat.DISPATCH): _K_DISPATCH, int(Cat.COPY): _K_COPY,
                int(Cat.FLUSH): _K_FLUSH, int(Cat.BARRIER): _K_BARRIER, int(Cat.OPAQUE): _K_OPAQUE}
_KIND_TABLE = np.full(256, _K_STATE, np.int64)
for _c, _k in _KIND_OF_CAT.items():
    _KIND_TABLE[_c] = _k
_IS_ACTION_KIND = np.zeros(len(NODE_KINDS), bool)
_IS_ACTION_KIND[[_K_DRAWS, _K_DISPATCH, _K_COPY]] = True
_IS_SOLO_KIND = np.zeros(len(NODE_KINDS), bool)
_IS_SOLO_KIND[[_K_FLUSH, _K_BARRIER, _K_OPAQUE]] = True
"""Segment kinds that are actions; that are nodes of their own (flush, barrier, opaque)."""
_R_CODE = {r: i for i, r in enumerate(EDGE_REASONS)}
_BIG_BITS = np.int64(40)
_BIG = np.int64(1) << _BIG_BITS
_REDUCE_CAP = 4096
"""Two-path reduction skips a middle node with more than this many (in x out) pairs."""


def _slot_name(slot: int) -> str:
    if slot >= _S_RC:
        return f"compute root parameter {slot - _S_RC}"
    if slot >= _S_RG:
        return f"root parameter {slot - _S_RG}"
    if slot >= _S_VB:
        return f"vertex buffer {slot - _S_VB}"
    return _SLOT_NAMES.get(slot, "state")


class _Builder:
    """Builds the graph with numpy; see the module docstring for what it means."""

    def __init__(self, s: Stream, reorder: str, start: int, stop: int, state_edges: bool = True,
                 context_from: int | None = None):
        self.s, self.reorder, self.start, self.stop = s, reorder, start, stop
        self.with_state = state_edges
        self.context_from = context_from
        """For :func:`hazard_graph_within`: the first segment whose accesses must see the hazards the
        whole stream's graph has (those before it are context); None: a plain range."""
        self.inexact = False
        """Set when the context before ``context_from`` does not settle those hazards (no graph then)."""
        self.decls = s.decls
        self.res_names: list[str] = []
        self._cmd_seg: np.ndarray | None = None
        self.res_ids: dict[str, int] = {}
        self.labels: dict[str, int] = {}

    def rid(self, name: str) -> int:
        i = self.res_ids.get(name)
        if i is None:
            i = self.res_ids[name] = len(self.res_names)
            self.res_names.append(name)
        return i

    def lab(self, label: str | None, mode: str) -> int:
        """Access class: 0 read, 1 ordered write, >= 2 a commuting write class."""
        if mode == "r":
            return 0
        if label is None:
            return 1
        return self.labels.setdefault(label, len(self.labels) + 2)

    # ------------------------------------------------------------------ state events
    def _events(self) -> None:
        s, n = self.s, self.stop
        op, args = s.op[:n], s.args[:n]
        # the slot each command sets (simple slots, root arguments, vertex buffers, and the index
        # buffer DrawIndexedX leaves undefined), at most one per command, in command order
        slot = _SLOT_OF_OP[op]
        i = np.flatnonzero(slot != _NO_SLOT)
        sl = slot[i].astype(np.int64)
        kind = sl >= _SLOT_FROM_ARG0
        if kind.any():
            k = np.flatnonzero(kind)
            code = sl[k] - _SLOT_FROM_ARG0  # the base slot; the first argument picks the slot
            cap = np.where(code == _S_VB, 31, 15)
            sl[k] = code + np.minimum(args[i[k], _SLOT_ARG], cap)
        self.set_cmd = i  # every command with an event (the extra events below are at some of these)
        opq = np.flatnonzero(op == _OP["Opaque"])
        self.opq = opq
        # sorted by slot, then command: a stable sort by slot keeps the command order
        small = not sl.size or (int(sl.min()) >= 0 and int(sl.max()) < 256)
        o = np.argsort(sl.astype(np.uint8) if small else sl, kind="stable")
        ev_slot, ev_cmd = sl[o], i[o].astype(np.int64)
        keys: list[np.ndarray] = []
        # a different root signature loses the root arguments; different heaps lose the tables
        extra: list[tuple[int, np.ndarray]] = []
        for name, base in (("SetGraphicsRootSignature", _S_RG), ("SetComputeRootSignature", _S_RC)):
            c = np.flatnonzero(op == _OP[name])
            extra.append((base, c[_changed(args[c, _ROOTSIG_ARG], self.epoch(c))]))
        c = np.flatnonzero(op == _OP["SetDescriptorHeaps"])
        hv = np.array([hash(tuple(sorted(s.var(int(x)).tolist()))) for x in c], np.int64)
        ch = c[_changed(hv, self.epoch(c))]
        extra += [(_S_RG, ch), (_S_RC, ch)]
        for base in (_S_RG, _S_RC):  # slot by slot: these keys are sorted
            cm = np.sort(np.concatenate([x for b, x in extra if b == base]))
            if cm.size:
                keys.append(((base + np.arange(16, dtype=np.int64))[:, None] * _BIG + cm[None, :]).reshape(-1))
        if keys:  # the few extra events merged in, after the events of an equal (slot, command)
            ex = np.sort(np.concatenate(keys), kind="stable")
            ex_slot, ex_cmd = ex >> _BIG_BITS, ex & (_BIG - 1)
            pos = np.empty(ex.size, np.int64)
            cut = np.flatnonzero(np.r_[True, ex_slot[1:] != ex_slot[:-1], True])
            for a, b in zip(cut[:-1].tolist(), cut[1:].tolist()):  # (root slots only: at most 32)
                lo, hi = np.searchsorted(ev_slot, (ex_slot[a], ex_slot[a] + 1)).tolist()
                pos[a:b] = lo + np.searchsorted(ev_cmd[lo:hi], ex_cmd[a:b], side="right")
            ev_slot, ev_cmd = np.insert(ev_slot, pos, ex_slot), np.insert(ev_cmd, pos, ex_cmd)
        self.ev_slot, self.ev_cmd = ev_slot, ev_cmd  # (sorted by slot, then command)
        used = ev_slot[np.r_[True, ev_slot[1:] != ev_slot[:-1]]] if ev_slot.size else ev_slot
        self.vb_slots = used[(used >= _S_VB) & (used < _S_RG)].tolist()
        self.rg_slots = used[(used >= _S_RG) & (used < _S_RC)].tolist()
        self.rc_slots = used[(used >= _S_RC) & (used < _S_RC + 16)].tolist()

    def epoch(self, cmd: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.opq, cmd, side="left")

    def _setters(self, slots: list[int], cmd: np.ndarray) -> list[np.ndarray]:
        """Per slot of ``slots``: for each of the commands ``cmd`` (non-decreasing), the last
        command before it that writes the slot in its Opaque epoch (-1: none)."""
        if not slots:
            return []
        _, got = _act_setter_events(self.ev_cmd, self.ev_slot, np.array(slots, np.int64), cmd, self.opq)
        return list(got)

    # ------------------------------------------------------------------ segments
    def _segments(self) -> None:
        s = self.s
        cats = s.cats()[self.start:self.stop].astype(np.int64)
        ns = self.start + np.flatnonzero(cats != int(Cat.STATE))
        trailing = (ns[-1] + 1 if ns.size else self.start) < self.stop
        self.seg_cmd = ns   # the non-state command ending each segment
        self.seg_first = np.r_[self.start, ns[:-1] + 1].astype(np.int64) if ns.size else np.zeros(0, np.int64)
        self.seg_last = ns.copy()
        kinds = _KIND_TABLE[s.cats()[ns]] if ns.size else np.zeros(0, np.int64)
        if trailing:
            self.seg_first = np.r_[self.seg_first, ns[-1] + 1 if ns.size else self.start]
            self.seg_last = np.r_[self.seg_last, self.stop - 1]
            kinds = np.r_[kinds, _K_STATE]
        self.seg_kind = kinds
        self.nseg = kinds.size

    def seg_of(self, cmd: np.ndarray) -> np.ndarray:
        """Segment of each command (-1 outside the range)."""
        if self._cmd_seg is None:  # the segments tile start .. stop-1
            self._cmd_seg = np.repeat(np.arange(self.nseg, dtype=np.int64), self.seg_last - self.seg_first + 1)
        inside = (cmd >= self.start) & (cmd < self.stop)
        return np.where(inside, self._cmd_seg[np.where(inside, cmd - self.start, 0)], -1)

    # ------------------------------------------------------------------ accesses
    def _accesses(self) -> None:
        s, decls = self.s, self.decls
        args = s.args
        act_mask = _IS_ACTION_KIND[self.seg_kind]
        aseg = np.flatnonzero(act_mask)
        acmd = self.seg_cmd[aseg] if aseg.size else np.zeros(0, np.int64)
        aop = s.op[acmd].astype(np.int64)
        self.act_seg, self.act_cmd, self.act_op = aseg, acmd, aop
        pset, rts = self._setters([_S_PSO, _S_RTS], acmd)
        pso = np.where(pset >= 0, args[np.maximum(pset, 0), COL_PIPELINE], -1)
        is_pipe = np.array([isinstance(d, Pipeline) for d in decls.items] + [False], bool)
        pso = np.where(is_pipe[pso], pso, -1)
        self.act_pso = pso
        # the bindings that decide what an action accesses: what a binding contributes is (opcode,
        # value) of the command that set it ((-1, -1) when none): one column of ranks of those
        # pairs (ordered as the pairs) per slot, between (opcode, pipeline, render-target setter)
        # and the buffer arguments of the action
        bslots = [_S_IB, *self.vb_slots, *self.rg_slots, *self.rc_slots]
        if not hasattr(self, "_crank"):
            self._crank = np.append(self._binding_ranks(), -1)  # the last entry: no setter (index -1)
        crank = self._crank
        buf = _IS_BUFFER_ARG_OP[aop]
        if acmd.size:
            head = np.stack([aop, pso, rts], axis=1)
            tail = np.zeros((acmd.size, args.shape[1]), np.int64)  # the arguments of the actions that read buffers
            tail[buf] = args[acmd[buf]]
            # signatures that differ only in arguments no access reads (an indirect draw's offsets
            # and counts: every MDI call its own signature) share their accesses: one class each
            first, inv = _action_signatures(self.ev_cmd, self.ev_slot, np.array(bslots, np.int64), acmd, self.opq,
                                            crank, head, tail, tail_keep=_TAIL_KEEP[aop, :tail.shape[1]])
        else:
            first, inv = _unique_rows(np.zeros((0, 1), np.int64))
        # the bindings of the distinct signatures
        fo = np.argsort(first, kind="stable")
        bind = {_S_RTS: rts[first]}
        for slot, c in zip(bslots, self._setters(bslots, acmd[first[fo]])):
            bind[slot] = np.empty_like(c)
            bind[slot][fo] = c
        flat, counts = self._signature_accesses(first, bind)
        # flushes and barriers (they write)
        fe = self.rid(_FE_VIRTUAL)
        fl = np.flatnonzero(self.seg_kind == _K_FLUSH)
        br = np.flatnonzero(self.seg_kind == _K_BARRIER)
        bcmd = self.seg_cmd[br]
        bres = np.array([self.rid(decls[int(args[c, _BARRIER_RES])].name) for c in bcmd], np.int64)
        bfe = br[np.isin(args[bcmd, _BARRIER_AFTER], list(_FE_STATES))]
        # the actions' accesses, less those of resources nothing writes (reads alone order nothing:
        # they give no edge, and the write signatures of the nodes do not see them)
        written = np.zeros(len(self.res_names), bool)
        written[flat[flat[:, 1] >= 1, 0]] = True
        written[bres] = True
        written[fe] |= bool(fl.size or bfe.size)
        if self.context_from is not None:
            written[:] = True  # (what was written before the range is not known: every access kept)
        kept = written[flat[:, 0]]
        cum = np.r_[0, np.cumsum(kept)]
        offs = np.cumsum(counts) - counts
        counts = cum[offs + counts] - cum[offs]
        flat = flat[kept]
        # every action's accesses (those of its signature), then the flushes' and barriers' (writes)
        tail_seg = np.r_[fl, br, bfe].astype(np.int64)
        tail_res = np.r_[np.full(fl.size, fe, np.int64), bres, np.full(bfe.size, fe, np.int64)]
        self.acc_seg, self.acc_res, self.acc_cls = _spread_accesses(
            aseg.astype(np.int64, copy=False), inv, counts, flat, tail_seg, tail_res)

    def _binding_ranks(self) -> np.ndarray:
        """Per command (-1 where it sets no slot): a number ordered as its ``(opcode, value)`` is
        among those of every state event, equal for equal pairs, >= 0 (the value: the buffer of an
        index buffer, the argument of a root argument, -1 for root constants and ``DrawIndexedX``).
        The pair packed into one word where it fits (``opcode << 42 | value + 1``, or
        :func:`pack_columns`), else its rank: the signatures only compare these numbers, so any of
        them orders them alike."""
        s = self.s
        out = np.full(len(s), -1, np.int64)
        c = self.set_cmd  # the commands of the events (in command order: the gathers run through memory once)
        if not c.size:
            return out
        o = s.op[c]
        val = s.args[c, _BINDING_ARG]
        ib = np.flatnonzero(o == _OP["IASetIndexBuffer"])
        val[ib] = s.args[c[ib], _IB_BUF]
        val[_NO_BINDING_VALUE[o]] = -1
        if val.size and int(val.min()) >= -1 and int(val.max()) < (1 << 42) - 1:
            val += 1  # (opcode << 42 | value + 1: ordered as the pairs are, >= 0; in place, no packing temporaries)
            key = o.astype(np.int64)
            key <<= 42
            key |= val
            out[c] = key
            return out
        key = pack_columns([o, val])  # ordered as the pairs are, from 0
        out[c] = key[:, 0] if key.shape[1] == 1 else _unique_rows(key)[1]
        return out

    def _signature_accesses(self, first: np.ndarray, bind: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Accesses of the actions ``first`` (indices into the action arrays; one per distinct
        signature, in signature order), whose slots were last set by the commands ``bind[slot]``
        (-1: none): ``flat`` int64[K, 2] of (resource id, class) sorted by
        resource id within each action, and ``counts`` int64[len(first)]. A copy's write and
        read stay two accesses, the write first, when it copies a buffer onto itself.

        What an action accesses (columnar, one block of rows per kind of access, in the order
        the accesses are listed): a copy writes ``dst`` and reads ``src``; a draw writes its
        render targets (class: :func:`commute_class`) and writes or reads its depth target,
        reads its index buffer, a ``DrawIndexedX`` buffer, indirect arguments and counts (and
        then the front end) and its vertex buffers (unless its pipeline pulls vertices); a draw
        or dispatch with a pipeline of its kind reads the pipeline's ``reads=`` and the srv/cbv
        resources of the root parameters it reads, and writes its ``writes=`` and the UAVs its
        tables and root views reach (:mod:`drawopt.analysis.access`, by declaration index), each
        also a front-end write when the front end reads that buffer. Several accesses to one
        resource join: reads give way to a write; two different write classes make an ordered
        write. Resource ids are numbered in order of first access (action by action).
        """
        s, decls = self.s, self.decls
        nd = len(decls)
        fe_key, inh_key, inh_d_key = nd, nd + 1, nd + 2  # the virtual resources
        args, op = s.args, s.op
        n = first.shape[0]
        cmd, aop, pso = self.act_cmd[first], self.act_op[first], self.act_pso[first]
        rows_l: list[np.ndarray] = []
        hi_l: list[np.ndarray] = []
        lo_l: list[np.ndarray] = []
        res_l: list[np.ndarray] = []
        cls_l: list[np.ndarray] = []

        def add(rows: np.ndarray, hi: Any, lo: Any, res: Any, cls: Any) -> None:
            # one access per row of ``rows``; order key (hi, lo) within the action
            k = rows.shape[0]
            if not k:
                return
            rows_l.append(rows)
            for lst, x in ((hi_l, hi), (lo_l, lo), (res_l, res), (cls_l, cls)):
                lst.append(np.broadcast_to(np.asarray(x, np.int64), (k,)))

        def add_ragged(rows: np.ndarray, grp: np.ndarray, lists: list[list[tuple[int, int]]], hi: int,
                       lo_mul: int = 1, fe: bool = False, row_cls: np.ndarray | None = None) -> None:
            # rows[i] gets the accesses lists[grp[i]] (resource key, class; the class of rows[i]
            # is row_cls[i] instead where given), lo = index * lo_mul
            lens = np.array([len(x) for x in lists], np.int64)
            if not rows.size or not lens.any():
                return
            off = np.cumsum(lens) - lens
            flat_r = np.array([r for x in lists for r, _ in x], np.int64)
            flat_c = np.array([c for x in lists for _, c in x], np.int64)
            idx = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(off, lens)
            nl = lens[grp]
            k = ragged_index(off[grp], nl)
            r = np.repeat(rows, nl)
            add(r, hi, idx[k] * lo_mul, flat_r[k], flat_c[k] if row_cls is None else np.repeat(row_cls, nl))
            if fe:  # a front-end write after each write of a buffer the front end reads
                m = fe_read[flat_r[k]]
                add(r[m], hi, idx[k][m] * lo_mul + 1, fe_key, fe_cls)

        fe_read = np.zeros(nd + 3, bool)
        fe_read[[decls.index[x] for x in self.fe_bufs if x in decls]] = True
        fe_cls = self.lab("fe-writers", "w")
        is_pipe = np.zeros(nd + 1, bool)
        is_cs = np.zeros(nd + 1, bool)
        pulls = np.zeros(nd + 1, bool)
        for i, d in enumerate(decls.items):
            if isinstance(d, Pipeline):
                is_pipe[i], is_cs[i], pulls[i] = True, d.is_compute, d.vertex_pulling
        cat = _CAT_TABLE[aop]
        draw = cat == int(Cat.DRAW)
        copy = aop == _OP["CopyBufferRegion"]
        # the pipeline each action uses (-1: none, or one of the other kind)
        eff = np.where(is_pipe[pso] & (is_cs[pso] != draw), pso, -1)
        eff[copy] = -1
        # copies
        c = np.flatnonzero(copy)
        add(c, 0, 0, args[cmd[c], _COPY_DST], 1)
        add(c, 0, 1, args[cmd[c], _COPY_SRC], 0)
        # draws: render and depth targets, per (pipeline, render-target command)
        d = np.flatnonzero(draw)
        rts = bind[_S_RTS][d]
        pair = (eff[d] + 1) * (len(s) + 1) + (rts + 1)
        upair, pinv = np.unique(pair, return_inverse=True)
        tgt_lists = []
        for key in upair.tolist():
            p, rc = key // (len(s) + 1) - 1, key % (len(s) + 1) - 1
            pi = decls[p] if p >= 0 else None
            if rc < 0:
                targets, depth = [inh_key], inh_d_key
            else:
                targets, depth = [], None
                for x in s.var(rc).tolist():
                    if decls[int(x)].kind == "depth":
                        depth = int(x)
                    else:
                        targets.append(int(x))
            lab = commute_class(pi, self.reorder, None if depth is None else
                                _INHERITED_DEPTH if depth == inh_d_key else decls[depth].name)
            wcls = self.lab(lab, "w")
            acc = [(t, wcls) for t in targets]
            if depth is not None:
                # no usable pipeline (none set, or one of the other kind): what it does to the depth
                # target is unknown, so it writes it (as the verifier's records have it)
                if pi is None or pi.depth_write:
                    acc.append((depth, wcls))
                elif pi.depth_test:
                    acc.append((depth, 0))
            tgt_lists.append(acc)
        add_ragged(d, pinv.reshape(-1), tgt_lists, 0)
        # draws: the front end's reads
        fe_rows = np.zeros(n, bool)
        ib = bind.get(_S_IB, np.full(n, -1, np.int64))
        m = draw & _IS_INDEXED_NATIVE[aop] & (ib >= 0)
        m[m] = op[ib[m]] == _OP["IASetIndexBuffer"]
        r = np.flatnonzero(m)
        add(r, 1, 0, args[ib[r], _IB_BUF], 0)
        fe_rows |= m
        m = aop == _OP["DrawIndexedX"]
        r = np.flatnonzero(m)
        add(r, 2, 0, args[cmd[r], _DX_BUF], 0)
        fe_rows |= m
        for name in _INDIRECT:
            sp = BY_NAME[name]
            r = np.flatnonzero(aop == sp.code)
            add(r, 3, 0, args[cmd[r], sp.col("args_buffer")], 0)
            if "count_buffer" in sp.fields:
                add(r, 4, 0, args[cmd[r], sp.col("count_buffer")], 0)
            fe_rows[r] = True
        add(np.flatnonzero(fe_rows), 5, 0, fe_key, 0)
        # draws: vertex buffers
        vb_rows = draw & ~pulls[eff]
        for slot in self.vb_slots:
            b = bind[slot]
            r = np.flatnonzero(vb_rows & (b >= 0))
            add(r, 6, slot, args[b[r], _BINDING_ARG], 0)
        # draws and dispatches with a pipeline: declared reads and writes, then the root parameters
        # (drawopt.analysis.access's rule: declared writes, tables, root views)
        sel = np.flatnonzero(eff >= 0)
        upipe, pinv = np.unique(eff[sel], return_inverse=True)
        pinv = pinv.reshape(-1)
        pis = [decls[p] for p in upipe.tolist()]
        oi = np.array([self.lab("oi" if (pi.order_independent and self.reorder != "none") else None, "w")
                       for pi in pis], np.int64)
        add_ragged(sel, pinv, [[(decls.index[x], 0) for x in (_resource_of(decls, nm) for nm in pi.reads) if x]
                               for pi in pis], 7)
        add_ragged(sel, pinv, [[(x, int(oi[j])) for x in declared_writes(decls, pi)] for j, pi in enumerate(pis)],
                   9 << 10, 2, fe=True)
        roots = [decls[pi.root] if pi.root is not None and pi.root in decls else None for pi in pis]
        # per (root signature, parameter q): the actions whose pipeline reads q (read_params is
        # sorted, so q orders the parameters as the rule lists them)
        rs_ids: dict[int, int] = {}
        rs_of = np.array([-1 if rs is None else rs_ids.setdefault(id(rs), len(rs_ids)) for rs in roots], np.int64)
        rs_list = list({id(rs): rs for rs in roots if rs is not None}.values())
        reads_q = np.zeros((len(pis) + 1, 16), bool)
        for j, (pi, rs) in enumerate(zip(pis, roots)):
            if rs is not None:
                q = [x for x in pi.read_params(len(rs.params)) if x < 16]
                reads_q[j, q] = True
        row_oi = oi[pinv] if pinv.size else np.zeros(0, np.int64)
        row_rs = rs_of[pinv] if pinv.size else np.zeros(0, np.int64)
        row_cs = is_cs[eff[sel]]
        for base, cs in ((_S_RG, False), (_S_RC, True)):
            for q in range(16):
                b = bind.get(base + q)
                if b is None:
                    continue
                m = (row_cs == cs) & reads_q[pinv, q] & (b[sel] >= 0)
                if not m.any():
                    continue
                for ri, rs in enumerate(rs_list):
                    mm = m & (row_rs == ri)
                    if not mm.any() or q >= len(rs.params):
                        continue
                    rp = rs.params[q]
                    w = np.flatnonzero(mm)
                    bc = b[sel[w]]
                    if rp.kind == "table":
                        w, bc = w[_IS_TABLE_OP[op[bc]]], bc[_IS_TABLE_OP[op[bc]]]
                        uh, hinv = np.unique(args[bc, _BINDING_ARG], return_inverse=True)
                        got = [self._table(rp, h) for h in uh.tolist()]
                        hinv = hinv.reshape(-1)
                        add_ragged(sel[w], hinv, [[(x, 0) for x in g[0]] for g in got], (8 << 10) + q)
                        add_ragged(sel[w], hinv, [[(x, 0) for x in g[1]] for g in got], (9 << 10) + 1 + q, 2,
                                   fe=True, row_cls=row_oi[w])
                    elif rp.kind in ("cbv", "srv", "uav"):
                        ok = _IS_ROOT_VIEW_OP[op[bc]]
                        w, buf = w[ok], args[bc[ok], _BINDING_ARG]
                        if rp.kind == "uav":
                            add(sel[w], (9 << 10) + 1 + q, 0, buf, row_oi[w])
                            f = fe_read[buf]
                            add(sel[w[f]], (9 << 10) + 1 + q, 1, fe_key, fe_cls)
                        else:
                            add(sel[w], (8 << 10) + q, 0, buf, 0)
        if not rows_l:
            return np.zeros((0, 2), np.int64), np.zeros(n, np.int64)
        rows, res, cls = np.concatenate(rows_l), np.concatenate(res_l), np.concatenate(cls_l)
        # resource ids in order of first access
        order = lex_order([rows, np.concatenate(hi_l), np.concatenate(lo_l)])
        pos = np.full(nd + 3, order.size, np.int64)  # each resource key's first access (keys < nd + 3)
        np.minimum.at(pos, res[order], np.arange(order.size, dtype=np.int64))
        seen = np.flatnonzero(pos < order.size)
        enc = seen[np.argsort(pos[seen], kind="stable")]
        virtual = {fe_key: _FE_VIRTUAL, inh_key: _INHERITED, inh_d_key: _INHERITED_DEPTH}
        for x in enc.tolist():
            self.rid(virtual[x] if x >= nd else decls.items[x].name)
        lut = np.full(nd + 3, -1, np.int64)
        lut[enc] = np.array([self.res_ids[virtual[x] if x >= nd else decls.items[x].name] for x in enc.tolist()],
                            np.int64)
        fid = lut[res]
        # join the accesses of one action to one resource (a copy's two stay apart: dst, then src)
        apart = np.where(copy[rows], np.concatenate(lo_l), 0)
        o = lex_order([rows, fid, apart])
        rows, fid, cls, apart = rows[o], fid[o], cls[o], apart[o]
        head = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1]) | (fid[1:] != fid[:-1])
                                    | (apart[1:] != apart[:-1])])
        nz = cls > 0
        lo_c = np.minimum.reduceat(np.where(nz, cls, np.iinfo(np.int64).max), head)
        hi_c = np.maximum.reduceat(np.where(nz, cls, 0), head)
        joined = np.where(hi_c == 0, 0, np.where(lo_c == hi_c, hi_c, 1))
        return np.stack([fid[head], joined], axis=1), np.bincount(rows[head], minlength=n).astype(np.int64)

    def _table(self, rp: Any, href: int) -> tuple[list[int], list[int]]:
        """What a descriptor table ``rp`` bound at ``href`` (heap index << 32 | slot) gives access
        to: its reads (in range order) and the resources its UAV ranges write, as declaration
        indices -- :func:`drawopt.analysis.access.table_access`, THE resource-access rule."""
        key = (id(rp), href)
        got = self._table_cache.get(key)
        if got is None:
            got = self._table_cache[key] = table_access(self.decls, rp, href, self._heap_views)
        return got

    # ------------------------------------------------------------------ edges
    def _sorted_accesses(self) -> tuple[np.ndarray, ...]:
        """The accesses ``(seg, res, cls, epoch)`` sorted by (epoch, resource, segment), stably."""
        if getattr(self, "_sorted", None) is None:
            seg, res, cls = self.acc_seg, self.acc_res, self.acc_cls
            ep = self.epoch(self.seg_cmd_or_first(seg)) if self.opq.size else np.zeros(seg.size, np.int64)
            # lex_order([ep, res, seg]) in two stable sorts: by segment (the accesses are a few runs of
            # increasing segments: a merge), then by (epoch, resource), a radix sort where it fits 16 bits
            o = np.argsort(seg, kind="stable")
            key = ep[o] * (len(self.res_names) + 1) + res[o]
            o = o[np.argsort(key.astype(np.uint16) if key.size and int(key.max()) < 1 << 16 else key, kind="stable")]
            self._sorted = (seg[o], res[o], cls[o], ep[o])
            # (the sorted copy is all that reads them from here: :meth:`_nodes` sums over the accesses)
            self.acc_seg = self.acc_res = self.acc_cls = None
        return self._sorted

    def _hazard_edges(self) -> tuple[np.ndarray, ...]:
        seg, res, cls, ep = self._sorted_accesses()
        return _hazard_pairs(seg, res, cls, ep, self.seg_kind)

    def _context_exact(self, tseg: int) -> bool:
        """Whether the hazard edges between segments ``>= tseg`` of this range are those of the graph
        of the whole stream, whatever came before the range.

        :func:`_hazard_pairs` links an access to the previous group of its (epoch, resource); what
        the range cannot see is the part of its first group (per key) that lies before it, and the
        group before that. The check fails where that could decide an edge between two segments
        ``>= tseg``: (a) the key's first access here is at or after ``tseg`` and is not an ordered
        write (class 1, which starts a group of its own: then its group is known); or (b) the second
        group's members get their edges from the first group (all of it when it has at most
        :data:`_FAN_CAP` members, else from the second group's first member), the first group's size
        is not known here (at most :data:`_FAN_CAP` members seen), the second group has more than one
        member and the first group or the second group's first member is at or after ``tseg``.
        """
        seg, res, cls, ep = self._sorted_accesses()
        if not seg.size:
            return True
        key = ep * _BIG + res
        n = seg.size
        newkey = np.r_[True, key[1:] != key[:-1]]
        newgrp = newkey | np.r_[True, cls[1:] != cls[:-1]] | (cls == 1)
        gid = np.cumsum(newgrp) - 1
        gstart = np.flatnonzero(newgrp)
        gend = np.r_[gstart[1:], n]
        kstart = np.flatnonzero(newkey)
        kend = np.r_[kstart[1:], n]
        live = seg[kend - 1] >= tseg  # keys accessed at or after tseg (segments are sorted within a key)
        f = kstart[live]
        g1 = gid[f]
        e1 = gend[g1]  # (exclusive) end of the first group: the second group's first access
        has2 = e1 < kend[live]
        g2e = gend[np.minimum(g1 + 1, gstart.size - 1)]
        ok = (cls[f] == 1) | ((seg[f] < tseg) & (
            ~has2 | (e1 - f > _FAN_CAP) | (g2e - e1 == 1)
            | ((seg[e1 - 1] < tseg) & (seg[np.minimum(e1, n - 1)] < tseg))))
        return bool(ok.all())

    def seg_cmd_or_first(self, seg: np.ndarray) -> np.ndarray:
        return np.where(self.seg_kind[seg] == _K_STATE, self.seg_first[seg], self.seg_last[seg])

    def _state_edges(self, node: np.ndarray) -> tuple[np.ndarray, ...]:
        """Read-after-write (a draw and the state it sees) and write-after-read/-write of state,
        between the nodes ``node`` (of every segment): ``(u, v, resource code)``, in the order
        read-after-write, write-after-read (each by (group, slot, action), leaving out an edge
        that an earlier slot of the same action or the previous action of the block already
        gave: the first of each edge stays), write-after-write (by event)."""
        decls = self.decls
        aseg, aop = self.act_seg, self.act_op
        z = np.zeros(0, np.int64)
        if not aseg.size:
            return z, z, z
        is_draw = self.seg_kind[aseg] == _K_DRAWS
        is_disp = self.seg_kind[aseg] == _K_DISPATCH
        # actions grouped by what they read: (kind, pipeline, indexed)
        group = np.where(is_draw, 0, np.where(is_disp, 1, 2)) * 1_000_000 + (self.act_pso + 1) * 4 + \
            _IS_INDEXED_NATIVE[aop]
        ug, ginv = np.unique(group, return_inverse=True)
        grp_slots: list[list[int]] = []
        for gk in ug.tolist():
            kind, rest = divmod(int(gk), 1_000_000)
            p = rest // 4 - 1
            grp_slots.append([] if kind == 2 else self._read_slots(kind == 0, decls[p] if p >= 0 else None,
                                                                    bool(rest % 4)))
        grp_off = np.r_[0, np.cumsum([len(x) for x in grp_slots])].astype(np.int64)
        flat_slots = np.array([x for lst in grp_slots for x in lst], np.int64)
        if not flat_slots.size:  # no draw or dispatch reads state: no state edges (not even write-after-write)
            return z, z, z
        # per event: the node of its command, and of the slot's next write (after the first event
        # with the setter's key, should one command write a slot twice)
        ev_cmd, ev_slot = self.ev_cmd, self.ev_slot
        ne = ev_cmd.size
        ev_epoch = self.epoch(ev_cmd) if self.opq.size else np.zeros(ne, np.int64)
        act_epoch = self.epoch(self.act_cmd) if self.opq.size else np.zeros(aseg.size, np.int64)
        ev_seg = self.seg_of(ev_cmd)
        ev_node = np.where(ev_seg >= 0, node[np.maximum(ev_seg, 0)], -1)
        newkey = np.r_[True, (ev_slot[1:] != ev_slot[:-1]) | (ev_cmd[1:] != ev_cmd[:-1])] if ne else np.zeros(0, bool)
        first_dup = np.maximum.accumulate(np.where(newkey, np.arange(ne), 0)) if ne else z
        nxt = np.minimum(first_dup + 1, max(ne - 1, 0))
        okn = (first_dup + 1 < ne) & (ev_slot[nxt] == ev_slot) & (ev_epoch[nxt] == ev_epoch) if ne else z.astype(bool)
        war_dst = np.where(okn, ev_node[nxt], -1) if ne else z
        nslot = _S_RC + 16
        lo = np.searchsorted(ev_slot, np.arange(nslot), "left").astype(np.int64)
        hi = np.searchsorted(ev_slot, np.arange(nslot), "right").astype(np.int64)
        rb, ru, rv, wb, wu, wv, read = _state_reads(ev_cmd, ev_epoch, lo, hi, ev_node, war_dst, first_dup,
                                                    self.act_cmd, act_epoch, node[aseg], ginv.reshape(-1),
                                                    grp_off, flat_slots)
        # write-after-write: a write nobody read, before the next write of the slot
        read_ev = read[first_dup] if ne else z.astype(bool)
        ev_in = (ev_cmd >= self.start) & (ev_cmd < self.stop)
        has_next = np.r_[ev_slot[1:] == ev_slot[:-1], False] if ne else z.astype(bool)
        i = np.flatnonzero(ev_in & has_next & ~read_ev)
        okw = (ev_epoch[i] == ev_epoch[i + 1]) & (ev_node[i + 1] >= 0) if i.size else z.astype(bool)
        i = i[okw]
        u = np.r_[ru, wu, ev_node[i]].astype(np.int64)
        v = np.r_[rv, wv, ev_node[i + 1]].astype(np.int64)
        res = np.r_[flat_slots[rb], flat_slots[wb], ev_slot[i]].astype(np.int64)
        return u, v, -1 - res

    def _read_slots(self, draw: bool, pi: Pipeline | None, indexed: bool) -> list[int]:
        if draw:
            slots = [_S_PSO, _S_RSG, _S_HEAPS, _S_TOPO, _S_RTS, _S_VP, _S_SC, _S_BF, _S_SR, _S_GS]
            if indexed:
                slots.append(_S_IB)
            if pi is None or not pi.vertex_pulling:
                slots += self.vb_slots
            base, used = _S_RG, self.rg_slots
        else:
            slots = [_S_PSO, _S_RSC, _S_HEAPS, _S_AF]
            base, used = _S_RC, self.rc_slots
        if pi is not None and pi.params is not None:
            slots += [base + q for q in pi.params if base + q in used]
        else:
            slots += used
        return slots

    def _opaque_edges(self) -> tuple[np.ndarray, ...]:
        o = np.flatnonzero(self.seg_kind == _K_OPAQUE)
        if not o.size:
            z = np.zeros(0, np.int64)
            return z, z, z, z
        allseg = np.arange(self.nseg)
        nxt = np.searchsorted(o, allseg, side="left")        # the first opaque at or after each segment
        prv = np.searchsorted(o, allseg, side="left") - 1    # the last opaque before it
        before = (nxt < o.size) & ~np.isin(allseg, o)
        after = (prv >= 0) & ~np.isin(allseg, o)
        u = np.r_[allseg[before], o[prv[after]], o[:-1]]
        v = np.r_[o[nxt[before]], allseg[after], o[1:]]
        return u, v, np.full(u.size, _R_CODE["opaque"], np.int64), np.full(u.size, -1 - 10_000, np.int64)

    # ------------------------------------------------------------------ nodes
    def _nodes(self, hu: np.ndarray, hv: np.ndarray) -> np.ndarray:
        """Node of every segment: runs of segments of one kind that write the same resources
        and have no hazard between them (so a node never ties unrelated work together)."""
        mhp = np.full(self.nseg, -1, np.int64)
        if hu.size:
            np.maximum.at(mhp, hv, hu)
        wsig = np.zeros(self.nseg, np.uint64)
        seg, res, cls, _ = self._sorted_accesses()  # (a sum over the accesses: their order does not matter)
        w = cls >= 1
        with np.errstate(over="ignore"):  # each resource's share, (id + 1) * K ^ >> 29, looked up
            tab = (np.arange(len(self.res_names), dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
            tab ^= tab >> np.uint64(29)
            np.add.at(wsig, seg[w], tab[res[w]])
        solo = _IS_SOLO_KIND[self.seg_kind]
        return _assign_nodes(self.seg_kind, solo, mhp, wsig)

    def _prepare(self) -> None:
        """What does not depend on the range's start: the state events of every command before
        ``stop``, the front end's buffers, the heaps' views."""
        self.fe_bufs = _frontend_buffers(self.s)
        self._heap_views = heap_views(self.decls)
        self._table_cache: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        self._events()

    _SHARED = ("fe_bufs", "_heap_views", "_table_cache", "set_cmd", "opq", "ev_slot", "ev_cmd", "vb_slots",
               "rg_slots", "rc_slots")

    def share(self, other: _Builder) -> None:
        """Take ``other``'s :meth:`_prepare` d facts (a builder of the same stream and policy whose
        ``stop`` is at least this one's: the events after ``stop`` change no setter before it)."""
        if not hasattr(other, "ev_cmd"):
            other._prepare()
            other._crank = np.append(other._binding_ranks(), -1)
        for name in (*self._SHARED, "_crank"):
            setattr(self, name, getattr(other, name))

    def arrays(self) -> tuple[np.ndarray, ...] | None:
        """The graph as arrays: ``(nfirst, nlast, nkind, nact, eu, ev, er, eres, mask)`` (per node:
        first and last command, kind code, actions; per edge: ends, strongest reason code,
        its resource code, reason bit mask), or None for an empty range."""
        if not hasattr(self, "ev_cmd"):
            self._prepare()
        self._segments()
        if self.nseg == 0:
            return None
        self._accesses()
        if self.context_from is not None and not self._context_exact(self.context_from):
            self.inexact = True
            return None
        hu, hv, hr, hres = self._hazard_edges()
        ou, ov, orr, ores = self._opaque_edges()
        node = self._nodes(np.r_[hu, ou], np.r_[hv, ov])  # (state edges do not decide the nodes)
        # the accesses have given their edges and nodes: let them go before the edges are sorted
        # (with the unsorted ones, dropped once sorted, they were a third of the graph's peak at 1M draws)
        self._sorted = None
        if self.with_state:
            su, sv, sres = self._state_edges(node)
        else:
            su = sv = sres = np.zeros(0, np.int64)
        u = np.r_[node[hu], su, node[ou]]
        v = np.r_[node[hv], sv, node[ov]]
        del hu, hv
        r = np.r_[hr, np.full(su.size, _R_CODE["state"], np.int64), orr]
        res = np.r_[hres, sres, ores]
        del hr, hres
        keep = u != v
        u, v, r, res = u[keep], v[keep], r[keep], res[keep]
        nn = int(node[-1]) + 1
        # one edge per node pair: the strongest reason, and every reason as a bit mask
        o = np.argsort((u * nn + v) * len(EDGE_REASONS) + r, kind="stable")  # = np.lexsort((r, v, u))
        u, v, r, res = u[o], v[o], r[o], res[o]
        head = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])] if u.size else np.zeros(0, bool)
        hi = np.flatnonzero(head)
        mask = np.bitwise_or.reduceat(np.left_shift(1, r), hi) if hi.size else np.zeros(0, np.int64)
        eu, ev, er, eres = u[hi], v[hi], r[hi], res[hi]
        keep = _two_path_reduce(eu, ev, mask, nn)
        eu, ev, er, eres, mask = eu[keep], ev[keep], er[keep], eres[keep], mask[keep]
        # nodes
        nfirst = np.full(nn, np.iinfo(np.int64).max, np.int64)
        nlast = np.zeros(nn, np.int64)
        np.minimum.at(nfirst, node, self.seg_first)
        np.maximum.at(nlast, node, self.seg_last)
        nkind = np.zeros(nn, np.int64)
        nkind[node] = self.seg_kind
        nact = np.bincount(node[_IS_ACTION_KIND[self.seg_kind]], minlength=nn)
        return nfirst, nlast, nkind, nact, eu, ev, er, eres, mask

    def build(self) -> nx.DiGraph:
        import networkx as nx
        G = nx.DiGraph(reorder=self.reorder, start=self.start, stop=self.stop, commands=len(self.s))
        got = self.arrays()
        if got is None:
            return G
        nfirst, nlast, nkind, nact, eu, ev, er, eres, mask = got
        nodes = [{"first": f, "last": la, "kind": NODE_KINDS[k], "commands": la - f + 1, "actions": a}
                 for f, la, k, a in zip(nfirst.tolist(), nlast.tolist(), nkind.tolist(), nact.tolist())]
        # the strings of each edge: one lookup per distinct reason mask and resource
        mu, minv = np.unique(mask, return_inverse=True)
        mnames = [",".join(x for i, x in enumerate(EDGE_REASONS) if m >> i & 1) for m in mu.tolist()]
        ru, rinv = np.unique(eres, return_inverse=True)
        rnames = [_res_name(self.res_names, r) for r in ru.tolist()]
        edges = [{"reason": EDGE_REASONS[c], "reasons": mnames[m], "resource": rnames[rr]}
                 for c, m, rr in zip(er.tolist(), minv.reshape(-1).tolist(), rinv.reshape(-1).tolist())]
        _fill_digraph(G, nodes, eu.tolist(), ev.tolist(), edges)
        return G


def _action_signatures(ev_cmd: np.ndarray, ev_slot: np.ndarray, slots: np.ndarray, act_cmd: np.ndarray,
                       opq: np.ndarray, crank: np.ndarray, head: np.ndarray, tail: np.ndarray,
                       pure: bool | None = None, tail_keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The distinct signatures of the actions ``act_cmd`` (non-decreasing) as :func:`_unique_rows`
    gives them: the first action of each distinct signature in lexicographic order, and each
    action's rank. An action's signature is the row ``head[a]``, then per slot of ``slots`` the
    ``crank`` of the command that last set it before the action in its Opaque epoch
    (``crank[-1]``: none; :func:`_act_setter_events`), then ``tail[a]``.

    With ``tail_keep`` (bool[A, T]: the tail columns that matter for each action; equal for
    equal ``head`` rows), signatures equal but in the columns of ``tail`` that their actions do
    not keep form one class: then the first action of each class's first signature, classes in
    order of their first signature (in lexicographic order), and each action's class
    (:func:`_merge_tails`; the kernel interns the classes, not the signatures).

    ``drawopt._graph.action_signatures`` interns the rows as it forms them (no column per slot
    for every action); :func:`_action_signatures_py` is its twin.
    """
    kernel = getattr(load_cext("_graph", pure), "action_signatures", None)  # (None: an older extension)
    if kernel is None or (act_cmd.shape[0] > 1 and not bool((np.diff(act_cmd) >= 0).all())):
        first, inv = _action_signatures_py(ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, tail, pure)
        if tail_keep is None:
            return first, inv
        # the rows of the distinct signatures, from their first actions
        o = np.argsort(act_cmd[first], kind="stable")
        cols = np.empty((slots.shape[0], first.shape[0]), np.int64)
        cols[:, o] = crank[_act_setter_events(ev_cmd, ev_slot, slots, act_cmd[first[o]], opq, pure)[1]]
        rows = np.concatenate([head[first], cols.T, tail[first]], axis=1)
        return _merge_tails(first, inv, rows, tail_keep[first])
    t = tail.shape[1]
    if tail_keep is not None and t and not tail_keep.all():
        # the kernel interns the classes themselves (the unkept columns zeroed: few rows, whatever
        # the offsets); each class's least signature has its least full tail, and its first action
        # is the first of the class with that tail (a stable sort, over the classes whose members'
        # tails differ from their class's row only); the classes in the order of those signatures
        red_tail = np.where(tail_keep, tail, 0)
        ids, lead, rows = kernel(ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, red_tail)
        varies = (red_tail != tail).any(axis=1)
        if varies.any():
            cv = np.zeros(lead.size, bool)
            cv[ids[varies]] = True
            sel = np.flatnonzero(cv[ids])  # the actions of the classes some of whose tails vary
            by = sel[lex_order([ids[sel], *tail[sel].T])]  # by class, then full tail, then action
            g = ids[by]
            top = np.r_[True, g[1:] != g[:-1]]
            lead[g[top]] = by[top]
        rows[:, rows.shape[1] - t:] = tail[lead]
        corder = np.lexsort(rows.T[::-1])
        crank_ = np.empty(corder.size, np.int64)
        crank_[corder] = np.arange(corder.size)
        return lead[corder], crank_[ids]
    ids, first, rows = kernel(ev_cmd, ev_slot, slots, act_cmd, opq, crank, head, tail)
    order = np.lexsort(rows.T[::-1])
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    return first[order], rank[ids]


def _merge_tails(first: np.ndarray, inv: np.ndarray, rows: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, ...]:
    """Classes of the signatures ``rows`` (distinct, sorted; ``first``: their first actions, ``inv``:
    each action's) equal but in their last ``keep.shape[1]`` columns where ``keep`` is False:
    ``(first action of each class, each action's class)``, classes in order of their first row."""
    t = keep.shape[1]
    if not t or keep.all():
        return first, inv
    red = rows.copy()
    red[:, rows.shape[1] - t:] *= keep
    cid, cfirst = intern_rows(red)  # (ids in order of first appearance: of each class's first row)
    return first[cfirst], cid[inv]


def _action_signatures_py(ev_cmd: np.ndarray, ev_slot: np.ndarray, slots: np.ndarray, act_cmd: np.ndarray,
                          opq: np.ndarray, crank: np.ndarray, head: np.ndarray, tail: np.ndarray,
                          pure: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`_action_signatures`' kernel: the columns packed as they come (a few slots'
    setters at a time) and :func:`_unique_rows` of the packed words (``pure``: for the setters)."""
    def columns() -> Iterator[np.ndarray]:
        yield from head.T
        for k in range(0, slots.shape[0], 4):
            _, got = _act_setter_events(ev_cmd, ev_slot, slots[k:k + 4], act_cmd, opq, pure)
            yield from (crank[c] for c in got)
        yield from tail.T

    return _unique_rows(pack_columns(columns()))


def _spread_accesses(aseg: np.ndarray, inv: np.ndarray, counts: np.ndarray, flat: np.ndarray,
                     tail_seg: np.ndarray, tail_res: np.ndarray, pure: bool | None = None) -> tuple[np.ndarray, ...]:
    """``(seg, res, cls)`` of every access: action ``a`` (segment ``aseg[a]``) has the accesses of
    its signature ``inv[a]`` (signature ``j``'s are the next ``counts[j]`` rows of ``flat``, (resource,
    class) pairs), actions in order; then the written accesses ``tail_seg``, ``tail_res`` (class 1).
    ``drawopt._graph.spread_accesses`` fills the three columns in one pass; twin :func:`_spread_accesses_py`."""
    kernel = getattr(load_cext("_graph", pure), "spread_accesses", None)  # (None: an extension built before it)
    if kernel is not None:
        return kernel(aseg, inv, counts, flat, tail_seg, tail_res)
    return _spread_accesses_py(aseg, inv, counts, flat, tail_seg, tail_res)


def _spread_accesses_py(aseg: np.ndarray, inv: np.ndarray, counts: np.ndarray, flat: np.ndarray,
                        tail_seg: np.ndarray, tail_res: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pure-numpy twin of ``drawopt._graph.spread_accesses`` (:func:`_spread_accesses`)."""
    offs = np.cumsum(counts) - counts
    nper = counts[inv] if inv.size else np.zeros(0, np.int64)
    k = ragged_index(offs[inv], nper) if inv.size else np.zeros(0, np.int64)
    seg = np.concatenate([np.repeat(aseg, nper), tail_seg]).astype(np.int64, copy=False)
    res = np.concatenate([flat[k, 0], tail_res]).astype(np.int64, copy=False)
    cls = np.concatenate([flat[k, 1], np.ones(tail_seg.size, np.int64)]).astype(np.int64, copy=False)
    return seg, res, cls


def _hazard_pairs(seg: np.ndarray, res: np.ndarray, cls: np.ndarray, ep: np.ndarray, seg_kind: np.ndarray,
                  pure: bool | None = None) -> tuple[np.ndarray, ...]:
    """The hazard edges between segments from their accesses sorted by (epoch, resource, segment):
    ``(u, v, reason code, resource)``.

    Accesses of one (epoch, resource) form groups: a run of reads, a run of one commuting write
    class, or a single ordered write (class 1). Each access of a group after the first of its
    key gets an edge from every member of the previous group (when that group has at most
    :data:`_FAN_CAP` members, or for the group's first member), else one from its group's first
    member; edges inside one segment are left out. Listed: the first kind, by access, then the
    second (``drawopt._graph.hazard_pairs``; twin :func:`_hazard_pairs_py`).
    """
    kernel = getattr(load_cext("_graph", pure), "hazard_pairs", None)  # (None: an extension built before it)
    if kernel is not None:
        return kernel(seg, res, cls, ep, seg_kind, _FAN_CAP, _HAZARD_CODES)
    return _hazard_pairs_py(seg, res, cls, ep, seg_kind)


_HAZARD_CODES = np.array([_R_CODE["raw"], _R_CODE["war"], _R_CODE["order"], _R_CODE["waw"], _R_CODE["barrier"],
                          _R_CODE["flush"], _K_DRAWS, _K_BARRIER, _K_FLUSH], np.int64)
"""The reason and kind codes :func:`_hazard_pairs`' kernel uses: raw, war, order, waw, barrier, flush
(reasons), draws, barrier, flush (segment kinds)."""


def _hazard_pairs_py(seg: np.ndarray, res: np.ndarray, cls: np.ndarray, ep: np.ndarray,
                     seg_kind: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pure-numpy twin of ``drawopt._graph.hazard_pairs`` (:func:`_hazard_pairs`)."""
    n = seg.size
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    key = ep * _BIG + res
    newkey = np.r_[True, key[1:] != key[:-1]]
    newgrp = newkey | np.r_[True, cls[1:] != cls[:-1]] | (cls == 1)
    gid = np.cumsum(newgrp) - 1
    gstart = np.flatnonzero(newgrp)
    gsize = np.diff(np.r_[gstart, n])
    ng = gstart.size
    has_prev = np.r_[False, ~newkey[gstart[1:]]] if ng else np.zeros(0, bool)
    g = gid
    pg = g - 1
    hp = has_prev[g]
    psize = np.where(hp, gsize[np.maximum(pg, 0)], 0)
    first_member = np.arange(n) == gstart[g]
    full = hp & ((psize <= _FAN_CAP) | first_member)
    anchor = hp & ~full
    # full: edges from every member of the previous group
    i_full = np.flatnonzero(full)
    reps = psize[i_full]
    v1 = np.repeat(i_full, reps)
    u1 = ragged_index(gstart[pg[i_full]], reps)
    # anchored: from the first member of this group
    i_anc = np.flatnonzero(anchor)
    u2, v2 = gstart[g[i_anc]], i_anc
    u = np.r_[u1, u2].astype(np.int64)
    v = np.r_[v1, v2].astype(np.int64)
    ku, kv = seg_kind[seg[u]], seg_kind[seg[v]]
    cu, cv = cls[u], cls[v]
    reason = np.where(cv == 0, _R_CODE["raw"], np.where(cu == 0, _R_CODE["war"],
                      np.where((ku == _K_DRAWS) & (kv == _K_DRAWS), _R_CODE["order"], _R_CODE["waw"])))
    reason = np.where((ku == _K_BARRIER) | (kv == _K_BARRIER), _R_CODE["barrier"], reason)
    reason = np.where((ku == _K_FLUSH) | (kv == _K_FLUSH), _R_CODE["flush"], reason)
    keep = seg[u] != seg[v]
    return seg[u][keep], seg[v][keep], reason[keep], res[u][keep]


def _res_name(res_names: list[str], r: int) -> str:
    """The ``resource`` attribute of an edge whose resource code is ``r`` (a resource id, a state
    slot as ``-1 - slot``, or ``-1 - 10_000`` for none)."""
    if r >= 0:
        name = res_names[r]
        return "" if name == _FE_VIRTUAL else name
    if r == -1 - 10_000:
        return ""
    return _slot_name(-1 - r)


def _assign_nodes(kind: np.ndarray, solo: np.ndarray, maxpred: np.ndarray, wsig: np.ndarray,
                  pure: bool | None = None) -> np.ndarray:
    """Node of every segment (``drawopt._graph.assign_nodes``; twin :func:`_assign_nodes_py`)."""
    mod = load_cext("_graph", pure)
    if mod is not None:
        return mod.assign_nodes(kind, solo, maxpred, wsig)
    return _assign_nodes_py(kind, solo, maxpred, wsig)


def _assign_nodes_py(kind: np.ndarray, solo: np.ndarray, maxpred: np.ndarray, wsig: np.ndarray) -> np.ndarray:
    """Pure-Python twin of ``drawopt._graph.assign_nodes``."""
    kinds, so, mh, ws = kind.tolist(), solo.tolist(), maxpred.tolist(), wsig.tolist()
    node = [0] * len(kinds)
    cur, first = -1, 0
    for i, k in enumerate(kinds):
        if cur < 0 or k != kinds[i - 1] or so[i] or mh[i] >= first or ws[i] != ws[i - 1]:
            cur += 1
            first = i
        node[i] = cur
    return np.array(node, np.int64)


def _setter_events(ev_cmd: np.ndarray, ev_slot: np.ndarray, slot: int, cmd: np.ndarray,
                   opq: np.ndarray) -> np.ndarray:
    """Index of the last event writing ``slot`` strictly before each of ``cmd`` (-1: none, or an
    Opaque command lies between them); events sorted by slot, then command."""
    cmd = np.asarray(cmd, np.int64)
    lo, hi = np.searchsorted(ev_slot, (slot, slot + 1)).tolist()
    if lo == hi or not cmd.size:
        return np.full(cmd.size, -1, np.int64)
    pos = np.searchsorted(ev_cmd[lo:hi], cmd, side="left") - 1
    out = np.where(pos >= 0, lo + pos, -1)
    if opq.size:  # a setter on the other side of an Opaque command does not count
        c = ev_cmd[np.maximum(out, 0)]
        out = np.where((out >= 0) & (np.searchsorted(opq, c) == np.searchsorted(opq, cmd)), out, -1)
    return out


def _act_setter_events(ev_cmd: np.ndarray, ev_slot: np.ndarray, slots: np.ndarray, act_cmd: np.ndarray,
                       opq: np.ndarray, pure: bool | None = None) -> np.ndarray:
    """:func:`_setter_events` of every slot of ``slots`` for the actions ``act_cmd`` (non-decreasing),
    one row per slot, and the events' commands (-1 for none): ``(events, commands)``, int64[K, A]
    each (``drawopt._graph.act_setter_events``; twin :func:`_act_setter_events_py`)."""
    mod = load_cext("_graph", pure)
    if mod is not None and (act_cmd.shape[0] < 2 or bool((np.diff(act_cmd) >= 0).all())):
        return mod.act_setter_events(ev_cmd, ev_slot, slots, act_cmd, opq)
    return _act_setter_events_py(ev_cmd, ev_slot, slots, act_cmd, opq)


def _act_setter_events_py(ev_cmd: np.ndarray, ev_slot: np.ndarray, slots: np.ndarray, act_cmd: np.ndarray,
                          opq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure-numpy twin of ``drawopt._graph.act_setter_events``."""
    n = np.asarray(act_cmd).shape[0]
    ev = np.empty((len(slots), n), np.int64)
    cmd = np.full((len(slots), n), -1, np.int64)
    for j, slot in enumerate(np.asarray(slots, np.int64).tolist()):
        ev[j] = _setter_events(ev_cmd, ev_slot, slot, act_cmd, opq)
        ok = ev[j] >= 0
        cmd[j, ok] = ev_cmd[ev[j, ok]]
    return ev, cmd


def _state_reads(ev_cmd: np.ndarray, ev_epoch: np.ndarray, slot_lo: np.ndarray, slot_hi: np.ndarray,
                 raw_src: np.ndarray, war_dst: np.ndarray, first_dup: np.ndarray, act_cmd: np.ndarray,
                 act_epoch: np.ndarray, act_node: np.ndarray, act_group: np.ndarray, grp_off: np.ndarray,
                 grp_slots: np.ndarray, pure: bool | None = None) -> tuple[np.ndarray, ...]:
    """The read-after-write and write-after-read state edges of every (group, slot) block
    (``drawopt._graph.state_reads``, which documents the arguments and the edges it leaves out;
    twin :func:`_state_reads_py`): ``(raw_block, raw_u, raw_v, war_block, war_u, war_v, read)``,
    each kind of edge in (group, slot, action) order."""
    mod = load_cext("_graph", pure)
    if mod is not None and (act_cmd.shape[0] < 2 or bool((np.diff(act_cmd) >= 0).all())):
        return mod.state_reads(ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd,
                               act_epoch, act_node, act_group, grp_off, grp_slots)
    return _state_reads_py(ev_cmd, ev_epoch, slot_lo, slot_hi, raw_src, war_dst, first_dup, act_cmd, act_epoch,
                           act_node, act_group, grp_off, grp_slots)


def _state_reads_py(ev_cmd: np.ndarray, ev_epoch: np.ndarray, slot_lo: np.ndarray, slot_hi: np.ndarray,
                    raw_src: np.ndarray, war_dst: np.ndarray, first_dup: np.ndarray, act_cmd: np.ndarray,
                    act_epoch: np.ndarray, act_node: np.ndarray, act_group: np.ndarray, grp_off: np.ndarray,
                    grp_slots: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pure-numpy twin of ``drawopt._graph.state_reads``: group by group, its blocks' candidate
    edges at once (the kernel goes action by action)."""
    ne = np.asarray(ev_cmd).shape[0]
    read = np.zeros(ne, bool)
    out: list[list[np.ndarray]] = [[], [], [], [], [], []]
    rank = np.argsort(act_group, kind="stable")  # actions of each group, in action order
    gstart = np.searchsorted(act_group[rank], np.arange(grp_off.shape[0] - 1))
    gend = np.searchsorted(act_group[rank], np.arange(grp_off.shape[0] - 1), "right")
    for g in range(grp_off.shape[0] - 1):
        acts = rank[gstart[g]:gend[g]]
        if not acts.size or grp_off[g] == grp_off[g + 1]:
            continue
        cand: list[list[np.ndarray]] = [[], [], [], []]  # block, action, raw source, war target
        for j in range(int(grp_off[g]), int(grp_off[g + 1])):
            s = int(grp_slots[j])
            lo, hi = int(slot_lo[s]), int(slot_hi[s])
            e = lo + np.searchsorted(ev_cmd[lo:hi], act_cmd[acts], "left") - 1
            ok = e >= lo
            ok[ok] = ev_epoch[e[ok]] == act_epoch[acts[ok]]
            e, a = e[ok], acts[ok]
            read[first_dup[e]] = True
            for lst, x in zip(cand, (np.full(a.size, j, np.int64), a, raw_src[e], war_dst[e])):
                lst.append(x)
        blk, act, src, dst = (np.concatenate(x).astype(np.int64) for x in cand)  # by block, then action
        w = act_node[act]
        for k, (other, u, v) in enumerate(((src, src, w), (dst, w, dst))):
            keep = (other >= 0) & (other != w)
            b, a, o, u, v = blk[keep], act[keep], other[keep], u[keep], v[keep]
            # an action's first edge to (from) each node: the earliest block gives it
            by = np.lexsort((b, o, a))
            first = np.zeros(b.size, bool)
            first[by] = np.r_[True, (a[by][1:] != a[by][:-1]) | (o[by][1:] != o[by][:-1])] if b.size else first
            b, u, v = b[first], u[first], v[first]
            # then not an edge equal to the previous one of its block
            new = np.r_[True, (b[1:] != b[:-1]) | (u[1:] != u[:-1]) | (v[1:] != v[:-1])] if b.size else first[:0]
            out[3 * k].append(b[new])
            out[3 * k + 1].append(u[new])
            out[3 * k + 2].append(v[new])
    arrs = [np.concatenate(x).astype(np.int64) if x else np.zeros(0, np.int64) for x in out]
    return (*arrs, read)


def _fill_digraph(G: nx.DiGraph, nodes: list[dict[str, Any]], eu: list[int], ev: list[int],
                  edges: list[dict[str, Any]]) -> None:
    """Add nodes ``0 .. len(nodes)-1`` (attribute dicts ``nodes``) and edges ``eu[i] -> ev[i]``
    (attribute dicts ``edges``, no duplicates) to the empty graph ``G``.

    Equivalent to ``add_nodes_from`` + ``add_edges_from``, but fills networkx's adjacency
    dicts directly (those methods cost microseconds per element in checks this builder does
    not need); falls back to them for a graph class with its own storage factories.
    """
    import networkx as nx
    plain = (type(G) is nx.DiGraph and not G._node and G._succ is G._adj
             and G.node_dict_factory is dict and G.adjlist_inner_dict_factory is dict
             and G.node_attr_dict_factory is dict and G.edge_attr_dict_factory is dict)
    if not plain:  # pragma: no cover - only a subclass with custom storage gets here
        G.add_nodes_from(enumerate(nodes))
        G.add_edges_from(zip(eu, ev, edges))
        return
    n = len(nodes)
    G._node.update(zip(range(n), nodes))
    succ = G._succ
    pred = G._pred
    succ.update((i, {}) for i in range(n))
    pred.update((i, {}) for i in range(n))
    for a, b, d in zip(eu, ev, edges):
        succ[a][b] = d
        pred[b][a] = d
    nx._clear_cache(G)


def _unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(mat, axis=0, return_index=True, return_inverse=True)[1:]``: the first row of each
    distinct row in lexicographic order, and each row's rank; rows are interned by hash first."""
    if not mat.shape[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids, first = intern_rows(mat)
    order = np.lexsort(mat[first].T[::-1])
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    return first[order], rank[ids]


def pack_columns(cols: Iterable[np.ndarray]) -> np.ndarray:
    """Integer columns (equal lengths) packed into as few int64 columns as fit: runs of
    consecutive columns become one mixed-radix number each (the first column the most
    significant digit), so rows compare equal, and in lexicographic order, exactly as
    the rows of the unpacked columns do. ``cols`` may be any iterable (a generator: each
    column is folded into its word as it comes).

    Returns
    -------
    int64[N, K]
        ``K >= 1`` columns (one, of zeros, for no input column).

    Examples
    --------
    >>> pack_columns([np.array([1, 0, 1]), np.array([5, 7, 5])]).ravel().tolist()
    [3, 2, 3]
    """
    out: list[np.ndarray] = []
    word: np.ndarray | None = None
    total = 1
    for col in cols:
        col = np.asarray(col, np.int64)
        lo, hi = (int(col.min()), int(col.max())) if col.size else (0, 0)
        span = hi - lo + 1  # Python ints: no wrap
        if word is not None and (total * span >= 1 << 62 or span >= 1 << 62):
            out.append(word)
            word, total = None, 1
        if span >= 1 << 62:  # too wide to offset safely: a column of its own, as it is
            out.append(col)
            continue
        word = col - lo if word is None else word * span + (col - lo)  # (< total * span < 2^62)
        total *= span
    if word is not None:
        out.append(word)
    if not out:
        return np.zeros((0, 1), np.int64)
    return np.stack(out, axis=1)


def lex_order(cols: list[np.ndarray]) -> np.ndarray:
    """The stable order that sorts rows of integer columns ``cols`` (equal lengths; the first
    column the most significant) lexicographically: ``np.lexsort(cols[::-1])``, sorted as
    :func:`pack_columns` words (one ``argsort`` where they fit one).

    Examples
    --------
    >>> lex_order([np.array([1, 0, 1]), np.array([5, 7, 4])]).tolist()
    [1, 2, 0]
    """
    key = pack_columns(cols)
    return np.argsort(key[:, 0], kind="stable") if key.shape[1] == 1 else np.lexsort(key.T[::-1])


def _unique_int(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array (``np.unique`` without its hash path, which is
    far slower than a sort on large arrays of wide keys)."""
    x = np.sort(np.asarray(x).reshape(-1))
    if x.size < 2:
        return x
    return x[np.r_[True, x[1:] != x[:-1]]]


def _changed(vals: np.ndarray, epochs: np.ndarray) -> np.ndarray:
    """Mask of values that differ from the previous one (or start a new Opaque epoch)."""
    if not vals.size:
        return np.zeros(0, bool)
    return np.r_[True, (vals[1:] != vals[:-1]) | (epochs[1:] != epochs[:-1])]


def _resource_of(decls: Any, name: str) -> str | None:
    try:
        return decls.resource_of(name)
    except (ValueError, KeyError):
        return None


def _frontend_buffers(s: Stream) -> set[str]:
    """Buffers the GPU front end reads anywhere in ``s`` (args, counts, index data) or declared frontend."""
    decls = s.decls
    out = {d.name for d in decls.items if isinstance(d, Buffer) and d.frontend}
    read = np.zeros(len(decls), bool)  # the buffers named (marks, not np.unique's hash of every value)
    for code, col in _FE_READ_COLS:
        read[s.args[s.op == code, col]] = True
    return out | {decls.items[int(i)].name for i in np.flatnonzero(read)}


def _two_path_reduce(u: np.ndarray, v: np.ndarray, mask: np.ndarray, nn: int, pure: bool | None = None) -> np.ndarray:
    """Keep-mask of edges not implied by a path of two edges.

    A hazard edge (any reason but ``state``) is dropped only for a path of two
    hazard edges, a ``state``-only edge for any path of two edges, so that the
    graph without ``state`` edges keeps every hazard. Middle nodes with more than
    :data:`_REDUCE_CAP` (predecessor, successor) pairs are not used (their edges may stay).
    ``drawopt._graph.two_path_reduce`` computes it; :func:`_two_path_reduce_py` is its twin.
    """
    state_only = mask == (1 << _R_CODE["state"])
    mod = load_cext("_graph", pure)
    if mod is not None:
        return mod.two_path_reduce(u, v, state_only, nn, _REDUCE_CAP)
    return _two_path_reduce_py(u, v, state_only, nn)


def _two_path_reduce_py(u: np.ndarray, v: np.ndarray, state_only: np.ndarray, nn: int) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._graph.two_path_reduce``."""
    keep = np.ones(u.size, bool)
    if u.size < 2:
        return keep
    key = u * nn + v
    korder = np.argsort(key)
    ksorted = key[korder]
    for hazard in (True, False):
        sel = ~state_only if hazard else np.ones(u.size, bool)
        eu, ev = u[sel], v[sel]
        if eu.size < 2:
            continue
        indeg = np.bincount(ev, minlength=nn)
        outdeg = np.bincount(eu, minlength=nn)
        so = np.argsort(eu, kind="stable")
        succ_v = ev[so]
        succ_start = np.cumsum(outdeg) - outdeg
        ok_mid = (indeg * outdeg <= _REDUCE_CAP) & (indeg > 0) & (outdeg > 0)
        pe = np.flatnonzero(ok_mid[ev])               # edges u -> w into an eligible middle w
        w = ev[pe]
        reps = outdeg[w]
        cu = np.repeat(eu[pe], reps)
        cv = succ_v[ragged_index(succ_start[w], reps)]
        ck = _unique_int(cu * nn + cv)
        pos = np.clip(np.searchsorted(ksorted, ck), 0, ksorted.size - 1)
        hit = korder[pos[ksorted[pos] == ck]]
        target = ~state_only if hazard else state_only
        drop = np.zeros(u.size, bool)
        drop[hit] = True
        keep &= ~(drop & target)
    return keep


_CAT_TABLE = np.full(max(sp.code for sp in BY_CODE.values()) + 1, int(Cat.STATE), np.int64)
for _sp in BY_CODE.values():
    _CAT_TABLE[_sp.code] = int(_sp.cat)
_NO_SLOT = 255
_SLOT_FROM_ARG0 = 128
"""In :data:`_SLOT_OF_OP`: ``_SLOT_FROM_ARG0 + base``: the slot is ``base`` plus the first argument."""
_SLOT_OF_OP = np.full(_CAT_TABLE.shape[0], _NO_SLOT, np.uint8)
for _n, _slot in _SIMPLE_SLOT.items():
    _SLOT_OF_OP[_OP[_n]] = _slot
for _names, _base in ((_ROOT_G, _S_RG), (_ROOT_C, _S_RC)):
    _SLOT_OF_OP[[_OP[_n] for _n in _names]] = _SLOT_FROM_ARG0 + _base
_SLOT_OF_OP[_OP["IASetVertexBuffers"]] = _SLOT_FROM_ARG0 + _S_VB
_SLOT_OF_OP[_OP["DrawIndexedX"]] = _S_IB  # leaves the index buffer undefined
_NO_BINDING_VALUE = np.zeros(_CAT_TABLE.shape[0], bool)
_NO_BINDING_VALUE[[_OP["SetGraphicsRoot32BitConstants"], _OP["SetComputeRoot32BitConstants"],
                   _OP["DrawIndexedX"]]] = True
_IS_TABLE_OP = np.zeros(_CAT_TABLE.shape[0], bool)
_IS_TABLE_OP[[_OP["SetGraphicsRootDescriptorTable"], _OP["SetComputeRootDescriptorTable"]]] = True
_IS_ROOT_VIEW_OP = np.zeros(_CAT_TABLE.shape[0], bool)
_IS_ROOT_VIEW_OP[[_OP["SetGraphicsRootConstantBufferView"], _OP["SetGraphicsRootShaderResourceView"]]] = True
_IS_INDEXED_NATIVE = np.zeros(_CAT_TABLE.shape[0], bool)
_IS_INDEXED_NATIVE[sorted(_INDEXED_NATIVE)] = True
_VARYING = frozenset({_OP[n] for n in ("CopyBufferRegion", "DrawIndexedX", *_INDIRECT)})
_IS_BUFFER_ARG_OP = np.zeros(_CAT_TABLE.shape[0], bool)
_IS_BUFFER_ARG_OP[sorted(_VARYING)] = True
_TAIL_KEEP = np.zeros((_CAT_TABLE.shape[0], NARGS), bool)
"""Per opcode, the argument columns :meth:`_Builder._signature_accesses` reads of an action (its buffers)."""
for _n, _c in (("CopyBufferRegion", "dst"), ("CopyBufferRegion", "src"), ("DrawIndexedX", "buffer"),
               *((n, c) for n in _INDIRECT for c in ("args_buffer", "count_buffer") if c in BY_NAME[n].fields)):
    _TAIL_KEEP[_OP[_n], BY_NAME[_n].col(_c)] = True
_FE_READ_COLS = tuple((BY_NAME[n].code, BY_NAME[n].col(c)) for n in _INDIRECT for c in ("args_buffer", "count_buffer")
                      if c in BY_NAME[n].fields) + ((_OP["IASetIndexBuffer"], Op.IASetIndexBuffer.col("buffer")),
                                                    (_OP["DrawIndexedX"], Op.DrawIndexedX.col("buffer")))
"""(opcode, column) of every buffer the front end reads: indirect arguments and counts, index data."""
_FE_STATES = {BARRIER_STATES.index("INDIRECT_ARGUMENT"), BARRIER_STATES.index("INDEX_BUFFER")}
# argument columns (drawopt.ir.ops), looked up once
_SLOT_ARG = shared_col(("IASetVertexBuffers", "slot"), *((n, "index") for n in (*_ROOT_G, *_ROOT_C)))
"""The argument that picks the slot of a ``_SLOT_FROM_ARG0`` command (a vertex-buffer slot, a root parameter)."""
_ROOTSIG_ARG = shared_col(("SetGraphicsRootSignature", "rootsig"), ("SetComputeRootSignature", "rootsig"))
_BINDING_ARG = shared_col(("IASetVertexBuffers", "buffer"), ("SetGraphicsRootDescriptorTable", "table"),
                          ("SetComputeRootDescriptorTable", "table"), ("SetGraphicsRootConstantBufferView", "buffer"),
                          ("SetGraphicsRootShaderResourceView", "buffer"))
"""The value a vertex buffer, a table or a root view is bound to (its buffer, its heap reference)."""
_IB_BUF = Op.IASetIndexBuffer.col("buffer")
_DX_BUF = Op.DrawIndexedX.col("buffer")
_COPY_DST, _COPY_SRC = Op.CopyBufferRegion.col("dst"), Op.CopyBufferRegion.col("src")
_BARRIER_RES, _BARRIER_AFTER = Op.ResourceBarrier.col("resource"), Op.ResourceBarrier.col("after")


# --------------------------------------------------------------------------- entry points
def build_graph(stream: Stream, reorder: str = "declared", start: int = 0, stop: int | None = None) -> nx.DiGraph:
    """The dependency graph of commands ``start .. stop-1`` of ``stream``.

    Parameters
    ----------
    stream
        The stream.
    reorder
        The reorder policy: ``none``, ``declared`` (default) or ``opaque``; it decides
        which draws on a common target get an ``order`` edge.
    start, stop
        The command range (state set before ``start`` is taken into account; edges
        to commands outside the range are not represented).

    Returns
    -------
    networkx.DiGraph
        Nodes are runs of commands, edges what may not be reordered (see the
        module docstring). ``G.graph`` holds ``reorder``, ``start``, ``stop`` and
        ``commands`` (the stream's length).

    Raises
    ------
    UsageError
        For an unknown policy or a bad range.

    Examples
    --------
    >>> from drawopt import StreamBuilder
    >>> b = StreamBuilder()
    >>> b.target("rt", 8, 8)
    >>> b.pipeline("p", vs="v", ps="f", blend="alpha")
    >>> b.OMSetRenderTargets("rt"); b.SetPipelineState("p")
    >>> b.DrawInstanced(3, 1, 0, 0); b.DrawInstanced(3, 1, 3, 0)
    >>> G = build_graph(b.build())
    >>> [(u, v, d["reason"], d["resource"]) for u, v, d in G.edges(data=True)]
    [(0, 1, 'order', 'rt')]
    """
    stop = _check_range(stream, reorder, start, stop)
    return _Builder(stream, reorder, start, stop).build()


def _check_range(stream: Stream, reorder: str, start: int, stop: int | None) -> int:
    if reorder not in ("none", "declared", "opaque"):
        raise UsageError(f"unknown reorder policy '{reorder}' (use none, declared or opaque)")
    n = len(stream)
    stop = n if stop is None else stop
    if not (0 <= start <= stop <= n):
        raise UsageError(f"bad command range {start}:{stop} (the stream has {n} commands)")
    return stop


class HazardGraph:
    """The nodes and the hazard edges of the dependency graph, as arrays (:func:`hazard_graph`).

    The nodes, and the edges whose reason is not ``state`` with their ``reason``, are
    those of :func:`build_graph`'s graph (what :func:`hazard_view` shows of it). It
    answers the part of the :class:`networkx.DiGraph` interface that
    :func:`node_of_command` and :func:`drawopt.analysis.lowerbound.segment_units` use:
    ``graph`` (the same attributes), ``number_of_nodes()``, ``number_of_edges()``,
    ``nodes(data=True)`` and ``edges(data=...)``. Edges carry ``reason`` only (no
    ``reasons``); :meth:`resource` names the resource of one edge, as ``build_graph``'s
    ``resource`` attribute does.

    Attributes
    ----------
    first, last : int64[V]
        First and last command of each node.
    kind : int64[V]
        Index of each node's kind in :data:`NODE_KINDS`.
    eu, ev : int64[E]
        Edges ``eu[i] -> ev[i]``, sorted by ``(u, v)`` (the order networkx lists them in).
    reason : int64[E]
        Index of each edge's reason in :data:`EDGE_REASONS`.
    """

    def __init__(self, graph: dict[str, Any], first: np.ndarray, last: np.ndarray, kind: np.ndarray,
                 eu: np.ndarray, ev: np.ndarray, reason: np.ndarray, eres: np.ndarray | None = None,
                 res_names: list[str] | None = None) -> None:
        self.graph = graph
        self.first, self.last, self.kind = first, last, kind
        self.eu, self.ev, self.reason = eu, ev, reason
        self._eres = eres if eres is not None else np.full(eu.shape[0], -1 - 10_000, np.int64)
        self._res_names = res_names or []

    def find_edges(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Index of edge ``u[i] -> v[i]`` of every pair (-1 where there is none).

        >>> from drawopt.gen import generate
        >>> h = hazard_graph(generate("quads", 3))  # three blended quads: a chain of order edges
        >>> i = h.find_edges(np.array([0, 1, 0]), np.array([1, 0, 2]))
        >>> i.tolist(), EDGE_REASONS[h.reason[i[0]]], h.resource(int(i[0]))
        ([0, -1, -1], 'order', 'backbuffer')
        """
        u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
        nn = max(self.number_of_nodes(), 1)
        key = self.eu * nn + self.ev  # sorted: the edges are in (u, v) order
        want = u * nn + v
        if not key.shape[0]:
            return np.full(want.shape[0], -1, np.int64)
        pos = np.minimum(np.searchsorted(key, want), key.shape[0] - 1)
        hit = (u >= 0) & (v >= 0) & (u < nn) & (v < nn) & (key[pos] == want)
        return np.where(hit, pos, -1)

    def resource(self, i: int) -> str:
        """The resource edge ``i``'s reason is about (``build_graph``'s ``resource``; "" for none)."""
        return _res_name(self._res_names, int(self._eres[i]))

    def number_of_nodes(self) -> int:
        return int(self.first.shape[0])

    def number_of_edges(self) -> int:
        return int(self.eu.shape[0])

    def nodes(self, data: bool = False) -> Any:
        """Node ids, or ``(id, {"first", "last", "kind"})`` with ``data=True``."""
        ids = range(self.number_of_nodes())
        if not data:
            return iter(ids)
        return ((v, {"first": f, "last": la, "kind": NODE_KINDS[k]})
                for v, f, la, k in zip(ids, self.first.tolist(), self.last.tolist(), self.kind.tolist()))

    def edges(self, data: bool | str = False) -> Any:
        """``(u, v)``, ``(u, v, reason)`` with ``data="reason"``, or ``(u, v, {"reason": ...})``
        with ``data=True``; in ``(u, v)`` order."""
        eu, ev = self.eu.tolist(), self.ev.tolist()
        if data is False:
            return zip(eu, ev)
        names = [EDGE_REASONS[r] for r in self.reason.tolist()]
        if data is True:
            return ((u, v, {"reason": r}) for u, v, r in zip(eu, ev, names))
        if data == "reason":
            return zip(eu, ev, names)
        return ((u, v, None) for u, v in zip(eu, ev))


def hazard_graph(stream: Stream, reorder: str = "declared", start: int = 0, stop: int | None = None) -> HazardGraph:
    """The dependency graph without its ``state`` edges, as arrays (:class:`HazardGraph`).

    Same arguments and errors as :func:`build_graph`, whose graph has the same nodes and
    the same non-``state`` edges; cheaper (no ``state`` edges to find, no networkx
    objects), for passes that re-emit the state of every draw they move.
    """
    stop = _check_range(stream, reorder, start, stop)
    b = _Builder(stream, reorder, start, stop, state_edges=False)
    attrs = {"reorder": reorder, "start": start, "stop": stop, "commands": len(stream)}
    got = b.arrays()
    if got is None:
        z = np.zeros(0, np.int64)
        return HazardGraph(attrs, z, z, z, z, z, z)
    nfirst, nlast, nkind, _nact, eu, ev, er, eres, _mask = got
    return HazardGraph(attrs, nfirst, nlast, nkind, eu, ev, er, eres, b.res_names)


_CONTEXT_MARGINS = (1024, 16384)
"""Segments of context :func:`hazard_graph_within` tries before its range, then the whole prefix."""


def hazard_graph_within(stream: Stream, reorder: str, ranges: list[tuple[int, int]]) -> list[HazardGraph]:
    """Per command range ``(start, stop)`` of ``ranges``: the hazard graph of those commands as the
    whole stream's graph has it, built over the range and a little context before it (not over
    the whole stream). A range ends with an action (``stop - 1`` is not a state command) or at
    the stream's end: state commands at its end would belong to the next action's node.

    Each result (a :class:`HazardGraph` of a range ``a .. b-1``, ``a <= start``, ``b >= stop``) agrees with
    ``hazard_graph(stream, reorder)`` on the commands ``start .. stop-1``: they are split into the
    same nodes (each node of one, cut to the range, is a node of the other), and one node of them
    must precede another (by a path of edges) in one exactly when it must in the other. The edges
    themselves may differ: the two-path reduction drops an edge of the whole graph where a middle
    node outside the range passes the reduction's degree cap; only implied edges differ.

    How: nodes and hazard edges depend on what came before a range only through the node that is
    open where it starts and through the access groups of each resource that it continues
    (:func:`_hazard_pairs`). The range is widened back to a certain node boundary (a change of
    segment kind, or a flush, barrier or opaque command) and by some segments of context, and the
    accesses there are checked to settle every hazard edge inside (:meth:`_Builder._context_exact`);
    when they do not, more context is taken, up to the whole prefix (always exact; built once, up to
    the last range's end, and given to that range and every later one that is not settled sooner). Node boundaries
    compare write signatures (64-bit hashes of resource ids) as :func:`hazard_graph` does; the ids
    are numbered within the range, so a hash collision could split differently (never seen).
    The state events are found once, for all the ranges.

    >>> from drawopt.gen import generate
    >>> s = generate("quads", 6)
    >>> [h] = hazard_graph_within(s, "declared", [(9, len(s))])
    >>> h.graph["start"] <= 9, h.graph["stop"] >= len(s)
    (True, True)
    """
    if not ranges:
        return []
    stops = [_check_range(stream, reorder, a, b) for a, b in ranges]
    top = max(stops)
    cats = stream.cats()
    ns = np.flatnonzero(cats != int(Cat.STATE))  # the command ending each segment
    kind = _KIND_TABLE[cats[ns]]
    brk = np.r_[True, (kind[1:] != kind[:-1]) | _IS_SOLO_KIND[kind[1:]]]
    first = None  # the builder whose state events the others share
    prefix = None  # the graph of every command before ``top``, once some range needed it
    out = []
    for (start, _), stop in zip(ranges, stops):
        j0 = int(np.searchsorted(ns, start))  # the segment holding ``start``
        anchor = int(np.flatnonzero(brk[:j0 + 1])[-1]) if j0 < ns.size and start < stop else 0
        step = 1
        while True:
            h = prefix
            for margin in (*_CONTEXT_MARGINS, None) if prefix is None else ():
                j = 0 if margin is None or anchor <= margin else anchor - margin
                a = int(ns[j - 1]) + 1 if j > 0 else 0
                # the whole prefix: up to the last range's end, for every later range that needs it too
                b = _Builder(stream, reorder, a, stop if j > 0 else top, state_edges=False,
                             context_from=anchor - j if j > 0 else None)
                if first is None:
                    first = _Builder(stream, reorder, 0, top, state_edges=False)
                b.share(first)
                got = b.arrays()
                if not b.inexact:
                    h = _hazard_graph_of(b, got, {"reorder": reorder, "start": a, "stop": b.stop,
                                                  "commands": len(stream)})
                    if j == 0:
                        prefix = h
                    break
            assert h is not None  # (the whole prefix is always exact)
            nxt = _open_node_end(h, start, stop, ns, brk, step)
            if nxt is None:
                break
            # the node holding ``stop - 1`` may go on past the graph's end (commands there would give
            # it more edges in the whole graph): build further, a few more segments each time
            stop, step = nxt, 2 * step
            if stop > top:
                top, first, prefix = stop, None, None
        out.append(h)
    return out


def _open_node_end(h: HazardGraph, start: int, stop: int, ns: np.ndarray, brk: np.ndarray, step: int) -> int | None:
    """For :func:`hazard_graph_within`: None when graph ``h`` has the whole node holding command
    ``stop - 1`` (a later node follows it in ``h``, or ``h`` ends where the stream does or where a
    node certainly ends: the next segment changes kind or stands alone), or the range
    ``start .. stop-1`` is empty; else the end of the ``step`` segments after ``h``'s end, to build
    to instead (the whole graph gives that node the edges of all its commands, those after
    ``stop`` too)."""
    end = int(h.graph["stop"])
    jb = int(np.searchsorted(ns, end))  # the first segment after the graph
    if stop <= start or jb >= ns.size or brk[jb]:
        return None
    k = int(np.searchsorted(h.last, stop - 1))  # the node holding ``stop - 1`` (nodes in order)
    if k + 1 < h.number_of_nodes():
        return None
    return int(ns[min(jb + step, ns.size) - 1]) + 1


def _hazard_graph_of(b: _Builder, got: tuple[np.ndarray, ...] | None, attrs: dict[str, Any]) -> HazardGraph:
    """The :class:`HazardGraph` of builder ``b``'s :meth:`_Builder.arrays` ``got``."""
    if got is None:
        z = np.zeros(0, np.int64)
        return HazardGraph(attrs, z, z, z, z, z, z)
    nfirst, nlast, nkind, _nact, eu, ev, er, eres, _mask = got
    return HazardGraph(attrs, nfirst, nlast, nkind, eu, ev, er, eres, b.res_names)


def graph_summary(G: nx.DiGraph) -> dict[str, Any]:
    """Counts of nodes by kind and edges by reason."""
    kinds: dict[str, int] = {}
    for _, d in G.nodes(data=True):
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    reasons: dict[str, int] = {}
    for _, _, d in G.edges(data=True):
        reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    return {"nodes": G.number_of_nodes(), "edges": G.number_of_edges(), "node_kinds": kinds,
            "edge_reasons": reasons}


_COLORS = {"raw": "red", "war": "orange", "waw": "brown", "order": "blue", "flush": "purple",
           "barrier": "darkgreen", "opaque": "black", "state": "gray"}


def to_dot(G: nx.DiGraph, stream: Stream | None = None) -> str:
    """Graphviz text of ``G`` (labels name the commands when ``stream`` is given)."""
    out = ["digraph drawopt {", "  rankdir=TB;", '  node [shape=box, fontname="monospace", fontsize=10];']
    for v, d in G.nodes(data=True):
        label = f"{v}: {d['kind']} [{d['first']}..{d['last']}]"
        if stream is not None:
            names = [BY_CODE[int(o)].name for o in stream.op[d["first"]:d["last"] + 1]]
            acts = [x for x in names if BY_NAME[x].cat not in (Cat.STATE,)]
            if acts:
                label += "\\n" + (acts[0] if len(acts) == 1 else f"{acts[0]} x{len(acts)}")
            ln = int(stream.line[d["first"]])
            if ln:
                label += f"\\nline {ln}"
        out.append(f'  n{v} [label="{label}"];')
    for u, v, d in G.edges(data=True):
        lab = d["reason"] + (f":{d['resource']}" if d.get("resource") else "")
        lab = lab.replace('"', "'")
        out.append(f'  n{u} -> n{v} [label="{lab}", color={_COLORS.get(d["reason"], "black")}];')
    out.append("}")
    return "\n".join(out) + "\n"


def to_json(G: nx.DiGraph) -> dict[str, Any]:
    """``networkx.node_link_data`` of ``G`` (JSON-able)."""
    import networkx as nx
    return nx.node_link_data(G, edges="links")


GRAPH_FORMATS = {".dot": "dot", ".gv": "dot", ".graphml": "graphml", ".json": "json"}
"""Graph file extension -> format."""


def graph_bytes(G: nx.DiGraph, fmt: str, stream: Stream | None = None) -> bytes:
    """``G`` encoded as ``dot``, ``graphml`` or ``json``."""
    if fmt == "dot":
        return to_dot(G, stream).encode()
    if fmt == "graphml":
        import networkx as nx
        return "\n".join(nx.generate_graphml(G)).encode()
    if fmt == "json":
        return (json.dumps(to_json(G), indent=1) + "\n").encode()
    raise UsageError(f"unknown graph format '{fmt}' (use dot, graphml or json)")


def write_graph(G: nx.DiGraph, path: str | os.PathLike[str], stream: Stream | None = None) -> None:
    """Write ``G`` as ``.dot``, ``.graphml`` or ``.json`` (by extension), atomically."""
    from drawopt.ir.formats.atomic import write_atomic
    p = os.fspath(path)
    fmt = GRAPH_FORMATS.get(os.path.splitext(p)[1].lower())
    if fmt is None:
        raise UsageError(f"cannot tell the graph format of '{p}' (use .dot, .graphml or .json)")
    write_atomic(p, graph_bytes(G, fmt, stream))

