"""Reading a glTF 2.0 file for :mod:`drawopt.importers.gltf`: the document, its buffers, its diagnostics.

pygltflib builds the typed document (``GLTF2.from_dict``, which rejects what its dataclasses cannot
hold); this module adds what drawopt needs on top: every problem is an
:class:`~drawopt.errors.InputError` naming the file and the JSON path of the offending value
(``meshes[0].primitives[1].indices``, at its line and column in a ``.gltf``), never a traceback.
Before pygltflib sees the JSON, :func:`check_document` checks the types and cross-references of
every field the importer reads, so a malformed file fails here with its path instead of deep in a
dataclass constructor. The GLB container's header and chunk lengths are checked here too:
pygltflib 1.16 reads a truncated ``.glb`` without complaint (a short BIN chunk) and fails on a bad
one with ``struct.error``; and its data-URI decoder knows only ``application/octet-stream``, not
glTF's ``application/gltf-buffer``.

>>> doc = {"asset": {"version": "2.0"}, "meshes": [{"primitives": [{"attributes": {"POSITION": 3}}]}]}
>>> check_document(doc, "s.gltf")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
drawopt.errors.InputError: s.gltf:1:1: error: meshes[0].primitives[0].attributes.POSITION: accessor 3 does not ...
"""

from __future__ import annotations

__all__ = ["GltfFile", "read_gltf", "check_document", "json_location", "SUPPORTED_EXTENSIONS", "COMPONENT_BYTES",
           "TYPE_COMPONENTS"]

import json
import os
import re
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any

from drawopt.errors import InputError

#: extensions the engine model implements (a file may *require* these)
SUPPORTED_EXTENSIONS: dict[str, str] = {
    "EXT_mesh_gpu_instancing": "instanced draws",
    "KHR_materials_unlit": "unlit pixel shader",
    "KHR_mesh_quantization": "integer and normalized vertex formats in the input layout",
    "KHR_texture_transform": "UV transform in the material constants",
}

COMPONENT_BYTES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
COMPONENT_NAMES = {5120: "i8", 5121: "u8", 5122: "i16", 5123: "u16", 5125: "u32", 5126: "f32"}
TYPE_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}

_GLB_MAGIC = b"glTF"
_CHUNK_JSON = 0x4E4F534A
_CHUNK_BIN = 0x004E4942


@dataclass
class GltfFile:
    """A glTF document read and checked: the raw JSON, pygltflib's typed view and the buffers.

    ``buffers[i]`` is buffer ``i``'s bytes, or ``None`` when it was not read (``json_only``) or
    its file is missing (``missing[i]`` then says which file).
    """

    path: str
    doc: dict[str, Any]
    gltf: Any  # pygltflib.GLTF2
    buffers: list[bytes | None]
    missing: dict[int, str] = field(default_factory=dict)
    binary: bool = False
    text: str | None = None  # the JSON text of a .gltf (None for a .glb)

    def error(self, where: str, message: str) -> InputError:
        """An error at JSON path ``where``: its line and column in a .gltf, 1:1 in a .glb."""
        return _located(_err(self.path, where, message), self.text)


def _err(path: str, where: str, message: str, line: int = 1, col: int = 1) -> InputError:
    e = InputError(f"{where}: {message}" if where else message, path, line, col)
    e.json_path = where  # type: ignore[attr-defined]
    return e


_PATH_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def json_location(text: str, where: str) -> tuple[int, int]:
    r"""Line and column (1-based) of the value at JSON path ``where`` in ``text``; of the deepest
    step found when the path goes further than the document.

    >>> json_location('{"a": 1,\n "b": [0, {"c": true}]}', "b[1].c")
    (2, 17)
    """
    dec = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")
    pos = ws.match(text, 0).end()  # type: ignore[union-attr]
    try:
        for m in _PATH_STEP.finditer(where):
            key, index = m.group(1), m.group(2)
            opener, closer = ("[", "]") if index is not None else ("{", "}")
            if text[pos:pos + 1] != opener:
                break
            p = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
            k = 0
            found = None
            while text[p:p + 1] != closer:
                if index is None:
                    name, p = dec.raw_decode(text, p)
                    p = ws.match(text, p).end() + 1  # type: ignore[union-attr]  # the ':'
                    p = ws.match(text, p).end()  # type: ignore[union-attr]
                    hit = name == key
                else:
                    hit = k == int(index)
                if hit:
                    found = p
                    break
                _, p = dec.raw_decode(text, p)
                p = ws.match(text, p).end()  # type: ignore[union-attr]
                if text[p:p + 1] == ",":
                    p = ws.match(text, p + 1).end()  # type: ignore[union-attr]
                k += 1
            if found is None:
                break
            pos = found
    except (ValueError, IndexError):
        pass
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _located(e: InputError, text: str | None) -> InputError:
    where = getattr(e, "json_path", "")
    if text is None or not where:
        return e
    line, col = json_location(text, where)
    out = InputError(e.message, e.loc.file, line, col)
    out.json_path = where  # type: ignore[attr-defined]
    return out


