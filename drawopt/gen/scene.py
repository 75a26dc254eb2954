"""Scene content shared by the generators: a mesh library and scene-order draw lists.

Meshes live the way engines pack them: all vertices in one big buffer
(``meshverts``, 32-byte vertices, read by input layouts or pulled through an SRV),
indices in a few shared index buffers: two R16 pages for meshes under 65536
vertices and one R32 buffer for the large ones. A mesh is 1..4 *sections*
(contiguous index ranges with their own material, as exported from a DCC tool).
"""

from __future__ import annotations

__all__ = ["MeshLibrary", "make_meshes", "SceneDraws", "scene_draws", "markov", "loguniform_int"]

from dataclasses import dataclass

import numpy as np

from drawopt.gen.common import Program
from drawopt.ir.decls import Buffer

VERTEX_STRIDE = 32
R16, R32 = 0, 1
_INSTANCES = np.array([2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64])
_INSTANCES_P = np.array([24, 16, 14, 9, 8, 8, 6, 5, 4, 3, 2, 1]) / 100


def loguniform_int(rng: np.random.Generator, lo: int, hi: int, n: int) -> np.ndarray:
    """``n`` integers in ``[lo, hi]``, roughly log-uniform: a uniformly chosen octave
    ``[lo*2^k, lo*2^(k+1))``, then uniform inside it.

    Integer arithmetic only: ``exp``/``log`` may differ in the last bit between
    platforms' math libraries, and the streams must be equal on every machine.
    """
    lo, hi = max(int(lo), 1), max(int(hi), int(lo))
    edges = [lo]
    while edges[-1] * 2 < hi:
        edges.append(edges[-1] * 2)
    edges.append(hi + 1)
    e = np.array(edges, np.int64)
    k = rng.integers(0, e.shape[0] - 1, n)
    return rng.integers(e[k], np.maximum(e[k + 1], e[k] + 1))


def markov(rng: np.random.Generator, fresh: np.ndarray, keep_p: float) -> np.ndarray:
    """``fresh`` values, each replaced by its predecessor's with probability ``keep_p``.

    Models spatial coherence of a scene: neighbours often share a material.
    """
    n = fresh.shape[0]
    if n == 0:
        return fresh
    keep = rng.random(n) < keep_p
    keep[0] = False
    src = np.where(keep, 0, np.arange(n))
    np.maximum.accumulate(src, out=src)
    return fresh[src]


