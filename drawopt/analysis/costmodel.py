"""Per-target cost model: what each API call costs the CPU, and what each target can do.

drawopt optimizes for a ``--target``: ``xbox-one``, ``xbox-series``, ``d3d12``,
``vulkan`` or ``gl``. A :class:`TargetModel` says, for one target,

* the CPU cost (microseconds on the submitting thread) of every command the
  stream vocabulary has: a direct draw, an indirect draw, a multi-draw call
  (per call plus per CPU-written record), ``DrawIndexedX``, each kind of state
  change, flushes, barriers, dispatches, copies;
* whether the target has ``DrawIndexedX`` at all and whether it *wave-packs*
  consecutive ``DrawIndexedX`` calls (the seed, drawindexedx.txt: only Xbox One
  does; Xbox One X and Series X|S run it like ``DrawIndexedInstanced``);
* whether it has multi-draw-indirect and its hard limits.

The passes ask it which rewrites pay off (:func:`pack_x_pays_off`,
:func:`mdi_min_batch`), :func:`default_pipeline` picks the best safe pipeline, and
``drawopt optimize`` reports :func:`estimate_cpu_cost` and the lower bound
(:func:`drawopt.analysis.lowerbound.report_figures`).

Where the numbers come from
---------------------------
They are *modelled*, not measured on every machine: relative costs chosen from
public guidance and common experience, so that the optimizer makes the same
decisions an engine programmer would. The ratios matter, not the absolute values.

* Direct draws: D3D12 and Vulkan record a draw in a few hundred nanoseconds on a
  desktop CPU (0.40 and 0.30 us here; Vulkan's command buffers do less
  validation); OpenGL pays driver validation on every draw (2.0 us); Xbox One's
  1.75 GHz Jaguar core records a D3D12.X draw in about 1.2 us with fast
  semantics, the Series' 3.6 GHz Zen 2 core in about 0.5 us.
* A pipeline change is the most expensive state change (shader and state-block
  switch: 2 to 4 draws' worth), render-target changes next; descriptor table,
  root constant and vertex/index buffer binds cost a fraction of a draw; root
  constants add a little per 32-bit value written.
* Multi-draw indirect: one call costs a few draws' worth (the call, plus the
  front end fetching the argument stream: ExecuteIndirect on D3D12 has a known
  fixed overhead), plus a per-record cost for the CPU writing 16 or 20 bytes of
  arguments into an upload buffer (0.01-0.03 us). Records the GPU wrote cost the
  CPU nothing.
* ``DrawIndexedX`` is "a more efficient alternative to DrawIndexedInstanced": a
  little cheaper than an indexed draw to record on Xbox One (no vertex-buffer
  validation); on targets without it (d3d12, vulkan, gl) a stream that contains
  it is costed as its emulation (``IASetIndexBuffer`` + ``DrawIndexedInstanced``).
* Flushes (``GpuSendPipelinedEvent``, ``FlushGpuCacheRange``,
  ``FlushGpuCachesBottomOfPipe``) are Xbox commands; elsewhere they stand for the
  equivalent barrier.
* ``gpu_batch_us`` is the GPU front-end cost of launching one *unpacked* small
  draw (partially filled waves, a context roll): what wave packing saves per
  packed ``DrawIndexedX``. Only targets that wave-pack use it.
* ``vertex_us`` is the GPU cost of one vertex-shader invocation of a small vertex
  (fetch, transform, export): what an indexed draw saves per vertex the
  post-transform cache reuses (``weld``). Every target reuses indexed vertices.
  H200 quads replay (docs/performance.md): with synthetic content (run 3) the batched
  triangle list (6M invocations for 1M quads) took 2.3 ms more than the index buffer
  (4M), ~1 ns per invocation; with both drawing identical triangles (run 4) the
  difference is 0.085 ms at 2-pixel quads and nothing at 8 pixels, where fill
  dominates. 1 ns is kept as a desktop figure for vertex-bound draws (so small
  draws are not welded for a few saved vertices); Xbox One's GCN GPU is several
  times slower.

Measured targets
----------------
``drawopt calibrate`` (:mod:`drawopt.calibrate`) measures the costs through this
machine's GL driver and writes a *target profile* (JSON with these fields, plus
what was measured and on which machine); :func:`load_target_profile` reads one
(``drawopt optimize --target-profile FILE``), and a profile committed as
``drawopt/targets/NAME.json`` replaces the modelled ``NAME`` target: ``gl`` is
the H200's (docs/performance.md, "The measured gl target"). A profile's
``pipeline``, when set, is its measured fastest pipeline and
:func:`default_pipeline` returns it.
"""

