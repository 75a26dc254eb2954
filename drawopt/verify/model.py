"""What the validator knows about declarations: canonical names and pipeline facts.

Both streams are read against one :class:`Canon`, which gives every declared name
one integer id, so that values of the two streams compare directly even when the
optimized stream declares more (generated buffers) or in another order.
"""

from __future__ import annotations

__all__ = [
    "Canon", "PipeInfo", "pipe_info", "NEVER", "RS_RESET", "HEAP_RESET", "X_RESET", "KIND_RESET", "OPQ_BASE",
    "is_undefined", "commute_label", "VERTS_PER_PRIM", "STAGE_CLASS",
]

from dataclasses import dataclass

import numpy as np

from ..decls import Decls, Pipeline, RootSig
from ._hash import hash_cols

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


@dataclass
class PipeInfo:
    """Facts about one pipeline that decide what its draws observe."""

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

    @property
    def has_perdraw(self) -> bool:
        return self.contract is not None

    @property
    def rec_words(self) -> int:
        """32-bit words of one per-draw record: base vertex, start instance, one per lift item."""
        return 2 + len(self.lift)

    def lifted_words(self, p: int) -> set[int]:
        """Words of root-constants parameter ``p`` that are lift items (decoded, not state)."""
        return {k for q, k, kind in self.lift if q == p and kind == "constants"}

    def excluded_params(self) -> set[int]:
        """Root parameters whose whole binding is decoded rather than compared as state:
        the per-draw array and lifted tables / root views (their heap / buffer is
        compared with the lifted values)."""
        if self.contract is None:
            return set()
        return {self.perdraw} | {q for q, _, kind in self.lift if kind != "constants"}


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
        idx = p.params if p.params is not None else tuple(range(len(rs.params)))
        params = tuple((i, rs.params[i].kind, rs.params[i].count) for i in idx if 0 <= i < len(rs.params))
    contract = None
    k_bits = perdraw = max_index = 0
    lift: tuple[tuple[int, int, str], ...] = ()
    base = "none"
    for clause in ("x", "instance_data", "draw_data"):
        c = p.contract.get(clause)
        if c is None:
            continue
        if clause == "x" and not p.vertex_pulling:
            continue
        contract = clause
        k_bits = int(c.get("vertex_bits", 0))
        perdraw = int(c.get("perdraw", -1)) if "perdraw" in c else -1
        max_index = int(c.get("max_index", 0))
        base = c.get("base", "none")
        for item in filter(None, c.get("lift", "").split("+")):
            q, _, k = item.partition(".")
            if not q.isdigit() or (k and not k.isdigit()) or int(q) >= 16 or int(k or 0) >= 64:
                continue
            kind = rs.params[int(q)].kind if isinstance(rs, RootSig) and int(q) < len(rs.params) else "constants"
            lift += ((int(q), int(k or 0), kind),)
        break
    d = p.depth.split(",")
    return PipeInfo(
        name=p.name, cid=canon.id(p.name), compute=p.is_compute, layout_none=p.vertex_pulling,
        layout=p.layout, blend=p.blend, depth_test=p.depth_test, depth_write=p.depth_write,
        depth_func=d[0], oi=p.order_independent, never_merge=p.never_merge,
        no_prim_id="no_primitive_id" in p.contract, no_vertex_id="no_vertex_id" in p.contract,
        has_gs=p.gs is not None, contract=contract,
        k_bits=k_bits, perdraw=perdraw, lift=lift, max_index=max_index,
        base=base, x_ok=contract == "x", params=params,
        root_cid=canon.id(p.root) if p.root else -1,
        reads=_resolve(decls, canon, p.reads), writes=_resolve(decls, canon, p.writes),
        stage=STAGE_CLASS.get(p.uav_stage or ("cs" if p.is_compute else "ps"), 2),
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
