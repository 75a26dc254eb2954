"""``gs-plan``: plan the geometry-shader onchip/offchip mode and subgroup sizes.

For every draw whose pipeline has a geometry shader the pass decides the
``GSSetParameters`` it should run under, with the subgroup/LDS model and cost
model of :mod:`drawopt.analysis.gsmodel` (see ``docs/gs-plan.md``), then rewrites the
stream so that each GS draw runs under its plan with as few commands as possible:

* a ``GSSetParameters`` is emitted only where the planned parameters differ from
  those in force (the stream starts with the driver default, ``null``), and
  ``GSSetParameters null`` where the plan wants the driver default (offchip,
  driver-computed sizes) and something else is in force;
* the input's ``GSSetParameters`` that the plan supersedes are removed; where one
  stood in the span before a draw that needs a change, the new command takes its
  place (so an input that already follows the plan comes out unchanged).

What other commands see is kept:

* Non-GS draws and dispatches do not observe GS parameters, so they are free,
  except draws of tessellation pipelines without a GS: they never run under
  onchip mode (which forces tessellation always-offchip; ``validate`` flags it),
  so the pass puts ``null`` before one where the plan left onchip in force.
* ``Opaque`` commands (API calls drawopt does not model, possibly draws) are
  treated as GS draws that must see exactly the parameters in force in the
  input; no GS parameter change moves across them. What is in force after one
  is unknown, as :mod:`drawopt.analysis.state` models it: a GS draw after an
  ``Opaque`` command with no ``GSSetParameters`` since keeps what it ran under
  (reason ``unknown``; nothing is put before it), the first change after one is
  always emitted, and a draw whose pipeline is unknown there (no
  ``SetPipelineState`` since) may be a GS draw: it sees exactly the input's
  parameters, as an ``Opaque`` command does.
* Draws flagged ``nomerge`` keep the parameters they had.
* A bundle inherits the calling list's parameters (as the state tracker models
  it): what runs before its first ``GSSetParameters`` keeps them (reason
  ``inherited``; a bundle without one is left alone), and the parameters in
  force at its end are the input's (the caller inherits them back). In a command
  list (which starts with the driver default), ``GSSetParameters`` after the
  last GS draw are left as they are.
* The pass never adds, removes or moves any other command (``SetDescriptorHeaps``
  in particular).

``mode="keep"`` respects explicit user choices: a GS draw that runs under a
non-null ``GSSetParameters`` in the input keeps exactly those parameters (the
report warns about onchip with tessellation); only draws under the driver
default are planned. In ``mode="auto"`` the input's ``ratio=`` and ``lds=``
fields in force are honoured as hints (the draw's real vertex reuse; LDS the
application keeps for other work) and everything else is re-planned.

Linear in the stream: the parameters and pipeline every draw runs under are the
state scan's (:func:`drawopt.analysis.state.scan`, the one state model), then one
``np.unique`` over the GS draws; the model runs once per distinct (pipeline,
hints) pair.
"""

from __future__ import annotations

__all__ = ["GsPlanPass", "plan_stream", "StreamPlan"]

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from drawopt.analysis.gsmodel import (
    LDS_DEFAULT,
    LDS_MAX,
    MAX_PRIMS_PER_SUBGROUP,
    MIN_PRIMS_DEFAULT,
    PLAN_MODES,
    GsParams,
    GsPlan,
    kept_plan,
    plan_pipeline,
)
from drawopt.analysis.state import GS, OBS_END, UNKNOWN, Scan, scan
from drawopt.errors import UsageError
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_NAME, GS_MODES, Cat
from drawopt.ir.stream import FLAG_NOMERGE, Stream, concat
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_GS = BY_NAME["GSSetParameters"].code
_OPAQUE = BY_NAME["Opaque"].code
_ONCHIP = GS_MODES.index("onchip")
_NF = 5  # GSSetParameters fields: mode, vps, pps, ratio, lds

