"""The stream IR: a header, declarations, and commands stored columnar in numpy.

A :class:`Stream` holds N commands as parallel arrays:

``op``      ``uint16[N]``   opcode (:mod:`drawopt.ir.ops`)
``args``    ``int64[N,6]``  fixed arguments, encoded (:mod:`drawopt.ir.codec`); unused = 0
``var_off`` ``int64[N]``    start of the command's variadic tail in ``pool``
``var_len`` ``int32[N]``    its length (0 for most commands)
``pool``    ``int64[M]``    variadic values (root constants, render targets, heaps)
``flags``   ``uint8[N]``    per-command flags (:data:`FLAG_NOMERGE`)
``line``    ``int32[N]``    source line in the file it was read from (0 = none); not
                            part of a stream's value, so not compared by ``==``

Small streams may be read and built through Python objects (:class:`Command`,
:class:`StreamBuilder`); large ones are made and rewritten with numpy
(:meth:`Stream.take`, :class:`Emitter`).
"""

from __future__ import annotations

__all__ = [
    "Header", "Stream", "Command", "CommandBuffer", "Emitter", "StreamBuilder",
    "StreamCheckError", "FLAG_NOMERGE", "FLAG_NAMES", "ARGS_SIZE", "ragged_index", "REORDER_POLICIES",
    "Encoded", "splice",
]

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drawopt.ir import codec
from drawopt.ir.decls import Buffer, Decl, Decls, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from drawopt.ir.ops import BY_CODE, BY_NAME, INDEX_SIZE, MAX_OPCODE, NARGS, OPS, Cat, OpSpec

FLAG_NOMERGE = 1
FLAG_NAMES = {"nomerge": FLAG_NOMERGE}
ARGS_SIZE = {"DrawInstancedIndirect": 16, "DrawIndexedInstancedIndirect": 20,
             "MultiDrawInstancedIndirect": 16, "MultiDrawIndexedInstancedIndirect": 20,
             "MultiDrawInstancedIndirectAuto": 16, "MultiDrawIndexedInstancedIndirectAuto": 20}
"""Bytes of one indirect-args record (D3D12_DRAW_ARGUMENTS / _DRAW_INDEXED_ARGUMENTS)."""

CONTEXTS = ("graphics", "compute")
KINDS = ("list", "bundle")
REORDER_POLICIES = ("none", "declared", "opaque")
"""Which draws writing a common target may commute (docs/verification.md)."""
_TARGET_NAME = re.compile(r"[a-z][a-z0-9_.-]*")


@dataclass
class Header:
    """Stream header: context, list or bundle, and the flush-relevant device setting.

    ``fast_semantics``: the context was created with FAST_SEMANTICS, so a CS writer
    needs a CS_PARTIAL_FLUSH before the L2 flush. ``auto_gpu_flush``: the initial
    CSEnableAutomaticGpuFlush setting (FALSE has the same consequence).

    ``target`` and ``reorder``: how an optimized stream was made (the cost-model
    target and the reorder policy it was optimized under; ``""`` = not recorded,
    as in every input). They are provenance, not semantics: ``verify`` and
    ``explain`` default to them, and neither ``==`` nor the verifier compares them.

    >>> Header(target="xbox-one", reorder="opaque").reorder
    'opaque'
    """

    version: int = 1
    context: str = "graphics"
    kind: str = "list"
    fast_semantics: bool = False
    auto_gpu_flush: bool = True
    target: str = field(default="", compare=False)
    reorder: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.version != 1:
            raise ValueError(f"unsupported stream version {self.version} (this drawopt reads 1)")
        if self.context not in CONTEXTS:
            raise ValueError("context must be graphics or compute")
        if self.kind not in KINDS:
            raise ValueError("kind must be list or bundle")
        for k in ("fast_semantics", "auto_gpu_flush"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"{k} must be on or off")
        if not isinstance(self.target, str) or (self.target and not _TARGET_NAME.fullmatch(self.target)):
            raise ValueError(f"target must be a target name, got '{self.target}'")
        if self.reorder and self.reorder not in REORDER_POLICIES:
            raise ValueError(f"reorder must be one of {', '.join(REORDER_POLICIES)}, got '{self.reorder}'")


@dataclass(frozen=True)
class Command:
    """One decoded command (for small streams, tests and messages)."""

    name: str
    args: tuple[Any, ...]
    var: tuple[Any, ...] = ()
    flags: int = 0
    line: int = 0

    @property
    def spec(self) -> OpSpec:
        return BY_NAME[self.name]

    def __getitem__(self, key: str) -> Any:
        return self.args[self.spec.col(key)]


class StreamCheckError(ValueError):
    """A command that breaks a rule; ``cmd`` is its index, ``arg`` its argument position
    (fixed arguments first, then the variadic tail) or -1 for the whole command."""

    def __init__(self, message: str, cmd: int, arg: int = -1):
        super().__init__(message)
        self.cmd, self.arg = int(cmd), int(arg)


