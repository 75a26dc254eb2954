"""``drawopt verify ORIGINAL OPTIMIZED``: translation validation of a rewrite.

Exit status: 0 when the optimized stream renders what the original does, 1 when
it does not (the first difference is printed), 2 for bad input or usage.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import sys

from drawopt.ir.formats import load
from drawopt.verify import REORDER_POLICIES, verify

HELP = "check that an optimized stream renders what the original does (translation validation)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("original", metavar="ORIGINAL", help="the stream before the rewrite ('-' = standard input)")
    p.add_argument("optimized", metavar="OPTIMIZED", help="the stream after the rewrite")
    p.add_argument("--reorder", choices=REORDER_POLICIES, default=None,
                   help="which draws on a common target may change order (default: the policy recorded in "
                        "OPTIMIZED's header, else declared)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def run(args: argparse.Namespace) -> int:
    a = load(args.original)   # under small pages: drawopt.cli.main set them for the process
    b = load(args.optimized)
    reorder = args.reorder or b.header.reorder or "declared"
    res = verify(a, b, reorder=reorder)
    if args.json:
        sys.stdout.write(json.dumps(res.to_json(), sort_keys=True, indent=2, default=str) + "\n")
    elif res.equivalent:
        st = res.details.get("stats", {})
        recs = st.get("records", [0, 0])
        sys.stdout.write(f"equivalent ({recs[0]} records compared, reorder={reorder})\n")
    else:
        where_a = f"{args.original}:{res.line_a}" if res.line_a is not None else args.original
        where_b = f"{args.optimized}:{res.line_b}" if res.line_b is not None else args.optimized
        sys.stdout.write(f"not equivalent: {res.reason}\n  original:  {where_a}\n  optimized: {where_b}\n")
    return 0 if res.equivalent else 1
