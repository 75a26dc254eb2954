"""pack-x: DrawIndexedX wave-packed runs (passes/pack_x.py, cext/_packx.pyx).

Every rewrite is checked three ways: ``Stream.check()``, the translation validator
(:func:`drawopt.verify.verify`), and an independent interpreter in this file that
decodes each draw instance of both streams under the x contract
(docs/architecture.md, "Rewrite contracts") and compares them in order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drawopt.ir import formats
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Stream
from drawopt.passes import pack_x as px
from drawopt.passmanager import parse_pipeline
from drawopt.result import optimize
from drawopt.stats import compute_stats
from drawopt.verify import verify

GOLDEN = Path(__file__).parent / "golden" / "pack-x"
_DX = BY_NAME["DrawIndexedX"].code

HEAD = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib16     size=65536
buffer   ib16b    size=65536
buffer   ib32     size=262144
buffer   perdraw  size=4096
buffer   verts    size=65536
target   rt       64x64 R8G8B8A8_UNORM
depth    zbuf     64x64 D32_FLOAT
heap     res      CBV_SRV_UAV 16
rootsig  main     constants(1) constants(1) srv table(srv,1) constants(1)
"""
_X = "contract=x(vertex_bits=16,perdraw=2,lift=0+1,base=none)"
PIPES = f"""pipeline xp       vs=pull ps=flat depth=less,write root=main params=0,1,2,3 {_X}
pipeline xp2      vs=pull ps=other depth=less,write root=main params=0,1,2,3 {_X}
pipeline il       vs=il ps=flat layout=pos depth=less,write root=main params=0,1,3
pipeline nox      vs=pull ps=flat depth=less,write root=main params=0,1,2,3
pipeline never    vs=pull ps=flat depth=less,write root=main params=0,1,2,3 {_X},never_merge
"""
PROLOGUE = """
OMSetRenderTargets rt zbuf
SetDescriptorHeaps res
SetGraphicsRootSignature main
SetGraphicsRootShaderResourceView 2 perdraw 0
SetGraphicsRootDescriptorTable 3 res[0]
IASetPrimitiveTopology TRIANGLELIST
IASetIndexBuffer ib16 R16_UINT 0
SetGraphicsRoot32BitConstants 0 1 0
SetGraphicsRoot32BitConstants 1 1 0
SetPipelineState xp
"""


def load(text: str) -> Stream:
    return formats.loads(text, "text")


def packed(s: Stream, **kw) -> tuple[Stream, dict]:
    out, rep = px.pack_x(s, **kw)
    out.check()
    return out, rep


# --------------------------------------------------------------------------- an independent oracle
class _Oracle:
    """Replays a small stream command by command and lists what every draw instance sees.

    Under an ``x`` contract the lifted root values are what the shader reads, from the
    root arguments for a DrawIndexedInstanced and from the decoded record for a
    DrawIndexedX; the perdraw parameter is not observed as state; the index buffer is
    observed by DrawIndexedInstanced only.
    """

    def __init__(self, s: Stream):
        self.s = s

    def instances(self) -> list[tuple]:
        s = self.s
        decls = s.decls
        st: dict = {}
        out: list[tuple] = []
        for i in range(len(s)):
            c = s.command(i)
            n = c.name
            a = c.args
            if n == "SetGraphicsRootSignature":
                if st.get("rs") != a[0]:
                    st = {k: v for k, v in st.items() if not isinstance(k, tuple)}
                st["rs"] = a[0]
            elif n == "SetGraphicsRoot32BitConstants":
                cur = list(st.get(("root", a[0]), ("c", [None] * 64))[1]) \
                    if st.get(("root", a[0]), ("x",))[0] == "c" else [None] * 64
                for k, v in enumerate(c.var):
                    cur[a[2] + k] = v
                st[("root", a[0])] = ("c", tuple(cur))
            elif n == "SetGraphicsRootDescriptorTable":
                st[("root", a[0])] = ("t", a[1])
            elif n in ("SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView"):
                st[("root", a[0])] = ("v", a[1], a[2])
            elif n == "IASetIndexBuffer":
                st["ib"] = a
            elif n in ("SetPipelineState", "OMSetRenderTargets", "IASetPrimitiveTopology", "IASetVertexBuffers"):
                st[n] = (a, c.var)
            elif n in ("DrawIndexedInstanced", "DrawIndexedX", "DrawInstanced"):
                out.extend(self._draw(n, a, st, decls))
                if n == "DrawIndexedX":
                    st.pop("ib", None)
        return out

    def _draw(self, n: str, a: tuple, st: dict, decls) -> list[tuple]:
        p = decls[st["SetPipelineState"][0][0]]
        assert isinstance(p, Pipeline)
        x = p.x_clause
        lift: list[tuple[int, int]] = []
        if x is not None:
            for item in filter(None, x.lift_text.split("+")):
                q, _, w = item.partition(".")
                lift.append((int(q), int(w or 0)))
        perdraw = x.perdraw if x is not None and x.perdraw is not None else -1
        rs = decls[p.root]
        params = p.params if p.params is not None else tuple(range(len(rs.params)))
        fixed = tuple(st.get(k) for k in ("SetPipelineState", "OMSetRenderTargets", "IASetPrimitiveTopology"))
        if not p.vertex_pulling:
            fixed += (st.get("IASetVertexBuffers"),)

        def root_state() -> tuple:
            items = []
            for q in params:
                if q == perdraw:
                    continue
                v = st.get(("root", q))
                lifted = {w for qq, w in lift if qq == q}
                if v is not None and lifted:
                    if v[0] == "c":
                        v = ("c", tuple(None if k in lifted else w for k, w in enumerate(v[1])))
                    elif v[0] == "t":
                        v = ("t", v[1].split("[")[0])
                    else:
                        v = ("v", v[1], *(None if k in lifted else (v[2] >> (32 * k)) & 0xFFFFFFFF for k in (0, 1)))
                items.append((q, v))
            return tuple(items)

        def lifted_from_root() -> tuple:
            vals = []
            for q, w in lift:
                v = st[("root", q)]
                if v[0] == "c":
                    vals.append(v[1][w])
                elif v[0] == "t":
                    vals.append(int(v[1].split("[")[1][:-1]) if w == 0 else 0)
                else:
                    vals.append((v[2] >> (32 * w)) & 0xFFFFFFFF)
            return tuple(vals)

        if n == "DrawIndexedInstanced":
            buf, fmt, off = st["ib"]
            size = 2 if fmt == "R16_UINT" else 4
            src = (buf, off + a[2] * size, fmt, a[0])
            return [(fixed, root_state(), src, a[3], a[4] + i, lifted_from_root()) for i in range(a[1])]
        if n == "DrawInstanced":
            return [(fixed, root_state(), ("vertices", a[0], a[2]), 0, a[3] + i, ()) for i in range(a[1])]
        # DrawIndexedX under the x contract
        assert x is not None, "DrawIndexedX of a pipeline without an x contract"
        k = x.vertex_bits
        kind, bname, boff = st[("root", perdraw)]
        assert kind == "v"
        words = 2 + len(lift)
        data = decls[bname].data
        if data is None:  # GPU-written records: only their address is known
            return [(fixed, root_state(), (a[0], a[1], a[2], a[3]), ("record of", bname, boff, a[4]))]
        at = boff // 4 + (a[4] >> k) * words
        rec = [int(data[j]) if j < data.size else 0 for j in range(at, at + words)]
        low = a[4] & ((1 << k) - 1)
        base = rec[0] - (1 << 32) if rec[0] >= 1 << 31 else rec[0]
        bias = low if x.base == "vertex" else base + low
        return [(fixed, root_state(), (a[0], a[1], a[2], a[3]), bias, rec[1], tuple(rec[2:]))]


