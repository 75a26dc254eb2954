"""``drawopt optimize IN -o OUT``: run a pass pipeline and print a one-line verdict.

Output (stdout, or stderr when the stream goes to stdout with ``-o -``)::

    frame.dstream: 200 draws -> 107 calls (bound 101), 541 -> 225 state changes, verified

``-v`` adds the before/after table and the per-pass figures (and, off a
terminal, one progress line per pass on stderr); ``-q`` prints nothing but
errors; ``--json`` prints the figures as JSON instead. ``--time-passes`` prints
the time of every stage (load, each pass, the post-condition's finding counts,
verify, report, save: :mod:`drawopt.cli.timing`) on stderr, or with ``--json``
adds them to the JSON as ``time_passes``; with ``-q`` the table alone (as LLVM's
``opt -disable-output -time-passes``). ``--report R.json`` /
``--report R.html`` writes the full report (``drawopt report`` turns the JSON
into the page later). Ctrl-C exits 130 and leaves no output file.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any, TextIO

from drawopt.analysis.costmodel import TARGETS as _TARGETS
from drawopt.cli.progress import Progress
from drawopt.cli.timing import StageClock
from drawopt.errors import UsageError
from drawopt.ir.stream import REORDER_POLICIES
from drawopt.passmanager import PASSES, Pass, PassResult, default_pipeline, get_pass, parse_pipeline, record_provenance
from drawopt.result import OptimizeResult, report_to_json

HELP = "optimize a stream with a pass pipeline and print a one-line verdict (-v: the before/after table)"

TARGETS = _TARGETS
REORDER = REORDER_POLICIES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="?", help="input stream (.dstream, .json, .npz, or - for stdin)")
    p.add_argument("-o", "--output", help="output stream (format by extension; - for stdout)")
    p.add_argument("--passes", help="comma-separated pass pipeline, e.g. 'dedupe-state,mdi{max-count=64}' "
                                    "(default: the target's best safe pipeline; see --print-passes)")
    p.add_argument("--target", choices=TARGETS, default="d3d12", help="target whose cost model decides (default d3d12)")
    p.add_argument("--target-profile", metavar="FILE.json",
                   help="a measured target profile (drawopt calibrate) used instead of --target's model")
    p.add_argument("--reorder", choices=REORDER, default="declared",
                   help="which draws on a shared target may commute (default declared)")
    p.add_argument("--verify-each", action="store_true", help="verify the stream after every pass")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the final check of the output against the input (faster; the output is then unproven)")
    p.add_argument("--report", metavar="R.json|R.html",
                   help="write the full report: JSON, or (.html) a self-contained page")
    p.add_argument("--range", metavar="A:B", help="with --report R.html: the commands whose dependency graph "
                                                  "the page draws (default: the first 40 of the output)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of the verdict")
    p.add_argument("--print-passes", action="store_true",
                   help="list the registered passes with their summary and options, and exit (no input needed)")
    p.add_argument("--time-passes", action="store_true",
                   help="print the time of every stage (load, each pass, post-condition, verify, report, save) "
                        "and the total on stderr (with --json: in the JSON)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="store_true", help="also print the before/after table and each pass")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing but errors (and the --time-passes table, if asked for)")


def print_passes(out: TextIO) -> None:
    """Every registered pass: name, one-line summary, options with their defaults."""
    for name in PASSES:
        cls = get_pass(name)
        opts = " ".join(f"{f.name.replace('_', '-')}={_show(f.default)}" for f in dataclasses.fields(cls))
        out.write(f"{name:<16} {cls.summary}\n")
        if opts:
            out.write(f"{'':<16}   options: {opts}\n")


def _show(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _note(res: PassResult, commands_before: int) -> str:
    return (f"{commands_before} -> {len(res.stream)} commands" if res.modified else "no change")


def run(args: argparse.Namespace) -> int:
    clock = StageClock()
    from drawopt.ir import formats
    from drawopt.result import optimize

    if args.print_passes:
        print_passes(sys.stdout)
        return 0
    if not args.input:
        raise UsageError("optimize needs an input stream (or --print-passes)")
    if not args.output:
        raise UsageError("optimize needs -o OUT (use -o - for stdout)")
    if args.range and not (args.report or "").endswith(".html"):
        raise UsageError("optimize: --range goes with --report R.html")
    out_fmt = formats.format_for(args.output) if args.output != "-" else "text"
    if getattr(args, "target_profile", None):
        from drawopt.analysis.costmodel import load_target_profile, register_target
        args.target = register_target(load_target_profile(args.target_profile))
    with clock.stage("load"):
        stream = formats.load(args.input)
    pipeline = args.passes if args.passes is not None else default_pipeline(args.target)
    passes = parse_pipeline(pipeline, target=args.target, reorder=args.reorder)
    sizes: list[int] = []

    def on_start(p: Pass) -> None:
        sizes.append(len(stream) if not sizes else sizes[-1])
        prog.start(str(p))

    def on_pass(p: Pass, r: PassResult) -> None:
        prog.finish(_note(r, sizes[-1]))
        sizes[-1] = len(r.stream)

    with Progress("optimize", len(passes), log=args.verbose) as prog:
        res = optimize(stream, passes, target=args.target, reorder=args.reorder, verify_each=args.verify_each,
                       verify=not args.no_verify, on_start=on_start, on_pass=on_pass, early_input=True)
        for stage in ("findings", "verify", "report"):  # (report: the input's figures, taken before the passes)
            clock.add(stage, res.stage_seconds.get(stage, 0.0))
        prog.start("before/after figures")
        t_report = time.perf_counter()
        rep = res.report  # the whole-stream figures (state tracking, lower bound) are part of the run
    name = "<stdin>" if args.input == "-" else args.input
    for r in res.rejected:
        print(f"{name}: warning: {r}; its output was discarded", file=sys.stderr)
    report = {"input": args.input, "output": args.output, **rep.to_json()}
    page = None
    if args.report:
        from drawopt.htmlreport import add_details, render_html

        add_details(report, res)
        if args.report.endswith(".html"):
            page = render_html(report, res.stream, graph_range=args.range)
    clock.add("report", time.perf_counter() - t_report)
    with clock.stage("save"):
        formats.save(record_provenance(res.stream, args.target, args.reorder), args.output, out_fmt)
    if args.report:
        with clock.stage("report"):
            formats.write_text_atomic(args.report, page if page is not None else report_to_json(report) + "\n")
    if not args.quiet:
        _print(args, res, name, sys.stderr if args.output == "-" else sys.stdout, clock)
    if args.time_passes and (args.quiet or not args.json):  # asked for: -q drops the verdict, not this
        sys.stderr.write(clock.table([(p.name, p.seconds) for p in res.report.passes]) + "\n")
    return 0


def _print(args: argparse.Namespace, res: OptimizeResult, name: str, out: TextIO, clock: StageClock) -> None:
    rep = res.report
    if args.json:
        j: dict[str, Any] = {k: v for k, v in rep.to_json().items() if k not in ("total_seconds",)}
        j["passes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in j["passes"]]
        if args.time_passes:
            j["time_passes"] = {"passes": [{"name": p.name, "seconds": round(p.seconds, 6)} for p in rep.passes],
                                "total_seconds": round(rep.total_seconds, 6),
                                "stages": clock.stages([(p.name, p.seconds) for p in rep.passes])}
        out.write(report_to_json(j, indent=None) + "\n")
        return
    out.write(rep.verdict(name) + "\n")
    if args.verbose:
        out.write(rep.table() + "\n")
        out.write(f"{'pass':<34}{'calls':>10}{'state changes':>15}{'commands':>10}\n")
        for p in rep.passes:
            out.write(f"{p.name[:33]:<34}{p.draw_calls:>10,}{p.state_changes:>15,}{p.commands:>10,}"
                      f"{'' if p.modified else '  (no change)'}\n")
