"""Pieces shared by the three stream formats.

* :data:`BAD_INPUT` -- the exception types a hostile input can provoke in the
  standard library and numpy; every loader turns them into
  :class:`~drawopt.errors.InputError`.
* :class:`Plan` -- a per-command fast encoder. The text and JSON readers try it
  first and fall back to :func:`drawopt.ir.stream.encode_command` (the reference
  encoder, which also produces the error messages) whenever it declines, so the
  fast path can never accept what the reference would reject.
* :func:`header_from_json` / :func:`header_to_json` -- the header as JSON (used by
  JSON and by the npz ``meta`` member).
* :func:`check_decl_tokens` -- the rule that every string a declaration carries
  can be written as a ``.dstream`` token, so that every format can be converted
  to every other one losslessly.
"""

from __future__ import annotations

__all__ = [
    "BAD_INPUT", "FORMATS", "Plan", "plans_for", "value_index_of_check_arg", "header_from_json",
    "header_to_json", "check_decl_tokens", "token_ok", "suggest", "opaque_text_error", "Fallback",
    "command_block", "printer_table", "scanner_tables", "declare_in",
]

import json
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from drawopt.ir import codec
from drawopt.ir.decls import Decl, Decls, Pipeline, format_contract
from drawopt.ir.ops import BY_NAME, MAX_OPCODE, NARGS, OPS, Arg, OpSpec
from drawopt.ir.stream import FLAG_NAMES, Header, Stream

FORMATS = ("text", "json", "npz")

BAD_INPUT: tuple[type[BaseException], ...] = (
    ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError, RecursionError,
    EOFError, OSError, zipfile.BadZipFile, zlib.error, struct.error, UnicodeError, NotImplementedError,
)
"""Exceptions that bad input can raise inside the readers (all become ``InputError``)."""

_LIMITS = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "u64": (0, 2**63 - 1)}


class Fallback(Exception):
    """Raised by a fast encoder that declines an input (the reference encoder decides)."""


# ---------------------------------------------------------------------------- tokens
def token_ok(s: object) -> bool:
    """Whether ``s`` can be written as one ``.dstream`` token (value of ``key=value``).

    Non-empty, printable, no whitespace and no ``#`` (which starts a comment).
    """
    return isinstance(s, str) and bool(s) and s.isprintable() and " " not in s and "#" not in s


def check_decl_tokens(d: Decl) -> None:
    """Raise ``ValueError`` if a string of declaration ``d`` is not a ``.dstream`` token.

    Only pipelines carry free-form strings (shader and layout names, contract
    values); every other string is a checked identifier or enumerant.
    """
    if not isinstance(d, Pipeline):
        return
    for key in ("vs", "hs", "ds", "gs", "ps", "cs", "layout", "depth", "root", "uav_stage"):
        v = getattr(d, key)
        if v is not None and not token_ok(v):
            raise ValueError(f"pipeline '{d.name}': {key} {v!r} must be one token "
                             "(printable, no spaces, no '#')")
    for key in ("reads", "writes"):
        for v in getattr(d, key):
            if not token_ok(v) or "," in v:
                raise ValueError(f"pipeline '{d.name}': {key} entry {v!r} is not a name")
    if d.contract and not token_ok(format_contract(d.contract)):
        raise ValueError(f"pipeline '{d.name}': contract values must be printable, without spaces or '#'")


