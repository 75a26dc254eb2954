"""``drawopt replay --profile``: where a frame's submit time and GPU time go.

CPU: the tape is run through :meth:`NativeTape.run_timed` (the compiled loop reads
``CLOCK_MONOTONIC`` before every row; :meth:`PythonTape.run_timed` is its pure twin),
so every GL call has its own time. The per-row medians over the profiled frames are
summed by GL entry point, by the stream command the row was emitted for (state is
emitted lazily, so a draw's rows include the binds and uniforms its setup needed),
and for multi-draw calls by record count (a least-squares fit of time against
records gives the cost per call and per record).

GPU: a ``glQueryCounter(GL_TIMESTAMP)`` row is inserted at the start, before every
framebuffer bind (a *pass*: the draws between two render-target changes) and at
the end; the differences of consecutive timestamps are the GPU time of each pass.
The inserted rows are timed too and reported apart (``timer_rows_ms``).

The profiled frames run after the timed ones, so the timings that
:func:`drawopt.replay.replay` reports are never taken with the timer rows in.
"""

from __future__ import annotations

__all__ = ["profile_frame", "format_profile"]

import ctypes
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from drawopt.ir.ops import BY_CODE
from drawopt.replay.gl import GL
from drawopt.replay.tape import DRAW_OPS, OP_SPECS, Op, make_executor

_MULTI_COUNT_COL = {Op.MULTI_DRAW_ARRAYS_INDIRECT: 3, Op.MULTI_DRAW_ELEMENTS_INDIRECT: 4,
                    Op.MULTI_DRAW_ARRAYS_INDIRECT_COUNT: 4, Op.MULTI_DRAW_ELEMENTS_INDIRECT_COUNT: 5}
_TIMER_ORIGIN = -2
_SETUP_ORIGIN = -1


def _with_timers(tape: np.ndarray, origins: np.ndarray, queries: list[int]) -> tuple[np.ndarray, np.ndarray,
                                                                                      list[int]]:
    """``tape`` with a timestamp row at the start, before every framebuffer bind and at the end;
    returns (tape, origins, framebuffer of each pass (0: before the first bind))."""
    binds = np.flatnonzero(tape[:, 0] == Op.BIND_FRAMEBUFFER)
    cuts = [0, *binds.tolist(), tape.shape[0]]
    fbos = [0] + [int(tape[b, 2]) for b in binds]
    parts, porig = [], []
    for k in range(len(cuts)):
        row = np.zeros((1, tape.shape[1]), np.int64)
        row[0, :3] = (Op.QUERY_COUNTER, queries[k], GL.TIMESTAMP)
        parts.append(row)
        porig.append(np.array([_TIMER_ORIGIN], np.int64))
        if k + 1 < len(cuts):
            parts.append(tape[cuts[k]:cuts[k + 1]])
            porig.append(origins[cuts[k]:cuts[k + 1]])
    return np.ascontiguousarray(np.concatenate(parts)), np.concatenate(porig), fbos


