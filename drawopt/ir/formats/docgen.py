"""Generated documentation: the command table of ``docs/format.md`` and the JSON Schema.

Both are derived from :data:`drawopt.ir.ops.OPS` and committed; tests check that the
committed copies are current. Regenerate with::

    python -m drawopt.ir.formats.docgen            # rewrite both in place
    python -m drawopt.ir.formats.docgen --check    # exit 1 if either is stale
"""

from __future__ import annotations

__all__ = ["command_table", "json_schema", "update_docs", "SCHEMA_PATH", "DOC_PATH"]

import json
import sys
from pathlib import Path
from typing import Any

from drawopt.ir.decls import BLENDS, DEPTH_FUNCS, HEAP_TYPES, PIPELINE_KEYS, SHADER_STAGES, VIEW_KINDS
from drawopt.ir.ops import OPS, Arg, OpSpec
from drawopt.ir.stream import CONTEXTS, FLAG_NAMES, KINDS, REORDER_POLICIES

_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "stream.schema.json"
DOC_PATH = _ROOT / "docs" / "format.md"
BEGIN = "<!-- BEGIN GENERATED: commands (python -m drawopt.ir.formats.docgen) -->"
END = "<!-- END GENERATED: commands -->"

_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_KIND_TEXT = {"u32": "u32", "i32": "i32", "u64": "u64", "f32": "f32", "bool": "TRUE|FALSE",
              "heapref": "HEAP[SLOT]", "str": "text"}


# ============================================================================ markdown
def _arg_text(a: Arg) -> str:
    if a.kind == "enum":
        t = "|".join(a.values)
    elif a.kind == "ref":
        t = "|".join(a.ref)
    else:
        t = _KIND_TEXT[a.kind]
    if a.keyword:
        return f"[{a.name}={t}]"
    if a.optional:
        return f"[{a.name}:{t}]"
    return f"{a.name}:{t}"


def _signature(sp: OpSpec) -> str:
    parts = [_arg_text(a) for a in sp.args if not a.keyword]
    if sp.var is not None:
        parts.append(f"{_arg_text(sp.var)} × {sp.var_min}..{sp.var_max}")
    parts += [_arg_text(a) for a in sp.args if a.keyword]
    return " ".join(parts) if parts else "—"


def _default_text(a: Arg) -> str:
    if a.kind == "f32":
        from drawopt.ir.codec import format_f32
        return format_f32(int(a.default or 0))
    return str(a.default)


