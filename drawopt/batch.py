"""Batch optimization on Dask: many streams, a capture's frames, a content library, one summary.

``drawopt.batch(inputs, out_dir)`` (and ``drawopt batch``) makes one task per stream file, glTF
scene and capture frame (folders are walked), runs the tasks on Dask's distributed scheduler (an
embedded ``LocalCluster`` of one single-threaded worker process per core, or an existing cluster by
address) and returns a :class:`BatchSummary`. Each task reads its input from its path and writes
its output atomically (:mod:`drawopt.batch_task`); unchanged inputs come from the content cache
(:mod:`drawopt.batch_cache`). A bad input fails alone; a worker that dies is rerun by the scheduler.
Figures, cluster sizing and the 100,000-frame plan: docs/batch.md.
"""

from __future__ import annotations

__all__ = ["batch", "BatchSummary", "plan_tasks", "ItemResult", "TaskSpec", "STREAM_EXTENSIONS"]

import os
import sys
import time
import types
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from drawopt.background import cores
from drawopt.batch_task import ItemResult, TaskSpec, run_task
from drawopt.errors import UsageError

STREAM_EXTENSIONS = (".dstream", ".txt", ".json", ".npz")
"""Stream files a folder contributes (besides what :mod:`drawopt.importers` imports)."""

SUM_KEYS = ("commands", "draw_calls", "state_changes")


