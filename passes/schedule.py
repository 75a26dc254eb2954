"""``schedule``: reorder draws within the dependency graph so that draws of one state are adjacent.

What moves and what does not
----------------------------
The stream is cut into **segments** at every command no pass moves a draw across
(:func:`drawopt.mergeclass.fence_mask`: dispatches, flushes, barriers, copies,
``Opaque`` commands, ``CSEnableAutomaticGpuFlush``) and at every **pinned** draw:
a draw flagged ``@nomerge``, a draw of a ``never_merge`` pipeline, or a draw
without a usable pipeline. Pinned draws are barriers for reordering too: they
keep their place and nothing moves across them (the safe reading of "never
merge": such draws often exist for a GPU query or a debug marker that brackets
the draws around them).

Inside a segment only draws remain (state commands are regenerated, see below),
and the dependency graph (:func:`drawopt.graph.build_graph` under the
``reorder`` policy) orders them: every edge between two draws of the segment
whose reason is a hazard (``raw``, ``war``, ``waw``), observable ``order`` on a
shared target, ``flush``, ``barrier`` or ``opaque`` is kept; ``state`` edges are
not constraints, because the state each draw sees is re-created for it.

The order
---------
Each draw gets a packed, stable sort key: render targets, descriptor heaps,
transparency class (opaque blend first), pipeline, root signature, the other
fixed-function state, vertex buffers, descriptor tables and root arguments,
the index buffer, then the root parameters the pipeline's per-draw contract
names (so that draws that differ only in per-draw data, which ``mdi`` and
``pack-x`` can still batch, end up adjacent), and the original position as the
tie-break. Value ids are numbered in order of first appearance, so the key
keeps first-seen materials first and the output is deterministic.

A segment without internal edges is sorted by the key (numpy ``lexsort``). A
segment with edges is list-scheduled: among the draws whose predecessors are
all placed, take one of the same call class as the last placed draw
(:func:`drawopt.mergeclass.call_classes`), else one with the same pipeline, else
the one with the smallest key. The scheduler works on the graph's nodes (runs of
commands with no internal hazard), so it is O(D log D) for D draws; a node that
everything before it must precede and that must precede everything after it (a
*cut*, :func:`drawopt.mergeclass.cut_units`) splits its segment into parts that
are scheduled separately (a chain of ordered draws costs nothing). Before any of
that, a cheap test finds segments that are such chains outright (every draw and
the next write the colour targets of one ``OMSetRenderTargets`` and neither
pipeline can commute under the policy, so the graph has an ``order`` edge
between them); when every segment is one, nothing can move and the pass returns
the stream unchanged without building the graph (a stream of blended quads on
one target: one graph node per draw would be built only to learn that).

State re-emission
-----------------
After the order is fixed the state-setting commands are rebuilt by
:class:`Restater`: before every observer (draw, dispatch, ``Opaque`` command, the
end of a bundle) it emits exactly the setters of the slots the observer reads
whose value in force differs from the value the observer saw in the input
(:func:`drawopt.state.track`, normalised: slots the draw cannot observe are not
re-created). It models the invalidation rules of :mod:`drawopt.state` (a new
root signature loses the root arguments, new heaps lose the descriptor tables,
``DrawIndexedX`` loses the index buffer), so a descriptor table is never left
undefined: a table lost to a heap change is set again before the next draw that
reads it. Setters are copies of input commands; partially updated root
constants and vertex-buffer slots are re-emitted as the words / slots that
differ. An observer whose input state cannot be re-created (it read an undefined
or unknown value that a moved draw would now define) makes its segment keep its
input order; if even that fails the pass leaves the stream unchanged. The
result is checked against the input with the state tracker before it is
returned.
"""

from __future__ import annotations

__all__ = ["SchedulePass", "Restater", "CannotRestate", "schedule_order", "sort_keys", "check_restated"]

