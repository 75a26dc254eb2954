"""Mutation suite, generated: wrong rewrites made automatically from real optimizer outputs (issue 12).

Every bundled example and every generated kind is optimized with the default pipeline of a
wave-packing target (xbox-one) and of d3d12; the outputs verify. Each *operator* below then edits
an output in a way that is wrong by construction (its docstring says why), at the first sites
where that holds, and the verifier must reject the mutant against the original input. An operator
finds its sites from the stream itself (decoded commands, declarations), not from the optimizer's
analyses, so a pass that stops producing a shape makes the "every operator applies" test fail
instead of silently shrinking the suite.

The hand-written kinds are in ``tests/test_mutations.py``; together they are the mutation suite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from drawopt.gen import generate
from drawopt.ir.decls import Buffer, Pipeline
from drawopt.ir.formats import load
from drawopt.ir.ops import BY_NAME, Cat
from drawopt.ir.stream import Stream
from drawopt.result import optimize
from drawopt.verify import verify

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TARGETS = ("xbox-one", "d3d12")
SITES = 1
"""Mutants per operator and output (the first sites where the edit is wrong by construction)."""


@cache
def inputs() -> dict[str, Stream]:
    """Every example and every generated kind (two seeds), by name."""
    out = {f"example {p.stem}": load(str(p)) for p in sorted(EXAMPLES.glob("*.dstream"))}
    for kind, n in (("quads", 400), ("frame", 600), ("gpu-driven", 400), ("bundle", 300)):
        for seed in (1, 2):
            out[f"{kind} seed {seed}"] = generate(kind, n, seed=seed)
    return out


@cache
def outputs() -> list[tuple[str, Stream, Stream, str]]:
    """(name, input, optimized output, reorder policy) for every input and target that changed it."""
    res = []
    for name, s in inputs().items():
        for target in TARGETS:
            out = optimize(s, target=target).stream
            if out is not s:
                res.append((f"{name} / {target}", s, out, out.header.reorder or "declared"))
    return res


# --------------------------------------------------------------------------- reading a stream
_OP = {n: BY_NAME[n].code for n in BY_NAME}
_DIRECT = ("DrawInstanced", "DrawIndexedInstanced")


@dataclass
class Walk:
    """The pipeline and root-parameter writers in force at every command (a plain walk, for tests)."""

    pipeline: list[Pipeline | None]

    @classmethod
    def of(cls, s: Stream) -> Walk:
        cur: Pipeline | None = None
        seen: list[Pipeline | None] = []
        for i in range(len(s)):
            if s.op[i] == _OP["SetPipelineState"]:
                cur = s.decls[int(s.args[i, 0])]
            seen.append(cur)
        return cls(seen)


def where(s: Stream, *names: str) -> np.ndarray:
    return np.flatnonzero(s.mask(*names))


def with_arg(s: Stream, i: int, col: str, delta: int) -> Stream:
    t = s.copy()
    t.args[i, s.spec(i).col(col)] += delta
    return t


def without(s: Stream, *drop: int) -> Stream:
    return s.take([j for j in range(len(s)) if j not in set(drop)])


def moved(s: Stream, i: int, before: int) -> Stream:
    """Command ``i`` moved to just before command ``before``."""
    idx = [j for j in range(len(s)) if j != i]
    idx.insert(idx.index(before), i)
    return s.take(idx)


def next_draw(s: Stream, i: int) -> int | None:
    """The first draw or dispatch after command ``i``."""
    cats = s.cats()
    later = np.flatnonzero(cats[i + 1:] == int(Cat.DRAW))
    return int(i + 1 + later[0]) if later.size else None


def _reads_param(p: Pipeline | None, param: int) -> bool:
    """``p`` reads root parameter ``param`` as plain state (no contract could move it into a record)."""
    return p is not None and not p.contract and (p.params is None or param in p.params)


def next_indexed_read(s: Stream, i: int) -> int | None:
    """The first draw after ``i`` that reads the bound index buffer, if no re-bind or DrawIndexedX comes first."""
    stop = {_OP["IASetIndexBuffer"], _OP["DrawIndexedX"]}
    readers = {_OP["DrawIndexedInstanced"], _OP["MultiDrawIndexedInstancedIndirect"],
               _OP["DrawIndexedInstancedIndirect"]}
    for j in range(i + 1, len(s)):
        if int(s.op[j]) in readers:
            return j
        if int(s.op[j]) in stop:
            return None
    return None


# --------------------------------------------------------------------------- the operators
@dataclass(frozen=True)
class Operator:
    kind: str
    why: str
    sites: Callable[[Stream], Iterator[Stream]]


OPERATORS: list[Operator] = []


def operator(kind: str) -> Callable:
    def deco(fn: Callable[[Stream], Iterator[Stream]]) -> Callable:
        OPERATORS.append(Operator(kind, (fn.__doc__ or "").strip(), fn))
        return fn
    return deco


@operator("draw-count-plus-one")
def _count(s: Stream) -> Iterator[Stream]:
    """A direct draw draws one more vertex/index: records for positions the input never drew."""
    for i in where(s, *_DIRECT):
        col = "vertex_count" if s.op[i] == _OP["DrawInstanced"] else "index_count"
        yield with_arg(s, int(i), col, 3)


@operator("instance-count-plus-one")
def _instances(s: Stream) -> Iterator[Stream]:
    """A direct draw draws one more instance: a whole extra instance of records."""
    for i in where(s, *_DIRECT):
        yield with_arg(s, int(i), "instance_count", 1)


@operator("start-index-shift")
def _start_index(s: Stream) -> Iterator[Stream]:
    """An indexed draw starts one index later: every record's resolved index source moves by one index."""
    for i in where(s, "DrawIndexedInstanced"):
        yield with_arg(s, int(i), "start_index", 1)


