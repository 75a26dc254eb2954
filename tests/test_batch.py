"""drawopt batch: serial outputs byte for byte on a 2-worker LocalCluster, the content cache, isolated
failures, a dying worker rerun by the scheduler, and the dispatch of scenes and captures to the importers.

Streams are small (500-draw frames) and the Dask tests share one cluster, to keep the file fast.
"""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from drawopt import batch_task
from drawopt.batch import batch, plan_tasks
from drawopt.cli import main
from drawopt.errors import UsageError
from drawopt.gen import generate
from drawopt.ir import formats


def _frame(path: str, seed: int, draws: int = 300) -> str:
    formats.save(generate("frame", draws, seed), path)
    return path


def _serial(src: str, dst: str, *extra: str) -> bytes:
    """What ``drawopt optimize SRC -o DST`` writes."""
    assert main(["optimize", src, "-o", dst, *extra]) == 0
    with open(dst, "rb") as f:
        return f.read()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster of 2 single-threaded worker processes for the Dask tests of this file."""
    distributed = pytest.importorskip("distributed")
    import logging
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as c:
        yield c


def test_batch_reproduces_serial_optimize_byte_for_byte(tmp_path, capsys):
    """The embedded cluster (2 workers), through the CLI: each output equals `drawopt optimize`'s."""
    pytest.importorskip("distributed")
    src = tmp_path / "in"
    src.mkdir()
    inputs = [_frame(str(src / "a.dstream"), 1), _frame(str(src / "b.npz"), 2), _frame(str(src / "c.json"), 3)]
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), "--workers", "2", "--target", "vulkan", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert doc["workers"] == 2 and doc["totals"]["optimized"] == 3
    for path in inputs:
        name = os.path.basename(path)
        assert _read(str(out / name)) == _serial(path, str(tmp_path / ("ref-" + name)), "--target", "vulkan")


def test_library_batch_on_a_cluster_matches_serial(tmp_path, cluster):
    src = _frame(str(tmp_path / "f.dstream"), 4)
    s = batch([src], str(tmp_path / "out"), passes="dedupe-state,schedule", scheduler=cluster.scheduler_address,
              verify=True)
    assert s.exit_code == 0 and s.items[0].verified is True
    assert s.items[0].worker != f"{os.uname().nodename}:{os.getpid()}"  # it ran on a worker process
    ref = _serial(src, str(tmp_path / "ref.dstream"), "--passes", "dedupe-state,schedule")
    assert _read(str(tmp_path / "out" / "f.dstream")) == ref


