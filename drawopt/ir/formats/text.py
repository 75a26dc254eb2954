"""The ``.dstream`` text format: reader and canonical printer.

The grammar is documented in ``docs/format.md``. In short: a header line
``drawopt 1 key=value...``, declarations (``buffer``, ``data``, ``texture``,
``target``, ``depth``, ``heap``, ``view``, ``rootsig``, ``pipeline``) and one
command per line (``Name positional... key=value... @flag...``); ``#`` starts a
comment. The printer is deterministic and canonical: ``dumps(loads(t))`` is a
fixed point.

The reader and the printer are built for large frames. The compiled kernels of
``drawopt._text`` (``cext/_text.pyx``) read and print the common lines; their
pure twins here are :class:`_PureScanner` (``str.split`` and a per-command fast
encoder, :class:`~.common.Plan`) and the Python printers. Every line a kernel or
a twin declines -- declarations, ``Opaque``, unusual token forms, every error --
takes the reference path through :func:`drawopt.ir.stream.encode_command`,
which also writes the error messages. ``DRAWOPT_PURE=1`` selects the twins.
"""

from __future__ import annotations

__all__ = ["loads_text", "dumps_text", "DECL_KEYWORDS"]

import json
import re
from dataclasses import fields, replace
from functools import lru_cache
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NoReturn

import numpy as np

from drawopt._accel import load_cext
from drawopt.errors import InputError
from drawopt.ir import codec
from drawopt.ir.decls import (
    PIPELINE_KEYS,
    Buffer,
    ContractError,
    Decl,
    Decls,
    Depth,
    Heap,
    Pipeline,
    RootParam,
    RootSig,
    Target,
    Texture,
    View,
    format_contract,
    parse_contract,
)
from drawopt.ir.formats.common import (
    HEADER_KEYS,
    OPAQUE,
    Fallback,
    check_decl_tokens,
    command_block,
    declare_in,
    header_text,
    opaque_text_error,
    plans_for,
    printer_table,
    scanner_tables,
    suggest,
    token_ok,
    value_index_of_check_arg,
)
from drawopt.ir.ops import NARGS, OPS, OpSpec
from drawopt.ir.stream import FLAG_NAMES, Header, Stream, StreamCheckError, encode_command

DECL_KEYWORDS = ("buffer", "data", "texture", "target", "depth", "heap", "view", "rootsig", "pipeline")
_ONOFF = {"on": True, "off": False}
_VIEW_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\[([0-9]+)\]\Z")
_DIMS = re.compile(r"([0-9]+)x([0-9]+)\Z")
_FAST_FAIL = (Fallback, ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError)
_WORDS_PER_LINE = 16
_OPAQUE_CODE = OPAQUE.code


class _LineError(Exception):
    """An error at token ``tok`` (index in the line's tokens; ``len(tokens)`` = end of line),
    ``offset`` characters into it."""

    def __init__(self, message: str, tok: int = 0, offset: int = 0):
        super().__init__(message)
        self.message, self.tok, self.offset = message, tok, offset


# ============================================================================ reader
def _token_cols(body: str) -> list[int]:
    """1-based start column of each ``str.split`` token of ``body``, then the end column."""
    cols, pos = [], 0
    for t in body.split():
        pos = body.find(t, pos)
        cols.append(pos + 1)
        pos += len(t)
    end = len(body.rstrip()) + 1
    cols.append(end + 1 if cols else 1)
    return cols


def _strip_comment(raw: str) -> str:
    h = raw.find("#")
    return raw if h < 0 else raw[:h]


