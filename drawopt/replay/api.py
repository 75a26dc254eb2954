"""Render, time and compare streams: the replay library API."""

from __future__ import annotations

__all__ = ["ReplayResult", "TargetDiff", "Comparison", "replay", "compare", "write_pngs", "available",
           "call_overhead", "machine_defaults", "is_software_renderer", "replay_interleaved"]

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drawopt.ir.stream import Stream
from drawopt.replay.executor import Frame, ReplayOptions
from drawopt.replay.gl import context_error, get_context
from drawopt.replay.tape import make_executor, measure_call_overhead


@dataclass
class ReplayResult:
    """What one replay produced.

    ``images``: target name -> top-down array (colour ``(H, W, 4)``, depth ``(H, W)``).
    ``buffers``: final contents of every buffer the GPU wrote (args, index data).
    Times are medians over ``frames`` timed frames (after one warm-up frame):
    ``cpu_submit_s`` issuing the calls, ``gpu_s`` the GL timer query around them,
    ``wall_s`` submit to ``glFinish``.
    """

    images: dict[str, np.ndarray]
    buffers: dict[str, np.ndarray]
    cpu_submit_s: float
    gpu_s: float
    wall_s: float
    frames: int
    gl_calls: int
    draw_calls: int
    executor: str
    prepare_s: float
    warnings: dict[str, int] = field(default_factory=dict)
    cpu_samples: list[float] = field(default_factory=list)
    gpu_samples: list[float] = field(default_factory=list)
    content: str = "light"
    index_scale: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    profile: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        """JSON-able figures (no pixels)."""
        return {
            "targets": {k: list(v.shape) for k, v in self.images.items()},
            "gpu_written_buffers": sorted(self.buffers),
            "frames": self.frames, "gl_calls": self.gl_calls, "draw_calls": self.draw_calls,
            "cpu_submit_ms": self.cpu_submit_s * 1e3, "gpu_ms": self.gpu_s * 1e3, "wall_ms": self.wall_s * 1e3,
            "prepare_s": self.prepare_s, "executor": self.executor, "warnings": dict(self.warnings),
            "content": self.content, "index_scale": self.index_scale,
            "squeezed_draws": self.counts.get("squeezed_draws", 0), "null_draws": self.counts.get("null_draws", 0),
            "cpu_samples_ms": [x * 1e3 for x in self.cpu_samples],
            "gpu_samples_ms": [x * 1e3 for x in self.gpu_samples],
            **({"profile": self.profile} if self.profile is not None else {}),
        }


def available() -> tuple[bool, str]:
    """(True, renderer) if an EGL OpenGL 4.3 context can be made here, else (False, reason)."""
    err = context_error()
    if err is not None:
        return False, err
    _, _, info = get_context()
    return True, f"{info.renderer}; {info.version}"


def is_software_renderer(renderer: str) -> bool:
    """Whether GL renderer string ``renderer`` is a CPU rasterizer (llvmpipe, softpipe, swrast)."""
    r = renderer.lower()
    return any(k in r for k in ("llvmpipe", "softpipe", "swrast", "software"))


def machine_defaults(renderer: str | None = None) -> dict[str, Any]:
    """Replay settings that fit this machine: on a CPU rasterizer (llvmpipe) a small target, one
    timed frame and no warm-up, so a 100k-draw frame replays in seconds; on a GPU 1280x720, 9
    timed frames after a warm-up frame and 1 s of untimed replay (clocks up).

    Light content gets a primitive budget to match (``prim_budget``: 2^14 on llvmpipe, 2^20
    on a GPU). ``{"size", "frames", "warmup", "warmup_s", "prim_budget", "software"}``.
    """
    if renderer is None:
        ok, renderer = available()
        if not ok:
            renderer = "llvmpipe"
    if is_software_renderer(renderer):
        return {"size": (128, 128), "frames": 1, "warmup": False, "warmup_s": 0.0, "prim_budget": 1 << 14,
                "software": True}
    return {"size": (1280, 720), "frames": 9, "warmup": True, "warmup_s": 1.0, "prim_budget": 1 << 20,
            "software": False}


def replay(stream: Stream, size: tuple[int, int] = (128, 128), frames: int = 1,
           options: ReplayOptions | None = None, read: bool = True, warmup: bool = True,
           warmup_s: float = 0.0, profile: bool | int = False,
           progress: Callable[[str], None] | None = None) -> ReplayResult:
    """Render ``stream`` ``frames`` times (plus one warm-up) and return images and timings.

    ``profile`` (True, or a number of frames, default 5): afterwards also run profiled frames
    (:mod:`drawopt.replay.profile`: CPU time per GL call and per stream command kind, GPU time
    per pass) into ``ReplayResult.profile``. ``progress`` is called with a short message at
    each stage (preparing, each frame).

    ``size`` is used when ``options`` is None (else ``options.size``). ``warmup`` False
    skips the untimed first frame (tests that only compare images). ``warmup_s`` > 0
    keeps replaying untimed frames until that many seconds have passed: a GPU that
    idled (while the CPU prepared or optimized a stream) runs its first frames at
    low clocks, which made one stream of a benchmark look 5x slower than an
    identical one on an H200.

    Raises ``RuntimeError`` when no GL context can be made (see :func:`available`).
    """
    opts = options if options is not None else ReplayOptions(size=size)
    return replay_interleaved([stream], [opts], frames=frames, read=read, warmup=warmup, warmup_s=warmup_s,
                              profile=profile, progress=progress)[0]


