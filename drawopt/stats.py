"""The figures ``drawopt stats`` reports.

Every figure depends only on the stream's value (header, declarations and
commands), never on source lines or on the file format, so the same stream saved
as ``.dstream``, ``.json`` or ``.npz`` gives identical statistics.

Definitions
-----------
``commands``
    API calls of any kind.
``draw_calls``
    Calls that draw: direct, indirect or multi-draw.
``draws``
    Logical draw records: 1 per direct or single indirect draw, ``count`` per
    ``MultiDraw*Indirect``, and ``max_count`` per ``MultiDraw*IndirectAuto`` (the
    GPU-written count is not known offline, so the cap is the figure).
``dispatches``
    ``Dispatch`` calls.
``state_changes``
    State-setting calls (``Cat.STATE``, including CSEnableAutomaticGpuFlush).
``distinct_states`` / ``distinct_pack_classes``
    Distinct normalised draw states / pack classes (:mod:`drawopt.analysis.state`).
``flushes``
    Flush calls (GpuSendPipelinedEvent, FlushGpuCacheRange, FlushGpuCachesBottomOfPipe).
``gpu_batches``
    What the GPU executes as separate batches: DrawIndexedX calls that follow
    each other with no command in between and have the same pack class are
    wave-packed into one batch (drawindexedx.txt: packing needs that nothing but
    the index buffer and format change, and any call in between is a state change);
    every other draw call is one batch. With a ``target`` whose cost model says it
    does not wave-pack DrawIndexedX (everything but Xbox One; see
    :mod:`drawopt.analysis.costmodel`), every draw call is one batch.
``packed_fraction``
    Fraction of logical draws that are in wave-packed DrawIndexedX runs of length
    >= 2 (0.0 for a stream without draws).
``by_command``
    Command name -> count, for the commands present.
``findings`` / ``findings_by_rule``
    Total findings of :func:`drawopt.validate.findings`, and per rule (every rule
    listed, zeros included).
"""

from __future__ import annotations

__all__ = ["compute_stats", "format_stats", "call_counts"]

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from drawopt.analysis.state import StateTable, track
from drawopt.ir.arrayset import unique
from drawopt.ir.ops import BY_CODE, BY_NAME, COL_AUTO_MAX, COL_DRAW_COUNT, MULTI_DRAW_OPS, Cat
from drawopt.ir.stream import Stream
from drawopt.validate import RULES, Finding, findings


def _code(name: str) -> int:
    return BY_NAME[name].code


def call_counts(stream: Stream) -> dict[str, int]:
    """The cheap counts (no state tracking): ``commands``, ``draw_calls``, ``state_changes``, ``flushes``.

    The pass manager takes them after every pass for the report's per-pass figures.

    >>> from drawopt.gen import generate
    >>> call_counts(generate("quads", 4))["draw_calls"]
    4
    """
    cats = stream.cats()
    return {"commands": len(stream), "draw_calls": int((cats == int(Cat.DRAW)).sum()),
            "state_changes": int((cats == int(Cat.STATE)).sum()), "flushes": int((cats == int(Cat.FLUSH)).sum())}


def compute_stats(stream: Stream, state: StateTable | None = None,
                  found: list[Finding] | None = None, target: str | None = None,
                  finding_counts: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Statistics of ``stream`` (see the module docstring for each key).

    Parameters
    ----------
    stream : Stream
    state : StateTable, optional
        Reused if given.
    found : list of Finding, optional
        Reused if given.
    target : str, optional
        A ``--target`` name: ``gpu_batches`` counts wave packing only where that
        target does it. Default: as if it does.
    finding_counts : mapping, optional
        Findings per rule, if already counted (instead of ``found``).

    Returns
    -------
    dict
        JSON-able: ints, a float and two dicts of ints.
    """
    s = stream
    st = state if state is not None else track(s)
    if found is None and finding_counts is None:
        found = findings(s, st)
    cats = s.cats()
    op = s.op
    draw_mask = cats == int(Cat.DRAW)
    dops = op[draw_mask]
    dargs = s.args[draw_mask]
    records = np.ones(dops.shape[0], np.int64)
    multi = np.isin(dops, list(MULTI_DRAW_OPS))
    auto = np.isin(dops, [_code("MultiDrawInstancedIndirectAuto"), _code("MultiDrawIndexedInstancedIndirectAuto")])
    records[multi & ~auto] = dargs[multi & ~auto, COL_DRAW_COUNT]
    records[auto] = dargs[auto, COL_AUTO_MAX]
    draws = int(records.sum())

    # wave-packed DrawIndexedX runs: adjacent commands, same pack class
    is_x = s.op[st.draws] == _code("DrawIndexedX") if st.draws.size else np.zeros(0, bool)
    joined = np.zeros(st.draws.shape[0], bool)  # draw k joins the batch of draw k-1
    if st.draws.size > 1:
        joined[1:] = is_x[1:] & is_x[:-1] & (np.diff(st.draws) == 1) & (st.pack[1:] == st.pack[:-1])
    in_run = joined.copy()
    in_run[:-1] |= joined[1:]
    packed = int(in_run.sum())
    if target is not None:
        from drawopt.analysis.costmodel import get_target
        if not get_target(target).wave_packs_x:
            joined[:] = False

    per_op = np.bincount(op, minlength=1)
    names = np.flatnonzero(per_op)
    by_command = {BY_CODE[int(c)].name: int(k) for c, k in zip(names.tolist(), per_op[names].tolist())}
    by_rule = dict.fromkeys(RULES, 0)
    if found is not None:
        finding_counts = Counter(f.rule for f in found)
    assert finding_counts is not None
    for rule, k in finding_counts.items():
        if k:
            by_rule[rule] = by_rule.get(rule, 0) + int(k)
    counts = call_counts(s)
    return {
        "commands": counts["commands"],
        "draw_calls": counts["draw_calls"],
        "draws": draws,
        "dispatches": int((cats == int(Cat.DISPATCH)).sum()),
        "state_changes": counts["state_changes"],
        "distinct_states": _distinct(st.state),
        "distinct_pack_classes": _distinct(st.pack),
        "flushes": counts["flushes"],
        "gpu_batches": int(draw_mask.sum()) - int(joined.sum()),
        "packed_fraction": packed / draws if draws else 0.0,
        "by_command": dict(sorted(by_command.items())),
        "findings": sum(by_rule.values()),
        "findings_by_rule": by_rule,
    }


def _distinct(ids: np.ndarray) -> int:
    """How many distinct values the integer ids hold (a count of the ids present, when they are small)."""
    if ids.size and 0 <= int(ids.min()) and int(ids.max()) < 4 * ids.size + 1024:
        return int(np.count_nonzero(np.bincount(ids)))
    return int(unique(ids).shape[0])


def format_stats(stats: dict[str, Any]) -> str:
    """A human-readable aligned table of :func:`compute_stats` output."""
    flat: list[tuple[str, str]] = []
    for k, v in stats.items():
        if isinstance(v, dict):
            flat.append((k + ":", ""))
            flat.extend((f"  {kk}", _fmt(vv)) for kk, vv in v.items())
        else:
            flat.append((k, _fmt(v)))
    width = max((len(k) for k, _ in flat), default=0)
    vwidth = max((len(v) for _, v in flat), default=0)
    return "\n".join(f"{k:<{width}}  {v:>{vwidth}}".rstrip() for k, v in flat) + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
