"""The state every action sees, tracked column by column with numpy.

A *column* is one piece of state (the pipeline, root parameter 2's table, word 3
of root parameter 1's constants, the index buffer, ...). For each column the
setting commands and the commands that invalidate it are *events*; the value an
action sees is that of the last event before it (a forward fill: one merge pass over
the events and the sorted actions in ``drawopt._verify``, ``searchsorted`` on the pure
path). Columns are filled when first asked for; the state hash of every action is read
from the events directly (:meth:`StateAt.hashes`). This is the validator's own tracker:
it shares no code with :mod:`drawopt.analysis.state`, so an error in the optimizer's
analyses is not repeated here.

Invalidations (D3D12 rules, and the seeds):

* the start of the list: everything is :data:`~.model.NEVER` set;
* a different graphics (compute) root signature: its root arguments are lost;
* different descriptor heaps: every descriptor table is undefined (setting the same
  heaps again changes nothing);
* ``DrawIndexedX``: the index buffer is undefined;
* ``Opaque``: every column takes an unknown value, the same in both streams.
"""

from __future__ import annotations

__all__ = ["Col", "StateAt", "track", "column_universe", "col_name", "fill_at", "distinct_ids", "OpIndex",
           "op_index", "op_indexes"]

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import IntEnum
from typing import Any

import numpy as np

from drawopt._accel import load_cext
from drawopt.ir.arrayset import intersect1d, unique
from drawopt.ir.decls import RootSig
from drawopt.ir.ops import BY_NAME, OPS, Op, shared_col
from drawopt.ir.stream import MAX_ROOT_PARAMS, MAX_VERTEX_BUFFERS, Stream, ragged_index
from drawopt.verify._hash import SEED, hash_cols, hash_cols_at
from drawopt.verify.model import HEAP_RESET, KIND_RESET, NEVER, OPQ_BASE, RS_RESET, STALE_BASE, X_RESET, Canon

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_MASK63 = np.int64(0x7FFFFFFFFFFFFFFF)

# argument columns of the setters, by name (drawopt.ir.ops; records.py reads them too)
_RC_INDEX, _RC_DEST = (shared_col(("SetGraphicsRoot32BitConstants", n), ("SetComputeRoot32BitConstants", n))
                       for n in ("index", "dest"))
_TBL_INDEX, _TBL_TABLE = (shared_col(("SetGraphicsRootDescriptorTable", n), ("SetComputeRootDescriptorTable", n))
                          for n in ("index", "table"))
RV_INDEX, RV_BUF, RV_OFF = (shared_col(("SetGraphicsRootConstantBufferView", n),
                                       ("SetGraphicsRootShaderResourceView", n)) for n in ("index", "buffer", "offset"))
"""Root parameter, buffer and byte offset of a root CBV / SRV."""
VB_SLOT, VB_BUF, VB_OFF, VB_STRIDE = (Op.IASetVertexBuffers.col(n) for n in ("slot", "buffer", "offset", "stride"))
IB_BUF, IB_FMT, IB_OFF = (Op.IASetIndexBuffer.col(n) for n in ("buffer", "format", "offset"))


class OpIndex:
    """The commands of a stream grouped by opcode (one counting sort, ``drawopt._verify.by_opcode``;
    pure: a stable argsort): :meth:`of` answers "which commands are X" without a scan each.

    >>> OpIndex(np.array([5, 1, 5, 2], np.uint16)).of(5, 2).tolist()
    [0, 2, 3]
    """

    def __init__(self, op: np.ndarray, pure: bool | None = None) -> None:
        op = np.ascontiguousarray(op, np.uint16)
        ncodes = max(_NCODES, int(op.max()) + 1 if op.size else 0)
        k = load_cext("_verify", pure)
        if k is not None:
            self.order, self.off = k.by_opcode(op, ncodes)
        else:
            self.order = np.argsort(op, kind="stable").astype(np.int64)
            self.off = np.zeros(ncodes + 1, np.int64)
            np.cumsum(np.bincount(op, minlength=ncodes), out=self.off[1:])
        self.order.flags.writeable = False   # of() hands out views of it

    def of(self, *codes: int) -> np.ndarray:
        """Ascending indices of the commands with any of the opcodes ``codes`` (read-only)."""
        n = self.off.size - 1
        parts = [self.order[self.off[c]:self.off[c + 1]] for c in codes if 0 <= c < n]
        if len(parts) == 1:
            return parts[0]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


_NCODES = max(o.code for o in OPS) + 1
_OP_INDEXES: ContextVar[dict[int, tuple[Stream, OpIndex]] | None] = ContextVar("_OP_INDEXES", default=None)


@contextmanager
def op_indexes() -> Iterator[None]:
    """While active, :func:`op_index` builds each stream's :class:`OpIndex` once (the streams
    must not change meanwhile: ``drawopt.verify.verify`` holds it for one comparison)."""
    token = _OP_INDEXES.set({})
    try:
        yield
    finally:
        _OP_INDEXES.reset(token)


