"""Measure a target profile: what each command costs the CPU when replayed through this machine's GL.

:func:`calibrate` replays small synthetic streams (light content, a 64x64 target)
through :func:`drawopt.replay.replay` and takes differences of the median CPU
submit times: a stream of ``n`` indexed draws gives the cost of a draw; the same
draws each preceded by one state command (alternating between two values, so
every one is a real change) give that command's cost as the difference over
``n``; multi-draw calls of 1..256 CPU-written records (``n`` records in all) give
the cost per call and per record by a least-squares fit. The costs are those of
drawopt's replayer on this driver: a D3D state command costs what the GL calls
its translation emits cost (a root constant: the ``glUniform1ui`` of the state
hash; a pipeline: ``glUseProgram`` and the program's uniforms).

Commands that are not measured keep the modelled ``gl`` target's value scaled by
measured / modelled draw cost (listed under ``scaled`` in the profile).

Optionally (``pipelines``) it also optimizes a reference frame with candidate
pipelines, replays each against the input, and records the fastest whose images
are identical and whose CPU and GPU times are not worse than the input's (the
input itself when none is): :func:`drawopt.analysis.costmodel.default_pipeline` returns
that pipeline for the profile's target.

The result is a JSON-able dict that :func:`drawopt.analysis.costmodel.target_from_profile`
reads (``drawopt calibrate -o gl.json``; ``drawopt optimize --target-profile gl.json``).
"""

from __future__ import annotations

__all__ = ["calibrate", "CASES", "measure_pipelines"]

import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from drawopt.ir.stream import Stream, StreamBuilder

CASES = ("draw_indexed", "draw", "SetPipelineState", "SetGraphicsRoot32BitConstants",
         "SetGraphicsRootDescriptorTable", "SetGraphicsRootConstantBufferView", "IASetIndexBuffer",
         "IASetVertexBuffers", "OMSetRenderTargets", "RSSetScissorRects", "indirect", "multi_draw")
"""What :func:`calibrate` measures."""

_RECORDS = (1, 4, 16, 64, 256)
FLOOR_US = 0.001
"""A measured cost below this (1 ns: under the differences' resolution) is recorded as this."""


def _base(b: StreamBuilder, layout: bool = False) -> None:
    b.target("rt0", 64, 64)
    b.target("rt1", 64, 64)
    b.buffer("ib0", 1 << 16)
    b.buffer("ib1", 1 << 16)
    b.buffer("vb", 1 << 16)
    b.buffer("cb", 1 << 16)
    b.heap("res", "CBV_SRV_UAV", 4)
    b.view("res", 0, "srv", "cb")
    b.view("res", 1, "srv", "vb")
    b.rootsig("rs", "constants(4)", "cbv", "table(srv,1)")
    for name in ("p0", "p1"):
        b.pipeline(name, vs="v_" + name, ps="ps", root="rs", params=(0, 1, 2))
    if layout:
        b.pipeline("pl", vs="v_l", ps="ps", root="rs", params=(0, 1, 2), layout="pos")
    b.OMSetRenderTargets("rt0")
    b.SetGraphicsRootSignature("rs")
    b.SetGraphicsRoot32BitConstants(0, 4, 1, 2, 3, 4)
    b.SetGraphicsRootConstantBufferView(1, "cb", 0)
    b.SetGraphicsRootDescriptorTable(2, "res[0]")
    b.SetPipelineState("pl" if layout else "p0")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.IASetIndexBuffer("ib0", "R16_UINT", 0)


def case_stream(case: str, n: int) -> Stream:
    """The synthetic stream of one calibration case (``n`` draws or, for ``multi_draw``, records)."""
    layout = case in ("IASetVertexBuffers", "layout_draw")
    b = StreamBuilder()
    _base(b, layout)
    if layout:
        b.IASetVertexBuffers(0, "vb", 0, 16)
    for i in range(n):
        k = i & 1
        if case == "SetPipelineState":
            b.SetPipelineState(f"p{k}")
        elif case == "SetGraphicsRoot32BitConstants":
            b.SetGraphicsRoot32BitConstants(0, 1, i + 7)
        elif case == "SetGraphicsRootDescriptorTable":
            b.SetGraphicsRootDescriptorTable(2, f"res[{k}]")
        elif case == "SetGraphicsRootConstantBufferView":
            b.SetGraphicsRootConstantBufferView(1, "cb", 256 * k)
        elif case == "IASetIndexBuffer":
            b.IASetIndexBuffer(f"ib{k}", "R16_UINT", 0)
        elif case == "IASetVertexBuffers":
            b.IASetVertexBuffers(0, "vb", 16 * k, 16)
        elif case == "OMSetRenderTargets":
            b.OMSetRenderTargets(f"rt{k}")
        elif case == "RSSetScissorRects":
            b.RSSetScissorRects(0, 0, 64 - k, 64)
        if case == "draw":
            b.DrawInstanced(3, 1, 3 * (i & 255), 0)
        elif case == "indirect":
            pass
        else:
            b.DrawIndexedInstanced(3, 1, 3 * (i & 255), 0, 0)
    return b.build()


