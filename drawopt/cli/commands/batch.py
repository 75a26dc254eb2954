"""``drawopt batch INPUTS... -o OUTDIR``: optimize many streams, scenes and capture frames on Dask.

Examples::

    drawopt batch frames/ -o opt/                          # every stream under frames/, one worker per core
    drawopt batch cap.jsonl.gz scene.glb a.npz -o opt/ --target vulkan -v
    drawopt batch corpus/ -o opt/ --scheduler tcp://sched:8786 --json > summary.json

Exit status: 0 when every input was optimized (or reused from the cache), 1 when any failed (each
failure is printed as ``file:line:col: error: ...``; the others complete), 2 for a usage error.
See docs/batch.md.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import sys
from typing import Any

from drawopt.cli.commands.optimize import REORDER, TARGETS

HELP = "optimize many streams, scenes and capture frames in parallel (Dask) into a folder"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="stream files (.dstream, .json, .npz), glTF scenes, captures (every frame), folders")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="folder for the optimized streams")
    p.add_argument("--passes", help="pass pipeline (default: the target's best safe pipeline)")
    p.add_argument("--target", choices=TARGETS, default="d3d12", help="target whose cost model decides (default d3d12)")
    p.add_argument("--reorder", choices=REORDER, default="declared",
                   help="which draws on a shared target may commute (default declared)")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the final check of each output against its input (as optimize --no-verify)")
    p.add_argument("--verify-each", action="store_true", help="verify the stream after every pass")
    p.add_argument("--to", dest="to_fmt", choices=("text", "json", "npz"), metavar="FMT",
                   help="output format (default: a stream keeps its own, imports are written as npz)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the embedded cluster (default: one per core; 0: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="use an existing Dask cluster (tcp://host:8786)")
    p.add_argument("--cache-dir", metavar="DIR", help="content cache folder (default OUTDIR/.drawopt-cache)")
    p.add_argument("--no-cache", action="store_true", help="recompute every input")
    p.add_argument("--report", metavar="R.json", help="write the whole summary (every input's figures) as JSON")
    p.add_argument("--json", action="store_true", help="print the whole summary as JSON on stdout")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per finished input, and the table")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def _line(item: Any) -> str:
    """``frame001.npz: 33,928 -> 13,903 commands, 10,000 -> 5,038 draw calls (optimized, 1.62 s)``."""
    name = item.input if item.frame is None else f"{item.input}#{item.frame}"
    b, a = item.before, item.after
    return (f"{name}: {b.get('commands', 0):,} -> {a.get('commands', 0):,} commands, "
            f"{b.get('draw_calls', 0):,} -> {a.get('draw_calls', 0):,} draw calls "
            f"({item.status}{', verified' if item.verified else ''}, {item.seconds.get('total', 0.0):.2f} s)")


def run(args: argparse.Namespace) -> int:
    from drawopt import batch as run_batch
    from drawopt.cli.progress import Progress
    from drawopt.ir.formats import write_text_atomic

    state: dict[str, Any] = {"progress": None, "failed": 0}

    def on_start(total: int) -> None:
        if not args.quiet:  # a live line on a terminal only (Progress decides)
            state["progress"] = Progress("batch", total).__enter__()
            state["progress"].start("starting the workers")

    def on_result(item: Any, done: int, total: int) -> None:
        prog = state["progress"]
        lines = []
        if item.status == "failed":
            state["failed"] += 1
            lines.append(item.error)
        elif not args.quiet:  # as drawopt optimize warns
            name = item.input if item.frame is None else f"{item.input}#{item.frame}"
            lines += [f"{name}: warning: {r}; its output was discarded" for r in item.rejected]
            lines += [f"{name}: warning: {n}" for n in item.notes]
        if args.verbose and item.status != "failed":
            lines.append(_line(item))
        for text in lines:
            if prog is not None and prog.enabled:
                prog.stream.write("\r\x1b[K")  # clear the live line; it is drawn again below
            print(text, file=sys.stderr, flush=True)
        if prog is not None:
            prog.finish()
            prog.start(f"{done} done" + (f", {state['failed']} failed" if state["failed"] else ""))

    try:
        summary = run_batch.batch(args.inputs, args.output, passes=args.passes, target=args.target,
                                  workers=args.workers, scheduler=args.scheduler, verify=not args.no_verify,
                                  cache_dir=args.cache_dir, cache=not args.no_cache, reorder=args.reorder,
                                  fmt=args.to_fmt, verify_each=args.verify_each, on_start=on_start,
                                  on_result=on_result)
    finally:
        if state["progress"] is not None:
            state["progress"].__exit__(None, None, None)
    doc = summary.to_dict()
    if args.report:
        write_text_atomic(args.report, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(doc, sort_keys=True))
    elif not args.quiet:
        if args.verbose:
            print(summary.table())
        print(summary.verdict())
    return summary.exit_code
