"""What the validator knows about declarations: canonical names and pipeline facts.

Both streams are read against one :class:`Canon`, which gives every declared name
one integer id, so that values of the two streams compare directly even when the
optimized stream declares more (generated buffers) or in another order.
"""

from __future__ import annotations

__all__ = [
    "Canon", "Clause", "PipeInfo", "pipe_info", "NEVER", "RS_RESET", "HEAP_RESET", "X_RESET", "KIND_RESET", "OPQ_BASE",
    "STALE_BASE",
    "is_undefined", "commute_label", "VERTS_PER_PRIM", "STAGE_CLASS",
]

from dataclasses import dataclass, replace

import numpy as np

from drawopt.ir.decls import Decls, Pipeline, RootSig
from drawopt.verify._hash import hash_cols

NEVER = -1
"""State value: never set in this list."""
RS_RESET = -2
"""State value: root arguments lost when the root signature changed."""
HEAP_RESET = -3
"""State value: descriptor table undefined after the descriptor heaps changed."""
X_RESET = -4
"""State value: index buffer left undefined by DrawIndexedX."""
KIND_RESET = -6
"""State value: the root argument was set as another kind (a table replaces constants...)."""
OPQ_BASE = -16
"""State after the k-th ``Opaque`` command is ``OPQ_BASE - k`` (unknown, but the same in both streams)."""
STALE_BASE = -(1 << 40)
"""State value: a root argument set before a root signature (a table: descriptor heaps) whose
previous one is unknown (a bundle's first, or the first after an Opaque command), which then
holds it only if that is the same (else it is undefined):
``STALE_BASE - canon.id("~C:V")`` for column C and value V, so equal in both streams only when
both set V there before their first root signature (below every ``OPQ_BASE - k``)."""

STAGE_CLASS = {"cs": 0, "vs": 1, "hs": 1, "ds": 1, "gs": 1, "ps": 2}
"""Writer stage classes of the flush rules: CS, VS (pre-raster stages), PS."""

VERTS_PER_PRIM = {"POINTLIST": 1, "LINELIST": 2, "TRIANGLELIST": 3, "LINELIST_ADJ": 4,
                  "TRIANGLELIST_ADJ": 6, "PATCHLIST_3": 3, "PATCHLIST_4": 4}
"""Topologies whose draws split cleanly into primitives (strips do not)."""


def is_undefined(v: int) -> bool:
    """Whether a raw state value means "not defined" (never set or reset)."""
    return -16 < v < 0


class Canon:
    """Name -> id table shared by the streams being compared."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def id(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
        return i

    def map_decls(self, decls: Decls) -> np.ndarray:
        """Canonical id of every declaration index of ``decls`` (plus a trailing -1)."""
        return np.array([self.id(d.name) for d in decls.items] + [-1], dtype=np.int64)

    def name(self, cid: int) -> str:
        return self.names[cid] if 0 <= cid < len(self.names) else "?"


@dataclass(frozen=True)
class Clause:
    """One per-draw clause of a pipeline's contract (docs/architecture.md, "Rewrite contracts")."""

    name: str
    """``'x'``, ``'instance_data'`` or ``'draw_data'``."""
    perdraw: int
    """Root parameter of the per-draw array (-1: none declared)."""
    lift: tuple[tuple[int, int, str], ...]
    """Lift items ``(parameter, word, parameter kind)`` in record order."""
    k_bits: int = 0
    max_index: int = 0
    base: str = "none"


@dataclass
class PipeInfo:
    """Facts about one pipeline that decide what its draws observe.

    A pipeline may declare an ``x`` clause and an array clause (``instance_data`` or
    ``draw_data``): a ``DrawIndexedX`` reads its record through ``x``, any other draw
    through the array clause (docs/architecture.md). The per-draw fields below
    (``contract`` .. ``base``) describe the *primary* clause (``x`` when it applies,
    else the array clause); :meth:`for_draws` gives the view of the clause a kind of
    draw reads through. ``lift_all`` is the union of the clauses' lift items: the
    values the shader observes whichever clause delivers them.
    """

    name: str
    cid: int
    compute: bool
    layout_none: bool
    layout: str
    blend: str
    depth_test: bool
    depth_write: bool
    depth_func: str
    oi: bool
    never_merge: bool
    no_prim_id: bool
    no_vertex_id: bool
    """The shaders do not read SV_VertexID (contract ``no_vertex_id``)."""
    has_gs: bool
    contract: str | None
    """``'x'``, ``'instance_data'``, ``'draw_data'`` or None (the per-draw contract)."""
    k_bits: int
    perdraw: int
    lift: tuple[tuple[int, int, str], ...]
    """Lift items ``(parameter, word, parameter kind)``: ``P.k`` of docs/architecture.md."""
    max_index: int
    base: str
    x_ok: bool
    """The x contract applies (declared and the pipeline pulls its vertices)."""
    params: tuple[tuple[int, str, int], ...]
    """``(index, kind, constant count)`` of the root parameters the shaders read (none without ``root=``)."""
    root_cid: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    stage: int
    clauses: tuple[Clause, ...] = ()
    """The per-draw clauses that apply: ``x`` (vertex pulling only) first, then the array clause."""
    lift_all: tuple[tuple[int, int, str], ...] = ()
    """Union of the clauses' lift items (the primary clause's first)."""

    @property
    def has_perdraw(self) -> bool:
        return self.contract is not None

    @property
    def rec_words(self) -> int:
        """32-bit words of one per-draw record: base vertex, start instance, one per lift item."""
        return 2 + len(self.lift)

    @property
    def array_clause(self) -> Clause | None:
        """The ``instance_data`` / ``draw_data`` clause, if any."""
        return next((c for c in self.clauses if c.name != "x"), None)

    def for_draws(self, x: bool) -> PipeInfo:
        """The view of this pipeline for ``DrawIndexedX`` calls (``x``) or for any other
        draw: the per-draw fields are those of the clause such draws read their record
        through (``x`` for DrawIndexedX, the array clause for the others; the primary
        clause where the pipeline has only one)."""
        if len(self.clauses) < 2:
            return self
        c = next((c for c in self.clauses if (c.name == "x") == x), self.clauses[0])
        if c.name == self.contract:
            return self
        return replace(self, contract=c.name, k_bits=c.k_bits, perdraw=c.perdraw, lift=c.lift,
                       max_index=c.max_index, base=c.base)

    def lifted_words(self, p: int) -> set[int]:
        """Words of root-constants parameter ``p`` that are lift items of any clause (decoded, not state)."""
        return {k for q, k, kind in self.lift_all if q == p and kind == "constants"}

    def excluded_params(self) -> set[int]:
        """Root parameters whose whole binding is decoded rather than compared as state:
        every clause's per-draw array and lifted tables / root views (their heap / buffer
        is compared with the lifted values)."""
        if self.contract is None:
            return set()
        return {c.perdraw for c in self.clauses} | {self.perdraw} | \
            {q for q, _, kind in self.lift_all if kind != "constants"}


