"""Deterministic generators of realistic draw streams.

>>> from drawopt.gen import generate
>>> s = generate("quads", 64)              # 64 quads, one draw each (method 1)
>>> s == generate("quads", 64)
True

Kinds (see each module's docstring for what it models):

``quads``       the five methods of "The Many Ways to Render Quads" (:mod:`.quads`)
``frame``       a deferred frame: prepass, G-buffer, lighting, transparent, UI (:mod:`.frame`)
``gpu-driven``  GPU culling writing indirect args, MDI, the seed's flushes (:mod:`.gpu_driven`)
``bundle``      a bundle that sets its heaps once (or, for tests, twice) (:mod:`.bundle`)

Everything is drawn from ``numpy.random.default_rng(seed)`` and built with numpy,
so equal arguments give equal streams and a million draws take about a second.
``draws`` is the number of logical draw records (see :func:`logical_draws`).
"""

from __future__ import annotations

__all__ = ["KINDS", "generate", "options", "logical_draws", "MAX_DRAWS"]

import importlib
from typing import Any

import numpy as np

from drawopt.errors import UsageError
from drawopt.gen.common import Option, logical_draws, resolve_options
from drawopt.ir.stream import Stream

KINDS = ("quads", "frame", "gpu-driven", "bundle")
_MODULES = {"quads": "quads", "frame": "frame", "gpu-driven": "gpu_driven", "bundle": "bundle"}
MAX_DRAWS = 50_000_000


def _module(kind: str) -> Any:
    if kind not in _MODULES:
        raise UsageError(f"gen: unknown kind '{kind}' (known: {', '.join(KINDS)})")
    return importlib.import_module(f"{__name__}.{_MODULES[kind]}")


def options(kind: str) -> tuple[Option, ...]:
    """The options of generator ``kind`` (name, default, parser, help)."""
    return _module(kind).OPTIONS


def generate(kind: str, draws: int, seed: int = 0, **options: Any) -> Stream:
    """A deterministic stream of kind ``kind`` with ``draws`` logical draw records.

    Parameters
    ----------
    kind
        One of :data:`KINDS`.
    draws
        Logical draw records (``MultiDraw*`` with count N counts N); 1 .. 5e7. For
        ``quads`` method 1 this is the number of quads; for ``gpu-driven`` on the
        compute context it is the number of args records the dispatches write.
    seed
        Seed of ``numpy.random.default_rng``; equal arguments give equal streams.
    **options
        Kind-specific options, as Python values or text (``method="3"``); see
        :func:`options`.

    Returns
    -------
    Stream
        A stream that passes :meth:`Stream.check`.

    Raises
    ------
    UsageError
        Unknown kind or option, or a bad value.
    """
    mod = _module(kind)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or not 1 <= int(draws) <= MAX_DRAWS:
        raise UsageError(f"gen: draws must be an integer in 1..{MAX_DRAWS}, got {draws!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise UsageError(f"gen: seed must be a non-negative integer, got {seed!r}")
    opts = resolve_options(kind, mod.OPTIONS, options)
    rng = np.random.default_rng(int(seed))
    return mod.build(int(draws), rng, **opts)
