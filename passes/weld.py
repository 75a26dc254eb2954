"""``weld``: non-indexed triangle-list draws become indexed draws over a generated index buffer.

The quads post's method 1 collapses (``merge-instances``' window fold) into one
``DrawInstanced 6N 1 0 0``: a batched triangle list, 6 vertex-shader invocations per
quad where an index buffer needs 4, because the 6 vertices of a quad repeat two of
them byte for byte. Welding identical vertices into an indexed draw is the classic
offline mesh optimisation (meshoptimizer's ``generateVertexRemap``); it is legal
exactly when the vertex shader cannot see ``SV_VertexID`` (the ``no_vertex_id``
contract, docs/architecture.md "Rewrite contracts"): its output is then a function
of the fetched attribute bytes (plus the instance and root state), so two vertices
with equal bytes give equal outputs. The triangles, their order and their
provoking vertices keep their bytes, so the frame is unchanged (``SV_PrimitiveID``
too: the same triangles in the same order).

**Candidates.** A ``DrawInstanced`` of a pipeline with an input layout (not vertex
pulling) that declares ``no_vertex_id`` and no per-draw contract (``x``,
``instance_data``, ``draw_data``), neither ``never_merge`` nor ``@nomerge``, with the
``TRIANGLELIST`` topology, at least 3 vertices and one instance, in a command list
(not a bundle: its index-buffer binding would leak to the caller), before any
``Opaque`` command, whose bound vertex buffers (at least one; every bound slot,
since the input layout's slots are not declared) are CPU-written with contents in
the stream (``Buffer.cpu`` with ``data``, as ``drawopt gen --kind quads --set
data=on`` makes them), never written on the GPU in the stream (no pipeline
``writes=``, no UAV view of them, not a copy destination), with every vertex of
the draw inside those contents and a non-zero stride.

**The weld.** A vertex's *row* is the bytes of its element in every bound slot
(``stride`` bytes at ``offset + v * stride``; an input layout reads a vertex's
elements inside its stride). For every position of a draw, the index is the first
vertex of the draw with the same row (rows hashed, then compared exactly:
vectorised over all candidates). Indices are vertex numbers of the binding
(``StartVertexLocation + k``; ``BaseVertexLocation`` 0), so position 0 indexes the
draw's first vertex and the welded draw fetches, position for position, the bytes
the original fetched. A draw is welded when its unique vertices are at most
``1 - min_saving`` of its vertices.

**The rewrite.** Consecutive welded draws with no other index-buffer event between
them (``IASetIndexBuffer``, an indexed draw, ``DrawIndexedX``) form a *run* that
shares one section of the generated buffer ``weld_ibK`` (the first free name;
declared ``cpu`` with its contents; sections 4-byte aligned), ``R16_UINT`` when
every index of the run is below 0xFFFF, else ``R32_UINT``. ``IASetIndexBuffer
weld_ibK FMT OFF`` goes right before the run's first draw; each draw becomes
``DrawIndexedInstanced count inst startIndex 0 startInstance``. Draws of a run with
the same index sequence share one copy of it (method 1 as recorded: every window's
draw reads ``0 1 2 2 1 5``). If the next
index-buffer event after the run is an indexed draw (it read the index buffer in
force before the run), the ``IASetIndexBuffer`` that set it is re-issued right after
the run's last draw (as ``flush`` does after ``DrawIndexedX`` runs); nothing is
needed where the index buffer was undefined there. A run is kept only where (unless ``force``)
:func:`drawopt.analysis.costmodel.weld_pays_off` says the vertex-shader invocations it saves
outweigh the ``IASetIndexBuffer`` calls it adds on the target.

The verifier recognises a welded draw (``drawopt.verify.records``, ``_deweld``):
an indexed draw of such a pipeline whose every index position fetches the bytes of
vertex ``S + i`` (``S`` the vertex its first index fetches) is compared as
``DrawInstanced count inst S``; a weld pointing at a vertex with other bytes is not.
"""

from __future__ import annotations

