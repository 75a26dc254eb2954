"""gs-plan: the subgroup/LDS model, the onchip/offchip decision and the rewrite."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drawopt.analysis import gsmodel as gm
from drawopt.errors import UsageError
from drawopt.ir.codec import bits_f32, f32_bits
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_NAME, NARGS
from drawopt.ir.stream import FLAG_NOMERGE, Stream, StreamBuilder
from drawopt.passes.gs_plan import GsPlanPass, plan_stream
from drawopt.passmanager import PASSES, AnalysisManager, PassManager, get_pass, parse_pipeline

GS = BY_NAME["GSSetParameters"].code
OPAQUE = BY_NAME["Opaque"].code
NULL, OFFCHIP, ONCHIP = 0, 1, 2


def gs_pipe(name: str = "g", **kw) -> Pipeline:
    base = dict(vs="v", gs="g", ps="p", gs_maxverts=6, gs_vertsize=32, gs_invertsize=48)
    base.update(kw)
    return Pipeline(name, **base)


def builder(kind: str = "list") -> StreamBuilder:
    b = StreamBuilder(kind=kind)
    b.target("rt", 64, 64)
    b.pipeline("fur", vs="v", gs="g", ps="p", gs_maxverts=6, gs_vertsize=32, gs_invertsize=48)
    b.pipeline("cube", vs="v", gs="g", ps="p", gs_maxverts=18, gs_vertsize=48, gs_invertsize=32)
    b.pipeline("tess", vs="v", hs="h", ds="d", gs="g", ps="p", topology="patch", gs_maxverts=3,
               gs_vertsize=32, gs_invertsize=32)
    b.pipeline("undecl", vs="v", gs="g", ps="p")
    b.pipeline("mesh", vs="v", ps="p")
    b.pipeline("patches", vs="v", hs="h", ds="d", ps="p", topology="patch")
    b.OMSetRenderTargets("rt")
    return b


def run(s: Stream, **opts) -> tuple[Stream, dict]:
    res = GsPlanPass(**opts).apply(s, AnalysisManager())
    return res.stream, res.report


def gs_rows(s: Stream) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in s.args[i, :5]) for i in np.flatnonzero(s.op == GS)]


def inforce_at(s: Stream, idx: np.ndarray) -> np.ndarray:
    """GSSetParameters fields in force at commands ``idx`` (null normalised to zeros)."""
    is_set = s.op == GS
    rows = s.args[is_set, :5].copy()
    rows[rows[:, 0] == 0] = 0
    table = np.concatenate([np.zeros((1, 5), np.int64), rows])
    return table[np.cumsum(is_set)[idx]]


# ============================================================================ the model
def test_primitive_output_and_lds_formulas() -> None:
    assert gm.primitive_output_bytes(18, 48, 1) == 864
    assert gm.primitive_output_bytes(4, 16, 3) == 192
    assert gm.subgroup_vertices(10, 1.0) == 10
    assert gm.subgroup_vertices(10, 0.25) == 3
    assert gm.subgroup_vertices(10, bits_f32(f32_bits(0.1))) == 1  # float32 0.1 x 10 does not round up to 2
    assert gm.subgroup_vertices(0, 2.0) == 0
    assert gm.subgroup_vertices(1, 0.01) == 1
    assert gm.subgroup_lds_bytes(36, 1.0, 864, 32) == 36 * 864 + 36 * 32
    assert gm.subgroup_lds_bytes(113, 0.5, 128, 32) == 113 * 128 + 57 * 32


def test_size_subgroup_limits() -> None:
    assert gm.size_subgroup(864, 32, 1.0, 32768) == (36, 36, "lds")
    assert gm.size_subgroup(864, 32, 1.0, 16384) == (18, 18, "lds")
    assert gm.size_subgroup(16, 16, 1.0, 32768) == (256, 256, "prims")
    # ratio 3: the vertex cap binds first (85 x 3 = 255 <= 256 < 86 x 3)
    assert gm.size_subgroup(8, 8, 3.0, 65536) == (85, 255, "verts")
    # 16 GS instances: 256 threads / 16 = 16 primitives
    assert gm.size_subgroup(16, 16, 1.0, 65536, instances=16) == (16, 16, "threads")
    assert gm.size_subgroup(32768, 32, 1.0, 32768)[0] == 0
    assert gm.size_subgroup(32736, 32, 1.0, 32768)[:2] == (1, 1)
    with pytest.raises(ValueError):
        gm.size_subgroup(16, 16, 0.0, 32768)


@settings(max_examples=300, deadline=None)
@given(out=st.integers(1, 40000), inv=st.integers(1, 512), ratio=st.floats(0.05, 8.0),
       budget=st.integers(1, 65536), inst=st.sampled_from([1, 2, 3, 4, 8, 32]))
def test_size_subgroup_is_the_largest_that_fits(out: int, inv: int, ratio: float, budget: int, inst: int) -> None:
    p, v, limited = gm.size_subgroup(out, inv, ratio, budget, inst)
    cap = min(gm.MAX_PRIMS_PER_SUBGROUP, gm.MAX_GS_THREADS // inst)

    def fits(n: int) -> bool:
        return (gm.subgroup_vertices(n, ratio) <= gm.MAX_VERTS_PER_SUBGROUP
                and gm.subgroup_lds_bytes(n, ratio, out, inv) <= budget)

    assert 0 <= p <= cap
    assert v == gm.subgroup_vertices(p, ratio)
    if p:
        assert fits(p)
    if p < cap:
        assert not fits(p + 1)
        assert limited in ("lds", "verts")
    else:
        assert limited in ("prims", "threads")


def test_effective_ratio_and_budget() -> None:
    assert gm.effective_ratio(0.0) == (1.0, "default")
    assert gm.effective_ratio(0.5) == (0.5, "pipeline")
    assert gm.effective_ratio(0.5, f32_bits(3.0)) == (3.0, "command")
    assert gm.effective_ratio(0.5, f32_bits(-1.0)) == (0.5, "pipeline")  # invalid override ignored
    assert gm.effective_ratio(0.0, f32_bits(math.inf)) == (1.0, "default")
    assert gm.effective_budget(32768) == (32768, "default")
    assert gm.effective_budget(16384) == (16384, "option")
    assert gm.effective_budget(32768, 8192) == (8192, "command")
    assert gm.effective_budget(32768, 49152) == (32768, "default")  # an override only restricts
    assert gm.effective_budget(32768, 0) == (32768, "default")
    assert gm.offchip_bytes_per_primitive(192, 48, 1.0) == 480
    assert gm.offchip_bytes_per_primitive(128, 32, 0.5) == 288


def test_plan_reasons() -> None:
    assert gm.plan_pipeline(gs_pipe()).reason == "fits"
    p = gm.plan_pipeline(gs_pipe())
    assert (p.onchip, p.prims, p.verts, p.lds_bytes, p.params) == (True, 136, 136, 32640, (ONCHIP, 136, 136, 0, 0))
    tess = gs_pipe(hs="h", ds="d", topology="patch")
    assert gm.plan_pipeline(tess).reason == "tessellation"
    assert gm.plan_pipeline(tess, mode="onchip").reason == "tessellation"  # never onchip with tessellation
    assert gm.plan_pipeline(tess).params == gm.NULL_PARAMS
    big = gs_pipe(gs_maxverts=128, gs_vertsize=64, gs_instances=4)
    assert gm.plan_pipeline(big).reason == "no-fit"
    cube = gs_pipe(gs_maxverts=18, gs_vertsize=48, gs_invertsize=32)
    assert gm.plan_pipeline(cube).reason == "fits"
    assert gm.plan_pipeline(cube, lds_limit=16384).reason == "small-subgroup"
    assert gm.plan_pipeline(cube, lds_limit=16384, min_prims=16).reason == "fits"
    assert gm.plan_pipeline(cube, lds_limit=16384, mode="onchip").params == (ONCHIP, 18, 18, 0, 0)
    assert gm.plan_pipeline(cube, mode="offchip").reason == "forced-offchip"
    assert gm.plan_pipeline(gs_pipe(gs_invertsize=0)).reason == "undeclared"
    with pytest.raises(ValueError):
        gm.plan_pipeline(Pipeline("m", vs="v", ps="p"))


def test_plan_hints_travel_with_the_command() -> None:
    grass = gs_pipe(gs_maxverts=4, gs_vertsize=32, gs_invertsize=32)
    p = gm.plan_pipeline(grass, ratio_bits=f32_bits(3.0), lds_override=16384)
    assert p.params == (ONCHIP, 219, 73, f32_bits(3.0), 16384)
    assert (p.ratio_source, p.budget_source) == ("command", "command")
    # offchip under hints: explicit offchip keeps them, so planning the output again is stable
    q = gm.plan_pipeline(grass, ratio_bits=f32_bits(3.0), lds_override=64)
    assert (q.reason, q.params) == ("no-fit", (OFFCHIP, 0, 0, f32_bits(3.0), 64))


def test_plan_explain_and_json() -> None:
    p = gm.plan_pipeline(gs_pipe("fur"))
    line = p.explain()
    assert line.startswith("fur: GSSetParameters onchip vps=136 pps=136: ")
    assert "P=136 V=136 LDS 32640/32768 B" in line and "saves up to 480 B" in line
    j = p.to_json()
    assert j["mode"] == "onchip" and j["reason"] == "fits" and j["explain"] == line
    t = gm.plan_pipeline(gs_pipe("t", hs="h", ds="d", topology="patch"))
    assert "driver default" in t.explain() and "always-offchip" in t.explain()
    k = gm.kept_plan(gs_pipe("t", hs="h", ds="d", topology="patch"), gm.GsParams(ONCHIP))
    assert "warning" in k.explain() and "the model would choose GSSetParameters null" in k.explain()
    assert gm.format_params(gm.GsParams(ONCHIP, 219, 73, f32_bits(3.0), 16384)) == \
        "GSSetParameters onchip vps=219 pps=73 ratio=3 lds=16384"


# ============================================================================ the pass
def test_registered_and_options() -> None:
    assert PASSES["gs-plan"].endswith(":GsPlanPass")
    assert get_pass("gs-plan") is GsPlanPass and GsPlanPass.name == "gs-plan"
    (p,) = parse_pipeline("gs-plan{lds-limit=16384,min-prims=8,mode=keep}")
    assert p == GsPlanPass(lds_limit=16384, min_prims=8, mode="keep")
    assert str(p) == "gs-plan{lds-limit=16384,min-prims=8,mode=keep}"
    for bad in ("gs-plan{lds-limit=0}", "gs-plan{lds-limit=65537}", "gs-plan{min-prims=0}",
                "gs-plan{mode=fast}", "gs-plan{lds-limit=big}"):
        with pytest.raises(UsageError):
            parse_pipeline(bad)


def test_emits_only_where_parameters_change() -> None:
    b = builder()
    for name in ("fur", "mesh", "fur", "fur", "cube", "fur"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s)
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (ONCHIP, 36, 36, 0, 0), (ONCHIP, 136, 136, 0, 0)]
    assert rep["emitted"] == 3 and rep["removed"] == 0
    assert [e["pipeline"] for e in rep["pipelines"]] == ["fur", "cube"]
    assert [e["draws"] for e in rep["pipelines"]] == [4, 1]
    out.check()


def test_null_where_the_driver_default_returns() -> None:
    b = builder()
    for name in ("fur", "tess", "undecl", "fur"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    out, rep = run(b.build())
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (NULL, 0, 0, 0, 0), (ONCHIP, 136, 136, 0, 0)]
    reasons = {e["pipeline"]: e["reason"] for e in rep["pipelines"]}
    assert reasons == {"fur": "fits", "tess": "tessellation", "undecl": "undeclared"}


def test_superseded_input_commands_are_removed_or_replaced_in_place() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=8, pps=8)   # superseded: the first draw wants the default
    b.SetPipelineState("tess")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("offchip")                # replaced in place by fur's plan
    b.GSSetParameters("onchip", lds=8192, line=42)  # the last of the span: the anchor
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s)
    names = [c.name for c in out.commands()]
    assert names == ["OMSetRenderTargets", "SetPipelineState", "DrawInstanced", "GSSetParameters",
                     "SetPipelineState", "DrawInstanced"]
    # the lds=8192 hint in force for fur's draw restricts the budget: 34 x 240 = 8160
    assert gs_rows(out) == [(ONCHIP, 34, 34, 0, 8192)]
    assert rep["removed"] == 3 and rep["emitted"] == 1
    assert out.line[3] == 42


def test_already_planned_input_is_unchanged_and_the_pass_is_idempotent() -> None:
    b = builder()
    for name in ("cube", "mesh", "tess", "fur", "undecl", "cube"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    out, _ = run(b.build())
    res = GsPlanPass().apply(out, AnalysisManager())
    assert not res.modified and res.stream is out
    assert res.report["emitted"] == 0 and res.report["removed"] == 0


def test_non_gs_draws_and_other_commands_are_untouched() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=64, pps=64)
    b.SetPipelineState("mesh")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, _ = run(s)
    keep_in, keep_out = np.flatnonzero(s.op != GS), np.flatnonzero(out.op != GS)
    assert out.take(keep_out) == s.take(keep_in)
    assert len(out) == len(s)  # the input's set was replaced in place (mesh does not see GS parameters)


def test_no_gs_draws_leaves_the_stream_alone() -> None:
    b = builder()
    b.GSSetParameters("onchip")
    b.SetPipelineState("mesh")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    res = GsPlanPass().apply(s, AnalysisManager())
    assert not res.modified and res.stream is s and res.report["gs_draws"] == 0


def test_opaque_commands_see_the_input_parameters() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("ExecuteSomethingUnknown")
    b.GSSetParameters("null")
    b.SetPipelineState("tess")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("Marker")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s)
    opq_in, opq_out = np.flatnonzero(s.op == OPAQUE), np.flatnonzero(out.op == OPAQUE)
    assert (inforce_at(out, opq_out) == inforce_at(s, opq_in)).all()
    # fur planned; tess (GS + tessellation) offchip; the last fur runs under what the Opaque command
    # left (unknown to the state model): it keeps it, nothing is put before it
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (ONCHIP, 8, 8, 0, 0), (NULL, 0, 0, 0, 0)]
    assert [c.name for c in out.commands()][-3:] == ["Opaque", "SetPipelineState", "DrawInstanced"]
    assert [e["reason"] for e in rep["pipelines"]] == ["fits", "tessellation", "unknown"]


def test_draws_after_an_opaque_command_keep_what_it_left() -> None:
    """What is in force after an Opaque command is unknown (the state model's rule): gs-plan restored the
    parameters it saw before the Opaque command as if they were still in force. Here it put the input's
    onchip parameters before the nomerge GS+tessellation draw (which ran under whatever the Opaque
    command left), adding a gs-onchip-tessellation finding; and it dropped the input's
    GSSetParameters after an Opaque command that repeated the parameters before it."""
    validate = pytest.importorskip("drawopt.validate")
    b = builder()
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.Opaque("X")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("tess")
    b.DrawInstanced(3, 1, 0, 0, flags="nomerge")
    s = b.build()
    out, rep = run(s)
    assert out == s and [e["reason"] for e in rep["pipelines"]] == ["unknown", "unknown"]
    assert not [f for f in validate.findings(out) if f.rule == "gs-onchip-tessellation"]
    b = builder()
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.SetPipelineState("fur")
    b.Opaque("X")
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.DrawInstanced(3, 1, 0, 0, flags="nomerge")
    s = b.build()
    out, _ = run(s)
    assert gs_rows(out) == gs_rows(s) == [(ONCHIP, 8, 8, 0, 0)] * 2


def test_a_draw_of_an_unknown_pipeline_sees_the_input_parameters() -> None:
    """After an Opaque command the pipeline is unknown too: a draw there may be a GS draw."""
    b = builder()
    b.SetPipelineState("fur")
    b.Opaque("X")
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.DrawInstanced(3, 1, 0, 0)        # fur's plan would be onchip 136, but the pipeline is unknown
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    plan = plan_stream(s)
    assert plan.blind_draws.tolist() == [4] and plan.gs_draws.tolist() == [6]
    out, _ = run(s)
    draws = np.flatnonzero(out.mask("DrawInstanced"))
    assert inforce_at(out, draws).tolist() == [[ONCHIP, 8, 8, 0, 0], [ONCHIP, 136, 136, 0, 0]]


def test_tessellation_draws_without_gs_never_run_onchip() -> None:
    b = builder()
    for name in ("fur", "mesh", "fur", "patches", "patches", "fur"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, _ = run(s)
    draws = np.flatnonzero(out.mask("DrawInstanced"))
    fur = [ONCHIP, 136, 136, 0, 0]
    assert inforce_at(out, draws).tolist() == [fur, fur, fur, [0] * 5, [0] * 5, fur]
    assert len(gs_rows(out)) == 3
    # a stream that keeps an explicit offchip for them is left as it is
    b = builder()
    b.GSSetParameters("offchip", ratio=2)
    for name in ("tess", "patches"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    assert GsPlanPass().apply(s, AnalysisManager()).stream is s


def test_output_has_no_onchip_tessellation_findings() -> None:
    validate = pytest.importorskip("drawopt.validate")
    rng = np.random.default_rng(99)
    checked = 0
    for _ in range(40):
        s = random_stream(rng, "list")
        out, rep = run(s)
        if rep["gs_draws"]:
            found = [f for f in validate.findings(out) if f.rule == "gs-onchip-tessellation"]
            assert not found, found[0]
            checked += 1
    assert checked > 20


def test_nomerge_draws_keep_their_parameters() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=8, pps=8)
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0, flags="nomerge")
    b.DrawInstanced(3, 1, 0, 0)
    out, rep = run(b.build())
    draws = np.flatnonzero(out.mask("DrawInstanced"))
    assert inforce_at(out, draws).tolist() == [[ONCHIP, 8, 8, 0, 0], [ONCHIP, 136, 136, 0, 0]]
    assert out.flags[draws[0]] == FLAG_NOMERGE
    assert [e["reason"] for e in rep["pipelines"]] == ["nomerge", "fits"]


def test_keep_mode_respects_explicit_choices() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=16, pps=16)
    b.SetPipelineState("tess")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s, mode="keep")
    draws = np.flatnonzero(out.mask("DrawInstanced"))
    assert inforce_at(out, draws).tolist() == [[ONCHIP, 16, 16, 0, 0], [ONCHIP, 136, 136, 0, 0]]
    kept = rep["pipelines"][0]
    assert kept["reason"] == "kept" and "always-offchip" in kept["warning"]
    auto, _ = run(s)
    assert inforce_at(auto, np.flatnonzero(auto.mask("DrawInstanced"))).tolist()[0] == [0, 0, 0, 0, 0]


def test_forced_modes() -> None:
    b = builder()
    b.GSSetParameters("onchip", vps=64, pps=64)
    for name in ("fur", "cube"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    off, rep = run(s, mode="offchip")
    assert gs_rows(off) == [] and {e["reason"] for e in rep["pipelines"]} == {"forced-offchip"}
    on, _ = run(s, mode="onchip", lds_limit=8192)
    assert gs_rows(on) == [(ONCHIP, 34, 34, 0, 0), (ONCHIP, 9, 9, 0, 0)]
    auto, _ = run(s, lds_limit=8192)
    assert gs_rows(auto) == [(ONCHIP, 34, 34, 0, 0), (NULL, 0, 0, 0, 0)]


def test_list_tail_is_left_alone() -> None:
    b = builder()
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("offchip", vps=4)
    b.GSSetParameters("offchip", vps=4)
    out, _ = run(b.build())
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (OFFCHIP, 4, 0, 0, 0), (OFFCHIP, 4, 0, 0, 0)]
    b = builder()
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    out, _ = run(b.build())
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0)]  # the end of a command list is nobody's state


def test_bundle_inherits_the_callers_parameters_and_hands_back_its_own() -> None:
    # no GSSetParameters: every draw runs under the caller's parameters, the bundle is left alone
    b = builder("bundle")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    res = GsPlanPass().apply(s, AnalysisManager())
    assert not res.modified and res.stream is s
    assert [(e["reason"], e["mode"], e["params"]) for e in res.report["pipelines"]] == \
        [("inherited", "inherited", "(inherited)")]
    # before the first set: inherited; after it: planned; the end state is the input's
    b = builder("bundle")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("patches")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")
    b.SetPipelineState("fur")
    b.DrawInstanced(3, 1, 0, 0)
    b.SetPipelineState("cube")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, rep = run(s)
    names = [c.name for c in out.commands()]
    assert names.index("GSSetParameters") == 5  # nothing before the bundle's own first set
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (ONCHIP, 36, 36, 0, 0), (NULL, 0, 0, 0, 0)]
    assert out.op[-1] == GS  # hands the caller back the input's end state (null)
    assert [e["reason"] for e in rep["pipelines"]] == ["inherited", "fits", "fits"]
    assert "(inherited)" in rep["explain"][0]


def test_bundle_keeps_exactly_its_descriptor_heaps() -> None:
    b = StreamBuilder(kind="bundle")
    b.heap("res", "CBV_SRV_UAV", 64)
    b.heap("samp", "SAMPLER", 16)
    b.rootsig("rs", "table(srv,1)")
    b.pipeline("fur", vs="v", gs="g", ps="p", root="rs", gs_maxverts=6, gs_vertsize=32, gs_invertsize=48)
    b.pipeline("tess", vs="v", hs="h", ds="d", gs="g", ps="p", root="rs", topology="patch", gs_maxverts=3,
               gs_vertsize=32, gs_invertsize=32)
    b.SetDescriptorHeaps("res", "samp")
    b.SetGraphicsRootSignature("rs")
    b.GSSetParameters("onchip")
    for name in ("fur", "tess", "fur"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    out, _ = run(s)
    heaps = BY_NAME["SetDescriptorHeaps"].code

    def heap_sets(x: Stream) -> list[list[int]]:
        return [x.var(int(i)).tolist() for i in np.flatnonzero(x.op == heaps)]

    assert heap_sets(out) == heap_sets(s) == [[0, 1]]
    assert out.op[0] == heaps  # still first: nothing was put before it
    # fur onchip (in the input's place), tess null, fur onchip, and the bundle's end state (onchip)
    assert gs_rows(out) == [(ONCHIP, 136, 136, 0, 0), (NULL, 0, 0, 0, 0), (ONCHIP, 136, 136, 0, 0),
                            (ONCHIP, 0, 0, 0, 0)]


# ---------------------------------------------------------------- invariants on random streams
PIPES = ("fur", "cube", "tess", "undecl", "mesh", "patches")


def random_stream(rng: np.random.Generator, kind: str) -> Stream:
    b = builder(kind)
    for _ in range(int(rng.integers(0, 40))):
        r = rng.random()
        if r < 0.25:
            b.SetPipelineState(PIPES[int(rng.integers(0, len(PIPES)))])
        elif r < 0.45:
            mode = ("null", "offchip", "onchip")[int(rng.integers(0, 3))]
            kw = {}
            if rng.random() < 0.3:
                kw["ratio"] = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
            if rng.random() < 0.3:
                kw["lds"] = int(rng.choice([4096, 16384, 65536]))
            if rng.random() < 0.2:
                kw["vps"] = int(rng.integers(1, 300))
            b.GSSetParameters(mode, **kw)
        elif r < 0.5:
            b.Opaque("Unknown")
        else:
            b.DrawInstanced(3, 1, 0, 0, flags="nomerge" if rng.random() < 0.05 else 0)
    return b.build()


def unknown_at(s: Stream, idx: np.ndarray) -> np.ndarray:
    """Whether the GS parameters at commands ``idx`` are unknown to the state model: an Opaque
    command came after the last GSSetParameters before them (or, in a bundle, no set came yet)."""
    idx = np.asarray(idx, np.int64)
    last_set = np.maximum.accumulate(np.where(s.op == GS, np.arange(len(s)), -1))
    last_opq = np.maximum.accumulate(np.where(s.op == OPAQUE, np.arange(len(s)), -1))
    before = np.maximum(idx - 1, 0)
    ls = np.where(idx > 0, last_set[before], -1)
    lo = np.where(idx > 0, last_opq[before], -1)
    return (lo > ls) | ((ls < 0) & (s.header.kind == "bundle"))


def check_invariants(s: Stream, out: Stream, opts: dict) -> None:
    out.check()
    if plan_stream(s, **opts).gs_draws.shape[0] == 0:
        assert out is s, "a stream without GS draws is left alone"
        return
    # 1. only GSSetParameters changed
    assert out.take(np.flatnonzero(out.op != GS)) == s.take(np.flatnonzero(s.op != GS))
    # 2. every GS draw runs under its plan; Opaque commands under the input's parameters
    plan = plan_stream(s, **opts)
    again = plan_stream(out, **opts)
    inh = plan.desired[:, 0] < 0  # under parameters the state model does not know: no set before them
    assert np.array_equal(inh, unknown_at(s, plan.gs_draws))
    assert unknown_at(out, again.gs_draws[inh]).all()
    assert (again.gs_draws[inh & (plan.gs_draws < plan.inherit_end)] < again.inherit_end).all()
    assert np.array_equal(inforce_at(out, again.gs_draws)[~inh], plan.desired[~inh])
    opq_in, opq_out = np.flatnonzero(s.op == OPAQUE), np.flatnonzero(out.op == OPAQUE)
    assert np.array_equal(unknown_at(out, opq_out), unknown_at(s, opq_in))
    known = ~unknown_at(s, opq_in)
    assert np.array_equal(inforce_at(out, opq_out[known]), inforce_at(s, opq_in[known]))
    # so do draws of an unknown pipeline
    assert np.array_equal(unknown_at(out, again.blind_draws), unknown_at(s, plan.blind_draws))
    known = ~unknown_at(s, plan.blind_draws)
    assert np.array_equal(inforce_at(out, again.blind_draws[known]), inforce_at(s, plan.blind_draws[known]))
    # no tessellation draw without a GS runs under a known onchip mode it did not have
    tess_known = ~unknown_at(out, again.tess_draws)
    assert (inforce_at(out, again.tess_draws[tess_known])[:, 0] != ONCHIP).all()
    opq_inh = opq_out < again.inherit_end
    assert np.array_equal(opq_inh, opq_in < plan.inherit_end)
    # 3. a bundle ends under the input's parameters
    if s.header.kind == "bundle":
        end_in, end_out = np.array([len(s)]), np.array([len(out)])
        assert unknown_at(out, end_out)[0] == unknown_at(s, end_in)[0]
        if not unknown_at(s, end_in)[0]:
            assert np.array_equal(inforce_at(out, end_out - 1), inforce_at(s, end_in - 1))
    # 4. minimal: between observation points at most one set, and it changes something (after an
    # Opaque command, anything does: what is in force there is unknown)
    obs = np.sort(np.concatenate([again.gs_draws, opq_out, again.tess_draws, again.blind_draws,
                                  [len(out)] if s.header.kind == "bundle" else []]))
    obs = obs.astype(np.int64)
    sets = np.flatnonzero(out.op == GS)
    seg = np.searchsorted(obs, sets)
    inner = seg < obs.shape[0]
    assert np.unique(seg[inner]).shape[0] == int(inner.sum())
    sets = sets[inner & (sets != again.inherit_end)]  # a bundle's first set changes the caller's state
    sets = sets[~unknown_at(out, sets)]
    before = inforce_at(out, np.maximum(sets - 1, 0))
    before[sets == 0] = 0
    rows = out.args[sets, :5].copy()
    rows[rows[:, 0] == 0] = 0
    assert (rows != before).any(axis=1).all()


@pytest.mark.parametrize("opts", [{}, {"mode": "keep"}, {"lds_limit": 8192, "min_prims": 8},
                                  {"mode": "offchip"}, {"mode": "onchip"}])
def test_random_streams_keep_the_invariants(opts: dict) -> None:
    rng = np.random.default_rng(1234)
    for trial in range(60):
        s = random_stream(rng, "bundle" if trial % 3 == 0 else "list")
        res = GsPlanPass(**opts).apply(s, AnalysisManager())
        check_invariants(s, res.stream, opts)
        again = GsPlanPass(**opts).apply(res.stream, AnalysisManager())
        assert not again.modified, "gs-plan is idempotent"


# ---------------------------------------------------------------- scale
def big_stream(n_draws: int, seed: int = 0) -> Stream:
    """A frame of ``n_draws`` draws over 24 pipelines (half with a GS), built columnar."""
    rng = np.random.default_rng(seed)
    b = StreamBuilder()
    b.target("rt", 64, 64)
    for k in range(24):
        kw: dict = {}
        if k % 2 == 0:
            kw = dict(gs="g", gs_maxverts=int(rng.integers(1, 40)), gs_vertsize=int(rng.choice([16, 32, 64])),
                      gs_invertsize=int(rng.choice([16, 32, 64])), gs_instances=int(rng.choice([1, 2, 4])))
            if k % 6 == 0:
                kw.update(hs="h", ds="d", topology="patch")
        b.pipeline(f"p{k}", vs="v", ps="p", **kw)
    head = b.build()
    pidx = np.array([head.decls.index[f"p{k}"] for k in range(24)])
    chg, gss, opq = (rng.random(n_draws) < f for f in (0.3, 0.05, 0.01))
    per = 1 + chg.astype(int) + gss + opq
    tot = int(per.sum())
    op = np.full(tot, BY_NAME["DrawInstanced"].code, np.uint16)
    args = np.zeros((tot, NARGS), np.int64)
    o = np.concatenate([[0], np.cumsum(per)[:-1]])
    op[o[chg]] = BY_NAME["SetPipelineState"].code
    args[o[chg], 0] = pidx[rng.integers(0, 24, int(chg.sum()))]
    o = o + chg
    op[o[gss]] = GS
    args[o[gss], 0] = rng.integers(0, 3, int(gss.sum()))
    args[o[gss], 3] = np.where(rng.random(int(gss.sum())) < 0.5, f32_bits(2.0), 0)
    o = o + gss
    op[o[opq]] = OPAQUE
    o = o + opq
    args[o, 0], args[o, 1] = 3, 1
    z = np.zeros(tot, np.int64)
    return Stream(head.header, head.decls, op, args, z, z.astype(np.int32), np.zeros(0, np.int64),
                  z.astype(np.uint8), z.astype(np.int32), ["Marker"])


def test_100k_draw_frame() -> None:
    s = big_stream(100_000)
    s.check()
    res = GsPlanPass().apply(s, AnalysisManager())
    assert res.modified and res.report["gs_draws"] > 30_000
    res.stream.check()
    assert res.stream.take(np.flatnonzero(res.stream.op != GS)) == s.take(np.flatnonzero(s.op != GS))
    assert not GsPlanPass().apply(res.stream, AnalysisManager()).modified


# ============================================================================ with the rest of drawopt
def _have(mod: str, attr: str | None = None) -> bool:
    try:
        m = importlib.import_module(mod)
    except ImportError:
        return False
    return attr is None or hasattr(m, attr)


needs_verifier = pytest.mark.skipif(
    not (_have("drawopt.verify", "verify") or _have("drawopt.analysis.state", "compare_effective_state")),
    reason="neither drawopt.verify nor drawopt.analysis.state.compare_effective_state is built yet")


@needs_verifier
def test_output_verifies_under_verify_each() -> None:
    b = builder()
    b.GSSetParameters("onchip", ratio=2)
    for name in ("fur", "mesh", "tess", "cube", "fur", "undecl"):
        b.SetPipelineState(name)
        b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    for opts in ("gs-plan", "gs-plan{lds-limit=16384}", "gs-plan{mode=offchip}", "gs-plan{mode=keep}"):
        pm = PassManager(parse_pipeline(opts), verify_each=True)
        out = pm.run(s)
        rec = pm.records[0]
        assert rec.verified if rec.modified else out is s
        assert rec.modified == (opts != "gs-plan{mode=keep}")  # keep: every GS draw runs under explicit params


@needs_verifier
def test_random_outputs_verify() -> None:
    rng = np.random.default_rng(7)
    for trial in range(20):
        s = random_stream(rng, "bundle" if trial % 4 == 0 else "list")
        PassManager([GsPlanPass()], verify_each=True).run(s)


def test_merges_compare_gs_parameters_but_not_for_pipelines_without_gs() -> None:
    state = pytest.importorskip("drawopt.analysis.state")
    b = builder()
    b.SetPipelineState("fur")
    b.GSSetParameters("onchip", vps=64, pps=64)
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("onchip", vps=32, pps=32)
    b.DrawInstanced(3, 1, 0, 0)          # GS draw under other parameters: another state
    b.DrawInstanced(3, 1, 0, 0)          # same parameters: the same state
    b.SetPipelineState("mesh")
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")
    b.DrawInstanced(3, 1, 0, 0)          # no GS: GS parameters are masked, the same state
    ids = state.track(b.build()).state.tolist()
    assert ids[0] != ids[1] and ids[1] == ids[2] and ids[3] == ids[4]


def test_dedupe_state_removes_repeated_identical_gs_parameters() -> None:
    dedupe = pytest.importorskip("drawopt.passes.dedupe_state")
    b = builder()
    b.SetPipelineState("fur")
    b.GSSetParameters("onchip", vps=64, pps=64)
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("onchip", vps=64, pps=64)   # repeated: goes
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("onchip", vps=32, pps=32)   # different: stays
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")                     # back to the default: stays
    b.DrawInstanced(3, 1, 0, 0)
    b.GSSetParameters("null")                     # repeated: goes
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    res = dedupe.DedupeStatePass().apply(s, AnalysisManager())
    assert gs_rows(res.stream) == [(ONCHIP, 64, 64, 0, 0), (ONCHIP, 32, 32, 0, 0), (NULL, 0, 0, 0, 0)]
    # gs-plan's own output has no repeated GS parameters for dedupe-state to remove
    planned, _ = run(s)
    assert gs_rows(dedupe.DedupeStatePass().apply(planned, AnalysisManager()).stream) == gs_rows(planned)
