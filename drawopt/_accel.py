"""Choice between the Cython kernels and the pure-Python reference path.

``DRAWOPT_PURE=1`` in the environment forces the pure-Python path; so does a
missing extension. Every kernel has a pure path that gives identical results,
and the tests compare the two.
"""

from __future__ import annotations

__all__ = ["use_cext", "load_cext"]

import importlib
import os
import sys
from types import ModuleType


def use_cext(pure: bool | None = None) -> bool:
    """Whether to use compiled kernels: ``pure`` if given, else the environment."""
    if pure is not None:
        return not pure
    return os.environ.get("DRAWOPT_PURE", "") in ("", "0")


def load_cext(name: str, pure: bool | None = None) -> ModuleType | None:
    """The compiled module ``drawopt.<name>``, or None (pure path wanted or not built)."""
    if not use_cext(pure):
        return None
    full = f"drawopt.{name}"
    mod = sys.modules.get(full)  # the kernels ask once a call (650 times a 10k optimize): skip the import machinery
    if mod is not None:
        return mod
    try:
        return importlib.import_module(full)
    except ImportError:
        return None
