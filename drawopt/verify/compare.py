"""Per-resource comparison of two streams' effective records.

For every resource written by either stream (render and depth targets, UAVs, copy
destinations) the records that write it form a sequence. Each sequence is put in
canonical form, then the two streams' sequences are compared:

1. *Canonical merging.* Adjacent records of a sequence that a correct rewrite may
   merge are merged: instance runs (same everything, consecutive instances, and the
   shader does not see ``SV_InstanceID`` or sees it continue) and index / vertex
   ranges (``no_primitive_id`` pipelines, list topologies, whole primitives,
   contiguous ranges, one instance each). Nothing merges across a read of the
   resource, a write of what they read, or a ``nomerge`` / ``never_merge`` draw.
   Inside a commuting group (see 3; found before merging) the records are first
   sorted by a canonical key, so the merged form does not depend on their order.
2. *Hazards.* Every action's key includes, for each resource it reads that some
   action writes, how many canonical writes of it come before (read-after-write
   and write-after-read), and for every resource it accesses, how many
   ``ResourceBarrier`` commands on it come before.
3. *Order.* A sequence is cut into groups: a run of records whose writes commute
   (the same non-zero label, no read of the resource in between) is one group and
   compares as a multiset; every other record is a group of its own and compares
   in order.

The first difference (earliest in the original) is described in one line.
"""

from __future__ import annotations

__all__ = ["TargetSeqs", "SeqKeys", "canonical", "canonical_keys", "compare_records", "Mismatch", "matched_actions",
           "exit_state_diff", "opaque_state_diff", "read_count_diff"]

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from drawopt._accel import load_cext
from drawopt.ir.arrayset import unique
from drawopt.ir.ops import BY_NAME, Op
from drawopt.verify._hash import SEED, hash_cols
from drawopt.verify.model import HEAP_RESET, KIND_RESET, NEVER, OPQ_BASE, RS_RESET, STALE_BASE, X_RESET
from drawopt.verify.records import KD_DRAW, KD_INDEXED, KEY_FIELDS, F, Records, norm, ragged
from drawopt.verify.slots import ROOT_ARG_SIGNATURE, Col, StateAt, absent_from, cid_of, col_name, op_index, track

_SHIFT = np.int64(1) << np.int64(40)
_OP = {n: BY_NAME[n].code for n in BY_NAME}
_OPAQUE = _OP["Opaque"]
_REST = [F[f] for f in KEY_FIELDS if f not in ("src_off", "count", "inst", "ninst", "rel")]


def _first_field(f: str) -> cached_property:
    """A :class:`TargetSeqs` property: key field ``f`` of each entry's first record."""
    return cached_property(lambda self: self.key[:, F[f]][self.first])


@dataclass
class TargetSeqs:
    """Canonical write sequences of one stream, sorted by (resource, position).

    ``res``: resource id; ``first``: the first record of the entry; ``start``: the entry
    opens a group; ``kh``: the key hash; ``count``/``ninst``: the merged fields; ``hz``:
    per action, the hazard hash. What only a description of a difference reads is
    derived from these when asked for: ``src_off``/``inst``/``rel`` (the other fields of
    ``first``), ``kc`` (the key hash without the state), ``sh`` (the state hash), ``src``
    (the index source hash), ``src_buf``, ``act`` (the action of ``first``), ``kx``,
    ``w_bar``, ``run_entry``, ``run_len``, ``m_entry``.
    """

    res: np.ndarray
    first: np.ndarray
    start: np.ndarray
    kh: np.ndarray
    count: np.ndarray
    ninst: np.ndarray
    hz: np.ndarray
    bar_keys: np.ndarray
    """The sorted barrier keys (``resource << 40 | command``) of the barriers that count;
    ``w_res`` / ``w_act`` / ``a_cmd``: the stream's write pairs and action commands
    (``Records``'), from which ``w_bar`` is derived."""
    w_res: np.ndarray
    w_act: np.ndarray
    a_cmd: np.ndarray
    m_rec: np.ndarray
    """Members of the entries: record ``m_rec[i]`` belongs to entry ``m_entry[i]`` (a merged
    entry has several records; a record of an action writing k resources is in k entries)."""
    key: np.ndarray
    """The stream's record keys (``Records.key``); ``r_act``: the action of each record."""
    r_act: np.ndarray
    rd_act: np.ndarray
    rd_res: np.ndarray
    """The reads of written resources (the only ones that order writes): action and resource,
    by action then resource; ``rd_cnt`` / ``rd_bar``: the canonical writes and the barriers
    of the resource before each."""
    rd_cnt: np.ndarray
    rd_bar: np.ndarray
    run_head: np.ndarray
    """Per run of merged members (in member order): the position of its first member in
    ``m_rec``; ``moved_to`` / ``moved_from``: the runs the multiset sort moved (run
    ``moved_from[j]`` became entry ``moved_to[j]``; the others the entry of their own index)."""
    moved_to: np.ndarray
    moved_from: np.ndarray

    src_off = _first_field("src_off")
    inst = _first_field("inst")
    rel = _first_field("rel")
    sh = _first_field("state")
    src_buf = _first_field("src_buf")

    @cached_property
    def act(self) -> np.ndarray:
        return self.r_act[self.first]

    @cached_property
    def kc(self) -> np.ndarray:
        return _kc(self.key, self.first, self.count, self.ninst, self.hz, self.act, _kc_prefix(self.key))

    @cached_property
    def src(self) -> np.ndarray:
        return _src_of_records(self.key)[self.first]

    @cached_property
    def w_bar(self) -> np.ndarray:
        """Per write pair (``Records.w_res``): the barriers on its resource before its action."""
        return _barriers_before(self.bar_keys, self.w_res, self.w_act, self.a_cmd)

    @cached_property
    def run_entry(self) -> np.ndarray:
        """Per run of merged members (in member order): the entry it became."""
        e = np.arange(self.run_head.size)
        e[self.moved_from] = self.moved_to
        return e

    @property
    def run_len(self) -> np.ndarray:
        """Per run of merged members: how many members it has."""
        return np.diff(np.r_[self.run_head, self.m_rec.size])

    @cached_property
    def m_entry(self) -> np.ndarray:
        return np.repeat(self.run_entry, self.run_len)

    @cached_property
    def kx(self) -> np.ndarray:
        """The key hash without hazards (to describe differences: a dropped write shifts later
        reads)."""
        k = self.key
        return hash_cols([*[(k[:, j], self.first) for j in _REST], self.src_off, self.count, self.inst, self.ninst,
                          self.rel], self.first.size)


_KC_PREFIX = [j for j in _REST if j not in (F["state"], F["src_buf"], F["fmt"])]
"""The key fields :func:`_kc` starts with (per record: hashed once per record, :func:`_kc_prefix`)."""


def _kc_prefix(key: np.ndarray) -> np.ndarray:
    """Per record: the hash of its :data:`_KC_PREFIX` fields, where :func:`_kc` goes on from."""
    return hash_cols([key[:, j] for j in _KC_PREFIX], key.shape[0])