from __future__ import annotations

__all__ = [
    "TARGETS", "TargetModel", "MODELS", "get_target", "estimate_cpu_cost", "cost_by_command",
    "default_pipeline", "pack_x_pays_off", "mdi_min_batch", "weld_pays_off",
    "PIPELINE_ORDER", "target_from_profile", "load_target_profile", "register_target", "PROFILE_DIR",
]

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from drawopt.errors import UsageError
from drawopt.ir.ops import BY_NAME, COL_DRAW_COUNT, COL_MULTI_ARGS, MAX_OPCODE, OPS, Cat
from drawopt.ir.stream import Stream

TARGETS = ("xbox-one", "xbox-series", "d3d12", "vulkan", "gl")


@dataclass(frozen=True)
class TargetModel:
    """What one target can do and what each call costs its CPU (microseconds).

    Parameters
    ----------
    name : str
        The ``--target`` name.
    api : str
        The API the stream is replayed through (for messages).
    draw_us : float
        One direct draw (``DrawInstanced`` / ``DrawIndexedInstanced``).
    indirect_draw_us : float
        One single indirect draw (``Draw[Indexed]InstancedIndirect``).
    x_draw_us : float or None
        One ``DrawIndexedX`` call; None where the target has no ``DrawIndexedX``.
    wave_packs_x : bool
        Consecutive ``DrawIndexedX`` with only index-buffer changes between them
        share waves on the GPU (the point of pack-x).
    mdi : str
        How multi-draw-indirect is expressed on the target ("" = not available).
    mdi_call_us, mdi_record_us : float
        One multi-draw call, and each record of it the CPU wrote.
    mdi_max_count : int
        Most draws one multi-draw call may carry; longer batches are split.
    mdi_count_buffer : bool
        The ``...Auto`` variants (a GPU-written draw count) are available.
    state_us : mapping
        Cost of each state command, by command name.
    root_value_us : float
        Extra cost per 32-bit root constant written.
    dispatch_us, flush_us, barrier_us, copy_us, opaque_us : float
        Other commands (``opaque_us`` for commands drawopt does not model).
    gpu_batch_us : float
        GPU front-end cost of one unpacked small draw (what wave packing saves).
    vertex_us : float
        GPU cost of one vertex-shader invocation (what vertex reuse saves).
    """

    name: str
    api: str
    draw_us: float
    indirect_draw_us: float
    x_draw_us: float | None
    wave_packs_x: bool
    mdi: str
    mdi_call_us: float
    mdi_record_us: float
    mdi_max_count: int
    mdi_count_buffer: bool
    state_us: Mapping[str, float] = field(repr=False, default_factory=dict)
    root_value_us: float = 0.002
    dispatch_us: float = 1.0
    flush_us: float = 0.5
    barrier_us: float = 0.8
    copy_us: float = 1.0
    opaque_us: float = 2.0
    gpu_batch_us: float = 0.0
    vertex_us: float = 0.001
    pipeline: str | None = None
    """A measured target profile's fastest pipeline (:func:`default_pipeline` returns it)."""
    source: str = "model"
    """``model`` (the ratios above) or the target profile file the costs were measured into."""

    @property
    def has_x(self) -> bool:
        """The target has ``DrawIndexedX``."""
        return self.x_draw_us is not None

    def op_costs(self) -> np.ndarray:
        """Base CPU cost of every opcode (``float64[MAX_OPCODE + 1]``; unknown opcodes: ``opaque_us``)."""
        out = np.full(MAX_OPCODE + 1, self.opaque_us, dtype=np.float64)
        for o in OPS:
            out[o.code] = self._base(o.name, o.cat)
        return out

    def _base(self, name: str, cat: Cat) -> float:
        if cat == Cat.STATE:
            return float(self.state_us.get(name, 0.2 * self.draw_us))
        if name in ("DrawInstanced", "DrawIndexedInstanced"):
            return self.draw_us
        if name == "DrawIndexedX":
            # without DrawIndexedX the call is emulated: bind the index buffer, draw
            return self.x_draw_us if self.x_draw_us is not None else \
                self.draw_us + float(self.state_us.get("IASetIndexBuffer", 0.0))
        if name in ("DrawInstancedIndirect", "DrawIndexedInstancedIndirect"):
            return self.indirect_draw_us
        if cat == Cat.DRAW:  # the multi-draw family: records are added per call
            return self.mdi_call_us
        return {Cat.DISPATCH: self.dispatch_us, Cat.FLUSH: self.flush_us, Cat.BARRIER: self.barrier_us,
                Cat.COPY: self.copy_us}.get(cat, self.opaque_us)