__all__ = ["WeldPass", "WeldPlan", "plan_weld"]

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from drawopt.analysis.access import may_gpu_write
from drawopt.analysis.costmodel import weld_pays_off
from drawopt.analysis.flushrules import forward_fill
from drawopt.analysis.state import PIPELINE, TOPOLOGY, VB, StateTable
from drawopt.errors import UsageError
from drawopt.ir import arrayset
from drawopt.ir.decls import Buffer, Pipeline
from drawopt.ir.ops import BY_NAME, COL_PIPELINE, INDEXED_DRAW_OPS, U32_MAX, Op
from drawopt.ir.stream import FLAG_NOMERGE, Stream, splice
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_DI = BY_NAME["DrawInstanced"].code
_DII = BY_NAME["DrawIndexedInstanced"].code
_DI_VERTS, _DI_INST, _DI_START = (Op.DrawInstanced.col(a) for a in ("vertex_count", "instance_count", "start_vertex"))
_IA = BY_NAME["IASetIndexBuffer"].code
_DX = BY_NAME["DrawIndexedX"].code
_OPAQUE = BY_NAME["Opaque"].code
_COPY = BY_NAME["CopyBufferRegion"].code
_SPV = BY_NAME["SetPipelineState"].code
_INDEXED = np.array(sorted(INDEXED_DRAW_OPS), np.uint16)
R16, R32 = 0, 1
_CHUNK_BYTES = 1 << 26
"""Row bytes gathered at once."""


@dataclass
class WeldPlan:
    """What :func:`plan_weld` decided.

    ``draws``: command indices of the welded draws (stream order); ``first``: offset of
    each one's indices in ``indices``, ``unique``: its unique vertices; ``run``: its run;
    ``run_fmt``/``run_off``: each run's index format and byte offset in the buffer;
    ``run_restore``: the ``IASetIndexBuffer`` to re-issue after the run (-1: none);
    ``words``: the buffer's contents; ``skipped``: draws left alone, by reason.
    """

    draws: np.ndarray
    first: np.ndarray
    unique: np.ndarray
    run: np.ndarray
    run_fmt: np.ndarray
    run_off: np.ndarray
    run_restore: np.ndarray
    words: np.ndarray
    nbytes: int = 0
    candidates: int = 0
    vertices: int = 0
    unique_vertices: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


def _empty_plan(**kw: Any) -> WeldPlan:
    z = np.zeros(0, np.int64)
    return WeldPlan(z, z, z, z, z, z, z, np.zeros(0, np.uint32), **kw)


