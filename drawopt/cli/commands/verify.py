"""``drawopt verify ORIGINAL OPTIMIZED``: translation validation of a rewrite.

Output (stdout)::

    equivalent (271 records compared, reorder=declared)

or ``not equivalent: REASON`` with the place in each stream. ``-v`` adds the
checker's figures (records and actions of each stream, resources, where the
reorder policy came from, and for a difference its kind and fields); ``-q``
prints nothing: the exit status is the verdict (bad input still prints its
error); ``--json`` prints the verdict as JSON instead.

Exit status: 0 when the optimized stream renders what the original does, 1 when
it does not (the first difference is printed), 2 for bad input or usage.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run", "verbose_lines"]

import argparse
import json
import sys
from typing import Any

from drawopt.ir.formats import load
from drawopt.verify import REORDER_POLICIES, VerifyResult, verify

HELP = "check that an optimized stream renders what the original does (translation validation)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("original", metavar="ORIGINAL", help="the stream before the rewrite ('-' = standard input)")
    p.add_argument("optimized", metavar="OPTIMIZED", help="the stream after the rewrite")
    p.add_argument("--reorder", choices=REORDER_POLICIES, default=None,
                   help="which draws on a common target may change order (default: the policy recorded in "
                        "OPTIMIZED's header, else declared)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="store_true",
                   help="also print the checker's figures (records, actions, resources) and a difference's fields")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing: the exit status is the verdict (errors in the input still print)")


def run(args: argparse.Namespace) -> int:
    a = load(args.original)   # under small pages: drawopt.cli.main set them for the process
    b = load(args.optimized)
    # the policy and where it came from, first given of: the option, OPTIMIZED's header, the default
    reorder, source = next((v, src) for v, src in ((args.reorder, "--reorder"),
                                                    (b.header.reorder, "OPTIMIZED's header"),
                                                    ("declared", "the default")) if v)
    res = verify(a, b, reorder=reorder)
    if args.quiet:
        return 0 if res.equivalent else 1
    out = sys.stdout
    if args.json:
        out.write(json.dumps(res.to_json(), sort_keys=True, indent=2, default=str) + "\n")
        return 0 if res.equivalent else 1
    if res.equivalent:
        recs = res.details.get("stats", {}).get("records", [0, 0])
        out.write(f"equivalent ({recs[0]} records compared, reorder={reorder})\n")
    else:
        where_a = f"{args.original}:{res.line_a}" if res.line_a is not None else args.original
        where_b = f"{args.optimized}:{res.line_b}" if res.line_b is not None else args.optimized
        out.write(f"not equivalent: {res.reason}\n  original:  {where_a}\n  optimized: {where_b}\n")
    if args.verbose:
        for line in verbose_lines(res, reorder, source):
            out.write(line + "\n")
    return 0 if res.equivalent else 1


def verbose_lines(res: VerifyResult, reorder: str, source: str = "--reorder") -> list[str]:
    """The lines ``drawopt verify -v`` adds under the verdict: the checker's figures, then (for a
    difference) its kind and fields.

    >>> from drawopt.verify import VerifyResult
    >>> r = VerifyResult(True, details={"stats": {"records": [9, 8], "actions": [4, 2], "resources": 3,
    ...                                           "seconds": 0.01}, "violations_kept": 0})
    >>> print("\\n".join(verbose_lines(r, "declared")))
      reorder policy        declared (from --reorder)
      records               9 -> 8
      actions               4 -> 2
      resources             3
      violations kept       0
      verify seconds        0.010
    """
    lines = [f"  {'reorder policy':<21} {reorder} (from {source})"]
    st: dict[str, Any] = res.details.get("stats") or {}
    for key in ("records", "actions"):
        if key in st:
            lines.append(f"  {key:<21} {st[key][0]:,} -> {st[key][1]:,}")
    if "resources" in st:
        lines.append(f"  {'resources':<21} {st['resources']:,}")
    if "violations_kept" in res.details:
        lines.append(f"  {'violations kept':<21} {res.details['violations_kept']:,}")
    if "seconds" in st:
        lines.append(f"  {'verify seconds':<21} {st['seconds']:.3f}")
    if not res.equivalent:
        for k, v in sorted(res.details.items()):
            if k != "stats":
                lines.append(f"  {k:<21} {v}")
        if res.cmd_a is not None or res.cmd_b is not None:
            lines.append(f"  {'commands':<21} original {_cmd(res.cmd_a)}, optimized {_cmd(res.cmd_b)}")
    return lines


def _cmd(i: int | None) -> str:
    return "-" if i is None else f"#{i}"