@operator("base-vertex-shift")
def _base_vertex(s: Stream) -> Iterator[Stream]:
    """An indexed draw of an input-layout pipeline fetches from one vertex later (D3D adds the base vertex
    to every index before the input assembler fetches)."""
    w = Walk.of(s)
    for i in where(s, "DrawIndexedInstanced"):
        p = w.pipeline[i]
        if p is not None and p.layout != "none":
            yield with_arg(s, int(i), "base_vertex", 1)


@operator("drop-draw-call")
def _drop(s: Stream) -> Iterator[Stream]:
    """A draw call of the output is deleted: its records are missing."""
    for i in where(s, *_DIRECT, "DrawIndexedX", "MultiDrawIndexedInstancedIndirect", "MultiDrawInstancedIndirect"):
        yield without(s, int(i))


@operator("duplicate-draw-call")
def _dup(s: Stream) -> Iterator[Stream]:
    """A draw call is issued twice: its records appear twice (blending and depth make that visible)."""
    for i in where(s, *_DIRECT):
        idx = list(range(len(s)))
        yield s.take(idx[:i + 1] + [int(i)] + idx[i + 1:])


@operator("root-constant-changed")
def _consts(s: Stream) -> Iterator[Stream]:
    """A root-constant value changes where the next draw's pipeline reads that parameter."""
    w = Walk.of(s)
    for i in where(s, "SetGraphicsRoot32BitConstants"):
        d = next_draw(s, int(i))
        param = int(s.args[i, 0])
        between = s.op[i + 1:d] if d is not None else []
        if d is None or _OP["SetGraphicsRoot32BitConstants"] in between or not _reads_param(w.pipeline[d], param):
            continue
        if s.var_len[i] == 0:
            continue
        t = s.copy()
        t.pool = t.pool.copy()
        t.pool[t.var_off[i]] = (int(t.pool[t.var_off[i]]) + 1) & 0xFFFFFFFF
        yield t


@operator("pipeline-set-dropped")
def _pipe(s: Stream) -> Iterator[Stream]:
    """A SetPipelineState that switches to a pipeline with other shaders is deleted: the next draw runs
    the previous pipeline's shaders."""
    w = Walk.of(s)
    for i in where(s, "SetPipelineState")[1:]:
        prev, cur = w.pipeline[i - 1], w.pipeline[i]
        d = next_draw(s, int(i))
        if d is None or prev is None or cur is None or _OP["SetPipelineState"] in s.op[i + 1:d]:
            continue
        if (prev.vs, prev.ps, prev.cs) != (cur.vs, cur.ps, cur.cs) and s.cats()[d] == int(Cat.DRAW) and cur.cs is None:
            yield without(s, int(i))


@operator("render-target-changed")
def _target(s: Stream) -> Iterator[Stream]:
    """The draws after an OMSetRenderTargets go to another declared render target (every draw writes its
    render target, so the records move from one target to the other)."""
    names = [d.name for d in s.decls if d.kind == "target"]
    if len(names) < 2:
        return
    for i in where(s, "OMSetRenderTargets"):
        if s.var_len[i] == 0 or next_draw(s, int(i)) is None:
            continue
        t = s.copy()
        t.pool = t.pool.copy()
        cur = s.decls[int(t.pool[t.var_off[i]])]
        if cur.kind != "target":
            continue
        other = next(n for n in names if n != cur.name)
        t.pool[t.var_off[i]] = s.decls.index[other]
        yield t


