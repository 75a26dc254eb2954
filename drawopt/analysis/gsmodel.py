"""The geometry-shader subgroup / LDS model behind ``gs-plan`` (seed: gssetparameters.txt).

Pure functions of a pipeline's declared GS sizes and the planning options; no
stream access. The ``gs-plan`` pass, ``explain`` and reports use them, so the
numbers a user reads are the numbers the pass acted on. All sizes are in bytes.

The model
---------
* One primitive's **output space** is ``gs_maxverts x gs_vertsize x gs_instances``
  (the seed: all output attributes for the declared maximum number of output
  vertices, times the GS instance count).
* A subgroup of ``P`` input primitives holds ``V = ceil(P x ratio)`` unique input
  vertices, ``ratio`` being unique input vertices per primitive: the command's
  ``ratio=`` override in force, else the pipeline's ``gs_ratio``, else the
  driver's assumption of 1.
* Its LDS footprint is ``P x output + V x gs_invertsize``.
* The **budget** is the pass's ``lds_limit`` (32 KB, the driver's target),
  restricted by a ``lds=`` override in force (the seed: the LdsAllocationLimit
  can only *restrict* the 32 KB target), and never above :data:`LDS_MAX`.
* ``P`` is the largest count whose footprint fits the budget, capped by the
  hardware maxima below; ``V`` follows from ``P``. Because the plan sets both
  VerticesPerSubgroup and PrimitivesPerSubgroup explicitly, a subgroup closes at
  whichever fills first, so the footprint stays within the budget even when the
  real vertex reuse is worse than ``ratio`` (the subgroup then just holds fewer
  primitives).

Hardware maxima (GCN-class GS, as on Xbox One)
----------------------------------------------
* :data:`MAX_PRIMS_PER_SUBGROUP` = 256 primitives;
* :data:`MAX_VERTS_PER_SUBGROUP` = 256 unique input vertices (one ES thread each,
  four waves of 64);
* :data:`MAX_GS_THREADS` = 256 GS threads per threadgroup, one per primitive and
  GS instance: ``P x gs_instances <= 256``;
* :data:`LDS_MAX` = 64 KB of LDS per threadgroup.

Cost model: onchip or offchip
-----------------------------
Offchip (the driver default) writes every input vertex to the ES->GS ring in
memory and reads it back, and writes every output vertex to the GS->VS ring and
reads it back for the copy shader: up to ``2 x (output + ratio x gs_invertsize)``
bytes of memory traffic per primitive, which onchip mode saves
(:func:`offchip_bytes_per_primitive`). Onchip pins a subgroup to one CU and holds
LDS other stages want, so the plan chooses **offchip** when

1. the GS sizes are not declared (``gs_maxverts``, ``gs_vertsize`` or
   ``gs_invertsize`` is 0): there is nothing to size, the driver decides;
2. tessellation is active (the pipeline has ``hs``/``ds``): onchip GS forces the
   tessellator into always-offchip mode, in which the VS/HS threadgroups still
   hold LDS while they run *and* dump all control points to memory before the
   tessellator, so the bandwidth onchip GS saves is spent again on control
   points while LDS pressure rises (the validator flags onchip GS with
   tessellation);
3. not even one primitive's output plus its input vertices fit the budget;
4. the subgroup would hold fewer than ``min_prims`` primitives (default 32, half
   a 64-lane wave): so few threads per threadgroup, pinned to one CU, lose more
   to idle lanes and lost load balancing than the ring traffic costs;

and **onchip** otherwise.
"""

from __future__ import annotations

__all__ = [
    "LDS_DEFAULT", "LDS_MAX", "MAX_PRIMS_PER_SUBGROUP", "MAX_VERTS_PER_SUBGROUP", "MAX_GS_THREADS",
    "MIN_PRIMS_DEFAULT", "DEFAULT_RATIO", "PLAN_MODES", "REASONS", "GsParams", "GsPlan", "NULL_PARAMS",
    "primitive_output_bytes", "subgroup_vertices", "subgroup_lds_bytes", "size_subgroup",
    "offchip_bytes_per_primitive", "effective_ratio", "effective_budget", "plan_pipeline", "kept_plan",
    "format_params",
]

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from drawopt.ir.codec import bits_f32, f32_bits, format_f32
from drawopt.ir.decls import Pipeline
from drawopt.ir.ops import GS_MODES

