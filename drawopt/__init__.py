"""drawopt: an offline optimizing compiler for GPU draw streams.

The library API::

    import drawopt
    s = drawopt.load("frame.dstream")
    out = drawopt.optimize(s, passes="dedupe-state")
    drawopt.save(out, "frame.opt.dstream")
"""

from __future__ import annotations

__version__ = "0.1.0"

from .decls import Buffer, Decls, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from .errors import DrawoptError, InputError, UsageError
from .stream import Command, Header, Stream, StreamBuilder

__all__ = [
    "Buffer", "Decls", "Depth", "Heap", "Pipeline", "RootParam", "RootSig", "Target", "Texture", "View",
    "DrawoptError", "InputError", "UsageError", "Command", "Header", "Stream", "StreamBuilder",
    "load", "save", "optimize", "track", "build_graph", "verify", "import_gltf",
]


def __getattr__(name: str):
    """Lazily exposed entry points (keeps ``import drawopt`` light)."""
    if name in ("load", "save", "loads", "dumps"):
        from . import formats
        return getattr(formats, name)
    if name == "optimize":
        from .passmanager import optimize
        return optimize
    if name == "track":
        from .state import track
        return track
    if name == "build_graph":
        from .graph import build_graph
        return build_graph
    if name == "import_gltf":
        from .importers.gltf import import_gltf
        return import_gltf
    if name == "verify":  # the package is callable: drawopt.verify(a, b) however often it is imported
        import importlib
        return importlib.import_module(".verify", __name__)
    raise AttributeError(f"module 'drawopt' has no attribute {name!r}")
