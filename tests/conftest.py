"""Shared fixtures and options for the drawopt test suite."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Property tests: ``HYPOTHESIS_PROFILE=ci`` (what .ci/run sets) derandomizes them, so a clean
# clone with no example database runs the same examples every time and a CI failure reproduces
# locally; the default profile explores new examples on every run.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

pytest_plugins = ["drawopt.testing.golden"]


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
