"""Encoding of command arguments between Python/text values and stored integers.

See :mod:`drawopt.ir.ops` for the encodings. ``encode`` accepts text tokens (as the
``.dstream`` parser reads them) and Python values (as the builder API passes them).
"""

from __future__ import annotations

__all__ = ["encode", "decode", "format_token", "f32_bits", "bits_f32", "format_f32"]

import math
import re
from typing import Any

import numpy as np

from drawopt.ir.decls import Decls
from drawopt.ir.ops import Arg

_HEAPREF = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\[([0-9]+)\]\Z")
_LIMITS = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "u64": (0, 2**63 - 1)}
_F32_MAX = float(np.finfo(np.float32).max)


def f32_bits(x: float) -> int:
    """IEEE single-precision bits of ``x`` (``ValueError`` if it overflows)."""
    if math.isfinite(x) and abs(x) > _F32_MAX:
        raise ValueError(f"{x} does not fit a 32-bit float")
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def bits_f32(b: int) -> float:
    """The float whose single-precision bits are ``b``."""
    return float(np.array(b, dtype=np.uint32).view(np.float32))


def format_f32(b: int) -> str:
    """Shortest text that reads back as the same float32; hex bits for inf/nan/-0."""
    f = np.array(b, dtype=np.uint32).view(np.float32)
    if not np.isfinite(f) or (f == 0 and b != 0):
        return f"0x{b:08x}"
    s = np.format_float_positional(f, unique=True, trim="-")
    return s


def _int(tok: Any) -> int:
    if isinstance(tok, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(tok, (int, np.integer)):
        return int(tok)
    if isinstance(tok, str):
        try:
            return int(tok, 0)
        except ValueError:
            raise ValueError(f"expected an integer, got '{tok}'") from None
    raise ValueError(f"expected an integer, got {type(tok).__name__}")


def encode(arg: Arg, tok: Any, decls: Decls, strings: list[str]) -> int:
    """Stored integer for value ``tok`` of argument ``arg``; ``ValueError`` if invalid."""
    k = arg.kind
    if k in _LIMITS:
        v = _int(tok)
        lo, hi = _LIMITS[k]
        if not lo <= v <= hi:
            raise ValueError(f"{arg.name} {v} is out of range ({lo}..{hi})")
        return v
    if k == "f32":
        if isinstance(tok, str):
            if tok.lower().startswith("0x"):
                v = _int(tok)
                if not 0 <= v <= 0xFFFFFFFF:
                    raise ValueError(f"{arg.name}: float bits out of range")
                return v
            try:
                x = float(tok)
            except ValueError:
                raise ValueError(f"expected a number for {arg.name}, got '{tok}'") from None
        elif isinstance(tok, (int, float, np.floating, np.integer)) and not isinstance(tok, bool):
            x = float(tok)
        else:
            raise ValueError(f"expected a number for {arg.name}")
        return f32_bits(x)
    if k == "bool":
        if tok in (True, "TRUE", "true", 1, "1"):
            return 1
        if tok in (False, "FALSE", "false", 0, "0"):
            return 0
        raise ValueError(f"expected TRUE or FALSE for {arg.name}, got '{tok}'")
    if k == "enum":
        if isinstance(tok, str) and tok in arg.values:
            return arg.values.index(tok)
        raise ValueError(f"{arg.name} must be one of {', '.join(arg.values)}, got '{tok}'")
    if k == "ref":
        if not isinstance(tok, str):
            raise ValueError(f"expected a name for {arg.name}")
        return decls.ref(tok, arg.ref)
    if k == "heapref":
        m = _HEAPREF.match(tok) if isinstance(tok, str) else None
        if not m:
            raise ValueError(f"expected heap[slot] for {arg.name}, got '{tok}'")
        h = decls.ref(m.group(1), ("heap",))
        slot = int(m.group(2))
        if slot >= decls[h].size:
            raise ValueError(f"slot {slot} is outside heap '{m.group(1)}' of size {decls[h].size}")
        return (h << 32) | slot
    if k == "str":
        if not isinstance(tok, str) or not tok or "\n" in tok:
            raise ValueError(f"expected one line of text for {arg.name}")
        try:
            return strings.index(tok)
        except ValueError:
            strings.append(tok)
            return len(strings) - 1
    raise AssertionError(k)


def decode(arg: Arg, v: int, decls: Decls, strings: list[str]) -> Any:
    """Python value of stored integer ``v`` (names as strings, floats as float)."""
    k = arg.kind
    v = int(v)
    if k in _LIMITS:
        return v
    if k == "f32":
        return bits_f32(v)
    if k == "bool":
        return bool(v)
    if k == "enum":
        return arg.values[v]
    if k == "ref":
        return decls[v].name
    if k == "heapref":
        return f"{decls[v >> 32].name}[{v & 0xFFFFFFFF}]"
    if k == "str":
        return strings[v]
    raise AssertionError(k)


def format_token(arg: Arg, v: int, decls: Decls, strings: list[str], hex_big: bool = False) -> str:
    """Canonical text token for stored value ``v``."""
    k = arg.kind
    v = int(v)
    if k == "f32":
        return format_f32(v)
    if k == "bool":
        return "TRUE" if v else "FALSE"
    if k in _LIMITS:
        return f"0x{v:x}" if hex_big and v >= 0x10000 else str(v)
    return str(decode(arg, v, decls, strings))
