"""drawopt's pytest plugin: golden-file tests of optimized draw streams.

Registered through the ``pytest11`` entry point, so it is active in any project
that installs drawopt (``pytest -p drawopt.testing.pytest_plugin`` loads it
where the entry point is not installed). A test::

    def test_frame(drawopt_golden):
        drawopt_golden.assert_matches("frame.dstream", "golden/frame.opt.dstream",
                                      passes="dedupe-state,schedule", target="d3d12")

optimizes the input, compares the text form with the checked-in golden, shows a
unified diff on a mismatch and writes ``golden/frame.opt.obtained.dstream``
beside it; ``pytest --drawopt-update-golden`` rewrites the goldens. The golden
must always verify against its input (translation validation). Paths are
relative to the test file's directory. See docs/golden-tests.md.
"""

from __future__ import annotations

__all__ = ["GoldenChecker", "UPDATE_OPTION"]

from pathlib import Path
from typing import Any

import pytest

from drawopt.ir import formats
from drawopt.ir.stream import Stream
from drawopt.testing.golden import GoldenMismatch, match_golden

UPDATE_OPTION = "--drawopt-update-golden"


class GoldenChecker:
    """What the ``drawopt_golden`` fixture gives a test: :meth:`assert_matches`.

    >>> import tempfile
    >>> from drawopt.gen import generate
    >>> d = Path(tempfile.mkdtemp())
    >>> GoldenChecker(d, update=True).assert_matches(generate("quads", 4), "q.opt.dstream", passes="merge-instances")
    >>> GoldenChecker(d).assert_matches(generate("quads", 4), "q.opt.dstream", passes="merge-instances")
    >>> (d / "q.opt.dstream").read_text().count("DrawInstanced")
    1
    """

    def __init__(self, base: str | Path, update: bool = False) -> None:
        self.base = Path(base)
        self.update = update

    def _path(self, p: str | Path) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.base / p

    def assert_matches(self, stream_or_path: Stream | str | Path, golden_path: str | Path,
                       passes: str | None = None, target: str = "d3d12", reorder: str = "declared",
                       verify_each: bool = True, **options: Any) -> None:
        """Optimize ``stream_or_path`` and compare the output with the golden ``golden_path``.

        ``passes``, ``target``, ``reorder`` and ``options`` go to :func:`drawopt.optimize`
        (``passes=None``: the target's default pipeline); every pass is verified.
        """
        from drawopt.result import optimize

        stream = stream_or_path if isinstance(stream_or_path, Stream) else formats.load(self._path(stream_or_path))
        out = optimize(stream, passes, target=target, reorder=reorder, verify_each=verify_each, **options).stream
        got = formats.dumps(out, "text")
        assert isinstance(got, str)
        try:
            match_golden(stream, got, self._path(golden_path), self.update, reorder=reorder,
                         update_flag=UPDATE_OPTION)
        except GoldenMismatch as e:
            pytest.fail(str(e), pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--drawopt-update-golden``: rewrite the goldens from the current output."""
    group = parser.getgroup("drawopt")
    group.addoption(UPDATE_OPTION, action="store_true", default=False,
                    help="rewrite drawopt golden files from the current output (review the diff before committing)")


@pytest.fixture
def drawopt_golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """A :class:`GoldenChecker` for paths relative to the test file's directory."""
    return GoldenChecker(Path(request.path).parent, bool(request.config.getoption(UPDATE_OPTION)))
