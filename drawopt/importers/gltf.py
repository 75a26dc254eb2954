"""glTF 2.0 scenes as drawopt streams: what a simple engine records for one frame of the scene.

The engine model (docs/asset-tools.md has the full mapping and the contracts):

* one render target ``color`` and depth target ``depth`` (``width`` x ``height``), one root
  signature ``gltf``: ``0 constants(16)`` the node's world matrix (column-major float32, as glTF),
  ``1 table(cbv,1,srv,5)`` the material (constants + base colour, metal/rough, normal, occlusion,
  emissive textures), ``2 srv`` the per-draw array a rewrite may bind (the engine binds nothing there);
* per scene node with a mesh, per primitive, in scene order: ``SetPipelineState`` for its material
  and vertex attributes, ``IASetPrimitiveTopology``, the material's table, the world matrix as root
  constants, the index buffer, one vertex buffer per attribute (from its buffer view), the draw;
  opaque first, then alpha-tested (``MASK``), then blended (``BLEND``) back to front from the first
  camera of the scene (or ``camera``);
* ``EXT_mesh_gpu_instancing``: one instanced draw, the instance transforms as instance-rate vertex
  buffers;
* the index buffer is bound at the start of its glTF buffer with ``StartIndexLocation`` at the
  accessor (the engine keeps one GPU buffer per glTF buffer); ``u8`` indices, which D3D12 has no
  format for, are widened into the generated ``u8_indices`` buffer; ``TRIANGLE_FAN`` and
  ``LINE_LOOP`` primitives (no D3D12 topology) are drawn from ``converted_indices`` as a triangle
  list and a closed line strip.

Contracts are declared only when asked for (the engine's shaders support them):
``per_draw_transforms`` (the vertex shader reads the world matrix from the per-draw array when one
is bound: ``draw_data(perdraw=2,lift=0.0+...+0.15)``), ``bindless`` (material table slot lifted
too: ``+1.0``), ``no_primitive_id``.

>>> import os, tempfile, json
>>> doc = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0, 1]}],
...        "nodes": [{"mesh": 0}, {"mesh": 0, "translation": [2, 0, 0]}],
...        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
...        "buffers": [{"byteLength": 48}], "bufferViews": [{"buffer": 0, "byteLength": 36},
...        {"buffer": 0, "byteOffset": 36, "byteLength": 6}],
...        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3"},
...                      {"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"}]}
>>> path = os.path.join(tempfile.mkdtemp(), "tri.gltf")
>>> with open(path, "w") as f:
...     json.dump(doc, f)
>>> s = import_gltf(path, json_only=True)
>>> from drawopt.stats import compute_stats
>>> compute_stats(s)["draw_calls"]
2
"""

from __future__ import annotations

__all__ = ["import_gltf", "import_scene", "import_read", "SceneImport", "CONTRACT_FLAGS", "contract_for"]

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drawopt.errors import InputError, UsageError
from drawopt.importers.gltf_read import (
    COMPONENT_BYTES,
    COMPONENT_NAMES,
    SUPPORTED_EXTENSIONS,
    TYPE_COMPONENTS,
    GltfFile,
    read_gltf,
)
from drawopt.ir.stream import MAX_VERTEX_BUFFERS, Stream, StreamBuilder

#: import options that declare what the engine's shaders support -> what each lets a rewrite do
#: (the import summary prints this next to the draw calls each would allow)
CONTRACT_FLAGS: dict[str, str] = {
    "per_draw_transforms": "world matrices read from a per-draw array: mdi batches draws whatever their nodes",
    "bindless": "material tables read by index: mdi batches across materials",
    "no_primitive_id": "no SV_PrimitiveID: merge-instances joins contiguous index ranges",
    "vertex_pulling": "the vertex-pulling engine: draws of different meshes can share a multi-draw",
}

ROOT_PARAMS = ("constants(16)", "table(cbv,1,srv,5)", "srv")
P_MATRIX, P_MATERIAL, P_ARRAY, P_VBUFFERS, P_FETCH = 0, 1, 2, 3, 4
MAX_PULLED_ATTRIBUTES = 16  # vertex pulling: 2 words each in constants(32)
SLOTS_PER_MATERIAL = 6
MATERIAL_CONSTANT_BYTES = 256