def _state(pipeline: float, rt: float, rootsig: float, heaps: float, table: float, consts: float, view: float,
           ib: float, vb: float, small: float, gs: float) -> dict[str, float]:
    return {
        "SetPipelineState": pipeline, "OMSetRenderTargets": rt,
        "SetGraphicsRootSignature": rootsig, "SetComputeRootSignature": rootsig,
        "SetDescriptorHeaps": heaps,
        "SetGraphicsRootDescriptorTable": table, "SetComputeRootDescriptorTable": table,
        "SetGraphicsRoot32BitConstants": consts, "SetComputeRoot32BitConstants": consts,
        "SetGraphicsRootConstantBufferView": view, "SetGraphicsRootShaderResourceView": view,
        "IASetIndexBuffer": ib, "IASetVertexBuffers": vb,
        "IASetPrimitiveTopology": small, "RSSetViewports": small, "RSSetScissorRects": small,
        "OMSetBlendFactor": small, "OMSetStencilRef": small,
        "GSSetParameters": gs, "CSEnableAutomaticGpuFlush": small,
    }


MODELS: dict[str, TargetModel] = {
    "xbox-one": TargetModel(
        "xbox-one", "D3D12.X / D3D11.X (Jaguar 1.75 GHz, fast semantics)",
        draw_us=1.2, indirect_draw_us=1.4, x_draw_us=1.0, wave_packs_x=True,
        mdi="MultiDraw[Indexed]InstancedIndirect[Auto]", mdi_call_us=2.0, mdi_record_us=0.03,
        mdi_max_count=0xFFFFFFFF, mdi_count_buffer=True,
        state_us=_state(pipeline=2.5, rt=3.0, rootsig=0.8, heaps=1.0, table=0.3, consts=0.25, view=0.25,
                        ib=0.35, vb=0.35, small=0.15, gs=0.6),
        root_value_us=0.004, dispatch_us=1.5, flush_us=0.6, barrier_us=1.2, copy_us=1.5, opaque_us=2.5,
        gpu_batch_us=1.0, vertex_us=0.005),
    "xbox-series": TargetModel(
        "xbox-series", "D3D12.X (Zen 2 3.6 GHz); DrawIndexedX runs as DrawIndexedInstanced",
        draw_us=0.5, indirect_draw_us=0.6, x_draw_us=0.5, wave_packs_x=False,
        mdi="MultiDraw[Indexed]InstancedIndirect[Auto]", mdi_call_us=0.9, mdi_record_us=0.012,
        mdi_max_count=0xFFFFFFFF, mdi_count_buffer=True,
        state_us=_state(pipeline=1.1, rt=1.3, rootsig=0.35, heaps=0.45, table=0.12, consts=0.1, view=0.1,
                        ib=0.15, vb=0.15, small=0.06, gs=0.25),
        root_value_us=0.002, dispatch_us=0.6, flush_us=0.25, barrier_us=0.5, copy_us=0.6, opaque_us=1.0,
        vertex_us=0.002),
    "d3d12": TargetModel(
        "d3d12", "D3D12 (desktop); multi-draw = ExecuteIndirect with a draw signature",
        draw_us=0.4, indirect_draw_us=0.5, x_draw_us=None, wave_packs_x=False,
        mdi="ExecuteIndirect", mdi_call_us=1.0, mdi_record_us=0.01,
        mdi_max_count=0xFFFFFFFF, mdi_count_buffer=True,
        state_us=_state(pipeline=1.0, rt=1.2, rootsig=0.3, heaps=0.5, table=0.1, consts=0.08, view=0.08,
                        ib=0.1, vb=0.1, small=0.05, gs=0.2),
        root_value_us=0.002, dispatch_us=0.5, flush_us=0.5, barrier_us=0.5, copy_us=0.5, opaque_us=1.0),
    "vulkan": TargetModel(
        "vulkan", "Vulkan; multi-draw = vkCmdDraw[Indexed]Indirect[Count] with drawCount",
        draw_us=0.3, indirect_draw_us=0.35, x_draw_us=None, wave_packs_x=False,
        mdi="vkCmdDraw[Indexed]Indirect[Count]", mdi_call_us=0.5, mdi_record_us=0.01,
        mdi_max_count=65535, mdi_count_buffer=True,
        state_us=_state(pipeline=0.8, rt=1.5, rootsig=0.25, heaps=0.3, table=0.15, consts=0.06, view=0.15,
                        ib=0.08, vb=0.08, small=0.04, gs=0.15),
        root_value_us=0.001, dispatch_us=0.4, flush_us=0.4, barrier_us=0.4, copy_us=0.4, opaque_us=0.8),
    "gl": TargetModel(
        "gl", "OpenGL 4.6; multi-draw = glMultiDraw{Arrays,Elements}Indirect[Count]",
        draw_us=2.0, indirect_draw_us=2.2, x_draw_us=None, wave_packs_x=False,
        mdi="glMultiDraw*Indirect", mdi_call_us=3.0, mdi_record_us=0.015,
        mdi_max_count=0x7FFFFFFF, mdi_count_buffer=True,
        state_us=_state(pipeline=5.0, rt=4.0, rootsig=0.5, heaps=0.5, table=1.0, consts=0.6, view=0.6,
                        ib=0.5, vb=0.8, small=0.3, gs=0.8),
        root_value_us=0.01, dispatch_us=2.0, flush_us=1.0, barrier_us=1.0, copy_us=1.5, opaque_us=3.0),
}
"""The model of every target (see the module docstring for the rationale)."""


