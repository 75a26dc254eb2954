"""The package's layers, lowest first, and the check that imports only go down (docs/architecture.md).

A module may import its own layer and the layers below it, never one above: the IR knows
nothing of analyses, the verifier nothing of the optimizer, passes nothing of the CLI.
``verify`` and ``analysis`` share a rank and may not import each other (the translation
validator stays independent of the optimizer's analyses). ``tests/test_layout.py`` runs
:func:`violations` and :func:`cycles` over the source tree.

>>> layer_of("drawopt.analysis.state"), layer_of("drawopt.passes.mdi")
('analysis', 'pipeline')
"""

from __future__ import annotations

__all__ = ["LAYERS", "layer_of", "imports_of_tree", "violations", "cycles"]

import ast
from pathlib import Path

LAYERS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("base", 0, ("drawopt.errors", "drawopt._accel", "drawopt._state", "drawopt._graph", "drawopt._schedule",
                 "drawopt._packx", "drawopt._glexec", "drawopt._mdi", "drawopt._text", "drawopt._verify",
                 "drawopt._dedupe", "drawopt._flush", "drawopt.__version__", "drawopt.layers", "drawopt.background")),
    ("ir", 1, ("drawopt.ir",)),
    ("verify", 2, ("drawopt.verify",)),
    ("analysis", 2, ("drawopt.analysis",)),
    ("tools", 3, ("drawopt.validate", "drawopt.stats", "drawopt.explain", "drawopt.gen", "drawopt.importers",
                  "drawopt.replay")),
    ("pipeline", 4, ("drawopt.passmanager", "drawopt.passes", "drawopt.result")),
    ("app", 5, ("drawopt.batch", "drawopt.batch_cache", "drawopt.batch_task", "drawopt.calibrate",
                "drawopt.htmlreport", "drawopt.testing")),
    ("cli", 6, ("drawopt.cli",)),
    ("package", 7, ("drawopt", "drawopt.__main__")),
)
"""``(name, rank, module prefixes)``: a module belongs to the layer with its longest matching prefix."""


def layer_of(module: str) -> str:
    """The layer that ``module`` (a dotted ``drawopt`` name) belongs to."""
    best, size = "", -1
    for name, _rank, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > size:
                best, size = name, len(p)
    if not best:
        raise KeyError(f"module {module} is in no layer (add it to drawopt.layers.LAYERS)")
    return best


def _rank(layer: str) -> int:
    return next(r for n, r, _ in LAYERS if n == layer)


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("").parts
    parts = ["drawopt", *rel] if rel[0] == "passes" else list(rel)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of_tree(root: str | Path) -> dict[str, set[str]]:
    """Module -> the ``drawopt`` modules it imports, anywhere in its body (lazy imports included),
    for the ``drawopt/`` and ``passes/`` sources under ``root``. ``from drawopt.x import name``
    counts as importing ``drawopt.x.name`` when that is a module, else ``drawopt.x``."""
    root = Path(root)
    files = sorted((root / "drawopt").rglob("*.py")) + sorted((root / "passes").rglob("*.py"))
    names = {_module_name(f, root) for f in files}
    out: dict[str, set[str]] = {}
    for f in files:
        mod = _module_name(f, root)
        got: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                got.update(a.name for a in node.names if a.name.split(".")[0] == "drawopt")
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.split(".")[0] != "drawopt":
                    continue
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    got.add(sub if sub in names or sub == "drawopt.__version__" else node.module)
        got.discard(mod)
        out[mod] = got
    return out


def violations(imports: dict[str, set[str]]) -> list[str]:
    """``"a (layer) imports b (layer)"`` for every import that goes up, or across verify/analysis."""
    bad = []
    for mod, targets in sorted(imports.items()):
        la = layer_of(mod)
        for t in sorted(targets):
            lb = layer_of(t)
            if la == "package" or la == lb:
                continue
            if _rank(lb) > _rank(la) or (_rank(lb) == _rank(la)):
                bad.append(f"{mod} ({la}) imports {t} ({lb})")
    return bad


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other (strongly connected components of two or more)."""
    import networkx as nx

    g = nx.DiGraph()
    for mod, targets in imports.items():
        g.add_node(mod)
        g.add_edges_from((mod, t) for t in targets if t in imports)
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)
