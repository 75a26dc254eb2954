"""``validate.finding_counts`` (the pass manager's post-condition) counts what ``validate.findings``
finds, rule by rule, without building findings (issue 13): both read the same rule functions, so
they may only differ if the count and the built list of one rule disagree -- checked here on
random streams of every opcode, on small worlds that hit each rule often, and on generated
streams with commands deleted (every rule with many findings at once)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import streams
from test_validate_vectorised import _index_streams, _scanned, _state_streams

from drawopt.analysis.state import scan, track
from drawopt.gen import KINDS, generate
from drawopt.ir.formats import load
from drawopt.ir.stream import Stream
from drawopt.validate import RULES, finding_counts, findings

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.dstream"))


def _same(s: Stream) -> Counter[str]:
    counts = finding_counts(s)
    assert counts == Counter(f.rule for f in findings(s))
    assert all(n > 0 for n in counts.values()) and set(counts) <= set(RULES)
    assert finding_counts(s, track(s)) == counts  # the state table's scan is reused, same counts
    sc = scan(s)  # the pass manager counts its input's findings on the scan alone (issue 13)
    assert finding_counts(s, sc) == counts and Counter(f.rule for f in findings(s, sc)) == counts
    return counts


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(streams(max_commands=60), streams(max_commands=40, min_decls=True), _index_streams(),
                 _state_streams()))
def test_counts_equal_the_findings_per_rule(s: Stream) -> None:
    assume(_scanned(s))
    _same(s)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_of_generated_streams_with_commands_deleted(kind: str, seed: int) -> None:
    s = generate(kind, 300, seed=seed)
    _same(s)
    rng = np.random.default_rng(seed)
    seen: Counter[str] = Counter()
    for frac in (0.05, 0.2, 0.5):
        cut = s.take(np.flatnonzero(rng.random(len(s)) >= frac))
        seen += _same(cut)
    if kind != "quads":  # (quads sets its few states up front: deleting at random seldom breaks it)
        assert seen  # deleting commands broke something: the counts were tested on findings


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_counts_of_the_examples(path: Path) -> None:
    _same(load(str(path)))


def test_every_rule_is_counted() -> None:
    """Streams with findings of every rule: the counts name each rule, with its number of findings."""
    import drawopt

    s = drawopt.loads("""drawopt 1 context=graphics kind=list
buffer ib size=16
buffer args size=64 frontend
heap h1 CBV_SRV_UAV 4
rootsig rs table(srv,1)
pipeline p vs=v ps=f root=rs
pipeline t vs=v hs=h ds=d ps=f
pipeline w cs=c writes=args
DrawInstanced 3 1 0 0
SetGraphicsRootSignature rs
SetPipelineState p
DrawIndexedInstanced 3 1 0 0 0
IASetIndexBuffer ib R16_UINT 0
DrawIndexedInstanced 30 1 0 0 0
DrawIndexedInstanced 40 1 0 0 0
GSSetParameters onchip
SetPipelineState t
DrawInstanced 3 1 0 0
SetPipelineState w
Dispatch 1 1 1
SetPipelineState t
DrawInstancedIndirect args 0
""")
    assert _same(s) == Counter({"no-pipeline": 1, "table-undefined": 3, "index-buffer-undefined": 1,
                                "index-range": 2, "gs-onchip-tessellation": 2, "missing-flush": 1})
    bundle = drawopt.loads("""drawopt 1 context=graphics kind=bundle
heap h1 CBV_SRV_UAV 4
heap h2 CBV_SRV_UAV 4
SetDescriptorHeaps h1
SetDescriptorHeaps h2
SetDescriptorHeaps h1
SetDescriptorHeaps h2
""")
    assert _same(bundle) == Counter({"bundle-heaps": 2})
    compute = drawopt.loads("drawopt 1 context=compute kind=list\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 0 0\n")
    assert _same(compute)["draw-on-compute"] == 2
