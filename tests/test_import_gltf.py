"""glTF import (drawopt.importers.gltf): counts against the JSON, the engine model's order, contracts,
the rewrite they allow, and bad input.

Real scenes come from Debian's ``assimp-testmodels`` (``.ci/install-system.sh``) and are skipped
when it is not installed; the small scenes written here keep CI's coverage without it. The expected
counts are computed from the JSON by this file's own reader, not by the importer's code.
"""

from __future__ import annotations

import base64
import json
import os
import struct

import numpy as np
import pytest

from drawopt.cli import main
from drawopt.errors import InputError
from drawopt.importers import importer_kind
from drawopt.importers.gltf import import_gltf, import_scene
from drawopt.ir.formats import load

pytest.importorskip("pygltflib")

MODELS = "/usr/share/assimp/models/glTF2"
REAL = ["2CylinderEngine-glTF-Binary/2CylinderEngine.glb", "BoxTextured-glTF/BoxTextured.gltf",
        "ClearCoat-glTF/ClearCoatTest.gltf", "textureTransform/TextureTransformTest.gltf", "cameras/Cameras.gltf",
        "issue_3269/texcoord_crash.gltf", "simple_skin/simple_skin.gltf",
        *(f"glTF-Asset-Generator/Mesh_PrimitiveMode/Mesh_PrimitiveMode_{i:02d}.gltf" for i in (2, 5, 9, 12))]
DRAWS = ("DrawIndexedInstanced", "DrawInstanced")


# ------------------------------------------------------------------------------ independent counting
def read_json(path: str) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"glTF":
        n = struct.unpack_from("<I", data, 12)[0]
        return json.loads(data[20:20 + n])
    return json.loads(data)


def expected_counts(doc: dict) -> dict:
    """Draws, distinct materials and indices of the default scene, from the JSON alone (fans and loops
    as the engine converts them)."""
    draws = indices = 0
    mats = set()
    scene = doc["scenes"][doc.get("scene", 0)]
    stack = list(reversed(scene.get("nodes", [])))
    while stack:
        node = doc["nodes"][stack.pop()]
        stack.extend(reversed(node.get("children", [])))
        if "mesh" not in node:
            continue
        for p in doc["meshes"][node["mesh"]]["primitives"]:
            draws += 1
            mats.add(p.get("material"))
            mode = p.get("mode", 4)
            n = doc["accessors"][p["indices"] if "indices" in p else p["attributes"]["POSITION"]]["count"]
            if mode == 6:  # fans are drawn as lists: 3 indices per triangle
                indices += 3 * max(n - 2, 0)
            elif mode == 2:  # loops as strips closed by the first index
                indices += n + 1
            elif "indices" in p:
                indices += n
    return {"draws": draws, "materials": len(mats), "indices": indices}


def stream_counts(stream) -> dict:
    draws = indices = 0
    tables = set()
    table = None
    for c in stream.commands():
        if c.name == "SetGraphicsRootDescriptorTable" and c.args[0] == 1:
            table = c.args[1]
        elif c.name in DRAWS:
            draws += 1
            tables.add(table)
            if c.name == "DrawIndexedInstanced":
                indices += c.args[0]
    return {"draws": draws, "materials": len(tables), "indices": indices}


@pytest.mark.parametrize("rel", REAL)
def test_real_scene_counts_match_the_json(rel):
    path = os.path.join(MODELS, rel)
    if not os.path.exists(path):
        pytest.skip("assimp-testmodels not installed (sh .ci/install-system.sh)")
    s = import_gltf(path)
    assert stream_counts(s) == expected_counts(read_json(path))


# ------------------------------------------------------------------------------ small scenes written here
def write_scene(tmp_path, nodes, meshes, materials=(), name="s.gltf", extra=None, cameras=None, bin_file=True):
    """A scene whose meshes are each one triangle primitive (3 f32x3 positions, 3 u16 indices)."""
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()
    idx = np.array([0, 1, 2, 0], np.uint16).tobytes()  # padded to 8 bytes
    blob = pos + idx
    doc = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": list(range(len(nodes)))}], "nodes": nodes,
           "meshes": meshes, "materials": list(materials),
           "buffers": [{"byteLength": len(blob), "uri": "s.bin" if bin_file else
                        "data:application/gltf-buffer;base64," + base64.b64encode(blob).decode()}],
           "bufferViews": [{"buffer": 0, "byteLength": 36}, {"buffer": 0, "byteOffset": 36, "byteLength": 6}],
           "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                          "min": [0, 0, 0], "max": [1, 1, 0]},
                         {"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"}]}
    if cameras:
        doc["cameras"] = cameras
    doc.update(extra or {})
    if bin_file:
        (tmp_path / "s.bin").write_bytes(blob)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def tri_mesh(material=None, mode=None):
    p = {"attributes": {"POSITION": 0}, "indices": 1}
    if material is not None:
        p["material"] = material
    if mode is not None:
        p["mode"] = mode
    return {"primitives": [p]}


