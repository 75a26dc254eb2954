"""draw_facts' shortcut (nothing folds, state ids in first-appearance order: the table's rows are
shared, not copied) gives exactly what the general path (intern the (state, window) pairs, gather
their rows) gives (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

import drawopt.analysis.mergeclass as mc
from drawopt.analysis.state import track
from drawopt.gen import generate

_FIELDS = ("cmd", "op", "args", "sid", "nstate", "pipe", "pinned", "vpp", "shift", "folded", "indexed", "nrows")


def _general(monkeypatch, s, table, fold):
    with monkeypatch.context() as m:
        m.setattr(mc, "_first_appearance", lambda ids: False)
        return mc.draw_facts(s, table, fold=fold)


@pytest.mark.parametrize("kind", ["frame", "quads", "gpu-driven", "bundle"])
@pytest.mark.parametrize("fold", [True, False])
def test_shortcut_equals_the_general_path(kind: str, fold: bool, monkeypatch) -> None:
    s = generate(kind, 2000, seed=1)
    table = track(s)
    fast, slow = mc.draw_facts(s, table, fold=fold), _general(monkeypatch, s, table, fold)
    for k in _FIELDS:
        a, b = getattr(fast, k), getattr(slow, k)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), k
    for rule in mc.RULES.values():
        la, lb = mc.adjacent_links(fast, rule), mc.adjacent_links(slow, rule)
        assert np.array_equal(la.ok, lb.ok) and la.fail.tolist() == lb.fail.tolist(), rule.name
    for mdi in (True, False):
        assert np.array_equal(mc.call_classes(fast, mdi), mc.call_classes(slow, mdi))


def test_shortcut_shares_the_tables_rows_read_only() -> None:
    s = generate("frame", 2000, seed=1)
    table = track(s)
    f = mc.draw_facts(s, table, fold=False)
    assert not f.folded.any() and np.shares_memory(f.nrows, table.rows)
    assert not f.nrows.flags.writeable and table.rows.flags.writeable
    assert not np.shares_memory(f.nstate, table.state)


def test_first_appearance() -> None:
    fa = mc._first_appearance
    assert fa(np.zeros(0, np.int64)) and fa(np.array([0, 0, 1, 0, 2, 2, 1]))
    assert not fa(np.array([1, 0])) and not fa(np.array([0, 2, 1])) and not fa(np.array([0, -1]))


def test_verts_per_prim_agrees_with_the_decoded_topology() -> None:
    s = generate("frame", 500, seed=1)
    table = track(s)
    sc = table.scan
    from drawopt.analysis.state import TOPOLOGY

    topo = table.rows[table.state.astype(np.int64), TOPOLOGY]
    dense = mc._verts_per_prim(sc, topo)
    want = np.array([mc._vpp_of(sc, int(v)) for v in topo.tolist()], np.int64)
    assert np.array_equal(dense, want) and (dense > 0).any()
    assert np.array_equal(mc._verts_per_prim(sc, np.r_[topo, -1]), np.r_[want, 0])  # -1: undefined


@pytest.mark.parametrize("kind", ["frame", "quads", "gpu-driven", "bundle"])
def test_distinct_rows_shortcut_equals_interning(kind: str, monkeypatch) -> None:
    """draw_facts skips interning the table's rows when they are known distinct (issue 13);
    the facts are those of the interning path."""
    s = generate(kind, 2000, seed=1)
    table = track(s)
    fast = mc.draw_facts(s, table, fold=False)
    with monkeypatch.context() as m:
        m.setattr(mc, "_distinct_rows", lambda sc, rows: False)
        slow = mc.draw_facts(s, table, fold=False)
    for k in _FIELDS:
        a, b = getattr(fast, k), getattr(slow, k)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), k


def test_equal_rows_apart_by_an_opaque_command_are_not_assumed_distinct() -> None:
    """Two states whose rows hold unknowns are told apart only by the Opaque epoch: their rows
    are equal, so the shortcut must not apply and the draws share one normalised state."""
    from drawopt.ir.stream import StreamBuilder

    b = StreamBuilder()
    b.target("rt", 64, 64)
    b.pipeline("p", vs="pull", ps="flat")
    b.OMSetRenderTargets("rt")
    b.SetPipelineState("p")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("x")
    b.DrawInstanced(3, 1, 0, 0)
    b.Opaque("y")
    b.DrawInstanced(3, 1, 0, 0)
    s = b.build()
    table = track(s)
    st = table.state.tolist()
    assert st[1] != st[2] and np.array_equal(table.rows[st[1]], table.rows[st[2]])
    assert not mc._distinct_rows(table.scan, table.rows[:max(st) + 1])
    f = mc.draw_facts(s, table, fold=False)
    assert f.nstate[1] == f.nstate[2] != f.nstate[0]
