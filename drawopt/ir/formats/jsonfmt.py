"""The JSON stream format (for tools), reader and writer.

Layout (schema: ``drawopt/ir/schema/stream.schema.json``)::

    {"drawopt": 1,
     "header": {"context": "graphics", "kind": "list", "fast_semantics": false, "auto_gpu_flush": true},
     "decls": [
      {"kind": "buffer", "name": "verts", "size": 65536},
      ...
     ],
     "commands": [
      ["SetPipelineState", "opaque"],
      ["SetGraphicsRoot32BitConstants", 1, 4, 1065353216, 0, 0, 0, {"dest": 2}],
      ["DrawInstanced", 6, 1, 0, 0, {"flags": ["nomerge"]}]
     ]}

Names and enumerants are strings, integers numbers, 32-bit floats numbers when
finite (shortest text that reads back as the same float) else ``"0x7fc00000"``
style strings; keyword arguments and flags go in an optional trailing object.
The writer puts one declaration and one command per line.

The reader scans the top-level object itself (with the C scanner of :mod:`json`
for each element), so it knows where every declaration and command starts:
errors point at the element (``file:line:col``) and ``Stream.line`` holds the
line of each command.
"""

from __future__ import annotations

__all__ = ["loads_json", "dumps_json"]

import json
import re
from json.decoder import JSONDecodeError, scanstring  # type: ignore[attr-defined]
from typing import Any, NoReturn

import numpy as np

from drawopt._accel import load_cext
from drawopt.errors import InputError
from drawopt.ir import codec
from drawopt.ir.decls import ContractError, Decls, decl_from_json, decl_to_json
from drawopt.ir.formats.common import (
    OPAQUE,
    Fallback,
    check_decl_tokens,
    command_block,
    declare_in,
    header_from_json,
    header_to_json,
    opaque_text_error,
    plans_for,
    printer_table,
    scanner_tables,
    suggest,
    value_index_of_check_arg,
)
from drawopt.ir.ops import OPS, OpSpec
from drawopt.ir.stream import FLAG_NAMES, Stream, StreamCheckError, encode_command

_WS = re.compile(r"[ \t\n\r]*")
_TOP_KEYS = ("drawopt", "header", "decls", "commands")
_FAST_FAIL = (Fallback, ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError)
_OPAQUE_CODE = OPAQUE.code
_NAMES = [o.name for o in OPS]


class _Syntax(Exception):
    pass


# ============================================================================ scanning
def _scan_array(text: str, idx: int, scan, ws) -> tuple[list[Any], list[int], int]:
    """Parse the array starting at ``text[idx] == '['``; return items, their offsets, end."""
    idx = ws(text, idx + 1).end()
    items: list[Any] = []
    offs: list[int] = []
    if text[idx:idx + 1] == "]":
        return items, offs, idx + 1
    while True:
        offs.append(idx)
        v, idx = scan(text, idx)
        items.append(v)
        idx = ws(text, idx).end()
        c = text[idx:idx + 1]
        if c == ",":
            idx = ws(text, idx + 1).end()
        elif c == "]":
            return items, offs, idx + 1
        else:
            raise _Syntax


def _walk_object(text: str, idx: int, ws, member) -> int:
    """Walk the object at ``text[idx] == '{'``: for every member call
    ``member(key, key_offset, value_offset)``, which scans the value and returns the
    index after it; return the index after the closing ``}``."""
    idx = ws(text, idx + 1).end()
    if text[idx:idx + 1] == "}":
        return idx + 1
    while True:
        if text[idx:idx + 1] != '"':
            raise _Syntax
        koff = idx
        key, idx = scanstring(text, idx + 1)
        idx = ws(text, idx).end()
        if text[idx:idx + 1] != ":":
            raise _Syntax
        idx = ws(text, idx + 1).end()
        idx = ws(text, member(key, koff, idx)).end()
        c = text[idx:idx + 1]
        if c == ",":
            idx = ws(text, idx + 1).end()
        elif c == "}":
            return idx + 1
        else:
            raise _Syntax