LDS_DEFAULT = 32768
"""The driver's onchip LDS allocation target (bytes)."""
LDS_MAX = 65536
"""LDS available to one threadgroup; budgets above it are clamped."""
MAX_PRIMS_PER_SUBGROUP = 256
MAX_VERTS_PER_SUBGROUP = 256
MAX_GS_THREADS = 256
MIN_PRIMS_DEFAULT = 32
DEFAULT_RATIO = 1.0
"""The driver's assumption: one unique input vertex per input primitive."""
_RATIO_EPS = 1e-6
"""``ceil(P x ratio)`` tolerance, so that float32 ratios such as 0.1 do not round up."""

PLAN_MODES = ("auto", "keep", "offchip", "onchip")
"""``auto``: the cost model decides; ``keep``: draws the input already gave explicit
parameters keep them; ``offchip``: the driver default everywhere; ``onchip``: the
cost model without the ``min_prims`` efficiency threshold."""

REASONS = {
    "fits": "the subgroup fits the LDS budget",
    "undeclared": "the pipeline does not declare gs_maxverts, gs_vertsize and gs_invertsize",
    "tessellation": "tessellation is active: onchip GS would force it always-offchip",
    "no-fit": "one primitive's output and input vertices exceed the LDS budget",
    "small-subgroup": "the subgroup would be too small to be efficient",
    "forced-offchip": "mode=offchip",
    "kept": "explicit parameters in the input (mode=keep)",
    "nomerge": "the draw is flagged nomerge",
    "inherited": "runs in a bundle before its first GSSetParameters, under the calling list's parameters",
    "unknown": "runs after an Opaque command with no GSSetParameters since: the parameters it ran under are "
               "not known, and it keeps them",
}
"""Reason codes of a plan and what they mean."""
_KEPT_UNSEEN = ("inherited", "unknown")
"""Reasons of plans whose draws keep parameters the stream does not show."""

_MODE = {name: i for i, name in enumerate(GS_MODES)}


class GsParams(NamedTuple):
    """The stored fields of one ``GSSetParameters``: mode index (:data:`GS_MODES`),
    vps, pps, ratio (float32 bits) and lds; 0 = not overridden."""

    mode: int = 0
    vps: int = 0
    pps: int = 0
    ratio_bits: int = 0
    lds: int = 0


NULL_PARAMS = GsParams()
"""``GSSetParameters null``: the driver default (offchip, driver-computed sizes)."""


def format_params(p: GsParams) -> str:
    """The ``GSSetParameters`` command text of ``p`` (fields that are 0 left out)."""
    parts = ["GSSetParameters", GS_MODES[p.mode]]
    for key, v in (("vps", p.vps), ("pps", p.pps), ("ratio", p.ratio_bits), ("lds", p.lds)):
        if v:
            parts.append(f"{key}={format_f32(v) if key == 'ratio' else v}")
    return " ".join(parts)


def primitive_output_bytes(maxverts: int, vertsize: int, instances: int = 1) -> int:
    """One input primitive's GS output space: ``maxverts x vertsize x instances`` bytes.

    >>> primitive_output_bytes(18, 48)
    864
    """
    return int(maxverts) * int(vertsize) * max(int(instances), 1)


def subgroup_vertices(prims: int, ratio: float) -> int:
    """Unique input vertices of a subgroup of ``prims`` primitives: ``ceil(prims x ratio)``.

    At least 1 for a non-empty subgroup; computed to a 1e-6 tolerance so that
    the float32 value of a ratio such as 0.1 does not round up.

    >>> subgroup_vertices(113, 0.5)
    57
    """
    if prims <= 0:
        return 0
    return max(1, math.ceil(prims * float(ratio) - _RATIO_EPS))


def subgroup_lds_bytes(prims: int, ratio: float, out_bytes: int, invertsize: int) -> int:
    """LDS bytes of a subgroup: ``prims x out_bytes + ceil(prims x ratio) x invertsize``.

    >>> subgroup_lds_bytes(36, 1.0, 864, 32)
    32256
    """
    return int(prims) * int(out_bytes) + subgroup_vertices(prims, ratio) * int(invertsize)