class _PureScanner:
    """Pure-Python twin of ``drawopt._text.text_scanner``: reads the lines a :class:`~.common.Plan`
    encodes and hands every other one to the reader (same methods, same columns)."""

    def __init__(self, lines: list[str], plans: dict[str, Any]):
        self.lines, self.plans = lines, plans
        self.next = 0
        self.ready = False
        self.op: list[int] = []
        self.args: list[int] = []
        self.pool: list[int] = []
        self.var_len: list[int] = []
        self.flags: list[int] = []
        self.line: list[int] = []
        self.words: dict[int, list[int]] = {}   # buffer decl index -> data words

    def scan(self) -> tuple[int, str] | None:
        """Consume lines up to the next one the reader must handle: ``(lineno, text)`` or None."""
        lines, plans = self.lines, self.plans
        op, args, pool, var_len, flags, line = self.op, self.args, self.pool, self.var_len, self.flags, self.line
        ready = self.ready
        i, n = self.next, len(lines)
        while i < n:
            raw = lines[i]
            i += 1
            h = raw.find("#")
            toks = (raw if h < 0 else raw[:h]).split()
            if not toks:
                continue
            plan = plans.get(toks[0])
            if plan is not None and ready:
                try:
                    row, var = plan.encode(toks[1:])
                except _FAST_FAIL:
                    pass
                else:
                    op.append(plan.code)
                    args += row
                    if var:
                        pool += var
                    var_len.append(len(var))
                    flags.append(0)
                    line.append(i)
                    continue
            self.next = i
            return i, raw
        self.next = i
        return None

    def declared(self, name: bytes, index: int, kind_bit: int, size: int) -> None:
        """The plans look declarations up in ``Decls`` itself."""

    def add(self, code: int, row: list[int], var: list[int], fl: int, lineno: int) -> None:
        self.op.append(code)
        self.args += row
        if var:
            self.pool += var
        self.var_len.append(len(var))
        self.flags.append(fl)
        self.line.append(lineno)

    def data_have(self, di: int) -> int:
        return len(self.words.get(di, ()))

    def data_add(self, di: int, words: list[int]) -> None:
        self.words.setdefault(di, []).extend(words)

    def finish(self):
        n = len(self.op)
        lens = np.array(self.var_len, dtype=np.int32)
        off = np.zeros(n, np.int64)
        if n:
            np.cumsum(lens[:-1], out=off[1:])
        data = {di: np.array(w, dtype=np.uint32) for di, w in self.words.items()}
        return (np.array(self.op, np.uint16), np.array(self.args, dtype=np.int64).reshape(n, NARGS), off, lens,
                np.array(self.pool, dtype=np.int64), np.array(self.flags, np.uint8), np.array(self.line, np.int32),
                data)