def opaque_text_error(t: object) -> str | None:
    """Why ``t`` cannot be the text of an ``Opaque`` command (None if it can)."""
    if not isinstance(t, str) or not t:
        return "Opaque needs a non-empty text"
    if "\n" in t:
        return "Opaque text must be one line"
    return None


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, else ``''``."""
    import difflib  # only on an error path: not imported at every start

    m = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{m[0]}'?)" if m else ""


# ---------------------------------------------------------------------------- header
HEADER_KEYS = ("context", "kind", "fast_semantics", "auto_gpu_flush", "target", "reorder")
"""Header keys in the order every format writes them; ``target``/``reorder`` only when recorded."""


def header_to_json(h: Header) -> dict[str, Any]:
    """The header as a JSON object (every key, version excluded; provenance keys only when recorded)."""
    obj: dict[str, Any] = {"context": h.context, "kind": h.kind, "fast_semantics": h.fast_semantics,
                           "auto_gpu_flush": h.auto_gpu_flush}
    for k in ("target", "reorder"):
        if getattr(h, k):
            obj[k] = getattr(h, k)
    return obj


def header_from_json(obj: object) -> Header:
    """Inverse of :func:`header_to_json` (missing keys take their defaults); ``ValueError``."""
    if not isinstance(obj, dict):
        raise ValueError("header must be an object")
    for k, v in obj.items():
        if k not in HEADER_KEYS:
            raise ValueError(f"unknown header key '{k}'{suggest(str(k), HEADER_KEYS)}")
        want = bool if k in ("fast_semantics", "auto_gpu_flush") else str
        if not isinstance(v, want):
            raise ValueError(f"header key '{k}' must be {'true or false' if want is bool else 'a string'}")
    return Header(1, **obj)


def header_text(h: Header) -> str:
    """The ``.dstream`` header line of ``h``.

    >>> header_text(Header(target="vulkan", reorder="declared"))
    'drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on target=vulkan reorder=declared'
    """
    words = [f"drawopt {h.version}"]
    for k, v in header_to_json(h).items():
        words.append(f"{k}={('on' if v else 'off') if isinstance(v, bool) else v}")
    return " ".join(words)


# ---------------------------------------------------------------------------- fast encoders
def value_index_of_check_arg(sp: OpSpec, arg: int) -> tuple[int | None, str | None]:
    """Map a :class:`~drawopt.ir.stream.StreamCheckError` argument position to the source.

    Returns ``(values_index, keyword)``: the index among the positional values
    (fixed positionals, then the variadic tail), or the keyword name, or
    ``(None, None)`` for the whole command.
    """
    if arg < 0:
        return None, None
    positional = [j for j, a in enumerate(sp.args) if not a.keyword]
    if arg < len(sp.args):
        a = sp.args[arg]
        if a.keyword:
            return None, a.name
        return positional.index(arg), None
    return len(positional) + (arg - len(sp.args)), None


class Plan:
    """Fast encoder of one command for the text (``str`` tokens) or JSON (values) reader.

    ``encode(values)`` returns ``(row, var)`` exactly as
    :func:`drawopt.ir.stream.encode_command` would for positional-only input, or
    raises :class:`Fallback` (or any lookup error) to hand the input over to it.
    """

    __slots__ = ("spec", "code", "convs", "var_conv", "nfix", "tail", "var_min", "var_max", "has_var")

    def __init__(self, sp: OpSpec, decls: Decls, json_mode: bool):
        self.spec = sp
        self.code = sp.code
        positional = [j for j, a in enumerate(sp.args) if not a.keyword]
        if positional != list(range(len(positional))):  # pragma: no cover - vocabulary invariant
            raise AssertionError(f"{sp.name}: keyword arguments must follow positional ones")
        self.has_var = sp.var is not None
        # with a variadic tail, only required positionals are accepted (as encode_command does)
        fixed = [j for j in positional if not (self.has_var and sp.args[j].optional)]
        self.nfix = len(fixed)
        self.convs = [_conv(sp.args[j], decls, json_mode) for j in fixed]
        self.var_conv = _conv(sp.var, decls, json_mode) if sp.var is not None else None
        self.tail = [a.default or 0 for a in sp.args[self.nfix:]] + [0] * (6 - len(sp.args))
        self.var_min, self.var_max = sp.var_min, sp.var_max

    def encode(self, vals: list[Any]) -> tuple[list[int], list[int]]:
        nfix = self.nfix
        if not self.has_var:
            if len(vals) != nfix:
                raise Fallback
            row = [c(t) for c, t in zip(self.convs, vals)]
            row += self.tail
            return row, []
        nvar = len(vals) - nfix
        if nvar < self.var_min or nvar > self.var_max:
            raise Fallback
        row = [c(t) for c, t in zip(self.convs, vals)]
        row += self.tail
        vc = self.var_conv
        return row, [vc(t) for t in vals[nfix:]]  # type: ignore[misc]


def plans_for(decls: Decls, json_mode: bool) -> dict[str, Plan]:
    """A :class:`Plan` per command name, bound to ``decls`` (which may still grow)."""
    return {sp.name: Plan(sp, decls, json_mode) for sp in OPS if sp.name != "Opaque"}


def _conv(a: Arg, decls: Decls, json_mode: bool) -> Callable[[Any], int]:
    k = a.kind
    if k in _LIMITS:
        lo, hi = _LIMITS[k]
        if json_mode:
            def conv_int_json(t: Any) -> int:
                if type(t) is int and lo <= t <= hi:
                    return t
                raise Fallback
            return conv_int_json

        def conv_int(t: str) -> int:
            v = int(t, 0)
            if lo <= v <= hi:
                return v
            raise Fallback
        return conv_int
    # declarations may be added while a text stream is read: look them up through ``decls``
    if k == "ref":
        allowed = frozenset(a.ref)

        def conv_ref(t: str) -> int:
            i = decls.index[t]
            if decls.items[i].kind in allowed:
                return i
            raise Fallback
        return conv_ref
    if k == "enum":
        table = {v: i for i, v in enumerate(a.values)}
        return table.__getitem__
    if k == "heapref":
        def conv_heapref(t: str) -> int:
            h, _, rest = t.partition("[")
            digits = rest[:-1]
            if rest[-1:] != "]" or not digits.isascii() or not digits.isdigit():
                raise Fallback
            i = decls.index[h]
            d = decls.items[i]
            slot = int(digits)
            if d.kind != "heap" or slot >= d.size:  # type: ignore[union-attr]
                raise Fallback
            return (i << 32) | slot
        return conv_heapref

    def conv_codec(t: Any) -> int:  # f32, bool: rare, go through the reference codec
        return codec.encode(a, t, decls, [])
    return conv_codec


OPAQUE = BY_NAME["Opaque"]


# ---------------------------------------------------------------------------- compiled reading and printing
KIND_BIT = {k: 1 << i for i, k in enumerate(("buffer", "texture", "target", "depth", "heap", "view", "rootsig",
                                            "pipeline"))}
"""Declaration kind -> the bit ``drawopt._text.text_scanner`` knows it by."""


def declare_in(scanner: Any, decls: Decls, start: int = 0) -> None:
    """Make declarations ``start...`` of ``decls`` known to a ``drawopt._text.text_scanner``.

    >>> from drawopt.ir.decls import Buffer
    >>> decls = Decls()
    >>> _ = decls.add(Buffer("vb", 64))
    >>> class Shown:
    ...     def declared(self, *what): print(what)
    >>> declare_in(Shown(), decls)
    (b'vb', 0, 1, 64)
    """
    for di in range(start, len(decls)):
        d = decls[di]
        scanner.declared(d.name.encode(), di, KIND_BIT[d.kind], getattr(d, "size", 0))


@lru_cache(maxsize=1)
def scanner_tables() -> tuple[list[tuple[Any, ...]], list[tuple[bytes, int]], int]:
    """``(ops, flags, buffer_bit)`` for ``drawopt._text.text_scanner``: the commands filled the way
    :func:`~drawopt.ir.stream.encode_command` fills them (positional slots, keywords, defaults).

    >>> ops, flags, buffer_bit = scanner_tables()
    >>> ops[0][:5], flags, buffer_bit
    ((1, b'SetPipelineState', 1, [0], []), [(b'nomerge', 1)], 1)
    """
    def desc(a, keyword: bool):
        mask = 0
        for k in (a.ref if a.kind == "ref" else ("heap",) if a.kind == "heapref" else ()):
            mask |= KIND_BIT[k]
        return (a.kind, mask, tuple(v.encode() for v in a.values), a.name.encode() if keyword else None)

    out = []
    for sp in OPS:
        if sp is OPAQUE:
            continue
        positional = [j for j, a in enumerate(sp.args) if not a.keyword]
        nreq = sum(1 for j in positional if not sp.args[j].optional)
        slots = positional[:nreq] if sp.var is not None else positional
        out.append((sp.code, sp.name.encode(), nreq, slots, [j for j, a in enumerate(sp.args) if a.keyword],
                    [desc(a, a.keyword) for a in sp.args], desc(sp.var, False) if sp.var is not None else None,
                    sp.var_min, sp.var_max,
                    [a.default if a.optional else 0 for a in sp.args] + [0] * (NARGS - len(sp.args))))
    return out, [(f.encode(), b) for f, b in FLAG_NAMES.items()], KIND_BIT["buffer"]


def command_block(s: Stream, printer: Any, py_line, prefix: str, suffix: str, last_suffix: str) -> str:
    """The command lines of ``s`` printed by ``printer`` (a ``drawopt._text.command_printer``),
    with ``py_line(s, i)`` printing each command it stops at; every line gets ``prefix`` and
    ``suffix`` (``last_suffix`` after the last one).

    >>> from drawopt.ir.formats import loads
    >>> s = loads("drawopt 1\\nDispatch 1 2 3\\nDispatch 4 5 6\\n")
    >>> class StopsAtOnce:
    ...     def format(self, *columns_and_start): return "", columns_and_start[-1]
    >>> command_block(s, StopsAtOnce(), lambda s, i: f"command {i}", "", "\\n", ".\\n")
    'command 0\\ncommand 1.\\n'
    """
    n = len(s)
    parts = []
    op, args, var_off, var_len, pool, flags = s.op, s.args, s.var_off, s.var_len, s.pool, s.flags
    i = 0
    while i < n:
        text, i = printer.format(op, args, var_off, var_len, pool, flags, i)
        parts.append(text)
        if i < n:
            parts.append(prefix + py_line(s, i) + (suffix if i < n - 1 else last_suffix))
            i += 1
    return "".join(parts)


def printer_table(names: list[str], json_mode: bool) -> tuple[list[Any], ...]:
    """``(ops, refs, heap_names, flags)`` for ``drawopt._text.command_printer``: the tokens the
    Python printers write (``text._command_printer``, ``jsonfmt._json_printer``).

    >>> ops, refs, heaps, flags = printer_table(["vb"], json_mode=True)
    >>> ops[48][0], ops[48][1][0], refs, heaps, flags
    (b'["Dispatch"', (0, 'u32', 0, False, (), None), [b'"vb"'], [b'vb'], [(1, b'"nomerge"')])
    """
    q = json.dumps if json_mode else str

    def desc(j: int, a, hex_big: bool = False):
        key = (json.dumps(a.name) + ": " if json_mode else a.name + "=").encode() if a.keyword else None
        return (j, a.kind, a.default or 0, hex_big, tuple(q(v).encode() for v in a.values), key)

    ops: list[Any] = [None] * (MAX_OPCODE + 1)
    for sp in OPS:
        if sp is OPAQUE:
            continue
        head = ("[" + json.dumps(sp.name)) if json_mode else sp.name
        var = None
        if sp.var is not None:
            var = desc(-1, sp.var, hex_big=not json_mode and sp.name.endswith("32BitConstants"))
        ops[sp.code] = (head.encode(), [desc(j, a) for j, a in enumerate(sp.args) if not a.keyword],
                        [desc(j, a) for j, a in enumerate(sp.args) if a.keyword], var)
    flags = [(b, (json.dumps(f) if json_mode else "@" + f).encode()) for f, b in FLAG_NAMES.items()]
    return ops, [q(n).encode() for n in names], [n.encode() for n in names], flags

