"""One batch task, as a worker runs it: read the input from its path, optimize, verify, write atomically.

A task gets a small :class:`TaskSpec` (paths and options, never stream data) and returns a small
:class:`ItemResult` (figures and timings), so nothing large goes through the scheduler: workers read
inputs from shared storage and write outputs there. Every failure of one input becomes an
``ItemResult`` with ``status="failed"`` and a ``file:line:col: error: ...`` message; no output file is
left for it. :func:`run_task` is what ``drawopt.batch`` submits to Dask (and runs in-process with
``workers=0``).
"""

from __future__ import annotations

__all__ = ["TaskSpec", "ItemResult", "run_task", "load_importer", "error_message", "KILL_ONCE_ENV"]

import hashlib
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from drawopt import batch_cache
from drawopt.errors import DrawoptError, InputError

KILL_ONCE_ENV = "DRAWOPT_BATCH_TEST_KILL_ONCE"
"""Test-only hook: when set to a path, the first task that creates that file kills its worker process
(``os._exit``) before writing its output, so the tests can check that the scheduler reruns it."""


@dataclass(frozen=True)
class TaskSpec:
    """What one task needs: where to read and write, and the options that decide the output."""

    input: str
    output: str
    kind: str = "stream"  # "stream", "capture" (one frame of it) or "scene"
    frame: int | None = None
    fmt: str = "text"  # output format
    pipeline: str = "dedupe-state"
    target: str = "d3d12"
    reorder: str = "declared"
    verify: bool = True  # as drawopt optimize: the output is checked against the input
    verify_each: bool = False
    cache_dir: str | None = None
    code: str = ""  # the client's drawopt code fingerprint (workers must run the same code)

    @property
    def name(self) -> str:
        """The input as a user names it: ``path`` or ``path#frame``."""
        return self.input if self.frame is None else f"{self.input}#{self.frame}"


@dataclass
class ItemResult:
    """The outcome of one task: ``status`` is ``"optimized"``, ``"cached"`` or ``"failed"``."""

    input: str
    frame: int | None
    output: str | None
    status: str
    error: str | None = None
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    verified: bool | None = None
    rejected: list[str] = field(default_factory=list)  # passes rolled back because their output failed verify
    notes: list[str] = field(default_factory=list)  # warnings that did not fail the input
    bytes_in: int = 0
    bytes_out: int = 0
    worker: str = ""
    detail: str | None = None  # traceback of an internal error (a bug, not a bad input)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _read_input(spec: TaskSpec) -> tuple[bytes | None, str, int]:
    """The input's bytes (stream files only; importers read their files themselves), its digest, its size."""
    if spec.kind == "stream":
        try:
            with open(spec.input, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"cannot read file: {e.strerror or e}", spec.input, 1, 1) from None
        return data, hashlib.sha256(data).hexdigest(), len(data)
    files = batch_cache.scene_files(spec.input) if spec.kind == "scene" else [spec.input]
    h = hashlib.sha256()
    size = 0
    for path in files:
        try:
            h.update(batch_cache.file_digest(path).encode())
            size += os.path.getsize(path)
        except OSError as e:
            raise InputError(f"cannot read file: {e.strerror or e}", path, 1, 1) from None
    return None, h.hexdigest(), size


def load_importer(kind: str, name: str) -> Any:
    """``name`` from the importer module of ``kind`` (``"capture"`` or ``"scene"``); a DrawoptError when this
    drawopt has no such module (the input then fails with that reason)."""
    module = {"capture": "drawopt.importers.capture", "scene": "drawopt.importers.gltf"}[kind]
    import importlib
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        what = "captures" if kind == "capture" else "glTF scenes"
        raise DrawoptError(f"cannot import {what}: this drawopt has no {module}") from None


def _load(spec: TaskSpec, data: bytes | None) -> Any:
    from drawopt.ir import formats
    if spec.kind == "stream":
        assert data is not None
        return formats.loads(data, formats.format_for(spec.input), spec.input)
    if spec.kind == "scene":
        return load_importer("scene", "import_gltf")(spec.input)
    frames = load_importer("capture", "import_capture")(spec.input, frames=spec.frame)
    try:
        return frames[spec.frame]
    except KeyError:
        raise InputError(f"frame {spec.frame} is not in the capture", spec.input, 1, 1) from None


def _optimize(stream: Any, spec: TaskSpec) -> Any:
    """:func:`drawopt.optimize` as ``drawopt optimize`` calls it (an ``OptimizeResult``)."""
    from drawopt.result import optimize
    return optimize(stream, passes=spec.pipeline, target=spec.target, reorder=spec.reorder,
                    verify_each=spec.verify_each, verify=spec.verify)


