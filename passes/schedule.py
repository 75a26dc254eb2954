"""``schedule``: reorder draws within the dependency graph so that draws of one state are adjacent.

What moves and what does not
----------------------------
The stream is cut into **segments** at every command no pass moves a draw across
(:func:`drawopt.analysis.mergeclass.fence_mask`: dispatches, flushes, barriers, copies,
``Opaque`` commands, ``CSEnableAutomaticGpuFlush``) and at every **pinned** draw:
a draw flagged ``@nomerge``, a draw of a ``never_merge`` pipeline, or a draw
without a usable pipeline. Pinned draws are barriers for reordering too: they
keep their place and nothing moves across them (the safe reading of "never
merge": such draws often exist for a GPU query or a debug marker that brackets
the draws around them).

Inside a segment only draws remain (state commands are regenerated, see below),
and the dependency graph (under the ``reorder`` policy) orders them: every edge
between two draws of the segment whose reason is a hazard (``raw``, ``war``,
``waw``), observable ``order`` on a shared target, ``flush``, ``barrier`` or
``opaque`` is kept; ``state`` edges are not constraints, because the state each
draw sees is re-created for it, so the pass builds the graph without them, and only
over the segments that can reorder (:func:`drawopt.analysis.graph.hazard_graph_within`:
the whole graph's nodes and order there; every other draw is a part of its own).

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
(:func:`drawopt.analysis.mergeclass.call_classes`), else one with the same pipeline, else
the one with the smallest key. The scheduler works on the graph's nodes (runs of
commands with no internal hazard), so it is O(D log D) for D draws; a node that
everything before it must precede and that must precede everything after it (a
*cut*, :func:`drawopt.analysis.lowerbound.cut_units`) splits its segment into parts that
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
(:func:`drawopt.analysis.state.track`, normalised: slots the draw cannot observe are not
re-created). It models the invalidation rules of :mod:`drawopt.analysis.state` (a new
root signature loses the root arguments, new heaps lose the descriptor tables,
``DrawIndexedX`` loses the index buffer), so a descriptor table is never left
undefined: a table lost to a heap change is set again before the next draw that
reads it. Setters are copies of input commands; partially updated root
constants and vertex-buffer slots are re-emitted as the words / slots that
differ (a chain of writes that started afresh in the input, after a descriptor
table or a root view, is copied with that command where the value in force
cannot be turned into its result word by word: over an unknown value, writing
even every word leaves a partly unknown one). An observer whose input state
cannot be re-created (it read an undefined or unknown value that a moved draw
would now define) makes its segment keep its input order; if even that fails
the pass leaves the stream unchanged. The emit loop runs in ``drawopt._schedule``
(``cext/_schedule.pyx``; its pure-Python twin is :meth:`Restater._emit_all_py`).
The result is checked against the input with
the state tracker before it is returned (:func:`check_restated`: every draw's
state, slot by slot, values compared by content and decoded where that does not
settle it); a difference leaves the stream unchanged.
"""

from __future__ import annotations

__all__ = ["SchedulePass", "Restater", "OutBuffer", "CannotRestate", "schedule_order", "sort_keys", "check_restated"]

import heapq
from dataclasses import dataclass
from functools import cached_property
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.costmodel import get_target
from drawopt.analysis.graph import hazard_graph_within, lex_order, ordered_chains, pack_columns
from drawopt.analysis.lowerbound import draw_parts, segment_units
from drawopt.analysis.mergeclass import call_classes, draw_facts, draw_segments, perdraw_params
from drawopt.analysis.state import (
    CROOT0,
    CRS,
    GFX_RS,
    HEAPS,
    IB,
    MASKED,
    NROOT,
    NSLOTS,
    OBS_DISPATCH,
    OBS_DRAW,
    OBS_END,
    OBS_OPAQUE,
    PIPELINE,
    ROOT0,
    SLOTS,
    UNDEFINED,
    UNKNOWN,
    VB,
    Scan,
    StateTable,
    diff_state_rows,
    intern_rows,
    track,
)
from drawopt.ir.arrayset import isin
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_CODE, BY_NAME, COL_PIPELINE, MAX_OPCODE, Cat, shared_col
from drawopt.ir.stream import FLAG_NOMERGE, CommandBuffer, Stream, concat, ragged_index
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_CONST_OPS = (_OP["SetGraphicsRoot32BitConstants"], _OP["SetComputeRoot32BitConstants"])
_TABLE_OPS = (_OP["SetGraphicsRootDescriptorTable"], _OP["SetComputeRootDescriptorTable"])
_VB_OP = _OP["IASetVertexBuffers"]
_DX = _OP["DrawIndexedX"]
_OPAQUE = _OP["Opaque"]
_CONST_COUNT = shared_col(("SetGraphicsRoot32BitConstants", "count"), ("SetComputeRoot32BitConstants", "count"))
_CONST_DEST = shared_col(("SetGraphicsRoot32BitConstants", "dest"), ("SetComputeRoot32BitConstants", "dest"))
_VB_COLS = tuple(BY_NAME["IASetVertexBuffers"].col(a) for a in ("slot", "buffer", "offset", "stride"))
"""The argument columns of an ``IASetVertexBuffers`` entry ``(slot, buffer, offset, stride)``."""
# the restater writes new root-constants and vertex-buffer commands as argument lists in this order
assert _VB_COLS == (0, 1, 2, 3) and (BY_NAME["SetGraphicsRoot32BitConstants"].col("index"), _CONST_COUNT,
                                     _CONST_DEST) == (0, 1, 2), "argument table changed: fix Restater"
_IS_CONST = np.zeros(MAX_OPCODE + 1, bool)
_IS_CONST[list(_CONST_OPS)] = True
_GFX_ROOTS = list(range(ROOT0, ROOT0 + NROOT))
_CMP_ROOTS = list(range(CROOT0, CROOT0 + NROOT))
_ALL_ROOTS = _GFX_ROOTS + _CMP_ROOTS
_CHUNK = 1 << 15
_SLOT_RANGE = range(NSLOTS)
_KERNEL_LAYOUT = np.array([GFX_RS, CRS, HEAPS, IB, VB, ROOT0, CROOT0, NROOT, MASKED, UNDEFINED, UNKNOWN], np.int64)
"""Slot indices and markers, as ``drawopt._schedule.emit_run`` takes them."""


class CannotRestate(Exception):
    """An observer's input state cannot be re-created at this point of the output."""