def same_instances(a: Stream, b: Stream) -> None:
    ia, ib = _Oracle(a).instances(), _Oracle(b).instances()
    assert len(ia) == len(ib)
    for k, (x, y) in enumerate(zip(ia, ib)):
        assert x == y, f"draw instance {k} differs:\n{x}\n{y}"


def check_all(s: Stream, out: Stream) -> None:
    """The rewrite is valid: the IR checks, the oracle and the validator agree."""
    out.check()
    same_instances(s, out)
    r = verify(s, out)
    assert r.equivalent, r.reason


# --------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("seed", range(6))
def test_kernels_match_pure_twins(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 200))
    link = (rng.random(d - 1) < 0.8).astype(np.uint8)
    ncalls = rng.integers(1, 5, d)
    cap = rng.integers(1, 9, d)
    fast, pure = px._kernels(False), px._kernels(True)
    assert fast is not None and fast.runs is not px._runs_py, "drawopt._packx is not built"
    for x, y in zip(fast.runs(link, ncalls, cap), pure.runs(link, ncalls, cap)):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    first = (rng.random(d) < 0.3).astype(np.uint8)
    first[0] = 1
    w = int(rng.integers(2, 8))
    words = rng.integers(-(2**31), 2**32, (d, w))
    args = (first, ncalls, rng.integers(0, 1 << 10, d), rng.integers(12, 31, d), words,
            rng.integers(2, w + 1, d), rng.choice([1, 4, 64], d))
    for x, y in zip(fast.records(*args), pure.records(*args)):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype


def test_kernels_cut_runs_at_the_cap() -> None:
    run, split = px._kernels(False).runs(np.array([1, 1, 1, 0, 1], np.uint8), np.array([1, 2, 2, 1, 1, 1]),
                                         np.full(6, 4))
    assert run.tolist() == [0, 0, 1, 1, 2, 2]
    assert split.tolist() == [0, 1, 0, 0, 0]
    io, src, data, off = px._kernels(False).records(
        np.array([1, 0], np.uint8), np.array([2, 1]), np.array([0, 5]), np.array([16, 16]),
        np.array([[7, 10, 1], [-1, 3, 2]]), np.array([3, 3]), np.array([4, 4]))
    assert io.tolist() == [0, 65536, 131072 | 5]
    assert src.tolist() == [0, 0, 1]
    assert data.tolist() == [7, 10, 1, 7, 11, 1, 0xFFFFFFFF, 3, 2]
    assert off.tolist() == [0]


@pytest.mark.parametrize("pure", [True, False])
def test_kernels_reject_bad_input(pure: bool) -> None:
    k = px._kernels(pure)
    with pytest.raises(ValueError):
        k.runs(np.zeros(3, np.uint8), np.ones(2), np.ones(2))
    with pytest.raises(ValueError):
        k.records(np.array([0], np.uint8), np.ones(1), np.zeros(1), np.ones(1), np.zeros((1, 2)), np.full(1, 2),
                  np.ones(1))