class _Reader:
    def __init__(self, text: str, file: str):
        self.file = file
        self.text = text
        self._lines: list[str] | None = None
        self.decls = Decls()
        self.strings: list[str] = []
        self.string_ix: dict[str, int] = {}
        self.header: Header | None = None
        self.plans = plans_for(self.decls, json_mode=False)
        kern = load_cext("_text")
        if kern is not None:
            self.sc = kern.text_scanner(text.encode("utf-8", "surrogatepass"), *scanner_tables())
        else:
            self.sc = _PureScanner(self.lines, self.plans)

    @property
    def lines(self) -> list[str]:
        """The source lines (split when first needed: errors, the pure scanner)."""
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines

    # ------------------------------------------------------------------ errors
    def fail(self, message: str, lineno: int, tok: int = 0, offset: int = 0) -> NoReturn:
        raw = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        cols = _token_cols(_strip_comment(raw))
        col = cols[min(max(tok, 0), len(cols) - 1)] + (offset if 0 <= tok < len(cols) - 1 else 0)
        raise InputError(message, self.file, lineno, col)

    # ------------------------------------------------------------------ main loop
    def read(self) -> Stream:
        sc = self.sc
        plans = self.plans
        pad = [0] * (NARGS - 1)
        while True:
            got = sc.scan()
            if got is None:
                break
            lineno, raw = got
            h = raw.find("#")
            toks = (raw if h < 0 else raw[:h]).split()
            if not toks:
                continue
            name = toks[0]
            if self.header is None:
                if name != "drawopt":
                    self.fail("expected the header line 'drawopt 1 ...' before anything else", lineno)
                self.header = self.read_header(toks, lineno)
                sc.ready = True
                continue
            plan = plans.get(name)
            if plan is not None:  # the scanner's fast path declined it
                row, var, fl = self.slow_command(plan.spec, toks, lineno)
                sc.add(plan.code, row, var, fl, lineno)
                continue
            ndecl = len(self.decls)
            try:
                if name == "Opaque":
                    row, var, fl = self.opaque(raw, lineno)
                    sc.add(_OPAQUE_CODE, row + pad, var, fl, lineno)
                elif name == "data":
                    self.data(toks)
                elif name in DECL_KEYWORDS:
                    self.declaration(toks)
                elif name == "drawopt":
                    raise _LineError("a stream has one header line (this is a second one)")
                else:
                    raise _LineError(_unknown_command(name))
            except _LineError as e:
                self.fail(e.message, lineno, e.tok, e.offset)
            declare_in(sc, self.decls, ndecl)
        if self.header is None:
            raise InputError("empty stream: expected the header line 'drawopt 1 ...'", self.file,
                             max(len(self.lines), 1), 1)
        op, args, off, lens, pool, flags, line, data = sc.finish()
        for di, words in data.items():
            b = self.decls[di]
            self.decls.replace(Buffer(b.name, b.size, b.cpu, words, b.frontend))
        s = Stream(self.header, self.decls, op, args, off, lens, pool, flags, line, self.strings)
        try:
            s.check()
        except StreamCheckError as e:
            self.fail_check(s, e)
        return s

    # ------------------------------------------------------------------ header
    def read_header(self, toks: list[str], lineno: int) -> Header:
        if len(toks) < 2:
            self.fail("expected a format version: 'drawopt 1'", lineno, 1)
        v = toks[1]
        if not v.isascii() or not v.isdigit():
            self.fail(f"expected a format version number, got '{v}'", lineno, 1)
        if int(v) != 1:
            self.fail(f"unsupported stream version {v} (this drawopt reads 1)", lineno, 1)
        kw: dict[str, Any] = {}
        for i, t in enumerate(toks[2:], 2):
            k, sep, val = t.partition("=")
            if not sep:
                self.fail(f"expected key=value in the header, got '{t}'", lineno, i)
            if k not in HEADER_KEYS:
                self.fail(f"unknown header key '{k}'{suggest(k, HEADER_KEYS)} "
                          f"(known: {', '.join(HEADER_KEYS)})", lineno, i)
            if k in kw:
                self.fail(f"header key '{k}' given twice", lineno, i)
            if k in ("fast_semantics", "auto_gpu_flush"):
                if val not in _ONOFF:
                    self.fail(f"{k} must be on or off, got '{val}'", lineno, i)
                kw[k] = _ONOFF[val]
            else:
                kw[k] = val
            try:
                Header(1, **kw)
            except ValueError as e:
                self.fail(str(e), lineno, i)
        return Header(1, **kw)

    # ------------------------------------------------------------------ commands
    def slow_command(self, sp: OpSpec, toks: list[str], lineno: int) -> tuple[list[int], list[int], int]:
        """The reference path: keywords, flags, defaults -- and every error message."""
        pos, pos_ix, kw, kw_ix, fl = _classify(toks)
        for t, i in kw_ix.items():
            if isinstance(i, tuple):
                self.fail(f"keyword '{t}=' given twice", lineno, i[1])
        for i, t in enumerate(toks):
            if t[0] == "@" and t[1:] not in FLAG_NAMES:
                self.fail(f"unknown flag '{t}' (known: {', '.join('@' + f for f in FLAG_NAMES)})", lineno, i)
        try:
            row, var = encode_command(sp, pos, kw, self.decls, self.strings)
        except ValueError as e:
            self.fail(str(e), lineno, _error_token(sp, e, pos, pos_ix, kw_ix, len(toks)))
        row += [0] * (NARGS - len(row))
        return row, var, fl

    def opaque(self, raw: str, lineno: int) -> tuple[list[int], list[int], int]:
        start = raw.find("Opaque") + len("Opaque")
        rest = raw[start:].lstrip()
        fl = 0
        if rest.startswith('"'):
            col0 = len(raw) - len(rest)
            try:
                text, end = scanstring(rest, 1)
            except ValueError as e:
                pos = getattr(e, "pos", 0)
                msg = getattr(e, "msg", str(e))
                raise InputError(f"bad quoted Opaque text: {msg}", self.file, lineno, col0 + pos + 1) from None
            tail = _strip_comment(rest[end:]).split()
            for i, t in enumerate(tail):
                f = FLAG_NAMES.get(t[1:]) if t[:1] == "@" else None
                if f is None:
                    raise _LineError(f"after quoted Opaque text only @flags may follow, got '{t}'", i + 2)
                fl |= f
        else:
            text = _strip_comment(rest).strip()
        err = opaque_text_error(text)
        if err:
            raise _LineError(err + " (e.g. 'Opaque ClearState')", 1)
        ix = self.string_ix.get(text)
        if ix is None:
            ix = self.string_ix[text] = len(self.strings)
            self.strings.append(text)
        return [ix], [], fl

    def fail_check(self, s: Stream, e: StreamCheckError) -> NoReturn:
        lineno = int(s.line[e.cmd])
        sp = s.spec(e.cmd)
        raw = self.lines[lineno - 1]
        toks = _strip_comment(raw).split()
        tok = 0
        if sp.name != "Opaque":
            vi, key = value_index_of_check_arg(sp, e.arg)
            _, pos_ix, _, kw_ix, _ = _classify(toks)
            if vi is not None and vi < len(pos_ix):
                tok = pos_ix[vi]
            elif key is not None and key in kw_ix:
                tok = _first(kw_ix[key])
        self.fail(str(e), lineno, tok)

    # ------------------------------------------------------------------ declarations
    def data(self, toks: list[str]) -> None:
        if len(toks) < 2:
            raise _LineError("expected 'data BUFFER word...'", 1)
        name = toks[1]
        di = self.decls.index.get(name)
        if di is None:
            raise _LineError(f"undeclared buffer '{name}' (declare it with 'buffer' first)", 1)
        b = self.decls[di]
        if not isinstance(b, Buffer):
            raise _LineError(f"'{name}' is a {b.kind}, not a buffer", 1)
        try:
            words = [int(t, 0) for t in toks[2:]]
        except ValueError:
            for i, t in enumerate(toks[2:], 2):
                try:
                    int(t, 0)
                except ValueError:
                    raise _LineError(f"expected a 32-bit word, got '{t}'", i) from None
            raise  # pragma: no cover
        if words and (min(words) < 0 or max(words) > 0xFFFFFFFF):
            i = next(i for i, w in enumerate(words) if not 0 <= w <= 0xFFFFFFFF)
            raise _LineError(f"data word {words[i]} is out of range (0..4294967295)", i + 2)
        room = b.size // 4 - self.sc.data_have(di)
        if len(words) > room:
            raise _LineError(f"data exceeds buffer '{name}' ({b.size} bytes = {b.size // 4} words)",
                             2 + max(room, 0))
        self.sc.data_add(di, words)

    def declaration(self, toks: list[str]) -> None:
        kw = toks[0]
        if len(toks) < 2:
            raise _LineError(f"expected a name after '{kw}'", 1)
        name = toks[1]
        try:
            d = _DECL_READERS[kw](toks)
        except _LineError:
            raise
        except (ValueError, TypeError) as e:
            raise _LineError(str(e), _locate_decl_error(str(e), toks)) from None
        if name in self.decls.index:
            raise _LineError(f"'{name}' is already declared", 1)
        try:
            check_decl_tokens(d)
            self.decls.add(d)
        except ContractError as e:  # point at the clause's value (the lift item) in contract=...
            i = next((i for i in range(2, len(toks)) if toks[i].startswith("contract=")), None)
            off = e.offset_in(toks[i][len("contract="):]) if i is not None else None
            raise _LineError(str(e), i if i is not None else _locate_decl_error(str(e), toks),
                             0 if off is None else len("contract=") + off) from None
        except ValueError as e:
            raise _LineError(str(e), _locate_decl_error(str(e), toks)) from None


