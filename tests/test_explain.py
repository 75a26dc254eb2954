"""``drawopt explain``: the reason for every adjacent pair of draw calls left unmerged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drawopt.cli import main
from drawopt.explain import CATEGORIES, explain, format_explanation, format_value
from drawopt.gen import generate
from drawopt.ir.formats import save
from drawopt.ir.stream import Stream, StreamBuilder


def base(**pipe) -> StreamBuilder:
    b = StreamBuilder()
    b.buffer("ib", 1 << 16)
    b.buffer("counts", 4096)
    b.texture("t0", 4, 4, "R8G8B8A8_UNORM")
    b.texture("t1", 4, 4, "R8G8B8A8_UNORM")
    b.target("rt", 64, 64)
    b.heap("res", size=8)
    b.view("res", 0, "srv", "t0")
    b.view("res", 1, "srv", "t1")
    b.rootsig("r", "table(srv,1)", "constants(2)")
    b.pipeline("p", vs="v", ps="p", root="r", **pipe)
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("r")
    b.SetPipelineState("p")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.SetGraphicsRoot32BitConstants(1, 2, 7, 8)
    return b


def only(s: Stream, target: str = "d3d12", **kw):
    ex = explain(s, target, **kw)
    assert ex.pairs == len(ex.items) == 1, ex.items
    return ex.items[0]


def test_state_names_the_root_parameter_and_both_values() -> None:
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootDescriptorTable(0, "res[1]")
    b.DrawInstanced(3, 1, 3, 0)
    it = only(b.build())
    assert it.category == "state"
    assert it.reason == "root0 (root parameter 0) differs: table res[0] vs table res[1]"


def test_gs_parameters_are_state() -> None:
    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.pipeline("fur", vs="v", gs="g", ps="p")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("fur")
    b.GSSetParameters("onchip", vps=64, pps=32, lds=16384)
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")
    b.DrawInstanced(3, 1, 3, 0)
    it = only(b.build())
    assert (it.category, it.reason) == ("state", "gs_params differs: onchip vps=64 pps=32 lds=16384 vs null")


def test_hazards_fences_and_data() -> None:
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.ResourceBarrier("t1", "SHADER_RESOURCE", "COPY_DEST")
    b.DrawInstanced(3, 1, 3, 0)
    it = only(b.build())
    assert (it.category, it.reason) == ("hazard", "separated by ResourceBarrier t1 SHADER_RESOURCE->COPY_DEST")
    # a read-after-write between two draws is named with its resource
    b = StreamBuilder()
    b.buffer("counts", 4096)
    b.target("rt", 64, 64)
    b.pipeline("w", vs="v", ps="w", blend="additive", writes=("counts",), contract="order_independent")
    b.pipeline("r", vs="v", ps="r", blend="additive", reads=("counts",), contract="order_independent")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("w")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("r")
    b.DrawInstanced(3, 1, 3, 0)
    s = b.build()
    from drawopt.analysis.graph import build_graph
    from drawopt.analysis.state import track
    from drawopt.explain import _data_hazards

    assert _data_hazards(build_graph(s), track(s).draws, np.array([0])) == {0: "raw on counts"}


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_the_hazard_graph_explains_as_the_full_graph_does(kind: str) -> None:
    """explain reads data hazards off the hazard graph by default; build_graph's graph (with its
    state edges and reason lists) gives the same explanation."""
    from drawopt.analysis.graph import build_graph
    s = generate(kind, 1500, seed=6)
    for target in ("d3d12", "xbox-one"):
        for pol in ("declared", "opaque"):
            assert explain(s, target, pol).to_json() == explain(s, target, pol, graph=build_graph(s, pol)).to_json()


@pytest.mark.parametrize("kind", ["frame", "gpu-driven", "bundle"])
def test_given_state_keys_explain_as_their_own(kind: str) -> None:
    """``keys`` (the mdi state keys the report shares with the call classes) changes nothing."""
    from drawopt.analysis.mergeclass import MDI, draw_facts, state_keys
    from drawopt.analysis.state import track

    s = generate(kind, 1500, seed=7)
    facts = draw_facts(s, track(s))
    keys = state_keys(facts, MDI.state_except)
    for target in ("d3d12", "xbox-one"):
        assert explain(s, target, facts=facts, keys=keys).to_json() == explain(s, target).to_json()


def test_nomerge_and_kind_and_contract() -> None:
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawInstanced(3, 1, 3, 0, flags="nomerge")
    assert (only(b.build()).category, only(b.build()).reason) == ("nomerge", "@nomerge")
    b = base()
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    it = only(b.build())
    assert (it.category, it.reason) == ("kind", "indexed draws and non-indexed draws cannot share a call")
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 2, 9, 8)
    b.DrawInstanced(3, 1, 3, 0)
    it = only(b.build())
    assert it.category == "contract"
    assert it.reason.startswith("root1 (root parameter 1) differs: constants 7 8 vs constants 9 8")
    assert "draw_data" in it.reason


def test_cost_model_reasons() -> None:
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawInstanced(3, 1, 30, 0)
    it = only(b.build(), "d3d12")
    assert it.category == "cost" and "run of 2" in it.reason and "d3d12" in it.reason
    ex = explain(b.build(), "xbox-one")  # 2 draws pay a multi-draw call there
    assert ex.items[0].category == "mergeable"
    # consecutive DrawIndexedX of one pack class: packed on Xbox One, not on Xbox Series
    x = StreamBuilder()
    x.buffer("ib", 1 << 16)
    x.target("rt", 64, 64)
    x.pipeline("z", vs="pull", contract="x(vertex_bits=16)")
    x.OMSetRenderTargets("rt")
    x.SetPipelineState("z")
    x.DrawIndexedX("ib", 0, "R16_UINT", 36, 0)
    x.DrawIndexedX("ib", 72, "R16_UINT", 36, 65536)
    s = x.build()
    one = explain(s, "xbox-one")
    assert one.pairs == 0 and one.packed == 1
    it = only(s, "xbox-series")
    assert (it.category, it.reason) == ("cost", "target xbox-series runs DrawIndexedX unpacked")


def test_limit_and_mergeable() -> None:
    b = base()
    b.buffer("args", 65535 * 16 + 64)
    b.MultiDrawInstancedIndirect(65535, "args", 0, 16)
    b.MultiDrawInstancedIndirect(1, "args", 0, 16)
    it = only(b.build(), "vulkan")
    assert (it.category, it.reason) == ("limit", "a multi-draw call holds at most 65535 draws on vulkan")
    b = base()
    for i in range(4):
        b.DrawInstanced(3, 1, 100 * i, 0)
    ex = explain(b.build(), "d3d12")
    assert [i.category for i in ex.items] == ["mergeable"] * 3
    assert ex.items[0].reason == "mdi would batch them (run the default pipeline)"


def test_summary_counts_every_pair_and_limit_bounds_the_list() -> None:
    s = generate("frame", 800, seed=2)
    ex = explain(s, "d3d12", limit=5)
    assert len(ex.items) == 5
    assert sum(ex.by_category.values()) == ex.pairs == 799
    assert set(ex.by_category) <= set(CATEGORIES)
    assert sum(ex.by_detail.values()) == ex.pairs
    text = format_explanation(ex, "f")
    assert text.count("\n") == 5 + 1 + len(ex.by_category)
    assert "799 adjacent pairs" in text


def test_format_value() -> None:
    assert format_value(None) == "undefined"
    assert format_value(("constants", (1, None, 3))) == "constants 1 ? 3"
    assert format_value(("srv", "buf", 256)) == "srv buf+256"
    assert format_value(((0, "vb", 0, 12), (1, "inst", 64, 16))) == "0 vb 0 12, 1 inst 64 16"


def test_cli(tmp_path, capsys) -> None:
    b = base()
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootDescriptorTable(0, "res[1]")
    b.DrawInstanced(3, 1, 3, 0)
    f = tmp_path / "s.dstream"
    save(b.build(), str(f))
    assert main(["explain", str(f), "--json", "--limit", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pairs"] == 1 and out["by_category"] == {"state": 1}
    assert out["items"][0]["category"] == "state" and out["items"][0]["line_a"] > 0
    assert main(["explain", str(f), "--target", "xbox-one", "--no-graph"]) == 0
    text = capsys.readouterr().out
    assert "state: root0 (root parameter 0) differs" in text and "target xbox-one" in text
    bad = tmp_path / "bad.dstream"
    bad.write_text("drawopt 1\nDrawInstanced 3\n")
    assert main(["explain", str(bad)]) == 2
    assert "error" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["explain", str(f), "--target", "ps5"])


def test_folded_vertex_buffer_windows_are_described_by_their_bindings() -> None:
    """Two draws whose vertex-buffer windows both fold (one binding, slot 0, a stride) but differ:
    the message names both bindings (it raised KeyError decoding the window keys)."""
    from pathlib import Path

    from drawopt.ir.formats import load

    s = load(Path(__file__).parent / "golden" / "weld" / "no-weld.in.dstream")
    ex = explain(s, "d3d12")
    msgs = [it.reason for it in ex.items if it.category == "state" and "vertex_buffers" in it.reason]
    assert msgs == ["vertex_buffers differs: 0 nodata 0 12 vs 0 gpuverts 0 12"]


def test_a_full_drawindexedx_run_is_a_limit() -> None:
    """The draw-id bits (``x(vertex_bits=K)``): a DrawIndexedX whose index offset holds the last
    draw id ends its packed run; one of a pipeline without the contract never does."""
    x = StreamBuilder()
    x.buffer("ib", 1 << 16)
    x.target("rt", 64, 64)
    x.pipeline("z", vs="pull", contract="x(vertex_bits=16)")
    x.pipeline("w", vs="pull")
    x.OMSetRenderTargets("rt")
    x.SetPipelineState("z")
    x.DrawIndexedX("ib", 0, "R16_UINT", 36, 0xFFFF << 16)  # draw id 65535: the last
    x.DrawIndexedX("ib", 72, "R16_UINT", 36, 0)
    x.DrawIndexedX("ib", 72, "R16_UINT", 36, 0xFFFE << 16)
    x.DrawIndexedX("ib", 72, "R16_UINT", 36, 0)
    x.SetPipelineState("w")
    x.DrawIndexedX("ib", 0, "R16_UINT", 36, 0xFFFF << 16)
    x.DrawIndexedX("ib", 72, "R16_UINT", 36, 0)
    ex = explain(x.build(), "xbox-series")  # (it runs them unpacked: every pair is listed)
    got = [(it.a, it.category) for it in ex.items]
    assert got == [(2, "limit"), (3, "cost"), (4, "cost"), (5, "state"), (7, "cost")], got
    assert ex.items[0].reason == "the DrawIndexedX draw-id bits are used up (a packed run is full)"
