"""drawopt.ir.arrayset gives numpy's set results exactly (values, order, dtype, shape), for any integer array."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drawopt.ir import arrayset

_INT_DTYPES = st.sampled_from([np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])


def _arrays(dtype: st.SearchStrategy = _INT_DTYPES, dims: int = 2) -> st.SearchStrategy:
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=dims, min_side=0, max_side=40))


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert type(got) is np.ndarray
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


@settings(max_examples=200, deadline=None)
@given(_arrays())
def test_unique_is_np_unique(a: np.ndarray) -> None:
    _same(arrayset.unique(a), np.unique(a))


@settings(max_examples=200, deadline=None)
@given(_arrays(), st.data())
def test_isin_is_np_isin(a: np.ndarray, data: st.DataObject) -> None:
    b = data.draw(_arrays(st.just(a.dtype), dims=1))
    _same(arrayset.isin(a, b), np.isin(a, b))


@settings(max_examples=200, deadline=None)
@given(_arrays(dims=1), st.data())
def test_intersect1d_is_np_intersect1d(a: np.ndarray, data: st.DataObject) -> None:
    b = data.draw(_arrays(st.just(a.dtype), dims=1))
    _same(arrayset.intersect1d(a, b), np.intersect1d(a, b))


def _columns(dtype: type) -> st.SearchStrategy:  # few distinct values: repeated columns
    low = -3 if np.issubdtype(dtype, np.signedinteger) else 0
    return hnp.arrays(dtype, st.tuples(st.integers(1, 3), st.integers(0, 40)), elements=st.integers(low, 3))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([np.int8, np.uint8, np.int32, np.int64, np.uint64]).flatmap(_columns))
def test_unique_columns_is_np_unique_axis_1(a: np.ndarray) -> None:
    _same(np.ascontiguousarray(arrayset.unique_columns(a)), np.ascontiguousarray(np.unique(a, axis=1)))


def test_big_ranges_and_mixed_signs() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-(1 << 40), 1 << 40, 5000)
    b = np.concatenate([a[::7], rng.integers(-(1 << 40), 1 << 40, 300)])
    _same(arrayset.unique(np.concatenate([a, a])), np.unique(np.concatenate([a, a])))
    _same(arrayset.isin(a, b), np.isin(a, b))  # numpy's sort path (the range is too wide for its table)
    _same(arrayset.intersect1d(a, b), np.intersect1d(a, b))
    cols = rng.integers(-4, 4, (2, 3000))
    assert np.array_equal(arrayset.unique_columns(cols), np.unique(cols, axis=1))


def test_other_kinds_go_to_numpy() -> None:
    f = np.array([2.0, np.nan, -0.0, 0.0, np.nan, 1.5])
    _same(arrayset.unique(f), np.unique(f))
    _same(arrayset.isin(f, [0.0, 1.5]), np.isin(f, [0.0, 1.5]))
    s = np.array(["b", "a", "b"])
    _same(arrayset.unique(s), np.unique(s))