def _first(ix: int | tuple[int, int]) -> int:
    return ix[0] if isinstance(ix, tuple) else ix


def _classify(toks: list[str]):
    """Split a command's tokens into positionals, keywords and flags (with token indices).

    A keyword given twice maps to a tuple ``(first, second)`` of token indices.
    """
    pos: list[str] = []
    pos_ix: list[int] = []
    kw: dict[str, str] = {}
    kw_ix: dict[str, Any] = {}
    fl = 0
    for i in range(1, len(toks)):
        t = toks[i]
        if t[0] == "@":
            fl |= FLAG_NAMES.get(t[1:], 0)
        elif "=" in t:
            k, _, v = t.partition("=")
            if k in kw_ix:
                kw_ix[k] = (_first(kw_ix[k]), i)
            else:
                kw[k], kw_ix[k] = v, i
        else:
            pos.append(t)
            pos_ix.append(i)
    return pos, pos_ix, kw, kw_ix, fl


def _error_token(sp: OpSpec, e: ValueError, pos: list[str], pos_ix: list[int], kw_ix: dict[str, Any],
                 ntoks: int) -> int:
    key = getattr(e, "argkey", None)
    if key is not None and key in kw_ix:
        return _first(kw_ix[key])
    p = getattr(e, "argpos", None)
    if p is None or p < 0:
        return 0
    if p < len(pos_ix):
        return pos_ix[p]
    if sp.var is not None:  # too many variadic values: point at the first one too many
        nfix = sum(1 for a in sp.args if not a.keyword)
        extra = nfix + sp.var_max
        if len(pos) > extra:
            return pos_ix[extra]
    return ntoks  # missing arguments: end of the line