def profile_frame(fr: Any, ctx: Any, gl: Any, native: bool | None, frames: int = 5,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Profile ``frames`` frames of the prepared :class:`~drawopt.replay.executor.Frame` ``fr``."""
    tape, origins = fr.tape, fr.origins
    nq = int(np.count_nonzero(tape[:, 0] == Op.BIND_FRAMEBUFFER)) + 2
    ids = (ctypes.c_uint * nq)()
    gl.glGenQueries(nq, ids)
    try:
        ptape, porig, fbos = _with_timers(tape, origins, list(ids))
        ex = make_executor(ptape, gl, fr.tb.callbacks, native, timed=True)
        rows, gpu = [], []
        res = ctypes.c_uint64()
        for f in range(max(1, frames) + 1):
            if progress is not None:
                progress(f"profile frame {f}/{frames}" if f else "profile warm-up")
            fr.reset()
            ctx.finish()
            stamps = ex.run_timed()
            ctx.finish()
            ts = []
            for q in ids:
                gl.glGetQueryObjectui64v(q, GL.QUERY_RESULT, ctypes.byref(res))
                ts.append(int(res.value))
            if f == 0:
                continue  # warm-up
            rows.append(np.diff(stamps))
            gpu.append(np.diff(np.array(ts, np.int64)))
    finally:
        gl.glDeleteQueries(nq, ids)
    per_row = np.median(np.stack(rows), axis=0)
    clock_ns = _clock_overhead(ex)
    totals = [float(r.sum()) for r in rows]
    gpu_pass = np.median(np.stack(gpu), axis=0)
    out = _summarize(fr, ptape, porig, per_row, statistics.median(totals), gpu_pass, fbos, len(rows), ex.kind)
    out["clock_ns_per_row"] = round(clock_ns, 1)
    return out


def _clock_overhead(ex: Any, n: int = 100_000) -> float:
    """What timing one row costs the loop (ns): the same loop over ``n`` rows whose entry point is libc
    ``abs``, timed per row minus untimed (the per-row figures include it; subtract it to compare
    with untimed submit times)."""
    import time

    from drawopt.replay.tape import NativeTape
    if not isinstance(ex, NativeTape):
        return float("nan")
    tape = np.zeros((n, 8), np.int64)
    tape[:, 0] = Op.UNIFORM1UI
    table = np.zeros_like(ex.table)
    table[Op.UNIFORM1UI] = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value
    stamps = np.zeros(n + 1, np.int64)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        ex.module.run_tape(tape, table)
        t1 = time.perf_counter_ns()
        ex.module.run_tape_timed(tape, table, stamps)
        t2 = time.perf_counter_ns()
        best = min(best, ((t2 - t1) - (t1 - t0)) / n)
    return max(0.0, best)


def _summarize(fr: Any, tape: np.ndarray, origins: np.ndarray, per_row: np.ndarray, total_ns: float,
               gpu_pass: np.ndarray, fbos: list[int], frames: int, executor: str) -> dict[str, Any]:
    s = fr.s
    op = tape[:, 0]
    timer = origins == _TIMER_ORIGIN
    # by GL entry point
    by_call: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for code in np.unique(op[~timer]).tolist():
        m = (op == code) & ~timer
        name = OP_SPECS[code][0] if code in OP_SPECS else ("(Python callback)" if code == Op.CALLBACK else str(code))
        by_call[name] = [int(m.sum()), float(per_row[m].sum())]
    # by the stream command the rows were emitted for
    kinds = np.full(origins.shape, -1, np.int64)
    real = origins >= 0
    kinds[real] = s.op[origins[real]]
    by_cmd: dict[str, dict[str, Any]] = {}
    stream_counts = np.bincount(s.op.astype(np.int64), minlength=256) if len(s) else np.zeros(256, np.int64)
    for kind in np.unique(kinds[~timer]).tolist():
        m = (kinds == kind) & ~timer
        name = BY_CODE[kind].name if kind >= 0 else "(frame setup)"
        calls: dict[str, list[float]] = {}
        for code in np.unique(op[m]).tolist():
            mm = m & (op == code)
            cname = OP_SPECS[code][0] if code in OP_SPECS else str(code)
            calls[cname] = [int(mm.sum()), round(float(per_row[mm].sum()) / 1e6, 4)]
        ncmd = int(stream_counts[kind]) if kind >= 0 else 0
        ms = float(per_row[m].sum()) / 1e6
        by_cmd[name] = {"commands": ncmd, "gl_calls": int(m.sum()), "ms": round(ms, 4),
                        "ns_per_command": round(ms * 1e6 / ncmd, 1) if ncmd else None,
                        "by_gl_call": dict(sorted(calls.items(), key=lambda kv: -kv[1][1]))}
    # multi-draw calls: time against records
    multi: dict[str, Any] = {"calls": 0, "records": 0, "ms": 0.0}
    recs, times = [], []
    for code, col in _MULTI_COUNT_COL.items():
        m = (op == code) & ~timer
        if m.any():
            recs.append(tape[m, col])
            times.append(per_row[m])
    if recs:
        r = np.concatenate(recs).astype(np.float64)
        t = np.concatenate(times)
        multi = {"calls": int(r.size), "records": int(r.sum()), "ms": round(float(t.sum()) / 1e6, 4),
                 "ns_per_call_mean": round(float(t.mean()), 1),
                 "ns_per_record_mean": round(float(t.sum() / max(1.0, r.sum())), 2)}
        if np.unique(r).size >= 2:
            slope, icept = np.polyfit(r, t, 1)
            multi["fit_ns_per_call"] = round(float(icept), 1)
            multi["fit_ns_per_record"] = round(float(slope), 3)
        buckets = ((1, 1), (2, 7), (8, 63), (64, 1 << 40))
        multi["by_records"] = [{"records": f"{lo}-{hi}" if hi < 1 << 40 else f">={lo}", "calls": int(mm.sum()),
                                "ns_per_call": round(float(t[mm].mean()), 1)}
                               for lo, hi in buckets for mm in [(r >= lo) & (r <= hi)] if mm.any()]
    # GPU passes
    names = {fbo.glo: "+".join(n) for n, fbo in fr.fbos.items()}
    draws = (np.isin(op, list(DRAW_OPS)))
    binds = np.flatnonzero(timer)
    passes = []
    for k in range(len(gpu_pass)):
        lo, hi = binds[k], binds[k + 1] if k + 1 < len(binds) else tape.shape[0]
        passes.append({"pass": k, "targets": names.get(fbos[k], "(none)") if fbos[k] else "(before the first bind)",
                       "draw_calls": int(draws[lo:hi].sum()), "gpu_ms": round(float(gpu_pass[k]) / 1e6, 4),
                       "cpu_ms": round(float(per_row[lo:hi].sum()) / 1e6, 4)})
    attributed = float(per_row[~timer].sum())
    return {
        "frames": frames, "executor": executor,
        "cpu_ms": round(total_ns / 1e6, 4),
        "cpu_attributed_ms": round(attributed / 1e6, 4),
        "timer_rows_ms": round(float(per_row[timer].sum()) / 1e6, 4),
        "gl_calls": int((~timer).sum()),
        "by_gl_call": {k: {"calls": v[0], "ms": round(v[1] / 1e6, 4), "ns_per_call": round(v[1] / max(1, v[0]), 1)}
                       for k, v in sorted(by_call.items(), key=lambda kv: -kv[1][1])},
        "by_command": dict(sorted(by_cmd.items(), key=lambda kv: -kv[1]["ms"])),
        "multi_draw": multi,
        "gpu_ms": round(float(gpu_pass.sum()) / 1e6, 4),
        "gpu_passes": passes,
    }


def format_profile(p: dict[str, Any], top: int = 12) -> list[str]:
    """Human-readable lines of a profile (``drawopt replay --profile`` without ``--json``)."""
    out = [f"  profile ({p['executor']} loop, median of {p['frames']} frames): CPU {p['cpu_ms']:.3f} ms "
           f"({p['gl_calls']} GL calls; timer rows {p['timer_rows_ms']:.3f} ms), GPU {p['gpu_ms']:.3f} ms"]
    tot = max(p["cpu_attributed_ms"], 1e-9)
    out.append("    CPU by stream command (rows emitted for it):")
    for name, c in list(p["by_command"].items())[:top]:
        per = f", {c['ns_per_command']:.0f} ns/command" if c["ns_per_command"] else ""
        out.append(f"      {name:<36} {c['ms']:9.3f} ms {100 * c['ms'] / tot:5.1f}%  {c['gl_calls']} GL calls "
                   f"for {c['commands']} commands{per}")
    out.append("    CPU by GL call:")
    for name, c in list(p["by_gl_call"].items())[:top]:
        out.append(f"      {name:<46} {c['ms']:9.3f} ms {100 * c['ms'] / tot:5.1f}%  x{c['calls']} "
                   f"({c['ns_per_call']:.0f} ns)")
    m = p["multi_draw"]
    if m["calls"]:
        fit = (f"; fit {m['fit_ns_per_call']:.0f} ns/call + {m['fit_ns_per_record']:.2f} ns/record"
               if "fit_ns_per_call" in m else "")
        out.append(f"    multi-draw: {m['calls']} calls, {m['records']} records, {m['ms']:.3f} ms{fit}")
    out.append("    GPU by pass:")
    for ps in p["gpu_passes"]:
        out.append(f"      {ps['pass']:>3} {ps['targets'][:48]:<48} {ps['draw_calls']:>7} draws  "
                   f"GPU {ps['gpu_ms']:8.3f} ms  CPU {ps['cpu_ms']:8.3f} ms")
    return out