@dataclass
class MeshLibrary:
    """Meshes and their sections, packed into shared vertex and index buffers."""

    vcount: np.ndarray          # (m,) vertices per mesh
    base_vertex: np.ndarray     # (m,) first vertex in meshverts
    ib: np.ndarray              # (m,) index buffer id: 0, 1 (R16 pages), 2 (R32)
    sec_first: np.ndarray       # (m,) first section of the mesh
    nsec: np.ndarray            # (m,) sections of the mesh
    sec_start: np.ndarray       # (S,) start index of each section in its buffer
    sec_count: np.ndarray       # (S,) index count of each section
    ib_bytes: np.ndarray        # (3,) bytes used in each index buffer
    popularity: np.ndarray      # (m,) probability of a mesh appearing in the scene

    IB_NAMES = ("ib16_0", "ib16_1", "ib32")
    IB_FORMAT = (R16, R16, R32)

    @property
    def n(self) -> int:
        return int(self.vcount.shape[0])

    @property
    def wide(self) -> np.ndarray:
        return self.ib == 2

    @property
    def mesh_start(self) -> np.ndarray:
        return self.sec_start[self.sec_first]

    @property
    def mesh_count(self) -> np.ndarray:
        return np.add.reduceat(self.sec_count, self.sec_first)

    def declare(self, prog: Program) -> None:
        """Declare ``meshverts`` and the three index buffers."""
        prog.declare(Buffer("meshverts", _round_up(int(self.vcount.sum()) * VERTEX_STRIDE, 1 << 16)))
        for name, used in zip(self.IB_NAMES, self.ib_bytes):
            prog.declare(Buffer(name, _round_up(max(int(used), 1), 1 << 16)))

    def index_bindings(self, prog: Program) -> np.ndarray:
        """Rows (buffer, format, offset) for IASetIndexBuffer, indexed by ``ib`` id."""
        return np.array([[prog.ref(nm), fmt, 0] for nm, fmt in zip(self.IB_NAMES, self.IB_FORMAT)], np.int64)


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def make_meshes(rng: np.random.Generator, m: int) -> MeshLibrary:
    """A library of ``m`` meshes (5% large ones needing 32-bit indices)."""
    big = rng.random(m) < 0.05
    vcount = np.where(big, loguniform_int(rng, 66_000, 160_000, m), loguniform_int(rng, 24, 60_000, m))
    tris = np.maximum(vcount * rng.integers(80, 201, m) // 100, 4)
    nsec = rng.choice(np.array([1, 2, 3, 4]), m, p=[0.55, 0.25, 0.12, 0.08])
    nsec = np.minimum(nsec, tris)
    sec_mesh = np.repeat(np.arange(m), nsec)
    sec_first = np.zeros(m, np.int64)
    np.cumsum(nsec[:-1], out=sec_first[1:])
    w = rng.integers(25, 125, sec_mesh.shape[0])
    wsum = np.add.reduceat(w, sec_first)
    sec_tris = np.maximum(w * tris[sec_mesh] // wsum[sec_mesh], 1)
    sec_count = sec_tris * 3
    # index buffers: R16 meshes split over two pages by order, big ones in the R32 buffer
    ib = np.where(big, 2, 0)
    small = np.flatnonzero(~big)
    ib[small[small.shape[0] // 2:]] = 1
    sec_ib = ib[sec_mesh]
    sec_start = np.zeros_like(sec_count)
    ib_bytes = np.zeros(3, np.int64)
    for g, size in ((0, 2), (1, 2), (2, 4)):
        sel = np.flatnonzero(sec_ib == g)
        c = sec_count[sel]
        st = np.zeros_like(c)
        np.cumsum(c[:-1], out=st[1:])
        sec_start[sel] = st
        ib_bytes[g] = int(c.sum()) * size
    base_vertex = np.zeros(m, np.int64)
    np.cumsum(vcount[:-1], out=base_vertex[1:])
    pop = 1.0 / (1.0 + rng.permutation(m))  # Zipf popularity (no pow: see loguniform_int)
    return MeshLibrary(vcount, base_vertex, ib, sec_first, nsec, sec_start, sec_count, ib_bytes, pop / pop.sum())


@dataclass
class SceneDraws:
    """Draws of scene objects in scene order: one per mesh section.

    ``obj`` object id, ``mesh``, ``section`` (global section index), ``material``,
    ``scatter`` (draw belongs to a run of single-instance copies with consecutive
    ``start_instance``), ``start_instance``, ``instances``.
    """

    obj: np.ndarray
    mesh: np.ndarray
    section: np.ndarray
    material: np.ndarray
    scatter: np.ndarray
    start_instance: np.ndarray
    instances: np.ndarray

    @property
    def n(self) -> int:
        return int(self.obj.shape[0])

    def take(self, idx: np.ndarray) -> SceneDraws:
        return SceneDraws(*(getattr(self, f)[idx] for f in
                            ("obj", "mesh", "section", "material", "scatter", "start_instance", "instances")))


def scene_draws(rng: np.random.Generator, lib: MeshLibrary, n: int, materials: int, first_obj: int = 0,
                scatter_p: float = 0.03, instanced_p: float = 0.05, shared_material_p: float = 0.4,
                coherence: float = 0.3) -> SceneDraws:
    """``n`` draws of objects in scene order (each object draws all its sections).

    Objects pick meshes by popularity; neighbouring objects share a material palette
    with probability ``coherence``; an object's sections share its material with
    probability ``shared_material_p`` (consecutive draws with contiguous index
    ranges, an index-range merge opportunity). A ``scatter_p`` share of objects are
    scatter groups: 4..24 single-instance draws of one section with consecutive
    ``start_instance`` (an instance merge opportunity).
    """
    if n == 0:
        z = np.zeros(0, np.int64)
        return SceneDraws(z, z, z, z, z.astype(bool), z, z)
    k = n  # enough objects: every object has at least one draw
    mesh = rng.choice(lib.n, k, p=lib.popularity)
    scatter = rng.random(k) < scatter_p
    runs = np.where(scatter, rng.integers(4, 25, k), lib.nsec[mesh])
    ends = np.cumsum(runs)
    k = int(np.searchsorted(ends, n)) + 1
    mesh, scatter, runs = mesh[:k], scatter[:k], runs[:k].copy()
    runs[-1] -= int(ends[k - 1]) - n
    o = np.repeat(np.arange(k), runs)
    first = np.zeros(k, np.int64)
    np.cumsum(runs[:-1], out=first[1:])
    j = np.arange(n) - first[o]  # position of the draw within its object
    sc = scatter[o]
    section = lib.sec_first[mesh[o]] + np.where(sc, 0, j)
    base_mat = markov(rng, rng.integers(0, materials, k), coherence)
    shared = rng.random(k) < shared_material_p
    mat = np.where(sc | shared[o] | (j == 0), base_mat[o], rng.integers(0, materials, n))
    start_instance = np.where(sc, first[o] + j, 0)
    inst = np.ones(n, np.int64)
    multi = (~sc) & (rng.random(n) < instanced_p)
    inst[multi] = rng.choice(_INSTANCES, int(multi.sum()), p=_INSTANCES_P)
    return SceneDraws(first_obj + o, mesh[o], section, mat.astype(np.int64), sc, start_instance, inst)
