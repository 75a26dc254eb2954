"""The columnar binary stream format: a numpy ``.npz`` archive (no pickles).

Members (``N`` commands, ``M`` pooled variadic values)::

    op       uint16[N]     opcodes (drawopt.ir.ops, stable)
    args     int64[N, 6]   fixed arguments, encoded (drawopt.ir.codec)
    var_off  int64[N]      start of each variadic tail in pool
    var_len  int32[N]      its length
    pool     int64[M]      variadic values
    flags    uint8[N]      command flags
    line     int32[N]      source lines (provenance)
    meta     uint8[K]      UTF-8 JSON: {"drawopt": 1, "header": {...}, "decls": [...], "strings": [...]}
    data_<i> uint32[W]     contents of buffer declaration i (global declaration index)

``meta.decls`` are :func:`drawopt.ir.decls.decl_to_json` objects without buffer
data. The archive is laid out as ``numpy.savez_compressed`` lays it out (one ``NAME.npy``
member per array, zip64 headers), deflated at :data:`COMPRESSLEVEL` (zlib level 1: at a
million draws numpy's default level 6 spends 4 s in zlib for a file 26% smaller); plain
``np.load`` reads it. The writer compacts the pool and the string table; the reader checks
member names, dtypes, shapes and sizes *before* reading any array (a hostile
archive cannot make it allocate more than the limits below), then
:meth:`Stream.check`. Errors are reported at ``file:line:1`` where ``line`` is
the offending command's index + 1 (1 for archive-level problems).
"""

from __future__ import annotations

__all__ = ["loads_npz", "dumps_npz", "write_archive", "LIMITS", "COMPRESSLEVEL"]

import io
import json
import os
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from drawopt.errors import InputError
from drawopt.ir.decls import Buffer, Decls, decl_from_json, decl_to_json
from drawopt.ir.formats.common import (
    BAD_INPUT,
    OPAQUE,
    check_decl_tokens,
    header_from_json,
    header_to_json,
    opaque_text_error,
)
from drawopt.ir.ops import NARGS
from drawopt.ir.stream import Stream, StreamCheckError

LIMITS = {
    "commands": 1 << 24,        # N
    "pool": 1 << 26,            # M
    "data_words": 1 << 28,      # all data_<i> together
    "meta_bytes": 1 << 28,
}
"""Largest sizes the reader accepts (checked from the .npy headers, before allocating)."""

_COLUMNS = {  # name: (dtype, shape given N (None = free length))
    "op": np.dtype(np.uint16), "args": np.dtype(np.int64), "var_off": np.dtype(np.int64),
    "var_len": np.dtype(np.int32), "pool": np.dtype(np.int64), "flags": np.dtype(np.uint8),
    "line": np.dtype(np.int32), "meta": np.dtype(np.uint8),
}
_DATA_DTYPE = np.dtype(np.uint32)

_OPAQUE_TEXT = OPAQUE.col("text")
"""The argument column of an Opaque command's string (an index into ``Stream.strings``)."""

COMPRESSLEVEL = 1
"""zlib level of the writer's members (0: stored uncompressed; None: zlib's default, 6, which
gives ``np.savez_compressed``'s bytes). Frame of 1M draws, 254 MB of arrays: level 6 16.3 MB
in 3.95 s CPU, level 1 22.0 MB in 1.23 s, stored 254 MB in 0.37 s."""


# ============================================================================ writer
def dumps_npz(s: Stream, level: int | None = COMPRESSLEVEL) -> bytes:
    """The ``.npz`` bytes of ``s`` (pool and strings compacted), deflated at zlib ``level``
    (:data:`COMPRESSLEVEL`; 0 stores the arrays uncompressed).

    >>> from drawopt.gen import generate
    >>> s = generate("quads", 4)
    >>> a = np.load(io.BytesIO(dumps_npz(s)), allow_pickle=False)
    >>> a["op"].tolist() == s.op.tolist(), np.array_equal(a["args"], s.args)
    (True, True)
    """
    lens = s.var_len.astype(np.int32, copy=False)  # int32 already (Stream.__post_init__)
    off = np.zeros(len(s), np.int64)
    if len(s):
        np.cumsum(lens[:-1].astype(np.int64), out=off[1:])
    args = s.args  # copied only to renumber Opaque strings
    opq = s.op == OPAQUE.code
    strings: list[str] = []
    if opq.any():
        args = args.copy()
        used, inv = np.unique(args[opq, _OPAQUE_TEXT], return_inverse=True)
        strings = [s.strings[int(i)] for i in used]
        args[opq, _OPAQUE_TEXT] = inv.reshape(-1)
    decls = []
    arrays: dict[str, np.ndarray] = {}
    for i, d in enumerate(s.decls):
        if isinstance(d, Buffer) and d.data is not None:
            arrays[f"data_{i}"] = np.ascontiguousarray(d.data, dtype=np.uint32)
            d = replace(d, data=None)
        decls.append(decl_to_json(d))
    meta = {"drawopt": 1, "header": header_to_json(s.header), "decls": decls, "strings": strings}
    arrays.update(
        op=s.op, args=args, var_off=off, var_len=lens, pool=s.var_values(), flags=s.flags, line=s.line,
        meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
    )
    return write_archive(arrays, level)


