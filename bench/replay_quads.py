"""Replay benchmark: the five methods of "The Many Ways to Render Quads", plus drawopt's output.

For every quad count (default 100k and 1M) it generates the post's methods with
``drawopt.gen`` (``quads``, methods 1..5, one call per method for 2..5 as in the
post), runs ``drawopt.optimize`` on method 1 (the default pipeline of ``--target``,
or ``--passes``), adds the hand-written collapse of method 1 (one vertex-buffer
binding, one ``DrawInstanced 6N``: ``merge-instances`` without ``weld``), replays
each through OpenGL and prints a table of median CPU submit time, GPU time (GL
timer query) and wall time per frame, with the replayer's own per-call overhead
beside it.

Content (``--data``, default ``on``): every method carries the same quads, all
``--quad-px`` pixels square (the generator's ``size_min = size_max``) at the same
positions, and the replay draws them where they are (docs/replay.md, "Content").
The optimizer gets method 1 with its vertex data in every mode: ``weld`` needs the
contents to prove which vertices are byte-equal, and turns the collapse into an
indexed draw (4 vertex-shader invocations per quad instead of 6). Methods 1..3
share their vertex format and shaders in the post, and the generator declares
their pipelines identically but for the name (``quads_m1``..``quads_m3``); the
bench names them alike (``quads_il``) so that the replay's colours, which hash
the pipeline's name, agree, and then checks that methods 1, 2, 3, the
optimized stream and the hand collapse render identical images (method 3's index
buffer and the weld's draw the same triangles in the same order). Methods 4 and 5
are compared too but are expected to differ: the replay places method 4's
vertex-pulled vertices synthetically (in cells of ``--cell-px``), and method 5's
colours hash the instance id, which the other methods do not have.

``--data off`` replays synthetic geometry instead (every buffer the generator
makes is replayed without its contents, in cells of ``--cell-px``; the
optimizer's generated ``weld_ib0`` keeps its indices, so the welded draw places
different triangles than method 2 and the image check is not meaningful).

    python bench/replay_quads.py                       # 100k and 1M quads, 8 px
    python bench/replay_quads.py --quads 20000 --frames 3 --quad-px 8
    python bench/replay_quads.py --quads 1000000 --quad-px 2 --json q2.json

Run it where a GPU drives EGL (see docs/performance.md for the recorded runs); on
llvmpipe the GPU column is the CPU rasteriser. Exit status 0; with ``--strict``,
1 when an image that should be identical is not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.gen import generate  # noqa: E402
from drawopt.ir.decls import Buffer  # noqa: E402
from drawopt.ir.ops import BY_CODE, BY_NAME, DRAW_OPS  # noqa: E402
from drawopt.ir.stream import Emitter, Stream, encode_command  # noqa: E402

BY_NAME_CODE = {c: op.name for c, op in BY_CODE.items()}
DRAW_CODES = frozenset(DRAW_OPS)

METHODS = {1: "1 one draw per quad", 2: "2 batched triangle list", 3: "3 index buffer",
           4: "4 vertex pulling", 5: "5 instancing"}
SHARED_PSO = "quads_il"
"""The name methods 1..3 (and the optimizer's output of method 1) replay their pipeline under."""
SAME_AS_METHOD1 = ("m1", "m2", "m3", "opt", "hand")
"""Rows whose images must equal method 1's when the content is the quads' own (``--data on``)."""


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


def _optimize(s: Stream, timeout_s: int, passes: str | None, target: str) -> Stream:
    """``drawopt.optimize(s, passes, target=target)`` with a time limit (SIGALRM)."""
    import signal

    import drawopt

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"drawopt.optimize took longer than {timeout_s} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout_s)
    try:
        out = drawopt.optimize(s, passes, target=target).stream
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return getattr(out, "stream", out)


def _with_decls(s: Stream, decls: Any) -> Stream:
    return Stream(s.header, decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line, s.strings)


def strip_data(s: Stream, names: set[str]) -> Stream:
    """``s`` with the ``data`` of the buffers named ``names`` dropped (replayed with synthetic content)."""
    decls = s.decls.copy()
    for d in s.decls.items:
        if isinstance(d, Buffer) and d.name in names and d.data is not None:
            decls.replace(dataclasses.replace(d, data=None))
    return _with_decls(s, decls)


def shared_pso(s: Stream) -> Stream:
    """``s`` with pipeline ``quads_m1``/``quads_m2``/``quads_m3`` renamed to :data:`SHARED_PSO`
    (commands refer to declarations by index, so only the name changes)."""
    decls = s.decls.copy()
    for old in ("quads_m1", "quads_m2", "quads_m3"):
        i = decls.index.pop(old, None)
        if i is not None:
            decls.items[i] = dataclasses.replace(decls.items[i], name=SHARED_PSO)
            decls.index[SHARED_PSO] = i
    return _with_decls(s, decls)


def draw_calls_by_kind(s: Stream) -> dict[str, int]:
    """Draw commands of ``s`` by name."""
    return {BY_NAME_CODE[int(c)]: int(k) for c, k in zip(*np.unique(s.op, return_counts=True))
            if int(c) in DRAW_CODES}


def streams(n: int, *, quad_px: int = 8, data: str = "on", with_optimizer: bool = True, timeout_s: int = 120,
            optimized: str | None = None, passes: str | None = None, target: str = "d3d12",
            hand: bool = True) -> Iterator[tuple[str, str, Stream | None, dict[str, Any]]]:
    """``(key, label, stream, info)`` of every row for ``n`` quads (see the module docstring), made one
    at a time. ``optimized``: a file holding ``drawopt optimize``'s output for method 1 at this size
    (``drawopt gen --kind quads --draws N --seed 1 --set data=on --set size_min=PX --set size_max=PX``,
    then ``drawopt optimize``), used instead of optimizing here. ``passes``: the pipeline (None: the
    default one of ``target``)."""
    size = {"size_min": quad_px, "size_max": quad_px}
    m1 = generate("quads", n, seed=1, method=1, data=data, **size)
    gen_buffers = {d.name for d in m1.decls.items if isinstance(d, Buffer)}

    def as_replayed(s: Stream) -> Stream:
        return shared_pso(s if data == "on" else strip_data(s, gen_buffers))

    yield "m1", METHODS[1], shared_pso(m1), {}
    for m in range(2, 6):
        s = generate("quads", 1, seed=1, method=m, quads_per_draw=n, data=data, **size)
        yield f"m{m}", METHODS[m], shared_pso(s), {}
        del s
    if optimized is not None:
        from drawopt.ir.formats import load
        opt = load(optimized)
        yield "opt", "1 + drawopt optimize (precomputed)", as_replayed(opt), \
            {"file": optimized, "optimized_calls": draw_calls_by_kind(opt)}
    elif with_optimizer:
        info: dict[str, Any] = {"target": target}
        if passes is None:
            from drawopt.analysis.costmodel import default_pipeline
            info["passes"] = default_pipeline(target)
        else:
            info["passes"] = passes
        opt_s: Stream | None
        try:
            src = m1 if data == "on" else generate("quads", n, seed=1, method=1, data="on", **size)
            t0 = time.perf_counter()
            opt = _optimize(src, timeout_s, passes, target)
            info["optimize_s"] = time.perf_counter() - t0
            info["optimized_calls"] = draw_calls_by_kind(opt)
            info["optimized_commands"] = len(opt)
            opt_s = as_replayed(opt)
        except Exception as e:  # report whatever the optimizer gives, including its failure
            opt_s = None
            info["error"] = f"{type(e).__name__}: {e}"
        yield "opt", "1 + drawopt.optimize", opt_s, info
    if hand:
        yield "hand", "1 hand-collapsed (no weld)", shared_pso(collapse_method1(m1, n)), {}


def _image_diff(ref: dict[str, np.ndarray], img: dict[str, np.ndarray]) -> int:
    """Pixels that differ in any channel, over every target (a missing target counts whole)."""
    total = 0
    for name in sorted(set(ref) | set(img)):
        a, b = ref.get(name), img.get(name)
        if a is None or b is None or a.shape != b.shape:
            total += int((a if a is not None else b).shape[0] * (a if a is not None else b).shape[1])
            continue
        d = a != b
        total += int(np.count_nonzero(d.any(axis=-1) if d.ndim == 3 else d))
    return total


def _coverage_diff(ref: dict[str, np.ndarray], img: dict[str, np.ndarray]) -> int:
    """Pixels drawn (any channel non-zero) in one image and not the other, over the colour targets
    both have: the same geometry with other colours gives 0."""
    total = 0
    for name in sorted(set(ref) & set(img)):
        a, b = ref[name], img[name]
        if a.ndim == 3 and a.shape == b.shape:
            total += int(np.count_nonzero(a.any(axis=-1) != b.any(axis=-1)))
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quads", default="100000,1000000", help="comma-separated quad counts")
    ap.add_argument("--quad-px", type=int, default=8,
                    help="side of every quad in pixels of the 1280x720 target (the generator's size_min = "
                         "size_max; default 8)")
    ap.add_argument("--data", choices=("on", "off"), default="on",
                    help="replay content: on = the quads' own vertex data for every method (default), off = "
                         "synthetic geometry in cells of --cell-px (the optimizer always gets the data)")
    ap.add_argument("--cell-px", type=int, default=None,
                    help="cell of the synthetic geometry in pixels (default --quad-px): every row with "
                         "--data off, method 4 (vertex pulling, placed synthetically) with --data on")
    ap.add_argument("--size", default="1280x720", help="replay size WxH (default the streams' 1280x720)")
    ap.add_argument("--frames", type=int, default=5, help="timed frames per stream (median)")
    ap.add_argument("--warmup-s", type=float, default=1.0,
                    help="untimed replay before each stream's timed frames, so GPU clocks are up (seconds)")
    ap.add_argument("--no-native", action="store_true", help="use the Python tape loop")
    ap.add_argument("--no-optimizer", action="store_true", help="skip drawopt.optimize")
    ap.add_argument("--no-hand", action="store_true", help="skip the hand-collapsed row")
    ap.add_argument("--target", default="d3d12", help="target whose default pipeline optimizes (default d3d12)")
    ap.add_argument("--passes", default=None,
                    help="pipeline for drawopt.optimize (default: the target's default pipeline)")
    ap.add_argument("--optimize-timeout", type=int, default=120, help="seconds allowed to drawopt.optimize")
    ap.add_argument("--optimized", action="append", default=[], metavar="N=FILE",
                    help="use FILE as the optimizer's output for N quads (made beforehand); repeatable")
    ap.add_argument("--no-check", action="store_true", help="do not read back and compare the images")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when an image that must equal method 1's does not (--data on)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)

    from drawopt.replay import ReplayOptions, call_overhead, replay
    from drawopt.replay.gl import get_context

    w, h = (int(v) for v in args.size.lower().split("x"))
    cell_px = args.cell_px if args.cell_px is not None else args.quad_px
    check = not args.no_check
    pre = {int(k): v for k, _, v in (x.partition("=") for x in args.optimized)}
    native = False if args.no_native else None
    _, _, info = get_context()
    over = call_overhead(200_000, native=native)
    over_py = call_overhead(100_000, native=False) if over["executor"] != "python" else over
    per_call = {over["executor"]: over, "python": over_py}
    result: dict[str, Any] = {"gl": info.as_dict(), "size": [w, h], "frames": args.frames, "quad_px": args.quad_px,
                              "cell_px": cell_px, "data": args.data, "target": args.target, "passes": args.passes,
                              "host": platform.node(), "python": platform.python_version(),
                              "overhead_ns": {"tape": over, "python": over_py}, "rows": [], "images": []}
    print(f"renderer: {info.renderer} | {info.version}")
    print(f"replayer overhead per GL call ({over['executor']} loop): {over['interpreter_ns']:.1f} ns for the loop "
          f"alone, {over['noop_gl_ns']:.0f} ns with a no-op GL call (glUniform1ui(-1)); Python loop: "
          f"{over_py['interpreter_ns']:.0f} / {over_py['noop_gl_ns']:.0f} ns")
    print(f"content: {'the quads own data' if args.data == 'on' else 'synthetic'}, quads {args.quad_px} px, "
          f"cell {cell_px} px, replay {w}x{h}, {args.frames} frames")
    hdr = f"{'quads':>8}  {'stream':34} {'draws':>8} {'GL calls':>9} {'prep s':>7} {'CPU ms':>9} " \
          f"{'GPU ms':>9} {'wall ms':>9} {'loop ms':>8}  image"
    print(hdr)
    print("-" * len(hdr))
    mismatch = False
    for n in (int(v) for v in args.quads.split(",")):
        ref: dict[str, np.ndarray] | None = None
        verdicts: dict[str, Any] = {"quads": n, "quad_px": args.quad_px, "data": args.data,
                                    "identical_to_method1": {}, "diff_pixels": {},
                                    "coverage_diff_pixels": {}}
        for key, label, s, extra in streams(n, quad_px=args.quad_px, data=args.data,
                                            with_optimizer=not args.no_optimizer, timeout_s=args.optimize_timeout,
                                            optimized=pre.get(n), passes=args.passes, target=args.target,
                                            hand=not args.no_hand):
            row: dict[str, Any] = {"quads": n, "key": key, "stream": label, "quad_px": args.quad_px,
                                   "data": args.data, **extra}
            if s is None:
                print(f"{n:>8}  {label:34} {'(optimizer failed: ' + extra.get('error', '?') + ')'}")
                result["rows"].append(row)
                continue
            opts = ReplayOptions(size=(w, h), native=native, cell_px=cell_px)
            r = replay(s, frames=args.frames, options=opts, read=check, warmup_s=args.warmup_s)
            loop_ns = per_call.get(r.executor, over)["interpreter_ns"]
            row.update(draw_calls=r.draw_calls, gl_calls=r.gl_calls, prepare_s=r.prepare_s,
                       cpu_ms=r.cpu_submit_s * 1e3, gpu_ms=r.gpu_s * 1e3, wall_ms=r.wall_s * 1e3,
                       replayer_overhead_ms=r.gl_calls * loop_ns * 1e-6, executor=r.executor, commands=len(s),
                       stream_draws=draw_calls_by_kind(s),
                       cpu_samples_ms=[x * 1e3 for x in r.cpu_samples],
                       gpu_samples_ms=[x * 1e3 for x in r.gpu_samples], warnings=r.warnings)
            verdict = ""
            if check:
                if ref is None:
                    ref = r.images
                    verdict = "reference"
                else:
                    diff = _image_diff(ref, r.images)
                    cover = _coverage_diff(ref, r.images)
                    same = diff == 0
                    row.update(identical_to_method1=same, diff_pixels=diff, coverage_diff_pixels=cover)
                    verdicts["identical_to_method1"][key] = same
                    verdicts["diff_pixels"][key] = diff
                    verdicts["coverage_diff_pixels"][key] = cover
                    must = args.data == "on" and key in SAME_AS_METHOD1
                    verdict = "= method 1" if same else f"{diff} px differ, coverage {cover}" + \
                        (" MISMATCH" if must else " (by design)")
                    mismatch |= must and not same
            result["rows"].append(row)
            print(f"{n:>8}  {label:34} {r.draw_calls:>8} {r.gl_calls:>9} {r.prepare_s:>7.1f} "
                  f"{r.cpu_submit_s * 1e3:>9.3f} {r.gpu_s * 1e3:>9.3f} {r.wall_s * 1e3:>9.3f} "
                  f"{row['replayer_overhead_ms']:>8.3f}  {verdict}", flush=True)
            if "optimize_s" in extra:
                print(f"{'':>10}optimize: {extra['optimize_s']:.1f} s ({extra['passes']}) -> "
                      f"{extra['optimized_calls']}", flush=True)
            del r, s
        if check and ref is not None:
            expected = [k for k in SAME_AS_METHOD1[1:] if k in verdicts["identical_to_method1"]]
            ok = all(verdicts["identical_to_method1"][k] for k in expected)
            verdicts["expected_identical"] = expected
            verdicts["expected_identical_ok"] = ok if args.data == "on" else None
            result["images"].append(verdicts)
            if args.data == "on":
                dp, cv = verdicts["diff_pixels"], verdicts["coverage_diff_pixels"]
                print(f"{'':>10}images: method 1 = {' = '.join(expected)}: "
                      f"{'identical' if ok else 'NOT identical'}; methods 4 / 5 differ by design in "
                      f"{dp.get('m4', '-')} / {dp.get('m5', '-')} px (covered pixels differing: "
                      f"{cv.get('m4', '-')} / {cv.get('m5', '-')})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 1 if args.strict and mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
