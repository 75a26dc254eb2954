"""``frame``: one frame of a deferred renderer, recorded the way engines record it.

The engine modelled is a *GPU-driven-capable* one that still records one draw per
mesh section (the optimizer's job is to batch them), with a realistic mix of old
and new shaders:

* **Vertex-pulling scene shaders** (``layout=none``; a ``vertex_pulling_fraction``
  share of the draws) read everything per draw from one record
  ``[base vertex, start instance, object id, transform, material, base vertex]``
  (plus the material table's heap slot for bindless materials). The engine records
  the values as root constants (parameter 1) and the shader has two ways to get the
  record from a global array instead (docs/architecture.md, "Rewrite contracts"):
  ``x(vertex_bits=16|20,perdraw=3,lift=...)`` -- the DrawIndexedX path, draw id in
  the top bits of SV_VertexID, array at root parameter 3 -- and
  ``draw_data(perdraw=7,lift=...)`` -- the multi-draw path, record index =
  StartInstanceLocation, array at root parameter 7, which the engine leaves unbound
  (so the shader reads the root constants) until a rewrite binds one. A
  ``draw_data_fraction`` share of the materials has the multi-draw path (the others
  get ``_nodd`` pipelines with ``x`` only); the particle and smoke shaders (non-indexed,
  so no ``x``) have it too.
* **Bindless materials** (a ``bindless_fraction`` share, ``*_bindless`` pipelines):
  the shader indexes the descriptor heap with the heap slot of the material table
  (lift item ``0``), so their per-material ``SetGraphicsRootDescriptorTable`` is
  only an input to the record. Other materials bind their table and break batches.
* **Input-layout scene pipelines** (``z_il``, ``gb_il_std``, ``at_il``,
  ``tr_glass_il``, bindless variants by material): with ``il_draw_data`` (default)
  their vertex shaders read the same per-draw record by StartInstanceLocation through
  the engine's per-draw id stream, an instance-rate attribute that is their only
  instance-rate input (Unreal's primitive-id stream): ``draw_data(perdraw=7,lift=...)``,
  no ``x`` (DrawIndexedX needs vertex pulling).
* **Input-layout pipelines** without per-draw contracts: legacy materials (the
  ``gb_il_detail`` G-buffer material, scatter with per-instance transforms, GS fur
  and grass, tessellated terrain; all input-layout scene pipelines with
  ``il_draw_data=off``) and the UI.

Passes, in order (each present when its share of ``draws`` is not empty):

1. **depth prepass** into ``zbuf``: depth-only pipelines (vertex pulling, or an
   input-layout variant when ``vertex_pulling_fraction`` is low), whole meshes sorted
   front to back, so the three shared index buffers and the pipelines interleave.
   Depth only with ``less,write``: the final depth is the minimum in any order, so
   these pipelines are ``order_independent``.
2. **G-buffer pass** into ``targets`` G-buffer targets + ``zbuf``: opaque objects in
   scene order, sorted by pipeline only within buckets of 32 draws (materials stay
   interleaved; options ``sort_bucket`` and ``sort_key=state`` record it the way
   sort-key engines do instead), one draw per mesh section; per-draw root constants
   (object id, transform index, material id, base vertex); material tables through
   ``SetGraphicsRootDescriptorTable``; some instanced draws, scatter runs (consecutive
   ``start_instance``), sections sharing a material (contiguous index ranges), GS
   draws (fur onchip, grass offchip, each run bracketed by GSSetParameters and
   ``GSSetParameters null``), tessellated terrain (PATCHLIST_3), ``@nomerge`` draws;
   then the alpha-tested objects.
3. **lighting**: the G-buffer goes to SHADER_RESOURCE; one full-screen draw into ``hdr``.
4. **transparent** into ``hdr`` + ``zbuf`` (depth test, no write): glass, smoke and
   particles sorted back to front (a multi-draw call keeps the order of its draws, so
   consecutive draws of one pipeline can still batch); particles are additive and
   ``order_independent``.
5. **UI** into ``ui``: its own root signature, an input-layout alpha-blended pipeline
   pair, immediate-mode draw lists (contiguous index ranges, scissor changes).

An engine-like share of state sets is redundant (``redundancy``): the same pipeline,
table, index buffer or scissor set again, and root constants re-set with equal values.
The frame ends with the barriers that return every target to its initial state.
"""

from __future__ import annotations

__all__ = ["OPTIONS", "build"]

from dataclasses import dataclass

import numpy as np

from drawopt.gen.common import (
    DrawList,
    Option,
    Program,
    Slot,
    bool_opt,
    choice_opt,
    f32,
    float_opt,
    int_opt,
    split_budget,
)
from drawopt.gen.scene import VERTEX_STRIDE, loguniform_int, make_meshes, markov, scene_draws
from drawopt.ir.decls import Buffer, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from drawopt.ir.stream import FLAG_NOMERGE, Header, Stream

