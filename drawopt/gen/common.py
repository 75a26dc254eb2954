"""Building blocks shared by the stream generators.

The generators never make a Python object per command. They compute per-draw
columns with numpy and hand them to a :class:`Program`, which places every
command at a *sort key* ``row * SLOTS + slot``: a row is one position in the
submission order (a draw, or one set-up command), and the slot orders the
commands that belong to the same draw (pipeline, then bindings, then the draw,
then anything that must follow it). :meth:`Program.build` sorts the keys once
and scatters the columns into a :class:`drawopt.ir.stream.Stream`.

:class:`DrawList` adds the usual engine behaviour on top: given per-draw state
(pipeline, tables, index buffer, ...) it emits a state command only where the
state changes, plus redundant re-sets at a chosen rate.
"""

from __future__ import annotations

__all__ = [
    "SLOTS", "Program", "DrawList", "Option", "int_opt", "float_opt", "choice_opt", "bool_opt",
    "resolve_options", "logical_draws", "f32", "changed", "split_budget", "Slot",
]

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from drawopt.errors import UsageError
from drawopt.ir.decls import Decl, Decls
from drawopt.ir.ops import BY_CODE, BY_NAME, MULTI_DRAW_OPS, NARGS
from drawopt.ir.stream import FLAG_NOMERGE, Header, Stream, encode_command

SLOTS = 32
"""Command positions available within one row."""


class Slot(IntEnum):
    """Order of the commands that belong to one draw row."""

    PRE = 0
    PIPELINE = 2
    GS = 3
    TOPOLOGY = 4
    VERTEX = 5
    INDEX = 6
    TABLE = 7
    TABLE2 = 8
    SCISSOR = 9
    CONSTANTS = 10
    DRAW = 16
    POST = 20


def f32(x: float | np.ndarray) -> np.ndarray | int:
    """IEEE-754 single-precision bit pattern(s) of ``x`` as ``int64``."""
    a = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    return int(a) if a.ndim == 0 else a


def changed(values: np.ndarray, defined: np.ndarray | None = None) -> np.ndarray:
    """Mask of the draws where ``values`` differs from the last *defined* draw before.

    ``defined`` marks the draws that use this state at all (default: all); a draw
    that does not use it keeps the previous binding. The first defined draw is
    always marked (state is re-established at the start of every list).
    """
    n = values.shape[0]
    if defined is None:
        defined = np.ones(n, bool)
    idx = np.where(defined, np.arange(n), -1)
    prev_def = np.maximum.accumulate(np.r_[-1, idx[:-1]]) if n else idx
    first = prev_def < 0
    prev_vals = values[np.maximum(prev_def, 0)]
    if values.ndim > 1:
        diff = (values != prev_vals).any(axis=1)
    else:
        diff = values != prev_vals
    return defined & (first | diff)


def split_budget(total: int, weights: Sequence[float], minimum: Sequence[int] | None = None) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``weights`` (largest remainder).

    A share smaller than its ``minimum`` is dropped to 0 and its draws are given to the
    others, so tiny totals still add up exactly. Ties go to the earlier entry.
    """
    w = np.asarray(weights, dtype=np.float64)
    mins = np.zeros(len(w), np.int64) if minimum is None else np.asarray(minimum, np.int64)
    active = w > 0
    while True:
        ww = np.where(active, w, 0.0)
        if total <= 0 or ww.sum() <= 0:
            return np.zeros(len(w), np.int64)
        exact = ww / ww.sum() * total
        out = np.floor(exact).astype(np.int64)
        rem = total - int(out.sum())
        order = np.argsort(-(exact - out), kind="stable")
        out[order[:rem]] += 1
        bad = active & (out > 0) & (out < mins)
        if not bad.any():
            return out
        # drop the smallest-weight offender and retry
        cand = np.flatnonzero(bad)
        active[cand[np.argmin(w[cand])]] = False


# ---------------------------------------------------------------------- options
@dataclass(frozen=True)
class Option:
    """One generator option: its default, a parser (text or Python value) and help."""

    name: str
    default: Any
    parse: Callable[[Any], Any]
    help: str = ""


def int_opt(name: str, default: int, lo: int, hi: int, help: str = "") -> Option:
    def parse(v: Any) -> int:
        if isinstance(v, bool):
            raise ValueError("expected an integer")
        if isinstance(v, str):
            v = int(v, 0)
        if not isinstance(v, (int, np.integer)):
            raise ValueError("expected an integer")
        if not lo <= int(v) <= hi:
            raise ValueError(f"must be in {lo}..{hi}")
        return int(v)
    return Option(name, default, parse, help)


def float_opt(name: str, default: float, lo: float, hi: float, help: str = "") -> Option:
    def parse(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError("expected a number")
        x = float(v)
        if not (lo <= x <= hi):
            raise ValueError(f"must be in {lo}..{hi}")
        return x
    return Option(name, default, parse, help)


def choice_opt(name: str, default: str, values: Sequence[str], help: str = "") -> Option:
    def parse(v: Any) -> str:
        if isinstance(v, bool):
            v = "on" if v else "off"
        v = str(v)
        if v not in values:
            raise ValueError(f"must be one of {', '.join(values)}")
        return v
    return Option(name, default, parse, help)


def bool_opt(name: str, default: bool, help: str = "") -> Option:
    def parse(v: Any) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        t = str(v).lower()
        if t in ("on", "true", "1", "yes"):
            return True
        if t in ("off", "false", "0", "no"):
            return False
        raise ValueError("must be on or off")
    return Option(name, default, parse, help)


def resolve_options(kind: str, specs: Sequence[Option], given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overridden by ``given``; ``UsageError`` for unknown names or bad values."""
    by_name = {o.name: o for o in specs}
    out = {o.name: o.default for o in specs}
    for k, v in given.items():
        if k not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise UsageError(f"gen: unknown option '{k}' for kind '{kind}' (known: {known})")
        try:
            out[k] = by_name[k].parse(v)
        except (TypeError, ValueError) as e:
            raise UsageError(f"gen: option {k}={v!r} for kind '{kind}': {e}") from None
    return out