def draw_matrices(stream):
    """The translation (x, y, z) of the world matrix each draw sees, in draw order."""
    out, cur = [], None
    for c in stream.commands():
        if c.name == "SetGraphicsRoot32BitConstants" and c.args[0] == 0:
            cur = np.array(c.var, np.uint32).view(np.float32)[12:15].tolist()
        elif c.name in DRAWS:
            out.append(cur)
    return out


def test_small_scene_counts_and_order(tmp_path):
    mats = [{"alphaMode": "BLEND"}, {"alphaMode": "MASK"}, {}]
    nodes = [{"mesh": 0, "translation": [0, 0, -1]}, {"mesh": 1, "translation": [1, 0, 0]},
             {"mesh": 0, "translation": [0, 0, -9]}, {"mesh": 2, "translation": [2, 0, 0]},
             {"mesh": 0, "translation": [0, 0, -5]}, {"mesh": 3, "translation": [3, 0, 0]}]
    path = write_scene(tmp_path, nodes, [tri_mesh(0), tri_mesh(1), tri_mesh(2), tri_mesh()], mats)
    r = import_scene(path)
    assert stream_counts(r.stream) == expected_counts(read_json(path)) == {"draws": 6, "materials": 4, "indices": 18}
    # opaque (scene order), alpha-tested, then blended back to front (no camera: from the origin down -Z)
    assert [m[:1] + m[2:] for m in draw_matrices(r.stream)] == [[2, 0], [3, 0], [1, 0], [0, -9], [0, -5], [0, -1]]
    assert r.contracts == () and all(not d.contract for d in r.stream.decls if d.kind == "pipeline")


def test_camera_orders_blended_draws(tmp_path, capsys):
    cam = {"type": "perspective", "perspective": {"yfov": 1, "znear": 0.1}}
    nodes = [{"mesh": 0, "translation": [0, 0, -1]}, {"mesh": 0, "translation": [0, 0, -9]},
             {"camera": 0, "translation": [0, 0, -10], "rotation": [0, 1, 0, 0], "name": "back"},
             {"camera": 1, "translation": [0, 0, 10], "name": "front"}]
    path = write_scene(tmp_path, nodes, [tri_mesh(0)], [{"alphaMode": "BLEND"}], cameras=[cam, cam])
    # the first camera placed: at z=-10 looking toward +Z, so the node at z=-1 is the farther one
    assert [m[2] for m in draw_matrices(import_gltf(path))] == [-1, -9]
    # --camera (an index or a node name): at z=+10 looking down -Z
    assert [m[2] for m in draw_matrices(import_gltf(path, camera=1))] == [-9, -1]
    assert [m[2] for m in draw_matrices(import_gltf(path, camera="front"))] == [-9, -1]
    out = tmp_path / "o.dstream"
    assert main(["import", path, "-o", str(out), "--camera", "side"]) == 2
    assert "no camera 'side' in the scene" in capsys.readouterr().err and not out.exists()


def test_instancing_extension_gives_instanced_draws(tmp_path):
    trs = np.zeros((4, 3), np.float32).tobytes()
    path = write_scene(tmp_path, [{"mesh": 0, "extensions": {"EXT_mesh_gpu_instancing": {
        "attributes": {"TRANSLATION": 2}}}}], [tri_mesh()],
        extra={"extensionsUsed": ["EXT_mesh_gpu_instancing"], "extensionsRequired": ["EXT_mesh_gpu_instancing"]})
    doc = json.loads(open(path).read())
    doc["buffers"].append({"byteLength": len(trs), "uri": "data:application/octet-stream;base64,"
                           + base64.b64encode(trs).decode()})
    doc["bufferViews"].append({"buffer": 1, "byteLength": len(trs)})
    doc["accessors"].append({"bufferView": 2, "componentType": 5126, "count": 4, "type": "VEC3"})
    open(path, "w").write(json.dumps(doc))
    draws = [c for c in import_gltf(path).commands() if c.name in DRAWS]
    assert [(c.name, c.args[0], c.args[1]) for c in draws] == [("DrawIndexedInstanced", 3, 4)]


