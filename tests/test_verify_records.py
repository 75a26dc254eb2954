"""Pieces of the validator's record expansion (``drawopt.verify.records``) checked on their own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from drawopt.verify.records import _Expander


def _range_max(size: int, data: np.ndarray, soff: np.ndarray, fmt: int, count: np.ndarray) -> np.ndarray:
    """``_Expander._range_max`` of ranges of one buffer (id 0) declared ``size`` bytes with ``data``."""
    raw = data.astype("<u4").view(np.uint8)
    fake = SimpleNamespace(bufdecl={0: SimpleNamespace(size=size)}, data_bytes=lambda b: raw)
    return _Expander._range_max(fake, np.zeros(soff.size, np.int64), soff, np.full(soff.size, fmt), count)


def _reference(size: int, data: np.ndarray, soff: np.ndarray, fmt: int, count: np.ndarray) -> list[int]:
    """The largest index of each range, read from the whole buffer spelled out (zeros after the data)."""
    isz = 4 if fmt == 1 else 2
    raw = np.zeros(size, np.uint8)
    b = data.astype("<u4").view(np.uint8)[:size]
    raw[:b.size] = b
    vals = raw[:size // isz * isz].view("<u4" if fmt == 1 else "<u2").astype(np.int64)
    out = []
    for o, c in zip(soff.tolist(), count.tolist()):
        c = max(c, 0)
        if o < 0 or o % isz or o // isz + c > vals.size:
            out.append(-2)
        else:
            out.append(int(vals[o // isz:o // isz + c].max()) if c else -1)
    return out


def test_range_max_equals_the_spelled_out_buffer() -> None:
    """Ranges inside the data, across its end, past it (zeros), past the buffer, misaligned, empty."""
    rng = np.random.default_rng(3)
    for size in (0, 6, 64, 130, 4096):
        for n_words in (0, 3, 20, 40):
            data = rng.integers(0, 2**32, n_words, dtype=np.uint64)
            for fmt in (0, 1):
                soff = rng.integers(-4, size + 8, 300)
                soff[:150] -= soff[:150] % (4 if fmt else 2)
                count = rng.integers(-1, 40, 300)
                assert _range_max(size, data, soff, fmt, count).tolist() == _reference(size, data, soff, fmt, count)


def test_range_max_of_a_buffer_declared_far_larger_than_its_data() -> None:
    """A stream may declare a buffer of terabytes with a few words of data: only the data is read
    (the zeros after it are not allocated; this raised MemoryError)."""
    data = np.array([0x00030007, 0x0001FFFF, 5], np.uint64)
    soff = np.array([0, 4, 8, 10, 2**40, 2**41 - 4, 2**41 - 2, 0], np.int64)
    count = np.array([2, 2, 4, 100, 8, 2, 2, 6], np.int64)
    assert _range_max(2**41, data, soff, 0, count).tolist() == [7, 65535, 5, 0, 0, 0, -2, 65535]


def _pipeline_accesses_by_loop(E: _Expander, acts: np.ndarray, p: np.ndarray) -> tuple[set, set]:
    """What the actions reach through their pipeline, one pipeline and one root parameter at a
    time (the loop :meth:`_Expander._pipeline_accesses` replaced): ``({(i, res, label)}, {(i, res)})``."""
    from drawopt.verify.records import RV_BUF, Col, cid_of

    st, s = E.st, E.s
    ws, rs = set(), set()

    def add(out: set, i: np.ndarray, r: np.ndarray, lab: int | None = None) -> None:
        out.update(zip(i.tolist(), r.tolist(), [lab] * i.size) if lab is not None else zip(i.tolist(), r.tolist()))

    for pp in np.unique(p[p >= 0]).tolist():
        pi = E.pipes[pp]
        sel = np.flatnonzero(p == pp)
        lab = 1 if (pi.oi and E.reorder != "none") else 0
        for r in pi.writes:
            add(ws, sel, np.full(sel.size, r), lab)
        for r in pi.reads:
            add(rs, sel, np.full(sel.size, r))
        root = E.decls[E.canon.name(pi.root_cid)] if pi.root_cid >= 0 else None
        for q, kind, _count in pi.params:
            if kind == "table" and root is not None:
                href = st.value_at(cid_of(Col.TC if pi.compute else Col.TG, q), acts[sel])
                ok = href >= 0
                t, heap, slot = sel[ok], href[ok] >> 32, href[ok] & 0xFFFFFFFF
                for rkind, cnt in root.params[q].ranges:
                    for j in range(t.size):
                        for k in range(int(slot[j]), int(slot[j]) + cnt):
                            hit = np.flatnonzero(E.views.keys == (int(heap[j]) << 34) + k)
                            if hit.size and E.views.rids[hit[0]] >= 0:
                                r = int(E.views.rids[hit[0]])
                                rs.add((int(t[j]), r))
                                if rkind == "uav" and E.views.kinds[hit[0]] == "uav":
                                    ws.add((int(t[j]), r, lab))
                    slot = slot + cnt
            elif kind in ("cbv", "srv", "uav") and not pi.compute:
                c = cid_of(Col.VG, q)
                k = sel[st.value_at(c, acts[sel]) >= 0]
                r = E.cmap[s.args[st.source_at(c, acts[k]), RV_BUF]]
                if kind == "uav":
                    add(ws, k, r, lab)
                add(rs, k, r)
    return ws, rs


_TABLES = """\
drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer   b0 size=256
buffer   b1 size=256
buffer   b2 size=256
buffer   b3 size=256
buffer   b4 size=256
target   rt 64x64 R8G8B8A8_UNORM
depth    z 64x64 D32_FLOAT
heap     h CBV_SRV_UAV 8
view     h[0] srv b0
view     h[1] uav b1
view     h[2] srv b2
view     h[3] uav b3
view     h[4] srv b4
view     h[5] uav b4
rootsig  rs table(srv,2,uav,2) srv uav table(uav,1,srv,2)
pipeline p0 vs=v ps=f depth=lequal,write root=rs writes=b4 contract=order_independent
pipeline p1 vs=v ps=f root=rs params=0,1,2,3 reads=b0 writes=b2
pipeline p2 vs=v ps=f blend=alpha root=rs params=0,2,3 contract=order_independent