@operator("index-format-changed")
def _ib_format(s: Stream) -> Iterator[Stream]:
    """An index buffer bound as R16 is bound as R32 (or the reverse) before a draw that reads it: every index
    it reads differs (DrawIndexedX names its own index buffer, so it does not count as a reader)."""
    for i in where(s, "IASetIndexBuffer"):
        if next_indexed_read(s, int(i)) is not None:
            t = s.copy()
            col = s.spec(int(i)).col("format")
            t.args[i, col] = 1 - int(t.args[i, col])       # R16_UINT <-> R32_UINT
            yield t


@operator("index-buffer-offset-shift")
def _ib_offset(s: Stream) -> Iterator[Stream]:
    """An index buffer is bound one 4-byte word later before a draw that reads it: it reads other indices."""
    for i in where(s, "IASetIndexBuffer"):
        if next_indexed_read(s, int(i)) is not None:
            yield with_arg(s, int(i), "offset", 4)


@operator("vertex-buffer-offset-shift")
def _vb(s: Stream) -> Iterator[Stream]:
    """Slot 0's vertex buffer is bound one stride later before an input-layout draw: it fetches other vertices."""
    w = Walk.of(s)
    for i in where(s, "IASetVertexBuffers"):
        d = next_draw(s, int(i))
        if d is None or int(s.args[i, 0]) != 0 or int(s.args[i, 3]) == 0:
            continue
        p = w.pipeline[d]
        if p is not None and p.layout != "none" and s.op[d] in (_OP["DrawInstanced"], _OP["DrawIndexedInstanced"]):
            yield with_arg(s, int(i), "offset", int(s.args[i, 3]))


@operator("topology-changed")
def _topology(s: Stream) -> Iterator[Stream]:
    """A triangle list becomes a triangle strip: the same indices make other primitives."""
    for i in where(s, "IASetPrimitiveTopology"):
        if next_draw(s, int(i)) is None:
            continue
        t = s.copy()
        cur = int(t.args[i, 0])
        t.args[i, 0] = cur + 1 if cur + 1 < len(BY_NAME["IASetPrimitiveTopology"].args[0].values) else cur - 1
        yield t


@operator("viewport-changed")
def _viewport(s: Stream) -> Iterator[Stream]:
    """A viewport's width changes by one pixel before a draw: rasterisation differs."""
    for i in where(s, "RSSetViewports"):
        if next_draw(s, int(i)) is not None:
            t = s.copy()
            t.args[i, s.spec(int(i)).col("width")] += 1 << 23  # +1 in the exponent field of the f32 bits
            yield t


@operator("drop-l2-flush-before-gpu-args")
def _drop_l2(s: Stream) -> Iterator[Stream]:
    """The FlushGpuCacheRange that lets the front end read GPU-written arguments next is deleted (the
    optimizer's flush pass leaves no redundant one before such a read)."""
    ind = gpu_args_reads(s)
    flushes = where(s, "FlushGpuCacheRange", "FlushGpuCachesBottomOfPipe")
    for i in flushes:
        later, again = ind[ind > i], flushes[flushes > i]
        if later.size and (not again.size or again[0] > later[0]):
            yield without(s, int(i))


@operator("drop-partial-flush")
def _drop_partial(s: Stream) -> Iterator[Stream]:
    """A required CS/VS/PS_PARTIAL_FLUSH before an L2 flush is deleted."""
    for i in where(s, "GpuSendPipelinedEvent"):
        yield without(s, int(i))


def gpu_args_reads(s: Stream) -> np.ndarray:
    """Indirect draws whose args buffer the CPU does not write (so a GPU writer filled it)."""
    ind = where(s, *(n for n in BY_NAME if "Indirect" in n))
    keep = []
    for i in ind:
        col = s.spec(int(i)).col("args_buffer")
        b = s.decls[int(s.args[i, col])]
        if isinstance(b, Buffer) and not b.cpu:
            keep.append(int(i))
    return np.array(keep, np.int64)


def moved_past_next_gpu_args_read(s: Stream, name: str) -> Iterator[Stream]:
    """Each command ``name`` moved to just after the next read of GPU-written args."""
    ind = gpu_args_reads(s)
    for i in where(s, name):
        later = ind[ind > i]
        if later.size and int(later[0]) + 1 < len(s):
            yield moved(s, int(i), int(later[0]) + 1)