def command_table() -> str:
    """The markdown table of every command of :data:`drawopt.ir.ops.OPS`."""
    rows = ["| opcode | command | category | arguments | example | notes |",
            "|---:|---|---|---|---|---|"]
    for sp in OPS:
        notes = sp.doc
        defaults = [f"{a.name} defaults to {_default_text(a)}" for a in sp.args if a.optional]
        if defaults:
            notes = "; ".join(([notes] if notes else []) + defaults)
        sig = _signature(sp).replace("|", "\\|")
        rows.append(f"| {sp.code} | `{sp.name}` | {sp.cat.name.lower()} | {sig} | `{sp.example}` | "
                    f"{notes.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


# ============================================================================ JSON schema
def _arg_schema(a: Arg) -> dict[str, Any]:
    k = a.kind
    if k == "u32":
        return {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}
    if k == "i32":
        return {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
    if k == "u64":
        return {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    if k == "f32":
        return {"$ref": "#/$defs/f32"}
    if k == "bool":
        return {"type": "boolean"}
    if k == "enum":
        return {"enum": list(a.values)}
    if k == "ref":
        return {"$ref": "#/$defs/name", "description": " or ".join(a.ref)}
    if k == "heapref":
        return {"$ref": "#/$defs/heapref"}
    if k == "str":
        return {"type": "string", "minLength": 1, "pattern": "^[^\\n]*$"}
    raise AssertionError(k)  # pragma: no cover


def _command_schema(sp: OpSpec) -> dict[str, Any]:
    positional = [a for a in sp.args if not a.keyword]
    fixed = [a for a in positional if not (sp.var is not None and a.optional)]
    opts: dict[str, Any] = {
        "type": "object",
        "properties": {a.name: _arg_schema(a) for a in sp.args if a.keyword} | {"flags": {"$ref": "#/$defs/flags"}},
        "additionalProperties": False,
    }
    prefix: list[dict[str, Any]] = [{"const": sp.name}]
    for a in fixed:
        prefix.append({"anyOf": [_arg_schema(a), opts]} if a.optional else _arg_schema(a))
    nreq = sum(1 for a in fixed if not a.optional)
    out: dict[str, Any] = {"type": "array", "prefixItems": prefix, "minItems": 1 + nreq}
    if sp.var is not None:
        out["items"] = {"anyOf": [_arg_schema(sp.var), opts]}
        out["minItems"] = 1 + nreq + sp.var_min
        out["maxItems"] = 1 + nreq + sp.var_max + 1
    else:
        out["items"] = opts
        out["maxItems"] = 1 + len(fixed) + 1
    if sp.doc:
        out["description"] = sp.doc
    return out


def _decl_schemas() -> dict[str, dict[str, Any]]:
    name = {"$ref": "#/$defs/name"}
    size = {"type": "integer", "minimum": 1}
    image = {"name": name, "width": {"type": "integer", "minimum": 1, "maximum": 65536},
             "height": {"type": "integer", "minimum": 1, "maximum": 65536}, "format": name}
    token = {"type": "string", "pattern": "^[^\\s#]+$"}
    pipe: dict[str, Any] = {"name": name}
    for st in SHADER_STAGES:
        pipe[st] = token
    pipe.update(
        layout=token, blend={"enum": list(BLENDS)},
        depth={"type": "string", "pattern": "^(off|(" + "|".join(DEPTH_FUNCS) + ")(,write)?)$"},
        topology={"enum": ["point", "line", "triangle", "patch"]}, root=name,
        params={"type": ["array", "null"], "items": {"type": "integer", "minimum": 0}},
        reads={"type": "array", "items": {"type": "string"}}, writes={"type": "array", "items": {"type": "string"}},
        uav_stage={"enum": list(SHADER_STAGES)}, contract=token,
        gs_maxverts={"type": "integer", "minimum": 0}, gs_vertsize={"type": "integer", "minimum": 0},
        gs_instances={"type": "integer", "minimum": 1, "maximum": 32},
        gs_invertsize={"type": "integer", "minimum": 0}, gs_ratio={"type": "number", "minimum": 0, "maximum": 64},
    )
    assert set(pipe) == {"name", *PIPELINE_KEYS}
    kinds = {
        "buffer": ({"name": name, "size": size, "cpu": {"type": "boolean"}, "frontend": {"type": "boolean"},
                    "data": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}}},
                   ["name", "size"]),
        "texture": (image, ["name", "width", "height", "format"]),
        "target": (image, ["name", "width", "height", "format"]),
        "depth": (image, ["name", "width", "height", "format"]),
        "heap": ({"name": name, "type": {"enum": list(HEAP_TYPES)}, "size": size}, ["name", "type", "size"]),
        "view": ({"heap": name, "slot": {"type": "integer", "minimum": 0}, "view": {"enum": list(VIEW_KINDS)},
                  "resource": name}, ["heap", "slot", "view"]),
        "rootsig": ({"name": name, "params": {"type": "array", "maxItems": 16, "items": {"type": "string"}}},
                    ["name", "params"]),
        "pipeline": (pipe, ["name"]),
    }
    out = {}
    for kind, (props, required) in kinds.items():
        out[kind] = {"type": "object", "properties": {"kind": {"const": kind}, **props},
                     "required": ["kind", *required], "additionalProperties": False}
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the JSON stream format."""
    decls = _decl_schemas()
    defs: dict[str, Any] = {
        "name": {"type": "string", "pattern": f"^{_NAME}$"},
        "heapref": {"type": "string", "pattern": f"^{_NAME}\\[[0-9]+\\]$"},
        "f32": {"description": "a 32-bit float: a finite number, or its bits as a hex string",
                "anyOf": [{"type": "number"}, {"type": "string", "pattern": "^0[xX][0-9a-fA-F]{1,8}$"}]},
        "flags": {"type": "array", "items": {"enum": list(FLAG_NAMES)}},
        "header": {"type": "object", "additionalProperties": False, "properties": {
            "context": {"enum": list(CONTEXTS)}, "kind": {"enum": list(KINDS)},
            "fast_semantics": {"type": "boolean"}, "auto_gpu_flush": {"type": "boolean"},
            "target": {"type": "string", "pattern": "^[a-z][a-z0-9_.-]*$"},
            "reorder": {"enum": list(REORDER_POLICIES)}}},
        "decl": {"type": "object", "required": ["kind"],
                 "properties": {"kind": {"enum": list(decls)}},
                 "allOf": [{"if": {"properties": {"kind": {"const": k}}}, "then": {"$ref": f"#/$defs/decl_{k}"}}
                           for k in decls]},
        "command": {"type": "array", "minItems": 1, "prefixItems": [{"enum": [sp.name for sp in OPS]}],
                    "allOf": [{"if": {"prefixItems": [{"const": sp.name}]},
                               "then": {"$ref": f"#/$defs/cmd_{sp.name}"}} for sp in OPS]},
    }
    defs.update({f"decl_{k}": v for k, v in decls.items()})
    defs.update({f"cmd_{sp.name}": _command_schema(sp) for sp in OPS})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://drawopt.invalid/schema/stream.schema.json",
        "title": "drawopt stream (JSON format)",
        "description": "Generated from drawopt.ir.ops.OPS by drawopt.ir.formats.docgen; see docs/format.md.",
        "type": "object",
        "required": ["drawopt"],
        "additionalProperties": False,
        "properties": {
            "drawopt": {"const": 1},
            "header": {"$ref": "#/$defs/header"},
            "decls": {"type": "array", "items": {"$ref": "#/$defs/decl"}},
            "commands": {"type": "array", "items": {"$ref": "#/$defs/command"}},
        },
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=1) + "\n"


def doc_with_table(doc: str) -> str:
    """``doc`` with its generated command section replaced by the current table."""
    try:
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        raise ValueError(f"docs/format.md lacks the markers {BEGIN!r} ... {END!r}") from None
    return f"{head}{BEGIN}\n{command_table()}\n{END}{tail}"


def update_docs(check: bool = False) -> bool:
    """Rewrite (or with ``check``, compare) the schema and the doc table; True if current."""
    doc = DOC_PATH.read_text(encoding="utf-8")
    new_doc, new_schema = doc_with_table(doc), schema_text()
    old_schema = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
    current = new_doc == doc and new_schema == old_schema
    if not check and not current:
        from drawopt.ir.formats.atomic import write_atomic
        write_atomic(DOC_PATH, new_doc.encode("utf-8"))
        SCHEMA_PATH.parent.mkdir(exist_ok=True)
        write_atomic(SCHEMA_PATH, new_schema.encode("utf-8"))
    return current


if __name__ == "__main__":  # pragma: no cover
    ok = update_docs(check="--check" in sys.argv[1:])
    if "--check" in sys.argv[1:] and not ok:
        print("docs/format.md or drawopt/ir/schema/stream.schema.json is stale; "
              "run python -m drawopt.ir.formats.docgen",
              file=sys.stderr)
        sys.exit(1)
