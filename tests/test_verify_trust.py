"""Translation validator: the holes of issue 12 (verifier side), one class per section.

Each test is a hand-written rewrite that no pass produces (a mutant) and that the
validator accepted before issue 12, or a false alarm it raised; the correct rewrite next
to it must still verify.
"""

from __future__ import annotations

import numpy as np
import pytest

from drawopt.ir.formats import loads
from drawopt.ir.stream import Stream
from drawopt.verify import verify

HEAD = """drawopt 1 context=graphics kind={kind} fast_semantics=off
buffer verts size=65536
buffer ib16 size=65536
buffer ib32 size=65536
buffer pd size=64 cpu
data pd 0 0 7 0 0 9
target rt 64x64 R8G8B8A8_UNORM
depth z 64x64 D32_FLOAT
heap res CBV_SRV_UAV 16
view res[0] srv verts
rootsig main table(srv,1) constants(2) srv
pipeline a vs=v ps=f layout=pos blend=alpha root=main params=0,1
pipeline xv vs=pull ps=f depth=less,write root=main params=0,1,2 contract=x(vertex_bits=16,perdraw=2,lift=1.0,\
base=vertex{mi})
"""
PRE = """OMSetRenderTargets rt z
SetGraphicsRootSignature main
SetDescriptorHeaps res
SetGraphicsRootDescriptorTable 0 res[0]
IASetPrimitiveTopology TRIANGLELIST
"""


def S(body: str, kind: str = "list", extra: str = "", max_index: int | None = None) -> Stream:
    mi = f",max_index={max_index}" if max_index is not None else ""
    return loads(HEAD.format(kind=kind, mi=mi) + extra + body, file="<test>")


# --------------------------------------------------------------------------- item 2: DrawIndexedX overflow
def _x_pair(fmt: str, base: int) -> tuple[str, str]:
    """Two DrawIndexedInstanced (base vertex 0 and ``base``) and their DrawIndexedX packing
    (draw ids 0 and 1, the base vertex in the low bits: base=vertex)."""
    ib = "ib32" if fmt == "R32_UINT" else "ib16"
    isz = 4 if fmt == "R32_UINT" else 2
    orig = PRE + (f"SetPipelineState xv\nIASetIndexBuffer {ib} {fmt} 0\nSetGraphicsRoot32BitConstants 1 1 7\n"
                  f"DrawIndexedInstanced 3 1 0 0 0\nSetGraphicsRoot32BitConstants 1 1 9\n"
                  f"DrawIndexedInstanced 3 1 3 {base} 0\n")
    packed = PRE + (f"SetPipelineState xv\nSetGraphicsRootShaderResourceView 2 pd 0\n"
                    f"DrawIndexedX {ib} 0 {fmt} 3 0\nDrawIndexedX {ib} {3 * isz} {fmt} 3 {(1 << 16) | base}\n")
    return orig, packed


@pytest.mark.parametrize("fmt,base", [("R32_UINT", 0), ("R16_UINT", 5)])
def test_x_packing_that_may_overflow_the_vertex_bits_is_rejected(fmt: str, base: int) -> None:
    """No max_index and unknown index data: an R32 index, or an R16 index plus non-zero low
    bits, may reach 2^16 and carry into the draw id, so the record the vertices read is
    ambiguous (pack-x declines these; issue 12 item 2)."""
    o, p = _x_pair(fmt, base)
    r = verify(S(o), S(p))
    assert not r.equivalent
    assert "may reach" in r.reason and "carry into the draw id" in r.reason and "ambiguous" in r.reason, r.reason
    assert r.details["rule"] == "x-index-overflow" and r.line_b is not None
    # a max_index that proves the fit makes the same packing correct
    assert verify(S(o, max_index=1000), S(p, max_index=1000)).equivalent


def _index_words(fmt: str, idx: list[int]) -> str:
    """``data`` words (little-endian 32-bit) holding indices ``idx`` in format ``fmt``."""
    a = np.array(idx, "<u4" if fmt == "R32_UINT" else "<u2")
    if a.nbytes % 4:
        a = np.r_[a, np.zeros(1, a.dtype)]
    return " ".join(str(int(w)) for w in a.view("<u4"))


