"""drawopt.background: a job gives its function's value or raises its exception, in a thread or
not (``DRAWOPT_THREADS``), and the time the caller waited is counted."""

from __future__ import annotations

import threading

import pytest

from drawopt.background import Job, start, threads_allowed


@pytest.mark.parametrize("threaded", [True, False])
def test_a_job_returns_its_value_and_raises_its_error(threaded: bool) -> None:
    seen: list[str] = []

    def where(x: int) -> int:
        seen.append(threading.current_thread().name)
        return x * 2

    job = Job(where, (21,), threaded)
    assert job.result() == 42 and job.result() == 42
    assert (seen[0] != threading.main_thread().name) is threaded
    assert job.seconds >= 0.0 and job.waited >= 0.0

    def boom() -> None:
        raise KeyError("no such thing")

    bad = Job(boom, (), threaded)
    bad.wait()  # (waiting does not raise: result() does)
    with pytest.raises(KeyError, match="no such thing"):
        bad.result()


def test_an_unthreaded_job_counts_all_of_its_time_as_waited() -> None:
    job = Job(sum, ([1, 2],), False)
    assert job.waited == job.seconds


@pytest.mark.parametrize(("env", "want"), [("1", False), ("0", False), ("4", True), ("many", False)])
def test_drawopt_threads_decides(monkeypatch: pytest.MonkeyPatch, env: str, want: bool) -> None:
    monkeypatch.setenv("DRAWOPT_THREADS", env)
    assert threads_allowed() is want
    name = start(lambda: threading.current_thread().name).result()
    assert (name != threading.main_thread().name) is want


def test_without_the_variable_a_second_core_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("DRAWOPT_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert threads_allowed() is False
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert threads_allowed() is True
