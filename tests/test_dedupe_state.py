"""dedupe-state: exact removals, never a removal that matters, idempotence, speed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import VERIFIABLE_DRAWS, multi_draws
from test_state import HAS_CEXT, add, big_stream, builder, semantic_streams, shared_streams

from drawopt.analysis.state import compare_effective_state
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes.dedupe_state import DedupeStatePass, dead_state_commands
from drawopt.passmanager import AnalysisManager, PassManager, get_pass, parse_pipeline
from drawopt.verify import verify


def run(s: Stream) -> tuple[Stream, dict]:
    res = DedupeStatePass().apply(s, AnalysisManager())
    return res.stream, res.report


def kept(s: Stream) -> list[str]:
    """The commands the pass keeps, as 'Name arg...' strings."""
    out, _ = run(s)
    return [" ".join([c.name, *map(str, c.args), *map(str, c.var)]) for c in out.commands()]


def removed(s: Stream) -> list[int]:
    return np.flatnonzero(dead_state_commands(s)).tolist()


def test_registered():
    assert get_pass("dedupe-state") is DedupeStatePass
    assert DedupeStatePass.name == "dedupe-state" and DedupeStatePass.requires == ()  # its own scan
    assert DedupeStatePass.preserves == ()


def test_resets_of_the_current_value():
    b = builder()
    b.SetPipelineState("lay")
    b.SetPipelineState("lay")                     # 1 re-set
    b.SetGraphicsRootSignature("rsA")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetGraphicsRoot32BitConstants(1, 2, 5, 6)
    b.SetGraphicsRootConstantBufferView(2, "verts", 0)
    b.SetGraphicsRootDescriptorTable(3, "h0[1]")
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("rsA")             # 10 same root signature: arguments kept
    b.SetDescriptorHeaps("h0")                    # 11 same heaps: tables kept
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")  # 12
    b.SetGraphicsRoot32BitConstants(1, 2, 5, 6)   # 13
    b.SetGraphicsRootConstantBufferView(2, "verts", 0)  # 14
    b.IASetVertexBuffers(0, "verts", 0, 16)       # 15
    b.GSSetParameters("null")                     # 16 the driver default is in force
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert removed(s) == [1, 10, 11, 12, 13, 14, 15, 16]
    out, rep = run(s)
    assert compare_effective_state(s, out) is None
    assert rep["removed"] == {"GSSetParameters": 1, "IASetVertexBuffers": 1, "SetDescriptorHeaps": 1,
                              "SetGraphicsRoot32BitConstants": 1, "SetGraphicsRootConstantBufferView": 1,
                              "SetGraphicsRootDescriptorTable": 1, "SetGraphicsRootSignature": 1,
                              "SetPipelineState": 1}
    assert rep["removed_total"] == 8 and rep["rounds"] == 1


def test_dead_and_trailing_sets():
    b = builder()
    b.SetPipelineState("noroot")
    b.IASetPrimitiveTopology("POINTLIST")   # 1 overwritten before any draw
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.OMSetStencilRef(1)
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)  # 5 only non-indexed draws follow
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 16)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.OMSetStencilRef(0)                    # 9 trailing
    b.SetPipelineState("lay")               # 10 trailing
    s = b.build()
    assert removed(s) == [1, 5, 9, 10]
    out, _ = run(s)
    assert len(out) == len(s) - 4 and compare_effective_state(s, out) is None


def test_bundle_keeps_trailing_state_and_its_heaps():
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0")
    b.SetPipelineState("noroot")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h0")   # 3 same heaps: redundant
    b.OMSetStencilRef(1)         # the caller inherits it
    b.SetPipelineState("lay")
    s = b.build()
    assert removed(s) == [3]
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0")   # the bundle's only heaps set, nothing draws: kept
    assert removed(b.build()) == []


def test_keeps_index_buffer_rebind_after_drawindexedx():
    b = builder()
    b.SetPipelineState("pull")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)  # 3 re-set: removed
    b.DrawIndexedX("ib", 0, "R16_UINT", 3, 0)
    b.IASetIndexBuffer("ib", "R16_UINT", 0)  # 5 needed: DrawIndexedX left it undefined
    b.DrawIndexedInstanced(3, 1, 0, 0, 0)
    s = b.build()
    assert removed(s) == [3]
    out, _ = run(s)
    assert [c.name for c in out.commands()].count("IASetIndexBuffer") == 2


def test_keeps_heap_and_root_signature_changes_that_matter():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h1")          # 5 dead, but it resets table 0 (h1 -> h0 is a change)
    b.SetDescriptorHeaps("h0")          # 6
    b.DrawInstanced(3, 1, 0, 0)         # table 0 undefined
    b.SetGraphicsRootSignature("rsB")   # 8 dead, but it resets the root arguments
    b.SetGraphicsRootSignature("rsA")   # 9
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert removed(s) == []
    out, _ = run(s)
    assert compare_effective_state(s, out) is None and len(out) == len(s)


def test_removes_dead_heap_changes_when_the_reset_survives():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetDescriptorHeaps("h0", "s0")    # 5 dead: h0 -> h1 still changes the heaps
    b.SetGraphicsRootDescriptorTable(0, "h0[1]")  # 6 dead: reset by the next change
    b.SetDescriptorHeaps("s0")          # 7 dead
    b.SetDescriptorHeaps("h1")          # 8
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootSignature("rsB")   # 10 dead run 10..12 goes from rsA back to rsA:
    b.SetGraphicsRootSignature("rsA")   # 11 dropping all of it would lose the reset,
    b.SetGraphicsRootSignature("rsB")   # 12 so its first command is kept
    b.SetGraphicsRootSignature("rsA")   # 13 seen by the draw
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert removed(s) == [5, 6, 7, 11, 12]
    out, _ = run(s)
    assert compare_effective_state(s, out) is None
    assert dead_state_commands(out).sum() == 0


def test_partial_root_constants_exactly():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetGraphicsRoot32BitConstants(1, 4, 1, 2, 3, 4)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 2, 2, 3, dest=1)   # 4 same words: removed
    b.SetGraphicsRoot32BitConstants(1, 2, 9, 9, dest=0)   # 5 word 0 overwritten below, word 1 seen: kept
    b.SetGraphicsRoot32BitConstants(1, 1, 7, dest=0)      # 6
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 5, dest=3)      # 8 overwritten before any draw
    b.SetGraphicsRoot32BitConstants(1, 2, 6, 4, dest=2)   # 9 word 3 = 4 again, word 2 = 6 new
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert removed(s) == [4, 8]
    out, _ = run(s)
    assert compare_effective_state(s, out) is None


def test_chain_after_another_kind_keeps_the_reset():
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetPipelineState("lay")
    b.SetGraphicsRoot32BitConstants(1, 2, 1, 2)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootConstantBufferView(1, "verts", 0)   # 4 never seen, but it discards words 0..1
    b.SetGraphicsRoot32BitConstants(1, 1, 5, dest=1)     # 5 dead (overwritten)
    b.SetGraphicsRoot32BitConstants(1, 1, 8, dest=1)     # 6
    b.DrawInstanced(3, 1, 0, 0)                          # sees (None, 8)
    s = b.build()
    assert removed(s) == [5]
    out, _ = run(s)
    assert compare_effective_state(s, out) is None


def test_keeps_a_set_whose_reset_is_observed():
    # a table set over an inherited (unknown) value, reset by a heap change: without it the
    # calling list would inherit "unknown", not "undefined"
    b = builder(kind="bundle")
    b.SetDescriptorHeaps("h0")
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")
    b.SetDescriptorHeaps("h1")
    assert removed(b.build()) == []
    # a table set over root constants: a heap change resets the table, not the constants
    b = builder()
    b.SetGraphicsRootSignature("rsA")
    b.SetDescriptorHeaps("h0")
    b.SetPipelineState("lay")
    b.SetGraphicsRoot32BitConstants(0, 1, 3)
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootDescriptorTable(0, "h0[0]")  # 5 never seen, but needed
    b.SetDescriptorHeaps("h1")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetGraphicsRootDescriptorTable(1, "h0[0]")  # 8 over undefined, reset to undefined: removable
    b.SetDescriptorHeaps("h0")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert removed(s) == [8]
    assert compare_effective_state(s, run(s)[0]) is None


def test_partial_updates_after_opaque_are_not_merged_away():
    b = builder()
    b.SetPipelineState("lay")
    b.Opaque("ClearState")
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetVertexBuffers(1, "verts", 0, 16)  # trailing: its removal must not change what the draw saw
    s = b.build()
    assert removed(s) == [4]
    assert compare_effective_state(s, run(s)[0]) is None


def test_never_across_opaque():
    b = builder()
    b.SetPipelineState("noroot")
    b.OMSetStencilRef(1)            # read by the Opaque command
    b.Opaque("ExecuteIndirect")
    b.SetPipelineState("noroot")    # not redundant: the state is unknown now
    b.OMSetStencilRef(1)
    b.DrawInstanced(3, 1, 0, 0)
    assert removed(b.build()) == []


def test_cs_enable_automatic_gpu_flush():
    b = builder(auto_gpu_flush=True)
    b.SetComputeRootSignature("rsB")
    b.SetPipelineState("cullB")
    b.CSEnableAutomaticGpuFlush(True)    # 2 the header value
    b.CSEnableAutomaticGpuFlush(False)   # 3 overwritten before any Dispatch
    b.CSEnableAutomaticGpuFlush(False)   # 4
    b.Dispatch(1, 1, 1)
    b.CSEnableAutomaticGpuFlush(False)   # 6 re-set
    b.Dispatch(1, 1, 1)
    b.CSEnableAutomaticGpuFlush(True)    # 8 trailing: context state, kept
    s = b.build()
    assert removed(s) == [2, 3, 6]


def test_idempotent_second_order():
    b = builder()
    b.SetPipelineState("noroot")
    b.IASetPrimitiveTopology("TRIANGLELIST")
    b.DrawInstanced(3, 1, 0, 0)
    b.IASetPrimitiveTopology("POINTLIST")      # 3 dead
    b.IASetPrimitiveTopology("TRIANGLELIST")   # 4 redundant once 3 is gone
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s)
    assert rep["removed_total"] == 2 and rep["rounds"] == 1  # 4 goes in the round that finds 3 dead
    assert removed(s) == [3, 4]
    assert np.flatnonzero(dead_state_commands(s, exposed=False)).tolist() == [3]  # the plain round: 3 only
    again = DedupeStatePass().apply(out, AnalysisManager())
    assert not again.modified and again.stream is out and again.report["removed_total"] == 0


def test_pass_manager_and_verify_each():
    b = builder()
    b.SetPipelineState("noroot")
    b.SetPipelineState("noroot")
    b.DrawInstanced(3, 1, 0, 0)
    pm = PassManager(parse_pipeline("dedupe-state"), verify_each=True)
    out = pm.run(b.build())
    assert len(out) == 2 and pm.records[0].report["removed"] == {"SetPipelineState": 1}


def test_empty_stream():
    s = StreamBuilder().build()
    res = DedupeStatePass().apply(s, AnalysisManager())
    assert not res.modified and res.stream is s


# --------------------------------------------------------------------------- lifted (array) words
_ROOT_SETS = ("SetGraphicsRootShaderResourceView", "SetGraphicsRootDescriptorTable", "SetGraphicsRoot32BitConstants")


def _array_scene(bound: bool, lift: str = "0+1.0+1.1+1.2+1.3") -> StreamBuilder:
    b = StreamBuilder()
    b.buffer("recs", 4096, cpu=True, data=list(range(1024)))
    b.target("rt", 64, 64)
    b.heap("res", size=8)
    b.texture("t0", 64, 64, "BC7_UNORM")
    for k in range(8):
        b.view("res", k, "srv", "t0")
    b.rootsig("main", "table(srv,1)", "constants(4)", "srv")
    b.pipeline("arr", vs="v", ps="p", root="main", contract=f"draw_data(perdraw=2,lift={lift})")
    b.pipeline("plain", vs="v", ps="p", root="main")
    b.OMSetRenderTargets("rt")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    if bound:
        b.SetGraphicsRootShaderResourceView(2, "recs", 0)
    b.SetPipelineState("arr")
    return b


def test_lifted_sets_are_dead_before_array_reading_draws():
    """Draws that read their record from the array bound at P observe neither the lifted
    root constants nor the bindless table: those sets go, except the ones a later
    contract-less draw reads."""
    def build(bound: bool) -> Stream:
        b = _array_scene(bound)
        for k in range(3):
            b.SetGraphicsRootDescriptorTable(0, f"res[{k}]")
            b.SetGraphicsRoot32BitConstants(1, 4, k, k, k, k)
            b.DrawInstanced(3, 1, 0, k)
        b.SetGraphicsRoot32BitConstants(1, 4, 9, 9, 9, 9)
        b.SetPipelineState("plain")                      # no contract: reads table 0 and constants 1
        b.DrawInstanced(3, 1, 0, 0)
        return b.build()

    s = build(True)
    out, rep = run(s)
    # the first set of each slot stays: the array readers see the parameters set (and the
    # table in heap res) as before; res[2] and the 9s are read by the plain draw
    assert rep["removed"] == {"SetGraphicsRoot32BitConstants": 2, "SetGraphicsRootDescriptorTable": 1}
    k = kept(s)
    assert [x for x in k if x.split()[0] in _ROOT_SETS] == [
        "SetGraphicsRootShaderResourceView 2 recs 0", "SetGraphicsRootDescriptorTable 0 res[0]",
        "SetGraphicsRoot32BitConstants 1 4 0 0 0 0 0", "SetGraphicsRootDescriptorTable 0 res[2]",
        "SetGraphicsRoot32BitConstants 1 4 0 9 9 9 9"]
    assert verify(s, out).equivalent
    # planted wrong removals: the constants or the table the contract-less draw reads; the
    # table that makes the array readers' heap slot address heap res
    for name in ("SetGraphicsRoot32BitConstants 1 4 0 9 9 9 9", "SetGraphicsRootDescriptorTable 0 res[2]",
                 "SetGraphicsRootDescriptorTable 0 res[0]"):
        i = [" ".join([c.name, *map(str, c.args), *map(str, c.var)]) for c in s.commands()].index(name)
        bad = s.take(np.delete(np.arange(len(s)), i))
        assert not verify(s, bad).equivalent, name
    # nothing bound at P: the draws read their root arguments, every set is observed
    s = build(False)
    assert run(s)[1]["removed_total"] == 0
    bad = s.take(np.delete(np.arange(len(s)), [c.name for c in s.commands()].index("SetGraphicsRoot32BitConstants")))
    assert not verify(s, bad).equivalent


def test_partly_lifted_constants_word_by_word():
    """With only word 0 of the constants lifted, a set that changes only word 0 is dead at
    array-reading draws; one that changes word 1 is not."""
    b = _array_scene(True, lift="1.0")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    for k, w1 in enumerate((5, 5, 6)):
        b.SetGraphicsRoot32BitConstants(1, 4, k, w1, 0, 0)
        b.DrawInstanced(3, 1, 0, k)
    s = b.build()
    out, rep = run(s)
    assert rep["removed"] == {"SetGraphicsRoot32BitConstants": 1}
    assert [x for x in kept(s) if "Constants" in x] == ["SetGraphicsRoot32BitConstants 1 4 0 0 5 0 0",
                                                        "SetGraphicsRoot32BitConstants 1 4 0 2 6 0 0"]
    assert verify(s, out).equivalent
    bad = s.take(np.delete(np.arange(len(s)), np.flatnonzero(s.op == s.op[-2])[-1]))   # word 1 = 6 lost
    assert not verify(s, bad).equivalent


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(semantic_streams())
def test_random_streams_verify(s):
    """The translation validator (independent of drawopt.analysis.state) accepts every output, with
    pipelines whose array clauses lift whole slots and single words."""
    assume(multi_draws(s) < VERIFIABLE_DRAWS)  # under the verifier's multi-draw limit
    out, _ = run(s)
    res = verify(s, out)
    assert res.equivalent, res.reason


def _check(s: Stream) -> None:
    out, rep = run(s)
    out.check()
    reason = compare_effective_state(s, out, refine=True)   # undefined may become anything (test_inherited_state)
    assert reason is None, reason
    assert rep["removed_total"] == len(s) - len(out)
    assert dead_state_commands(out).sum() == 0  # idempotent
    # never removes anything but state commands
    cats_before = np.bincount(s.cats(), minlength=8)
    cats_after = np.bincount(out.cats(), minlength=8)
    assert (cats_before[1:] == cats_after[1:]).all()
    assert (out.op[out.cats() != 0] == s.op[s.cats() != 0]).all()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_random_streams_keep_effective_state(s):
    _check(s)


@pytest.mark.skipif(shared_streams is None, reason="tests/strategies.py not available")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_shared_strategy_streams(data):
    _check(data.draw(shared_streams(max_commands=50)))


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
def test_100k_draws():
    """A 100k-draw stream goes through (its speed is bench/run.py's: no wall-clock assertion here)."""
    s = big_stream(100_000)
    # every draw re-sets its pipeline (4 pipelines), constants and a table (4 choices)
    out, rep = run(s)
    assert rep["removed_total"] > 0 and len(out) < len(s)
    sub = s.take(np.arange(40_000))
    assert compare_effective_state(sub, run(sub)[0]) is None


def _same_analysis_both_paths(s: Stream) -> None:
    """One round of the analysis on the compiled scan and kernels and on the pure twins."""
    from drawopt.analysis.state import scan
    from drawopt.passes.dedupe_state import _observed
    a, b = scan(s, pure=False), scan(s, pure=True)
    assert np.array_equal(dead_state_commands(s, a), dead_state_commands(s, b))
    x, y = _observed(a, len(s)), _observed(b, len(s))
    for u, v in zip(x[:3] + x[3], y[:3] + y[3]):
        assert u.dtype == v.dtype and np.array_equal(u, v)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams())
