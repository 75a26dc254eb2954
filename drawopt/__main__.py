"""``python -m drawopt``: the command line, ended without the interpreter's teardown (exit_now)."""

from drawopt.cli import console

console()
