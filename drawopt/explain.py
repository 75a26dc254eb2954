"""Why two adjacent draws are separate calls: ``drawopt explain``.

For every pair of consecutive draw calls of a stream (in stream order) that is
not one GPU batch, :func:`explain` gives the first reason that keeps them apart,
checked in this order (each category is one rule of :mod:`drawopt.analysis.mergeclass` or
of the cost model):

``hazard``
    A command no pass moves a draw across lies between them (barrier, flush,
    dispatch, copy, ``Opaque``, ``CSEnableAutomaticGpuFlush``), or the dependency
    graph has a data hazard between them (``raw`` / ``war`` / ``waw`` on a named
    resource): one call cannot hold both sides of a hazard.
``nomerge``
    One of them is flagged ``@nomerge`` or its pipeline declares ``never_merge``.
``kind``
    The two calls cannot share a call kind: indexed and non-indexed draws,
    ``DrawIndexedX``, a GPU-written count (``Auto``), indirect draws reading
    GPU-written arguments from different buffers.
``state``
    Their normalised states differ: the first differing field (pipeline, render
    targets, a descriptor table, root constants, GS parameters, ...) with both values.
``contract``
    They differ only in root parameters a per-draw contract could carry
    (``draw_data`` for mdi, ``x`` for pack-x) and the pipeline does not declare it.
``limit``
    A hard limit cut them apart: the multi-draw count, the ``DrawIndexedX``
    draw-id bits, 32-bit counts.
``cost``
    A merge was possible but the target's cost model says it does not pay: too
    short for a multi-draw call, or a target that runs ``DrawIndexedX`` unpacked.
``mergeable``
    Nothing keeps them apart: a pass of the default pipeline would merge them.

Pairs of ``DrawIndexedX`` calls that a wave-packing target runs as one batch are
not listed (they are merged, on the GPU).
"""

from __future__ import annotations

__all__ = ["explain", "Explanation", "PairReason", "CATEGORIES", "format_explanation", "format_value"]

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drawopt.analysis.costmodel import get_target, mdi_min_batch
from drawopt.analysis.mergeclass import (
    INSTANCES,
    MDI,
    RANGES,
    DrawFacts,
    adjacent_links,
    call_classes,
    draw_facts,
    fence_mask,
    perdraw_params,
    state_keys,
)
from drawopt.analysis.state import MASKED, NSLOTS, ROOT0, SLOT_INDEX, SLOTS, StateTable, intern_rows, track
from drawopt.ir.arrayset import unique
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import BY_CODE, BY_NAME, COL_DRAW_COUNT, COL_INSTANCES, U32_MAX, Cat, Op
from drawopt.ir.stream import Stream

CATEGORIES = ("hazard", "nomerge", "kind", "state", "contract", "limit", "cost", "mergeable")
"""Reason categories, in the order they are checked."""

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_DX = _OP["DrawIndexedX"]
_MULTI = (_OP["MultiDrawInstancedIndirect"], _OP["MultiDrawIndexedInstancedIndirect"])
_AUTO = (_OP["MultiDrawInstancedIndirectAuto"], _OP["MultiDrawIndexedInstancedIndirectAuto"])
_DATA_HAZARDS = ("raw", "war", "waw")
_IB = SLOT_INDEX["index_buffer"]


@dataclass(frozen=True)
class PairReason:
    """Why draw calls ``a`` and ``b`` (command indices, consecutive draws) are apart."""

    a: int
    b: int
    line_a: int
    line_b: int
    category: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "line_a": self.line_a, "line_b": self.line_b,
                "category": self.category, "reason": self.reason}


@dataclass
class Explanation:
    """The result of :func:`explain`.

    ``pairs``: adjacent pairs considered (every consecutive pair of draw calls that
    is not one GPU batch); ``items``: the reasons, at most ``limit`` of them, in
    stream order; ``by_category`` and ``by_detail`` count all pairs (``by_detail``:
    the differing field for ``state``, the separating command or hazard for
    ``hazard``, and so on).
    """

    target: str
    reorder: str
    draws: int
    pairs: int
    packed: int
    items: list[PairReason] = field(default_factory=list)
    by_category: dict[str, int] = field(default_factory=dict)
    by_detail: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "reorder": self.reorder, "draws": self.draws, "pairs": self.pairs,
                "packed_pairs": self.packed, "by_category": self.by_category, "by_detail": self.by_detail,
                "items": [i.to_json() for i in self.items]}


