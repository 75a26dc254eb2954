"""Deterministic content synthesised from a stream's declarations.

A recorded stream names its buffers but rarely carries their contents. The
replayer makes contents that depend only on a buffer's *name*, *size* and *role*
(what the stream reads it as), so that an original stream and any rewrite of it
that keeps the declarations see exactly the same data, while generated buffers
that a rewrite adds (per-draw arrays, args buffers) travel with their ``data``
and are used verbatim.

Roles and what a buffer holds when it has no ``data``:

``index``   read by ``IASetIndexBuffer`` / ``DrawIndexedX``: quad-list indices
            ``(i // 6) * 4 + (0, 1, 2, 2, 1, 3)[i % 6]`` in the format of its first use.
``args``    read by an indirect draw: valid D3D12 argument records (small counts,
            varied starts, bases and instances) at every offset the stream reads;
            counts of ``*Auto`` draws in ``1..min(max_count, 16)``.
``words``   anything else (vertex buffers, per-draw arrays without data):
            word ``w`` holds ``salt(name) + w``, an "address" the shaders turn into
            a position (see :mod:`drawopt.replay.shaders`).

Buffers a ``Dispatch`` writes start as zeros and receive, at each write, the same
role-based content under a salt made from the write's ordinal, the dispatch size
and the compute state (so a missing, moved or changed dispatch shows).

All hashing is the 32-bit ``lowbias32`` mix, vectorised in numpy; Python's
``hash`` (salted per process) is never used.
"""

from __future__ import annotations

__all__ = [
    "mix32", "crc", "Roles", "analyze_roles", "synthesize", "pool_data", "QUAD_PATTERN",
    "POOL_SIZE", "ARGS_WORDS", "synthesize_cached",
]

import functools
import zlib
from dataclasses import dataclass, field

import numpy as np

from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import ARGS_SIZE, Stream

QUAD_PATTERN = np.array([0, 1, 2, 2, 1, 3], dtype=np.uint32)
POOL_SIZE = 1 << 20
"""Entries of the global vertex pool (a power of two; addresses wrap)."""
ARGS_WORDS = {16: 4, 20: 5}

_U32 = np.uint32


def mix32(x: np.ndarray | int) -> np.ndarray:
    """The ``lowbias32`` integer hash, elementwise on ``uint32`` (same as the GLSL ``hash``)."""
    x = np.asarray(x, dtype=np.uint64) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x.astype(_U32)


def crc(*parts: object) -> int:
    """A stable 32-bit hash of ``parts`` (their ``repr``), for salts and state hashes."""
    return zlib.crc32(repr(parts).encode()) & 0xFFFFFFFF


@dataclass
class Roles:
    """What a stream reads each buffer as (by declaration index)."""

    index_format: dict[int, int] = field(default_factory=dict)
    """buffer -> stored index format (0 = R16, 1 = R32) of its first use."""
    args: dict[int, list[tuple[np.ndarray, int]]] = field(default_factory=dict)
    """buffer -> [(byte offsets of records, record bytes 16|20)]."""
    counts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    """buffer -> [(byte offset, max_count)] of GPU draw counts."""
    index_capacity: int = 6
    """Fewest indices any index-buffer binding of the stream offers (for args records)."""