def _scan_object_keys(text: str, idx: int, scan, ws) -> dict[str, tuple[int, int]]:
    """Offsets ``(key, value)`` of the members of the object at ``text[idx] == '{'``."""
    out: dict[str, tuple[int, int]] = {}

    def member(key: str, koff: int, voff: int) -> int:
        out.setdefault(key, (koff, voff))
        return scan(text, voff)[1]

    _walk_object(text, idx, ws, member)
    return out


class _Doc:
    """The top-level object with the offsets of its members and array elements."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        dec = json.JSONDecoder()
        self.scan, self.ws = dec.scan_once, _WS.match
        self.values: dict[str, Any] = {}
        self.key_off: dict[str, int] = {}
        self.val_off: dict[str, int] = {}
        self.elem_off: dict[str, list[int]] = {}
        try:
            self._parse()
        except (_Syntax, StopIteration, JSONDecodeError, IndexError, ValueError, RecursionError):
            self._syntax_error()

    def _parse(self) -> None:
        text, scan, ws = self.text, self.scan, self.ws
        idx = ws(text, 0).end()
        if text[idx:idx + 1] != "{":
            raise _Syntax

        kern = load_cext("_text")

        def member(key: str, koff: int, voff: int) -> int:
            if key in ("decls", "commands") and text[voff:voff + 1] == "[":
                got = kern.scan_json_array(text, voff, scan) if kern is not None else _scan_array(text, voff, scan, ws)
                if got is None:
                    raise _Syntax
                val, offs, end = got
                self.elem_off[key] = offs
            else:
                val, end = scan(text, voff)
            if key in self.values:
                self.error(f'duplicate key "{key}"', koff)
            self.values[key], self.key_off[key], self.val_off[key] = val, koff, voff
            return end

        idx = _walk_object(text, idx, ws, member)
        if ws(text, idx).end() != len(text):
            raise _Syntax

    def _syntax_error(self) -> NoReturn:
        try:
            json.loads(self.text)
        except JSONDecodeError as e:
            raise InputError(f"JSON syntax error: {e.msg}", self.file, e.lineno, e.colno) from None
        except RecursionError:
            raise InputError("JSON nested too deeply", self.file, 1, 1) from None
        except ValueError as e:  # e.g. integers with too many digits
            raise InputError(f"bad JSON: {e}", self.file, 1, 1) from None
        self.error("the top level must be an object {\"drawopt\": 1, ...}", self.ws(self.text, 0).end())

    def pos(self, off: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, off) + 1
        return line, off - (self.text.rfind("\n", 0, off) + 1) + 1

    def error(self, message: str, off: int) -> NoReturn:
        raise InputError(message, self.file, *self.pos(off))

    def member_off(self, off: int, key: str | None, index: int | None = None) -> int:
        """Offset of member ``key`` of the object at ``off`` (or element ``index`` of an array)."""
        try:
            if index is not None and self.text[off:off + 1] == "[":
                _, offs, _ = _scan_array(self.text, off, self.scan, self.ws)
                return offs[index] if index < len(offs) else off
            if key is not None and self.text[off:off + 1] == "{":
                return self.object_keys(off).get(key, (off, off))[0]
        except (_Syntax, StopIteration, ValueError, IndexError, RecursionError):  # pragma: no cover
            pass
        return off

    def object_keys(self, off: int) -> dict[str, tuple[int, int]]:
        return _scan_object_keys(self.text, off, self.scan, self.ws)


# ============================================================================ reader
def loads_json(text: str, file: str = "<string>") -> Stream:
    """Parse the JSON stream format; raise :class:`~drawopt.errors.InputError` on bad input."""
    if text.startswith("\ufeff"):
        text = text[1:]
    doc = _Doc(text, file)
    v = doc.values
    for k in v:
        if k not in _TOP_KEYS:
            doc.error(f'unknown top-level key "{k}"{suggest(k, _TOP_KEYS)} (known: {", ".join(_TOP_KEYS)})',
                      doc.key_off[k])
    if "drawopt" not in v:
        doc.error('missing "drawopt": 1 (the format version)', doc.ws(text, 0).end())
    ver = v["drawopt"]
    if type(ver) is not int or ver != 1:
        doc.error(f"unsupported stream version {json.dumps(ver)} (this drawopt reads 1)", doc.val_off["drawopt"])
    # header
    try:
        header = header_from_json(v.get("header", {}))
    except ValueError as e:
        off = doc.val_off.get("header", 0)
        m = re.search(r"'(\w+)'", str(e))
        doc.error(str(e), doc.member_off(off, m.group(1)) if m else off)
    # declarations
    decls = Decls()
    raw_decls = v.get("decls", [])
    if not isinstance(raw_decls, list):
        doc.error('"decls" must be an array', doc.val_off["decls"])
    for i, obj in enumerate(raw_decls):
        try:
            d = decl_from_json(obj)
            check_decl_tokens(d)
            decls.add(d)
        except ContractError as e:  # point at the clause's value (the lift item) in "contract"
            off = doc.elem_off["decls"][i]
            doc.error(f"declaration {i}: {e}", _contract_off(doc, off, obj, e))
        except (ValueError, TypeError, KeyError, OverflowError) as e:
            off = doc.elem_off["decls"][i]
            msg = str(e)
            if isinstance(obj, dict):
                key = _field_named(msg, obj)
                if key is not None:
                    off = doc.member_off(off, key)
            doc.error(f"declaration {i}: {msg}", off)
    # commands
    raw = v.get("commands", [])
    if not isinstance(raw, list):
        doc.error('"commands" must be an array', doc.val_off["commands"])
    s = _commands(doc, raw, header, decls)
    try:
        s.check()
    except StreamCheckError as e:
        sp = s.spec(e.cmd)
        off = doc.elem_off["commands"][e.cmd]
        vi, key = value_index_of_check_arg(sp, e.arg)
        if vi is not None:
            off = doc.member_off(off, None, 1 + vi)
        elif key is not None:
            el = raw[e.cmd]
            if isinstance(el[-1], dict) and key in el[-1]:
                off = doc.member_off(doc.member_off(off, None, len(el) - 1), key)
        doc.error(str(e), off)
    return s


def _contract_off(doc: _Doc, off: int, obj: dict[str, Any], e: ContractError) -> int:
    """Offset of the value ``e`` blames inside the ``"contract"`` string of the declaration at
    ``off`` (the member itself where the string is written with escapes)."""
    koff, voff = doc.object_keys(off).get("contract", (off, off))
    text = obj.get("contract")
    pos = e.offset_in(text) if isinstance(text, str) else None
    if pos is None or not doc.text.startswith(json.dumps(text), voff):
        return koff
    return voff + 1 + pos


def _field_named(msg: str, obj: dict[str, Any]) -> str | None:
    best = None
    for k in obj:
        if k == "kind":
            continue
        m = re.search(rf"(?<![\w]){re.escape(str(k))}(?![\w])", msg)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), k)
    return best[1] if best else None


def _commands(doc: _Doc, raw: list[Any], header, decls: Decls) -> Stream:
    plans = plans_for(decls, json_mode=True)
    strings: list[str] = []
    string_ix: dict[str, int] = {}
    n = len(raw)
    offs = doc.elem_off.get("commands", [])
    kern = load_cext("_text")
    if kern is not None:  # the kernel encodes what it can; the loop below is its pure twin
        sc = kern.text_scanner(b"", *scanner_tables(), capacity=n)
        declare_in(sc, decls)
        i = sc.encode_json(raw, 0)
        while i < n:
            sc.add(*_element(doc, plans, raw[i], offs[i], decls, strings, string_ix), 0)
            i = sc.encode_json(raw, i + 1)
        op, args_, off_arr, var_len, pool_, flags, _, _ = sc.finish()
        return Stream(header, decls, op, args_, off_arr, var_len, pool_, flags, _line_numbers(doc.text, offs),
                      strings)
    op = np.zeros(n, np.uint16)
    args: list[int] = []
    pool: list[int] = []
    var_len = np.zeros(n, np.int32)
    flags = np.zeros(n, np.uint8)
    for i, el in enumerate(raw):
        code, row, var, fl = _element(doc, plans, el, offs[i], decls, strings, string_ix)
        op[i] = code
        args += row
        if var:
            pool += var
            var_len[i] = len(var)
        flags[i] = fl
    off_arr = np.zeros(n, np.int64)
    if n:
        np.cumsum(var_len[:-1], out=off_arr[1:])
    return Stream(header, decls, op, np.array(args, np.int64).reshape(n, 6), off_arr, var_len,
                  np.array(pool, np.int64), flags, _line_numbers(doc.text, offs), strings)


def _element(doc: _Doc, plans, el: Any, off: int, decls: Decls, strings: list[str],
             string_ix: dict[str, int]) -> tuple[int, list[int], list[int], int]:
    """``(code, row, var, flags)`` of one command array: its fast plan, else the reference path."""
    try:
        plan = plans[el[0]]
        row, var = plan.encode(el[1:])
        return plan.code, row, var, 0
    except _FAST_FAIL:
        return _slow_command(doc, el, off, decls, strings, string_ix)


def _line_numbers(text: str, offs: list[int]) -> np.ndarray:
    """The 1-based line of every offset in ``offs`` (ascending)."""
    if text.isascii():
        newlines = np.flatnonzero(np.frombuffer(text.encode("ascii"), np.uint8) == 10)
        return (np.searchsorted(newlines, np.asarray(offs, np.int64)) + 1).astype(np.int32)
    line = np.zeros(len(offs), np.int32)
    cur, prev = 1, 0
    for i, off in enumerate(offs):
        cur += text.count("\n", prev, off)
        prev = off
        line[i] = cur
    return line


def _slow_command(doc: _Doc, el: Any, off: int, decls: Decls, strings: list[str],
                  string_ix: dict[str, int]) -> tuple[int, list[int], list[int], int]:
    if not isinstance(el, list) or not el:
        doc.error('a command is an array ["Name", args..., {options}]', off)
    name = el[0]
    if not isinstance(name, str):
        doc.error("a command starts with its name (a string)", off)
    if name not in {o.name for o in OPS}:
        doc.error(f"unknown command '{name}'{suggest(name, _NAMES)} "
                  f"(keep an unmodelled call as [\"Opaque\", \"{name} ...\"], a full barrier)", off)
    sp: OpSpec = next(o for o in OPS if o.name == name)
    vals = list(el[1:])
    opts: dict[str, Any] = {}
    if vals and isinstance(vals[-1], dict):
        opts = dict(vals.pop())
    fl = 0
    if "flags" in opts:
        fls = opts.pop("flags")
        if not isinstance(fls, list) or not all(isinstance(f, str) and f in FLAG_NAMES for f in fls):
            doc.error(f'"flags" must be an array of flag names ({", ".join(FLAG_NAMES)})',
                      doc.member_off(doc.member_off(off, None, len(el) - 1), "flags"))
        for f in fls:
            fl |= FLAG_NAMES[f]
    if sp is OPAQUE:
        if len(vals) != 1 or opts:
            doc.error('Opaque takes exactly one string: ["Opaque", "Call(args)"]', off)
        err = opaque_text_error(vals[0])
        if err:
            doc.error(err, doc.member_off(off, None, 1))
        ix = string_ix.get(vals[0])
        if ix is None:
            ix = string_ix[vals[0]] = len(strings)
            strings.append(vals[0])
        return sp.code, [ix, 0, 0, 0, 0, 0], [], fl
    try:
        row, var = encode_command(sp, vals, opts, decls, strings)
    except (ValueError, TypeError, OverflowError) as e:
        key = getattr(e, "argkey", None)
        p = getattr(e, "argpos", None)
        where = off
        if key is not None:
            where = doc.member_off(doc.member_off(off, None, len(el) - 1), key)
        elif p is not None and p >= 0:
            where = doc.member_off(off, None, 1 + p) if 1 + p < len(el) else off
        doc.error(str(e), where)
    row += [0] * (6 - len(row))
    return sp.code, row, var, fl


# ============================================================================ writer
def _f32_json(v: int) -> str:
    t = codec.format_f32(v)
    return f'"{t}"' if t.startswith("0x") else t


def _json_formatter(kind: str, names: list[str], values: tuple[str, ...]):
    if kind in ("u32", "u64", "i32"):
        return str
    if kind == "ref":
        qn = [json.dumps(n) for n in names]
        return qn.__getitem__
    if kind == "enum":
        qv = [json.dumps(v) for v in values]
        return qv.__getitem__
    if kind == "heapref":
        return lambda v: f'"{names[v >> 32]}[{v & 0xFFFFFFFF}]"'
    if kind == "f32":
        return _f32_json
    if kind == "bool":
        return lambda v: "true" if v else "false"
    raise AssertionError(kind)  # pragma: no cover


def _json_printer(sp: OpSpec, names: list[str]):
    head = "[" + json.dumps(sp.name)
    pos = [(j, _json_formatter(a.kind, names, a.values)) for j, a in enumerate(sp.args) if not a.keyword]
    kws = [(j, json.dumps(a.name) + ": ", _json_formatter(a.kind, names, a.values), a.default or 0)
           for j, a in enumerate(sp.args) if a.keyword]
    var = _json_formatter(sp.var.kind, names, sp.var.values) if sp.var is not None else None

    def printer(row, vals, fl: int) -> str:
        parts = [head] + [f(row[j]) for j, f in pos]
        if var is not None:
            parts += [var(v) for v in vals]
        opts = [key + f(row[j]) for j, key, f, default in kws if row[j] != default]
        if fl:
            opts.append('"flags": [' + ", ".join(json.dumps(n) for n, b in FLAG_NAMES.items() if fl & b) + "]")
        if opts:
            parts.append("{" + ", ".join(opts) + "}")
        return ", ".join(parts) + "]"
    return printer


def _decl_json(d) -> str:
    return json.dumps(decl_to_json(d))


def _json_line(printers, strings: list[str], code: int, row, vals, fl: int) -> str:
    """One command array (the Python printer)."""
    if code == _OPAQUE_CODE:
        line = '["Opaque", ' + json.dumps(strings[row[0]])
        if fl:
            line += ', {"flags": [' + ", ".join(json.dumps(n) for n, b in FLAG_NAMES.items() if fl & b) + "]}"
        return line + "]"
    return printers[code](row, vals, fl)


def _py_json_line(printers, s: Stream, i: int) -> str:
    o, ln = int(s.var_off[i]), int(s.var_len[i])
    return _json_line(printers, s.strings, int(s.op[i]), s.args[i].tolist(),
                      s.pool[o:o + ln].tolist() if ln else (), int(s.flags[i]))


def dumps_json(s: Stream) -> str:
    """The JSON text of ``s``: one declaration and one command per line."""
    out = ['{"drawopt": 1,', f' "header": {json.dumps(header_to_json(s.header))},']
    decl_lines = [_decl_json(d) for d in s.decls]
    if decl_lines:
        out.append(' "decls": [')
        out += ["  " + x + "," for x in decl_lines[:-1]] + ["  " + decl_lines[-1]]
        out.append(" ],")
    else:
        out.append(' "decls": [],')
    names = [d.name for d in s.decls]
    printers = {sp.code: _json_printer(sp, names) for sp in OPS if sp is not OPAQUE}
    kern = load_cext("_text")
    if kern is not None and len(s):
        ops, refs, heaps, flags = printer_table(names, json_mode=True)
        printer = kern.command_printer(ops, refs, heaps, (b"false", b"true"), flags, _f32_json, True, b'"', b"  ",
                                      b",\n", b"\n")
        out.append(' "commands": [')
        return "\n".join(out) + "\n" + command_block(s, printer, lambda s_, i: _py_json_line(printers, s_, i),
                                                      "  ", ",\n", "\n") + " ]}\n"
    ops, rows, offs, lens = s.op.tolist(), s.args.tolist(), s.var_off.tolist(), s.var_len.tolist()
    pool, fls = s.pool.tolist(), s.flags.tolist()
    lines = []
    for i in range(len(s)):
        o, ln = offs[i], lens[i]
        lines.append(_json_line(printers, s.strings, ops[i], rows[i], pool[o:o + ln] if ln else (), fls[i]))
    if lines:
        out.append(' "commands": [')
        out += ["  " + x + "," for x in lines[:-1]] + ["  " + lines[-1]]
        out.append(" ]}")
    else:
        out.append(' "commands": []}')
    out.append("")
    return "\n".join(out)