def format_value(v: Any) -> str:
    """A state value for a message: ``('constants', (1, 2))`` -> ``constants 1 2``."""
    if v is None:
        return "undefined"
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        if v and v[0] == "constants" and len(v) >= 2:
            return "constants " + (" ".join("?" if w is None else str(w) for w in v[1]) or "(none)")
        if v and v[0] == "table" and len(v) == 3:
            return f"table {v[1]}[{v[2]}]"
        if v and v[0] in ("cbv", "srv") and len(v) == 3:
            return f"{v[0]} {v[1]}+{v[2]}"
        if v and v[0] in ("null", "offchip", "onchip"):
            if v[0] == "null":
                return "null"
            keys = ("vps", "pps", "ratio", "lds")
            extra = " ".join(f"{k}={x}" for k, x in zip(keys, v[1:]) if x)
            return f"{v[0]}{' ' + extra if extra else ''}"
        if all(isinstance(x, tuple) for x in v):
            return ", ".join(" ".join(str(y) for y in x) for x in v) or "(none)"
        return " ".join(str(x) for x in v)
    return str(v)


def _slot_label(k: int, pipe: Pipeline | None) -> str:
    name = SLOTS[k]
    if name.startswith("root") and pipe is not None:
        return f"{name} (root parameter {k - ROOT0})"
    return name