_PLANNED, _KEPT, _NOMERGE, _INHERITED, _UNKNOWN = 0, 1, 2, 3, 4
INHERITED = np.array([-1, 0, 0, 0, 0], np.int64)
"""``desired`` row of a GS draw that runs under parameters not known here, which it keeps: a
bundle's draw under the calling list's parameters, or a draw after an ``Opaque`` command with no
``GSSetParameters`` since (the state model's *unknown*)."""


@dataclass
class StreamPlan:
    """The GS plan of a stream (what :class:`GsPlanPass` applies and reports).

    ``gs_draws``: indices of the draws whose pipeline has a GS; ``desired``:
    ``int64[len(gs_draws), 5]`` the GSSetParameters fields each should run under;
    ``inforce``: the fields in force for them in the input; ``plans``: one
    :class:`GsPlan` per distinct (pipeline, hints) in first-use order, with
    ``draws`` the number of draws it covers. ``tess_draws``: draws of
    tessellation pipelines without a GS (they must not run under onchip mode).
    ``inherit_end``: in a bundle, the index of its first GSSetParameters (the
    commands before it run under the calling list's parameters, see
    :data:`INHERITED`); -1 in a command list. ``blind_draws``: draws whose pipeline
    is unknown (after an ``Opaque`` command, no ``SetPipelineState`` since); they may
    be GS draws, so they see exactly the input's parameters.
    Parameters the state model does not know (a bundle's inherited ones, what an
    ``Opaque`` command left) are :data:`INHERITED` rows in ``inforce``.
    """

    gs_draws: np.ndarray
    desired: np.ndarray
    inforce: np.ndarray
    plans: list[GsPlan]
    draws: list[int]
    tess_draws: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    inherit_end: int = -1
    blind_draws: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _row_codes(rows: np.ndarray) -> np.ndarray:
    """One int64 per row, equal exactly for equal rows (1-D uniques, column by column:
    much faster than ``np.unique(axis=0)``, which sorts the rows as bytes)."""
    code = np.zeros(rows.shape[0], np.int64)
    for col in rows.T:
        _, c = np.unique(col, return_inverse=True)
        _, code = np.unique(code * (int(c.max()) + 1) + c.reshape(-1), return_inverse=True)
        code = code.reshape(-1)
    return code


def _observer_rows(sc: Scan, cmds: np.ndarray) -> np.ndarray:
    """Rows of the scan's observers at commands ``cmds`` (draws, dispatches and ``Opaque``
    commands; ``len(stream)``: a bundle's end)."""
    real = sc.obs.shape[0] - int(sc.obs_kind.shape[0] > 0 and sc.obs_kind[-1] == OBS_END)
    rows = np.searchsorted(sc.obs[:real], cmds)
    return np.where(cmds >= len(sc.stream), sc.obs.shape[0] - 1, rows)


def _inforce(sc: Scan, rows: np.ndarray) -> np.ndarray:
    """The GSSetParameters fields in force at scan observers ``rows`` as the state model has
    them: the last set's fields (null normalised to 0s), the driver default (0s) where none
    came before, :data:`INHERITED` where the parameters are unknown (a bundle's inherited
    ones, or after an ``Opaque`` command)."""
    setter = sc.setter[rows, GS]
    out = np.where((setter >= 0)[:, None], sc.stream.args[np.maximum(setter, 0), :_NF], 0)
    out[out[:, 0] == 0] = 0  # null: the other fields mean nothing
    out[((sc.unknown[rows] >> GS) & 1) == 1] = INHERITED
    return out


