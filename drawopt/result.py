"""What :func:`drawopt.optimize` returns: the optimized stream and a report of the run.

>>> import drawopt
>>> from drawopt.gen import generate
>>> res = drawopt.optimize(generate("quads", 64), passes="dedupe-state,merge-instances")
>>> res.report.before["draw_calls"], res.report.after["draw_calls"]
(64, 1)
>>> [p.name for p in res.report.passes]
['dedupe-state', 'merge-instances']

The report's figures of the whole streams (``before`` / ``after``: the rows of
``drawopt stats`` plus the cost model's ``cpu_cost`` and ``lower_bound``) are
computed when first read, so a caller that only needs ``res.stream`` pays nothing
for them. Per-pass figures (calls, state changes, commands after each pass, and
its time) are counted while the passes run.
"""

from __future__ import annotations

__all__ = ["optimize", "OptimizeResult", "OptimizeReport", "PassFigures", "ROWS", "SMALLER_IS_BETTER",
           "StreamAnalyses", "state_run_lengths", "verdict_line", "summary_table", "report_to_json"]

import copy
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from drawopt.ir.stream import Stream

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import numpy as np

    from drawopt.analysis.graph import HazardGraph
    from drawopt.analysis.mergeclass import DrawFacts
    from drawopt.analysis.state import StateTable
    from drawopt.explain import Explanation
    from drawopt.passmanager import Pass, PassResult

ROWS = ("commands", "draw_calls", "draws", "state_changes", "distinct_states", "flushes", "gpu_batches",
        "packed_fraction", "cpu_cost", "lower_bound", "findings")
"""The rows of the before/after table, in order."""

SMALLER_IS_BETTER = frozenset({"commands", "draw_calls", "state_changes", "distinct_states", "flushes",
                               "gpu_batches", "cpu_cost", "findings"})
"""Rows whose drop is the optimizer's gain; ``draws`` and ``lower_bound`` should not change."""


@dataclass(frozen=True)
class PassFigures:
    """One pass's run: its name with options, time, and the stream's counts after it.

    >>> PassFigures("weld", 0.25, True, 10, 3, 2).state_changes
    2
    """

    name: str
    seconds: float
    modified: bool
    commands: int
    draw_calls: int
    state_changes: int
    verified: bool | None = None
    report: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None
    """Why the pass manager discarded the pass's output (it added a finding or failed verify), else None."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of the fields.

        >>> PassFigures("weld", 0.25, True, 10, 3, 2).to_json()["draw_calls"]
        3
        """
        return {"name": self.name, "seconds": round(self.seconds, 6), "modified": self.modified,
                "commands": self.commands, "draw_calls": self.draw_calls, "state_changes": self.state_changes,
                "verified": self.verified, "report": self.report}