def _split_glb(data: bytes, path: str) -> tuple[bytes, bytes | None]:
    """The JSON and BIN chunks of a GLB container (the checks pygltflib does not report clearly)."""
    if len(data) < 20:
        raise _err(path, "", f"corrupt .glb: {len(data)} bytes, shorter than the 20-byte GLB header")
    magic, version, length = struct.unpack_from("<4sII", data, 0)
    if magic != _GLB_MAGIC:
        raise _err(path, "", f"corrupt .glb: magic is {magic!r}, not b'glTF'")
    if version != 2:
        raise _err(path, "", f"unsupported GLB version {version} (drawopt reads glTF 2.0)")
    if length != len(data):
        raise _err(path, "", f"corrupt .glb: header says {length} bytes, the file has {len(data)}")
    chunks: list[tuple[int, bytes]] = []
    pos = 12
    while pos < len(data):
        if pos + 8 > len(data):
            raise _err(path, "", f"corrupt .glb: truncated chunk header at byte {pos}")
        clen, ctype = struct.unpack_from("<II", data, pos)
        if pos + 8 + clen > len(data):
            raise _err(path, "", f"corrupt .glb: chunk at byte {pos} claims {clen} bytes past the end of the file")
        chunks.append((ctype, data[pos + 8:pos + 8 + clen]))
        pos += 8 + clen + (-clen % 4 if pos + 8 + clen < len(data) else 0)
    if not chunks or chunks[0][0] != _CHUNK_JSON:
        raise _err(path, "", "corrupt .glb: the first chunk is not JSON")
    binchunk = next((c for t, c in chunks[1:] if t == _CHUNK_BIN), None)
    return chunks[0][1], binchunk


def _parse_json(text: bytes, path: str) -> dict[str, Any]:
    try:
        doc = json.loads(text.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise _err(path, "", f"the glTF JSON is not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise _err(path, "", f"invalid JSON: {e.msg}", e.lineno, e.colno) from None
    if not isinstance(doc, dict):
        raise _err(path, "", "the glTF JSON must be an object")
    return doc


# ------------------------------------------------------------------------------------- document checks
_ARRAYS = ("accessors", "bufferViews", "buffers", "meshes", "nodes", "scenes", "materials", "textures",
           "images", "cameras", "samplers", "skins", "animations")


class _Checker:
    def __init__(self, doc: dict[str, Any], path: str):
        self.doc, self.path = doc, path

    def fail(self, where: str, message: str) -> InputError:
        return _err(self.path, where, message)

    def typed(self, obj: Any, key: str, kind: type | tuple[type, ...], where: str, required: bool = False) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where, "must be an object")
        if key not in obj:
            if required:
                raise self.fail(f"{where}.{key}" if where else key, "is required")
            return None
        v = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds)
        if not ok:
            names = " or ".join({int: "an integer", float: "a number", str: "a string", list: "an array",
                                 dict: "an object", bool: "a boolean"}[k] for k in kinds)
            raise self.fail(f"{where}.{key}" if where else key, f"must be {names}, got {json.dumps(v)[:40]}")
        return v

    def index(self, obj: Any, key: str, array: str, where: str, required: bool = False) -> int | None:
        v = self.typed(obj, key, int, where, required)
        if v is None:
            return None
        n = len(self.doc.get(array) or [])
        if not 0 <= v < n:
            kind = array[:-1] if array != "bufferViews" else "bufferView"
            raise self.fail(f"{where}.{key}" if where else key, f"{kind} {v} does not exist (the file has {n} {array})")
        return v

    def numbers(self, obj: dict[str, Any], key: str, n: int, where: str) -> None:
        v = self.typed(obj, key, list, where)
        if v is not None and (len(v) != n or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                      for x in v)):
            raise self.fail(f"{where}.{key}", f"must be {n} numbers")


