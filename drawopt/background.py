"""Work that runs beside the main thread: the report's figures while the passes and the verifier run.

Most of a large frame's time is numpy and Cython kernels that let go of the GIL, so on a
machine with a second core a figure taken in a thread overlaps the work after it. Where
there is one core (or ``DRAWOPT_THREADS=1``), :func:`start` runs the function at once:
the results are the same either way, only the time differs.

>>> job = start(sum, [1, 2, 3])
>>> job.result()
6
"""

from __future__ import annotations

__all__ = ["Job", "cores", "start", "threads_allowed"]

import os
import threading
import time
from collections.abc import Callable
from typing import Any


def cores() -> int:
    """The cores this process may run on (its affinity mask where the platform has one).

    >>> cores() >= 1
    True
    """
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # (not every platform has an affinity mask)
        return max(os.cpu_count() or 1, 1)


def threads_allowed() -> bool:
    """Whether a :class:`Job` may run in a thread: more than one core to run on, and
    ``DRAWOPT_THREADS`` (when set) above 1.

    >>> isinstance(threads_allowed(), bool)
    True
    """
    env = os.environ.get("DRAWOPT_THREADS", "").strip()
    if env:
        try:
            return int(env) > 1
        except ValueError:
            return False
    return cores() > 1


class Job:
    """A function call running in a daemon thread (or already run, :func:`start`'s docstring).

    :meth:`result` waits for it and returns its value, or raises what it raised;
    :attr:`waited` is how long the callers of :meth:`result` waited, :attr:`seconds` how long
    the call itself took.
    """

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], threaded: bool) -> None:
        self._fn, self._args = fn, args
        self._value: Any = None
        self._error: BaseException | None = None
        self.seconds = 0.0
        self.waited = 0.0
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name=f"drawopt-{getattr(fn, '__name__', 'job')}",
                                            daemon=True)
            self._thread.start()
        else:
            self._run()
            self.waited = self.seconds  # (the caller waited for all of it)

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._value = self._fn(*self._args)
        except BaseException as e:  # handed to the caller of result()
            self._error = e
        finally:
            self.seconds = time.perf_counter() - t0
            self._fn = self._args = None  # type: ignore[assignment]  # (let go of the inputs)

    def wait(self) -> None:
        """Wait for the call to end (what it raised stays for :meth:`result`)."""
        if self._thread is not None:
            t0 = time.perf_counter()
            self._thread.join()
            self.waited += time.perf_counter() - t0
            self._thread = None

    def result(self) -> Any:
        """The call's value (waiting for it), or its exception raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


def start(fn: Callable[..., Any], *args: Any) -> Job:
    """``fn(*args)`` as a :class:`Job`: in a thread when :func:`threads_allowed`, else run now."""
    return Job(fn, args, threads_allowed())