def _hash_bytes(rows: np.ndarray) -> np.ndarray:
    """One 64-bit hash per row of the ``uint8`` matrix ``rows`` (splitmix64 over 8-byte words)."""
    n, w = rows.shape
    pad = (-w) % 8
    if pad:
        rows = np.concatenate([rows, np.zeros((n, pad), np.uint8)], axis=1)
    words = np.ascontiguousarray(rows).view(np.uint64)
    h = np.full(n, np.uint64(0x243F6A8885A308D3), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            z = h * np.uint64(0x9E3779B97F4A7C15) + words[:, j]
            z ^= z >> np.uint64(30)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(27)
            z *= np.uint64(0x94D049BB133111EB)
            h = z ^ (z >> np.uint64(31))
    return h.view(np.int64)


def _bindings(stream: Stream, table: StateTable, sid: np.ndarray, nomem: np.ndarray,
              skipped: dict[str, int]) -> tuple[np.ndarray, list[tuple]]:
    """Per draw, the index of its (decoded, usable) vertex-buffer binding in the returned
    list, or -1. A binding is a tuple of ``(slot, buffer index, offset, stride)``."""
    assert table.scan is not None
    vals = table.rows[sid, VB]
    out = np.full(sid.size, -1, np.int64)
    uniq, inv = np.unique(vals, return_inverse=True)
    inv = inv.reshape(-1)
    decls = stream.decls
    shapes: list[tuple] = []
    index: dict[tuple, int] = {}
    ok_u = np.full(uniq.size, -1, np.int64)
    why_u: list[str] = [""] * uniq.size
    for u, v in enumerate(uniq.tolist()):
        val = table.scan.values.decode(int(v)) if v >= 0 else None
        if not isinstance(val, tuple) or not val or any(not isinstance(e, tuple) or len(e) != 4 for e in val):
            why_u[u] = "unknown_vertex_buffers"
            continue
        binding = []
        for slot, name, off, stride in val:
            d = decls[name] if name in decls else None
            if not isinstance(d, Buffer) or not d.cpu or d.data is None:
                why_u[u] = "unknown_contents"
                break
            if nomem[decls.index[name]]:
                why_u[u] = "gpu_written"
                break
            if stride <= 0 or off < 0:
                why_u[u] = "stride"
                break
            binding.append((int(slot), decls.index[name], int(off), int(stride)))
        else:
            key = tuple(sorted(binding))
            ok_u[u] = index.setdefault(key, len(shapes))
            if ok_u[u] == len(shapes):
                shapes.append(key)
    out = ok_u[inv]
    per_u = np.bincount(inv, minlength=uniq.size)
    for u in np.flatnonzero(ok_u < 0).tolist():
        skipped[why_u[u]] = skipped.get(why_u[u], 0) + int(per_u[u])
    return out, shapes


@dataclass
class _Bindings:
    """Decoded vertex-buffer bindings: ``slots[b]`` the ``(slot, buffer, offset, stride)``
    tuples of binding ``b``; ``buf``/``off`` the same as ``int64[B, max slots]`` matrices."""

    slots: list[tuple]
    buf: np.ndarray
    off: np.ndarray
    stride: np.ndarray

    @classmethod
    def of(cls, slots: list[tuple]) -> _Bindings:
        k = max((len(x) for x in slots), default=0)
        buf = np.full((len(slots), k), -1, np.int64)
        off = np.zeros((len(slots), k), np.int64)
        stride = np.zeros((len(slots), k), np.int64)
        for b, key in enumerate(slots):
            for i, (_, bf, o, st) in enumerate(key):
                buf[b, i], off[b, i], stride[b, i] = bf, o, st
        return cls(slots, buf, off, stride)

    def rows(self, stream: Stream, bid: np.ndarray, vert: np.ndarray) -> np.ndarray:
        """The row bytes (``uint8[len(vert), W]``) of vertices ``vert`` under bindings ``bid``
        (all of one shape: the same slots and strides)."""
        key = self.slots[int(bid[0])]
        parts = []
        for k, (_, _, _, stride) in enumerate(key):
            offs, bufs = self.off[bid, k], self.buf[bid, k]
            part = np.zeros((vert.size, stride), np.uint8)
            cols = np.arange(stride, dtype=np.int64)
            for b in arrayset.unique(bufs).tolist():
                sel = np.flatnonzero(bufs == b)
                raw = stream.decls[b].data.astype("<u4", copy=False).view(np.uint8)
                part[sel] = raw[(offs[sel] + vert[sel] * stride)[:, None] + cols]
            parts.append(part)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def _dedupe(run: np.ndarray, cnt: np.ndarray, kstart: np.ndarray, jj: np.ndarray,
            vals: np.ndarray) -> np.ndarray:
    """For each draw, the first draw of its run with the same index sequence (itself if none).

    Sequences are hashed (a sum of per-position hashes of ``(position, value)``), then
    compared exactly; a collision keeps the draw's own copy."""
    n = run.size
    if n < 2:
        return np.arange(n, dtype=np.int64)
    ph = _hash_bytes(np.stack([jj, vals], axis=1).astype("<i8").view(np.uint8).reshape(-1, 16))
    with np.errstate(over="ignore"):
        dh = np.add.reduceat(ph.view(np.uint64), kstart).view(np.int64)
    o = np.lexsort((np.arange(n), dh, cnt, run))
    head = np.ones(n, bool)
    head[1:] = (run[o][1:] != run[o][:-1]) | (cnt[o][1:] != cnt[o][:-1]) | (dh[o][1:] != dh[o][:-1])
    own = np.empty(n, np.int64)
    own[o] = o[np.flatnonzero(head)][np.cumsum(head) - 1]
    moved = np.flatnonzero(own != np.arange(n))
    if moved.size:
        c = cnt[moved]
        k = np.repeat(np.arange(moved.size), c)
        off = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
        same = vals[kstart[moved][k] + off] == vals[kstart[own[moved]][k] + off]
        bad = np.bincount(k[~same], minlength=moved.size) > 0
        own[moved[bad]] = moved[bad]
    return own


def plan_weld(stream: Stream, table: StateTable, min_saving: float = 0.25, target: str = "d3d12",
              force: bool = False) -> WeldPlan:
    """Decide which draws to weld and build their indices (see the module docstring).

    ``force``: weld where the cost model says it does not pay (``min_saving`` still holds).
    """
    skipped: dict[str, int] = {}

    def skip(reason: str, mask: np.ndarray) -> None:
        c = int(np.count_nonzero(mask))
        if c:
            skipped[reason] = skipped.get(reason, 0) + c

    if stream.header.kind != "list" or stream.header.context != "graphics":
        return _empty_plan(skipped={"bundle" if stream.header.kind != "list" else "context": 1})
    assert table.scan is not None
    draws = table.draws.astype(np.int64)
    op = stream.op[draws]
    cand = op == _DI
    if not cand.any():
        return _empty_plan()
    decls = stream.decls
    sid = table.state.astype(np.int64)
    # the pipeline and its contract
    ps = table.setter[:, PIPELINE]
    pipe = np.where(ps >= 0, stream.args[np.maximum(ps, 0), COL_PIPELINE], -1)
    pipe = np.where((ps >= 0) & (stream.op[np.maximum(ps, 0)] == _SPV), pipe, -1)
    nd = len(decls)
    p_ok = np.zeros(nd + 1, bool)
    p_vid = np.zeros(nd + 1, bool)
    p_layout = np.zeros(nd + 1, bool)
    for i, d in enumerate(decls.items):
        if isinstance(d, Pipeline) and not d.is_compute and not d.vertex_pulling:
            p_layout[i] = True
            p_vid[i] = d.contract.no_vertex_id
            p_ok[i] = p_vid[i] and not d.never_merge and not d.contract.clauses
    pidx = np.where(pipe >= 0, pipe, nd)
    n_cand = int(cand.sum())
    skip("no_input_layout", cand & ~p_layout[pidx])
    skip("no_vertex_id", cand & p_layout[pidx] & ~p_vid[pidx])
    skip("contract", cand & p_vid[pidx] & ~p_ok[pidx])
    cand &= p_ok[pidx]
    skip("nomerge", cand & ((stream.flags[draws] & FLAG_NOMERGE) != 0))
    cand &= (stream.flags[draws] & FLAG_NOMERGE) == 0
    opq = np.flatnonzero(stream.op == _OPAQUE)
    if opq.size:
        skip("after_opaque", cand & (draws > opq[0]))
        cand &= draws < opq[0]
    topo = table.rows[sid, TOPOLOGY]
    tri = np.zeros(draws.size, bool)
    for v in arrayset.unique(topo[cand]).tolist():
        if v >= 0 and table.scan.values.decode(int(v)) == "TRIANGLELIST":
            tri |= topo == v
    skip("topology", cand & ~tri)
    cand &= tri
    args = stream.args.take(draws, axis=0)  # DrawInstanced rows
    small = (args[:, _DI_VERTS] < 3) | (args[:, _DI_INST] < 1)
    skip("small", cand & small)
    cand &= ~small
    ci = np.flatnonzero(cand)
    if not ci.size:
        return _empty_plan(candidates=n_cand, skipped=skipped)
    bid, slots = _bindings(stream, table, sid[ci], may_gpu_write(stream, table.scan), skipped)
    bindings = _Bindings.of(slots)
    ci, bid = ci[bid >= 0], bid[bid >= 0]
    # every vertex inside the contents
    count = args[ci, _DI_VERTS]
    start = args[ci, _DI_START]
    nbytes = np.array([d.data.size * 4 if isinstance(d, Buffer) and d.data is not None else 0
                       for d in decls.items] + [0], np.int64)
    inside = np.ones(ci.size, bool)
    for k in range(bindings.buf.shape[1]):
        buf = bindings.buf[bid, k]
        end = bindings.off[bid, k] + (start + count) * bindings.stride[bid, k]
        inside &= (buf < 0) | (end <= nbytes[buf])
    skip("outside_contents", ~inside)
    ci, bid, count, start = ci[inside], bid[inside], count[inside], start[inside]
    if not ci.size:
        return _empty_plan(candidates=n_cand, skipped=skipped)
    # ------------------------------------------------------------------ first occurrences
    P = int(count.sum())
    d = np.repeat(np.arange(ci.size), count)
    j = np.arange(P, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    vert = start[d] + j
    rep = np.arange(P, dtype=np.int64)  # position of the first equal row, per position
    shapes: dict[tuple, int] = {}
    shape_of = np.array([shapes.setdefault(tuple((s, st) for s, _, _, st in key), len(shapes))
                         for key in slots], np.int64)
    for sh in arrayset.unique(shape_of[bid]).tolist():
        pos = np.flatnonzero(shape_of[bid[d]] == sh)
        width = sum(k[3] for k in slots[int(bid[d[pos[0]]])])
        step = max(1, _CHUNK_BYTES // max(width, 1))
        h = np.empty(pos.size, np.int64)
        for lo in range(0, pos.size, step):
            p = pos[lo:lo + step]
            h[lo:lo + step] = _hash_bytes(bindings.rows(stream, bid[d[p]], vert[p]))
        o = np.lexsort((pos, h, d[pos]))
        ps_, hs, ds = pos[o], h[o], d[pos[o]]
        head = np.ones(ps_.size, bool)
        head[1:] = (hs[1:] != hs[:-1]) | (ds[1:] != ds[:-1])
        grp = np.cumsum(head) - 1
        rep[ps_] = ps_[np.flatnonzero(head)][grp]
        # exact check (a 64-bit collision keeps the vertex as its own)
        moved = pos[rep[pos] != pos]
        for lo in range(0, moved.size, step):
            p = moved[lo:lo + step]
            a = bindings.rows(stream, bid[d[p]], vert[p])
            b = bindings.rows(stream, bid[d[p]], vert[rep[p]])
            bad = ~(a == b).all(axis=1)
            rep[p[bad]] = p[bad]
    is_first = rep == np.arange(P)
    unique = np.bincount(d[is_first], minlength=ci.size).astype(np.int64)
    pays = unique <= (1.0 - min_saving) * count
    skip("saving", ~pays)
    index = vert[rep]  # vertex numbers of the binding (base vertex 0)
    # ------------------------------------------------------------------ runs and their index-buffer events
    n = len(stream)
    welded = np.zeros(ci.size, bool)
    welded[pays] = True
    wd = draws[ci[welded]]
    ia = np.flatnonzero(stream.op == _IA)
    other = np.flatnonzero(np.isin(stream.op, _INDEXED) | (stream.op == _DX) | (stream.op == _IA) |
                           (stream.op == _OPAQUE))
    ev = np.concatenate([wd, other])
    is_w = np.concatenate([np.ones(wd.size, bool), np.zeros(other.size, bool)])
    o = np.argsort(ev, kind="stable")
    ev, is_w = ev[o], is_w[o]
    newrun = is_w & ~np.r_[False, is_w[:-1]]
    run_of_ev = np.cumsum(newrun) - 1
    w_run = run_of_ev[is_w]
    nrun = int(newrun.sum())
    # the index buffer in force at each run (IASetIndexBuffer command, or -1: undefined)
    where = np.concatenate([ia, np.flatnonzero(stream.op == _DX)])
    vals = np.concatenate([ia, np.full(where.size - ia.size, -1, np.int64)])
    oo = np.argsort(where, kind="stable")
    ib_at = forward_fill(n, where[oo], vals[oo])
    run_first = ev[newrun]
    # a run ends where the next event is not welded; that event reads the index buffer
    # when it is an indexed draw or an Opaque command (which may read anything)
    nxt = np.flatnonzero(is_w & ~np.r_[is_w[1:], False]) + 1
    has_next = nxt < ev.size
    nxt_cmd = np.where(has_next, ev[np.minimum(nxt, ev.size - 1)], -1)
    reads_next = has_next & (np.isin(stream.op[np.maximum(nxt_cmd, 0)], _INDEXED) |
                             (stream.op[np.maximum(nxt_cmd, 0)] == _OPAQUE))
    restore = np.where(reads_next, ib_at[run_first], -1)
    # ------------------------------------------------------------------ cost per run
    inst = args[ci, _DI_INST]
    saved = np.bincount(w_run, weights=((count - unique) * inst)[welded], minlength=nrun)
    binds = 1 + (restore >= 0)
    keep_run = np.array([force or weld_pays_off(target, int(saved[r]), int(binds[r])) for r in range(nrun)], bool)
    top = np.zeros(nrun, np.int64)
    if wd.size:
        wmax = np.zeros(ci.size, np.int64)
        np.maximum.at(wmax, d, index)
        np.maximum.at(top, w_run, wmax[welded])
    keep_run &= top < U32_MAX
    skip("cost", np.isin(w_run, np.flatnonzero(~keep_run)))
    kept = keep_run[w_run]
    sel = np.flatnonzero(welded)[kept]   # candidate positions (into ci) welded in the end
    if not sel.size:
        return _empty_plan(candidates=n_cand, skipped=skipped, vertices=int(count.sum()),
                           unique_vertices=int(unique.sum()))
    # renumber the kept runs
    runs_kept = np.flatnonzero(keep_run)
    remap = np.full(nrun, -1, np.int64)
    remap[runs_kept] = np.arange(runs_kept.size)
    run = remap[w_run[kept]]
    fmt = np.where(top[runs_kept] < 0xFFFF, R16, R32)
    isz = np.where(fmt == R16, 2, 4)
    # the kept draws' positions, in order: draw k (0..K-1), position j, index value
    cnt_k = count[sel]
    pos_sel = np.isin(d, sel)
    k_of = np.full(ci.size, -1, np.int64)
    k_of[sel] = np.arange(sel.size)
    kk = k_of[d[pos_sel]]
    jj = j[pos_sel]
    vals_ = index[pos_sel]
    kstart = np.cumsum(cnt_k) - cnt_k   # first position of each draw in kk/jj/vals_
    # draws of a run with the same index sequence share one copy of it (one window per
    # quad: every draw reads indices 0 1 2 2 1 5)
    own = _dedupe(run, cnt_k, kstart, jj, vals_)
    stored = own == np.arange(sel.size)
    # sections: each run's stored indices, 4-byte aligned
    nidx = np.bincount(run[stored], weights=cnt_k[stored], minlength=runs_kept.size).astype(np.int64)
    sec_bytes = (nidx * isz + 3) // 4 * 4
    run_off = np.cumsum(sec_bytes) - sec_bytes
    total = int(sec_bytes.sum())
    raw = np.zeros(total, np.uint8)
    # start index of each stored draw within its run's section; the others take their copy's
    cs = np.zeros(sel.size, np.int64)
    cs[stored] = np.cumsum(cnt_k[stored]) - cnt_k[stored]
    fr = np.full(runs_kept.size, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(fr, run[stored], cs[stored])
    first_in_run = np.where(stored, cs - fr[run], 0)
    first_in_run = first_in_run[own]
    ps = stored[kk]
    rr = run[kk[ps]]
    addr = run_off[rr] + (first_in_run[kk[ps]] + jj[ps]) * isz[rr]
    v_ = vals_[ps]
    for b in range(4):
        m = isz[rr] > b
        raw[addr[m] + b] = (v_[m] >> (8 * b)) & 0xFF
    return WeldPlan(
        draws=draws[ci[sel]], first=first_in_run, unique=unique[sel], run=run, run_fmt=fmt, run_off=run_off,
        run_restore=restore[runs_kept], words=raw.view("<u4").astype(np.uint32), nbytes=total,
        candidates=n_cand, vertices=int(count[sel].sum()), unique_vertices=int(unique[sel].sum()),
        skipped=skipped)


@dataclass(frozen=True)
class WeldPass(Pass):
    """Index non-indexed triangle lists over generated index buffers (see the module docstring).

    Options: ``min_saving`` (the least fraction of a draw's vertices the weld must save,
    default 0.25: unique vertices at most 3/4 of them), ``force`` (weld where the cost model
    of the pipeline's target, ``am.target``, says it does not pay).
    """

    name: ClassVar[str] = "weld"
    requires: ClassVar[tuple[str, ...]] = ("state",)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "weld byte-equal vertices: non-indexed triangle lists become indexed draws"

    min_saving: float = 0.25
    force: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.min_saving < 1.0:
            raise UsageError(f"pass 'weld': min-saving must be in [0, 1), got {self.min_saving}")

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        table: StateTable = am.get("state", stream)
        plan = plan_weld(stream, table, self.min_saving, am.target, self.force)
        report: dict[str, Any] = {
            "candidates": plan.candidates, "welded_draws": int(plan.draws.size),
            "runs": int(plan.run_fmt.size), "vertices": plan.vertices, "unique_vertices": plan.unique_vertices,
            "unique_ratio": round(plan.unique_vertices / plan.vertices, 4) if plan.vertices else None,
            "index_bytes": plan.nbytes, "rebinds": int(np.count_nonzero(plan.run_restore >= 0)),
            "skipped": dict(sorted(plan.skipped.items())),
        }
        if not plan.draws.size:
            return PassResult.unchanged(stream, **report)
        name = stream.decls.free_name("weld_ib")
        report["index_buffer"] = name
        decls = stream.decls.copy()
        ib = decls.add(Buffer(name, max(plan.nbytes, 4), cpu=True, data=plan.words))
        op = stream.op.copy()
        args = stream.args.copy()
        w = plan.draws
        old = stream.args[w]
        op[w] = _DII
        args[w] = 0
        dii = Op.DrawIndexedInstanced
        args[w, dii.col("index_count")] = old[:, _DI_VERTS]
        args[w, dii.col("instance_count")] = old[:, _DI_INST]
        args[w, dii.col("start_index")] = plan.first
        args[w, dii.col("base_vertex")] = 0
        args[w, dii.col("start_instance")] = old[:, Op.DrawInstanced.col("start_instance")]
        out = Stream(stream.header, decls, op, args, stream.var_off, stream.var_len, stream.pool, stream.flags,
                     stream.line, stream.strings)
        inserts: dict[int, list[tuple[int, list[int], list[int]]]] = {}
        first_draw = np.full(plan.run_fmt.size, np.iinfo(np.int64).max, np.int64)
        last_draw = np.full(plan.run_fmt.size, -1, np.int64)
        np.maximum.at(last_draw, plan.run, w)
        np.minimum.at(first_draw, plan.run, w)
        for r in range(plan.run_fmt.size):
            inserts.setdefault(int(first_draw[r]), []).append(
                (_IA, [ib, int(plan.run_fmt[r]), int(plan.run_off[r])], []))
            src = int(plan.run_restore[r])
            if src >= 0:
                inserts.setdefault(int(last_draw[r]) + 1, []).append(
                    (_IA, stream.args[src].tolist(), stream.var(src).tolist()))
        return PassResult(splice(out, inserts), True, frozenset(), report)
