"""The ``weld`` pass, the verifier's recognition of welded draws, and their replay.

``weld`` turns non-indexed triangle lists of ``no_vertex_id`` input-layout pipelines,
whose vertex buffers carry their contents, into indexed draws over a generated index
buffer that fetches every byte-equal vertex once. The verifier compares an indexed
draw whose every index position fetches the bytes of vertex ``S + i`` as the
non-indexed draw from ``S``; everything else stays as strict as before.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from drawopt.analysis.costmodel import TARGETS, default_pipeline, get_target, weld_pays_off
from drawopt.analysis.state import track
from drawopt.gen import generate
from drawopt.ir.formats import loads
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Stream
from drawopt.passes.weld import plan_weld
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.verify import verify

_DI = BY_NAME["DrawInstanced"].code
_DII = BY_NAME["DrawIndexedInstanced"].code
_IA = BY_NAME["IASetIndexBuffer"].code
_VB = BY_NAME["IASetVertexBuffers"].code


def run(s: Stream, passes: str, **kw) -> tuple[Stream, list]:
    target = kw.pop("target", "d3d12")
    pm = PassManager(parse_pipeline(passes, **kw), verify_each=True, target=target)
    out = pm.run(s)
    return out, pm.records


def weld_report(records: list) -> dict:
    return next(r.report for r in records if r.name == "weld")


def with_buffer(s: Stream, name: str, **changes) -> Stream:
    """``s`` with buffer ``name``'s declaration changed (a copy; commands shared)."""
    decls = s.decls.copy()
    decls.replace(replace(decls[name], **changes))
    return Stream(s.header, decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line, s.strings)


def with_pipeline_contract(s: Stream, name: str, contract: str) -> Stream:
    decls = s.decls.copy()
    p = decls[name]
    decls.replace(replace(p, contract=contract))
    return Stream(s.header, decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line, s.strings)


def indices(s: Stream, name: str = "weld_ib0", fmt: int = 0) -> np.ndarray:
    d = s.decls[name]
    return d.data.view(np.uint16 if fmt == 0 else np.uint32).astype(np.int64)


def set_indices(s: Stream, idx: np.ndarray, name: str = "weld_ib0", fmt: int = 0) -> Stream:
    raw = idx.astype(np.uint16 if fmt == 0 else np.uint32)
    return with_buffer(s, name, data=raw.view(np.uint32).copy())


@pytest.fixture(scope="module")
def quads() -> tuple[Stream, Stream, list]:
    s = generate("quads", 200, seed=1, data="on")
    out, recs = run(s, default_pipeline("d3d12"))
    return s, out, recs


# --------------------------------------------------------------------------- the pass
def test_quads_method1_becomes_one_indexed_draw(quads) -> None:
    s, out, recs = quads
    assert "weld" in default_pipeline("d3d12").split(",")
    draws = np.flatnonzero(np.isin(out.op, [_DI, _DII]))
    assert draws.size == 1 and out.op[draws[0]] == _DII
    assert out.args[draws[0], :5].tolist() == [1200, 1, 0, 0, 0]
    ia = np.flatnonzero(out.op == _IA)
    assert ia.size == 1 and out.decls[int(out.args[ia[0], 0])].name == "weld_ib0"
    rep = weld_report(recs)
    assert rep["welded_draws"] == 1 and rep["vertices"] == 1200 and rep["unique_vertices"] == 800
    assert rep["unique_ratio"] == pytest.approx(2 / 3, abs=1e-3)
    # every quad fetches its 4 distinct vertices: v3 -> v2, v4 -> v1
    idx = indices(out).reshape(-1, 6)
    base = np.arange(200)[:, None] * 6
    assert np.array_equal(idx - base, np.tile([0, 1, 2, 2, 1, 5], (200, 1)))
    assert verify(s, out).equivalent


def test_data_off_is_left_alone() -> None:
    s = generate("quads", 200, seed=1, data="off")
    out, recs = run(s, default_pipeline("d3d12"))
    assert weld_report(recs)["welded_draws"] == 0
    assert weld_report(recs)["skipped"] == {"unknown_contents": 1}
    assert not np.any(out.op == _DII)


def test_r32_when_indices_pass_65535() -> None:
    s = generate("quads", 1, seed=3, method=2, quads_per_draw=12000, data="on")
    out, recs = run(s, "weld")
    ia = np.flatnonzero(out.op == _IA)
    assert ia.size == 1 and int(out.args[ia[0], 1]) == 1  # R32_UINT
    idx = indices(out, fmt=1)
    assert idx.max() == 72000 - 1 and idx.size == 72000
    assert weld_report(recs)["index_bytes"] == 72000 * 4


