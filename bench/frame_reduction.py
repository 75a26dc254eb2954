"""Frame reduction benchmark: what the default pipeline does to the ``frame`` stream, per target.

Generates ``drawopt gen --kind frame --draws N --seed S`` (default 100000, seed 7: the stream
issue 4's acceptance is measured on), runs each target's default pipeline
(:func:`drawopt.analysis.costmodel.default_pipeline`, what ``drawopt optimize --target T`` runs) and
prints, per target, the before/after figures ``optimize`` reports (draw calls, state changes,
lower bound, ...), the ratios, the distance of the result from the lower bound, and where the
remaining draw calls come from (by frame pass, split into vertex-pulling and input-layout
pipelines). The acceptance line checks draw calls and state changes cut at least 5x each and
the result within 10% of the lower bound.

    python bench/frame_reduction.py                          # 100k draws, seed 7, all targets
    python bench/frame_reduction.py --draws 10000 --targets d3d12,xbox-one --verify-each
    python bench/frame_reduction.py --set vertex_pulling_fraction=1.0 --json out.json
    python bench/frame_reduction.py --targets d3d12 --reorder opaque    # the engine convention

Timing is wall clock of the whole pipeline on this machine (single-threaded Python + numpy).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.analysis.costmodel import TARGETS, default_pipeline  # noqa: E402
from drawopt.analysis.lowerbound import report_figures  # noqa: E402
from drawopt.analysis.state import track  # noqa: E402
from drawopt.gen import generate  # noqa: E402
from drawopt.ir.ops import BY_NAME, DRAW_OPS, MULTI_DRAW_OPS  # noqa: E402
from drawopt.ir.stream import Stream  # noqa: E402
from drawopt.passmanager import PassManager, parse_pipeline  # noqa: E402
from drawopt.stats import compute_stats  # noqa: E402

ROWS = ("commands", "draw_calls", "draws", "state_changes", "distinct_states", "gpu_batches", "cpu_cost",
        "lower_bound")
PASSES = (("z_", "prepass"), ("gb_", "g-buffer"), ("at_", "alpha-tested"), ("lighting", "lighting"),
          ("tr_", "transparent"), ("ui_", "ui"))
GOAL_RATIO = 5.0
GOAL_BOUND = 0.10


def figures(stream: Stream, target: str, reorder: str = "declared") -> dict[str, Any]:
    """The figures ``drawopt optimize`` reports for ``stream`` on ``target``."""
    table = track(stream)
    out = compute_stats(stream, state=table, target=target)
    out.update(report_figures(stream, target, reorder, table=table))
    return out


def calls_by_pass(stream: Stream) -> dict[str, tuple[int, int]]:
    """``{frame pass [/il]: (logical draws, draw calls)}``, by the name of each call's pipeline."""
    pso = np.flatnonzero(stream.op == BY_NAME["SetPipelineState"].code)
    calls = np.flatnonzero(np.isin(stream.op, list(DRAW_OPS)))
    k = np.searchsorted(pso, calls) - 1
    multi = np.isin(stream.op[calls], list(MULTI_DRAW_OPS))
    records = np.where(multi, stream.args[calls, 0], 1)
    draws: Counter[str] = Counter()
    ncalls: Counter[str] = Counter()
    for j, n in zip(k.tolist(), records.tolist()):
        p = stream.decls[int(stream.args[pso[j], 0])] if j >= 0 else None
        name = getattr(p, "name", "?")
        label = next((lab for pre, lab in PASSES if name.startswith(pre)), "other")
        if p is not None and not p.vertex_pulling:
            label += "/il"
        draws[label] += int(n)
        ncalls[label] += 1
    return {k: (draws[k], ncalls[k]) for k in sorted(draws)}


def run_target(stream: Stream, target: str, verify_each: bool, reorder: str = "declared") -> dict[str, Any]:
    """Run ``target``'s default pipeline on ``stream`` under ``reorder``; the report of one table."""
    before = figures(stream, target, reorder)
    pipeline = default_pipeline(target)
    pm = PassManager(parse_pipeline(pipeline), verify_each=verify_each, reorder=reorder, target=target)
    t0 = time.perf_counter()
    out = pm.run(stream)
    seconds = time.perf_counter() - t0
    after = figures(out, target, reorder)
    return {
        "target": target, "reorder": reorder, "pipeline": pipeline, "seconds": round(seconds, 2),
        "before": before, "after": after,
        "passes": [{"name": r.name, "seconds": round(r.seconds, 3), "verified": r.verified, "report": r.report}
                   for r in pm.records],
        "calls_by_pass": calls_by_pass(out),
    }


