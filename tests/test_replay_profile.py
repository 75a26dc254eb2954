"""replay --profile, light content and target profiles (CPU side: llvmpipe; the GPU checks are opt-in)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drawopt.analysis.costmodel import (
    MODELS,
    PROFILE_DIR,
    default_pipeline,
    get_target,
    load_target_profile,
    mdi_min_batch,
    target_from_profile,
)
from drawopt.errors import UsageError
from drawopt.gen import generate
from drawopt.replay.executor import index_scale_for, indexed_indices

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drawopt", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def test_committed_gl_profile_is_the_gl_target() -> None:
    m = get_target("gl")
    assert m.source.endswith("gl.json") and (PROFILE_DIR / "gl.json").exists()
    data = json.loads((PROFILE_DIR / "gl.json").read_text())
    assert data["machine"]["renderer"] and data["measured"]["state_us"]
    assert default_pipeline("gl") == data["pipeline"]
    assert m.draw_us == data["draw_us"] and MODELS["gl"] is m


def test_profile_loader_rejects_what_is_not_a_profile(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a drawopt target profile"):
        target_from_profile({"name": "x"})
    bad = tmp_path / "p.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match="cannot read"):
        load_target_profile(bad)
    data = json.loads((PROFILE_DIR / "gl.json").read_text())
    data["draw_us"] = -1
    with pytest.raises(UsageError, match="draw_us"):
        target_from_profile(data)


def test_profile_drives_the_cost_model(tmp_path: Path) -> None:
    data = json.loads((PROFILE_DIR / "gl.json").read_text())
    data.update(name="cheapmdi", pipeline=None, mdi_call_us=1000.0)
    m = target_from_profile(data)
    assert mdi_min_batch(m) > mdi_min_batch("gl")
    assert "mdi" in default_pipeline(m)


def test_optimize_target_profile_flag(tmp_path: Path) -> None:
    data = json.loads((PROFILE_DIR / "gl.json").read_text())
    data.update(name="mine", pipeline="dedupe-state")
    prof = tmp_path / "mine.json"
    prof.write_text(json.dumps(data))
    out = tmp_path / "o.dstream"
    r = _cli("optimize", str(ROOT / "examples" / "frame.dstream"), "-o", str(out), "--target-profile", str(prof),
             "--report", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["target"] == "mine" and [p.split("{")[0] for p in rep["pipeline"]] == ["dedupe-state"]
    r = _cli("optimize", str(ROOT / "examples" / "frame.dstream"), "-o", str(out), "--target-profile",
             str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "cannot read target profile" in r.stderr and "Traceback" not in r.stderr


def test_index_scale_is_a_power_of_two_within_budget() -> None:
    s = generate("frame", 300, seed=7)
    total = indexed_indices(s)
    k = index_scale_for(s, budget=1 << 12)
    assert k & (k - 1) == 0 and total / 3 / k <= 1 << 12 < total / 3 / max(1, k // 2) or k == 1
    assert index_scale_for(s, budget=1 << 40) == 1


replay = pytest.mark.replay


def _gl() -> None:
    from drawopt.replay import available
    ok, why = available()
    if not ok:
        pytest.skip(why)


@replay
def test_light_content_keeps_rewrites_pixel_identical() -> None:
    """The squeeze is a fixed monotone map of index positions: the default pipeline's output (merged
    ranges, multi-draw records) renders what the original renders, at several squeeze factors."""
    _gl()
    from drawopt.replay import ReplayOptions, compare, replay_interleaved
    from drawopt.result import optimize

    src = generate("frame", 300, seed=7)
    out = optimize(src, "dedupe-state,merge-instances,weld,mdi,flush,dedupe-state", target="d3d12").stream
    for k in (1, 16, 256):
        o = ReplayOptions(size=(64, 64), index_scale=k, draw_parameters=None)
        ra, rb = replay_interleaved([src, out], [o, o], frames=1, warmup=False)
        assert ra.index_scale == rb.index_scale == k
        assert compare(ra, rb).same, k
        if k > 1:
            assert ra.counts.get("squeezed_draws", 0) + ra.counts.get("null_draws", 0) > 0


@replay
def test_replay_profile_json_structure(tmp_path: Path) -> None:
    _gl()
    r = _cli("replay", str(ROOT / "examples" / "frame.dstream"), "--profile", "2", "--frames", "1", "--size",
             "32x32", "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)["a"]
    p = a["profile"]
    assert p["frames"] == 2 and p["gl_calls"] == a["gl_calls"]
    assert set(p) >= {"cpu_ms", "cpu_attributed_ms", "timer_rows_ms", "by_gl_call", "by_command", "multi_draw",
                      "gpu_ms", "gpu_passes", "clock_ns_per_row"}
    assert sum(c["calls"] for c in p["by_gl_call"].values()) == a["gl_calls"]
    assert sum(c["gl_calls"] for c in p["by_command"].values()) == a["gl_calls"]
    assert abs(sum(c["ms"] for c in p["by_command"].values()) - p["cpu_attributed_ms"]) < 0.01 + 1e-3 * p["cpu_ms"]
    assert "DrawIndexedInstanced" in p["by_command"] or "DrawInstanced" in p["by_command"]
    assert sum(ps["draw_calls"] for ps in p["gpu_passes"]) >= 1
    assert all(ps["gpu_ms"] >= 0 for ps in p["gpu_passes"])
    text = _cli("replay", str(ROOT / "examples" / "frame.dstream"), "--profile", "1", "--frames", "1", "--size",
                "32x32")
    assert "CPU by stream command" in text.stdout and "GPU by pass" in text.stdout


@replay
def test_timed_loops_are_twins() -> None:
    """The compiled loop's run_timed and the Python loop's give one stamp per row plus one."""
    _gl()
    from drawopt.replay.gl import get_context
    from drawopt.replay.tape import Op, PythonTape, TapeBuilder, make_executor, native_available

    _, gl, _ = get_context()
    tb = TapeBuilder()
    for k in range(100):
        tb.emit(Op.UNIFORM1UI, 0xFFFFFFFF, k)
    tape = tb.array()
    tape[:, 1] = -1
    py = PythonTape(tape, gl, [])
    s = py.run_timed()
    assert s.shape == (101,) and np.all(np.diff(s) >= 0)
    if native_available():
        ex = make_executor(tape, gl, [], timed=True)
        s2 = ex.run_timed()
        assert s2.shape == s.shape and np.all(np.diff(s2) >= 0)


@pytest.mark.gpu
def test_h200_frame_faster_and_identical() -> None:
    """On a GPU: the gl target's default pipeline's output of the 100k frame is not slower on CPU or GPU
    (interleaved medians of 9 frames) and renders identical images (bench/replay_frames.py has the figures)."""
    _gl()
    from drawopt.replay import ReplayOptions, compare, replay_interleaved
    from drawopt.result import optimize

    src = generate("frame", 100_000, seed=7)
    out = optimize(src, default_pipeline("gl"), target="gl").stream
    o = ReplayOptions(size=(1280, 720), index_scale=index_scale_for(src))
    ra, rb = replay_interleaved([src, out], [o, o], frames=9, warmup_s=1.0)
    assert compare(ra, rb).same
    assert rb.cpu_submit_s <= ra.cpu_submit_s and rb.gpu_s <= ra.gpu_s * 1.02