def plan_stream(stream: Stream, *, lds_limit: int = LDS_DEFAULT, min_prims: int = MIN_PRIMS_DEFAULT,
                mode: str = "auto", sc: Scan | None = None) -> StreamPlan:
    """Decide the GS parameters of every GS draw of ``stream`` (no rewriting).

    See :class:`GsPlanPass` for the options and :mod:`drawopt.analysis.gsmodel` for the model.
    ``sc``: the stream's :func:`drawopt.analysis.state.scan`, if known.
    """
    n = len(stream)
    decls = stream.decls
    sc = scan(stream) if sc is None else sc
    is_draw = stream.cats() == int(Cat.DRAW) if n else np.zeros(0, bool)
    draws = np.flatnonzero(is_draw)
    drow = _observer_rows(sc, draws)
    pipe = sc.pipe[drow]  # the state model's: unknown after an Opaque command
    has_gs = np.zeros(len(decls) + 1, bool)  # index -1 (no pipeline) -> False
    tess_only = np.zeros(len(decls) + 1, bool)
    for i, d in enumerate(decls):
        if isinstance(d, Pipeline) and not d.is_compute:
            has_gs[i] = d.gs is not None
            tess_only[i] = d.tessellation and d.gs is None
    known = np.where(pipe >= 0, pipe, -1)
    gs = has_gs[known]
    gs_draws, tess_draws, blind_draws = draws[gs], draws[tess_only[known]], draws[pipe == UNKNOWN]
    gs_pipe = known[gs]
    inforce = _inforce(sc, drow[gs])
    inherit_end = -1
    if stream.header.kind == "bundle":
        sets = np.flatnonzero(stream.op == _GS)
        inherit_end = int(sets[0]) if sets.shape[0] else n
    m = gs_draws.shape[0]
    if m == 0:
        return StreamPlan(gs_draws, np.zeros((0, _NF), np.int64), inforce, [], [], tess_draws, inherit_end,
                          blind_draws)

    kind = np.full(m, _PLANNED, np.int64)
    if mode == "keep":
        kind[inforce[:, 0] != 0] = _KEPT
    kind[(stream.flags[gs_draws] & FLAG_NOMERGE) != 0] = _NOMERGE
    kind[inforce[:, 0] < 0] = _UNKNOWN  # what the draw ran under is not known: it keeps it
    kind[gs_draws < inherit_end] = _INHERITED
    # planned draws are keyed by their hints only; kept ones by all the fields in force
    key_fields = inforce.copy()
    key_fields[kind == _PLANNED, :3] = 0
    key_fields[(kind == _INHERITED) | (kind == _UNKNOWN)] = 0
    keys = np.column_stack([kind, gs_pipe, key_fields])
    _, first, inverse, counts = np.unique(_row_codes(keys), return_index=True, return_inverse=True,
                                          return_counts=True)
    order = np.argsort(first, kind="stable")  # report plans in first-use order
    plans: list[GsPlan] = []
    params = np.zeros((first.shape[0], _NF), np.int64)
    for j in order:
        k, pidx, *fields = (int(v) for v in keys[first[j]])
        p = decls[pidx]
        if k == _PLANNED:
            plan = plan_pipeline(p, lds_limit=lds_limit, min_prims=min_prims, mode=mode,
                                 ratio_bits=fields[3], lds_override=fields[4])
            params[j] = plan.params
        elif k in (_INHERITED, _UNKNOWN):
            plan = kept_plan(p, GsParams(), "inherited" if k == _INHERITED else "unknown", lds_limit=lds_limit,
                             min_prims=min_prims)
            params[j] = INHERITED
        else:
            plan = kept_plan(p, GsParams(*fields), "kept" if k == _KEPT else "nomerge", lds_limit=lds_limit,
                             min_prims=min_prims)
            params[j] = plan.params
        plans.append(plan)
    desired = params[inverse]
    return StreamPlan(gs_draws, desired, inforce, plans, [int(counts[j]) for j in order], tess_draws,
                      inherit_end, blind_draws)


