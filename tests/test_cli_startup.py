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


def test_the_lazy_import_still_serves_its_error_path() -> None:
    from drawopt.ir.formats.common import suggest

    assert suggest("drwa", ["draw", "dispatch"]) == " (did you mean 'draw'?)"
