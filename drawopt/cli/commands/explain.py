"""``drawopt explain FILE``: why each adjacent pair of draw calls was left unmerged."""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import sys

from drawopt.analysis.costmodel import TARGETS
from drawopt.errors import InputError, UsageError
from drawopt.ir.stream import REORDER_POLICIES

HELP = "say, for every adjacent pair of draw calls left unmerged, what keeps them apart"

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="stream file (.dstream, .json, .npz; '-' = standard input)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="target whose cost model and limits apply (default: the target recorded in FILE's "
                        "header by optimize, else d3d12)")
    p.add_argument("--reorder", choices=REORDER_POLICIES, default=None,
                   help="reorder policy of the dependency graph (default: the one recorded in FILE's header, "
                        "else declared)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="list at most N pairs (every pair is still counted in the summary)")
    p.add_argument("--no-graph", action="store_true",
                   help="do not build the dependency graph (faster; data hazards are then not named)")


def run(args: argparse.Namespace) -> int:
    from drawopt.explain import explain, format_explanation
    from drawopt.ir.formats import load

    if args.limit is not None and args.limit < 0:
        raise UsageError("explain: --limit must be >= 0")
    stream = load(args.file)
    name = "<stdin>" if args.file == "-" else args.file
    try:
        ex = explain(stream, args.target or stream.header.target or "d3d12",
                     args.reorder or stream.header.reorder or "declared", limit=args.limit,
                     use_graph=not args.no_graph)
    except InputError as e:  # semantic errors found while tracking carry no file name
        raise e.with_file(name) from None
    if args.json:
        sys.stdout.write(json.dumps({"file": name, **ex.to_json()}, sort_keys=True, indent=2) + "\n")
    else:
        sys.stdout.write(format_explanation(ex, name))
    return 0
