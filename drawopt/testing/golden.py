"""Golden-file tests for draw streams: the comparison the ``drawopt_golden`` pytest fixture runs.

A golden is the exact expected output of a pipeline over an input, checked in
as ``.dstream`` text. :func:`match_golden` compares an obtained output with it:
on a mismatch it writes ``<name>.obtained.dstream`` beside the golden and fails
with a unified diff; with ``update`` it rewrites the golden instead (review the
diff before committing: goldens are never accepted blindly). Either way the
golden must verify against its input (the translation validator).

drawopt's own golden cases carry their options in a RUN line (as in LLVM's lit
/ xDSL's filecheck tests)::

    tests/golden/merge-instances/quads.in.dstream      # RUN: passes=merge-instances target=d3d12
    tests/golden/merge-instances/quads.out.dstream     # the exact expected output

The pytest side (the fixture, ``--drawopt-update-golden``) is
:mod:`drawopt.testing.pytest_plugin`; docs/golden-tests.md shows a user's repo.
"""

from __future__ import annotations

__all__ = ["GoldenCase", "parse_run_line", "find_cases", "check_golden", "GoldenMismatch", "match_golden",
           "obtained_path", "case_options"]

import difflib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_PREFIX = "# RUN:"


class GoldenMismatch(AssertionError):
    """The output differs from the golden file."""


@dataclass
class GoldenCase:
    """One input file, its expected output and the options of its RUN line."""

    input: Path
    expected: Path
    options: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.input.parent.name}/{self.input.name.removesuffix('.in.dstream')}"


def parse_run_line(text: str) -> dict[str, str]:
    """Options of the ``# RUN: key=value ...`` line(s) at the top of ``text``."""
    opts: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(RUN_PREFIX):
            for tok in shlex.split(line[len(RUN_PREFIX):]):
                k, sep, v = tok.partition("=")
                if not sep:
                    raise ValueError(f"bad RUN option {tok!r} (expected key=value)")
                opts[k] = v
    return opts


def find_cases(root: str | Path) -> list[GoldenCase]:
    """All ``*.in.dstream`` files under ``root`` with their ``*.out.dstream``."""
    cases = []
    for p in sorted(Path(root).rglob("*.in.dstream")):
        opts = parse_run_line(p.read_text())
        cases.append(GoldenCase(p, p.with_name(p.name.replace(".in.dstream", ".out.dstream")), opts))
    return cases


def case_options(case: GoldenCase) -> dict[str, Any]:
    """``case``'s RUN options as :func:`drawopt.optimize` keyword arguments (``verify_each`` on by default).

    >>> case_options(GoldenCase(Path("a.in.dstream"), Path("a.out.dstream"), {"passes": "weld", "min-saving": "0.5"}))
    {'passes': 'weld', 'target': 'd3d12', 'reorder': 'declared', 'verify_each': True, 'min_saving': '0.5'}
    """
    o: dict[str, Any] = dict(case.options)
    kw: dict[str, Any] = {"passes": o.pop("passes", None), "target": o.pop("target", "d3d12"),
                          "reorder": o.pop("reorder", "declared"),
                          "verify_each": o.pop("verify-each", "1") not in ("0", "false", "off")}
    kw.update({k.replace("-", "_"): v for k, v in o.items()})
    return kw


def run_case(case: GoldenCase) -> str:
    """The canonical text of the optimized stream for ``case``."""
    from drawopt.ir import formats
    from drawopt.result import optimize

    out = optimize(formats.load(case.input), **case_options(case)).stream
    text = formats.dumps(out, "text")
    assert isinstance(text, str)
    return text


def obtained_path(golden: str | Path) -> Path:
    """Where a mismatching output is written: beside the golden, ``.obtained.dstream``.

    >>> obtained_path("tests/golden/weld/quads.out.dstream").name, obtained_path("frame.opt.dstream").name
    ('quads.obtained.dstream', 'frame.opt.obtained.dstream')
    """
    p = Path(golden)
    stem = p.name.removesuffix(".dstream").removesuffix(".out")
    return p.with_name(stem + ".obtained.dstream")


def match_golden(input_stream: Any, got: str, golden: str | Path, update: bool = False,
                 reorder: str = "declared", update_flag: str = "--drawopt-update-golden") -> None:
    """Compare the obtained text ``got`` with ``golden``; rewrite it when ``update``.

    Raises :class:`GoldenMismatch` with a unified diff (and writes the obtained
    file beside the golden) when they differ or the golden is missing, and when
    the golden does not verify against ``input_stream``.

    >>> import tempfile
    >>> from drawopt.ir import formats
    >>> from drawopt.gen import generate
    >>> s = generate("quads", 2)
    >>> g = Path(tempfile.mkdtemp()) / "q.dstream"
    >>> match_golden(s, formats.dumps(s), g, update=True)
    >>> match_golden(s, formats.dumps(s), g)
    >>> match_golden(s, formats.dumps(s).replace("DrawInstanced 6", "DrawInstanced 3", 1), g)
    Traceback (most recent call last):
    ...
    drawopt.testing.golden.GoldenMismatch: output differs from ...
    """
    golden = Path(golden)
    obtained = obtained_path(golden)
    if update:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
        obtained.unlink(missing_ok=True)
    elif not golden.exists():
        obtained.write_text(got)
        raise GoldenMismatch(f"no golden file {golden}; the output is in {obtained} "
                             f"(review it, then run pytest {update_flag} to create the golden)")
    else:
        want = golden.read_text()
        if got != want:
            obtained.write_text(got)
            diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                str(golden), str(obtained)))
            raise GoldenMismatch(f"output differs from {golden} (obtained output in {obtained}; "
                                 f"run pytest {update_flag} to accept it after review):\n{diff}")
        obtained.unlink(missing_ok=True)
    _check_verifies(input_stream, golden, reorder)


def _check_verifies(input_stream: Any, golden: Path, reorder: str) -> None:
    from drawopt.ir import formats
    from drawopt.passmanager import verify_streams

    reason = verify_streams(input_stream, formats.load(golden), reorder=reorder)
    if reason is not None:
        raise GoldenMismatch(f"{golden} does not render what its input does: {reason}")


def check_golden(case: GoldenCase, update: bool = False) -> None:
    """Compare ``case``'s output with its golden; rewrite it when ``update``."""
    from drawopt.ir import formats

    match_golden(formats.load(case.input), run_case(case), case.expected, update,
                 reorder=str(case.options.get("reorder", "declared")))