def _kc(key: np.ndarray, first: np.ndarray, count: np.ndarray, ninst: np.ndarray, hz: np.ndarray,
        act: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """The key hash of entries without the state and the index source: the :data:`_KC_PREFIX`
    fields of the first record (``prefix``: :func:`_kc_prefix`), then the merged count, the
    first record's instance, the merged InstanceCount, the first record's SV_InstanceID, and
    the hazards of its action."""
    return hash_cols([count, (key[:, F["inst"]], first), ninst, (key[:, F["rel"]], first), (hz.view(np.int64), act)],
                     first.size, init=(prefix, first))


def _src_of_records(key: np.ndarray) -> np.ndarray:
    """Per record: the index source hash (buffer, format and byte offset, or first vertex);
    an entry's is its first record's."""
    return hash_cols([key[:, F["src_buf"]], key[:, F["fmt"]], key[:, F["src_off"]]], key.shape[0])


def _mix(first: np.ndarray, *cols: np.ndarray | int) -> np.ndarray:
    return hash_cols([first, *cols], first.size).view(np.uint64)


def _mix_sum(idx: np.ndarray, n: int, first: np.ndarray, *cols: np.ndarray | int,
             pure: bool | None = None) -> np.ndarray:
    """``_sum_by(idx, _mix(first, *cols), n)``: the wrapping sums per index of the row hashes
    (compiled: ``drawopt._verify.hash_sum``, one pass, no hash array; the sums wrap, so the
    order of the additions does not matter).

    >>> i, r = np.array([0, 2, 0]), np.array([4, 5, 6])
    >>> bool((_mix_sum(i, 3, r, -1) == _sum_by(i, _mix(r, -1), 3)).all())
    True
    """
    k = load_cext("_verify", pure)
    if k is None:
        return _sum_by(idx, _mix(first, *cols), n)
    vals: list[np.ndarray | None] = []
    kinds = np.zeros(len(cols) + 1, np.uint8)
    scalars = np.zeros(len(cols) + 1, np.uint64)
    for j, c in enumerate((first, *cols)):
        if isinstance(c, np.ndarray) and c.ndim:
            vals.append(np.ascontiguousarray(c.view(np.int64) if c.dtype == np.uint64 else c, np.int64))
        else:
            vals.append(None)
            kinds[j] = 2
            scalars[j] = int(c) & 0xFFFFFFFFFFFFFFFF
    return k.hash_sum(np.ascontiguousarray(idx, np.int64), n, SEED & 0xFFFFFFFFFFFFFFFF, vals, kinds, scalars)


def _barriers(R: Records, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys ``resource << 40 | command`` of the ResourceBarrier commands ``b``, and the commands."""
    s = R.stream
    res = R.cmap[s.args[b, Op.ResourceBarrier.col("resource")]]
    k = res * _SHIFT + b
    o = np.argsort(k)
    return k[o], b[o]


def _count_before(keys_sorted: np.ndarray, res: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """How many ``keys_sorted`` lie in ``[res << 40, res << 40 | pos)``."""
    if not keys_sorted.size:
        return np.zeros(res.size, np.int64)
    lo = np.searchsorted(keys_sorted, res * _SHIFT, side="left")
    hi = np.searchsorted(keys_sorted, res * _SHIFT + pos, side="left")
    return hi - lo


def _barriers_before(keys_sorted: np.ndarray, res: np.ndarray, act: np.ndarray, a_cmd: np.ndarray,
                     pure: bool | None = None) -> np.ndarray:
    """``_count_before(keys_sorted, res, a_cmd[act])``, looking only at the accesses of the
    few resources that have barriers (compiled: ``drawopt._verify.count_before``, one pass)."""
    out = np.zeros(res.size, np.int64)
    if not keys_sorted.size:
        return out
    k = load_cext("_verify", pure)
    if k is not None:
        return k.count_before(*(np.ascontiguousarray(x, np.int64) for x in (keys_sorted, res, act, a_cmd)))
    m = np.flatnonzero(np.isin(res, np.unique(keys_sorted // _SHIFT)))
    if m.size:
        out[m] = _count_before(keys_sorted, res[m], a_cmd[act[m]])
    return out


def _readers_between(rk: np.ndarray, res: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether a read of ``res`` by an action in ``[lo, hi]`` (inclusive) is among the sorted ``rk``."""
    return (np.searchsorted(rk, res * _SHIFT + hi, side="right") -
            np.searchsorted(rk, res * _SHIFT + lo, side="left")) > 0


def _sum_by(idx: np.ndarray, vals: np.ndarray, n: int) -> np.ndarray:
    """Wrapping per-index sums of ``vals`` into ``n`` bins (``np.add.at``; one ``reduceat``
    where ``idx`` is sorted, as the access columns are)."""
    out = np.zeros(n, np.uint64)
    if not idx.size:
        return out
    if idx.size > 1 and bool((idx[1:] < idx[:-1]).any()):
        np.add.at(out, idx, vals)
        return out
    head = np.empty(idx.size, bool)
    head[0] = True
    np.not_equal(idx[1:], idx[:-1], out=head[1:])
    st = np.flatnonzero(head)
    out[idx[st]] = np.add.reduceat(vals, st)
    return out


def _res_order(res: np.ndarray) -> np.ndarray:
    """The stable order of the resource ids ``res`` (a 16-bit radix sort where they fit)."""
    small = res.size and 0 <= int(res.min()) and int(res.max()) < 1 << 16
    return np.argsort(res.astype(np.uint16) if small else res, kind="stable")


def _before(e_res: np.ndarray, e_act: np.ndarray, res: np.ndarray, act: np.ndarray, sort: bool = False,
            pure: bool | None = None) -> np.ndarray:
    """For each ``(res[i], act[i])``: how many entries of resource ``res[i]`` have an action
    before ``act[i]``. ``e_res`` ascending; ``e_act`` ascending within a resource (else
    ``sort``: they are sorted first). Compiled, where ``sort``: ``drawopt._verify.count_below``,
    the same counts for any order of ``e_act`` within a resource (no sort, no assumption on the
    order: a running maximum and minimum bound the positions to look at one by one).

    >>> e_res, e_act = np.array([0, 0, 0, 1]), np.array([5, 2, 9, 4])
    >>> _before(e_res, e_act, np.array([0, 0, 1]), np.array([6, 2, 5]), sort=True).tolist()
    [2, 0, 1]
    """
    out = np.zeros(res.size, np.int64)
    if not res.size:
        return out
    k = load_cext("_verify", pure) if sort else None
    if k is not None:
        return k.count_below(*(np.ascontiguousarray(x, np.int64) for x in (e_res, e_act, res, act)))
    rs = unique(res)
    lo, hi = np.searchsorted(e_res, rs, "left"), np.searchsorted(e_res, rs, "right")
    for r, a, b in zip(rs.tolist(), lo.tolist(), hi.tolist()):
        m = res == r
        seg = np.sort(e_act[a:b]) if sort else e_act[a:b]
        out[m] = np.searchsorted(seg, act[m], "left")
    return out


GroupKey = np.ndarray | tuple[np.ndarray, np.ndarray]
"""A sort key of :func:`_group_order`: an array, or ``(array, at)`` standing for ``array[at]``."""


def _group_order(gid: np.ndarray, keys: Callable[[np.ndarray], tuple[GroupKey, ...]],
                 pure: bool | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The order ``np.lexsort((*keys, gid))`` for a non-decreasing ``gid``, as ``(i, perm)``:
    position ``i[j]`` takes the element at ``perm[j]``. Only groups of two or more entries
    are sorted (a singleton group keeps its place); ``keys(i)`` gives the sort keys of the
    positions ``i`` (``uint64`` keys in unsigned order), each an array or ``(array, at)``,
    which is ``array[at]``. None: no such group (the order stays). Compiled: each group
    merge-sorted on its own (``drawopt._verify.group_sort``, reading ``(array, at)`` keys in
    place, without gathering them), the same order."""
    n = gid.size
    if n < 2:
        return None
    eq = gid[1:] == gid[:-1]
    multi = np.zeros(n, bool)
    multi[1:] = eq
    multi[:-1] |= eq
    del eq
    idx = np.flatnonzero(multi)
    del multi
    if not idx.size:
        return None
    k = load_cext("_verify", pure)
    if k is None:
        return idx, idx[np.lexsort(tuple(x[0][x[1]] if isinstance(x, tuple) else x for x in keys(idx)) + (gid[idx],))]
    ks = keys(idx)
    vals = [_ordered_i64(x[0] if isinstance(x, tuple) else x) for x in ks]
    at = [np.ascontiguousarray(x[1], np.int64) if isinstance(x, tuple) else None for x in ks]
    unsigned = np.array([(x[0] if isinstance(x, tuple) else x).dtype == np.uint64 for x in ks], np.uint8)
    return idx, idx[k.group_sort(np.ascontiguousarray(gid[idx], np.int64), vals, at, unsigned)]


def _ordered_i64(x: np.ndarray) -> np.ndarray:
    """``x`` as ``int64`` values for :func:`drawopt._verify.group_sort` (a ``uint64`` array viewed
    as ``int64``: the kernel's ``unsigned`` flag restores its order; no copy of either)."""
    if x.dtype == np.uint64:
        return np.ascontiguousarray(x).view(np.int64)
    return np.ascontiguousarray(x, np.int64)


def _prev(x: np.ndarray) -> np.ndarray:
    """``x[max(i - 1, 0)]`` for every ``i`` (the entry before, the first one for itself)."""
    out = np.empty_like(x)
    if x.size:
        out[0] = x[0]
        out[1:] = x[:-1]
    return out


def _group_ids(e_res: np.ndarray, e_lab: np.ndarray, e_act: np.ndarray, rk: np.ndarray,
               pure: bool | None = None) -> np.ndarray:
    """Commuting-group number (from 1) of every write entry (sorted by resource, then record).

    An entry opens a group unless it continues the previous one: the same resource and
    the same non-zero label, and no read of the resource between their actions
    (inclusive). Compiled twin: ``drawopt._verify.group_ids``."""
    k = load_cext("_verify", pure)
    if k is not None:
        return k.group_ids(*(np.ascontiguousarray(x, np.int64) for x in (e_res, e_lab, e_act, rk)))
    n = e_res.size
    same = np.zeros(n, bool)
    if n > 1:
        same[1:] = e_res[1:] == e_res[:-1]
    g_start = ~same | (e_lab == 0) | (e_lab != _prev(e_lab)) | _readers_between(rk, e_res, _prev(e_act), e_act)
    return np.cumsum(g_start)


def _merge_runs(R: Records, e_res: np.ndarray, e_lab: np.ndarray, e_gid: np.ndarray, e_rec: np.ndarray,
                e_act: np.ndarray, rk: np.ndarray, rest: np.ndarray, hz: np.ndarray,
                pure: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of neighbouring entries (canonical order) that merge into one: the position of
    each run's first entry, and its merged InstanceCount and count.

    Two neighbours merge when they write the same resource, with the same label, the same
    key apart from the merged fields (``rest``, per record) and the same hazards (``hz``,
    per action), neither is ``nomerge``, nothing separates them (across groups: no label
    and no read of the resource in between), and they continue each other: as instances
    (same range, consecutive instances) or as ranges (``no_primitive_id``, a list topology,
    whole primitives, contiguous, one instance each). A run merges one way only.
    Compiled twin: ``drawopt._verify.merge_runs``."""
    key = R.key
    cols = [key[:, F[f]] for f in ("kind", "fmt", "src_off", "count", "inst", "ninst", "rel")]
    noprim = np.array([p.no_prim_id for p in R.pipes] + [False], bool)[R.a_pipe]
    k = load_cext("_verify", pure)
    if k is not None:
        c64 = [np.ascontiguousarray(x, np.int64) for x in (e_res, e_lab, e_gid, e_rec, e_act, rk, rest, *cols)]
        return k.merge_runs(*c64, np.ascontiguousarray(R.r_nomerge, np.uint8), np.ascontiguousarray(hz, np.uint64),
                            noprim.view(np.uint8), np.ascontiguousarray(R.a_vpp, np.int64), KD_DRAW, KD_INDEXED)
    n = e_rec.size
    col = {f: c[e_rec] for f, c in zip(("kind", "fmt", "src_off", "count", "inst", "ninst", "rel"), cols)}
    same = np.zeros(n, bool)
    same_g = np.zeros(n, bool)
    if n > 1:
        same[1:] = e_res[1:] == e_res[:-1]
        same_g[1:] = e_gid[1:] == e_gid[:-1]
    pa = _prev(e_act)
    # across groups: only unlabelled neighbours (singleton groups, still in stream order) with no
    # read of the resource between them merge; inside a group nothing reads the resource
    sep = ~same_g & ((e_lab != 0) | _readers_between(rk, e_res, pa, e_act))
    pcol = {f: _prev(v) for f, v in col.items()}
    nomerge = R.r_nomerge[e_rec]
    r_rest = rest[e_rec]
    base_ok = same & ~sep & (_prev(r_rest) == r_rest) & (hz[pa] == hz[e_act]) & \
        (_prev(e_lab) == e_lab) & ~_prev(nomerge) & ~nomerge & \
        ((col["kind"] == KD_DRAW) | (col["kind"] == KD_INDEXED))
    inst_link = base_ok & (pcol["src_off"] == col["src_off"]) & (pcol["count"] == col["count"]) & \
        (col["inst"] >= 0) & (pcol["inst"] >= 0) & (col["inst"] == pcol["inst"] + pcol["ninst"]) & \
        (((pcol["rel"] == -1) & (col["rel"] == -1)) |
         ((pcol["rel"] >= 0) & (col["rel"] == pcol["rel"] + pcol["ninst"])))
    vpp = R.a_vpp[pa]
    isz = np.where(pcol["fmt"] == 1, 4, 2)
    step = np.where(pcol["kind"] == KD_INDEXED, pcol["count"] * isz, pcol["count"])
    range_link = base_ok & noprim[e_act] & (vpp > 0) & (pcol["ninst"] == 1) & (col["ninst"] == 1) & \
        (pcol["inst"] == col["inst"]) & (pcol["rel"] == col["rel"]) & \
        (pcol["count"] % np.maximum(vpp, 1) == 0) & (col["src_off"] == pcol["src_off"] + step) & \
        (pcol["count"] > 0)
    typ = np.where(inst_link, 1, np.where(range_link, 2, 0))
    if n > 1:
        # a run merges one way only: cut where the link type changes
        typ[1:] = np.where((typ[1:] > 0) & (typ[:-1] > 0) & (typ[1:] != typ[:-1]), 0, typ[1:])
    if n:
        typ[0] = 0
    hidx = np.flatnonzero(typ == 0)
    ninst, count = col["ninst"][hidx], col["count"][hidx]
    if hidx.size and hidx.size < n:
        rtype = np.maximum.reduceat(typ, hidx)
        ninst = np.where(rtype == 1, np.add.reduceat(col["ninst"], hidx), ninst)
        count = np.where(rtype == 2, np.add.reduceat(col["count"], hidx), count)
    return hidx, ninst, count


def _entries(R: Records, pure: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The write entries ``(resource, label, action, record)``: the write pairs by resource
    (stable: then by action), each once per record of its action (in record order).
    Compiled: ``drawopt._verify.write_entries``, one pass."""
    wo = _res_order(R.w_res)
    k = load_cext("_verify", pure)
    if k is not None:
        return k.write_entries(np.ascontiguousarray(wo, np.int64), *(np.ascontiguousarray(x, np.int64) for x in (
            R.w_res, R.w_lab, R.w_act, R.a_first, R.a_nrec)))
    w_act = R.w_act[wo]
    wrep = R.a_nrec[w_act]
    return (np.repeat(R.w_res[wo], wrep), np.repeat(R.w_lab[wo], wrep), np.repeat(w_act, wrep),
            ragged(R.a_first[w_act], wrep))


def read_count_diff(name: str, a: int, b: int, across: str = "") -> str:
    """How a draw's read of written resource ``name`` differs: ``a`` / ``b`` writes of it come
    before the read in the original / optimized, ``-1`` where that side does not read it at all;
    ``across``: where the write the read moved across is (or "").

    >>> read_count_diff("tex", 0, 1, "line 7")
    'reads tex after 0 write(s) in the original but 1 in the optimized (moved across the write at line 7)'
    >>> read_count_diff("tex", 2, -1)
    'reads tex after 2 write(s) in the original but does not read it in the optimized'
    >>> read_count_diff("tex", -1, 0)
    'does not read tex in the original but reads it after 0 write(s) in the optimized'
    """
    if a < 0:
        return f"does not read {name} in the original but reads it after {b} write(s) in the optimized"
    if b < 0:
        return f"reads {name} after {a} write(s) in the original but does not read it in the optimized"
    return (f"reads {name} after {a} write(s) in the original but {b} in the optimized"
            + (f" (moved across the write at {across})" if across else ""))


@dataclass
class SeqKeys:
    """What :func:`compare_records` compares first, of one stream's canonical write sequences
    (:class:`TargetSeqs`' ``res``, ``kh`` and ``start``): where two streams' are the same,
    their records are equal and nothing else of the sequences is read."""

    res: np.ndarray
    kh: np.ndarray
    start: np.ndarray

    def same_as(self, other: SeqKeys) -> bool:
        """Whether :func:`compare_records` finds the sequences equal without looking further."""
        return (self.res.size == other.res.size and np.array_equal(self.res, other.res)
                and np.array_equal(self.kh, other.kh) and np.array_equal(self.start, other.start))


def canonical(R: Records, written: np.ndarray, barriers: np.ndarray | None = None) -> TargetSeqs:
    """Canonical write sequences of ``R``.

    ``written``: ids of the resources either stream writes; ``barriers``: the
    ``ResourceBarrier`` commands that count as epochs (default: all of them).
    """
    out = _canonical(R, written, barriers, True)
    assert isinstance(out, TargetSeqs)
    return out


def canonical_keys(R: Records, written: np.ndarray, barriers: np.ndarray | None = None) -> SeqKeys:
    """The ``res``, ``kh`` and ``start`` of :func:`canonical` (the same arrays), keeping nothing
    else: each array the rest of the sequences would need goes as soon as it is read (the
    validator's first comparison; the whole sequences are built only where these differ)."""
    out = _canonical(R, written, barriers, False)
    assert isinstance(out, SeqKeys)
    return out


def _canonical(R: Records, written: np.ndarray, barriers: np.ndarray | None, full: bool) -> TargetSeqs | SeqKeys:
    """:func:`canonical` (``full``) or :func:`canonical_keys`: one computation, the second
    dropping what it does not return as it goes."""
    if barriers is None:
        barriers = op_index(R.stream).of(_OP["ResourceBarrier"])
    key = R.key
    nA = R.a_cmd.size
    # ------------------------------------------------------------ write entries per resource
    # by (resource, record): the write pairs by resource (then action), each with its records
    e_res, e_lab, e_act, e_rec = _entries(R)
    bar_keys, _ = _barriers(R, np.asarray(barriers, np.int64))
    # ------------------------------------------------------------ raw hazards (for merging)
    # reads of a written resource (only those order writes), by resource then action
    ra, rr = R.reads.pairs(written)
    rk = (rr * _SHIFT + ra)[_res_order(rr)]
    raw_cnt = _before(e_res, e_act, rr, ra)
    rd_bar = _barriers_before(bar_keys, rr, ra, R.a_cmd)
    wpart = _mix_sum(R.w_act, nA, R.w_res, -1, _barriers_before(bar_keys, R.w_res, R.w_act, R.a_cmd))
    hz_raw = _mix_sum(ra, nA, rr, raw_cnt, rd_bar)
    hz_raw += wpart
    del raw_cnt
    # ------------------------------------------------------------ commuting groups of raw records
    # a read of the resource in [prev action, this action] (inclusive) separates them
    e_gid = _group_ids(e_res, e_lab, e_act, rk)
    # inside a commuting group the order is not observable: put its records in a canonical
    # order (by key, then by position for ties) so that merging does not depend on it
    rest = hash_cols([key[:, j] for j in _REST], key.shape[0])

    def sort_keys(i: np.ndarray, e_rec: np.ndarray = e_rec, e_act: np.ndarray = e_act, hz_raw: np.ndarray = hz_raw,
                  rest: np.ndarray = rest) -> tuple[GroupKey, ...]:
        r, a = e_rec[i], e_act[i]   # (the record fields are read at r in place, not gathered)
        return (r, *[(key[:, F[f]], r) for f in ("rel", "ninst", "inst", "count", "src_off")], (hz_raw, a), (rest, r))

    moved = _group_order(e_gid, sort_keys)
    del sort_keys
    if moved is not None:
        for x in (e_res, e_lab, e_rec, e_act, e_gid):
            x[moved[0]] = x[moved[1]]
        del x
    del moved
    # ------------------------------------------------------------ merge links
    hidx, ninst, count = _merge_runs(R, e_res, e_lab, e_gid, e_rec, e_act, rk, rest, hz_raw)
    del e_act, e_lab, rest, hz_raw, rk   # (the arrays of n entries go as soon as they are read)
    m = hidx.size
    first = e_rec[hidx]
    res = e_res[hidx]
    del e_res
    gid = e_gid[hidx]
    del e_gid
    if not full:
        del e_rec, hidx
    # ------------------------------------------------------------ canonical hazards
    f_act = R.r_act[first]
    # entries are in canonical order inside a group: count them in stream order
    can_cnt = _before(res, f_act, rr, ra, sort=True)
    hz = _mix_sum(ra, nA, rr, can_cnt, rd_bar)
    hz += wpart
    del wpart
    # ------------------------------------------------------------ key hash and groups
    kc = _kc(key, first, count, ninst, hz, f_act, _kc_prefix(key))
    del f_act
    if not full:
        del count, ninst, hz, can_cnt, ra, rr, rd_bar
    sh = key[:, F["state"]][first]
    src = _src_of_records(key)[first]
    if not full:
        del first
    kh = hash_cols([kc, sh, src], m)
    # multiset groups (the raw commuting groups; a merged run never spans two of them unless
    # both are unlabelled singletons, which then stay separate groups): sort by key hash inside
    # the group (stable: keeps order for ties)
    moved = _group_order(gid, lambda i, by=(src, sh, kc): tuple((x, i) for x in by))
    del kc, src, sh
    start = np.ones(m, bool)
    if m > 1:
        start[1:] = gid[1:] != gid[:-1]   # the order moves entries inside their group only
    del gid
    z = np.zeros(0, np.int64)
    moved_to, moved_from = moved if moved is not None else (z, z)
    if not full:
        for x in (res, kh):
            x[moved_to] = x[moved_from]
        return SeqKeys(res=res, kh=kh, start=start)
    for x in (res, first, kh, count, ninst):
        x[moved_to] = x[moved_from]
    return TargetSeqs(res=res, first=first, start=start, kh=kh, count=count, ninst=ninst, hz=hz.view(np.int64),
                      bar_keys=bar_keys, w_res=R.w_res, w_act=R.w_act, a_cmd=R.a_cmd, m_rec=e_rec, key=key,
                      r_act=R.r_act, rd_act=ra, rd_res=rr, rd_cnt=can_cnt, rd_bar=rd_bar, run_head=hidx,
                      moved_to=moved_to, moved_from=moved_from)


def matched_actions(A: Records, B: Records, SA: TargetSeqs,
                    SB: TargetSeqs) -> Callable[[int], list[np.ndarray] | None]:
    """Once :func:`compare_records` found the streams equal: a function giving, for an
    action ``b`` of B, one array per entry its records are in: the actions of A whose
    records the matching entry of A holds (None when ``b`` has no record in any write
    sequence). Entries correspond position by position in each resource's canonical
    sequence; an entry stands for all the records merged into it."""
    idx: list[np.ndarray] = []

    def of(b: int) -> list[np.ndarray] | None:
        if not idx:  # the sorts are built on the first query (most verdicts make none)
            idx.append(np.argsort(SB.m_rec, kind="stable"))
            idx.append(SB.m_rec[idx[0]])
            idx.append(np.argsort(SA.m_entry, kind="stable"))
            idx.append(SA.m_entry[idx[2]])
        by_rec_b, rec_b, by_ent_a, ent_a = idx
        lo = np.searchsorted(rec_b, B.a_first[b], "left")
        hi = np.searchsorted(rec_b, B.a_first[b] + B.a_nrec[b], "left")
        if hi <= lo:
            return None
        ents = np.unique(SB.m_entry[by_rec_b[lo:hi]])
        r = SB.res[ents]
        ja = np.searchsorted(SA.res, r, "left") + (ents - np.searchsorted(SB.res, r, "left"))
        ja = ja[ja < SA.res.size]
        i0, i1 = np.searchsorted(ent_a, ja, "left"), np.searchsorted(ent_a, ja, "right")
        return [np.unique(A.r_act[SA.m_rec[by_ent_a[x:y]]]) for x, y in zip(i0.tolist(), i1.tolist())]

    return of


@dataclass
class Mismatch:
    """The first difference found: a one-line reason and the two commands (-1: none)."""

    reason: str
    cmd_a: int
    cmd_b: int
    details: dict


def _free_values(A: Records) -> tuple[int, ...]:
    """Raw values of the original that a rewrite may replace by anything (undefined ones).

    Never set in a list is undefined; in a bundle it is inherited from the caller."""
    return (RS_RESET, HEAP_RESET, X_RESET, KIND_RESET) + ((NEVER,) if A.stream.header.kind == "list" else ())


def refines(A: Records, B: Records, aa: np.ndarray, ab: np.ndarray) -> np.ndarray:
    """Whether the state of B's actions ``ab`` refines that of A's actions ``aa`` (pairwise).

    Equal in every column A's pipeline observes, except where A's value is undefined
    (never set, or lost to a root-signature / heap change): a rewrite may give
    undefined state any value. A root argument A holds as "set before the root signature, or
    undefined" and B as not set since is not compared where the known root signature in force
    lacks it (:func:`_gone_with_signature`, as at an Opaque command).
    """
    ok = np.ones(aa.size, bool)
    pa = A.a_observer[aa]
    free = _free_values(A)
    bundle = A.bundle
    for key in np.unique(pa).tolist():
        sel = np.flatnonzero(pa == key)
        cols = A.observed.get(key, A.state.cols)
        for c in cols:
            raw = A.state.value(c)[aa[sel]]
            rb = B.state.value(c)[ab[sel]]
            same = (norm(raw, bundle) == norm(rb, bundle)) | np.isin(raw, free)
            if not same.all():
                same |= _gone_with_signature(A, c, raw, rb, A.state, aa[sel])
            ok[sel] &= same
    return ok


def _gone_with_signature(A: Records, c: int, ra: np.ndarray, rb: np.ndarray, st: StateAt,
                         at: np.ndarray) -> np.ndarray:
    """Per query: root argument ``c`` is held by A (values ``ra``) as "set before the root
    signature, or undefined" (set where the signature was unknown), by B (``rb``) as not set
    since, and the layout of A's known root signature in force (``st``'s value at queries ``at``,
    if it tracks that column) lacks it (:func:`~drawopt.verify.slots.absent_from`): nothing can
    read it under that signature, and setting another one makes it undefined. One set under the
    known signature stays compared (the state oracle has it observed)."""
    out = np.zeros(ra.size, bool)
    sig_col = ROOT_ARG_SIGNATURE.get(Col(c >> 20))
    if sig_col is None or cid_of(sig_col) not in st.cols:
        return out
    held = np.flatnonzero((ra <= STALE_BASE) & (rb < 0))
    if held.size:
        sigs = A.root_signatures
        in_force = st.value(cid_of(sig_col))[at[held]].tolist()
        out[held] = [v in sigs and absent_from(sigs[v], c) for v in in_force]
    return out


def exit_state_diff(A: Records, B: Records) -> Mismatch | None:
    """For bundles: the first state column the optimized bundle leaves other than the original.

    A bundle's exit state (every pipeline, root argument, table, index and vertex buffer,
    topology... it leaves set) is observed by the caller's draws after ExecuteBundle, so it
    belongs to the bundle's effective records: each column must end with the same value, or
    one the original leaves undefined (lost to a root-signature, heap or kind change, or an
    index buffer after DrawIndexedX). What the original never sets is the caller's value and
    must stay unset.
    """
    if A.exit is None or B.exit is None:
        return None
    return _held_state_diff(A, B, A.exit, B.exit, lambda k: "bundle exit state",
                            "the caller's draws after ExecuteBundle observe the state a bundle leaves", "exit")


def opaque_state_diff(A: Records, B: Records) -> Mismatch | None:
    """The first state column that differs at an ``Opaque`` command (the k-th of A against B's k-th).

    An unknown command is a full barrier: it may be a draw the model does not know and read
    any state, so every column must hold at it what it holds in the original (or refine an
    undefined value), as at a bundle's end. The commands themselves are matched by
    ``_opaque_diff`` first (same count, same text, in order).
    """
    qa, qb = op_index(A.stream).of(_OPAQUE), op_index(B.stream).of(_OPAQUE)
    if not qa.size or qa.size != qb.size:
        return None
    sa = track(A.stream, A.canon, A.cmap, list(A.state.cols), qa.astype(np.int64))
    sb = track(B.stream, B.canon, B.cmap, list(A.state.cols), qb.astype(np.int64))
    return _held_state_diff(A, B, sa, sb, lambda k: f"state at Opaque #{k} (line {int(A.stream.line[qa[k]])})",
                            "an unknown command may read any state", "opaque", qa, qb)


def _held_state_diff(A: Records, B: Records, sa: StateAt, sb: StateAt, what: Callable[[int], str], why: str,
                     field: str, at_a: np.ndarray | None = None, at_b: np.ndarray | None = None) -> Mismatch | None:
    """The first (query, column) where ``sb`` holds other than ``sa`` and ``sa``'s value is not
    undefined. A root argument ``sa`` holds as "set before the root signature, or undefined"
    (set where the signature was unknown) and ``sb`` as not set since is not compared where the
    layout of ``sa``'s (known) root signature lacks it (:func:`~drawopt.verify.slots.absent_from`).
    One set under the known signature is compared (the state oracle has it observed)."""
    free = np.array(_free_values(A), np.int64)
    first: tuple[int, int] | None = None
    for c in sa.cols:
        ra, rb = sa.value(c), sb.value(c)
        bad = np.flatnonzero((ra != rb) & ~np.isin(ra, free))   # B losing what A keeps is a difference
        if bad.size:
            bad = bad[~_gone_with_signature(A, c, ra[bad], rb[bad], sa, bad)]
        if bad.size and (first is None or int(bad[0]) < first[0]):
            first = (int(bad[0]), c)
            if first[0] == 0:
                break
    if first is None:
        return None
    k, c = first
    x = _Explain(A, B, None, None)  # type: ignore[arg-type]  # only its value formatting is used
    va, vb = x._value(A, k, c, sa), x._value(B, k, c, sb)
    never = A.never_text
    if int(sa.value(c)[k]) == NEVER:
        va = never
    if int(sb.value(c)[k]) == NEVER:
        vb = never
    ca, cb = int(sa.source(c)[k]), int(sb.source(c)[k])   # (no setter: the Opaque command, or B's end)
    if ca < 0 and at_a is not None:
        ca = int(at_a[k])
    if cb < 0:
        cb = int(at_b[k]) if at_b is not None else len(B.stream)
    return Mismatch(f"{what(k)}: {col_name(c)} {va} != {vb} ({why})", ca, cb,
                    {"kind": "record", "field": field, "state": col_name(c)})


def compare_records(A: Records, B: Records, SA: TargetSeqs, SB: TargetSeqs) -> Mismatch | None:
    """First difference between the canonical sequences of ``A`` and ``B`` (None: equal)."""
    if SeqKeys(SA.res, SA.kh, SA.start).same_as(SeqKeys(SB.res, SB.kh, SB.start)):
        return None
    best: tuple[int, int, int] | None = None   # (rank, res, position)
    for r in np.union1d(SA.res, SB.res):
        a0, a1 = np.searchsorted(SA.res, r, "left"), np.searchsorted(SA.res, r, "right")
        b0, b1 = np.searchsorted(SB.res, r, "left"), np.searchsorted(SB.res, r, "right")
        na, nb = a1 - a0, b1 - b0
        k = min(na, nb)
        hard = (SA.kc[a0:a0 + k] != SB.kc[b0:b0 + k]) | (SA.start[a0:a0 + k] != SB.start[b0:b0 + k])
        src_free = np.isin(SA.src_buf[a0:a0 + k], _free_values(A))
        hard |= ~src_free & (SA.src[a0:a0 + k] != SB.src[b0:b0 + k])
        soft = np.flatnonzero(~hard & (SA.sh[a0:a0 + k] != SB.sh[b0:b0 + k]))
        if soft.size:
            hard[soft[~refines(A, B, SA.act[a0 + soft], SB.act[b0 + soft])]] = True
        if hard.any():
            p = int(np.argmax(hard))
        elif na != nb:
            p = k
        else:
            continue
        # rank by the earliest original record of the group the difference is in
        g0 = p
        while g0 > 0 and a0 + g0 < a1 and not SA.start[a0 + g0]:
            g0 -= 1
        if a0 + g0 < a1:
            g1 = g0 + 1
            while a0 + g1 < a1 and not SA.start[a0 + g1]:
                g1 += 1
            rank = int(SA.first[a0 + g0:a0 + g1].min())
        else:
            rank = int(A.r_act.size + (SB.first[b0 + p] if b0 + p < b1 else 0))
        if best is None or rank < best[0]:
            best = (rank, int(r), p)
    if best is None:
        return None
    return _Explain(A, B, SA, SB).explain(best[1], best[2])


# --------------------------------------------------------------------------- messages
class _Explain:
    def __init__(self, A: Records, B: Records, SA: TargetSeqs, SB: TargetSeqs):
        self.A, self.B, self.SA, self.SB = A, B, SA, SB

    # ------------------------------------------------------------ helpers
    def rname(self, r: int) -> str:
        return self.A.canon.name(int(r))

    def loc(self, R: Records, rec: int) -> str:
        a = int(R.r_act[rec])
        cmd = int(R.a_cmd[a])
        s = R.where(cmd)
        op = int(R.a_op[a])
        if op in _MULTI:
            sp = R.stream.spec(cmd)
            stride = int(R.stream.args[cmd, sp.col("stride")])
            s += f" [draw {int(R.r_sub[rec])} of the {sp.name}, stride {stride}]"
        return s

    def what(self, R: Records, rec: int) -> str:
        kind, n = R.ordinal(int(R.r_act[rec]))
        return f"{kind} {n}"

    def pair(self, ra: int, rb: int) -> str:
        A, B = self.A, self.B
        return f"{self.what(A, ra)} ({self.loc(A, ra)} vs {self.loc(B, rb)})"

    def explain(self, r: int, p: int) -> Mismatch:
        A, B, SA, SB = self.A, self.B, self.SA, self.SB
        a0, a1 = np.searchsorted(SA.res, r, "left"), np.searchsorted(SA.res, r, "right")
        b0, b1 = np.searchsorted(SB.res, r, "left"), np.searchsorted(SB.res, r, "right")
        na, nb = a1 - a0, b1 - b0
        ia, ib = a0 + p, b0 + p
        tname = self.rname(r)
        kha, khb = SA.kx[a0:a1], SB.kx[b0:b1]

        def cmd_of(R: Records, S: TargetSeqs, i: int) -> int:
            return int(R.a_cmd[R.r_act[S.first[i]]])

        def mm(reason: str, ca: int, cb: int, **d) -> Mismatch:
            return Mismatch(reason, ca, cb, {"kind": "record", "target": tname, **d})

        # one side exhausted
        if ib >= b1:
            return self._missing(int(SA.first[ia]), tname, self._multi_note(ib, b0, b1))
        if ia >= a1:
            rec = int(SB.first[ib])
            dup = np.flatnonzero(kha == SB.kh[ib])
            extra = f" (a duplicate of {A.where(cmd_of(A, SA, a0 + int(dup[0])))})" if dup.size else ""
            return mm(f"target {tname}: the optimized stream has an extra draw at {self.loc(B, rec)}{extra}",
                      -1, cmd_of(B, SB, ib))
        # multiset group: compare as sets
        if not (SA.start[ia] and SB.start[ib] and (ia + 1 >= a1 or SA.start[ia + 1]) and
                (ib + 1 >= b1 or SB.start[ib + 1])):
            return self._group(r, tname, a0, a1, b0, b1, p)
        # ordered position
        if p + 1 < na and p + 1 < nb and kha[p] == khb[p + 1] and kha[p + 1] == khb[p]:
            ra, rb = int(SA.first[ia]), int(SA.first[ia + 1])
            why = self._why_ordered(A, ra, rb)
            return mm(f"target {tname}: {why} draws at {A.where(cmd_of(A, SA, ia))} and "
                      f"{A.where(cmd_of(A, SA, ia + 1))} swapped", cmd_of(A, SA, ia), cmd_of(B, SB, ib))
        if na > nb and np.array_equal(kha[p + 1:p + 1 + min(3, na - p - 1)], khb[p:p + min(3, na - p - 1)]):
            return self._missing(int(SA.first[ia]), tname, self._multi_note(ib, b0, b1))
        if nb > na and p + 1 < nb and khb[p + 1] == kha[p]:
            rec = int(SB.first[ib])
            dup = np.flatnonzero(kha == khb[p])
            extra = f" (a duplicate of {A.where(cmd_of(A, SA, a0 + int(dup[0])))})" if dup.size else ""
            return mm(f"target {tname}: the optimized stream has an extra draw at {self.loc(B, rec)}{extra}",
                      cmd_of(A, SA, ia), cmd_of(B, SB, ib))
        later = np.flatnonzero(khb[p + 1:] == kha[p])
        if later.size and self._fields_equal(ia, ib) is False:
            q = p + 1 + int(later[0])
            ra = int(SA.first[ia])
            why = self._why_ordered(A, ra, int(SB.first[ib]), B)
            return mm(f"target {tname}: {why} draw at {A.where(cmd_of(A, SA, ia))} now comes after the draw at "
                      f"{B.where(cmd_of(B, SB, b0 + q - 1))} (optimized)", cmd_of(A, SA, ia), cmd_of(B, SB, ib))
        return self._fields(r, tname, ia, ib, a0, a1, b0, b1)

    def _missing(self, rec: int, tname: str, note: str = "") -> Mismatch:
        """Record ``rec`` of the original has no counterpart on ``tname``. If the optimized
        stream performs the same draw / dispatch with other state (so that it no longer
        writes ``tname``), say which state; else call it missing."""
        A, B = self.A, self.B
        shape_cols = [F[f] for f in ("kind", "sym", "count", "src_off", "inst", "ninst")]
        sa = hash_cols([A.key[rec, j] for j in shape_cols], 1)[0]
        sb = hash_cols([B.key[:, j] for j in shape_cols], B.key.shape[0])
        cand = np.flatnonzero(sb == sa)
        aa = int(A.r_act[rec])
        ca = int(A.a_cmd[aa])
        det = {"kind": "record", "target": tname}
        if cand.size:
            kind, n = A.ordinal(aa)
            same = [int(c) for c in cand if B.ordinal(int(B.r_act[c])) == (kind, n)]
            rb = same[0] if same else int(cand[0])
            ab = int(B.r_act[rb])
            writes_t = bool(np.any((B.w_act == ab) & (B.w_res == A.canon.ids.get(tname, -2))))
            if not writes_t and A.key[rec, F["state"]] != B.key[rb, F["state"]] and \
                    not refines(A, B, np.array([aa]), np.array([ab]))[0]:
                msg, col = self._state_diff(aa, ab)
                return Mismatch(f"{self.pair(rec, rb)}: {msg} (so it no longer writes {tname})", ca,
                                int(B.a_cmd[ab]), {**det, "field": col})
        return Mismatch(f"target {tname}: {self.what(A, rec)} ({self.loc(A, rec)}) of the original is missing "
                        f"from the optimized stream{note}", ca, -1, det)

    def _multi_note(self, ib: int, b0: int, b1: int) -> str:
        B, SB = self.B, self.SB
        for i in (ib, ib - 1):
            if b0 <= i < b1:
                rec = int(SB.first[i])
                if int(B.a_op[B.r_act[rec]]) in _MULTI:
                    return f" (the optimized draws there come from {self.loc(B, rec)})"
        return ""

    def _fields_equal(self, ia: int, ib: int) -> bool:
        return bool(self.SA.kh[ia] == self.SB.kh[ib])

    def _why_ordered(self, A: Records, ra: int, rb: int, B: Records | None = None) -> str:
        pa = A.pipe(int(A.r_act[ra]))
        if pa is not None and pa.blend != "opaque":
            return "blended"
        if pa is not None and pa.oi:
            return "ordered"
        return "order-dependent"

    def _group(self, r: int, tname: str, a0: int, a1: int, b0: int, b1: int, p: int) -> Mismatch:
        SA, SB, A, B = self.SA, self.SB, self.A, self.B
        ia = a0 + p
        g0 = ia
        while g0 > a0 and not SA.start[g0]:
            g0 -= 1
        g1 = ia + 1
        while g1 < a1 and not SA.start[g1]:
            g1 += 1
        ib0 = min(b0 + (g0 - a0), b1)
        ib1 = ib0 + 1
        while ib1 < b1 and not SB.start[ib1]:
            ib1 += 1
        ib1 = min(ib1, b1)
        # compare without hazards first (a dropped write shifts every later read), then with them
        only_a: list[int] = []
        only_b: list[int] = []
        for ka, kb in ((SA.kx, SB.kx), (SA.kh, SB.kh)):
            left = Counter(kb[ib0:ib1].tolist())
            only_a = []
            for i in sorted(range(g0, g1), key=lambda j: SA.first[j]):
                if left[int(ka[i])] > 0:
                    left[int(ka[i])] -= 1
                else:
                    only_a.append(i)
            right = Counter(ka[g0:g1].tolist())
            only_b = []
            for i in sorted(range(ib0, ib1), key=lambda j: SB.first[j]):
                if right[int(kb[i])] > 0:
                    right[int(kb[i])] -= 1
                else:
                    only_b.append(i)
            if only_a or only_b:
                break
        if only_a and only_b:
            return self._fields(r, tname, only_a[0], only_b[0], a0, a1, b0, b1)
        if only_a:
            return self._missing(int(SA.first[only_a[0]]), tname, " (or moved across a dependent command)")
        if only_b:
            rec = int(SB.first[only_b[0]])
            dup = [i for i in range(g0, g1) if SA.kx[i] == SB.kx[only_b[0]]]
            extra = f" (a duplicate of {A.where(int(A.a_cmd[A.r_act[SA.first[dup[0]]]]))})" if dup else ""
            return Mismatch(f"target {tname}: the optimized stream has an extra draw at {self.loc(B, rec)}{extra}",
                            -1, int(B.a_cmd[B.r_act[rec]]), {"kind": "record", "target": tname})
        rec = int(SB.first[ib0]) if ib0 < b1 else int(SA.first[g0])
        R = B if ib0 < b1 else A
        return Mismatch(f"target {tname}: commuting draws regrouped: the draw at {self.loc(R, rec)} "
                        f"crosses a read of {tname} or a draw whose order is observable",
                        int(A.a_cmd[A.r_act[SA.first[g0]]]), int(B.a_cmd[B.r_act[rec]]) if R is B else -1,
                        {"kind": "record", "target": tname})

    # ------------------------------------------------------------ field differences
    def _fields(self, r: int, tname: str, ia: int, ib: int, a0: int, a1: int, b0: int, b1: int) -> Mismatch:
        A, B, SA, SB = self.A, self.B, self.SA, self.SB
        ra, rb = int(SA.first[ia]), int(SB.first[ib])
        aa, ab = int(A.r_act[ra]), int(B.r_act[rb])
        ca, cb = int(A.a_cmd[aa]), int(B.a_cmd[ab])
        ka, kb = A.key[ra], B.key[rb]
        where = self.pair(ra, rb)
        det = {"kind": "record", "target": tname}

        def out(msg: str, field: str, va=None, vb=None) -> Mismatch:
            return Mismatch(f"{where}: {msg}", ca, cb, {**det, "field": field, "original": va, "optimized": vb})

        merged = self._merge_note(ia, ib, a0, a1)
        if ka[F["state"]] != kb[F["state"]] and not refines(A, B, np.array([aa]), np.array([ab]))[0]:
            msg, col = self._state_diff(aa, ab)
            return out(msg + merged, col)
        if ka[F["kind"]] != kb[F["kind"]]:
            from drawopt.verify.records import KIND_NAMES
            note = _weld_note(B, ab) or _weld_note(A, aa)
            return out(f"{KIND_NAMES[ka[F['kind']]]} != {KIND_NAMES[kb[F['kind']]]}{note}", "kind")
        if ka[F["epoch"]] != kb[F["epoch"]]:
            return out("moved across an Opaque command (a full barrier)", "epoch")
        xa, xb = self._xnote(A, ra), self._xnote(B, rb)
        src_free = int(ka[F["src_buf"]]) in _free_values(A)
        if not src_free and (ka[F["src_buf"]] != kb[F["src_buf"]] or ka[F["fmt"]] != kb[F["fmt"]]):
            return out(f"index source {self._src(A, ra, aa)} != {self._src(B, rb, ab)}", "src")
        if not src_free and SA.src_off[ia] != SB.src_off[ib]:
            what = "index byte offset" if ka[F["kind"]] == KD_INDEXED else "StartVertexLocation"
            return out(f"{what} {SA.src_off[ia]} != {SB.src_off[ib]}{merged}", "src_off",
                       int(SA.src_off[ia]), int(SB.src_off[ib]))
        if SA.count[ia] != SB.count[ib]:
            what = "IndexCount" if ka[F["kind"]] == KD_INDEXED else "VertexCount"
            extra = merged or self._noprim_note(A, aa)
            return out(f"{what} {SA.count[ia]} != {SB.count[ib]}{extra}", "count", int(SA.count[ia]),
                       int(SB.count[ib]))
        if ka[F["bias"]] != kb[F["bias"]]:
            return out(f"vertex bias (BaseVertexLocation) {ka[F['bias']]} != {kb[F['bias']]}{xb or xa}", "bias",
                       int(ka[F["bias"]]), int(kb[F["bias"]]))
        if SA.inst[ia] != SB.inst[ib]:
            return out(f"StartInstanceLocation {SA.inst[ia]} != {SB.inst[ib]}{xb or xa}{merged}", "inst",
                       int(SA.inst[ia]), int(SB.inst[ib]))
        if SA.ninst[ia] != SB.ninst[ib]:
            return out(f"InstanceCount {SA.ninst[ia]} != {SB.ninst[ib]}{merged or self._rel_note(A, aa)}",
                       "ninst", int(SA.ninst[ia]), int(SB.ninst[ib]))
        if SA.rel[ia] != SB.rel[ib]:
            return out(f"SV_InstanceID {SA.rel[ia]} != {SB.rel[ib]}{self._rel_note(A, aa)}", "rel")
        if ka[F["svoff"]] != kb[F["svoff"]]:
            return out(f"SV_VertexID offset {ka[F['svoff']]} != {kb[F['svoff']]} (DrawIndexedX IndexOffset "
                       f"reaches SV_VertexID of a pipeline without an x(...) contract)", "svoff")
        if ka[F["lift"]] != kb[F["lift"]]:
            return out(f"per-draw values (lifted root constants) differ{xb or xa}{merged}", "lift")
        if ka[F["sym"]] != kb[F["sym"]]:
            return out(self._sym_diff(ka, kb, ra, rb), "sym")
        if ka[F["ia"]] != kb[F["ia"]]:
            return out("input-assembler base vertex / instance differs (the pipeline has an input layout)", "ia")
        return self._hazard(where, ca, cb, aa, ab, det, tname)

    def _merge_note(self, ia: int, ib: int, a0: int, a1: int) -> str:
        """If the optimized entry spans the original's entry and the next one, say why that is wrong."""
        A, SA, SB = self.A, self.SA, self.SB
        order = a0 + np.argsort(SA.first[a0:a1], kind="stable")
        pos = np.flatnonzero(order == ia)
        if not pos.size or pos[0] + 1 >= order.size:
            return ""
        nxt = int(order[pos[0] + 1])
        if not (SB.ninst[ib] >= SA.ninst[ia] + SA.ninst[nxt] or SB.count[ib] >= SA.count[ia] + SA.count[nxt]):
            return ""
        r0, r1 = int(SA.first[ia]), int(SA.first[nxt])
        x0, x1 = int(A.r_act[r0]), int(A.r_act[r1])
        k0, k1 = A.key[r0], A.key[r1]
        pi = A.pipe(x0)
        if k0[F["state"]] != k1[F["state"]]:
            why = self._state_diff(x0, x1, A)[0]
        elif k0[F["lift"]] != k1[F["lift"]]:
            why = "their per-draw values (lifted root constants) differ"
        elif k0[F["ia"]] != k1[F["ia"]] and k0[F["kind"]] == KD_DRAW:
            why = ("their vertex-buffer windows differ, and moving a window into StartVertexLocation "
                   "changes SV_VertexID of a non-indexed draw (no no_vertex_id contract)")
        elif pi is not None and SB.count[ib] > SA.count[ia] and not pi.no_prim_id:
            why = f"pipeline '{pi.name}' may read SV_PrimitiveID (no no_primitive_id contract)"
        elif SB.count[ib] > SA.count[ia] and A.a_vpp[x0] == 0:
            why = "the primitive topology is not a list topology (or is not set)"
        elif pi is not None and SB.ninst[ib] > SA.ninst[ia] and not pi.has_perdraw:
            why = f"pipeline '{pi.name}' has no per-draw contract, so SV_InstanceID is observable"
        elif pi is not None and (pi.never_merge or A.r_nomerge[r0]):
            why = "the draw is marked never_merge / nomerge"
        else:
            why = "the shader can tell them apart"
        return (f" (the draws at {A.where(int(A.a_cmd[x0]))} and {A.where(int(A.a_cmd[x1]))} were merged, "
                f"but {why})")

    def _noprim_note(self, R: Records, a: int) -> str:
        pi = R.pipe(a)
        if pi is not None and not pi.no_prim_id:
            return f" (pipeline '{pi.name}' may read SV_PrimitiveID: no no_primitive_id contract)"
        return ""

    def _rel_note(self, R: Records, a: int) -> str:
        pi = R.pipe(a)
        if pi is not None and not pi.has_perdraw:
            return f" (pipeline '{pi.name}' has no per-draw contract, so SV_InstanceID is observable)"
        return ""

    def _xnote(self, R: Records, rec: int) -> str:
        slot = int(R.r_xslot[rec])
        if slot < 0:
            return ""
        a = int(R.r_act[rec])
        cmd = int(R.a_cmd[a])
        io = int(R.stream.args[cmd, Op.DrawIndexedX.col("index_offset")])
        pi = R.pipe(a)
        k = pi.k_bits if pi else 0
        note = f" (DrawIndexedX IndexOffset 0x{io:x} at {R.where(cmd)}: draw id {slot}, low bits {io & ((1 << k) - 1)})"
        i = np.flatnonzero(R.x["rec"] == rec)
        if i.size and pi is not None:
            b, o = int(R.x["buf"][i[0]]), int(R.x["off"][i[0]])
            same = int(np.count_nonzero((R.x["buf"] == b) & (R.x["off"] == o)))
            ids = 1 << (32 - k)
            if same > ids:
                note += (f"; draw-id overflow: {same} DrawIndexedX calls share one per-draw binding but "
                         f"vertex_bits={k} leaves {32 - k} bits ({ids} draw ids)")
        return note

    def _src(self, R: Records, rec: int, a: int) -> str:
        k = R.key[rec]
        b = int(k[F["src_buf"]])
        if b < 0:
            return self._undef(R, a, cid_of(Col.IB), b)
        fmt = ("R16_UINT", "R32_UINT")[int(k[F["fmt"]])] if k[F["fmt"]] in (0, 1) else "?"
        return f"{R.canon.name(b)} {fmt}"

    def _undef(self, R: Records, a: int, col: int, v: int, st: StateAt | None = None) -> str:
        src = int((st if st is not None else R.state).source(col)[a])
        at = R.where(src) if src >= 0 else ""
        if v == NEVER:
            return R.never_text
        if v == RS_RESET:
            return f"undefined (the root signature changed at {at})"
        if v == HEAP_RESET:
            return f"undefined (the descriptor heaps changed at {at})"
        if v == KIND_RESET:
            return f"undefined (the root argument was set as another kind at {at})"
        if v == X_RESET:
            return f"undefined (DrawIndexedX at {at} leaves the index buffer undefined; IASetIndexBuffer needed)"
        if v <= STALE_BASE:
            return f"as set before {at}, or undefined (unless the root signature or heaps it sets are the unknown ones)"
        if v <= OPQ_BASE:
            return f"unknown (after the Opaque command at {at})"
        return str(v)

    def _value(self, R: Records, a: int, col: int, st: StateAt | None = None) -> str:
        st = st if st is not None else R.state
        v = int(st.value(col)[a])
        if v < 0:
            return self._undef(R, a, col, v, st)
        fam = Col(col >> 20)
        if fam in (Col.PSO, Col.RSG, Col.RSC):
            return f"'{R.canon.name(v)}'"
        if fam in (Col.TG, Col.TC):
            return f"{R.canon.name(v >> 32)}[{v & 0xFFFFFFFF}]"
        if fam in (Col.CG, Col.CC):
            return f"0x{v:x}"
        src = int(st.source(col)[a])
        if src >= 0:
            c = R.stream.command(src)
            return " ".join(str(x) for x in (*c.args, *c.var)) or "(none)"
        return str(v)

    def _state_diff(self, aa: int, ab: int, B: Records | None = None) -> tuple[str, str]:
        """The first observed state column that differs (a binding lost in B first)."""
        A = self.A
        B = B if B is not None else self.B
        pa, pb = int(A.a_observer[aa]), int(B.a_observer[ab])
        cols = [cid_of(Col.PSO)] + list(A.observed.get(pa, [])) + \
            [c for c in B.observed.get(pb, []) if c not in A.observed.get(pa, [])]
        if len(cols) == 1:
            cols += list(A.state.cols)
        diffs = []
        free = _free_values(A)
        for c in dict.fromkeys(cols):
            va, vb = int(A.state.value(c)[aa]), int(B.state.value(c)[ab])
            na, nb = (int(x) for x in norm(np.array([va, vb]), A.bundle))
            if na != nb and (B is A or va not in free):
                diffs.append((0 if (nb == NEVER and na != NEVER) else 1, c))
        if not diffs:
            return "normalised state differs", "state"
        _, c = min(diffs, key=lambda d: d[0])
        name = col_name(c)
        return f"{name} {self._value(A, aa, c)} != {self._value(B, ab, c)}", name

    def _sym_diff(self, ka: np.ndarray, kb: np.ndarray, ra: int, rb: int) -> str:
        A, B = self.A, self.B
        return (f"GPU-written indirect arguments differ ({self._args_at(A, ra)} != {self._args_at(B, rb)}; "
                f"GPU-written args compare by buffer, offset, stride and count source)")

    def _args_at(self, R: Records, rec: int) -> str:
        a = int(R.r_act[rec])
        cmd = int(R.a_cmd[a])
        sp = R.stream.spec(cmd)
        c = R.stream.command(cmd)
        if sp.name == "Dispatch":
            return f"Dispatch {' '.join(str(x) for x in c.args)}"
        if sp.name == "CopyBufferRegion":
            return f"CopyBufferRegion {' '.join(str(x) for x in c.args)}"
        if "args_buffer" not in sp.fields:
            return sp.name
        off = int(R.stream.args[cmd, sp.col("offset")])
        stride = int(R.stream.args[cmd, sp.col("stride")]) if "stride" in sp.fields else 0
        sub = int(R.r_sub[rec])
        return f"{c['args_buffer']}+{off + sub * stride} (stride {stride})"

    def _hazard(self, where: str, ca: int, cb: int, aa: int, ab: int, det: dict, tname: str) -> Mismatch:
        A, B, SA, SB = self.A, self.B, self.SA, self.SB
        ia = np.flatnonzero(SA.rd_act == aa)
        ib = np.flatnonzero(SB.rd_act == ab)
        da = {int(SA.rd_res[i]): (int(SA.rd_cnt[i]), int(SA.rd_bar[i])) for i in ia}
        db = {int(SB.rd_res[i]): (int(SB.rd_cnt[i]), int(SB.rd_bar[i])) for i in ib}
        for res in sorted(set(da) | set(db)):
            x, y = da.get(res, (-1, 0)), db.get(res, (-1, 0))
            if x[0] != y[0]:
                name = A.canon.name(res)
                wa = self._nth_write(A, SA, res, min(x[0], y[0])) if min(x[0], y[0]) >= 0 else ""
                return Mismatch(where + ": " + read_count_diff(name, x[0], y[0], wa), ca, cb,
                                {**det, "field": "hazard", "resource": name})
            if x[1] != y[1]:
                name = A.canon.name(res)
                return Mismatch(f"{where}: accesses {name} on the other side of a ResourceBarrier", ca, cb,
                                {**det, "field": "barrier", "resource": name})
        wa_ = {int(A.w_res[i]): int(SA.w_bar[i]) for i in np.flatnonzero(A.w_act == aa)}
        wb_ = {int(B.w_res[i]): int(SB.w_bar[i]) for i in np.flatnonzero(B.w_act == ab)}
        for res in sorted(set(wa_) | set(wb_)):
            if wa_.get(res) != wb_.get(res):
                name = A.canon.name(res)
                return Mismatch(f"{where}: writes {name} on the other side of a ResourceBarrier", ca, cb,
                                {**det, "field": "barrier", "resource": name})
        return Mismatch(f"{where}: effective records differ on target {tname}", ca, cb, {**det, "field": "?"})

    def _nth_write(self, R: Records, S: TargetSeqs, res: int, n: int) -> str:
        i0 = np.searchsorted(S.res, res, "left")
        i1 = np.searchsorted(S.res, res, "right")
        if i0 + n < i1:
            order = np.sort(S.first[i0:i1])
            rec = int(order[n])
            return R.where(int(R.a_cmd[R.r_act[rec]]))
        return ""


def _weld_note(R: Records, a: int) -> str:
    """Why the indexed draw ``a`` of ``R`` was not recognised as a weld of a non-indexed draw."""
    w = R.weld
    i = np.flatnonzero(w.get("fail_act", np.zeros(0, np.int64)) == a)
    if not i.size:
        return ""
    k = int(i[0])
    pos, got, want = int(w["fail_pos"][k]), int(w["fail_vertex"][k]), int(w["fail_want"][k])
    what = f"whose bytes differ from vertex {want}'s" if want >= 0 else "outside the known vertex data"
    return (f" (the indexed draw at {R.where(int(R.a_cmd[a]))} is not a weld of a non-indexed draw: index "
            f"position {pos} fetches vertex {got}, {what})")


_MULTI = {_OP[n] for n in ("MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect",
                           "MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto")}
