"""``drawopt import FILE [-o OUT]``: real frames into drawopt streams.

Dispatch is by the file's importer kind (:func:`drawopt.importers.importer_kind`):

- a capture (``.gfxr``, ``.jsonl``, ``.jsonl.gz``, ``.jsonl.xz``): one stream per frame
  (:mod:`drawopt.importers.capture`); with several frames OUT is a folder with one file per frame;
- a scene (``.gltf``, ``.glb``): :mod:`drawopt.importers.gltf` (scene options in their own group).

Exit status 0, or 2 with ``file:line:col: error: ...`` and nothing written.
"""

from __future__ import annotations

__all__ = ["HELP", "add_arguments", "run"]

import argparse
import json
import os
import sys
from typing import Any

from drawopt.cli.commands.import_scene import add_scene_arguments, run_scene
from drawopt.errors import UsageError
from drawopt.importers import importer_kind

HELP = "import a GFXReconstruct capture (.gfxr, .jsonl[.gz|.xz]) or a glTF scene as drawopt streams"

FORMAT_EXT = {"text": ".dstream", "json": ".json", "npz": ".npz"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="FILE", help="capture (.gfxr, .jsonl, .jsonl.gz, .jsonl.xz) or scene (.gltf, .glb)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output stream (format by extension; '-' = standard output); with several frames a folder")
    p.add_argument("--format", choices=tuple(FORMAT_EXT), default="text",
                   help="format of the per-frame files when OUT is a folder (default text)")
    p.add_argument("--json", action="store_true", help="print the import summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("-v", "--verbose", action="store_true", help="print per-frame figures and what became Opaque")
    cap = p.add_argument_group("capture options")
    sel = cap.add_mutually_exclusive_group()
    sel.add_argument("--frame", metavar="N|all", help="import frame N (from 1), or all frames (default all)")
    sel.add_argument("--frames", metavar="A:B", help="import frames A to B (inclusive)")
    cap.add_argument("--list", action="store_true", help="list the frames with their draw and command counts")
    cap.add_argument("--split", choices=("auto", "present", "submit"), default="auto",
                     help="where a frame ends: at vkQueuePresentKHR, at each vkQueueSubmit, or auto "
                          "(present when the capture presents; default)")
    cap.add_argument("--shaders", metavar="DIR",
                     help="the SPIR-V of the shader modules (gfxrecon-extract --dir DIR CAPTURE: files sh<handle>); "
                          "a .gfxr input is extracted itself")
    # the scene importer's options (drawopt.cli.commands.import_scene, the glTF half of this command)
    add_scene_arguments(p.add_argument_group("scene options (.gltf, .glb)"))


def run(args: argparse.Namespace) -> int:
    kind = importer_kind(args.input)
    if kind == "capture":
        return _run_capture(args)
    if kind == "scene":
        return _run_scene(args)
    raise UsageError(f"cannot import '{args.input}': not a capture (.gfxr, .jsonl, .jsonl.gz, .jsonl.xz) "
                     "or a scene (.gltf, .glb)")


def _run_scene(args: argparse.Namespace) -> int:
    """Scenes: drawopt.cli.commands.import_scene (drawopt.importers.gltf) imports and saves."""
    if args.list or args.frame is not None or args.frames is not None or args.shaders or args.split != "auto":
        raise UsageError("--list, --frame(s), --split and --shaders are capture options; a scene is one stream")
    if args.format != "text":
        raise UsageError("--format is for a capture's per-frame files; a scene's format comes from -o")
    return run_scene(args)


def _out_name(base: str, frame: int, fmt: str) -> str:
    stem = os.path.basename(base)
    for suffix in (".jsonl.gz", ".jsonl.xz", ".jsonl", ".gfxr"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return f"{stem}.frame{frame:04d}{FORMAT_EXT[fmt]}"


def _run_capture(args: argparse.Namespace) -> int:
    from drawopt.importers.capture import import_capture_summary, list_frames
    from drawopt.ir import formats

    if args.list:
        if args.output:
            raise UsageError("--list writes nothing: drop -o")
        frames = list_frames(args.input, split=args.split, shaders=args.shaders)
        if args.json:
            print(json.dumps([f.__dict__ for f in frames], default=list))
        elif not args.quiet:
            print(f"{'frame':>6} {'draws':>8} {'commands':>9} {'vk calls':>9} {'submits':>8} {'opaque':>7}  lines")
            for f in frames:
                print(f"{f.frame:>6} {f.draws:>8} {f.commands:>9} {f.calls:>9} {f.submits:>8} {f.opaque:>7}  "
                      f"{f.lines[0]}-{f.lines[1]}")
        return 0
    sel: Any = args.frames if args.frames is not None else args.frame
    # OUT is a stream file when it is '-' or has a stream extension, else a folder (decided
    # before the import, so that a usage error costs nothing)
    as_file = bool(args.output) and (args.output == "-" or (
        not os.path.isdir(args.output) and os.path.splitext(args.output)[1].lower() in formats.EXTENSIONS))
    if args.output and not as_file and os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"cannot tell the format of '{args.output}' (use .dstream, .json or .npz, or a folder)")
    out, summary = import_capture_summary(args.input, sel, shaders=args.shaders, split=args.split)
    targets: list[tuple[str, Any]] = []
    if args.output:
        if as_file:
            if len(out) > 1:
                raise UsageError(f"{len(out)} frames need a folder for OUT (or --frame N), not '{args.output}'")
            targets = [(args.output, next(iter(out.values())))]
        else:
            os.makedirs(args.output, exist_ok=True)
            targets = [(os.path.join(args.output, _out_name(args.input, n, args.format)), s)
                       for n, s in sorted(out.items())]
        for path, s in targets:
            formats.save(s, path, None if as_file else args.format)
    report = summary.to_json()
    report["written"] = [p for p, _ in targets]
    stream_out = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        print(json.dumps(report, sort_keys=True), file=stream_out)
        return 0
    if args.quiet:
        return 0
    kept = [f for f in summary.frames if f.frame in out]
    draws = sum(f.draws for f in kept)
    opq = sum(sum(f.opaque.values()) for f in kept)
    unk = sum(f.unknown_tables for f in kept)
    shaders = f"{summary.shaders_read} of {summary.shaders_read + len(summary.shaders_missing)} shaders read"
    print(f"{args.input}: {len(out)} of {summary.frames_total} frames, {draws} draws, {opq} opaque, "
          f"{unk} unknown tables, {shaders} (split at {summary.split})", file=stream_out)
    if args.verbose:
        for f in kept:
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(f.opaque.items())) or "none"
            print(f"  frame {f.frame}: {f.calls} vk calls -> {f.commands} commands, {f.draws} draws; "
                  f"opaque: {ops}", file=stream_out)
        for m, why in sorted(summary.shaders_missing.items()):
            print(f"  {m}: no contract clause ({why})", file=stream_out)
        for p, _ in targets:
            print(f"  wrote {p}", file=stream_out)
    return 0