@operator("flush-after-its-reader")
def _flush_late(s: Stream) -> Iterator[Stream]:
    """The L2 flush before a read of GPU-written args is moved after that read: the read sees stale data."""
    return moved_past_next_gpu_args_read(s, "FlushGpuCacheRange")


@operator("drop-barrier")
def _drop_barrier(s: Stream) -> Iterator[Stream]:
    """A ResourceBarrier the input has is deleted: the output is missing a transition the input made."""
    for i in where(s, "ResourceBarrier"):
        yield without(s, int(i))


@operator("dispatch-size-changed")
def _dispatch(s: Stream) -> Iterator[Stream]:
    """A Dispatch launches one more thread group in x: its records differ."""
    for i in where(s, "Dispatch"):
        yield with_arg(s, int(i), "x", 1)


@operator("dispatch-after-its-reader")
def _dispatch_late(s: Stream) -> Iterator[Stream]:
    """A Dispatch that writes indirect arguments moves after the draw that reads them."""
    return moved_past_next_gpu_args_read(s, "Dispatch")


@operator("multi-draw-count-minus-one")
def _mdi_count(s: Stream) -> Iterator[Stream]:
    """A multi-draw of CPU-known records draws one record fewer: the last draw it stands for is missing."""
    for i in where(s, "MultiDrawIndexedInstancedIndirect", "MultiDrawInstancedIndirect"):
        if int(s.args[i, 0]) > 1:
            yield with_arg(s, int(i), "count", -1)


@operator("multi-draw-offset-shift")
def _mdi_offset(s: Stream) -> Iterator[Stream]:
    """A multi-draw reads its records from one record later: every draw it stands for shifts."""
    for i in where(s, "MultiDrawIndexedInstancedIndirect", "MultiDrawInstancedIndirect"):
        if int(s.args[i, 0]) > 1:
            yield with_arg(with_arg(s, int(i), "count", -1), int(i), "offset", int(s.args[i, 3]))


