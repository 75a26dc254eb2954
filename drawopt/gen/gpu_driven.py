"""``gpu-driven``: a GPU-driven renderer: GPU culling writes the draws' arguments.

Graphics context (``context=graphics``, the default), in submission order:

* **static geometry** drawn from CPU-written args (``cpuargs``, declared ``cpu``
  with real ``D3D12_DRAW_INDEXED_ARGUMENTS`` records at a 32-byte stride): a run of
  single ``DrawIndexedInstancedIndirect`` at a fixed stride with no state between
  them (an MDI merge), then a run with per-draw root constants in between;
* **two culling phases** (two-phase occlusion culling): a compute pipeline per phase
  ``Dispatch``-es and writes that phase's indexed args (stride 20), non-indexed args
  (stride 16) and per-bucket counts; a second compute pipeline writes compacted
  index data (``cullib<p>``) for the triangle-culled buckets. All are ``frontend``
  buffers. The material buckets are then drawn, each in one of six forms:
  ``MultiDrawIndexedInstancedIndirect``, its ``Auto`` variant (GPU count),
  ``MultiDrawInstancedIndirect``, its ``Auto`` variant, or a run of single
  ``DrawIndexedInstancedIndirect`` / ``DrawInstancedIndirect`` at the record stride;
* **occlusion** (PS writer): bounding boxes drawn depth-only by a pipeline whose pixel
  shader writes args (``uav_stage=ps``), then single indexed indirect draws of them;
* **particles** (VS writer, ``uav_stage=vs``) and **debris** (GS writer,
  ``uav_stage=gs``): emitters write args, then indirect draws read them.

``flushes=correct`` puts exactly the seed's sequence between each group of writers
and its readers: after a CS writer ``GpuSendPipelinedEvent CS_PARTIAL_FLUSH`` (only
when fast semantics is on or CSEnableAutomaticGpuFlush(FALSE) is in force) then
``FlushGpuCacheRange DEFAULT_PFP``; after a VS/GS writer ``VS_PARTIAL_FLUSH`` + L2
flush; after a PS writer ``PS_PARTIAL_FLUSH`` + L2 flush. ``missing`` drops all or
part of the sequence for about half of the writer groups, always including the
first (on the compute context: the last);
``redundant`` adds flushes that cover nothing (a repeated L2 flush after every
sequence, an unneeded CS_PARTIAL_FLUSH, a sequence before the static draws).
``auto_gpu_flush=off`` starts with CSEnableAutomaticGpuFlush(FALSE) in force (header);
``toggle`` issues ``CSEnableAutomaticGpuFlush FALSE`` before the second phase.

Async compute (``context=compute``): the culling phases only (plus a light-culling
Dispatch that writes a non-frontend buffer), each frontend writer group followed by
``FlushGpuCachesBottomOfPipe DEFAULT``; ``draws`` is then the number of args records
the dispatches produce (the stream itself holds no draw). Each culling phase passes
``(phase, first bucket, buckets, records)`` in its root constants.
"""

from __future__ import annotations

__all__ = ["OPTIONS", "build"]

import numpy as np

from drawopt.gen.common import Option, Program, Slot, bool_opt, choice_opt, int_opt, split_budget
from drawopt.gen.scene import make_meshes
from drawopt.ir.decls import Buffer, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from drawopt.ir.stream import Header, Stream

OPTIONS: tuple[Option, ...] = (
    choice_opt("context", "graphics", ("graphics", "compute"), "graphics list, or the async compute list"),
    bool_opt("fast_semantics", False, "header fast_semantics (a CS writer then needs CS_PARTIAL_FLUSH)"),
    choice_opt("auto_gpu_flush", "on", ("on", "off", "toggle"),
               "CSEnableAutomaticGpuFlush: on, off from the start, or turned off before phase 2"),
    choice_opt("flushes", "correct", ("correct", "missing", "redundant"), "the flushes between writers and readers"),
    int_opt("materials", 16, 1, 4096, "material buckets"),
    int_opt("meshes", 128, 1, 100_000, "distinct meshes"),
)