def analyze_roles(s: Stream) -> Roles:
    """Find every buffer the stream reads as index data, args records or draw counts."""
    r = Roles()
    caps: list[int] = []
    for name in ("IASetIndexBuffer", "DrawIndexedX"):
        sp = BY_NAME[name]
        where = np.flatnonzero(s.op == sp.code)
        for i in where:
            b = int(s.args[i, sp.col("buffer")])
            fmt = int(s.args[i, sp.col("format")])
            r.index_format.setdefault(b, fmt)
            if name == "IASetIndexBuffer":
                size = s.decls[b].size - int(s.args[i, sp.col("offset")])
                caps.append(size // (2 if fmt == 0 else 4))
    if caps:
        r.index_capacity = max(6, min(caps))
    for name, rec in ARGS_SIZE.items():
        sp = BY_NAME[name]
        where = np.flatnonzero(s.op == sp.code)
        if where.size == 0:
            continue
        rows = s.args[where]
        bufs = rows[:, sp.col("args_buffer")]
        offs = rows[:, sp.col("offset")]
        if "count" in sp.fields or "max_count" in sp.fields:
            n = rows[:, sp.col("count" if "count" in sp.fields else "max_count")]
            stride = rows[:, sp.col("stride")]
        else:
            n = np.ones(where.size, np.int64)
            stride = np.zeros(where.size, np.int64)
        for b in np.unique(bufs):
            m = bufs == b
            reps = n[m]
            total = int(reps.sum())
            if total == 0:
                continue
            start = np.repeat(offs[m], reps)
            step = np.repeat(stride[m], reps)
            k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
            r.args.setdefault(int(b), []).append((np.unique(start + k * step), rec))
        if "max_count" in sp.fields:
            cb = rows[:, sp.col("count_buffer")]
            co = rows[:, sp.col("count_offset")]
            mc = rows[:, sp.col("max_count")]
            for b, o, m_ in zip(cb.tolist(), co.tolist(), mc.tolist()):
                r.counts.setdefault(int(b), []).append((int(o), int(m_)))
    return r


def _index_words(nbytes: int, fmt: int, salt: int) -> np.ndarray:
    """Quad-list indices (``salt`` shifts them by whole quads) packed into words."""
    isize = 2 if fmt == 0 else 4
    n = nbytes // isize
    i = np.arange(n, dtype=np.uint32 if n < 1 << 31 else np.uint64)  # values wrap to the index size anyway
    vals = (i // 6) * 4 + QUAD_PATTERN.astype(i.dtype)[(i % 6)] + i.dtype.type((salt & 0xFF) * 4)
    if fmt == 0:
        arr = (vals & 0xFFFF).astype(np.uint16)
    else:
        arr = (vals & 0xFFFFFFFF).astype(np.uint32)
    raw = np.zeros((nbytes + 3) // 4 * 4, np.uint8)
    raw[: arr.nbytes] = arr.view(np.uint8)
    return raw.view(np.uint32).copy()


def _args_records(offsets: np.ndarray, rec: int, salt: int, capacity: int) -> np.ndarray:
    """``(len(offsets), rec // 4)`` valid argument records for the given byte offsets."""
    h = mix32(mix32(offsets.astype(np.uint64) & 0xFFFFFFFF) ^ np.uint32(salt))
    h2 = mix32(h ^ np.uint32(0x5BD1E995))
    count = (3 * (1 + (h % 4))).astype(np.uint64)
    inst = 1 + ((h >> 8) % 2).astype(np.uint64)
    if rec == 16:
        out = np.stack([count, inst, (h2 % 4096).astype(np.uint64), ((h >> 24) % 16).astype(np.uint64)], 1)
    else:
        quads = max(1, (capacity - 12) // 6)
        start = (h2 % quads).astype(np.uint64) * 6
        base = ((h >> 12) % 1024).astype(np.uint64)
        out = np.stack([count, inst, start, base, ((h >> 24) % 16).astype(np.uint64)], 1)
    return out.astype(np.uint32)


def synthesize(size: int, buf: int, name: str, roles: Roles, salt: int = 0, words_role: bool = True) -> np.ndarray:
    """Contents (``uint32`` words, ``ceil(size / 4)`` of them) of buffer ``buf`` for ``roles``.

    ``salt`` 0 gives the initial contents; a GPU write uses its own salt.
    ``words_role`` False leaves non-index, non-args words zero (GPU-written buffers).
    """
    nwords = (size + 3) // 4
    base_salt = crc(name, size) ^ salt
    if buf in roles.index_format:
        out = _index_words(size, roles.index_format[buf], salt)
    elif words_role:  # uint32 arithmetic wraps like the & 0xFFFFFFFF it stands for
        out = np.arange(nwords, dtype=np.uint32) + np.uint32(base_salt & 0xFFFF)
    else:
        out = mix32(np.arange(nwords, dtype=np.uint64) ^ base_salt) & np.uint32(0xFF) if salt else \
            np.zeros(nwords, np.uint32)
    for offsets, rec in roles.args.get(buf, ()):
        nw = rec // 4
        ok = offsets[(offsets % 4 == 0) & (offsets + rec <= size)]
        if ok.size == 0:
            continue
        recs = _args_records(ok, rec, base_salt, roles.index_capacity)
        idx = (ok // 4)[:, None] + np.arange(nw)[None, :]
        out[idx.ravel()] = recs.ravel()
    for off, max_count in roles.counts.get(buf, ()):
        if off % 4 == 0 and off + 4 <= size:
            h = int(mix32(off ^ base_salt))
            out[off // 4] = 1 + h % max(1, min(max_count, 16))
    return out


_CACHE: dict[int, np.ndarray] = {}
_CACHE_BYTES = 1 << 28


def synthesize_cached(size: int, buf: int, name: str, roles: Roles) -> np.ndarray:
    """:func:`synthesize` (salt 0) through a small cache: an original and its rewrite read the
    same buffers, and large vertex buffers take a noticeable time to make. Returns a read-only array."""
    parts: list[object] = [name, size, roles.index_format.get(buf), roles.index_capacity if buf in roles.args else 0]
    for offsets, rec in roles.args.get(buf, ()):
        parts.append((rec, zlib.crc32(offsets.tobytes())))
    parts.append(tuple(roles.counts.get(buf, ())))
    key = crc(*parts)
    got = _CACHE.get(key)
    if got is None:
        got = synthesize(size, buf, name, roles)
        got.setflags(write=False)
        while _CACHE and sum(v.nbytes for v in _CACHE.values()) + got.nbytes > _CACHE_BYTES:
            _CACHE.pop(next(iter(_CACHE)))
        if got.nbytes <= _CACHE_BYTES:
            _CACHE[key] = got
    return got


@functools.lru_cache(maxsize=2)
def pool_data(n: int = POOL_SIZE) -> np.ndarray:
    """The global vertex pool: ``n`` entries of ``uvec2(jitter xy as unorm16x2, salt)`` (read-only)."""
    a = np.arange(n, dtype=np.uint64)
    h = mix32(a ^ 0x27D4EB2F)
    out = np.empty((n, 2), np.uint32)
    out[:, 0] = h
    out[:, 1] = mix32(h ^ 0x165667B1)
    out.setflags(write=False)
    return out
