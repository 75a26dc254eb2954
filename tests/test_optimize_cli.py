"""``drawopt optimize``'s output: verdict line, -q / -v, --print-passes, --time-passes, progress, Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from drawopt.cli import main
from drawopt.cli.progress import Progress
from drawopt.passmanager import PASSES
from drawopt.result import SMALLER_IS_BETTER

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "frame.dstream"
VERDICT = "200 draws -> 107 calls (bound 101), 541 -> 225 state changes"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_one_verdict_line_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--verify-each"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{EXAMPLE}: {VERDICT}, verified\n"
    assert err == ""


def test_verified_only_when_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import drawopt

    res = drawopt.optimize(drawopt.load(EXAMPLE))
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{EXAMPLE}: {VERDICT}")
    assert out.rstrip().endswith(", verified") == (res.report.verified is True)


def test_quiet_prints_nothing_and_errors_still_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "o.dstream").exists()
    # what is asked for still prints, as LLVM's `opt -disable-output -time-passes` gives the timings alone
    for extra in ([], ["--json"]):
        assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "-q", "--time-passes", *extra]) == 0
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("stage timings:") and err.rstrip().splitlines()[-1].split()[0] == "total"
    assert main(["optimize", str(tmp_path / "missing.dstream"), "-o", str(tmp_path / "x.dstream"), "-q"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "missing.dstream" in err


def test_verbose_table_reads_gains_as_gains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "-v"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith(f"{EXAMPLE}: {VERDICT}")
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:] if ln.split() and ln.split()[0] in SMALLER_IS_BETTER}
    assert {"draw_calls", "state_changes", "commands"} <= set(rows)
    for k, cells in rows.items():
        before, after = (float(c.replace(",", "")) for c in cells[:2])
        change = " ".join(cells[2:])
        if after < before:
            assert change.endswith("fewer"), (k, change)  # never a ratio that reads like "0.53x" or a loss
        elif after == before:
            assert change == "same", (k, change)
    assert "state changes" in out and "(no change)" in out  # the per-pass rows
    # off a terminal, -v logs one line per pass on stderr (the pass's number, name and what it did)
    assert len([ln for ln in err.splitlines() if ln.startswith("optimize [")]) == 7


def test_stream_to_stdout_sends_the_verdict_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("drawopt 1 ") and err.startswith(f"{EXAMPLE}: {VERDICT}")


def test_print_passes_needs_no_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", "--print-passes"]) == 0
    out = capsys.readouterr().out
    from drawopt.passmanager import get_pass
    for name in PASSES:
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        assert get_pass(name).summary in line
    assert "options: lds-limit=32768 min-prims=32 mode=auto" in out
    # the target and the reorder policy are the pipeline's context (--target, --reorder), no pass's options
    assert "target=" not in out and "reorder=" not in out


def test_time_passes_total_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--time-passes"]) == 0
    out, err = capsys.readouterr()   # the stage table goes to stderr (tests/test_cli_time_passes.py)
    assert out.startswith(f"{EXAMPLE}: ") and len(out.splitlines()) == 1
    assert "stage timings:" in err and err.splitlines()[-1].split()[0] == "total"
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--time-passes", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    tp = j["time_passes"]
    assert [p["name"] for p in tp["passes"]] == j["pipeline"]
    assert tp["total_seconds"] == pytest.approx(sum(p["seconds"] for p in tp["passes"]), abs=1e-5)
    assert j["after"]["draw_calls"] == 107 and j["lower_bound"] == 101
    # without --time-passes the JSON has no times (it is the same on every run)
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--json"]) == 0
    j2 = json.loads(capsys.readouterr().out)
    assert "time_passes" not in j2 and all("seconds" not in p for p in j2["passes"])


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", "-o", str(tmp_path / "o.dstream")]) == 2
    assert "needs an input" in capsys.readouterr().err
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--passes", "wled"]) == 2
    assert "unknown pass 'wled'" in capsys.readouterr().err
    assert not (tmp_path / "o.dstream").exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_names_the_running_pass_with_its_time() -> None:
    tty = _Tty()
    with Progress("optimize", 2, stream=tty, interval=60) as p:
        p.start("schedule")
        assert tty.getvalue().rsplit("\r", 1)[-1].replace("\x1b[K", "").startswith("optimize [1/2] schedule ")
        assert tty.getvalue().endswith(" s")
        p.finish()
        p.start("weld")
        assert "optimize [2/2] weld " in tty.getvalue().rsplit("\r", 1)[-1]
    assert "done" not in tty.getvalue() and tty.getvalue().endswith("\r\x1b[K")
    piped = io.StringIO()
    with Progress("optimize", 2, stream=piped) as p:  # not a terminal, no log: silent
        p.start("schedule")
        p.finish()
    assert piped.getvalue() == ""


def test_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """Under a pseudo-terminal stderr gets the live line; stdout (a pipe) gets the verdict only."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "drawopt", "optimize", str(EXAMPLE), "-o",
                                 str(tmp_path / "o.dstream")], stdout=subprocess.PIPE, stderr=slave, env=_env())
        os.close(slave)
        got = b""
        while True:
            r, _, _ = select.select([master], [], [], 60)
            if not r:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(master)
    assert proc.returncode == 0
    text = got.decode()
    assert "optimize [1/7] dedupe-state" in text and "optimize [2/7] schedule" in text
    assert "done" not in text
    assert out.decode().startswith(f"{EXAMPLE}: {VERDICT}")


@pytest.fixture(scope="module")
def big_frame(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("big") / "f20k.npz"
    assert main(["gen", "--kind", "frame", "--draws", "20000", "--seed", "1", "-o", str(p)]) == 0
    return p


def test_ctrl_c_exits_130_with_no_output(tmp_path: Path, big_frame: Path) -> None:
    out_file, rep = tmp_path / "o.npz", tmp_path / "r.json"
    # (SIGINT at its default in the child: a shell's background job, `cmd &` without job control,
    # ignores it, and Python then installs no KeyboardInterrupt handler: not what this tests)
    proc = subprocess.Popen([sys.executable, "-m", "drawopt", "optimize", str(big_frame), "-o", str(out_file),
                             "--report", str(rep), "-v", "--verify-each"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the first pass finished: the run is under way
    assert first.startswith(b"optimize [1/"), first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert out == b""
    assert b"Traceback" not in err and b"done" not in err
    assert not out_file.exists() and not rep.exists()
    assert not list(tmp_path.iterdir())  # no temporary file left behind either


def test_optimize_path_does_not_import_networkx(tmp_path: Path) -> None:
    """networkx (0.3 s of imports) is for ``drawopt graph`` and the library's graph: a plain
    ``optimize --report R.json`` must never load it (it did, through analysis/graph.py's top import)."""
    frame = tmp_path / "f.npz"
    probe = (
        "import sys\n"
        "from drawopt.cli import main\n"
        f"assert main(['gen', '--kind', 'frame', '--draws', '300', '--seed', '1', '-o', {str(frame)!r}]) == 0\n"
        f"rc = main(['optimize', {str(frame)!r}, '-o', {str(tmp_path / 'o.npz')!r},"
        f" '--report', {str(tmp_path / 'r.json')!r}, '-q'])\n"
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('networkx', 'matplotlib', 'scipy')))\n"
    )
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == "0 []"
    assert (tmp_path / "r.json").exists()


def test_graph_command_still_builds_the_networkx_graph(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    assert main(["graph", str(EXAMPLE), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["directed"] is True
