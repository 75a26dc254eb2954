"""``merge-instances``: instance and range runs, the vertex-buffer window fold, limits."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from drawopt.analysis.mergeclass import INSTANCES, RANGES, adjacent_links, draw_facts
from drawopt.analysis.state import track
from drawopt.gen import generate
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes.merge_instances import plan_merges
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.stats import compute_stats
from drawopt.verify import verify


def run(stream: Stream, verify_each: bool = True, passes: str = "merge-instances"):
    pm = PassManager(parse_pipeline(passes), verify_each=verify_each)
    out = pm.run(stream)
    return out, pm.records[0]


def fetches(s: Stream) -> list[tuple[str, int]]:
    """Every vertex the input assembler fetches for the non-indexed draws of ``s``, in order:
    (buffer, byte address) through the slot-0 vertex buffer in force."""
    out: list[tuple[str, int]] = []
    vb: tuple[str, int, int] | None = None
    for c in s.commands():
        if c.name == "IASetVertexBuffers" and c.args[0] == 0:
            vb = (c.args[1], c.args[2], c.args[3])
        elif c.name == "DrawInstanced":
            assert vb is not None and c.args[1] == 1
            buf, off, stride = vb
            out += [(buf, off + (c.args[2] + i) * stride) for i in range(c.args[0])]
    return out


def test_quads_method1_collapses_and_fetches_the_same_vertices() -> None:
    n = 500
    s = generate("quads", n, seed=3)
    out, rec = run(s, verify_each=False)
    assert compute_stats(out)["draw_calls"] <= 2
    assert rec.report["draws_removed"] >= n - 2
    assert fetches(out) == fetches(s)
    # the rebinds that no draw reads are gone; one remains for whatever follows
    assert compute_stats(out)["by_command"]["IASetVertexBuffers"] == 2


def test_quads_method1_verifies() -> None:
    s = generate("quads", 50, seed=3)
    out, _ = run(s, verify_each=True)
    assert compute_stats(out)["draw_calls"] == 1


def test_window_fold_needs_no_vertex_id() -> None:
    """Without no_vertex_id a non-indexed draw's SV_VertexID would move: no fold, no merge."""
    s = generate("quads", 40, seed=3)
    p = s.decls["quad"] if "quad" in s.decls else next(d for d in s.decls if d.kind == "pipeline")
    assert p.contract.names == ("no_primitive_id", "no_vertex_id")
    s.decls.replace(replace(p, contract="no_primitive_id"))
    out, rec = run(s, verify_each=True)
    assert compute_stats(out)["draw_calls"] == compute_stats(s)["draw_calls"]


def test_fold_can_be_switched_off() -> None:
    s = generate("quads", 40, seed=3)
    out, rec = run(s, passes="merge-instances{fold-windows=false}")
    assert out is s and rec.report["runs"] == 0


@pytest.mark.parametrize("method", [2, 3, 4, 5])
def test_quads_batched_methods_merge_and_verify(method: int) -> None:
    s = generate("quads", 40, seed=1, method=method, quads_per_draw=16)
    out, rec = run(s)
    calls = compute_stats(out)["draw_calls"]
    if method == 5:  # instancing over a per-instance layout, TRIANGLESTRIP: no rule applies
        assert calls == 40 and rec.report["runs"] == 0
    else:
        assert calls == 1


@pytest.mark.parametrize("kind", ["frame", "bundle", "gpu-driven"])
def test_generated_streams_verify(kind: str) -> None:
    s = generate(kind, 1200, seed=9)
    out, rec = run(s)
    before, after = compute_stats(s), compute_stats(out)
    # every merged draw is a direct draw: calls and logical draws both drop by the draws removed
    assert after["draw_calls"] == before["draw_calls"] - rec.report["draws_removed"]
    assert after["draws"] == before["draws"] - rec.report["draws_removed"]
    assert rec.report["runs"] > 0 or kind == "gpu-driven"


def _instances(n: int, counts: list[int]) -> Stream:
    b = StreamBuilder()
    b.buffer("ib", 4096)
    b.target("rt", 64, 64)
    b.rootsig("r", "srv")
    b.pipeline("p", vs="v", ps="p", root="r", contract="instance_data(perdraw=0)")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("r")
    b.SetPipelineState("p")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    start = 0
    for c in counts[:n]:
        b.DrawIndexedInstanced(36, c, 0, 0, start)
        start += c
    return b.build()


