"""Golden-file tests for draw streams, as a pytest plugin.

A golden case is an input stream whose first lines carry a RUN line (as in
LLVM's lit / xDSL's filecheck tests) and an expected output beside it::

    tests/golden/merge-instances/quads.in.dstream      # RUN: passes=merge-instances target=d3d12
    tests/golden/merge-instances/quads.out.dstream     # the exact expected output

``check_golden`` runs the pipeline with ``--verify-each`` and compares the
canonical text. On a mismatch it writes ``<case>.obtained.dstream`` beside the
golden and fails with a unified diff; ``pytest --update-golden`` rewrites the
goldens instead (review the diff before committing: goldens are never accepted
blindly).

Use it in your own test suite with ``pytest -p drawopt.testing.golden`` and the
``golden`` fixture::

    def test_my_frame(golden):
        golden("frames/shadow.in.dstream")
"""

from __future__ import annotations

__all__ = ["GoldenCase", "parse_run_line", "find_cases", "check_golden", "GoldenMismatch"]

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


def run_case(case: GoldenCase) -> str:
    """The canonical text of the optimized stream for ``case``."""
    from .. import formats
    from ..passmanager import optimize

    o: dict[str, Any] = dict(case.options)
    passes = o.pop("passes", None)
    target = o.pop("target", "d3d12")
    reorder = o.pop("reorder", "declared")
    verify_each = o.pop("verify-each", "1") not in ("0", "false", "off")
    stream = formats.load(case.input)
    out = optimize(stream, passes, target=target, reorder=reorder, verify_each=verify_each,
                   **{k.replace("-", "_"): v for k, v in o.items()}).stream
    text = formats.dumps(out, "text")
    assert isinstance(text, str)
    return text


def check_golden(case: GoldenCase, update: bool = False) -> None:
    """Compare ``case``'s output with its golden; rewrite it when ``update``."""
    got = run_case(case)
    obtained = case.expected.with_name(case.expected.name.replace(".out.dstream", ".obtained.dstream"))
    if update or not case.expected.exists():
        case.expected.write_text(got)
        obtained.unlink(missing_ok=True)
        if not update:
            raise GoldenMismatch(f"{case.expected} did not exist; wrote it from the current output (review it)")
        return
    want = case.expected.read_text()
    if got == want:
        obtained.unlink(missing_ok=True)
        return
    obtained.write_text(got)
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                        str(case.expected), str(obtained)))
    raise GoldenMismatch(f"output differs from {case.expected} (obtained output in {obtained}; "
                         f"run pytest --update-golden to accept after review):\n{diff}")


# ---------------------------------------------------------------- pytest plugin
def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("drawopt")
    group.addoption("--update-golden", action="store_true", default=False,
                    help="rewrite drawopt golden files from the current output (review the diff!)")


def _fixture():
    import pytest

    @pytest.fixture
    def golden(request: Any) -> Any:
        """``golden(path)`` checks ``path`` (an ``.in.dstream``, relative to the test file) against its golden."""
        update = request.config.getoption("--update-golden")
        base = Path(request.fspath).parent

        def check(path: str | Path) -> None:
            p = Path(path)
            p = p if p.is_absolute() else base / p
            opts = parse_run_line(p.read_text())
            check_golden(GoldenCase(p, p.with_name(p.name.replace(".in.dstream", ".out.dstream")), opts), update)
        return check
    return golden


try:
    golden = _fixture()
except ImportError:  # pragma: no cover - pytest absent
    pass