def test_cache_skips_unchanged_inputs_and_recomputes_changed_ones(tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        _frame(str(src / f"f{i}.npz"), i)
    out, cache = str(tmp_path / "out"), str(tmp_path / "cache")
    run = lambda **kw: batch([str(src)], out, workers=0, cache_dir=cache, passes="dedupe-state", **kw)
    first = run()
    assert [r.status for r in first.items] == ["optimized"] * 3
    outputs = {r.output: _read(r.output) for r in first.items}

    # unchanged: nothing is optimized again (optimizing would fail here), the outputs are the same bytes
    def no_optimize(stream, spec):
        raise AssertionError("an unchanged input was recomputed")

    monkeypatch.setattr(batch_task, "_optimize", no_optimize)
    os.remove(first.items[0].output)  # a lost output comes back from the cache
    again = run()
    assert [r.status for r in again.items] == ["cached"] * 3
    assert {r.output: _read(r.output) for r in again.items} == outputs
    assert [r.after for r in again.items] == [r.after for r in first.items]
    monkeypatch.undo()

    # one input changed: only it is recomputed, and its output is the new input's
    _frame(str(src / "f1.npz"), 99)
    changed = run()
    assert [r.status for r in changed.items] == ["cached", "optimized", "cached"]
    assert _read(changed.items[1].output) == _serial(str(src / "f1.npz"), str(tmp_path / "ref.npz"),
                                                     "--passes", "dedupe-state")

    # another target, policy, verification, pipeline or format is another output: recomputed
    for kw in ({"target": "gl"}, {"reorder": "opaque"}, {"verify": False}, {"fmt": "text"}):
        assert [r.status for r in run(**kw).items] == ["optimized"] * 3, kw
    assert {r.status for r in batch([str(src)], out, workers=0, cache_dir=cache).items} == {"optimized"}
    # no cache: recomputed
    assert {r.status for r in batch([str(src)], out, workers=0, cache=False, passes="dedupe-state").items} \
        == {"optimized"}


def test_an_unverified_cache_entry_does_not_serve_a_verified_run(tmp_path):
    src = _frame(str(tmp_path / "f.dstream"), 5)
    cache = str(tmp_path / "cache")
    assert batch([src], str(tmp_path / "out"), workers=0, cache_dir=cache, verify=False).items[0].verified is None
    r = batch([src], str(tmp_path / "out"), workers=0, cache_dir=cache, verify=True).items[0]
    assert (r.status, r.verified) == ("optimized", True)
    r = batch([src], str(tmp_path / "out"), workers=0, cache_dir=cache, verify=True).items[0]
    assert (r.status, r.verified) == ("cached", True)


def test_a_bad_input_does_not_stop_the_batch(tmp_path, cluster, capsys):
    src = tmp_path / "in"
    src.mkdir()
    good = [_frame(str(src / "a.dstream"), 1), _frame(str(src / "z.npz"), 2)]
    (src / "bad.dstream").write_text("drawopt 1\nDispatch 1 1 1\nBogus 1 2\n")
    (src / "cut.npz").write_bytes(_read(good[1])[:100])  # a truncated archive
    out = tmp_path / "out"
    rc = main(["batch", str(src), str(tmp_path / "missing.dstream"), "-o", str(out), "--no-cache",
               "--scheduler", cluster.scheduler_address, "--report", str(tmp_path / "r.json")])
    captured = capsys.readouterr()
    assert rc == 1
    errors = captured.err.splitlines()
    assert any(e.startswith(f"{src / 'bad.dstream'}:3:1: error: unknown command 'Bogus'") for e in errors)
    assert any(e.startswith(f"{src / 'cut.npz'}:1:1: error:") for e in errors)
    assert any(e.startswith(f"{tmp_path / 'missing.dstream'}:1:1: error: cannot read file") for e in errors)
    assert "3 failed" in captured.out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["totals"]["failed"] == 3 and doc["totals"]["optimized"] == 2
    # the good ones are complete, the bad ones left nothing (no partial or temporary file)
    assert sorted(os.listdir(out)) == ["a.dstream", "z.npz"]
    for path in good:
        name = os.path.basename(path)
        assert _read(str(out / name)) == _serial(path, str(tmp_path / ("ref-" + name)))


def test_a_cache_that_cannot_be_written_only_warns(tmp_path):
    src = _frame(str(tmp_path / "f.dstream"), 7, draws=20)
    (tmp_path / "cache").write_text("a file, not a folder")
    s = batch([src], str(tmp_path / "out"), workers=0, cache_dir=str(tmp_path / "cache"), passes="dedupe-state")
    item = s.items[0]
    assert (s.exit_code, item.status) == (0, "optimized") and item.notes[0].startswith("not cached: ")
    assert os.path.exists(item.output)


def test_a_rewrite_that_fails_verify_is_never_written(tmp_path, monkeypatch):
    """As drawopt optimize: the passes whose output fails verify are rolled back, and the item says so."""
    import drawopt.passmanager
    monkeypatch.setattr(drawopt.passmanager, "verify_streams", lambda a, b, reorder="declared": "draw 3 differs")
    src = _frame(str(tmp_path / "f.dstream"), 6, draws=50)
    s = batch([src], str(tmp_path / "out"), workers=0, passes="dedupe-state,schedule", cache=False)
    item = s.items[0]
    assert s.exit_code == 0 and item.verified is True and item.rejected
    assert item.after["commands"] == item.before["commands"]  # every pass was rolled back
    assert _read(item.output) == _serial(src, str(tmp_path / "ref.dstream"), "--passes", "dedupe-state,schedule")


def test_a_dying_worker_is_retried_by_the_scheduler(tmp_path, cluster):
    from distributed import Client
    marker = str(tmp_path / "killed")
    src = tmp_path / "in"
    src.mkdir()
    inputs = [_frame(str(src / f"f{i}.dstream"), 10 + i) for i in range(3)]
    with Client(cluster.scheduler_address) as client:
        key = batch_task.KILL_ONCE_ENV  # a lambda runs in the worker (a bound os.environ method would be a copy)
        client.run(lambda: os.environ.__setitem__(key, marker))
        try:
            s = batch([str(src)], str(tmp_path / "out"), scheduler=cluster.scheduler_address, cache=False)
        finally:
            client.run(lambda: os.environ.pop(key, None))
    assert os.path.exists(marker)  # a task killed its worker process once
    assert s.exit_code == 0, [r.error for r in s.items]
    for path in inputs:
        name = os.path.basename(path)
        assert _read(str(tmp_path / "out" / name)) == _serial(path, str(tmp_path / ("ref-" + name)))


def test_scenes_and_capture_frames_go_to_the_importers(tmp_path, monkeypatch):
    """Every frame of a capture is a task (``import_capture(path, frames=n)``), a scene one task."""
    def stream(seed: int):
        return generate("frame", 200, seed)

    calls = []
    capture = types.ModuleType("drawopt.importers.capture")
    capture.list_frames = lambda path: [types.SimpleNamespace(number=n) for n in (3, 7)]

    def import_capture(path, frames=None):
        calls.append(frames)
        return {frames: stream(frames)}

    capture.import_capture = import_capture
    gltf = types.ModuleType("drawopt.importers.gltf")
    gltf.import_gltf = lambda path: stream(42)
    monkeypatch.setitem(sys.modules, "drawopt.importers.capture", capture)
    monkeypatch.setitem(sys.modules, "drawopt.importers.gltf", gltf)
    (tmp_path / "game.jsonl.gz").write_bytes(b"capture")
    (tmp_path / "Box.gltf").write_text('{"buffers": [{"uri": "Box.bin"}]}')
    (tmp_path / "Box.bin").write_bytes(b"\0" * 8)
    out = tmp_path / "out"
    s = batch([str(tmp_path / "game.jsonl.gz"), str(tmp_path / "Box.gltf")], str(out), workers=0)
    assert s.exit_code == 0, [r.error for r in s.items]
    assert [(r.frame, os.path.basename(r.output)) for r in s.items] == [
        (3, "game.frame3.npz"), (7, "game.frame7.npz"), (None, "Box.npz")]
    assert sorted(calls) == [3, 7]
    assert _read(str(out / "Box.npz")) == formats.dumps(batch_task._optimize(stream(42), s_spec()).stream, "npz")
    # the scene's buffer is part of its content: changing it recomputes the scene
    (tmp_path / "Box.bin").write_bytes(b"\1" * 8)
    again = batch([str(tmp_path / "game.jsonl.gz"), str(tmp_path / "Box.gltf")], str(out), workers=0)
    assert [r.status for r in again.items] == ["cached", "cached", "optimized"]


def s_spec() -> batch_task.TaskSpec:
    """The default options of a task (the default pipeline of d3d12)."""
    from drawopt.passmanager import default_pipeline
    return batch_task.TaskSpec("", "", pipeline=default_pipeline("d3d12"))


def test_a_real_capture_gives_a_task_per_frame(tmp_path):
    """The fixture capture of vkcube (tests/data/captures/vkcube/PROVENANCE.md) through the real importer."""
    pytest.importorskip("drawopt.importers.capture")
    cap = os.path.join(os.path.dirname(__file__), "data", "captures", "vkcube", "vkcube.jsonl.gz")
    s = batch([cap], str(tmp_path / "out"), workers=0)
    assert s.exit_code == 0, [r.error for r in s.failed]
    assert [(r.frame, os.path.basename(r.output)) for r in s.items] == [(1, "vkcube.frame1.npz"),
                                                                       (2, "vkcube.frame2.npz")]
    assert all(r.verified for r in s.items) and len(formats.load(s.items[0].output)) == s.items[0].after["commands"]


def test_a_missing_importer_is_an_error_of_that_input(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "drawopt.importers.gltf", None)
    monkeypatch.setitem(sys.modules, "drawopt.importers.capture", None)
    (tmp_path / "Box.glb").write_bytes(b"glTF")
    (tmp_path / "cap.jsonl").write_text("{}\n")
    good = _frame(str(tmp_path / "f.dstream"), 1, draws=50)
    s = batch([str(tmp_path / "Box.glb"), str(tmp_path / "cap.jsonl"), good], str(tmp_path / "out"), workers=0)
    errors = sorted(r.error for r in s.failed)
    assert errors == [f"{tmp_path / 'Box.glb'}: error: cannot import glTF scenes: this drawopt has no "
                      "drawopt.importers.gltf",
                      f"{tmp_path / 'cap.jsonl'}: error: cannot import captures: this drawopt has no "
                      "drawopt.importers.capture"]
    assert s.exit_code == 1 and [r.status for r in s.items if r.error is None] == ["optimized"]


def test_usage_errors_come_before_any_task(tmp_path, capsys):
    a = _frame(str(tmp_path / "a.dstream"), 1, draws=20)
    (tmp_path / "d").mkdir()
    b = _frame(str(tmp_path / "d" / "a.dstream"), 2, draws=20)
    with pytest.raises(UsageError, match="would both write"):
        plan_tasks([a, b], str(tmp_path / "out"))
    with pytest.raises(UsageError, match="unknown pass"):
        batch([a], str(tmp_path / "out"), passes="no-such-pass", workers=0)
    assert main(["batch", a, "-o", str(tmp_path / "out"), "--passes", "nope", "--workers", "0"]) == 2
    assert "unknown pass 'nope'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_quiet_prints_nothing_and_verbose_a_line_per_input(tmp_path, capsys):
    a = _frame(str(tmp_path / "a.dstream"), 1, draws=50)
    assert main(["batch", a, "-o", str(tmp_path / "out"), "--workers", "0", "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["batch", a, "-o", str(tmp_path / "out"), "--workers", "0", "-v"]) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith(f"{a}: ") and "(cached" in cap.err
    assert cap.out.splitlines()[-1].startswith("batch: 1 input (1 cached), ")
    assert cap.out.splitlines()[-1].endswith(" s in-process")


def test_drawopt_batch_is_callable():
    import drawopt
    assert callable(drawopt.batch) and drawopt.batch.batch is batch


def test_progress_bar_on_a_terminal_counts_done_total_and_failures(tmp_path, capsys, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    a = _frame(str(tmp_path / "a.dstream"), 1, draws=20)
    (tmp_path / "bad.dstream").write_text("drawopt 1\nBogus\n")
    assert main(["batch", a, str(tmp_path / "bad.dstream"), "-o", str(tmp_path / "out"), "--workers", "0"]) == 1
    shown = term.getvalue()
    assert "batch [1/2] starting the workers" in shown
    assert "batch [2/2] 2 done, 1 failed" in shown and f"{tmp_path / 'bad.dstream'}:2:1: error:" in shown


@pytest.mark.parametrize("module", ["drawopt.batch", "drawopt.batch_task", "drawopt.batch_cache"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
