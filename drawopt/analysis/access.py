"""Resource access: which resources a draw or dispatch may write on the GPU (THE rule).

SPEC ("What a rewrite must also preserve"): **GPU writes are the pipeline's declared
``writes=`` plus every UAV reachable through the tables and root views bound when it
runs.** Precisely, an action (a draw with a graphics pipeline, a ``Dispatch`` with a
compute pipeline) writes

1. every resource its pipeline names in ``writes=`` (a resource or a ``heap[slot]``
   view of one);
2. for every root parameter the pipeline reads (:meth:`drawopt.ir.decls.Pipeline.read_params`)
   that is a descriptor table bound when it runs (graphics tables for draws, compute
   tables for dispatches; defined, not unknown): the resource of every ``uav`` view
   in the table's ``uav`` ranges, from the bound heap slot on, range after range
   (a view of another kind in a uav range, or a uav view in an srv range, is read,
   not written);
3. for every root parameter of kind ``uav`` it reads that has a buffer bound by a
   root-view command (``SetGraphicsRoot{ConstantBuffer,ShaderResource}View``): that
   buffer.

The stage class of every write is the pipeline's (:func:`writer_stage`:
CS for a dispatch, the ``uav_stage`` of a graphics pipeline). A draw or dispatch with no
pipeline, a pipeline of the wrong kind or an unknown one (after an ``Opaque`` command)
writes nothing here; ``Opaque`` commands and copies are accounted for by their
consumers (an ``Opaque`` command may do anything; ``CopyBufferRegion`` writes its
destination through the copy engine, front-end coherent).

Consumers: :func:`drawopt.analysis.flushrules.flush_access` (the flush model: validate's
``missing-flush`` rule and the ``flush`` pass), validate's ``index-range``, ``mdi``,
:mod:`drawopt.analysis.graph` (hazards, and through it ``schedule``) and the static
over-approximation :func:`may_gpu_write` (``pack-x``, ``weld``). The verifier
(:mod:`drawopt.verify.records`) implements the same documented rule on its own state
tracker, so that a bug here is not repeated there.
"""

from __future__ import annotations

__all__ = ["CS", "VS", "PS", "STAGES", "STAGE_NAMES", "STAGE_OF_UAV", "writer_stage",
           "VIA_DECLARED", "VIA_TABLE", "VIA_ROOT", "GpuWrites", "gpu_writes", "declared_writes",
           "table_access", "heap_views", "may_gpu_write"]

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drawopt.analysis.state import CROOT0, NROOT, OBS_DISPATCH, OBS_DRAW, ROOT0, Scan, scan
from drawopt.ir.decls import Decls, Pipeline, RootParam, RootSig, View
from drawopt.ir.ops import BY_NAME, Op, shared_col
from drawopt.ir.stream import Stream, ragged_index

CS, VS, PS = 0, 1, 2
"""Writer stage classes: compute, pre-rasterisation (VS/GS/HS/DS), pixel."""
STAGES = (CS, VS, PS)
STAGE_NAMES = ("CS", "VS", "PS")
STAGE_OF_UAV = {"cs": CS, "vs": VS, "gs": VS, "hs": VS, "ds": VS, "ps": PS}
"""Pipeline ``uav_stage`` -> writer stage class (the seed groups VS, GS, HS and DS)."""


def writer_stage(pipeline: Pipeline) -> int:
    """Stage class (:data:`CS`, :data:`VS`, :data:`PS`) of ``pipeline``'s UAV writes."""
    if pipeline.is_compute:
        return CS
    return STAGE_OF_UAV.get(pipeline.uav_stage or "ps", PS)

VIA_DECLARED, VIA_TABLE, VIA_ROOT = 0, 1, 2
"""How a write is reached: the pipeline's ``writes=``, a bound descriptor table, a root UAV."""

_GFX_TABLE = BY_NAME["SetGraphicsRootDescriptorTable"].code
_CMP_TABLE = BY_NAME["SetComputeRootDescriptorTable"].code
_ROOT_VIEWS = (BY_NAME["SetGraphicsRootConstantBufferView"].code, BY_NAME["SetGraphicsRootShaderResourceView"].code)
_COPY = BY_NAME["CopyBufferRegion"].code
_TABLE_REF = shared_col(("SetGraphicsRootDescriptorTable", "table"), ("SetComputeRootDescriptorTable", "table"))
_ROOT_VIEW_BUF = shared_col(("SetGraphicsRootConstantBufferView", "buffer"),
                            ("SetGraphicsRootShaderResourceView", "buffer"))


