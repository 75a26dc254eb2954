"""The batch content cache: an output is reused when nothing that decides it has changed.

The key (:func:`cache_key`) hashes the input's bytes (a scene's buffer files too), the frame of a
capture, the pipeline, the target, the reorder policy, verification, the output format, and the
drawopt version with a fingerprint of its code (:func:`code_fingerprint`: every module and compiled kernel, so an
edited pass invalidates the cache even while ``__version__`` stays the same). An entry is two files
in the cache folder, ``KEY.out`` (the output bytes) and ``KEY.json`` (the figures), the JSON written
last and both atomically, so a half-written entry is never read. See docs/batch.md.

>>> k1 = cache_key("ab" * 32, pipeline="dedupe-state", target="d3d12", reorder="declared", fmt="npz")
>>> k2 = cache_key("ab" * 32, pipeline="dedupe-state", target="vulkan", reorder="declared", fmt="npz")
>>> len(k1), k1 == k2
(64, False)
"""

from __future__ import annotations

__all__ = ["code_fingerprint", "file_digest", "scene_files", "cache_key", "lookup", "store"]

import functools
import hashlib
import json
import os
from typing import Any

from drawopt.ir.formats.atomic import write_atomic

_CHUNK = 1 << 20
_CODE_SUFFIXES = (".py", ".pyx", ".so", ".pyd", ".json")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of drawopt's version and of every code file of the package (computed once per process)."""
    from drawopt import __version__

    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(f"drawopt {__version__}\n".encode())
    for top, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(_CODE_SUFFIXES):
                path = os.path.join(top, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                h.update(_digest_uncached(path).encode())
    return h.hexdigest()


def _digest_uncached(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=64)
def _digest_memo(path: str, size: int, mtime_ns: int) -> str:
    return _digest_uncached(path)


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes, remembered per (path, size, mtime) in this process.

    A capture's frames are separate tasks; a worker that runs several of them hashes the capture once.
    """
    st = os.stat(path)
    return _digest_memo(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def scene_files(path: str) -> list[str]:
    """The files a glTF scene is made of: the ``.gltf``/``.glb`` and the buffers and images it names by a
    relative URI (``data:`` URIs are inside the file already). An unreadable ``.gltf`` gives just itself
    (the importer reports what is wrong with it).
    """
    files = [path]
    if not path.lower().endswith(".gltf"):
        return files
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
        items = [*doc.get("buffers", []), *doc.get("images", [])]
        uris = [it.get("uri") for it in items if isinstance(it, dict)]
    except (OSError, ValueError, AttributeError, TypeError):
        return files
    base = os.path.dirname(path)
    from urllib.parse import unquote
    for uri in uris:
        if isinstance(uri, str) and uri and not uri.startswith("data:") and "://" not in uri:
            files.append(os.path.join(base, unquote(uri)))
    return files


def cache_key(input_digest: str, *, pipeline: str, target: str, reorder: str, fmt: str,
              kind: str = "stream", frame: int | None = None, verify: bool = True, verify_each: bool = False,
              code: str = "") -> str:
    """The cache key (hex SHA-256) of one task: everything that decides its output bytes (verification too:
    a pass whose rewrite fails it is rolled back)."""
    from drawopt import __version__

    fields = {"input": input_digest, "kind": kind, "frame": frame, "pipeline": pipeline, "target": target,
              "reorder": reorder, "format": fmt, "verify": verify, "verify_each": verify_each,
              "version": __version__, "code": code}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _paths(cache_dir: str, key: str) -> tuple[str, str]:
    base = os.path.join(cache_dir, key[:2], key)
    return base + ".out", base + ".json"


def lookup(cache_dir: str, key: str) -> tuple[bytes, dict[str, Any]] | None:
    """The cached output bytes and figures for ``key``, or None (absent, unreadable or damaged)."""
    out_path, meta_path = _paths(cache_dir, key)
    try:
        with open(meta_path, "rb") as f:
            meta = json.loads(f.read())
        with open(out_path, "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("output_sha256"):
        return None  # a damaged entry is a miss, never a wrong output
    return data, meta


def store(cache_dir: str, key: str, data: bytes, meta: dict[str, Any]) -> None:
    """Add an entry (output bytes first, then the figures, each written atomically)."""
    out_path, meta_path = _paths(cache_dir, key)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    write_atomic(out_path, data)
    meta = {**meta, "output_sha256": hashlib.sha256(data).hexdigest()}
    write_atomic(meta_path, json.dumps(meta, sort_keys=True).encode())
