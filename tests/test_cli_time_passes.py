"""``drawopt optimize --time-passes``: a row for every stage of the command (load, each pass,
the post-condition's finding counts, verify, report, save), on stderr, and the same in ``--json``.

No wall-clock assertions (the machine is shared): the rows must be there, in order, and parse;
a stage that did not run reads 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drawopt.cli import main
from drawopt.cli.timing import STAGES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "frame.dstream"


def _table(err: str) -> list[tuple[str, float, float]]:
    """(label, ms, share %) of each row of the stage table in ``err``."""
    lines = err.splitlines()
    start = lines.index("stage timings:")
    assert lines[start + 1].split() == ["stage", "ms", "share"]
    rows = []
    for ln in lines[start + 2:]:
        label, ms, share = ln[:42].strip(), ln[42:53], ln[53:]
        rows.append((label, float(ms), float(share.strip().rstrip("%"))))
        if label == "total":
            break
    return rows


def test_every_stage_has_a_row_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--report", str(tmp_path / "r.json"),
                 "--time-passes"]) == 0
    out, err = capsys.readouterr()
    assert "stage timings" not in out                     # stdout keeps the one verdict line
    rows = _table(err)
    labels = [r[0] for r in rows]
    pipeline = json.loads((tmp_path / "r.json").read_text())["pipeline"]
    assert labels == ["load", "passes", *pipeline, *list(STAGES.values())[2:]]
    assert "post-condition (finding counts)" in labels and "verify" in labels and "save" in labels
    ms = dict(zip(labels, (r[1] for r in rows)))
    assert ms["passes"] == pytest.approx(sum(r[1] for r in rows[2:2 + len(pipeline)]), abs=0.1 * len(pipeline))
    stages = [r[1] for r in rows if r[0] in STAGES.values() and r[0] != "total"]
    assert sum(stages) == pytest.approx(ms["total"], abs=0.1 * len(stages))   # the stages add up to the total
    assert all(r[1] >= 0 for r in rows) and rows[-1][2] == 100.0


def test_json_has_the_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.npz"), "--time-passes", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""                                       # with --json the times are in the JSON only
    tp = json.loads(out)["time_passes"]
    st = tp["stages"]
    assert list(st) == sorted(STAGES) and all(isinstance(v, float) and v >= 0 for v in st.values())
    assert st["passes"] == pytest.approx(tp["total_seconds"], abs=1e-5)
    assert st["total"] == pytest.approx(sum(v for k, v in st.items() if k != "total"), abs=1e-5)
    assert st["verify"] > 0 and st["findings"] > 0 and st["load"] > 0 and st["save"] > 0


def test_a_stage_that_did_not_run_reads_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--no-verify",
                 "--time-passes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_passes"]["stages"]["verify"] == 0.0
    # --verify-each checks every changed pass: its validator runs are the verify stage
    assert main(["optimize", str(EXAMPLE), "-o", str(tmp_path / "o.dstream"), "--no-verify", "--verify-each",
                 "--time-passes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_passes"]["stages"]["verify"] > 0


def test_stream_to_stdout_keeps_the_table_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", str(EXAMPLE), "-o", "-", "--time-passes"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("drawopt 1 ") and "stage timings" not in out
    assert err.startswith(f"{EXAMPLE}: ") and _table(err)[-1][0] == "total"


def test_the_pass_manager_times_its_post_conditions() -> None:
    from drawopt.gen import generate
    from drawopt.result import optimize

    res = optimize(generate("frame", 300, seed=3), target="xbox-one")
    assert set(res.stage_seconds) == {"findings", "verify"} and res.stage_seconds["verify"] > 0
    assert optimize(generate("quads", 8), passes="weld", verify=False).stage_seconds["verify"] == 0.0
