"""Stats: every figure on a hand-built stream, format independence, the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from test_state import builder, semantic_streams

from drawopt.ir.stream import Stream
from drawopt.stats import compute_stats, format_stats
from drawopt.validate import RULES

try:
    from drawopt.ir import formats
except ImportError:  # pragma: no cover - formats is part of the package
    formats = None

needs_formats = pytest.mark.skipif(formats is None, reason="drawopt.ir.formats is not available")


def sample() -> Stream:
    b = builder()
    b.SetDescriptorHeaps("h0")                       # state 1
    b.SetGraphicsRootSignature("rsA")                # state 2
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")     # state 3
    b.SetPipelineState("pull")                       # state 4
    b.SetGraphicsRoot32BitConstants(1, 1, 0)         # state 5
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)        # batch A
    b.DrawIndexedX("ib", 16, "R32_UINT", 3, 1)       #   packed with A (only the index buffer changes)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 2)        #   packed with A
    b.IASetIndexBuffer("ib", "R16_UINT", 0)          # state 6: a call in between breaks packing
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 3)        # batch B (alone)
    b.SetGraphicsRoot32BitConstants(1, 1, 1)         # state 7
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 4)        # batch C
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 5)        #   packed with C
    b.DrawInstanced(3, 1, 0, 0)                      # batch D
    b.MultiDrawIndexedInstancedIndirect(4, "args", 0, 20)          # E: 4 records
    b.MultiDrawInstancedIndirectAuto("cnt", 0, 8, "args", 0, 16)   # F: up to 8 records
    b.SetPipelineState("cull")                       # state 8
    b.SetComputeRootSignature("rsA")                 # state 9
    b.Dispatch(1, 1, 1)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    return b.build()


def test_figures():
    st = compute_stats(sample())
    assert st["commands"] == 21
    assert st["draw_calls"] == 9
    assert st["draws"] == 6 + 1 + 4 + 8
    assert st["dispatches"] == 1
    assert st["state_changes"] == 9
    assert st["flushes"] == 2
    assert st["gpu_batches"] == 6
    assert st["packed_fraction"] == pytest.approx(5 / 19)
    # states: constants 0 / constants 1 (DrawIndexedX and DrawInstanced alike: the index buffer is
    # masked), and the indexed multi-draw, which sees the index buffer (undefined after DrawIndexedX)
    assert st["distinct_states"] == 3
    assert st["distinct_pack_classes"] == 2
    assert st["by_command"]["DrawIndexedX"] == 6 and st["by_command"]["Dispatch"] == 1
    assert list(st["by_command"]) == sorted(st["by_command"])
    assert sum(st["by_command"].values()) == st["commands"]
    assert set(st["findings_by_rule"]) == set(RULES)
    assert st["findings"] == sum(st["findings_by_rule"].values())
    # the Dispatch reads compute tables 0 and 3, never set; the indexed multi-draw follows DrawIndexedX
    assert st["findings_by_rule"]["table-undefined"] == 2
    assert st["findings_by_rule"]["index-buffer-undefined"] == 1
    assert st["findings"] == 3


def test_target_without_wave_packing():
    pytest.importorskip("drawopt.analysis.costmodel")
    s = sample()
    assert compute_stats(s, target="xbox-one")["gpu_batches"] == 6
    st = compute_stats(s, target="xbox-series")  # runs DrawIndexedX like DrawIndexedInstanced
    assert st["gpu_batches"] == st["draw_calls"] == 9
    assert st["packed_fraction"] == compute_stats(s)["packed_fraction"]


def test_empty_stream():
    st = compute_stats(builder().build())
    assert st["commands"] == 0 and st["draws"] == 0 and st["packed_fraction"] == 0.0 and st["gpu_batches"] == 0
    assert st["distinct_states"] == 0 and st["by_command"] == {}


def test_runs_split_on_pack_class_and_adjacency():
    b = builder()
    b.SetPipelineState("pull")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.SetPipelineState("noroot")
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)   # another pack class
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    st = compute_stats(b.build())
    assert st["gpu_batches"] == 2 and st["packed_fraction"] == pytest.approx(3 / 4)


def test_format_table():
    txt = format_stats(compute_stats(sample()))
    lines = txt.splitlines()
    assert lines[0].split() == ["commands", "21"]
    assert "by_command:" in lines and "  DrawIndexedX" in [ln[:14] for ln in lines]
    assert any(ln.split() == ["packed_fraction", "0.2632"] for ln in lines)
    width = {len(ln) for ln in lines if ln and not ln.endswith(":")}
    assert len(width) == 1  # values right-aligned in one column


@needs_formats
def test_identical_across_formats():
    s = sample()
    want = compute_stats(s)
    for fmt in ("text", "json", "npz"):
        assert compute_stats(formats.loads(formats.dumps(s, fmt), fmt)) == want, fmt


@needs_formats
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams(max_commands=40))
def test_identical_across_formats_random(s):
    want = compute_stats(s)
    for fmt in ("text", "json", "npz"):
        assert compute_stats(formats.loads(formats.dumps(s, fmt), fmt)) == want, fmt


@needs_formats
def test_cli_stats(tmp_path, capsys):
    from drawopt.cli import main
    p = tmp_path / "s.npz"
    formats.save(sample(), p)
    assert main(["stats", str(p)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["commands", "21"]
    assert main(["stats", "--json", str(p)]) == 0
    raw = capsys.readouterr().out
    js = json.loads(raw)
    assert js == compute_stats(sample())
    assert list(js) == sorted(js) and raw.index('"by_command"') < raw.index('"commands"')
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["stats", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err