def test_equal_index_sequences_are_stored_once() -> None:
    s = generate("quads", 20, seed=4, data="on")
    d = s.decls["quadverts"]
    w = d.data.copy().reshape(20, 6, 3)
    w[7, 1] = w[7, 0]   # quad 7: v1 == v0 (and v4 == v1), another index sequence
    w[7, 4] = w[7, 0]
    s = with_buffer(s, "quadverts", data=w.reshape(-1))
    out, recs = run(s, "weld{force=true}")
    dii = np.flatnonzero(out.op == _DII)
    assert dii.size == 20 and weld_report(recs)["index_bytes"] == 24
    starts = out.args[dii, 2]
    assert starts[7] == 6 and np.all(np.delete(starts, 7) == 0)
    assert indices(out).tolist() == [0, 1, 2, 2, 1, 5, 0, 0, 2, 2, 0, 5]
    assert verify(s, out).equivalent


def test_weld_then_mdi_verifies() -> None:
    s = generate("quads", 4, seed=2, method=2, quads_per_draw=50, data="on")
    out, recs = run(s, "weld,mdi")
    assert np.count_nonzero(out.op == BY_NAME["MultiDrawIndexedInstancedIndirect"].code) == 1
    assert np.count_nonzero(out.op == _IA) == 1  # one run: one binding for the 4 welded draws
    assert weld_report(recs)["welded_draws"] == 4
    assert verify(s, out).equivalent


def test_skip_reasons_of_the_no_weld_golden() -> None:
    from pathlib import Path
    s = loads(Path(__file__).with_name("golden").joinpath("weld", "no-weld.in.dstream").read_text())
    plan = plan_weld(s, track(s), force=True)
    assert plan.draws.size == 0
    assert plan.skipped == {"no_vertex_id": 1, "unknown_contents": 1, "gpu_written": 1, "topology": 1,
                            "nomerge": 1, "saving": 1, "after_opaque": 1, "no_input_layout": 1}


def test_bundles_are_left_alone() -> None:
    s = generate("quads", 200, seed=1, data="on")
    s = Stream(replace(s.header, kind="bundle"), s.decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags,
               s.line, s.strings)
    out, recs = run(s, "merge-instances,weld")
    assert weld_report(recs)["welded_draws"] == 0 and not np.any(out.op == _DII)


def test_min_saving_option() -> None:
    s = generate("quads", 200, seed=1, data="on")
    _, recs = run(s, "merge-instances,weld{min-saving=0.4}")
    assert weld_report(recs)["welded_draws"] == 0 and weld_report(recs)["skipped"] == {"saving": 1}
    _, recs = run(s, "merge-instances,weld{min-saving=0.3}")
    assert weld_report(recs)["welded_draws"] == 1
    from drawopt.errors import UsageError
    with pytest.raises(UsageError, match="min-saving"):
        run(s, "weld{min-saving=1.5}")


def test_cost_model_every_target_reuses_vertices() -> None:
    for t in TARGETS:
        assert weld_pays_off(t, 200_000, 2), t       # the 100k-quad collapse pays everywhere
        assert not weld_pays_off(t, 0, 0), t
        if get_target(t).source == "model":       # a measured profile (gl) prices a bind itself
            assert not weld_pays_off(t, 2, 1), t      # one quad does not pay for a bind


# --------------------------------------------------------------------------- the verifier
@pytest.fixture(scope="module")
def welded() -> tuple[Stream, Stream]:
    s = generate("quads", 60, seed=5, data="on")
    merged, _ = run(s, "merge-instances")
    out, _ = run(merged, "weld")
    assert np.any(out.op == _DII)
    return merged, out


def test_weld_to_a_vertex_with_other_bytes_is_rejected(welded) -> None:
    a, b = welded
    idx = indices(b)
    for pos, to in ((3, 1), (5, 4), (10, 0), (359, 358)):
        bad = idx.copy()
        bad[pos] = to
        r = verify(a, set_indices(b, bad))
        assert not r.equivalent, (pos, to)
        assert f"index position {pos} fetches vertex {to}, whose bytes differ" in r.reason, r.reason


def test_partial_and_rebased_welds_are_accepted(welded) -> None:
    a, b = welded
    idx = indices(b)
    # a vertex may keep its own index (a partial weld)
    part = idx.copy()
    part[3] = 3
    assert verify(a, set_indices(b, part)).equivalent
    # indices moved by 100 and BaseVertexLocation -100: the same fetches
    dii = int(np.flatnonzero(b.op == _DII)[0])
    shifted = set_indices(b, idx + 100)
    shifted = shifted.take(np.arange(len(shifted)))
    assert not verify(a, shifted).equivalent
    shifted.args[dii, 3] = -100
    assert verify(a, shifted).equivalent
    # the first index decides the start: an index buffer shifted by one quad is a different draw
    moved = set_indices(b, np.r_[idx[6:], idx[:6]])
    assert not verify(a, moved).equivalent


def test_without_no_vertex_id_a_weld_is_rejected(welded) -> None:
    a, b = welded
    c = "no_primitive_id"
    r = verify(with_pipeline_contract(a, "quads_m1", c), with_pipeline_contract(b, "quads_m1", c))
    assert not r.equivalent and "draw != indexed draw" in r.reason