def test_pure_and_compiled_paths_give_the_same_stream() -> None:
    from drawopt.gen import generate
    s = generate("frame", 1500, seed=3)
    a, ra = px.pack_x(s, pure=True)
    b, rb = px.pack_x(s, pure=False)
    assert ra == rb and ra["runs"] > 10
    assert formats.dumps(a, "text") == formats.dumps(b, "text")


# --------------------------------------------------------------------------- golden inputs, decoded
GOLDEN_CASES = sorted(p.name.removesuffix(".in.dstream") for p in GOLDEN.glob("*.in.dstream"))


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_golden_inputs_decode_to_the_same_instances(case: str) -> None:
    from drawopt.testing.golden import parse_run_line
    text = (GOLDEN / f"{case}.in.dstream").read_text()
    opts = parse_run_line(text)
    s = load(text)
    out = optimize(s, opts["passes"], target=opts["target"]).stream
    check_all(s, out)


def test_r16_run_with_lifted_constants() -> None:
    s = formats.load(GOLDEN / "r16-lifted.in.dstream")
    out, rep = packed(s)
    assert rep["runs"] == 1 and rep["packed_draws"] == 4 and rep["calls"] == 4
    names = [c.name for c in out.commands()]
    assert names.count("DrawIndexedX") == 4 and names.count("DrawIndexedInstanced") == 1
    i = names.index("DrawIndexedX")
    assert names[i:i + 4] == ["DrawIndexedX"] * 4  # consecutive: one wave-packed batch
    assert names[i - 1] == "SetGraphicsRootShaderResourceView"
    # the draw after the run reads the index buffer and root constant 1: both set again
    assert names[i + 4:i + 6] == ["IASetIndexBuffer", "SetGraphicsRoot32BitConstants"]
    assert out.command(i + 5).args[0] == 1 and out.command(i + 5).var == (103,)
    st0, st1 = compute_stats(s), compute_stats(out)
    assert st0["gpu_batches"] == 5 and st1["gpu_batches"] == 2
    assert st1["packed_fraction"] == pytest.approx(4 / 5)
    check_all(s, out)


def test_records_and_index_offsets() -> None:
    s = formats.load(GOLDEN / "instances.in.dstream")
    out, rep = packed(s, max_instances=4)
    buf = out.decls["packx_perdraw"]
    assert buf.cpu and buf.data is not None
    recs = buf.data.reshape(-1, 3)
    # (base, start_instance + i, lifted constant) per call: 3 + 2 + 1 instances
    assert recs.tolist() == [[0, 10, 1], [0, 11, 1], [0, 12, 1], [500, 0, 2], [500, 1, 2], [900, 7, 3]]
    xs = [c for c in out.commands() if c.name == "DrawIndexedX"]
    assert [c["index_offset"] >> 16 for c in xs] == list(range(6))
    assert [c["offset"] for c in xs] == [0, 0, 0, 192, 192, 288]
    check_all(s, out)


def test_r32_needs_max_index() -> None:
    s = formats.load(GOLDEN / "r32-max-index.in.dstream")
    out, rep = packed(s)
    assert rep["packed_draws"] == 3 and rep["eligible_draws"] == 3
    xs = [c for c in out.commands() if c.name == "DrawIndexedX"]
    assert {c["format"] for c in xs} == {"R32_UINT"}
    assert [c["offset"] for c in xs] == [1024, 1024 + 300 * 4, 1024 + 390 * 4]
    d = _draws(s)
    why = px.why_not_packed(s, d[3], d[4])
    assert why is not None and "R32_UINT" in why and "max_index" in why
    check_all(s, out)


def test_overflow_splits_runs_at_the_draw_id_bits() -> None:
    s = formats.load(GOLDEN / "overflow-split.in.dstream")
    out, rep = packed(s)
    assert rep["runs"] == 2 and rep["splits"] == 1 and rep["calls"] == 7
    binds = [c for c in out.commands() if c.name == "SetGraphicsRootShaderResourceView" and c.args[1] != "perdraw"]
    assert [b.args[2] for b in binds] == [0, 48]
    assert max(c["index_offset"] >> 30 for c in out.commands() if c.name == "DrawIndexedX") == 3
    d = [i for i, c in enumerate(s.commands()) if c.name == "DrawIndexedInstanced"]
    assert px.why_not_packed(s, d[1], d[2]) is None
    why = px.why_not_packed(s, d[2], d[3])  # the first run holds 4 calls: draws 0, 1 and 2 (2 instances)
    assert why is not None and why.startswith("limit:") and "2 bits" in why
    check_all(s, out)