def test_u8_indices_are_widened(tmp_path):
    path = write_scene(tmp_path, [{"mesh": 0}], [tri_mesh()])
    doc = json.loads(open(path).read())
    doc["accessors"][1]["componentType"] = 5121
    open(path, "w").write(json.dumps(doc))
    s = import_gltf(path)
    ib = [c for c in s.commands() if c.name == "IASetIndexBuffer"]
    assert [(s.decls[c.args[0]].name, c.args[1]) for c in ib] == [("u8_indices", "R16_UINT")]
    # the view's first 3 bytes (0, 0, 1: the low bytes of u16 0, 1) widened to u16 pairs in 32-bit words
    assert s.decls[s.decls.ref("u8_indices", ("buffer",))].data.tolist() == [0, 1]


def test_json_only_and_missing_buffer(tmp_path, capsys):
    path = write_scene(tmp_path, [{"mesh": 0}], [tri_mesh()])
    os.remove(tmp_path / "s.bin")
    out = tmp_path / "o.dstream"
    assert main(["import", path, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:") and "error: buffers[0].uri: buffer file 's.bin' not found" in err
    assert "indices" in err
    assert not out.exists()
    assert main(["import", path, "-o", str(out), "--json-only", "-q"]) == 0
    assert stream_counts(load(str(out)))["draws"] == 1


def test_bad_input_names_file_and_json_path(tmp_path, capsys):
    good = write_scene(tmp_path, [{"mesh": 0}], [tri_mesh()], bin_file=False)
    out = tmp_path / "o.dstream"
    cases = []
    glb = tmp_path / "bad.glb"
    glb.write_bytes(b"glTF" + struct.pack("<II", 2, 999) + b"\0" * 12)
    cases.append((str(glb), "corrupt .glb: header says 999 bytes, the file has 24"))
    doc = json.loads(open(good).read())
    doc["extensionsRequired"] = ["KHR_draco_mesh_compression"]
    req = tmp_path / "req.gltf"
    req.write_text(json.dumps(doc))
    cases.append((str(req), "extensionsRequired[0]: required extension KHR_draco_mesh_compression is not supported"))
    doc = json.loads(open(good).read())
    doc["meshes"][0]["primitives"][0]["indices"] = 7
    ref = tmp_path / "ref.gltf"
    ref.write_text(json.dumps(doc, indent=1))
    cases.append((str(ref), "meshes[0].primitives[0].indices: accessor 7 does not exist"))
    doc = json.loads(open(good).read())
    doc["nodes"] = [{"mesh": 0, "children": [0]}]
    cyc = tmp_path / "cyc.gltf"
    cyc.write_text(json.dumps(doc))
    cases.append((str(cyc), "nodes[0].children[0]: node 0 is reached twice"))
    js = tmp_path / "syntax.gltf"
    js.write_text('{"asset": {"version": "2.0"},\n  "nodes": [}')
    cases.append((str(js), "2:13: error: invalid JSON"))
    for path, msg in cases:
        assert main(["import", path, "-o", str(out)]) == 2, path
        err = capsys.readouterr().err
        assert err.startswith(path + ":") and msg in err and "Traceback" not in err, err
        assert not out.exists()
    # a .gltf error points at the value: line and column of the path in the text
    assert main(["import", str(ref), "-o", str(out)]) == 2
    line, col = (int(v) for v in capsys.readouterr().err.split(":")[1:3])
    assert ref.read_text().splitlines()[line - 1][col - 1:].startswith("7") and line > 1


def test_extension_not_required_is_a_note(tmp_path, capsys):
    path = write_scene(tmp_path, [{"mesh": 0}], [tri_mesh()], extra={"extensionsUsed": ["KHR_materials_sheen"]})
    out = tmp_path / "o.dstream"
    assert main(["import", path, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "note: extension KHR_materials_sheen is not required and not implemented: ignored" in text
    assert "contracts: none" in text.splitlines()[0]


def test_contracts_only_on_request(tmp_path):
    path = write_scene(tmp_path, [{"mesh": 0}], [tri_mesh()])
    s = import_gltf(path, per_draw_transforms=True, bindless=True, no_primitive_id=True)
    (p,) = [d for d in s.decls if d.kind == "pipeline"]
    assert set(p.contract.names) == {"draw_data", "no_primitive_id"}
    assert p.contract.draw_data.lift_text == "+".join([f"0.{k}" for k in range(16)] + ["1.0"])


@pytest.mark.parametrize("target", ["d3d12", "vulkan"])
def test_default_pipeline_batches_every_node_and_verifies(tmp_path, target):
    """Three nodes, two materials: one multi-draw with per-draw matrices (and bindless tables), verified."""
    from drawopt.analysis.costmodel import default_pipeline
    from drawopt.result import optimize
    from drawopt.stats import compute_stats
    from drawopt.verify import verify

    nodes = [{"mesh": i % 2, "translation": [i, 0, 0]} for i in range(3)]
    path = write_scene(tmp_path, nodes, [tri_mesh(0), tri_mesh(1)], [{}, {"doubleSided": False}])
    plain = import_gltf(path)
    assert compute_stats(optimize(plain, default_pipeline(target), target=target).stream)["draw_calls"] == 3
    s = import_gltf(path, per_draw_transforms=True, bindless=True, vertex_pulling=True)
    out = optimize(s, default_pipeline(target), target=target, verify_each=True).stream
    assert compute_stats(out)["draw_calls"] == 1
    assert verify(s, out).equivalent
    # the nodes keep their transforms: they travel in the per-draw array, the glTF buffers are untouched
    assert {d.name for d in out.decls if d.kind == "buffer"} - {d.name for d in s.decls if d.kind == "buffer"} \
        <= {"mdi_args0", "mdi_perdraw0"}


def test_importer_kind():
    assert importer_kind("a/B.GLB") == "scene" and importer_kind("x.gltf") == "scene"


def test_engine_beats_gltfpack_with_every_node_kept(tmp_path):
    """2CylinderEngine: the vertex-pulling engine with every flag is at most gltfpack -mm's draw calls
    (counted here from gltfpack's output JSON), verified, and adds no buffer but the generated arrays."""
    import shutil
    import subprocess

    from drawopt.analysis.costmodel import default_pipeline
    from drawopt.result import optimize
    from drawopt.stats import compute_stats
    from drawopt.verify import verify

    path = os.path.join(MODELS, "2CylinderEngine-glTF-Binary/2CylinderEngine.glb")
    if not os.path.exists(path) or shutil.which("gltfpack") is None:
        pytest.skip("assimp-testmodels or gltfpack not installed (sh .ci/install-system.sh)")
    packed = tmp_path / "mm.gltf"
    subprocess.run(["gltfpack", "-i", path, "-o", str(packed), "-mm"], check=True, capture_output=True)
    gltfpack_draws = expected_counts(read_json(str(packed)))["draws"]
    s = import_gltf(path, per_draw_transforms=True, bindless=True, no_primitive_id=True, vertex_pulling=True)
    for target in ("d3d12", "vulkan"):
        out = optimize(s, default_pipeline(target), target=target).stream
        assert verify(s, out).equivalent
        assert compute_stats(out)["draw_calls"] <= gltfpack_draws < 115
        assert {d.name for d in out.decls if d.kind == "buffer"} - {d.name for d in s.decls if d.kind == "buffer"} \
            <= {"mdi_args0", "mdi_perdraw0"}


def test_verifier_sees_a_node_that_lost_its_transform(tmp_path):
    """The per-draw records carry each node's matrix: change one word of one record and verify fails."""
    from drawopt.analysis.costmodel import default_pipeline
    from drawopt.result import optimize
    from drawopt.verify import verify

    nodes = [{"mesh": 0, "translation": [i, 0, 0]} for i in range(4)]
    path = write_scene(tmp_path, nodes, [tri_mesh()])
    s = import_gltf(path, per_draw_transforms=True)
    out = optimize(s, default_pipeline("vulkan"), target="vulkan").stream
    arr = out.decls[out.decls.ref("mdi_perdraw0", ("buffer",))]
    assert verify(s, out).equivalent
    stride = 2 + 16  # [base_vertex, start_instance, 16 matrix words]
    assert np.asarray(arr.data).view(np.float32)[stride + 2 + 12] == 1.0  # node 1's x translation
    arr.data = np.array(arr.data, np.uint32)
    arr.data[stride + 2 + 12] = np.float32(5.0).view(np.uint32)
    assert not verify(s, out).equivalent


RICH = {"nodes": [{"mesh": 0, "rotation": [0, 0, 0, 1], "scale": [1, 1, 1], "children": [1], "name": "a"},
                  {"mesh": 1, "matrix": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]},
                  {"camera": 0, "translation": [0, 0, 5]}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0, "NORMAL": 2}, "indices": 1, "material": 0,
                                    "mode": 4}]},
                   {"primitives": [{"attributes": {"POSITION": 0}, "mode": 6, "material": 1}]}],
        "materials": [{"alphaMode": "BLEND", "doubleSided": True, "alphaCutoff": 0.5, "emissiveFactor": [0, 0, 0],
                       "extensions": {"KHR_materials_unlit": {}},
                       "pbrMetallicRoughness": {"baseColorFactor": [1, 1, 1, 1], "metallicFactor": 0,
                                                "roughnessFactor": 1, "baseColorTexture": {
                                                    "index": 0, "extensions": {"KHR_texture_transform": {
                                                        "offset": [0, 0], "rotation": 0, "scale": [1, 1]}}}}},
                      {"alphaMode": "MASK", "normalTexture": {"index": 0}}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                       "min": [0, 0, 0], "max": [1, 1, 0]},
                      {"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"},
                      {"componentType": 5126, "count": 3, "type": "VEC3"}],
        "textures": [{}], "cameras": [{"type": "perspective", "perspective": {"yfov": 1, "znear": 0.1}}],
        "extensionsUsed": ["KHR_materials_unlit", "KHR_texture_transform"]}


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,)
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield path + (i,)
            yield from _leaves(v, path + (i,))