OPTIONS: tuple[Option, ...] = (
    int_opt("materials", 64, 1, 4096, "number of materials (texture tables)"),
    int_opt("meshes", 256, 1, 100_000, "number of distinct meshes"),
    int_opt("targets", 3, 1, 7, "G-buffer colour targets"),
    float_opt("vertex_pulling_fraction", 0.5, 0.0, 1.0, "share of draws using layout=none pipelines"),
    float_opt("draw_data_fraction", 1.0, 0.0, 1.0,
              "share of materials whose vertex-pulling shaders also read per-draw records by "
              "StartInstanceLocation (draw_data contract: the multi-draw path)"),
    bool_opt("il_draw_data", True,
             "input-layout scene shaders (depth, G-buffer std, alpha-tested, glass) read the per-draw record "
             "through the engine's per-draw id stream (an instance-rate attribute = StartInstanceLocation, as "
             "Unreal's primitive-id stream): draw_data contract; off = no per-draw contract (legacy)"),
    float_opt("bindless_fraction", 0.75, 0.0, 1.0,
              "share of materials whose vertex-pulling shaders index the heap with the material "
              "table's slot from the per-draw record (lift item 0)"),
    float_opt("gs_fraction", 0.03, 0.0, 0.5, "share of draws using a geometry shader"),
    float_opt("tess_fraction", 0.02, 0.0, 0.5, "share of G-buffer draws that are tessellated"),
    float_opt("redundancy", 0.15, 0.0, 1.0, "rate of redundant state re-sets"),
    float_opt("nomerge_fraction", 0.01, 0.0, 1.0, "share of opaque draws flagged @nomerge"),
    bool_opt("fast_semantics", False, "header fast_semantics"),
    # how the engine orders the G-buffer (opaque, then alpha-tested) draws it records
    int_opt("sort_bucket", 32, 0, 100_000_000,
            "G-buffer draws are sorted by sort_key only within consecutive buckets of this many draws "
            "(scene order between buckets); 0 = the whole pass is sorted (a sort-key engine)"),
    choice_opt("sort_key", "pipeline", ("pipeline", "state"),
               "what the G-buffer sort orders by: the pipeline only (materials stay interleaved), or "
               "the state a draw binds (pipeline, then index buffer, then material table)"),
    # the frame passes' shares of the draws (weights; the full-screen lighting draw is extra)
    float_opt("share_prepass", 0.18, 0.0, 1.0, "weight of the depth prepass in the draw budget"),
    float_opt("share_opaque", 0.48, 0.0, 1.0, "weight of the opaque G-buffer draws"),
    float_opt("share_alpha_tested", 0.10, 0.0, 1.0, "weight of the alpha-tested G-buffer draws"),
    float_opt("share_transparent", 0.10, 0.0, 1.0, "weight of the transparent pass (kept in back-to-front order)"),
    float_opt("share_ui", 0.14, 0.0, 1.0, "weight of the UI pass (kept in recorded order)"),
)
SHARE_OPTIONS = ("share_prepass", "share_opaque", "share_alpha_tested", "share_transparent", "share_ui")

W, H = 1920, 1080
TRIANGLELIST, PATCHLIST_3 = 4, 10
RENDER_TARGET, SHADER_RESOURCE = 1, 4

# root signature "scene"
P_MATERIAL, P_OBJECT, P_FRAME, P_PERDRAW, P_GEOMETRY, P_SAMPLERS, P_GBUFFER, P_DRAWDATA = range(8)
GEOMETRY_SLOT = 0   # res[0..2]: meshverts, transforms, particles
GBUFFER_SLOT = 3    # res[3..3+targets)
LIFT = "1.0+1.1+1.2+1.3"
"""The per-draw root constants (object id, transform, material, base vertex) a rewrite may move
into a per-draw record (``lift=P.k``: parameter P, 32-bit value k). Bindless pipelines add ``+0``:
the heap slot of the material table (root parameter 0), which their shaders index the heap with."""
_PHI = 0.6180339887498949


def material_flags(materials: int, fraction: float, salt: int) -> np.ndarray:
    """``bool[materials]``: a ``fraction`` share of the materials, spread evenly over the ids.

    A golden-ratio sequence (``frac((m + salt) * phi) < fraction``) rather than random draws, so
    the choice consumes nothing of the generator's random stream and is exact for any count.
    """
    return ((np.arange(materials, dtype=np.float64) + salt) * _PHI) % 1.0 < fraction


def perdraw_contract(vertex_bits: int | None, draw_data: bool, bindless: bool, *extra: str) -> str:
    """The contract of a vertex-pulling scene pipeline.

    ``x(vertex_bits=K,perdraw=3,lift=...)``: the DrawIndexedX path (draw id in the top bits of
    SV_VertexID, record in the array at root parameter 3). ``draw_data(perdraw=7,lift=...)``: the
    multi-draw path (record index = StartInstanceLocation, array at root parameter 7, which the
    engine leaves unbound while it records per-draw root constants, so the shader reads those).
    Both read the same record layout (same ``lift`` list).
    """
    lift = LIFT + ("+0" if bindless else "")
    parts = []
    if vertex_bits is not None:
        parts.append(f"x(vertex_bits={vertex_bits},perdraw={P_PERDRAW},lift={lift})")
    if draw_data:
        parts.append(f"draw_data(perdraw={P_DRAWDATA},lift={lift})")
    return ",".join((*parts, *extra))


@dataclass(frozen=True)
class _P:
    """A pipeline of this generator with the facts the emitter needs."""

    name: str
    pulled: bool
    x: bool
    topology: int = TRIANGLELIST
    gs: int = 0