def test_unknown_contents_stay_strict(welded) -> None:
    a, b = welded
    r = verify(with_buffer(a, "quadverts", data=None), with_buffer(b, "quadverts", data=None))
    assert not r.equivalent and "draw != indexed draw" in r.reason
    # index data unknown
    r = verify(a, with_buffer(b, "weld_ib0", data=None))
    assert not r.equivalent


def test_gpu_written_vertex_buffer_stays_strict(welded) -> None:
    a, b = welded
    text_a = _with_writer(a)
    text_b = _with_writer(b)
    r = verify(text_a, text_b)
    assert not r.equivalent and "draw != indexed draw" in r.reason


def _with_writer(s: Stream) -> Stream:
    """``s`` with a pixel-shader writer of the vertex buffer drawn before everything else."""
    from drawopt.ir.formats import dumps
    text = dumps(s, "text")
    head, _, body = text.partition("\n\n")
    head += "\npipeline vbwriter vs=w ps=w writes=quadverts"
    body = "SetPipelineState vbwriter\nDrawInstanced 3 1 0 0\n" + body
    return loads(head + "\n\n" + body)


def test_dropped_index_buffer_restore_is_rejected() -> None:
    from pathlib import Path
    s = loads(Path(__file__).with_name("golden").joinpath("weld", "restore.in.dstream").read_text())
    out, recs = run(s, "weld{force=true}")
    assert weld_report(recs)["rebinds"] == 1
    ia = np.flatnonzero(out.op == _IA)
    restore = [int(i) for i in ia if out.decls[int(out.args[i, 0])].name == "ib16"][-1]
    assert not verify(s, out.take(np.delete(np.arange(len(out)), restore))).equivalent


def test_strip_topology_weld_is_rejected(welded) -> None:
    a, b = welded
    topo = BY_NAME["IASetPrimitiveTopology"].code
    a2, b2 = a.take(np.arange(len(a))), b.take(np.arange(len(b)))
    for s in (a2, b2):
        s.args[s.op == topo, 0] = 5  # TRIANGLESTRIP
    assert not verify(a2, b2).equivalent


# --------------------------------------------------------------------------- replay
def _stride16(s: Stream) -> Stream:
    """``s`` (quads method 1) with every vertex padded to 16 bytes (4 words fetched per element)."""
    d = s.decls["quadverts"]
    w = d.data.reshape(-1, 3)
    w16 = np.concatenate([w, np.zeros((w.shape[0], 1), np.uint32)], axis=1).reshape(-1)
    out = with_buffer(s, "quadverts", size=w16.size * 4, data=w16)
    out = out.take(np.arange(len(out)))
    vb = out.op == _VB
    out.args[vb, 2] = out.args[vb, 2] // 12 * 16
    out.args[vb, 3] = 16
    return out


@pytest.mark.replay
def test_replay_welded_quads_identical() -> None:
    replay_mod = pytest.importorskip("drawopt.replay")
    ok, why = replay_mod.available()
    if not ok:
        pytest.skip(f"no EGL OpenGL context: {why}")
    s = _stride16(generate("quads", 200, seed=1, data="on"))
    out, recs = run(s, "merge-instances,weld")
    assert weld_report(recs)["welded_draws"] == 1
    opts = replay_mod.ReplayOptions(size=(160, 90))
    ra, rb = (replay_mod.replay(x, frames=1, warmup=False, options=opts) for x in (s, out))
    c = replay_mod.compare(ra, rb)
    assert c.same, c.summary()
    assert any(np.any(img != 0) for img in ra.images.values()), "nothing rendered"
    # a planted wrong weld (a quad's 4th vertex fetching its 1st) renders differently
    idx = indices(out)
    idx[3] = 0
    bad = set_indices(out, idx)
    assert not verify(s, bad).equivalent
    rc = replay_mod.replay(bad, frames=1, warmup=False, options=opts)
    assert not replay_mod.compare(ra, rc).same


@pytest.mark.replay
def test_replay_welded_quads_identical_stride12() -> None:
    replay_mod = pytest.importorskip("drawopt.replay")
    ok, why = replay_mod.available()
    if not ok:
        pytest.skip(f"no EGL OpenGL context: {why}")
    s = generate("quads", 200, seed=1, data="on")
    out, _ = run(s, "merge-instances,weld")
    opts = replay_mod.ReplayOptions(size=(160, 90))
    ra, rb = (replay_mod.replay(x, frames=1, warmup=False, options=opts) for x in (s, out))
    c = replay_mod.compare(ra, rb)
    assert c.same, c.summary()
    assert any(np.any(img != 0) for img in ra.images.values()), "nothing rendered"
    # planted wrong welds (a vertex fetching another vertex of its quad) render differently
    for pos, to in ((3, 0), (5, 4), (1199, 1198)):
        idx = indices(out)
        idx[pos] = to
        bad = set_indices(out, idx)
        assert not verify(s, bad).equivalent
        rc = replay_mod.replay(bad, frames=1, warmup=False, options=opts)
        assert not replay_mod.compare(ra, rc).same, (pos, to)