def test_cbv_array_is_aligned_and_split_at_64_kib() -> None:
    lift = "+".join(f"0.{k}" for k in range(14))  # 16-word (64-byte) records: 1024 per CBV binding
    lines = [
        "drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on",
        "buffer   ib16     size=65536",
        "buffer   consts   size=65536",
        "target   rt       64x64 R8G8B8A8_UNORM",
        "rootsig  main     constants(14) cbv",
        f"pipeline p        vs=pull ps=flat root=main contract=x(vertex_bits=16,perdraw=1,lift={lift},base=none)",
        "", "OMSetRenderTargets rt", "SetGraphicsRootSignature main", "SetPipelineState p",
        "IASetPrimitiveTopology TRIANGLELIST", "IASetIndexBuffer ib16 R16_UINT 0",
    ]
    for i in range(1100):
        lines.append("SetGraphicsRoot32BitConstants 0 14 " + " ".join(str(i + k) for k in range(14)))
        lines.append(f"DrawIndexedInstanced 3 1 {3 * (i % 100)} {i} 0")
    s = load("\n".join(lines) + "\n")
    out, rep = packed(s)
    assert rep["runs"] == 2 and rep["splits"] == 1
    binds = [c for c in out.commands() if c.name == "SetGraphicsRootConstantBufferView" and c.args[1] != "consts"]
    assert [b.args[2] for b in binds] == [0, 65536]
    r = verify(s, out)
    if _canonical_verifier():
        assert r.equivalent, r.reason
    same_instances(s, out)


def test_input_drawindexedx_is_repacked_or_kept() -> None:
    s = formats.load(GOLDEN / "x-input.in.dstream")
    out, rep = packed(s)
    assert rep["runs"] == 1 and rep["packed_draws"] == 3
    data = out.decls["packx_perdraw"].data.reshape(-1, 3)
    assert data.tolist() == [[40, 0, 5], [80, 3, 7], [60, 0, 6]]  # records copied from 'oldrecs'
    names = [c.name for c in out.commands()]
    assert names.count("DrawIndexedX") == 5
    # the two calls reading the GPU-written array stay as they were
    assert [c.args for c in list(out.commands())[-2:]] == [c.args for c in list(s.commands())[-2:]]
    check_all(s, out)
    # packing the output again changes nothing: its runs are already consecutive DrawIndexedX calls
    again, rep2 = px.pack_x(out)
    assert again is out and rep2["runs"] == 0


def test_base_vertex_in_the_low_bits() -> None:
    s = formats.load(GOLDEN / "base-vertex.in.dstream")
    out, rep = packed(s)
    assert rep["runs"] == 2 and rep["packed_draws"] == 4
    xs = [c["index_offset"] for c in out.commands() if c.name == "DrawIndexedX"]
    assert xs == [1000, (1 << 20) | 70000, 300, (1 << 20) | 400]
    d = [i for i, c in enumerate(s.commands()) if c.name == "DrawIndexedInstanced"]
    assert "negative base vertex" in px.why_not_packed(s, d[1], d[2])
    check_all(s, out)


def test_bundle_restores_its_final_state() -> None:
    s = formats.load(GOLDEN / "bundle.in.dstream")
    out, rep = packed(s)
    assert rep["runs"] == 1
    tail = [c.name for c in out.commands()][-3:]
    assert tail == ["SetGraphicsRootShaderResourceView", "IASetIndexBuffer", "SetGraphicsRoot32BitConstants"]
    check_all(s, out)


def test_bundle_run_left_alone_when_its_perdraw_binding_is_inherited() -> None:
    text = (GOLDEN / "bundle.in.dstream").read_text().replace("SetGraphicsRootShaderResourceView 1 perdraw 0\n", "")
    s = load(text)
    out, rep = px.pack_x(s)
    assert out is s and rep["unrestorable_runs"] == 1 and rep["runs"] == 0


def test_replayed_and_compacted_state_inside_a_run() -> None:
    s = formats.load(GOLDEN / "cbv-replay.in.dstream")
    out, rep = packed(s)
    names = [c.name for c in out.commands()]
    assert names.count("IASetVertexBuffers") == 1
    assert [c.var for c in out.commands() if c.name == "SetGraphicsRoot32BitConstants" and c.args[0] == 3] == [(6,)]
    bind = next(c for c in out.commands() if c.name == "SetGraphicsRootConstantBufferView" and c.args[2] != 0 or
                c.name == "SetGraphicsRootConstantBufferView" and c.args[1] == "packx_perdraw")
    assert bind.args[2] % 256 == 0
    check_all(s, out)


# --------------------------------------------------------------------------- eligibility and explain
def _stream(body: str, pipes: str = PIPES, head: str = HEAD, prologue: str = PROLOGUE) -> Stream:
    return load(head + pipes + prologue + body)


def _draws(s: Stream) -> list[int]:
    return [i for i, c in enumerate(s.commands()) if c.spec.cat == 1]


def test_mixed_eligible_and_ineligible_pipelines() -> None:
    s = _stream("""SetGraphicsRoot32BitConstants 0 1 1
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState il
IASetVertexBuffers 0 verts 0 12
DrawIndexedInstanced 3 1 0 0 0
SetPipelineState xp
SetGraphicsRoot32BitConstants 0 1 3
DrawIndexedInstanced 3 1 6 0 0
SetPipelineState nox
DrawIndexedInstanced 3 1 6 0 0
SetPipelineState never
DrawIndexedInstanced 3 1 6 0 0
DrawIndexedInstanced 3 1 9 0 0
SetPipelineState xp
SetGraphicsRoot32BitConstants 0 1 4
DrawIndexedInstanced 3 1 9 0 0 @nomerge
SetGraphicsRoot32BitConstants 0 1 5
DrawIndexedInstanced 3 1 9 5 0
DrawInstanced 3 1 0 0
SetGraphicsRoot32BitConstants 0 1 6
DrawIndexedInstanced 3 1 12 5 0
SetGraphicsRoot32BitConstants 0 1 7
DrawIndexedInstanced 3 1 15 5 0
SetPipelineState xp2
DrawIndexedInstanced 3 1 15 5 0
""")
    out, rep = packed(s)
    assert rep["runs"] == 2 and rep["packed_draws"] == 4
    check_all(s, out)
    d = _draws(s)
    links = px.pack_links(s)
    assert links[0] is None
    assert "input layout" in links[1]
    assert "declares no x(...) contract" in links[4]
    assert "never_merge" in links[5]
    assert "@nomerge" in links[7]
    assert "DrawInstanced" in links[9]
    assert links[10] is None
    assert "pipeline differs: 'xp' then 'xp2'" in links[11]
    assert links == [px.why_not_packed(s, d[k], d[k + 1]) for k in range(len(d) - 1)]