def _unknown_command(name: str) -> str:
    names = [o.name for o in OPS]
    hint = next((f" (did you mean '{n}'?)" for n in names if n.lower() == name.lower()), "") \
        or suggest(name, names + list(DECL_KEYWORDS))
    return (f"unknown command '{name}'{hint} "
            f"(keep an unmodelled call as 'Opaque {name} ...', a full barrier)")


def _locate_decl_error(msg: str, toks: list[str]) -> int:
    """Best token for a declaration error: a quoted token, else a key named in ``msg``, else the name."""
    keys = {t.partition("=")[0]: i for i, t in enumerate(toks) if i >= 2 and "=" in t}
    for phrase, key in (("params=", "params"), ("root parameter", "params"), ("perdraw", "contract"),
                        ("contract", "contract"), ("hs and ds", "hs")):
        if phrase in msg and key in keys:
            return keys[key]
    for i in range(2, len(toks)):
        t = toks[i]
        k, sep, v = t.partition("=")
        cands = [t] + (v.split(",") if sep else [])
        if any(f"'{c}'" in msg for c in cands if c):
            return i
    best = None
    for k, i in keys.items():
        m = re.search(rf"\b{re.escape(k)}\b", msg)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), i)
    if best is not None:
        return best[1]
    if "size" in msg and len(toks) > 2 and toks[0] in ("texture", "target", "depth", "buffer"):
        return 2
    return 1


# ------------------------------------------------------------------ declaration readers
def _int_tok(t: str, what: str) -> int:
    try:
        return int(t, 0)
    except ValueError:
        raise ValueError(f"expected an integer for {what}, got '{t}'") from None


def _read_buffer(toks: list[str]) -> Buffer:
    size = None
    flags = {"cpu": False, "frontend": False}
    for i, t in enumerate(toks[2:], 2):
        k, sep, v = t.partition("=")
        if k == "size" and sep:
            if size is not None:
                raise _LineError("size given twice", i)
            try:
                size = _int_tok(v, "size")
            except ValueError as e:
                raise _LineError(str(e), i) from None
        elif t in flags and not sep:
            flags[t] = True
        else:
            raise _LineError(f"unexpected '{t}' in buffer declaration (expected size=N, cpu, frontend)", i)
    if size is None:
        raise _LineError("buffer needs size=BYTES", len(toks))
    try:
        return Buffer(toks[1], size, flags["cpu"], None, flags["frontend"])
    except ValueError as e:
        raise _LineError(str(e), 2 if "size" in str(e) else 1) from None


