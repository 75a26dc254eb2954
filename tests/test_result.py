"""drawopt.result: the report's figures share one analysis of each stream and are those of the
stand-alone functions; the pass manager's own analyses are used where it hands them over."""

from __future__ import annotations

from collections import Counter

import pytest

import drawopt.analysis.graph as graph_mod
import drawopt.analysis.state as state_mod
import drawopt.stats as stats_mod
from drawopt.analysis.graph import build_graph
from drawopt.analysis.lowerbound import report_figures
from drawopt.explain import explain
from drawopt.gen import generate
from drawopt.htmlreport import add_details, run_lengths
from drawopt.result import OptimizeResult, optimize
from drawopt.stats import compute_stats
from drawopt.validate import findings


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> Counter[int]:
    calls: Counter[int] = Counter()
    real = getattr(module, name)

    def wrapped(stream, *a, **k):
        calls[id(stream)] += 1
        return real(stream, *a, **k)

    monkeypatch.setattr(module, name, wrapped)
    return calls


def test_the_report_analyses_each_stream_once(monkeypatch: pytest.MonkeyPatch) -> None:
    res = optimize(generate("frame", 600, seed=3))
    assert res.stream is not res.input
    tracked = _counting(monkeypatch, state_mod, "track")
    graphs = _counting(monkeypatch, graph_mod, "hazard_graph")
    report = res.report.to_json()
    add_details(report, res)  # explain and the run lengths of the JSON/HTML report
    # the pass manager hands over the output's state table; the input's it released mid-pipeline
    # (issue 13: memory), so the report tracks the input once
    assert tracked == {id(res.input): 1}, tracked
    assert graphs[id(res.input)] <= 1 and graphs[id(res.stream)] <= 1
    alone = OptimizeResult(res.stream, res.input, target="d3d12", reorder="declared", pipeline=res.pipeline,
                           passes=res.report.passes)
    tracked.clear()
    add_details(alone.report.to_json(), alone)  # without the hand-over: once per stream
    assert tracked[id(res.input)] == 1 and tracked[id(res.stream)] == 1 and sum(tracked.values()) == 2


@pytest.mark.parametrize("target", ["d3d12", "xbox-one"])
def test_the_report_holds_the_stand_alone_figures(target: str) -> None:
    res = optimize(generate("frame", 800, seed=4), target=target)
    rep = res.report
    for stream, got in ((res.input, rep.before), (res.stream, rep.after)):
        table = state_mod.track(stream)
        want = compute_stats(stream, state=table, target=target)
        want.update(report_figures(stream, target, "declared", table=table, graph=build_graph(stream)))
        assert got == want
    ex = explain(res.stream, target, "declared", limit=40, graph=build_graph(res.stream)).to_json()
    assert res.explain(limit=40).to_json() == ex
    report = rep.to_json()
    add_details(report, res)
    assert report["run_lengths"]["after"] == {str(k): v for k, v in
                                              sorted(Counter(run_lengths(res.stream)).items())}


def test_the_pass_managers_analyses_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    base = optimize(generate("frame", 300, seed=5))
    streams = (base.input, base.stream)
    tables = {id(s): state_mod.track(s) for s in streams}
    counts = {id(s): Counter(f.rule for f in findings(s, tables[id(s)])) for s in streams}
    want_before, want_after = base.report.before, base.report.after

    def refuse(*a, **k):
        raise AssertionError("computed again")

    monkeypatch.setattr(state_mod, "track", refuse)
    monkeypatch.setattr(stats_mod, "findings", refuse)
    res = OptimizeResult(base.stream, base.input, target=base.target, reorder=base.reorder, pipeline=base.pipeline,
                         passes=[], state_of=lambda s: tables.get(id(s)), findings_of=lambda s: counts.get(id(s)))
    assert res.report.before == want_before and res.report.after == want_after


def test_an_unchanged_stream_has_equal_before_and_after() -> None:
    s = generate("quads", 8)
    rep = OptimizeResult(s, s, target="d3d12", reorder="declared", pipeline=[], passes=[]).report
    assert rep.before == rep.after and rep.before is not rep.after
    assert rep.before["by_command"] is not rep.after["by_command"]


def test_the_mdi_state_keys_are_computed_once_per_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mdi call classes (report figures) and the explanation of the output compare the same
    state keys: the report computes them once per stream (they were computed twice for the output)."""
    import drawopt.analysis.mergeclass as mc
    import drawopt.explain as explain_mod

    res = optimize(generate("frame", 600, seed=3))
    calls: Counter[int] = Counter()
    real = mc.state_keys

    def counting(facts, except_slots=()):
        if except_slots == mc.MDI.state_except:
            calls[id(facts.stream)] += 1
        return real(facts, except_slots)

    monkeypatch.setattr(mc, "state_keys", counting)
    monkeypatch.setattr(explain_mod, "state_keys", counting)
    report = res.report.to_json()
    add_details(report, res)
    assert calls == {id(res.input): 1, id(res.stream): 1}, calls


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("target", ["d3d12", "xbox-one"])
def test_early_input_figures_are_the_reports_and_track_nothing_again(monkeypatch: pytest.MonkeyPatch,
                                                                    target: str, threads: str) -> None:
    """``early_input`` (the CLI) takes the input's figures and run lengths from the pass manager's
    table before the first pass, and the output's beside the final verify (in threads, or not:
    ``DRAWOPT_THREADS``): the report tracks no stream again and builds no hazard graph (the
    output's table is handed over too), and its figures and details are the lazy report's."""
    monkeypatch.setenv("DRAWOPT_THREADS", threads)
    s = generate("frame", 600, seed=3)
    lazy = optimize(s, target=target)
    want = lazy.report.to_json()
    add_details(want, lazy)
    res = optimize(s, target=target, early_input=True)
    assert res.stage_seconds["report"] >= 0.0
    tracked = _counting(monkeypatch, state_mod, "track")
    graphs = _counting(monkeypatch, graph_mod, "hazard_graph")
    got = res.report.to_json()
    add_details(got, res)
    assert tracked == {} and graphs == {}, (tracked, graphs)
    for j in (want, got):
        j.pop("total_seconds")
        for p in j["passes"]:
            p.pop("seconds")
    assert got == want
    empty = optimize(s, passes="", target=target, early_input=True)  # no pass: nothing taken early
    assert "report" not in empty.stage_seconds and empty.report.before == lazy.report.before


@pytest.mark.parametrize("threads", ["1", "2"])
def test_early_output_figures_of_an_output_that_failed_verify_are_not_reported(
        monkeypatch: pytest.MonkeyPatch, threads: str) -> None:
    """A pass the verifier rejects (it adds no finding): the output's figures taken beside the
    final verify are of a stream the re-run replaces, and the report is the re-run output's."""
    from test_passmanager import S, SwapBlendedPass

    from drawopt.passmanager import parse_pipeline

    monkeypatch.setenv("DRAWOPT_THREADS", threads)
    passes = [*parse_pipeline("dedupe-state"), SwapBlendedPass(), *parse_pipeline("dedupe-state,schedule")]
    lazy = optimize(S(), passes)
    res = optimize(S(), passes, early_input=True)
    assert res.rejected and res.verified
    want, got = lazy.report.to_json(), res.report.to_json()
    for j in (want, got):
        j.pop("total_seconds")
        for p in j["passes"]:
            p.pop("seconds")
    assert got == want
    assert got["after"] == optimize(res.stream, passes="").report.before  # the figures of the stream kept
