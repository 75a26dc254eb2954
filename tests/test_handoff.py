"""A pass hands its output's state table to the next pass (issue 13): the tables derived from the
input's (``state.retrack``) equal the full ``track`` of the output in every field, on random and
generated streams, compiled and pure; the passes that derive them put them for the next one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_state import HAS_CEXT, assert_same_scans, assert_same_tables, semantic_streams

from drawopt.analysis.state import K_DRAW, retrack, track
from drawopt.ir.stream import Stream

PURES = [True, False] if HAS_CEXT else [True]


def _retracks_agree(s: Stream, seed: int) -> None:
    """``retrack`` of kept commands equals ``track`` of the kept stream: plain draws dropped (the
    derived path: some of them the first of their state, so the states are numbered anew), draws'
    counts changed as merge-instances changes them, any commands dropped (rescan's path)."""
    rng = np.random.default_rng(seed)
    n = len(s)
    for pure in PURES:
        t = track(s, pure=pure)
        plain = t.scan.kcode == K_DRAW
        drops = [plain & (rng.random(n) < 0.3), plain & (rng.random(n) < 0.9), plain, np.zeros(n, bool),
                 rng.random(n) < 0.2]
        for d in drops:
            keep = np.flatnonzero(~d)
            out = s.take(keep)
            got = retrack(t, keep, out)
            want = track(out, pure=pure)
            assert_same_tables(got, want)
            assert_same_scans(got.scan, want.scan)
            assert got.scan.stream is out
            draws = np.flatnonzero(t.scan.kcode[keep] == K_DRAW)
            if draws.size:  # a draw's arguments are read by no scan: a changed count gives the same table
                out2 = s.take(keep)
                out2.args[draws, :2] += 1
                assert_same_tables(retrack(t, keep, out2), track(out2, pure=pure))
            assert_same_tables(retrack(t, keep), want)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semantic_streams(), st.integers(0, 2**32 - 1))
def test_retrack_equals_the_full_track(s, seed):
    _retracks_agree(s, seed)


def test_retrack_equals_the_full_track_on_generated_streams():
    """The generated kinds: frame and quads (merge-instances' inputs), gpu-driven, bundle."""
    from drawopt.gen import generate
    for kind in ("frame", "quads", "gpu-driven", "bundle"):
        _retracks_agree(generate(kind, 1500, seed=3), 1)


def test_retrack_of_another_order_tracks_anew():
    """A ``keep`` that reorders (not a removal) or another stream: the full track, still equal."""
    from drawopt.gen import generate
    s = generate("frame", 200, seed=2)
    t = track(s)
    keep = np.arange(len(s))[::-1].copy()
    assert_same_tables(retrack(t, keep), track(s.take(keep)))
    other = generate("frame", 200, seed=5)
    assert_same_tables(retrack(t, np.arange(len(other)), other), track(other))


@pytest.mark.parametrize("kind", ["frame", "quads", "bundle"])
def test_merge_instances_hands_its_output_table_to_the_next_pass(kind):
    """merge-instances puts its output's state table (equal to the full track) for the next pass:
    weld asks for it and nothing is tracked again."""
    from drawopt.gen import generate
    from drawopt.passes.merge_instances import MergeInstancesPass
    from drawopt.passmanager import AnalysisManager

    s = generate(kind, 2000, seed=1)
    for pure in PURES:
        am = AnalysisManager()
        am.put("state", s, track(s, pure=pure))
        res = MergeInstancesPass().apply(s, am)
        assert res.modified
        am.invalidate(res)
        got = am.cached("state", res.stream)
        assert got is not None
        assert_same_tables(got, track(res.stream, pure=pure))
        assert_same_scans(got.scan, track(res.stream, pure=pure).scan)
        am.get("state", res.stream)
        assert am.computed == {}


def test_the_default_pipeline_tracks_no_pass_output_that_a_pass_can_derive():
    """In the default pipeline (d3d12) on a frame, only the input is scanned: merge-instances hands
    weld its table (the full track of the output before), the others as they did."""
    from drawopt.gen import generate
    from drawopt.passmanager import PassManager, default_pipeline, parse_pipeline

    s = generate("frame", 3000, seed=1)
    pm = PassManager(parse_pipeline(default_pipeline("d3d12")), target="d3d12", verify=False)
    pm.run(s)
    by_name = {r.name: r for r in pm.records}
    assert by_name["merge-instances"].modified
    assert pm.analyses.computed.get("state", 0) == 0


@pytest.mark.skipif(not HAS_CEXT, reason="the compiled kernels are not built")
def test_renumber_rows_kernel_equals_its_pure_twin():
    from drawopt.analysis.state import _renumber_rows, _renumber_rows_py
    rng = np.random.default_rng(4)
    setter = rng.integers(-3, 50, (300, 45)).astype(np.int32)
    lut = rng.integers(-1, 40, 50).astype(np.int32)
    for sel in (np.arange(300), np.flatnonzero(rng.random(300) < 0.4), np.zeros(0, np.int64)):
        got = _renumber_rows(setter, sel, lut, False)
        want = _renumber_rows_py(setter, sel, lut)
        assert got.dtype == want.dtype == np.int32 and np.array_equal(got, want)
    with pytest.raises(IndexError):
        _renumber_rows(setter, np.array([300]), lut, False)
    with pytest.raises(IndexError):
        _renumber_rows(setter + 60, np.arange(3), lut, False)
