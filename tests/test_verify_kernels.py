"""The validator's compiled kernels (``drawopt._verify``) against their pure twins.

Each kernel is checked on its own (random inputs, edge cases) and through the
validator as a whole: every array of the effective records and the canonical write
sequences, and every verdict, is the same on the compiled and the pure path
(``DRAWOPT_PURE=1``).
"""

from __future__ import annotations

import numpy as np
import pytest

from drawopt._accel import load_cext
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Stream
from drawopt.verify import verify
from drawopt.verify._hash import hash_cols, hash_cols_at, unique_inverse
from drawopt.verify.compare import _group_ids, _group_order, canonical
from drawopt.verify.model import Canon
from drawopt.verify.records import expand
from drawopt.verify.slots import _const_columns, fill_at

HAS_CEXT = load_cext("_verify", False) is not None
needs_cext = pytest.mark.skipif(not HAS_CEXT, reason="drawopt._verify is not built")


def _gen(kind: str, draws: int, seed: int) -> Stream:
    gen = pytest.importorskip("drawopt.gen")
    return gen.generate(kind, draws, seed=seed)


# --------------------------------------------------------------------------- hashing
@needs_cext
def test_hash_cols_compiled_equals_pure() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    idx = rng.integers(0, 50, n)
    cols = [rng.integers(-2**63, 2**63 - 1, n), rng.integers(-5, 5, n).astype(np.int32), 7, -3, np.int64(-9),
            rng.integers(0, 2, n).astype(bool), rng.integers(0, 2**64 - 1, n, dtype=np.uint64),
            rng.integers(0, 9, 2 * n)[::2], (rng.integers(-9, 9, 50), idx)]
    a, b = hash_cols(cols, n, pure=False), hash_cols(cols, n, pure=True)
    assert a.dtype == np.int64 and np.array_equal(a, b)
    assert hash_cols([], 3, pure=False).tolist() == hash_cols([], 3, pure=True).tolist()


def test_hash_cols_reads_gathered_columns_in_place() -> None:
    # (array, idx) is array[idx], on both paths
    v, i = np.array([4, -1, 2, 9]), np.array([3, 3, 0, 1])
    for pure in (True, False):
        assert np.array_equal(hash_cols([1, (v, i)], 4, pure=pure), hash_cols([1, v[i]], 4, pure=pure))


@needs_cext
@pytest.mark.parametrize("fold", [None, (-16, 0, -1)])
def test_hash_cols_at_compiled_equals_pure(fold) -> None:
    rng = np.random.default_rng(1)
    v = rng.integers(-20, 20, 300)
    idx = rng.integers(0, 300, 500)
    cols = [5, v, -2, v[::-1].copy(), rng.integers(0, 2**62, 300)]
    assert np.array_equal(hash_cols_at(cols, idx, fold, pure=False), hash_cols_at(cols, idx, fold, pure=True))
    if fold is not None:   # the fold reads values strictly inside (lo, hi) as `to`
        x = np.where((v > -16) & (v < 0), -1, v)
        assert np.array_equal(hash_cols_at([v], idx, fold, pure=True), hash_cols([x[idx]], idx.size))


def test_hash_cols_goes_on_from_init() -> None:
    # hash_cols(b, init=hash_cols(a)) == hash_cols(a + b): a shared prefix is hashed once
    rng = np.random.default_rng(6)
    n = 400
    a = [rng.integers(-9, 9, n), (rng.integers(-9, 9, 30), rng.integers(0, 30, n)), 3]
    b = [rng.integers(0, 2**62, n), -5, (rng.integers(-20, 20, 40), rng.integers(0, 40, n))]
    idx = rng.integers(0, n, 100)
    for pure in (True, False):
        full = hash_cols(a + b, n, pure=pure)
        h = hash_cols(a, n, pure=pure)
        assert np.array_equal(hash_cols(b, n, init=h, pure=pure), full)
        sub = [(c[0], c[1][idx]) if isinstance(c, tuple) else c[idx] if isinstance(c, np.ndarray) else c for c in b]
        assert np.array_equal(hash_cols(sub, idx.size, init=(h, idx), pure=pure), full[idx])


