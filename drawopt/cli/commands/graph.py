"""``drawopt graph FILE -o OUT``: write the dependency graph of a stream.

The format follows the extension of OUT: ``.dot`` (Graphviz), ``.graphml`` or
``.json`` (``networkx.node_link_data``); ``-o -`` writes the graph to standard
output (``--format``, default dot) and the counts to stderr. ``--range A:B`` limits the graph to
commands A..B-1; the node and edge counts per kind and reason are printed.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import sys

from drawopt.analysis.graph import GRAPH_FORMATS, build_graph, graph_bytes, graph_summary, write_graph
from drawopt.errors import UsageError
from drawopt.ir.formats import load

HELP = "write the dependency graph of a stream (.dot, .graphml or .json)"


def _range(text: str) -> tuple[int, int | None]:
    a, sep, b = text.partition(":")
    try:
        start = int(a) if a else 0
        stop = int(b) if b else None
    except ValueError:
        raise UsageError(f"--range expects A:B (command indices), got '{text}'") from None
    if not sep or start < 0 or (stop is not None and stop < start):
        raise UsageError(f"--range expects A:B with 0 <= A <= B, got '{text}'")
    return start, stop


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="stream file ('-' = standard input)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output file: .dot, .graphml or .json; - for standard output")
    p.add_argument("--format", choices=sorted(set(GRAPH_FORMATS.values())),
                   help="graph format (default: by the extension of OUT; dot for -)")
    p.add_argument("--range", metavar="A:B", help="only commands A..B-1 (command indices, as in the JSON/npz)")
    p.add_argument("--reorder", choices=("none", "declared", "opaque"), default="declared",
                   help="which draws on a common target commute (default: declared)")


def run(args: argparse.Namespace) -> int:
    stream = load(args.file)
    start, stop = _range(args.range) if args.range else (0, None)
    if stop is not None:
        stop = min(stop, len(stream))
    if start > len(stream):
        raise UsageError(f"--range starts at {start}, but the stream has {len(stream)} commands")
    G = build_graph(stream, reorder=args.reorder, start=start, stop=stop)
    if args.output == "-":
        sys.stdout.buffer.write(graph_bytes(G, args.format or "dot", stream))
        sys.stdout.flush()
    elif args.format:
        from drawopt.ir.formats.atomic import write_atomic
        write_atomic(args.output, graph_bytes(G, args.format, stream))
    else:
        write_graph(G, args.output, stream)
    sm = graph_summary(G)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(sm["node_kinds"].items()))
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(sm["edge_reasons"].items()))
    out = sys.stderr if args.output == "-" else sys.stdout  # stdout holds the graph itself with -o -
    out.write(f"{args.output}: {sm['nodes']} nodes ({kinds or 'none'}), {sm['edges']} edges "
              f"({reasons or 'none'})\n")
    return 0