def test_state_differences_name_the_field() -> None:
    s = _stream("""SetGraphicsRoot32BitConstants 0 1 1
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRootDescriptorTable 3 res[1]
DrawIndexedInstanced 3 1 3 0 0
RSSetScissorRects 0 0 8 8
DrawIndexedInstanced 3 1 3 0 0
ResourceBarrier zbuf DEPTH_WRITE DEPTH_READ
DrawIndexedInstanced 3 1 3 0 0
SetGraphicsRootSignature main
DrawIndexedInstanced 3 1 3 0 0
IASetIndexBuffer ib16b R16_UINT 0
SetGraphicsRoot32BitConstants 1 1 9
SetGraphicsRoot32BitConstants 0 1 2
DrawIndexedInstanced 3 1 3 0 0
""")
    d = _draws(s)
    assert px.why_not_packed(s, d[0], d[1]) == (
        "state differs: root3 (root parameter 3, not lifted by the x contract)")
    assert px.why_not_packed(s, d[1], d[2]) == "state differs: scissor"
    assert "ResourceBarrier" in px.why_not_packed(s, d[2], d[3])
    assert px.why_not_packed(s, d[3], d[4]) is None  # the same root signature again changes nothing
    assert px.why_not_packed(s, d[4], d[5]) is None  # index buffer and lifted constants may differ
    assert "between draws at commands" in px.why_not_packed(s, d[0], d[2])
    assert px.why_not_packed(s, d[1], d[2], target="d3d12").startswith("cost model: target 'd3d12' has no")
    with pytest.raises(Exception, match="not a draw"):
        px.why_not_packed(s, 0, d[1])


def test_partial_lift_residue_must_match() -> None:
    head = HEAD.replace("rootsig  main     constants(1) constants(1) srv table(srv,1) constants(1)",
                        "rootsig  main     constants(3) constants(1) srv table(srv,1)")
    pipes = ("pipeline xp       vs=pull ps=flat root=main params=0,1,2,3 "
             "contract=x(vertex_bits=16,perdraw=2,lift=0.0+0.2)\n")
    s = _stream("""SetGraphicsRoot32BitConstants 0 3 1 7 1
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
SetGraphicsRoot32BitConstants 0 1 5 dest=2
DrawIndexedInstanced 3 1 3 0 0
SetGraphicsRoot32BitConstants 0 1 8 dest=1
DrawIndexedInstanced 3 1 3 0 0
""", pipes=pipes, head=head)
    out, rep = packed(s)
    d = _draws(s)
    assert rep["runs"] == 1 and rep["packed_draws"] == 2
    assert px.why_not_packed(s, d[1], d[2]) == (
        "state differs: root0 (the words of root parameter 0 the x contract does not lift)")
    assert out.decls["packx_perdraw"].data.tolist() == [0, 0, 1, 1, 0, 0, 2, 5]
    same_instances(s, out)
    if _canonical_verifier():
        check_all(s, out)


def test_vertex_bits_too_small_for_r16() -> None:
    pipes = PIPES.replace("x(vertex_bits=16,perdraw=2,lift=0+1,base=none)\npipeline xp2",
                          "x(vertex_bits=12,perdraw=2,lift=0+1,base=none)\npipeline xp2")
    body = "DrawIndexedInstanced 3 1 0 0 0\nDrawIndexedInstanced 3 1 3 0 0\n"
    s = _stream(body, pipes=pipes)
    out, rep = px.pack_x(s)
    assert out is s and rep["eligible_draws"] == 0
    d = _draws(s)
    assert "65535" in px.why_not_packed(s, d[0], d[1]) and "vertex_bits=12" in px.why_not_packed(s, d[0], d[1])
    s = _stream(body, pipes=pipes.replace("lift=0+1,base=none)\npipeline xp2", "lift=0+1,base=none,max_index=4000)\n"
                                           "pipeline xp2"))
    out, rep = packed(s)
    assert rep["runs"] == 1
    check_all(s, out)


def test_too_many_instances_and_empty_draws_are_left_alone() -> None:
    s = _stream("""DrawIndexedInstanced 3 20 0 0 0
DrawIndexedInstanced 3 1 0 0 0
DrawIndexedInstanced 0 1 0 0 0
DrawIndexedInstanced 3 1 0 0 0
""")
    d = _draws(s)
    assert "instance_count 20 > max-instances=16" in px.why_not_packed(s, d[0], d[1])
    assert "empty" in px.why_not_packed(s, d[1], d[2])
    out, rep = px.pack_x(s, max_instances=32)
    assert rep["runs"] == 1 and rep["calls"] == 21
    check_all(s, out)