# ---------------------------------------------------------------------- counting
def logical_draws(s: Stream) -> int:
    """Number of logical draw records in ``s``.

    A single draw (direct or indirect) counts 1, ``MultiDraw*Indirect`` counts its
    ``count`` and the ``Auto`` variants their ``max_count`` (the most the GPU-written
    count can ask for; the generators make the GPU write exactly that many).
    """
    total = 0
    for sp_code in np.unique(s.op):
        sp = BY_CODE[int(sp_code)]
        if sp.cat.name != "DRAW":
            continue
        where = s.op == sp_code
        if sp.code in MULTI_DRAW_OPS:
            col = sp.col("max_count") if sp.name.endswith("Auto") else sp.col("count")
            total += int(s.args[where, col].sum())
        else:
            total += int(where.sum())
    return total


# ---------------------------------------------------------------------- program
@dataclass
class _Part:
    keys: np.ndarray
    code: int
    cols: dict[int, np.ndarray | int]
    var: np.ndarray | None
    flags: np.ndarray | int


class Program:
    """Commands placed by sort key, built into a :class:`Stream` in one sort.

    >>> from drawopt.ir.stream import Header
    >>> p = Program(Header())
    >>> r = p.rows(3)
    >>> p.emit("DrawInstanced", r, Slot.DRAW, vertex_count=6, instance_count=1)
    >>> len(p.build())
    3
    """

    def __init__(self, header: Header, decls: Decls | None = None):
        self.header = header
        self.decls = decls if decls is not None else Decls()
        self.strings: list[str] = []
        self._parts: list[_Part] = []
        self._next_row = 0

    # declarations ----------------------------------------------------------
    def declare(self, d: Decl) -> int:
        """Add a declaration; returns its global index."""
        return self.decls.add(d)

    def ref(self, name: str) -> int:
        return self.decls.index[name]

    def heapref(self, heap: str, slot: int | np.ndarray) -> int | np.ndarray:
        """Encoded ``heap[slot]`` (scalar or array)."""
        h = np.int64(self.decls.index[heap]) << np.int64(32)
        if isinstance(slot, np.ndarray):
            return h | slot.astype(np.int64)
        return int(h) | int(slot)

    # rows ------------------------------------------------------------------
    def rows(self, n: int) -> np.ndarray:
        """Reserve ``n`` consecutive rows; returns their ids."""
        r = np.arange(self._next_row, self._next_row + n, dtype=np.int64)
        self._next_row += n
        return r

    # commands --------------------------------------------------------------
    def cmd(self, name: str, *values: Any, flags: int | str = 0, **kw: Any) -> None:
        """Append one command on a new row, encoded from Python values as the builder does."""
        sp = BY_NAME[name]
        row, var = encode_command(sp, list(values), dict(kw), self.decls, self.strings)
        key = np.array([self.rows(1)[0] * SLOTS], np.int64)
        cols = {j: int(v) for j, v in enumerate(row) if v}
        fl = 0
        if isinstance(flags, str):
            fl = FLAG_NOMERGE if "nomerge" in flags else 0
        else:
            fl = int(flags)
        self._parts.append(_Part(key, sp.code, cols, np.array([var], np.int64) if var else None, fl))

    def emit(self, name: str, rows: np.ndarray, slot: int, /, var: np.ndarray | None = None,
             flags: np.ndarray | int = 0, **cols: np.ndarray | int) -> None:
        """Place command ``name`` at ``rows`` (one per row) in ``slot``.

        ``cols`` give the fixed arguments by name, already encoded (refs as
        declaration indices, enums as indices, floats as bit patterns); optional
        arguments left out take their default. ``var`` is an ``(n, k)`` array of
        variadic values (the same ``k`` for every command of the call).
        """
        rows = np.asarray(rows, dtype=np.int64)
        n = rows.shape[0]
        if n == 0:
            return
        sp = BY_NAME[name]
        enc: dict[int, np.ndarray | int] = {}
        for j, a in enumerate(sp.args):
            if a.name in cols:
                v = cols.pop(a.name)
                if isinstance(v, np.ndarray):
                    if v.shape != (n,):
                        raise ValueError(f"{name}.{a.name}: expected shape ({n},), got {v.shape}")
                    enc[j] = v.astype(np.int64, copy=False)
                elif int(v):
                    enc[j] = int(v)
            elif a.default:
                enc[j] = int(a.default)
        if cols:
            raise TypeError(f"{name}: unknown arguments {', '.join(cols)}")
        if var is not None:
            var = np.asarray(var, dtype=np.int64)
            if var.ndim != 2 or var.shape[0] != n:
                raise ValueError(f"{name}: var must have shape ({n}, k)")
            if sp.var is None or not sp.var_min <= var.shape[1] <= sp.var_max:
                raise ValueError(f"{name}: bad number of variadic values")
        self._parts.append(_Part(rows * SLOTS + int(slot), sp.code, enc, var, flags))

    # build -----------------------------------------------------------------
    def build(self) -> Stream:
        """The stream: all commands ordered by (row, slot), then by emission order."""
        parts = self._parts
        if not parts:
            return Stream(self.header, self.decls, strings=self.strings)
        sizes = np.array([p.keys.shape[0] for p in parts], np.int64)
        starts = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        n = int(starts[-1])
        keys = np.concatenate([p.keys for p in parts])
        order = np.argsort(keys, kind="stable")
        pos = np.empty(n, np.int64)
        pos[order] = np.arange(n, dtype=np.int64)
        del keys, order
        op = np.empty(n, np.uint16)
        args = np.zeros((n, NARGS), np.int64)
        flags = np.zeros(n, np.uint8)
        var_len = np.zeros(n, np.int32)
        var_off = np.zeros(n, np.int64)
        pools: list[np.ndarray] = []
        pool_size = 0
        for p, a, b in zip(parts, starts[:-1], starts[1:]):
            at = pos[a:b]
            op[at] = p.code
            for j, v in p.cols.items():
                args[at, j] = v
            if isinstance(p.flags, np.ndarray) or p.flags:
                flags[at] = p.flags
            if p.var is not None:
                m, k = p.var.shape
                var_len[at] = k
                var_off[at] = pool_size + np.arange(m, dtype=np.int64) * k
                pools.append(p.var.ravel())
                pool_size += m * k
        pool = np.concatenate(pools) if pools else np.zeros(0, np.int64)
        # compact the pool into command order (a canonical layout)
        has = var_len > 0
        if has.any():
            lens = var_len.astype(np.int64)
            new_off = np.zeros(n, np.int64)
            np.cumsum(lens[:-1], out=new_off[1:])
            gather = np.repeat(var_off[has] - new_off[has], lens[has]) + np.arange(int(lens.sum()), dtype=np.int64)
            pool = pool[gather]
            var_off = new_off
        else:
            var_off = np.zeros(n, np.int64)
        return Stream(self.header, self.decls, op, args, var_off, var_len, pool, flags,
                      np.zeros(n, np.int32), self.strings)


