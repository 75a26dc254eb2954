"""Stream.check finds the same first error whatever the pool's layout (issue 13: the check reads
a compact pool without gathering it; other layouts go through the ragged gather)."""

from __future__ import annotations

import numpy as np
import pytest

from drawopt.gen import generate
from drawopt.ir.ops import BY_NAME, OPS
from drawopt.ir.stream import Stream, StreamCheckError


def relaid(s: Stream) -> Stream:
    """``s`` with its variadic tails stored in reverse command order behind a gap (not compact)."""
    n = len(s)
    lens = s.var_len.astype(np.int64)
    off = np.zeros(n, np.int64)
    pos = 3  # a gap of three unused values at the front
    parts = [np.full(3, 7, np.int64)]
    for i in range(n - 1, -1, -1):
        off[i] = pos
        parts.append(s.pool[s.var_off[i]:s.var_off[i] + lens[i]])
        pos += lens[i]
    return Stream(s.header, s.decls, s.op, s.args, off, s.var_len, np.concatenate(parts), s.flags, s.line,
                  s.strings)


def error(s: Stream) -> tuple[str, int, int] | None:
    try:
        s.check()
    except StreamCheckError as e:
        return str(e), e.cmd, e.arg
    return None


def test_relaid_stream_is_equal_and_checks() -> None:
    s = generate("frame", 300, seed=1)
    r = relaid(s)
    assert r == s and error(r) is None and error(s) is None


@pytest.mark.parametrize("k", [0, 1, 3])
def test_bad_root_constant_is_found_at_its_position_in_either_layout(k: int) -> None:
    s = generate("frame", 300, seed=1)
    code = BY_NAME["SetGraphicsRoot32BitConstants"].code
    cands = np.flatnonzero((s.op == code) & (s.var_len > k))
    i = int(cands[len(cands) // 2])
    pool = s.pool.copy()
    pool[s.var_off[i] + k] = 1 << 32
    bad = Stream(s.header, s.decls, s.op, s.args, s.var_off, s.var_len, pool, s.flags, s.line, s.strings)
    got = error(bad)
    assert got is not None
    msg, cmd, arg = got
    assert (cmd, arg) == (i, len(BY_NAME["SetGraphicsRoot32BitConstants"].args) + k)
    assert "4294967296 is out of range (0..4294967295)" in msg
    assert error(relaid(bad)) == got


def test_bad_render_target_reference_in_either_layout() -> None:
    s = generate("frame", 300, seed=1)
    code = BY_NAME["OMSetRenderTargets"].code
    i = int(np.flatnonzero((s.op == code) & (s.var_len > 0))[-1])
    pool = s.pool.copy()
    pool[s.var_off[i]] = len(s.decls) + 5
    bad = Stream(s.header, s.decls, s.op, s.args, s.var_off, s.var_len, pool, s.flags, s.line, s.strings)
    got = error(bad)
    assert got is not None and got[1] == i and "refers to an undeclared name" in got[0]
    assert error(relaid(bad)) == got


def test_first_error_in_opcode_order_wins() -> None:
    """Two bad commands: the one whose opcode the check visits first is reported, as before."""
    s = generate("frame", 300, seed=1)
    pool = s.pool.copy()
    args = s.args.copy()
    c = int(np.flatnonzero(s.op == BY_NAME["SetGraphicsRoot32BitConstants"].code)[-1])
    pool[s.var_off[c]] = -1
    d = int(np.flatnonzero(s.op == BY_NAME["DrawIndexedInstanced"].code)[0])
    args[d, 0] = -1
    bad = Stream(s.header, s.decls, s.op, args, s.var_off, s.var_len, pool, s.flags, s.line, s.strings)
    got = error(bad)
    ops = [sp.code for sp in OPS]
    first = c if ops.index(int(s.op[c])) < ops.index(int(s.op[d])) else d
    assert got is not None and got[1] == first
    assert error(relaid(bad)) == got


def test_tails_outside_the_pool_name_the_tail_and_the_pool() -> None:
    """Stream.check owns the rule (the .npz reader has no copy since issue 13): its message says
    which tail and how large the pool is, as the reader's did."""
    s = generate("frame", 300, seed=1)
    off = s.var_off.copy()
    i = int(np.flatnonzero(s.var_len > 0)[3])
    off[i] = s.pool.shape[0] - 1
    bad = Stream(s.header, s.decls, s.op, s.args, off, s.var_len, s.pool, s.flags, s.line, s.strings)
    assert error(bad) == (f"variadic arguments [{s.pool.shape[0] - 1}, +{int(s.var_len[i])}) outside the pool of "
                          f"{s.pool.shape[0]} values", i, -1)
