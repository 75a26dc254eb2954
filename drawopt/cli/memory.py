"""How the ``drawopt`` process asks for memory: set once at CLI start, never by the library.

A 1M-draw optimize allocates and frees thousands of arrays of 4-80 MB. With glibc's defaults
each of them above 32 MB is a fresh ``mmap`` that is faulted in page by page and unmapped on
``free``, and numpy asks for transparent huge pages on each (``madvise(MADV_HUGEPAGE)``),
which under ``defrag=madvise`` makes the kernel compact memory on the fault. The kernel's
share of the run (sys time) was then 20 s of 54 s CPU. Serving every block from the heap and
keeping freed memory for the next array (``M_MMAP_MAX=0``, a high ``M_TRIM_THRESHOLD``) with
small pages took it to 4.4 s, at the same peak RSS (4.3 GB; ``/usr/bin/time`` on
``drawopt optimize`` of ``gen --kind frame --draws 1000000 --seed 1``).

One arena (``M_ARENA_MAX=1``): the report's figures run in a thread beside the passes
(:mod:`drawopt.background`), and glibc would serve that thread from an arena of its own, whose
freed blocks (kept, as above) the main thread cannot reuse. On the device host (2 cores, the 1M
frame with ``--report``, three rounds) the peak RSS went from 2.46-2.54 GB to 2.31-2.38 GB
with the thread, 2.27 to 2.19-2.20 GB without (``DRAWOPT_THREADS=1``), the wall time within
the host's spread.

The library never changes these: a process that imports drawopt keeps its own allocator
settings. Only :func:`drawopt.cli.main` calls :func:`tune_allocator`; ``DRAWOPT_MALLOC=default``
leaves glibc and numpy as they are (to compare, or where the heap must shrink again).

>>> tune_allocator({"DRAWOPT_MALLOC": "default"})
False
"""

from __future__ import annotations

__all__ = ["tune_allocator"]

import ctypes
import os
import sys
from collections.abc import Mapping

from drawopt.ir.pages import set_huge_pages

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_KEEP_FREED = 2**31 - 1  # bytes of free heap kept before trimming (mallopt takes an int): 2 GB


def tune_allocator(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the allocator settings above were applied (glibc on Linux, not turned off)."""
    if environ.get("DRAWOPT_MALLOC", "") == "default" or not sys.platform.startswith("linux"):
        return False
    try:  # the process's own symbols (libc is linked into the interpreter): no ctypes.util, whose
        # find_library imports subprocess and runs ``ldconfig -p`` in a child (~10 ms a CLI start)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not mallopt(_M_MMAP_MAX, 0):
        return False
    mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED)
    mallopt(_M_ARENA_MAX, 1)
    set_huge_pages(False)
    return True
