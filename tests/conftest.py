"""Shared fixtures and options for the drawopt test suite."""

from __future__ import annotations

import importlib.abc
import os
import sys

import pytest
from hypothesis import settings

from drawopt.testing import autoloads


class PlainPassesGuard(importlib.abc.MetaPathFinder):
    """Fails any import of the top-level ``passes`` folder under its plain name: it is installed as
    ``drawopt.passes``, and loading the same file under two names gives two distinct sets of classes."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - the importlib protocol
        if name == "passes" or name.startswith("passes."):
            raise ImportError(f"import drawopt.{name}, not {name} (the pass modules are installed as drawopt.passes)")
        return None


assert "passes" not in sys.modules, "a module named plain 'passes' was imported before the test suite"
sys.meta_path.insert(0, PlainPassesGuard())

# Property tests: ``HYPOTHESIS_PROFILE=ci`` (what .ci/run sets) derandomizes them, so a clean
# clone with no example database runs the same examples every time and a CI failure reproduces
# locally; the default profile explores new examples on every run.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# the golden-file fixture (drawopt_golden): through the entry point when drawopt is installed with it,
# else (a source tree on PYTHONPATH, an install that predates the entry point) loaded here
pytest_plugins = [] if autoloads() else ["drawopt.testing.pytest_plugin"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--gpu", action="store_true", default=False, help="run tests that need a real GPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--gpu"):
        return
    skip = pytest.mark.skip(reason="needs a GPU: run with --gpu")
    for item in items:
        # the marker, not `"gpu" in item.keywords`: a directory named gpu matches that
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