def _resolve(decls: Decls, canon: Canon, names: tuple[str, ...]) -> tuple[int, ...]:
    out = []
    for n in names:
        try:
            out.append(canon.id(decls.resource_of(n)))
        except (ValueError, KeyError):
            continue
    return tuple(sorted(set(out)))


def pipe_info(p: Pipeline, decls: Decls, canon: Canon) -> PipeInfo:
    """The :class:`PipeInfo` of pipeline ``p`` declared in ``decls``."""
    rs = decls[p.root] if p.root is not None and p.root in decls else None
    params: tuple[tuple[int, str, int], ...] = ()   # no root signature: no root arguments read
    if isinstance(rs, RootSig):
        # params= plus every contract clause's perdraw parameter (SPEC: observed by the pipeline's
        # draws); the declaration's own reading of its fields, as the lift lists below
        idx = p.read_params(len(rs.params))
        params = tuple((i, rs.params[i].kind, rs.params[i].count) for i in idx)
    clauses: list[Clause] = []
    # x where it applies (vertex pulling), then the array clause (instance_data governs draw_data)
    for c in (p.x_clause, p.contract.array):
        if c is None:
            continue
        pd = -1 if c.perdraw is None else c.perdraw
        lift: tuple[tuple[int, int, str], ...] = ()
        if isinstance(rs, RootSig):
            # The verifier stays independent of the passes, but not of the input format: the
            # contract is the IR's (decls.Contract), whose lift lists its one resolver reads
            # (decls.resolve_lift); it accepted this list when the stream was loaded (Decls.add).
            items, kinds = c.resolve(rs)
            lift = tuple((q, k, kind) for (q, k), kind in zip(items, kinds))
        clauses.append(Clause(c.name, pd, lift, c.vertex_bits or 0, c.max_index or 0, c.base))
    prim = clauses[0] if clauses else Clause("", 0, ())
    contract = prim.name or None
    lift_all = tuple(dict.fromkeys(it for cl in clauses for it in cl.lift))
    d = p.depth.split(",")
    return PipeInfo(
        name=p.name, cid=canon.id(p.name), compute=p.is_compute, layout_none=p.vertex_pulling,
        layout=p.layout, blend=p.blend, depth_test=p.depth_test, depth_write=p.depth_write,
        depth_func=d[0], oi=p.order_independent, never_merge=p.never_merge,
        no_prim_id=p.contract.no_primitive_id, no_vertex_id=p.contract.no_vertex_id,
        has_gs=p.gs is not None, contract=contract,
        k_bits=prim.k_bits, perdraw=prim.perdraw, lift=prim.lift, max_index=prim.max_index,
        base=prim.base, x_ok=contract == "x", params=params,
        root_cid=canon.id(p.root) if p.root else -1,
        reads=_resolve(decls, canon, p.reads), writes=_resolve(decls, canon, p.writes),
        stage=STAGE_CLASS.get(p.uav_stage or ("cs" if p.is_compute else "ps"), 2),
        clauses=tuple(clauses), lift_all=lift_all,
    )


_COMMUTING_DEPTH = ("less", "lequal", "greater", "gequal")


def commute_label(pi: PipeInfo, reorder: str, depth_cid: int) -> int:
    """Commutation class of a pipeline's writes under ``reorder`` (0 = order observable).

    Two writes of one resource commute when both carry the same non-zero label:
    ``order_independent`` pipelines (policies ``declared`` and ``opaque``), and
    under ``opaque`` also opaque, depth-tested, depth-writing draws with a
    ``less``/``lequal``/``greater``/``gequal`` test against the same depth target.
    """
    if reorder == "none":
        return 0
    if pi.oi:
        return 1
    if (reorder == "opaque" and not pi.compute and pi.blend == "opaque" and pi.depth_write
            and pi.depth_func in _COMMUTING_DEPTH and depth_cid >= 0):
        h = int(hash_cols([2, _COMMUTING_DEPTH.index(pi.depth_func), depth_cid], 1)[0])
        return (h & 0x7FFFFFFFFFFFFFFF) | 2
    return 0