def _empty_i64(n: int = 0, w: int | None = None) -> np.ndarray:
    return np.zeros((n, w) if w else n, dtype=np.int64)


@dataclass(eq=False)
class Stream:
    """A command stream (see the module docstring for the columns)."""

    header: Header = field(default_factory=Header)
    decls: Decls = field(default_factory=Decls)
    op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint16))
    args: np.ndarray = field(default_factory=lambda: _empty_i64(0, NARGS))
    var_off: np.ndarray = field(default_factory=_empty_i64)
    var_len: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    pool: np.ndarray = field(default_factory=_empty_i64)
    flags: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    strings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.op = np.ascontiguousarray(self.op, dtype=np.uint16)
        n = self.op.shape[0]
        self.args = np.ascontiguousarray(self.args, dtype=np.int64).reshape(n, NARGS)
        self.var_off = np.ascontiguousarray(self.var_off, dtype=np.int64)
        self.var_len = np.ascontiguousarray(self.var_len, dtype=np.int32)
        self.pool = np.ascontiguousarray(self.pool, dtype=np.int64)
        self.flags = np.ascontiguousarray(self.flags, dtype=np.uint8)
        self.line = np.ascontiguousarray(self.line, dtype=np.int32)
        for name in ("var_off", "var_len", "flags", "line"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"column {name} has shape {getattr(self, name).shape}, expected ({n},)")

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return int(self.op.shape[0])

    def __eq__(self, other: object) -> bool:
        """Value equality: header, declarations, commands and strings they use
        (source lines and pool layout are not part of the value)."""
        if not isinstance(other, Stream):
            return NotImplemented
        if self.header != other.header or self.decls != other.decls or len(self) != len(other):
            return False
        if not (np.array_equal(self.op, other.op) and np.array_equal(self.flags, other.flags)
                and np.array_equal(self.var_len, other.var_len)):
            return False
        a, b = self.args, other.args  # copied only to compare Opaque strings by value
        s = self.op == BY_NAME["Opaque"].code
        if s.any():
            t = BY_NAME["Opaque"].col("text")
            a, b = a.copy(), b.copy()
            a[s, t] = [hash(self.strings[i]) for i in a[s, t]]
            b[s, t] = [hash(other.strings[i]) for i in b[s, t]]
        return bool(np.array_equal(a, b) and np.array_equal(self.var_values(), other.var_values()))

    def var_values(self) -> np.ndarray:
        """All variadic values in command order (the pool, compacted)."""
        return self.pool[ragged_index(self.var_off, self.var_len)]

    def var(self, i: int) -> np.ndarray:
        """Variadic tail of command ``i``."""
        o = int(self.var_off[i])
        return self.pool[o:o + int(self.var_len[i])]

    def spec(self, i: int) -> OpSpec:
        return BY_CODE[int(self.op[i])]

    def command(self, i: int) -> Command:
        """Command ``i`` decoded to Python values."""
        sp = self.spec(i)
        args = tuple(codec.decode(a, self.args[i, j], self.decls, self.strings) for j, a in enumerate(sp.args))
        var: tuple[Any, ...] = ()
        if sp.var is not None:
            var = tuple(codec.decode(sp.var, v, self.decls, self.strings) for v in self.var(i))
        return Command(sp.name, args, var, int(self.flags[i]), int(self.line[i]))

    def commands(self) -> Iterator[Command]:
        for i in range(len(self)):
            yield self.command(i)

    def mask(self, *names: str) -> np.ndarray:
        """Boolean mask of commands whose name is one of ``names``."""
        codes = np.array([BY_NAME[n].code for n in names], dtype=np.uint16)
        return np.isin(self.op, codes)

    def cats(self) -> np.ndarray:
        """Category (:class:`drawopt.ir.ops.Cat`) of every command, as ``uint8``."""
        return _CAT_OF_CODE[self.op]

    def with_commands(self, cb: CommandBuffer | Emitter) -> Stream:
        """A stream with this header and declarations and ``cb``'s commands."""
        return cb.build(self.header, self.decls, self.strings)

    def take(self, idx: np.ndarray | Sequence[int]) -> Stream:
        """The commands at ``idx`` (any order, repeats allowed), same declarations.

        The result shares this stream's pool (its commands' tails stay where they are: the
        pool's layout is not part of a stream's value, and the writers compact it).

        >>> b = StreamBuilder()
        >>> b.SetGraphicsRoot32BitConstants(0, 2, 7, 8); b.SetGraphicsRoot32BitConstants(0, 1, 9)
        >>> t = b.build(check=False).take([1, 0])
        >>> [t.var(i).tolist() for i in range(len(t))], t.var_values().tolist()
        ([[9], [7, 8]], [9, 7, 8])
        """
        idx = np.asarray(idx, dtype=np.int64)
        return Stream(self.header, self.decls, self.op[idx], np.take(self.args, idx, axis=0), self.var_off[idx],
                      self.var_len[idx], self.pool, self.flags[idx], self.line[idx], self.strings)

    def copy(self) -> Stream:
        return Stream(Header(**vars(self.header)), self.decls.copy(), self.op.copy(), self.args.copy(),
                      self.var_off.copy(), self.var_len.copy(), self.pool.copy(), self.flags.copy(),
                      self.line.copy(), list(self.strings))

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """Check every command against the vocabulary and the declarations.

        Vectorised, so that hostile or huge binary inputs are rejected quickly.
        Raises :class:`StreamCheckError` for the first offending command.
        """
        _check(self)