def test_known_index_data_decides_the_fit() -> None:
    """CPU-known index data: an index that provably overflows is rejected even where no
    max_index is declared; data that provably fits is accepted (R32 too)."""
    for fmt, ib, big in (("R16_UINT", "ib16", 65534), ("R32_UINT", "ib32", 70000)):
        o, p = _x_pair(fmt, 5)
        head = HEAD.format(kind="list", mi="")
        for last, ok in ((big, False), (3, True)):
            data = f"buffer {ib} size=65536 cpu\ndata {ib} {_index_words(fmt, [0, 1, 2, 0, 1, last])}\n"
            h = head.replace(f"buffer {ib} size=65536\n", data)
            r = verify(loads(h + o), loads(h + p))
            assert r.equivalent == ok, (fmt, last, r.reason)
            if not ok:
                assert f"holds index {big}" in r.reason and r.details["rule"] == "x-index-overflow", r.reason


def test_r16_without_low_bits_fits_by_its_format() -> None:
    o, p = _x_pair("R16_UINT", 0)
    assert verify(S(o), S(p)).equivalent


def test_range_max_query_matches_numpy() -> None:
    from drawopt.verify.records import _range_max_query
    rng = np.random.default_rng(4)
    vals = rng.integers(0, 1 << 20, 1000)
    lo = rng.integers(0, 999, 200)
    hi = lo + 1 + rng.integers(0, 1000 - lo)
    got = _range_max_query(vals, lo, np.minimum(hi, 1000))
    want = np.array([vals[a:b].max() for a, b in zip(lo, np.minimum(hi, 1000))])
    assert np.array_equal(got, want)


# --------------------------------------------------------------------------- item 3: flushes per reader
FLUSH_DECLS = """buffer cullargs size=4096
target rt2 64x64 R8G8B8A8_UNORM
view res[1] uav cullargs
pipeline cull cs=cull root=main writes=res[1]
"""
CULL = "SetComputeRootSignature main\nSetPipelineState cull\nDispatch 64 1 1\n"
L2 = "FlushGpuCacheRange DEFAULT_PFP\n"


def _read(target: str, off: int = 0, n: int = 4) -> str:
    return (f"OMSetRenderTargets {target}\nSetPipelineState a\nIASetVertexBuffers 0 verts 0 16\n"
            f"MultiDrawInstancedIndirect {n} cullargs {off} 16\n")


def F(body: str) -> Stream:
    return S(PRE.replace("OMSetRenderTargets rt z\n", "") + body, extra=FLUSH_DECLS)


def test_flush_moved_to_another_reader_of_another_write_is_rejected() -> None:
    """The input lacks the flush before read 1 and has it before read 2; the output adds the
    first and drops the second. The number of uncovered reads is the same (one), but the
    read at the second write is now uncovered (issue 12 item 3)."""
    a = CULL + _read("rt") + CULL + L2 + _read("rt", 64)
    b = CULL + L2 + _read("rt") + CULL + _read("rt", 64)
    r = verify(F(a), F(b))
    assert not r.equivalent
    assert "missing FlushGpuCacheRange DEFAULT_PFP" in r.reason and r.details["rule"] == "flush", r.reason
    assert r.line_b == F(b).line[len(F(b)) - 1]           # the second read, in the optimized stream
    assert verify(F(a), F(a)).equivalent


def test_flush_moved_between_readers_of_one_write_is_rejected() -> None:
    """One write, two readers on different targets (they commute): the input flushes
    between them (reader X uncovered, reader Y covered); the output swaps the readers and
    keeps the flush between them, so Y is uncovered and X covered."""
    a = CULL + _read("rt") + L2 + _read("rt2", 64)
    b = CULL + _read("rt2", 64) + L2 + _read("rt")
    r = verify(F(a), F(b))
    assert not r.equivalent and "missing FlushGpuCacheRange DEFAULT_PFP" in r.reason, r.reason
    # with the flush before both, the swap is fine
    assert verify(F(a), F(CULL + L2 + _read("rt2", 64) + _read("rt"))).equivalent


def test_regrouping_uncovered_reads_adds_no_violation() -> None:
    """Readers the input already left uncovered may be split or merged: each draw's read
    stays uncovered, none becomes so (per reader, not per count)."""
    one = CULL + _read("rt", 0, 4)
    split = CULL + "".join(_read("rt", 16 * i, 1) for i in range(4))
    assert verify(F(one), F(split)).equivalent
    assert verify(F(split), F(one)).equivalent
    # but merging a covered reader into an uncovered one is not
    part = CULL + _read("rt", 0, 2) + L2 + _read("rt", 32, 2)
    r = verify(F(part), F(one))
    assert not r.equivalent and "missing FlushGpuCacheRange" in r.reason, r.reason


