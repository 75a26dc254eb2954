"""``bundle``: a draw bundle (header ``kind=bundle``) recording a group of static props.

A bundle inherits render targets, viewports and scissors from the list that runs
it, so it sets none of them. It sets its descriptor heaps once at the start, its
root signature and tables, then draws scene objects (vertex-pulling pipelines
with a DrawIndexedX contract and an input-layout pipeline) with per-draw state
changes. Half-way through, ``heaps=same-twice`` sets the same heaps again (legal
in a bundle, and the tables stay defined); ``heaps=different-twice`` switches to
another CBV_SRV_UAV heap, which a bundle may not do (the illegal case, for tests),
and then re-sets every table, since they became undefined.
"""

from __future__ import annotations

__all__ = ["OPTIONS", "build"]

import numpy as np

from drawopt.gen.common import DrawList, Option, Program, Slot, choice_opt, float_opt, int_opt
from drawopt.gen.scene import VERTEX_STRIDE, make_meshes, scene_draws
from drawopt.ir.decls import Buffer, Heap, Pipeline, RootParam, RootSig, Texture, View
from drawopt.ir.stream import Header, Stream

OPTIONS: tuple[Option, ...] = (
    choice_opt("heaps", "once", ("once", "same-twice", "different-twice"),
               "set the heaps once, again the same (legal), or again different ones (illegal)"),
    int_opt("materials", 16, 1, 4096, "number of materials"),
    int_opt("meshes", 64, 1, 100_000, "number of distinct meshes"),
    float_opt("vertex_pulling_fraction", 0.5, 0.0, 1.0, "share of draws with vertex-pulling pipelines"),
    float_opt("redundancy", 0.1, 0.0, 1.0, "rate of redundant state re-sets"),
)

P_MATERIAL, P_OBJECT, P_GEOMETRY, P_SAMPLERS, P_PERDRAW = range(5)
TRIANGLELIST = 4


def build(draws: int, rng: np.random.Generator, heaps: str, materials: int, meshes: int,
          vertex_pulling_fraction: float, redundancy: float) -> Stream:
    """The ``bundle`` stream (see the module docstring)."""
    p = Program(Header(kind="bundle"))
    lib = make_meshes(rng, meshes)
    d = scene_draws(rng, lib, draws, materials, scatter_p=0.0)
    lib.declare(p)
    p.declare(Buffer("transforms", max(d.n, 1) * 64))
    p.declare(Buffer("perdraw", max(d.n, 1) * 16))
    for m in range(materials):
        p.declare(Texture(f"mat{m}_albedo", 1024, 1024, "BC7_UNORM"))
        p.declare(Texture(f"mat{m}_normal", 1024, 1024, "BC5_UNORM"))
    heap_names = ("res", "res2") if heaps == "different-twice" else ("res",)
    for h in heap_names:
        p.declare(Heap(h, "CBV_SRV_UAV", 2 + 2 * materials))
        p.declare(View(h, 0, "srv", "meshverts"))
        p.declare(View(h, 1, "srv", "transforms"))
        for m in range(materials):
            p.declare(View(h, 2 + 2 * m, "srv", f"mat{m}_albedo"))
            p.declare(View(h, 3 + 2 * m, "srv", f"mat{m}_normal"))
    p.declare(Heap("samp", "SAMPLER", 1))
    p.declare(View("samp", 0, "sampler"))
    p.declare(RootSig("props", (RootParam("table", ranges=(("srv", 2),)), RootParam("constants", 4),
                                RootParam("table", ranges=(("srv", 2),)), RootParam("table", ranges=(("sampler", 1),)),
                                RootParam("srv"))))
    common = dict(root="props", depth="lequal,write")
    pidx = {
        "props_pull16": p.declare(Pipeline("props_pull16", vs="props_pull", ps="props_lit",
                                           contract="x(vertex_bits=16,perdraw=4,lift=1.0+1.1+1.2+1.3)", **common)),
        "props_pull20": p.declare(Pipeline("props_pull20", vs="props_pull", ps="props_lit",
                                           contract="x(vertex_bits=20,perdraw=4,lift=1.0+1.1+1.2+1.3)", **common)),
        "props_il": p.declare(Pipeline("props_il", vs="props_il", ps="props_lit", layout="pos_nrm_uv",
                                       params=(0, 1, 2, 3), contract="no_primitive_id", **common)),
    }

    def setup(heap: str) -> None:
        p.cmd("SetGraphicsRootDescriptorTable", P_GEOMETRY, f"{heap}[0]")
        p.cmd("SetGraphicsRootDescriptorTable", P_SAMPLERS, "samp[0]")

    p.cmd("SetDescriptorHeaps", "res", "samp")
    p.cmd("SetGraphicsRootSignature", "props")
    p.cmd("SetGraphicsRootShaderResourceView", P_PERDRAW, "perdraw", 0)
    setup("res")
    pulled = (rng.random(int(d.obj.max(initial=0)) + 1) < vertex_pulling_fraction)[d.obj]  # per object
    pipe = np.where(pulled, np.where(lib.wide[d.mesh], pidx["props_pull20"], pidx["props_pull16"]), pidx["props_il"])
    consts = np.stack([d.obj, d.obj, d.material, lib.base_vertex[d.mesh]], axis=1)
    half = (d.n + 1) // 2
    heap_of = np.where(np.arange(d.n) < half, p.ref("res"), p.ref(heap_names[-1]))
    rows = p.rows(d.n)
    if heaps != "once" and d.n >= 2:
        # half-way through: the heaps again (same, or different and then every table again)
        r = rows[half:half + 1]
        p.emit("SetDescriptorHeaps", r, Slot.PRE, var=np.array([[heap_of[half], p.ref("samp")]]))
        if heaps == "different-twice":
            p.emit("SetGraphicsRootDescriptorTable", r, Slot.PRE, index=P_GEOMETRY, table=p.heapref(heap_names[-1], 0))
            p.emit("SetGraphicsRootDescriptorTable", r, Slot.PRE, index=P_SAMPLERS, table=p.heapref("samp", 0))
    dl = DrawList(
        d.n, pipe, topology=np.full(d.n, TRIANGLELIST),
        vertex=np.where(pipe == pidx["props_il"], 0, -1),
        vertex_bindings=np.array([[0, p.ref("meshverts"), 0, VERTEX_STRIDE]]),
        index=lib.ib[d.mesh], index_bindings=lib.index_bindings(p),
        table=(heap_of << 32) | (2 + 2 * d.material), table_param=P_MATERIAL,
        constants=consts, constants_param=P_OBJECT, redundant=rng.random((4, d.n)) < redundancy)
    dl.emit(p, rows, "DrawIndexedInstanced", index_count=lib.sec_count[d.section], instance_count=d.instances,
            start_index=lib.sec_start[d.section], base_vertex=lib.base_vertex[d.mesh],
            start_instance=d.start_instance)
    return p.build()