@dataclass
class OptimizeReport:
    """Before/after figures of an optimize run, per-pass figures and times, target, policy, findings.

    ``verified`` is True when the output was checked against the input by the
    translation validator, False if that check failed, None if it was not run.

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> rep = drawopt.optimize(generate("quads", 16), passes="merge-instances").report
    >>> rep.target, rep.reorder, rep.lower_bound
    ('d3d12', 'declared', 1)
    >>> rep.verdict("q.dstream")
    'q.dstream: 16 draws -> 1 call (bound 1), 23 -> 9 state changes, verified'
    """

    target: str
    reorder: str
    pipeline: list[str]
    before: dict[str, Any]
    after: dict[str, Any]
    passes: list[PassFigures]
    verified: bool | None = None

    @property
    def lower_bound(self) -> int:
        """The fewest draw calls any pipeline of drawopt's passes could reach from the input."""
        return int(self.before["lower_bound"])

    @property
    def findings(self) -> dict[str, int]:
        """Validator findings of the input and the output: ``{"before": n, "after": m}``."""
        return {"before": int(self.before["findings"]), "after": int(self.after["findings"])}

    @property
    def total_seconds(self) -> float:
        """The passes' time, summed."""
        return sum(p.seconds for p in self.passes)

    def verdict(self, name: str = "") -> str:
        """The one-line verdict ``drawopt optimize`` prints (see :func:`verdict_line`)."""
        return verdict_line(self.before, self.after, self.verified, name)

    def table(self) -> str:
        """The before/after table of ``drawopt optimize -v``."""
        return summary_table(self.before, self.after)

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-able (what ``--report R.json`` writes, less the file names).

        >>> import drawopt
        >>> from drawopt.gen import generate
        >>> j = drawopt.optimize(generate("quads", 4), passes="merge-instances").report.to_json()
        >>> sorted(j)[:4]
        ['after', 'before', 'lower_bound', 'passes']
        """
        return {"target": self.target, "reorder": self.reorder, "pipeline": list(self.pipeline),
                "before": self.before, "after": self.after, "lower_bound": self.lower_bound,
                "passes": [p.to_json() for p in self.passes], "total_seconds": round(self.total_seconds, 6),
                "verified": self.verified}


class OptimizeResult:
    """The optimized ``stream``, the ``input`` it came from, and the ``report`` of the run.

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> res = drawopt.optimize(generate("quads", 8), passes="merge-instances")
    >>> len(res.stream) < len(res.input)
    True
    >>> res.explain().pairs          # adjacent draw calls left unmerged in the output
    0
    """

    def __init__(self, stream: Stream, input: Stream, *, target: str, reorder: str, pipeline: list[str],
                 passes: list[PassFigures], verified: bool | None = None,
                 state_of: Callable[[Stream], StateTable | None] | None = None,
                 findings_of: Callable[[Stream], Mapping[str, int] | None] | None = None,
                 input_figures: dict[str, Any] | None = None, input_run_lengths: list[int] | None = None,
                 output_figures: dict[str, Any] | None = None, output_analyses: StreamAnalyses | None = None) -> None:
        self.stream = stream
        self.rejected = [p.rejected for p in passes if p.rejected]
        """Why passes were rolled back (one line each; empty when every pass's output was kept)."""
        self.input = input
        self.target = target
        self.reorder = reorder
        self.pipeline = pipeline
        self._passes = passes
        self.verified = verified
        self._state_of, self._findings_of = state_of, findings_of
        self._input_figures, self._input_runs = input_figures, input_run_lengths
        self._output_figures = output_figures
        self._analyses: dict[int, StreamAnalyses] = {}
        if output_analyses is not None:  # (of the stream before its header recorded the provenance: the same commands)
            self._analyses[id(stream)] = output_analyses
        self.stage_seconds: dict[str, float] = {}
        """The pass manager's time outside the passes (:attr:`drawopt.passmanager.PassManager.stage_seconds`)."""

    def analyses(self, stream: Stream) -> StreamAnalyses:
        """The shared analyses of ``stream`` (the :attr:`input` or the :attr:`stream`): the report's
        figures, :meth:`explain` and the HTML report's run lengths compute each one once.

        Where the pass manager handed over its own (``state_of`` / ``findings_of``: its state
        table and findings per rule of a stream, or None), they are used instead; so are the
        input's figures and run lengths when they were taken early (``input_figures`` /
        ``input_run_lengths``: :func:`optimize`'s ``early_input``), and the output's figures and
        analyses (``output_figures`` / ``output_analyses``, taken beside the final verify)."""
        got = self._analyses.get(id(stream))
        if got is None or (got.stream is not stream and stream is not self.stream):
            table = self._state_of(stream) if self._state_of is not None else None
            counts = self._findings_of(stream) if self._findings_of is not None else None
            got = self._analyses[id(stream)] = StreamAnalyses(stream, self.reorder, table=table,
                                                              finding_counts=counts)
            if stream is self.input and self._input_runs is not None:
                got.run_lengths = self._input_runs
        return got

    @cached_property
    def report(self) -> OptimizeReport:
        """The :class:`OptimizeReport` (the whole-stream figures are computed on first access)."""
        before = (copy.deepcopy(self._input_figures) if self._input_figures is not None else
                  stream_figures(self.input, self.target, self.reorder, analyses=self.analyses(self.input)))
        after = (copy.deepcopy(before) if self.stream is self.input else
                 copy.deepcopy(self._output_figures) if self._output_figures is not None else
                 stream_figures(self.stream, self.target, self.reorder, analyses=self.analyses(self.stream)))
        return OptimizeReport(self.target, self.reorder, self.pipeline, before, after, self._passes, self.verified)

    def explain(self, limit: int | None = None) -> Explanation:
        """Why adjacent draw calls of the output were left unmerged (:func:`drawopt.explain.explain`)."""
        from drawopt.analysis.costmodel import get_target
        from drawopt.explain import explain

        an = self.analyses(self.stream)
        keys = an.mdi_keys if get_target(self.target).mdi else None
        return explain(self.stream, self.target, self.reorder, limit=limit, table=an.table, facts=an.facts,
                       classes=an.classes(self.target), graph=lambda: an.graph, keys=keys)

    def __repr__(self) -> str:
        return (f"OptimizeResult({len(self.input)} -> {len(self.stream)} commands, target={self.target}, "
                f"reorder={self.reorder}, pipeline={','.join(self.pipeline)!r})")


class StreamAnalyses:
    """The analyses of one stream that its report figures, its explanation and its run lengths
    share, each computed on first use: :attr:`table` (the state table), :attr:`facts` (the
    draw facts) and :attr:`graph` (the hazard graph, under ``reorder``). ``table`` and
    ``finding_counts`` (findings per rule) may be given when already known.

    >>> from drawopt.gen import generate
    >>> an = StreamAnalyses(generate("quads", 4), "declared")
    >>> an.table.draws.shape[0], an.graph.number_of_nodes()
    (4, 4)
    """

    def __init__(self, stream: Stream, reorder: str, table: StateTable | None = None,
                 finding_counts: Mapping[str, int] | None = None) -> None:
        self.stream, self.reorder = stream, reorder
        self.finding_counts = finding_counts
        self._classes: dict[bool, np.ndarray] = {}
        if table is not None:
            self.table = table

    @cached_property
    def table(self) -> StateTable:
        from drawopt.analysis.state import track

        return track(self.stream)

    @cached_property
    def facts(self) -> DrawFacts:
        from drawopt.analysis.mergeclass import draw_facts

        return draw_facts(self.stream, self.table)

    @cached_property
    def graph(self) -> HazardGraph:
        from drawopt.analysis.graph import hazard_graph

        return hazard_graph(self.stream, reorder=self.reorder)

    @cached_property
    def run_lengths(self) -> list[int]:
        """The lengths of the same-state runs of draw calls (:func:`state_run_lengths`)."""
        return state_run_lengths(self.stream, self.table)

    @cached_property
    def mdi_keys(self) -> np.ndarray:
        """The draws' state keys under the mdi rule (``state_keys(facts, MDI.state_except)``), which
        the mdi call classes and the explanation on an mdi target both compare."""
        from drawopt.analysis.mergeclass import MDI, state_keys

        return state_keys(self.facts, MDI.state_except)

    def classes(self, target: str) -> np.ndarray:
        """The call classes of the draws on ``target`` (:func:`drawopt.analysis.mergeclass.call_classes`)."""
        from drawopt.analysis.costmodel import get_target
        from drawopt.analysis.mergeclass import call_classes

        mdi = bool(get_target(target).mdi)
        got = self._classes.get(mdi)
        if got is None:
            got = self._classes[mdi] = call_classes(self.facts, mdi=mdi, keys=self.mdi_keys if mdi else None)
        return got


def stream_figures(stream: Stream, target: str, reorder: str, analyses: StreamAnalyses | None = None) -> dict[str, Any]:
    """The report figures of one stream: ``drawopt stats`` plus the cost model's CPU cost and lower bound.

    ``analyses``: the stream's :class:`StreamAnalyses`, to share them (computed here otherwise).

    >>> from drawopt.gen import generate
    >>> f = stream_figures(generate("quads", 4), "d3d12", "declared")
    >>> f["draw_calls"], f["lower_bound"]
    (4, 1)
    """
    from drawopt.analysis.lowerbound import report_figures
    from drawopt.stats import compute_stats

    an = analyses if analyses is not None else StreamAnalyses(stream, reorder)
    figures = compute_stats(stream, state=an.table, target=target, finding_counts=an.finding_counts)
    figures.update(report_figures(stream, target, reorder, table=an.table, facts=an.facts,
                                  classes=an.classes(target), graph=lambda: an.graph))
    return figures


def state_run_lengths(stream: Stream, table: StateTable) -> list[int]:
    """Lengths of the runs of consecutive draw calls with one normalised state (only state commands
    between), from the stream's state ``table`` (the HTML report's run-length plot).

    >>> from drawopt.analysis.state import track
    >>> from drawopt.gen import generate
    >>> s = generate("quads", 4)
    >>> state_run_lengths(s, track(s))
    [1, 1, 1, 1]
    """
    import numpy as np

    from drawopt.ir.ops import Cat

    d = table.draws.shape[0]
    if d == 0:
        return []
    nonstate = np.concatenate([[0], np.cumsum(stream.cats() != int(Cat.STATE))])
    c = table.draws
    between = (nonstate[c[1:]] - nonstate[c[:-1] + 1]) > 0
    brk = np.r_[True, (table.state[1:] != table.state[:-1]) | between]
    return np.bincount(np.cumsum(brk) - 1).tolist()


def _n(k: int, one: str, many: str) -> str:
    return f"{k:,} {one if k == 1 else many}"


def verdict_line(before: dict[str, Any], after: dict[str, Any], verified: bool | None, name: str = "") -> str:
    """``frame.dstream: 200 draws -> 107 calls (bound 101), 541 -> 225 state changes, verified``.

    "verified" is said only when the output was checked (``verified`` is True).

    >>> verdict_line({"draws": 2, "draw_calls": 2, "state_changes": 3, "lower_bound": 1},
    ...              {"draws": 2, "draw_calls": 1, "state_changes": 3}, True, "a.dstream")
    'a.dstream: 2 draws -> 1 call (bound 1), 3 -> 3 state changes, verified'
    """
    b, a = before, after
    line = (f"{name + ': ' if name else ''}{_n(b['draws'], 'draw', 'draws')} -> "
            f"{_n(a['draw_calls'], 'call', 'calls')} (bound {b['lower_bound']:,}), "
            f"{b['state_changes']:,} -> {_n(a['state_changes'], 'state change', 'state changes')}")
    if verified is True:
        line += ", verified"
    elif verified is False:
        line += ", NOT VERIFIED"
    return line


def _change(k: str, b: Any, a: Any) -> str:
    """How a row changed, phrased so that a smaller-is-better drop reads as a gain."""
    if not isinstance(b, (int, float)) or not isinstance(a, (int, float)) or k == "lower_bound":
        return ""
    if k == "packed_fraction":
        return f"{(a - b) * 100:+.0f} pts" if a != b else "same"
    if a == b:
        return "same"
    if k in SMALLER_IS_BETTER:
        if a < b:
            return f"{b / a:.2f}x fewer" if a else "all gone"
        return f"+{a - b:,} more" if isinstance(a, int) else f"{a / b:.2f}x more" if b else "more"
    return f"{a - b:+,}"


def summary_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The before/after table (``drawopt optimize -v``): a "change" column reads "3.00x fewer" for gains.

    >>> print(summary_table({"draw_calls": 6, "draws": 6}, {"draw_calls": 2, "draws": 6}))
                              before         after        change
    draw_calls                     6             2   3.00x fewer
    draws                          6             6          same
    """
    lines = [f"{'':<18}{'before':>14}{'after':>14}{'change':>14}"]
    for k in ROWS:
        if k not in before or k not in after:
            continue
        b, a = before[k], after[k]
        if isinstance(b, float) or isinstance(a, float):
            cells = f"{b:>14.3f}{a:>14.3f}"
        else:
            cells = f"{b:>14,}{a:>14,}"
        lines.append(f"{k:<18}{cells}{_change(k, b, a):>14}".rstrip())
    return "\n".join(lines)


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def report_to_json(report: dict[str, Any], indent: int | None = 2) -> str:
    """A report dict as sorted JSON text (numpy values become lists).

    >>> report_to_json({"b": 1, "a": [2]}, indent=None)
    '{"a": [2], "b": 1}'
    """
    return json.dumps(report, indent=indent, sort_keys=True, default=_jsonable)


def check_optimize_args(passes: Any, target: str, reorder: str, options: dict[str, Any]) -> list[Any]:
    """:func:`drawopt.optimize`'s argument checks; returns the passes (the target's default pipeline for None).

    The target and the reorder policy are the pipeline's context, not pass options
    (``schedule{reorder=opaque}`` is an unknown option: say ``reorder="opaque"``).

    >>> check_optimize_args("weld", "ps5", "declared", {})
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: unknown target 'ps5' (known: xbox-one, xbox-series, d3d12, vulkan, gl)
    >>> check_optimize_args("schedule{reorder=opaque}", "d3d12", "declared", {})
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: pass 'schedule': unknown option 'reorder=opaque' (options: none)
    """
    import dataclasses

    from drawopt.analysis.costmodel import get_target
    from drawopt.errors import UsageError
    from drawopt.passmanager import Pass, check_policy, default_pipeline, get_pass, parse_pipeline

    get_target(target)
    check_policy(reorder)
    pipeline = default_pipeline(target) if passes is None else passes
    if isinstance(pipeline, str):
        found = parse_pipeline(pipeline)
    elif isinstance(pipeline, list) and all(isinstance(p, Pass) for p in pipeline):
        found = list(pipeline)
        if options:
            raise UsageError(f"optimize: options ({', '.join(options)}) apply to a pipeline string, "
                             f"not to a list of passes (set them on the pass objects)")
    else:
        raise UsageError(f"optimize: passes must be a pipeline string or a list of passes, not {type(passes).__name__}")
    known = {f.name for p in found for f in dataclasses.fields(p)}
    for k in options:
        if k not in known:
            owners = [n for n in _pass_names() if k in {f.name for f in dataclasses.fields(get_pass(n))}]
            hint = f"it is an option of {', '.join(owners)}" if owners else "no registered pass has it either"
            raise UsageError(f"optimize: unknown option '{k}' (no pass of the pipeline has it; {hint})")
    if isinstance(pipeline, str):
        found = parse_pipeline(pipeline, target=target, reorder=reorder, **options)
    return found


def _pass_names() -> list[str]:
    from drawopt.passmanager import PASSES

    return list(PASSES)


def optimize_result(stream: Stream, pm: Any, target: str, reorder: str, early_input: bool = False) -> OptimizeResult:
    """Run the pass manager ``pm`` over ``stream``, counting calls and state changes after each pass.

    ``early_input``: take the input's report figures and run lengths before the first pass, from
    the pass manager's state table of the input (it releases that table once the passes have left
    the input, and the report would track the input again), and the output's once the passes
    have made it, from the manager's table of it, beside the final verify. Both run in a thread
    where a second core is free (:mod:`drawopt.background`): the input's beside the passes."""
    from drawopt.background import start
    from drawopt.stats import call_counts

    counts: list[dict[str, int]] = []
    early: dict[str, Any] = {}
    user_cb, user_start, user_output = pm.on_pass, pm.on_start, pm.on_output

    def on_pass(p: Any, res: Any) -> None:
        counts.append(call_counts(res.stream))
        if user_cb:
            user_cb(p, res)

    def on_start(p: Any) -> None:
        if early_input and "input" not in early:  # the first pass of the first run: the input is the manager's
            # (its post-condition counted the input on the scan alone: the table reuses that scan,
            # and the passes' manager keeps it until they move on)
            table = pm.analyses.get("state", stream)
            an = StreamAnalyses(stream, reorder, table=table,
                                finding_counts=pm.analyses.cached("finding_counts", stream))
            early["input"] = start(_figures_and_runs, an, target)
        elif "input" in early:
            # the input's figures overlap the first pass only: beside the next ones (schedule's
            # peak) their hazard graph would raise the run's peak memory by a fifth at 1M draws
            # (waiting again, once it has ended, does nothing)
            early["input"].wait()
        if user_start:
            user_start(p)

    def on_output(out: Stream) -> None:
        if early_input:  # its table and finding counts are the manager's (the post-condition's)
            an = StreamAnalyses(out, reorder, table=pm.analyses.cached("state", out),
                                finding_counts=pm.analyses.cached("finding_counts", out))
            early["output"] = (out, an, start(_figures_and_runs, an, target))
        if user_output:
            user_output(out)

    pm.on_pass, pm.on_start, pm.on_output = on_pass, on_start, on_output
    try:
        out = pm.run(stream)
    finally:
        pm.on_pass, pm.on_start, pm.on_output = user_cb, user_start, user_output
        jobs = [early["input"]] if "input" in early else []
        jobs += [early["output"][2]] if "output" in early else []
        for job in jobs:  # (no thread outlives the run, even one that failed)
            job.wait()
    counts = counts[len(counts) - len(pm.records):]   # a re-run (the final verify failed) reported twice
    figures = [PassFigures(str(p), r.seconds, r.modified, c["commands"], c["draw_calls"], c["state_changes"],
                           r.verified, r.report, r.rejected) for p, r, c in zip(pm.passes, pm.records, counts)]
    am, final = pm.analyses, pm.final

    def state_of(s: Stream) -> Any:  # the output is the final stream with its provenance recorded
        return am.cached("state", final if s is out else s)

    def findings_of(s: Stream) -> Any:
        return am.cached("finding_counts", final if s is out else s)

    input_figures = input_runs = None
    report_seconds = 0.0
    if "input" in early:
        input_figures, input_runs = early["input"].result()
        report_seconds += early["input"].waited
    output_an = output_figures = None
    if "output" in early and early["output"][0] is final and out is not stream:
        output_an = early["output"][1]
        output_figures = early["output"][2].result()[0]  # (the run lengths stay on output_an)
        report_seconds += early["output"][2].waited
    res = OptimizeResult(out, stream, target=target, reorder=reorder, pipeline=[str(p) for p in pm.passes],
                         passes=figures, verified=_verified(pm, out is stream), state_of=state_of,
                         findings_of=findings_of, input_figures=input_figures, input_run_lengths=input_runs,
                         output_figures=output_figures, output_analyses=output_an)
    res.rejected = [r.rejected for r in pm.records if r.rejected]  # with the pipeline's own, if it kept the input
    res.stage_seconds = dict(pm.stage_seconds)
    if early:  # the time the run waited for the figures, beyond what they overlapped
        res.stage_seconds["report"] = report_seconds
    return res


