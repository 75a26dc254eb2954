"""``drawopt convert``: every format pair, stdin/stdout, exit status 2 and no partial output on errors."""

from __future__ import annotations

import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drawopt.cli import main
from drawopt.ir.formats import dumps, load, loads

SRC = """\
drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer   verts    size=65536
buffer   args     size=64 frontend
data     args     6 1 0 0
target   hdr      64x64 R8G8B8A8_UNORM
rootsig  main     constants(4)
pipeline p        vs=pull ps=lit root=main

OMSetRenderTargets hdr
SetGraphicsRootSignature main
SetPipelineState p
SetGraphicsRoot32BitConstants 0 4 0x3f800000 0 0 0
DrawInstanced 6 1 0 0 @nomerge
DrawInstancedIndirect args 0
Opaque ClearState
"""
BAD = SRC.replace("DrawInstanced 6 1 0 0 @nomerge", "DrawInstanced 6 1 0 4294967296")
EXT = {"text": ".dstream", "json": ".json", "npz": ".npz"}


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "in.dstream"
    p.write_text(SRC)
    return p


@pytest.mark.parametrize("a,b", list(itertools.product(EXT, EXT)))
def test_convert_every_pair(tmp_path: Path, src: Path, a: str, b: str) -> None:
    first = tmp_path / ("a" + EXT[a])
    assert main(["convert", str(src), str(first)]) == 0
    second = tmp_path / ("b" + EXT[b])
    assert main(["convert", str(first), str(second)]) == 0
    assert load(second) == loads(SRC)
    back = tmp_path / "back.dstream"
    assert main(["convert", str(second), str(back)]) == 0
    assert back.read_text() == SRC  # canonical text survives the trip


def test_from_and_to_override_extensions(tmp_path: Path, src: Path) -> None:
    out = tmp_path / "x.dat"
    assert main(["convert", str(src), str(out), "--to", "npz"]) == 0
    assert out.read_bytes()[:2] == b"PK"
    again = tmp_path / "y.bin"
    assert main(["convert", str(out), str(again), "--from", "npz", "--to", "json"]) == 0
    assert load(again, "json") == loads(SRC)


def test_bad_input_exit_2_and_no_output(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.dstream"
    bad.write_text(BAD)
    out = tmp_path / "out.json"
    assert main(["convert", str(bad), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:13:21: error: start_instance 4294967296 is out of range")
    assert "Traceback" not in err
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.dstream"]


def test_failed_conversion_keeps_the_old_output(tmp_path: Path, src: Path) -> None:
    out = tmp_path / "out.dstream"
    out.write_text("previous\n")
    bad = tmp_path / "bad.json"
    bad.write_text('{"drawopt": 1, "commands": [["Nope"]]}')
    assert main(["convert", str(bad), str(out)]) == 2
    assert out.read_text() == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["bad.json", "in.dstream", "out.dstream"]


def test_usage_errors(tmp_path: Path, src: Path, capsys) -> None:
    assert main(["convert", str(src), str(tmp_path / "out.bin")]) == 2
    assert "cannot tell the format of" in capsys.readouterr().err
    assert not (tmp_path / "out.bin").exists()
    assert main(["convert", str(tmp_path / "missing.dstream"), str(tmp_path / "o.json")]) == 2
    assert "missing.dstream:1:1: error: cannot read file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ei:
        main(["convert", str(src), str(tmp_path / "o.json"), "--to", "yaml"])
    assert ei.value.code == 2
    with pytest.raises(SystemExit) as ei:
        main(["convert", str(src)])
    assert ei.value.code == 2


def test_stdin_to_stdout(monkeypatch, capsysbinary) -> None:
    for fmt in EXT:
        data = dumps(loads(SRC), fmt)
        raw = data if isinstance(data, bytes) else data.encode()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
        assert main(["convert", "-", "-"]) == 0  # sniffed in, text out by default
        assert capsysbinary.readouterr().out.decode() == SRC
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SRC.encode())))
    assert main(["convert", "-", "-", "--to", "json"]) == 0
    assert loads(capsysbinary.readouterr().out, "json") == loads(SRC)


def test_stdin_error_names_stdin(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    assert main(["convert", "-", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("<stdin>:13:21: error: ") and captured.out == ""


def test_subprocess(tmp_path: Path, src: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    # text -> npz on stdout -> text via stdin
    npz = subprocess.run([sys.executable, "-m", "drawopt", "convert", str(src), "-", "--to", "npz"],
                         capture_output=True, env=env, timeout=120)
    assert npz.returncode == 0 and npz.stdout[:2] == b"PK"
    txt = subprocess.run([sys.executable, "-m", "drawopt", "convert", "-", "-"], input=npz.stdout,
                         capture_output=True, env=env, timeout=120)
    assert txt.returncode == 0 and txt.stdout.decode() == SRC
    # a bad file: exit 2, one located message, no traceback, no output file
    bad = tmp_path / "bad.dstream"
    bad.write_text(BAD)
    out = tmp_path / "out.npz"
    r = subprocess.run([sys.executable, "-m", "drawopt", "convert", str(bad), str(out)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert r.stderr.startswith(f"{bad}:13:21: error: ") and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and not out.exists()
