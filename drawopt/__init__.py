"""drawopt: an offline optimizing compiler for GPU draw streams.

The library API::

    import drawopt
    s = drawopt.load("frame.dstream")
    res = drawopt.optimize(s, passes="dedupe-state")   # an OptimizeResult
    drawopt.save(res.stream, "frame.opt.dstream")
    print(res.report.verdict("frame.dstream"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from drawopt.errors import DrawoptError, InputError, UsageError
from drawopt.ir.decls import Buffer, Decls, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from drawopt.ir.stream import Command, Header, Stream, StreamBuilder

if TYPE_CHECKING:  # what the lazy names below are, for mypy and editors
    from drawopt.analysis.graph import build_graph
    from drawopt.analysis.state import track
    from drawopt.batch import batch
    from drawopt.importers.gltf import import_gltf
    from drawopt.ir.formats import dumps, load, loads, save
    from drawopt.result import OptimizeReport, OptimizeResult, optimize
    from drawopt.verify import verify

__all__ = [
    "Buffer", "Decls", "Depth", "Heap", "Pipeline", "RootParam", "RootSig", "Target", "Texture", "View",
    "DrawoptError", "InputError", "UsageError", "Command", "Header", "Stream", "StreamBuilder",
    "load", "save", "loads", "dumps", "optimize", "track", "build_graph", "verify", "import_gltf",
    "OptimizeResult", "OptimizeReport", "batch",
]


def __getattr__(name: str) -> Any:
    """Lazily exposed entry points (keeps ``import drawopt`` light)."""
    if name in ("load", "save", "loads", "dumps"):
        from drawopt.ir import formats
        return getattr(formats, name)
    if name == "optimize":
        from drawopt.result import optimize
        return optimize
    if name in ("OptimizeResult", "OptimizeReport"):
        from drawopt import result
        return getattr(result, name)
    if name == "track":
        from drawopt.analysis.state import track
        return track
    if name == "build_graph":
        from drawopt.analysis.graph import build_graph
        return build_graph
    if name == "import_gltf":
        from drawopt.importers.gltf import import_gltf
        return import_gltf
    if name == "batch":  # the module is callable: drawopt.batch(inputs, out_dir, ...)
        import importlib
        return importlib.import_module(".batch", __name__)
    if name == "verify":  # the package is callable: drawopt.verify(a, b) however often it is imported
        import importlib
        return importlib.import_module(".verify", __name__)
    raise AttributeError(f"module 'drawopt' has no attribute {name!r}")
