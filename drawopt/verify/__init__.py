"""Translation validation: does an optimized stream render what the original does?

:func:`verify` expands both streams to their *effective records* (what every draw
instance, dispatch and copy observes, normalised by what its pipeline can see),
compares them per written resource under a reorder policy, checks the flush,
re-bind and bundle rules on the optimized stream, and names the first difference.
It is independent of the optimizer's own analyses (:mod:`drawopt.analysis.state`,
:mod:`drawopt.analysis.graph`), in the manner of LLVM's ``-verify-each`` and Alive2's
translation validation. The model is documented in ``docs/verification.md``.

>>> from drawopt import StreamBuilder
>>> b = StreamBuilder()
>>> b.target("rt", 64, 64)
>>> b.pipeline("p", vs="v", ps="f", blend="alpha")
>>> b.OMSetRenderTargets("rt"); b.SetPipelineState("p")
>>> b.DrawInstanced(3, 1, 0, 0); b.DrawInstanced(3, 1, 3, 0)
>>> s = b.build()
>>> verify(s, s).equivalent
True
>>> r = verify(s, s.take([0, 1, 3, 2]))
>>> r.equivalent, r.reason.startswith("target rt: blended draws")
(False, True)
"""

from __future__ import annotations

__all__ = ["VerifyResult", "verify", "REORDER_POLICIES"]

import functools
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drawopt.errors import UsageError
from drawopt.ir.decls import Buffer
from drawopt.ir.ops import BARRIER_STATES, BY_NAME, Op
from drawopt.ir.pages import small_pages
from drawopt.ir.stream import REORDER_POLICIES, Stream
from drawopt.verify.compare import (
    TargetSeqs,
    canonical,
    canonical_keys,
    compare_records,
    exit_state_diff,
    matched_actions,
    opaque_state_diff,
)
from drawopt.verify.model import Canon
from drawopt.verify.records import Records, expand
from drawopt.verify.rules import check_rules, first_new_no_pipeline, first_new_uncovered_read, first_new_violation
from drawopt.verify.slots import column_universe, distinct_ids, op_index, op_indexes

"""``none``: no two draws on a common target commute; ``declared``: only pipelines
declared ``order_independent``; ``opaque``: also opaque depth-tested draws."""

_OP = {n: BY_NAME[n].code for n in BY_NAME}


