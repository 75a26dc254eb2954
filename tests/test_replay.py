"""Replay through OpenGL (EGL): equivalent rewrites render the same pixels, wrong ones do not.

Every test renders on whatever EGL gives (Mesa llvmpipe on CI) and is skipped, with
the reason, when no OpenGL 4.3 context can be made (``.ci/install-system.sh`` installs
what is needed). Rewrites are built by hand here (the optimizer's own outputs are
compared in the passes' tests); each equivalence test has planted wrong twins that
must show a difference, so none of them can pass by rendering nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Emitter, Stream, StreamBuilder, encode_command

replay_mod = pytest.importorskip("drawopt.replay")
from drawopt.replay import ReplayOptions, available, call_overhead, compare, replay  # noqa: E402

_OK, _WHY = available()
pytestmark = pytest.mark.replay
needs_gl = pytest.mark.skipif(not _OK, reason=f"no EGL OpenGL context: {_WHY}")

SIZE = (96, 96)


def render(s: Stream, **kw: Any):
    if not _OK:
        pytest.skip(f"no EGL OpenGL context: {_WHY}")
    s.check()
    return replay(s, size=kw.pop("size", SIZE), frames=1, warmup=False, **kw)


def assert_same(a: Stream, b: Stream, **kw: Any) -> None:
    ra, rb = render(a, **kw), render(b, **kw)
    c = compare(ra, rb)
    assert c.same, c.summary()
    # never vacuous: something was drawn on some colour target
    assert any(img.ndim == 3 and np.any(img != 0) for img in ra.images.values()), "nothing rendered"


def assert_differs(a: Stream, b: Stream, **kw: Any) -> None:
    c = compare(render(a, **kw), render(b, **kw))
    assert not c.same, "a planted wrong rewrite rendered the same images"


def rewrite(s: Stream, keep_prefix: int, cmds: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]],
            decls_extra: Callable[[Any], None] | None = None) -> Stream:
    """``s``'s first ``keep_prefix`` commands followed by ``cmds`` (name, values, keywords)."""
    decls = s.decls.copy()
    if decls_extra is not None:
        decls_extra(decls)
    em = Emitter(s)
    em.keep(np.arange(keep_prefix))
    cb = em.new()
    strings = list(s.strings)
    for name, vals, kw in cmds:
        sp = BY_NAME[name]
        row, var = encode_command(sp, list(vals), dict(kw), decls, strings)
        cb.append(sp.code, row, var)
    out = em.build(s.header, decls, strings)
    out.check()
    return out


