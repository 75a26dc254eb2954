"""The package layout's rules that a test can hold (docs/architecture.md)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from drawopt.layers import cycles, imports_of_tree, layer_of, violations


def test_plain_passes_cannot_be_imported() -> None:
    # conftest's guard: the pass modules are loaded only as drawopt.passes
    with pytest.raises(ImportError, match="import drawopt.passes, not passes"):
        importlib.import_module("passes.schedule")
    import drawopt.passes.schedule as sched
    assert sched.__name__ == "drawopt.passes.schedule"
    assert not [m for m in sys.modules if m == "passes" or m.startswith("passes.")]


def test_verify_imports_no_optimizer_analysis() -> None:
    # the translation validator stays independent of the optimizer: a fresh interpreter that imports it
    # must not load the analysis layer or any pass
    import subprocess

    code = ("import sys, drawopt.verify; bad = [m for m in sys.modules if m.startswith(('drawopt.analysis', "
            "'drawopt.passes', 'drawopt.passmanager'))]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


ROOT = Path(__file__).resolve().parents[1]


def test_imports_follow_the_layer_order() -> None:
    # every import, lazy ones included: ir < verify | analysis < tools < pipeline < app < cli
    imports = imports_of_tree(ROOT)
    assert len(imports) > 80 and "drawopt.passes.mdi" in imports and "drawopt.ir.stream" in imports
    assert violations(imports) == []


def test_no_import_cycles() -> None:
    assert cycles(imports_of_tree(ROOT)) == []


def test_every_module_is_in_a_layer() -> None:
    for mod in imports_of_tree(ROOT):
        layer_of(mod)  # raises KeyError for a module no layer names


def test_the_layer_check_catches_upward_and_sideways_imports(tmp_path: Path) -> None:
    # the check is not vacuous: an IR module importing a pass, the verifier importing the state
    # tracker and two analyses importing each other are all reported
    (tmp_path / "drawopt" / "ir").mkdir(parents=True)
    (tmp_path / "drawopt" / "verify").mkdir()
    (tmp_path / "drawopt" / "analysis").mkdir()
    (tmp_path / "passes").mkdir()
    (tmp_path / "drawopt" / "ir" / "stream.py").write_text("def f():\n    from drawopt.passes import mdi\n")
    (tmp_path / "drawopt" / "verify" / "model.py").write_text("from drawopt.analysis.state import track\n")
    (tmp_path / "drawopt" / "analysis" / "state.py").write_text("from drawopt.analysis import graph\n")
    (tmp_path / "drawopt" / "analysis" / "graph.py").write_text("import drawopt.analysis.state\n")
    (tmp_path / "passes" / "mdi.py").write_text("X = 1\n")
    imports = imports_of_tree(tmp_path)
    assert violations(imports) == [
        "drawopt.ir.stream (ir) imports drawopt.passes.mdi (pipeline)",
        "drawopt.verify.model (verify) imports drawopt.analysis.state (analysis)",
    ]
    assert cycles(imports) == [["drawopt.analysis.graph", "drawopt.analysis.state"]]


def test_the_architecture_page_draws_every_layer() -> None:
    from drawopt.layers import LAYERS

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text[text.index("## Layers"):text.index("## Modules")]
    for name, _rank, _prefixes in LAYERS:
        if name != "package":
            assert f"\n  {name} " in drawing or f"\n  {name}  " in drawing or f"  {name}\n" in drawing, name