def _kill_once_for_tests() -> None:
    marker = os.environ.get(KILL_ONCE_ENV)
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os._exit(75)


def error_message(spec: TaskSpec, e: BaseException) -> str:
    """A ``file:line:col: error:`` line for any failure (InputError already is one)."""
    if isinstance(e, InputError):
        return str(e)
    return f"{spec.name}: error: {e}"


def run_task(spec: TaskSpec) -> ItemResult:
    """Run one task; never raises for a bad input (the result says what went wrong).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "bad.dstream"), "w").write("drawopt 1\\nDraw 1\\n")
    >>> r = run_task(TaskSpec(os.path.join(d, "bad.dstream"), os.path.join(d, "out.dstream")))
    >>> r.status, r.error.split(": error: ")[0].endswith("bad.dstream:2:1"), os.path.exists(r.output or "")
    ('failed', True, False)
    """
    t0, c0 = time.perf_counter(), time.process_time()
    res = ItemResult(spec.input, spec.frame, None, "failed", worker=f"{os.uname().nodename}:{os.getpid()}")
    try:
        _run(spec, res, t0)
    except DrawoptError as e:
        res.status, res.error, res.output = "failed", error_message(spec, e), None
    except Exception as e:  # a bug in drawopt: isolate it like a bad input, keep the traceback
        res.status, res.output = "failed", None
        res.error = f"{spec.name}: error: internal error: {type(e).__name__}: {e}"
        res.detail = traceback.format_exc()
    res.seconds["total"] = round(time.perf_counter() - t0, 6)
    res.seconds["cpu"] = round(time.process_time() - c0, 6)  # below "total" when the machine is shared
    return res


def _run(spec: TaskSpec, res: ItemResult, t0: float) -> None:
    from drawopt.ir import formats
    from drawopt.stats import call_counts

    if spec.code and spec.code != batch_cache.code_fingerprint():
        raise DrawoptError("this worker runs a different drawopt than the client (code fingerprint differs)")
    data, digest, res.bytes_in = _read_input(spec)
    key = batch_cache.cache_key(digest, pipeline=spec.pipeline, target=spec.target, reorder=spec.reorder,
                                fmt=spec.fmt, kind=spec.kind, frame=spec.frame, verify=spec.verify,
                                verify_each=spec.verify_each, code=spec.code)
    t = time.perf_counter()
    res.seconds["read"] = round(t - t0, 6)
    if spec.cache_dir:
        hit = batch_cache.lookup(spec.cache_dir, key)
        if hit is not None:
            out, meta = hit
            _write(spec.output, out)
            res.status, res.output, res.bytes_out = "cached", spec.output, len(out)
            res.before, res.after, res.verified = meta["before"], meta["after"], meta.get("verified")
            res.rejected = meta.get("rejected", [])
            res.seconds["write"] = round(time.perf_counter() - t, 6)
            return
    stream = _load(spec, data)
    t1 = time.perf_counter()
    from drawopt.passmanager import record_provenance
    result = _optimize(stream, spec)  # with verify, the output is checked against the input (passes that
    # broke it are rolled back: what is written always verifies); the header as drawopt optimize writes it
    optimized = record_provenance(result.stream, spec.target, spec.reorder)
    t2 = time.perf_counter()
    res.seconds.update(load=round(t1 - t, 6), optimize=round(t2 - t1, 6))
    res.before, res.after = call_counts(stream), call_counts(optimized)
    res.verified, res.rejected = result.verified, list(result.rejected)
    out = formats.dumps(optimized, spec.fmt)
    out = out.encode("utf-8") if isinstance(out, str) else out
    _kill_once_for_tests()
    _write(spec.output, out)
    res.status, res.output, res.bytes_out = "optimized", spec.output, len(out)
    if spec.cache_dir:
        try:
            batch_cache.store(spec.cache_dir, key, out, {"before": res.before, "after": res.after,
                                                         "input": spec.name, "verified": res.verified,
                                                         "rejected": res.rejected})
        except (DrawoptError, OSError) as e:  # the output is written; a cache that cannot grow only costs time
            res.notes.append(f"not cached: {e}")
    res.seconds["write"] = round(time.perf_counter() - t2, 6)


def _write(path: str, data: bytes) -> None:
    from drawopt.ir.formats.atomic import write_atomic
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, data)
