"""CLI subcommands: one module each, exposing ``HELP``, ``add_arguments(p)`` and ``run(args) -> int``.

The registry maps a subcommand to its module, imported lazily so that
``drawopt --help`` stays fast.
"""

from __future__ import annotations

__all__ = ["SUBCOMMANDS"]

SUBCOMMANDS: dict[str, str] = {
    "gen": "drawopt.commands.gen",
    "convert": "drawopt.commands.convert",
    "stats": "drawopt.commands.stats",
    "validate": "drawopt.commands.validate",
    "optimize": "drawopt.commands.optimize",
    "explain": "drawopt.commands.explain",
    "graph": "drawopt.commands.graph",
    "verify": "drawopt.commands.verify",
    "replay": "drawopt.commands.replay",
    "import": "drawopt.commands.import_",
    "report": "drawopt.commands.report",
    "batch": "drawopt.commands.batch",
    "calibrate": "drawopt.commands.calibrate",
}