@operator("generated-args-record-changed")
def _args_data(s: Stream) -> Iterator[Stream]:
    """One word of a buffer the optimizer generated (multi-draw args or per-draw records) changes: the draw
    that reads it sees another count, base or lifted value."""
    for d in s.decls:
        if isinstance(d, Buffer) and d.data is not None and d.data.size and d.name.startswith(("mdi_", "packx")):
            for k in (0, int(d.data.size) // 2):
                t = s.copy()
                data = np.array(d.data, copy=True)
                data[k] = (int(data[k]) + 1) & 0xFFFFFFFF
                t.decls = t.decls.copy()
                t.decls.replace(dataclasses.replace(d, data=data))
                yield t


@operator("perdraw-array-binding-dropped")
def _perdraw(s: Stream) -> Iterator[Stream]:
    """The binding of a generated per-draw array is deleted: the draws read no (or another) record array."""
    for i in where(s, "SetGraphicsRootShaderResourceView", "SetGraphicsRootConstantBufferView"):
        name = s.decls[int(s.args[i, 1])].name
        if name.startswith(("mdi_perdraw", "packx")):
            yield without(s, int(i))


@operator("index-buffer-rebind-dropped")
def _rebind(s: Stream) -> Iterator[Stream]:
    """The IASetIndexBuffer after a DrawIndexedX run is deleted: DrawIndexedX left the index buffer undefined."""
    x = where(s, "DrawIndexedX")
    for i in where(s, "IASetIndexBuffer"):
        if x.size and x.min() < i:
            d = next_draw(s, int(i))
            if d is not None and s.op[d] == _OP["DrawIndexedInstanced"]:
                yield without(s, int(i))


@operator("drawindexedx-slot-shift")
def _x_slot(s: Stream) -> Iterator[Stream]:
    """A DrawIndexedX's IndexOffset moves by one draw slot (2^K) onto a slot whose per-draw record differs:
    it draws with its neighbour's base vertex, instance or lifted values."""
    w = Walk.of(s)
    bound: dict[int, int] = {}
    for i in range(len(s)):
        if s.op[i] in (_OP["SetGraphicsRootShaderResourceView"], _OP["SetGraphicsRootConstantBufferView"]):
            bound[int(s.args[i, 0])] = i
        if s.op[i] != _OP["DrawIndexedX"] or w.pipeline[i] is None:
            continue
        x = w.pipeline[i].contract.x
        k = x.vertex_bits if x is not None else 16
        perdraw = x.perdraw if x is not None and x.perdraw is not None else -1
        words = x.record_words if x is not None else 2
        if perdraw not in bound:
            continue
        b = bound[perdraw]
        buf = s.decls[int(s.args[b, 1])]
        slot = int(s.args[i, s.spec(i).col("index_offset")]) >> k
        base = int(s.args[b, 2]) // 4 + slot * words
        data = buf.data if isinstance(buf, Buffer) else None
        if data is None or base + 2 * words > data.size:
            continue
        if not np.array_equal(data[base:base + words], data[base + words:base + 2 * words]):
            yield with_arg(s, i, "index_offset", 1 << k)


@operator("bundle-exit-state-changed")
def _bundle_exit(s: Stream) -> Iterator[Stream]:
    """A bundle ends with another pipeline, or other root constants, than it did: the caller's draws after
    ExecuteBundle observe the bundle's exit state, so it is part of the bundle's effective records."""
    if s.header.kind != "bundle":
        return
    sets = where(s, "SetPipelineState")
    if sets.size:
        last = int(s.args[sets[-1], 0])
        other = next((d for d in s.decls if isinstance(d, Pipeline) and d.cs is None
                      and s.decls.index[d.name] != last), None)
        if other is not None:
            t = s.take(list(range(len(s))) + [int(sets[-1])])      # a copy of the last set, after every draw
            t.args[-1, 0] = s.decls.index[other.name]
            yield t
    consts = where(s, "SetGraphicsRoot32BitConstants")
    if consts.size:
        t = s.take(list(range(len(s))) + [int(consts[-1])])
        t.pool = t.pool.copy()
        t.pool[t.var_off[-1]] = (int(t.pool[t.var_off[-1]]) + 1) & 0xFFFFFFFF
        yield t


@operator("descriptor-table-dropped")
def _table(s: Stream) -> Iterator[Stream]:
    """A SetGraphicsRootDescriptorTable that changes the table the next draw reads is deleted."""
    w = Walk.of(s)
    tabs = where(s, "SetGraphicsRootDescriptorTable")
    for j, i in enumerate(tabs):
        d = next_draw(s, int(i))
        param = int(s.args[i, 0])
        if d is None or not _reads_param(w.pipeline[d], param):
            continue
        prev = [k for k in tabs[:j] if int(s.args[k, 0]) == param]
        if prev and _view(s, int(s.args[prev[-1], 1])) != _view(s, int(s.args[i, 1])) and \
                _OP["SetGraphicsRootDescriptorTable"] not in s.op[i + 1:d].tolist():
            yield without(s, int(i))


def _view(s: Stream, heapref: int) -> tuple[str, str | None] | None:
    """What the descriptor at ``heapref`` (``heap << 32 | slot``) views, or None when unknown."""
    name = f"{s.decls[heapref >> 32].name}[{heapref & 0xFFFFFFFF}]"
    if name not in s.decls:
        return None
    v = s.decls[name]
    return (v.view, v.resource)


KINDS = [op.kind for op in OPERATORS]


@cache
def cases() -> list[tuple[str, str, Stream, Stream, str]]:
    """(operator kind, site name, original, mutant, policy): the first SITES mutants of each output."""
    res = []
    for op in OPERATORS:
        for name, s, out, pol in outputs():
            for k, m in enumerate(op.sites(out)):
                if k == SITES:
                    break
                res.append((op.kind, f"{name} #{k}", s, m, pol))
    return res


def test_outputs_verify() -> None:
    for name, s, out, pol in outputs():
        r = verify(s, out, pol)
        assert r.equivalent, f"{name}: {r.reason}"


def test_every_operator_has_a_reason_and_applies_to_several_outputs() -> None:
    assert len(KINDS) == len(set(KINDS)) >= 24
    by_kind: dict[str, int] = {}
    for kind, *_ in cases():
        by_kind[kind] = by_kind.get(kind, 0) + 1
    for op in OPERATORS:
        assert op.why, op.kind
        assert by_kind.get(op.kind, 0) >= 2, f"{op.kind} found no site in the optimized outputs"


def test_mutation_suite_has_thirty_kinds() -> None:
    from test_mutations import KINDS as HAND_WRITTEN
    assert len(set(HAND_WRITTEN) | set(KINDS)) >= 30


@pytest.mark.parametrize("kind", KINDS)
def test_generated_mutants_are_rejected(kind: str) -> None:
    mine = [c for c in cases() if c[0] == kind]
    accepted = []
    for _, name, s, m, pol in mine:
        r = verify(s, m, pol)
        if r.equivalent:
            accepted.append(name)
        else:
            assert r.reason and (r.line_a is not None or r.line_b is not None or r.details.get("kind") == "rule"), name
    assert not accepted, f"{kind}: accepted on {accepted}"
