"""Kernel array arguments from NumPy, CuPy, PyTorch, Numba, ``__cuda_array_interface__`` or DLPack.

Each becomes a :class:`DeviceView`: device pointer, extents, byte strides and dtype. NumPy arrays are
copied to the device for the launch and back afterwards (Numba's convention).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType, dtype as lookup_dtype
from ..errors import LaunchError
from . import driver


@dataclass(slots=True)
class DeviceView:
    """A device array as the launcher sees it."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: DType
    host: np.ndarray | None = None  # NumPy argument to copy back into after the launch
    staging: np.ndarray | None = None  # its contiguous copy (the array itself when contiguous)
    owned: bool = False  # jittile allocated ``ptr`` and frees it after the launch
    c_contiguous: bool = field(init=False)
    kind: tuple = field(init=False)  # what of this array selects a specialization

    def __post_init__(self) -> None:
        expected, contiguous = self.dtype.bytes, True
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent > 1 and stride != expected:
                contiguous = False
                break
            expected *= extent
        self.c_contiguous = contiguous
        self.kind = (self.dtype, len(self.shape), contiguous)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def finish(self) -> None:
        """Copy a NumPy argument back and free the device copy."""
        if self.host is not None and self.host.flags.writeable:
            driver.copy_to_host(self.staging.ctypes.data, self.ptr, self.staging.nbytes)
            if self.staging is not self.host:
                self.host[...] = self.staging
        if self.owned:
            driver.free(self.ptr)
            self.owned = False


def _from_interface(obj, iface: dict) -> DeviceView:
    np_dtype = np.dtype(iface["typestr"])
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    if strides is None:
        strides = _c_strides(shape, np_dtype.itemsize)
    return DeviceView(int(iface["data"][0]), shape, tuple(int(s) for s in strides),
                      lookup_dtype(np_dtype.name))


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def is_array(obj) -> bool:
    return (isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__")
            or _is_torch(obj) or hasattr(obj, "__dlpack__"))


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


_DTYPES: dict = {}


def _dtype_of(np_dtype) -> DType:
    """jittile dtype of a NumPy dtype, memoised (this runs on every launch)."""
    found = _DTYPES.get(np_dtype)
    if found is None:
        found = _DTYPES[np_dtype] = lookup_dtype(np.dtype(np_dtype).name)
    return found


def _unchanged(obj):
    return obj


def _from_cupy(obj) -> DeviceView:  # faster than building __cuda_array_interface__
    return DeviceView(obj.data.ptr, obj.shape, obj.strides, _dtype_of(obj.dtype))


def _convert_other(obj):
    return device_view(obj) if is_array(obj) else obj


# Per argument type, how a launch converts it: decided once per type, as launches repeat types.
_CONVERTERS: dict[type, object] = {}
_PASSED_AS_IS = (DeviceView, int, float, bool, str, tuple, np.generic, type(None))


def _converter(kind: type):
    if issubclass(kind, _PASSED_AS_IS) or kind.__module__.startswith("jittile"):
        return _unchanged
    if kind.__module__.startswith("cupy") and hasattr(kind, "__cuda_array_interface__"):
        return _from_cupy
    return _convert_other


def convert_argument(obj):
    """An array argument as a DeviceView; anything else (scalars, specs, TensorMaps) unchanged."""
    convert = _CONVERTERS.get(type(obj))
    if convert is None:
        convert = _CONVERTERS[type(obj)] = _converter(type(obj))
    return convert(obj)


def device_view(obj) -> DeviceView:
    """Adapt one array argument (raises LaunchError for anything else)."""
    if _converter(type(obj)) is _from_cupy:
        return _from_cupy(obj)
    if isinstance(obj, np.ndarray):
        staging = np.ascontiguousarray(obj)
        driver.ensure_context()
        ptr = driver.alloc(staging.nbytes)
        driver.copy_to_device(ptr, staging.ctypes.data, staging.nbytes)
        return DeviceView(ptr, staging.shape, _c_strides(staging.shape, staging.itemsize),
                          lookup_dtype(staging.dtype.name), host=obj, staging=staging, owned=True)
    if _is_torch(obj):
        if not obj.is_cuda:
            raise LaunchError("a torch CPU tensor cannot be passed to a kernel; use .cuda() or NumPy")
        item = obj.element_size()
        return DeviceView(obj.data_ptr(), tuple(obj.shape), tuple(s * item for s in obj.stride()),
                          lookup_dtype(str(obj.dtype)))
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_interface(obj, obj.__cuda_array_interface__)
    if hasattr(obj, "__dlpack__"):
        device_type, _ = obj.__dlpack_device__()
        if device_type == 1:  # kDLCPU
            return device_view(np.from_dlpack(obj))
        for module in ("cupy", "torch"):
            try:
                lib = __import__(module)
                converted = lib.from_dlpack(obj) if module == "cupy" else \
                    lib.utils.dlpack.from_dlpack(obj)
                return device_view(converted)
            except ImportError:
                continue
        raise LaunchError("a DLPack CUDA array needs CuPy or PyTorch to be imported by jittile")
    raise LaunchError(f"cannot pass {type(obj).__name__} as an array argument")