def _plan_by_draw(facts, limit: int) -> list[tuple[int, int, int, int]]:
    """The runs of :func:`plan_merges`, walked draw by draw (the definition the vectorized
    planner must match): ``(first, last, kind, total)``."""
    inst = adjacent_links(facts, INSTANCES).ok
    rng = adjacent_links(facts, RANGES).ok
    typ = np.where(inst, 1, np.where(rng, 2, 0))
    typ[1:][(typ[1:] > 0) & (typ[:-1] > 0) & (typ[1:] != typ[:-1])] = 0
    out, i = [], 0
    while i < typ.size:
        if typ[i] == 0:
            i += 1
            continue
        j = i
        while j + 1 < typ.size and typ[j + 1] == typ[i]:
            j += 1
        col = 1 if typ[i] == 1 else 0
        start, acc = i, 0
        for d in range(i, j + 2):
            c = int(facts.args[d, col])
            if acc + c > limit and d > start:
                if d - 1 > start:
                    out.append((start, d - 1, int(typ[i]), acc))
                start, acc = d, 0
            acc += c
        if j + 1 > start:
            out.append((start, j + 1, int(typ[i]), acc))
        i = j + 1
    return out


@pytest.mark.parametrize("kind", ["quads", "frame", "bundle", "gpu-driven"])
def test_the_vectorized_planner_matches_the_draw_by_draw_definition(kind: str) -> None:
    s = generate(kind, 600, seed=3)
    facts = draw_facts(s, track(s))
    whole = plan_merges(facts).total.tolist()
    edges = {v + d for v in whole[:20] for d in (-1, 0, 1)}  # a run exactly at the limit, just over, under
    for limit in sorted({1, 2, 5, 37, 1000, 2**32 - 1} | edges):
        plan = plan_merges(facts, limit=limit)
        got = list(zip(plan.head.tolist(), plan.last.tolist(), plan.kind.tolist(), plan.total.tolist()))
        assert got == _plan_by_draw(facts, limit), (kind, limit)


def test_instance_runs_split_at_the_count_limit() -> None:
    s = _instances(6, [4, 4, 4, 4, 4, 4])
    facts = draw_facts(s, track(s))
    assert adjacent_links(facts, INSTANCES).ok.all()
    plan = plan_merges(facts, limit=10)
    assert plan.total.tolist() == [8, 8, 8] and plan.split_by_limit == 2
    plan = plan_merges(facts)
    assert plan.total.tolist() == [24]
    out, _ = run(s)
    assert [c.args[1] for c in out.commands() if c.name == "DrawIndexedInstanced"] == [24]


def test_links_name_the_failing_test() -> None:
    s = generate("quads", 10, seed=1, contract="none")
    facts = draw_facts(s, track(s))
    link = adjacent_links(facts, RANGES)
    assert not link.ok.any()
    assert set(link.fail.tolist()) == {"state"}  # no contract: no fold, so the windows differ
    s = generate("quads", 10, seed=1, method=2, quads_per_draw=2, contract="none")
    link = adjacent_links(draw_facts(s, track(s)), RANGES)
    assert set(link.fail.tolist()) == {"no_primitive_id"}


def test_a_non_state_command_ends_a_run() -> None:
    b = StreamBuilder()
    b.buffer("vb", 4096)
    b.texture("t", 4, 4, "R8G8B8A8_UNORM")
    b.target("rt", 64, 64)
    b.pipeline("p", vs="v", ps="p", layout="pos", contract="no_primitive_id")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("p")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.IASetVertexBuffers(0, "vb", 0, 16)
    b.DrawInstanced(3, 1, 0, 0)
    b.DrawInstanced(3, 1, 3, 0)
    b.ResourceBarrier("t", "SHADER_RESOURCE", "COPY_DEST")
    b.DrawInstanced(3, 1, 6, 0)
    b.DrawInstanced(3, 1, 9, 0)
    s = b.build()
    out, rec = run(s)
    assert [c.args[:3] for c in out.commands() if c.name == "DrawInstanced"] == [(6, 1, 0), (6, 1, 6)]
    assert verify(s, out).equivalent


def test_merge_after_schedule_on_a_frame() -> None:
    s = generate("frame", 1500, seed=21)
    pm = PassManager(parse_pipeline("dedupe-state,schedule,merge-instances"), verify_each=True)
    out = pm.run(s)
    assert compute_stats(out)["draw_calls"] < compute_stats(s)["draw_calls"]
    assert np.all([r.verified in (True, None) for r in pm.records])