@dataclass(frozen=True)
class GpuWrites:
    """The GPU writes of a stream, one row per (action, resource), sorted by command then
    resource: ``cmd`` (the draw or dispatch), ``res`` (declaration index of the resource),
    ``stage`` (writer stage class, :data:`CS` / ``VS`` / ``PS``),
    ``pipe`` (declaration index of the pipeline), ``via`` (:data:`VIA_DECLARED`,
    :data:`VIA_TABLE`, :data:`VIA_ROOT`; the first that reaches it)."""

    cmd: np.ndarray
    res: np.ndarray
    stage: np.ndarray
    pipe: np.ndarray
    via: np.ndarray

    def __len__(self) -> int:
        return int(self.cmd.shape[0])


def declared_writes(decls: Decls, p: Pipeline) -> list[int]:
    """Declaration indices of the resources pipeline ``p`` names in ``writes=`` (sorted;
    names that do not resolve to a resource are skipped)."""
    out = set()
    for name in p.writes:
        try:
            out.add(decls.index[decls.resource_of(name)])
        except (ValueError, KeyError):
            continue
    return sorted(out)


def heap_views(decls: Decls) -> dict[int, dict[int, View]]:
    """Per heap (declaration index): slot -> the view there (views of a resource only)."""
    out: dict[int, dict[int, View]] = {}
    for d in decls.items:
        if isinstance(d, View) and d.resource is not None and d.resource in decls and d.heap in decls:
            out.setdefault(decls.index[d.heap], {})[d.slot] = d
    return out


def table_access(decls: Decls, rp: RootParam, href: int,
                 views: dict[int, dict[int, View]] | None = None) -> tuple[list[int], list[int]]:
    """What descriptor table ``rp`` bound at ``href`` (``heap index << 32 | slot``) gives a
    shader access to: ``(reads, writes)`` as declaration indices, in range order. A ``uav``
    view in a ``uav`` range is written; every other view it covers is read. Slots with no
    view (or a sampler) give nothing. ``views``: :func:`heap_views`, if already built."""
    if views is None:
        views = heap_views(decls)
    heap = views.get(href >> 32, {})
    slot = href & 0xFFFFFFFF
    reads: list[int] = []
    writes: list[int] = []
    for kind, n in rp.ranges:
        for k in range(slot, slot + n) if len(heap) > n else sorted(x for x in heap if slot <= x < slot + n):
            v = heap.get(k)
            if v is None:
                continue
            r = decls.index[v.resource]
            (writes if kind == "uav" and v.view == "uav" else reads).append(r)
        slot += n
    return reads, writes


def gpu_writes(stream: Stream, sc: Scan | None = None) -> GpuWrites:
    """Every GPU write of ``stream`` by THE rule (module docstring). Vectorised per
    pipeline and distinct binding; ``sc``: ``drawopt.analysis.state.scan(stream)``, if known.

    >>> import drawopt
    >>> s = drawopt.loads('''drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
    ... buffer args size=64
    ... heap res CBV_SRV_UAV 1
    ... view res[0] uav args
    ... rootsig cr table(uav,1)
    ... pipeline cull cs=c root=cr
    ... SetDescriptorHeaps res
    ... SetComputeRootSignature cr
    ... SetComputeRootDescriptorTable 0 res[0]
    ... SetPipelineState cull
    ... Dispatch 1 1 1''')
    >>> w = gpu_writes(s)
    >>> [(int(c), s.decls.items[int(r)].name, int(v) == VIA_TABLE) for c, r, v in zip(w.cmd, w.res, w.via)]
    [(4, 'args', True)]
    """
    s = stream
    decls = s.decls
    if sc is None:
        sc = scan(s)
    op, args = s.op, s.args
    views: dict[int, dict[int, View]] | None = None
    parts: list[tuple[np.ndarray, np.ndarray, int, int, int]] = []  # cmds, res, stage, pipe, via
    # the pipelines that may write anything (declared writes, or a table with a uav range or a root
    # UAV among the parameters they read), with those parameters; the observers of those only
    writers: dict[int, tuple[Pipeline, list[int], RootSig | None, list[int]]] = {}
    for i, p in enumerate(decls.items):
        if not isinstance(p, Pipeline):
            continue
        rs = decls[p.root] if p.root is not None and p.root in decls else None
        qs: list[int] = []
        if isinstance(rs, RootSig):
            qs = [q for q in p.read_params(len(rs.params)) if q < NROOT and _may_write(rs.params[q], p.is_compute)]
        else:
            rs = None
        dw = declared_writes(decls, p)
        if dw or qs:
            writers[i] = (p, dw, rs, qs)
    sel_of = _observers_by_pipeline(sc, {i: w[0].is_compute for i, w in writers.items()})
    for i, (p, dw, rs, qs) in writers.items():
        sel = sel_of(i)
        if not sel.size:
            continue
        cmds = sc.obs[sel]
        st = writer_stage(p)
        for r in dw:
            parts.append((cmds, np.full(cmds.size, r, np.int64), st, i, VIA_DECLARED))
        if rs is None:
            continue
        base = CROOT0 if p.is_compute else ROOT0
        for q in qs:
            rp = rs.params[q]
            col = base + q
            setter = sc.setter[sel, col]
            ok = (setter >= 0) & (((sc.unknown[sel] >> col) & 1) == 0)
            sop = op[np.maximum(setter, 0)]
            if rp.kind == "uav":
                ok &= np.isin(sop, _ROOT_VIEWS)
                if ok.any():
                    parts.append((cmds[ok], args[setter[ok], _ROOT_VIEW_BUF].astype(np.int64), st, i, VIA_ROOT))
                continue
            ok &= sop == (_CMP_TABLE if p.is_compute else _GFX_TABLE)
            if not ok.any():
                continue
            href = args[setter[ok], _TABLE_REF]
            uniq, inv = np.unique(href, return_inverse=True)
            inv = inv.reshape(-1)
            if views is None:
                views = heap_views(decls)
            # the distinct writes of each distinct table, spread over its observers at once
            got = [list(dict.fromkeys(table_access(decls, rp, int(h), views)[1])) for h in uniq.tolist()]
            lens = np.array([len(w) for w in got], np.int64)
            if not lens.any():
                continue
            flat = np.array([r for w in got for r in w], np.int64)
            nper = lens[inv]
            parts.append((np.repeat(cmds[ok], nper), flat[ragged_index((np.cumsum(lens) - lens)[inv], nper)],
                          st, i, VIA_TABLE))
    if not parts:
        z = np.zeros(0, np.int64)
        return GpuWrites(z, z.copy(), np.zeros(0, np.int8), z.copy(), np.zeros(0, np.int8))
    cmd = np.concatenate([x[0] for x in parts]).astype(np.int64)
    res = np.concatenate([x[1] for x in parts]).astype(np.int64)
    stage = np.concatenate([np.full(x[0].size, x[2], np.int8) for x in parts])
    pipe = np.concatenate([np.full(x[0].size, x[3], np.int64) for x in parts])
    via = np.concatenate([np.full(x[0].size, x[4], np.int8) for x in parts])
    order = np.lexsort((via, res, cmd))
    cmd, res, stage, pipe, via = cmd[order], res[order], stage[order], pipe[order], via[order]
    first = np.r_[True, (cmd[1:] != cmd[:-1]) | (res[1:] != res[:-1])]
    return GpuWrites(cmd[first], res[first], stage[first], pipe[first], via[first])