def write_archive(arrays: dict[str, np.ndarray], level: int | None = COMPRESSLEVEL,
                  threads: int | None = None) -> bytes:
    """``arrays`` as ``.npz`` bytes, laid out as ``np.savez_compressed`` writes them (its bytes
    for ``level=None``), each member deflated at zlib ``level`` (stored for 0).

    The members are deflated in ``threads`` worker threads (default: one per core, at most
    :data:`WRITER_THREADS`; zlib and crc32 release the GIL), each member by the same calls
    :mod:`zipfile` would make (the same deflate stream, so the same bytes), and laid out in
    ``arrays``' order.

    >>> a = {"x": np.arange(3, dtype=np.int64)}
    >>> b = io.BytesIO(); np.savez_compressed(b, **a)
    >>> write_archive(a, None) == b.getvalue(), np.load(io.BytesIO(write_archive(a, 0)))["x"].tolist()
    (True, [0, 1, 2])
    """
    comp = zipfile.ZIP_STORED if level == 0 else zipfile.ZIP_DEFLATED
    items = [(name, np.asanyarray(a)) for name, a in arrays.items()]
    workers = min(threads or WRITER_THREADS, os.cpu_count() or 1, len(items))
    if workers > 1:
        with ThreadPoolExecutor(workers) as ex:
            members = list(ex.map(lambda it: _Member(level).npy(it[1]), items))
    else:
        members = [_Member(level).npy(a) for _, a in items]
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", compression=comp, allowZip64=True,
                         compresslevel=None if level == 0 else level) as zf:
        for (name, _), m in zip(items, members):
            # what ZipFile.open(name, "w", force_zip64=True) and its close() write, sizes known
            zi = zipfile.ZipInfo(name + ".npy")
            zi.compress_type = comp
            zi.external_attr = 0o600 << 16
            zi.CRC, zi.file_size, zi.compress_size = m.crc, m.size, m.csize
            zi.header_offset = bio.tell()
            bio.write(zi.FileHeader(True))
            for piece in m.out:
                bio.write(piece)
            zf.start_dir = bio.tell()
            zf.filelist.append(zi)
            zf.NameToInfo[zi.filename] = zi
    return bio.getvalue()


WRITER_THREADS = 4
"""Most threads :func:`write_archive` deflates members in."""


class _Member:
    """One archive member's stored bytes: the ``.npy`` image fed through the compressor
    :mod:`zipfile` uses, one ``write`` call at a time (as ``numpy.lib.format.write_array``
    makes them), with its CRC-32 and sizes."""

    def __init__(self, level: int | None):
        self.comp = None if level == 0 else zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED, -15)
        self.out: list[bytes] = []
        self.crc = self.size = self.csize = 0

    def write(self, data: Any) -> int:
        if not isinstance(data, (bytes, bytearray)):
            data = memoryview(data)
        n = len(data) if isinstance(data, (bytes, bytearray)) else data.nbytes
        self.size += n
        self.crc = zlib.crc32(data, self.crc)
        piece = self.comp.compress(data) if self.comp is not None else bytes(data)
        self.out.append(piece)
        self.csize += len(piece)
        return n

    def npy(self, a: np.ndarray) -> _Member:
        npformat.write_array(self, a, allow_pickle=False)
        if self.comp is not None:
            piece = self.comp.flush()
            self.out.append(piece)
            self.csize += len(piece)
        return self


# ============================================================================ reader
class _Err(Exception):
    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.message, self.line = message, line