def check_document(doc: dict[str, Any], path: str) -> None:
    """Check the types and references of every field the importer reads; raise ``InputError`` at its path.

    Also rejects a glTF version other than 2.x and required extensions the engine model does not
    implement (:data:`SUPPORTED_EXTENSIONS`).
    """
    c = _Checker(doc, path)
    asset = c.typed(doc, "asset", dict, "", required=True)
    version = c.typed(asset, "version", str, "asset", required=True)
    if not version.startswith("2."):
        raise c.fail("asset.version", f"glTF {version} is not supported (drawopt reads glTF 2.0)")
    for a in _ARRAYS:
        arr = c.typed(doc, a, list, "")
        for i, item in enumerate(arr or []):
            if not isinstance(item, dict):
                raise c.fail(f"{a}[{i}]", "must be an object")
    for i, e in enumerate(c.typed(doc, "extensionsUsed", list, "") or []):
        if not isinstance(e, str):
            raise c.fail(f"extensionsUsed[{i}]", "must be a string")
    for i, e in enumerate(c.typed(doc, "extensionsRequired", list, "") or []):
        if not isinstance(e, str):
            raise c.fail(f"extensionsRequired[{i}]", "must be a string")
        if e not in SUPPORTED_EXTENSIONS:
            raise c.fail(f"extensionsRequired[{i}]", f"required extension {e} is not supported "
                                                     f"(drawopt implements {', '.join(sorted(SUPPORTED_EXTENSIONS))})")
    for i, b in enumerate(doc.get("buffers") or []):
        w = f"buffers[{i}]"
        n = c.typed(b, "byteLength", int, w, required=True)
        if not 0 <= n < 2**62:
            raise c.fail(f"{w}.byteLength", f"must be in 0..2^62-1, got {n}")
        c.typed(b, "uri", str, w)
    for i, bv in enumerate(doc.get("bufferViews") or []):
        w = f"bufferViews[{i}]"
        b = c.index(bv, "buffer", "buffers", w, required=True)
        off = c.typed(bv, "byteOffset", int, w) or 0
        n = c.typed(bv, "byteLength", int, w, required=True)
        stride = c.typed(bv, "byteStride", int, w)
        if off < 0 or n < 0 or off + n > doc["buffers"][b]["byteLength"]:
            raise c.fail(w, f"bytes [{off}, {off + n}) lie outside buffer {b} "
                            f"({doc['buffers'][b]['byteLength']} bytes)")
        if stride is not None and not (4 <= stride <= 252 and stride % 4 == 0):
            raise c.fail(f"{w}.byteStride", f"must be a multiple of 4 in 4..252, got {stride}")
    for i, a in enumerate(doc.get("accessors") or []):
        w = f"accessors[{i}]"
        bvi = c.index(a, "bufferView", "bufferViews", w)
        ct = c.typed(a, "componentType", int, w, required=True)
        if ct not in COMPONENT_BYTES:
            raise c.fail(f"{w}.componentType", f"unknown component type {ct}")
        count = c.typed(a, "count", int, w, required=True)
        if not 1 <= count <= 0xFFFFFFFF:
            raise c.fail(f"{w}.count", f"must be in 1..2^32-1 (a D3D12 draw count), got {count}")
        typ = c.typed(a, "type", str, w, required=True)
        if typ not in TYPE_COMPONENTS:
            raise c.fail(f"{w}.type", f"unknown accessor type {typ!r}")
        off = c.typed(a, "byteOffset", int, w) or 0
        c.typed(a, "normalized", bool, w)
        for k in ("min", "max"):
            c.numbers(a, k, TYPE_COMPONENTS[typ], w) if k in a else None
        if bvi is not None:
            bv = doc["bufferViews"][bvi]
            size = COMPONENT_BYTES[ct] * TYPE_COMPONENTS[typ]
            stride = bv.get("byteStride") or size
            end = off + stride * (count - 1) + size
            if off < 0 or end > bv["byteLength"]:
                raise c.fail(w, f"{count} elements of {size} bytes (stride {stride}) at byte {off} need "
                                f"{end} bytes; bufferViews[{bvi}] has {bv['byteLength']}")
            if (off + (bv.get("byteOffset") or 0)) % COMPONENT_BYTES[ct]:
                raise c.fail(f"{w}.byteOffset", f"is not a multiple of the component size {COMPONENT_BYTES[ct]}")
    for i, m in enumerate(doc.get("meshes") or []):
        prims = c.typed(m, "primitives", list, f"meshes[{i}]", required=True)
        for j, p in enumerate(prims):
            w = f"meshes[{i}].primitives[{j}]"
            attrs = c.typed(p, "attributes", dict, w, required=True)
            for name in attrs:
                c.index(attrs, name, "accessors", f"{w}.attributes")
            if "POSITION" not in attrs:
                raise c.fail(f"{w}.attributes", "has no POSITION")
            ii = c.index(p, "indices", "accessors", w)
            if ii is not None:
                ia = doc["accessors"][ii]
                if ia["type"] != "SCALAR" or ia["componentType"] not in (5121, 5123, 5125):
                    raise c.fail(f"{w}.indices", f"accessor {ii} is not an unsigned SCALAR "
                                                 f"(type {ia['type']}, componentType {ia['componentType']})")
            c.index(p, "material", "materials", w)
            mode = c.typed(p, "mode", int, w)
            if mode is not None and not 0 <= mode <= 6:
                raise c.fail(f"{w}.mode", f"unknown primitive mode {mode}")
    for i, mat in enumerate(doc.get("materials") or []):
        w = f"materials[{i}]"
        mode = c.typed(mat, "alphaMode", str, w)
        if mode is not None and mode not in ("OPAQUE", "MASK", "BLEND"):
            raise c.fail(f"{w}.alphaMode", f"must be OPAQUE, MASK or BLEND, got {mode!r}")
        c.typed(mat, "doubleSided", bool, w)
        c.typed(mat, "alphaCutoff", (int, float), w)
        c.typed(mat, "extensions", dict, w)
        c.numbers(mat, "emissiveFactor", 3, w)
        pw = f"{w}.pbrMetallicRoughness"
        pbr = c.typed(mat, "pbrMetallicRoughness", dict, w) or {}
        c.numbers(pbr, "baseColorFactor", 4, pw)
        c.typed(pbr, "metallicFactor", (int, float), pw)
        c.typed(pbr, "roughnessFactor", (int, float), pw)
        for tk, owner, ow in (("baseColorTexture", pbr, pw), ("metallicRoughnessTexture", pbr, pw),
                              ("normalTexture", mat, w), ("occlusionTexture", mat, w), ("emissiveTexture", mat, w)):
            t = c.typed(owner, tk, dict, ow)
            if t is not None:
                tw = f"{ow}.{tk}"
                c.index(t, "index", "textures", tw, required=True)
                tt = (c.typed(t, "extensions", dict, tw) or {}).get("KHR_texture_transform")
                if tt is not None:
                    xw = f"{tw}.extensions.KHR_texture_transform"
                    c.typed(t["extensions"], "KHR_texture_transform", dict, f"{tw}.extensions")
                    c.numbers(tt, "offset", 2, xw)
                    c.typed(tt, "rotation", (int, float), xw)
                    c.numbers(tt, "scale", 2, xw)
    for i, n in enumerate(doc.get("nodes") or []):
        w = f"nodes[{i}]"
        c.index(n, "mesh", "meshes", w)
        c.index(n, "camera", "cameras", w)
        for j, ch in enumerate(c.typed(n, "children", list, w) or []):
            if not isinstance(ch, int) or isinstance(ch, bool) or not 0 <= ch < len(doc["nodes"]):
                raise c.fail(f"{w}.children[{j}]", f"node {json.dumps(ch)} does not exist")
        if "matrix" in n:
            c.numbers(n, "matrix", 16, w)
        for k, sz in (("translation", 3), ("rotation", 4), ("scale", 3)):
            if k in n:
                c.numbers(n, k, sz, w)
        inst = (c.typed(n, "extensions", dict, w) or {}).get("EXT_mesh_gpu_instancing")
        if inst is not None:
            iw = f"{w}.extensions.EXT_mesh_gpu_instancing"
            attrs = c.typed(inst, "attributes", dict, iw, required=True)
            counts = {doc["accessors"][c.index(attrs, k, "accessors", f"{iw}.attributes")]["count"]  # type: ignore[index]
                      for k in attrs}
            if len(counts) > 1:
                raise c.fail(f"{iw}.attributes", f"accessors of different counts {sorted(counts)}")
    for i, s in enumerate(doc.get("scenes") or []):
        for j, r in enumerate(c.typed(s, "nodes", list, f"scenes[{i}]") or []):
            if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < len(doc.get("nodes") or []):
                raise c.fail(f"scenes[{i}].nodes[{j}]", f"node {json.dumps(r)} does not exist")
    c.index(doc, "scene", "scenes", "")
    for i, cam in enumerate(doc.get("cameras") or []):
        if cam.get("type") not in ("perspective", "orthographic"):
            raise c.fail(f"cameras[{i}].type", f"must be perspective or orthographic, got {cam.get('type')!r}")