def _may_write(rp: RootParam, compute: bool) -> bool:
    """Whether root parameter ``rp`` can reach a write (:func:`table_access` writes only through a
    ``uav`` range; a root UAV is a write of a graphics pipeline's draws)."""
    if rp.kind == "table":
        return any(kind == "uav" for kind, _ in rp.ranges)
    return rp.kind == "uav" and not compute


def _observers_by_pipeline(sc: Scan, compute: dict[int, bool]) -> Callable[[int], np.ndarray]:
    """A function giving, for each pipeline ``i`` of ``compute`` (declaration index -> is a compute
    pipeline), the observers (indices into ``sc.obs``, increasing) that run it: the draws of a
    graphics pipeline, the dispatches of a compute one. One stable sort of those pipelines'
    observers, not a scan of every observer per pipeline."""
    if not compute:
        return lambda i: np.zeros(0, np.int64)
    nw = max(compute) + 1
    want = np.zeros(nw + 1, bool)  # (the last entry: any other pipeline value)
    want[list(compute)] = True
    pipe = sc.pipe
    obs = np.flatnonzero(want[np.where((pipe >= 0) & (pipe < nw), pipe, nw)])
    obs = obs[np.argsort(pipe[obs], kind="stable")]
    spipe = pipe[obs]

    def sel(i: int) -> np.ndarray:
        lo, hi = np.searchsorted(spipe, (i, i + 1)).tolist()
        got = obs[lo:hi]
        return got[sc.obs_kind[got] == (OBS_DISPATCH if compute[i] else OBS_DRAW)]

    return sel


def may_gpu_write(stream: Stream, sc: Scan | None = None) -> np.ndarray:
    """bool[n_decls + 1]: resources some GPU command of ``stream`` may write -- every write of
    :func:`gpu_writes`, every resource any pipeline declares in ``writes=`` or any ``uav``
    view names (whether or not a table reaches it), and every copy destination. A static
    over-approximation for passes that trust CPU-written data only where nothing on the GPU
    can change it (``pack-x``, ``weld``); ``Opaque`` commands are their callers' concern."""
    decls = stream.decls
    out = np.zeros(len(decls) + 1, bool)
    out[gpu_writes(stream, sc).res] = True
    out[stream.args[stream.op == _COPY, Op.CopyBufferRegion.col("dst")]] = True
    for d in decls.items:
        if isinstance(d, Pipeline):
            out[declared_writes(decls, d)] = True
        elif isinstance(d, View) and d.view == "uav" and d.resource is not None and d.resource in decls:
            out[decls.index[d.resource]] = True
    return out
