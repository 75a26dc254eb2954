"""CLI subcommands: one module each, exposing ``HELP``, ``add_arguments(p)`` and ``run(args) -> int``.

The registry maps a subcommand to its module, imported lazily so that
``drawopt --help`` stays fast.
"""

from __future__ import annotations

__all__ = ["SUBCOMMANDS"]

SUBCOMMANDS: dict[str, str] = {
    "gen": "drawopt.cli.commands.gen",
    "convert": "drawopt.cli.commands.convert",
    "stats": "drawopt.cli.commands.stats",
    "validate": "drawopt.cli.commands.validate",
    "optimize": "drawopt.cli.commands.optimize",
    "explain": "drawopt.cli.commands.explain",
    "graph": "drawopt.cli.commands.graph",
    "verify": "drawopt.cli.commands.verify",
    "replay": "drawopt.cli.commands.replay",
    "import": "drawopt.cli.commands.import_",
    "report": "drawopt.cli.commands.report",
    "batch": "drawopt.cli.commands.batch",
    "calibrate": "drawopt.cli.commands.calibrate",
}
