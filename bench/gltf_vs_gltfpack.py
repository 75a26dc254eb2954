"""glTF scenes: drawopt's draw calls after the default pipeline next to gltfpack's.

For every ``.gltf`` / ``.glb`` under a folder (default: the ``assimp-testmodels`` install,
``/usr/share/assimp/models``): import it (``drawopt.importers.gltf``) with the engine's contract
flags, run the default pipeline (``drawopt.analysis.costmodel.default_pipeline``) for d3d12 and vulkan with
and without ``--bindless``, verify every output against the import (``drawopt.verify``), and put
the draw calls next to what ``gltfpack`` (meshoptimizer) writes by default, with ``-mm`` (merge
instances of a mesh: transforms baked) and ``-mi`` (EXT_mesh_gpu_instancing): its draw calls are
counted from the output file with pygltflib (one per primitive of every node with a mesh in the
scene; an instanced node is one draw per primitive).

drawopt configurations (all keep every node's transform: the matrices travel in the per-draw
array, and no vertex data is rewritten):

* ``layout``: the input-layout engine, ``--per-draw-transforms --no-primitive-id --bindless``;
* ``pull``: the vertex-pulling engine, ``--vertex-pulling --per-draw-transforms --no-primitive-id``
  on d3d12 and vulkan, then ``+ --bindless`` (``pull+b``).

    python bench/gltf_vs_gltfpack.py                      # the assimp-testmodels glTF 2.0 scenes
    python bench/gltf_vs_gltfpack.py DIR --json out.json  # another folder

Scenes where drawopt skips a primitive (``LINE_LOOP``, ``TRIANGLE_FAN``: no D3D12 topology) are
not compared (``-``). Files drawopt rejects (bad input, glTF 1.0, required extensions it does not implement) are listed
with the reason and take no part in the comparison. ``best`` is the fewest calls of a verified
drawopt configuration; ``ok`` says whether it is at most gltfpack's best of default/-mm/-mi; a row where a gltfpack
output has fewer triangles (or no draw where drawopt has one) says that gltfpack dropped geometry.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drawopt.analysis.costmodel import default_pipeline  # noqa: E402
from drawopt.errors import DrawoptError  # noqa: E402
from drawopt.importers.gltf import import_scene  # noqa: E402
from drawopt.result import optimize  # noqa: E402
from drawopt.stats import compute_stats  # noqa: E402
from drawopt.verify import verify  # noqa: E402

DEFAULT_DIR = "/usr/share/assimp/models"
BASE = {"per_draw_transforms": True, "no_primitive_id": True}
CONFIGS = {  # name -> (import options, target)
    "layout d3d12": ({**BASE, "bindless": True}, "d3d12"),
    "pull d3d12": ({**BASE, "vertex_pulling": True}, "d3d12"),
    "pull+b d3d12": ({**BASE, "vertex_pulling": True, "bindless": True}, "d3d12"),
    "pull vulkan": ({**BASE, "vertex_pulling": True}, "vulkan"),
    "pull+b vulkan": ({**BASE, "vertex_pulling": True, "bindless": True}, "vulkan"),
}
GLTFPACK = {"gltfpack": [], "-mm": ["-mm"], "-mi": ["-mi"]}


def gltf_draws(path: str) -> tuple[int, int]:
    """(draw calls, triangles) of a glTF file as an engine draws it: per node with a mesh, per primitive."""
    import pygltflib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = pygltflib.GLTF2().load(path)
    draws = tris = 0
    scene = g.scenes[g.scene or 0] if g.scenes else None
    stack = list(scene.nodes) if scene else []
    while stack:
        n = g.nodes[stack.pop()]
        stack.extend(n.children or [])
        if n.mesh is None:
            continue
        inst = (n.extensions or {}).get("EXT_mesh_gpu_instancing")
        k = g.accessors[next(iter(inst["attributes"].values()))].count if inst else 1
        for p in g.meshes[n.mesh].primitives:
            draws += 1
            mode = 4 if p.mode is None else p.mode
            count = g.accessors[p.indices].count if p.indices is not None else g.accessors[p.attributes.POSITION].count
            tris += k * (count // 3 if mode == 4 else max(count - 2, 0) if mode in (5, 6) else 0)
    return draws, tris


def run_gltfpack(path: str, tmp: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    exe = shutil.which("gltfpack")
    for name, flags in GLTFPACK.items():
        if exe is None:
            out[name] = None
            continue
        dst = os.path.join(tmp, f"out{len(out)}.glb")
        r = subprocess.run([exe, "-i", path, "-o", dst, *flags], capture_output=True, text=True, timeout=300)
        if r.returncode != 0 or not os.path.exists(dst):
            out[name] = {"error": (r.stderr or r.stdout).strip().splitlines()[-1:] or ["failed"]}
            continue
        d, t = gltf_draws(dst)
        out[name] = {"draws": d, "triangles": t}
    return out


def run_drawopt(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (opts, target) in CONFIGS.items():
        imp = import_scene(path, **opts)
        res = optimize(imp.stream, default_pipeline(target), target=target).stream
        v = verify(imp.stream, res)
        st = compute_stats(res, target=target)
        generated = sorted(d.name for d in res.decls if d.kind == "buffer"
                           and d.name not in {x.name for x in imp.stream.decls if x.kind == "buffer"})
        out[name] = {"draws_in": imp.draws, "draw_calls": st["draw_calls"], "verified": bool(v.equivalent),
                     "triangles": imp.triangles, "generated_buffers": generated,
                     "skipped": [n for n in imp.notes if "primitive skipped" in n]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=DEFAULT_DIR)
    ap.add_argument("--json", metavar="OUT.json", help="write the rows as JSON")
    args = ap.parse_args(argv)
    files = sorted(f for f in glob.glob(os.path.join(args.folder, "**", "*"), recursive=True)
                   if f.lower().endswith((".gltf", ".glb")))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            rel = os.path.relpath(f, args.folder)
            try:
                d = run_drawopt(f)
            except DrawoptError as e:
                rows.append({"file": rel, "rejected": str(e).split("error: ", 1)[-1]})
                continue
            g = run_gltfpack(f, tmp)
            ok_calls = [c["draw_calls"] for c in d.values() if c["verified"]]
            pack = [v["draws"] for v in g.values() if v and "draws" in v]
            best, pbest = (min(ok_calls) if ok_calls else None), (min(pack) if pack else None)
            skipped = next(iter(d.values()))["skipped"]
            first = next(iter(d.values()))
            dropped = [k for k, v in g.items() if v and "draws" in v
                       and (v["triangles"] < first["triangles"] or (v["draws"] == 0 < first["draws_in"]))]
            rows.append({"file": rel, "drawopt": d, "gltfpack": g, "best": best, "gltfpack_best": pbest,
                         "skipped": skipped, "gltfpack_dropped": dropped,
                         "ok": None if best is None or pbest is None or skipped else best <= pbest})
    head = ["scene", "draws", "tris"] + list(CONFIGS) + list(GLTFPACK) + ["best", "ok"]
    print(" | ".join(head))
    for r in rows:
        if "rejected" in r:
            print(f"{r['file']} | rejected: {r['rejected'][:100]}")
            continue
        d = r["drawopt"]
        first = next(iter(d.values()))
        cells = [r["file"], str(first["draws_in"]), str(first["triangles"])]
        cells += [f"{c['draw_calls']}{'' if c['verified'] else ' (NOT VERIFIED)'}" for c in d.values()]
        cells += [("-" if v is None else str(v["draws"]) if "draws" in v else "error") for v in r["gltfpack"].values()]
        cells += [str(r["best"]), {True: "yes", False: "NO", None: "-"}[r["ok"]]
                  + (" (drawopt skipped: " + "; ".join(r["skipped"]) + ")" if r["skipped"] else "")
                  + (" (gltfpack drops geometry: " + ", ".join(r["gltfpack_dropped"]) + ")"
                     if r["gltfpack_dropped"] else "")]
        print(" | ".join(cells))
    compared = [r for r in rows if r.get("ok") is not None]
    print(f"{len(compared)} scenes compared, {sum(r['ok'] for r in compared)} with drawopt <= gltfpack's best; "
          f"{sum('rejected' in r for r in rows)} rejected; every output verified: "
          f"{all(c['verified'] for r in rows if 'drawopt' in r for c in r['drawopt'].values())}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["ok"] is not False for r in compared) else 1


if __name__ == "__main__":
    sys.exit(main())