# ----------------------------------------------------------------------------------- summary
@dataclass
class BatchSummary:
    """What a batch did: one :class:`ItemResult` per task (the tasks in input order, after any input
    that failed before its tasks were made: a capture that could not be listed), and the totals.

    ``exit_code`` is 0 when every input was optimized (or taken from the cache), else 1.
    """

    items: list[ItemResult]
    options: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    workers: int = 0
    scheduler: str = ""

    @property
    def failed(self) -> list[ItemResult]:
        return [r for r in self.items if r.status == "failed"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def totals(self) -> dict[str, Any]:
        """Counts by status, summed figures of the inputs that succeeded, task time and throughput."""
        ok = [r for r in self.items if r.status != "failed"]
        out: dict[str, Any] = {
            "inputs": len(self.items),
            "optimized": sum(r.status == "optimized" for r in self.items),
            "cached": sum(r.status == "cached" for r in self.items),
            "failed": len(self.items) - len(ok),
        }
        for k in SUM_KEYS:
            out[f"{k}_before"] = sum(r.before.get(k, 0) for r in ok)
            out[f"{k}_after"] = sum(r.after.get(k, 0) for r in ok)
        out["bytes_in"] = sum(r.bytes_in for r in self.items)
        out["bytes_out"] = sum(r.bytes_out for r in ok)
        out["task_seconds"] = round(sum(r.seconds.get("total", 0.0) for r in self.items), 6)
        out["wall_seconds"] = round(self.wall_seconds, 6)
        out["inputs_per_second"] = round(len(self.items) / self.wall_seconds, 3) if self.wall_seconds else None
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary (``--json``, ``--report``): options, totals and every item."""
        return {"options": self.options, "workers": self.workers, "scheduler": self.scheduler,
                "totals": self.totals(), "items": [r.to_dict() for r in self.items]}

    def table(self, per_input: bool = True) -> str:
        """A text table: one row per input (when ``per_input``) and a totals row."""
        head = f"{'input':<40} {'status':<9} {'commands':>19} {'draw calls':>17} {'seconds':>8}"
        lines = [head]

        def row(name: str, status: str, b: dict[str, Any], a: dict[str, Any], sec: float) -> str:
            cmds = f"{b.get('commands', 0):,} -> {a.get('commands', 0):,}"
            calls = f"{b.get('draw_calls', 0):,} -> {a.get('draw_calls', 0):,}"
            return f"{name[-40:]:<40} {status:<9} {cmds:>19} {calls:>17} {sec:>8.2f}"

        if per_input:
            for r in self.items:
                name = r.input if r.frame is None else f"{r.input}#{r.frame}"
                if r.status == "failed":
                    lines.append(f"{name[-40:]:<40} {'failed':<9} {(r.error or '')[:80]}")
                else:
                    lines.append(row(name, r.status, r.before, r.after, r.seconds.get("total", 0.0)))
        t = self.totals()
        status = f"{t['failed']} failed" if t["failed"] else "ok"
        b = {k: t[f"{k}_before"] for k in SUM_KEYS}
        a = {k: t[f"{k}_after"] for k in SUM_KEYS}
        lines.append(row(f"total ({t['inputs']} inputs, {t['cached']} cached)", status, b, a, self.wall_seconds))
        return "\n".join(lines)

    def verdict(self) -> str:
        """One line: ``batch: 200 inputs (3 cached, 1 failed), 5,038,000 -> 2,519,000 draw calls, 92.1 s``."""
        t = self.totals()
        extra = ", ".join(f"{t[k]} {k}" for k in ("cached", "failed") if t[k])
        n = t["inputs"]
        return (f"batch: {n} input{'s' if n != 1 else ''}{f' ({extra})' if extra else ''}, "
                f"{t['draw_calls_before']:,} -> {t['draw_calls_after']:,} draw calls, "
                f"{t['state_changes_before']:,} -> {t['state_changes_after']:,} state changes, "
                f"{self.wall_seconds:.1f} s " + (f"on {self.workers} worker{'s' if self.workers != 1 else ''}"
                                                 if self.workers else "in-process"))


# ----------------------------------------------------------------------------------- planning
def _kind(path: str) -> str | None:
    from drawopt.importers import importer_kind
    kind = importer_kind(path)
    if kind is not None:
        return kind
    return "stream" if path.lower().endswith(STREAM_EXTENSIONS) else None


def _walk(folder: str, skip: Iterable[str]) -> list[str]:
    """Files under ``folder`` that are streams or importable, sorted; hidden folders and ``skip`` left out."""
    skip_abs = {os.path.abspath(s) for s in skip}
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.abspath(os.path.join(top, d)) not in skip_abs)
        found += [os.path.join(top, f) for f in sorted(files) if not f.startswith(".") and _kind(f)]
    return found


def _strip_suffix(name: str) -> str:
    from drawopt.importers import IMPORTERS
    low = name.lower()
    for suffix in sorted((*IMPORTERS, *STREAM_EXTENSIONS), key=len, reverse=True):
        if low.endswith(suffix):
            return name[: -len(suffix)]
    return os.path.splitext(name)[0]


def _frame_numbers(path: str) -> list[int]:
    """The frame numbers of a capture (via ``drawopt.importers.capture.list_frames``)."""
    from drawopt.batch_task import load_importer
    frames = []
    for info in load_importer("capture", "list_frames")(path):
        if isinstance(info, int):
            frames.append(info)
            continue
        for attr in ("number", "frame", "index"):
            if isinstance(getattr(info, attr, None), int):
                frames.append(getattr(info, attr))
                break
        else:
            raise UsageError(f"list_frames gave a frame without a number: {info!r}")
    return frames


def plan_tasks(inputs: Sequence[str], out_dir: str, fmt: str | None = None,
               list_frames: Callable[[str], list[int]] = _frame_numbers,
               **options: Any) -> tuple[list[TaskSpec], list[ItemResult]]:
    """The tasks for ``inputs`` and the inputs that failed before any task (a capture that cannot be listed).

    A file ``a/f.npz`` goes to ``OUT/f.npz``, a file ``rel/f.npz`` under a given folder ``D`` to
    ``OUT/rel/f.npz``; scenes and capture frames (``OUT/cap.frame12.npz``) are written as ``fmt``
    (default npz), streams in their own format unless ``fmt`` is given. ``options`` are
    :class:`TaskSpec` fields. Two inputs that would write the same output are a :class:`UsageError`.
    """
    from drawopt.ir.formats import EXTENSIONS
    ext_of = {f: e for e, f in reversed(EXTENSIONS.items())}  # format -> its first extension
    specs: list[TaskSpec] = []
    failed: list[ItemResult] = []
    skip = [out_dir, *([options["cache_dir"]] if options.get("cache_dir") else [])]
    for given in inputs:
        if os.path.isdir(given):
            pairs = [(p, os.path.relpath(p, given)) for p in _walk(given, skip)]
        else:
            pairs = [(given, os.path.basename(given))]
        for path, rel in pairs:
            kind = _kind(path) or "stream"  # an unknown extension fails in its task, with the reason
            stem = _strip_suffix(rel)
            if kind == "stream":
                out_fmt = fmt or EXTENSIONS.get(os.path.splitext(path)[1].lower(), "text")
                out_ext = ext_of[out_fmt] if fmt else (os.path.splitext(path)[1] or ".dstream")
                specs.append(TaskSpec(path, os.path.join(out_dir, stem + out_ext), kind, None, out_fmt, **options))
                continue
            out_fmt = fmt or "npz"
            if kind == "scene":
                specs.append(TaskSpec(path, os.path.join(out_dir, stem + ext_of[out_fmt]), kind, None, out_fmt,
                                      **options))
                continue
            try:
                numbers = list_frames(path)
            except Exception as e:  # noqa: BLE001 - any listing failure is this input's failure
                from drawopt.batch_task import error_message
                msg = error_message(TaskSpec(path, ""), e)
                failed.append(ItemResult(path, None, None, "failed", error=msg))
                continue
            for n in numbers:
                out = os.path.join(out_dir, f"{stem}.frame{n}{ext_of[out_fmt]}")
                specs.append(TaskSpec(path, out, kind, n, out_fmt, **options))
    seen: dict[str, str] = {}
    for s in specs:
        key = os.path.abspath(s.output)
        if key in seen:
            raise UsageError(f"batch: {seen[key]} and {s.name} would both write {s.output}")
        seen[key] = s.name
    return specs, failed


# ----------------------------------------------------------------------------------- running
def _run_in_process(specs: list[TaskSpec], done: Callable[[int, ItemResult], None]) -> None:
    for i, s in enumerate(specs):
        done(i, run_task(s))


def _run_on_dask(specs: list[TaskSpec], done: Callable[[int, ItemResult], None],
                 workers: int | None, scheduler: str | None) -> tuple[int, str]:
    """Submit every task to Dask and hand each result to ``done`` as it finishes; (workers, address)."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise UsageError("batch needs Dask's distributed scheduler: pip install 'drawopt[batch]' "
                         "(or run in-process with --workers 0)") from None
    import logging
    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise UsageError(f"batch: cannot reach the Dask scheduler at {scheduler}: {e}") from None
    else:
        # processes, not threads: the work holds the GIL. No dashboard: nothing listens but the scheduler.
        cluster = LocalCluster(n_workers=workers or cores(), threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
    try:
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"]) if scheduler else len(cluster.workers)
        # pure=False: a task is a side effect (it writes a file); the content cache does the deduplication
        prefix = f"drawopt-batch-{uuid.uuid4().hex[:12]}"
        futures = {client.submit(run_task, s, key=f"{prefix}-{i}", pure=False): i for i, s in enumerate(specs)}
        for fut in as_completed(futures):
            i = futures.pop(fut)  # dropping the last reference releases the result on its worker
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - e.g. KilledWorker: the task killed every worker it ran on
                s = specs[i]
                res = ItemResult(s.input, s.frame, None, "failed",
                                 error=f"{s.name}: error: task lost: {type(e).__name__}: {e}")
            done(i, res)
        return n_workers, client.scheduler.address if client.scheduler else ""
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def batch(inputs: Sequence[str] | str, out_dir: str, passes: str | None = None, target: str | None = None,
          workers: int | None = None, scheduler: str | None = None, verify: bool = True,
          cache_dir: str | None = None, *, cache: bool = True, reorder: str = "declared", fmt: str | None = None,
          verify_each: bool = False, on_start: Callable[[int], None] | None = None,
          on_result: Callable[[ItemResult, int, int], None] | None = None) -> BatchSummary:
    """Optimize every input into ``out_dir`` in parallel and return the summary.

    Parameters
    ----------
    inputs
        Stream files (``.dstream``, ``.json``, ``.npz``), glTF scenes, captures (every frame is a task)
        and folders of them.
    out_dir
        Where outputs go (see :func:`plan_tasks` for the names).
    passes, target, reorder, verify_each
        As for ``drawopt optimize`` (default: the target's pipeline, ``d3d12``); outputs are the bytes
        ``drawopt optimize IN -o OUT`` writes.
    workers
        Worker processes of the embedded cluster (default: one per core); ``0`` runs the tasks in this
        process, one after another, without Dask.
    scheduler
        Address of an existing Dask scheduler (``tcp://host:8786``); its workers must see the same paths.
    verify
        As ``drawopt optimize`` (on by default): each output is checked against its input by the
        translation validator, and passes whose rewrite fails are rolled back (``items[i].rejected``
        says which), so what is written always verifies. ``False`` is ``--no-verify``.
    cache_dir, cache
        The content cache folder (default ``OUT/.drawopt-cache``); ``cache=False`` recomputes everything.
    on_start, on_result
        Called in this process: ``on_start(total)`` once the tasks are known, ``on_result(item, done, total)``
        as each input finishes.

    Examples
    --------
    >>> import drawopt, tempfile
    >>> d = tempfile.mkdtemp()
    >>> drawopt.save(drawopt.loads("drawopt 1\\nDispatch 1 1 1\\n"), d + "/a.dstream")
    >>> s = drawopt.batch([d + "/a.dstream"], d + "/out", workers=0)
    >>> s.exit_code, s.items[0].status, s.items[0].output == d + "/out/a.dstream"
    (0, 'optimized', True)
    >>> drawopt.batch([d + "/a.dstream"], d + "/out", workers=0).items[0].status
    'cached'
    """
    from drawopt.batch_cache import code_fingerprint
    from drawopt.passmanager import default_pipeline, parse_pipeline

    t0 = time.perf_counter()
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(p) for p in inputs]
    out_dir = os.fspath(out_dir)
    target = target or "d3d12"
    from drawopt.analysis.costmodel import get_target
    from drawopt.ir.stream import REORDER_POLICIES
    get_target(target)  # an unknown target is a usage error
    if reorder not in REORDER_POLICIES:
        raise UsageError(f"unknown reorder policy '{reorder}' (known: {', '.join(REORDER_POLICIES)})")
    pipeline = passes if passes is not None else default_pipeline(target)
    parse_pipeline(pipeline, target=target, reorder=reorder)  # a bad pipeline is a usage error, before any task
    if workers is not None and workers < 0:
        raise UsageError("batch: workers must be >= 0")
    if cache and cache_dir is None:
        cache_dir = os.path.join(out_dir, ".drawopt-cache")
    options = dict(pipeline=pipeline, target=target, reorder=reorder, verify=verify, verify_each=verify_each,
                   cache_dir=os.path.abspath(cache_dir) if cache and cache_dir else None, code=code_fingerprint())
    specs, early = plan_tasks(inputs, out_dir, fmt=fmt, **options)
    results: list[ItemResult | None] = [None] * len(specs)
    total = len(specs) + len(early)
    count = 0

    def done(i: int, res: ItemResult) -> None:
        nonlocal count
        results[i] = res
        count += 1
        if on_result:
            on_result(res, count, total)

    if on_start:
        on_start(total)
    for res in early:
        count += 1
        if on_result:
            on_result(res, count, total)
    if workers == 0 or not specs:
        n_workers, address = 0, "in-process"
        _run_in_process(specs, done)
    else:
        n_workers, address = _run_on_dask(specs, done, workers, scheduler)
    items = early + [r for r in results if r is not None]
    summary_options = {k: v for k, v in options.items() if k != "code"}
    summary_options.update(inputs=inputs, out_dir=out_dir, format=fmt)
    return BatchSummary(items, summary_options, time.perf_counter() - t0, n_workers, address)


class _CallableModule(types.ModuleType):
    """Makes ``drawopt.batch(...)`` call :func:`batch` although ``drawopt.batch`` is also this module."""

    def __call__(self, *args: Any, **kwargs: Any) -> BatchSummary:
        return batch(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
