"""Replay draw streams through OpenGL (moderngl on an EGL standalone context).

Mesa's llvmpipe renders on machines without a GPU; where a GPU driver is present
EGL picks it. A replay synthesises deterministic content from the declarations,
issues every command as GL calls prepared ahead on a tape, times the frame (CPU
submit and GPU timer query) and reads every target back, so that two streams can
be compared pixel for pixel::

    from drawopt.replay import replay, compare
    a, b = replay(original), replay(optimized)
    assert compare(a, b).same

See ``docs/replay.md`` for the model (what each shader observes) and the mapping of
every command to GL.
"""

from __future__ import annotations

from drawopt.replay.api import (
    Comparison,
    ReplayResult,
    TargetDiff,
    available,
    call_overhead,
    compare,
    replay,
    replay_interleaved,
    write_pngs,
)
from drawopt.replay.executor import ReplayOptions

__all__ = ["replay", "compare", "write_pngs", "available", "call_overhead", "ReplayResult", "Comparison",
           "TargetDiff", "ReplayOptions", "replay_interleaved"]
