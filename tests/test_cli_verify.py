"""``drawopt verify``'s output: the one-line verdict, -q (the exit status only), -v (the checker's figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drawopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "frame.dstream"


@pytest.fixture()
def streams(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The example, its optimized output, and a copy whose first draw draws one index fewer."""
    out = tmp_path / "o.dstream"
    assert main(["optimize", str(EXAMPLE), "-o", str(out), "-q"]) == 0
    text = EXAMPLE.read_text()
    assert "DrawIndexedInstanced 294945 1 " in text
    bad = tmp_path / "bad.dstream"
    bad.write_text(text.replace("DrawIndexedInstanced 294945 1 ", "DrawIndexedInstanced 294944 1 ", 1))
    return EXAMPLE, out, bad


def test_default_is_one_verdict_line(streams: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = streams
    assert main(["verify", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and out.startswith("equivalent (") and err == ""


def test_quiet_prints_nothing_the_status_is_the_verdict(streams: tuple[Path, Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a, b, bad = streams
    assert main(["verify", str(a), str(b), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["verify", str(a), str(bad), "--quiet"]) == 1
    assert capsys.readouterr() == ("", "")
    # bad input is still an error on stderr, exit 2
    assert main(["verify", str(a), str(a.parent / "missing.dstream"), "-q"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "missing.dstream" in err


def test_verbose_adds_the_checkers_figures(streams: tuple[Path, Path, Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = streams
    assert main(["verify", str(a), str(b), "-v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("equivalent (")
    rows = {ln[:23].strip(): ln[23:].strip() for ln in lines[1:]}
    assert rows["reorder policy"] == "declared (from OPTIMIZED's header)"
    recs = [int(x.replace(",", "")) for x in rows["records"].split(" -> ")]
    assert lines[0] == f"equivalent ({recs[0]} records compared, reorder=declared)"
    acts = [int(x.replace(",", "")) for x in rows["actions"].split(" -> ")]
    assert acts[0] == 200 and acts[1] < acts[0]  # the 200 draws, fewer calls after
    assert int(rows["resources"]) > 0 and int(rows["violations kept"]) == 0
    float(rows["verify seconds"])
    assert main(["verify", str(a), str(b), "-v", "--reorder", "opaque"]) == 0
    assert "opaque (from --reorder)" in capsys.readouterr().out


def test_verbose_names_the_differences_kind(streams: tuple[Path, Path, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    a, _, bad = streams
    assert main(["verify", str(a), str(bad)]) == 1
    plain = capsys.readouterr().out
    assert plain.startswith("not equivalent: ") and len(plain.splitlines()) == 3
    assert main(["verify", str(a), str(bad), "-v"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(plain)                              # the same verdict, then the figures
    rows = {ln[:23].strip(): ln[23:].strip() for ln in out.splitlines()[3:]}
    assert rows["kind"] == "record" and rows["commands"].startswith("original #")
    assert main(["verify", str(a), str(bad), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["details"]["kind"] == "record"


def test_quiet_and_verbose_exclude_each_other(streams: tuple[Path, Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = streams
    with pytest.raises(SystemExit) as e:
        main(["verify", str(a), str(b), "-q", "-v"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err