def test_undefined_lifted_value_or_index_buffer() -> None:
    s = _stream("""DrawIndexedInstanced 3 1 0 0 0
DrawIndexedInstanced 3 1 3 0 0
""", prologue=PROLOGUE.replace("SetGraphicsRoot32BitConstants 0 1 0\n", ""))
    out, rep = px.pack_x(s)
    assert out is s
    assert "lifted value 0.0" in px.why_not_packed(s, *_draws(s))
    s = _stream("DrawIndexedInstanced 3 1 0 0 0\nDrawIndexedInstanced 3 1 3 0 0\n",
                prologue=PROLOGUE.replace("IASetIndexBuffer ib16 R16_UINT 0\n", ""))
    assert "index buffer is undefined" in px.why_not_packed(s, *_draws(s))


def test_streams_without_runs_are_returned_unchanged() -> None:
    empty = load(HEAD + PIPES)
    out, rep = px.pack_x(empty)
    assert out is empty and rep["runs"] == 0 and px.pack_links(empty) == []
    one = _stream("DrawIndexedInstanced 3 1 0 0 0\n")
    assert px.pack_x(one)[0] is one


def test_fences_and_opaque_commands_break_runs() -> None:
    s = _stream("""DrawIndexedInstanced 3 1 0 0 0
Dispatch 1 1 1
DrawIndexedInstanced 3 1 3 0 0
Opaque ClearState
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState xp
IASetIndexBuffer ib16 R16_UINT 0
SetGraphicsRootShaderResourceView 2 perdraw 0
SetGraphicsRoot32BitConstants 0 1 1
SetGraphicsRoot32BitConstants 1 1 1
DrawIndexedInstanced 3 1 6 0 0
CSEnableAutomaticGpuFlush FALSE
DrawIndexedInstanced 3 1 9 0 0
SetGraphicsRoot32BitConstants 0 1 2
DrawIndexedInstanced 3 1 9 0 0
""")
    d = _draws(s)
    assert "Dispatch" in px.why_not_packed(s, d[0], d[1])
    assert "no usable pipeline" in px.why_not_packed(s, d[1], d[2])  # unknown after the Opaque command
    assert "CSEnableAutomaticGpuFlush" in px.why_not_packed(s, d[3], d[4])
    # after the Opaque command the state is unknown until it is set again; what the
    # draws do not set again stays the same unknown value, so the last two still pack
    out, rep = packed(s)
    assert rep["runs"] == 1 and rep["packed_draws"] == 2
    check_all(s, out)


# --------------------------------------------------------------------------- restores
def test_lifted_values_restored_only_when_read() -> None:
    body = """SetGraphicsRoot32BitConstants 0 1 1
SetGraphicsRoot32BitConstants 1 1 10
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
SetGraphicsRoot32BitConstants 1 1 20
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState il
IASetVertexBuffers 0 verts 0 12
"""
    # il reads root constants 0 and 1, the table and the index buffer; not the perdraw SRV
    s = _stream(body + "DrawIndexedInstanced 3 1 0 0 0\n")
    out, _ = packed(s)
    tail = [c for c in out.commands()][-6:-3]
    assert [(c.name, c.args[:1], c.var) for c in tail] == [
        ("IASetIndexBuffer", ("ib16",), ()), ("SetGraphicsRoot32BitConstants", (0,), (2,)),
        ("SetGraphicsRoot32BitConstants", (1,), (20,))]
    check_all(s, out)
    # overwritten before being read: nothing to restore
    s = _stream(body + "IASetIndexBuffer ib16 R16_UINT 0\nSetGraphicsRoot32BitConstants 0 1 5\n"
                "SetGraphicsRoot32BitConstants 1 1 6\nDrawIndexedInstanced 3 1 0 0 0\n")
    out, _ = packed(s)
    i = max(k for k, c in enumerate(out.commands()) if c.name == "DrawIndexedX")
    assert out.command(i + 1).name == "SetPipelineState"
    check_all(s, out)
    # a partial update merges with the value it finds: the full value is restored first
    s = _stream(body + "SetGraphicsRoot32BitConstants 0 1 5 dest=0\nSetGraphicsRoot32BitConstants 1 1 6\n"
                "DrawIndexedInstanced 3 1 0 0 0\n")
    out, _ = packed(s)
    check_all(s, out)


def test_perdraw_binding_restored_for_a_later_reader() -> None:
    s = _stream("""SetGraphicsRoot32BitConstants 0 1 1
SetGraphicsRoot32BitConstants 1 1 1
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState nox
DrawIndexedInstanced 3 1 0 0 0
""")
    out, _ = packed(s)
    srv = [c.args for c in out.commands() if c.name == "SetGraphicsRootShaderResourceView"]
    assert srv == [(2, "perdraw", 0), (2, "packx_perdraw", 0), (2, "perdraw", 0)]
    check_all(s, out)


