"""``drawopt stats FILE``: command, draw, state and batching figures of a stream."""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import sys

from drawopt.errors import InputError
from drawopt.ir.formats import load
from drawopt.stats import compute_stats, format_stats

HELP = "print statistics of a stream (commands, draws, states, GPU batches, findings)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="stream file ('-' = standard input)")
    p.add_argument("--json", action="store_true", help="print JSON (sorted keys) instead of a table")


def run(args: argparse.Namespace) -> int:
    stream = load(args.file)
    try:
        stats = compute_stats(stream)
    except InputError as e:  # semantic errors found while tracking carry no file name
        raise e.with_file("<stdin>" if args.file == "-" else args.file) from None
    if args.json:
        sys.stdout.write(json.dumps(stats, sort_keys=True, indent=2) + "\n")
    else:
        sys.stdout.write(format_stats(stats))
    return 0
