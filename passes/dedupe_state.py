"""``dedupe-state``: remove state-setting commands no draw or dispatch can observe.

A state command is removed when it is

* a **re-set of the current value**: the same pipeline, root signature or heaps
  (same heaps keep the descriptor tables), the same table / root constants /
  root CBV or SRV, identical GS parameters (``null`` when the driver default is
  in force), the same index buffer -- unless the index buffer is undefined after
  a ``DrawIndexedX``, in which case the re-bind is needed and kept;
* a **dead set**: overwritten before any draw or dispatch that can observe the
  slot reads it (masked slots, see :mod:`drawopt.analysis.state`, are not observed), or
  trailing state after the last draw / dispatch of a command list. In a bundle
  the final state is inherited by the calling list, so nothing that reaches the
  end of a bundle is dead (and a bundle keeps its single ``SetDescriptorHeaps``).

Partial root-constant updates (``dest=``) and per-slot vertex-buffer updates are
handled word by word: a write is kept when one of its words is the last
effective write of that word seen by some draw.

**Lifted words are not observed.** A draw of a pipeline with a ``draw_data`` /
``instance_data`` clause that sees a buffer bound at the clause's P reads its lift
items from the record (docs/architecture.md, "Rewrite contracts"), not from the
root arguments: :mod:`drawopt.analysis.state` masks, at such draws, root constants all of
whose words are lifted and a table whose heap slot is lifted (as it masks the index
buffer at a ``DrawIndexedX``), and :meth:`drawopt.analysis.state.Scan.unobserved_words` names
the lifted words of a partly lifted constants parameter, which this pass leaves out
of the word-by-word test above. So after ``mdi`` binds its per-draw arrays, the
root-constant and bindless-table sets only array-reading draws saw are dead; the
ones a later draw of a pipeline without the clause (or one reading its arguments
natively) reads stay. What such a draw still sees of a lifted parameter is whether
it is set at all and, for a table, its heap (what the lifted heap slot addresses):
of each run of sets that leave the slot defined (root constants) or in one heap (a
table), the first stays -- one set per parameter and stretch instead of one per
draw.

A heap or root-signature change also resets descriptor tables / root arguments.
A run of dead changes between two observers is removed only when the change
from the value before the run to the value after it still resets them; otherwise
its first command is kept. Conversely, a root-argument set that such a reset
ends is kept when a later draw reads the reset slot and the value before the set
would not reset to the same thing (unknown stays unknown, root constants survive
a heap change). Nothing is removed or considered redundant across an
``Opaque`` command (it may read or change any state). ``CSEnableAutomaticGpuFlush``
(flush state read by Dispatch) gets the same treatment: re-sets of the current
value and sets overwritten before any Dispatch or Opaque go.

The analysis is repeated on its own output until nothing more goes, so the pass
is idempotent. A round also removes what the next one would find in the slots that no
reset, lift or merge rule touches (pipeline, topology, targets, viewport, scissor, blend
factor, stencil reference, GS parameters, index buffer): a set that re-sets the value of
the previous set its own dead sets left (``A``, dead ``B``, ``A``); further rounds remain
for the root arguments. Every step is vectorised over the columnar stream after one
linear scan (:func:`drawopt.analysis.state.scan`).
"""

from __future__ import annotations

__all__ = ["DedupeStatePass", "dead_state_commands"]

from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.state import (
    CRS,
    GFX_RS,
    HEAPS,
    K_CRS,
    K_SET,
    UNKNOWN,
    VB,
    Scan,
    rescan,
    scan,
    track,
)
from drawopt.ir.ops import BY_CODE, BY_NAME, MAX_OPCODE, Op, shared_col
from drawopt.ir.stream import Stream
from drawopt.passmanager import AnalysisManager, Pass, PassResult

_CSE = BY_NAME["CSEnableAutomaticGpuFlush"].code
_DISPATCH = BY_NAME["Dispatch"].code
_OPAQUE = BY_NAME["Opaque"].code
_IS_MERGE_OP = np.zeros(MAX_OPCODE + 1, bool)
_IS_MERGE_OP[[BY_NAME[n].code for n in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants",
                                        "IASetVertexBuffers")]] = True


