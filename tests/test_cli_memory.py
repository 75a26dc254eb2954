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


ARENAS_AFTER_A_THREAD = """
import ctypes, os, tempfile, threading
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
{setup}
def work():  # a thread's allocations, kept while the heaps are listed
    global kept
    kept = [bytearray(1 << 16) for _ in range(64)]
t = threading.Thread(target=work); t.start(); t.join()
path = tempfile.mktemp()
fp = libc.fopen(path.encode(), b"w"); libc.malloc_info(0, fp); libc.fclose(fp)
print(open(path).read().count("<heap nr=")); os.unlink(path)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_cli_serves_every_thread_from_one_arena():
    """A thread's freed blocks stay in its own arena, which the main thread cannot reuse: with
    the report's figures in a thread that raised the 1M frame's peak (drawopt/cli/memory.py)."""
    try:
        base = int(_run(ARENAS_AFTER_A_THREAD.format(setup="")))
    except (subprocess.CalledProcessError, ValueError):  # pragma: no cover - no malloc_info (not glibc)
        pytest.skip("no glibc malloc_info")
    assert base >= 2  # glibc's default: the thread got an arena of its own
    tuned = _run(ARENAS_AFTER_A_THREAD.format(setup="from drawopt.cli.memory import tune_allocator; tune_allocator()"))
    assert int(tuned) == 1
