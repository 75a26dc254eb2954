"""Batch throughput: ``drawopt.batch`` over a folder of generated frames with 1, 2, ... worker processes.

Generates ``--count`` frames of ``--draws`` draws (``drawopt gen --kind frame --seed i``, saved as
``.npz``) into ``--frames`` once (reused when the folder already holds them), then for each worker
count starts a ``LocalCluster`` of single-threaded worker processes (start-up timed apart), runs the
batch with the cache off and reports the wall time, frames per second, the speed-up over the first
worker count, the per-task time measured inside the tasks (mean / median, and its split into read,
load, optimize, verify, write), and the scheduler's cost: ``(wall x workers - task time) / tasks``
for the real batch and the round trip of ``--noop`` empty tasks. The load average is printed before
and after each run: the machine may be shared, and other work inflates both wall and task times.

    python bench/batch_throughput.py                                   # 200 x 10k draws, 1 and 2 workers
    python bench/batch_throughput.py --count 20 --draws 2000 --workers 1,2 --json out.json

Prints a table and, with ``--json``, writes every figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.batch import batch  # noqa: E402


def _noop(x: int) -> int:
    return x


def ensure_frames(folder: str, count: int, draws: int) -> list[str]:
    """The ``count`` frame files in ``folder``, generated once."""
    from drawopt.gen import generate
    from drawopt.ir.formats import save
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"frame{i:03d}.npz") for i in range(count)]
    for i, path in enumerate(paths):
        if not os.path.exists(path):
            stream = generate("frame", draws, i)
            stream.check()
            save(stream, path)
    return paths


def _task_figures(items: list[Any]) -> dict[str, Any]:
    totals = [r.seconds.get("total", 0.0) for r in items]
    parts = {k: round(sum(r.seconds.get(k, 0.0) for r in items) / len(items), 4)
             for k in ("read", "load", "optimize", "verify", "write")}
    cpu = [r.seconds.get("cpu", 0.0) for r in items]
    return {"task_mean_s": round(statistics.mean(totals), 4), "task_median_s": round(statistics.median(totals), 4),
            "task_sum_s": round(sum(totals), 3), "task_cpu_mean_s": round(statistics.mean(cpu), 4),
            "task_parts_mean_s": parts}


def run_one(paths: list[str], out: str, workers: int, noop: int, pipeline: str | None, verify: bool
            ) -> dict[str, Any]:
    from distributed import Client, LocalCluster
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR)
    start_s = time.perf_counter() - t0
    try:
        with Client(cluster) as client:  # warm the workers (imports) so that the batch measures the work
            client.run(lambda: __import__("drawopt.batch_task") and __import__("drawopt.passmanager"))
            t = time.perf_counter()
            client.gather(client.map(_noop, range(noop), pure=False))
            noop_s = (time.perf_counter() - t) / max(noop, 1)
        shutil.rmtree(out, ignore_errors=True)
        s = batch(paths, out, passes=pipeline, scheduler=cluster.scheduler_address, cache=False, verify=verify)
    finally:
        cluster.close()
    if s.failed:
        raise SystemExit(f"{len(s.failed)} inputs failed, first: {s.failed[0].error}")
    wall = s.wall_seconds
    fig = {"workers": workers, "frames": len(paths), "cluster_start_s": round(start_s, 3), "wall_s": round(wall, 3),
           "frames_per_s": round(len(paths) / wall, 3), "load_before": [round(x, 2) for x in load_before],
           "load_after": [round(x, 2) for x in os.getloadavg()], "noop_task_ms": round(noop_s * 1000, 3)}
    fig.update(_task_figures(s.items))
    fig["overhead_per_task_ms"] = round((wall * workers - fig["task_sum_s"]) / len(paths) * 1000, 2)
    fig["efficiency"] = round(fig["task_sum_s"] / (wall * workers), 3)
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", default="/tmp/batch200", help="folder of the generated frames (reused)")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--out", default="/tmp/batch200-out", help="output folder (emptied before each run)")
    ap.add_argument("--passes", default=None, help="pipeline (default: d3d12's)")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--noop", type=int, default=1000, help="empty tasks for the scheduler round trip")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args()
    paths = ensure_frames(args.frames, args.count, args.draws)
    runs = []
    for n in (int(x) for x in args.workers.split(",")):
        fig = run_one(paths, args.out, n, args.noop, args.passes, args.verify)
        runs.append(fig)
        print(json.dumps(fig), file=sys.stderr, flush=True)
    base = runs[0]["frames_per_s"]
    for fig in runs:
        fig["speedup"] = round(fig["frames_per_s"] / base, 3)
    print(f"{args.count} frames x {args.draws} draws, cores {os.cpu_count()}")
    print(f"{'workers':>7} {'start s':>8} {'wall s':>8} {'frames/s':>9} {'speedup':>8} {'task ms':>8} "
          f"{'task cpu ms':>11} {'optimize ms':>11} {'overhead ms':>11} {'noop ms':>8} {'load before -> after':>22}")
    for f in runs:
        opt_ms = f["task_parts_mean_s"]["optimize"] * 1000
        print(f"{f['workers']:>7} {f['cluster_start_s']:>8.2f} {f['wall_s']:>8.2f} {f['frames_per_s']:>9.2f} "
              f"{f['speedup']:>7.2f}x {f['task_mean_s'] * 1000:>8.0f} {f['task_cpu_mean_s'] * 1000:>11.0f} "
              f"{opt_ms:>11.0f} {f['overhead_per_task_ms']:>11.1f} {f['noop_task_ms']:>8.2f} "
              f"{f['load_before'][0]:>10.2f} -> {f['load_after'][0]:<8.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"count": args.count, "draws": args.draws, "cpu_count": os.cpu_count(), "runs": runs}, fh,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
