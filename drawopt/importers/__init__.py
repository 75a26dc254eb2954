"""Importers: real frames and scenes into drawopt streams.

One dispatch point, chosen by file name, for ``drawopt import``, ``drawopt batch`` and the library:

- captures (``.gfxr``, ``.jsonl``, ``.jsonl.gz``, ``.jsonl.xz``): :mod:`drawopt.importers.capture`,
  ``import_capture(path, frames=None, **options) -> dict[int, Stream]`` (frame number -> stream) and
  ``list_frames(path) -> list[FrameInfo]``;
- scenes (``.gltf``, ``.glb``): :mod:`drawopt.importers.gltf`, ``import_gltf(path, **options) -> Stream``.

The mapping of each source onto the stream model is in docs/import.md and docs/asset-tools.md.
"""

from __future__ import annotations

__all__ = ["IMPORTERS", "importer_kind"]

#: file-name suffix -> importer kind ("capture" or "scene"), longest suffix first when matching
IMPORTERS: dict[str, str] = {
    ".gfxr": "capture",
    ".jsonl": "capture",
    ".jsonl.gz": "capture",
    ".jsonl.xz": "capture",
    ".gltf": "scene",
    ".glb": "scene",
}


def importer_kind(path: str) -> str | None:
    """The importer kind for *path* by its name, or ``None`` when it is no importable file.

    >>> importer_kind("frame.jsonl.gz"), importer_kind("Box.glb"), importer_kind("f.dstream")
    ('capture', 'scene', None)
    """
    name = str(path).lower()
    for suffix in sorted(IMPORTERS, key=len, reverse=True):
        if name.endswith(suffix):
            return IMPORTERS[suffix]
    return None