def op_index(s: Stream) -> OpIndex:
    """The :class:`OpIndex` of ``s`` (kept while :func:`op_indexes` is active)."""
    cache = _OP_INDEXES.get()
    if cache is None:
        return OpIndex(s.op)
    hit = cache.get(id(s))
    if hit is None or hit[0] is not s:
        hit = cache[id(s)] = (s, OpIndex(s.op))
    return hit[1]


class Col(IntEnum):
    """Column families; a column id is ``family << 20 | key``."""

    PSO = 1
    RSG = 2
    RSC = 3
    HEAPS = 4
    TG = 5     # key: root parameter
    TC = 6
    CG = 7     # key: parameter * 64 + word
    CC = 8
    VG = 9     # key: root parameter (root CBV / SRV)
    IB = 10
    VB = 11    # key: slot
    TOPO = 12
    RTS = 13
    VP = 14
    SC = 15
    BF = 16
    SR = 17
    AF = 18


def cid_of(fam: Col, key: int = 0) -> int:
    return (int(fam) << 20) | key


def col_name(c: int) -> str:
    """Human name of column id ``c`` (for messages)."""
    fam, key = Col(c >> 20), c & 0xFFFFF
    return {
        Col.PSO: "pipeline", Col.RSG: "graphics root signature", Col.RSC: "compute root signature",
        Col.HEAPS: "descriptor heaps", Col.TG: f"descriptor table {key}", Col.TC: f"compute descriptor table {key}",
        Col.CG: f"root constant {key // 64}[{key % 64}]", Col.CC: f"compute root constant {key // 64}[{key % 64}]",
        Col.VG: f"root view {key}", Col.IB: "index buffer", Col.VB: f"vertex buffer {key}",
        Col.TOPO: "primitive topology", Col.RTS: "render targets", Col.VP: "viewport", Col.SC: "scissor",
        Col.BF: "blend factor", Col.SR: "stencil ref", Col.AF: "CSEnableAutomaticGpuFlush",
    }[fam]


MAX_PARAM = MAX_ROOT_PARAMS
"""Root parameter indices are below 16 (``Stream.check`` rejects others)."""
MAX_VB = MAX_VERTEX_BUFFERS
"""Vertex-buffer slots are below 32 (``Stream.check`` rejects others)."""


def _key(idx: np.ndarray, fam: Col) -> np.ndarray:
    """The column keys of slot or parameter indices ``idx`` of family ``fam`` (the indices themselves).

    A stream the reader has not checked may hold others: they are refused rather than folded
    into one column (two different slots must never compare as one).
    """
    limit = MAX_VB if fam == Col.VB else MAX_PARAM
    if idx.size and (int(idx.max()) >= limit or int(idx.min()) < 0):
        what = "vertex-buffer slot" if fam == Col.VB else "root parameter index"
        raise ValueError(f"{what} outside 0..{limit - 1}: the stream was not checked (Stream.check)")
    return idx


_SIMPLE = {  # family -> (op name, the argument that is the value; None: the hash of all of them)
    Col.PSO: ("SetPipelineState", "pipeline"),
    Col.RSG: ("SetGraphicsRootSignature", "rootsig"),
    Col.RSC: ("SetComputeRootSignature", "rootsig"),
    Col.TOPO: ("IASetPrimitiveTopology", "topology"),
    Col.VP: ("RSSetViewports", None),
    Col.SC: ("RSSetScissorRects", None),
    Col.BF: ("OMSetBlendFactor", None),
    Col.SR: ("OMSetStencilRef", "ref"),
    Col.AF: ("CSEnableAutomaticGpuFlush", "enable"),
}
_REF_FAMILIES = (Col.PSO, Col.RSG, Col.RSC)


