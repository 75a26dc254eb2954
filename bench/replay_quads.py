"""Replay benchmark: the five methods of "The Many Ways to Render Quads", plus drawopt's output.

For every quad count (default 100k and 1M) it generates the post's methods with
``drawopt.gen`` (``quads``, methods 1..5, one call per method for 2..5 as in the
post), runs ``drawopt.optimize`` on method 1, adds the hand-written collapse of
method 1 that ``merge-instances`` should reach (one vertex-buffer binding, one
``DrawInstanced 6N``), replays each through OpenGL and prints a table of median
CPU submit time, GPU time (GL timer query) and wall time per frame, with the
replayer's own per-call overhead beside it.

The optimizer always gets method 1 *with* its vertex data (``data=on``): ``weld``
needs the contents to prove which vertices are byte-equal, and turns the collapse
into an indexed draw (4 vertex-shader invocations per quad instead of 6). Every
row is replayed with the same kind of content, ``--data`` (default ``off``:
synthetic geometry, the same for every method, as in the recorded runs; the
optimized stream's copy of the generator's buffers is replayed without their
``data``, its generated buffers — ``weld_ib0`` — with theirs). ``--data on``
replays the quads' own positions instead (method 4's replay still places its
vertices synthetically, so its row is not comparable then).

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

from drawopt.decls import Buffer  # noqa: E402
from drawopt.gen import generate  # noqa: E402
from drawopt.ops import BY_CODE, BY_NAME, DRAW_OPS  # noqa: E402
from drawopt.stream import Emitter, Stream, encode_command  # noqa: E402

BY_NAME_CODE = {c: op.name for c, op in BY_CODE.items()}
DRAW_CODES = frozenset(DRAW_OPS)

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


def _optimize(s: Stream, timeout_s: int, passes: str | None = None) -> Stream:
    """``drawopt.optimize(s, passes)`` with a time limit (SIGALRM: the passes are Python-level loops)."""
    import signal

    import drawopt

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"drawopt.optimize took longer than {timeout_s} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout_s)
    try:
        out = drawopt.optimize(s, passes)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return getattr(out, "stream", out)


def strip_data(s: Stream, names: set[str]) -> Stream:
    """``s`` with the ``data`` of the buffers named ``names`` dropped (replayed with synthetic content)."""
    decls = s.decls.copy()
    for d in s.decls.items:
        if isinstance(d, Buffer) and d.name in names and d.data is not None:
            decls.replace(Buffer(d.name, d.size, cpu=d.cpu, data=None, frontend=d.frontend))
    return Stream(s.header, decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line, s.strings)


def streams(n: int, with_optimizer: bool, timeout_s: int = 120, optimized: str | None = None,
            data: str = "off", passes: str | None = None) -> list[tuple[str, Stream | None, dict[str, Any]]]:
    """The rows for ``n`` quads, replayed with content ``data`` (module docstring). ``optimized``: a
    file holding ``drawopt optimize``'s output for method 1 at this size, made beforehand
    (``drawopt gen --kind quads --draws N --seed 1 --set data=on``, then ``drawopt optimize``),
    used instead of optimizing here. ``passes``: the pipeline (None: the default one)."""
    out: list[tuple[str, Stream | None, dict[str, Any]]] = []
    m1 = generate("quads", n, seed=1, method=1, data=data)
    gen_buffers = {d.name for d in m1.decls.items if isinstance(d, Buffer)}
    for m in METHODS:
        s = m1 if m == 1 else generate("quads", 1, seed=1, method=m, quads_per_draw=n, data=data)
        out.append((METHODS[m], s, {}))

    def as_replayed(opt: Stream) -> Stream:
        return opt if data == "on" else strip_data(opt, gen_buffers)

    if optimized is not None:
        from drawopt.formats import load
        out.append(("1 + drawopt optimize (precomputed)", as_replayed(load(optimized)), {"file": optimized}))
    elif with_optimizer:
        info: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            m1_data = m1 if data == "on" else generate("quads", n, seed=1, method=1, data="on")
            opt = _optimize(m1_data, timeout_s, passes)
            info["optimize_s"] = time.perf_counter() - t0
            info["optimized_calls"] = {BY_NAME_CODE[int(c)]: int(k) for c, k in
                                       zip(*np.unique(opt.op, return_counts=True)) if int(c) in DRAW_CODES}
            opt = as_replayed(opt)
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
    ap.add_argument("--passes", default=None,
                    help="pipeline for drawopt.optimize (default: the default pipeline; at 1M quads "
                         "'dedupe-state,merge-instances,weld,mdi,flush,dedupe-state' skips schedule's graph)")
    ap.add_argument("--optimize-timeout", type=int, default=120, help="seconds allowed to drawopt.optimize")
    ap.add_argument("--optimized", action="append", default=[], metavar="N=FILE",
                    help="use FILE as the optimizer's output for N quads (made beforehand: optimizing 1M "
                         "quads takes minutes of CPU); repeatable")
    ap.add_argument("--data", choices=("off", "on"), default="off",
                    help="replay content: off = synthetic geometry for every row (default), on = the quads' own "
                         "vertex data (the optimizer always gets it: weld needs it)")
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
                              "data": args.data,
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
        for label, s, extra in streams(n, not args.no_optimizer, args.optimize_timeout, pre.get(n), args.data,
                                       args.passes):
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