def _read_image(toks: list[str]) -> Texture:
    cls = {"texture": Texture, "target": Target, "depth": Depth}[toks[0]]
    if len(toks) != 4:
        raise _LineError(f"expected '{toks[0]} NAME WIDTHxHEIGHT FORMAT'", min(len(toks), 4))
    m = _DIMS.match(toks[2])
    if not m:
        raise _LineError(f"expected WIDTHxHEIGHT, got '{toks[2]}'", 2)
    try:
        return cls(toks[1], int(m.group(1)), int(m.group(2)), toks[3])
    except ValueError as e:
        raise _LineError(str(e), 3 if "invalid name" in str(e) and toks[3] in str(e) else
                         (2 if "size" in str(e) else 1)) from None


def _read_heap(toks: list[str]) -> Heap:
    if len(toks) != 4:
        raise _LineError("expected 'heap NAME TYPE SIZE' (TYPE CBV_SRV_UAV or SAMPLER)", min(len(toks), 4))
    try:
        size = _int_tok(toks[3], "the heap size")
    except ValueError as e:
        raise _LineError(str(e), 3) from None
    try:
        return Heap(toks[1], toks[2], size)
    except ValueError as e:
        raise _LineError(str(e), 2 if "type" in str(e) else (3 if "size" in str(e) else 1)) from None


def _read_view(toks: list[str]) -> View:
    m = _VIEW_NAME.match(toks[1])
    if not m:
        raise _LineError(f"expected HEAP[SLOT], got '{toks[1]}'", 1)
    if len(toks) not in (3, 4):
        raise _LineError("expected 'view HEAP[SLOT] KIND [RESOURCE]'", min(len(toks), 4))
    return View(m.group(1), int(m.group(2)), toks[2], toks[3] if len(toks) == 4 else None)


def _read_rootsig(toks: list[str]) -> RootSig:
    params = []
    for i, t in enumerate(toks[2:], 2):
        try:
            params.append(RootParam.parse(t))
        except ValueError as e:
            raise _LineError(str(e), i) from None
    try:
        return RootSig(toks[1], tuple(params))
    except ValueError as e:
        raise _LineError(str(e), min(18, len(toks) - 1) if "at most" in str(e) else 1) from None


_PIPE_INT = ("gs_maxverts", "gs_vertsize", "gs_instances", "gs_invertsize")


def _read_pipeline(toks: list[str]) -> Pipeline:
    kw: dict[str, Any] = {}
    for i, t in enumerate(toks[2:], 2):
        k, sep, v = t.partition("=")
        if not sep:
            raise _LineError(f"expected key=value, got '{t}'", i)
        if k not in PIPELINE_KEYS:
            raise _LineError(f"unknown pipeline key '{k}'{suggest(k, PIPELINE_KEYS)}", i)
        if k in kw:
            raise _LineError(f"pipeline key '{k}' given twice", i)
        if not v:
            raise _LineError(f"empty value for '{k}'", i)
        try:
            if k == "params":
                kw[k] = None if v == "all" else () if v == "none" else \
                    tuple(_int_tok(x, "params") for x in v.split(","))
            elif k in ("reads", "writes"):
                items = v.split(",")
                if not all(items):
                    raise ValueError(f"empty name in {k}=")
                kw[k] = tuple(items)
            elif k == "contract":
                kw[k] = parse_contract(v)
            elif k in _PIPE_INT:
                kw[k] = _int_tok(v, k)
            elif k == "gs_ratio":
                try:
                    kw[k] = float(v)
                except ValueError:
                    raise ValueError(f"expected a number for gs_ratio, got '{v}'") from None
            else:
                kw[k] = v
        except ValueError as e:
            raise _LineError(str(e), i) from None
    return Pipeline(toks[1], **kw)


