"""Replay benchmark: every generated kind and imported capture, original vs the optimizer's output.

For every kind of ``drawopt gen`` (``--kinds``, default all) at every size (``--draws``,
default 10k and 100k, seed ``--seed``) and every capture fixture found under
``--captures`` (default ``tests/data/captures/*``; skipped when absent), it optimizes the
stream with the default pipeline of every ``--targets`` (default ``d3d12,gl``; ``gl`` is the
measured profile committed as ``drawopt/targets/gl.json``, or ``--target-profile``),
replays original and outputs through OpenGL (light content, docs/replay.md; every output
under the original's squeeze factor; all streams prepared first and their timed frames
interleaved, so that drifts of the machine weigh on all alike), compares every image and prints a table of CPU
submit and GPU time (medians of ``--frames`` frames after a warm-up frame and
``--warmup-s`` seconds of untimed replay). ``--profile`` adds the per-command-kind
profile of the original and the output of the largest frame.

    python bench/replay_frames.py                                  # on a GPU machine
    python bench/replay_frames.py --kinds frame --draws 2000 --frames 3 --size 128x128

``--json FILE`` writes every row (with the per-frame samples). Exit status 0; with
``--strict`` 1 when an image differs or an output is slower than its input.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.analysis.costmodel import default_pipeline, load_target_profile, register_target  # noqa: E402
from drawopt.gen import KINDS, generate  # noqa: E402
from drawopt.ir import formats  # noqa: E402
from drawopt.replay import ReplayOptions, available, compare, replay_interleaved  # noqa: E402
from drawopt.replay.executor import PRIM_BUDGET, index_scale_for  # noqa: E402
from drawopt.replay.gl import get_context  # noqa: E402
from drawopt.result import optimize  # noqa: E402


def _size(text: str) -> tuple[int, int]:
    w, h = text.lower().split("x")
    return int(w), int(h)


def _row(tag: str, r: Any) -> dict[str, Any]:
    return {"stream": tag, "draw_calls": r.draw_calls, "gl_calls": r.gl_calls, "cpu_ms": r.cpu_submit_s * 1e3,
            "gpu_ms": r.gpu_s * 1e3, "wall_ms": r.wall_s * 1e3, "cpu_samples_ms": [x * 1e3 for x in r.cpu_samples],
            "gpu_samples_ms": [x * 1e3 for x in r.gpu_samples], "index_scale": r.index_scale,
            "null_draws": r.counts.get("null_draws", 0), "squeezed_draws": r.counts.get("squeezed_draws", 0),
            "prepare_s": r.prepare_s, "executor": r.executor, "warnings": dict(r.warnings),
            **({"profile": r.profile} if r.profile else {})}


def _capture_frames(folder: str) -> list[tuple[str, Any]]:
    """``(label, make)`` for every frame of the capture in ``folder`` (``*.jsonl.gz`` plus its ``shaders/``)."""
    from drawopt.importers.capture import import_capture

    out: list[tuple[str, Any]] = []
    for cap in sorted(glob.glob(os.path.join(folder, "*.jsonl.gz"))):
        shaders = os.path.join(folder, "shaders")
        opts = {"shaders": shaders} if os.path.isdir(shaders) else {}
        frames = import_capture(cap, **opts)
        for n, stream in sorted(frames.items()):
            out.append((f"{os.path.basename(folder)} frame {n}", lambda stream=stream: stream))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--draws", default="10000,100000")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--targets", default="d3d12,gl")
    ap.add_argument("--reorders", default="declared",
                    help="reorder policies to optimize under (comma-separated; each target under each)")
    ap.add_argument("--target-profile", help="measured profile to use as the gl target (else the committed one)")
    ap.add_argument("--captures", default="tests/data/captures/*")
    ap.add_argument("--size", type=_size, default=(1280, 720))
    ap.add_argument("--frames", type=int, default=9)
    ap.add_argument("--warmup-s", type=float, default=1.0)
    ap.add_argument("--content", choices=("light", "full"), default="light")
    ap.add_argument("--profile", action="store_true", help="profile the largest frame's original and outputs")
    ap.add_argument("--prim-budget", type=int, default=None, help="light content's primitive budget (default 2^20)")
    ap.add_argument("--pipelines", default="", help="also these pipelines (';'-separated, costed as the first "
                                                     "target), e.g. 'dedupe-state;dedupe-state,mdi,flush'")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args(argv)
    ok, why = available()
    if not ok:
        print(f"replay_frames: {why}", file=sys.stderr)
        return 2
    _, _, info = get_context()
    targets = [t for t in args.targets.split(",") if t]
    if args.target_profile:
        m = load_target_profile(args.target_profile)
        register_target(m)
        targets = [m.name if t == "gl" else t for t in targets]
    sizes = [int(x) for x in args.draws.split(",") if x]
    inputs: list[tuple[str, Any]] = []
    for kind in [k for k in args.kinds.split(",") if k]:
        for n in sizes:
            inputs.append((f"{kind} {n // 1000}k" if n >= 1000 else f"{kind} {n}",
                           lambda kind=kind, n=n: generate(kind, n, seed=args.seed)))
    for path in sorted(glob.glob(args.captures)):
        if os.path.isfile(path):
            inputs.append((os.path.basename(path), lambda path=path: formats.load(path)))
        elif os.path.isdir(path):  # a capture fixture folder (tests/data/captures/NAME): every frame of it
            inputs.extend(_capture_frames(path))
    biggest = max(sizes) if sizes else 0
    rows: list[dict[str, Any]] = []
    bad = 0
    for label, make in inputs:
        t0 = time.perf_counter()
        src = make()
        gen_s = time.perf_counter() - t0
        prof = args.profile and label.startswith("frame") and label.endswith(f"{biggest // 1000}k")
        scale = index_scale_for(src, args.prim_budget or PRIM_BUDGET) if args.content == "light" else 1
        opts = ReplayOptions(size=args.size, content=args.content, index_scale=scale)
        extra = [(targets[0], p) for p in args.pipelines.split(";") if p]
        policies = [r for r in args.reorders.split(",") if r]
        plan = [(t, default_pipeline(t), r) for r in policies for t in targets]
        plan += [(t, p, policies[0]) for t, p in extra]
        outs, opt_times = [], []
        for tgt, pipe, policy in plan:
            t0 = time.perf_counter()
            outs.append(optimize(src, pipe, target=tgt, reorder=policy).stream)  # the input itself: nothing to gain
            opt_times.append(time.perf_counter() - t0)
        # every stream prepared, then their timed frames interleaved (same machine conditions)
        res = replay_interleaved([src, *outs], [opts] * (1 + len(outs)), frames=args.frames,
                                 warmup_s=args.warmup_s, profile=prof)
        ra = res[0]
        base = {"input": label, "gen_s": gen_s}
        rows.append({**base, "target": "", "pipeline": "", **_row("original", ra)})
        print(f"{label}: original {ra.draw_calls} draws, CPU {ra.cpu_submit_s * 1e3:.3f} ms, "
              f"GPU {ra.gpu_s * 1e3:.3f} ms (1/{ra.index_scale})", flush=True)
        for (tgt, pipe, policy), out, rb, opt_s in zip(plan, outs, res[1:], opt_times):
            cmp = compare(ra, rb)
            unchanged = out is src  # the same stream: its ratio is the replay's noise, not a change
            row = {**base, "target": tgt, "pipeline": pipe, "reorder": policy, "optimize_s": opt_s,
                   "unchanged": unchanged, **_row("optimized", rb),
                   "same": cmp.same, "diff": [d.name for d in cmp.diffs if not d.same],
                   "cpu_ratio": rb.cpu_submit_s / ra.cpu_submit_s if ra.cpu_submit_s else None,
                   "gpu_ratio": rb.gpu_s / ra.gpu_s if ra.gpu_s else None}
            row["diff_detail"] = [{"name": d.name, "differing": d.differing, "total": d.total, "max_abs": d.max_abs}
                                  for d in cmp.diffs if not d.same]
            rows.append(row)
            slower = row["cpu_ratio"] is not None and row["cpu_ratio"] > 1.0 or \
                row["gpu_ratio"] is not None and row["gpu_ratio"] > 1.02
            bad += (not cmp.same) + bool(slower and not unchanged)
            print(f"  {tgt} [{pipe}] reorder={policy}: {rb.draw_calls} draws, CPU {rb.cpu_submit_s * 1e3:.3f} ms "
                  f"({row['cpu_ratio']:.3f}x), GPU {rb.gpu_s * 1e3:.3f} ms ({row['gpu_ratio']:.3f}x), "
                  f"images {'identical' if cmp.same else 'DIFFER: ' + ','.join(row['diff'])}"
                  f"{' (unchanged: the input itself)' if unchanged else ''}", flush=True)
    print()
    print("| input | target | reorder | pipeline | draw calls | GL calls | CPU ms | GPU ms | CPU ratio | GPU ratio "
          "| images |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = (f"{r['cpu_ratio']:.3f} | {r['gpu_ratio']:.3f}" if r["target"] else " | ")
        same = ("identical" if r.get("same") else "differ") if r["target"] else ""
        same += " (unchanged)" if r.get("unchanged") else ""
        print(f"| {r['input']} | {r['target'] or 'original'} | {r.get('reorder', '')} | {r['pipeline'] or '-'} | "
              f"{r['draw_calls']} | "
              f"{r['gl_calls']} | {r['cpu_ms']:.3f} | {r['gpu_ms']:.3f} | {ratio} | {same} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": {**info.as_dict(), "python": platform.python_version(),
                                   "cpu": platform.processor() or platform.machine()},
                       "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()},
                       "rows": rows}, f, indent=1, default=str)
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