def ragged_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Indices ``starts[i] + 0..lens[i]-1`` concatenated (gather index of a ragged array)."""
    lens = lens.astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    new_off = np.zeros(lens.shape[0], np.int64)
    np.cumsum(lens[:-1], out=new_off[1:])
    return np.repeat(starts.astype(np.int64) - new_off, lens) + np.arange(total, dtype=np.int64)


_CAT_OF_CODE = np.full(MAX_OPCODE + 1, 255, dtype=np.uint8)
for _o in OPS:
    _CAT_OF_CODE[_o.code] = int(_o.cat)


# ---------------------------------------------------------------------- checking
_LIMITS = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "u64": (0, 2**63 - 1),
           "f32": (0, 2**32 - 1), "bool": (0, 1)}


def _first(mask: np.ndarray, where: np.ndarray) -> int:
    return int(where[np.argmax(mask)])


def _check(s: Stream) -> None:
    n = len(s)
    if n == 0:
        return
    known = np.zeros(MAX_OPCODE + 1, bool)
    known[[o.code for o in OPS]] = True
    bad = (s.op > MAX_OPCODE) | ~known[np.minimum(s.op, MAX_OPCODE)]
    if bad.any():
        i = int(np.argmax(bad))
        raise StreamCheckError(f"unknown opcode {int(s.op[i])}", i)
    # compare without adding, so a hostile var_off near 2^63 cannot wrap
    outside = (s.var_len < 0) | (s.var_off < 0) | (s.var_off > s.pool.shape[0] - s.var_len.astype(np.int64))
    if outside.any():  # (the one owner of this rule: the .npz reader reports this message)
        i = int(np.argmax(outside))
        raise StreamCheckError(f"variadic arguments [{int(s.var_off[i])}, +{int(s.var_len[i])}) outside the pool "
                               f"of {s.pool.shape[0]} values", i)
    if (s.flags & ~np.uint8(sum(FLAG_NAMES.values()))).any():
        raise StreamCheckError("unknown flag bits", int(np.argmax(s.flags & ~np.uint8(1))))
    kinds = np.array([_KIND_CODE[d.kind] for d in s.decls.items] or [0], dtype=np.int8)
    ndecl = len(s.decls)
    # the commands of each opcode, in stream order: one stable sort instead of a pass per opcode
    order = np.argsort(s.op, kind="stable")
    counts = np.bincount(s.op, minlength=MAX_OPCODE + 1)
    ends = np.cumsum(counts)
    starts = ends - counts
    pool = _compact_pool(s)
    elem_op = np.repeat(s.op, s.var_len) if pool is not None else None
    for sp in OPS:
        where = order[starts[sp.code]:ends[sp.code]]
        if where.size == 0:
            continue
        rows = np.take(s.args, where, axis=0)  # (faster than s.args[where])
        for j in range(len(sp.args), NARGS):
            nz = rows[:, j] != 0
            if nz.any():
                raise StreamCheckError(f"{sp.name}: unused argument column {j} is not 0", _first(nz, where))
        for j, a in enumerate(sp.args):
            _check_values(sp, a, rows[:, j], lambda k, w=where, j=j: (int(w[k]), j), s, kinds, ndecl)
        lens = s.var_len[where]
        if sp.var is None:
            if (lens != 0).any():
                raise StreamCheckError(f"{sp.name} takes no variadic arguments", _first(lens != 0, where))
        else:
            badlen = (lens < sp.var_min) | (lens > sp.var_max)
            if badlen.any():
                raise StreamCheckError(
                    f"{sp.name} takes {sp.var_min}..{sp.var_max} {sp.var.name}", _first(badlen, where))
            if pool is not None and elem_op is not None:
                # a compact pool in command order: this opcode's values are where its commands' are
                sel = elem_op == sp.code
                vals = pool[sel]
                locate = _pool_locator(s, sel, len(sp.args))
            else:
                vals = s.pool[ragged_index(s.var_off[where], lens)]
                locate = _ragged_locator(where, lens, len(sp.args))
            if vals.size:
                _check_values(sp, sp.var, vals, locate, s, kinds, ndecl)
        _RULES.get(sp.name, _no_rule)(s, sp, where, rows)


def _compact_pool(s: Stream) -> np.ndarray | None:
    """The used part of the pool if the variadic tails lie one after another in command order
    (as every reader lays them out; :meth:`Stream.take` keeps its source's layout), else None."""
    total = int(s.var_len.sum(dtype=np.int64))
    if s.var_off[0] != 0 or total > s.pool.shape[0]:
        return None
    ends = np.cumsum(s.var_len[:-1], dtype=np.int64)
    return s.pool[:total] if np.array_equal(s.var_off[1:], ends) else None


def _pool_locator(s: Stream, sel: np.ndarray, nfixed: int):
    """``k`` -> (command, argument position) of the ``k``-th pool element in ``sel`` (a compact pool)."""
    def locate(k: int) -> tuple[int, int]:
        e = int(np.flatnonzero(sel)[k])
        i = int(np.searchsorted(s.var_off, e, "right")) - 1  # tails after i start past e
        return i, e - int(s.var_off[i]) + nfixed
    return locate


def _ragged_locator(where: np.ndarray, lens: np.ndarray, nfixed: int):
    """``k`` -> (command, argument position) of the ``k``-th value of the tails of ``where``."""
    def locate(k: int) -> tuple[int, int]:
        ends = np.cumsum(lens, dtype=np.int64)
        i = int(np.searchsorted(ends, k, "right"))
        return int(where[i]), k - int(ends[i] - lens[i]) + nfixed
    return locate


_KIND_CODE = {"buffer": 1, "texture": 2, "target": 3, "depth": 4, "heap": 5, "view": 6, "rootsig": 7, "pipeline": 8}


def _check_values(sp: OpSpec, a, vals, locate, s: Stream, kinds, ndecl) -> None:
    """Check the values ``vals`` of argument ``a``; ``locate(k)``: command and argument position of ``vals[k]``."""
    def fail(mask: np.ndarray, msg: str) -> None:
        cmd, pos = locate(int(np.argmax(mask)))
        raise StreamCheckError(f"{sp.name}: {a.name} {msg}", cmd, pos)

    if a.kind in _LIMITS:
        lo, hi = _LIMITS[a.kind]
        m = (vals < lo) | (vals > hi)
        if m.any():
            fail(m, f"{int(vals[np.argmax(m)])} is out of range ({lo}..{hi})")
    elif a.kind == "enum":
        m = (vals < 0) | (vals >= len(a.values))
        if m.any():
            fail(m, "is not a valid enumerant")
    elif a.kind == "str":
        m = (vals < 0) | (vals >= len(s.strings))
        if m.any():
            fail(m, "refers to a missing string")
    elif a.kind in ("ref", "heapref"):
        di = vals >> 32 if a.kind == "heapref" else vals
        m = (di < 0) | (di >= ndecl)
        if m.any():
            fail(m, "refers to an undeclared name")
        want = [_KIND_CODE[k] for k in (a.ref if a.kind == "ref" else ("heap",))]
        m = ~np.isin(kinds[di], want)
        if m.any():
            fail(m, f"must name a {' or '.join(a.ref or ('heap',))}")
        if a.kind == "heapref":
            sizes = np.array([getattr(d, "size", 0) for d in s.decls.items], dtype=np.int64)
            m = (vals & 0xFFFFFFFF) >= sizes[di]
            if m.any():
                fail(m, "slot is outside its heap")


def _no_rule(s, sp, where, rows) -> None:
    return None


def _buffer_sizes(s: Stream) -> np.ndarray:
    return np.array([getattr(d, "size", 0) if d.kind == "buffer" else 0 for d in s.decls.items] or [0],
                    dtype=np.int64)


def _range_rule(buf_col: str, off_col: str, size_of, what: str, align: int = 1):
    """A rule: ``offset + size_of(rows) <= size(buffer)`` and alignment."""
    def rule(s: Stream, sp: OpSpec, where: np.ndarray, rows: np.ndarray) -> None:
        sizes = _buffer_sizes(s)
        b, o = rows[:, sp.col(buf_col)], rows[:, sp.col(off_col)]
        need = size_of(sp, rows)
        m = (o > sizes[b]) | (need > sizes[b] - o)
        if m.any():
            k = int(np.argmax(m))
            raise StreamCheckError(
                f"{sp.name}: {what} [{int(o[k])}, {int(o[k]) + int(need[k])}) is past the end of "
                f"'{s.decls[int(b[k])].name}' ({int(sizes[b[k]])} bytes)", int(where[k]), sp.col(off_col))
        if align > 1:
            m = (o % align) != 0
            if m.any():
                raise StreamCheckError(f"{sp.name}: {off_col} must be a multiple of {align}",
                                       _first(m, where), sp.col(off_col))
    return rule


def _zero(sp, rows):
    return np.zeros(rows.shape[0], np.int64)


def _idx_bytes(sp, rows):
    size = np.where(rows[:, sp.col("format")] == 0, 2, 4)
    return rows[:, sp.col("index_count")] * size


def _one_record(sp, rows):
    return np.full(rows.shape[0], ARGS_SIZE[sp.name], np.int64)


def _records(count_col: str):
    def f(sp, rows):
        c = rows[:, sp.col(count_col)]
        # (count-1)*stride can reach 2^64: multiply in uint64, clamp, so int64 cannot wrap
        span = np.maximum(c - 1, 0).astype(np.uint64) * rows[:, sp.col("stride")].astype(np.uint64)
        span = np.minimum(span, np.uint64(1 << 62)).astype(np.int64)
        return np.where(c > 0, span + ARGS_SIZE[sp.name], 0)
    return f


def _multi_rule(count_col: str):
    inner = _range_rule("args_buffer", "offset", _records(count_col), "args", 4)

    def rule(s, sp, where, rows):
        st = rows[:, sp.col("stride")]
        c = rows[:, sp.col(count_col)]
        m = (c > 1) & ((st < ARGS_SIZE[sp.name]) | (st % 4 != 0))
        if m.any():
            raise StreamCheckError(
                f"{sp.name}: stride must be a multiple of 4 and at least {ARGS_SIZE[sp.name]}",
                _first(m, where), sp.col("stride"))
        inner(s, sp, where, rows)
        if count_col == "max_count":
            _range_rule("count_buffer", "count_offset", lambda sp_, r: np.full(r.shape[0], 4, np.int64),
                        "count", 4)(s, sp, where, rows)
    return rule


def _idx_align_rule(s, sp, where, rows):
    fmt_size = np.where(rows[:, sp.col("format")] == 0, 2, 4)
    m = rows[:, sp.col("offset")] % fmt_size != 0
    if m.any():
        raise StreamCheckError(f"{sp.name}: offset must be a multiple of the index size",
                               _first(m, where), sp.col("offset"))


def _both(*rules):
    def rule(s, sp, where, rows):
        for r in rules:
            r(s, sp, where, rows)
    return rule


def _below_rule(col: str, limit: int, what: str):
    """A rule: argument ``col`` is below ``limit`` (``what`` names it in the message)."""
    def rule(s: Stream, sp: OpSpec, where: np.ndarray, rows: np.ndarray) -> None:
        m = rows[:, sp.col(col)] >= limit
        if m.any():
            raise StreamCheckError(f"{sp.name}: {what} must be below {limit}", _first(m, where), sp.col(col))
    return rule


MAX_ROOT_PARAMS = 16
MAX_VERTEX_BUFFERS = 32
"""D3D12_IA_VERTEX_INPUT_RESOURCE_SLOT_COUNT: the input assembler's vertex-buffer slots."""
_root_index_rule = _below_rule("index", MAX_ROOT_PARAMS, "root parameter index")
_vb_slot_rule = _below_rule("slot", MAX_VERTEX_BUFFERS, "vertex-buffer slot")


def _consts_rule(s, sp, where, rows):
    _root_index_rule(s, sp, where, rows)
    c, d = rows[:, sp.col("count")], rows[:, sp.col("dest")]
    m = c != s.var_len[where]
    if m.any():
        raise StreamCheckError(f"{sp.name}: count says {int(c[np.argmax(m)])} values but "
                               f"{int(s.var_len[where][np.argmax(m)])} follow", _first(m, where), sp.col("count"))
    m = c + d > 64
    if m.any():
        raise StreamCheckError(f"{sp.name}: dest + count exceeds 64 values", _first(m, where), sp.col("dest"))


def _rt_rule(s, sp, where, rows):
    for i in where:
        names = s.var(int(i))
        isdepth = [s.decls[int(v)].kind == "depth" for v in names]
        if sum(isdepth) > 1 or (any(isdepth) and not isdepth[-1]) or len(names) - sum(isdepth) > 8:
            raise StreamCheckError("OMSetRenderTargets: up to 8 render targets, then at most one depth target",
                                   int(i))


def _heaps_rule(s, sp, where, rows):
    for i in where:
        types = [s.decls[int(v)].type for v in s.var(int(i))]
        if len(set(types)) != len(types):
            raise StreamCheckError("SetDescriptorHeaps: at most one heap of each type", int(i))


def _copy_rule(s, sp, where, rows):
    def size(sp_, r):
        return r[:, sp_.col("size")]
    _range_rule("dst", "dst_offset", size, "destination")(s, sp, where, rows)
    _range_rule("src", "src_offset", size, "source")(s, sp, where, rows)


_RULES = {
    "IASetIndexBuffer": _both(_range_rule("buffer", "offset", _zero, "index buffer"), _idx_align_rule),
    "IASetVertexBuffers": _both(_vb_slot_rule, _range_rule("buffer", "offset", _zero, "vertex buffer")),
    "SetGraphicsRootConstantBufferView": _both(_root_index_rule, _range_rule("buffer", "offset", _zero, "view")),
    "SetGraphicsRootShaderResourceView": _both(_root_index_rule, _range_rule("buffer", "offset", _zero, "view")),
    "SetGraphicsRootDescriptorTable": _root_index_rule,
    "SetComputeRootDescriptorTable": _root_index_rule,
    "DrawIndexedX": _both(_range_rule("buffer", "offset", _idx_bytes, "indices"), _idx_align_rule),
    "DrawInstancedIndirect": _range_rule("args_buffer", "offset", _one_record, "args", 4),
    "DrawIndexedInstancedIndirect": _range_rule("args_buffer", "offset", _one_record, "args", 4),
    "MultiDrawInstancedIndirect": _multi_rule("count"),
    "MultiDrawIndexedInstancedIndirect": _multi_rule("count"),
    "MultiDrawInstancedIndirectAuto": _multi_rule("max_count"),
    "MultiDrawIndexedInstancedIndirectAuto": _multi_rule("max_count"),
    "SetGraphicsRoot32BitConstants": _consts_rule,
    "SetComputeRoot32BitConstants": _consts_rule,
    "OMSetRenderTargets": _rt_rule,
    "SetDescriptorHeaps": _heaps_rule,
    "CopyBufferRegion": _copy_rule,
}


# ---------------------------------------------------------------------- building
class CommandBuffer:
    """A growable list of encoded commands (Python lists; fine up to ~10^6 commands)."""

    def __init__(self) -> None:
        self.op: list[int] = []
        self.args: list[Sequence[int]] = []
        self.var: list[Sequence[int]] = []
        self.flags: list[int] = []
        self.line: list[int] = []

    def __len__(self) -> int:
        return len(self.op)

    def append(self, code: int, args: Sequence[int] = (), var: Sequence[int] = (), flags: int = 0,
               line: int = 0) -> None:
        """Append one encoded command."""
        row = list(args)
        row += [0] * (NARGS - len(row))
        self.op.append(code)
        self.args.append(row)
        self.var.append(var)
        self.flags.append(flags)
        self.line.append(line)

    def copy_from(self, s: Stream, i: int) -> None:
        """Append command ``i`` of ``s`` unchanged."""
        self.append(int(s.op[i]), s.args[i].tolist(), s.var(i).tolist(), int(s.flags[i]), int(s.line[i]))

    def arrays(self) -> tuple[np.ndarray, ...]:
        n = len(self.op)
        lens = np.array([len(v) for v in self.var], dtype=np.int32)
        off = np.zeros(n, np.int64)
        if n:
            np.cumsum(lens[:-1], out=off[1:])
        pool = np.fromiter((x for v in self.var for x in v), dtype=np.int64, count=int(lens.sum()))
        args = np.array(self.args, dtype=np.int64).reshape(n, NARGS)
        return (np.array(self.op, np.uint16), args, off, lens, pool,
                np.array(self.flags, np.uint8), np.array(self.line, np.int32))

    def build(self, header: Header, decls: Decls, strings: list[str]) -> Stream:
        return Stream(header, decls, *self.arrays(), strings=strings)


class Emitter:
    """Builds a rewritten stream from slices of an input stream and new commands.

    Passes over large streams use it to keep untouched commands in numpy::

        em = Emitter(src)
        em.keep(np.arange(0, 10))        # commands 0..9 unchanged
        em.new().append(code, args)      # new commands
        out = em.build_stream()
    """

    def __init__(self, src: Stream):
        self.src = src
        self.parts: list[np.ndarray | CommandBuffer] = []

    def keep(self, idx: np.ndarray | Sequence[int]) -> None:
        """Append source commands ``idx`` unchanged."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size:
            self.parts.append(idx)

    def new(self) -> CommandBuffer:
        """A buffer for new commands, appended at the current position."""
        cb = CommandBuffer()
        self.parts.append(cb)
        return cb

    def build(self, header: Header, decls: Decls, strings: list[str]) -> Stream:
        pieces = []
        for p in self.parts:
            if isinstance(p, CommandBuffer):
                if len(p):
                    pieces.append(p.build(header, decls, strings))
            else:
                pieces.append(self.src.take(p))
        return concat(pieces, header, decls, strings)

    def build_stream(self) -> Stream:
        return self.build(self.src.header, self.src.decls, self.src.strings)


def concat(parts: Sequence[Stream], header: Header, decls: Decls, strings: list[str]) -> Stream:
    """Commands of ``parts`` one after another (they must share ``strings``)."""
    if not parts:
        return Stream(header, decls, strings=strings)
    lens = np.concatenate([p.var_len for p in parts])
    pools = [p.var_values() for p in parts]
    off = np.zeros(lens.shape[0], np.int64)
    if lens.shape[0]:
        np.cumsum(lens[:-1].astype(np.int64), out=off[1:])
    return Stream(header, decls, np.concatenate([p.op for p in parts]),
                  np.concatenate([p.args for p in parts]), off, lens, np.concatenate(pools),
                  np.concatenate([p.flags for p in parts]), np.concatenate([p.line for p in parts]), strings)


Encoded = tuple[int, Sequence[int], Sequence[int]]
"""One command to insert: ``(opcode, fixed args, variadic values)``."""


def splice(stream: Stream, inserts: Mapping[int, Sequence[Encoded]], drops: Sequence[int] | np.ndarray = ()) -> Stream:
    """``stream`` with new commands inserted before the given indices and ``drops`` removed:
    the IR's one rewrite primitive (passes express their edits as inserts and drops).

    ``inserts[i]``: commands to place before command ``i`` (``len(stream)``: at the end), in
    order. Every column is written once: the kept commands and the new ones are scattered
    straight to their output rows (no concatenation, no sort).

    >>> from drawopt.ir.ops import Op
    >>> b = StreamBuilder(); b.pipeline("p", vs="pull", ps="flat")
    >>> b.SetPipelineState("p"); b.DrawInstanced(3, 1, 0, 0); b.DrawInstanced(6, 1, 0, 0)
    >>> out = splice(b.build(), {2: [(int(Op.SetPipelineState), [0], [])]}, drops=[0])
    >>> [c.name for c in out.commands()]
    ['DrawInstanced', 'SetPipelineState', 'DrawInstanced']
    """
    n = len(stream)
    keep = np.ones(n, bool)
    if len(drops):
        keep[np.asarray(drops, np.int64)] = False
    cb = CommandBuffer()
    at: list[int] = []
    for pos in sorted(inserts):
        for code, a, v in inserts[pos]:
            cb.append(code, a, v)
            at.append(pos)
    if not len(cb):
        return stream if keep.all() else stream.take(np.flatnonzero(keep))
    new = cb.build(stream.header, stream.decls, stream.strings)
    ins = np.asarray(at, np.int64)
    kept = np.flatnonzero(keep)
    # output row of every kept command (after the inserts at or before it) and of every new one
    row_old = np.arange(kept.size, dtype=np.int64) + np.searchsorted(ins, kept, "right")
    row_new = np.searchsorted(kept, ins, "left") + np.arange(ins.size, dtype=np.int64)
    total = kept.size + ins.size
    src = np.empty(total, np.int64)  # each output row's row in (old rows, then new rows)
    src[row_old] = kept
    src[row_new] = n + np.arange(ins.size, dtype=np.int64)

    def scatter(old: np.ndarray, added: np.ndarray) -> np.ndarray:
        # one gather (take copies whole rows) instead of two fancy-index scatters: 3-5x faster
        return np.concatenate([old, added.astype(old.dtype, copy=False)]).take(src, axis=0)

    lens = scatter(stream.var_len, new.var_len.astype(stream.var_len.dtype))
    src_off = scatter(stream.var_off, new.var_off + stream.pool.shape[0])
    off = np.zeros(total, np.int64)
    np.cumsum(lens[:-1].astype(np.int64), out=off[1:])
    pool = np.concatenate([stream.pool, new.pool])[ragged_index(src_off, lens)]
    return Stream(stream.header, stream.decls, scatter(stream.op, new.op), scatter(stream.args, new.args), off,
                  lens, pool, scatter(stream.flags, new.flags), scatter(stream.line, new.line), stream.strings)


class StreamBuilder:
    """Builds a stream from Python calls (the library API for small streams and tests).

    >>> b = StreamBuilder(fast_semantics=True)
    >>> b.buffer("verts", size=1 << 20)
    >>> b.target("rt", 64, 64, "R8G8B8A8_UNORM")
    >>> b.pipeline("p", vs="pull", ps="flat")
    >>> b.OMSetRenderTargets("rt")
    >>> b.SetPipelineState("p")
    >>> b.DrawInstanced(6, 1, 0, 0)
    >>> len(b.build())
    3

    Every command of :mod:`drawopt.ir.ops` is a method named after it; fixed
    arguments come first, then the variadic ones, keyword arguments by name, and
    ``flags="nomerge"`` marks a draw the passes must leave alone.
    """

    def __init__(self, context: str = "graphics", kind: str = "list", fast_semantics: bool = False,
                 auto_gpu_flush: bool = True, header: Header | None = None, decls: Decls | None = None):
        self.header = header or Header(1, context, kind, fast_semantics, auto_gpu_flush)
        self.decls = decls if decls is not None else Decls()
        self.strings: list[str] = []
        self.cb = CommandBuffer()

    # declarations
    def declare(self, d: Decl) -> Decl:
        self.decls.add(d)
        return d

    def buffer(self, name: str, size: int, cpu: bool = False, data: Any = None, frontend: bool = False) -> None:
        self.declare(Buffer(name, size, cpu, None if data is None else np.asarray(data), frontend))

    def texture(self, name: str, width: int, height: int, format: str) -> None:
        self.declare(Texture(name, width, height, format))

    def target(self, name: str, width: int, height: int, format: str = "R8G8B8A8_UNORM") -> None:
        self.declare(Target(name, width, height, format))

    def depth(self, name: str, width: int, height: int, format: str = "D32_FLOAT") -> None:
        self.declare(Depth(name, width, height, format))

    def heap(self, name: str, type: str = "CBV_SRV_UAV", size: int = 1024) -> None:
        self.declare(Heap(name, type, size))

    def view(self, heap: str, slot: int, view: str, resource: str | None = None) -> None:
        self.declare(View(heap, slot, view, resource))

    def rootsig(self, name: str, *params: str) -> None:
        self.declare(RootSig(name, tuple(RootParam.parse(p) for p in params)))

    def pipeline(self, name: str, **kw: Any) -> None:
        for k in ("params", "reads", "writes"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        self.declare(Pipeline(name, **kw))

    # commands
    def cmd(self, name: str, *values: Any, flags: int | str = 0, line: int = 0, **kw: Any) -> None:
        """Append command ``name``; values are encoded as :func:`drawopt.ir.codec.encode` does."""
        sp = BY_NAME[name]
        row, var = encode_command(sp, list(values), kw, self.decls, self.strings)
        if isinstance(flags, str):
            flags = sum(FLAG_NAMES[f] for f in flags.split(",") if f)
        self.cb.append(sp.code, row, var, flags, line)

    def __getattr__(self, name: str) -> Any:
        if name in BY_NAME:
            return lambda *a, **kw: self.cmd(name, *a, **kw)
        raise AttributeError(name)

    def build(self, check: bool = True) -> Stream:
        s = self.cb.build(self.header, self.decls, self.strings)
        if check:
            s.check()
        return s


def encode_command(sp: OpSpec, values: list[Any], kw: dict[str, Any], decls: Decls,
                   strings: list[str]) -> tuple[list[int], list[int]]:
    """Encode positional ``values`` and keyword ``kw`` of command ``sp``.

    Positional values fill the non-keyword fixed arguments in order, then the
    variadic tail; optional positionals may be left out. Raises ``ValueError``
    (with ``.argpos`` set to the offending position when known).
    """
    row: list[int] = [0] * len(sp.args)
    positional = [j for j, a in enumerate(sp.args) if not a.keyword]
    required = [j for j in positional if not sp.args[j].optional]
    nfixed = len(positional)
    if sp.var is None and len(values) > nfixed:
        raise _argerr(f"{sp.name} takes at most {nfixed} arguments, got {len(values)}", nfixed)
    if len(values) < len(required):
        raise _argerr(f"{sp.name} needs {len(required)} arguments "
                      f"({', '.join(sp.args[j].name for j in required)}), got {len(values)}", len(values))
    if sp.var is not None:
        fixed_vals, var_vals = values[:len(required)], values[len(required):]
        # optional positionals are only allowed for commands without a variadic tail
    else:
        fixed_vals, var_vals = values, []
    seen = set()
    for pos, (j, v) in enumerate(zip(positional, fixed_vals)):
        try:
            row[j] = codec.encode(sp.args[j], v, decls, strings)
        except ValueError as e:
            raise _argerr(str(e), pos) from None
        seen.add(j)
    for j, a in enumerate(sp.args):
        if a.keyword and a.name in kw:
            try:
                row[j] = codec.encode(a, kw.pop(a.name), decls, strings)
            except ValueError as e:
                raise _argerr(str(e), -2, a.name) from None
            seen.add(j)
        elif j not in seen:
            if a.optional:
                row[j] = a.default  # type: ignore[assignment]
    if kw:
        raise _argerr(f"{sp.name}: unknown keyword {next(iter(kw))}=", -2, next(iter(kw)))
    var: list[int] = []
    if sp.var is not None:
        if not sp.var_min <= len(var_vals) <= sp.var_max:
            raise _argerr(f"{sp.name} takes {sp.var_min}..{sp.var_max} {sp.var.name}, got {len(var_vals)}",
                          len(values))
        for pos, v in enumerate(var_vals):
            try:
                var.append(codec.encode(sp.var, v, decls, strings))
            except ValueError as e:
                raise _argerr(str(e), len(fixed_vals) + pos) from None
    return row, var


def _argerr(msg: str, pos: int, key: str | None = None) -> ValueError:
    e = ValueError(msg)
    e.argpos = pos  # type: ignore[attr-defined]
    e.argkey = key  # type: ignore[attr-defined]
    return e


def index_size(fmt: int) -> int:
    """Bytes per index of stored IndexFormat ``fmt``."""
    return INDEX_SIZE[int(fmt)]


def iter_decoded(s: Stream) -> Iterable[tuple[int, Command]]:
    """``(index, command)`` pairs, decoded (small streams)."""
    for i in range(len(s)):
        yield i, s.command(i)


_ = (Target, Texture, Depth, Heap, View, Pipeline, RootSig, Cat)
