"""Golden files: every ``tests/golden/**/*.in.dstream`` against its ``.out.dstream``.

Refresh after an intended change with ``python -m pytest tests/test_golden.py --update-golden``
and review ``git diff tests/golden`` before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drawopt.testing.golden import check_golden, find_cases

CASES = find_cases(Path(__file__).parent / "golden")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden(case, request) -> None:
    check_golden(case, update=request.config.getoption("--update-golden"))
