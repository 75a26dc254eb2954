"""``drawopt convert IN OUT``: convert a stream between the text, JSON and npz formats."""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse

from drawopt.ir.formats import FORMATS, format_for, load, save

HELP = "convert a stream between the .dstream text, JSON and .npz formats"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="IN", help="input stream ('-' = standard input, format sniffed)")
    p.add_argument("output", metavar="OUT", help="output stream ('-' = standard output, text unless --to)")
    p.add_argument("--from", dest="from_fmt", choices=FORMATS, metavar="FMT",
                   help="input format: text, json or npz (default: by extension)")
    p.add_argument("--to", dest="to_fmt", choices=FORMATS, metavar="FMT",
                   help="output format: text, json or npz (default: by extension)")


def run(args: argparse.Namespace) -> int:
    # decide the output format first: a usage error must not cost a parse
    to_fmt = args.to_fmt or ("text" if args.output == "-" else format_for(args.output))
    stream = load(args.input, args.from_fmt)
    save(stream, args.output, to_fmt)
    return 0
