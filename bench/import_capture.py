"""Throughput of the capture importer on a long capture made from a real one.

The capture is the committed glmark2-ideas fixture (zink on lavapipe: the program re-records
its command buffers every frame) with its last frame's records repeated until the capture holds
``--records`` records: every repeated frame re-begins, re-records, submits and presents the same
command buffers, so the result is a valid capture of a long run. The importer reads it once
keeping one frame (streaming: memory bounded by the frames kept) and once keeping every frame.

    python bench/import_capture.py [--records 550000] [--json out.json]

Prints records per second (wall clock, and per CPU second of the process: on a shared machine
the wall clock also counts the time other processes had the cores) for both runs, the peak
memory (ru_maxrss) and the file size. The issue asks for >= 100,000 records/s (a 190 MB capture
of ~550,000 calls in under 6 s).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drawopt.importers.capture import import_capture_summary  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "captures" / "glmark2-ideas" / "glmark2-ideas.jsonl.gz"


def make_capture(path: Path, records: int) -> int:
    """Write the long capture; returns its number of records (header excluded)."""
    with gzip.open(FIXTURE, "rt") as f:
        lines = f.read().splitlines()
    presents = [i for i, t in enumerate(lines) if '"vkQueuePresentKHR"' in t]
    head, frame = lines[: presents[-2] + 1], lines[presents[-2] + 1: presents[-1] + 1]
    # the program alternates command buffers between frames (it begins the next frame's buffer
    # after submitting this one's): begin every buffer the repeated frame records into before
    # beginning it, so each repetition re-records its buffers as a real frame does
    begun: set[int] = set()
    starts: list[str] = []
    for t in frame:
        rec = json.loads(t)["vkFunc"]
        cb = rec["args"].get("commandBuffer")
        if rec["name"] == "vkBeginCommandBuffer":
            begun.add(cb)
        elif rec["name"].startswith("vkCmd") and cb not in begun:
            begun.add(cb)
            starts.append(json.dumps({"index": 0, "vkFunc": {"name": "vkBeginCommandBuffer", "return": "VK_SUCCESS",
                                      "args": {"commandBuffer": cb, "pBeginInfo": {"flags": 1}}}},
                                     separators=(",", ":")))
    frame = starts + frame
    n = len(head) - 1
    with open(path, "w") as out:
        out.write("\n".join(head) + "\n")
        block = "\n".join(frame) + "\n"
        while n < records:
            out.write(block)
            n += len(frame)
    return n


def run(path: Path, frames: object) -> dict[str, float]:
    t, c = time.perf_counter(), time.process_time()
    out, summary = import_capture_summary(str(path), frames, shaders=str(FIXTURE.parent / "shaders"))
    dt, dc = time.perf_counter() - t, time.process_time() - c
    return {"seconds": round(dt, 3), "cpu_seconds": round(dc, 3), "records": summary.records,
            "frames_total": summary.frames_total, "frames_kept": len(out),
            "records_per_s": round(summary.records / dt), "records_per_cpu_s": round(summary.records / dc),
            "draws_kept": sum(f.draws for f in summary.frames if f.frame in out)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=550_000)
    ap.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl"
        n = make_capture(path, args.records)
        size = os.path.getsize(path)
        one = run(path, 1)
        rss_one = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        every = run(path, "all")
        rss_all = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    res = {"capture_records": n, "capture_mb": round(size / 2**20, 1), "one_frame": one, "all_frames": every,
           "peak_rss_mb_after_one_frame": rss_one, "peak_rss_mb_after_all_frames": rss_all,
           "cpus": os.cpu_count()}
    print(f"capture: {n:,} records, {size / 2**20:.1f} MB (glmark2-ideas frame repeated)")
    for k in ("one_frame", "all_frames"):
        r = res[k]
        print(f"  {k:<10}: {r['seconds']:6.2f} s wall ({r['records_per_s']:>9,} records/s), "
              f"{r['cpu_seconds']:6.2f} s CPU ({r['records_per_cpu_s']:>9,} records/CPU-s)  "
              f"({r['frames_kept']} of {r['frames_total']} frames kept, {r['draws_kept']:,} draws)")
    print(f"  peak RSS: {rss_one} MB after the one-frame run, {rss_all} MB after the all-frames run")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