_MODES = {0: ("point", "POINTLIST"), 1: ("line", "LINELIST"), 3: ("line", "LINESTRIP"),
          4: ("triangle", "TRIANGLELIST"), 5: ("triangle", "TRIANGLESTRIP")}
_CONVERTED = {2: ("LINE_LOOP", "line", "LINESTRIP", "a line strip closed by its first index"),
              6: ("TRIANGLE_FAN", "triangle", "TRIANGLELIST", "a triangle list")}
_INDEX_FORMATS = {5121: "R16_UINT", 5123: "R16_UINT", 5125: "R32_UINT"}
_TEXTURE_SLOTS = ("baseColorTexture", "metallicRoughnessTexture", "normalTexture", "occlusionTexture",
                  "emissiveTexture")
_INSTANCE_ATTRS = ("TRANSLATION", "ROTATION", "SCALE")
NO_CAMERA = "none (view from the origin down -Z)"


@dataclass
class SceneImport:
    """What :func:`import_scene` produced: the stream, its figures and the notes for the summary."""

    stream: Stream
    path: str
    draws: int = 0
    instances: int = 0
    triangles: int = 0
    indices: int = 0
    materials: int = 0
    pipelines: int = 0
    nodes: int = 0
    camera: str = NO_CAMERA
    contracts: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """The summary as a JSON-able dict."""
        return {"file": self.path, "draws": self.draws, "instances": self.instances, "triangles": self.triangles,
                "indices": self.indices, "materials": self.materials, "pipelines": self.pipelines,
                "nodes": self.nodes, "camera": self.camera, "contracts": list(self.contracts), "notes": self.notes}


def contract_for(per_draw_transforms: bool = False, bindless: bool = False, no_primitive_id: bool = False,
                 instanced: bool = False, pulled_attributes: int = 0) -> str:
    """The ``contract=`` text the engine's pipelines declare under these flags.

    An instanced pipeline (``EXT_mesh_gpu_instancing``: instance-rate transform inputs) declares no
    array clause: its instance inputs depend on ``StartInstanceLocation``. A vertex-pulling pipeline
    (``pulled_attributes`` > 0) also lifts its vertex-fetch words (``4.0`` ... ``4.(2A-1)``) when the
    array clause is declared.

    >>> contract_for()
    ''
    >>> contract_for(bindless=True, no_primitive_id=True)
    'draw_data(perdraw=2,lift=1.0),no_primitive_id'
    >>> contract_for(per_draw_transforms=True).count("+")
    15
    """
    lift = []
    if per_draw_transforms:
        lift += [f"{P_MATRIX}.{k}" for k in range(16)]
    if bindless:
        lift.append(f"{P_MATERIAL}.0")
    if lift:
        lift += [f"{P_FETCH}.{k}" for k in range(2 * pulled_attributes)]
    clauses = []
    if lift and not instanced:
        clauses.append(f"draw_data(perdraw={P_ARRAY},lift={'+'.join(lift)})")
    if no_primitive_id:
        clauses.append("no_primitive_id")
    return ",".join(clauses)


# ----------------------------------------------------------------------------------------- transforms
def _local_matrix(node: dict[str, Any]) -> np.ndarray:
    if "matrix" in node:
        return np.asarray(node["matrix"], np.float64).reshape(4, 4).T  # glTF is column-major
    m = np.eye(4)
    if "scale" in node:
        m = np.diag([*node["scale"], 1.0]) @ m
    if "rotation" in node:
        m = _quat(node["rotation"]) @ m
    if "translation" in node:
        t = np.eye(4)
        t[:3, 3] = node["translation"]
        m = t @ m
    return m