def explain(stream: Stream, target: str = "d3d12", reorder: str = "declared", *, limit: int | None = None,
            table: StateTable | None = None, graph: Any = None, use_graph: bool = True,
            facts: DrawFacts | None = None, classes: np.ndarray | None = None,
            keys: np.ndarray | None = None) -> Explanation:
    """Explain every adjacent pair of draw calls left unmerged (module docstring).

    Parameters
    ----------
    stream : Stream
    target : str
        Whose cost model and limits apply.
    reorder : str
        The reorder policy of the dependency graph (for data hazards).
    limit : int, optional
        Keep at most this many items (every pair is still counted).
    table, graph, facts, classes, keys : optional
        Analyses already computed (``graph``: the hazard graph or ``build_graph``'s under
        ``reorder``, or a function that returns one, called only if it is needed;
        ``classes``: :func:`~drawopt.analysis.mergeclass.call_classes` of ``facts`` on ``target``;
        ``keys``: on an mdi target, ``state_keys(facts, MDI.state_except)``, which ``call_classes``
        compares too).
    use_graph : bool
        Look for data hazards in the dependency graph (building it costs time on
        large streams); without it, pairs with a data hazard are reported by their
        other reasons.
    """
    model = get_target(target)
    table = table if table is not None else track(stream)
    facts = facts if facts is not None else draw_facts(stream, table)
    d = len(facts)
    ex = Explanation(target=model.name, reorder=reorder, draws=d, pairs=0, packed=0)
    if d < 2:
        return ex
    m = d - 1
    a, b = np.arange(m), np.arange(1, d)
    cat = np.full(m, -1, np.int64)  # index into CATEGORIES
    detail = np.zeros(m, np.int64)  # index into names: the detail strings, each once
    names: list[str] = [""]
    name_id: dict[str, int] = {"": 0}

    def intern(x: str) -> int:
        i = name_id.get(x)
        if i is None:
            i = name_id[x] = len(names)
            names.append(x)
        return i

    undecided = np.ones(m, bool)

    def assign(mask: np.ndarray, category: str, det: np.ndarray | str, code: np.ndarray | None = None) -> None:
        """The undecided pairs of ``mask`` get ``category`` and their detail: ``det`` (a string, or
        one per pair), or with ``code`` the entry ``det[code[i]]`` of the table ``det``."""
        sel = undecided & mask
        cat[sel] = CATEGORIES.index(category)
        if code is not None:
            detail[sel] = np.array([intern(str(x)) for x in det.tolist()], np.int64)[code[sel]]
        elif isinstance(det, np.ndarray):
            detail[sel] = [intern(str(x)) for x in det[sel].tolist()]
        else:
            detail[sel] = intern(det)
        undecided[sel] = False

    cmd = facts.cmd
    # GPU-packed DrawIndexedX pairs are one batch: skip them (or blame the cost model)
    is_x = facts.op == _DX
    adjacent_cmds = cmd[1:] - cmd[:-1] == 1
    same_pack = table.pack[1:] == table.pack[:-1]
    packed = is_x[a] & is_x[b] & adjacent_cmds & same_pack & ~facts.pinned[a] & ~facts.pinned[b]
    considered = ~packed if model.wave_packs_x else np.ones(m, bool)
    ex.packed = int(np.count_nonzero(packed)) if model.wave_packs_x else 0
    undecided &= considered
    # 1. a fence between them
    fence = fence_mask(stream)
    fcum = np.concatenate([[0], np.cumsum(fence)])
    nf = fcum[cmd[1:]] - fcum[cmd[:-1] + 1]
    has_fence = nf > 0
    if has_fence.any():
        fidx = np.flatnonzero(fence)
        first_f = fidx[np.searchsorted(fidx, cmd[:-1] + 1)[has_fence]]
        uf, finv = np.unique(first_f, return_inverse=True)  # each separating command described once
        code = np.zeros(m, np.int64)
        code[has_fence] = finv.reshape(-1)
        assign(has_fence, "hazard", np.array([_fence_desc(stream, c) for c in uf.tolist()], dtype=object), code)
    # 2. pinned
    pin = facts.pinned[a] | facts.pinned[b]
    if pin.any():
        det = np.full(m, "", dtype=object)
        det[pin] = [_pin_desc(stream, facts, i) for i in np.flatnonzero(pin).tolist()]
        assign(pin, "nomerge", det)
    # 3. call kinds
    cls = classes if classes is not None else call_classes(facts, mdi=bool(model.mdi))
    fam_a, fam_b = _family(facts, a), _family(facts, b)
    assign(fam_a != fam_b, "kind", _KIND_PAIRS, fam_a * len(_KIND_NAMES) + fam_b)
    auto = np.isin(facts.op, _AUTO)
    assign(auto[a] | auto[b], "kind", "a GPU-written draw count (Auto) is never merged")
    # 4. state (under the broadest rule the target has)
    except_slots = MDI.state_except if model.mdi else ()
    sk = keys if keys is not None and model.mdi else state_keys(facts, except_slots)
    diff_state = sk[a] != sk[b]
    if diff_state.any():
        # the rows of the two sides, masked as each side's merge test masks them, compared once per
        # distinct (state, pipeline) pair of sides (a few thousand, where pairs number the draws)
        idx = np.flatnonzero(diff_state)
        sides = np.stack([facts.nstate[a[idx]], facts.pipe[a[idx]], facts.nstate[b[idx]], facts.pipe[b[idx]]], axis=1)
        kid, kfirst = intern_rows(sides)
        ua, ub = a[idx[kfirst]], b[idx[kfirst]]
        ra, rb = facts.nrows[facts.nstate[ua]], facts.nrows[facts.nstate[ub]]
        ra[_masked_cols(facts, except_slots, ua)] = MASKED
        rb[_masked_cols(facts, except_slots, ub)] = MASKED
        neq = ra != rb
        first = np.full(m, -1, np.int64)
        first[idx] = np.where(neq.any(axis=1), np.argmax(neq, axis=1), -1)[kid]
        # contract: every differing slot is a root parameter of constants that a contract could lift
        contract = np.zeros(m, bool)
        contract[idx] = _liftable(facts, ra, rb)[kid]
        assign(contract, "contract", _SLOT_NAMES, first)
        assign(diff_state, "state", _SLOT_NAMES, first)  # (-1: the last entry, "state")
    # DrawIndexedX pairs with equal state: packed unless something is between them or the target does not pack
    xx = is_x[a] & is_x[b]
    assign(xx & _x_id_limit(stream, facts, a, b), "limit",
           "the DrawIndexedX draw-id bits are used up (a packed run is full)")
    assign(xx & ~adjacent_cmds, "state", "a state command between them breaks wave packing")
    if not model.wave_packs_x:
        assign(xx, "cost", f"target {model.name} runs DrawIndexedX unpacked"
               + ("" if model.has_x else " (it has no DrawIndexedX at all)"))
    assign(xx, "state", "wave packing needs consecutive DrawIndexedX of one pack class")
    # gpu-written indirect draws from different buffers
    assign(cls[a] != cls[b], "kind", "indirect draws with GPU-written arguments in different buffers")
    # 5. data hazards between the two (graph)
    if use_graph and undecided.any():
        if graph is None:  # the hazard edges are all it reads: no state edges, no networkx
            from drawopt.analysis.graph import hazard_graph
            graph = hazard_graph(stream, reorder=reorder)
        elif callable(graph):
            graph = graph()
        hz = _data_hazards(graph, cmd, np.flatnonzero(undecided))
        if hz:
            det = np.full(m, "", dtype=object)
            mk = np.zeros(m, bool)
            for i, txt in hz.items():
                det[i], mk[i] = txt, True
            assign(mk, "hazard", det)
    # 6. limits
    multi = np.isin(facts.op, _MULTI)
    full = multi[a] & (facts.args[a, COL_DRAW_COUNT] >= model.mdi_max_count)
    assign(full, "limit", f"a multi-draw call holds at most {model.mdi_max_count} draws on {model.name}")
    inst = adjacent_links(facts, INSTANCES)
    inst_total = facts.args[a, COL_INSTANCES] + facts.args[b, COL_INSTANCES]
    assign(~inst.ok & (inst.fail == "contiguous") & (inst_total > U32_MAX), "limit",
           "the instance count would exceed 2^32-1")
    # 7. cost model
    rng = adjacent_links(facts, RANGES)
    merge_inst = (inst.ok | rng.ok)
    minb = mdi_min_batch(model)
    run_len = _run_lengths(cls, facts, stream)
    short = (run_len[a] < minb) & ~merge_inst
    if model.mdi and short.any():
        why = np.full(m, "", dtype=object)
        idx = np.flatnonzero(short & undecided)
        said: dict[tuple[Any, ...], str] = {}  # one message per (run length, hint)
        for i, key in zip(idx.tolist(), zip(run_len[idx].tolist(), rng.fail[idx].tolist(), inst.fail[idx].tolist(),
                                             facts.pipe[idx].tolist())):
            msg = said.get(key)
            if msg is None:
                extra = _instance_hint(stream, facts, i, inst, rng)
                msg = said[key] = (f"a run of {key[0]} such draws is below the {minb} a multi-draw call needs to "
                                   f"pay on {model.name}{extra}")
            why[i] = msg
        assign(short, "cost", why)
    # 8. nothing
    assign(np.ones(m, bool), "mergeable", _MERGEABLE, (~merge_inst).astype(np.int64))
    # results
    keep = considered
    ex.pairs = int(np.count_nonzero(keep))
    per_cat = np.bincount(cat[keep], minlength=len(CATEGORIES)).tolist()
    ex.by_category = {c: v for c, v in zip(CATEGORIES, per_cat) if v}
    cnt: Counter[str] = Counter()  # keys in order of first appearance, as most_common's ties are
    pair_key = cat[keep] * len(names) + detail[keep]  # (category, detail), counted in order of first appearance
    ukey, ufirst, ucount = np.unique(pair_key, return_index=True, return_counts=True)
    for key, k in zip(ukey[np.argsort(ufirst)].tolist(), ucount[np.argsort(ufirst)].tolist()):
        c, det = CATEGORIES[key // len(names)], names[key % len(names)]
        cnt[f"{c}: {_detail_key(c, det)}"] += k
    ex.by_detail = dict(cnt.most_common())
    items = np.flatnonzero(keep)
    if limit is not None:
        items = items[:max(int(limit), 0)]
    for i in items.tolist():
        c = CATEGORIES[int(cat[i])]
        ex.items.append(PairReason(int(cmd[i]), int(cmd[i + 1]), int(stream.line[cmd[i]]), int(stream.line[cmd[i + 1]]),
                                   c, _message(stream, table, facts, i, c, names[int(detail[i])])))
    return ex


# ---------------------------------------------------------------------- helpers
def _fence_desc(stream: Stream, c: int) -> str:
    cmd = stream.command(c)
    if cmd.name == "ResourceBarrier":
        return f"ResourceBarrier {cmd.args[0]} {cmd.args[1]}->{cmd.args[2]}"
    if cmd.name == "Opaque":
        return f"Opaque {cmd.args[0]!r}"
    return " ".join([cmd.name, *(str(x) for x in cmd.args)])


def _pin_desc(stream: Stream, facts: DrawFacts, i: int) -> str:
    for j in (i, i + 1):
        if stream.flags[facts.cmd[j]] & 1:
            return "@nomerge"
    for j in (i, i + 1):
        p = facts.pipeline(j)
        if p is not None and p.never_merge:
            return f"pipeline '{p.name}' declares never_merge"
    return "no usable pipeline"


_FAM_DIRECT, _FAM_INDEXED, _FAM_X, _FAM_AUTO = 0, 1, 2, 3


def _family(facts: DrawFacts, idx: np.ndarray) -> np.ndarray:
    op = facts.op[idx]
    fam = np.where(facts.indexed[idx], _FAM_INDEXED, _FAM_DIRECT)
    fam = np.where(op == _DX, _FAM_X, fam)
    return fam


_KIND_NAMES = ("non-indexed draws", "indexed draws", "DrawIndexedX", "Auto draws")
_KIND_PAIRS = np.array([" and ".join(sorted((x, y))) + " cannot share a call" for x in _KIND_NAMES
                        for y in _KIND_NAMES], dtype=object)
"""The message of a pair of families ``a``, ``b``: entry ``a * 4 + b``."""
_SLOT_NAMES = np.array([*SLOTS, "state"], dtype=object)
"""Slot names by index; index -1 (no differing slot) is "state"."""
_MERGEABLE = np.array(["merge-instances would merge them", "mdi would batch them (run the default pipeline)"],
                      dtype=object)


def _masked_cols(facts: DrawFacts, except_slots: tuple[str, ...], draws: np.ndarray) -> np.ndarray:
    """bool[len(draws), NSLOTS]: the columns the merge test of each of ``draws`` ignores."""
    pipe = facts.pipe[draws]
    row = np.zeros(NSLOTS, bool)  # what every draw's test ignores
    for s in except_slots:
        if s in SLOT_INDEX:
            row[SLOT_INDEX[s]] = True
    clauses = tuple(c for c in except_slots if c in ("x", "draw_data", "instance_data"))
    if "perdraw" in except_slots:
        clauses = ("x", "draw_data", "instance_data")
    if not clauses:
        return np.broadcast_to(row, (draws.shape[0], NSLOTS)).copy()
    up, pinv = np.unique(pipe, return_inverse=True)  # one row per pipeline: its contract's parameters too
    rows = np.tile(row, (up.shape[0], 1))
    for j, p in enumerate(up.tolist()):
        decl = facts.stream.decls[int(p)] if p >= 0 else None
        params = perdraw_params(decl if isinstance(decl, Pipeline) else None, clauses)
        if params:
            rows[j, [ROOT0 + q for q in params if q < 16]] = True
    return rows[pinv.reshape(-1)]


def _liftable(facts: DrawFacts, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    """Pairs whose differing slots are all root constants (liftable by a per-draw contract)."""
    neq = ra != rb
    out = np.zeros(ra.shape[0], bool)
    nonroot = neq.copy()
    nonroot[:, ROOT0:ROOT0 + 16] = False
    cand = neq.any(axis=1) & ~nonroot.any(axis=1)
    if not cand.any():
        return out
    sc = facts.table.scan
    assert sc is not None
    ci = np.flatnonzero(cand)
    diff = neq[ci, ROOT0:ROOT0 + 16]
    vals = ra[ci, ROOT0:ROOT0 + 16]
    seen = unique(vals[diff & (vals >= 0)])  # decode each value once
    # the value a root-constants command leaves in its slot is root constants: no decoding needed
    setc = np.isin(sc.stream.op, _ROOT_CONST_OPS)
    known = np.isin(seen, sc.cval[setc])
    const = known.copy()
    const[~known] = [_is_constants(sc.values.decode(int(v))) for v in seen[~known].tolist()]
    pos = np.minimum(np.searchsorted(seen, vals), max(seen.size - 1, 0))
    good = (vals >= 0) & (const[pos] if seen.size else False)
    out[ci] = (~diff | good).all(axis=1)
    return out


_ROOT_CONST_OPS = [BY_NAME[n].code for n in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants")]


def _is_constants(v: Any) -> bool:
    return isinstance(v, tuple) and bool(v) and v[0] == "constants"


def _data_hazards(graph: Any, cmd: np.ndarray, pairs: np.ndarray) -> dict[int, str]:
    """Pairs (index i: draws i, i+1) with a data-hazard edge between their graph nodes
    (``graph``: a :class:`~drawopt.analysis.graph.HazardGraph` or :func:`~drawopt.analysis.graph.build_graph`'s).

    An edge whose reasons hold a data hazard has one as its strongest reason (they come first
    in :data:`~drawopt.analysis.graph.EDGE_REASONS`), and its resource is that reason's."""
    from drawopt.analysis.graph import EDGE_REASONS, HazardGraph, node_of_command

    node = node_of_command(graph)
    out: dict[int, str] = {}
    if isinstance(graph, HazardGraph):
        u, v = node[cmd[pairs]], node[cmd[pairs + 1]]
        e = graph.find_edges(u, v)
        ok = (u != v) & (e >= 0)
        ok[ok] = np.isin(graph.reason[e[ok]], [EDGE_REASONS.index(r) for r in _DATA_HAZARDS])
        for i, k in zip(pairs[ok].tolist(), e[ok].tolist()):
            res = graph.resource(k)
            r = EDGE_REASONS[int(graph.reason[k])]
            out[i] = f"{r} on {res}" if res else r
        return out
    for i in pairs.tolist():
        u, v = int(node[cmd[i]]), int(node[cmd[i + 1]])
        if u == v or u < 0 or v < 0 or not graph.has_edge(u, v):
            continue
        e = graph.edges[u, v]
        reasons = str(e.get("reasons", e.get("reason", ""))).split(",")
        hz = [r for r in reasons if r in _DATA_HAZARDS]
        if hz:
            res = e.get("resource")
            out[i] = f"{hz[0]} on {res}" if res else hz[0]
    return out


def _x_id_limit(stream: Stream, facts: DrawFacts, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Consecutive DrawIndexedX of an x-contract pipeline where the first used the last draw id."""
    out = np.zeros(a.shape[0], bool)
    both = np.flatnonzero((facts.op[a] == _DX) & (facts.op[b] == _DX))
    if not both.size:
        return out
    # the vertex bits of each pipeline's x contract (-1: none), looked up per pipeline once
    decls = facts.stream.decls
    bits = np.full(len(decls) + 1, -1, np.int64)
    for p in np.unique(facts.pipe[a[both]]).tolist():
        d = decls[p] if p >= 0 else None
        k = d.x_vertex_bits if isinstance(d, Pipeline) else None
        if k is not None:
            bits[p] = k
    k = bits[facts.pipe[a[both]]]  # (pipe -1: the last entry, -1)
    has = k >= 0
    i, k = both[has], k[has]
    slot = facts.args[a[i], Op.DrawIndexedX.col("index_offset")].astype(np.int64) >> k
    out[i] = slot == (np.int64(1) << (32 - k)) - 1
    return out


def _run_lengths(cls: np.ndarray, facts: DrawFacts, stream: Stream) -> np.ndarray:
    """Length of the run of consecutive same-class draws (only state commands between) each draw is in."""
    d = cls.shape[0]
    cats = stream.cats()
    nonstate = np.concatenate([[0], np.cumsum(cats != int(Cat.STATE))])
    c = facts.cmd
    between = (nonstate[c[1:]] - nonstate[c[:-1] + 1]) > 0
    brk = np.r_[True, (cls[1:] != cls[:-1]) | between]
    rid = np.cumsum(brk) - 1
    lens = np.bincount(rid)
    return lens[rid] if d else np.zeros(0, np.int64)


def _instance_hint(stream: Stream, facts: DrawFacts, i: int, inst: Any, rng: Any) -> str:
    """Why merge-instances did not merge pair ``i`` either, when it nearly could."""
    for link in (rng, inst):
        why = str(link.fail[i])
        if why in ("no_primitive_id", "instance_id_free"):
            p = facts.pipeline(i)
            name = f"'{p.name}'" if p is not None else "its pipeline"
            need = "no_primitive_id" if why == "no_primitive_id" else "a per-draw contract (SV_InstanceID)"
            what = "contiguous ranges" if link is rng else "contiguous instances"
            return f"; merge-instances needs {need} in {name} to merge these {what}"
    return ""


def _detail_key(cat: str, det: str) -> str:
    if cat == "hazard":
        return det.split(" ")[0] if det else "hazard"
    if cat in ("cost", "mergeable", "limit", "kind", "nomerge"):
        return det.split(";")[0] if det else cat
    return det or cat


def _message(stream: Stream, table: StateTable, facts: DrawFacts, i: int, cat: str, det: str) -> str:
    """The one-line reason of pair ``i``."""
    if cat in ("state", "contract") and det in SLOT_INDEX:
        k = SLOT_INDEX[det]
        sc = table.scan
        assert sc is not None
        va, vb = (sc.values.decode(_value_id(table, facts, j, k)) for j in (i, i + 1))
        p = facts.pipeline(i)
        label = _slot_label(k, p)
        msg = f"{label} differs: {format_value(va)} vs {format_value(vb)}"
        if cat == "contract":
            name = f"pipeline '{p.name}'" if p is not None else "the pipeline"
            msg += f" ({name} declares no draw_data contract that would let mdi move it into a per-draw array)"
        if k == SLOT_INDEX["vertex_buffers"] and facts.folded[i] != facts.folded[i + 1]:
            msg += " (one of them is not a foldable vertex-buffer window)"
        return msg
    if cat == "hazard" and det and not det.startswith(("raw", "war", "waw")):
        return f"separated by {det}"
    return det or cat


def _value_id(table: StateTable, facts: DrawFacts, i: int, k: int) -> int:
    """Value id of slot ``k`` of draw ``i``'s normalised state; for a folded vertex-buffer window
    (a window key, below every value id and marker) the binding itself, from its state."""
    v = int(facts.nrows[facts.nstate[i], k])
    return int(table.rows[facts.sid[i], k]) if v <= _FOLD_KEYS else v


_FOLD_KEYS = -(1 << 40)
"""Vertex-buffer window keys of :attr:`DrawFacts.nrows` are at or below this (mergeclass._vb_fold)."""


def format_explanation(ex: Explanation, stream_name: str = "") -> str:
    """The text ``drawopt explain`` prints."""
    lines = []
    for it in ex.items:
        la = f"line {it.line_a}" if it.line_a > 0 else f"command {it.a}"
        lb = f"line {it.line_b}" if it.line_b > 0 else f"command {it.b}"
        lines.append(f"{stream_name + ':' if stream_name else ''}{la} / {lb}: {it.category}: {it.reason}")
    shown = len(ex.items)
    head = (f"{ex.pairs} adjacent pair{'s' if ex.pairs != 1 else ''} of draw calls left unmerged "
            f"(target {ex.target}, reorder {ex.reorder}; {ex.draws} draw calls")
    head += f", {ex.packed} wave-packed pairs not listed)" if ex.packed else ")"
    if shown < ex.pairs:
        head += f"; {shown} shown"
    lines.append(head)
    for c, v in ex.by_category.items():
        details = [(k.split(": ", 1)[1], n) for k, n in ex.by_detail.items() if k.startswith(c + ": ")]
        top = ", ".join(f"{k} {n}" for k, n in details[:6])
        lines.append(f"  {c:<10} {v:>8}  {top}")
    return "\n".join(lines) + "\n"


_ = BY_CODE