# ---------------------------------------------------------------------- the numeric window fold
def _fold_reference(sc, uniq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window fold as ``draw_facts`` computed it before the numeric table: one decode
    per distinct value id (``uniq``, sorted), keys numbered in first-appearance order."""
    ok_u = np.zeros(uniq.size, bool)
    shift_u = np.zeros(uniq.size, np.int64)
    key_u = np.zeros(uniq.size, np.int64)
    keyid: dict[tuple, int] = {}
    for j, v in enumerate(uniq):
        val = sc.values.decode(int(v))
        if not (isinstance(val, tuple) and len(val) == 1 and val[0][0] == 0 and val[0][3] > 0):
            continue
        _, buf, off, stride = val[0]
        k = keyid.setdefault((buf, off % stride, stride), len(keyid))
        ok_u[j], shift_u[j] = True, off // stride
        key_u[j] = -(1 << 40) - k
    return ok_u, shift_u, key_u


def _vb_stream() -> Stream:
    """Slot-0 windows (shared, a zero stride, another buffer), then two
    bindings, an unknown binding after Opaque and a partial update of it."""
    b = StreamBuilder()
    b.buffer("vb", 4096)
    b.buffer("vb2", 4096)
    b.target("rt", 64, 64)
    b.pipeline("p", vs="v", ps="p", layout="pos", contract="no_primitive_id,no_vertex_id")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("p")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    for off, stride in ((0, 16), (48, 16), (20, 16), (64, 0), (36, 16), (80, 16), (0, 24), (12, 16)):
        b.IASetVertexBuffers(0, "vb", off, stride)
        b.DrawInstanced(3, 1, 0, 0)
    b.IASetVertexBuffers(0, "vb2", 48, 16)  # the window of (vb, 0, 16) in another buffer
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetVertexBuffers(1, "vb2", 32, 8)   # two bindings
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("Something")                   # the bindings are unknown
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetVertexBuffers(0, "vb", 0, 16)    # slot 0 known, the rest unknown: a partial value
    b.DrawInstanced(3, 1, 0, 0)
    return b.build()


def _fold_streams() -> list[tuple[str, Stream]]:
    return [("quads", generate("quads", 300, seed=1, data="off")), ("quads-data", generate("quads", 300, seed=2)),
            ("frame", generate("frame", 1500, seed=7)), ("gpu-driven", generate("gpu-driven", 600, seed=3)),
            ("bundle", generate("bundle", 600, seed=4)), ("handmade", _vb_stream())]


@pytest.mark.parametrize("pure", [False, True])
def test_numeric_window_fold_equals_the_decoding_fold(pure: bool) -> None:
    from drawopt.analysis.mergeclass import _vb_fold
    from drawopt.analysis.state import VB
    for name, s in _fold_streams():
        table = track(s, pure=pure)
        sc = table.scan
        # every value id of the stream (vertex-buffer values and all others), plus markers
        ids = np.arange(-3, sc.values.next, dtype=np.int64)
        ref = _fold_reference(sc, ids)
        got = _vb_fold(sc, ids)
        for r, g in zip(ref, got):
            assert np.array_equal(r, g), name
        # and the ids draws actually hold, as draw_facts sees them
        vb_ids = np.unique(table.rows[:, VB])
        for r, g in zip(_fold_reference(sc, vb_ids), _vb_fold(sc, vb_ids)):
            assert np.array_equal(r, g), name
        if name in ("quads", "quads-data", "handmade"):
            assert ref[0].any() and not ref[0].all(), name


def test_handmade_fold_keys() -> None:
    """Windows fold by (buffer, offset mod stride, stride); two bindings, a zero stride or an
    unknown part do not fold."""
    from drawopt.analysis.mergeclass import _vb_fold
    from drawopt.analysis.state import VB
    s = _vb_stream()
    table = track(s)
    facts = draw_facts(s, table)
    assert facts.folded.tolist() == [True, True, True, False, True, True, True, True, True, False, False, False]
    assert facts.shift[facts.folded].tolist() == [0, 3, 1, 2, 5, 0, 0, 3]
    _, _, key = _vb_fold(table.scan, table.rows[facts.sid, VB])
    # windows (offset mod stride): 0, 0, 4, 4, 0 (stride 16); 0 (stride 24); 12; vb2 0
    k = key[facts.folded].tolist()
    assert k[0] == k[1] == k[4] and k[2] == k[3] and len({k[0], k[2], k[5], k[6], k[7]}) == 5


@pytest.mark.parametrize("n", [2, 3, 4])
def test_shortest_runs_drop_their_overwritten_rebinds(n: int) -> None:
    """The runs whose state commands are compared are picked by counting (issue 13: no loop over
    every run): a run of n quads has n - 1 window rebinds between its members, of which the
    last stays (whatever follows sees it) and every other is overwritten before a draw reads it."""
    s = generate("quads", n, seed=3)
    out, rec = run(s, verify_each=True)
    assert rec.report["draws_removed"] == n - 1
    assert rec.report["state_commands_removed"] == n - 2
    assert fetches(out) == fetches(s)
