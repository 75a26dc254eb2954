"""Replay benchmark: the five methods of "The Many Ways to Render Quads", plus drawopt's output.

For every quad count (default 100k and 1M) it generates the post's methods with
``drawopt.gen`` (``quads``, methods 1..5, one call per method for 2..5 as in the
post), runs ``drawopt.optimize`` on method 1, adds the hand-written collapse of
method 1 that ``merge-instances`` should reach (one vertex-buffer binding, one
``DrawInstanced 6N``), replays each through OpenGL and prints a table of median
CPU submit time, GPU time (GL timer query) and wall time per frame, with the
replayer's own per-call overhead beside it.

    python bench/replay_quads.py                       # 100k and 1M quads
    python bench/replay_quads.py --quads 10000 --frames 3 --json out.json

Run it where a GPU drives EGL (see docs/performance.md for the recorded runs); on
llvmpipe the GPU column is the CPU rasteriser.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.gen import generate  # noqa: E402
from drawopt.ops import BY_NAME  # noqa: E402
from drawopt.stream import Emitter, Stream, encode_command  # noqa: E402

METHODS = {1: "1 one draw per quad", 2: "2 batched triangle list", 3: "3 index buffer",
           4: "4 vertex pulling", 5: "5 instancing"}


def collapse_method1(s: Stream, n: int) -> Stream:
    """Method 1 with its per-quad windows and draws replaced by one binding and one draw."""
    first = int(np.flatnonzero(s.mask("IASetVertexBuffers", "DrawInstanced"))[0])
    em = Emitter(s)
    em.keep(np.arange(first))
    cb = em.new()
    strings = list(s.strings)
    for name, vals in (("IASetVertexBuffers", [0, "quadverts", 0, 12]), ("DrawInstanced", [6 * n, 1, 0, 0])):
        row, var = encode_command(BY_NAME[name], vals, {}, s.decls, strings)
        cb.append(BY_NAME[name].code, row, var)
    return em.build(s.header, s.decls, strings)


def _optimize(s: Stream, timeout_s: int) -> Stream:
    """``drawopt.optimize(s)`` with a time limit (SIGALRM: the passes are Python-level loops)."""
    import signal

    import drawopt

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"drawopt.optimize took longer than {timeout_s} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout_s)
    try:
        out = drawopt.optimize(s)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return getattr(out, "stream", out)


def streams(n: int, with_optimizer: bool, timeout_s: int = 120,
            optimized: str | None = None) -> list[tuple[str, Stream | None, dict[str, Any]]]:
    """The rows for ``n`` quads. ``optimized``: a file holding ``drawopt optimize``'s output for
    method 1 at this size, made beforehand (``drawopt gen --kind quads --draws N --seed 1 --set
    data=off``, then ``drawopt optimize``), used instead of optimizing here."""
    out: list[tuple[str, Stream | None, dict[str, Any]]] = []
    m1 = generate("quads", n, seed=1, method=1, data="off")
    for m in METHODS:
        s = m1 if m == 1 else generate("quads", 1, seed=1, method=m, quads_per_draw=n, data="off")
        out.append((METHODS[m], s, {}))
    if optimized is not None:
        from drawopt.formats import load
        out.append(("1 + drawopt optimize (precomputed)", load(optimized), {"file": optimized}))
    elif with_optimizer:
        info: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            opt = _optimize(m1, timeout_s)
            info["optimize_s"] = time.perf_counter() - t0
        except Exception as e:  # report whatever the optimizer gives, including its failure
            opt = None
            info["error"] = f"{type(e).__name__}: {e}"
        out.append(("1 + drawopt.optimize", opt, info))
    out.append(("1 hand-collapsed (merge-instances' goal)", collapse_method1(m1, n), {}))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quads", default="100000,1000000", help="comma-separated quad counts")
    ap.add_argument("--size", default="1280x720", help="replay size WxH (default the streams' 1280x720)")
    ap.add_argument("--frames", type=int, default=5, help="timed frames per stream (median)")
    ap.add_argument("--cell-px", type=int, default=8,
                    help="side of the synthetic geometry's grid cell in pixels (quad size, hence fill cost)")
    ap.add_argument("--no-native", action="store_true", help="use the Python tape loop")
    ap.add_argument("--no-optimizer", action="store_true", help="skip drawopt.optimize")
    ap.add_argument("--optimize-timeout", type=int, default=120, help="seconds allowed to drawopt.optimize")
    ap.add_argument("--optimized", action="append", default=[], metavar="N=FILE",
                    help="use FILE as the optimizer's output for N quads (made beforehand: optimizing 1M "
                         "quads takes minutes of CPU); repeatable")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)

    from drawopt.replay import ReplayOptions, call_overhead, replay
    from drawopt.replay.gl import get_context

    w, h = (int(v) for v in args.size.lower().split("x"))
    pre = {int(k): v for k, _, v in (x.partition("=") for x in args.optimized)}
    native = False if args.no_native else None
    _, _, info = get_context()
    over = call_overhead(200_000, native=native)
    over_py = call_overhead(100_000, native=False) if over["executor"] != "python" else over
    result: dict[str, Any] = {"gl": info.as_dict(), "size": [w, h], "frames": args.frames, "cell_px": args.cell_px,
                              "host": platform.node(), "python": platform.python_version(),
                              "overhead_ns": {"tape": over, "python": over_py}, "rows": []}
    print(f"renderer: {info.renderer} | {info.version}")
    print(f"replayer overhead per GL call ({over['executor']} loop): {over['interpreter_ns']:.1f} ns for the loop "
          f"alone, {over['noop_gl_ns']:.0f} ns with a no-op GL call (glUniform1ui(-1)); Python loop: "
          f"{over_py['interpreter_ns']:.0f} / {over_py['noop_gl_ns']:.0f} ns")
    hdr = f"{'quads':>8}  {'stream':42} {'draws':>8} {'GL calls':>9} {'prep s':>7} {'CPU ms':>9} " \
          f"{'GPU ms':>9} {'wall ms':>9}"
    print(hdr)
    print("-" * len(hdr))
    for n in (int(v) for v in args.quads.split(",")):
        for label, s, extra in streams(n, not args.no_optimizer, args.optimize_timeout, pre.get(n)):
            row: dict[str, Any] = {"quads": n, "stream": label, **extra}
            if s is None:
                print(f"{n:>8}  {label:42} {'(optimizer failed: ' + extra.get('error', '?') + ')'}")
                result["rows"].append(row)
                continue
            opts = ReplayOptions(size=(w, h), native=native, cell_px=args.cell_px)
            r = replay(s, frames=args.frames, options=opts, read=False)
            row.update(draw_calls=r.draw_calls, gl_calls=r.gl_calls, prepare_s=r.prepare_s,
                       cpu_ms=r.cpu_submit_s * 1e3, gpu_ms=r.gpu_s * 1e3, wall_ms=r.wall_s * 1e3,
                       executor=r.executor, commands=len(s),
                       cpu_samples_ms=[x * 1e3 for x in r.cpu_samples],
                       gpu_samples_ms=[x * 1e3 for x in r.gpu_samples], warnings=r.warnings)
            result["rows"].append(row)
            print(f"{n:>8}  {label:42} {r.draw_calls:>8} {r.gl_calls:>9} {r.prepare_s:>7.1f} "
                  f"{r.cpu_submit_s * 1e3:>9.3f} {r.gpu_s * 1e3:>9.3f} {r.wall_s * 1e3:>9.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