_COL_TABLE = shared_col(("SetGraphicsRootDescriptorTable", "table"), ("SetComputeRootDescriptorTable", "table"))
"""The table argument, ``(heap << 32) | slot`` (a heapref)."""
_COL_ENABLE = Op.CSEnableAutomaticGpuFlush.col("enable")
_ALL_WORDS = np.uint64(0xFFFFFFFFFFFFFFFF)
_PLAIN_OP = np.zeros(MAX_OPCODE + 1, bool)
"""The commands that set the plain slots: set by one command kind each, reset by no heap or
root-signature change, covered by no lift item, merged by no partial update (pipeline,
topology, render targets, viewport, scissor, blend factor, stencil reference, GS parameters,
index buffer; :func:`_exposed_resets`)."""
_PLAIN_OP[[BY_NAME[n].code for n in ("SetPipelineState", "IASetPrimitiveTopology", "OMSetRenderTargets",
                                     "RSSetViewports", "RSSetScissorRects", "OMSetBlendFactor", "OMSetStencilRef",
                                     "GSSetParameters", "IASetIndexBuffer")]] = True
_IS_TABLE_OP = np.zeros(MAX_OPCODE + 1, bool)
_IS_TABLE_OP[[BY_NAME[n].code for n in ("SetGraphicsRootDescriptorTable", "SetComputeRootDescriptorTable")]] = True
_IS_LIFT_OP = _IS_TABLE_OP.copy()
_IS_LIFT_OP[[BY_NAME[n].code for n in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants")]] = True


def _observed(sc: Scan, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                          tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """What the observers read (:meth:`drawopt.analysis.state.Scan.observed_setters`, one walk).

    Returns
    -------
    observed : bool[N]
        Commands that are the last setter of a slot some observer reads.
    words : uint64[N]
        For those that set root constants: the words some observer reads (all bits but
        the lifted words of draws that read only part of the parameter, see
        :meth:`drawopt.analysis.state.Scan.unobserved_words`).
    lifted : bool[N]
        Commands that set a slot holding lift items for some draw that reads a bound
        array (:meth:`drawopt.analysis.state.Scan.lifted_setters`; see :func:`_lift_origins`).
    reset_reads : (cmd, slot, view)
        Reads of a root argument that a reset left undefined (view -1) or unknown (-3):
        the observer's command index (``N`` for the end of a bundle), the slot, the view.
    """
    out, full, (o, slot) = sc.observed_setters()
    unobs = np.full(n, _ALL_WORDS, np.uint64)   # AND over the partial readers of a command
    lifted = sc.lifted_setters()
    r, q, bits = sc.unobserved_words(slice(None))
    if r.size:
        pc = sc.setter[r, q]
        ok = pc >= 0
        np.bitwise_and.at(unobs, pc[ok], bits[ok])
    words = np.where(full, _ALL_WORDS, ~unobs)
    c = sc.obs[o]
    views = np.where((sc.unknown[o] >> slot) & 1 == 1, UNKNOWN, -1)
    return out, words, lifted, (np.where(c < 0, n, c), slot, views)


def _origins(sc: Scan, red: np.ndarray) -> np.ndarray:
    """For each command, the first command of its run of redundant re-sets (-1: the
    initial value, e.g. the GS driver default); ``drawopt._dedupe.origins``, one pass."""
    mod = load_cext("_dedupe", sc.pure)
    if mod is not None:
        return mod.origins(red.view(np.uint8), sc.prev)
    return _origins_py(sc.prev, red)


def _origins_py(prev: np.ndarray, red: np.ndarray) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._dedupe.origins`` (pointer jumping)."""
    n = red.shape[0]
    orig = np.arange(n, dtype=np.int64)
    orig[red] = prev[red]
    while True:
        nxt = np.where(orig >= 0, orig[np.maximum(orig, 0)], -1)
        if np.array_equal(nxt, orig):
            return orig
        orig = nxt


def _merge_needed(sc: Scan, observed: np.ndarray, words: np.ndarray, needed: np.ndarray,
                  pure: bool | None = None) -> None:
    """Mark the partial writes (root constants, vertex buffers) that observers see
    (``words``: per command, the root-constant words observed, see :func:`_observed`)."""
    mod = load_cext("_dedupe", pure)
    for ch in sc.chains.values():
        obs = observed[ch.cmds]
        if not obs.any():
            continue
        w = words[ch.cmds] if ch.slot != VB and ch.width <= 64 else None
        if mod is not None:
            is_writer = mod.chain_writers(ch.start, ch.init, ch.owner, ch.col, ch.wv, ch.width, obs.view(np.uint8),
                                          w).view(bool)
        else:
            is_writer = _chain_writers_py(ch, obs, w)
        needed[ch.cmds[is_writer]] = True
        # a chain that starts after a command of another kind (a table or a root CBV in the
        # same root slot) relies on it to discard older words: keep it
        rows = np.arange(ch.cmds.shape[0], dtype=np.int64)
        seg_start = np.maximum.accumulate(np.where(ch.start, rows, 0))
        first = np.zeros(rows.shape[0], bool)
        first[seg_start[needed[ch.cmds]]] = True
        p = sc.prev[ch.cmds[np.flatnonzero(first)]]
        needed[p[p >= 0]] = True


def _chain_writers_py(ch: Any, observed: np.ndarray, words: np.ndarray | None) -> np.ndarray:
    """Pure-numpy twin of ``drawopt._dedupe.chain_writers`` for the chains ``ch``
    (:class:`drawopt.analysis.state.Scan` ``.chains``): bool[m]."""
    obs_rows = np.flatnonzero(observed)
    wmask, wval, filled = ch.matrices()
    m = ch.cmds.shape[0]
    rows = np.arange(m, dtype=np.int64)
    before = np.empty_like(filled)
    before[1:] = filled[:-1]
    before[ch.start] = ch.init[ch.start][:, None]
    eff = wmask & (before != wval)
    eidx = np.where(eff | ch.start[:, None], rows[:, None], 0)
    np.maximum.accumulate(eidx, axis=0, out=eidx)
    sub = eidx[obs_rows]
    cols = np.arange(ch.width)
    hit = eff[sub, cols[None, :]]  # eff[sub[i, w], w]
    if words is not None:
        w = words[obs_rows]
        hit &= ((w[:, None] >> cols.astype(np.uint64)[None, :]) & np.uint64(1)).astype(bool)
    is_writer = np.zeros(m, bool)
    is_writer[sub[hit]] = True
    return is_writer


def _lift_origins(s: Stream, sc: Scan, lifted: np.ndarray, needed: np.ndarray) -> None:
    """Keep, for every slot a draw reads lift items from through a bound array, the first
    command of the run of sets that left it *defined, and a table in the same heap*: the
    words and the heap slot themselves are not read there, but whether the parameter is
    set at all, and a lifted table's heap (what its index addresses), stay as they were
    (the verifier and the replayer compare them). A run: consecutive sets of the slot
    (``Scan.prev``) of root constants, or of tables in one heap."""
    cmds = np.flatnonzero(lifted)
    if not cmds.size:
        return
    p = sc.prev
    op = s.op
    sets = np.flatnonzero(_IS_LIFT_OP[op] & (p >= 0))
    ops = op[sets]
    same = op[p[sets]] == ops
    tab = np.flatnonzero(same & _IS_TABLE_OP[ops])  # tables continue the run in the same heap only
    if tab.size:
        ti = sets[tab]
        tv = s.args[:, _COL_TABLE]
        same[tab] = (tv[p[ti]] >> 32) == (tv[ti] >> 32)
    cont = np.zeros(len(s), bool)  # continues the run of its previous set: origin of that one
    cont[sets[same]] = True
    needed[_origins(sc, cont)[cmds]] = True


def _reset_readers(sc: Scan, reads: tuple[np.ndarray, np.ndarray, np.ndarray], needed: np.ndarray) -> None:
    """Keep a root-argument set that a reset (heap or root-signature change) ends, when
    a later observer reads the slot as reset and the value before the set would not
    reset to the same thing (a table set over unknown or over root constants: without
    it the heap change would leave unknown / the constants, not undefined)."""
    cmd, slot, view = reads
    if not slot.size:
        return
    for r in np.flatnonzero(np.bincount(slot)):
        sets = np.flatnonzero(sc.slot == r)
        if not sets.size:
            continue
        w = slot == r
        j = np.searchsorted(sets, cmd[w]) - 1
        ok = j >= 0
        j = sets[j[ok]]
        keep = sc.value_before(j) != view[w][ok]
        needed[j[keep]] = True


def _reset_runs(sc: Scan, slot: int, red: np.ndarray, needed: np.ndarray, bundle: bool) -> None:
    """Dead heap / root-signature changes: keep the first of a run when dropping the
    whole run would lose the reset of tables / root arguments it causes."""
    cmds = np.flatnonzero((sc.slot == slot) & ~red & (sc.kcode >= K_SET) & (sc.kcode <= K_CRS))
    if not cmds.size:
        return
    dead = ~needed[cmds]
    if not dead.any():
        return
    starts = np.flatnonzero(dead & np.concatenate([[True], ~dead[:-1]]))
    for a in starts:
        b = a
        while b + 1 < cmds.size and dead[b + 1]:
            b += 1
        first = int(cmds[a])
        pv = int(sc.value_before(np.array([first]))[0])
        if b + 1 >= cmds.size:
            if bundle:  # pragma: no cover - the end of a bundle observes every slot
                needed[cmds[a:b + 1]] = True
            continue
        after = int(sc.cval[cmds[b + 1]])
        if pv == UNKNOWN:
            needed[cmds[a:b + 1]] = True
        elif pv == after:
            needed[first] = True


def _exposed_resets(sc: Scan, dead: np.ndarray) -> np.ndarray:
    """bool[N]: the sets of the plain slots (:data:`_PLAIN_OP`) that the round keeps
    but that re-set the value of the previous kept set of their slot -- ``A``, dead ``B``,
    ``A`` again: the second ``A`` is a re-set once ``B`` is gone.

    Exactly what the next round would remove there: in these slots the round keeps only the
    first set of each run of re-sets some observer reads (no reset, lift, merge or heap rule
    keeps one), so every kept set is still read after the removal, and it goes iff it
    re-sets the value before it. Removing it changes no other slot's analysis (no other
    slot's rules look at these commands, and the value every observer sees stays).
    The previous kept set follows ``Scan.prev`` over the dead sets (the walk ends at the
    initial value, -1, or at an unknown one, -3, as the next round's scan would).
    """
    n = dead.shape[0]
    out = np.zeros(n, bool)
    plain = _PLAIN_OP[sc.stream.op]
    gone = dead & plain
    if not gone.any():  # no dead set hides a re-set
        return out
    cand = np.flatnonzero(plain & ~dead)
    if not cand.size:
        return out
    sl = sc.slot
    prev = sc.prev
    # origin over the dead sets that continue a chain: a dead set whose own prev is a marker
    # is its own origin, so the marker it ends at stays readable
    hop = gone & (prev >= 0)
    root = _origins(sc, hop)
    p = prev[cand]
    a = np.where(p >= 0, root[np.maximum(p, 0)], p)
    gone = a >= 0
    gone[gone] = dead[a[gone]]
    a[gone] = prev[a[gone]]  # the dead origin's marker: -1 or -3
    before = np.where(a >= 0, sc.cval[np.maximum(a, 0)],
                      np.where(a == -3, UNKNOWN, sc.init_val[sl[cand]]))
    v = sc.cval[cand]
    out[cand[(before == v) & (v >= 0)]] = True
    return out


def _cse_dead(s: Stream) -> np.ndarray:
    """bool[N]: CSEnableAutomaticGpuFlush commands without effect on any Dispatch."""
    n = len(s)
    out = np.zeros(n, bool)
    cse = np.flatnonzero(s.op == _CSE)
    if not cse.size:
        return out
    ev = np.flatnonzero(np.isin(s.op, [_CSE, _DISPATCH, _OPAQUE]))
    pos = np.searchsorted(ev, cse)
    nxt = np.where(pos + 1 < ev.size, ev[np.minimum(pos + 1, ev.size - 1)], -1)
    dead = (nxt >= 0) & (s.op[np.maximum(nxt, 0)] == _CSE)
    out[cse[dead]] = True
    # re-sets of the value in force (among the survivors; an Opaque makes it unknown)
    live = cse[~dead]
    marks = np.sort(np.concatenate([live, np.flatnonzero(s.op == _OPAQUE)]))
    val = np.where(s.op[marks] == _OPAQUE, -1, s.args[marks, _COL_ENABLE])
    k = np.searchsorted(marks, live) - 1
    before = np.where(k >= 0, val[np.maximum(k, 0)], int(s.header.auto_gpu_flush))
    out[live[before == s.args[live, _COL_ENABLE]]] = True
    return out


def dead_state_commands(stream: Stream, sc: Scan | None = None, *, exposed: bool = True) -> np.ndarray:
    """One round of the analysis: bool[N], True for each command the pass removes.

    Parameters
    ----------
    stream : Stream
    sc : Scan, optional
        ``scan(stream)``, reused if given.
    exposed : bool
        Also remove the re-sets that the round's dead sets hid (:func:`_exposed_resets`:
        what the next round would find in the slots no reset or lift touches), so that
        one round does the work of two; False: the plain round (tests compare the two).
    """
    s = stream
    n = len(s)
    if n == 0:
        return np.zeros(0, bool)
    if sc is None:
        sc = scan(s)
    state_cmd = (sc.kcode >= K_SET) & (sc.kcode <= K_CRS)
    merge = _IS_MERGE_OP[s.op]
    simple = np.flatnonzero(state_cmd & ~merge)
    red = np.zeros(n, bool)
    if simple.size:
        v = sc.cval[simple]
        red[simple] = (sc.value_before(simple) == v) & (v >= 0)
    observed, words, lifted, reset_reads = _observed(sc, n)
    needed = np.zeros(n, bool)
    orig = _origins(sc, red)
    obs_simple = np.flatnonzero(observed & ~merge)
    o = orig[obs_simple]
    needed[o[o >= 0]] = True
    _merge_needed(sc, observed & merge, words, needed, sc.pure)
    _lift_origins(s, sc, lifted, needed)
    bundle = s.header.kind == "bundle"
    for slot in (HEAPS, GFX_RS, CRS):
        _reset_runs(sc, slot, red, needed, bundle)
    _reset_readers(sc, reset_reads, needed)
    dead = state_cmd & ~needed
    if exposed:
        dead |= _exposed_resets(sc, dead)
    return dead | _cse_dead(s)


@dataclass(frozen=True)
class DedupeStatePass(Pass):
    """Remove redundant and dead state-setting commands (see the module docstring).

    Report: ``removed`` (command name -> count), ``removed_total`` and ``rounds``
    (analysis rounds that removed something).
    """

    name: ClassVar[str] = "dedupe-state"
    requires: ClassVar[tuple[str, ...]] = ()  # computes its own scan (cheaper than the state table)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "remove state sets that no draw or dispatch observes (re-sets, dead and trailing sets)"

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        sc = am.get("scan", stream)  # the pipeline's (the state table's scan, when it has one)
        removed: Counter[str] = Counter()
        cur = stream
        rounds = 0
        while True:
            dead = dead_state_commands(cur, sc)
            if not dead.any():
                break
            codes, counts = np.unique(cur.op[dead], return_counts=True)
            for c, k in zip(codes, counts):
                removed[BY_CODE[int(c)].name] += int(k)
            keep = np.flatnonzero(~dead)
            cur = cur.take(keep)
            sc = rescan(sc, keep, cur)  # = scan(cur), from what the commands alone determine
            rounds += 1
        report: dict[str, Any] = {"removed": dict(sorted(removed.items())),
                                  "removed_total": sum(removed.values()), "rounds": rounds}
        if not rounds:
            return PassResult.unchanged(stream, **report)
        # the last round scanned the output: its state table for the pipeline (the post-condition
        # and the next pass ask for it), instead of a second scan of the same stream
        am.put("state", cur, track(cur, sc=sc))
        return PassResult(cur, True, frozenset(), report)
