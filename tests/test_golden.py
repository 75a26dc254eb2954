"""Golden files: every ``tests/golden/**/*.in.dstream`` against its ``.out.dstream``.

Each case runs through the ``drawopt_golden`` fixture (drawopt's pytest plugin,
:mod:`drawopt.testing.pytest_plugin`), the one drawopt's users get. Refresh
after an intended change with
``python -m pytest tests/test_golden.py --drawopt-update-golden`` and review
``git diff tests/golden`` before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drawopt.testing.golden import case_options, find_cases

CASES = find_cases(Path(__file__).parent / "golden")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden(case, drawopt_golden) -> None:
    kw = case_options(case)
    drawopt_golden.assert_matches(case.input, case.expected, kw.pop("passes"), **kw)