@dataclass(frozen=True)
class GsPlanPass(Pass):
    """Plan GS onchip/offchip mode and subgroup sizes; emit GSSetParameters where they change.

    Parameters
    ----------
    lds_limit : int
        LDS budget target per subgroup in bytes, 1..65536 (default 32768, the
        driver's target); ``gs-plan{lds-limit=16384}``.
    min_prims : int
        Efficiency threshold: a subgroup of fewer primitives stays offchip
        (1..256, default 32).
    mode : str
        ``auto`` (the cost model), ``keep`` (explicit input parameters stay),
        ``offchip`` (the driver default everywhere) or ``onchip`` (the cost model
        without the ``min_prims`` threshold).
    """

    name: ClassVar[str] = "gs-plan"
    summary: ClassVar[str] = "geometry-shader onchip/offchip planning with the LDS model"
    requires: ClassVar[tuple[str, ...]] = ("state",)
    preserves: ClassVar[tuple[str, ...]] = ()

    lds_limit: int = LDS_DEFAULT
    min_prims: int = MIN_PRIMS_DEFAULT
    mode: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (1 <= int(self.lds_limit) <= LDS_MAX):
            raise UsageError(f"pass 'gs-plan': lds-limit must be 1..{LDS_MAX} bytes, got {self.lds_limit}")
        if not (1 <= int(self.min_prims) <= MAX_PRIMS_PER_SUBGROUP):
            raise UsageError(f"pass 'gs-plan': min-prims must be 1..{MAX_PRIMS_PER_SUBGROUP}, got {self.min_prims}")
        if self.mode not in PLAN_MODES:
            raise UsageError(f"pass 'gs-plan': mode must be one of {', '.join(PLAN_MODES)}, got '{self.mode}'")

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        sc = am.get("state", stream).scan
        sc = scan(stream) if sc is None else sc
        plan = plan_stream(stream, lds_limit=self.lds_limit, min_prims=self.min_prims, mode=self.mode, sc=sc)
        out, counts = _rewrite(stream, plan, sc)
        report = self._report(plan, counts)
        if out is None:
            return PassResult.unchanged(stream, **report)
        return PassResult(out, True, frozenset(), report)

    def _report(self, plan: StreamPlan, counts: dict[str, int]) -> dict[str, Any]:
        entries = []
        for p, nd in zip(plan.plans, plan.draws):
            e = p.to_json()
            e["draws"] = nd
            entries.append(e)
        onchip = sum(1 for p in plan.plans if p.onchip)
        summary = (f"{plan.gs_draws.shape[0]} GS draw(s), {len(plan.plans)} plan(s): {onchip} onchip, "
                   f"{len(plan.plans) - onchip} offchip; {counts['emitted']} GSSetParameters emitted, "
                   f"{counts['removed']} removed")
        return {
            "mode": self.mode, "lds_limit": self.lds_limit, "min_prims": self.min_prims,
            "gs_draws": int(plan.gs_draws.shape[0]), **counts, "summary": summary,
            "pipelines": entries,
            "explain": [f"{p.explain()} [{nd} draw(s)]" for p, nd in zip(plan.plans, plan.draws)],
        }