def _expect_shape(name: str, shape: tuple[int, ...], want: tuple[int, ...]) -> None:
    if shape != want:
        raise _Err(f"array '{name}' has shape {shape}, expected {want}")


def _headers(npz: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every member, read from the .npy headers only."""
    out = {}
    for name in npz.files:
        member = name + ".npy"
        if member not in npz.zip.namelist():
            raise _Err(f"archive member '{name}' is not a .npy array")
        with npz.zip.open(member) as f:
            version = npformat.read_magic(f)
            if version == (1, 0):
                shape, _fortran, dtype = npformat.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _fortran, dtype = npformat.read_array_header_2_0(f)
            else:
                raise _Err(f"array '{name}': unsupported .npy version {version}")
        if dtype.hasobject or dtype.fields is not None:
            raise _Err(f"array '{name}' holds objects or records (dtype {dtype}); "
                       "drawopt .npz files hold plain integer arrays")
        if any(int(x) < 0 for x in shape):
            raise _Err(f"array '{name}' has a negative dimension {shape}")
        out[name] = (tuple(int(x) for x in shape), dtype)
    return out


def _validate_layout(hdrs: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    missing = [k for k in _COLUMNS if k not in hdrs]
    if missing:
        raise _Err(f"not a drawopt stream archive: missing array(s) {', '.join(missing)}")
    for name, (_shape, dtype) in hdrs.items():
        want = _COLUMNS.get(name)
        if want is None:
            if not (name.startswith("data_") and name[5:].isascii() and name[5:].isdigit()
                    and str(int(name[5:])) == name[5:]):
                raise _Err(f"unexpected array '{name}' in the archive")
            want = _DATA_DTYPE
        if dtype.newbyteorder("=") != want.newbyteorder("=") or dtype.kind != want.kind:
            raise _Err(f"array '{name}' has dtype {dtype}, expected {want}")
    n_shape = hdrs["op"][0]
    if len(n_shape) != 1:
        raise _Err(f"array 'op' must be one-dimensional, has shape {n_shape}")
    n = n_shape[0]
    if n > LIMITS["commands"]:
        raise _Err(f"{n} commands is more than this reader accepts ({LIMITS['commands']})")
    _expect_shape("args", hdrs["args"][0], (n, NARGS))
    for k in ("var_off", "var_len", "flags", "line"):
        _expect_shape(k, hdrs[k][0], (n,))
    for k, lim in (("pool", LIMITS["pool"]), ("meta", LIMITS["meta_bytes"])):
        shape = hdrs[k][0]
        if len(shape) != 1:
            raise _Err(f"array '{k}' must be one-dimensional, has shape {shape}")
        if shape[0] > lim:
            raise _Err(f"array '{k}' has {shape[0]} elements, more than this reader accepts ({lim})")
    words = 0
    for name, (shape, _) in hdrs.items():
        if name.startswith("data_"):
            if len(shape) != 1:
                raise _Err(f"array '{name}' must be one-dimensional, has shape {shape}")
            words += shape[0]
    if words > LIMITS["data_words"]:
        raise _Err(f"buffer data of {words} words is more than this reader accepts ({LIMITS['data_words']})")


def _load_array(npz: Any, name: str, want: np.dtype) -> np.ndarray:
    a = npz[name]
    if not isinstance(a, np.ndarray):  # pragma: no cover - excluded by _headers
        raise _Err(f"archive member '{name}' is not an array")
    return np.ascontiguousarray(a, dtype=want)


class _Loader:
    """Read archive members in worker threads: each member's file is opened here, in the calling
    thread (ZipFile.open is not thread-safe), and read in a worker; :meth:`array` waits for one."""

    def __init__(self, npz: Any, names: tuple[str, ...]):
        workers = min(READER_THREADS, os.cpu_count() or 1)
        self.files = {k: npz.zip.open(k + ".npy") for k in names}
        self.ex = ThreadPoolExecutor(workers) if workers > 1 else None
        self.jobs = {k: self.ex.submit(npformat.read_array, f, allow_pickle=False) for k, f in self.files.items()} \
            if self.ex is not None else {}

    def array(self, name: str) -> np.ndarray:
        a = self.jobs[name].result() if self.ex is not None else npformat.read_array(self.files[name],
                                                                                       allow_pickle=False)
        return np.ascontiguousarray(a, dtype=_COLUMNS[name])

    def __enter__(self) -> _Loader:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.ex is not None:
            for j in self.jobs.values():
                j.cancel()
            self.ex.shutdown(wait=True)
        for f in self.files.values():
            f.close()


READER_THREADS = 2
"""Threads :func:`loads_npz` inflates the command columns in."""


def _meta(raw: np.ndarray) -> tuple[Any, Decls, list[str], dict[str, Any]]:
    try:
        obj = json.loads(raw.tobytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise _Err(f"meta: not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise _Err(f"meta: JSON syntax error: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise _Err("meta: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise _Err("meta must be a JSON object")
    extra = set(obj) - {"drawopt", "header", "decls", "strings"}
    if extra:
        raise _Err(f"meta: unknown key '{sorted(extra)[0]}'")
    ver = obj.get("drawopt")
    if type(ver) is not int or ver != 1:
        raise _Err(f"unsupported stream version {json.dumps(ver)} (this drawopt reads 1)")
    try:
        header = header_from_json(obj.get("header", {}))
    except ValueError as e:
        raise _Err(f"meta: header: {e}") from None
    raw_decls = obj.get("decls", [])
    strings = obj.get("strings", [])
    if not isinstance(raw_decls, list):
        raise _Err("meta: decls must be an array")
    if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
        raise _Err("meta: strings must be an array of strings")
    return header, raw_decls, strings, obj


def loads_npz(data: bytes, file: str = "<string>") -> Stream:
    """Read the ``.npz`` stream format; raise :class:`~drawopt.errors.InputError` on bad input."""
    try:
        return _loads(data)
    except _Err as e:
        raise InputError(e.message, file, e.line, 1) from None
    except BAD_INPUT as e:  # zip/zlib/npy-level corruption
        raise InputError(f"corrupt .npz archive: {type(e).__name__}: {e}", file, 1, 1) from None


def _loads(data: bytes) -> Stream:
    if not data.startswith(b"PK"):
        raise _Err("not an .npz archive (a zip file starting with 'PK')")
    try:
        npz = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        raise _Err(f"not a readable .npz archive: {e}") from None
    if not hasattr(npz, "files"):  # pragma: no cover - 'PK' files are opened as archives
        raise _Err("not an .npz archive")
    with npz:
        hdrs = _headers(npz)
        _validate_layout(hdrs)
        header, raw_decls, strings, _ = _meta(_load_array(npz, "meta", _COLUMNS["meta"]))
        decls = Decls()
        data_members = {int(k[5:]): k for k in hdrs if k.startswith("data_")}
        for i, obj in enumerate(raw_decls):
            try:
                if isinstance(obj, dict) and "data" in obj:
                    raise ValueError(f"buffer data belongs in the array data_{i}, not in meta")
                d = decl_from_json(obj)
                if i in data_members:
                    if not isinstance(d, Buffer):
                        raise ValueError(f"array data_{i} given for a {d.kind}")
                    words = _load_array(npz, data_members.pop(i), _DATA_DTYPE)
                    d = Buffer(d.name, d.size, d.cpu, words, d.frontend)
                check_decl_tokens(d)
                decls.add(d)
            except (ValueError, TypeError, KeyError, OverflowError) as e:
                raise _Err(f"meta: declaration {i}: {e}") from None
        if data_members:
            k = min(data_members)
            raise _Err(f"array data_{k} names no declaration (there are {len(decls)})")
        # the columns inflate in worker threads (zlib and crc32 release the GIL); their results
        # (and errors) are taken in the order the reader has always read them
        names = ("op", "var_len", "var_off", "flags", "line", "pool", "args")
        with _Loader(npz, names) as got:
            cols = {k: got.array(k) for k in names[:5]}
            pool = got.array("pool")
            args = got.array("args")
    s = Stream(header, decls, cols["op"], args, cols["var_off"], cols["var_len"], pool,
               cols["flags"], cols["line"], list(strings))
    try:  # (tails outside the pool among them: Stream.check owns that rule)
        s.check()
    except StreamCheckError as e:
        raise _Err(str(e), e.cmd + 1) from None
    opq = np.flatnonzero(s.op == OPAQUE.code)
    for i in opq.tolist():
        err = opaque_text_error(s.strings[int(s.args[i, _OPAQUE_TEXT])])
        if err:
            raise _Err(err, i + 1)
    return s