def test_compiled_and_pure_analysis_agree(s):
    _same_analysis_both_paths(s)


@pytest.mark.skipif(not HAS_CEXT, reason="drawopt._state is not built")
@pytest.mark.parametrize("kind", ["frame", "quads", "gpu-driven", "bundle"])
def test_compiled_and_pure_analysis_agree_on_generated_streams(kind):
    from drawopt.gen import generate
    _same_analysis_both_paths(generate(kind, 2000, seed=5))


def test_chain_writers_kernel_matches_its_twin():
    """The last effective writer of each observed word, on random chains (starts, repeated
    values so that some writes change nothing, partial words)."""
    from types import SimpleNamespace

    from drawopt._accel import load_cext
    from drawopt.passes.dedupe_state import _chain_writers_py
    mod = load_cext("_dedupe", False)
    if mod is None:  # pragma: no cover - extension not built
        pytest.skip("drawopt._dedupe is not built")
    rng = np.random.default_rng(7)
    for trial in range(200):
        m, width = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        start = rng.random(m) < 0.2
        start[0] = True
        init = rng.choice([-1, -3], m).astype(np.int64)
        per = rng.integers(0, width + 1, m)
        owner = np.repeat(np.arange(m), per)
        col = np.concatenate([rng.choice(width, k, replace=False) for k in per]).astype(np.int64)
        wv = rng.integers(0, 3, owner.shape[0]).astype(np.int64)
        ch = SimpleNamespace(cmds=np.arange(m), start=start, init=init, owner=owner, col=col, wv=wv, width=width)
        wmask = np.zeros((m, width), bool)
        wval = np.zeros((m, width), np.int64)
        wmask[owner, col] = True
        wval[owner, col] = wv
        from drawopt.analysis.state import _Chains
        ch.matrices = lambda c=ch, wm=wmask, wl=wval: (wm, wl, _Chains.fill(c, wm, wl))
        observed = rng.random(m) < 0.5
        words = rng.integers(0, 1 << width, m).astype(np.uint64) if trial % 2 else None
        got = mod.chain_writers(start, init, owner, col, wv, width, observed, words).view(bool)
        assert np.array_equal(got, _chain_writers_py(ch, observed, words)), trial