_DECL_READERS = {
    "buffer": _read_buffer, "texture": _read_image, "target": _read_image, "depth": _read_image,
    "heap": _read_heap, "view": _read_view, "rootsig": _read_rootsig, "pipeline": _read_pipeline,
}


def loads_text(text: str, file: str = "<string>") -> Stream:
    """Parse ``.dstream`` text; raise :class:`~drawopt.errors.InputError` on bad input."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return _Reader(text, file).read()


# ============================================================================ printer
@lru_cache(maxsize=4096)
def _f32(v: int) -> str:
    return codec.format_f32(v)


def _hex_big(v: int) -> str:
    return f"0x{v:x}" if v >= 0x10000 else str(v)


def _word_tok(v: int) -> str:
    return f"0x{v:x}" if v >= 0x10000 else str(v)


def _arg_formatter(kind: str, names: list[str], values: tuple[str, ...], hex_big: bool = False):
    if kind in ("u32", "u64", "i32"):
        return _hex_big if hex_big else str
    if kind == "ref":
        return names.__getitem__
    if kind == "enum":
        return values.__getitem__
    if kind == "heapref":
        return lambda v: f"{names[v >> 32]}[{v & 0xFFFFFFFF}]"
    if kind == "f32":
        return _f32
    if kind == "bool":
        return lambda v: "TRUE" if v else "FALSE"
    raise AssertionError(kind)  # pragma: no cover


def _command_printer(sp: OpSpec, names: list[str]):
    pos = [(j, _arg_formatter(a.kind, names, a.values)) for j, a in enumerate(sp.args) if not a.keyword]
    kws = [(j, a.name + "=", _arg_formatter(a.kind, names, a.values), a.default or 0)
           for j, a in enumerate(sp.args) if a.keyword]
    var = _arg_formatter(sp.var.kind, names, sp.var.values, hex_big=sp.name.endswith("32BitConstants")) \
        if sp.var is not None else None
    head = sp.name
    if not kws and var is None:
        def simple(row, vals):
            return " ".join([head] + [f(row[j]) for j, f in pos])
        return simple

    def general(row, vals):
        parts = [head] + [f(row[j]) for j, f in pos]
        if var is not None:
            parts += [var(v) for v in vals]
        for j, key, f, default in kws:
            if row[j] != default:
                parts.append(key + f(row[j]))
        return " ".join(parts)
    return general


def _flag_suffix(fl: int) -> str:
    return "".join(f" @{name}" for name, bit in FLAG_NAMES.items() if fl & bit)


def _opaque_line(text: str, fl: int) -> str:
    if fl == 0 and text.isprintable() and "#" not in text and not text.startswith('"') and text == text.strip():
        return "Opaque " + text
    # printable text stays readable; anything else is escaped to ASCII
    q = json.dumps(text, ensure_ascii=not text.isprintable())
    return "Opaque " + q + _flag_suffix(fl)


def _decl_lines(d: Decl) -> list[str]:
    if isinstance(d, Buffer):
        rest = f"size={d.size}" + (" cpu" if d.cpu else "") + (" frontend" if d.frontend else "")
        out = [f"buffer   {d.name:<8} {rest}"]
        if d.data is not None:
            if not d.data.size:
                out.append(f"data     {d.name}")
            else:
                out.append(_data_lines(f"data     {d.name:<8} ", d.data))
        return out
    if isinstance(d, Texture):  # and Target, Depth
        return [f"{d.kind:<8} {d.name:<8} {d.width}x{d.height} {d.format}"]
    if isinstance(d, Heap):
        return [f"heap     {d.name:<8} {d.type} {d.size}"]
    if isinstance(d, View):
        return [f"view     {d.name:<8} {d.view}" + (f" {d.resource}" if d.resource is not None else "")]
    if isinstance(d, RootSig):
        return [f"rootsig  {d.name:<8} {' '.join(str(p) for p in d.params)}".rstrip()]
    if isinstance(d, Pipeline):
        return [f"pipeline {d.name:<8} {_pipeline_keys(d)}".rstrip()]
    raise AssertionError(type(d))  # pragma: no cover


_PIPE_DEFAULTS = {f.name: f.default for f in fields(Pipeline) if f.name in PIPELINE_KEYS}


def _pipeline_keys(p: Pipeline) -> str:
    check_decl_tokens(p)
    parts = []
    for k in PIPELINE_KEYS:
        v = getattr(p, k)
        if k == "uav_stage":
            if v == replace(p, uav_stage=None).uav_stage:  # the stage Pipeline infers
                continue
        elif k == "contract":
            if not v:
                continue
            v = format_contract(v)
        elif k == "params":
            if v is None:
                continue
            v = ",".join(str(x) for x in v) if v else "none"
        elif k in ("reads", "writes"):
            if not v:
                continue
            v = ",".join(v)
        elif k == "gs_ratio":
            if v == 0:
                continue
            v = repr(float(v))
        elif v == _PIPE_DEFAULTS[k]:
            continue
        if not token_ok(str(v)):  # pragma: no cover - check_decl_tokens guards this
            raise ValueError(f"pipeline '{p.name}': {k} cannot be written as a token")
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _data_lines_py(prefix: str, words: np.ndarray) -> str:
    """The ``data`` lines of ``words``, ``_WORDS_PER_LINE`` a line, without the last newline."""
    toks = [_word_tok(w) for w in words.tolist()]
    return "\n".join(prefix + " ".join(toks[i:i + _WORDS_PER_LINE]) for i in range(0, len(toks), _WORDS_PER_LINE))


def _data_lines(prefix: str, words: np.ndarray) -> str:
    kern = load_cext("_text")
    if kern is None:
        return _data_lines_py(prefix, words)
    return kern.format_words(prefix.encode(), words, _WORDS_PER_LINE)[:-1]


def _text_line(printers, strings: list[str], code: int, row, vals, fl: int) -> str:
    """One command line (the Python printer)."""
    if code == _OPAQUE_CODE:
        return _opaque_line(strings[row[0]], fl)
    line = printers[code](row, vals)
    return line + _flag_suffix(fl) if fl else line


def _py_text_line(printers, s: Stream, i: int) -> str:
    o, ln = int(s.var_off[i]), int(s.var_len[i])
    return _text_line(printers, s.strings, int(s.op[i]), s.args[i].tolist(),
                      s.pool[o:o + ln].tolist() if ln else (), int(s.flags[i]))


def dumps_text(s: Stream) -> str:
    """The canonical ``.dstream`` text of ``s`` (header, declarations, a blank line, commands)."""
    h = s.header
    out = [header_text(h)]
    for d in s.decls:
        out += _decl_lines(d)
    names = [d.name for d in s.decls]
    printers = {sp.code: _command_printer(sp, names) for sp in OPS if sp.name != "Opaque"}
    n = len(s)
    kern = load_cext("_text")
    if kern is not None:
        head = "\n".join(out) + "\n"
        if not n:
            return head
        ops, refs, heaps, flags = printer_table(names, json_mode=False)
        printer = kern.command_printer(ops, refs, heaps, (b"FALSE", b"TRUE"), flags, _f32, False, b"", b"", b"\n",
                                      b"\n")
        return head + "\n" + command_block(s, printer, lambda s_, i: _py_text_line(printers, s_, i), "", "\n", "\n")
    if n:
        out.append("")
    ops = s.op.tolist()
    rows = s.args.tolist()
    offs = s.var_off.tolist()
    lens = s.var_len.tolist()
    pool = s.pool.tolist()
    fls = s.flags.tolist()
    strings = s.strings
    for i in range(n):
        o, ln = offs[i], lens[i]
        out.append(_text_line(printers, strings, ops[i], rows[i], pool[o:o + ln] if ln else (), fls[i]))
    out.append("")
    return "\n".join(out)