def test_unrestorable_run_is_left_alone() -> None:
    s = _stream("""SetGraphicsRoot32BitConstants 0 1 1
SetGraphicsRoot32BitConstants 1 1 1
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState nox
DrawIndexedInstanced 3 1 0 0 0
""", prologue=PROLOGUE.replace("SetGraphicsRootShaderResourceView 2 perdraw 0\n", ""))
    out, rep = px.pack_x(s)
    assert out is s and rep["unrestorable_runs"] == 1
    d = _draws(s)
    assert "restored" in px.why_not_packed(s, d[0], d[1])


# --------------------------------------------------------------------------- targets and the pass
def test_targets_follow_the_cost_model() -> None:
    s = formats.load(GOLDEN / "r16-lifted.in.dstream")
    for target, changed in (("d3d12", False), ("vulkan", False), ("gl", False), ("xbox-series", False),
                            ("xbox-one", True)):
        out = optimize(s, "pack-x", target=target).stream
        assert (out is not s) == changed, target
    (p,) = parse_pipeline("pack-x{force=1,max-instances=2}")
    assert p.force and p.max_instances == 2
    assert optimize(s, [p], target="xbox-series").stream is not s
    (p,) = parse_pipeline("pack-x{force=1}")
    assert optimize(s, [p], target="d3d12").stream is s  # force cannot add DrawIndexedX to a target without it
    links = px.pack_links(s, target="xbox-series")
    assert links and all(w.startswith("cost model: target 'xbox-series' runs DrawIndexedX like") for w in links)
    with pytest.raises(Exception, match="unknown target"):
        optimize(s, "pack-x", target="ps5")


def test_pass_registered_and_reports() -> None:
    from drawopt.passmanager import PassManager, get_pass
    assert get_pass("pack-x") is px.PackXPass and px.PackXPass.name == "pack-x"
    s = formats.load(GOLDEN / "r16-lifted.in.dstream")
    pm = PassManager(parse_pipeline("pack-x"), verify_each=True, target="xbox-one")
    pm.run(s)
    (rec,) = pm.records
    assert rec.modified and rec.verified and rec.report["runs"] == 1 and rec.report["buffer"] == "packx_perdraw"


def test_generated_buffer_name_is_unique() -> None:
    text = (GOLDEN / "r16-lifted.in.dstream").read_text().replace(
        "buffer   perdraw  size=4096", "buffer   perdraw  size=4096\nbuffer   packx_perdraw size=16")
    out, rep = packed(load(text))
    assert rep["buffer"] == "packx_perdraw1" and "packx_perdraw1" in out.decls


# --------------------------------------------------------------------------- the canonical contract
_PROBE_IN = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib16     size=1024
target   rt       8x8 R8G8B8A8_UNORM
rootsig  main     constants(2) srv
pipeline p        vs=pull ps=flat root=main contract=x(vertex_bits=16,perdraw=1,lift=0.1)

OMSetRenderTargets rt
SetGraphicsRootSignature main
SetPipelineState p
IASetPrimitiveTopology TRIANGLELIST
IASetIndexBuffer ib16 R16_UINT 0
SetGraphicsRoot32BitConstants 0 2 7 1
DrawIndexedInstanced 3 1 0 5 0
SetGraphicsRoot32BitConstants 0 1 2 dest=1
DrawIndexedInstanced 3 1 3 6 0
"""
_PROBE_OUT = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on
buffer   ib16     size=1024
target   rt       8x8 R8G8B8A8_UNORM
rootsig  main     constants(2) srv
pipeline p        vs=pull ps=flat root=main contract=x(vertex_bits=16,perdraw=1,lift=0.1)
buffer   recs     size=24 cpu
data     recs     5 0 1 6 0 2

OMSetRenderTargets rt
SetGraphicsRootSignature main
SetPipelineState p
IASetPrimitiveTopology TRIANGLELIST
SetGraphicsRoot32BitConstants 0 2 7 1
SetGraphicsRootShaderResourceView 1 recs 0
DrawIndexedX ib16 0 R16_UINT 3 0
DrawIndexedX ib16 6 R16_UINT 3 65536
"""


def _canonical_verifier() -> bool:
    """Whether drawopt.verify reads x contracts as docs/architecture.md defines them
    (``base=none`` by default, ``lift=P.k`` items, one record word each), judged on a
    hand-written packing that is correct by that definition."""
    return verify(load(_PROBE_IN), load(_PROBE_OUT)).equivalent


def test_probe_is_a_correct_packing() -> None:
    same_instances(load(_PROBE_IN), load(_PROBE_OUT))


needs_canonical_verifier = pytest.mark.xfail(
    not _canonical_verifier(), strict=True,
    reason="drawopt.verify does not yet read x contracts as docs/architecture.md defines them "
           "(default base=none, lift=P.k items); see the pack-x report for the fix")


@needs_canonical_verifier
def test_canonical_probe_verifies() -> None:
    assert _canonical_verifier()