def _prims_cap(instances: int) -> int:
    return min(MAX_PRIMS_PER_SUBGROUP, MAX_GS_THREADS // max(int(instances), 1))


def size_subgroup(out_bytes: int, invertsize: int, ratio: float, budget: int,
                  instances: int = 1) -> tuple[int, int, str]:
    """The largest subgroup that fits ``budget``: ``(P, V, limited_by)``.

    ``limited_by`` names the constraint that stopped ``P`` from growing:
    ``"lds"`` (the budget), ``"prims"`` (:data:`MAX_PRIMS_PER_SUBGROUP`),
    ``"threads"`` (:data:`MAX_GS_THREADS` / ``instances``) or ``"verts"``
    (:data:`MAX_VERTS_PER_SUBGROUP`). ``P == 0`` when not one primitive fits.

    >>> size_subgroup(864, 32, 1.0, 32768)
    (36, 36, 'lds')
    >>> size_subgroup(16, 16, 1.0, 32768)
    (256, 256, 'prims')
    """
    if ratio <= 0:
        raise ValueError("ratio must be > 0")
    cap = _prims_cap(instances)

    def fits(p: int) -> bool:
        return (subgroup_vertices(p, ratio) <= MAX_VERTS_PER_SUBGROUP
                and subgroup_lds_bytes(p, ratio, out_bytes, invertsize) <= budget)

    lo, hi = 0, cap  # invariant: fits(lo) (or lo == 0), P* <= hi; both terms grow with P
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    p = lo
    if p == cap:
        limited = "prims" if cap == MAX_PRIMS_PER_SUBGROUP else "threads"
    elif subgroup_vertices(p + 1, ratio) > MAX_VERTS_PER_SUBGROUP:
        limited = "verts"
    else:
        limited = "lds"
    return p, subgroup_vertices(p, ratio), limited


def offchip_bytes_per_primitive(out_bytes: int, invertsize: int, ratio: float) -> int:
    """Upper bound of the ring-buffer memory traffic offchip mode spends per primitive.

    Input vertices are written to the ES->GS ring and read back, and output
    vertices (at the declared maximum) written to the GS->VS ring and read back:
    ``2 x (out_bytes + ratio x invertsize)``, rounded up. Onchip mode saves it.

    >>> offchip_bytes_per_primitive(192, 48, 1.0)
    480
    """
    return math.ceil(2 * (int(out_bytes) + float(ratio) * int(invertsize)) - _RATIO_EPS)


def effective_ratio(declared: float, override_bits: int = 0) -> tuple[float, str]:
    """Unique input vertices per primitive and where it came from.

    The command's override (``ratio=`` of the GSSetParameters in force, float32
    bits) is the most specific and wins; then the pipeline's ``gs_ratio``; then
    the driver's assumption of 1. Returns ``(ratio, source)`` with source
    ``"command"``, ``"pipeline"`` or ``"default"``.
    """
    r = bits_f32(override_bits) if override_bits else 0.0
    if r > 0 and math.isfinite(r):
        return r, "command"
    if declared and declared > 0:
        return float(declared), "pipeline"
    return DEFAULT_RATIO, "default"


def effective_budget(lds_limit: int, override: int = 0) -> tuple[int, str]:
    """The LDS budget and where it came from.

    ``lds_limit`` is the pass option (the driver's 32 KB target by default); an
    ``lds=`` override in force restricts it (it never raises it, as the seed's
    LdsAllocationLimit only restricts the target); the result is clamped to
    :data:`LDS_MAX`. Source: ``"default"``, ``"option"`` or ``"command"``.
    """
    budget, source = int(lds_limit), ("default" if int(lds_limit) == LDS_DEFAULT else "option")
    if 0 < int(override) < budget:
        budget, source = int(override), "command"
    return min(budget, LDS_MAX), source


@dataclass(frozen=True)
class GsPlan:
    """What ``gs-plan`` decided for one GS pipeline (under one set of overrides).

    ``params`` is the state the plan wants in force for the pipeline's draws
    (:data:`NULL_PARAMS` for the driver default). ``prims`` / ``verts`` /
    ``lds_bytes`` are the subgroup the model sizes for the budget, reported even
    when the plan stays offchip (what onchip would have had).
    """

    pipeline: str
    params: GsParams
    reason: str
    budget: int = 0
    budget_source: str = "default"
    ratio: float = DEFAULT_RATIO
    ratio_source: str = "default"
    out_bytes: int = 0
    in_bytes: int = 0
    instances: int = 1
    prims: int = 0
    verts: int = 0
    lds_bytes: int = 0
    limited_by: str = ""
    saved_per_prim: int = 0
    warning: str = ""
    note: str = ""

    @property
    def onchip(self) -> bool:
        return self.params.mode == _MODE["onchip"]

    @property
    def mode(self) -> str:
        """``"onchip"`` or ``"offchip"`` (the driver default is offchip); ``"inherited"``
        for a bundle's draws under the calling list's parameters, ``"unknown"`` for draws
        under what an ``Opaque`` command left."""
        if self.reason in _KEPT_UNSEEN:
            return self.reason
        return "onchip" if self.onchip else "offchip"

    def explain(self) -> str:
        """One line for reports: the decision, the numbers, the reason."""
        head = f"{self.pipeline}: {format_params(self.params)}"
        if self.reason in _KEPT_UNSEEN:
            head = f"{self.pipeline}: ({self.reason})"
        elif self.params == NULL_PARAMS:
            head += " (driver default, offchip)"
        if self.reason in ("undeclared", "kept", "nomerge", *_KEPT_UNSEEN):
            line = f"{head}: {REASONS[self.reason]}"
            line += f"; {self.note}" if self.note else ""
            return line + (f"; warning: {self.warning}" if self.warning else "")
        sizes = (f"output {self.out_bytes} B/prim ({self.instances} instance(s)), input {self.in_bytes} B/vertex, "
                 f"ratio {_fmt_ratio(self.ratio)} ({self.ratio_source}), budget {self.budget} B "
                 f"({self.budget_source})")
        if self.prims:
            sub = (f"P={self.prims} V={self.verts} LDS {self.lds_bytes}/{self.budget} B "
                   f"(limited by {self.limited_by})")
        else:
            sub = "P=0 (not one primitive fits)"
        why = REASONS.get(self.reason, self.reason)
        if self.reason == "fits":
            why += f"; saves up to {self.saved_per_prim} B of memory traffic per primitive"
        elif self.reason == "small-subgroup":
            why += f" (P={self.prims} < min_prims)"
        line = f"{head}: {why}; {sub}; {sizes}"
        return line + (f"; warning: {self.warning}" if self.warning else "")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (the pass report's per-pipeline entry)."""
        return {
            "pipeline": self.pipeline, "mode": self.mode,
            "params": f"({self.reason})" if self.reason in _KEPT_UNSEEN else format_params(self.params),
            "reason": self.reason, "budget": self.budget, "budget_source": self.budget_source,
            "ratio": _fmt_ratio(self.ratio), "ratio_source": self.ratio_source, "out_bytes": self.out_bytes,
            "in_bytes": self.in_bytes, "instances": self.instances, "prims": self.prims, "verts": self.verts,
            "lds_bytes": self.lds_bytes, "limited_by": self.limited_by, "saved_per_prim": self.saved_per_prim,
            "warning": self.warning, "note": self.note, "explain": self.explain(),
        }


def _fmt_ratio(r: float) -> str:
    return format_f32(f32_bits(r))


def _declared(p: Pipeline) -> bool:
    return p.gs_maxverts > 0 and p.gs_vertsize > 0 and p.gs_invertsize > 0


def plan_pipeline(p: Pipeline, *, lds_limit: int = LDS_DEFAULT, min_prims: int = MIN_PRIMS_DEFAULT,
                  mode: str = "auto", ratio_bits: int = 0, lds_override: int = 0) -> GsPlan:
    """Plan the GS parameters of pipeline ``p`` (which must have a GS).

    Parameters
    ----------
    p : Pipeline
        A graphics pipeline with ``gs``.
    lds_limit : int
        The LDS budget target in bytes (the pass's ``lds_limit``).
    min_prims : int
        Efficiency threshold: fewer primitives per subgroup stay offchip
        (ignored in ``mode="onchip"``).
    mode : str
        One of :data:`PLAN_MODES`; ``"keep"`` plans like ``"auto"`` here (the pass
        decides which draws keep explicit input parameters).
    ratio_bits, lds_override : int
        The ``ratio=`` (float32 bits) and ``lds=`` fields of the GSSetParameters in
        force in the input (0 = not overridden): hints the plan honours.

    Returns
    -------
    GsPlan
        ``params`` is ``GSSetParameters onchip vps=V pps=P`` (explicit sizes, which
        bypass the driver's heuristic, so the plan is reproducible) or the driver
        default (``null``). Valid ``ratio=`` / ``lds=`` hints of the input travel
        with the plan's command (so that planning the output again gives the same
        plan): onchip, the driver then runs its heuristic with the plan's V and P
        as upper limits, which the same model reaches; offchip, the plan is
        ``GSSetParameters offchip`` with the hints, the driver default's behaviour.

    Examples
    --------
    >>> fur = Pipeline("fur", vs="v", gs="g", ps="p", gs_maxverts=6, gs_vertsize=32, gs_invertsize=48)
    >>> plan_pipeline(fur).explain().split(":")[1].strip()
    'GSSetParameters onchip vps=136 pps=136'
    """
    if p.gs is None:
        raise ValueError(f"pipeline '{p.name}' has no geometry shader")
    if mode not in PLAN_MODES:
        raise ValueError(f"mode must be one of {', '.join(PLAN_MODES)}")
    ratio, rsrc = effective_ratio(p.gs_ratio, ratio_bits)
    hint_ratio = ratio_bits if rsrc == "command" else 0
    hint_lds = int(lds_override) if int(lds_override) > 0 else 0
    default = (GsParams(_MODE["offchip"], 0, 0, hint_ratio, hint_lds) if hint_ratio or hint_lds
               else NULL_PARAMS)
    if not _declared(p):
        return GsPlan(p.name, default, "undeclared", instances=p.gs_instances)
    budget, bsrc = effective_budget(lds_limit, lds_override)
    out = primitive_output_bytes(p.gs_maxverts, p.gs_vertsize, p.gs_instances)
    prims, verts, limited = size_subgroup(out, p.gs_invertsize, ratio, budget, p.gs_instances)
    common = dict(budget=budget, budget_source=bsrc, ratio=ratio, ratio_source=rsrc, out_bytes=out,
                  in_bytes=p.gs_invertsize, instances=p.gs_instances, prims=prims, verts=verts,
                  lds_bytes=subgroup_lds_bytes(prims, ratio, out, p.gs_invertsize) if prims else 0,
                  limited_by=limited if prims else "lds",
                  saved_per_prim=offchip_bytes_per_primitive(out, p.gs_invertsize, ratio))
    if mode == "offchip":
        return GsPlan(p.name, default, "forced-offchip", **common)
    if p.tessellation:
        return GsPlan(p.name, default, "tessellation", **common)
    if prims == 0:
        return GsPlan(p.name, default, "no-fit", **common)
    if mode != "onchip" and prims < min_prims:
        return GsPlan(p.name, default, "small-subgroup", **common)
    return GsPlan(p.name, GsParams(_MODE["onchip"], verts, prims, hint_ratio, hint_lds), "fits", **common)


def kept_plan(p: Pipeline, params: GsParams, reason: str = "kept", *, lds_limit: int = LDS_DEFAULT,
              min_prims: int = MIN_PRIMS_DEFAULT) -> GsPlan:
    """The plan of draws that keep the parameters in force in the input.

    ``reason`` is ``"kept"`` (``mode="keep"`` and explicit input parameters),
    ``"nomerge"`` (a draw flagged nomerge), ``"inherited"`` (a bundle's draw
    under the calling list's parameters) or ``"unknown"`` (a draw under what an
    ``Opaque`` command left; for these two ``params`` is meaningless). The
    model's own choice is given in ``note``; onchip with tessellation active gets
    a ``warning``.
    """
    warning = ""
    if params.mode == _MODE["onchip"] and p.tessellation:
        warning = "onchip GS with tessellation active forces tessellation always-offchip"
    model = plan_pipeline(p, lds_limit=lds_limit, min_prims=min_prims, ratio_bits=params.ratio_bits,
                          lds_override=params.lds)
    note = f"the model would choose {format_params(model.params)} ({model.reason})"
    return GsPlan(p.name, params, reason, instances=p.gs_instances, warning=warning, note=note)