def _quat(q: list[float]) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    n = math.sqrt(x * x + y * y + z * z + w * w) or 1.0
    x, y, z, w = x / n, y / n, z / n, w / n
    r = np.eye(4)
    r[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return r


def _walk(f: GltfFile, roots: list[int], where: str) -> list[tuple[int, np.ndarray]]:
    """Nodes of the scene in depth-first order with their world matrices; a cycle is an error."""
    doc = f.doc
    nodes = doc.get("nodes") or []
    out: list[tuple[int, np.ndarray]] = []
    seen: set[int] = set()
    stack: list[tuple[int, np.ndarray, str]] = [(r, np.eye(4), f"{where}.nodes[{j}]")
                                                for j, r in reversed(list(enumerate(roots)))]
    while stack:
        i, parent, w = stack.pop()
        if i in seen:
            raise f.error(w, f"node {i} is reached twice (a cycle or a node with two parents)")
        seen.add(i)
        world = parent @ _local_matrix(nodes[i])
        out.append((i, world))
        for j, ch in reversed(list(enumerate(nodes[i].get("children") or []))):
            stack.append((ch, world, f"nodes[{i}].children[{j}]"))
    return out


# --------------------------------------------------------------------------------------------- import
@dataclass
class _Draw:
    world: np.ndarray
    pipeline: str
    topology: str
    material: int
    indexed: bool
    count: int
    instances: int
    index_binding: tuple[str, str] | None  # (buffer, format)
    start_index: int
    vertex_bindings: list[tuple[str, int, int]]  # (buffer, offset, stride) per slot
    alpha: str
    center: np.ndarray


def _attr_format(acc: dict[str, Any]) -> str:
    norm = "n" if acc.get("normalized") else ""
    return f"{COMPONENT_NAMES[acc['componentType']]}x{TYPE_COMPONENTS[acc['type']]}{norm}"


class _Importer:
    def __init__(self, f: GltfFile, camera: int | str | None, width: int, height: int, flags: dict[str, bool],
                 vertex_pulling: bool = False):
        self.f, self.doc, self.path = f, f.doc, f.path
        self.camera, self.width, self.height, self.flags = camera, width, height, flags
        self.notes: list[str] = []
        self.b = StreamBuilder()
        self.pulling = vertex_pulling
        self.nbuffers = len(f.doc.get("buffers") or [])
        params = ROOT_PARAMS
        if vertex_pulling:  # the glTF buffers as one SRV table, the vertex-fetch words as constants
            params += (f"table(srv,{self.nbuffers + 1})", f"constants({2 * MAX_PULLED_ATTRIBUTES})")
        self.b.rootsig("gltf", *params)
        self.pipelines: dict[tuple[Any, ...], str] = {}
        self.u8_offsets: dict[int, int] = {}
        self.u8_size = 0
        self.zero_bytes = 0
        self.converted: list[np.ndarray] = []
        self.converted_len = 0
        self.converted_at: dict[tuple[int | None, int, int], tuple[int, int]] = {}

    # ---- buffers
    def buffer_name(self, b: int) -> str:
        return f"buf{b}"

    def accessor_binding(self, ai: int) -> tuple[str, int, int]:
        """(buffer, byte offset, stride) of accessor ``ai`` as a vertex buffer."""
        acc = self.doc["accessors"][ai]
        size = COMPONENT_BYTES[acc["componentType"]] * TYPE_COMPONENTS[acc["type"]]
        if acc.get("bufferView") is None:  # all zeros (or sparse over zeros): the engine's zero buffer
            self.zero_bytes = max(self.zero_bytes, size * acc["count"])
            return "zeros", 0, size
        bv = self.doc["bufferViews"][acc["bufferView"]]
        return self.buffer_name(bv["buffer"]), (bv.get("byteOffset") or 0) + (acc.get("byteOffset") or 0), \
            bv.get("byteStride") or size

    def index_binding(self, ai: int) -> tuple[tuple[str, str], int]:
        acc = self.doc["accessors"][ai]
        ct = acc["componentType"]
        if ct == 5121 or acc.get("bufferView") is None:
            if ai not in self.u8_offsets:
                self.u8_offsets[ai] = self.u8_size
                self.u8_size += 2 * acc["count"] + (2 * acc["count"]) % 4
            return ("u8_indices", "R16_UINT"), self.u8_offsets[ai] // 2
        buf, off, _ = self.accessor_binding(ai)
        return (buf, _INDEX_FORMATS[ct]), off // COMPONENT_BYTES[ct]

    def index_values(self, ai: int) -> np.ndarray | None:
        """The values of index accessor ``ai`` (uint32), or None when its buffer was not read."""
        acc = self.doc["accessors"][ai]
        if acc.get("bufferView") is None:
            return np.zeros(acc["count"], np.uint32)
        bv = self.doc["bufferViews"][acc["bufferView"]]
        blob = self.f.buffers[bv["buffer"]] if bv["buffer"] < len(self.f.buffers) else None
        if blob is None:
            return None
        dt = {5121: np.uint8, 5123: np.uint16, 5125: np.uint32}[acc["componentType"]]
        off = (bv.get("byteOffset") or 0) + (acc.get("byteOffset") or 0)
        return np.frombuffer(blob, dt, acc["count"], off).astype(np.uint32)

    def converted_binding(self, ai: int | None, mode: int, vertices: int) -> tuple[tuple[str, str], int, int] | None:
        """Fan or loop indices rewritten as a list / closed strip in ``converted_indices`` (R32):
        ``(binding, start index, count)``, or None when the indices are not known (``--json-only``)."""
        key = (ai, mode, vertices)
        if key not in self.converted_at:
            src = np.arange(vertices, dtype=np.uint32) if ai is None else self.index_values(ai)
            if src is None:
                return None
            if mode == 6:
                n = len(src)
                out = np.stack([np.full(max(n - 2, 0), src[0], np.uint32), src[1:-1], src[2:]], 1).reshape(-1) \
                    if n >= 3 else np.zeros(0, np.uint32)
            else:
                out = np.concatenate([src, src[:1]])
            self.converted_at[key] = (self.converted_len, len(out))
            self.converted.append(out)
            self.converted_len += len(out)
        start, count = self.converted_at[key]
        return ("converted_indices", "R32_UINT"), start, count

    def check_indices(self, ai: int, vertices: int, where: str) -> None:
        """With the buffer's data at hand, every index must address a vertex (else the file is bad)."""
        acc = self.doc["accessors"][ai]
        mx = int(acc["max"][0]) if "max" in acc else None
        idx = self.index_values(ai)
        if idx is not None:
            mx = int(idx.max())
        if mx is not None and mx >= vertices:
            raise self.f.error(where, f"index {mx} is out of range (the primitive has {vertices} vertices)")

    # ---- pipelines and materials
    def material_info(self, m: int | None) -> dict[str, Any]:
        mat = self.doc["materials"][m] if m is not None else {}
        ext = mat.get("extensions") or {}
        return {"alpha": mat.get("alphaMode", "OPAQUE"), "double": bool(mat.get("doubleSided", False)),
                "unlit": "KHR_materials_unlit" in ext}

    def pipeline_for(self, prim: dict[str, Any], mat: dict[str, Any], topo: str, inst_attrs: list[str],
                     where: str) -> str:
        accs = self.doc["accessors"]
        attrs = sorted(prim["attributes"])
        layout = "gltf." + ".".join(f"{a}-{_attr_format(accs[prim['attributes'][a]])}" for a in attrs)
        if inst_attrs:
            layout += ".inst-" + "-".join(a[0] for a in inst_attrs)
        npulled = len(attrs) + len(inst_attrs) if self.pulling else 0
        if npulled > MAX_PULLED_ATTRIBUTES:
            raise self.f.error(f"{where}.attributes", f"{npulled} vertex attributes (with the instance ones); the "
                                                      f"vertex-pulling engine reads at most {MAX_PULLED_ATTRIBUTES}")
        key = (layout, mat["alpha"], mat["double"], mat["unlit"], topo, bool(inst_attrs))
        name = self.pipelines.get(key)
        if name is None:
            name = f"p{len(self.pipelines)}.{mat['alpha'].lower()}"
            ps = ("gltf_unlit" if mat["unlit"] else "gltf_pbr") + (".mask" if mat["alpha"] == "MASK" else "") \
                + (".2s" if mat["double"] else "")
            blend = "alpha" if mat["alpha"] == "BLEND" else "opaque"
            depth = "less" if mat["alpha"] == "BLEND" else "less,write"
            contract = contract_for(instanced=bool(inst_attrs), pulled_attributes=npulled, **self.flags)
            kw: dict[str, Any] = {"contract": contract} if contract else {}
            vs = "gltf_vs" + (".inst" if inst_attrs else "")
            if self.pulling:  # the shader decodes the formats the layout would name
                vs, layout = "gltf_pull" + layout[4:], "none"
            self.b.pipeline(name, vs=vs, ps=ps, layout=layout, blend=blend, depth=depth, topology=topo, root="gltf",
                            **kw)
            self.pipelines[key] = name
        return name

    # ---- the scene
    def scene_roots(self) -> tuple[list[int], str]:
        scenes = self.doc.get("scenes") or []
        if not scenes:
            self.notes.append("the file has no scene: nothing is drawn")
            return [], ""
        s = self.doc.get("scene", 0)
        return list(scenes[s].get("nodes") or []), f"scenes[{s}]"

    def view_matrix(self, walk: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, str]:
        nodes = self.doc.get("nodes") or []
        cams = [(i, w) for i, w in walk if nodes[i].get("camera") is not None]
        pick = None
        if self.camera is None:
            pick = cams[0] if cams else None
        else:
            for i, w in cams:
                if (isinstance(self.camera, int) and nodes[i]["camera"] == self.camera) or \
                        (isinstance(self.camera, str) and nodes[i].get("name") == self.camera):
                    pick = (i, w)
                    break
            if pick is None:
                have = ", ".join(f"{nodes[i]['camera']} (node {nodes[i].get('name', i)!s})" for i, _ in cams) or "none"
                raise UsageError(f"{self.path}: no camera {self.camera!r} in the scene (cameras placed: {have})")
        if pick is None:
            return np.eye(4), NO_CAMERA
        i, w = pick
        return np.linalg.inv(w), f"cameras[{nodes[i]['camera']}] at nodes[{i}]"

    def collect(self) -> tuple[list[_Draw], int, str]:
        """The draws in scene order, the number of scene nodes and the camera used."""
        doc = self.doc
        roots, where = self.scene_roots()
        walk = _walk(self.f, roots, where)
        view, camera = self.view_matrix(walk)
        draws: list[_Draw] = []
        skipped: dict[str, int] = {}
        for ni, world in walk:
            node = doc["nodes"][ni]
            if node.get("mesh") is None:
                continue
            mi = node["mesh"]
            inst = (node.get("extensions") or {}).get("EXT_mesh_gpu_instancing")
            inst_attrs = [a for a in _INSTANCE_ATTRS if inst and a in inst["attributes"]]
            ninst = doc["accessors"][next(iter(inst["attributes"].values()))]["count"] if inst and inst["attributes"] \
                else 1
            if node.get("skin") is not None:
                skipped.setdefault("skin (drawn in its bind pose; joint matrices are not modelled)", 0)
            for pj, prim in enumerate(doc["meshes"][mi]["primitives"]):
                w = f"meshes[{mi}].primitives[{pj}]"
                mode = prim.get("mode", 4)
                attrs = sorted(prim["attributes"])
                vcount = min(doc["accessors"][prim["attributes"][a]]["count"] for a in attrs)
                if prim.get("indices") is not None:
                    self.check_indices(prim["indices"], vcount, f"{w}.indices")
                conv = None
                if mode in _CONVERTED:  # no D3D12 topology: the engine rewrites the indices at load
                    mname, topo, iatopo, what = _CONVERTED[mode]
                    conv = self.converted_binding(prim.get("indices"), mode, vcount)
                    k = f"mode {mname} converted to {what}" if conv else \
                        f"mode {mname} (no D3D12 topology; indices not read with --json-only): primitive skipped"
                    skipped[k] = skipped.get(k, 0) + 1
                    if conv is None:
                        continue
                else:
                    topo, iatopo = _MODES[mode]
                if prim.get("targets"):
                    skipped.setdefault("morph targets (drawn at weight 0)", 0)
                mat = self.material_info(prim.get("material"))
                pipe = self.pipeline_for(prim, mat, topo, inst_attrs, w)
                vb = [self.accessor_binding(prim["attributes"][a]) for a in attrs]
                vb += [self.accessor_binding(inst["attributes"][a]) for a in inst_attrs]
                if len(vb) > MAX_VERTEX_BUFFERS:
                    raise self.f.error(f"{w}.attributes", f"{len(vb)} vertex attributes (with the instance ones); "
                                                          f"D3D12 has {MAX_VERTEX_BUFFERS} vertex-buffer slots")
                if conv is not None:
                    ib, start, count = conv
                    indexed = True
                elif prim.get("indices") is not None:
                    ib, start = self.index_binding(prim["indices"])
                    count = doc["accessors"][prim["indices"]]["count"]
                    indexed = True
                else:
                    ib, start, count, indexed = None, 0, vcount, False
                pa = doc["accessors"][prim["attributes"]["POSITION"]]
                lo = np.asarray(pa.get("min", [0, 0, 0]), float)
                hi = np.asarray(pa.get("max", [0, 0, 0]), float)
                center = world @ np.array([*((lo + hi) / 2), 1.0])
                draws.append(_Draw(world, pipe, iatopo, prim.get("material", -1), indexed, count, ninst,
                                   ib, start, vb, mat["alpha"], view @ center))
        for k, n in skipped.items():
            self.notes.append(f"{k}" + (f": {n}" if n else ""))
        return draws, len(walk), camera

    def build(self) -> SceneImport:
        doc, b = self.doc, self.b
        draws, nnodes, camera = self.collect()
        order = {"OPAQUE": 0, "MASK": 1, "BLEND": 2}
        keyed = sorted(range(len(draws)), key=lambda i: (order[draws[i].alpha],
                                                         draws[i].center[2] if draws[i].alpha == "BLEND" else 0, i))
        draws = [draws[i] for i in keyed]  # blended: farthest first (view space looks down -Z)
        # declarations
        b.target("color", self.width, self.height, "R8G8B8A8_UNORM")
        b.depth("depth", self.width, self.height, "D32_FLOAT")
        for i, buf in enumerate(doc.get("buffers") or []):
            b.buffer(self.buffer_name(i), max(4, -(-buf["byteLength"] // 4) * 4))
        if self.u8_size:
            b.buffer("u8_indices", max(4, self.u8_size), cpu=True, data=self.u8_data())  # None: contents unknown
        if self.converted_len:
            b.buffer("converted_indices", 4 * self.converted_len, cpu=True, data=np.concatenate(self.converted))
        if self.zero_bytes:
            b.buffer("zeros", -(-self.zero_bytes // 4) * 4, cpu=True, data=np.zeros(0, np.uint32))
        mats = doc.get("materials") or []
        nmat = len(mats) + 1  # + the default material of primitives without one
        b.buffer("materials", MATERIAL_CONSTANT_BYTES * nmat, cpu=True, data=self.material_constants(mats))
        b.texture("white", 1, 1, "R8G8B8A8_UNORM")
        b.texture("flat_normal", 1, 1, "R8G8B8A8_UNORM")
        for t in range(len(doc.get("textures") or [])):
            b.texture(f"tex{t}", 1, 1, "R8G8B8A8_UNORM")
        vbase = SLOTS_PER_MATERIAL * nmat
        b.heap("res", "CBV_SRV_UAV", vbase + (self.nbuffers + 1 if self.pulling else 0))
        if self.pulling:  # the vertex-data table: every glTF buffer, then the zero buffer (else a filler view)
            for i in range(self.nbuffers):
                b.view("res", vbase + i, "srv", self.buffer_name(i))
            b.view("res", vbase + self.nbuffers, "srv", "zeros" if self.zero_bytes else "materials")
        for m in range(nmat):
            mat = mats[m] if m < len(mats) else {}
            pbr = mat.get("pbrMetallicRoughness") or {}
            b.view("res", SLOTS_PER_MATERIAL * m, "cbv", "materials")
            for k, tk in enumerate(_TEXTURE_SLOTS):
                t = (pbr if k < 2 else mat).get(tk)
                res = f"tex{t['index']}" if t else ("flat_normal" if tk == "normalTexture" else "white")
                b.view("res", SLOTS_PER_MATERIAL * m + 1 + k, "srv", res)
        # (the root signature and the pipelines were declared while collecting) commands
        b.OMSetRenderTargets("color", "depth")
        b.RSSetViewports(0, 0, float(self.width), float(self.height), 0.0, 1.0)
        b.RSSetScissorRects(0, 0, self.width, self.height)
        b.SetGraphicsRootSignature("gltf")
        b.SetDescriptorHeaps("res")
        tri = idx = inst = 0
        for d in draws:
            b.SetPipelineState(d.pipeline)
            b.IASetPrimitiveTopology(d.topology)
            m = d.material if d.material >= 0 else len(mats)
            b.SetGraphicsRootDescriptorTable(P_MATERIAL, f"res[{SLOTS_PER_MATERIAL * m}]")
            words = np.ascontiguousarray(d.world.T, np.float32).reshape(-1).view(np.uint32)
            b.SetGraphicsRoot32BitConstants(P_MATRIX, 16, *(int(w) for w in words))
            if self.pulling:
                b.SetGraphicsRootDescriptorTable(P_VBUFFERS, f"res[{vbase}]")
                fetch = [w for buf, off, stride in d.vertex_bindings
                         for w in (off, stride | self.pulled_buffer(buf) << 16)]
                b.SetGraphicsRoot32BitConstants(P_FETCH, len(fetch), *fetch)
            if d.indexed:
                b.IASetIndexBuffer(d.index_binding[0], d.index_binding[1], 0)
            if not self.pulling:
                for slot, (buf, off, stride) in enumerate(d.vertex_bindings):
                    b.IASetVertexBuffers(slot, buf, off, stride)
            if d.indexed:
                b.DrawIndexedInstanced(d.count, d.instances, d.start_index, 0, 0)
                idx += d.count
            else:
                b.DrawInstanced(d.count, d.instances, 0, 0)
            if d.topology == "TRIANGLELIST":
                tri += d.count // 3 * d.instances
            elif d.topology == "TRIANGLESTRIP":
                tri += max(d.count - 2, 0) * d.instances
            inst += d.instances
        stream = b.build()
        for e in doc.get("extensionsUsed") or []:
            if e not in SUPPORTED_EXTENSIONS and e not in (doc.get("extensionsRequired") or []):
                self.notes.append(f"extension {e} is not required and not implemented: ignored")
        if self.f.missing:
            unread = ", ".join(f"buffers[{i}] '{u}'" for i, u in self.f.missing.items())
            self.notes.append(f"buffers not read: {unread}")
        used = {d.material for d in draws}
        contracts = tuple(k for k, v in self.flags.items() if v) + (("vertex_pulling",) if self.pulling else ())
        return SceneImport(stream, self.path, draws=len(draws), instances=inst, triangles=tri, indices=idx,
                           materials=len(used), pipelines=len(self.pipelines), nodes=nnodes, camera=camera,
                           contracts=contracts, notes=self.notes)

    def pulled_buffer(self, name: str) -> int:
        """The index of vertex buffer ``name`` in the vertex-pulling table."""
        return self.nbuffers if name == "zeros" else int(name[3:])

    def u8_data(self) -> np.ndarray | None:
        """The widened ``u8`` indices, or None when a source buffer was not read (contents unknown)."""
        out = np.zeros(self.u8_size // 2, np.uint16)
        for ai, off in self.u8_offsets.items():
            values = self.index_values(ai)
            if values is None:
                return None
            out[off // 2: off // 2 + len(values)] = values
        return out.view(np.uint32)

    def material_constants(self, mats: list[dict[str, Any]]) -> np.ndarray:
        """Per material, 64 words (float32): base colour RGBA, metallic, roughness, alpha cutoff, emissive RGB,
        then the base colour texture's ``KHR_texture_transform`` (offset XY, rotation, scale XY)."""
        out = np.zeros((len(mats) + 1, MATERIAL_CONSTANT_BYTES // 4), np.float32)
        for m, mat in enumerate([*mats, {}]):
            pbr = mat.get("pbrMetallicRoughness") or {}
            out[m, :4] = pbr.get("baseColorFactor", [1, 1, 1, 1])
            out[m, 4] = pbr.get("metallicFactor", 1.0)
            out[m, 5] = pbr.get("roughnessFactor", 1.0)
            out[m, 6] = mat.get("alphaCutoff", 0.5)
            out[m, 7:10] = mat.get("emissiveFactor", [0, 0, 0])
            tt = ((pbr.get("baseColorTexture") or {}).get("extensions") or {}).get("KHR_texture_transform") or {}
            out[m, 10:12] = tt.get("offset", [0, 0])
            out[m, 12] = tt.get("rotation", 0)
            out[m, 13:15] = tt.get("scale", [1, 1])
        return out.reshape(-1).view(np.uint32)


def import_scene(path: str, camera: int | str | None = None, bindless: bool = False,
                 per_draw_transforms: bool = False, no_primitive_id: bool = False, vertex_pulling: bool = False,
                 json_only: bool = False, width: int = 1920, height: int = 1080) -> SceneImport:
    """Import the glTF 2.0 scene at ``path``; the stream and the import summary.

    ``camera``: a ``cameras`` index or a camera node's name (default: the first camera placed in
    the scene). ``vertex_pulling``: the engine's vertex-pulling shaders (no input layout; the vertex
    shader fetches each attribute from the glTF buffers at the offset and stride given in root
    constants 4). ``json_only``: read nothing but the JSON (counts and formats from the accessors).
    Raises :class:`~drawopt.errors.InputError` (file and JSON path) for bad input.
    """
    return import_read(read_gltf(path, json_only=json_only), camera=camera, bindless=bindless,
                       per_draw_transforms=per_draw_transforms, no_primitive_id=no_primitive_id,
                       vertex_pulling=vertex_pulling, width=width, height=height)


def import_read(f: GltfFile, camera: int | str | None = None, bindless: bool = False,
                per_draw_transforms: bool = False, no_primitive_id: bool = False, vertex_pulling: bool = False,
                width: int = 1920, height: int = 1080) -> SceneImport:
    """:func:`import_scene` of a file already read (:func:`~drawopt.importers.gltf_read.read_gltf`):
    several engine configurations of one scene without reading it again."""
    flags = {"per_draw_transforms": per_draw_transforms, "bindless": bindless, "no_primitive_id": no_primitive_id}
    try:
        return _Importer(f, camera, width, height, flags, vertex_pulling).build()
    except (ValueError, OverflowError) as e:  # a value past a stream limit the document checks let through
        raise InputError(f"the scene cannot be recorded: {e}", f.path) from None


def import_gltf(path: str, **options: Any) -> Stream:
    """The stream of the glTF 2.0 scene at ``path`` (options: :func:`import_scene`).

    >>> import json, tempfile, os, base64, struct
    >>> data = struct.pack("<9f", 0, 0, 0, 1, 0, 0, 0, 1, 0)
    >>> doc = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0, 1]}],
    ...        "nodes": [{"mesh": 0}, {"mesh": 0, "translation": [2, 0, 0]}],
    ...        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
    ...        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
    ...                       "min": [0, 0, 0], "max": [1, 1, 0]}],
    ...        "bufferViews": [{"buffer": 0, "byteLength": 36}],
    ...        "buffers": [{"byteLength": 36,
    ...                     "uri": "data:application/octet-stream;base64," + base64.b64encode(data).decode()}]}
    >>> path = os.path.join(tempfile.mkdtemp(), "tri.gltf")
    >>> with open(path, "w") as f:
    ...     json.dump(doc, f)
    >>> s = import_gltf(path)
    >>> [c.name for c in s.commands()].count("DrawInstanced")     # one draw per node's primitive
    2
    """
    return import_scene(path, **options).stream
