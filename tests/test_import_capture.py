"""``drawopt import`` of GFXReconstruct captures: the committed real fixtures, bad input, Opaque barriers.

The fixtures (tests/data/captures/NAME/: gzipped JSON Lines and the extracted SPIR-V) were made
by tools/capture/capture.sh; these tests read them and need neither GFXReconstruct nor a GPU.
Contract clauses need ``spirv-dis`` (Debian spirv-tools; .ci/install-system.sh installs it):
without it the import still works and says that no shader was read.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from drawopt.cli import main
from drawopt.errors import InputError
from drawopt.explain import explain
from drawopt.importers import importer_kind
from drawopt.importers.capture import import_capture, import_capture_summary, list_frames
from drawopt.importers.capture.spirv import spirv_dis
from drawopt.ir.formats import load
from drawopt.ir.stream import StreamBuilder
from drawopt.passmanager import PASSES, parse_pipeline
from drawopt.result import optimize
from drawopt.stats import compute_stats
from drawopt.validate import findings
from drawopt.verify import verify

DATA = Path(__file__).resolve().parent / "data" / "captures"
FIXTURES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
HAVE_DIS = spirv_dis() is not None


def capture(name: str) -> tuple[str, str]:
    return str(DATA / name / f"{name}.jsonl.gz"), str(DATA / name / "shaders")


@pytest.fixture(scope="module")
def imported() -> dict[str, tuple[dict, object]]:
    out = {}
    for name in FIXTURES:
        path, sh = capture(name)
        out[name] = import_capture_summary(path, shaders=sh)
    return out


def test_the_four_programs_are_there() -> None:
    assert set(FIXTURES) >= {"vkcube", "vkd3d-gears", "glmark2-ideas", "glmark2-desktop"}
    for name in FIXTURES:
        prov = (DATA / name / "PROVENANCE.md").read_text()
        assert "licence" in prov and "GFXRECON_CAPTURE_FRAMES" in prov and "gfxrecon-convert" in prov
        assert (DATA / name / f"{name}.jsonl.gz").stat().st_size < 100_000  # tens of KB


@pytest.mark.parametrize("name", FIXTURES)
def test_every_frame_imports_with_no_findings(name: str, imported) -> None:
    frames, summary = imported[name]
    assert sorted(frames) == [1, 2] and summary.frames_total == 2 and summary.split == "present"
    for n, s in frames.items():
        assert findings(s) == [], (name, n)
        assert summary.frames[n - 1].draws == compute_stats(s)["draws"] > 0
    if HAVE_DIS:
        assert not summary.shaders_missing, summary.shaders_missing


@pytest.mark.parametrize("name", FIXTURES)
def test_optimize_verify_each_and_explain(name: str, imported) -> None:
    for s in imported[name][0].values():
        out = optimize(s, target="vulkan", verify_each=True).stream
        assert verify(s, out).equivalent
        assert compute_stats(out)["draw_calls"] <= compute_stats(s)["draw_calls"]
        ex = explain(out, "vulkan")
        # every adjacent pair of draw calls left apart has a reason
        assert sum(ex.by_category.values()) == ex.pairs - ex.packed or ex.draws <= 1


def test_contracts_come_from_the_spirv(imported) -> None:
    if not HAVE_DIS:
        pytest.skip("spirv-dis (Debian spirv-tools) is not installed")
    s = imported["vkcube"][0][1]
    (pipe,) = s.decls.of_kind("pipeline")
    # vkcube's vertex shader reads gl_VertexIndex (its cube is vertex pulled): no no_vertex_id
    assert pipe.vs == "sh37" and not pipe.contract.no_vertex_id and pipe.contract.no_primitive_id
    for p in imported["glmark2-ideas"][0][1].decls.of_kind("pipeline"):
        assert p.contract.no_primitive_id and p.contract.no_vertex_id


def test_no_shaders_no_clauses() -> None:
    path, _ = capture("vkcube")
    frames, summary = import_capture_summary(path, 1)
    assert summary.shaders_read == 0 and set(summary.shaders_missing) == {"sh37", "sh38"}
    assert all(not p.contract for p in frames[1].decls.of_kind("pipeline"))


def test_unknown_descriptor_contents_are_never_equal(imported) -> None:
    # zink pushes its uniforms with descriptor update templates, whose data gfxrecon-convert
    # 0.9.18 does not decode: every push is its own table
    frames, summary = imported["glmark2-ideas"]
    pushes = sum('"vkCmdPushDescriptorSetWithTemplateKHR"' in t for t in _lines("glmark2-ideas"))
    assert sum(f.unknown_tables for f in summary.frames) == pushes > 100  # one table per push
    s = frames[1]
    table_rows = [c for c in s.commands() if c.spec.name == "SetGraphicsRootDescriptorTable" and c["index"] == 0]
    assert len({c["table"] for c in table_rows}) == len(table_rows)


def test_barriers_are_full_barriers_where_reads_are_unknown(imported) -> None:
    # desktop samples its render-to-texture passes through undecoded descriptor templates: its
    # barriers must stop every move (Opaque); gears' descriptors are all known: resource barriers
    names = {n: {c.spec.name for c in imported[n][0][1].commands()} for n in ("glmark2-desktop", "vkd3d-gears")}
    assert "ResourceBarrier" not in names["glmark2-desktop"] and "Opaque" in names["glmark2-desktop"]
    assert imported["glmark2-desktop"][1].frames[0].opaque["vkCmdPipelineBarrier2"] > 0
    assert "ResourceBarrier" in names["vkd3d-gears"]


def test_list_frames() -> None:
    path, sh = capture("vkd3d-gears")
    frames = list_frames(path, shaders=sh)
    assert [f.frame for f in frames] == [1, 2] and all(f.draws == 6 for f in frames)


def test_split_submit() -> None:
    path, _ = capture("vkd3d-gears")
    by_present = list_frames(path)
    by_submit = list_frames(path, split="submit")
    assert len(by_submit) == sum(f.submits for f in by_present) > len(by_present)
    assert sum(f.draws for f in by_submit) == sum(f.draws for f in by_present)


# ---------------------------------------------------------------- synthetic captures

HEADER = {"header": {"source-path": "x.gfxr", "json-version": "0.8.0", "gfxrecon-version": "0.9.18",
                     "vulkan-version": "1.3.239"}}


def _lines(name: str) -> list[str]:
    path, _ = capture(name)
    with gzip.open(path, "rt") as f:
        return f.read().splitlines()


def _write(tmp_path: Path, lines: list[str], name: str = "c.jsonl") -> str:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_unknown_command_is_a_counted_opaque_barrier(tmp_path: Path) -> None:
    lines = _lines("vkcube")
    i = next(k for k, t in enumerate(lines) if '"vkCmdDraw"' in t)
    rec = json.loads(lines[i])
    cb = rec["vkFunc"]["args"]["commandBuffer"]
    lines.insert(i, json.dumps({"index": 1, "vkFunc": {"name": "vkCmdFrobnicateEXT", "args": {"commandBuffer": cb}}}))
    frames, summary = import_capture_summary(_write(tmp_path, lines))
    texts = [c["text"] for s in frames.values() for c in s.commands() if c.spec.name == "Opaque"]
    assert sum(f.opaque["vkCmdFrobnicateEXT"] for f in summary.frames) == 2  # recorded once, submitted twice
    assert sum(t.startswith("vkCmdFrobnicateEXT") for t in texts) == 2


def test_static_viewport_comes_from_the_pipeline(tmp_path: Path) -> None:
    lines = _lines("vkcube")
    out = []
    for t in lines:
        rec = json.loads(t)
        f = rec.get("vkFunc", {})
        if f.get("name") == "vkCmdSetViewport":
            continue
        if f.get("name") == "vkCreateGraphicsPipelines":
            ci = f["args"]["pCreateInfos"][0]
            ds = ci["pDynamicState"]
            ds["pDynamicStates"] = [d for d in ds["pDynamicStates"] if d != "VK_DYNAMIC_STATE_VIEWPORT"]
            ds["dynamicStateCount"] = len(ds["pDynamicStates"])
            ci["pViewportState"]["pViewports"] = [{"x": 1.0, "y": 2.0, "width": 30.0, "height": 40.0,
                                                   "minDepth": 0.0, "maxDepth": 1.0}]
            t = json.dumps(rec)
        out.append(t)
    s = import_capture(_write(tmp_path, out), 1)[1]
    vps = [c for c in s.commands() if c.spec.name == "RSSetViewports"]
    assert len(vps) == 1 and vps[0]["width"] == 30.0 and vps[0]["y"] == 2.0


def test_bad_input_truncated(tmp_path: Path) -> None:
    lines = _lines("vkcube")
    k = len(lines) // 2
    lines[k] = lines[k][: len(lines[k]) // 2]
    path = _write(tmp_path, lines)
    with pytest.raises(InputError) as e:
        import_capture(path)
    assert str(e.value).startswith(f"{path}:{k + 1}:")


def test_bad_input_unknown_version(tmp_path: Path) -> None:
    lines = _lines("vkcube")
    lines[0] = json.dumps({"header": {**HEADER["header"], "json-version": "7.1.0"}})
    path = _write(tmp_path, lines)
    with pytest.raises(InputError, match=r":1:1: error: unknown JSON version 7\.1\.0"):
        import_capture(path)


def test_bad_input_corrupt_gzip(tmp_path: Path) -> None:
    path, _ = capture("vkcube")
    data = Path(path).read_bytes()
    bad = tmp_path / "c.jsonl.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        import_capture(str(bad))


def test_cli_frame_out_of_range_writes_nothing(tmp_path: Path, capsys) -> None:
    path, sh = capture("vkcube")
    out = tmp_path / "f.dstream"
    assert main(["import", path, "--frame", "9", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:") and "frame 9 is out of range (the capture has frames 1..2" in err
    assert not out.exists()
    assert main(["import", path, "--frame", "2", "--shaders", sh, "-o", str(out)]) == 0
    assert compute_stats(load(out))["draws"] == 1


def test_cli_several_frames_go_to_a_folder(tmp_path: Path, capsys) -> None:
    path, sh = capture("glmark2-desktop")
    assert main(["import", path, "--shaders", sh, "-o", str(tmp_path / "out"), "--format", "npz"]) == 0
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == ["glmark2-desktop.frame0001.npz", "glmark2-desktop.frame0002.npz"]
    assert "2 of 2 frames" in capsys.readouterr().out
    assert main(["import", path, "--list", "--json"]) == 0
    assert [f["frame"] for f in json.loads(capsys.readouterr().out)] == [1, 2]


def test_gfxr_without_gfxrecon_convert(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    f = tmp_path / "c.gfxr"
    f.write_bytes(b"GFXR")
    assert importer_kind(str(f)) == "capture"
    assert main(["import", str(f), "-o", str(tmp_path / "x.dstream")]) == 2
    assert "gfxrecon-convert is not installed: it comes with the Debian package 'gfxreconstruct'" \
        in capsys.readouterr().err


# ---------------------------------------------------------------- Opaque is a full barrier

def _mergeable_with_opaque() -> object:
    """Quads that every merging pass would merge, with an Opaque in the middle."""
    b = StreamBuilder()
    b.buffer("vb", 1 << 16)
    b.target("rt", 64, 64)
    b.rootsig("r", "constants(1)")
    b.pipeline("p", vs="v", ps="f", layout="quad", root="r", contract="no_primitive_id,order_independent")
    b.pipeline("q", vs="v", ps="g", layout="quad", root="r", contract="no_primitive_id,order_independent")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("r")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.IASetVertexBuffers(0, "vb", 0, 12)
    for seg in range(3):
        for k in range(8):
            b.SetPipelineState("pq"[k % 2])
            b.SetGraphicsRoot32BitConstants(0, 1, seg)
            b.DrawInstanced(6, 1, 6 * (16 * seg + k), 0)
        if seg < 2:
            b.Opaque(f"barrier {seg}")
            b.SetGraphicsRootSignature("r")
            b.IASetPrimitiveTopology("TRIANGLELIST")
            b.IASetVertexBuffers(0, "vb", 0, 12)
    return b.build()


def _segments(s) -> list[list[tuple[int, int]]]:
    """Vertex ranges drawn between Opaque commands."""
    segs: list[list[tuple[int, int]]] = [[]]
    for c in s.commands():
        if c.spec.name == "Opaque":
            segs.append([])
        elif c.spec.name == "DrawInstanced":
            segs[-1].append((c["start_vertex"], c["start_vertex"] + c["vertex_count"] * c["instance_count"]))
        elif c.spec.name in ("DrawInstancedIndirect", "MultiDrawInstancedIndirect"):
            n, stride = (c["count"], c["stride"]) if c.spec.name.startswith("Multi") else (1, 16)
            buf = s.decls[c["args_buffer"]]
            for j in range(n):
                vc, ic, sv, _ = (int(w) for w in buf.words(c["offset"] + j * stride, 4))
                segs[-1].append((sv, sv + vc * ic))
        else:
            assert c.spec.cat.name != "DRAW", c.spec.name  # a draw form this check does not decode
    return segs


def _covered(seg: list[tuple[int, int]]) -> set[int]:
    return set().union(*(range(a, b) for a, b in seg)) if seg else set()


@pytest.mark.parametrize("reorder", ["declared", "opaque"])
@pytest.mark.parametrize("pipeline", [*PASSES, "default:vulkan", "default:d3d12", "default:xbox-one"])
def test_no_pass_moves_or_merges_across_opaque(pipeline: str, reorder: str) -> None:
    s = _mergeable_with_opaque()
    before = _segments(s)
    if pipeline.startswith("default:"):
        out = optimize(s, target=pipeline.split(":")[1], reorder=reorder, verify_each=True).stream
    else:
        out = optimize(s, parse_pipeline(pipeline, reorder=reorder), reorder=reorder, verify_each=True).stream
    after = _segments(out)
    assert len(after) == len(before) == 3
    assert [_covered(a) for a in after] == [_covered(b) for b in before]
    assert int(np.sum(out.op == s.op[s.op == 80][0])) == 2


def test_merging_happens_within_segments() -> None:
    s = _mergeable_with_opaque()
    out = optimize(s, target="vulkan", reorder="opaque", verify_each=True).stream
    assert compute_stats(out)["draw_calls"] < compute_stats(s)["draw_calls"]  # the test above is not vacuous


# ---------------------------------------------------------------- the capture script

_TOOLS = ("gfxrecon-convert", "gfxrecon-extract", "xvfb-run", "vkcube", "vkd3d-gears", "glmark2")


@pytest.mark.slow
@pytest.mark.skipif(not all(shutil.which(t) for t in _TOOLS),
                    reason="needs the Debian capture tools (tools/capture/capture.sh installs them)")
def test_capture_script(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parent.parent / "tools" / "capture" / "capture.sh"
    r = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in FIXTURES:
        got = list_frames(str(tmp_path / name / f"{name}.jsonl.gz"))
        assert len(got) == 2 and all(f.draws > 0 for f in got)
        if name in ("vkcube", "vkd3d-gears"):  # deterministic programs: the same frames as committed
            assert [f.draws for f in got] == [f.draws for f in list_frames(capture(name)[0])]
        assert (tmp_path / name / "PROVENANCE.md").exists() and os.listdir(tmp_path / name / "shaders")


# ---------------------------------------------------------------- replay (llvmpipe)

def _replay_ok() -> tuple[bool, str]:
    try:
        from drawopt.replay import available
    except ImportError as e:  # moderngl missing
        return False, str(e)
    return available()


_REPLAY_OK, _REPLAY_WHY = _replay_ok()


@pytest.mark.replay
@pytest.mark.skipif(not _REPLAY_OK, reason=f"no EGL OpenGL context: {_REPLAY_WHY}")
@pytest.mark.parametrize("name", FIXTURES)
def test_optimized_frames_render_the_same(name: str, imported) -> None:
    from drawopt.replay import compare, replay

    for n, s in imported[name][0].items():
        out = optimize(s, target="vulkan", verify_each=True).stream
        ra = replay(s, size=(64, 64), frames=1, warmup=False)
        rb = replay(out, size=(64, 64), frames=1, warmup=False)
        c = compare(ra, rb)
        assert c.same, (name, n, c.summary())
        assert ra.draw_calls == compute_stats(s)["draw_calls"]


@pytest.mark.slow
@pytest.mark.skipif(not all(shutil.which(t) for t in _TOOLS),
                    reason="needs the Debian capture tools (tools/capture/capture.sh installs them)")
def test_gfxr_is_converted_and_extracted(tmp_path: Path) -> None:
    """A .gfxr goes through gfxrecon-convert and gfxrecon-extract inside the importer."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(xdg)}
    subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 640x480x24", "env",
                    "VK_INSTANCE_LAYERS=VK_LAYER_LUNARG_gfxreconstruct", f"GFXRECON_CAPTURE_FILE={tmp_path}/c.gfxr",
                    "GFXRECON_CAPTURE_FILE_TIMESTAMP=false", "GFXRECON_CAPTURE_FRAMES=3-4", "GFXRECON_LOG_LEVEL=error",
                    "vkcube", "--c", "6"], env=env, capture_output=True, timeout=300)
    (gfxr,) = tmp_path.glob("c_frames_*.gfxr")
    frames, summary = import_capture_summary(str(gfxr))
    assert sorted(frames) == [1, 2] and [f.draws for f in summary.frames] == [1, 1]
    if HAVE_DIS:
        assert summary.shaders_read == 2 and frames[1].decls.of_kind("pipeline")[0].contract.no_primitive_id