@dataclass
class VerifyResult:
    """The verdict of :func:`verify`.

    ``equivalent``: the optimized stream renders what the original does.
    ``reason``: one line naming the first difference (None when equivalent).
    ``line_a`` / ``line_b``: where it shows in each stream (the source line, or the
    command index when the stream has no line numbers; None where it has no place).
    ``cmd_a`` / ``cmd_b``: the command indices. ``details``: a machine-readable
    account (``kind``: ``header``, ``declaration``, ``rule``, ``opaque``,
    ``barrier`` or ``record``, and the fields involved) plus ``stats``.
    """

    equivalent: bool
    reason: str | None = None
    line_a: int | None = None
    line_b: int | None = None
    cmd_a: int | None = None
    cmd_b: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.equivalent

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of the verdict."""
        return {"equivalent": self.equivalent, "reason": self.reason, "line_a": self.line_a,
                "line_b": self.line_b, "cmd_a": self.cmd_a, "cmd_b": self.cmd_b, "details": self.details}


def _line(s: Stream, cmd: int | None) -> int | None:
    if cmd is None or cmd < 0:
        return None
    if cmd >= len(s):
        return int(s.line[-1]) + 1 if len(s) and s.line[-1] > 0 else len(s)
    ln = int(s.line[cmd])
    return ln if ln > 0 else cmd


def _fail(a: Stream, b: Stream, reason: str, cmd_a: int | None, cmd_b: int | None, **details: Any) -> VerifyResult:
    ca = cmd_a if cmd_a is not None and cmd_a >= 0 else None
    cb = cmd_b if cmd_b is not None and cmd_b >= 0 else None
    return VerifyResult(False, reason, _line(a, ca), _line(b, cb), ca, cb, details)


def verify(original: Stream, optimized: Stream, reorder: str = "declared") -> VerifyResult:
    """Check that ``optimized`` is a correct rewrite of ``original``.

    Parameters
    ----------
    original, optimized
        The streams before and after the rewrite.
    reorder
        The reorder policy (:data:`REORDER_POLICIES`): which draws writing a common
        target may change order.

    Returns
    -------
    VerifyResult
        ``equivalent`` and, when not, the first difference.

    Raises
    ------
    UsageError
        For an unknown policy, or a stream too large to expand.
    """
    if reorder not in REORDER_POLICIES:
        raise UsageError(f"unknown reorder policy '{reorder}' (use {', '.join(REORDER_POLICIES)})")
    with small_pages(), op_indexes():  # many short-lived arrays of a few MB: see drawopt.ir.pages
        return _verify(original, optimized, reorder)


def _verify(original: Stream, optimized: Stream, reorder: str) -> VerifyResult:
    t0 = time.perf_counter()
    a, b = original, optimized
    ha, hb = a.header, b.header
    for f in ("context", "kind", "fast_semantics", "auto_gpu_flush"):
        va, vb = getattr(ha, f), getattr(hb, f)
        if va != vb:
            return _fail(a, b, f"header differs: {f} {_hv(va)} != {_hv(vb)}", None, None, kind="header", field=f)
    bad = _decl_diff(a, b)
    if bad is not None:
        return _fail(a, b, bad, None, None, kind="declaration")
    canon = Canon()
    universe = column_universe([a, b])
    # each stream's rules are checked as soon as it is expanded: then its state columns' events
    # can go (only an explanation reads them again, and refills them) before the next expansion
    RA = expand(a, canon, universe, reorder)
    va = check_rules(RA)
    RA.state.release(events=True)
    RB = expand(b, canon, universe, reorder)
    vb = check_rules(RB)
    RB.state.release(events=True)
    v = first_new_violation(va, vb) or first_new_no_pipeline(RA, RB)
    if v is not None:
        return _fail(a, b, v.message, None, v.cmd, kind="rule", **v.details)
    res = _opaque_diff(a, b)
    if res is not None:
        return res
    res, b_barriers = _barrier_match(RA, RB)
    if res is not None:
        return res
    written = distinct_ids(RA.w_res, RB.w_res)
    # the sequences' keys first (what compare_records compares first); the whole sequences,
    # which only a difference or a kept front-end violation reads, are built when asked for
    ka = canonical_keys(RA, written)
    kb = canonical_keys(RB, written, b_barriers)

    @functools.cache
    def full() -> tuple[TargetSeqs, TargetSeqs]:
        return canonical(RA, written), canonical(RB, written, b_barriers)

    m = None if ka.same_as(kb) else compare_records(RA, RB, *full())
    stats = {"records": [int(RA.r_act.size), int(RB.r_act.size)],
             "actions": [int(RA.a_cmd.size), int(RB.a_cmd.size)],
             "resources": int(distinct_ids(ka.res).size), "seconds": round(time.perf_counter() - t0, 4)}
    del ka, kb
    if m is not None:
        return _fail(a, b, m.reason, m.cmd_a, m.cmd_b, **m.details, stats=stats)
    m = exit_state_diff(RA, RB) or opaque_state_diff(RA, RB)
    if m is not None:
        return _fail(a, b, m.reason, m.cmd_a, m.cmd_b, **m.details, stats=stats)

    @functools.cache
    def matcher() -> Callable[[int], list[np.ndarray] | None]:
        return matched_actions(RA, RB, *full())

    v = first_new_uncovered_read(va, vb, lambda b: matcher()(b))
    if v is not None:
        return _fail(a, b, v.message, None, v.cmd, kind="rule", **v.details, stats=stats)
    return VerifyResult(True, None, None, None, None, None, {"stats": stats,
                                                              "violations_kept": len(vb)})


def _hv(v: Any) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def _decl_diff(a: Stream, b: Stream) -> str | None:
    """A declaration both streams have but declare differently (buffers may gain data)."""
    for d in a.decls.items:
        if d.name not in b.decls:
            continue
        e = b.decls[d.name]
        if type(d) is not type(e):
            return f"'{d.name}' is a {d.kind} in the original but a {e.kind} in the optimized stream"
        if isinstance(d, Buffer):
            same = (d.size, d.cpu, d.frontend) == (e.size, e.cpu, e.frontend)
            if same and d.data is not None:
                same = e.data is not None and np.array_equal(d.data, e.data)
            if not same:
                return f"buffer '{d.name}' is declared differently (size, cpu, frontend or contents)"
        elif d != e:
            return f"{d.kind} '{d.name}' is declared differently in the optimized stream"
    return None


def _opaque_diff(a: Stream, b: Stream) -> VerifyResult | None:
    ia = op_index(a).of(_OP["Opaque"])
    ib = op_index(b).of(_OP["Opaque"])
    text = Op.Opaque.col("text")
    ta = [a.strings[int(a.args[i, text])] for i in ia]
    tb = [b.strings[int(b.args[i, text])] for i in ib]
    for k in range(max(len(ta), len(tb))):
        x = ta[k] if k < len(ta) else None
        y = tb[k] if k < len(tb) else None
        if x != y:
            ca = int(ia[k]) if k < len(ia) else None
            cb = int(ib[k]) if k < len(ib) else None
            if y is None:
                why = f"Opaque '{x}' is missing from the optimized stream"
            elif x is None:
                why = f"the optimized stream has an extra Opaque '{y}'"
            else:
                why = f"Opaque commands differ: '{x}' != '{y}'"
            return _fail(a, b, why + " (unknown commands are kept, in order)", ca, cb, kind="opaque")
    return None


def _barrier_match(A: Records, B: Records) -> tuple[VerifyResult | None, np.ndarray]:
    """Match the original's ResourceBarrier commands, per resource and in order, among the
    optimized stream's (which may add barriers). Returns a failure for the first one
    missing, and the matched commands of B (the ones that count as epochs)."""
    def seq(R: Records) -> dict[int, list[tuple[int, int, int]]]:
        s = R.stream
        res, before, after = (Op.ResourceBarrier.col(n) for n in ("resource", "before", "after"))
        out: dict[int, list[tuple[int, int, int]]] = {}
        for c in op_index(s).of(_OP["ResourceBarrier"]).tolist():
            out.setdefault(int(R.cmap[s.args[c, res]]), []).append((int(s.args[c, before]), int(s.args[c, after]), c))
        return out

    sa, sb = seq(A), seq(B)
    matched: list[int] = []
    worst = None
    for r, x in sa.items():
        y = sb.get(r, [])
        j = 0
        for p in x:
            while j < len(y) and y[j][:2] != p[:2]:
                j += 1
            if j == len(y):
                if worst is None or p[2] < worst[0]:
                    worst = (p[2], r, p)
                break
            matched.append(y[j][2])
            j += 1
    if worst is None:
        return None, np.array(sorted(matched), np.int64)
    _, r, p = worst
    res = _fail(A.stream, B.stream, f"ResourceBarrier {A.canon.name(r)} {BARRIER_STATES[p[0]]} "
                f"{BARRIER_STATES[p[1]]} at {A.where(p[2])} is missing from the optimized stream",
                p[2], None, kind="barrier", resource=A.canon.name(r))
    return res, np.zeros(0, np.int64)


class _CallableModule(types.ModuleType):
    """``drawopt.verify`` is both this package and the function: importing the package
    rebinds the name on :mod:`drawopt`, so the package itself calls :func:`verify`."""

    def __call__(self, original: Stream, optimized: Stream, reorder: str = "declared") -> VerifyResult:
        return verify(original, optimized, reorder=reorder)


sys.modules[__name__].__class__ = _CallableModule
