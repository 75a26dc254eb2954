"""What the CLI's start imports (issue 13: the 10k run is mostly interpreter start and imports).

A module that only an error path or another command needs is imported where it is used, not at
start; these tests hold that for a real ``drawopt optimize`` run (a child process, so the modules
this test session already imported do not count). No wall-clock figures here: those are bench/'s.
"""

import subprocess
import sys
from pathlib import Path

import pytest

# each was imported at every CLI start before being made lazy (``python3 -X importtime``)
NOT_ON_THE_OPTIMIZE_PATH = (
    "ctypes.util",  # drawopt.cli.memory: find_library ran ``ldconfig -p`` in a child process
    "subprocess",  # ctypes.util's import
    "difflib",  # drawopt.ir.formats.common.suggest: only for a bad input's "did you mean"
    "numpy.ma",  # numpy 2.x's plain np.unique (and isin / intersect1d through it) asks np.ma.is_masked: 15-40 ms
)

_CHECK = """
import sys
from drawopt.cli import main
rc = main(sys.argv[1:])
print(" ".join(m for m in {mods!r} if m in sys.modules))
sys.exit(rc)
"""


@pytest.fixture(scope="module")
def frame(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from drawopt.gen import generate
    from drawopt.ir import formats

    p = tmp_path_factory.mktemp("startup") / "f.npz"
    formats.save(generate("frame", 200, seed=1), str(p))
    return p


def test_an_optimize_run_does_not_import_what_it_does_not_use(frame: Path) -> None:
    out = frame.with_name("o.npz")
    r = subprocess.run([sys.executable, "-c", _CHECK.format(mods=NOT_ON_THE_OPTIMIZE_PATH), "optimize", str(frame),
                        "-o", str(out), "--report", str(frame.with_name("r.json")), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.exists()
    assert r.stdout.strip() == ""  # the names of the modules above that the run imported


@pytest.mark.parametrize("kind", ["quads", "gpu-driven", "bundle"])
def test_no_kind_of_stream_imports_numpy_ma(kind: str, tmp_path: Path) -> None:
    """The other generated kinds reach other np.unique sites (merge-instances, weld, flush, the verifier)."""
    from drawopt.gen import generate
    from drawopt.ir import formats

    src = tmp_path / "s.npz"
    formats.save(generate(kind, 300, seed=1), str(src))
    r = subprocess.run([sys.executable, "-c", _CHECK.format(mods=("numpy.ma",)), "optimize", str(src),
                        "-o", str(tmp_path / "o.npz"), "--report", str(tmp_path / "r.json"), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_a_command_builds_only_its_own_parser() -> None:
    """Every argparse parser costs gettext look-ups on disk (~1 ms each): a run of one command
    builds that command's parser, not a placeholder for each of the others."""
    import argparse

    from drawopt.cli import build_parser
    from drawopt.cli.commands import SUBCOMMANDS

    def commands(p: argparse.ArgumentParser) -> set[str]:
        (sub,) = (a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return set(sub.choices)

    assert commands(build_parser("optimize")) == {"optimize"}
    assert commands(build_parser()) == set(SUBCOMMANDS)  # the top-level help still lists them all


def test_the_lazy_import_still_serves_its_error_path() -> None:
    from drawopt.ir.formats.common import suggest

    assert suggest("drwa", ["draw", "dispatch"]) == " (did you mean 'draw'?)"


# ---------------------------------------------------------------- the end of the process (exit_now)
def _drawopt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drawopt", *args], capture_output=True, text=True)


def _py(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_python_m_drawopt_keeps_its_exit_statuses_and_outputs(frame: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "o.npz", tmp_path / "r.json"
    ok = _drawopt("optimize", str(frame), "-o", str(out), "--report", str(report))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count("\n") == 1 and "verified" in ok.stdout  # the one-line verdict, flushed
    from drawopt.ir import formats

    assert len(formats.load(str(out)).op) > 0 and report.read_text().startswith("{")

    src = tmp_path / "nopipe.dstream"  # every draw without a pipeline: one no-pipeline finding each
    src.write_text("".join(line for line in (Path(__file__).parents[1] / "examples" / "quads.dstream")
                           .read_text().splitlines(keepends=True) if not line.startswith("SetPipelineState")))
    found = _drawopt("validate", str(src), "--json")
    assert found.returncode == 1
    import json

    assert len(json.loads(found.stdout)) > 10  # the whole JSON list reached the pipe

    bad = tmp_path / "bad.dstream"
    bad.write_text("drawopt 1\nDraw 1\n")
    err = _drawopt("optimize", str(bad), "-o", str(tmp_path / "x.npz"))
    assert err.returncode == 2 and err.stderr.startswith(f"{bad}:2:1: error:") and "Traceback" not in err.stderr
    assert not (tmp_path / "x.npz").exists()
    assert _drawopt("optimize").returncode == 2  # a usage error (argparse's SystemExit) as before


def test_exit_now_runs_the_at_exit_handlers_and_flushes_first() -> None:
    r = _py("import atexit, sys; from drawopt.cli import exit_now; "
            "atexit.register(lambda: print('at exit')); print('out', end=''); print('err', end='', file=sys.stderr); "
            "exit_now(3)")
    assert (r.returncode, r.stdout, r.stderr) == (3, "outat exit\n", "err")


def test_exit_now_waits_for_a_running_thread_like_sys_exit() -> None:
    r = _py("import threading, time; from drawopt.cli import exit_now; "
            "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start(); exit_now(0)")
    assert (r.returncode, r.stdout) == (0, "thread done\n")


def test_python_m_cprofile_m_drawopt_still_writes_its_profile(frame: Path, tmp_path: Path) -> None:
    """A profiler writes its results after the program ends: exit_now must leave that end to it."""
    prof = tmp_path / "p.prof"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "drawopt", "stats", str(frame)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import pstats

    assert pstats.Stats(str(prof)).total_calls > 0
