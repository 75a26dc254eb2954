"""``bench/run.py`` records every stage of each optimize case (``--time-passes``'s figures) in its
table and its JSON. No figure is judged here (speed is the bench's to measure): only that the
stages are there and parse."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from drawopt.cli.timing import STAGES

ROOT = Path(__file__).resolve().parent.parent


def _bench():  # bench/ is no package: load run.py by path
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_median_times_takes_each_stage_and_pass_separately() -> None:
    def out(load: float, weld: float) -> str:
        return json.dumps({"time_passes": {"stages": {"load": load, "total": 2 * load},
                                           "passes": [{"name": "weld", "seconds": weld},
                                                      {"name": "weld", "seconds": 1.0}]}})

    stages, passes = _bench().median_times([out(1, 5), out(3, 4), out(2, 9)])
    assert stages == {"load": 2, "total": 4} and passes == {"weld": 5, "weld #2": 1.0}


@pytest.mark.slow
def test_stage_seconds_in_the_table_and_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    js = tmp_path / "run.json"
    assert _bench().main(["--sizes", "1000", "--kinds-1m", "", "--repeat", "1", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    row = json.loads(js.read_text())["rows"][0]
    assert list(row["stages_s"]) == list(STAGES)
    assert all(isinstance(v, float) and v >= 0 for v in row["stages_s"].values())
    assert row["stages_s"]["passes"] == pytest.approx(sum(row["passes_s"].values()), abs=1e-5)
    assert "dedupe-state" in row["passes_s"] and "dedupe-state #2" in row["passes_s"]
    table = out[out.index("stage seconds"):].splitlines()
    assert table[0].split() == ["stage", "seconds", *STAGES, "wall"]
    cells = table[1].split()
    assert cells[:2] == ["frame", "1,000"] and [float(c) for c in cells[2:]] == pytest.approx(
        [*(row["stages_s"][k] for k in STAGES), row["optimize_s"]], abs=1e-3)