PROFILE_DIR = Path(__file__).resolve().parents[1] / "targets"
"""Committed target profiles (``drawopt calibrate`` output); ``gl.json`` replaces the modelled ``gl``."""

_PROFILE_FIELDS = {f.name for f in fields(TargetModel)}


def target_from_profile(data: Mapping[str, Any], source: str = "profile") -> TargetModel:
    """A :class:`TargetModel` from a target profile (the JSON ``drawopt calibrate`` writes).

    Keys other than the model's fields (``measured``, ``machine``, ...) are kept in the file
    only. Raises ``UsageError`` on a profile that is not one.

    >>> m = target_from_profile({"drawopt_target_profile": 1, "name": "mygl", "api": "GL",
    ...     "draw_us": 0.05, "indirect_draw_us": 0.06, "x_draw_us": None, "wave_packs_x": False,
    ...     "mdi": "glMultiDraw*Indirect", "mdi_call_us": 0.2, "mdi_record_us": 0.001,
    ...     "mdi_max_count": 1000, "mdi_count_buffer": True, "state_us": {"SetPipelineState": 0.3}})
    >>> m.draw_us, mdi_min_batch(m)
    (0.05, 5)
    """
    if not isinstance(data, Mapping) or data.get("drawopt_target_profile") != 1:
        raise UsageError(f"{source}: not a drawopt target profile (no \"drawopt_target_profile\": 1)")
    kw = {k: v for k, v in data.items() if k in _PROFILE_FIELDS}
    kw.setdefault("source", source)
    try:
        m = TargetModel(**kw)
        for k in ("draw_us", "indirect_draw_us", "mdi_call_us", "mdi_record_us"):
            if not float(getattr(m, k)) >= 0:
                raise ValueError(f"{k} must be >= 0")
        object.__setattr__(m, "state_us", {str(k): float(v) for k, v in dict(m.state_us).items()})
    except (TypeError, ValueError) as e:
        raise UsageError(f"{source}: bad target profile: {e}") from None
    return m


