"""``drawopt report R.json -o R.html``: the HTML page of a JSON report (``drawopt optimize --report R.json``).

The dependency graph on the page needs the output stream: it is read from the
report's ``output`` path (relative to the current directory, then to the
report's directory) or from ``--stream``; without it the page says so.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import os

from drawopt.errors import InputError, UsageError

HELP = "render a JSON optimize report (optimize --report R.json) as a self-contained HTML page"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", metavar="R.json", help="a report written by 'drawopt optimize --report R.json'")
    p.add_argument("-o", "--output", required=True, metavar="R.html", help="the page to write (- for stdout)")
    p.add_argument("--stream", metavar="OUT", help="the optimized stream, for the dependency graph "
                                                   "(default: the report's output path)")
    p.add_argument("--range", metavar="A:B", help="commands whose dependency graph the page draws "
                                                  "(default: the first 200 of the output)")


def _find_stream(args: argparse.Namespace, report: dict) -> str | None:
    if args.stream:
        return str(args.stream)
    out = report.get("output")
    if not out or out == "-":
        return None
    for cand in (out, os.path.join(os.path.dirname(os.path.abspath(args.report)), out)):
        if os.path.exists(cand):
            return cand
    return None


def run(args: argparse.Namespace) -> int:
    import sys

    from drawopt.htmlreport import render_html
    from drawopt.ir import formats

    try:
        with open(args.report, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {args.report}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON: {e.msg}", args.report, e.lineno, e.colno) from None
    missing = [k for k in ("before", "after", "passes", "pipeline", "target", "reorder") if k not in report]
    if not isinstance(report, dict) or missing:
        raise InputError(f"not a drawopt optimize report (missing {', '.join(missing)})", args.report, 1, 1)
    path = _find_stream(args, report)
    stream = formats.load(path) if path else None
    page = render_html(report, stream, graph_range=args.range)
    if args.output == "-":
        sys.stdout.write(page)
    else:
        formats.write_text_atomic(args.output, page)
    return 0
