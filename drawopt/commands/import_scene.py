"""``drawopt import SCENE.gltf|SCENE.glb -o OUT``: the scene half of the ``import`` subcommand.

``add_scene_arguments`` adds the scene options to the ``import`` parser (or an argument group of
it); ``run_scene`` imports, saves atomically and prints the import summary: draws, materials,
triangles, the contracts declared and, for each contract flag not given, what it would buy (the
lower bound on draw calls of the d3d12 default pipeline with the flag added, docs/passes.md).
"""

from __future__ import annotations

__all__ = ["add_scene_arguments", "run_scene", "scene_summary"]

import argparse
import json
import sys
from typing import Any

from ..errors import UsageError

#: command-line flag -> import_scene option
FLAG_OPTIONS = {"--per-draw-transforms": "per_draw_transforms", "--bindless": "bindless",
                "--no-primitive-id": "no_primitive_id", "--vertex-pulling": "vertex_pulling"}


def add_scene_arguments(p: Any) -> None:
    """The scene options of ``drawopt import`` (on a parser or an argument group)."""
    p.add_argument("--camera", help="glTF camera index or camera node name for the back-to-front sort of blended "
                                    "draws (default: the first camera placed in the scene)")
    p.add_argument("--per-draw-transforms", action="store_true",
                   help="declare that the vertex shader reads the world matrix from a per-draw array when one is "
                        "bound (contract draw_data, matrix words lifted)")
    p.add_argument("--bindless", action="store_true",
                   help="declare that the material textures are read by index (material table slot lifted)")
    p.add_argument("--no-primitive-id", action="store_true",
                   help="declare that the shaders do not read SV_PrimitiveID")
    p.add_argument("--vertex-pulling", action="store_true",
                   help="the engine's vertex-pulling shaders: no input layout, attributes fetched at offsets in root "
                        "constants (lifted with the per-draw array when a draw_data clause is declared)")
    p.add_argument("--json-only", action="store_true",
                   help="read only the glTF JSON, not its buffers (counts and formats come from the accessors)")
    p.add_argument("--size", default="1920x1080", help="render target size WxH (default 1920x1080)")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    try:
        w, h = (int(v) for v in str(args.size).lower().split("x"))
    except ValueError:
        raise UsageError(f"--size must be WxH, got '{args.size}'") from None
    cam: int | str | None = args.camera
    if isinstance(cam, str) and cam.isdigit():
        cam = int(cam)
    return {"camera": cam, "per_draw_transforms": args.per_draw_transforms, "bindless": args.bindless,
            "no_primitive_id": args.no_primitive_id, "vertex_pulling": args.vertex_pulling,
            "json_only": args.json_only, "width": w, "height": h}


def what_flags_buy(path: str, options: dict[str, Any], target: str = "d3d12") -> dict[str, int]:
    """Lower bound on draw calls (``target``'s default pipeline) now, with each flag not given added, and all."""
    from ..costmodel import lower_bound
    from ..importers.gltf import import_scene

    def bound(opts: dict[str, Any]) -> int:
        return lower_bound(import_scene(path, **opts).stream, target)

    out = {"as declared": bound(options)}
    off = [o for o in FLAG_OPTIONS.values() if not options.get(o)]
    for o in off:
        out["+" + next(k for k, v in FLAG_OPTIONS.items() if v == o)] = bound({**options, o: True})
    if len(off) > 1:
        out["all flags"] = bound({**options, **{o: True for o in off}})
    return out


def scene_summary(figures: dict[str, Any], buys: dict[str, int] | None) -> str:
    """The human-readable import summary."""
    c = ", ".join(figures["contracts"]) or "none (no flag given)"
    lines = [f"{figures['file']}: {figures['draws']} draws ({figures['instances']} instances), "
             f"{figures['materials']} materials, {figures['pipelines']} pipelines, {figures['indices']:,} indices, "
             f"{figures['triangles']:,} triangles, {figures['nodes']} nodes",
             f"  camera: {figures['camera']}", f"  contracts: {c}"]
    if buys:
        lines.append("  draw-call lower bound on d3d12 (default pipeline): "
                     + ", ".join(f"{k} {v}" for k, v in buys.items()))
    lines += [f"  note: {n}" for n in figures["notes"]]
    return "\n".join(lines)


def run_scene(args: argparse.Namespace) -> int:
    """Import ``args.input`` (a .gltf/.glb) to ``args.output``; print the summary (stderr when -o -)."""
    from .. import formats
    from ..importers.gltf import import_scene

    if not getattr(args, "output", None):
        raise UsageError("import needs -o OUT (use -o - for stdout)")
    fmt = formats.format_for(args.output) if args.output != "-" else "text"
    opts = _options(args)
    result = import_scene(args.input, **opts)
    formats.save(result.stream, args.output, fmt)
    if getattr(args, "quiet", False):
        return 0
    buys = what_flags_buy(args.input, opts)
    figures = {**result.figures(), "lower_bound": buys}
    out = sys.stderr if args.output == "-" else sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(figures, sort_keys=True), file=out)
    else:
        print(scene_summary(result.figures(), buys), file=out)
    return 0