def test_origins_kernel_matches_its_twin():
    """Runs of redundant re-sets followed back to their first command (or the initial value)."""
    from drawopt._accel import load_cext
    from drawopt.passes.dedupe_state import _origins_py
    mod = load_cext("_dedupe", False)
    if mod is None:  # pragma: no cover - extension not built
        pytest.skip("drawopt._dedupe is not built")
    rng = np.random.default_rng(11)
    for n in (0, 1, 7, 500):
        for _ in range(20):
            red = rng.random(n) < 0.6
            prev = np.array([int(rng.integers(-3, i)) if i else -1 for i in range(n)], np.int64)
            assert np.array_equal(mod.origins(red, prev), _origins_py(prev, red))
    with pytest.raises(ValueError):
        mod.origins(np.array([True]), np.array([0]))  # a previous setter that is not before


def _fixpoint(s: Stream, exposed: bool) -> np.ndarray:
    """Indices of the commands that rounds of the analysis keep, repeated until none goes."""
    from drawopt.analysis.state import scan

    keep = np.arange(len(s))
    cur = s
    while True:
        dead = dead_state_commands(cur, scan(cur), exposed=exposed)
        if not dead.any():
            return keep
        keep, cur = keep[~dead], cur.take(np.flatnonzero(~dead))


_PLAIN_SETS = st.one_of(
    # the plain slots, two or three values each, so that a value comes back after another
    st.tuples(st.just("SetPipelineState"), st.tuples(st.sampled_from(["gsp", "tess", "noroot"]))),
    st.tuples(st.just("GSSetParameters"), st.sampled_from([("null",), ("onchip",), ("offchip",)])),
    st.tuples(st.just("IASetPrimitiveTopology"), st.tuples(st.sampled_from(["TRIANGLELIST", "TRIANGLESTRIP"]))),
    st.tuples(st.just("IASetIndexBuffer"), st.sampled_from([("ib", "R16_UINT", 0), ("ib", "R32_UINT", 0)])),
    st.tuples(st.just("RSSetViewports"), st.sampled_from([(0, 0, 64, 64), (0, 0, 32, 32)])),
    st.tuples(st.just("OMSetStencilRef"), st.tuples(st.integers(0, 1))),
)
_OTHER_COMMANDS = st.one_of(
    st.tuples(st.just("SetGraphicsRootSignature"), st.tuples(st.sampled_from(["rsA", "rsB"]))),
    st.tuples(st.just("SetDescriptorHeaps"), st.sampled_from([("h0",), ("h1",)])),
    st.tuples(st.just("SetGraphicsRootDescriptorTable"), st.tuples(st.integers(0, 1), st.sampled_from(["h0[0]",
                                                                                                      "h1[0]"]))),
    st.tuples(st.just("DrawIndexedX"), st.just(("ib", 0, "R16_UINT", 6, 0))),
    st.tuples(st.just("Dispatch"), st.just((1, 1, 1))),
    st.tuples(st.just("Opaque"), st.just(("Other",))),
)
_DRAWS = st.sampled_from([("DrawInstanced", (3, 1, 0, 0)), ("DrawIndexedInstanced", (6, 1, 0, 0, 0))])


