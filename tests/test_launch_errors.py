"""Issue #12: launch argument mistakes are reported as such before the device is needed, so that a
machine without a GPU reports them as the GPU machine does, not as ``no CUDA device``. The same
tests hold with a GPU (there the NumPy arrays are copied first, then checked)."""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np
import pytest

import jittile
from jittile import LaunchError, T
from jittile.runtime import driver


@jittile.kernel
def copy(A: T.Tensor((64, 128), "float32"), Out: T.Tensor((64, 128), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    Out[i, 0] = A[i, 0]


def good():
    return np.zeros((64, 128), np.float32)


MISTAKES = [
    (
        "rank",
        lambda: copy(np.zeros((64, 128, 1), np.float32), good()),
        "argument 'A': rank 3 does not match the annotated T.Tensor(64, 128)",
    ),
    (
        "dtype",
        lambda: copy(good(), np.zeros((64, 128))),
        "argument 'Out': dtype float64 does not match the annotated float32",
    ),
    (
        "extent",
        lambda: copy[1, 32](good(), np.zeros((64, 64), np.float32)),
        "argument 'Out': extent 64 on axis 1 does not match the annotated 128",
    ),
    ("list", lambda: copy([[0.0] * 128] * 64, good()), "argument 'A': cannot pass list"),
    ("too few", lambda: copy(good()), "copy takes 2 arguments, got 1: 'Out' missing"),
    ("too many", lambda: copy(good(), good(), good()), "copy takes 2 arguments, got 3"),
    (
        "keyword",
        lambda: copy(good(), Out=np.zeros((64, 64), np.float32)),
        "argument 'Out': extent 64 on axis 1 does not match the annotated 128",
    ),
    (
        "unknown keyword",
        lambda: copy(good(), good(), Output=good()),
        "copy: got an unexpected keyword argument 'Output'",
    ),
]


@pytest.mark.parametrize("launch, message", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_argument_mistakes_are_reported_before_the_device(launch, message):
    with pytest.raises(LaunchError) as info:
        launch()
    here = f"{__file__}:{info.value.lineno}:"  # the user's line that launched, then the kernel
    assert str(info.value).startswith(f"{here}{info.value.col_offset}: launch of copy: "), str(
        info.value
    )
    assert message in str(info.value) and info.value.lineno == launch.__code__.co_firstlineno
    assert "no CUDA device" not in str(info.value)
    assert all(
        not _in_jittile(entry.filename)
        for entry in traceback.extract_tb(info.value.__traceback__)[1:-1]
    )  # the test's frames, the raising frame, nothing between
    assert (
        info.value.__suppress_context__ or info.value.__context__ is None
    )  # no device error behind it
    assert copy._memory == {}  # found without compiling


def _in_jittile(filename: str) -> bool:
    return os.path.abspath(filename).startswith(os.path.dirname(jittile.__file__))


@pytest.mark.skipif(driver.available(), reason="needs a machine without a CUDA device")
def test_good_arguments_without_a_device_get_the_device_error_and_how_to_interpret():
    with pytest.raises(LaunchError, match="no CUDA device") as info:
        copy(good(), good())
    assert info.value.lineno == sys._getframe().f_lineno - 1  # the call, in this file
    assert "copy.interpret(...)" in str(info.value) and "JITTILE_INTERPRET=1" in str(info.value)


def test_a_launch_error_of_the_fast_path_names_the_kernel_and_the_call(monkeypatch):
    """A launch the driver refuses after a fast-path hit is located like a full-path error."""
    from bench.launch_host_cpu import CupyLike, driver_stand_ins

    state = {"launches": 0}

    def launch(*args):
        state["launches"] += 1
        if state["launches"] > 1:
            raise LaunchError("launch of copy failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")

    for name, value in driver_stand_ins(launch).items():
        monkeypatch.setattr(driver, name, value)
    a, out = CupyLike(0x10000, (64, 128)), CupyLike(0x20000, (64, 128))
    copy(a, out)
    with pytest.raises(LaunchError) as info:
        copy(a, out)
    assert str(info.value).startswith(f"{__file__}:{sys._getframe().f_lineno - 1}:")
    assert "launch of copy failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in str(info.value)
    assert "launch of copy: launch of copy" not in str(info.value)