import heapq
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from drawopt.costmodel import get_target
from drawopt.decls import Pipeline
from drawopt.graph import segments_are_chains
from drawopt.mergeclass import (
    call_classes,
    draw_facts,
    draw_parts,
    draw_segments,
    perdraw_params,
    segment_units,
)
from drawopt.ops import BY_NAME, Cat
from drawopt.passmanager import AnalysisManager, Pass, PassResult
from drawopt.state import (
    CROOT0,
    CRS,
    GFX_RS,
    HEAPS,
    IB,
    MASKED,
    NROOT,
    NSLOTS,
    PIPELINE,
    ROOT0,
    SLOTS,
    UNDEFINED,
    UNKNOWN,
    VB,
    StateTable,
    intern_rows,
    track,
)
from drawopt.stream import FLAG_NOMERGE, CommandBuffer, Stream, concat

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_CONST_OPS = (_OP["SetGraphicsRoot32BitConstants"], _OP["SetComputeRoot32BitConstants"])
_TABLE_OPS = (_OP["SetGraphicsRootDescriptorTable"], _OP["SetComputeRootDescriptorTable"])
_VB_OP = _OP["IASetVertexBuffers"]
_DX = _OP["DrawIndexedX"]
_OPAQUE = _OP["Opaque"]
_GFX_ROOTS = list(range(ROOT0, ROOT0 + NROOT))
_CMP_ROOTS = list(range(CROOT0, CROOT0 + NROOT))
_ALL_ROOTS = _GFX_ROOTS + _CMP_ROOTS
REORDER_POLICIES = ("none", "declared", "opaque")
_CHUNK = 1 << 15
_SLOT_RANGE = range(NSLOTS)


class CannotRestate(Exception):
    """An observer's input state cannot be re-created at this point of the output."""


