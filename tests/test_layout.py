"""The package layout's rules that a test can hold (docs/architecture.md)."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_plain_passes_cannot_be_imported() -> None:
    # conftest's guard: the pass modules are loaded only as drawopt.passes
    with pytest.raises(ImportError, match="import drawopt.passes, not passes"):
        importlib.import_module("passes.schedule")
    import drawopt.passes.schedule as sched
    assert sched.__name__ == "drawopt.passes.schedule"
    assert not [m for m in sys.modules if m == "passes" or m.startswith("passes.")]


def test_verify_imports_no_optimizer_analysis() -> None:
    # the translation validator stays independent of the optimizer: a fresh interpreter that imports it
    # must not load the state tracker, the graph, the merge rules, the flush model or any pass
    import subprocess

    code = ("import sys, drawopt.verify; bad = [m for m in sys.modules if m.startswith(('drawopt.state', "
            "'drawopt.graph', 'drawopt.mergeclass', 'drawopt.flushrules', 'drawopt.access', 'drawopt.passes'))];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
