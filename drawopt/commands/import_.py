"""``drawopt import FILE -o OUT`` (minimal dispatcher for the glTF branch; the lead merges it with the capture one)."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..importers import importer_kind
from .import_scene import add_scene_arguments, run_scene

HELP = "import a real scene (.gltf, .glb) as a stream"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="scene file (.gltf, .glb)")
    p.add_argument("-o", "--output", help="output stream (format by extension; - for stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.add_argument("-v", "--verbose", action="store_true", help="print the details (camera, what each flag buys)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_scene_arguments(p.add_argument_group("scenes (.gltf, .glb)"))


def run(args: argparse.Namespace) -> int:
    kind = importer_kind(args.input)
    if kind == "scene":
        return run_scene(args)
    raise UsageError(f"cannot import '{args.input}': not a scene file (.gltf, .glb)")