def _ratio(b: float, a: float) -> float:
    return b / a if a else float("inf")


def format_report(rep: dict[str, Any]) -> str:
    """One target's table (the rows of ``drawopt optimize``), pass highlights and the verdict."""
    b, a = rep["before"], rep["after"]
    lines = [f"== {rep['target']} (--reorder {rep['reorder']}): {rep['pipeline']}  ({rep['seconds']:.1f} s)",
             f"  {'':<16}{'before':>12}{'after':>12}{'ratio':>9}"]
    for k in ROWS:
        if k not in b or k not in a:
            continue
        if isinstance(b[k], float) or isinstance(a[k], float):
            cells = f"{b[k]:>12.1f}{a[k]:>12.1f}"
        else:
            cells = f"{b[k]:>12,}{a[k]:>12,}"
        lines.append(f"  {k:<16}{cells}{_ratio(b[k], a[k]):>8.2f}x")
    for p in rep["passes"]:
        r = p["report"] or {}
        keep = {k: r[k] for k in ("moved", "runs", "draws_removed", "direct_batches", "direct_draws_batched",
                                  "lifted_batches", "lifted_draws", "packed_draws", "packed_of_eligible",
                                  "removed_total") if k in r}
        verified = "" if p["verified"] is None else f" verified={p['verified']}"
        lines.append(f"  {p['name']:<16}{p['seconds']:>7.2f} s{verified} {keep}")
    lines.append("  calls left by frame pass (logical draws -> calls): " + ", ".join(
        f"{k} {d:,}->{c:,}" for k, (d, c) in rep["calls_by_pass"].items()))
    rc, rs = _ratio(b["draw_calls"], a["draw_calls"]), _ratio(b["state_changes"], a["state_changes"])
    gap = a["draw_calls"] / a["lower_bound"] - 1 if a["lower_bound"] else float("inf")
    ok = rc >= GOAL_RATIO and rs >= GOAL_RATIO and gap <= GOAL_BOUND
    ceiling = _ratio(b["draw_calls"], b["lower_bound"])
    lines.append(f"  ceiling: input draw calls / lower bound = {ceiling:.2f}x (what any rewrite drawopt's passes can "
                 f"make reaches at most, under this reorder policy)")
    lines.append(f"  acceptance (>= {GOAL_RATIO:g}x calls and state changes, <= {GOAL_BOUND:.0%} above the "
                 f"lower bound): calls {rc:.2f}x, state changes {rs:.2f}x, {gap:+.1%} vs the bound -> "
                 f"{'met' if ok else 'NOT met'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated (default {','.join(TARGETS)})")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a frame generator option")
    ap.add_argument("--reorder", choices=("none", "declared", "opaque"), default="declared",
                    help="the reorder policy (default declared, optimize's default)")
    ap.add_argument("--verify-each", action="store_true", help="verify after every pass (slow on 100k draws)")
    ap.add_argument("--json", help="also write every report as JSON to this file")
    args = ap.parse_args(argv)
    opts = dict(kv.split("=", 1) for kv in args.set)
    targets = [t for t in args.targets.split(",") if t]
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        ap.error(f"unknown target(s) {', '.join(bad)} (known: {', '.join(TARGETS)})")
    t0 = time.perf_counter()
    stream = generate("frame", args.draws, seed=args.seed, **opts)
    print(f"frame: {args.draws:,} draws, seed {args.seed}, options {opts or 'default'} "
          f"(generated in {time.perf_counter() - t0:.1f} s; {len(stream):,} commands)")
    print("input by frame pass (logical draws -> calls): " + ", ".join(
        f"{k} {d:,}->{c:,}" for k, (d, c) in calls_by_pass(stream).items()))
    reports = []
    for target in targets:
        rep = run_target(stream, target, args.verify_each, args.reorder)
        reports.append(rep)
        print(format_report(rep), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"draws": args.draws, "seed": args.seed, "options": opts, "targets": reports}, f, indent=2,
                      default=lambda x: x.tolist() if hasattr(x, "tolist") else str(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
