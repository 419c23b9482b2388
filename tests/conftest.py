"""Shared test setup: the ``gpu`` marker skips, with the reason, where no CUDA device is present."""
import os

import pytest

os.environ.setdefault("JITTILE_CACHE", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")


def pytest_collection_modifyitems(config, items):
    from jittile.runtime import driver

    if driver.available():
        return
    skip = pytest.mark.skip(reason="no CUDA device: GPU tests run on the H200 (see DEVICE.md)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
