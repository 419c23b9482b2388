"""Argument packing follows numba-cuda's flattened parameter layout (CPU only: nothing launches)."""
import struct

import pytest

import jittile
from jittile import LaunchError, T
from jittile.dtypes import dtype
from jittile.runtime.arrays import DeviceView
from jittile.runtime.launcher import Launcher


@jittile.kernel
def scale(A: T.Tensor((None, 8), "float32"), n: T.int32, factor: T.float32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    i = T.cuda.thread_idx("x")
    if i < n:
        A[0, i] = A[0, i] * factor


def _launcher():
    ck = scale.compile(T.Tensor((4, 8), "float32"), T.int32(0), T.float32(0), target="sm_90a")
    assert ck.param_layout == [("array", 2), ("scalar", "int32"), ("scalar", "float32")]
    return Launcher(ck.ir, ck.cubin, ck.entry, ck.param_layout)


def _slot(launcher, index, fmt):
    offset = launcher.params.slots[index][0]
    return struct.unpack_from(fmt, launcher.params.view, offset)[0]


def test_array_and_scalars_are_packed_in_numba_order():
    launcher = _launcher()
    view = DeviceView(0x7000_0000_0100, (4, 8), (32, 4), dtype("float32"))
    launcher._pack((view, 5, 2.5))
    values = [_slot(launcher, i, "<q") for i in range(9)]
    assert values == [0, 0, 32, 4, 0x7000_0000_0100, 4, 8, 32, 4]
    assert _slot(launcher, 9, "<i") == 5
    assert _slot(launcher, 10, "<f") == 2.5


@pytest.mark.parametrize("view,match", [
    (DeviceView(0x1000, (4, 8), (32, 4), dtype("int32")), "dtype"),
    (DeviceView(0x1000, (4, 8, 1), (32, 4, 4), dtype("float32")), "rank"),
    (DeviceView(0x1000, (4, 7), (28, 4), dtype("float32")), "extent 7"),
    (DeviceView(0x1000, (4, 8), (4, 16), dtype("float32")), "contiguous"),
])
def test_mismatched_arrays_raise_launch_error(view, match):
    with pytest.raises(LaunchError, match=match):
        _launcher()._pack((view, 1, 1.0))


@pytest.mark.parametrize("target,capability,ok", [
    ("sm_90a", (9, 0), True), ("sm_100a", (9, 0), False), ("sm_90a", (10, 0), False),
    ("sm_90", (10, 0), True), ("sm_100f", (10, 3), True), ("sm_100f", (12, 0), False),
])
def test_device_must_run_the_target(target, capability, ok):
    from jittile.runtime.launcher import check_device

    if ok:
        check_device(target, capability, "k")
    else:
        with pytest.raises(LaunchError, match=f"compiled for {target}"):
            check_device(target, capability, "k")