def _rewrite(stream: Stream, plan: StreamPlan, sc: Scan | None = None) -> tuple[Stream | None, dict[str, int]]:
    """Apply ``plan``: the rewritten stream (None if unchanged) and counts for the report.
    ``sc``: the stream's :func:`drawopt.analysis.state.scan`, if known."""
    n = len(stream)
    sets = np.flatnonzero(stream.op == _GS)
    counts = {"emitted": 0, "removed": 0, "kept": int(sets.shape[0])}
    if plan.gs_draws.shape[0] == 0 or plan.inherit_end >= n:
        return None, counts
    sc = scan(stream) if sc is None else sc
    # observation points: GS draws (planned); Opaque commands, draws of an unknown pipeline and, in a
    # bundle, its end (each as in the input); tessellation draws without a GS (soft: see below)
    opaque = np.flatnonzero(stream.op == _OPAQUE)
    hard = np.concatenate([opaque, plan.blind_draws] + ([np.array([n], np.int64)] if stream.header.kind == "bundle"
                                                         else []))
    tess = plan.tess_draws
    obs = np.concatenate([plan.gs_draws, hard, tess])
    # the input's parameters at every point, as the state model has them (INHERITED: not known)
    given = _inforce(sc, _observer_rows(sc, obs))
    want_all = np.concatenate([plan.desired, given[plan.gs_draws.shape[0]:]])
    kind = np.repeat([0, 1, 2], [plan.gs_draws.shape[0], hard.shape[0], tess.shape[0]])
    is_opaque = np.zeros(obs.shape[0], bool)
    is_opaque[plan.gs_draws.shape[0]:][:opaque.shape[0]] = True
    order = np.argsort(obs, kind="stable")
    obs, want_all, given, is_opaque = obs[order], want_all[order], given[order], is_opaque[order]
    # where the input's parameters are not known (a bundle before its first GSSetParameters, after an
    # Opaque command before the next one), every point keeps them: nothing can be put there without
    # changing what the caller or the Opaque command set
    soft = (kind[order] == 2) & (given[:, 0] >= 0)
    want_all[given[:, 0] < 0] = INHERITED
    # what is in force after each point: its parameters, except after an Opaque command (unknown)
    left = want_all.copy()
    left[is_opaque] = INHERITED
    start = INHERITED if plan.inherit_end >= 0 else np.zeros(_NF, np.int64)
    if soft.any():
        # a tessellation draw without a GS keeps what is in force, except onchip mode, which would
        # force its tessellation always-offchip: it gets the driver default then
        last = np.maximum.accumulate(np.where(soft, -1, np.arange(obs.shape[0])))
        base = np.where((last >= 0)[:, None], left[np.maximum(last, 0)], start)
        unknown = base[:, 0] < 0  # not known after the point before: the input's (concrete) parameters
        base[unknown] = given[unknown]
        base[base[:, 0] == _ONCHIP] = 0
        want_all[soft] = left[soft] = base[soft]
    prev = np.concatenate([start[None], left[:-1]])
    change = (want_all != prev).any(axis=1)
    assert not (change & (want_all[:, 0] < 0)).any(), "a point that keeps unknown parameters follows a change"

    # input GSSetParameters: segment k = between observation point k-1 and k; past the last: kept as is
    seg = np.searchsorted(obs, sets, side="left")
    inner = seg < obs.shape[0]
    iset, iseg = sets[inner], seg[inner]
    last_in_seg = np.full(obs.shape[0], -1, np.int64)
    last_in_seg[iseg] = iset  # later sets overwrite earlier ones: the last of each segment remains
    remove = np.zeros(n, bool)
    remove[iset] = True
    # where a change is needed: reuse the segment's last input set if it already is the wanted one
    # (it stays), else put the new command in its place, else just before the observation point
    need = np.flatnonzero(change)
    anchor = last_in_seg[need]
    has_anchor = anchor >= 0
    same = np.zeros(need.shape[0], bool)
    same[has_anchor] = (stream.args[anchor[has_anchor], :_NF] == want_all[need[has_anchor]]).all(axis=1)
    remove[anchor[same]] = False
    emit = need[~same]
    pos = np.where(has_anchor[~same], anchor[~same], obs[emit])
    counts["removed"] = int(remove.sum())
    counts["emitted"] = int(emit.shape[0])
    counts["kept"] = int(sets.shape[0]) - counts["removed"]
    if counts["removed"] == 0 and counts["emitted"] == 0:
        return None, counts

    k = emit.shape[0]
    new_args = np.zeros((k, stream.args.shape[1]), np.int64)
    new_args[:, :_NF] = want_all[emit]
    line = np.zeros(k, np.int32)  # new commands have no source line, except one taking an input's place
    in_place = has_anchor[~same]
    line[in_place] = stream.line[pos[in_place]]
    new = Stream(stream.header, stream.decls, np.full(k, _GS, np.uint16), new_args, np.zeros(k, np.int64),
                 np.zeros(k, np.int32), np.zeros(0, np.int64), np.zeros(k, np.uint8), line,
                 stream.strings)
    kept = np.flatnonzero(~remove)
    # sort key: a kept command i at 2i+1, a new command placed before position p at 2p
    key = np.concatenate([2 * kept + 1, 2 * pos])
    src = np.concatenate([kept, n + np.arange(k, dtype=np.int64)])
    both = concat([stream, new], stream.header, stream.decls, stream.strings)
    return both.take(src[np.argsort(key, kind="stable")]), counts
