"""The core IR: vocabulary table, builder, vectorised checks, take/concat/Emitter, equality."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import streams

from drawopt.ir.decls import Buffer, Decls, Pipeline, RootParam, View, decl_from_json, decl_to_json, parse_contract
from drawopt.ir.ops import BY_CODE, BY_NAME, NARGS, OPS, Cat
from drawopt.ir.stream import Emitter, Stream, StreamBuilder, StreamCheckError, concat


def small() -> StreamBuilder:
    b = StreamBuilder(fast_semantics=True)
    b.buffer("verts", size=1 << 16)
    b.buffer("ib16", 4096)
    b.buffer("args", 4096, cpu=True, data=[6, 1, 0, 0])
    b.target("rt", 64, 64)
    b.depth("z", 64, 64)
    b.heap("res", size=16)
    b.view("res", 0, "srv", "verts")
    b.rootsig("main", "table(srv,1)", "constants(4)")
    b.pipeline("p", vs="pull", ps="flat", root="main", contract="x(vertex_bits=16,perdraw=1)")
    b.OMSetRenderTargets("rt", "z")
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("main")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.SetGraphicsRoot32BitConstants(1, 4, 0x3F800000, 0, 0, 0)
    b.SetPipelineState("p")
    b.IASetIndexBuffer("ib16", "R16_UINT", 0)
    b.DrawInstanced(6, 1, 0, 0, flags="nomerge")
    b.DrawIndexedX("ib16", 1024, "R16_UINT", 36, 65536)
    b.MultiDrawInstancedIndirect(2, "args", 0, 16)
    b.Opaque("ClearState")
    return b


def test_vocabulary_is_consistent() -> None:
    assert len({o.code for o in OPS}) == len(OPS)
    assert all(len(o.args) <= NARGS for o in OPS)
    assert all(o.example.split()[0] == o.name for o in OPS)
    for o in OPS:
        assert BY_NAME[o.name] is o and BY_CODE[o.code] is o
    # every seed command named in the SPEC is modelled
    for name in ("SetPipelineState", "SetDescriptorHeaps", "SetGraphicsRootDescriptorTable", "DrawIndexedX",
                 "MultiDrawIndexedInstancedIndirectAuto", "GpuSendPipelinedEvent", "FlushGpuCacheRange",
                 "FlushGpuCachesBottomOfPipe", "GSSetParameters", "CSEnableAutomaticGpuFlush"):
        assert name in BY_NAME


def test_builder_encodes_and_decodes() -> None:
    s = small().build()
    assert len(s) == 11
    c = s.command(4)
    assert c.name == "SetGraphicsRoot32BitConstants" and c.var == (0x3F800000, 0, 0, 0) and c["index"] == 1
    assert s.command(7).flags == 1
    assert s.command(8)["index_offset"] == 65536 and s.command(8)["format"] == "R16_UINT"
    assert s.command(0).var == ("rt", "z")
    assert s.cats()[7] == Cat.DRAW and s.cats()[10] == Cat.OPAQUE
    assert s.mask("DrawInstanced", "DrawIndexedX").sum() == 2


@pytest.mark.parametrize("call, message", [
    (lambda b: b.DrawIndexedX("ib16", 4090, "R16_UINT", 36, 0), "past the end of 'ib16'"),
    (lambda b: b.DrawIndexedX("ib16", 1, "R16_UINT", 1, 0), "multiple of the index size"),
    (lambda b: b.MultiDrawInstancedIndirect(3, "args", 4064, 16), "past the end of 'args'"),
    (lambda b: b.MultiDrawInstancedIndirect(3, "args", 0, 8), "stride must be"),
    (lambda b: b.OMSetRenderTargets("z", "rt"), "then at most one depth"),
])
def test_check_rejects_bad_commands(call, message) -> None:
    b = small()
    call(b)
    with pytest.raises(StreamCheckError, match=message):
        b.build()


@pytest.mark.parametrize("call, message", [
    (lambda b: b.DrawInstanced(6, 1, 0), "needs 4 arguments"),
    (lambda b: b.DrawInstanced(2**32, 1, 0, 0), "out of range"),
    (lambda b: b.IASetIndexBuffer("ib16", "R8_UINT", 0), "must be one of R16_UINT, R32_UINT"),
    (lambda b: b.SetPipelineState("nope"), "undeclared name 'nope'"),
    (lambda b: b.SetPipelineState("rt"), "'rt' is a target, expected pipeline"),
    (lambda b: b.SetGraphicsRootDescriptorTable(0, "res[16]"), "outside heap"),
    (lambda b: b.SetGraphicsRoot32BitConstants(1, 1, 5, bogus=1), "unknown keyword"),
])
def test_encode_rejects_bad_values(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(small())


def test_check_rejects_corrupt_columns() -> None:
    s = small().build()
    bad = s.copy()
    bad.op[3] = 999
    with pytest.raises(StreamCheckError, match="unknown opcode"):
        bad.check()
    bad = s.copy()
    bad.args[7, 0] = 2**32
    with pytest.raises(StreamCheckError, match="out of range") as e:
        bad.check()
    assert (e.value.cmd, e.value.arg) == (7, 0)
    bad = s.copy()
    bad.args[10, 0] = 7  # string index
    with pytest.raises(StreamCheckError, match="missing string"):
        bad.check()
    bad = s.copy()
    bad.var_len[4] = 3  # count says 4
    with pytest.raises(StreamCheckError, match="count says 4"):
        bad.check()
    bad = s.copy()
    bad.args[1, 5] = 1
    with pytest.raises(StreamCheckError, match="unused argument column"):
        bad.check()


def test_take_concat_emitter_keep_values() -> None:
    s = small().build()
    t = s.take([4, 0, 4])
    assert [c.name for c in t.commands()] == ["SetGraphicsRoot32BitConstants", "OMSetRenderTargets",
                                              "SetGraphicsRoot32BitConstants"]
    assert t.command(2).var == s.command(4).var
    assert concat([s.take(range(5)), s.take(range(5, len(s)))], s.header, s.decls, s.strings) == s
    em = Emitter(s)
    em.keep(np.arange(0, 8))
    nb = em.new()
    nb.append(BY_NAME["DrawInstanced"].code, [3, 1, 0, 0])
    em.keep(np.arange(8, len(s)))
    out = em.build_stream()
    out.check()
    assert len(out) == len(s) + 1 and out.command(8).args == (3, 1, 0, 0) and out.command(9) == s.command(8)
    assert out.command(10) == s.command(9)


def test_equality_ignores_lines_and_pool_layout() -> None:
    s = small().build()
    t = s.copy()
    t.line[:] = 7
    assert t == s
    t = s.take(np.arange(len(s)))
    assert t == s and t.pool.shape[0] == s.var_len.sum()
    t = s.copy()
    t.args[7, 0] = 3
    assert t != s


def test_decls_roundtrip_and_references() -> None:
    d = Decls()
    d.add(Buffer("b", 64, cpu=True, data=np.array([1, 2, 3])))
    d.add(RootParamSig := __import__("drawopt.ir.decls", fromlist=["RootSig"]).RootSig(
        "rs", (RootParam.parse("table(srv,2,cbv,1)"), RootParam.parse("constants(3)"), RootParam("cbv"))))
    d.add(Pipeline("p", vs="v", root="rs", params=(0, 2), contract=parse_contract("x(vertex_bits=20,perdraw=2)")))
    for x in d:
        assert decl_from_json(decl_to_json(x)) == x
    assert str(RootParamSig.params[0]) == "table(srv,2,cbv,1)"
    with pytest.raises(ValueError, match="already declared"):
        d.add(Buffer("b", 4))
    with pytest.raises(ValueError, match="undeclared"):
        d.add(View("heap", 0, "srv", "b"))
    with pytest.raises(ValueError, match="root parameter 5"):
        d.add(Pipeline("q", vs="v", root="rs", params=(5,)))
    with pytest.raises(ValueError, match="unknown contract clause"):
        parse_contract("wave_magic")
    with pytest.raises(ValueError, match="vertex_bits must be"):
        parse_contract("x(vertex_bits=40)")
    with pytest.raises(ValueError, match="exceed its size"):
        Buffer("c", 4, data=[1, 2])


def test_stream_columns_validated() -> None:
    with pytest.raises(ValueError, match="column flags"):
        Stream(op=np.zeros(2, np.uint16), args=np.zeros((2, NARGS)), var_off=np.zeros(2), var_len=np.zeros(2),
               flags=np.zeros(1), line=np.zeros(2))


def test_generated_buffer_names_and_lift_lists() -> None:
    """``Decls.free_name`` (how passes name generated buffers) and ``resolve_lift`` (the one
    lift-list resolver pack-x, mdi, the state masks and the replayer share)."""
    from drawopt.ir.decls import Buffer, Decls, RootParam, RootSig, resolve_lift

    d = Decls()
    assert d.free_name("gen") == "gen0" and d.free_name("gen", bare_first=True) == "gen"
    d.add(Buffer("gen", 16))
    d.add(Buffer("gen0", 16))
    assert d.free_name("gen") == "gen1" and d.free_name("gen", bare_first=True) == "gen1"
    rs = RootSig("rs", (RootParam("table", ranges=(("srv", 1),)), RootParam("constants", 2), RootParam("srv")))
    assert resolve_lift("1.0+1.1+0", rs, 2) == (((1, 0), (1, 1), (0, 0)), ("constants", "constants", "table"))
    for bad, why in (("1.x", "is not P or P.k"), ("2", "other than perdraw"), ("1.2", "has no value 2"),
                     ("0.1", "has no value 1"), ("1+1.0", "listed twice"), ("7", "other than perdraw"),
                     ("c1.0", "is not P or P.k"), ("1.0++1.1", "empty item"), ("1.0+", "empty item")):
        with pytest.raises(ValueError, match=why):
            resolve_lift(bad, rs, 2)
    assert resolve_lift("", rs, 2) == ((), ())   # no lift= list: no items


def test_lift_lists_are_checked_when_a_pipeline_is_declared() -> None:
    """``Decls.add`` resolves every per-draw clause's ``lift=`` list (and ``perdraw=``) against
    the root signature: the error names the clause and, through ``ContractError``, where the
    bad item is in the contract text; valid lists are unchanged."""
    from drawopt.ir.decls import ContractError, Decls, LiftError, Pipeline, RootParam, RootSig, lift_items

    assert lift_items("0+1.3+2.0") == ((0, 0), (1, 3), (2, 0)) and lift_items("") == ()
    with pytest.raises(LiftError) as ei:
        lift_items("0+1.3+0.0")
    assert ei.value.index == 2
    d = Decls()
    d.add(RootSig("rs", (RootParam("table", ranges=(("srv", 1),)), RootParam("constants", 2), RootParam("srv"))))
    d.add(Pipeline("ok", vs="v", root="rs", contract="x(vertex_bits=16,perdraw=2,lift=1.1+0),draw_data(perdraw=2)"))
    contract = "x(vertex_bits=16,perdraw=2,lift=1.0),draw_data(perdraw=2,lift=1.0+0.1)"
    with pytest.raises(ContractError, match=r"^pipeline 'bad': contract draw_data: lift item '0\.1'") as ce:
        d.add(Pipeline("bad", vs="v", root="rs", contract=contract))
    assert (ce.value.clause, ce.value.key, ce.value.item) == ("draw_data", "lift", 1)
    assert contract[ce.value.offset_in(contract):] == "0.1)"
    with pytest.raises(ContractError, match="lift= needs root="):
        d.add(Pipeline("noroot", vs="v", contract="x(vertex_bits=16,lift=0)"))
    with pytest.raises(ContractError, match="perdraw=3 is not a root parameter"):
        d.add(Pipeline("far", vs="v", root="rs", contract="draw_data(perdraw=3)"))
    assert "bad" not in d and "noroot" not in d and "far" not in d and "ok" in d
    with pytest.raises(ValueError, match="clause 'x' given twice"):   # which one would the error be in?
        Pipeline("twice", vs="v", root="rs", contract="x(vertex_bits=16,lift=1.0),x(vertex_bits=16,lift=9)")


def _splice_by_sort(stream: Stream, inserts, drops=()) -> Stream:
    """The definition of ``splice``: the new commands appended, then everything ordered by
    (position, new before old) with the dropped commands left out."""
    from drawopt.ir.stream import CommandBuffer

    n = len(stream)
    keep = np.ones(n, bool)
    keep[np.asarray(drops, np.int64)] = False
    cb, at = CommandBuffer(), []
    for pos in sorted(inserts):
        for code, a, v in inserts[pos]:
            cb.append(code, a, v)
            at.append(pos)
    both = concat([stream, cb.build(stream.header, stream.decls, stream.strings)], stream.header, stream.decls,
                  stream.strings)
    key = np.concatenate([2 * np.arange(n, dtype=np.int64) + 1, 2 * np.asarray(at, np.int64)])
    order = np.argsort(key, kind="stable")
    order = order[(order >= n) | keep[np.minimum(order, n - 1)]] if n else order
    return both.take(order)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(max_commands=30), st.data())
def test_splice_scatters_what_sorting_would_give(s: Stream, data) -> None:
    from drawopt.ir.formats import dumps
    from drawopt.ir.stream import splice

    n = len(s)
    drops = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n, unique=True)) if n else []
    donors = list(range(n))
    inserts: dict[int, list] = {}
    for pos in data.draw(st.lists(st.integers(0, n), max_size=6)):
        if donors:  # copies of existing commands (valid by construction), variadic tails included
            i = data.draw(st.sampled_from(donors))
            inserts.setdefault(pos, []).append((int(s.op[i]), s.args[i].tolist(), s.var(i).tolist()))
    got, want = splice(s, inserts, drops), _splice_by_sort(s, inserts, drops)
    assert dumps(got, "text") == dumps(want, "text")
    assert (got.op == want.op).all() and (got.args == want.args).all() and (got.var_len == want.var_len).all()
    assert (got.var_values() == want.var_values()).all() and (got.flags == want.flags).all()
