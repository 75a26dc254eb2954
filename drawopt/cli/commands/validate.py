"""``drawopt validate FILE``: report the seed rules a stream breaks.

Prints one ``file:line:col: warning: [rule] message`` per finding (without
``line:col`` when the stream carries no source lines, e.g. built in memory).
Exit status: 0 no findings, 1 findings, 2 bad input.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import sys

from drawopt.errors import InputError
from drawopt.ir.formats import load
from drawopt.validate import RULES, findings

HELP = "check a stream against the seed rules (exit 1 if anything is found)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="stream file ('-' = standard input)")
    p.add_argument("--json", action="store_true",
                   help="print the findings as a JSON list of {rule, cmd, line, message}")
    p.epilog = "rules: " + "; ".join(f"{k}: {v}" for k, v in RULES.items())


def run(args: argparse.Namespace) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    stream = load(args.file)
    try:
        found = findings(stream)
    except InputError as e:
        raise e.with_file(name) from None
    if args.json:
        sys.stdout.write(json.dumps([{"rule": f.rule, "cmd": f.cmd, "line": f.line, "message": f.message}
                                     for f in found], indent=2) + "\n")
    else:
        for f in found:
            loc = f"{name}:{f.line}:1" if f.line > 0 else name
            sys.stdout.write(f"{loc}: warning: [{f.rule}] {f.message}\n")
    return 1 if found else 0