def load_target_profile(path: str | Path) -> TargetModel:
    """:func:`target_from_profile` of the JSON file ``path`` (``UsageError`` if unreadable)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read target profile: {e}") from None
    return target_from_profile(data, str(path))


def register_target(model: TargetModel) -> str:
    """Make ``model`` known by its name to every pass (``get_target(model.name)``); returns the name."""
    MODELS[model.name] = model
    return model.name


def get_target(target: str | TargetModel) -> TargetModel:
    """The :class:`TargetModel` of ``target`` (a name or a model)."""
    if isinstance(target, TargetModel):
        return target
    try:
        return MODELS[target]
    except KeyError:
        raise UsageError(f"unknown target '{target}' (known: {', '.join(TARGETS)})") from None


_MULTI = frozenset(BY_NAME[n].code for n in ("MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect"))
_CONSTS = frozenset(BY_NAME[n].code for n in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants"))


def cost_by_command(stream: Stream, target: str | TargetModel) -> np.ndarray:
    """CPU cost of every command of ``stream`` on ``target`` (``float64[N]``, microseconds).

    A multi-draw call adds ``mdi_record_us`` per record whose arguments the CPU
    wrote (its args buffer is declared ``cpu``); GPU-written records and the
    ``Auto`` variants' GPU-written counts cost the CPU nothing. Root constants add
    ``root_value_us`` per value.
    """
    m = get_target(target)
    costs = m.op_costs()[stream.op.astype(np.int64)]
    if len(stream) == 0:
        return costs
    multi = np.flatnonzero(np.isin(stream.op, list(_MULTI)))
    if multi.size:
        cpu = np.array([bool(getattr(d, "cpu", False)) for d in stream.decls.items] or [False])
        count = stream.args[multi, COL_DRAW_COUNT]
        written = cpu[stream.args[multi, COL_MULTI_ARGS]]
        costs[multi] += np.where(written, count, 0) * m.mdi_record_us
    consts = np.isin(stream.op, list(_CONSTS))
    costs[consts] += stream.var_len[consts] * m.root_value_us
    return costs


def estimate_cpu_cost(stream: Stream, target: str | TargetModel) -> float:
    """Estimated CPU cost of recording ``stream`` on ``target``, in microseconds.

    The sum of :func:`cost_by_command`. Examples
    --------
    >>> from drawopt.ir.stream import StreamBuilder
    >>> b = StreamBuilder()
    >>> b.target("rt", 64, 64); b.pipeline("p", vs="v", ps="p")
    >>> b.OMSetRenderTargets("rt"); b.SetPipelineState("p"); b.DrawInstanced(3, 1, 0, 0)
    >>> round(estimate_cpu_cost(b.build(), "d3d12"), 3)
    2.6
    """
    return float(cost_by_command(stream, target).sum())


def pack_x_pays_off(target: str | TargetModel, force: bool = False) -> bool:
    """Whether turning draws into ``DrawIndexedX`` runs pays off on ``target``.

    Only a target that has ``DrawIndexedX`` *and* wave-packs it gains (Xbox One);
    Xbox Series runs it like ``DrawIndexedInstanced``, so there it is done only
    when ``force``-d; d3d12, vulkan and gl have no ``DrawIndexedX`` at all, and
    ``force`` does not change that.
    """
    m = get_target(target)
    return m.has_x and (m.wave_packs_x or force)


def mdi_min_batch(target: str | TargetModel, indexed: bool = True) -> int:
    """The fewest direct draws worth turning into one multi-draw call on ``target``.

    The smallest ``n`` with ``mdi_call_us + n * mdi_record_us < n * draw_us``:
    below it the direct draws are cheaper. Never less than 2.
    """
    m = get_target(target)
    if not m.mdi:
        return 2**62
    gain = m.draw_us - m.mdi_record_us
    if gain <= 0:
        return 2**62
    return max(2, int(np.floor(m.mdi_call_us / gain)) + 1)


def weld_pays_off(target: str | TargetModel, saved_vertices: int, binds: int) -> bool:
    """Whether welding pays off on ``target``: the vertex-shader invocations an indexed draw
    saves (``saved_vertices`` x ``vertex_us`` of GPU time) outweigh the ``binds``
    ``IASetIndexBuffer`` calls it adds on the CPU. Every target reuses the vertices of
    an indexed draw (post-transform cache), so only the size decides.
    """
    m = get_target(target)
    return saved_vertices > 0 and saved_vertices * m.vertex_us > binds * float(m.state_us.get("IASetIndexBuffer", 0.0))


PIPELINE_ORDER = ("dedupe-state", "schedule", "merge-instances", "pack-x", "weld", "mdi", "flush", "dedupe-state")
"""The full pipeline, before filtering by target (pack-x and mdi only where they pay off)."""


def default_pipeline(target: str | TargetModel = "d3d12") -> str:
    """The best safe pass pipeline for ``target`` (see docs/passes.md).

    ``dedupe-state, schedule, merge-instances, pack-x, weld, mdi, flush, dedupe-state``,
    where ``pack-x`` is kept only where it pays off (:func:`pack_x_pays_off`: Xbox
    One) and ``mdi`` only where the target has multi-draw-indirect. ``pack-x`` runs before ``mdi`` so that on
    a wave-packing target the draws a pipeline's ``x`` contract allows become
    packed runs (GPU win) and ``mdi`` batches the rest; ``weld`` turns the non-indexed
    triangle lists merge-instances left into indexed draws before ``mdi`` batches them
    (a GPU win on every target); ``flush`` runs after both
    (it re-issues ``IASetIndexBuffer`` after ``DrawIndexedX`` runs and inserts the
    flushes GPU-written args need); the final ``dedupe-state`` drops what the
    rewrites made redundant.

    A measured target profile (``drawopt calibrate``) that names its fastest ``pipeline``
    gets that one.
    """
    m = get_target(target)
    if m.pipeline:
        return m.pipeline
    out: list[str] = []
    for name in PIPELINE_ORDER:
        if name == "pack-x" and not pack_x_pays_off(m):
            continue
        if name == "mdi" and not m.mdi:
            continue
        out.append(name)
    return ",".join(out)


def _load_committed_profiles() -> None:
    """Targets whose measured profile is committed (``drawopt/targets/NAME.json``) use it."""
    for path in sorted(PROFILE_DIR.glob("*.json")) if PROFILE_DIR.is_dir() else []:
        try:
            m = load_target_profile(path)
        except UsageError:
            continue
        if m.name in MODELS:
            MODELS[m.name] = m


_load_committed_profiles()