def _vp_name(family: str, bits: int, bindless: bool, dd: bool) -> str:
    """Name of a vertex-pulling scene pipeline variant (see :func:`_pipelines`)."""
    if family == "z":
        name = f"z_pull{bits}"
    elif family == "gb":
        name = f"gb_pull{bits}_{'bindless' if bindless else 'std'}"
    elif family in ("at", "tr_glass"):
        name = f"{family}_pull{bits}" + ("_bindless" if bindless else "")
    else:  # tr_particles, tr_smoke (non-indexed, no x)
        name = family + ("_bindless" if bindless else "")
    return name + ("" if dd else "_nodd")


def _il_name(family: str, bindless: bool, dd: bool) -> str:
    """Name of an input-layout scene pipeline (``z_il``, ``gb_il_std``, ``at_il``, ``tr_glass_il``) for
    a material's bindless choice, when input-layout shaders read per-draw records (``dd``)."""
    return family + ("_bindless" if dd and bindless and family != "z_il" else "")


def _pipelines(t: int, dd_variants: tuple[bool, ...], bl_variants: tuple[bool, ...], il_dd: bool = True
               ) -> tuple[list[tuple[_P, dict]], list[dict[str, int]]]:
    """The frame's pipelines: fixed ones, the vertex-pulling scene variants for each
    ``draw_data`` (``dd_variants``) and bindless (``bl_variants``) choice in use, and the
    input-layout scene pipelines (with ``il_dd``: a ``draw_data`` clause, bindless variants)."""
    il = "pos_nrm_uv"
    scene_il = (P_MATERIAL, P_OBJECT, P_FRAME, P_GEOMETRY, P_SAMPLERS)
    zp = (P_OBJECT, P_FRAME, P_PERDRAW, P_GEOMETRY)
    gb = dict(root="scene", depth="lequal,write")
    tr = dict(root="scene", depth="less", blend="alpha")
    table: list[tuple[_P, dict]] = []
    for dd in dd_variants:
        extra = (P_DRAWDATA,) if dd else ()
        for bits in (16, 20):
            # depth only, less + write: the final depth is the minimum whatever the order
            table.append((_P(_vp_name("z", bits, False, dd), True, True),
                          dict(vs="depth_pull", root="scene", depth="less,write", params=zp + extra,
                               contract=perdraw_contract(bits, dd, False, "order_independent"))))
        for bl in bl_variants:
            scene_all = (P_MATERIAL, P_OBJECT, P_FRAME, P_PERDRAW, P_GEOMETRY, P_SAMPLERS, *extra)
            sfx = "_bindless" if bl else ""
            for bits in (16, 20):
                c = perdraw_contract(bits, dd, bl)
                table += [
                    (_P(_vp_name("gb", bits, bl, dd), True, True),
                     dict(vs="gbuf_pull", ps="gbuf_bindless" if bl else "gbuf_std", params=scene_all, contract=c,
                          **gb)),
                    (_P(_vp_name("at", bits, bl, dd), True, True),
                     dict(vs="gbuf_pull", ps="gbuf_alphatest" + sfx, params=scene_all, contract=c, **gb)),
                    (_P(_vp_name("tr_glass", bits, bl, dd), True, True),
                     dict(vs="fwd_pull", ps="glass" + sfx, params=scene_all, contract=c, **tr)),
                ]
            pp = scene_il + extra
            table += [
                (_P(_vp_name("tr_particles", 0, bl, dd), True, False),
                 dict(vs="particle_pull", ps="particle" + sfx, root="scene", depth="less", blend="additive",
                      params=pp, contract=perdraw_contract(None, dd, bl, "order_independent"))),
                (_P(_vp_name("tr_smoke", 0, bl, dd), True, False),
                 dict(vs="particle_pull", ps="smoke" + sfx, root="scene", depth="less", blend="premultiplied",
                      params=pp, contract=perdraw_contract(None, dd, bl))),
            ]
    # input-layout scene shaders: with il_dd they read the per-draw record by StartInstanceLocation
    # through the engine's per-draw id stream (their only instance-rate input), like the pulled ones
    il_extra = (P_DRAWDATA,) if il_dd else ()
    z_dd = perdraw_contract(None, il_dd, False, "no_primitive_id", "order_independent")
    table.append((_P("z_il", False, False), dict(vs="depth_il", layout=il, root="scene", depth="less,write",
                                                 params=(P_OBJECT, P_FRAME, *il_extra), contract=z_dd)))
    for bl in (bl_variants if il_dd else (False,)):
        sfx = "_bindless" if bl else ""
        c = perdraw_contract(None, il_dd, bl, "no_primitive_id")
        table += [
            (_P(_il_name("gb_il_std", bl, il_dd), False, False),
             dict(vs="gbuf_il", ps="gbuf_std" if not bl else "gbuf_bindless", layout=il,
                  params=scene_il + il_extra, contract=c, **gb)),
            (_P(_il_name("at_il", bl, il_dd), False, False),
             dict(vs="gbuf_il", ps="gbuf_alphatest" + sfx, layout=il, params=scene_il + il_extra, contract=c, **gb)),
            (_P(_il_name("tr_glass_il", bl, il_dd), False, False),
             dict(vs="fwd_il", ps="glass" + sfx, layout=il, params=scene_il + il_extra,
                  contract=perdraw_contract(None, il_dd, bl), **tr)),
        ]
    table += [
        (_P("gb_il_detail", False, False), dict(vs="gbuf_il", ps="gbuf_detail", layout=il, params=scene_il, **gb)),
        (_P("gb_il_scatter", False, False), dict(vs="gbuf_scatter", ps="gbuf_std", layout="pos_nrm_uv_xform",
                                                 params=scene_il, contract="no_primitive_id", **gb)),
        (_P("gb_gs_fur", False, False, gs=1), dict(vs="fur_vs", gs="fur_gs", ps="fur_ps", layout=il, params=scene_il,
                                                   gs_maxverts=18, gs_vertsize=48, gs_invertsize=32, **gb)),
        (_P("gb_gs_grass", False, False, gs=2), dict(vs="grass_vs", gs="grass_gs", ps="grass_ps", layout=il,
                                                     params=scene_il, gs_maxverts=12, gs_vertsize=32,
                                                     gs_instances=4, gs_invertsize=32, **gb)),
        (_P("gb_tess_terrain", False, False, topology=PATCHLIST_3),
         dict(vs="terrain_vs", hs="terrain_hs", ds="terrain_ds", ps="terrain_ps", layout=il, topology="patch",
              params=scene_il, **gb)),
        (_P("lighting", True, False), dict(vs="fullscreen", ps="deferred_light", root="scene",
                                           params=(P_FRAME, P_SAMPLERS, P_GBUFFER))),
        (_P("ui_rect", False, False), dict(vs="ui", ps="ui_rect", layout="ui_pos_uv_color", blend="alpha",
                                           root="uiroot")),
        (_P("ui_text", False, False), dict(vs="ui", ps="ui_text", layout="ui_pos_uv_color", blend="alpha",
                                           root="uiroot")),
    ]
    gs_params = [
        {},
        {"mode": 2, "vps": 64, "pps": 32, "lds": 24576},   # fur: onchip, sized by hand
        {"mode": 1},                                       # grass: offchip, driver defaults
    ]
    return table, gs_params


