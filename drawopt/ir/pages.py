"""Whether numpy asks the kernel for transparent huge pages on its arrays: one switch for every caller.

numpy advises ``madvise(MADV_HUGEPAGE)`` on each large array. Under ``defrag=madvise`` the
kernel then compacts memory on the fault, so code that allocates and frees many arrays of a
few MB (the verifier, a 1M-draw optimize) spends more time in the kernel than in its own
work. :func:`small_pages` turns the advice off for a block (the library: ``drawopt.verify``);
:func:`set_huge_pages` sets it for the process (the CLI, ``drawopt.cli.memory``).

>>> with small_pages():
...     x = np.zeros(1 << 20)
"""

from __future__ import annotations

__all__ = ["set_huge_pages", "small_pages"]

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

_SETTER = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "_set_madvise_hugepage", None)


def set_huge_pages(on: bool) -> bool | None:
    """Set numpy's huge-page advice; the previous setting (None where this numpy has no switch)."""
    return None if _SETTER is None else bool(_SETTER(on))


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy without huge-page advice inside the block; the previous setting restored after it."""
    prev = set_huge_pages(False)
    try:
        yield
    finally:
        if prev is not None:
            set_huge_pages(prev)
