"""Stream.check's one-pass value check (issue 13: ``drawopt._streamcheck.values_ok`` and its pure
twin ``_values_ok_py``) accepts exactly what the per-opcode numpy checks accept, and the check
reports the same first error with it as without it."""

from __future__ import annotations

import numpy as np
import pytest
from test_stream_check import error

import drawopt.ir.stream as stream_mod
from drawopt._accel import load_cext
from drawopt.gen import generate
from drawopt.ir.stream import _KIND_CODE, Stream, _stream_tables, _values_ok_py

KERN = load_cext("_streamcheck", False)


def mutants(seed: int, count: int) -> list[Stream]:
    """Streams with one argument or variadic value changed to an edge value (many invalid)."""
    rng = np.random.default_rng(seed)
    out = []
    for kind in ("frame", "quads", "indirect", "compute"):
        try:
            s = generate(kind, 200, seed=seed)
        except Exception:  # a kind this generator does not make
            continue
        ndecl = len(s.decls)
        edges = [-1, 0, 1, ndecl - 1, ndecl, 2**31, 2**32 - 1, 2**32, (3 << 32) | 1, (ndecl << 32), 2**63 - 1,
                 -(2**63), len(s.strings), 7, 64]
        for _ in range(count):
            args, pool = s.args.copy(), s.pool.copy()
            if rng.random() < 0.7 or not pool.size:
                args[rng.integers(len(s)), rng.integers(args.shape[1])] = rng.choice(edges)
            else:
                pool[rng.integers(pool.size)] = rng.choice(edges)
            out.append(Stream(s.header, s.decls, s.op, args, s.var_off, s.var_len, pool, s.flags, s.line,
                              s.strings))
    return out


def _ok(s: Stream, fn) -> bool:
    kinds = np.array([_KIND_CODE[d.kind] for d in s.decls.items] or [0], dtype=np.int8)
    hs = np.array([getattr(d, "size", 0) for d in s.decls.items] or [0], dtype=np.int64)
    return bool(fn(s.op, s.args, s.var_off, s.var_len, s.pool, *_stream_tables(len(s.strings), len(s.decls)),
                   kinds, hs, len(s.decls)))


@pytest.mark.skipif(KERN is None, reason="drawopt._streamcheck not built")
@pytest.mark.parametrize("seed", [1, 2])
def test_kernel_and_twin_agree(seed: int) -> None:
    got = [(_ok(s, KERN.values_ok), _ok(s, _values_ok_py)) for s in mutants(seed, 150)]
    assert all(a == b for a, b in got)
    assert {a for a, _ in got} == {True, False}  # both answers were exercised


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("pure", [False, True])
def test_same_first_error_with_and_without_the_one_pass_check(seed: int, pure: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path (values fine: only the rules run) reports what the full per-opcode loop does."""
    if pure:
        monkeypatch.setenv("DRAWOPT_PURE", "1")
    streams = mutants(seed, 120)
    fast = [error(s) for s in streams]
    monkeypatch.setattr(stream_mod, "_values_ok", lambda s, kinds: False)  # always the full loop
    slow = [error(s) for s in streams]
    assert fast == slow
    assert any(e is None for e in slow) and any(e is not None for e in slow)