# ---------------------------------------------------------------------- the restater
class Restater:
    """Rebuilds the state-setting commands of a rewritten stream.

    Feed it the commands that are not state commands, in output order
    (:meth:`emit`); before each observer it emits the setters that make the state
    in force equal to what that observer saw in ``stream``. :meth:`build` returns
    the new stream.

    Parameters
    ----------
    stream : Stream
        The input stream.
    table : StateTable
        Its state table (:func:`drawopt.state.track`).
    """

    def __init__(self, stream: Stream, table: StateTable) -> None:
        assert table.scan is not None
        self.s = stream
        self.sc = sc = table.scan
        self.cats = stream.cats()
        n = len(stream)
        obs_of = np.full(n + 1, -1, np.int64)
        real = sc.obs >= 0
        obs_of[sc.obs[real]] = np.flatnonzero(real)
        # the per-command lookups of the emit loop, as Python lists (one element read at a time)
        self._obs_of: list[int] = obs_of.tolist()
        self._op: list[int] = stream.op.tolist()
        self._is_state: list[bool] = (self.cats == int(Cat.STATE)).tolist()
        self._slot: list[int] = sc.slot.tolist()
        self._cval: list[int] = sc.cval.tolist()
        nobs = sc.obs.shape[0]
        rows = np.empty((nobs, NSLOTS), np.int64)
        for lo in range(0, nobs, _CHUNK):
            sel = np.arange(lo, min(lo + _CHUNK, nobs))
            rows[sel] = sc.normalised(sel)
        self.oid, first = _intern(rows)
        self.urows = rows[first]
        self._oid: list[int] = self.oid.tolist()
        init = sc.init_val.copy()
        if stream.header.kind == "bundle":
            unk = np.ones(NSLOTS, bool)
            unk[[PIPELINE, SLOTS.index("topology")]] = False
            init[unk] = UNKNOWN
        self.inforce: list[int] = init.tolist()
        self.is_table: list[bool] = [False] * NSLOTS
        self.out: list[int] = []
        self.synth = CommandBuffer()
        self.last = -1
        self.emitted_state = 0
        self._decode_cache: dict[int, Any] = {}
        self._partial_mask = sc.values.partial_mask()
        self._const_width = {k: ch.width for k, ch in sc.chains.items() if k != VB}
        # root-constant commands that write every word their slot ever has: copying one
        # gives exactly the value it left, whatever was in force
        self._full = np.zeros(n, bool)
        cc = np.flatnonzero(np.isin(stream.op, _CONST_OPS))
        if cc.size:
            width = np.array([self._const_width.get(int(k), 0) for k in sc.slot[cc]], np.int64)
            self._full[cc] = (stream.args[cc, 2] == 0) & (stream.args[cc, 1] >= width)
        self._full_l: list[bool] = self._full.tolist()

    # ------------------------------------------------------------ public API
    def mark(self) -> tuple:
        """A snapshot to :meth:`rollback` to."""
        return (len(self.out), len(self.synth), list(self.inforce), list(self.is_table), self.last,
                self.emitted_state)

    def rollback(self, m: tuple) -> None:
        """Forget everything emitted since :meth:`mark` returned ``m``."""
        nout, nsyn, inforce, is_table, last, emitted = m
        del self.out[nout:]
        cb = self.synth
        for lst in (cb.op, cb.args, cb.var, cb.flags, cb.line):
            del lst[nsyn:]
        self.inforce, self.is_table, self.last, self.emitted_state = list(inforce), list(is_table), last, emitted

    def emit(self, cmd: int, args: np.ndarray | None = None, observer: int | None = None) -> None:
        """Append input command ``cmd`` (with ``args`` instead of its own, if given).

        If ``cmd`` is an observer (draw, dispatch, Opaque), the state it saw in the
        input (or, with ``observer``, the state input command ``observer`` saw) is
        re-created first. Raises :class:`CannotRestate` when that is impossible.
        """
        cmd = int(cmd)
        o = self._obs_of[observer if observer is not None else cmd]
        if o >= 0:
            self.require(o)
        if args is None:
            self.out.append(cmd)
        else:
            self._append_new(int(self.s.op[cmd]), args[:len(self.s.spec(cmd).args)].tolist(),
                             self.s.var(cmd).tolist(), int(self.s.flags[cmd]), int(self.s.line[cmd]))
        op = self._op[cmd]
        if op == _DX:
            self.inforce[IB] = UNDEFINED
            self.last = -1
        elif op == _OPAQUE:
            self.inforce = [UNKNOWN] * NSLOTS
            self.is_table = [False] * NSLOTS
            self.last = -1
        elif self._is_state[cmd]:  # a state command kept in place
            self._effect_of_copy(int(cmd))
            self.last = -1

    def finish(self) -> None:
        """Re-create the final state a bundle hands to its caller (nothing for a list)."""
        end = np.flatnonzero(self.sc.obs < 0)
        for o in end:
            self.require(int(o))

    def build(self) -> Stream:
        """The output stream."""
        s = self.s
        idx = np.asarray(self.out, np.int64)
        if len(self.synth):
            extra = self.synth.build(s.header, s.decls, s.strings)
            return concat([s, extra], s.header, s.decls, s.strings).take(idx)
        return s.take(idx)

    # ------------------------------------------------------------ requirements
    def require(self, o: int) -> None:
        """Emit what observer ``o`` needs (see the class docstring)."""
        sid = self._oid[o]
        if sid == self.last:
            return
        row = self.urows[sid].tolist()
        need = [k for k, x, f in zip(_SLOT_RANGE, row, self.inforce) if x != f and x != MASKED]
        i = 0
        while i < len(need):
            k = need[i]
            i += 1
            v = row[k]
            if self.inforce[k] == v:
                continue
            if v < 0:
                raise CannotRestate(f"{SLOTS[k]} is {'undefined' if v == UNDEFINED else 'unknown'} there")
            reset = self._set(o, k, v)
            if reset:  # the change lost later slots: look again at what is needed after k
                inforce = self.inforce
                need = need[:i] + [x for x in range(k + 1, NSLOTS) if row[x] != MASKED and row[x] != inforce[x]]
        self.last = sid

    def _set(self, o: int, k: int, v: int) -> bool:
        """Make slot ``k`` hold value ``v``; True if that reset other slots."""
        src = int(self.sc.setter[o, k])
        if src < 0:
            raise CannotRestate(f"{SLOTS[k]}: no command sets it")
        op = self._op[src]
        if op in _CONST_OPS:
            if self._full_l[src]:
                self.out.append(src)
                self.emitted_state += 1
                self.inforce[k], self.is_table[k] = v, False
            else:
                self._set_constants(k, v, src)
            return False
        if k == VB:
            self._set_vb(v, src)
            return False
        self.out.append(src)
        self.emitted_state += 1
        return self._effect_of_copy(src)

    def _effect_of_copy(self, src: int) -> bool:
        """Update the state in force for input state command ``src`` just emitted."""
        k = self._slot[src]
        if k < 0:
            return False
        v = self._cval[src]
        inforce, is_table = self.inforce, self.is_table
        before = inforce[k]
        reset = False
        if k in (GFX_RS, CRS):
            roots = _GFX_ROOTS if k == GFX_RS else _CMP_ROOTS
            if before == UNKNOWN:
                known = [r for r in roots if inforce[r] >= 0]
                for r in known:
                    inforce[r] = UNKNOWN
                reset = bool(known)
            elif before != v:
                for r in roots:
                    inforce[r] = UNDEFINED
                    is_table[r] = False
                reset = True
        elif k == HEAPS and (before == UNKNOWN or before != v):
            tabs = [r for r in _ALL_ROOTS if inforce[r] >= 0 and is_table[r]]
            for r in tabs:
                inforce[r] = UNKNOWN if before == UNKNOWN else UNDEFINED
                is_table[r] = False
            reset = bool(tabs)
        op = self._op[src]
        inforce[k] = v  # for root constants and vertex buffers: the merged value the input saw after it
        is_table[k] = op in _TABLE_OPS
        return reset

    def _decode(self, v: int) -> Any:
        d = self._decode_cache.get(v)
        if d is None:
            d = self._decode_cache[v] = self.sc.values.decode(v)
        return d

    def _append_new(self, code: int, args: list[int], var: list[int], flags: int = 0, line: int = 0) -> None:
        self.out.append(len(self.s) + len(self.synth))
        self.synth.append(code, args, var, flags, line)

    # merge slots: root constants and vertex buffers ---------------------
    def _partial(self, v: int) -> bool:
        """Whether value ``v`` (or the marker) is, or continues, a partial update of an unknown value."""
        if v == UNKNOWN:
            return True
        return v >= 0 and v < self._partial_mask.shape[0] and bool(self._partial_mask[v])

    def _replay_chain(self, k: int, v: int, src: int) -> bool:
        """Emit the input's own writes of slot ``k`` that lead from the value in force to ``v``.

        The merged value of a slot is a function of the value before a write and
        the write, so when the value in force equals the value after the chain's
        ``i``-th command (or its initial value), copying commands ``i+1 .. src`` of
        the chain gives exactly ``v``. Looks back at most 64 commands.
        """
        ch = self.sc.chains.get(k)
        if ch is None:
            return False
        p = int(np.searchsorted(ch.cmds, src))
        if p >= ch.cmds.shape[0] or ch.cmds[p] != src:
            return False
        cur = int(self.inforce[k])
        fresh = cur == UNDEFINED or (cur >= 0 and k != VB and self.is_table[k])  # a write starts a chain
        i = p
        while i >= 0 and p - i < 64:
            if int(self.sc.cval[ch.cmds[i]]) == cur and cur >= 0 and not (k != VB and self.is_table[k]):
                self._copy_run(ch.cmds[i + 1:p + 1])
                return True
            if ch.start[i]:
                init = int(ch.init[i])
                if (init == UNKNOWN and cur == UNKNOWN) or (init == UNDEFINED and fresh):
                    self._copy_run(ch.cmds[i:p + 1])
                    return True
                return False
            i -= 1
        return False

    def _copy_run(self, cmds: np.ndarray) -> None:
        self.out.extend(int(c) for c in cmds)
        self.emitted_state += int(cmds.shape[0])

    def _set_constants(self, k: int, v: int, src: int) -> None:
        cur = int(self.inforce[k])
        cur_partial = cur == UNKNOWN or (self._partial(cur) and not self.is_table[k])
        if self._full_l[src] and cur_partial == self._partial(v):
            self.out.append(src)  # writes every word: the result is its words (and the chain's flag)
            self.emitted_state += 1
        elif not self._replay_chain(k, v, src):
            self._write_constants(k, v, cur)
        self.inforce[k], self.is_table[k] = v, False

    def _write_constants(self, k: int, v: int, cur: int) -> None:
        """Write the words of ``v`` that differ from the value in force."""
        want = self._decode(v)
        if self._partial(v) or not (isinstance(want, tuple) and len(want) == 2 and want[0] == "constants"):
            raise CannotRestate(f"{SLOTS[k]}: {want!r} cannot be re-created here")
        words: tuple = want[1]
        if cur == UNKNOWN or self._partial(cur):
            raise CannotRestate(f"{SLOTS[k]}: an unknown value is in force")
        if cur >= 0 and not self.is_table[k]:
            hv = self._decode(cur)
            have = list(hv[1]) if isinstance(hv, tuple) and hv and hv[0] == "constants" else []
        else:
            have = []  # undefined, or a table / root view: the write starts a new chain
        if len(have) > len(words) and any(w is not None for w in have[len(words):]):
            raise CannotRestate(f"{SLOTS[k]}: words defined in force are undefined in the input")
        diff = []
        for j, w in enumerate(words):
            h = have[j] if j < len(have) else None
            if w is None and h is not None:
                raise CannotRestate(f"{SLOTS[k]}: word {j} is undefined in the input")
            if w is not None and w != h:
                diff.append(j)
        code = _CONST_OPS[0] if k < CRS else _CONST_OPS[1]
        index = k - ROOT0 if k < CRS else k - CROOT0
        for lo, hi in _runs(diff):
            self._append_new(code, [index, hi - lo, lo], [int(w) for w in words[lo:hi]])
            self.emitted_state += 1

    def _set_vb(self, v: int, src: int) -> None:
        if not self._replay_chain(VB, v, src):
            self._write_vb(v, int(self.inforce[VB]), src)
        self.inforce[VB], self.is_table[VB] = v, False

    def _write_vb(self, v: int, cur: int, src: int) -> None:
        """Bind the vertex-buffer slots of ``v`` that differ from those in force."""
        want = self._decode(v)
        if self._partial(v) or not isinstance(want, tuple):
            raise CannotRestate(f"vertex_buffers: {want!r} cannot be re-created here")
        if cur == UNKNOWN or self._partial(cur):
            raise CannotRestate("vertex_buffers: an unknown value is in force")
        wmap = {e[0]: e for e in want}
        hmap = {e[0]: e for e in self._decode(cur)} if cur >= 0 else {}
        if set(hmap) - set(wmap):
            raise CannotRestate("vertex_buffers: a slot bound in force is unbound in the input")
        s_entry = (int(self.s.args[src, 0]), self.s.decls[int(self.s.args[src, 1])].name,
                   int(self.s.args[src, 2]), int(self.s.args[src, 3]))
        for slot in sorted(wmap):
            e = wmap[slot]
            if hmap.get(slot) == e:
                continue
            if e == s_entry:
                self.out.append(src)
            else:
                self._append_new(_VB_OP, [e[0], self.s.decls.index[e[1]], e[2], e[3]], [])
            self.emitted_state += 1


