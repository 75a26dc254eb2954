"""The ``drawopt`` command line (also ``python -m drawopt``).

Exit status: 0 success, 1 findings (or a negative verdict), 2 bad input or usage.
Errors are printed as ``file:line:col: error: message``, never as a traceback.
"""

from __future__ import annotations

__all__ = ["main", "exit_now", "console"]

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from drawopt.cli.commands import SUBCOMMANDS
from drawopt.cli.memory import tune_allocator
from drawopt.errors import DrawoptError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: exit 2, one line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog="drawopt", description="Offline optimizing compiler for GPU draw streams.")
    p.add_argument("--version", action="version", version=f"drawopt {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, modname in SUBCOMMANDS.items():
        if only is not None and name != only:  # argv names its command: no parser for the others (each
            continue  # ArgumentParser costs argparse's gettext look-ups, ~1 ms a parser)
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue  # subcommand not built yet
            raise
        sp = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run)
    return p


def _version() -> str:
    from drawopt import __version__
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(only).parse_args(argv)
    if not getattr(args, "_run", None):
        build_parser().print_help(sys.stderr)
        return 2
    tune_allocator()
    try:
        return int(args._run(args) or 0)
    except DrawoptError as e:
        print(str(e), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def exit_now(status: int) -> NoReturn:
    """End the process with ``status`` as ``sys.exit(status)`` would, less the interpreter's teardown.

    At exit CPython frees every module, array and cached analysis one object at a time: 40-50 ms of
    a 10k-draw ``optimize`` on the dev machine (the time from ``main``'s return to the process's
    end), for nothing, the kernel takes the memory back at once. What of the teardown matters is
    done here first, in CPython's order: the at-exit handlers (logging's flush, ``weakref.finalize``
    / ``tempfile`` clean-ups, multiprocessing's) and flushing stdout / stderr, whose failure makes
    the status 120 as in ``Py_FinalizeEx``. Outputs are written and closed before ``main`` returns
    (:mod:`drawopt.ir.formats.atomic`). With another thread still running, an unflushable stream,
    a profiler or tracer installed (``python -m cProfile -m drawopt``, coverage: they write their
    results after the program's end) or no ``atexit._run_exitfuncs`` (not CPython) it is plain
    ``sys.exit(status)``.
    Used by ``python -m drawopt`` and the ``drawopt`` script (:func:`console`); :func:`main` itself
    returns (tests and callers embed it).
    """
    import atexit
    import os
    import threading

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    watched = sys.getprofile() is not None or sys.gettrace() is not None
    if threading.active_count() > 1 or run_exitfuncs is None or watched:
        sys.exit(status)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no stream, a closed pipe: sys.exit decides, as before
        sys.exit(status)
    run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        status = 120
    os._exit(status)


def console() -> NoReturn:
    """The ``drawopt`` console script: :func:`main`, ended by :func:`exit_now` as ``python -m drawopt`` is."""
    exit_now(main())


if __name__ == "__main__":
    console()