W, H = 1920, 1080
IDX, PLAIN = 20, 16        # bytes of an indexed / non-indexed args record
CPU_STRIDE = 32            # CPU records: 5 args words, draw id, 2 words padding
FORMS = ("mdi", "mdi_auto", "mdi_plain", "mdi_plain_auto", "singles", "singles_plain")
INDEXED_FORMS = ("mdi", "mdi_auto", "singles")
CS_PARTIAL, VS_PARTIAL, PS_PARTIAL = "CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH"


class _Gen:
    def __init__(self, draws: int, rng: np.random.Generator, o: dict):
        self.rng, self.o, self.draws = rng, o, draws
        self.graphics = o["context"] == "graphics"
        self.auto = o["auto_gpu_flush"] != "off"
        self.p = Program(Header(context=o["context"], fast_semantics=o["fast_semantics"], auto_gpu_flush=self.auto))
        self.group = 0          # writer groups so far (for flushes=missing)
        self.skip = set()       # writer groups whose flushes are dropped

    # ------------------------------------------------------------------ flushes
    def flush_after(self, stage: str) -> None:
        """The flush sequence after a group of writers of ``stage`` (cs, vs, ps, async)."""
        p, mode = self.p, self.o["flushes"]
        g = self.group
        self.group += 1
        if stage == "async":
            seq = [("FlushGpuCachesBottomOfPipe", "DEFAULT")]
        else:
            seq = []
            if stage == "cs":
                if self.o["fast_semantics"] or not self.auto:
                    seq.append(("GpuSendPipelinedEvent", CS_PARTIAL))
            else:
                seq.append(("GpuSendPipelinedEvent", VS_PARTIAL if stage == "vs" else PS_PARTIAL))
            seq.append(("FlushGpuCacheRange", "DEFAULT_PFP"))
        if mode == "missing" and g in self.skip:
            variant = g % 3 if len(seq) > 1 else 0
            seq = [] if variant == 0 else ([seq[1]] if variant == 1 else [seq[0]])
        if mode == "redundant":
            if stage == "cs" and len(seq) == 1:
                seq.insert(0, ("GpuSendPipelinedEvent", CS_PARTIAL))  # not needed here
            seq.append(seq[-1])  # a second L2 flush covers nothing
        for name, arg in seq:
            p.cmd(name, arg)

    # ------------------------------------------------------------------ decls
    def declare(self, phases: list[dict], n_occ: int, n_part: int, n_debris: int, cpu_data: np.ndarray,
                n_inst: int) -> None:
        p, lib = self.p, self.lib
        mats = self.o["materials"]
        p.declare(Buffer("meshverts", max(int(lib.vcount.sum()), 1) * 32))
        p.declare(Buffer("meshib", max(int(self.mesh_count.sum()), 1) * 4))
        p.declare(Buffer("instances", max(n_inst, 1) * 64))
        p.declare(Buffer("lightgrid", 120 * 68 * 64))
        for ph in phases:
            i = ph["index"]
            p.declare(Buffer(f"args{i}", max(ph["idx_records"], 1) * IDX, frontend=True))
            p.declare(Buffer(f"argsn{i}", max(ph["plain_records"], 1) * PLAIN, frontend=True))
            p.declare(Buffer(f"counts{i}", max(len(ph["buckets"]), 1) * 4, frontend=True))
            p.declare(Buffer(f"cullib{i}", max(ph["tri_records"], 1) * 64 * 3 * 4, frontend=True))
        if self.graphics:
            p.declare(Buffer("occargs", max(n_occ, 1) * IDX, frontend=True))
            p.declare(Buffer("partargs", max(n_part, 1) * PLAIN, frontend=True))
            p.declare(Buffer("debrisargs", max(n_debris, 1) * PLAIN, frontend=True))
            p.declare(Buffer("particles", 1 << 20))
            p.declare(Buffer("cpuargs", max(cpu_data.size * 4, CPU_STRIDE), cpu=True,
                             data=cpu_data if cpu_data.size else None))
            p.declare(Target("gbuffer0", W, H, "R8G8B8A8_UNORM"))
            p.declare(Depth("zbuf", W, H, "D32_FLOAT"))
            for m in range(mats):
                p.declare(Texture(f"mat{m}_albedo", 1024, 1024, "BC7_UNORM"))
                p.declare(Texture(f"mat{m}_normal", 1024, 1024, "BC5_UNORM"))
        # heap: 0..2 geometry srvs; 3 + 4p.. phase uavs; then lightgrid and the writer uavs; materials
        self.uav_slot = 3
        self.writer_slot = 3 + 4 * len(phases)
        self.mat_slot = self.writer_slot + 4
        size = self.mat_slot + (2 * mats if self.graphics else 0)
        p.declare(Heap("res", "CBV_SRV_UAV", size))
        for k, r in enumerate(("meshverts", "instances", "meshib")):
            p.declare(View("res", k, "srv", r))
        for ph in phases:
            i = ph["index"]
            for k, r in enumerate((f"args{i}", f"argsn{i}", f"counts{i}", f"cullib{i}")):
                p.declare(View("res", self.uav_slot + 4 * i + k, "uav", r))
        writers = ("lightgrid", "occargs", "partargs", "debrisargs") if self.graphics else ("lightgrid",)
        for k, r in enumerate(writers):
            p.declare(View("res", self.writer_slot + k, "uav", r))
        if self.graphics:
            for m in range(mats):
                p.declare(View("res", self.mat_slot + 2 * m, "srv", f"mat{m}_albedo"))
                p.declare(View("res", self.mat_slot + 2 * m + 1, "srv", f"mat{m}_normal"))
        p.declare(RootSig("cullroot", (RootParam("table", ranges=(("uav", 4),)), RootParam("constants", 4),
                                       RootParam("table", ranges=(("srv", 3),)))))
        for ph in phases:
            i = ph["index"]
            p.declare(Pipeline(f"cull_instances{i}", cs="cull_instances", root="cullroot",
                               writes=(f"args{i}", f"argsn{i}", f"counts{i}")))
            p.declare(Pipeline(f"cull_triangles{i}", cs="cull_triangles", root="cullroot", writes=(f"cullib{i}",)))
        p.declare(Pipeline("light_cull", cs="light_cull", root="cullroot", writes=("lightgrid",)))
        if self.graphics:
            p.declare(RootSig("gfx", (RootParam("table", ranges=(("srv", 2),)), RootParam("constants", 4),
                                      RootParam("table", ranges=(("srv", 3),)),
                                      RootParam("table", ranges=(("uav", 1),)))))
            opaque = dict(root="gfx", depth="lequal,write", params=(0, 1, 2))
            p.declare(Pipeline("gd_opaque", vs="gd_pull", ps="gd_lit", **opaque))
            p.declare(Pipeline("gd_masked", vs="gd_pull", ps="gd_lit_masked", **opaque))
            p.declare(Pipeline("gd_impostor", vs="impostor", ps="impostor", **opaque))
            p.declare(Pipeline("static_il", vs="static_il", ps="gd_lit", layout="pos_nrm_uv", **opaque))
            p.declare(Pipeline("occlusion", vs="bbox", ps="occlusion_test", root="gfx", depth="lequal",
                               params=(1, 2, 3), writes=("occargs",), uav_stage="ps"))
            p.declare(Pipeline("particle_emit", vs="particle_emit", root="gfx", topology="point",
                               params=(1, 2, 3), writes=("partargs",), uav_stage="vs"))
            p.declare(Pipeline("debris_emit", vs="debris_vs", gs="debris_gs", root="gfx", topology="point",
                               params=(1, 2, 3), writes=("debrisargs",), uav_stage="gs",
                               gs_maxverts=1, gs_vertsize=16))
            p.declare(Pipeline("particle_draw", vs="particle", ps="particle", root="gfx", depth="less",
                               blend="additive", params=(0, 1, 2), reads=("particles",),
                               contract="order_independent"))

    # ------------------------------------------------------------------ content
    def plan(self) -> tuple[list[dict], int, int, int, int]:
        rng, o, draws = self.rng, self.o, self.draws
        if self.graphics:
            culled, occ, part, debris, cpu = (int(x) for x in split_budget(
                draws, (0.70, 0.10, 0.05, 0.02, 0.13), minimum=(1, 2, 2, 2, 1)))
        else:
            culled, occ, part, debris, cpu = draws, 0, 0, 0, 0
        nb = min(o["materials"], max(culled, 1))
        sizes = split_budget(culled, rng.integers(30, 101, nb))
        buckets = np.flatnonzero(sizes > 0)
        forms = rng.permutation(buckets.shape[0]) % len(FORMS)
        nph = 2 if buckets.shape[0] >= 2 else 1
        split = (buckets.shape[0] + 1) // 2 if nph == 2 else buckets.shape[0]
        phases = []
        for i, sel in enumerate((slice(0, split), slice(split, None))[:nph]):
            bs = buckets[sel]
            fs = [FORMS[f] for f in forms[sel]]
            recs = sizes[bs]
            indexed = np.array([f in INDEXED_FORMS for f in fs], bool)
            tri = indexed & (rng.random(bs.shape[0]) < 0.5)
            off_i = np.zeros(bs.shape[0], np.int64)
            off_p = np.zeros(bs.shape[0], np.int64)
            if bs.shape[0]:
                ri = np.where(indexed, recs, 0)
                rp = np.where(indexed, 0, recs)
                off_i[1:] = np.cumsum(ri)[:-1]
                off_p[1:] = np.cumsum(rp)[:-1]
            phases.append(dict(index=i, buckets=bs, forms=fs, records=recs, indexed=indexed, tri=tri,
                               off_i=off_i, off_p=off_p, idx_records=int(recs[indexed].sum()),
                               plain_records=int(recs[~indexed].sum()), tri_records=int(recs[tri].sum())))
        return phases, occ, part, debris, cpu

    def cpu_records(self, n: int) -> np.ndarray:
        rng = self.rng
        mesh = rng.choice(self.lib.n, n, p=self.lib.popularity)
        rec = np.zeros((n, CPU_STRIDE // 4), np.int64)
        rec[:, 0] = self.mesh_count[mesh]
        rec[:, 1] = np.where(rng.random(n) < 0.1, rng.integers(2, 17, n), 1)
        rec[:, 2] = self.mesh_start[mesh]
        rec[:, 3] = self.lib.base_vertex[mesh]
        rec[:, 4] = np.arange(n)          # StartInstanceLocation = draw id
        rec[:, 5] = np.arange(n)          # draw id for the shader
        return rec.reshape(-1)

    # ------------------------------------------------------------------ build
    def build(self) -> Stream:
        rng, o, p = self.rng, self.o, self.p
        self.lib = make_meshes(rng, o["meshes"])
        self.mesh_count = self.lib.mesh_count
        self.mesh_start = np.zeros(self.lib.n, np.int64)
        self.mesh_start[1:] = np.cumsum(self.mesh_count)[:-1]
        phases, occ, part, debris, cpu = self.plan()
        cpu_data = self.cpu_records(cpu) if cpu else np.zeros(0, np.int64)
        self.declare(phases, max(occ - 1, 0), max(part - 1, 0), max(debris - 1, 0), cpu_data, self.draws)
        # flushes=missing: about half the writer groups lose (part of) their flushes, and always
        # one whose omission is visible: the first on graphics (its readers follow), the last on
        # async compute (a later bottom-of-pipe flush would cover the earlier ones)
        n_groups = len(phases) + (3 if self.graphics else 0)
        self.skip = {g for g in range(n_groups) if rng.random() < 0.5}
        self.skip.add(0 if self.graphics else n_groups - 1)

        p.cmd("SetDescriptorHeaps", "res")
        p.cmd("SetComputeRootSignature", "cullroot")
        p.cmd("SetComputeRootDescriptorTable", 2, "res[0]")
        if self.graphics:
            p.cmd("SetGraphicsRootSignature", "gfx")
            p.cmd("SetGraphicsRootDescriptorTable", 2, "res[0]")
            p.cmd("OMSetRenderTargets", "gbuffer0", "zbuf")
            p.cmd("RSSetViewports", 0, 0, W, H, 0, 1)
            p.cmd("RSSetScissorRects", 0, 0, W, H)
            p.cmd("OMSetBlendFactor", 1, 1, 1, 1)
            p.cmd("OMSetStencilRef", 0)
            p.cmd("IASetPrimitiveTopology", "TRIANGLELIST")
            if cpu:
                if o["flushes"] == "redundant":
                    p.cmd("GpuSendPipelinedEvent", CS_PARTIAL)
                    p.cmd("FlushGpuCacheRange", "DEFAULT_PFP")
                self.cpu_draws(cpu)
        for ph in phases:
            if ph["index"] == 1 and o["auto_gpu_flush"] == "toggle" and self.graphics:
                p.cmd("CSEnableAutomaticGpuFlush", "FALSE")
                self.auto = False
            self.cull_phase(ph)
        if self.graphics:
            if occ >= 2:
                self.occlusion(occ - 1)
            if part >= 2:
                self.emitters("particle_emit", "partargs", 2, part - 1, "vs", multi=True)
            if debris >= 2:
                self.emitters("debris_emit", "debrisargs", 3, debris - 1, "vs", multi=False)
        return p.build()

    def cpu_draws(self, n: int) -> None:
        p, rng = self.p, self.rng
        p.cmd("SetPipelineState", "static_il")
        p.cmd("IASetVertexBuffers", 0, "meshverts", 0, 32)
        p.cmd("IASetIndexBuffer", "meshib", "R32_UINT", 0)
        p.cmd("SetGraphicsRootDescriptorTable", 0, f"res[{self.mat_slot}]")
        p.cmd("SetGraphicsRoot32BitConstants", 1, 4, 0, 0, 0, 0)
        a = (n * 3 + 4) // 5
        rows = p.rows(n)
        j = np.arange(n, dtype=np.int64)
        p.emit("DrawIndexedInstancedIndirect", rows, Slot.DRAW, args_buffer=p.ref("cpuargs"), offset=j * CPU_STRIDE)
        # the second run sets a per-draw constant (object flags) before each draw
        b = rows[a:]
        consts = np.stack([j[a:], rng.integers(0, 4, n - a), np.zeros(n - a, np.int64), np.zeros(n - a, np.int64)], 1)
        p.emit("SetGraphicsRoot32BitConstants", b, Slot.CONSTANTS, var=consts, index=1, count=4)

    def cull_phase(self, ph: dict) -> None:
        p, i = self.p, ph["index"]
        recs = int(ph["records"].sum())
        p.cmd("SetPipelineState", f"cull_instances{i}")
        p.cmd("SetComputeRootDescriptorTable", 0, f"res[{self.uav_slot + 4 * i}]")
        first = int(ph["buckets"][0]) if ph["buckets"].shape[0] else 0
        p.cmd("SetComputeRoot32BitConstants", 1, 4, i, first, int(ph["buckets"].shape[0]), recs)
        p.cmd("Dispatch", max((recs + 63) // 64, 1), 1, 1)
        if ph["tri_records"]:
            p.cmd("SetPipelineState", f"cull_triangles{i}")
            p.cmd("Dispatch", max((ph["tri_records"] * 64 + 255) // 256, 1), 1, 1)
        self.flush_after("cs" if self.graphics else "async")
        if not self.graphics:
            if i == 0:
                p.cmd("SetPipelineState", "light_cull")
                p.cmd("SetComputeRootDescriptorTable", 0, f"res[{self.writer_slot}]")
                p.cmd("Dispatch", 120, 68, 1)
                if self.o["flushes"] == "redundant":
                    p.cmd("FlushGpuCachesBottomOfPipe", "DEFAULT")  # lightgrid is not a front-end buffer
            return
        last = None
        for k, b in enumerate(ph["buckets"]):
            form, r = ph["forms"][k], int(ph["records"][k])
            indexed = form in INDEXED_FORMS
            pipe = ("gd_masked" if b % 3 == 0 else "gd_opaque") if indexed else "gd_impostor"
            if pipe != last:
                p.cmd("SetPipelineState", pipe)
                last = pipe
            p.cmd("SetGraphicsRootDescriptorTable", 0, f"res[{self.mat_slot + 2 * int(b)}]")
            p.cmd("SetGraphicsRoot32BitConstants", 1, 4, int(b), i, 0, 0)
            args = f"args{i}" if indexed else f"argsn{i}"
            stride = IDX if indexed else PLAIN
            off = int(ph["off_i"][k] if indexed else ph["off_p"][k]) * stride
            if indexed:
                ib = f"cullib{i}" if ph["tri"][k] else "meshib"
                p.cmd("IASetIndexBuffer", ib, "R32_UINT", 0)
            if form in ("mdi", "mdi_plain"):
                name = "MultiDrawIndexedInstancedIndirect" if indexed else "MultiDrawInstancedIndirect"
                p.cmd(name, r, args, off, stride)
            elif form in ("mdi_auto", "mdi_plain_auto"):
                name = "MultiDrawIndexedInstancedIndirectAuto" if indexed else "MultiDrawInstancedIndirectAuto"
                p.cmd(name, f"counts{i}", 4 * k, r, args, off, stride)
            else:
                name = "DrawIndexedInstancedIndirect" if indexed else "DrawInstancedIndirect"
                rows = p.rows(r)
                p.emit(name, rows, Slot.DRAW, args_buffer=p.ref(args), offset=off + stride * np.arange(r))

    def occlusion(self, k: int) -> None:
        p = self.p
        p.cmd("OMSetRenderTargets", "zbuf")
        p.cmd("SetPipelineState", "occlusion")
        p.cmd("SetGraphicsRootDescriptorTable", 3, f"res[{self.writer_slot + 1}]")
        p.cmd("SetGraphicsRoot32BitConstants", 1, 4, 0, k, 0, 0)
        p.cmd("DrawInstanced", 36, k, 0, 0)
        self.flush_after("ps")
        p.cmd("OMSetRenderTargets", "gbuffer0", "zbuf")
        p.cmd("SetPipelineState", "gd_opaque")
        p.cmd("SetGraphicsRootDescriptorTable", 0, f"res[{self.mat_slot}]")
        p.cmd("IASetIndexBuffer", "meshib", "R32_UINT", 0)
        p.emit("DrawIndexedInstancedIndirect", p.rows(k), Slot.DRAW, args_buffer=p.ref("occargs"),
               offset=IDX * np.arange(k))

    def emitters(self, pipe: str, args: str, slot: int, k: int, stage: str, multi: bool) -> None:
        p = self.p
        p.cmd("SetPipelineState", pipe)
        p.cmd("IASetPrimitiveTopology", "POINTLIST")
        p.cmd("SetGraphicsRootDescriptorTable", 3, f"res[{self.writer_slot + slot}]")
        p.cmd("SetGraphicsRoot32BitConstants", 1, 4, slot, k, 0, 0)
        p.cmd("DrawInstanced", k, 1, 0, 0)
        self.flush_after(stage)
        p.cmd("IASetPrimitiveTopology", "TRIANGLELIST")
        p.cmd("SetPipelineState", "particle_draw")
        p.cmd("SetGraphicsRootDescriptorTable", 0, f"res[{self.mat_slot}]")
        if multi:
            p.cmd("MultiDrawInstancedIndirect", k, args, 0, PLAIN)
        else:
            p.emit("DrawInstancedIndirect", p.rows(k), Slot.DRAW, args_buffer=p.ref(args),
                   offset=PLAIN * np.arange(k))


def build(draws: int, rng: np.random.Generator, **opts) -> Stream:
    """The ``gpu-driven`` stream (options: :data:`OPTIONS`)."""
    return _Gen(draws, rng, opts).build()
