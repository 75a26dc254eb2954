"""Test helpers for drawopt users and for drawopt's own suite (golden files, the pytest plugin)."""

from __future__ import annotations

__all__ = ["PLUGIN", "autoloads"]

import os
from collections.abc import Mapping

PLUGIN = "drawopt.testing.pytest_plugin"
"""The pytest plugin's module (``-p drawopt.testing.pytest_plugin``; the ``pytest11`` entry point names it)."""


def autoloads(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether pytest loads drawopt's plugin by itself: drawopt is installed with its ``pytest11`` entry point
    and ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` is not set in ``environ``.

    A source tree on ``PYTHONPATH`` has no entry point (only an install writes that metadata):
    load the plugin with ``-p drawopt.testing.pytest_plugin`` there.

    >>> autoloads({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    False
    """
    if environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    from importlib.metadata import entry_points

    return any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
