"""Translation validator: semantics of effective records, the API, the CLI, speed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drawopt.cli import main
from drawopt.errors import UsageError
from drawopt.ir.formats import loads
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passmanager import PassManager, verify_streams
from drawopt.verify import VerifyResult, verify
from drawopt.verify.model import Canon
from drawopt.verify.records import KEY_FIELDS, expand
from drawopt.verify.slots import column_universe

HEAD = """drawopt 1 context=graphics kind={kind} fast_semantics=off
buffer verts size=65536
buffer ib16 size=65536
buffer ib32 size=65536
buffer args size=1024
buffer tex size=1024
target rt 64x64 R8G8B8A8_UNORM
target rt2 64x64 R8G8B8A8_UNORM
depth z 64x64 D32_FLOAT
heap res CBV_SRV_UAV 16
heap res2 CBV_SRV_UAV 16
view res[0] srv verts
view res[1] srv tex
view res2[0] srv verts
rootsig main table(srv,1) constants(2) srv
pipeline a vs=v ps=f layout=pos blend=alpha root=main params=0,1
pipeline o vs=v ps=f layout=pos depth=less,write root=main params=0,1
pipeline np vs=v ps=f layout=pos blend=alpha root=main params=0,1 contract=no_primitive_id
pipeline oi vs=v ps=f layout=pos blend=additive root=main params=0,1 contract=order_independent
pipeline ld vs=v ps=f layout=pos blend=alpha root=main params=0,1 contract=instance_data(perdraw=2)
pipeline samp vs=v ps=f layout=pos blend=alpha root=main params=0 reads=tex
pipeline wr vs=v ps=f layout=pos root=main params=0 writes=tex
"""
PRE = """OMSetRenderTargets rt z
SetGraphicsRootSignature main
SetDescriptorHeaps res
SetGraphicsRootDescriptorTable 0 res[0]
IASetPrimitiveTopology TRIANGLELIST
IASetVertexBuffers 0 verts 0 16
"""


def S(body: str, kind: str = "list", extra: str = "") -> Stream:
    return loads(HEAD.format(kind=kind) + extra + body, file="<test>")


def V(a: str, b: str, reorder: str = "declared", **kw) -> VerifyResult:
    return verify(S(a, **kw), S(b, **kw), reorder)


# --------------------------------------------------------------------------- basics
def test_identity_and_result_fields() -> None:
    s = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n")
    r = verify(s, s)
    assert r.equivalent and r.reason is None and bool(r)
    assert r.details["stats"]["records"] == [1, 1]
    assert r.to_json()["equivalent"] is True


def test_reason_names_lines_in_both_streams() -> None:
    a = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n"
    b = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 1\n"
    r = V(a, b)
    assert not r.equivalent
    assert r.reason == "draw 1 (line 31 vs line 31): StartInstanceLocation 0 != 1"
    assert (r.line_a, r.line_b) == (31, 31) and r.cmd_a == r.cmd_b == 8
    assert r.details["field"] == "inst"


def test_command_index_when_there_are_no_lines() -> None:
    s = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n")
    t = s.take(list(range(len(s) - 2)) + [len(s) - 1, len(s) - 2])
    s.line[:] = 0
    t.line[:] = 0
    r = verify(s, t)
    assert "command 7 and command 8 swapped" in r.reason
    assert (r.line_a, r.cmd_a) == (7, 7)


def test_unknown_policy_is_a_usage_error() -> None:
    s = S("")
    with pytest.raises(UsageError):
        verify(s, s, "sometimes")


def test_header_and_declarations_must_agree() -> None:
    a = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n")
    b = loads((HEAD.format(kind="list") + PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n")
              .replace("fast_semantics=off", "fast_semantics=on"))
    assert "header differs: fast_semantics off != on" in verify(a, b).reason
    c = loads((HEAD.format(kind="list") + PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n")
              .replace("pipeline a vs=v ps=f", "pipeline a vs=v2 ps=f"))
    assert "pipeline 'a' is declared differently" in verify(a, c).reason


def test_new_declarations_are_allowed() -> None:
    a = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n"
    assert V(a, a, extra="").equivalent
    assert verify(S(a), S(a, extra="buffer generated size=64 cpu\ndata generated 1 2 3\n")).equivalent


# --------------------------------------------------------------------------- order and policies
@pytest.mark.parametrize("pipe,ok", [("a", ()), ("o", ("opaque",)), ("oi", ("declared", "opaque"))])
def test_swap_by_policy(pipe: str, ok: tuple[str, ...]) -> None:
    a = PRE + f"SetPipelineState {pipe}\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n"
    b = PRE + f"SetPipelineState {pipe}\nDrawInstanced 3 1 3 0\nDrawInstanced 3 1 0 0\n"
    for pol in ("none", "declared", "opaque"):
        r = V(a, b, pol)
        assert r.equivalent == (pol in ok), (pol, r.reason)
        if not r.equivalent:
            assert "swapped" in r.reason


def test_opaque_policy_needs_the_same_depth_target() -> None:
    extra = "depth z2 64x64 D32_FLOAT\n"
    a = PRE + "SetPipelineState o\nDrawInstanced 3 1 0 0\nOMSetRenderTargets rt z2\nDrawInstanced 3 1 3 0\n"
    b = PRE + "SetPipelineState o\nOMSetRenderTargets rt z2\nDrawInstanced 3 1 3 0\nOMSetRenderTargets rt z\n" \
        "DrawInstanced 3 1 0 0\n"
    assert not verify(S(a, extra=extra), S(b, extra=extra), "opaque").equivalent


def test_commuting_group_is_split_by_a_read_of_the_target() -> None:
    extra = "view res[2] srv rt\npipeline rd vs=v ps=f layout=pos blend=alpha root=main params=0 reads=rt\n"
    a = PRE + "SetPipelineState oi\nDrawInstanced 3 1 0 0\nOMSetRenderTargets rt2\nSetPipelineState rd\n" \
        "DrawInstanced 3 1 0 0\nOMSetRenderTargets rt z\nSetPipelineState oi\nDrawInstanced 3 1 3 0\n"
    b = PRE + "SetPipelineState oi\nDrawInstanced 3 1 3 0\nOMSetRenderTargets rt2\nSetPipelineState rd\n" \
        "DrawInstanced 3 1 0 0\nOMSetRenderTargets rt z\nSetPipelineState oi\nDrawInstanced 3 1 0 0\n"
    r = verify(S(a, extra=extra), S(b, extra=extra))
    assert not r.equivalent


def test_write_after_read_is_a_hazard() -> None:
    a = PRE + "SetPipelineState samp\nOMSetRenderTargets rt2\nDrawInstanced 3 1 0 0\nSetPipelineState wr\n" \
        "OMSetRenderTargets rt\nDrawInstanced 3 1 0 0\n"
    b = PRE + "SetPipelineState wr\nOMSetRenderTargets rt\nDrawInstanced 3 1 0 0\nSetPipelineState samp\n" \
        "OMSetRenderTargets rt2\nDrawInstanced 3 1 0 0\n"
    r = V(a, b)
    assert not r.equivalent and "reads tex after 0 write(s) in the original but 1" in r.reason


# --------------------------------------------------------------------------- merging
def test_contiguous_ranges_merge_only_without_primitive_id() -> None:
    a = PRE + "SetPipelineState {p}\nIASetIndexBuffer ib16 R16_UINT 0\nDrawIndexedInstanced 6 1 0 0 0\n" \
        "DrawIndexedInstanced 3 1 6 0 0\n"
    b = PRE + "SetPipelineState {p}\nIASetIndexBuffer ib16 R16_UINT 0\nDrawIndexedInstanced 9 1 0 0 0\n"
    assert V(a.format(p="np"), b.format(p="np")).equivalent
    r = V(a.format(p="a"), b.format(p="a"))
    assert not r.equivalent and "SV_PrimitiveID" in r.reason
    strip = a.replace("TRIANGLELIST", "TRIANGLESTRIP")
    r = V(strip.format(p="np"), b.replace("TRIANGLELIST", "TRIANGLESTRIP").format(p="np"))
    assert not r.equivalent and "list topology" in r.reason
    partial = a.replace("DrawIndexedInstanced 6 1 0 0 0", "DrawIndexedInstanced 4 1 0 0 0") \
        .replace("DrawIndexedInstanced 3 1 6 0 0", "DrawIndexedInstanced 5 1 4 0 0")
    assert not V(partial.format(p="np"), b.format(p="np")).equivalent   # not whole triangles


def test_vertex_ranges_merge_keeping_sv_vertex_id() -> None:
    a = PRE + "SetPipelineState np\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n"
    assert V(a, PRE + "SetPipelineState np\nDrawInstanced 6 1 0 0\n").equivalent
    assert not V(a, PRE + "SetPipelineState np\nDrawInstanced 6 1 3 0\n").equivalent


def test_instances_merge_only_when_sv_instance_id_is_not_observed() -> None:
    a = PRE + "SetPipelineState {p}\nDrawInstanced 3 2 0 0\nDrawInstanced 3 1 0 2\n"
    b = PRE + "SetPipelineState {p}\nDrawInstanced 3 3 0 0\n"
    assert V(a.format(p="ld"), b.format(p="ld")).equivalent   # per-draw contract, native form
    r = V(a.format(p="a"), b.format(p="a"))
    assert not r.equivalent and "SV_InstanceID is observable" in r.reason
    # merging instance runs out of order is still caught
    c = PRE + "SetPipelineState ld\nDrawInstanced 3 1 0 1\nDrawInstanced 3 1 0 0\n"
    assert not V(c, PRE + "SetPipelineState ld\nDrawInstanced 3 2 0 0\n").equivalent


def test_nomerge_draws_are_not_merged() -> None:
    a = PRE + "SetPipelineState np\nDrawInstanced 3 1 0 0 @nomerge\nDrawInstanced 3 1 3 0\n"
    r = V(a, PRE + "SetPipelineState np\nDrawInstanced 6 1 0 0\n")
    assert not r.equivalent and "VertexCount 3 != 6" in r.reason


def test_large_instance_counts_stay_one_record() -> None:
    a = PRE + "SetPipelineState ld\nDrawInstanced 4 4000000000 0 0\n"
    r = V(a, a)
    assert r.equivalent and r.details["stats"]["records"] == [1, 1]


# --------------------------------------------------------------------------- indirect draws
CPU = "buffer cpu size=256 cpu\ndata cpu 3 1 0 0 3 2 3 1\n"


def test_cpu_written_indirect_decodes_to_direct_draws() -> None:
    a = PRE + "SetPipelineState a\nMultiDrawInstancedIndirect 2 cpu 0 16\n"
    b = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 2 3 1\n"
    assert verify(S(a, extra=CPU), S(b, extra=CPU)).equivalent
    c = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 2 3 2\n"
    assert "StartInstanceLocation 1 != 2" in verify(S(a, extra=CPU), S(c, extra=CPU)).reason


def test_gpu_written_args_compare_symbolically() -> None:
    extra = "pipeline gen cs=g writes=args\n"
    head = "SetPipelineState gen\nDispatch 1 1 1\nFlushGpuCacheRange DEFAULT_PFP\n"
    a = head + PRE + "SetPipelineState a\nMultiDrawInstancedIndirect 3 args 0 16\n"
    b = head + PRE + "SetPipelineState a\nDrawInstancedIndirect args 0\nMultiDrawInstancedIndirect 2 args 16 16\n"
    assert verify(S(a, extra=extra), S(b, extra=extra)).equivalent
    c = head + PRE + "SetPipelineState a\nMultiDrawInstancedIndirect 3 args 0 20\n"
    assert "stride" in verify(S(a, extra=extra), S(c, extra=extra)).reason
    auto = head + PRE + "SetPipelineState a\nMultiDrawInstancedIndirectAuto args 512 3 args 0 16\n"
    assert not verify(S(a, extra=extra), S(auto, extra=extra)).equivalent   # a GPU count is not a fixed one
    assert verify(S(auto, extra=extra), S(auto, extra=extra)).equivalent


# --------------------------------------------------------------------------- contracts
def test_x_contract_base_none_reads_the_record_base_vertex() -> None:
    extra = ("pipeline x vs=pull ps=f root=main params=0,1,2 contract=x(vertex_bits=16,perdraw=2)\n"
             "buffer pd size=64 cpu\ndata pd 0 0 7 3\n")
    a = PRE + "SetPipelineState x\nIASetIndexBuffer ib16 R16_UINT 0\nDrawIndexedInstanced 3 1 0 0 0\n" \
        "DrawIndexedInstanced 3 1 3 7 3\n"
    b = PRE + "SetPipelineState x\nSetGraphicsRootShaderResourceView 2 pd 0\nDrawIndexedX ib16 0 R16_UINT 3 0\n" \
        "DrawIndexedX ib16 6 R16_UINT 3 65536\n"
    assert verify(S(a, extra=extra), S(b, extra=extra)).equivalent
    r = verify(S(a, extra=extra), S(b.replace("65536", "65537"), extra=extra))
    assert "base=none" in r.reason   # low bits are not allowed under base=none


def test_x_rules_on_the_optimized_stream_only() -> None:
    extra = ("pipeline x vs=pull ps=f root=main params=0,1,2 contract=x(vertex_bits=16,perdraw=2,max_index=65535,"
             "base=vertex)\nbuffer pd size=16 cpu\ndata pd 0 0 4 0\n")
    a = PRE + "SetPipelineState x\nIASetIndexBuffer ib16 R16_UINT 0\nDrawIndexedInstanced 3 1 0 4 0\n"
    b = PRE + "SetPipelineState x\nSetGraphicsRootShaderResourceView 2 pd 0\nDrawIndexedX ib16 0 R16_UINT 3 4\n"
    r = verify(S(a, extra=extra), S(b, extra=extra))
    assert "max_index 65535 overflow vertex_bits=16" in r.reason
    c = b.replace("R16_UINT 3 4", "R16_UINT 3 131072")
    assert "past the end of 'pd'" in verify(S(a, extra=extra), S(c, extra=extra)).reason
    # the boundary: low bits 1 + max_index 65535 reach 2^16, the draw id's first bit
    a1, b1 = a.replace("3 1 0 4 0", "3 1 0 1 0"), b.replace("R16_UINT 3 4", "R16_UINT 3 1")
    assert "max_index 65535 overflow vertex_bits=16" in verify(S(a1, extra=extra), S(b1, extra=extra)).reason
    d = b.replace("SetGraphicsRootShaderResourceView 2 pd 0\n", "")
    assert "nothing is bound at root parameter 2" in verify(S(a, extra=extra), S(d, extra=extra)).reason


# --------------------------------------------------------------------------- state
def test_undefined_state_may_become_anything_in_a_list_but_not_in_a_bundle() -> None:
    a = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n"
    b = PRE + "SetPipelineState a\nSetGraphicsRoot32BitConstants 1 2 5 6\nDrawInstanced 3 1 0 0\n"
    assert V(a, b).equivalent                      # root constants never set: undefined, refinable
    r = V(a, b, kind="bundle")                     # a bundle inherits them from its caller
    assert not r.equivalent and "root constant 1[0] never set (the caller's value) != 0x5" in r.reason
    assert not V(b, a).equivalent                  # defined -> undefined is never allowed


def test_root_argument_kinds_replace_each_other() -> None:
    a = PRE + "SetPipelineState a\nSetGraphicsRoot32BitConstants 0 1 5\nSetGraphicsRootDescriptorTable 0 res[1]\n" \
        "DrawInstanced 3 1 0 0\n"
    b = PRE + "SetPipelineState a\nSetGraphicsRootDescriptorTable 0 res[1]\nDrawInstanced 3 1 0 0\n"
    assert V(a, b).equivalent


def test_opaque_commands_are_full_barriers() -> None:
    a = PRE + "SetPipelineState o\nDrawInstanced 3 1 0 0\nOpaque ClearState\nSetPipelineState o\n" \
        "DrawInstanced 3 1 3 0\n"
    b = PRE + "SetPipelineState o\nDrawInstanced 3 1 0 0\nOpaque ClearState\nDrawInstanced 3 1 3 0\n"
    r = V(a, b)
    assert not r.equivalent and "after the Opaque command" in r.reason
    c = PRE + ("SetPipelineState o\nOpaque ClearState\nSetPipelineState o\nDrawInstanced 3 1 3 0\n"
               "DrawInstanced 3 1 0 0\n")
    assert not V(a, c, "opaque").equivalent
    assert "Opaque 'ClearState' is missing" in V(a, PRE + "SetPipelineState o\nDrawInstanced 3 1 0 0\n"
                                                  "DrawInstanced 3 1 3 0\n").reason


def test_barriers_may_be_added_not_dropped() -> None:
    a = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nResourceBarrier rt RENDER_TARGET SHADER_RESOURCE\n"
    b = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n"
    assert "ResourceBarrier rt RENDER_TARGET SHADER_RESOURCE at line 31 is missing" in V(a, b).reason
    assert V(b, a).equivalent


# --------------------------------------------------------------------------- records
def test_effective_records_of_a_draw() -> None:
    s = S(PRE + "SetPipelineState a\nIASetIndexBuffer ib32 R32_UINT 64\nDrawIndexedInstanced 6 2 10 -3 4\n")
    c = Canon()
    R = expand(s, c, column_universe([s]))
    assert R.key.shape == (1, len(KEY_FIELDS))
    k = dict(zip(KEY_FIELDS, R.key[0].tolist()))
    assert k["src_buf"] == c.ids["ib32"] and k["src_off"] == 64 + 10 * 4 and k["fmt"] == 1
    assert (k["count"], k["bias"], k["inst"], k["ninst"], k["rel"]) == (6, -3, 4, 2, 0)
    assert R.w_res.tolist() == sorted([c.ids["rt"]]) and c.ids["verts"] in R.rd_res.tolist()


# --------------------------------------------------------------------------- integration
def test_pass_manager_uses_the_verifier() -> None:
    a = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\n")
    b = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 1\n")
    assert verify_streams(a, a) is None
    assert "StartInstanceLocation" in verify_streams(a, b)
    dedupe = pytest.importorskip("drawopt.passes.dedupe_state")
    s = S(PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nSetPipelineState a\nDrawInstanced 3 1 3 0\n")
    out = PassManager([dedupe.DedupeStatePass()], verify_each=True).run(s)
    assert len(out) < len(s)


def test_cli_exit_codes(tmp_path, capsys) -> None:
    a = tmp_path / "a.dstream"
    b = tmp_path / "b.dstream"
    bad = tmp_path / "bad.dstream"
    a.write_text(HEAD.format(kind="list") + PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n")
    b.write_text(HEAD.format(kind="list") + PRE + "SetPipelineState a\nDrawInstanced 3 1 3 0\nDrawInstanced 3 1 0 0\n")
    bad.write_text("drawopt 1\nNotACommand\n")
    assert main(["verify", str(a), str(a)]) == 0
    assert "equivalent" in capsys.readouterr().out
    assert main(["verify", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "not equivalent: target rt: blended draws at line 30 and line 31 swapped" in out
    assert f"{a}:30" in out
    assert main(["verify", str(a), str(b), "--json"]) == 1
    js = json.loads(capsys.readouterr().out)
    assert js["equivalent"] is False and js["line_b"] == 30
    assert main(["verify", str(a), str(b), "--reorder", "none"]) == 1
    assert main(["verify", str(a), str(bad)]) == 2
    assert "bad.dstream:2:1: error" in capsys.readouterr().err
    assert main(["verify", str(a), str(tmp_path / "missing.dstream")]) == 2


def test_hundred_thousand_draw_frame_verifies() -> None:
    # its speed is bench/run.py's to measure (no wall-clock assertions: the machine is shared)
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate("frame", 100_000, seed=5)
    r = verify(s, s)
    assert r.equivalent
    assert r.details["stats"]["records"][0] >= 100_000


def test_generated_streams_verify_against_themselves() -> None:
    gen = pytest.importorskip("drawopt.gen")
    for kind in ("quads", "frame", "gpu-driven", "bundle"):
        for pol in ("none", "declared", "opaque"):
            s = gen.generate(kind, 300, seed=2)
            assert verify(s, s.copy(), pol).equivalent
    # and a permutation of independent commands is noticed where it matters
    s = gen.generate("quads", 50, seed=2)
    draws = np.flatnonzero(s.op == 32)
    assert draws.size > 10


def test_verify_is_deterministic() -> None:
    a = PRE + "SetPipelineState a\nDrawInstanced 3 1 0 0\nDrawInstanced 3 1 3 0\n"
    b = PRE + "SetPipelineState a\nDrawInstanced 3 1 3 0\nDrawInstanced 3 1 0 0\n"
    assert V(a, b).reason == V(a, b).reason


def test_vertex_buffer_windows_fold_into_the_base_vertex() -> None:
    a = PRE + ("SetPipelineState np\nIASetIndexBuffer ib16 R16_UINT 0\nIASetVertexBuffers 0 verts 64 16\n"
               "DrawIndexedInstanced 6 1 0 0 0\nIASetVertexBuffers 0 verts 128 16\nDrawIndexedInstanced 6 1 6 0 0\n")
    b = PRE + ("SetPipelineState np\nIASetIndexBuffer ib16 R16_UINT 0\nIASetVertexBuffers 0 verts 0 16\n"
               "DrawIndexedInstanced 6 1 0 4 0\nDrawIndexedInstanced 6 1 6 8 0\n")
    assert V(a, b).equivalent
    assert "BaseVertexLocation) 8 != 9" in V(a, b.replace("6 1 6 8 0", "6 1 6 9 0")).reason
    # non-indexed: the window may not move into StartVertexLocation (SV_VertexID would change)
    c = PRE + ("SetPipelineState np\nIASetVertexBuffers 0 verts 64 16\nDrawInstanced 3 1 0 0\n"
               "IASetVertexBuffers 0 verts 112 16\nDrawInstanced 3 1 0 0\n")
    d = PRE + "SetPipelineState np\nIASetVertexBuffers 0 verts 64 16\nDrawInstanced 6 1 0 0\n"
    r = V(c, d)
    assert not r.equivalent and "SV_VertexID" in r.reason


_PASS_KNOWN: dict[tuple[str, str], str] = {}
"""(pass, generated kind) -> why that combination is expected to fail verification (none today)."""


def _pass_cases() -> list:
    from drawopt.passmanager import PASSES
    out = []
    for name in PASSES:
        for kind in ("frame", "quads", "gpu-driven", "bundle"):
            marks = [pytest.mark.xfail(reason=_PASS_KNOWN[(name, kind)])] if (name, kind) in _PASS_KNOWN else []
            out.append(pytest.param(name, kind, marks=marks, id=f"{name}-{kind}"))
    return out


@pytest.mark.parametrize("name,kind", _pass_cases())
def test_every_pass_runs_under_verify_each(name: str, kind: str) -> None:
    """Every registered pass, with --verify-each, on every generated kind (issue 3, item 4)."""
    from drawopt.passmanager import get_pass, parse_pipeline
    gen = pytest.importorskip("drawopt.gen")
    try:
        get_pass(name)
    except UsageError:
        pytest.skip(f"pass {name} not built")
    s = gen.generate(kind, 400, seed=7)
    passes = parse_pipeline(name, target="xbox-one")
    out = PassManager(passes, verify_each=True).run(s)   # raises PassError on a wrong rewrite
    assert verify(s, out).equivalent


# --------------------------------------------------------------------------- canonical commuting groups
def _group_stream(order: list[tuple[str, tuple[int, int]]], blend: str = "opaque", depth: str = "less,write",
                  contract: str = "no_primitive_id") -> Stream:
    b = StreamBuilder()
    b.buffer("vb", 1 << 16)
    b.target("rt", 64, 64)
    b.depth("z", 64, 64)
    for name, ps in (("a", "p"), ("b", "p2")):
        b.pipeline(name, vs="v", ps=ps, layout="pos", blend=blend, depth=depth, contract=contract)
    b.OMSetRenderTargets("rt", "z")
    b.IASetVertexBuffers(0, "vb", 0, 16)
    b.IASetPrimitiveTopology("TRIANGLELIST")
    for p, (count, start) in order:
        b.SetPipelineState(p)
        b.DrawInstanced(count, 1, start, 0)
    return b.build()


_ORIG = [("a", (3, 0)), ("a", (3, 3)), ("b", (3, 0))]
_MOVED = [("a", (3, 0)), ("b", (3, 0)), ("a", (3, 3))]


def test_merge_inside_a_commuting_group_does_not_depend_on_its_order() -> None:
    orig, opt = _group_stream(_ORIG), _group_stream(_MOVED)
    r = verify(orig, opt, reorder="opaque")
    assert r.equivalent, r.reason
    assert verify(opt, orig, reorder="opaque").equivalent
    # the merged form and any order of it are equivalent too
    merged = _group_stream([("b", (3, 0)), ("a", (6, 0))])
    assert verify(orig, merged, reorder="opaque").equivalent
    assert verify(opt, merged, reorder="opaque").equivalent
    # a and b are not order_independent: under 'declared' the order is observable
    r = verify(orig, opt, reorder="declared")
    assert not r.equivalent
    assert not verify(orig, opt, reorder="none").equivalent


def test_order_independent_group_is_compared_canonically_under_declared() -> None:
    kw = {"blend": "additive", "depth": "off", "contract": "no_primitive_id,order_independent"}
    orig, opt = _group_stream(_ORIG, **kw), _group_stream(_MOVED, **kw)
    r = verify(orig, opt, reorder="declared")
    assert r.equivalent, r.reason
    assert verify(orig, _group_stream([("a", (6, 0)), ("b", (3, 0))], **kw), reorder="declared").equivalent
    assert not verify(orig, opt, reorder="none").equivalent


@pytest.mark.parametrize("bad,what", [
    ([("a", (3, 0)), ("b", (3, 0)), ("a", (6, 3))], "VertexCount"),            # changed vertex count
    ([("a", (3, 0)), ("b", (3, 0)), ("a", (3, 4))], "VertexCount 6 != 3"),     # not contiguous: no merge
    ([("a", (3, 0)), ("b", (3, 0))], "VertexCount 6 != 3"),                    # dropped merge partner
    ([("a", (3, 3)), ("a", (3, 0))], "missing"),                               # dropped draw
    ([("a", (3, 0)), ("b", (3, 0)), ("a", (3, 3)), ("b", (3, 0))], "extra"),   # duplicated draw
    ([("a", (3, 0)), ("b", (3, 0)), ("a", (3, 3)), ("a", (3, 3))], ""),        # duplicated merge partner
    ([("a", (3, 0)), ("b", (3, 0)), ("b", (3, 3))], ""),                       # other pipeline
    ([("a", (3, 0)), ("a", (3, 0)), ("b", (3, 3))], ""),                       # ranges swapped between pipes
])
def test_wrong_rewrite_inside_a_commuting_group_is_rejected(bad: list, what: str) -> None:
    orig = _group_stream(_ORIG)
    r = verify(orig, _group_stream(bad), reorder="opaque")
    assert not r.equivalent and what in r.reason, r.reason
    assert not verify(orig, _group_stream(bad), reorder="declared").equivalent
    kw = {"blend": "additive", "depth": "off", "contract": "no_primitive_id,order_independent"}
    r = verify(_group_stream(_ORIG, **kw), _group_stream(bad, **kw), reorder="declared")
    assert not r.equivalent and what in r.reason, r.reason
