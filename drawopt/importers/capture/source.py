"""Reading a capture: ``.gfxr`` (through ``gfxrecon-convert``) or its JSON Lines (``.jsonl``, ``.gz``, ``.xz``).

The records are read one line at a time (the file is never held in memory). Every error names
the file and line: ``capture.jsonl:17:1: error: ...``.
"""

from __future__ import annotations

__all__ = ["JSON_VERSIONS", "open_binary", "convert_gfxr", "extract_shaders", "scan", "tool",
           "decode_record"]

import gzip
import io
import json
import lzma
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from drawopt.errors import InputError, UsageError

try:  # orjson (a maintained C JSON parser) reads records ~4x faster than the standard library
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - the optional dependency is missing
    _loads = json.loads

def decode_record(text: str | bytes, name: str, line: int) -> dict[str, Any]:
    """The ``args`` of the API-call record ``text`` (InputError at ``name:line`` if it is corrupt)."""
    try:
        return _loads(text)["vkFunc"]["args"] or {}
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"corrupt record: {e}", name, line, 1) from None



JSON_VERSIONS = ("0.8",)
"""``json-version`` majors.minors of ``gfxrecon-convert`` output this reader knows (GFXReconstruct 0.9.18
writes 0.8.0)."""

_PACKAGE = "gfxreconstruct"


def tool(name: str) -> str:
    """The path of GFXReconstruct tool ``name``, or a UsageError naming the Debian package."""
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"{name} is not installed: it comes with the Debian package '{_PACKAGE}' "
                         f"(apt-get install {_PACKAGE}); or pass the capture's JSON Lines "
                         f"(gfxrecon-convert CAPTURE.gfxr) instead")
    return path


def convert_gfxr(path: str, out_dir: str) -> str:
    """Run ``gfxrecon-convert`` on ``path``; the JSON Lines file it wrote (in ``out_dir``)."""
    exe = tool("gfxrecon-convert")
    out = os.path.join(out_dir, os.path.basename(path)[: -len(".gfxr")] + ".jsonl")
    r = subprocess.run([exe, "--output", out, path], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        msg = (r.stderr or r.stdout or "").strip().splitlines()
        raise InputError(f"gfxrecon-convert failed: {msg[-1] if msg else 'exit status ' + str(r.returncode)}",
                         path, 1, 1)
    return out


def extract_shaders(path: str, out_dir: str) -> str:
    """Run ``gfxrecon-extract --dir out_dir path``: one SPIR-V file ``sh<handle>`` per shader module."""
    exe = tool("gfxrecon-extract")
    r = subprocess.run([exe, "--dir", out_dir, path], capture_output=True, text=True)
    if r.returncode != 0:
        msg = (r.stderr or r.stdout or "").strip().splitlines()
        raise InputError(f"gfxrecon-extract failed: {msg[-1] if msg else 'exit status ' + str(r.returncode)}",
                         path, 1, 1)
    return out_dir


def _open_binary(path: str) -> io.BufferedIOBase:
    low = path.lower()
    try:
        if low.endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        if low.endswith(".xz"):
            return lzma.open(path, "rb")  # type: ignore[return-value]
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror or e}", path, 1, 1) from None


@contextmanager
def open_binary(path: str, name: str | None = None) -> Iterator[io.BufferedIOBase]:
    """The capture file as binary lines (decompressed as its name says)."""
    f = _open_binary(path)
    try:
        yield f
    finally:
        f.close()


def scan(path: str) -> tuple[bool, bool]:
    """Whether the capture calls ``vkQueuePresentKHR``, and whether it updates descriptors through
    update templates (whose data ``gfxrecon-convert`` does not decode): one pass of byte search."""
    needles = {b'"vkQueuePresentKHR"': False, b'DescriptorSetWithTemplate': False}
    width = max(len(k) for k in needles)
    f = _open_binary(path)
    try:
        tail = b""
        while not all(needles.values()):
            try:
                chunk = f.read(1 << 22)
            except (OSError, EOFError, lzma.LZMAError):
                break  # the record reader reports the corruption where it finds it
            if not chunk:
                break
            window = tail + chunk
            for k in needles:
                if not needles[k] and k in window:
                    needles[k] = True
            tail = chunk[-width:]
    finally:
        f.close()
    present, templates = needles.values()
    return present, templates


@contextmanager
def temp_dir() -> Iterator[str]:
    """A temporary directory removed afterwards."""
    d = tempfile.mkdtemp(prefix="drawopt-capture-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
