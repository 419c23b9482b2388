"""Cheap fingerprints of launch arguments: what of an argument, read straight from its library's
attributes, decides everything a launch derives from it (conversion, checks, packing, TensorMaps).

An array's fingerprint starts with its device pointer, then what its DeviceView is made of
(extents, strides, dtype), so that two equal fingerprints give equal DeviceViews, and two that
differ only in the first item differ only in the pointer. Scalars, ``T.constexpr`` values and
TensorMaps are their own fingerprint (their type is compared separately). Host arrays and
protocols read through a capsule (DLPack) have none: they take the full path on every launch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .arrays import is_cupy_type, is_numba_type, is_torch_type
from .tensormap import TensorMap

_VALUES = (int, float, bool, np.generic, TensorMap)


def _cupy(array) -> tuple:
    data = array.data
    return data.ptr, array.shape, array.strides, array.dtype, data.device_id


def _torch(tensor) -> tuple:
    # the device last (-1 for a CPU tensor, copied in and out): a tensor of another device never
    # matches a kept CUDA fingerprint
    return tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype, tensor.get_device()


def _numba(array) -> tuple:
    return array.device_ctypes_pointer.value or 0, array.shape, array.strides, array.dtype


def _interface(array) -> tuple:
    iface = array.__cuda_array_interface__
    return (
        iface["data"][0],
        iface["shape"],
        iface.get("strides"),
        iface["typestr"],
        iface.get("stream"),
    )


interface_reader = _interface


def places(read: Callable) -> bool:
    """Whether fingerprints made by ``read`` say which device an array is on (a value's need
    not)."""
    return read is not _numba and read is not _interface


def _value(value):
    return value


def identity_check(read: Callable) -> str | None:
    """What a fast launch must still compare when an argument is the very object of the last
    launch: nothing for values, TensorMaps and Numba arrays (immutable), the shape for CuPy (an
    ndarray's data and dtype are read-only, but ``a.shape = ...`` reshapes in place, strides
    with it), and None (the whole fingerprint) for torch (``resize_``/``set_`` move its data)
    and anything read through ``__cuda_array_interface__``."""
    if read is _value or read is _numba:
        return "object"
    if read is _cupy:
        return "shape"
    return None


def reader(kind: type, static: bool) -> Callable | None:
    """How to fingerprint an argument of class ``kind`` (``static``: a ``T.constexpr`` one);
    None when it has to be converted on every launch."""
    if static or issubclass(kind, _VALUES):
        return _value
    if is_cupy_type(kind):
        return _cupy
    if is_torch_type(kind):
        return _torch
    if is_numba_type(kind):
        return _numba
    if (
        hasattr(kind, "__cuda_array_interface__")
        and not issubclass(kind, np.ndarray)
        and not kind.__module__.startswith("jittile")
    ):
        return _interface
    return None