def _data_uri(uri: str, path: str, where: str) -> bytes:
    """The bytes of a ``data:`` URI (pygltflib decodes only ``application/octet-stream``; glTF also
    allows ``application/gltf-buffer``)."""
    import base64
    import binascii
    from urllib.parse import unquote_to_bytes

    header, comma, payload = uri.partition(",")
    if not comma:
        raise _err(path, where, "invalid data URI: no ',' before the data")
    if header.endswith(";base64"):
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error as e:
            raise _err(path, where, f"invalid base64 in the data URI: {e}") from None
    return unquote_to_bytes(payload)


def _accessors_of_buffer(doc: dict[str, Any], b: int) -> str | None:
    """The JSON path of the first primitive attribute or index accessor that reads buffer ``b``."""
    views = doc.get("bufferViews") or []
    accs = doc.get("accessors") or []

    def reads(a: int | None) -> bool:
        return a is not None and accs[a].get("bufferView") is not None and views[accs[a]["bufferView"]]["buffer"] == b

    for i, m in enumerate(doc.get("meshes") or []):
        for j, p in enumerate(m["primitives"]):
            w = f"meshes[{i}].primitives[{j}]"
            if reads(p.get("indices")):
                return f"{w}.indices (accessor {p['indices']})"
            for k, a in p["attributes"].items():
                if reads(a):
                    return f"{w}.attributes.{k} (accessor {a})"
    return None


