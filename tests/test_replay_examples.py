"""Every bundled example, optimized with each target's default pipeline, renders the same images.

Issue 7's CI criterion: on llvmpipe (or whatever EGL gives) the original and the optimizer's
output of every ``examples/*.dstream`` produce identical targets. The optimizer runs with
``verify_each`` as well, so a failure here is a rewrite the verifier accepted but the
replayer shows — or a replayer bug; both are worth a red test. Skipped without an EGL
OpenGL 4.3 context (``.ci/install-system.sh`` installs Mesa's).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drawopt.ir.formats import load
from drawopt.result import optimize
from drawopt.stats import compute_stats

replay_mod = pytest.importorskip("drawopt.replay")
from drawopt.replay import available, compare, replay  # noqa: E402

_OK, _WHY = available()
pytestmark = [pytest.mark.replay, pytest.mark.skipif(not _OK, reason=f"no EGL OpenGL context: {_WHY}")]

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.dstream"))
SIZE = (96, 96)
# the examples whose default-pipeline output must have fewer draw calls (never vacuous)
REDUCED = {"quads.dstream", "frame.dstream", "gpu-driven.dstream"}


def test_every_example_is_covered() -> None:
    assert {p.name for p in EXAMPLES} >= REDUCED | {"spec-illustration.dstream", "bundle.dstream"}


@pytest.mark.parametrize("target", ["d3d12", "xbox-one"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_optimized_example_renders_the_same(path: Path, target: str) -> None:
    s = load(path)
    out = optimize(s, target=target, verify_each=True).stream
    before, after = compute_stats(s)["draw_calls"], compute_stats(out)["draw_calls"]
    if path.name in REDUCED:
        assert after < before, (before, after)
    ra = replay(s, size=SIZE, frames=1, warmup=False)
    rb = replay(out, size=SIZE, frames=1, warmup=False)
    c = compare(ra, rb)
    assert c.same, c.summary()
    if after < before or ra.draw_calls:
        # something was drawn on a colour target (else the comparison would be vacuous)
        assert any(img.ndim == 3 and np.any(img != 0) for img in ra.images.values()) or not ra.images