def test_a_vertex_binding_past_the_input_slots_is_unmodelled(tmp_path: Path) -> None:
    """D3D12 has 32 vertex-buffer slots (the reader refuses slot 32 on): glmark2's frame with every
    vertex binding moved up by 32 imports with its draws as unmodelled (Opaque) calls, not as a
    stream that fails its own check."""
    out = []
    for t in _lines("glmark2-ideas"):
        rec = json.loads(t)
        f = rec.get("vkFunc", {})
        if f.get("name") == "vkCmdBindVertexBuffers":
            f["args"]["firstBinding"] += 32
        elif f.get("name") == "vkCmdSetVertexInputEXT":
            for d in (*f["args"]["pVertexBindingDescriptions"], *f["args"]["pVertexAttributeDescriptions"]):
                d["binding"] += 32
        out.append(json.dumps(rec))
    frames, summary = import_capture_summary(_write(tmp_path, out))
    s = frames[summary.frames[0].frame]
    assert summary.frames[0].draws == 0 < sum(summary.frames[0].opaque.values())
    assert not any(c.spec.name == "IASetVertexBuffers" for c in s.commands())
    texts = [c["text"] for c in s.commands() if c.spec.name == "Opaque"]
    assert any("vertex binding 32" in t for t in texts), texts[:3]