@st.composite
def plain_slot_streams(draw, max_commands: int = 40) -> Stream:
    """Streams where sets of the plain slots come back to a value after a dead set of another
    (the pattern a second round of the analysis used to find)."""
    b = builder(kind=draw(st.sampled_from(["list", "bundle"])))
    while len(b.build()) < max_commands:  # runs of sets, each ended by a draw (now and then by another command)
        for name, a in draw(st.lists(_PLAIN_SETS, max_size=4)):
            add(b, name, a)
        add(b, *draw(st.one_of(_DRAWS, _DRAWS, _DRAWS, _OTHER_COMMANDS)))
    return b.build()


_ROOT_SLOT_SETS = st.one_of(
    st.tuples(st.just("SetGraphicsRootDescriptorTable"), st.tuples(st.sampled_from([0, 1, 3]),
                                                                    st.sampled_from(["h0[0]", "h0[1]", "h1[0]"]))),
    st.tuples(st.just("root-constants"), st.tuples(st.just(True), st.just(1), st.integers(0, 3),
                                                   st.lists(st.integers(0, 1), min_size=1, max_size=4))),
    st.tuples(st.just("SetGraphicsRootConstantBufferView"), st.tuples(st.just(2), st.just("verts"),
                                                                       st.sampled_from([0, 256]))),
    st.tuples(st.just("SetPipelineState"), st.tuples(st.sampled_from(["pull", "lay", "arr", "arrp", "tess"]))),
)
_ROOT_OTHER = st.one_of(
    st.tuples(st.just("SetGraphicsRootSignature"), st.tuples(st.sampled_from(["rsA", "rsA", "rsB"]))),
    st.tuples(st.just("SetDescriptorHeaps"), st.sampled_from([("h0",), ("h1",)])),
    st.tuples(st.just("Opaque"), st.just(("Other",))),
)


