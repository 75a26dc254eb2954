"""Property tests of the translation validator (hypothesis).

* identity always verifies, under every reorder policy;
* the output of ``dedupe-state`` always verifies against its input;
* a rewrite that swaps two blended draws with different ranges on one target, or
  drops one, is always rejected (so the properties above cannot pass vacuously).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from drawopt.ir.formats import loads
from drawopt.ir.stream import Stream
from drawopt.verify import verify

try:
    from strategies import VERIFIABLE_DRAWS, multi_draws, streams
except ImportError:  # pragma: no cover - tests/strategies.py is shared by the suite
    streams = None

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
needs_streams = pytest.mark.skipif(streams is None, reason="tests/strategies.py not available")


@needs_streams
@_SETTINGS
@given(st.data())
def test_identity_always_verifies(data) -> None:
    s = data.draw(streams(max_commands=60))
    assume(multi_draws(s) < VERIFIABLE_DRAWS)  # under the verifier's multi-draw limit
    pol = data.draw(st.sampled_from(["none", "declared", "opaque"]))
    r = verify(s, s.copy(), pol)
    assert r.equivalent, r.reason


@needs_streams
@_SETTINGS
@given(st.data())
def test_dedupe_state_output_verifies(data) -> None:
    dedupe = pytest.importorskip("drawopt.passes.dedupe_state")
    from drawopt.passmanager import AnalysisManager
    s = data.draw(streams(max_commands=60))
    assume(multi_draws(s) < VERIFIABLE_DRAWS)  # under the verifier's multi-draw limit
    out = dedupe.DedupeStatePass().apply(s, AnalysisManager()).stream
    r = verify(s, out)
    assert r.equivalent, r.reason


# --------------------------------------------------------------------------- mutants are caught
HEAD = """drawopt 1
target rt 16x16 R8G8B8A8_UNORM
target rt2 16x16 R8G8B8A8_UNORM
rootsig rs constants(1)
pipeline p vs=v ps=f blend=alpha root=rs
pipeline q vs=v ps=f blend=additive root=rs
OMSetRenderTargets rt
SetGraphicsRootSignature rs
"""


@st.composite
def blended_streams(draw) -> tuple[Stream, list[int]]:
    """A stream of blended draws on two targets; returns it and its draw command indices."""
    n = draw(st.integers(2, 12))
    lines, draws = [], []
    cmd = 2
    for i in range(n):
        if draw(st.booleans()):
            lines.append(f"SetPipelineState {draw(st.sampled_from(['p', 'q']))}")
            cmd += 1
        if i == 0 and not any(x.startswith("SetPipelineState") for x in lines):
            lines.append("SetPipelineState p")
            cmd += 1
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"OMSetRenderTargets {draw(st.sampled_from(['rt', 'rt2']))}")
            cmd += 1
        if draw(st.booleans()):
            lines.append(f"SetGraphicsRoot32BitConstants 0 1 {draw(st.integers(0, 3))}")
            cmd += 1
        lines.append(f"DrawInstanced 3 {draw(st.integers(1, 3))} {3 * i} 0")
        draws.append(cmd)
        cmd += 1
    return loads(HEAD + "\n".join(lines) + "\n"), draws


@_SETTINGS
@given(blended_streams(), st.data())
def test_swapping_adjacent_draws_on_one_target_is_caught(sd, data) -> None:
    s, draws = sd
    pairs = [(a, b) for a, b in zip(draws, draws[1:]) if b == a + 1]
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    idx = list(range(len(s)))
    idx[a], idx[b] = b, a
    r = verify(s, s.take(idx), "none")
    assert not r.equivalent
    assert "swapped" in r.reason


@_SETTINGS
@given(blended_streams(), st.data())
def test_dropping_a_draw_is_caught(sd, data) -> None:
    s, draws = sd
    d = data.draw(st.sampled_from(draws))
    r = verify(s, s.take([i for i in range(len(s)) if i != d]))
    assert not r.equivalent
    assert "missing" in r.reason or "differ" in r.reason or "!=" in r.reason
