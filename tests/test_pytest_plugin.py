"""drawopt's pytest plugin in a user's project: a fresh directory with a three-line test.

The project is run with ``python3 -m pytest`` in a subprocess. Where drawopt is
installed with its ``pytest11`` entry point (``pip install drawopt`` / CI's
``pip install -e .``) the plugin must load by itself, and the run passes no
``-p``; in a source tree on ``PYTHONPATH`` without that install (the entry
point is package metadata, which only an install writes) the run loads it with
``-p drawopt.testing.pytest_plugin``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drawopt.gen import generate
from drawopt.ir import formats
from drawopt.testing import autoloads
from drawopt.testing.golden import GoldenMismatch, match_golden

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "frame.dstream"

TEST = '''def test_frame(drawopt_golden):
    drawopt_golden.assert_matches("frame.dstream", "golden/frame.opt.dstream",
                                  passes="dedupe-state,schedule", target="d3d12")
'''


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    plugin = [] if autoloads(env) else ["-p", "drawopt.testing.pytest_plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository: an input stream, a three-line test, no conftest, no pytest configuration."""
    shutil.copy(EXAMPLE, tmp_path / "frame.dstream")
    (tmp_path / "test_frame.py").write_text(TEST)
    assert len(TEST.splitlines()) == 3
    return tmp_path


def test_user_project_golden_workflow(project: Path) -> None:
    golden = project / "golden" / "frame.opt.dstream"
    obtained = project / "golden" / "frame.opt.obtained.dstream"
    # 1. no golden yet: the test fails, says how to create it, and leaves the output to review
    (project / "golden").mkdir()
    r = _pytest(project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--drawopt-update-golden" in r.stdout and obtained.exists() and not golden.exists()
    # 2. --drawopt-update-golden writes it; the next plain run passes
    r = _pytest(project, "--drawopt-update-golden")
    assert r.returncode == 0, r.stdout + r.stderr
    assert golden.exists() and not obtained.exists()
    assert golden.read_text().startswith("drawopt 1 ")
    r = _pytest(project)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    # 3. a golden that no longer matches: unified diff of the text form, obtained file beside it
    good = golden.read_text()
    lines = good.splitlines(True)
    k = next(i for i, ln in enumerate(lines) if ln.startswith("DrawIndexedInstanced"))
    lines.insert(k, lines[k])
    golden.write_text("".join(lines))
    r = _pytest(project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"--- {golden}" in r.stdout and f"+++ {obtained}" in r.stdout and "@@ " in r.stdout
    assert f"-{lines[k].rstrip()}" in r.stdout
    assert obtained.read_text() == good
    assert "Traceback" not in r.stdout  # a failure message, not the plugin's internals


def test_plugin_option_is_listed(project: Path) -> None:
    r = _pytest(project, "--help")
    assert r.returncode == 0 and "--drawopt-update-golden" in r.stdout


def test_golden_must_verify_against_its_input(tmp_path: Path) -> None:
    """A golden that matches the output but renders something else than its input is rejected."""
    s = generate("quads", 4)
    other = generate("quads", 4, seed=2)  # a different frame: its own output can't stand for s's
    got = formats.dumps(other)
    assert isinstance(got, str)
    golden = tmp_path / "q.dstream"
    golden.write_text(got)
    with pytest.raises(GoldenMismatch, match="does not render what its input does"):
        match_golden(s, got, golden)
    match_golden(other, got, golden)  # against its own input it verifies