@needs_cext
def test_unique_inverse_compiled_equals_np_unique() -> None:
    rng = np.random.default_rng(7)
    for n, hi in ((0, 3), (1, 3), (50, 3), (5000, 40), (5000, 2**62), (70000, 2**62)):
        x = rng.integers(-hi, hi, n)
        a, b = unique_inverse(x, pure=False), unique_inverse(x, pure=True)
        assert all(p.dtype == q.dtype == np.int64 and np.array_equal(p, q) for p, q in zip(a, b))
        u, first, inv = a
        assert np.array_equal(u[inv], x) and (np.diff(u) > 0).all() and np.array_equal(x[first], u)


@needs_cext
def test_group_order_compiled_equals_lexsort() -> None:
    # each run of equal group ids sorted by the keys (the last one first, uint64 unsigned), stably
    rng = np.random.default_rng(8)
    for trial in range(200):
        n = int(rng.integers(0, 300))
        gid = np.sort(rng.integers(0, max(1, n // int(rng.integers(1, 40))), n))
        keys = [rng.integers(0, int(rng.integers(1, 5)), n) for _ in range(int(rng.integers(1, 4)))]
        keys.append(rng.integers(0, 2**64 - 1, n, dtype=np.uint64) if trial % 2 else rng.integers(-3, 3, n))
        keys.append(rng.integers(0, 3, n).astype(np.uint64) * np.uint64(2**63 - 1))

        def by(i, keys=keys):
            return tuple(k[i] for k in keys)

        a, b = _group_order(gid, by, pure=False), _group_order(gid, by, pure=True)
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@needs_cext
def test_buffer_words_compiled_equals_pure() -> None:
    # words of CPU-written buffers at any offset: misaligned, negative, past the data, past the end
    from drawopt import StreamBuilder
    from drawopt.verify.records import _Expander
    from drawopt.verify.slots import column_universe

    b = StreamBuilder()
    b.buffer("args", 64, cpu=True, data=np.arange(10, dtype=np.uint32) * 7 + 1)
    b.buffer("empty", 32, cpu=True)
    s = b.build()
    e = _Expander(s, Canon(), column_universe([s]), "declared")
    e._pipelines()
    e._state()
    e._accesses()   # (what words() reads: the buffers' declarations)
    rng = np.random.default_rng(9)
    ids = e.cmap[:-1]
    buf = np.r_[rng.choice(np.r_[ids, -1, 99], 400), ids[0]]
    off = np.r_[rng.integers(-8, 80, 400), 2**63 - 4]
    for nwords in (1, 4, 5):
        a, p = e.words(buf, off, nwords, pure=False), e.words(buf, off, nwords, pure=True)
        assert a.dtype == p.dtype == np.int64 and np.array_equal(a, p)
    one, at = np.full(5, ids[0]), np.arange(0, 20, 4)   # one buffer: the whole-array path
    assert np.array_equal(e.words(one, at, 1, pure=False), e.words(one, at, 1, pure=True))


@needs_cext
def test_group_ids_compiled_equals_pure() -> None:
    # the read-between test (a read of the resource by an action in [previous, this]) of the
    # galloping search, on sorted and shuffled actions, against the pure searchsorted twin
    rng = np.random.default_rng(10)
    for trial in range(100):
        n, nres = int(rng.integers(1, 400)), int(rng.integers(1, 5))
        e_res = np.sort(rng.integers(0, nres, n))
        e_act = rng.integers(0, 60, n)
        if trial % 2:
            e_act = e_act[np.lexsort((e_act, e_res))]   # ascending within a resource
        e_lab = rng.integers(0, 3, n)
        rd = np.unique(rng.integers(0, nres, 40) * (1 << 40) + rng.integers(0, 60, 40))
        a, b = _group_ids(e_res, e_lab, e_act, rd, pure=False), _group_ids(e_res, e_lab, e_act, rd, pure=True)
        assert np.array_equal(a, b), trial


@needs_cext
def test_op_index_compiled_equals_pure() -> None:
    from drawopt.verify.slots import OpIndex

    rng = np.random.default_rng(11)
    for n in (0, 1, 1000):
        op = rng.integers(0, 90, n).astype(np.uint16)
        a, b = OpIndex(op, pure=False), OpIndex(op, pure=True)
        assert np.array_equal(a.order, b.order) and np.array_equal(a.off, b.off)
        for codes in ((5,), (1, 7, 80), (89, 2000)):
            assert np.array_equal(a.of(*codes), np.flatnonzero(np.isin(op, codes)))
    with pytest.raises(ValueError):
        a.of(5)[0] = 1   # views of the index, read-only


@needs_cext
def test_set_rows_compiled_equals_pure() -> None:
    from drawopt.verify.records import set_rows

    rng = np.random.default_rng(12)
    for ns, n in ((1, 0), (3, 50), (40, 2000)):
        cnt = rng.integers(0, 4, ns)
        off = np.cumsum(cnt) - cnt
        vals = [rng.integers(-9, 9, int(cnt.sum())), rng.integers(0, 2**40, int(cnt.sum()))]
        inv = rng.integers(0, ns, n)
        (oa, va), (ob, vb) = set_rows(inv, off, cnt, *vals, pure=False), set_rows(inv, off, cnt, *vals, pure=True)
        assert np.array_equal(oa, ob) and all(np.array_equal(x, y) for x, y in zip(va, vb))


@needs_cext
def test_barriers_before_compiled_equals_pure() -> None:
    from drawopt.verify.compare import _SHIFT, _barriers_before

    rng = np.random.default_rng(13)
    a_cmd = np.sort(rng.integers(0, 500, 200))
    for nb in (0, 1, 8, 40):
        keys = np.sort(rng.integers(0, 6, nb) * _SHIFT + rng.integers(0, 500, nb))
        res, act = rng.integers(0, 7, 3000), rng.integers(0, 200, 3000)
        a = _barriers_before(keys, res, act, a_cmd, pure=False)
        assert np.array_equal(a, _barriers_before(keys, res, act, a_cmd, pure=True))


@needs_cext
@pytest.mark.parametrize("order", ["random", "sorted", "blocks"])
def test_before_compiled_equals_pure(order: str) -> None:
    """``count_below`` gives the sorted search's counts for any order of the actions within a
    resource: arbitrary, sorted, and sorted up to permutations inside runs (the canonical order,
    where the running bounds leave a window to count one by one)."""
    from drawopt.verify.compare import _before

    rng = np.random.default_rng(17)
    for _ in range(300):
        n, nq = int(rng.integers(0, 80)), int(rng.integers(0, 50))
        e_res, e_act = np.sort(rng.integers(-3, 4, n)), rng.integers(-5, 40, n)
        if order != "random":
            e_act = np.sort(e_act)
        if order == "blocks":
            for lo in range(0, n, 5):
                e_act[lo:lo + 5] = rng.permutation(e_act[lo:lo + 5])
        res, act = rng.integers(-4, 5, nq), rng.integers(-7, 42, nq)
        a = _before(e_res, e_act, res, act, sort=True, pure=False)
        assert np.array_equal(a, _before(e_res, e_act, res, act, sort=True, pure=True))
        if order == "sorted":
            assert np.array_equal(a, _before(e_res, e_act, res, act, pure=True))


@needs_cext
def test_mix_sum_compiled_equals_pure() -> None:
    """``hash_sum``: the per-bin wrapping sums of the row hashes, for sorted and unsorted bins,
    scalar columns and every integer dtype the hashes take."""
    from drawopt.verify.compare import _mix_sum

    rng = np.random.default_rng(19)
    for t in range(100):
        n, nb = int(rng.integers(0, 700)), int(rng.integers(1, 30))
        idx = rng.integers(0, nb, n)
        if t % 2:
            idx = np.sort(idx)
        cols = [rng.integers(-2**62, 2**62, n), -1, rng.integers(0, 2**63, n, dtype=np.uint64),
                rng.integers(-3, 3, n).astype(np.int32), np.int64(7)]
        a, b = _mix_sum(idx, nb, *cols, pure=False), _mix_sum(idx, nb, *cols, pure=True)
        assert a.dtype == b.dtype == np.uint64 and np.array_equal(a, b)


# --------------------------------------------------------------------------- state columns
@needs_cext
def test_fill_at_compiled_equals_pure() -> None:
    rng = np.random.default_rng(2)
    for m in (0, 1, 7, 200):
        at = np.sort(rng.integers(0, 100, m))          # events, several at one command
        val = rng.integers(-10, 10, m)
        q = np.sort(rng.integers(-5, 110, 300))        # queries, with ties and out of range
        a, b = fill_at(at, val, q, -1, pure=False), fill_at(at, val, q, -1, pure=True)
        assert np.array_equal(a, b)
    # the last event strictly before the query wins; none: the value before
    assert fill_at(np.array([2, 5, 5]), np.array([1, 2, 3]), np.array([2, 3, 6]), -9, pure=False).tolist() == \
        [-9, 1, 3]


@needs_cext
def test_const_columns_compiled_equals_pure() -> None:
    s = _gen("frame", 3000, 4)
    for name in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants"):
        a, b = _const_columns(s, name, pure=False), _const_columns(s, name, pure=True)
        assert [k for k, _, _ in a] == [k for k, _, _ in b]
        for (_, i1, v1), (_, i2, v2) in zip(a, b):
            assert np.array_equal(i1, i2) and np.array_equal(v1, v2)
            assert (np.diff(i1) > 0).all()             # one event per command, in stream order


# --------------------------------------------------------------------------- whole validator
def _arrays(obj, names) -> dict[str, np.ndarray]:
    return {n: np.asarray(getattr(obj, n)) for n in names}


_REC = ("a_cmd", "a_op", "a_pipe", "a_state", "a_first", "a_nrec", "a_vpp", "r_act", "r_sub", "r_xslot", "r_nomerge",
        "key", "w_act", "w_res", "w_lab", "rd_act", "rd_res", "fe_act", "fe_res", "fe_kind")
_SEQ = ("res", "first", "start", "kh", "kc", "sh", "src", "src_buf", "act", "src_off", "count", "inst", "ninst",
        "rel", "hz", "w_bar", "m_entry", "m_rec", "kx", "rd_act", "rd_res", "rd_cnt", "rd_bar")


def _expand_both(a: Stream, b: Stream):
    from drawopt.verify.slots import column_universe

    canon = Canon()
    u = column_universe([a, b])
    RA, RB = expand(a, canon, u), expand(b, canon, u)
    written = np.union1d(RA.w_res, RB.w_res)
    return (RA, RB), (canonical(RA, written), canonical(RB, written)), canon.names


@needs_cext
@pytest.mark.parametrize("kind,seed", [("frame", 1), ("quads", 2), ("gpu-driven", 1), ("bundle", 3)])
def test_records_and_sequences_compiled_equal_pure(kind: str, seed: int, monkeypatch) -> None:
    from drawopt.result import optimize

    a = _gen(kind, 2000, seed)
    b = optimize(a, target="d3d12", verify=False).stream
    monkeypatch.setenv("DRAWOPT_PURE", "0")
    rec_c, seq_c, names_c = _expand_both(a, b)
    monkeypatch.setenv("DRAWOPT_PURE", "1")
    rec_p, seq_p, names_p = _expand_both(a, b)
    assert names_c == names_p
    for rc, rp in zip(rec_c, rec_p):
        for n, x in _arrays(rc, _REC).items():
            assert np.array_equal(x, getattr(rp, n)), n
        for c in rc.state.cols:
            assert np.array_equal(rc.state.value(c), rp.state.value(c))
    for sc, sp in zip(seq_c, seq_p):
        for n, x in _arrays(sc, _SEQ).items():
            assert np.array_equal(x, getattr(sp, n)), n


@needs_cext
def test_verdicts_compiled_equal_pure(monkeypatch) -> None:
    # equivalent and broken rewrites (commands swapped or dropped) get the same verdict and reason
    from drawopt.result import optimize

    rng = np.random.default_rng(5)
    for kind in ("frame", "gpu-driven", "quads"):
        a = _gen(kind, 1500, 2)
        b = optimize(a, target="xbox-one", verify=False).stream
        pairs = [(a, b)]
        for _ in range(4):
            i = int(rng.integers(1, len(b) - 1))
            perm = np.arange(len(b))
            perm[i], perm[i + 1] = perm[i + 1], perm[i]
            pairs += [(a, b.take(perm)), (a, b.take(np.delete(np.arange(len(b)), i)))]
        for x, y in pairs:
            monkeypatch.setenv("DRAWOPT_PURE", "0")
            rc = verify(x, y).to_json()
            monkeypatch.setenv("DRAWOPT_PURE", "1")
            rp = verify(x, y).to_json()
            for r in (rc, rp):
                r["details"].get("stats", {}).pop("seconds", None)
            assert rc == rp


def test_verify_restores_numpy_hugepage_advice(monkeypatch) -> None:
    # verify turns numpy's MADV_HUGEPAGE advice off while it runs, and puts it back
    core = getattr(getattr(np, "_core", None), "multiarray", None)
    get = getattr(core, "_get_madvise_hugepage", None)
    if get is None:
        pytest.skip("numpy has no hugepage switch")
    s = _gen("frame", 200, 1)
    before = get()
    seen = []
    import drawopt.verify as V

    real = V._verify

    def spy(*args):
        seen.append(get())
        return real(*args)

    monkeypatch.setattr(V, "_verify", spy)
    assert verify(s, s).equivalent
    assert seen == [False] and get() == before


# --------------------------------------------------------------------------- lean canonical form
@needs_cext
def test_group_order_reads_keys_in_place() -> None:
    # keys given as (array, at) are read at ``at`` by the kernel (no gathered copy): the same order
    # as the gathered keys, and as np.lexsort on the pure path, uint64 keys in unsigned order
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(0, 300))
        gid = np.sort(rng.integers(0, max(1, n // int(rng.integers(1, 40))), n))
        m = int(rng.integers(1, 400))
        base = [rng.integers(-3, 3, m), rng.integers(0, 2**64 - 1, m, dtype=np.uint64),
                rng.integers(0, 3, m).astype(np.uint64) * np.uint64(2**63 - 1), rng.integers(0, 2, m)]
        at = [rng.integers(0, m, n) for _ in base]
        direct = rng.integers(-2, 2, n)

        def gathered(i, base=base, at=at, direct=direct):
            return (direct[i], *[b[a[i]] for b, a in zip(base, at)])

        def in_place(i, base=base, at=at, direct=direct):
            return (direct[i], *[(b, a[i]) for b, a in zip(base, at)])

        want = _group_order(gid, gathered, pure=True)
        for keys, pure in ((gathered, False), (in_place, False), (in_place, True)):
            got = _group_order(gid, keys, pure=pure)
            assert (got is None) == (want is None)
            if got is not None:
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_group_sort_rejects_positions_out_of_range() -> None:
    k = load_cext("_verify", False)
    if k is None:
        pytest.skip("drawopt._verify is not built")
    gid = np.zeros(3, np.int64)
    with pytest.raises(IndexError):
        k.group_sort(gid, [np.arange(3, dtype=np.int64)], [np.array([0, 1, 3], np.int64)], np.zeros(1, np.uint8))
    with pytest.raises(ValueError):
        k.group_sort(gid, [np.arange(3, dtype=np.int64)], [np.array([0, 1], np.int64)], np.zeros(1, np.uint8))


@needs_cext
@pytest.mark.parametrize("kind,seed", [("frame", 1), ("quads", 2), ("gpu-driven", 1), ("bundle", 3)])
def test_merge_runs_and_group_order_compiled_equal_pure_in_canonical(kind: str, seed: int, monkeypatch) -> None:
    # every call the canonical form makes (full and keys only): the kernel's runs and orders are
    # the pure twins' (the exact-size arrays of the two-pass merge_runs, the in-place keys)
    import drawopt.verify.compare as C
    from drawopt.result import optimize

    real_merge, real_order = C._merge_runs, C._group_order
    calls = {"merge": 0, "order": 0}

    def merge(*args, pure=None):
        got, want = real_merge(*args, pure=False), real_merge(*args, pure=True)
        assert all(x.dtype == y.dtype == np.int64 and np.array_equal(x, y) for x, y in zip(got, want))
        calls["merge"] += 1
        return got

    def order(gid, keys, pure=None):
        got, want = real_order(gid, keys, pure=False), real_order(gid, keys, pure=True)
        assert (got is None) == (want is None)
        if got is not None:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        calls["order"] += 1
        return got

    monkeypatch.setattr(C, "_merge_runs", merge)
    monkeypatch.setattr(C, "_group_order", order)
    a = _gen(kind, 2000, seed)
    b = optimize(a, target="d3d12", verify=False).stream
    (RA, RB), _, _ = _expand_both(a, b)
    written = np.union1d(RA.w_res, RB.w_res)
    for R in (RA, RB):
        C.canonical_keys(R, written)
    assert calls["merge"] == 4 and calls["order"] >= 2


@pytest.mark.parametrize("pure", ["0", "1"])
@pytest.mark.parametrize("kind,seed", [("frame", 1), ("quads", 2), ("gpu-driven", 1), ("bundle", 3)])
def test_canonical_keys_are_the_canonical_forms(kind: str, seed: int, pure: str, monkeypatch) -> None:
    # what the validator compares first is exactly the full canonical form's res, kh and start
    from drawopt.result import optimize
    from drawopt.verify.compare import canonical_keys

    monkeypatch.setenv("DRAWOPT_PURE", pure)
    a = _gen(kind, 1500, seed)
    b = optimize(a, target="d3d12", verify=False).stream
    (RA, RB), (SA, SB), _ = _expand_both(a, b)
    written = np.union1d(RA.w_res, RB.w_res)
    for R, S in ((RA, SA), (RB, SB)):
        k = canonical_keys(R, written)
        for n in ("res", "kh", "start"):
            assert np.array_equal(getattr(k, n), getattr(S, n)) and getattr(k, n).dtype == getattr(S, n).dtype, n
    assert canonical_keys(RA, written).same_as(canonical_keys(RA, written))


def test_sequence_fields_derived_when_asked_for() -> None:
    # w_bar, run_entry and run_len are derived from what the sequences keep: as computed directly
    from drawopt.result import optimize
    from drawopt.verify.compare import _barriers, _barriers_before
    from drawopt.verify.slots import op_index

    a = _gen("frame", 1500, 1)
    b = optimize(a, target="d3d12", verify=False).stream
    (RA, _), (SA, _), _ = _expand_both(a, b)
    bar = op_index(RA.stream).of(BY_NAME["ResourceBarrier"].code)
    keys, _ = _barriers(RA, np.asarray(bar, np.int64))
    assert np.array_equal(SA.w_bar, _barriers_before(keys, RA.w_res, RA.w_act, RA.a_cmd))
    assert SA.run_len.sum() == SA.m_rec.size and (SA.run_len > 0).all()
    assert np.array_equal(np.sort(SA.run_entry), np.arange(SA.res.size))
    assert np.array_equal(SA.first, SA.m_rec[SA.run_head][np.argsort(SA.run_entry)])


@pytest.mark.parametrize("kind", ["frame", "bundle", "gpu-driven"])
def test_state_events_built_again_after_release(kind: str) -> None:
    # the records' state columns can drop their events (the validator does, once a stream's rules
    # are checked): every column, source and event index reads the same after they are rebuilt
    from drawopt.verify.slots import column_universe

    s = _gen(kind, 800, 2)
    canon = Canon()
    R = expand(s, canon, column_universe([s]))
    st = R.state
    cols = list(st.cols)
    before = {c: (st.value(c).copy(), st.source(c).copy(), st.event_index(c).copy(), *st.events(c)) for c in cols}
    names = list(canon.names)
    st.release(events=True)
    assert st._events is None
    for c in cols:
        got = (st.value(c), st.source(c), st.event_index(c), *st.events(c))
        assert all(np.array_equal(x, y) for x, y in zip(got, before[c])), c
    assert canon.names == names   # (the rebuild names no new stale values)