def _figures_and_runs(an: StreamAnalyses, target: str) -> tuple[dict[str, Any], list[int]]:
    """:func:`stream_figures` of ``an.stream`` from ``an`` and its run lengths (one job of
    :func:`optimize_result`)."""
    return stream_figures(an.stream, target, an.reorder, analyses=an), an.run_lengths


def _verified(pm: Any, unchanged: bool) -> bool | None:
    """True when every pass that changed the stream was verified (``verify_each``), or nothing changed.

    The pass manager's own final check, when it has one (``pm.verified``), decides.
    """
    final = getattr(pm, "verified", None)
    if final is not None:
        return bool(final)
    if unchanged:
        return True
    if pm.verify_each and all(r.verified for r in pm.records if r.modified):
        return True
    return None


def optimize(stream: Stream, passes: str | list[Pass] | None = None, *, target: str = "d3d12",
             reorder: str = "declared", verify_each: bool = False, verify: bool = True,
             on_start: Callable[[Pass], None] | None = None,
             on_pass: Callable[[Pass, PassResult], None] | None = None, early_input: bool = False,
             **options: Any) -> OptimizeResult:
    """Run a pass pipeline over ``stream``; the result holds the optimized stream and a report.

    ``passes``: a pipeline string, a list of passes, or None for the default
    pipeline of ``target``. Extra ``options`` set pass options by field name; one
    that no pass of the pipeline has, an unknown ``target`` or ``reorder`` raise
    :class:`~drawopt.errors.UsageError`. ``verify`` (default on) checks the output
    against the input at the end and drops the passes that broke it; no pass may add
    a finding (module docstring). ``on_start(pass)`` / ``on_pass(pass, result)`` are
    called before / after each pass (the CLI's progress line). ``early_input``: for a
    caller that will read the report, take the input's figures before the first pass,
    from the pass manager's state table of the input, instead of tracking the input
    again for the report (their time is ``stage_seconds["report"]``).

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> res = drawopt.optimize(generate("quads", 32), passes="merge-instances", target="xbox-one")
    >>> len(res.stream), res.report.after["draw_calls"], res.report.verified
    (10, 1, True)
    >>> drawopt.optimize(generate("quads", 4), pases="weld")
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: optimize: unknown option 'pases' (no pass of the pipeline has it; ...)
    """
    from drawopt.passmanager import PassManager

    pipeline = check_optimize_args(passes, target, reorder, options)
    pm = PassManager(pipeline, verify_each=verify_each, reorder=reorder, target=target, verify=verify,
                     on_start=on_start, on_pass=on_pass)
    return optimize_result(stream, pm, target, reorder, early_input=early_input)
