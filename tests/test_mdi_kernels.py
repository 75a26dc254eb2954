"""The fused per-draw kernels of the mdi pass (``drawopt._mdi``: ``varying_columns``,
``key_rows``, ``chain_words``, ``perdraw_records``) against their pure twins in :mod:`drawopt.passes.mdi`,
on random inputs and on the plans of the generated kinds (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest
from test_mdi import _compiled as _kernels  # (compiled, pure) kernels; fails where drawopt._mdi is not built

from drawopt.analysis.state import MASKED, track
from drawopt.gen import generate
from drawopt.passes import mdi


@pytest.mark.parametrize("seed", range(8))
def test_varying_columns_match(seed: int) -> None:
    fast, pure = _kernels()
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(0, 300)), int(rng.integers(0, 50))
    rows = np.repeat(rng.integers(-3, 3, (1, k)), n, axis=0)
    for j in rng.choice(k, size=min(k, int(rng.integers(0, k + 1))), replace=False) if k else ():
        rows[rng.integers(0, n, int(rng.integers(1, 4))) if n else [], j] = rng.integers(-5, 5)   # a few rows differ
    got = fast.varying_columns(rows)
    assert got.dtype == np.int64 and np.array_equal(got, pure.varying_columns(rows))
    # a state table's rows are int32 (read in place)
    assert np.array_equal(fast.varying_columns(rows.astype(np.int32)), got)
    assert np.array_equal(got, np.flatnonzero((rows != rows[:1]).any(axis=0)))


def test_varying_columns_every_column_and_none() -> None:
    fast, _ = _kernels()
    rows = np.arange(200 * 7).reshape(200, 7)   # all columns vary from the second row (early stop)
    assert fast.varying_columns(rows).tolist() == list(range(7))
    assert fast.varying_columns(np.zeros((500, 3), np.int64)).tolist() == []
    assert fast.varying_columns(np.zeros((0, 3), np.int64)).tolist() == []


@pytest.mark.parametrize("seed", range(8))
def test_key_rows_match(seed: int) -> None:
    fast, pure = _kernels()
    rng = np.random.default_rng(seed)
    s, k = int(rng.integers(1, 60)), 45
    rows = rng.integers(-4, 10, (s, k))
    m = int(rng.integers(0, 400))
    sidx = rng.integers(0, s, m)
    keep = np.sort(rng.choice(k, size=int(rng.integers(0, 20)), replace=False)).astype(np.int64)
    nat = rng.random(m) < 0.5
    extra = rng.integers(-1, 30, (m, int(rng.integers(0, 4))))
    for mask_col in (-1, *range(min(keep.size, 3))):
        a = fast.key_rows(rows, sidx, keep, mask_col, MASKED, nat, extra)
        b = pure.key_rows(rows, sidx, keep, mask_col, MASKED, nat, extra)
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
        r32 = rows.astype(np.int32)  # a state table's rows
        c, d = (f.key_rows(r32, sidx, keep, mask_col, MASKED, nat, extra) for f in (fast, pure))
        assert c.dtype == d.dtype == np.int64 and np.array_equal(c, a) and np.array_equal(d, a)
        # the formulation the twin replaced: one 2-d gather, mask, concatenate
        old = rows[sidx[:, None], keep[None, :]]
        if mask_col >= 0:
            old[nat, mask_col] = MASKED
        assert np.array_equal(b, np.concatenate([old, extra], axis=1))


def test_key_rows_rejects_out_of_range() -> None:
    fast, _ = _kernels()
    rows = np.zeros((3, 4), np.int64)
    nat, extra = np.zeros(1, bool), np.zeros((1, 0), np.int64)
    with pytest.raises(ValueError):
        fast.key_rows(rows, np.array([3]), np.array([0]), -1, MASKED, nat, extra)
    with pytest.raises(ValueError):
        fast.key_rows(rows, np.array([0]), np.array([4]), -1, MASKED, nat, extra)
    with pytest.raises(ValueError):
        fast.key_rows(rows, np.array([0]), np.array([0]), 1, MASKED, nat, extra)


@pytest.mark.parametrize("seed", range(8))
def test_chain_words_match(seed: int) -> None:
    fast, pure = _kernels()
    rng = np.random.default_rng(seed)
    nv, rows, w = int(rng.integers(1, 80)), int(rng.integers(1, 40)), int(rng.integers(1, 6))
    row_of = np.where(rng.random(nv + 1) < 0.3, -1, rng.integers(0, rows, nv + 1))
    partial = rng.random(nv + 1) < 0.2
    filled = np.where(rng.random((rows, w)) < 0.2, rng.choice([-1, -3], (rows, w)), rng.integers(0, 1 << 40, (rows, w)))
    m = int(rng.integers(0, 300))
    vids = np.where(rng.random(m) < 0.15, rng.choice([-1, -2], m), rng.integers(0, nv + 1, m))
    ks = np.sort(rng.choice(w, size=int(rng.integers(1, w + 1)), replace=False)).astype(np.int64)
    other = np.array([n for n in range(w) if n not in ks], np.int64)
    a = fast.chain_words(vids, row_of, partial, filled, ks, other)
    b = pure.chain_words(vids, row_of, partial, filled, ks, other)
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


def test_raw_slots_pure_and_compiled_agree() -> None:
    s = generate("frame", 2000, seed=3)
    t = track(s)
    pos = np.arange(0, len(t.draws), 3)
    slots = [int(x) for x in range(0, t.rows.shape[1], 4)]
    assert np.array_equal(mdi._raw_slots(t, pos, slots, mdi._kernels(False)),
                          mdi._raw_slots(t, pos, slots, mdi._kernels(True)))


def _records_case(rng: np.random.Generator):
    """Members laid out back to back (as the layout does), with gaps, 2..6 words each."""
    m = int(rng.integers(0, 120))
    words = rng.integers(2, 7, m)
    ninst = np.where(rng.random(m) < 0.2, 0, rng.integers(0, 6, m))
    gaps = rng.integers(0, 5, m)
    base = np.cumsum(gaps + ninst * words) - ninst * words
    total = int(base[-1] + ninst[-1] * words[-1] + 3) if m else 3
    lift = rng.integers(-(1 << 40), 1 << 40, (int(rng.integers(1, 50)), 4))
    row = rng.integers(0, lift.shape[0], m)
    bv = rng.integers(-(1 << 33), 1 << 33, m)
    seen = rng.integers(0, (1 << 32) + 10, m)
    return total, (base, ninst, words, bv, seen, lift, row)


@pytest.mark.parametrize("seed", range(10))
def test_perdraw_records_match(seed: int) -> None:
    fast, pure = _kernels()
    total, args = _records_case(np.random.default_rng(seed))
    a = np.full(total, 7, np.uint32)
    b = a.copy()
    fast.perdraw_records(a, *args)
    pure.perdraw_records(b, *args)
    assert np.array_equal(a, b)


def test_perdraw_records_rejects_writes_outside() -> None:
    fast, _ = _kernels()
    one = np.array([1])
    with pytest.raises(ValueError):
        fast.perdraw_records(np.zeros(5, np.uint32), np.array([2]), np.array([2]), np.array([2]), one, one,
                             np.zeros((1, 0), np.int64), np.array([0]))
    with pytest.raises(ValueError):   # three words need a lift column
        fast.perdraw_records(np.zeros(9, np.uint32), np.array([0]), np.array([1]), np.array([3]), one, one,
                             np.zeros((1, 0), np.int64), np.array([0]))


@pytest.mark.parametrize("kind", ["frame", "gpu-driven"])
def test_lifted_plans_agree(kind: str) -> None:
    """The plans with lifted batches and a per-draw array (the kernels' callers) are the
    same on the compiled and the pure path."""
    _kernels()
    s = generate(kind, 4000, seed=2)
    t = track(s)
    a = mdi.plan_mdi(s, t, pure=False)
    b = mdi.plan_mdi(s, t, pure=True)
    if kind == "frame":
        assert a.lifted_batches and a.perdraw_bytes   # the keyed and the record-writing paths ran
    assert a.replace.tolist() == b.replace.tolist() and a.bind.tolist() == b.bind.tolist()
    assert a.sinst.tolist() == b.sinst.tolist()
    assert [w.tolist() for w in a.perdraw_words] == [w.tolist() for w in b.perdraw_words]
    assert [w.tolist() for w in a.args_words] == [w.tolist() for w in b.args_words]


@pytest.mark.parametrize("seed", range(10))
def test_run_facts_match(seed: int) -> None:
    fast, pure = _kernels()
    rng = np.random.default_rng(seed)
    n, nd = int(rng.integers(0, 300)), int(rng.integers(1, 8))
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, n + 1))), replace=False)) \
        if n > 1 else np.zeros(0, np.int64)
    first = np.r_[0, cuts].astype(np.int64) if n else np.zeros(0, np.int64)
    length = np.diff(np.r_[first, n]).astype(np.int64)
    op = rng.choice([mdi._DI, mdi._DII, mdi._I, mdi._M, 5], n)
    args = rng.integers(0, 40, (n, 8))
    args[:, mdi._DII_SI] = np.where(rng.random(n) < 0.1, rng.integers(-5, 0, n), args[:, mdi._DII_SI])
    pipe = rng.integers(-1, nd, n)
    kind = rng.integers(0, 5, n).astype(np.int8)
    state = np.cumsum(rng.random(n) < 0.3)
    flags = [rng.random(n) < q for q in (0.7, 0.8, 0.5, 0.3)]
    decl_pd = np.where(rng.random(nd + 1) < 0.3, -1, rng.integers(0, 4, nd + 1))
    decl_cap = rng.integers(0, 40, nd + 1)
    consts = (mdi._DI, mdi._DII, mdi.COL_INSTANCES, mdi._DI_SI, mdi._DII_SI, int(rng.integers(1, 4)),
              int(rng.integers(1, 4)), int(rng.integers(0, 80)), int(rng.integers(0, 50)))
    a = fast.run_facts(op, args, pipe, first, length, kind, state, *flags, decl_pd, decl_cap, *consts)
    b = pure.run_facts(op, args, pipe, first, length, kind, state, *flags, decl_pd, decl_cap, *consts)
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


def test_run_facts_rejects_runs_not_covering_the_draws() -> None:
    fast, _ = _kernels()
    z = np.zeros(3, np.int64)
    with pytest.raises(ValueError):
        fast.run_facts(z, np.zeros((3, 8), np.int64), z, np.array([0, 2]), np.array([1, 1]), z, z, z, z, z, z,
                       np.array([-1]), np.array([0]), 1, 2, 1, 3, 4, 2, 2, 10, 10)