class _Session:
    """One prepared stream: its frame, executor and timer query."""

    def __init__(self, stream: Stream, opts: ReplayOptions, ctx: Any, gl: Any, info: Any) -> None:
        t0 = time.perf_counter()
        self.ctx, self.gl, self.opts = ctx, gl, opts
        self.fr = Frame(stream, ctx, gl, info, opts)
        self.ex = make_executor(self.fr.tape, gl, self.fr.tb.callbacks, opts.native)
        self.prepare_s = time.perf_counter() - t0
        self.q = ctx.query(time=True)
        self.cpu: list[float] = []
        self.gpu: list[float] = []
        self.wall: list[float] = []

    def frame(self, timed: bool = True) -> float:
        fr, ctx, q = self.fr, self.ctx, self.q
        fr.reset()
        ctx.finish()
        q.mglo.begin()
        t1 = time.perf_counter()
        self.ex.run()
        t2 = time.perf_counter()
        q.mglo.end()
        ctx.finish()
        t3 = time.perf_counter()
        if timed:
            self.cpu.append(t2 - t1)
            self.gpu.append(q.elapsed / 1e9)
            self.wall.append(t3 - t1)
        return t3 - t1

    def result(self, read: bool, profile: bool | int, say: Callable[[str], None]) -> ReplayResult:
        fr, ex = self.fr, self.ex
        rel = getattr(self.q, "release", None)
        if rel is not None:
            rel()
        prof = None
        if profile:
            from drawopt.replay.profile import profile_frame
            nprof = 5 if profile is True else int(profile)
            prof = profile_frame(fr, self.ctx, self.gl, self.opts.native, nprof, progress=say)
        images = fr.read_targets() if read else {}
        bufs = fr.read_written_buffers() if read else {}
        cpu, gpu, wall = self.cpu, self.gpu, self.wall
        return ReplayResult(
            images=images, buffers=bufs, cpu_submit_s=statistics.median(cpu), gpu_s=statistics.median(gpu),
            wall_s=statistics.median(wall), frames=len(cpu), gl_calls=len(ex), draw_calls=fr.counts["draw_calls"],
            executor=ex.kind, prepare_s=self.prepare_s, warnings=dict(fr.warnings), cpu_samples=cpu,
            gpu_samples=gpu, content=self.opts.content, index_scale=fr.index_scale, counts=dict(fr.counts),
            profile=prof)


def replay_interleaved(streams: list[Stream], options: list[ReplayOptions], frames: int = 1, read: bool = True,
                       warmup: bool = True, warmup_s: float = 0.0, profile: bool | int = False,
                       progress: Callable[[str], None] | None = None) -> list[ReplayResult]:
    """:func:`replay` of several streams at once, their timed frames interleaved (A B C A B C ...).

    Every stream is prepared first; then each gets its warm-up frame (and ``warmup_s``
    seconds of untimed frames), and the timed frames take turns, so a slow drift of the
    machine (CPU clocks, other tenants, the GPU's clocks) weighs on every stream alike.
    On an H200 the same tape measured 39 and 65 ms in two replays run one after the
    other; interleaved, streams are compared under the same conditions.
    ``options[k]`` is the :class:`ReplayOptions` of ``streams[k]``.
    """
    ctx, gl, info = get_context()
    say = progress if progress is not None else (lambda _m: None)
    sessions: list[_Session] = []
    tags = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    try:
        for k, (st, op) in enumerate(zip(streams, options)):
            say(f"{tags[k % 26]}: preparing {len(st)} commands")
            sessions.append(_Session(st, op, ctx, gl, info))
        if warmup:
            for k, se in enumerate(sessions):
                say(f"{tags[k % 26]}: warm-up")
                t0 = time.perf_counter()
                se.frame(timed=False)
                while time.perf_counter() - t0 < warmup_s:
                    se.frame(timed=False)
        n = max(1, frames)
        for f in range(n):
            for k, se in enumerate(sessions):
                say(f"{tags[k % 26]}: frame {f + 1}/{n}")
                se.frame()
        out = []
        for k, se in enumerate(sessions):
            out.append(se.result(read, profile, lambda m, t=tags[k % 26]: say(f"{t}: {m}")))
        return out
    finally:
        for se in sessions:
            se.fr.release()


@dataclass
class TargetDiff:
    """How one target (or GPU-written buffer) differs between two replays."""

    name: str
    kind: str  # "target" or "buffer"
    differing: int  # pixels (or words) differing beyond the tolerance
    total: int
    max_abs: float
    missing: str | None = None  # "a" or "b" when only one replay has it

    @property
    def same(self) -> bool:
        return self.missing is None and self.differing == 0


