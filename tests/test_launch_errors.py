"""Issue #12: launch argument mistakes are reported as such before the device is needed, so that a
machine without a GPU reports them as the GPU machine does, not as ``no CUDA device``. The same
tests hold with a GPU (there the NumPy arrays are copied first, then checked)."""
from __future__ import annotations

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
    ("rank", lambda: copy(np.zeros((64, 128, 1), np.float32), good()),
     "argument 'A': rank 3 does not match the annotated T.Tensor(64, 128)"),
    ("dtype", lambda: copy(good(), np.zeros((64, 128))),
     "argument 'Out': dtype float64 does not match the annotated float32"),
    ("extent", lambda: copy[1, 32](good(), np.zeros((64, 64), np.float32)),
     "argument 'Out': extent 64 on axis 1 does not match the annotated 128"),
    ("list", lambda: copy([[0.0] * 128] * 64, good()), "argument 'A': cannot pass list"),
    ("too few", lambda: copy(good()), "copy takes 2 arguments, got 1: 'Out' missing"),
    ("too many", lambda: copy(good(), good(), good()), "copy takes 2 arguments, got 3"),
    ("keyword", lambda: copy(good(), Out=np.zeros((64, 64), np.float32)),
     "argument 'Out': extent 64 on axis 1 does not match the annotated 128"),
    ("unknown keyword", lambda: copy(good(), good(), Output=good()),
     "copy: got an unexpected keyword argument 'Output'"),
]


@pytest.mark.parametrize("launch, message", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_argument_mistakes_are_reported_before_the_device(launch, message):
    with pytest.raises(LaunchError) as info:
        launch()
    assert str(info.value).startswith(message), str(info.value)
    assert "no CUDA device" not in str(info.value)
    assert info.value.__suppress_context__ or info.value.__context__ is None  # no device error behind it
    assert copy._memory == {}  # found without compiling


@pytest.mark.skipif(driver.available(), reason="needs a machine without a CUDA device")
def test_good_arguments_without_a_device_get_the_device_error():
    with pytest.raises(LaunchError, match="no CUDA device"):
        copy(good(), good())