@pytest.mark.parametrize("bad", ["x", -1, 1 << 40, 1 << 70, 0.5, [], {}, None, True])
def test_any_bad_value_is_an_input_error(tmp_path, bad):
    """Every field of a scene that uses every feature, replaced by a wrong value: an import or an
    InputError (never another exception)."""
    from drawopt.errors import DrawoptError

    path = write_scene(tmp_path, RICH["nodes"][:2], RICH["meshes"], RICH["materials"], extra=RICH,
                       cameras=RICH["cameras"])
    base = json.loads(open(path).read())
    base["scenes"] = [{"nodes": [0, 2]}]
    for leaf in list(_leaves(base)):
        doc = json.loads(json.dumps(base))
        obj = doc
        for k in leaf[:-1]:
            obj = obj[k]
        obj[leaf[-1]] = bad
        p = tmp_path / "bad.gltf"
        p.write_text(json.dumps(doc))
        try:
            import_scene(str(p))
        except DrawoptError:
            pass
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{'.'.join(map(str, leaf))} = {bad!r}: {type(e).__name__}: {e}")


def test_count_past_a_draw_argument_is_an_input_error(tmp_path):
    """An accessor without a buffer view (zeros) may claim any count: past 2^32-1 no draw can hold it."""
    doc = {"asset": {"version": "2.0"}, "scenes": [{"nodes": [0]}], "nodes": [{"mesh": 0}],
           "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
           "accessors": [{"componentType": 5126, "count": 1 << 40, "type": "VEC3"}]}
    p = tmp_path / "z.gltf"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"accessors\[0\]\.count: must be in 1\.\.2\^32-1"):
        import_scene(str(p))