def _indirect_stream(n: int, per_call: int) -> Stream:
    """``n`` CPU-written indexed records issued ``per_call`` per multi-draw call (1: single indirect)."""
    b = StreamBuilder()
    recs = np.zeros((n, 5), np.uint32)
    recs[:, 0] = 3
    recs[:, 1] = 1
    recs[:, 2] = 3 * (np.arange(n) & 255)
    b.buffer("args", n * 20, cpu=True, data=recs.reshape(-1))
    _base(b)
    for c in range(n // per_call):
        if per_call == 1:
            b.DrawIndexedInstancedIndirect("args", c * 20)
        else:
            b.MultiDrawIndexedInstancedIndirect(per_call, "args", c * per_call * 20, 20)
    return b.build()


def _time(stream: Stream, frames: int, say: Callable[[str], None], what: str) -> float:
    from drawopt.replay import ReplayOptions, replay
    say(what)
    r = replay(stream, frames=frames, options=ReplayOptions(size=(64, 64)), read=False, warmup_s=0.2)
    return r.cpu_submit_s * 1e6  # microseconds


def calibrate(n: int = 20000, frames: int = 9, pipelines: bool = True, reference_draws: int = 10000,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure this machine's GL costs; returns the target profile (see the module docstring).

    Needs an OpenGL context (:func:`drawopt.replay.available`); the costs are microseconds.
    """
    from drawopt.analysis.costmodel import MODELS
    from drawopt.replay import available

    ok, renderer = available()
    if not ok:
        raise RuntimeError(renderer)
    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    base = _time(case_stream("draw_indexed", n), frames, say, "indexed draws")
    us: dict[str, float] = {"draw_indexed": base / n}
    us["draw"] = _time(case_stream("draw", n), frames, say, "draws") / n
    state: dict[str, float] = {}
    for case in CASES:
        if case in ("draw_indexed", "draw", "indirect", "multi_draw"):
            continue
        m = n if case != "OMSetRenderTargets" else max(200, n // 10)
        ref = base if m == n else _time(case_stream("draw_indexed", m), frames, say, "indexed draws (short)")
        if case == "IASetVertexBuffers":
            ref = _time(case_stream("layout_draw", m), frames, say, "input-layout draws")
        t = _time(case_stream(case, m), frames, say, case)
        state[case] = max(0.0, (t - ref) / m)
    us["indirect"] = _time(_indirect_stream(n, 1), frames, say, "single indirect draws") / n
    calls, times = [], []
    for r in _RECORDS:
        calls.append(n // r)
        times.append(_time(_indirect_stream(n - n % r, r), frames, say, f"multi-draw x{r}"))
    # times = calls * c + records * r  (records ~ n in every case)
    A = np.array([[c, c * r] for c, r in zip(calls, _RECORDS)], np.float64)
    (call_us, record_us), *_ = np.linalg.lstsq(A, np.array(times), rcond=None)
    gl = MODELS["gl"]
    model_draw = gl.draw_us
    scale = us["draw_indexed"] / model_draw
    measured_state = dict(state)
    full_state = {k: round(float(v) * scale, 5) for k, v in gl.state_us.items()}
    for k, v in measured_state.items():
        full_state[k] = round(max(float(v), FLOOR_US), 5)  # below resolution: the floor, never 0
    for dst, src in (("SetComputeRoot32BitConstants", "SetGraphicsRoot32BitConstants"),
                     ("SetComputeRootDescriptorTable", "SetGraphicsRootDescriptorTable"),
                     ("SetGraphicsRootShaderResourceView", "SetGraphicsRootConstantBufferView")):
        if src in measured_state:  # the same GL translation as the measured command
            full_state[dst] = full_state[src]
    from drawopt.replay.gl import get_context
    _, _, info = get_context()
    profile: dict[str, Any] = {
        "drawopt_target_profile": 1,
        "name": "gl",
        "api": f"OpenGL through drawopt's replayer on {info.renderer} ({info.version})",
        "draw_us": round(float(statistics.fmean([us["draw_indexed"], us["draw"]])), 5),
        "indirect_draw_us": round(float(us["indirect"]), 5),
        "x_draw_us": None, "wave_packs_x": False,
        "mdi": "glMultiDraw*Indirect", "mdi_call_us": round(float(max(call_us, FLOOR_US)), 5),
        "mdi_record_us": round(float(max(record_us, FLOOR_US / 10)), 6),
        "mdi_max_count": gl.mdi_max_count, "mdi_count_buffer": gl.mdi_count_buffer,
        "state_us": full_state,
        "root_value_us": round(gl.root_value_us * scale, 6),
        "dispatch_us": round(gl.dispatch_us * scale, 5), "flush_us": round(gl.flush_us * scale, 5),
        "barrier_us": round(gl.barrier_us * scale, 5), "copy_us": round(gl.copy_us * scale, 5),
        "opaque_us": round(gl.opaque_us * scale, 5), "gpu_batch_us": 0.0, "vertex_us": gl.vertex_us,
        "measured": {"draw_indexed_us": us["draw_indexed"], "draw_us": us["draw"], "indirect_us": us["indirect"],
                     "state_us": measured_state,
                     "multi_draw": [{"records_per_call": r, "calls": c, "us": t}
                                    for r, c, t in zip(_RECORDS, calls, times)]},
        "scaled": sorted(k for k in full_state if k not in measured_state),
        "scale_from_model": scale,
        "machine": {"renderer": info.renderer, "version": info.version, "vendor": info.vendor,
                    "cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "settings": {"n": n, "frames": frames},
    }
    if pipelines:
        profile["pipeline_choice"] = measure_pipelines(profile, reference_draws, frames, say)
        profile["pipeline"] = profile["pipeline_choice"]["chosen"]
    profile["seconds"] = round(time.perf_counter() - t0, 1)
    return profile


def measure_pipelines(profile: dict[str, Any], draws: int = 10000, frames: int = 9,
                      say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Optimize ``gen --kind frame --draws DRAWS --seed 7`` with candidate pipelines under the
    profile's costs, replay each against the input (1280x720, light content) and pick the one
    with the lowest CPU submit time whose images are identical and whose CPU and GPU times
    do not exceed the input's ("" = the input, when none qualifies)."""
    from drawopt.analysis.costmodel import target_from_profile
    from drawopt.gen import generate
    from drawopt.replay import ReplayOptions, compare
    from drawopt.result import optimize

    say = say or (lambda _m: None)
    from drawopt.analysis.costmodel import default_pipeline, register_target
    model = target_from_profile({**profile, "pipeline": None, "name": "gl-calibrating"})
    register_target(model)
    cost_default = default_pipeline(model)
    cands = [cost_default,
             "dedupe-state,merge-instances,weld,mdi,flush,dedupe-state",
             "dedupe-state,schedule,merge-instances,weld,flush,dedupe-state",
             "dedupe-state,merge-instances,weld,flush,dedupe-state",
             "dedupe-state"]
    from drawopt.replay import replay_interleaved
    from drawopt.replay.executor import index_scale_for
    src = generate("frame", draws, seed=7)
    cands = list(dict.fromkeys(cands))
    outs = []
    for p in cands:
        say(f"optimizing: {p}")
        outs.append(optimize(src, p, target=model.name).stream)
    opts = ReplayOptions(size=(1280, 720), index_scale=index_scale_for(src))
    say("replaying the reference frame and the candidates (interleaved)")
    res = replay_interleaved([src, *outs], [opts] * (1 + len(outs)), frames=frames, warmup_s=0.5)
    ra = res[0]
    rows = [{"pipeline": "", "cpu_ms": ra.cpu_submit_s * 1e3, "gpu_ms": ra.gpu_s * 1e3, "same": True}]
    best = rows[0]
    for p, rb in zip(cands, res[1:]):
        row = {"pipeline": p, "cpu_ms": rb.cpu_submit_s * 1e3, "gpu_ms": rb.gpu_s * 1e3,
               "same": compare(ra, rb).same, "draw_calls": rb.draw_calls, "gl_calls": rb.gl_calls}
        rows.append(row)
        if row["same"] and row["cpu_ms"] <= rows[0]["cpu_ms"] and row["gpu_ms"] <= rows[0]["gpu_ms"] * 1.02 \
                and row["cpu_ms"] < best["cpu_ms"]:
            best = row
    return {"reference": f"gen --kind frame --draws {draws} --seed 7", "candidates": rows,
            "chosen": best["pipeline"] or "dedupe-state", "index_scale": ra.index_scale}