OMSetRenderTargets rt z
SetDescriptorHeaps h
SetGraphicsRootSignature rs
SetGraphicsRootDescriptorTable 0 h[0]
SetGraphicsRootDescriptorTable 3 h[3]
SetGraphicsRootShaderResourceView 1 b3 0
SetGraphicsRootShaderResourceView 2 b1 16
SetPipelineState p0
DrawInstanced 3 1 0 0
SetPipelineState p1
DrawInstanced 3 1 0 0
SetGraphicsRootDescriptorTable 0 h[2]
DrawInstanced 3 1 0 0
SetPipelineState p2
DrawInstanced 3 1 0 0
SetGraphicsRootDescriptorTable 3 h[1]
DrawInstanced 3 1 0 0
"""
"""Tables of several ranges (a UAV view in an SRV range and the reverse), root views of each kind,
order-independent pipelines with declared writes (labelled), a pipeline without params= (all)."""


def test_pipeline_accesses_equal_the_loop_over_pipelines() -> None:
    """The columnar pipeline accesses (all pipelines at once) are the per-pipeline loop's, for
    every action of streams with tables, root views and UAVs, under every reorder policy."""
    import glob

    import pytest

    from drawopt.ir import formats
    from drawopt.verify.model import Canon
    from drawopt.verify.slots import column_universe, op_indexes

    gen = pytest.importorskip("drawopt.gen")
    streams = [gen.generate(kind, 150, seed=seed) for kind in ("frame", "gpu-driven", "bundle", "quads")
               for seed in (1, 2)]
    streams += [formats.load(f) for f in sorted(glob.glob("examples/*.dstream"))] + [formats.loads(_TABLES)]
    n_rows = 0
    for s in streams:
        for reorder in ("none", "declared"):
            canon = Canon()
            with op_indexes():
                E = _Expander(s, canon, column_universe([s]), reorder)
                E._pipelines()
                acts = np.arange(E.nA, dtype=np.int64)[::-1].copy()   # in any order (the caller's are not sorted)
                p = E.a_pipe[acts]
                ws: list = []
                rs: list = []
                E._pipeline_accesses(acts, p, ws, rs)
                got_w = {(int(i), int(r), int(lab)) for a, res, labs in ws
                         for i, r, lab in zip(a, res, np.broadcast_to(labs, a.shape))}
                got_r = {(int(i), int(r)) for a, res in rs for i, r in zip(a, res)}
                want_w, want_r = _pipeline_accesses_by_loop(E, acts, p)
            assert got_w == want_w and got_r == want_r
            n_rows += len(want_r)
    assert n_rows > 1000   # the streams do reach resources through their pipelines