def _const_words(s: Stream, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(commands, command of each word, key of each word)`` of the ``name`` root-constant commands."""
    idx, base, cnt = _const_ranges(s, name)
    cmd = np.repeat(idx, cnt)
    # word k of a command: base + k, as base - (words before the command) + (word number)
    key = np.repeat(base - (np.cumsum(cnt) - cnt), cnt) + np.arange(cmd.size, dtype=np.int64)
    return idx, cmd, key


def _const_ranges(s: Stream, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(commands, key of the first word, word count)`` of the ``name`` root-constant commands."""
    idx = op_index(s).of(_OP[name])
    base = _key(s.args[idx, _RC_INDEX], Col.CG) * 64
    base += s.args[idx, _RC_DEST]
    return idx, base, s.var_len[idx].astype(np.int64)


def _by_key(idx: np.ndarray, key: np.ndarray, val: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(key, idx, val)`` of the events of each key, keys ascending, each key's events in
    their order (every family's commands come in stream order)."""
    if not idx.size:
        return []
    order = np.argsort(key.astype(np.uint16) if 0 <= int(key.min()) and int(key.max()) < 1 << 16 else key,
                       kind="stable")
    idx, key, val = idx[order], key[order], val[order]
    bounds = np.flatnonzero(np.diff(key)) + 1
    return [(int(key[a]), idx[a:b], val[a:b]) for a, b in zip(np.r_[0, bounds], np.r_[bounds, key.size])]


def _const_columns(s: Stream, name: str, pure: bool | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(key, commands, values)`` of every root-constant word the ``name`` commands set, keys
    ascending, commands in stream order (compiled: ``drawopt._verify.const_events``, one
    counting sort; pure: the words listed, then sorted by key)."""
    idx, base, cnt = _const_ranges(s, name)
    k = load_cext("_verify", pure)
    if k is not None and idx.size and int(base.min()) >= 0 and int((base + cnt).max()) < 1 << 16:
        off, ev_idx, ev_val = k.const_events(idx.astype(np.int64), np.ascontiguousarray(base, np.int64), cnt,
                                             np.ascontiguousarray(s.var_off[idx], np.int64),
                                             np.ascontiguousarray(s.pool, np.int64))
        return [(key, ev_idx[off[key]:off[key + 1]], ev_val[off[key]:off[key + 1]])
                for key in np.flatnonzero(np.diff(off)).tolist()]
    _, cmd, key = _const_words(s, name)
    val = s.pool[ragged_index(s.var_off[idx], s.var_len[idx])] if idx.size else np.zeros(0, np.int64)
    return _by_key(cmd, key, val)


def _distinct(keys: np.ndarray) -> list[int]:
    """The distinct values of the small non-negative integers ``keys``, ascending."""
    return distinct_ids(keys).tolist()


def distinct_ids(*keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of the integers ``keys`` (concatenated): one ``bincount`` where they are
    small non-negative ids (resource ids, slots), else a sort.

    >>> distinct_ids(np.array([4, 1, 4]), np.array([0, 1])).tolist()
    [0, 1, 4]
    """
    x = np.concatenate(keys) if len(keys) != 1 else keys[0]
    if x.size and 0 <= int(x.min()) and int(x.max()) < 1 << 24:
        return np.flatnonzero(np.bincount(x))
    return unique(x)


def _covered(lo: np.ndarray, n: np.ndarray) -> list[int]:
    """The integers in any of the ranges ``lo[i] .. lo[i] + n[i] - 1``, ascending.

    >>> _covered(np.array([3, 0, 4]), np.array([2, 1, 0]))
    [0, 3, 4]
    """
    lo, n = lo[n > 0], n[n > 0]
    if not lo.size:
        return []
    if int(lo.min()) < 0 or int((lo + n).max()) > 1 << 24:
        return unique(np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))).tolist()
    size = int((lo + n).max()) + 1   # range starts minus range ends (bincount: np.add.at is slow)
    d = np.bincount(lo, minlength=size) - np.bincount(lo + n, minlength=size)
    return np.flatnonzero(np.cumsum(d) > 0).tolist()


def column_universe(streams: list[Stream]) -> list[int]:
    """Column ids used by any of ``streams`` (the fixed families plus keyed ones seen)."""
    cols = {cid_of(f) for f in (Col.PSO, Col.RSG, Col.RSC, Col.HEAPS, Col.IB, Col.TOPO, Col.RTS, Col.VP,
                                Col.SC, Col.BF, Col.SR, Col.AF)}
    for s in streams:
        for fam, op, col in ((Col.TG, "SetGraphicsRootDescriptorTable", _TBL_INDEX),
                             (Col.TC, "SetComputeRootDescriptorTable", _TBL_INDEX),
                             (Col.VB, "IASetVertexBuffers", VB_SLOT)):
            cols |= {cid_of(fam, k) for k in _distinct(_key(s.args[op_index(s).of(_OP[op]), col], fam))}
        m = op_index(s).of(_OP["SetGraphicsRootConstantBufferView"], _OP["SetGraphicsRootShaderResourceView"])
        cols |= {cid_of(Col.VG, k) for k in _distinct(_key(s.args[m, RV_INDEX], Col.VG))}
        for fam, op in ((Col.CG, "SetGraphicsRoot32BitConstants"), (Col.CC, "SetComputeRoot32BitConstants")):
            _, base, cnt = _const_ranges(s, op)
            cols |= {cid_of(fam, k) for k in _covered(base, cnt)}
    if any(s.header.kind == "bundle" for s in streams):
        cols |= _inherited_root_columns(streams, cols)
    return sorted(cols)


def _inherited_root_columns(streams: list[Stream], cols: set[int]) -> set[int]:
    """Root-argument columns a bundle inherits from its caller without setting them.

    A column no stream sets is "never set" in both, which in a list is undefined either way;
    but a bundle inherits it, and a root-signature change, or setting its parameter as another
    kind, makes the caller's value undefined: in a draw of the bundle or at its end that is a
    difference, so those columns must be tracked too. They are every root argument of every
    declared root signature (tables, constant words 0..N-1, views; both sides), and all 64
    constant words of a parameter set as a table or view (the caller's root signature, which
    the bundle inherits, need not be one the stream declares).
    """
    out: set[int] = set()
    for s in streams:
        for d in s.decls:
            if not isinstance(d, RootSig):
                continue
            for q, prm in enumerate(d.params):
                if prm.kind == "table":
                    out |= {cid_of(Col.TG, q), cid_of(Col.TC, q)}
                elif prm.kind == "constants":
                    out |= {cid_of(f, q * 64 + w) for f in (Col.CG, Col.CC) for w in range(prm.count)}
                else:
                    out.add(cid_of(Col.VG, q))
    for c in cols:
        fam, q = Col(c >> 20), c & 0xFFFFF
        if fam in (Col.TG, Col.TC, Col.VG):
            cf = Col.CC if fam == Col.TC else Col.CG
            out |= {cid_of(cf, q * 64 + w) for w in range(64)}
    return out


class StateAt:
    """State seen at the query commands.

    ``cols``: column ids; :meth:`value` is the raw value of a column at each query
    (non-negative, or a sentinel of :mod:`.model`), :meth:`source` the command that
    gave it (-1 if none). ``col`` maps a column id to its position. Each column is
    filled in from its events when first asked for (most consumers read a few
    columns, and the source of fewer), then kept until :meth:`release`, which may drop
    the events too (where ``rebuild`` can give them again: :func:`track`'s StateAt).
    """

    def __init__(self, queries: np.ndarray, cols: list[int], events: dict[int, tuple[np.ndarray, np.ndarray]],
                 before: dict[int, int] | None = None,
                 rebuild: Callable[[], dict[int, tuple[np.ndarray, np.ndarray]]] | None = None) -> None:
        self.queries, self.cols = queries, cols
        self.col = {c: j for j, c in enumerate(cols)}
        self._events: dict[int, tuple[np.ndarray, np.ndarray]] | None = events
        self._rebuild = rebuild
        """Gives the events again (the same ones) once :meth:`release` dropped them; None: they are kept."""
        self._before = before or {}
        self._val: dict[int, np.ndarray] = {}
        self._src: dict[int, np.ndarray] = {}
        self._at: dict[int, np.ndarray] = {}

    @property
    def _ev(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The columns' events (built again where :meth:`release` dropped them)."""
        if self._events is None:
            assert self._rebuild is not None
            self._events = self._rebuild()
        return self._events

    def value(self, c: int) -> np.ndarray:
        v = self._val.get(c)
        if v is None:
            if c not in self.col:
                v = self._val[c] = np.full(self.queries.size, NEVER, np.int64)   # never set
                return v
            ei, ev = self._ev[c]
            v = self._val[c] = fill_at(ei, ev, self.queries, self._before.get(c, NEVER))
        return v

    def source(self, c: int) -> np.ndarray:
        w = self._src.get(c)
        if w is None:
            if c not in self.col:
                w = self._src[c] = np.full(self.queries.size, -1, np.int64)
                return w
            ei = self._ev[c][0]
            w = self._src[c] = fill_at(ei, ei, self.queries, -1)
        return w


    def value_at(self, c: int, idx: np.ndarray) -> np.ndarray:
        """``value(c)[idx]``, without filling the column for every query when it is not yet
        (a search among the column's events for each of ``idx``)."""
        v = self._val.get(c)
        if v is not None:
            return v[idx]
        if c not in self.col:
            return np.full(idx.size, NEVER, np.int64)
        ei, ev = self._ev[c]
        return fill_at(ei, ev, self.queries[idx], self._before.get(c, NEVER))

    def source_at(self, c: int, idx: np.ndarray) -> np.ndarray:
        """``source(c)[idx]``, without filling the column (see :meth:`value_at`)."""
        w = self._src.get(c)
        if w is not None:
            return w[idx]
        if c not in self.col:
            return np.full(idx.size, -1, np.int64)
        ei = self._ev[c][0]
        return fill_at(ei, ei, self.queries[idx], -1)

    def events(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """``(commands, values)`` of column ``c``'s events, in stream order (none: empty)."""
        if c not in self.col:
            z = np.zeros(0, np.int64)
            return z, z
        return self._ev[c]

    def event_index(self, c: int) -> np.ndarray:
        """Per query: the position in :meth:`events` of the event that gave column ``c`` its
        value (-1: none), to read per-event facts at the queries (one merge, no gather from
        the stream's arguments)."""
        w = self._at.get(c)
        if w is None:
            ei = self.events(c)[0]
            w = self._at[c] = fill_at(ei, np.arange(ei.size, dtype=np.int64), self.queries, -1)
        return w

    def of_setter(self, c: int, per_cmd: Callable[[np.ndarray], np.ndarray], other: int | None = None) -> np.ndarray:
        """Per query: ``per_cmd(setter)`` where column ``c`` holds a value (>= 0), the command
        that set it being ``setter``; elsewhere the raw value (``other``: that number). Read
        from the column's events (no column filled): ``per_cmd`` is asked about its events only.

        ``np.where(value(c) >= 0, per_cmd(source(c)), value(c))``, for a column that holds
        nothing before its first event. The per-event values are read at the queries through
        :meth:`event_index` (one merge per column, however many setters' facts are read)."""
        before = NEVER if other is None else other
        if c not in self.col:
            return np.full(self.queries.size, before, np.int64)
        ei, ev = self._ev[c]
        held = ev >= 0
        mapped = np.empty(ei.size + 1, np.int64)   # [0]: before the first event
        mapped[0] = before
        mapped[1:] = ev if other is None else other
        mapped[1:][held] = per_cmd(ei[held])
        return mapped[self.event_index(c) + 1]

    def hashes(self, groups: list[tuple[int, list[int], np.ndarray]], override: dict[int, np.ndarray],
               fold: tuple[int, int, int], pure: bool | None = None) -> np.ndarray:
        """Per query: for the queries ``sel`` of each group ``(pcid, cols, sel)``, the hash of
        ``pcid`` and, for each column of ``cols``, its id and its value there (``override[c]``
        where given; values strictly between ``fold[0]`` and ``fold[1]`` read as ``fold[2]``);
        0 for queries in no group. ``hash_cols_at`` of those parts, computed in one pass over
        the columns' events by ``drawopt._verify.state_hashes`` (no column is filled)."""
        n = self.queries.size
        out = np.zeros(n, np.int64)
        k = load_cext("_verify", pure)
        q = self.queries
        if k is None or not (q.size < 2 or bool((q[1:] >= q[:-1]).all())):
            for pcid, cols, sel in groups:
                parts: list[np.ndarray | int] = [pcid]
                for c in cols:
                    parts += [c, override[c] if c in override else self.value(c)]
                out[sel] = hash_cols_at(parts, sel, fold)
            return out
        C = len(self.cols)
        z = np.zeros(0, np.int64)
        ats = [self._ev[c][0] for c in self.cols] + [z]   # the last: a column never set
        vals = [self._ev[c][1] for c in self.cols] + [z]
        col_off = np.zeros(C + 2, np.int64)
        np.cumsum([a.size for a in ats], out=col_off[1:])
        before = np.array([self._before.get(c, NEVER) for c in self.cols] + [NEVER], np.int64)
        ov_cols = [c for c in override if c in self.col]
        ov = np.stack([override[c] for c in ov_cols]) if ov_cols else np.zeros((0, n), np.int64)
        ov_row = np.full(C + 1, -1, np.int64)
        for r, c in enumerate(ov_cols):
            ov_row[self.col[c]] = r
        grp = np.full(n, -1, np.int64)
        g_pos: list[int] = []
        g_cid: list[int] = []
        g_off = [0]
        for g, (_, cols, sel) in enumerate(groups):
            grp[sel] = g
            g_pos += [self.col.get(c, C) for c in cols]
            g_cid += cols
            g_off.append(len(g_pos))
        g = (np.array(g_off, np.int64), np.array(g_pos, np.int64), np.array(g_cid, np.int64),
             np.array([x[0] for x in groups], np.int64))
        h = k.state_hashes(np.concatenate(ats), np.concatenate(vals), col_off, before,
                           np.ascontiguousarray(q, np.int64), grp, *g, ov_row, np.ascontiguousarray(ov, np.int64),
                           *fold, SEED)
        return h.view(np.int64)

    def release(self, events: bool = False) -> None:
        """Drop the filled columns (they are filled again if asked for); ``events``: the columns'
        events too, where they can be built again (:func:`track`'s can: the same events, by the
        same tracking, when a column is next asked for)."""
        self._val.clear()
        self._src.clear()
        self._at.clear()
        if events and self._rebuild is not None:
            self._events = None


def fill_at(ev_at: np.ndarray, ev_val: np.ndarray, q: np.ndarray, before: int, pure: bool | None = None) -> np.ndarray:
    """The value of the last event before each query: ``ev_val[j]`` of the last ``ev_at[j] < q[i]``
    (``ev_at`` ascending), ``before`` where there is none.

    One merge pass in ``drawopt._verify.fill_at`` when ``q`` ascends too (the queries of
    :func:`track` do); else, or on the pure path, ``np.searchsorted``.

    >>> fill_at(np.array([2, 5, 5, 9]), np.array([10, 20, 21, 30]), np.array([0, 3, 5, 6, 10]), -1).tolist()
    [-1, 10, 10, 21, 30]
    """
    k = load_cext("_verify", pure)
    if k is not None and (q.size < 2 or bool((q[1:] >= q[:-1]).all())):
        return k.fill_at(np.ascontiguousarray(ev_at, np.int64), np.ascontiguousarray(ev_val, np.int64),
                         np.ascontiguousarray(q, np.int64), before)
    pos = np.searchsorted(ev_at, q, side="left") - 1
    v = ev_val[np.maximum(pos, 0)] if ev_val.size else np.zeros(pos.size, np.int64)
    return np.where(pos >= 0, v, before)


def _changes(ev_idx: np.ndarray, ev_val: np.ndarray, setters: np.ndarray, from_never: bool = True) -> np.ndarray:
    """Positions of ``setters`` whose value differs from the column's previous event.

    ``from_never``: whether a first value (after "never set") counts as a change; in a
    bundle it does not, since the caller's value, which the bundle inherits, may be the same.
    A value after an Opaque command's unknown one is no known change either (it may be the
    same): :func:`_stale_after_unknown` says what it does to the values set since.
    """
    order = np.argsort(ev_idx, kind="stable")
    i, v = ev_idx[order], ev_val[order]
    prev = np.r_[NEVER, v[:-1]]
    ch = i[(v != prev) & (from_never | (prev != NEVER)) & (prev > OPQ_BASE)]
    return intersect1d(ch, setters)


def _var_hash(s: Stream, idx: np.ndarray, cmap: np.ndarray, width: int) -> np.ndarray:
    lens = s.var_len[idx].astype(np.int64)
    m = np.full((idx.size, width), -1, np.int64)
    for k in range(width):
        has = lens > k
        m[has, k] = cmap[s.pool[s.var_off[idx[has]] + k]]
    return hash_cols([lens, *[m[:, k] for k in range(width)]], idx.size) & _MASK63


def track(s: Stream, canon: Canon, cmap: np.ndarray, universe: list[int], queries: np.ndarray) -> StateAt:
    """State columns ``universe`` of ``s`` at the commands ``queries`` (sorted indices)."""
    op, args, ops = s.op, s.args, op_index(s)
    opq = ops.of(_OP["Opaque"])
    opq_val = OPQ_BASE - np.arange(opq.size, dtype=np.int64)
    header_af = 1 if s.header.auto_gpu_flush else 0

    setters: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def put(c: int, idx: np.ndarray, val: np.ndarray) -> None:
        setters[c] = (idx.astype(np.int64), np.asarray(val, np.int64))

    for fam, (name, arg) in _SIMPLE.items():
        idx = ops.of(_OP[name])
        if arg is not None:
            val = args[idx, BY_NAME[name].col(arg)]
            if fam in _REF_FAMILIES:
                val = cmap[val]
        else:
            val = hash_cols([args[idx, j] for j in range(len(BY_NAME[name].args))], idx.size) & _MASK63
        put(cid_of(fam), idx, val)
    idx = ops.of(_OP["SetDescriptorHeaps"])
    put(cid_of(Col.HEAPS), idx, _heaps_value(s, idx, cmap))
    idx = ops.of(_OP["OMSetRenderTargets"])
    put(cid_of(Col.RTS), idx, _var_hash(s, idx, cmap, 9))
    idx = ops.of(_OP["IASetIndexBuffer"])
    put(cid_of(Col.IB), idx,
        hash_cols([cmap[args[idx, IB_BUF]], args[idx, IB_FMT], args[idx, IB_OFF]], idx.size) & _MASK63)

    keyed: list[tuple[Col, np.ndarray, np.ndarray, np.ndarray]] = []
    for fam, name in ((Col.TG, "SetGraphicsRootDescriptorTable"), (Col.TC, "SetComputeRootDescriptorTable")):
        idx = ops.of(_OP[name])
        href = args[idx, _TBL_TABLE]
        keyed.append((fam, idx, _key(args[idx, _TBL_INDEX], fam), (cmap[href >> 32] << 32) | (href & 0xFFFFFFFF)))
    idx = ops.of(_OP["SetGraphicsRootConstantBufferView"], _OP["SetGraphicsRootShaderResourceView"])
    keyed.append((Col.VG, idx, _key(args[idx, RV_INDEX], Col.VG),
                  hash_cols([op[idx], cmap[args[idx, RV_BUF]], args[idx, RV_OFF]], idx.size) & _MASK63))
    idx = ops.of(_OP["IASetVertexBuffers"])
    keyed.append((Col.VB, idx, _key(args[idx, VB_SLOT], Col.VB),
                  hash_cols([cmap[args[idx, VB_BUF]], args[idx, VB_OFF], args[idx, VB_STRIDE]], idx.size) & _MASK63))
    for fam, idx, key, val in keyed:
        for k, i, v in _by_key(idx, key, val):
            put(cid_of(fam, k), i, v)
    for fam, name in ((Col.CG, "SetGraphicsRoot32BitConstants"), (Col.CC, "SetComputeRoot32BitConstants")):
        for k, i, v in _const_columns(s, name):
            put(cid_of(fam, k), i, v)

    # invalidations
    resets: dict[int, list[tuple[np.ndarray, int]]] = {}

    def reset_family(fams: tuple[Col, ...], at: np.ndarray, code: int) -> None:
        for c in universe:
            if Col(c >> 20) in fams:
                resets.setdefault(c, []).append((at, code))

    in_list = s.header.kind == "list"
    for fam, fams in ((Col.RSG, (Col.TG, Col.CG, Col.VG)), (Col.RSC, (Col.TC, Col.CC))):
        si, sv = setters[cid_of(fam)]
        ch = _changes(np.r_[si, opq], np.r_[sv, opq_val], si, in_list)
        reset_family(fams, ch, RS_RESET)
    si, sv = setters[cid_of(Col.HEAPS)]
    reset_family((Col.TG, Col.TC), _changes(np.r_[si, opq], np.r_[sv, opq_val], si, in_list), HEAP_RESET)
    resets.setdefault(cid_of(Col.IB), []).append((ops.of(_OP["DrawIndexedX"]), X_RESET))
    # a root argument holds one kind: setting it as a table, constants or a view replaces the others
    for tf, cf, vf in ((Col.TG, Col.CG, Col.VG), (Col.TC, Col.CC, None)):
        byparam: dict[int, dict[Col, list[int]]] = {}
        for c in universe:
            f = Col(c >> 20)
            if f in (tf, cf, vf):
                q = (c & 0xFFFFF) // 64 if f == cf else c & 0xFFFFF
                byparam.setdefault(q, {}).setdefault(f, []).append(c)
        for fams in byparam.values():
            if len(fams) < 2:   # set as one kind only: nothing to replace
                continue
            for f, cols in fams.items():
                set_cols = [c for c in cols if c in setters]
                if len(set_cols) == 1:   # (a column's setters: ascending, distinct)
                    setters_of = setters[set_cols[0]][0]
                else:
                    mark = np.zeros(len(s), bool)
                    for c in set_cols:
                        mark[setters[c][0]] = True
                    setters_of = np.flatnonzero(mark)
                for g, others in fams.items():
                    if g != f and setters_of.size:
                        for c in others:
                            resets.setdefault(c, []).append((setters_of, KIND_RESET))
    # (after the other invalidations: a binding reset since it was set is no longer held)
    _stale_after_unknown(setters, universe, opq, canon, resets, not in_list)

    events: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    z = np.zeros(0, np.int64)
    for c in universe:
        ei, ev = setters.get(c, (z, z))
        parts_i, parts_v = [ei, opq], [ev, opq_val]
        for at, code in resets.get(c, ()):
            parts_i.append(at)
            parts_v.append(np.full(at.size, code, np.int64))
        events[c] = _merge_events([(i, v) for i, v in zip(parts_i, parts_v) if i.size])

    def rebuild() -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The events again: the tracking is a function of its arguments (the stale values' ids
        are the canon's, given the first time)."""
        return track(s, canon, cmap, universe, queries)._ev

    return StateAt(queries, list(universe), events, {cid_of(Col.AF): header_af}, rebuild)


ROOT_ARG_SIGNATURE = {Col.TG: Col.RSG, Col.CG: Col.RSG, Col.VG: Col.RSG, Col.TC: Col.RSC, Col.CC: Col.RSC}
"""The root-argument families (tables, constant words, root views) and the root signature column
whose layout holds them."""


def absent_from(rs: RootSig, c: int) -> bool:
    """Whether root-argument column ``c`` (a table, root view or constant word) names nothing in
    root signature ``rs``'s layout: no such parameter, a parameter of another kind, or a word past
    its constants' count.

    >>> from drawopt.ir.decls import RootParam
    >>> rs = RootSig("r", (RootParam("constants", count=1), RootParam("table", ranges=(("srv", 1),))))
    >>> [absent_from(rs, cid_of(Col.CC, w)) for w in (0, 1, 62)], absent_from(rs, cid_of(Col.TC, 1))
    ([False, True, True], False)
    >>> absent_from(rs, cid_of(Col.TC, 0)), absent_from(rs, cid_of(Col.VG, 1)), absent_from(rs, cid_of(Col.CG, 64))
    (True, True, True)
    """
    fam, key = Col(c >> 20), c & 0xFFFFF
    q = key // 64 if fam in (Col.CG, Col.CC) else key
    if q >= len(rs.params):
        return True
    p = rs.params[q]
    if fam in (Col.CG, Col.CC):
        return p.kind != "constants" or key % 64 >= p.count
    if fam in (Col.TG, Col.TC):
        return p.kind != "table"
    return p.kind not in ("cbv", "srv", "uav")


def _stale_after_unknown(setters: dict[int, tuple[np.ndarray, np.ndarray]], universe: list[int], opq: np.ndarray,
                         canon: Canon, resets: dict[int, list[tuple[np.ndarray, Any]]], bundle: bool) -> None:
    """Root arguments set before a root signature (tables: descriptor heaps) whose previous value
    is unknown: a bundle's first root signature (the caller's is inherited), or the first root
    signature or heaps after an Opaque command (heaps in a list only: a bundle's heaps are always
    the caller's, D3D12 has a bundle set no others, so they keep its tables there).

    Such a set is no known change (``_changes``): it keeps the bindings if it is the same as the
    unknown one, and makes them all stale if not, those set since the unknown point too (D3D12: a
    bundle that changes inherited bindings sets the caller's root signature first; a different
    one, as in a list, makes every binding stale). A value set since then becomes "V, or undefined"
    (:data:`~drawopt.verify.model.STALE_BASE`), which only the same set before the same change
    matches; the others keep the unknown or inherited value. A bundle's first heaps must be the
    caller's, so they keep its tables. A binding that ``resets`` undid after its last set there
    (a table replaced by a root view of the same parameter, :data:`~drawopt.verify.model.KIND_RESET`)
    is not held at the change: it keeps that reset value.
    """
    pts = np.sort(opq)
    for fam, fams, at_start in ((Col.RSG, (Col.TG, Col.CG, Col.VG), bundle), (Col.RSC, (Col.TC, Col.CC), bundle),
                                *(() if bundle else ((Col.HEAPS, (Col.TG, Col.TC), False),))):
        si = np.sort(setters[cid_of(fam)][0])
        if not si.size:
            continue
        for u in ([-1] if at_start else []) + pts.tolist():
            j = int(np.searchsorted(si, u, "right"))
            if j == si.size:
                continue
            f = int(si[j])   # the first set after the unknown point, unless another Opaque comes first
            k = int(np.searchsorted(pts, u, "right"))
            if k < pts.size and int(pts[k]) < f:
                continue
            for c in universe:
                if Col(c >> 20) not in fams or c not in setters:
                    continue
                ei, ev = setters[c]
                since = np.flatnonzero((ei > u) & (ei < f))
                if since.size:
                    last = int(ei[since].max())
                    if any(((at > u) & (at < f) & (at >= last)).any() for at, _ in resets.get(c, ())):
                        continue   # (undone since: the column holds the reset)
                    v = int(ev[since[np.argmax(ei[since])]])
                    resets.setdefault(c, []).append((np.array([f], np.int64),
                                                     np.array([STALE_BASE - canon.id(f"~{c}:{v}")], np.int64)))


def _merge_events(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The events ``(command, value)`` of ``parts`` (each in stream order) in stream order;
    at one command, the part listed later comes later (and wins). The same as a stable
    sort of the concatenation, done as a merge of the later parts into the first.

    >>> _merge_events([(np.array([1, 4]), np.array([10, 40])), (np.array([4, 0]), np.array([-2, -3]))])
    (array([0, 1, 4, 4]), array([-3, 10, 40, -2]))
    """
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z
    head_i, head_v = parts[0]
    if len(parts) == 1:
        return head_i, head_v
    rest_i = np.concatenate([i for i, _ in parts[1:]])
    rest_v = np.concatenate([v for _, v in parts[1:]])
    o = np.argsort(rest_i, kind="stable")
    rest_i, rest_v = rest_i[o], rest_v[o]
    # np.insert(head, searchsorted(head_i, rest_i, "right"), rest) of both columns, with the
    # positions worked out once: the later parts' events go after the head's at one command
    at = np.searchsorted(head_i, rest_i, side="right")
    at += np.arange(at.size, dtype=at.dtype)
    head = np.ones(head_i.size + at.size, bool)
    head[at] = False
    out = []
    for h, r in ((head_i, rest_i), (head_v, rest_v)):
        x = np.empty(head.size, h.dtype)   # (np.insert's: the values take the array's type)
        x[at] = r
        x[head] = h
        out.append(x)
    return out[0], out[1]


def _heaps_value(s: Stream, idx: np.ndarray, cmap: np.ndarray) -> np.ndarray:
    lens = s.var_len[idx]
    a = cmap[s.pool[s.var_off[idx]]] if idx.size else np.zeros(0, np.int64)
    b = np.full(idx.size, -1, np.int64)
    two = lens > 1
    b[two] = cmap[s.pool[s.var_off[idx[two]] + 1]]
    lo = np.where(two, np.minimum(a, b), a)
    hi = np.where(two, np.maximum(a, b), -1)
    return hash_cols([lo, hi], idx.size) & _MASK63
