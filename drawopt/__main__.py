"""``python -m drawopt``: the command line, ended without the interpreter's teardown (exit_now)."""

from drawopt.cli import exit_now, main

exit_now(main())