def read_gltf(path: str, json_only: bool = False) -> GltfFile:
    """Read and check ``path`` (``.gltf`` or ``.glb``); load its buffers unless ``json_only``.

    A buffer whose file is missing is an error when an accessor the importer uses reads it (the
    message names the buffer's ``uri``, the accessor and ``--json-only``); with ``json_only``
    nothing but the JSON is read and counts and formats come from the accessors.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path) from None
    binary = data[:4] == _GLB_MAGIC or path.lower().endswith(".glb")
    binchunk = None
    if binary:
        text, binchunk = _split_glb(data, path)
    else:
        text = data
    doc = _parse_json(text, path)
    jtext = None if binary else text.decode("utf-8-sig")
    try:
        f = _read_checked(path, doc, binary, binchunk, json_only)
    except InputError as e:
        raise _located(e, jtext) from None
    f.text = jtext
    return f


def _read_checked(path: str, doc: dict[str, Any], binary: bool, binchunk: bytes | None, json_only: bool) -> GltfFile:
    import pygltflib

    check_document(doc, path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gltf = pygltflib.GLTF2.from_dict(doc)
    except Exception as e:  # pygltflib raises whatever its dataclass constructors raise
        raise InputError(f"pygltflib cannot read the document: {type(e).__name__}: {e}", path) from None
    buffers: list[bytes | None] = []
    missing: dict[int, str] = {}
    base = os.path.dirname(os.path.abspath(path))
    for i, b in enumerate(doc.get("buffers") or []):
        uri = b.get("uri")
        blob: bytes | None = None
        if json_only:
            pass
        elif uri is None:
            if not binary or i != 0:
                raise _err(path, f"buffers[{i}]", "has no uri (only a .glb's first buffer may omit it)")
            if binchunk is None:
                raise _err(path, "buffers[0]", "the .glb has no BIN chunk")
            blob = binchunk
        elif uri.startswith("data:"):
            blob = _data_uri(uri, path, f"buffers[{i}].uri")
        else:
            from urllib.parse import unquote
            fname = os.path.join(base, unquote(uri))
            try:
                with open(fname, "rb") as f:
                    blob = f.read()
            except OSError:
                missing[i] = uri
        if blob is not None and len(blob) < b["byteLength"]:
            raise _err(path, f"buffers[{i}]", f"byteLength is {b['byteLength']} but the data has {len(blob)} bytes")
        buffers.append(blob)
    for i, uri in missing.items():
        user = _accessors_of_buffer(doc, i)
        if user is not None:
            raise _err(path, f"buffers[{i}].uri", f"buffer file '{uri}' not found; {user} reads it "
                                                   "(--json-only imports from the JSON alone)")
    return GltfFile(path, doc, gltf, buffers, missing, binary)