@st.composite
def root_slot_streams(draw, max_commands: int = 40) -> Stream:
    """Root-signature-A streams where tables, views and constants of a root slot come back to a
    value after a dead or lifted set, now and then across a heap or root-signature change (the
    root slots get no exposed re-sets; their rules must not meet the plain slots' fold)."""
    b = builder(kind=draw(st.sampled_from(["list", "bundle"])))
    b.SetGraphicsRootSignature("rsA")
    b.SetDescriptorHeaps("h0")
    while len(b.build()) < max_commands:
        for name, a in draw(st.lists(_ROOT_SLOT_SETS, max_size=4)):
            add(b, name, a)
        add(b, *draw(st.one_of(_DRAWS, _DRAWS, _DRAWS, _ROOT_OTHER)))
    return b.build()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(plain_slot_streams(), root_slot_streams(), semantic_streams()))
def test_one_round_keeps_what_two_keep(s):
    """Removing the re-sets that dead sets hid in the round that finds those dead (the pass's
    default) ends at the same stream as leaving them to the next round."""
    assert np.array_equal(_fixpoint(s, True), _fixpoint(s, False))


def test_exposed_reset_walks_over_dead_sets_to_the_marker():
    """The previous kept set of a plain slot is found over a run of dead sets; an Opaque command
    (unknown value) ends the walk: a set after it is no re-set of the driver default."""
    b = builder()
    b.SetPipelineState("gsp")
    b.GSSetParameters("offchip")     # 1 dead
    b.GSSetParameters("onchip", vps=64, pps=32)  # 2 dead
    b.GSSetParameters("null")        # 3 the driver default again
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("Other")
    b.GSSetParameters("offchip")     # 6 dead
    b.GSSetParameters("null")        # 7 kept: after Opaque the value is unknown
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert np.flatnonzero(dead_state_commands(s, exposed=False)).tolist() == [1, 2, 6]
    assert removed(s) == [1, 2, 3, 6]
    assert np.array_equal(_fixpoint(s, True), _fixpoint(s, False))