class _Frame:
    def __init__(self, draws: int, rng: np.random.Generator, opts: dict):
        self.rng, self.o, self.draws = rng, opts, draws
        self.prog = Program(Header(fast_semantics=opts["fast_semantics"]))
        self.lib = make_meshes(rng, opts["meshes"])
        self.t = opts["targets"]
        self.mat_slot = GBUFFER_SLOT + self.t
        self.ui_slot = self.mat_slot + 3 * opts["materials"]
        mats = opts["materials"]
        self.dd_mat = material_flags(mats, opts["draw_data_fraction"], 0)
        self.bl_mat = material_flags(mats, opts["bindless_fraction"], 7)
        self.dd_variants = tuple(v for v in (True, False) if (self.dd_mat == v).any())
        self.bl_variants = tuple(v for v in (False, True) if (self.bl_mat == v).any())

    # ------------------------------------------------------------------ decls
    def declare(self, n_objects: int, n_particles: int, n_scatter: int, ui_verts: int, ui_indices: int) -> None:
        p, o, t = self.prog, self.o, self.t
        self.lib.declare(p)
        p.declare(Buffer("transforms", max(n_objects, 1) * 64))
        p.declare(Buffer("particles", max(n_particles, 1) * 32))
        p.declare(Buffer("scatterinst", max(n_scatter, 1) * 64))
        p.declare(Buffer("frameconsts", 4096, cpu=True))
        p.declare(Buffer("perdraw", max(n_objects, 1) * 16))
        p.declare(Buffer("uivb", max(ui_verts, 1) * 20, cpu=True))
        p.declare(Buffer("uiib", max(ui_indices, 1) * 2, cpu=True))
        self.gbuf = [f"gbuffer{i}" for i in range(t)]
        fmts = ("R8G8B8A8_UNORM", "R10G10B10A2_UNORM", "R8G8B8A8_UNORM", "R16G16_FLOAT", "R11G11B10_FLOAT",
                "R8G8B8A8_UNORM", "R16G16B16A16_FLOAT")
        for i, g in enumerate(self.gbuf):
            p.declare(Target(g, W, H, fmts[i]))
        p.declare(Target("hdr", W, H, "R16G16B16A16_FLOAT"))
        p.declare(Target("ui", W, H, "R8G8B8A8_UNORM"))
        p.declare(Depth("zbuf", W, H, "D32_FLOAT"))
        mats = o["materials"]
        for m in range(mats):
            for kind, fmt in (("albedo", "BC7_UNORM"), ("normal", "BC5_UNORM"), ("orm", "BC7_UNORM")):
                p.declare(Texture(f"mat{m}_{kind}", 1024, 1024, fmt))
        for a in range(4):
            p.declare(Texture(f"atlas{a}", 2048, 2048, "R8G8B8A8_UNORM"))
        p.declare(Heap("res", "CBV_SRV_UAV", self.ui_slot + 4))
        p.declare(Heap("samp", "SAMPLER", 3))
        for i, r in enumerate(("meshverts", "transforms", "particles")):
            p.declare(View("res", GEOMETRY_SLOT + i, "srv", r))
        for i, g in enumerate(self.gbuf):
            p.declare(View("res", GBUFFER_SLOT + i, "srv", g))
        for m in range(mats):
            for k, kind in enumerate(("albedo", "normal", "orm")):
                p.declare(View("res", self.mat_slot + 3 * m + k, "srv", f"mat{m}_{kind}"))
        for a in range(4):
            p.declare(View("res", self.ui_slot + a, "srv", f"atlas{a}"))
        for s in range(3):
            p.declare(View("samp", s, "sampler"))
        p.declare(RootSig("scene", (
            RootParam("table", ranges=(("srv", 3),)), RootParam("constants", 4), RootParam("cbv"),
            RootParam("srv"), RootParam("table", ranges=(("srv", 3),)), RootParam("table", ranges=(("sampler", 2),)),
            RootParam("table", ranges=(("srv", t),)), RootParam("srv"))))
        p.declare(RootSig("uiroot", (RootParam("table", ranges=(("srv", 1),)), RootParam("constants", 4),
                                     RootParam("table", ranges=(("sampler", 1),)))))
        table, self.gs_params = _pipelines(t, self.dd_variants, self.bl_variants, self.o["il_draw_data"])
        self.pipes: dict[str, _P] = {}
        self.pidx: dict[str, int] = {}
        for info, kw in table:
            self.pidx[info.name] = p.declare(Pipeline(info.name, **kw))
            self.pipes[info.name] = info
        n = len(p.decls)
        self.topo_of = np.zeros(n, np.int64)
        self.gs_of = np.zeros(n, np.int64)
        self.pulled_of = np.zeros(n, bool)
        for name, info in self.pipes.items():
            self.topo_of[self.pidx[name]] = info.topology
            self.gs_of[self.pidx[name]] = info.gs
            self.pulled_of[self.pidx[name]] = info.pulled

    def vp(self, family: str, wide: np.ndarray | bool, material: np.ndarray) -> np.ndarray:
        """Vertex-pulling pipeline of ``family`` per draw: 16 or 20 vertex bits by ``wide``
        (R32 meshes), bindless and ``draw_data`` variants by the draw's ``material``."""
        lut = np.full((2, 2, 2), -1, np.int64)
        for w in (0, 1):
            for bl in self.bl_variants:
                for dd in self.dd_variants:
                    name = _vp_name(family, 20 if w else 16, bl and family != "z", dd)
                    lut[w, int(bl), int(dd)] = self.pidx[name]
        w = np.broadcast_to(np.asarray(wide, bool), material.shape).astype(np.int64)
        bl = self.bl_mat[material] if family != "z" else np.full(material.shape, self.bl_variants[0])
        out = lut[w, bl.astype(np.int64), self.dd_mat[material].astype(np.int64)]
        assert (out >= 0).all()
        return out

    def il(self, family: str, material: np.ndarray) -> np.ndarray:
        """Input-layout scene pipeline of ``family`` per draw (bindless variant by ``material``)."""
        dd = self.o["il_draw_data"]
        names = [_il_name(family, bool(bl), dd) for bl in (False, True)]
        lut = np.array([self.pidx.get(n, -1) for n in names], np.int64)
        out = lut[self.bl_mat[material].astype(np.int64)]
        assert (out >= 0).all()
        return out

    # ------------------------------------------------------------------ helpers
    def redundant(self, n: int) -> np.ndarray:
        return self.rng.random((4, n)) < self.o["redundancy"]

    def scene_list(self, pipeline: np.ndarray, mesh: np.ndarray, start: np.ndarray, count: np.ndarray,
                   consts: np.ndarray, table: np.ndarray | None, instances: np.ndarray,
                   start_instance: np.ndarray, flags: np.ndarray | None) -> None:
        """Emit draws of scene meshes (DrawIndexedInstanced) with their state."""
        n = pipeline.shape[0]
        if n == 0:
            return
        p, lib = self.prog, self.lib
        il = ~self.pulled_of[pipeline]
        dl = DrawList(
            n, pipeline, topology=self.topo_of[pipeline], gs=self.gs_of[pipeline], gs_params=self.gs_params,
            vertex=np.where(il, 0, -1), vertex_bindings=np.array([[0, p.ref("meshverts"), 0, VERTEX_STRIDE]]),
            index=lib.ib[mesh], index_bindings=lib.index_bindings(p),
            table=table, table_param=P_MATERIAL, constants=consts, constants_param=P_OBJECT,
            redundant=self.redundant(n), flags=flags)
        dl.emit(p, p.rows(n), "DrawIndexedInstanced", index_count=count, instance_count=instances,
                start_index=start, base_vertex=lib.base_vertex[mesh], start_instance=start_instance)

    def material_table(self, material: np.ndarray) -> np.ndarray:
        return self.prog.heapref("res", self.mat_slot + 3 * material)

    def targets(self, *names: str) -> None:
        self.prog.cmd("OMSetRenderTargets", *names)

    # ------------------------------------------------------------------ build
    def build(self) -> Stream:
        rng, o, draws, lib = self.rng, self.o, self.draws, self.lib
        n_light = 1 if draws >= 16 else 0
        shares = [o[k] for k in SHARE_OPTIONS]
        n_pre, n_op, n_at, n_tr, n_ui = (int(x) for x in split_budget(draws - n_light, shares))
        mats = o["materials"]

        # --- content ------------------------------------------------------
        opaque = scene_draws(rng, lib, n_op, mats)
        alpha = scene_draws(rng, lib, n_at, mats, first_obj=n_op, scatter_p=0.0)
        tr_kind = rng.choice(3, n_tr, p=[0.45, 0.15, 0.40])  # glass, smoke, particles
        glass = scene_draws(rng, lib, int((tr_kind == 0).sum()), mats, first_obj=n_op + n_at, scatter_p=0.0,
                            instanced_p=0.0)
        n_objects = n_op + n_at + n_tr
        n_gs = min(int(round(o["gs_fraction"] * draws)), n_op)
        if o["gs_fraction"] > 0 and n_gs == 0 and draws >= 50 and n_op > 0:
            n_gs = 1
        free = np.flatnonzero(~opaque.scatter)
        n_tess = int(round(o["tess_fraction"] * n_op))
        if o["tess_fraction"] > 0 and n_tess == 0 and n_op >= 50:
            n_tess = 1
        n_gs = min(n_gs, free.shape[0])
        n_tess = min(n_tess, free.shape[0] - n_gs)
        special = rng.choice(free, n_gs + n_tess, replace=False) if n_gs + n_tess else np.zeros(0, np.int64)
        is_gs = np.zeros(n_op, bool)
        is_tess = np.zeros(n_op, bool)
        is_gs[special[:n_gs]] = True
        is_tess[special[n_gs:]] = True

        # --- how many draws pull their vertices -----------------------------
        target = int(round(o["vertex_pulling_fraction"] * draws))
        pre_pull = min(n_pre, target)
        fixed = n_light + int((tr_kind != 0).sum())   # full-screen and particle draws always pull
        eligible = int((~opaque.scatter & ~is_gs & ~is_tess).sum()) + n_at + glass.n
        q = float(np.clip((target - pre_pull - fixed) / eligible, 0.0, 1.0)) if eligible else 0.0

        p = self.prog
        tr_quads = loguniform_int(rng, 1, 512, n_tr)
        n_particles = int(tr_quads.sum())
        ui = self.ui_content(n_ui)
        self.declare(n_objects, n_particles, int(opaque.scatter.sum()), ui["verts"], ui["indices"])

        # --- prologue -----------------------------------------------------
        p.cmd("SetDescriptorHeaps", "res", "samp")
        p.cmd("SetGraphicsRootSignature", "scene")
        p.cmd("SetGraphicsRootConstantBufferView", P_FRAME, "frameconsts", 0)
        p.cmd("SetGraphicsRootShaderResourceView", P_PERDRAW, "perdraw", 0)
        p.cmd("SetGraphicsRootDescriptorTable", P_GEOMETRY, f"res[{GEOMETRY_SLOT}]")
        p.cmd("SetGraphicsRootDescriptorTable", P_SAMPLERS, "samp[0]")
        p.cmd("RSSetViewports", 0, 0, W, H, 0, 1)
        p.cmd("RSSetScissorRects", 0, 0, W, H)
        p.cmd("OMSetBlendFactor", 1, 1, 1, 1)
        p.cmd("OMSetStencilRef", 0)

        # --- 1. depth prepass ------------------------------------------------
        if n_pre:
            if n_op:
                # the scene's objects (each once while there are enough), as whole meshes
                objs, first = np.unique(opaque.obj, return_index=True)
                pick = rng.permutation(objs.shape[0])
                if n_pre > pick.shape[0]:
                    pick = np.concatenate([pick, rng.integers(0, objs.shape[0], n_pre - pick.shape[0])])
                src = first[pick[:n_pre]]
                pre_obj, pre_mesh, pre_mat = opaque.obj[src], opaque.mesh[src], opaque.material[src]
            else:
                pre_mesh = rng.choice(lib.n, n_pre, p=lib.popularity)
                pre_obj = rng.integers(0, max(n_objects, 1), n_pre)
                pre_mat = pre_obj % mats
            order = np.argsort(rng.random(n_pre), kind="stable")  # front to back
            pre_obj, pre_mesh, pre_mat = pre_obj[order], pre_mesh[order], pre_mat[order]
            pulled = rng.permutation(n_pre) < pre_pull
            # the material's vertex shader decides the depth-only variant (draw_data or not)
            pipe = np.where(pulled, self.vp("z", lib.wide[pre_mesh], pre_mat), self.il("z_il", pre_mat))
            consts = np.stack([pre_obj, pre_obj, np.zeros(n_pre, np.int64), lib.base_vertex[pre_mesh]], axis=1)
            self.targets("zbuf")
            self.scene_list(pipe, pre_mesh, lib.mesh_start[pre_mesh], lib.mesh_count[pre_mesh], consts, None,
                            np.ones(n_pre, np.int64), np.zeros(n_pre, np.int64), None)

        # --- 2. G-buffer: opaque, then alpha-tested ---------------------------
        if n_op or n_at:
            self.targets(*self.gbuf, "zbuf")
        if n_op:
            pulled_obj = rng.random(n_op) < q
            pulled = pulled_obj[opaque.obj] & ~opaque.scatter & ~is_gs & ~is_tess
            wide = lib.wide[opaque.mesh]
            m = opaque.material
            legacy = np.where(m % 4 == 0, self.pidx["gb_il_detail"], self.il("gb_il_std", m))
            pipe = np.where(pulled, self.vp("gb", wide, m), legacy)
            pipe[opaque.scatter] = self.pidx["gb_il_scatter"]
            pipe[is_gs] = np.where(m[is_gs] % 2 == 0, self.pidx["gb_gs_fur"], self.pidx["gb_gs_grass"])
            pipe[is_tess] = self.pidx["gb_tess_terrain"]
            order = self.gbuffer_order(pipe, opaque)
            d = opaque.take(order)
            pipe = pipe[order]
            if d.scatter.any():
                p.cmd("IASetVertexBuffers", 1, "scatterinst", 0, 64)
            flags = np.where(rng.random(n_op) < o["nomerge_fraction"], FLAG_NOMERGE, 0).astype(np.uint8)
            consts = np.stack([d.obj, d.obj, d.material, lib.base_vertex[d.mesh]], axis=1)
            self.scene_list(pipe, d.mesh, lib.sec_start[d.section], lib.sec_count[d.section], consts,
                            self.material_table(d.material), d.instances, d.start_instance, flags)
        if n_at:
            if n_op and rng.random() < o["redundancy"] * 4:
                self.targets(*self.gbuf, "zbuf")  # pass set-up re-binds the same targets
            pulled_obj = rng.random(n_at) < q
            pulled = pulled_obj[alpha.obj - n_op]
            pipe = np.where(pulled, self.vp("at", lib.wide[alpha.mesh], alpha.material),
                            self.il("at_il", alpha.material))
            order = self.gbuffer_order(pipe, alpha)
            d = alpha.take(order)
            pipe = pipe[order]
            flags = np.where(rng.random(n_at) < o["nomerge_fraction"], FLAG_NOMERGE, 0).astype(np.uint8)
            consts = np.stack([d.obj, d.obj, d.material, lib.base_vertex[d.mesh]], axis=1)
            self.scene_list(pipe, d.mesh, lib.sec_start[d.section], lib.sec_count[d.section], consts,
                            self.material_table(d.material), d.instances, d.start_instance, flags)

        # --- 3. lighting --------------------------------------------------
        for g in self.gbuf:
            p.cmd("ResourceBarrier", g, "RENDER_TARGET", "SHADER_RESOURCE")
        if n_light:
            self.targets("hdr")
            p.cmd("SetPipelineState", "lighting")
            p.cmd("SetGraphicsRootDescriptorTable", P_GBUFFER, f"res[{GBUFFER_SLOT}]")
            p.cmd("IASetPrimitiveTopology", "TRIANGLELIST")
            p.cmd("DrawInstanced", 3, 1, 0, 0)

        # --- 4. transparent, back to front ---------------------------------
        if n_tr:
            self.transparent(tr_kind, tr_quads, glass, q, n_op + n_at)
        p.cmd("ResourceBarrier", "hdr", "RENDER_TARGET", "SHADER_RESOURCE")

        # --- 5. UI ------------------------------------------------------------
        if n_ui:
            self.ui_pass(ui)

        # --- epilogue: targets back to their initial states ------------------
        p.cmd("ResourceBarrier", "hdr", "SHADER_RESOURCE", "RENDER_TARGET")
        for g in self.gbuf:
            p.cmd("ResourceBarrier", g, "SHADER_RESOURCE", "RENDER_TARGET")
        return p.build()

    def gbuffer_order(self, pipe: np.ndarray, d) -> np.ndarray:
        """The recorded order of G-buffer draws ``d`` (pipelines ``pipe``): ``sort_key`` sorted
        within buckets of ``sort_bucket`` draws (0: one bucket), stable."""
        n = pipe.shape[0]
        key = pipe.astype(np.int64)
        if self.o["sort_key"] == "state":
            n_ib, mats = int(self.lib.ib.max(initial=0)) + 1, self.o["materials"]
            key = (key * n_ib + self.lib.ib[d.mesh]) * mats + d.material
        return _bucket_sort(key, self.o["sort_bucket"] or max(n, 1))

    def transparent(self, kind: np.ndarray, quads: np.ndarray, glass, q: float, first_obj: int) -> None:
        rng, lib, p = self.rng, self.lib, self.prog
        n = kind.shape[0]
        self.targets("hdr", "zbuf")
        gi = np.flatnonzero(kind == 0)
        pulled = rng.random(gi.size) < q
        mats = self.o["materials"]
        material = markov(rng, rng.integers(0, mats, n), 0.2)
        obj = first_obj + np.arange(n, dtype=np.int64)
        mesh = np.zeros(n, np.int64)
        section = np.zeros(n, np.int64)
        if gi.size:
            mesh[gi], section[gi], material[gi] = glass.mesh, glass.section, glass.material
        pipe = np.where(kind == 1, self.vp("tr_smoke", False, material), self.vp("tr_particles", False, material))
        if gi.size:
            pipe[gi] = np.where(pulled, self.vp("tr_glass", lib.wide[glass.mesh], glass.material),
                                self.il("tr_glass_il", glass.material))
        first_quad = np.zeros(n, np.int64)
        np.cumsum(quads[:-1], out=first_quad[1:])
        order = np.argsort(-rng.random(n), kind="stable")  # back to front
        kind, pipe, material, obj, mesh, section = (a[order] for a in (kind, pipe, material, obj, mesh, section))
        quads, first_quad = quads[order], first_quad[order]
        indexed = kind == 0
        base_vertex = np.where(indexed, lib.base_vertex[mesh], 0)
        consts = np.stack([obj, obj, material, base_vertex], axis=1)
        il = ~self.pulled_of[pipe]
        rows = p.rows(n)
        dl = DrawList(
            n, pipe, topology=self.topo_of[pipe],
            vertex=np.where(il, 0, -1), vertex_bindings=np.array([[0, p.ref("meshverts"), 0, VERTEX_STRIDE]]),
            index=np.where(indexed, lib.ib[mesh], -1), index_bindings=lib.index_bindings(p),
            table=self.material_table(material), table_param=P_MATERIAL, constants=consts, constants_param=P_OBJECT,
            redundant=self.redundant(n))
        ii, ni = np.flatnonzero(indexed), np.flatnonzero(~indexed)
        dl.emit(p, rows, None)
        p.emit("DrawIndexedInstanced", rows[ii], Slot.DRAW, index_count=lib.sec_count[section[ii]], instance_count=1,
               start_index=lib.sec_start[section[ii]], base_vertex=base_vertex[ii], start_instance=0)
        p.emit("DrawInstanced", rows[ni], Slot.DRAW, vertex_count=6 * quads[ni], instance_count=1,
               start_vertex=6 * first_quad[ni], start_instance=0)

    # ------------------------------------------------------------------ UI
    def ui_content(self, n: int) -> dict:
        rng = self.rng
        sizes = rng.integers(10, 201, max(n, 1))
        ends = np.cumsum(sizes)
        k = int(np.searchsorted(ends, n)) + 1 if n else 0
        sizes = sizes[:k].copy()
        if k:
            sizes[-1] -= int(ends[k - 1]) - n
        win = np.repeat(np.arange(k), sizes)
        text = rng.random(n) < 0.45
        glyphs = np.where(text, rng.integers(1, 49, n), rng.integers(1, 5, n))
        verts = 4 * glyphs
        idx = 6 * glyphs
        start_index = np.zeros(n, np.int64)
        np.cumsum(idx[:-1], out=start_index[1:])
        first = np.zeros(k, np.int64)
        np.cumsum(sizes[:-1], out=first[1:])
        win_verts = np.add.reduceat(verts, first) if n else np.zeros(0, np.int64)
        win_base = np.zeros(k, np.int64)
        np.cumsum(win_verts[:-1], out=win_base[1:])
        # window rectangles, and a nested clip rectangle for 10% of the draws
        x0 = rng.integers(0, W - 256, k)
        y0 = rng.integers(0, H - 128, k)
        x1 = np.minimum(x0 + rng.integers(128, 900, k), W)
        y1 = np.minimum(y0 + rng.integers(64, 700, k), H)
        rects = np.stack([x0, y0, x1, y1], axis=1)
        inner = rects + np.array([8, 24, -8, -8])
        inner[:, 2] = np.maximum(inner[:, 2], inner[:, 0] + 1)
        inner[:, 3] = np.maximum(inner[:, 3], inner[:, 1] + 1)
        scissors = np.concatenate([rects, inner]) if k else np.zeros((0, 4), np.int64)
        scissor = win + np.where(rng.random(n) < 0.1, k, 0)
        atlas = np.where(text, 0, rng.integers(1, 4, n))
        return dict(n=n, text=text, idx=idx, start_index=start_index, base_vertex=win_base[win] if n else win,
                    scissors=scissors, scissor=scissor, atlas=atlas, verts=int(verts.sum()),
                    indices=int(idx.sum()))

    def ui_pass(self, ui: dict) -> None:
        p, n = self.prog, ui["n"]
        self.targets("ui")
        p.cmd("SetGraphicsRootSignature", "uiroot")
        p.cmd("SetGraphicsRootDescriptorTable", 2, "samp[2]")
        p.cmd("SetGraphicsRoot32BitConstants", 1, 4, *(f32(v) for v in (2.0 / W, -2.0 / H, -1.0, 1.0)))
        p.cmd("IASetVertexBuffers", 0, "uivb", 0, 20)
        p.cmd("IASetIndexBuffer", "uiib", "R16_UINT", 0)
        pipe = np.where(ui["text"], self.pidx["ui_text"], self.pidx["ui_rect"])
        dl = DrawList(n, pipe, topology=np.full(n, TRIANGLELIST),
                      table=p.heapref("res", self.ui_slot + ui["atlas"]), table_param=0,
                      scissor=ui["scissor"], scissors=ui["scissors"], redundant=self.redundant(n))
        dl.emit(p, p.rows(n), "DrawIndexedInstanced", index_count=ui["idx"], instance_count=1,
                start_index=ui["start_index"], base_vertex=ui["base_vertex"], start_instance=0)


def _bucket_sort(key: np.ndarray, bucket: int) -> np.ndarray:
    """Order that sorts by ``key`` only within consecutive buckets of ``bucket`` draws."""
    n = key.shape[0]
    k = (np.arange(n, dtype=np.int64) // bucket) * (int(key.max(initial=0)) + 1) + key
    return np.argsort(k, kind="stable")


def build(draws: int, rng: np.random.Generator, **opts) -> Stream:
    """The ``frame`` stream with ``draws`` logical draws (options: :data:`OPTIONS`)."""
    return _Frame(draws, rng, opts).build()