@dataclass
class Comparison:
    """Per-target differences between replays ``a`` and ``b``."""

    tolerance: float
    diffs: list[TargetDiff]

    @property
    def same(self) -> bool:
        return all(d.same for d in self.diffs)

    def summary(self) -> dict[str, Any]:
        return {"same": self.same, "tolerance": self.tolerance,
                "targets": [{"name": d.name, "kind": d.kind, "differing": d.differing, "total": d.total,
                             "max_abs": d.max_abs, **({"missing_in": d.missing} if d.missing else {})}
                            for d in self.diffs]}


def _as_float(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint8:
        return a.astype(np.float32)
    return a.astype(np.float64)


def compare(a: ReplayResult, b: ReplayResult, tolerance: float = 0.0) -> Comparison:
    """Compare every target and GPU-written buffer of ``a`` and ``b``.

    Exact by default; with ``tolerance`` T a pixel differs when some channel differs by
    more than T (8-bit units for UNORM targets, raw values for float and depth targets).
    """
    if a.index_scale != b.index_scale:
        raise ValueError(f"the replays used different light-content scales ({a.index_scale} and "
                         f"{b.index_scale}): replay B with ReplayOptions(index_scale={a.index_scale})")
    diffs: list[TargetDiff] = []
    for kind, da, db in (("target", a.images, b.images), ("buffer", a.buffers, b.buffers)):
        for name in sorted(set(da) | set(db)):
            if name not in da or name not in db:
                x = da.get(name, db.get(name))
                assert x is not None
                n = int(np.prod(x.shape[:2])) if kind == "target" else int(x.size)
                diffs.append(TargetDiff(name, kind, n, n, float("inf"), "a" if name not in da else "b"))
                continue
            x, y = da[name], db[name]
            if x.shape != y.shape:
                n = int(max(x.size, y.size))
                diffs.append(TargetDiff(name, kind, n, n, float("inf")))
                continue
            if kind == "buffer":
                d = x != y
                diffs.append(TargetDiff(name, kind, int(d.sum()), int(x.size), float(d.any())))
                continue
            if tolerance <= 0:
                ne = x != y
                if x.dtype.kind == "f":
                    ne &= ~(np.isnan(x) & np.isnan(y))
                per_px = ne.any(axis=-1) if x.ndim == 3 else ne
                maxabs = float(np.nanmax(np.abs(_as_float(x) - _as_float(y)))) if ne.any() else 0.0
            else:
                delta = np.abs(_as_float(x) - _as_float(y))
                per_px = (delta.max(axis=-1) if x.ndim == 3 else delta) > tolerance
                maxabs = float(np.nanmax(delta)) if delta.size else 0.0
            diffs.append(TargetDiff(name, kind, int(per_px.sum()), int(per_px.size), maxabs))
    return Comparison(tolerance, diffs)


def _to_rgba8(img: np.ndarray) -> np.ndarray:
    if img.ndim == 2:  # depth
        v = np.clip(np.nan_to_num(img), 0.0, 1.0)
        g = (v * 255).astype(np.uint8)
        return np.dstack([g, g, g, np.full_like(g, 255)])
    if img.dtype == np.uint8:
        out = img.copy()
    else:
        out = (np.clip(np.nan_to_num(img.astype(np.float32)), 0.0, 1.0) * 255).astype(np.uint8)
    out[..., 3] = 255
    return out


def write_pngs(a: ReplayResult, b: ReplayResult, cmp: Comparison, out_dir: str | Path) -> list[Path]:
    """For every differing target write ``NAME.a.png``, ``NAME.b.png`` and ``NAME.diff.png``
    (differing pixels red over a dimmed copy of ``a``); returns the files written."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for d in cmp.diffs:
        if d.kind != "target" or d.same or d.missing:
            continue
        x, y = a.images[d.name], b.images[d.name]
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in d.name)
        xa, ya = _to_rgba8(x), _to_rgba8(y)
        if cmp.tolerance > 0:
            delta = np.abs(_as_float(x) - _as_float(y))
            mask = (delta.max(axis=-1) if x.ndim == 3 else delta) > cmp.tolerance
        else:
            ne = x != y
            mask = ne.any(axis=-1) if x.ndim == 3 else ne
        diff = (xa.astype(np.uint16) // 4).astype(np.uint8)
        diff[..., 3] = 255
        diff[mask] = (255, 0, 0, 255)
        for suffix, img in (("a", xa), ("b", ya), ("diff", diff)):
            p = out / f"{safe}.{suffix}.png"
            Image.fromarray(img, "RGBA").save(p)
            written.append(p)
    return written


def call_overhead(n: int = 200_000, native: bool | None = None) -> dict[str, float]:
    """The replayer's own cost per GL call (see :func:`drawopt.replay.tape.measure_call_overhead`)."""
    _, gl, _ = get_context()
    return measure_call_overhead(gl, n, native)