def test_bench_rows_on_a_written_folder(tmp_path, capsys):
    """bench/gltf_vs_gltfpack.py on a folder of two written scenes (one bad): every drawopt
    configuration verified, the bad file listed as rejected, the JSON has the table's fields."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "gltf_bench", Path(__file__).resolve().parent.parent / "bench" / "gltf_vs_gltfpack.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    nodes = [{"mesh": i % 2, "translation": [i, 0, 0]} for i in range(6)]
    write_scene(tmp_path, nodes, [tri_mesh(0), tri_mesh(1)], [{}, {}], bin_file=False)
    (tmp_path / "bad.glb").write_bytes(b"nope")
    out = tmp_path / "rows.json"
    bench.main([str(tmp_path), "--json", str(out)])
    rows = {r["file"]: r for r in json.loads(out.read_text())}
    assert "corrupt .glb" in rows["bad.glb"]["rejected"]
    cfgs = rows["s.gltf"]["drawopt"]
    assert set(cfgs) == set(bench.CONFIGS) and all(c["verified"] for c in cfgs.values())
    assert cfgs["pull+b vulkan"]["draw_calls"] == 1 and cfgs["pull+b vulkan"]["draws_in"] == 6
    assert "s.gltf" in capsys.readouterr().out


def test_more_vertex_attributes_than_input_slots_is_an_input_error(tmp_path):
    """D3D12 has 32 vertex-buffer slots: a primitive reading 33 attributes has no stream (the reader
    refuses slot 32), so the importer says so at the primitive instead of writing one."""
    attrs = {"POSITION": 0, **{f"_ATTR{k}": 0 for k in range(32)}}
    path = write_scene(tmp_path, [{"mesh": 0}], [{"primitives": [{"attributes": attrs, "indices": 1}]}])
    with pytest.raises(InputError, match=r"meshes\[0\]\.primitives\[0\]\.attributes.*33 vertex attributes.*32 "
                                         r"vertex-buffer slots"):
        import_scene(path)
    del attrs["_ATTR31"]
    assert import_scene(write_scene(tmp_path, [{"mesh": 0}], [{"primitives": [{"attributes": attrs,
                                                                               "indices": 1}]}])).stream