# --------------------------------------------------------------------------- item 12: size-independent verdicts
def test_multi_draw_of_more_than_65536_draws_is_expanded() -> None:
    """The verdict does not depend on batch size: a multi-draw of 70,000 CPU-written draws
    equals the same draws in two batches (it used to be one opaque record above 2^16 draws,
    a false alarm on mdi's output for a 1M-draw frame; issue 12 item 12), and a draw lost
    at a batch boundary is found."""
    from test_mutations import multidraw  # the mutation suite's builder (large-multi-draw)
    n = 70_000
    one, two = multidraw(n, [n]), multidraw(n, [40_000, 30_000])
    r = verify(one, two)
    assert r.equivalent, r.reason
    assert r.details["stats"]["records"] == [n, n]
    bad = two.copy()
    last = int(np.flatnonzero(bad.op == bad.op[len(bad) - 1])[-1])
    bad.args[last, bad.spec(last).col("offset")] += 20     # the second batch skips draw 40,000
    r = verify(one, bad)
    assert not r.equivalent
    assert "draw 40000 of the MultiDrawIndexedInstancedIndirect" in r.reason, r.reason


# --------------------------------------------------------------------------- item 5: bundle exit state
def test_dropped_trailing_root_constants_of_a_bundle_are_a_difference() -> None:
    """A bundle's exit state is observed by the caller's draws after ExecuteBundle: a
    trailing root-constant set (after the last draw) may not be dropped, nor a value the
    bundle never set be set (issue 12 item 5). In a list the same drop is fine."""
    body = PRE + "SetPipelineState a\nIASetVertexBuffers 0 verts 0 16\nDrawInstanced 3 1 0 0\n"
    tail = "SetGraphicsRoot32BitConstants 1 1 42\n"
    r = verify(S(body + tail, kind="bundle"), S(body, kind="bundle"))
    assert not r.equivalent
    assert r.reason.startswith("bundle exit state: root constant 1[0] 0x2a != never set"), r.reason
    assert r.details["field"] == "exit" and r.line_a is not None
    assert verify(S(body + tail), S(body)).equivalent                 # a list hands nothing back
    r = verify(S(body, kind="bundle"), S(body + tail, kind="bundle"))  # set what the caller had
    assert not r.equivalent and "never set (the caller's value) != 0x2a" in r.reason, r.reason
    # the value the caller sees is what matters, not the commands: a repeat is fine
    assert verify(S(body + tail, kind="bundle"), S(body + tail + tail, kind="bundle")).equivalent


def _packed_bundle() -> tuple[Stream, Stream]:
    from drawopt.result import optimize
    o, _ = _x_pair("R16_UINT", 5)
    o = o.replace("SetPipelineState xv\n", "SetPipelineState xv\nSetGraphicsRootShaderResourceView 2 verts 0\n")
    a = S(o, kind="bundle", max_index=1000)
    return a, optimize(a, "pack-x", target="xbox-one").stream


def test_pack_x_bundle_without_its_end_of_bundle_restores_is_rejected() -> None:
    """pack-x re-sets, after a run that ends a bundle, the per-draw root view, the index
    buffer and the lifted root constants the caller would otherwise see changed. The
    packed bundle verifies; stripped of those restores it does not."""
    a, out = _packed_bundle()
    names = [out.spec(i).name for i in range(len(out))]
    assert "DrawIndexedX" in names
    last = max(i for i, n in enumerate(names) if n == "DrawIndexedX")
    assert last < len(out) - 1, "pack-x emitted no restores"
    assert verify(a, out).equivalent
    stripped = out.take(list(range(last + 1)))
    r = verify(a, stripped)
    assert not r.equivalent and r.reason.startswith("bundle exit state:"), r.reason
    for k in range(last + 1, len(out)):   # each restore matters on its own
        r = verify(a, out.take([i for i in range(len(out)) if i != k]))
        assert not r.equivalent and "bundle exit state" in r.reason, (names[k], r.reason)


def test_a_bundle_table_set_before_its_first_heaps_reaches_the_caller() -> None:
    """A bundle's first SetDescriptorHeaps must match the caller's heaps (it changes
    nothing), so a table set before it is still bound at the end of the bundle: dropping
    that set changes the caller's table. (The optimizer's state tracker treats the first
    heaps of a bundle as a change; dedupe-state then drops the set: found by
    test_verify_props::test_dedupe_state_output_verifies.)"""
    t = ("drawopt 1 context=graphics kind=bundle\nheap h CBV_SRV_UAV 16\nrootsig main table(srv,1)\n"
         "SetGraphicsRootDescriptorTable 0 h[0]\nSetDescriptorHeaps h\n")
    a = loads(t)
    r = verify(a, a.take([1]))
    assert not r.equivalent and r.reason.startswith("bundle exit state: descriptor table 0 h[0] != never set"), \
        r.reason