def C(name: str, *vals: Any, **kw: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return (name, vals, kw)


def _base(pipeline_kw: dict[str, Any], rootsig: Sequence[str] = ("constants(2)",)) -> StreamBuilder:
    b = StreamBuilder()
    b.target("rt", 256, 256)
    b.rootsig("rs", *rootsig)
    b.pipeline("p", vs="v", ps="f", root="rs", **pipeline_kw)
    return b


def _prologue(b: StreamBuilder) -> None:
    b.OMSetRenderTargets("rt")
    b.RSSetViewports(0, 0, 256, 256, 0, 1)
    b.SetGraphicsRootSignature("rs")
    b.SetPipelineState("p")


# ------------------------------------------------------------------------------ no GL needed: content, tape
def test_content_is_deterministic_and_role_based() -> None:
    from drawopt.replay import content
    b = StreamBuilder()
    b.buffer("ib", 600)
    b.buffer("ib32", 4096)
    b.buffer("args", 20 * 8)
    b.buffer("verts", 256)
    b.target("rt", 8, 8)
    b.pipeline("p", vs="v", ps="f")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("p")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.IASetVertexBuffers(0, "verts", 0, 16)
    b.MultiDrawIndexedInstancedIndirect(3, "args", 20, 40)
    b.DrawIndexedX("ib32", 0, "R32_UINT", 6, 0)
    s = b.build()
    roles = content.analyze_roles(s)
    ib, ib32, args, verts = (s.decls.index[n] for n in ("ib", "ib32", "args", "verts"))
    assert roles.index_format == {ib: 0, ib32: 1} and roles.index_capacity == 300
    idx = content.synthesize(600, ib, "ib", roles).view(np.uint16)[:12]
    assert idx.tolist() == [0, 1, 2, 2, 1, 3, 4, 5, 6, 6, 5, 7]
    words = content.synthesize(160, args, "args", roles)
    assert np.array_equal(words, content.synthesize(160, args, "args", roles))
    recs = np.stack([words[(20 + 40 * k) // 4:(20 + 40 * k) // 4 + 5] for k in range(3)])
    assert np.all(recs[:, 0] % 3 == 0) and np.all(recs[:, 0] >= 3) and np.all(recs[:, 1] >= 1)
    assert np.all(recs[:, 2] + recs[:, 0] <= roles.index_capacity)
    v1 = content.synthesize(256, verts, "verts", roles)
    assert not np.array_equal(v1, content.synthesize(256, verts, "other", roles))
    assert np.all(np.diff(v1.astype(np.int64)) == 1)  # "address" words
    assert content.mix32(np.arange(4)).tolist() == [int(content.mix32(i)) for i in range(4)]


def test_lift_syntax_and_tape() -> None:
    from drawopt.replay.shaders import lift_sources
    from drawopt.replay.tape import Op, TapeBuilder
    assert lift_sources("0.1+2+3.4") == [(0, 1), (2, 0), (3, 4)]   # docs/architecture.md: P or P.k
    for bad in ("x.y", "c3.4", "r1", "0+", "1+1.0"):   # no c/r prefixes: the format's one grammar
        with pytest.raises(ValueError):
            lift_sources(bad)
    tb = TapeBuilder()
    for k in range(70_000):
        tb.emit(Op.DRAW_ARRAYS, 4, k, 6, 1, 0)
    t = tb.array()
    assert t.shape == (70_000, 8) and t[69_999].tolist() == [Op.DRAW_ARRAYS, 4, 69_999, 6, 1, 0, 0, 0]


# ---------------------------------------------------------------------------------------------- basics
@needs_gl
def test_native_and_python_loops_agree() -> None:
    from drawopt.replay.tape import native_available
    if not native_available():
        pytest.skip("the compiled tape loop (_glexec) is not built")
    for s in (*_x_streams("R16_UINT", 16, "none"), _mdi_streams(False)[1], _gpu_driven()):
        # draw parameters forced: llvmpipe's default per-record path runs CPU callbacks (Python loop)
        a = render(s, options=ReplayOptions(size=SIZE, draw_parameters=True))
        b = render(s, options=ReplayOptions(size=SIZE, native=False, draw_parameters=True))
        assert a.executor == "native" and b.executor == "python"
        assert compare(a, b).same


@needs_gl
def test_context_and_overhead_reported() -> None:
    o = call_overhead(20_000)
    assert o["noop_gl_ns"] > 0
    ok, why = available()
    assert ok and why


def test_replay_is_deterministic_and_draws_every_kind_of_draw() -> None:
    from drawopt.gen import generate
    s = generate("quads", 40, seed=5)
    a, b = render(s), render(s)
    assert compare(a, b).same
    img = a.images["backbuffer"]
    assert img.shape == (SIZE[1], SIZE[0], 4) and (img[..., 3] > 0).mean() > 0.01


# ------------------------------------------------------------------------- merges of non-indexed draws
def test_quads_method1_vs_batched_rewrite() -> None:
    """The post's method 1 (a vertex-buffer window per quad) against one batched draw."""
    from drawopt.gen import generate
    n = 48
    s = generate("quads", n, seed=2, method=1, width=128, height=128)
    first = int(np.flatnonzero(s.mask("IASetVertexBuffers", "DrawInstanced"))[0])
    good = rewrite(s, first, [C("IASetVertexBuffers", 0, "quadverts", 0, 12), C("DrawInstanced", 6 * n, 1, 0, 0)])
    assert_same(s, good, size=(128, 128))
    assert_differs(s, rewrite(s, first, [C("IASetVertexBuffers", 0, "quadverts", 0, 12),
                                         C("DrawInstanced", 6 * n - 6, 1, 0, 0)]), size=(128, 128))  # last quad
    assert_differs(s, rewrite(s, first, [C("IASetVertexBuffers", 0, "quadverts", 12, 12),
                                         C("DrawInstanced", 6 * n, 1, 0, 0)]), size=(128, 128))  # off by a vertex


def test_element_words_by_stride() -> None:
    from drawopt.replay.executor import element_words
    from drawopt.replay.tape import Op, _tape_version_needed
    assert [element_words(k) for k in (12, 16, 20, 8, 6, 4, 2, 0)] == [3, 4, 4, 2, 1, 1, 1, 4]
    tb = TapeBuilder_with([(Op.DRAW_ARRAYS, 4, 0, 6, 1, 0)])
    assert _tape_version_needed(tb) == 1
    assert _tape_version_needed(TapeBuilder_with([(Op.VERTEX_ATTRIB_I_FORMAT, 0, 3, 0x1405, 0)])) == 2


def TapeBuilder_with(rows: list[tuple[int, ...]]) -> np.ndarray:
    from drawopt.replay.tape import TapeBuilder
    tb = TapeBuilder()
    for r in rows:
        tb.emit(*r)
    return tb.array()


def _batched(n: int, drawn: int, stride16_first: bool = False) -> Stream:
    """Quads method 2 with data (12-byte vertices) drawing its first ``drawn`` quads; optionally
    preceded by a draw of the same buffer bound at stride 16."""
    from drawopt.gen import generate
    s = generate("quads", 1, seed=6, method=2, quads_per_draw=n, data="on", width=96, height=96)
    first = int(np.flatnonzero(s.mask("IASetVertexBuffers"))[0])
    pre = [C("IASetVertexBuffers", 0, "quadverts", 0, 16), C("DrawInstanced", 12, 1, 0, 0)] if stride16_first else []
    return rewrite(s, first, pre + [C("IASetVertexBuffers", 0, "quadverts", 0, 12),
                                    C("DrawInstanced", 6 * drawn, 1, 0, 0)])


def test_input_layout_fetch_stops_at_the_stride() -> None:
    """12-byte vertices: the last drawn vertex does not see the next (undrawn) vertex's first word
    (it did when every element was fetched as 4 words), but every word of a drawn one shows."""
    s = _batched(20, 19)
    assert_same(s, _planted_word(s, "quadverts", 19 * 18))           # quad 19's first word: not drawn
    for w in (18 * 18 + 5 * 3 + 2, 18 * 18 + 5 * 3, 0, 1):            # colour / x of the last vertex, quad 0
        assert_differs(s, _planted_word(s, "quadverts", w))


@needs_gl
def test_stale_native_loop_is_not_used_for_newer_opcodes(monkeypatch: Any) -> None:
    """A compiled loop built before glVertexAttribIFormat was an opcode would skip it: not used then."""
    import types

    from drawopt.replay import tape
    stale = types.SimpleNamespace(run_tape=lambda t, tab: pytest.fail("stale native loop used"))
    monkeypatch.setattr(tape, "_native_module", lambda: stale)
    s = _batched(20, 20)
    r = render(s)
    assert r.executor == "python"
    with pytest.raises(RuntimeError, match="out of date"):
        render(s, options=ReplayOptions(size=SIZE, native=True))


@needs_gl
def test_attribute_format_is_reissued_every_frame() -> None:
    """A stride-16 draw then a stride-12 draw: the second frame's first draw must fetch 4 words
    again (the format is tape state, not assumed from the vertex array's setup)."""
    s = _batched(20, 20, stride16_first=True)
    one = render(s)
    three = replay(s, size=SIZE, frames=3, warmup=True)
    assert compare(one, three).same
    assert_differs(s, _batched(20, 20))


def test_vertex_pulling_instance_merge() -> None:
    b = _base({"layout": "none", "blend": "alpha"})
    _prologue(b)
    b.SetGraphicsRoot32BitConstants(0, 2, 5, 6)
    n = 24
    s0 = b.build()
    for i in range(n):
        b.DrawInstanced(6, 1, 36, i)
    orig = b.build()
    k = len(s0)
    assert_same(orig, rewrite(orig, k, [C("DrawInstanced", 6, n, 36, 0)]))
    assert_differs(orig, rewrite(orig, k, [C("DrawInstanced", 6, n, 36, 1)]))  # start instance
    assert_differs(orig, rewrite(orig, k, [C("DrawInstanced", 6, n, 42, 0)]))  # start vertex
    assert_differs(orig, rewrite(orig, k - 1, [C("SetGraphicsRoot32BitConstants", 0, 2, 5, 7),
                                               C("DrawInstanced", 6, n, 36, 0)]))  # a constant


def test_instanced_per_instance_layout_merge() -> None:
    """Method 5's per-instance input layout: N one-instance draws == one N-instance draw."""
    from drawopt.gen import generate
    s = generate("quads", 1, seed=4, method=5, quads_per_draw=40)
    draw = int(np.flatnonzero(s.mask("DrawInstanced"))[0])
    split = rewrite(s, draw, [C("DrawInstanced", 4, 10, 0, 10 * j) for j in range(4)])
    assert_same(s, split)
    assert_differs(s, rewrite(s, draw, [C("DrawInstanced", 4, 10, 0, 10 * j) for j in (0, 1, 3, 3)]))


# ------------------------------------------------------------------------------------ DrawIndexedX
def _x_streams(fmt: str, k_bits: int, base_mode: str, planted: str | None = None) -> tuple[Stream, Stream]:
    """Indexed draws with per-draw constants and base vertices, and their DrawIndexedX packing."""
    contract = f"x(vertex_bits={k_bits},perdraw=1,lift=0.0" + (",base=vertex" if base_mode == "vertex" else "") + ")"
    b = _base({"layout": "none", "contract": contract, "blend": "alpha"}, ("constants(2)", "srv"))
    isize = 2 if fmt == "R16_UINT" else 4
    b.buffer("ib", 4096 * isize)
    _prologue(b)
    b.IASetIndexBuffer("ib", fmt, 0)
    draws = [(12, 1 + (j % 2), 24 * j, 40 * j + 7, 3 * j, 1000 + 17 * j) for j in range(8)]
    # (index count, instances, start index, base vertex, start instance, constant)
    for cnt, inst, si, bv, sinst, c in draws:
        b.SetGraphicsRoot32BitConstants(0, 2, c, 77)
        b.DrawIndexedInstanced(cnt, inst, si, bv, sinst)
    orig = b.build()
    records: list[list[int]] = []
    calls = []
    for cnt, inst, si, bv, sinst, c in draws:
        for i in range(inst):
            slot = len(records)
            records.append([bv, sinst + i, c])
            off = (slot << k_bits) + (bv if base_mode == "vertex" else 0)
            calls.append(["ib", si * isize, fmt, cnt, off])
    if planted == "base":
        records[3][0] += 1
    elif planted == "instance":
        records[5][1] += 1
    elif planted == "constant":
        records[2][2] ^= 1
    elif planted == "offset":
        calls[0][4], calls[1][4] = calls[1][4], calls[0][4]  # two draws' slots swapped
    pd = np.array(records, dtype=np.int64).ravel()

    def extra(decls: Any) -> None:
        from drawopt.ir.decls import Buffer
        decls.add(Buffer("perdraw_x", pd.size * 4, cpu=True, data=pd))

    prefix = int(np.flatnonzero(orig.mask("SetGraphicsRoot32BitConstants"))[0])
    cmds = [C("SetGraphicsRoot32BitConstants", 0, 2, 0, 77), C("SetGraphicsRootShaderResourceView", 1, "perdraw_x", 0)]
    cmds += [C("DrawIndexedX", *c) for c in calls]
    return orig, rewrite(orig, prefix, cmds, extra)


@pytest.mark.parametrize("fmt,k_bits,base_mode", [("R16_UINT", 16, "none"), ("R32_UINT", 20, "vertex")])
def test_drawindexedx_packing_renders_the_same(fmt: str, k_bits: int, base_mode: str) -> None:
    orig, packed = _x_streams(fmt, k_bits, base_mode)
    assert packed.mask("DrawIndexedX").sum() == 12
    assert_same(orig, packed)


@pytest.mark.parametrize("planted", ["base", "instance", "constant", "offset"])
def test_drawindexedx_planted_errors_show(planted: str) -> None:
    orig, wrong = _x_streams("R16_UINT", 16, "none", planted)
    assert_differs(orig, wrong)


# ---------------------------------------------------------------------------------- multi-draw indirect
def _mdi_streams(indexed: bool, planted: bool = False) -> tuple[Stream, Stream]:
    b = _base({"layout": "none", "blend": "alpha"})
    b.buffer("ib", 1 << 14)
    _prologue(b)
    b.SetGraphicsRoot32BitConstants(0, 2, 1, 2)
    if indexed:
        b.IASetIndexBuffer("ib", "R16_UINT", 0)
    recs = []
    for j in range(7):
        if indexed:
            r = [6 * (1 + j % 3), 1 + j % 2, 30 * j, 11 * j, 2 * j]
            b.DrawIndexedInstanced(*r)
        else:
            r = [6 * (1 + j % 3), 1 + j % 2, 50 * j, 2 * j]
            b.DrawInstanced(*r)
        recs.append(r)
    orig = b.build()
    if planted:
        recs[4][-1] += 1  # start instance of one record
    stride = 32
    words = np.zeros(len(recs) * stride // 4, np.int64)
    for j, r in enumerate(recs):
        words[j * stride // 4: j * stride // 4 + len(r)] = r

    def extra(decls: Any) -> None:
        from drawopt.ir.decls import Buffer
        decls.add(Buffer("mdiargs", words.size * 4, cpu=True, data=words))

    first = int(np.flatnonzero(orig.mask("DrawIndexedInstanced", "DrawInstanced"))[0])
    name = "MultiDrawIndexedInstancedIndirect" if indexed else "MultiDrawInstancedIndirect"
    return orig, rewrite(orig, first, [C(name, len(recs), "mdiargs", 0, stride)], extra)


@pytest.mark.parametrize("indexed", [False, True])
def test_multidraw_indirect_rewrite(indexed: bool) -> None:
    assert_same(*_mdi_streams(indexed))
    assert_differs(*_mdi_streams(indexed, planted=True))


def test_draw_parameters_fallback_renders_the_same() -> None:
    """Without ARB_shader_draw_parameters (forced), base vertex/instance come from uniforms and
    indirect records are read back: the images must not change."""
    orig, mdi = _mdi_streams(True)
    xo, xp = _x_streams("R16_UINT", 16, "none")
    for s in (orig, mdi, xp):
        a = render(s)
        b = render(s, options=ReplayOptions(size=SIZE, draw_parameters=False))
        assert compare(a, b).same
    assert compare(render(mdi, options=ReplayOptions(size=SIZE, draw_parameters=False)), render(orig)).same


# --------------------------------------------------------------------------- GPU-written args, flushes
def _gpu_driven(dispatch: tuple[int, int, int] = (1, 1, 1), extra_flush: bool = False) -> Stream:
    b = StreamBuilder(fast_semantics=True)
    b.target("rt", 128, 128)
    b.depth("z", 128, 128)
    b.buffer("ib", 1 << 14)
    b.buffer("cullargs", 20 * 16, frontend=True)
    b.buffer("counts", 16, frontend=True)
    b.heap("res", "CBV_SRV_UAV", 4)
    b.view("res", 0, "uav", "cullargs")
    b.view("res", 1, "uav", "counts")
    b.rootsig("rs", "table(uav,2)", "constants(1)")
    b.pipeline("cull", cs="cull", root="rs", writes=("res[0]", "res[1]"))
    b.pipeline("p", vs="v", ps="f", root="rs", depth="less,write")
    b.SetDescriptorHeaps("res")
    b.SetComputeRootSignature("rs")
    b.SetComputeRootDescriptorTable(0, "res[0]")
    b.SetPipelineState("cull")
    b.Dispatch(*dispatch)
    b.GpuSendPipelinedEvent("CS_PARTIAL_FLUSH")
    b.FlushGpuCacheRange("DEFAULT_PFP")
    if extra_flush:
        b.FlushGpuCacheRange("DEFAULT_PFP")
    b.OMSetRenderTargets("rt", "z")
    b.SetGraphicsRootSignature("rs")
    b.SetPipelineState("p")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    b.SetGraphicsRoot32BitConstants(1, 1, 9)
    b.MultiDrawIndexedInstancedIndirectAuto("counts", 0, 16, "cullargs", 0, 20)
    return b.build()


def test_gpu_written_args_through_compute() -> None:
    a = render(_gpu_driven())
    assert set(a.buffers) == {"cullargs", "counts"} and a.buffers["counts"][0] >= 1
    assert np.any(a.images["rt"] != 0)
    assert compare(a, render(_gpu_driven(extra_flush=True))).same
    c = compare(a, render(_gpu_driven(dispatch=(2, 1, 1))))
    assert not c.same and any(d.kind == "buffer" and d.differing for d in c.diffs)


# ---------------------------------------------------------------------------------------------- order
def _swap_pair(blend: str, depth: str, bundle: bool = False) -> tuple[Stream, Stream]:
    """Two overlapping draws that differ only in a root constant, and the same stream with them
    swapped; a ``bundle`` sets no targets (it draws into the caller's) and keeps its exit state."""
    b = StreamBuilder(kind="bundle" if bundle else "list")
    if not bundle:
        b.target("rt", 64, 64)
        b.depth("z", 64, 64)
    b.rootsig("rs", "constants(1)")
    b.pipeline("p", vs="v", ps="f", root="rs", blend=blend, depth=depth)
    if not bundle:
        b.OMSetRenderTargets("rt", "z")
    b.SetGraphicsRootSignature("rs")
    b.SetPipelineState("p")
    k = len(b.build())
    b.SetGraphicsRoot32BitConstants(0, 1, 1)
    b.DrawInstanced(600, 1, 0, 0)
    b.SetGraphicsRoot32BitConstants(0, 1, 2)
    b.DrawInstanced(600, 1, 0, 0)
    s = b.build()
    swapped = rewrite(s, k, [C("SetGraphicsRoot32BitConstants", 0, 1, 2), C("DrawInstanced", 600, 1, 0, 0),
                             C("SetGraphicsRoot32BitConstants", 0, 1, 1), C("DrawInstanced", 600, 1, 0, 0),
                             C("SetGraphicsRoot32BitConstants", 0, 1, 2)])  # the exit state a bundle leaves
    return s, swapped


def test_swapping_blended_draws_shows_but_depth_tested_opaque_draws_commute() -> None:
    for blend, depth, expect_same in (("alpha", "off", False), ("opaque", "less,write", True)):
        (assert_same if expect_same else assert_differs)(*_swap_pair(blend, depth))


def test_bundle_draws_are_depth_tested_against_the_inherited_depth_target() -> None:
    """Regression (trust-opaque): a bundle's depth-tested draws test against the caller's depth
    target, which the verifier models ("(inherited depth target)") and lets opaque draws commute on;
    the replay rendered ``<default>`` with no depth buffer, so GL skipped the test and a verified
    ``--reorder opaque`` rewrite of the ``bundle`` kind rendered 88% of its pixels differently."""
    from drawopt.verify import verify
    s, swapped = _swap_pair("opaque", "less,write", bundle=True)
    assert verify(s, swapped, reorder="opaque").equivalent
    assert not verify(s, swapped, reorder="declared").equivalent
    assert_same(s, swapped)
    assert "<default depth>" in render(s).images
    # the planted wrong twin: blended draws do not commute, in a bundle or not
    s, swapped = _swap_pair("alpha", "off", bundle=True)
    assert not verify(s, swapped, reorder="opaque").equivalent
    assert_differs(s, swapped)
    assert "<default depth>" not in render(s).images  # no pipeline depth-tests: no depth target


def test_generated_bundle_reordered_under_opaque_renders_the_same() -> None:
    """The bug's reproducer at its smallest: ``gen --kind bundle --draws 4 --seed 7``, scheduled
    under ``--reorder opaque`` (two depth-tested draws swap), renders the input's images."""
    gen = pytest.importorskip("drawopt.gen")
    from drawopt.result import optimize
    s = gen.generate("bundle", 4, seed=7)
    res = optimize(s, "schedule", reorder="opaque")
    assert res.verified and not np.array_equal(res.stream.op, s.op)  # reordered, and verified
    assert_same(s, res.stream)


# ------------------------------------------------------------------- every generated kind, GS, tessellation
def _redundant_state(s: Stream) -> Stream:
    """An equivalent rewrite: every state command issued twice."""
    state = s.mask(*[o.name for o in BY_NAME.values() if o.cat == 0 and o.name != "SetDescriptorHeaps"])
    idx = np.repeat(np.arange(len(s)), np.where(state, 2, 1))
    return s.take(idx)


@pytest.mark.parametrize("kind,draws,opts", [
    ("quads", 30, {"method": 1}), ("quads", 2, {"method": 2, "quads_per_draw": 20}),
    ("quads", 2, {"method": 3, "quads_per_draw": 20}), ("quads", 2, {"method": 4, "quads_per_draw": 20}),
    ("quads", 2, {"method": 5, "quads_per_draw": 20}),
    ("frame", 10, {}), ("gpu-driven", 12, {}), ("bundle", 16, {}),
])
def test_generated_streams_against_an_equivalent_rewrite(kind: str, draws: int, opts: dict[str, Any]) -> None:
    gen = pytest.importorskip("drawopt.gen")
    s = gen.generate(kind, draws, seed=11, **opts)
    r = render(s)
    assert not [w for w in r.warnings if "skipped" in w], r.warnings
    assert compare(r, render(_redundant_state(s))).same


def test_geometry_and_tessellation_pipelines() -> None:
    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.rootsig("rs", "constants(1)")
    b.pipeline("gs", vs="v", gs="g", ps="f", root="rs", gs_instances=2)
    b.pipeline("ts", vs="v", hs="h", ds="d", ps="f", root="rs", topology="patch")
    b.OMSetRenderTargets("rt")
    b.SetGraphicsRootSignature("rs")
    b.SetPipelineState("gs")
    b.DrawInstanced(300, 1, 0, 0)
    b.SetPipelineState("ts")
    b.IASetPrimitiveTopology("PATCHLIST_3")
    b.DrawInstanced(300, 1, 300, 0)
    b.IASetPrimitiveTopology("PATCHLIST_4")
    b.DrawInstanced(400, 1, 700, 0)
    s = b.build()
    r = render(s)
    assert not r.warnings and np.any(r.images["rt"] != 0)
    assert compare(r, render(_redundant_state(s))).same


def test_opaque_commands_are_counted() -> None:
    b = _base({"layout": "none"})
    _prologue(b)
    b.Opaque("ClearState")
    b.DrawInstanced(6, 1, 0, 0)
    assert render(b.build()).warnings == {"Opaque commands ignored": 1}


# ------------------------------------------------------------------------------------------------ CLI
@needs_gl
def test_cli_replay(tmp_path: Any, capsys: Any) -> None:
    from drawopt.cli import main
    from drawopt.ir import formats
    orig, packed = _x_streams("R16_UINT", 16, "none")
    _, wrong = _x_streams("R16_UINT", 16, "none", "constant")
    pa, pb, pc = tmp_path / "a.dstream", tmp_path / "b.npz", tmp_path / "c.json"
    formats.save(orig, str(pa))
    formats.save(packed, str(pb))
    formats.save(wrong, str(pc))
    assert main(["replay", str(pa), str(pb), "--size", "64x64", "--frames", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compare"]["same"] and out["a"]["draw_calls"] == 8 and out["b"]["draw_calls"] == 12
    d = tmp_path / "diff"
    assert main(["replay", str(pa), str(pc), "--size", "64x64", "--frames", "1", "--diff-dir", str(d)]) == 1
    assert sorted(p.name for p in d.iterdir()) == ["rt.a.png", "rt.b.png", "rt.diff.png"]
    capsys.readouterr()
    assert main(["replay", str(pa), str(pc), "--size", "64x64", "--frames", "1", "--tolerance", "255",
                 "--json"]) == 0
    bad = tmp_path / "bad.dstream"
    bad.write_text("drawopt 1\nDrawInstanced 6 1\n")
    assert main(["replay", str(bad)]) == 2
    assert "bad.dstream:2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["replay", str(pa), "--size", "0x5"])
    assert e.value.code == 2


# ------------------------------------------------------------------ the quads benchmark
@needs_gl
def test_quads_bench_images_and_json(tmp_path: Any, capsys: Any) -> None:
    """bench/replay_quads.py on a few quads: methods 1, 2, 3, the optimizer's welded output and the
    hand collapse render identical images from the quads' own data; the JSON has the table's fields."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "bench" / "replay_quads.py"
    spec = importlib.util.spec_from_file_location("replay_quads_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "q.json"
    assert bench.main(["--quads", "400", "--frames", "1", "--warmup-s", "0", "--size", "320x180", "--quad-px", "8",
                       "--strict", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    rows = {r["key"]: r for r in res["rows"]}
    assert set(rows) == {"m1", "m2", "m3", "m4", "m5", "opt", "hand"}
    assert rows["opt"]["stream_draws"] == {"DrawIndexedInstanced": 1} and rows["m1"]["draw_calls"] == 400
    for k in ("gpu_ms", "cpu_ms", "wall_ms", "draw_calls", "gl_calls", "replayer_overhead_ms", "prepare_s"):
        assert all(k in r for r in rows.values()), k
    img = res["images"][0]
    assert img["expected_identical_ok"] and img["expected_identical"] == ["m2", "m3", "opt", "hand"]
    assert img["coverage_diff_pixels"]["m5"] == 0 and not img["identical_to_method1"]["m5"]
    assert "identical" in capsys.readouterr().out
    # the check can fail: a planted wrong weld (a quad's 4th vertex fetching its 1st) differs from method 1
    s = bench.generate("quads", 400, seed=1, method=1, data="on", size_min=8, size_max=8, width=320, height=180)
    opt = bench._optimize(s, 60, None, "d3d12")
    ib = opt.decls["weld_ib0"]
    idx = ib.data.view(np.uint16).copy()
    idx[3] = idx[0]
    import dataclasses
    decls = opt.decls.copy()
    decls.replace(dataclasses.replace(ib, data=idx.view(np.uint32).copy()))
    bad = Stream(opt.header, decls, opt.op, opt.args, opt.var_off, opt.var_len, opt.pool, opt.flags, opt.line,
                 opt.strings)
    ra, rb = (render(bench.shared_pso(x), size=(320, 180)) for x in (s, bad))
    assert bench._image_diff(ra.images, rb.images) > 0
    assert render(bench.shared_pso(opt), size=(320, 180)).images["backbuffer"].tobytes() == \
        ra.images["backbuffer"].tobytes()


# ------------------------------------------------------------------ per-draw data lifted by mdi
def _planted_word(s: Stream, name: str, word: int) -> Stream:
    import dataclasses
    decls = s.decls.copy()
    b = decls[name]
    data = b.data.copy()
    data[word] = (int(data[word]) + 1) & 0xFFFFFFFF
    decls.replace(dataclasses.replace(b, data=data))
    return Stream(s.header, decls, s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line, s.strings)


def _lifted(contract: str, layout: str, bindless: bool = False) -> tuple[Stream, Stream]:
    """Draws that differ in lifted values, and the mdi pass's lifted rewrite of them."""
    from drawopt.passes.mdi import MdiPass
    from drawopt.passmanager import PassManager
    b = StreamBuilder()
    b.target("rt", 256, 256)
    b.buffer("ib", 1 << 14)
    b.buffer("verts", 1 << 16)
    b.buffer("ids", 1 << 12)
    b.heap("res", "CBV_SRV_UAV", 8)
    b.texture("t0", 64, 64, "BC7_UNORM")
    for k in range(8):
        b.view("res", k, "srv", "t0")
    b.rootsig("rs", "table(srv,1)", "constants(2)", "srv", "srv")
    b.pipeline("p", vs="v", ps="f", root="rs", layout=layout, blend="alpha", contract=contract)
    b.OMSetRenderTargets("rt")
    b.RSSetViewports(0, 0, 256, 256, 0, 1)
    b.SetDescriptorHeaps("res")
    b.SetGraphicsRootSignature("rs")
    b.SetGraphicsRootDescriptorTable(0, "res[0]")
    b.IASetIndexBuffer("ib", "R16_UINT", 0)
    if layout != "none":
        b.IASetVertexBuffers(0, "verts", 0, 16)
        b.IASetVertexBuffers(1, "ids", 0, 16)    # instance rate: the per-draw id stream
    b.SetPipelineState("p")
    for j in range(6):
        if bindless:
            b.SetGraphicsRootDescriptorTable(0, f"res[{j % 3}]")
        b.SetGraphicsRoot32BitConstants(1, 2, 1000 + 17 * j, 5 + j)
        b.DrawIndexedInstanced(12, 1 + j % 2, 24 * j, 40 * j + 7, 3 + 5 * j)
    orig = b.build()
    pm = PassManager([MdiPass()], verify_each=True)
    out = pm.run(orig)
    assert pm.records[-1].report["lifted_draws"] == 6
    return orig, out


@pytest.mark.parametrize("case", ["il", "x+draw_data bindless"])
def test_mdi_lifted_per_draw_data_renders_the_same(case: str) -> None:
    """An input-layout pipeline with a draw_data clause (StartInstanceLocation renumbered: its
    instance-rate id stream is the record index), and a vertex-pulling pipeline with x and
    draw_data clauses lifting a bindless table slot: mdi's rewrite renders the original; a
    wrong record word (instance seen, base vertex, lifted value) shows."""
    if case == "il":
        orig, out = _lifted("draw_data(perdraw=2,lift=1.0+1.1)", "pos_nrm_uv")
    else:
        orig, out = _lifted("x(vertex_bits=16,perdraw=3,lift=1.0+1.1+0),draw_data(perdraw=2,lift=1.0+0+1.1)",
                            "none", bindless=True)
    assert_same(orig, out)
    words = 4 if case == "il" else 5
    for w in (1 * words + 1, 2 * words + 0, 4 * words + 2, 5 * words + 3):
        assert_differs(orig, _planted_word(out, "mdi_perdraw0", w))
