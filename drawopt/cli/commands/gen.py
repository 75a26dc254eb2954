"""``drawopt gen``: write a deterministic, realistic stream (quads, frame, gpu-driven, bundle).

Examples::

    drawopt gen --kind quads --draws 64 -o quads.dstream
    drawopt gen --kind frame --draws 1000000 --seed 7 -o frame.npz --set materials=256
    drawopt gen --kind gpu-driven --draws 500 -o - --set context=compute --set flushes=missing
    drawopt gen --kind frame --list-options
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import sys

from drawopt.cli.progress import Progress
from drawopt.errors import UsageError

HELP = "generate a deterministic stream (quads, frame, gpu-driven, bundle)"
PROGRESS_DRAWS = 200_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    from drawopt.gen import KINDS
    p.add_argument("--kind", required=True, choices=KINDS, help="what to generate")
    p.add_argument("--draws", type=int, default=None, metavar="N",
                   help="logical draw records (MultiDraw count N counts N); required unless --list-options")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("-o", "--output", metavar="OUT", default=None,
                   help="output file; the format follows the extension (.dstream, .json, .npz); '-' = stdout")
    p.add_argument("--to", dest="to_fmt", choices=("text", "json", "npz"), metavar="FMT",
                   help="output format, overriding the extension")
    p.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="a generator option (repeatable); --list-options shows them")
    p.add_argument("--list-options", action="store_true", help="list the options of --kind and exit")


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"gen: --set expects KEY=VALUE, got '{item}'")
        if key in out:
            raise UsageError(f"gen: option '{key}' given twice")
        out[key] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    from drawopt.gen import generate, options
    if args.list_options:
        for o in options(args.kind):
            print(f"{o.name:<26} default {o.default!s:<18} {o.help}")
        return 0
    if args.draws is None:
        raise UsageError("gen: --draws is required")
    if args.output is None:
        raise UsageError("gen: -o/--output is required ('-' for standard output)")
    from drawopt.ir.formats import format_for, save
    fmt = args.to_fmt or ("text" if args.output == "-" else format_for(args.output))
    opts = _parse_sets(args.options)
    show = sys.stderr.isatty() and args.draws > PROGRESS_DRAWS
    with Progress(f"gen {args.kind}", total=3, enabled=show) as prog:
        prog.step(f"generating {args.draws} draws", 0)
        stream = generate(args.kind, args.draws, args.seed, **opts)
        prog.step(f"checking {len(stream)} commands")
        stream.check()
        prog.step(f"writing {args.output}")
        save(stream, args.output, fmt)
    return 0