@needs_canonical_verifier
def test_lifted_table_and_root_view_offsets() -> None:
    head = HEAD.replace("rootsig  main     constants(1) constants(1) srv table(srv,1) constants(1)",
                        "rootsig  main     constants(1) cbv srv table(srv,1)")
    pipes = ("pipeline bl       vs=pull ps=bindless root=main "
             "contract=x(vertex_bits=16,perdraw=2,lift=0+3.0+1.0+1.1)\n")
    s = _stream("""SetGraphicsRoot32BitConstants 0 1 1
SetGraphicsRootConstantBufferView 1 verts 256
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 1 2
SetGraphicsRootDescriptorTable 3 res[5]
SetGraphicsRootConstantBufferView 1 verts 512
DrawIndexedInstanced 3 1 3 0 0
SetGraphicsRootConstantBufferView 1 perdraw 512
DrawIndexedInstanced 3 1 3 0 0
""", pipes=pipes, head=head, prologue=PROLOGUE.replace("SetPipelineState xp", "SetPipelineState bl").replace(
        "SetGraphicsRoot32BitConstants 1 1 0\n", ""))
    out, rep = packed(s)
    assert rep["packed_draws"] == 2
    assert out.decls["packx_perdraw"].data.tolist() == [0, 0, 1, 0, 256, 0, 0, 0, 2, 5, 512, 0]
    d = _draws(s)
    assert "root1" in px.why_not_packed(s, d[1], d[2])  # the CBV's buffer is not lifted
    check_all(s, out)


@needs_canonical_verifier
def test_generated_frame_verifies() -> None:
    from drawopt.gen import generate
    s = generate("frame", 1500, seed=11)
    out, rep = packed(s)
    assert rep["runs"] > 10
    r = verify(s, out)
    assert r.equivalent, r.reason


# --------------------------------------------------------------------------- random streams
def _random_stream(seed: int) -> Stream:
    rng = np.random.default_rng(seed)
    lines = [HEAD.rstrip("\n"), PIPES.rstrip("\n"),
             "pipeline xv       vs=pull ps=flat root=main params=0,1,2,3 "
             "contract=x(vertex_bits=20,perdraw=2,lift=1,max_index=60000,base=vertex)",
             "pipeline xs       vs=pull ps=flat root=main params=0,1,2,3 "
             "contract=x(vertex_bits=29,perdraw=2,lift=0+1,base=none)",
             PROLOGUE.rstrip("\n"), "SetGraphicsRoot32BitConstants 0 1 0", "SetGraphicsRoot32BitConstants 1 1 0"]
    pipes = ["xp", "xp", "xp", "xv", "xs", "il", "nox", "xp2"]
    for _ in range(int(rng.integers(5, 40))):
        r = rng.random()
        if r < 0.15:
            lines.append(f"SetPipelineState {pipes[int(rng.integers(len(pipes)))]}")
            lines.append("IASetVertexBuffers 0 verts 0 12")
        elif r < 0.25:
            fmt = rng.choice(["ib16 R16_UINT", "ib16b R16_UINT", "ib32 R32_UINT"])
            lines.append(f"IASetIndexBuffer {fmt} {int(rng.integers(0, 4)) * 64}")
        elif r < 0.3:
            lines.append(f"SetGraphicsRootDescriptorTable 3 res[{int(rng.integers(0, 2))}]")
        elif r < 0.33:
            lines.append(rng.choice(["SetGraphicsRootShaderResourceView 2 perdraw 0", "RSSetScissorRects 0 0 8 8",
                                     "ResourceBarrier zbuf DEPTH_WRITE DEPTH_WRITE"]))
        elif r < 0.38:
            lines.append(f"DrawInstanced 3 1 {int(rng.integers(0, 9))} 0")
        else:
            if rng.random() < 0.6:
                lines.append(f"SetGraphicsRoot32BitConstants {int(rng.integers(0, 2))} 1 {int(rng.integers(0, 99))}")
            inst = int(rng.integers(1, 4)) if rng.random() < 0.2 else 1
            base = int(rng.integers(-5, 70000)) if rng.random() < 0.3 else int(rng.integers(0, 50))
            lines.append(f"DrawIndexedInstanced {3 * int(rng.integers(1, 5))} {inst} {int(rng.integers(0, 300))} "
                         f"{base} {int(rng.integers(0, 3))}")
    if rng.random() < 0.5:
        lines.append("SetPipelineState il")
        lines.append("DrawIndexedInstanced 3 1 0 0 0")
    return load("\n".join(lines) + "\n")


@pytest.mark.parametrize("seed", range(40))
def test_random_streams(seed: int) -> None:
    s = _random_stream(seed)
    out, rep = px.pack_x(s)
    if out is not s:
        check_all(s, out)
    links = px.pack_links(s)
    assert sum(w is None for w in links) == rep["packed_draws"] - rep["runs"]


# --------------------------------------------------------------------------- generated frames
def test_generated_frame_packs_most_eligible_draws() -> None:
    """After scheduling (opaque depth-tested draws commute; no @nomerge draws pinning
    segments), >= 90% of the eligible draws end in packed runs of 2 or more."""
    from drawopt.gen import generate
    s = generate("frame", 3000, seed=7, vertex_pulling_fraction=0.5, nomerge_fraction=0.0)
    pre = optimize(s, "dedupe-state,schedule", target="xbox-one", reorder="opaque").stream
    out, rep = packed(pre)
    assert rep["packed_of_eligible"] >= 0.9, rep
    st = compute_stats(out)
    assert st["gpu_batches"] < compute_stats(pre)["gpu_batches"] - rep["packed_draws"] // 2
    assert st["packed_fraction"] > 0.3


@pytest.mark.slow
def test_100k_frame() -> None:
    from drawopt.analysis.state import track
    from drawopt.gen import generate
    s = generate("frame", 100_000, seed=7)
    out, rep = px.pack_x(s, table=track(s))
    assert rep["packed_draws"] > 20_000
    out.check()
