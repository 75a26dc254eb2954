"""The CLI's allocator settings (drawopt.cli.memory): applied by the command line only, never by the library."""

import subprocess
import sys

import pytest

from drawopt.cli.memory import tune_allocator

HUGEPAGES_NOW = ("import numpy as np; s = np._core.multiarray._set_madvise_hugepage; "
                 "prev = s(True); print(prev)")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_turned_off_by_the_environment():
    assert tune_allocator({"DRAWOPT_MALLOC": "default"}) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_cli_turns_numpy_huge_pages_off_and_the_library_does_not():
    base = _run(HUGEPAGES_NOW)
    assert _run("import drawopt, drawopt.result, drawopt.verify; " + HUGEPAGES_NOW) == base
    assert _run("from drawopt.cli.memory import tune_allocator; print(tune_allocator()); " + HUGEPAGES_NOW) \
        == "True\nFalse"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_main_applies_it_before_running_a_command(monkeypatch, tmp_path):
    import drawopt.cli as cli

    calls = []
    monkeypatch.setattr(cli, "tune_allocator", lambda: calls.append(1))
    assert cli.main(["gen", "--kind", "quads", "--draws", "2", "-o", str(tmp_path / "q.dstream")]) == 0
    assert calls == [1]
