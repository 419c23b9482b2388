"""Argument packing follows numba-cuda's flattened parameter layout (CPU only: nothing launches)."""

import struct

import pytest

import jittile
from jittile import LaunchError, T
from jittile.dtypes import dtype
from jittile.runtime.arrays import DeviceView
from jittile.runtime.launcher import Launcher, LoadedCubin
from jittile.targets import Target


@jittile.kernel
def scale(A: T.Tensor((None, 8), "float32"), n: T.int32, factor: T.float32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    i = T.cuda.thread_idx("x")
    if i < n:
        A[0, i] = A[0, i] * factor


def _launcher():
    ck = scale.compile(T.Tensor((4, 8), "float32"), T.int32(0), T.float32(0), target="sm_90a")
    assert ck.param_layout == [("array", 2), ("scalar", "int32"), ("scalar", "float32")]
    return Launcher(ck.ir, LoadedCubin(ck.ir.name, ck.cubin, ck.entry, None, 0), ck.param_layout)


def _slot(launcher, index, fmt):
    offset = launcher.params.slots[index][0]
    return struct.unpack_from(fmt, launcher.params.view, offset)[0]


def test_array_and_scalars_are_packed_in_numba_order():
    launcher = _launcher()
    view = DeviceView(0x7000_0000_0100, (4, 8), (32, 4), dtype("float32"))
    launcher.pack((view, 5, 2.5))
    values = [_slot(launcher, i, "<q") for i in range(9)]
    assert values == [0, 0, 32, 4, 0x7000_0000_0100, 4, 8, 32, 4]
    assert _slot(launcher, 9, "<i") == 5
    assert _slot(launcher, 10, "<f") == 2.5


@pytest.mark.parametrize(
    "view,match",
    [
        (DeviceView(0x1000, (4, 8), (32, 4), dtype("int32")), "dtype"),
        (DeviceView(0x1000, (4, 8, 1), (32, 4, 4), dtype("float32")), "rank"),
        (DeviceView(0x1000, (4, 7), (28, 4), dtype("float32")), "extent 7"),
        (DeviceView(0x1000, (4, 8), (4, 16), dtype("float32")), "contiguous"),
    ],
)
def test_mismatched_arrays_raise_launch_error(view, match):
    with pytest.raises(LaunchError, match=match):
        _launcher().pack((view, 1, 1.0))


@pytest.mark.parametrize(
    "target,capability,ok",
    [
        ("sm_90a", (9, 0), True),
        ("sm_100a", (9, 0), False),
        ("sm_90a", (10, 0), False),
        ("sm_90", (10, 0), True),
        ("sm_100f", (10, 3), True),
        ("sm_100f", (12, 0), False),
    ],
)
def test_device_must_run_the_target(target, capability, ok):
    from jittile.runtime.launcher import check_device

    if ok:
        check_device(Target.parse(target), capability, "k")
    else:
        with pytest.raises(LaunchError, match=f"compiled for {target}"):
            check_device(Target.parse(target), capability, "k")


class _InterfaceArray:
    """A device array known only through ``__cuda_array_interface__`` (no GPU needed to read it)."""

    def __init__(self, ptr, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
        }


class _CupyLike:
    """Shaped like a CuPy array (module name, ``data.ptr``, byte strides) for the fast path."""

    __module__ = "cupy._core.core"
    __cuda_array_interface__ = property(lambda self: {})  # present on the class, as on CuPy's

    def __init__(self, ptr, shape, strides, dtype):
        self.data = type("Memory", (), {"ptr": ptr, "device_id": 0})()
        self.shape, self.strides, self.dtype = shape, strides, dtype


def test_arguments_convert_by_type_and_repeat_the_same_way():
    from jittile.runtime.arrays import convert_argument

    numpy = pytest.importorskip("numpy")
    for _ in range(2):  # the second time through the per-type cache
        view = convert_argument(_InterfaceArray(0x1000, (3, 4), "<f4"))
        assert (view.ptr, view.shape, view.strides, view.dtype) == (
            0x1000,
            (3, 4),
            (16, 4),
            dtype("float32"),
        )
        assert view.c_contiguous and view.kind == (dtype("float32"), 2, True)
        strided = convert_argument(_InterfaceArray(0x2000, (3, 4), "<i4", strides=(32, 4)))
        assert strided.strides == (32, 4) and not strided.c_contiguous
        fast = convert_argument(_CupyLike(0x3000, (8,), (8,), numpy.dtype("uint32")))
        assert (fast.ptr, fast.shape, fast.strides) == (0x3000, (8,), (8,))
        assert not fast.c_contiguous  # every other element
        for unchanged in (
            7,
            2.5,
            True,
            None,
            "s",
            (1, 2),
            numpy.int32(3),
            view,
            T.Tensor((2,), "uint8"),
            object,
        ):
            assert convert_argument(unchanged) is unchanged


def test_a_kernel_launch_key_separates_argument_kinds():
    from jittile.runtime.arrays import convert_argument

    contiguous = convert_argument(_InterfaceArray(0x1000, (4, 8), "<f4"))
    strided = convert_argument(_InterfaceArray(0x1000, (4, 8), "<f4", strides=(64, 4)))
    other = convert_argument(_InterfaceArray(0x1000, (4, 8), "<i4"))
    assert len({contiguous.kind, strided.kind, other.kind}) == 3