class OutBuffer:
    """The output command indices of a :class:`Restater`: a growable int64 array (the compiled
    emit loop writes into it directly), with the list operations the Python loop uses."""

    __slots__ = ("buf", "n")

    def __init__(self, capacity: int = 1024) -> None:
        self.buf = np.empty(max(int(capacity), 16), np.int64)
        self.n = 0

    def reserve(self, k: int) -> None:
        """Room for ``k`` more entries."""
        if self.n + k > self.buf.shape[0]:
            grown = np.empty(max(2 * self.buf.shape[0], self.n + k), np.int64)
            grown[:self.n] = self.buf[:self.n]
            self.buf = grown

    def append(self, x: int) -> None:
        if self.n == self.buf.shape[0]:
            self.reserve(1)
        self.buf[self.n] = x
        self.n += 1

    def extend(self, xs: np.ndarray | list[int]) -> None:
        xs = np.asarray(xs, np.int64)
        self.reserve(xs.shape[0])
        self.buf[self.n:self.n + xs.shape[0]] = xs
        self.n += xs.shape[0]

    def truncate(self, n: int) -> None:
        """Forget every entry from ``n`` on."""
        self.n = min(self.n, int(n))

    def array(self) -> np.ndarray:
        """The entries (a view)."""
        return self.buf[:self.n]

    def tolist(self) -> list[int]:
        return self.array().tolist()

    def __len__(self) -> int:
        return self.n

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OutBuffer):
            return bool(np.array_equal(self.array(), other.array()))
        if isinstance(other, list):
            return self.tolist() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


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
        Its state table (:func:`drawopt.analysis.state.track`).
    """

    def __init__(self, stream: Stream, table: StateTable, pure: bool | None = None) -> None:
        assert table.scan is not None
        self.s = stream
        self.sc = sc = table.scan
        self.cats = stream.cats()
        n = len(stream)
        self._kernel = load_cext("_schedule", pure)
        obs_of = np.full(n + 1, -1, np.int64)
        real = sc.obs >= 0
        obs_of[sc.obs[real]] = np.flatnonzero(real)
        self._obs_of_a = obs_of
        self.oid, self.urows = _observer_states(table)
        init = sc.init_val.copy()
        if stream.header.kind == "bundle":
            unk = np.ones(NSLOTS, bool)
            unk[[PIPELINE, SLOTS.index("topology")]] = False
            init[unk] = UNKNOWN
        # the state in force: Python lists for the pure loop (one element read at a time), arrays
        # the compiled loop updates in place (the Python methods below accept either)
        self.inforce: Any = init.astype(np.int64) if self._kernel is not None else init.tolist()
        self.is_table: Any = np.zeros(NSLOTS, np.uint8) if self._kernel is not None else [False] * NSLOTS
        self.out = OutBuffer(n + 1024)
        self.synth = CommandBuffer()
        self.last = -1
        self.emitted_state = 0
        self._decode_cache: dict[int, Any] = {}
        self._partial_mask = sc.values.partial_mask()
        self._const_width = {k: ch.width for k, ch in sc.chains.items() if k != VB}
        # root-constant commands that write every word their slot ever has: copying one
        # gives exactly the words it left, whatever was in force (and the value it left when
        # the value in force is partly unknown exactly when that one is: _set_constants)
        self._full = np.zeros(n, bool)
        cc = np.flatnonzero(_IS_CONST[stream.op])
        if cc.size:
            wtab = np.zeros(NSLOTS + 1, np.int64)  # the last entry: no slot (index -1)
            for k, w in self._const_width.items():
                wtab[k] = w
            width = wtab[sc.slot[cc]]
            args = stream.args  # a column, then its rows: one gather each, not a 2-d fancy index
            self._full[cc] = (args[:, _CONST_DEST].take(cc) == 0) & (args[:, _CONST_COUNT].take(cc) >= width)
        self._tables: tuple | None = None

    # the per-command lookups of the Python emit loop, as lists (built when first used)
    @cached_property
    def _obs_of(self) -> list[int]:
        return self._obs_of_a.tolist()

    @cached_property
    def _op(self) -> list[int]:
        return self.s.op.tolist()

    @cached_property
    def _is_state(self) -> list[bool]:
        return (self.cats == int(Cat.STATE)).tolist()

    @cached_property
    def _slot(self) -> list[int]:
        return self.sc.slot.tolist()

    @cached_property
    def _cval(self) -> list[int]:
        return self.sc.cval.tolist()

    @cached_property
    def _oid(self) -> list[int]:
        return self.oid.tolist()

    @cached_property
    def _full_l(self) -> list[bool]:
        return self._full.tolist()

    def _kernel_tables(self) -> tuple:
        """The arrays ``drawopt._schedule.emit_run`` reads (built once)."""
        if self._tables is None:
            k = self._kernel
            fl = np.zeros(MAX_OPCODE + 1, np.uint8)  # per opcode, then one lookup
            fl[list(_CONST_OPS)] |= k.F_CONST
            fl[list(_TABLE_OPS)] |= k.F_TABLE
            fl[_DX] |= k.F_DRAWX
            fl[_OPAQUE] |= k.F_OPAQUE
            fl[[c for c, sp in BY_CODE.items() if sp.cat == Cat.STATE]] |= k.F_STATE
            flags = fl[self.s.op]
            c64 = np.ascontiguousarray
            self._tables = (c64(self._obs_of_a, np.int64), flags, c64(self.sc.slot, np.int64),
                            c64(self.sc.cval, np.int64), self._full.astype(np.uint8), c64(self.oid, np.int64),
                            c64(self.urows, np.int32), c64(self.sc.setter, np.int32),
                            self._partial_mask.astype(np.uint8))
        return self._tables

    # ------------------------------------------------------------ public API
    def mark(self) -> tuple:
        """A snapshot to :meth:`rollback` to."""
        return (len(self.out), len(self.synth), self.inforce.copy(), self.is_table.copy(), self.last,
                self.emitted_state)

    def rollback(self, m: tuple) -> None:
        """Forget everything emitted since :meth:`mark` returned ``m``."""
        nout, nsyn, inforce, is_table, last, emitted = m
        self.out.truncate(nout)
        cb = self.synth
        for lst in (cb.op, cb.args, cb.var, cb.flags, cb.line):
            del lst[nsyn:]
        self.inforce[:] = inforce  # in place: the compiled loop holds these arrays
        self.is_table[:] = is_table
        self.last, self.emitted_state = last, emitted

    def emit_all(self, cmds: np.ndarray | list[int]) -> None:
        """:meth:`emit` every input command of ``cmds`` in order (each with its own arguments).

        Runs in ``drawopt._schedule.emit_run`` when it is built; :meth:`_emit_all_py` is
        its pure-Python twin. Raises :class:`CannotRestate` as :meth:`emit` does (what
        was emitted before the failing observer stays emitted).
        """
        if self._kernel is None:
            self._emit_all_py(cmds)
            return
        err = self._kernel.emit_run(self, np.asarray(cmds, np.int64), self._kernel_tables(), self.inforce,
                                    self.is_table, _KERNEL_LAYOUT)
        if err is not None:
            code, k, v = err
            raise CannotRestate(_cannot_message(code, k, v))

    def _emit_all_py(self, cmds: np.ndarray | list[int]) -> None:
        """Pure-Python twin of ``drawopt._schedule.emit_run``."""
        for c in np.asarray(cmds, np.int64).tolist():
            self.emit(c)

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
            self.inforce[:] = [UNKNOWN] * NSLOTS
            self.is_table[:] = [False] * NSLOTS
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
        idx = self.out.array()
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
                raise CannotRestate(_cannot_message(1, k, v))
            reset = self._set(o, k, v)
            if reset:  # the change lost later slots: look again at what is needed after k
                inforce = self.inforce
                need = need[:i] + [x for x in range(k + 1, NSLOTS) if row[x] != MASKED and row[x] != inforce[x]]
        self.last = sid

    def _set(self, o: int, k: int, v: int) -> bool:
        """Make slot ``k`` hold value ``v``; True if that reset other slots."""
        src = int(self.sc.setter[o, k])
        if src < 0:
            raise CannotRestate(_cannot_message(2, k, v))
        op = self._op[src]
        if op in _CONST_OPS:
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
        self.out.extend(cmds)
        self.emitted_state += int(cmds.shape[0])

    def _set_constants(self, k: int, v: int, src: int) -> None:
        """Make root-constants slot ``k`` hold ``v`` (left in the input by ``src``).

        A command that writes every word leaves its words, but the value also carries
        whether its chain started from an unknown value (:meth:`_partial`): copying it
        alone is right only when the value in force is partly unknown exactly when
        ``v`` is (over an unknown value it leaves a partly unknown one).
        """
        cur = int(self.inforce[k])
        cur_partial = cur == UNKNOWN or (self._partial(cur) and not self.is_table[k])
        if self._full_l[src] and cur_partial == self._partial(v):
            self.out.append(src)  # writes every word: the result is its words (and the chain's flag)
            self.emitted_state += 1
        elif not self._replay_chain(k, v, src):
            try:
                self._write_constants(k, v, cur)
            except CannotRestate:  # (raised before anything is emitted)
                if not self._restart_chain(k, v, src):
                    raise
        self.inforce[k], self.is_table[k] = v, False

    def _restart_chain(self, k: int, v: int, src: int) -> bool:
        """Emit the input's chain of writes that leaves ``v`` in slot ``k``, preceded by the
        input command that held the slot before the chain (a descriptor table or a root
        view): after it the chain starts afresh, as in the input, whatever was in force
        (an unknown or partly unknown value, words ``v`` leaves undefined). False when
        ``v`` is partly unknown, or its chain followed a reset (no such command), or is
        longer than 64 commands."""
        ch = self.sc.chains.get(k)
        if ch is None or self._partial(v):
            return False
        p = int(np.searchsorted(ch.cmds, src))
        if p >= ch.cmds.shape[0] or ch.cmds[p] != src:
            return False
        i = p
        while i > 0 and not ch.start[i] and p - i < 64:
            i -= 1
        if not ch.start[i]:
            return False
        w = int(self.sc.prev[ch.cmds[i]])
        if w < 0 or self._slot[w] != k or self._op[w] in _CONST_OPS:
            return False
        self.out.append(w)
        self.emitted_state += 1
        self._effect_of_copy(w)
        self._copy_run(ch.cmds[i:p + 1])
        return True

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
        slot_c, buf_c, off_c, stride_c = _VB_COLS
        a = self.s.args
        s_entry = (int(a[src, slot_c]), self.s.decls[int(a[src, buf_c])].name, int(a[src, off_c]),
                   int(a[src, stride_c]))
        for slot in sorted(wmap):
            e = wmap[slot]
            if hmap.get(slot) == e:
                continue
            if e == s_entry:
                self.out.append(src)
            else:
                self._append_new(_VB_OP, [e[0], self.s.decls.index[e[1]], e[2], e[3]], [])
            self.emitted_state += 1


def _cannot_message(code: int, k: int, v: int) -> str:
    """The :class:`CannotRestate` message for an error code of ``drawopt._schedule.emit_run``."""
    if code == 1:
        return f"{SLOTS[k]} is {'undefined' if v == UNDEFINED else 'unknown'} there"
    return f"{SLOTS[k]}: no command sets it"


def _observer_states(table: StateTable) -> tuple[np.ndarray, np.ndarray]:
    """``(oid, urows)``: a state id for every observer of ``table.scan`` and each id's
    normalised row. Equal ids have equal rows (the restater skips an observer whose id is
    the last one re-created); draws and dispatches reuse the table's state ids and rows,
    Opaque commands and the end of a bundle get one id each."""
    sc = table.scan
    assert sc is not None
    nobs = sc.obs.shape[0]
    kind = sc.obs_kind
    dsel = np.flatnonzero(kind == OBS_DRAW)
    xsel = np.flatnonzero(kind == OBS_DISPATCH)
    if (table.rows.ndim != 2 or table.rows.shape[1] != NSLOTS or dsel.shape[0] != table.state.shape[0]
            or xsel.shape[0] != table.dispatch_state.shape[0]):  # pragma: no cover - not a table of this scan
        rows = np.empty((nobs, NSLOTS), np.int32)
        for lo in range(0, nobs, _CHUNK):
            sel = np.arange(lo, min(lo + _CHUNK, nobs))
            rows[sel] = sc.normalised(sel)
        oid, first = _intern(rows)
        return oid, rows[first]
    oid = np.empty(nobs, np.int64)
    oid[dsel] = table.state
    oid[xsel] = table.dispatch_state
    other = np.flatnonzero((kind != OBS_DRAW) & (kind != OBS_DISPATCH))
    base = table.rows.shape[0]
    oid[other] = base + np.arange(other.shape[0])
    urows = np.asarray(table.rows, np.int32)
    if other.size:
        urows = np.concatenate([urows, sc.normalised(other).astype(np.int32)])
    return oid, urows


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
def sort_keys(stream: Stream, table: StateTable, facts: Any = None, pure: bool | None = None,
              need: np.ndarray | None = None) -> np.ndarray:
    """Rank of every draw under the packed sort key (module docstring); ``int64[D]``, unique.

    ``need`` (bool[D]): only the draws it selects are ranked (ranks ``0 .. k-1``, ordered among
    themselves as without ``need``: values keep their rank of first appearance along the whole
    stream); every other draw's rank is its index (then ranks are unique only within either set).

    Two steps run in ``drawopt._schedule`` when it is built (``pure``: force the pure twins,
    :func:`_key_columns_py` and :func:`_stable_rank_py`).
    """
    kernel = load_cext("_schedule", pure)
    # (an extension built before these steps were compiled lacks them: the pure twins, same result)
    key_columns = getattr(kernel, "key_columns", _key_columns_py)
    stable_rank = getattr(kernel, "stable_rank", _stable_rank_py)
    facts = facts if facts is not None else draw_facts(stream, table)
    d = len(facts)
    if d == 0:
        return np.zeros(0, np.int64)
    rows = facts.nrows  # per normalised state
    ns = facts.nstate
    first_draw = np.zeros(rows.shape[0], np.int64)
    first_draw[ns[::-1]] = np.arange(d)[::-1]
    has_draw = np.zeros(rows.shape[0], bool)
    has_draw[ns] = True
    hd = np.flatnonzero(has_draw)  # the states of draws (the key orders nothing else)
    fd = first_draw[hd]
    # per pipeline (compact index of the states' pipelines): transparency class, the root
    # parameters its per-draw contract names (up to 4: the key's last columns; masked where
    # the root arguments are)
    pj, pfirst = intern_rows(facts.pipe[fd])
    upipe = facts.pipe[fd[pfirst]]
    blend = np.zeros(upipe.shape[0], np.int64)
    pcols = np.full((upipe.shape[0], 4), -1, np.int64)
    for j, p in enumerate(upipe.tolist()):
        decl = stream.decls[p] if p >= 0 else None
        if isinstance(decl, Pipeline):
            blend[j] = decl.blend != "opaque"
            cols = [ROOT0 + q for q in perdraw_params(decl) if q < NROOT][:4]
            pcols[j, :len(cols)] = cols
    # the key columns, in order: render targets, heaps, transparency, the fixed-function state,
    # vertex buffers, root arguments, index buffer, then up to 4 per-draw root parameters
    fixed = [SLOTS.index(x) for x in ("pipeline", "gfx_rootsig", "topology", "viewport", "scissor",
                                      "blend_factor", "stencil_ref", "gs_params", "vertex_buffers")]
    direct = [SLOTS.index("render_targets"), SLOTS.index("heaps"), *fixed, *range(ROOT0, ROOT0 + NROOT), IB]
    # the columns the key reads, contiguous (a column of the row matrix is a strided read of all
    # of it), as int32 (value ids and markers), transposed a block of states at a time
    u = hd.shape[0]
    sel = None if u == rows.shape[0] else hd
    cm = key_columns(rows, sel, np.asarray(direct, np.int64))
    where_col = np.full(NSLOTS, -1, np.int64)
    where_col[direct] = np.arange(len(direct))
    masked_root = np.zeros((upipe.shape[0], NROOT), bool)  # per pipeline: its per-draw root parameters
    for i in range(4):
        has = pcols[:, i] >= 0
        masked_root[np.flatnonzero(has), pcols[has, i] - ROOT0] = True

    def columns():
        yield cm[0]
        yield cm[1]
        yield blend[pj]
        for j in range(len(fixed)):
            yield cm[2 + j]
        for q in range(NROOT):
            v = cm[2 + len(fixed) + q]
            m = masked_root[pj, q]
            yield np.where(m, np.int32(MASKED), v) if m.any() else v
        yield cm[2 + len(fixed) + NROOT]
        flat = cm.reshape(-1)
        for i in range(4):
            c = pcols[pj, i]
            if not (c >= 0).any():
                yield np.full(u, MASKED, np.int32)
                continue
            pos = where_col[np.maximum(c, 0)] * u + np.arange(u)
            yield np.where(c >= 0, flat[pos], np.int32(MASKED))

    # a column constant over the states the draws have orders nothing: left out. Each other
    # column ranked by first appearance along the stream (first-seen values first), per state;
    # the ranks packed into few words (lexicographic order kept), the draw index breaks ties
    ranks = [_first_seen_rank(col, fd, d) for col in columns() if (col != col[0]).any()]
    if not ranks:
        return np.arange(d, dtype=np.int64)
    picked = None
    if need is not None:  # the states of the draws ranked: their ranks sorted, no other state's
        picked = np.flatnonzero(need)
        wanted = np.zeros(rows.shape[0], bool)
        wanted[ns[picked]] = True
        keep = wanted[hd]
        hd = hd[keep]
        ranks = [r[keep] for r in ranks]
        if not hd.size:
            return np.arange(d, dtype=np.int64)
    # the states' dense rank under their key words (equal words, equal rank), then the draws
    # by their state's rank, stably (the draw index breaks ties): the draws' lexicographic order
    words = pack_columns(ranks)
    so = lex_order(list(words.T))
    sw = words[so]
    step = np.r_[False, (sw[1:] != sw[:-1]).any(axis=1)]
    state_rank = np.zeros(rows.shape[0], np.int64)
    state_rank[hd[so]] = np.cumsum(step)
    nkeys = int(state_rank[hd[so[-1]]]) + 1
    if picked is None:
        return stable_rank(state_rank[ns], nkeys)
    out = np.arange(d, dtype=np.int64)
    out[picked] = stable_rank(state_rank[ns[picked]], nkeys)
    return out


def _key_columns_py(rows: np.ndarray, sel: np.ndarray | None, cols: np.ndarray) -> np.ndarray:
    """``rows[sel][:, cols].T`` as ``int32`` (``sel`` None: every row): the columns the sort key
    reads, contiguous (a column of the row matrix is a strided read of all of it), transposed a
    block of rows at a time. Pure twin of ``drawopt._schedule.key_columns``.

    >>> _key_columns_py(np.arange(6).reshape(3, 2), np.array([2, 0]), np.array([1])).tolist()
    [[5, 1]]
    """
    src = rows if sel is None else rows[sel]
    u = src.shape[0]
    cm = np.empty((cols.shape[0], u), np.int32)
    for lo in range(0, u, 1 << 13):
        cm[:, lo:lo + (1 << 13)] = src[lo:lo + (1 << 13), cols].T
    return cm


def _stable_rank_py(key: np.ndarray, nkeys: int) -> np.ndarray:
    """Each element's position in a stable sort of ``key`` (values in ``0 .. nkeys-1``). Pure twin
    of ``drawopt._schedule.stable_rank``.

    >>> _stable_rank_py(np.array([1, 0, 1, 0]), 2).tolist()
    [2, 0, 3, 1]
    """
    order = np.argsort(key, kind="stable")
    rank = np.empty(key.shape[0], np.int64)
    rank[order] = np.arange(key.shape[0])
    return rank


def _first_seen_rank(col: np.ndarray, at: np.ndarray | None = None, n: int | None = None) -> np.ndarray:
    """Each value replaced by the rank of its first appearance in ``col``.

    With ``at`` (distinct positions in ``0 .. n-1``), ``col[i]`` stands at position ``at[i]``
    of a sequence of length ``n`` (values of states, placed where each first occurs).
    """
    m = col.shape[0]
    if m == 0:
        return np.zeros(0, np.int64)
    if at is None or bool((at[1:] > at[:-1]).all()):
        # in sequence order already: the rank of first appearance is the interned id
        return intern_rows(col)[0]
    assert n is not None
    lo, hi = int(col.min()), int(col.max())
    if hi - lo < 4 * m + 1024:  # value ids: a lookup table instead of a sort
        v = col - lo
        first = np.full(hi - lo + 1, n, np.int64)
        np.minimum.at(first, v, at)
        present = np.flatnonzero(first < n)
        rank = np.empty(hi - lo + 1, np.int64)
        rank[present[np.argsort(first[present], kind="stable")]] = np.arange(present.shape[0])
        return rank[v]
    o = np.argsort(at, kind="stable")  # into sequence order
    _, first_i, inv = np.unique(col[o], return_index=True, return_inverse=True)
    order = np.argsort(first_i, kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    out = np.empty(m, np.int64)
    out[o] = rank[inv.reshape(-1)]
    return out


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
def check_restated(before: Stream, after: Stream, perm: np.ndarray, table: StateTable | None = None, *,
                   decode_all: bool = False, after_scan: Scan | None = None,
                   after_table: StateTable | None = None) -> str | None:
    """None if draw ``j`` of ``after`` sees the state draw ``perm[j]`` of ``before`` saw,
    and, for a bundle, ``after`` ends with the state ``before`` ends with.

    ``perm``: for every draw of ``after`` (in order), the index of the draw of
    ``before`` it is. States are compared as canonical values (names, not ids),
    slot by slot over the whole stream: two value ids with equal contents
    (:func:`_content_ids`: the contents of a command that sets the value, or the
    words a root-constants chain leaves) are equal without being decoded; every
    other pair is decoded and compared (``decode_all``: every pair, the reference
    the tests compare with). The first difference (slot order, then draw order) is
    reported. A bundle's final state is handed to its caller (whose draws after
    ExecuteBundle observe it), and an Opaque command may read any state, so every slot
    of those is compared too, after the draws (:func:`_fixed_observer_diff`).
    ``after_table``: the state table of ``after``, if known (else tracked, from
    ``after_scan`` if given).
    """
    ta = table if table is not None else track(before)
    assert ta.scan is not None
    if after_table is None:
        after_table = track(after, sc=after_scan)
    tb = after_table
    sb = tb.scan
    assert sb is not None
    if sb.stream is not after:
        raise ValueError("after_scan / after_table is not of after")
    if tb.state.shape[0] != perm.shape[0]:
        return f"{tb.state.shape[0]} draws after, {perm.shape[0]} expected"
    sid = ta.state[perm].astype(np.int64)
    sidb = tb.state.astype(np.int64)
    if not decode_all and _same_names(before, after):
        # per value: its content id, _NO_CONTENT where unknown; a marker stays itself (negative
        # indices reach the last three entries): equal codes other than _NO_CONTENT are equal values
        cid_a, cid_b = _content_ids(ta.scan, before, sb, after)
        map_a, map_b = _with_markers(cid_a), _with_markers(cid_b)
    else:
        # every value is decoded; the same marker (masked, undefined, unknown) on both sides is equal
        map_a = _with_markers(np.full(int(ta.scan.values.next) + 1, -1, np.int64))
        map_b = _with_markers(np.full(int(sb.values.next) + 1, -1, np.int64))
    # per draw: the slots whose values may differ (one walk over the two tables' rows)
    ask = diff_state_rows(ta.rows, sid, tb.rows, sidb, map_a, map_b, _NO_CONTENT)
    if ask.any():
        for k in np.flatnonzero(np.bitwise_or.reduce(ask) >> np.arange(NSLOTS) & 1).tolist():
            pick = np.flatnonzero((ask >> k) & 1)
            a, b = ta.rows[:, k].take(sid[pick]), tb.rows[:, k].take(sidb[pick])
            neq = _decoded_differ(a, b, ta.scan.values.decode, sb.values.decode)
            if neq.any():
                i = int(np.argmax(neq))
                j = int(pick[i])
                x, y = ta.scan.values.decode(int(a[i])), sb.values.decode(int(b[i]))
                return f"draw {j} (input draw {int(perm[j])}): {SLOTS[k]} {x!r} became {y!r}"
    held = _held_diff(ta, tb, perm)
    if held is not None:
        return held
    return _fixed_observer_diff(ta.scan, sb)


def _held_diff(ta: StateTable, tb: StateTable, perm: np.ndarray) -> str | None:
    """The first root argument a draw observes that may still hold a different set value
    (:func:`_held`) in ``tb`` than draw ``perm[j]`` in ``ta``; None when all agree. A value is held
    only across a root signature or heaps change from an unknown one: without one, nothing to do."""
    sa, sb = ta.scan, tb.scan
    assert sa is not None and sb is not None
    if not (_unknown_resets(sa) or _unknown_resets(sb)):
        return None
    da, db = np.flatnonzero(sa.obs_kind == OBS_DRAW)[perm], np.flatnonzero(sb.obs_kind == OBS_DRAW)
    roots = (*range(ROOT0, ROOT0 + NROOT), *range(CROOT0, CROOT0 + NROOT))
    # the draws that see some root argument unknown on either side
    cand = np.flatnonzero(((sa.unknown[da] | sb.unknown[db]) & sum(1 << k for k in roots)) != 0)
    da, db, ua, ub = da[cand], db[cand], sa.unknown[da[cand]], sb.unknown[db[cand]]
    rows = ta.rows[ta.state[perm[cand]]]
    for k in roots:
        ha = (((ua >> k) & 1) == 1) & (sa.setter[da, k] >= 0)
        hb = (((ub >> k) & 1) == 1) & (sb.setter[db, k] >= 0)
        for i in np.flatnonzero((ha | hb) & (rows[:, k] != MASKED)).tolist():
            x, y = _held(sa, int(da[i]), k), _held(sb, int(db[i]), k)
            if x != y:
                j = int(cand[i])
                return f"draw {j} (input draw {int(perm[j])}): {SLOTS[k]} may still hold {x!r}, became {y!r}"
    return None


def _unknown_resets(sc: Scan) -> bool:
    """Whether a root signature or heaps change from an unknown one happens in ``sc``'s stream (the
    only way a root argument is unknown and still held)."""
    ch = np.flatnonzero(sc.prev == UNKNOWN)  # few: then their slots (one pass over the commands, not four)
    return bool(isin(sc.slot[ch], (GFX_RS, CRS, HEAPS)).any())


def _fixed_observer_diff(sa: Any, sb: Any) -> str | None:
    """The first slot an observer that does not move -- an ``Opaque`` command (it may read any
    state) or a bundle's end (:data:`drawopt.analysis.state.OBS_END`) -- sees differently in scans
    ``sa`` (input) and ``sb`` (output), the k-th of each kind against the k-th, values decoded
    (and what an unknown slot may still hold, :func:`_held`); None when all agree."""
    for kind, what in ((OBS_OPAQUE, "Opaque command"), (OBS_END, "end of bundle")):
        ea, eb = np.flatnonzero(sa.obs_kind == kind), np.flatnonzero(sb.obs_kind == kind)
        if ea.shape[0] != eb.shape[0]:
            return f"{ea.shape[0]} {what} observers before, {eb.shape[0]} after"
        if not ea.shape[0]:
            continue
        na, nb = sa.normalised(ea), sb.normalised(eb)
        for j in range(ea.shape[0]):
            at = f"{what} #{j}" if kind == OBS_OPAQUE else what
            for k in range(NSLOTS):
                x, y = sa.values.decode(int(na[j, k])), sb.values.decode(int(nb[j, k]))
                if x != y:
                    return f"{at}: {SLOTS[k]} {x!r} became {y!r}"
                # an unknown slot may still hold what was set before a root signature or heaps change
                # from an unknown one made it unknown: that set is observed too (drawopt.analysis.state)
                x, y = _held(sa, int(ea[j]), k), _held(sb, int(eb[j]), k)
                if x != y:
                    return f"{at}: {SLOTS[k]} may still hold {x!r}, became {y!r}"
    return None


def _held(sc: Any, o: int, k: int) -> Any:
    """The value slot ``k`` may still hold at observer ``o`` where the scan has it unknown but set
    (decoded), else None."""
    setter = int(sc.setter[o, k])
    if not (int(sc.unknown[o]) >> k) & 1 or setter < 0:
        return None
    return sc.values.decode(int(sc.cval[setter]))


_NO_CONTENT = -10


def _with_markers(cid: np.ndarray) -> np.ndarray:
    """``cid`` (content id per value id, -1 unknown) as a lookup table over value ids and markers:
    unknown content becomes :data:`_NO_CONTENT`, and three entries are appended so that the
    markers -3, -2, -1 (negative indices) map to themselves."""
    return np.r_[np.where(cid >= 0, cid, _NO_CONTENT), UNKNOWN, MASKED, UNDEFINED]


def _decoded_differ(a: np.ndarray, b: np.ndarray, dec_a: Any, dec_b: Any) -> np.ndarray:
    """Per pair: whether value ``a[i]`` (decoded by ``dec_a``) differs from ``b[i]`` (``dec_b``).

    Each distinct pair is decoded once. A value of ``a`` usually meets one value of
    ``b``: the pair at its first occurrence stands for every pair equal to it, found
    with a lookup table; the other pairs are deduplicated by sorting.
    """
    n = a.shape[0]
    if not n:
        return np.zeros(0, bool)
    # (a table's rows are int32: the pair keys below need 64 bits)
    a, b = a.astype(np.int64, copy=False), b.astype(np.int64, copy=False)
    first = np.full(int(a.max()) + 4, -1, np.int64)  # value ids are >= -3
    first[a[::-1] + 3] = np.arange(n - 1, -1, -1)
    f = first[a + 3]
    rep = f == np.arange(n)
    same = b == b[f]
    out = np.zeros(n, bool)
    ri = np.flatnonzero(rep)
    rd = np.fromiter((dec_a(x) != dec_b(y) for x, y in zip(a[ri].tolist(), b[ri].tolist())), bool, ri.shape[0])
    out[ri] = rd
    out[same] = out[f[same]]
    other = np.flatnonzero(~same)
    if other.size:
        key = ((a[other] + 3) << 32) | (b[other] + 3)  # value ids are >= -3 and < 2**31
        uniq, inv = np.unique(key, return_inverse=True)
        neq = np.fromiter((dec_a(int(x >> 32) - 3) != dec_b(int(x & 0xFFFFFFFF) - 3) for x in uniq.tolist()),
                          bool, uniq.shape[0])
        out[other] = neq[inv.reshape(-1)]
    return out


def _same_names(a: Stream, b: Stream) -> bool:
    """Whether declaration indices and string ids mean the same in ``a`` and ``b``."""
    if a.strings is not b.strings and list(a.strings) != list(b.strings):
        return False
    return a.decls is b.decls or [d.name for d in a.decls.items] == [d.name for d in b.decls.items]


def _command_values(sc: Any, stream: Stream) -> tuple[np.ndarray, np.ndarray]:
    """``(vids, cmds)``: the value ids of scan ``sc`` left by a state command of a slot that is not
    a merge slot (root constants, vertex buffers), and one command leaving each: such a value is
    a function of the opcode, arguments and variadic tail of any command that leaves it."""
    cval = sc.cval
    nv = int(cval.max()) + 1 if cval.size else 0
    rep = np.full(nv, -1, np.int64)  # one command leaving each value
    set_cmds = np.flatnonzero(cval >= 0)
    rep[cval[set_cmds]] = set_cmds
    vids = np.flatnonzero(rep >= 0)
    c = rep[vids]
    op = stream.op[c]
    keep = ~_IS_CONST[op] & (op != _VB_OP)
    return vids[keep], c[keep]


def _command_rows(stream: Stream, cmds: np.ndarray, width: int, nvar: int) -> np.ndarray:
    """The contents of commands ``cmds``: ``(opcode, args..., 0..., tail length, tail..., 0...)``,
    ``1 + width + 1 + nvar`` columns (``width`` >= the argument columns, ``nvar`` >= every
    tail's length)."""
    nargs = int(stream.args.shape[1])
    rows = np.zeros((cmds.shape[0], 2 + width + nvar), np.int64)
    rows[:, 0] = stream.op[cmds]
    rows[:, 1:1 + nargs] = stream.args[cmds]
    lens = stream.var_len[cmds].astype(np.int64)
    rows[:, 1 + width] = lens
    if nvar and cmds.shape[0]:
        vals = stream.pool[ragged_index(stream.var_off[cmds], lens)]
        owner = np.repeat(np.arange(cmds.shape[0]), lens)
        pos = np.arange(vals.shape[0]) - np.repeat(np.cumsum(lens) - lens, lens)
        rows[owner, 2 + width + pos] = vals
    return rows


def _chain_rows(ch: Any, width: int) -> np.ndarray:
    """The contents of the values a root-constants chain leaves (``ch.rows``: value ``ch.base + j``
    is row ``j``, its words then 1 where it continues a partial update of an unknown value),
    widened to ``width`` words as the decoder reads them (undefined, or unknown where flagged),
    the flag last."""
    assert ch.rows is not None
    w = ch.rows.shape[1] - 1
    if w == width:
        return ch.rows
    unk = ch.rows[:, -1] != 0
    r = np.empty((ch.rows.shape[0], width + 1), np.int64)
    r[:, :w] = ch.rows[:, :-1]
    r[:, w:width] = np.where(unk, UNKNOWN, UNDEFINED)[:, None]
    r[:, width] = unk
    return r


def _content_ids(sa: Any, a: Stream, sb: Any, b: Stream) -> tuple[np.ndarray, np.ndarray]:
    """Per value id of scans ``sa`` (of ``a``) and ``sb`` (of ``b``): an id of its content,
    equal across the two, within a slot, only for equal contents; -1 where the content is not
    known (and in the last entry, past every value id). ``a`` and ``b`` must give declarations
    and strings the same names (:func:`_same_names`): equal contents then decode to equal values.

    A value of a slot that is not a merge slot is known by the contents of a command that
    leaves it (:func:`_command_values`, :func:`_command_rows`: opcode, arguments, variadic
    tail); a root-constants value by the words its partial-update chain leaves and whether the
    chain started from an unknown value (:func:`_chain_rows`,
    :attr:`drawopt.analysis.state.Scan.chains`, the two scans' chains of a slot widened to the
    wider). Each kind of content (the command values, each slot's chains) is interned apart,
    into ids of its own: a slot's values are only ever compared with values of that slot.
    Vertex buffers and values no command leaves get no id (they are decoded).
    """
    out = [np.full(int(sc.values.next) + 1, -1, np.int64) for sc in (sa, sb)]
    groups: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
    w = max(int(a.args.shape[1]), int(b.args.shape[1]))
    (va, ca), (vb, cb) = _command_values(sa, a), _command_values(sb, b)
    nvar = max([0] + [int(st.var_len[c].max()) for st, c in ((a, ca), (b, cb)) if c.size])
    groups.append(([va, vb], [_command_rows(a, ca, w, nvar), _command_rows(b, cb, w, nvar)]))
    for k in sorted((set(sa.chains) | set(sb.chains)) - {VB}):
        chs = [sc.chains.get(k) for sc in (sa, sb)]
        chs = [ch if ch is not None and ch.cmds.shape[0] else None for ch in chs]
        live = [ch for ch in chs if ch is not None]
        if not live:
            continue
        wk = max(ch.rows.shape[1] - 1 for ch in live)
        groups.append(([ch.base + np.arange(ch.rows.shape[0], dtype=np.int64) if ch is not None
                        else np.zeros(0, np.int64) for ch in chs],
                       [_chain_rows(ch, wk) if ch is not None else np.zeros((0, wk + 1), np.int64)
                        for ch in chs]))
    nxt = 0
    for vids, rows in groups:
        n0 = rows[0].shape[0]
        both = np.concatenate(rows) if n0 and rows[1].shape[0] else rows[0] if n0 else rows[1]
        if not both.shape[0]:
            continue
        ids = intern_rows(both)[0]
        for side, v, part in ((0, vids[0], ids[:n0]), (1, vids[1], ids[n0:])):
            if v.size:
                if int(v.max()) + 1 >= out[side].shape[0]:
                    grown = np.full(int(v.max()) + 2, -1, np.int64)
                    grown[:out[side].shape[0]] = out[side]
                    out[side] = grown
                out[side][v] = nxt + part
        nxt += int(ids.max()) + 1
    return out[0], out[1]


def _new_order(stream: Stream, table: StateTable, am: AnalysisManager, draws: np.ndarray, seg: np.ndarray,
               starts: np.ndarray, ends: np.ndarray, free: np.ndarray, multi: np.ndarray,
               report: dict[str, Any]) -> np.ndarray:
    """The new order of the draws (indices into ``draws``): the draws of each part of a free segment
    by their sort keys, list-scheduled where the part has constraints; every other draw in place.
    Sets ``report["parts"]``. (A function of its own: its draw facts, units and keys, ~150 MB at 1M
    draws, are gone before schedule tracks its output.)"""
    new = np.arange(draws.size)
    facts = draw_facts(stream, table)
    if multi.any():
        # only the segments that are not chains can reorder: the graph of their commands, their
        # units and parts (every other draw is a part of its own: a chain's draws are cuts)
        tdraw, unit, edges = _free_units(stream, am.reorder, draws, seg, starts[free], ends[free])
        tseg = seg[tdraw]
        tpart = draw_parts(unit, edges, tseg)
        new_part = np.ones(draws.size, bool)  # where a part starts
        new_part[tdraw] = np.r_[True, (tpart[1:] != tpart[:-1]) | (tseg[1:] != tseg[:-1])]
        part = np.cumsum(new_part) - 1
        sticky: list[np.ndarray] = []  # call classes, pipelines: found when a part needs them
        upart = np.zeros(int(unit.max()) + 1, np.int64)
        upart[unit] = part[tdraw]
        e_part = upart[edges[:, 0]]
        keep = e_part == upart[edges[:, 1]]
        edges, e_part = edges[keep], e_part[keep]
        eo = np.argsort(e_part, kind="stable")
        edges, e_part = edges[eo], e_part[eo]
        gunit = np.full(draws.size, -1, np.int64)  # the unit of every draw of a free segment
        gunit[tdraw] = unit
        pb = np.flatnonzero(np.diff(part)) + 1
        p_start, p_end = np.r_[0, pb], np.r_[pb, draws.size]
        big = p_end - p_start > 1
        report["parts"] = int(big.sum())
        # the sort key orders the draws of a part among themselves: only those of parts of
        # more than one draw are ranked
        rank = sort_keys(stream, table, facts, need=np.repeat(big, p_end - p_start))
        # every part in rank order, in one sort (the part, then the rank, packed into one key:
        # ranks are unique and < D): the order of a part without internal edges
        grp = np.repeat(np.arange(p_start.shape[0], dtype=np.int64), p_end - p_start)
        new = np.argsort(grp * draws.size + rank, kind="stable")
        lo_e = np.searchsorted(e_part, part[p_start], "left")
        hi_e = np.searchsorted(e_part, part[p_start], "right")
        listed = np.flatnonzero(big & (hi_e > lo_e))  # the parts with edges: list-scheduled
        for a, b, le0, he0 in zip(p_start[listed].tolist(), p_end[listed].tolist(), lo_e[listed].tolist(),
                                  hi_e[listed].tolist()):
            u = gunit[a:b]
            uniq, uloc = np.unique(u, return_inverse=True)
            le = np.searchsorted(uniq, edges[le0:he0])
            if not sticky:
                sticky = [call_classes(facts, mdi=bool(get_target(am.target).mdi)), facts.pipe]
            local = schedule_order(rank[a:b], uloc.reshape(-1), le, [g[a:b] for g in sticky])
            new[a:b] = a + local
    return new


@dataclass(frozen=True)
class SchedulePass(Pass):
    """Group draws by state within the dependency graph (see the module docstring).

    No options: the pipeline's reorder policy (``am.reorder``: ``none``, ``declared``,
    ``opaque``) says which draws on a shared target commute, and its target (``am.target``)
    whose call classes the list scheduler keeps together.
    """

    name: ClassVar[str] = "schedule"
    requires: ClassVar[tuple[str, ...]] = ("state",)  # builds its own graph (hazard edges only)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "reorder draws by state within the dependency graph; re-emit the state they need"


    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        table: StateTable = am.get("state", stream)
        draws = table.draws.astype(np.int64)
        report: dict[str, Any] = {"draws": int(draws.size), "moved": 0, "segments": 0, "kept_order": 0}
        if draws.size < 2 or am.reorder == "none":
            return PassResult.unchanged(stream, **report)
        pipe, pinned = _draw_pipes(stream, table)
        seg = draw_segments(stream, SimpleNamespace(cmd=draws, pipe=pipe, pinned=pinned))  # type: ignore[arg-type]
        bounds = np.flatnonzero(np.diff(seg)) + 1
        starts = np.r_[0, bounds]
        ends = np.r_[bounds, draws.size]
        multi = ends - starts > 1
        report["segments"] = int(multi.sum())
        free = multi & ~ordered_chains(stream, table, pipe, seg, am.reorder)[starts] if multi.any() else multi
        if multi.any() and not free.any():
            # every draw of every segment must stay after the previous one: nothing can move,
            # and no dependency graph is needed to find that out
            report["parts"] = 0
            return PassResult.unchanged(stream, **report)
        new = _new_order(stream, table, am, draws, seg, starts, ends, free, multi, report)
        moved = int(np.count_nonzero(new != np.arange(draws.size)))
        report["moved"] = moved
        if moved == 0:
            return PassResult.unchanged(stream, **report)
        out, kept = _rebuild(stream, table, draws, new, seg, starts, ends)
        if out is None:
            report["fallback"] = "the input state of some draw cannot be re-created; stream unchanged"
            return PassResult.unchanged(stream, **report)
        report["kept_order"] = kept
        tb = track(out)  # the output's state table: checked here, then the pipeline's
        problem = check_restated(stream, out, new, table, after_table=tb)
        if problem is not None:
            report["fallback"] = f"self-check failed ({problem}); stream unchanged"
            return PassResult.unchanged(stream, **report)
        report["state_commands_before"] = int(np.count_nonzero(stream.cats() == int(Cat.STATE)))
        report["state_commands_after"] = int(np.count_nonzero(out.cats() == int(Cat.STATE)))
        if out == stream:
            return PassResult.unchanged(stream, **report)
        # the self-check tracked the output: its state table for the pipeline (the post-condition
        # and the next pass ask for it), instead of a second scan of the same stream
        am.put("state", out, tb)
        return PassResult(out, True, frozenset(), report)


def _draw_pipes(stream: Stream, table: StateTable) -> tuple[np.ndarray, np.ndarray]:
    """Pipeline declaration index (-1: none) and pinned flag of every draw, as
    :func:`drawopt.analysis.mergeclass.draw_facts` computes them (without its costlier columns)."""
    ps = table.setter[:, PIPELINE].astype(np.int64)
    pipe = np.where(ps >= 0, stream.args[np.maximum(ps, 0), COL_PIPELINE], -1)
    never = np.array([isinstance(d, Pipeline) and d.never_merge for d in stream.decls.items] + [False], bool)
    cmd = table.draws.astype(np.int64)
    pinned = ((stream.flags[cmd] & FLAG_NOMERGE) != 0) | never[np.where(pipe >= 0, pipe, len(stream.decls))]
    return pipe, pinned


_RANGE_LIMIT = 16
"""More command ranges of free segments than this: one graph of the prefix that holds them all."""


def _free_units(stream: Stream, reorder: str, draws: np.ndarray, seg: np.ndarray, fa: np.ndarray,
                fb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scheduling units of the draws of the segments ``fa[i] .. fb[i]-1`` (draw indices) and the
    constraints between them (:func:`drawopt.analysis.lowerbound.segment_units`), from the hazard
    graph of their commands (:func:`drawopt.analysis.graph.hazard_graph_within`: the whole graph's
    nodes there and the same order between them, which is all the units, the parts and the list
    scheduler read; ``state`` edges are no constraints here, the restater re-creates every draw's
    state). Returns ``(tdraw, unit, edges)``: the draws (sorted), their units, the constraints.

    Segments close together share one range of commands (one graph); many ranges make one
    range of the prefix that holds them all.
    """
    lo, hi = draws[fa], draws[fb - 1] + 1  # command ranges of the segments
    gap = lo[1:] - hi[:-1]
    join = np.r_[False, gap < np.maximum(hi[:-1] - lo[:-1], hi[1:] - lo[1:])]
    first = np.flatnonzero(~join)
    last = np.r_[first[1:], fa.shape[0]] - 1
    if first.shape[0] > _RANGE_LIMIT:
        first, last = first[:1], last[-1:]
        ranges = [(0, int(hi[-1]))]
    else:
        ranges = list(zip(lo[first].tolist(), hi[last].tolist()))
    graphs = hazard_graph_within(stream, reorder, ranges)
    tdraw_l, unit_l, edge_l = [], [], []
    nu = 0
    for g, f, la in zip(graphs, first.tolist(), last.tolist()):
        idx = np.concatenate([np.arange(a, b) for a, b in zip(fa[f:la + 1].tolist(), fb[f:la + 1].tolist())])
        u, e = segment_units(g, draws[idx], seg[idx])
        tdraw_l.append(idx)
        unit_l.append(u + nu)
        edge_l.append(e + nu)
        nu += int(u.max()) + 1 if u.size else 0
    return np.concatenate(tdraw_l), np.concatenate(unit_l), np.concatenate(edge_l).reshape(-1, 2)


def _rebuild(stream: Stream, table: StateTable, draws: np.ndarray, new: np.ndarray, seg: np.ndarray,
             starts: np.ndarray, ends: np.ndarray, pure: bool | None = None) -> tuple[Stream | None, int]:
    """Emit the stream with the draws of each segment in order ``new``; returns (stream, segments kept).

    The non-state commands are emitted in input order, except that the draws of a
    segment are emitted together, in order ``new``, where its first draw was. A
    segment whose draws moved and whose state cannot be re-created in the new order
    is emitted in input order instead (``new`` is updated, the count returned); when
    even the input order fails (the restater cannot re-create some observer's state)
    the stream is None (and the count is not meaningful: a segment that did not move
    is not retried).
    """
    rs = Restater(stream, table, pure)
    cats = rs.cats
    keep_state = stream.op == _OP["CSEnableAutomaticGpuFlush"]
    nonstate = np.flatnonzero((cats != int(Cat.STATE)) | keep_state)
    is_draw = cats[nonstate] == int(Cat.DRAW)
    if not np.array_equal(nonstate[is_draw], draws):
        raise ValueError("the draws of the state table are not the draw commands of the stream")
    # the output order of the non-state commands: a non-draw keeps its position p; every draw
    # of a segment takes the position of the segment's first draw, in order ``new``
    pos = np.arange(nonstate.shape[0])
    dpos = pos[is_draw]
    seg_len = ends - starts
    first_pos = np.repeat(dpos[starts], seg_len)  # per index of ``new``: its segment's first position
    key = np.r_[pos[~is_draw], first_pos]
    sub = np.r_[np.zeros(int((~is_draw).sum()), np.int64), np.arange(draws.shape[0])]
    order = np.lexsort((sub, key))
    seq = np.r_[nonstate[~is_draw], draws[new]][order]
    # the segments whose draws moved are emitted apart (with a fallback); the rest in runs.
    # An unmoved segment that fails would fail again in the same order: no fallback needed.
    where = np.empty(order.shape[0], np.int64)
    where[order] = np.arange(order.shape[0])
    moved_idx = new != np.arange(draws.shape[0])
    seg_moved = np.add.reduceat(moved_idx, starts) > 0 if starts.size else np.zeros(0, bool)
    nnd = int((~is_draw).sum())
    kept = 0
    cur = 0
    try:
        for a, b in zip(starts[seg_moved].tolist(), ends[seg_moved].tolist()):
            p = int(where[nnd + a])
            rs.emit_all(seq[cur:p])
            m = rs.mark()
            try:
                rs.emit_all(seq[p:p + b - a])
            except CannotRestate:
                rs.rollback(m)
                kept += 1
                new[a:b] = np.arange(a, b)
                rs.emit_all(draws[a:b])
            cur = p + b - a
        rs.emit_all(seq[cur:])
        rs.finish()
    except CannotRestate:
        return None, kept
    return rs.build(), kept
