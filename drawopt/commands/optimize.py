"""``drawopt optimize IN -o OUT``: run a pass pipeline and print a before/after summary."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import UsageError
from ..passmanager import PASSES, PassManager, default_pipeline, parse_pipeline
from ..progress import Progress

HELP = "optimize a stream with a pass pipeline and print a before/after summary"

TARGETS = ("xbox-one", "xbox-series", "d3d12", "vulkan", "gl")
REORDER = ("none", "declared", "opaque")

ROWS = ("commands", "draw_calls", "draws", "state_changes", "distinct_states", "flushes", "gpu_batches",
        "packed_fraction", "cpu_cost", "lower_bound")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="input stream (.dstream, .json, .npz, or - for stdin)")
    p.add_argument("-o", "--output", help="output stream (format by extension; - for stdout)")
    p.add_argument("--passes", help="comma-separated pass pipeline, e.g. 'dedupe-state,schedule{reorder=opaque}' "
                                    "(default: the target's best safe pipeline)")
    p.add_argument("--target", choices=TARGETS, default="d3d12", help="target whose cost model decides (default d3d12)")
    p.add_argument("--target-profile", metavar="FILE.json",
                   help="a measured target profile (drawopt calibrate) used instead of --target's model")
    p.add_argument("--reorder", choices=REORDER, default="declared",
                   help="which draws on a shared target may commute (default declared)")
    p.add_argument("--verify-each", action="store_true", help="verify the stream after every pass")
    p.add_argument("--report", metavar="R.json", help="write the full report as JSON")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--print-passes", action="store_true", help="list the registered passes and exit")
    p.add_argument("--time-passes", action="store_true", help="print the time each pass took")


def _stats(stream: Any, target: str, reorder: str) -> dict[str, Any]:
    """The report figures of one stream: stats plus the cost model's CPU cost and lower bound."""
    from ..costmodel import report_figures
    from ..state import track
    from ..stats import compute_stats

    table = track(stream)
    figures = compute_stats(stream, state=table, target=target)
    figures.update(report_figures(stream, target, reorder, table=table))
    return figures


def run(args: argparse.Namespace) -> int:
    from .. import formats

    if args.print_passes:
        for name in PASSES:
            print(name)
        return 0
    if not args.output:
        raise UsageError("optimize needs -o OUT (use -o - for stdout)")
    out_fmt = formats.format_for(args.output) if args.output != "-" else "text"
    if getattr(args, "target_profile", None):
        from ..costmodel import load_target_profile, register_target
        args.target = register_target(load_target_profile(args.target_profile))
    stream = formats.load(args.input)
    pipeline = args.passes if args.passes is not None else default_pipeline(args.target)
    passes = parse_pipeline(pipeline, target=args.target, reorder=args.reorder)
    before = _stats(stream, args.target, args.reorder)
    with Progress("optimize", len(passes)) as prog:
        pm = PassManager(passes, verify_each=args.verify_each, reorder=args.reorder,
                         on_pass=lambda p, r: prog.step(p.name))
        result = pm.run(stream)
    after = _stats(result, args.target, args.reorder)
    formats.save(result, args.output, out_fmt)
    report = {
        "input": args.input, "output": args.output, "target": args.target, "reorder": args.reorder,
        "pipeline": [str(p) for p in passes], "before": before, "after": after,
        "passes": [{"name": r.name, "seconds": round(r.seconds, 6), "modified": r.modified,
                    "commands_before": r.commands_before, "commands_after": r.commands_after,
                    "verified": r.verified, "report": r.report} for r in pm.records],
    }
    if args.report:
        formats.write_text_atomic(args.report, json.dumps(report, indent=2, sort_keys=True, default=_jsonable) + "\n")
    out = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        print(json.dumps({k: report[k] for k in ("pipeline", "before", "after")}, sort_keys=True,
                         default=_jsonable), file=out)
    else:
        print(summary_table(before, after), file=out)
        if args.time_passes:
            for r in pm.records:
                print(f"  {r.name:<18} {r.seconds * 1000:9.1f} ms  {r.commands_before} -> {r.commands_after}",
                      file=out)
    return 0


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def summary_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The before/after table ``optimize`` prints."""
    lines = [f"{'':<18}{'before':>14}{'after':>14}{'ratio':>13}"]
    for k in ROWS:
        if k not in before or k not in after:
            continue
        b, a = before[k], after[k]
        if isinstance(b, float) or isinstance(a, float):
            cells = f"{b:>14.3f}{a:>14.3f}"
        else:
            cells = f"{b:>14,}{a:>14,}"
        ratio = f"{b / a:>12.2f}x" if isinstance(a, (int, float)) and a and k != "packed_fraction" else ""
        lines.append(f"{k:<18}{cells}{ratio}")
    return "\n".join(lines)
