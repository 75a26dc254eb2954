"""``drawopt import SCENE.gltf|SCENE.glb -o OUT``: the scene half of the ``import`` subcommand.

``add_scene_arguments`` adds the scene options to the ``import`` parser (or an argument group of
it); ``run_scene`` imports, saves atomically and prints a one-line verdict (``-q``: nothing), the
import's notes, and -- when a contract flag is missing -- the draw calls the flags would allow:
the lower bound of the d3d12 default pipeline (docs/passes.md, "The lower bound") with each
missing flag added and with all of them (``-v`` lists each). ``--json`` prints it all as JSON.
Everything goes to stdout, or to stderr when the stream is written to stdout (``-o -``).
"""

from __future__ import annotations

__all__ = ["add_scene_arguments", "run_scene", "scene_summary", "what_flags_buy", "FLAG_OPTIONS"]

import argparse
import json
import sys
from typing import Any

from drawopt.errors import UsageError

#: command-line flag -> import_scene option (docs/asset-tools.md, "Contracts")
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
    opts = {"camera": cam, "width": w, "height": h}
    opts.update({o: bool(getattr(args, o)) for o in FLAG_OPTIONS.values()})
    return opts


def what_flags_buy(f: Any, options: dict[str, Any], target: str = "d3d12") -> dict[str, int]:
    """Lower bound on draw calls of ``target``'s default pipeline for the read file ``f``: as declared,
    with each flag not given added, and with all of them (keys ``as declared``, ``+--FLAG``, ``all flags``)."""
    from drawopt.analysis.lowerbound import lower_bound
    from drawopt.importers.gltf import import_read

    def bound(opts: dict[str, Any]) -> int:
        return lower_bound(import_read(f, **opts).stream, target)

    out = {"as declared": bound(options)}
    off = [(flag, o) for flag, o in FLAG_OPTIONS.items() if not options.get(o)]
    for flag, o in off:
        out["+" + flag] = bound({**options, o: True})
    if len(off) > 1:
        out["all flags"] = bound({**options, **{o: True for _, o in off}})
    return out


def scene_summary(figures: dict[str, Any], output: str, buys: dict[str, int] | None, verbose: bool = False) -> str:
    """The verdict line, the notes and what the missing flags would buy (``verbose``: each flag)."""
    from drawopt.importers.gltf import CONTRACT_FLAGS

    f = figures["file"]
    contracts = ", ".join(figures["contracts"]) or "none"
    lines = [f"{f}: {figures['draws']} draws ({figures['materials']} materials, {figures['pipelines']} pipelines, "
             f"{figures['indices']:,} indices, {figures['triangles']:,} triangles) -> {output}; contracts: {contracts}"]
    lines += [f"{f}: note: {n}" for n in figures["notes"]]
    if buys and "all flags" in buys and buys["all flags"] < buys["as declared"]:
        missing = " ".join(k[1:] for k in buys if k.startswith("+"))
        lines.append(f"{f}: note: with {missing} the d3d12 default pipeline can reach {buys['all flags']} draw calls "
                     f"(lower bound; {buys['as declared']} as declared)")
    if verbose:
        lines.append(f"  camera: {figures['camera']}")
        for k, v in (buys or {}).items():
            why = CONTRACT_FLAGS.get(FLAG_OPTIONS.get(k[1:], ""), "")
            lines.append(f"  {k:<24} lower bound {v:>6}" + (f"  ({why})" if why else ""))
    return "\n".join(lines)


def run_scene(args: argparse.Namespace) -> int:
    """Import ``args.input`` (a .gltf/.glb) to ``args.output`` and print the summary."""
    from drawopt.importers.gltf import import_read
    from drawopt.importers.gltf_read import read_gltf
    from drawopt.ir import formats

    if not getattr(args, "output", None):
        raise UsageError("import needs -o OUT (use -o - for stdout)")
    fmt = formats.format_for(args.output) if args.output != "-" else "text"
    opts = _options(args)
    f = read_gltf(args.input, json_only=args.json_only)
    result = import_read(f, **opts)
    formats.save(result.stream, args.output, fmt)
    if getattr(args, "quiet", False):
        return 0
    buys = what_flags_buy(f, opts)
    out = sys.stderr if args.output == "-" else sys.stdout
    if getattr(args, "json", False):
        print(json.dumps({**result.figures(), "output": args.output, "lower_bound_d3d12": buys}, sort_keys=True),
              file=out)
    else:
        print(scene_summary(result.figures(), args.output, buys, getattr(args, "verbose", False)), file=out)
    return 0
