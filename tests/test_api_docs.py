"""The library's public surface: doctests, an example on every public function, stubs, mypy.

* Every doctest in the package runs here (``doctest`` over each module).
* Every function of the library API (``drawopt.__all__``) and of the modules
  that make up the optimize workflow has a docstring with a ``>>>`` example.
* Every compiled module (``cext/*.pyx``) has a ``.pyi`` stub beside it naming
  the same functions, and ``py.typed`` ships, so mypy and editors see the API.
* mypy type-checks a user script that reads the optimize report, and rejects one
  that misuses it (skipped when mypy is not installed: ``pip install -e .[test]``).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import drawopt

ROOT = Path(__file__).resolve().parent.parent

MODULES = sorted(m.name for m in pkgutil.walk_packages(drawopt.__path__, "drawopt.")
                 if not m.name.endswith("__main__"))

# modules whose every public function carries an example (the optimize workflow)
EXAMPLES_REQUIRED = ("drawopt.result", "drawopt.htmlreport", "drawopt.cli.progress", "drawopt.testing.pytest_plugin")

# library API functions that still lack an example, each in a module another change owns;
# this list may only shrink (the test fails when an entry gains an example or disappears)
KNOWN_WITHOUT_EXAMPLE = {"track"}


def _has_example(obj: object) -> bool:
    return ">>>" in (inspect.getdoc(obj) or "")


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    try:
        mod = importlib.import_module(name)
    except ImportError as e:  # an optional dependency (OpenGL, matplotlib) missing
        pytest.skip(f"{name}: {e}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True,
                          verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} doctest examples of {name} failed (see the output)"


def test_library_api_functions_have_examples() -> None:
    missing = {n for n in drawopt.__all__ if inspect.isfunction(getattr(drawopt, n))
               and not _has_example(getattr(drawopt, n))}
    assert missing == KNOWN_WITHOUT_EXAMPLE, (
        f"without an example: {sorted(missing - KNOWN_WITHOUT_EXAMPLE)}; "
        f"gained one (drop from KNOWN_WITHOUT_EXAMPLE): {sorted(KNOWN_WITHOUT_EXAMPLE - missing)}")
    for n in ("OptimizeResult", "OptimizeReport"):
        assert _has_example(getattr(drawopt, n)), n


@pytest.mark.parametrize("name", EXAMPLES_REQUIRED)
def test_workflow_modules_have_examples(name: str) -> None:
    mod = importlib.import_module(name)
    for attr in getattr(mod, "__all__", []):
        obj = getattr(mod, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert _has_example(obj), f"{name}.{attr} has no example in its docstring"


def _defs(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


@pytest.mark.parametrize("pyx", sorted(p.stem for p in (ROOT / "cext").glob("*.pyx")))
def test_stub_beside_every_compiled_module(pyx: str) -> None:
    stub = ROOT / "drawopt" / f"{pyx}.pyi"
    assert stub.exists(), f"cext/{pyx}.pyx has no stub drawopt/{pyx}.pyi"
    stubbed = _defs(ast.parse(stub.read_text()))
    src = (ROOT / "cext" / f"{pyx}.pyx").read_text()
    defined = set(re.findall(r"^(?:def|cpdef\s+\w+)\s+([A-Za-z]\w*)\s*\(", src, re.M))
    assert stubbed == defined, (pyx, stubbed, defined)
    assert (ROOT / "drawopt" / "py.typed").exists()


def test_stubs_and_py_typed_are_packaged() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'drawopt = \[[^\]]*"\*\.pyi"[^\]]*"py\.typed"', text)


USER_SCRIPT = '''
import drawopt
from drawopt.gen import generate

res = drawopt.optimize(generate("quads", 8), passes="merge-instances", target="d3d12")
calls: int = res.report.after["draw_calls"]
bound: int = res.report.lower_bound
secs: float = res.report.passes[0].seconds + res.report.total_seconds
ok: bool | None = res.report.verified
line: str = res.report.verdict("q.dstream")
pairs: int = res.explain(limit=5).pairs
drawopt.save(res.stream, "q.opt.dstream")
'''

MISUSE = '''
import drawopt

res = drawopt.optimize(drawopt.load("q.dstream"))
drawopt.save(res, "q.npz")
bound: str = res.report.lower_bound
'''


def _mypy(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(text)
    env = dict(os.environ, MYPYPATH=str(ROOT))
    # --follow-imports=silent: report on the user's script only, as for an installed package
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                           "--follow-imports=silent", "--python-version", "3.11", str(script)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)


def test_mypy_checks_a_user_script(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None and not shutil.which("mypy"):
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    ok = _mypy(tmp_path, USER_SCRIPT)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _mypy(tmp_path, MISUSE)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'Argument 1 to "save" has incompatible type "OptimizeResult"' in bad.stdout
    assert 'expression has type "int", variable has type "str"' in bad.stdout