def _intern(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of equal rows (first-appearance order) and each id's first row."""
    if rows.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return intern_rows(rows)


def _runs(idx: list[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers as half-open ``(lo, hi)``."""
    out: list[tuple[int, int]] = []
    for j in idx:
        if out and out[-1][1] == j:
            out[-1] = (out[-1][0], j + 1)
        else:
            out.append((j, j + 1))
    return out


# ---------------------------------------------------------------------- ordering
def sort_keys(stream: Stream, table: StateTable, facts: Any = None) -> np.ndarray:
    """Rank of every draw under the packed sort key (module docstring); ``int64[D]``, unique."""
    facts = facts if facts is not None else draw_facts(stream, table)
    d = len(facts)
    if d == 0:
        return np.zeros(0, np.int64)
    rows = facts.nrows  # per normalised state
    first_draw = np.zeros(rows.shape[0], np.int64)
    first_draw[facts.nstate[::-1]] = np.arange(d)[::-1]
    pipes = facts.pipe[first_draw]
    transp = np.zeros(rows.shape[0], np.int64)
    tail = np.full((rows.shape[0], 4), MASKED, np.int64)
    main = rows.copy()
    for p in np.unique(pipes):
        decl = stream.decls[int(p)] if p >= 0 else None
        sel = pipes == p
        if isinstance(decl, Pipeline):
            transp[sel] = decl.blend != "opaque"
            cols = [ROOT0 + q for q in perdraw_params(decl) if q < NROOT][:4]
            if cols:
                tail[np.ix_(sel, np.arange(len(cols)))] = rows[np.ix_(sel, cols)]
                main[np.ix_(sel, cols)] = MASKED
    ns = facts.nstate
    cols: list[np.ndarray] = [main[ns, SLOTS.index("render_targets")], main[ns, SLOTS.index("heaps")],
                              transp[ns]]
    cols += [main[ns, SLOTS.index(x)] for x in ("pipeline", "gfx_rootsig", "topology", "viewport", "scissor",
                                                 "blend_factor", "stencil_ref", "gs_params", "vertex_buffers")]
    cols += [main[ns, c] for c in range(ROOT0, ROOT0 + NROOT)]
    cols.append(main[ns, IB])
    cols += [tail[ns, j] for j in range(tail.shape[1])]
    # each column ranked by first appearance along the stream: first-seen values first
    keys = [np.arange(d)] + [_first_seen_rank(c) for c in reversed(cols)]
    order = np.lexsort(keys)
    rank = np.empty(d, np.int64)
    rank[order] = np.arange(d)
    return rank


def _first_seen_rank(col: np.ndarray) -> np.ndarray:
    """Each value replaced by the rank of its first appearance in ``col``."""
    _, first, inv = np.unique(col, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return rank[inv.reshape(-1)]


def schedule_order(rank: np.ndarray, unit: np.ndarray, unit_edges: np.ndarray, sticky: list[np.ndarray]) -> np.ndarray:
    """List-schedule one segment.

    Parameters
    ----------
    rank : int64[n]
        Priority of each draw (smaller first), unique.
    unit : int64[n]
        Graph node of each draw (0..U-1); draws of one node may go in any order.
    unit_edges : int64[E, 2]
        ``(u, v)``: every draw of node ``u`` before every draw of node ``v`` (a DAG).
    sticky : list of int64[n]
        Group ids, most preferred first: after a draw of group ``g`` the next draw
        is taken from ``g`` when one is ready.

    Returns
    -------
    int64[n]
        Local draw indices in the scheduled order.
    """
    n = rank.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    nunits = int(unit.max()) + 1
    members: list[list[int]] = [[] for _ in range(nunits)]
    for i in np.argsort(unit, kind="stable").tolist():
        members[int(unit[i])].append(i)
    succ: list[list[int]] = [[] for _ in range(nunits)]
    indeg = np.zeros(nunits, np.int64)
    if unit_edges.size:
        ue = np.unique(unit_edges, axis=0)
        ue = ue[ue[:, 0] != ue[:, 1]]
        for u, v in ue.tolist():
            succ[u].append(v)
        np.add.at(indeg, ue[:, 1], 1)
    left = np.array([len(m) for m in members], np.int64)
    rank_l = rank.tolist()
    groups = [g.tolist() for g in sticky]
    ready_all: list[tuple[int, int]] = []
    ready_grp: list[dict[int, list[tuple[int, int]]]] = [{} for _ in groups]
    done = np.zeros(n, bool)

    def release(u: int) -> None:
        for i in members[u]:
            item = (rank_l[i], i)
            heapq.heappush(ready_all, item)
            for lvl, g in enumerate(groups):
                heapq.heappush(ready_grp[lvl].setdefault(g[i], []), item)

    for u in np.flatnonzero(indeg == 0).tolist():
        release(u)
    out: list[int] = []
    last = -1
    while len(out) < n:
        pick = -1
        if last >= 0:
            for lvl, g in enumerate(groups):
                h = ready_grp[lvl].get(g[last])
                while h and done[h[0][1]]:
                    heapq.heappop(h)
                if h:
                    pick = heapq.heappop(h)[1]
                    break
        if pick < 0:
            while done[ready_all[0][1]]:
                heapq.heappop(ready_all)
            pick = heapq.heappop(ready_all)[1]
        done[pick] = True
        out.append(pick)
        last = pick
        u = int(unit[pick])
        left[u] -= 1
        if left[u] == 0:
            for v in succ[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    release(v)
    return np.asarray(out, np.int64)


# ---------------------------------------------------------------------- the pass
def check_restated(before: Stream, after: Stream, perm: np.ndarray, table: StateTable | None = None) -> str | None:
    """None if draw ``j`` of ``after`` sees the state draw ``perm[j]`` of ``before`` saw.

    ``perm``: for every draw of ``after`` (in order), the index of the draw of
    ``before`` it is. States are compared as canonical values (names, not ids).
    """
    ta = table if table is not None else track(before)
    tb = track(after)
    if tb.state.shape[0] != perm.shape[0]:
        return f"{tb.state.shape[0]} draws after, {perm.shape[0]} expected"
    assert ta.scan is not None and tb.scan is not None
    va = ta.rows[ta.state[perm]]
    vb = tb.rows[tb.state]
    for k in range(NSLOTS):
        a, b = va[:, k], vb[:, k]
        # the same marker (masked, undefined, unknown: negative ids) on both sides is equal
        ask = np.flatnonzero((a != b) | (a >= 0))
        if not ask.size:
            continue
        key = ((a[ask] + 3) << 32) | (b[ask] + 3)  # value ids are >= -3 and < 2**31
        uniq, inv = np.unique(key, return_inverse=True)
        neq = np.fromiter((ta.scan.values.decode(int(x >> 32) - 3) != tb.scan.values.decode(int(x & 0xFFFFFFFF) - 3)
                           for x in uniq.tolist()), bool, uniq.shape[0])
        if neq.any():
            j = int(ask[np.argmax(neq[inv.reshape(-1)])])
            x, y = ta.scan.values.decode(int(va[j, k])), tb.scan.values.decode(int(vb[j, k]))
            return f"draw {j} (input draw {int(perm[j])}): {SLOTS[k]} {x!r} became {y!r}"
    return None


@dataclass(frozen=True)
class SchedulePass(Pass):
    """Group draws by state within the dependency graph (see the module docstring).

    Options: ``reorder`` (``none``, ``declared``, ``opaque``: which draws on a
    shared target commute), ``target`` (whose call classes the list scheduler
    keeps together).
    """

    name: ClassVar[str] = "schedule"
    requires: ClassVar[tuple[str, ...]] = ("state", "graph")
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "reorder draws by state within the dependency graph; re-emit the state they need"

    reorder: str = "declared"
    target: str = "d3d12"

    def __post_init__(self) -> None:
        if self.reorder not in REORDER_POLICIES:
            from drawopt.errors import UsageError
            raise UsageError(f"schedule: reorder must be one of {', '.join(REORDER_POLICIES)}, not '{self.reorder}'")
        get_target(self.target)

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        table: StateTable = am.get("state", stream)
        draws = table.draws.astype(np.int64)
        report: dict[str, Any] = {"draws": int(draws.size), "moved": 0, "segments": 0, "kept_order": 0}
        if draws.size < 2 or self.reorder == "none":
            return PassResult.unchanged(stream, **report)
        pipe, pinned = _draw_pipes(stream, table)
        seg = draw_segments(stream, SimpleNamespace(cmd=draws, pipe=pipe, pinned=pinned))  # type: ignore[arg-type]
        new = np.arange(draws.size)
        bounds = np.flatnonzero(np.diff(seg)) + 1
        starts = np.r_[0, bounds]
        ends = np.r_[bounds, draws.size]
        multi = ends - starts > 1
        report["segments"] = int(multi.sum())
        if multi.any() and segments_are_chains(stream, table, pipe, seg, self.reorder):
            # every draw of every segment must stay after the previous one: nothing can move,
            # and no dependency graph is needed to find that out
            report["parts"] = 0
            return PassResult.unchanged(stream, **report)
        facts = draw_facts(stream, table)
        rank = sort_keys(stream, table, facts)
        if multi.any():
            graph = am.get("graph", stream) if self.reorder == "declared" else _build_graph(stream, self.reorder)
            unit, edges = segment_units(graph, draws, seg)
            # a cut (a unit nothing can move across) splits a segment into parts scheduled apart
            part = draw_parts(unit, edges, seg)
            classes = call_classes(facts, mdi=bool(get_target(self.target).mdi))
            sticky = [classes, facts.pipe]
            upart = np.zeros(int(unit.max()) + 1, np.int64)
            upart[unit] = part
            e_part = upart[edges[:, 0]]
            keep = e_part == upart[edges[:, 1]]
            edges, e_part = edges[keep], e_part[keep]
            eo = np.argsort(e_part, kind="stable")
            edges, e_part = edges[eo], e_part[eo]
            pb = np.flatnonzero(np.diff(part)) + 1
            p_start, p_end = np.r_[0, pb], np.r_[pb, draws.size]
            big = p_end - p_start > 1
            report["parts"] = int(big.sum())
            for a, b in zip(p_start[big].tolist(), p_end[big].tolist()):
                lo_e = np.searchsorted(e_part, part[a], "left")
                hi_e = np.searchsorted(e_part, part[a], "right")
                r = rank[a:b]
                if hi_e == lo_e:
                    local = np.argsort(r, kind="stable")
                else:
                    u = unit[a:b]
                    uniq, uloc = np.unique(u, return_inverse=True)
                    le = np.searchsorted(uniq, edges[lo_e:hi_e])
                    local = schedule_order(r, uloc.reshape(-1), le, [g[a:b] for g in sticky])
                new[a:b] = a + local
        moved = int(np.count_nonzero(new != np.arange(draws.size)))
        report["moved"] = moved
        if moved == 0:
            return PassResult.unchanged(stream, **report)
        out, kept = _rebuild(stream, table, draws, new, seg, starts, ends)
        if out is None:
            report["fallback"] = "the input state of some draw cannot be re-created; stream unchanged"
            return PassResult.unchanged(stream, **report)
        report["kept_order"] = kept
        problem = check_restated(stream, out, new, table)
        if problem is not None:
            report["fallback"] = f"self-check failed ({problem}); stream unchanged"
            return PassResult.unchanged(stream, **report)
        report["state_commands_before"] = int(np.count_nonzero(stream.cats() == int(Cat.STATE)))
        report["state_commands_after"] = int(np.count_nonzero(out.cats() == int(Cat.STATE)))
        if out == stream:
            return PassResult.unchanged(stream, **report)
        return PassResult(out, True, frozenset(), report)


def _draw_pipes(stream: Stream, table: StateTable) -> tuple[np.ndarray, np.ndarray]:
    """Pipeline declaration index (-1: none) and pinned flag of every draw, as
    :func:`drawopt.mergeclass.draw_facts` computes them (without its costlier columns)."""
    ps = table.setter[:, PIPELINE].astype(np.int64)
    pipe = np.where(ps >= 0, stream.args[np.maximum(ps, 0), 0], -1)
    never = np.array([isinstance(d, Pipeline) and d.never_merge for d in stream.decls.items] + [False], bool)
    cmd = table.draws.astype(np.int64)
    pinned = ((stream.flags[cmd] & FLAG_NOMERGE) != 0) | never[np.where(pipe >= 0, pipe, len(stream.decls))]
    return pipe, pinned


def _build_graph(stream: Stream, reorder: str) -> Any:
    from drawopt.graph import build_graph
    return build_graph(stream, reorder=reorder)


def _rebuild(stream: Stream, table: StateTable, draws: np.ndarray, new: np.ndarray, seg: np.ndarray,
             starts: np.ndarray, ends: np.ndarray) -> tuple[Stream | None, int]:
    """Emit the stream with the draws of each segment in order ``new``; returns (stream, segments kept)."""
    rs = Restater(stream, table)
    cats = stream.cats()
    keep_state = stream.op == _OP["CSEnableAutomaticGpuFlush"]
    nonstate = np.flatnonzero((cats != int(Cat.STATE)) | keep_state)
    is_draw = cats[nonstate] == int(Cat.DRAW)
    kept = 0
    # walk non-state commands; a segment's draws are emitted at the position of its first draw
    draw_pos = {int(c): i for i, c in enumerate(draws.tolist())}
    seg_start_of = {int(a): (int(a), int(b)) for a, b in zip(starts.tolist(), ends.tolist())}
    try:
        for c, isd in zip(nonstate.tolist(), is_draw.tolist()):
            if not isd:
                rs.emit(c)
                continue
            i = draw_pos[c]
            span = seg_start_of.get(i)
            if span is None:
                continue  # emitted with its segment
            a, b = span
            m = rs.mark()
            try:
                for j in new[a:b].tolist():
                    rs.emit(int(draws[j]))
            except CannotRestate:
                rs.rollback(m)
                kept += 1
                new[a:b] = np.arange(a, b)
                for j in range(a, b):
                    rs.emit(int(draws[j]))
        rs.finish()
    except CannotRestate:
        return None, kept
    return rs.build(), kept