# ---------------------------------------------------------------------- draw lists
@dataclass
class DrawList:
    """Per-draw state of a run of draws, emitted the way an engine records it.

    Every array has one entry per draw; ``-1`` means "this draw does not use that
    state" (it keeps whatever was bound). State commands are emitted where the
    value changes from the last draw that used it, at the first draw that uses it,
    and additionally where ``redundant`` asks for a re-set of an unchanged value.

    ``pipeline``: declaration index of the pipeline. ``gs``: index into
    ``gs_params`` (0 = no GS; a GS run is preceded by GSSetParameters and followed
    by ``GSSetParameters null``). ``topology``: IASetPrimitiveTopology enumerant.
    ``vertex``: index into ``vertex_bindings`` (slot, buffer, offset, stride) rows.
    ``index``: index into ``index_bindings`` (buffer, format, offset) rows.
    ``table``: encoded heapref for root parameter ``table_param``.
    ``scissor``: index into ``scissors`` (left, top, right, bottom) rows.
    ``constants``: ``(n, k)`` values for root parameter ``constants_param``.
    """

    n: int
    pipeline: np.ndarray
    topology: np.ndarray | None = None
    gs: np.ndarray | None = None
    gs_params: Sequence[dict[str, int]] = ()
    vertex: np.ndarray | None = None
    vertex_bindings: np.ndarray | None = None
    index: np.ndarray | None = None
    index_bindings: np.ndarray | None = None
    table: np.ndarray | None = None
    table_param: int = 0
    scissor: np.ndarray | None = None
    scissors: np.ndarray | None = None
    constants: np.ndarray | None = None
    constants_param: int = 1
    redundant: np.ndarray | None = None
    redundant_constants: bool = True
    flags: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def emit(self, prog: Program, rows: np.ndarray, draw: str | None, **draw_cols: np.ndarray | int) -> None:
        """Emit the state commands and the draws ``draw`` (columns ``draw_cols``) at ``rows``.

        With ``draw=None`` only the state commands are emitted; the caller places the
        draws in :attr:`Slot.DRAW` of the same rows (lists mixing draw commands).
        """
        n = self.n
        red = self.redundant if self.redundant is not None else np.zeros((4, n), bool)
        if red.ndim == 1:
            red = np.broadcast_to(red, (4, n))
        m = changed(self.pipeline) | red[0]
        prog.emit("SetPipelineState", rows[m], Slot.PIPELINE, pipeline=self.pipeline[m])
        if self.gs is not None and self.gs_params:
            gs = self.gs
            on = gs > 0
            prev = np.r_[0, gs[:-1]]
            nxt = np.r_[gs[1:], 0]
            start = on & (prev != gs)
            start |= on & red[0] & m  # re-set with the pipeline when it is re-set
            for gid in np.unique(gs[start]):
                sel = start & (gs == gid)
                p = dict(self.gs_params[int(gid)])
                prog.emit("GSSetParameters", rows[sel], Slot.GS, **p)
            stop = on & (nxt == 0)
            prog.emit("GSSetParameters", rows[stop], Slot.POST, mode=0)
        if self.topology is not None:
            m = changed(self.topology)
            prog.emit("IASetPrimitiveTopology", rows[m], Slot.TOPOLOGY, topology=self.topology[m])
        if self.vertex is not None:
            d = self.vertex >= 0
            m = changed(self.vertex, d) | (red[1] & d)
            vb = self.vertex_bindings[self.vertex[m]]
            prog.emit("IASetVertexBuffers", rows[m], Slot.VERTEX, slot=vb[:, 0], buffer=vb[:, 1],
                      offset=vb[:, 2], stride=vb[:, 3])
        if self.index is not None:
            d = self.index >= 0
            m = changed(self.index, d) | (red[2] & d)
            ib = self.index_bindings[self.index[m]]
            prog.emit("IASetIndexBuffer", rows[m], Slot.INDEX, buffer=ib[:, 0], format=ib[:, 1], offset=ib[:, 2])
        if self.table is not None:
            d = self.table >= 0
            m = changed(self.table, d) | (red[3] & d)
            prog.emit("SetGraphicsRootDescriptorTable", rows[m], Slot.TABLE, index=self.table_param,
                      table=self.table[m])
        if self.scissor is not None:
            d = self.scissor >= 0
            m = changed(self.scissor, d) | (red[1] & d)
            sc = self.scissors[self.scissor[m]]
            prog.emit("RSSetScissorRects", rows[m], Slot.SCISSOR, left=sc[:, 0], top=sc[:, 1],
                      right=sc[:, 2], bottom=sc[:, 3])
        if self.constants is not None:
            c = self.constants
            m = np.ones(n, bool) if self.redundant_constants else changed(c)
            prog.emit("SetGraphicsRoot32BitConstants", rows[m], Slot.CONSTANTS, var=c[m],
                      index=self.constants_param, count=c.shape[1])
        if draw is not None:
            prog.emit(draw, rows, Slot.DRAW, flags=self.flags if self.flags is not None else 0, **draw_cols)
