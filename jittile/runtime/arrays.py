"""Kernel array arguments from NumPy, CuPy, PyTorch, Numba, ``__cuda_array_interface__`` or DLPack.

Each becomes a :class:`DeviceView`: device pointer, extents, byte strides and dtype. Host arrays
(NumPy arrays, torch CPU tensors, CPU DLPack arrays) are only described here; the launch copies them
to the device and back afterwards (Numba's convention), so describing one needs no GPU.
"""

from __future__ import annotations

import ctypes
import math
import sys
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..errors import JittileError, LaunchError
from . import driver

# Host storage for element types NumPy lacks (bfloat16, float8): a same-width integer moves the bits.
_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


@dataclass(slots=True)
class DeviceView:
    """A device array as the launcher sees it."""

    ptr: int  # 0 for a host array until the launch uploads it
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: DType
    host: np.ndarray | None = None  # host array to upload and copy back into after the launch
    staging: np.ndarray | None = None  # its contiguous copy (the array itself when contiguous)
    owned: bool = False  # jittile allocated ``ptr`` and frees it after the launch
    device: int | None = None  # the ordinal of the device holding ``ptr``; None: not said
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

    def upload(self) -> None:
        """Copy a host array into a new device allocation (in the current context)."""
        nbytes = self.staging.nbytes
        ptr = driver.alloc(nbytes)
        try:
            driver.copy_to_device(ptr, self.staging.ctypes.data, nbytes)
        except BaseException:
            driver.free(ptr)
            raise
        self.ptr, self.owned = ptr, True

    def finish(self) -> None:
        """Copy an uploaded host array back and free its device copy."""
        if not self.owned:
            return
        try:
            if self.host.flags.writeable:
                driver.copy_to_host(self.staging.ctypes.data, self.ptr, self.staging.nbytes)
                if self.staging is not self.host:
                    self.host[...] = self.staging
        finally:
            driver.free(self.ptr)
            self.ptr, self.owned = 0, False


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _host_view(array: np.ndarray, dtype: DType) -> DeviceView:
    """A host array, staged contiguously; the launch uploads it (:meth:`DeviceView.upload`)."""
    staging = np.ascontiguousarray(array)
    return DeviceView(
        0,
        staging.shape,
        _c_strides(staging.shape, staging.itemsize),
        dtype,
        host=array,
        staging=staging,
    )


_NUMPY_DTYPES: dict = {}


def _dtype_of(np_dtype) -> DType:
    """jittile dtype of a NumPy dtype (ml_dtypes' bfloat16/float8 too), memoised: this runs on
    every launch."""
    found = _NUMPY_DTYPES.get(np_dtype)
    if found is None:
        found = _NUMPY_DTYPES[np_dtype] = lookup_dtype(np.dtype(np_dtype).name)
    return found


# ------------------------------------------------------------------------------------ NumPy, CuPy
def _from_numpy(obj: np.ndarray, stream: int = 0) -> DeviceView:
    return _host_view(obj, _dtype_of(obj.dtype))


def _from_cupy(obj, stream: int = 0) -> DeviceView:  # faster than __cuda_array_interface__
    data = obj.data
    return DeviceView(data.ptr, obj.shape, obj.strides, _dtype_of(obj.dtype), device=data.device_id)


def is_cupy_type(kind: type) -> bool:
    return kind.__module__.startswith("cupy") and hasattr(kind, "__cuda_array_interface__")


# ------------------------------------------------------------------------------------------- Numba
def _from_numba(obj, stream: int = 0) -> DeviceView:  # its interface is a property making a dict
    return DeviceView(
        obj.device_ctypes_pointer.value or 0, obj.shape, obj.strides, _dtype_of(obj.dtype)
    )


def is_numba_type(kind: type) -> bool:
    """A numba-cuda device array (DeviceNDArray and its kin)."""
    return (
        kind.__module__.startswith("numba")
        and hasattr(kind, "device_ctypes_pointer")
        and hasattr(kind, "__cuda_array_interface__")
    )


# ------------------------------------------------------------------------------------------- torch
_TORCH_DTYPES: dict = {}


def _torch_dtype(torch_dtype) -> DType:
    """jittile dtype of a torch dtype (by name: torch.bfloat16 is bfloat16), memoised."""
    found = _TORCH_DTYPES.get(torch_dtype)
    if found is None:
        name = str(torch_dtype).removeprefix("torch.")
        try:
            found = lookup_dtype(name)
        except JittileError:
            hint = (
                "; pass packed FP4 as a uint8 tensor (.view(torch.uint8))"
                if "float4" in name
                else ""
            )
            raise LaunchError(
                f"torch dtype {torch_dtype} has no jittile equivalent{hint}"
            ) from None
        _TORCH_DTYPES[torch_dtype] = found
    return found


def _from_torch(obj, stream: int = 0) -> DeviceView:
    """Pointer, extents and strides through torch's own accessors: ``__cuda_array_interface__``
    has no typestr for float8 (it raises KeyError) and calls bfloat16 an opaque ``<V2``."""
    dtype = _TORCH_DTYPES.get(obj.dtype) or _torch_dtype(obj.dtype)
    try:
        if obj.is_cuda:
            size = dtype.bytes
            return DeviceView(
                obj.data_ptr(),
                tuple(obj.shape),
                tuple([s * size for s in obj.stride()]),
                dtype,
                device=obj.get_device(),
            )
        if obj.device.type != "cpu":
            raise LaunchError(
                f"a torch tensor on {obj.device} cannot be passed to a kernel; use a "
                f"CUDA or CPU tensor"
            )
        tensor = obj.detach()
        if dtype.numpy is None:
            tensor = tensor.view(getattr(sys.modules["torch"], _BITS[dtype.bytes]))
        return _host_view(tensor.numpy(), dtype)
    except RuntimeError as exc:  # sparse or other non-strided layouts
        raise LaunchError(f"cannot pass this torch tensor to a kernel: {exc}") from None


def is_torch_type(kind: type) -> bool:
    if kind.__module__.partition(".")[0] == "torch" and hasattr(kind, "data_ptr"):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(kind, torch.Tensor)


# --------------------------------------------------------------------- __cuda_array_interface__
_TYPESTR_DTYPES: dict = {}


def _interface_dtype(typestr: str) -> DType | None:
    """The dtype a typestr names; None for one that names none of them (``<V2``: opaque bytes)."""
    if typestr not in _TYPESTR_DTYPES:
        try:
            _TYPESTR_DTYPES[typestr] = _dtype_of(np.dtype(typestr))
        except (JittileError, TypeError):
            _TYPESTR_DTYPES[typestr] = None
    return _TYPESTR_DTYPES[typestr]


def _from_interface(obj, stream: int = 0) -> DeviceView:
    """Through ``__cuda_array_interface__``; through DLPack where the interface cannot say the
    element type (bfloat16 is ``<V2`` in it, float8 has no typestr) and the object has DLPack.
    A v3 interface's ``stream`` (where the producer's work on the data is queued) is ordered
    before the launch's ``stream``."""
    try:
        iface = obj.__cuda_array_interface__
        dtype = _interface_dtype(iface["typestr"])
        if dtype is None:
            raise LaunchError(
                f"__cuda_array_interface__ typestr {iface['typestr']!r} names no jittile dtype"
            )
    except Exception as exc:
        if _has_attribute(obj, "__dlpack__"):
            return _from_dlpack(obj, stream)
        if isinstance(exc, LaunchError):
            raise
        raise LaunchError(
            f"cannot read __cuda_array_interface__ of {type(obj).__name__}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    strides = _c_strides(shape, dtype.bytes) if strides is None else tuple(int(s) for s in strides)
    producer = iface.get("stream")
    if producer is not None:
        driver.order_streams(int(producer), stream)
    return DeviceView(int(iface["data"][0]), shape, strides, dtype)


# ------------------------------------------------------------------------------------------ DLPack
class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_DLPACK_READ_ONLY = 1
_DLPACK_CPU, _DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 1, 2, 3, 13
# (DLDataTypeCode, bits) -> jittile dtype, codes as in DLPack's dlpack.h (v1.1).
_DLPACK_DTYPES = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (1, 64): "uint64",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (6, 8): "bool",
    (10, 8): "float8_e4m3fn",
    (12, 8): "float8_e5m2",
}
_KDL_FLOAT4_E2M1FN = 17

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


@dataclass(frozen=True)
class DLPackArray:
    """What a DLPack capsule says about an array."""

    device_type: int  # DLDeviceType: 1 CPU, 2 CUDA, 3 CUDA pinned host, 13 CUDA managed...
    ptr: int  # data + byte_offset
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: DType
    read_only: bool
    device_id: int = 0  # the device ordinal of a CUDA array


def dlpack_dtype(code: int, bits: int, lanes: int) -> DType:
    """The jittile dtype of a DLPack DLDataType."""
    name = _DLPACK_DTYPES.get((code, bits)) if lanes == 1 else None
    if name is None:
        hint = "; pass packed FP4 as a uint8 array" if code == _KDL_FLOAT4_E2M1FN else ""
        raise LaunchError(
            f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no jittile "
            f"equivalent{hint}"
        )
    return lookup_dtype(name)


def read_dlpack(obj, stream: int = 0) -> DLPackArray:
    """Read ``obj.__dlpack__()`` without taking the tensor over: the capsule keeps its name, so its
    destructor returns it to the producer; the memory stays the caller's ``obj``'s. A CUDA
    producer is handed the launch's ``stream`` (DLPack's handshake: it orders its pending work
    on the data before that stream; the legacy default stream is 1 in DLPack's numbering)."""
    device_type, device_id = obj.__dlpack_device__()
    if device_type in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        stream = stream or 1
    else:
        stream = None
    try:
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=(1, 1))
        except TypeError:  # a producer older than DLPack 1.0 takes no max_version
            capsule = obj.__dlpack__(stream=stream)
    except BufferError as exc:
        raise LaunchError(f"{type(obj).__name__}.__dlpack__ refused: {exc}") from None
    name = _capsule_name(capsule)
    address = _capsule_pointer(capsule, name)
    if name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(address)
        if managed.major != 1:
            raise LaunchError(f"DLPack {managed.major}.{managed.minor} capsules are not understood")
        tensor, read_only = managed.dl_tensor, bool(managed.flags & _DLPACK_READ_ONLY)
    elif name == b"dltensor":
        tensor, read_only = _DLTensor.from_address(address), False
    else:
        raise LaunchError(f"{type(obj).__name__}.__dlpack__ returned a capsule named {name!r}")
    dtype = dlpack_dtype(tensor.code, tensor.bits, tensor.lanes)
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[i] * dtype.bytes for i in range(tensor.ndim))
    else:  # DLPack before 1.0: NULL strides mean compact row-major
        strides = _c_strides(shape, dtype.bytes)
    return DLPackArray(
        int(tensor.device_type),
        (tensor.data or 0) + tensor.byte_offset,
        shape,
        strides,
        dtype,
        read_only,
        int(tensor.device_id),
    )


def _from_dlpack(obj, stream: int = 0) -> DeviceView:
    array = read_dlpack(obj, stream)
    if array.device_type in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        return DeviceView(
            array.ptr, array.shape, array.strides, array.dtype, device=array.device_id
        )
    if array.device_type in (_DLPACK_CPU, _DLPACK_CUDA_HOST):  # host memory (pinned or not)
        return _host_view(_host_memory(array), array.dtype)
    raise LaunchError(
        f"a DLPack array on device type {array.device_type} cannot be passed to a "
        f"kernel (CPU and CUDA arrays can)"
    )


def _host_memory(array: DLPackArray) -> np.ndarray:
    """A NumPy view of a CPU DLPack array's memory (bits in a same-width integer where NumPy lacks
    the type); read-only when the producer said so, so nothing is copied back into it."""
    container = np.dtype(array.dtype.numpy or _BITS[array.dtype.bytes])
    if math.prod(array.shape) == 0:
        return np.empty(array.shape, container)
    pairs = list(zip(array.shape, array.strides))
    low = sum(min(0, (n - 1) * s) for n, s in pairs)
    high = sum(max(0, (n - 1) * s) for n, s in pairs) + container.itemsize
    memory = (ctypes.c_char * (high - low)).from_address(array.ptr + low)
    view = np.ndarray(array.shape, container, buffer=memory, offset=-low, strides=array.strides)
    view.flags.writeable = not array.read_only
    return view


# ------------------------------------------------------------------------------------- dispatch
def _has_attribute(obj, name: str) -> bool:
    """Whether ``obj`` has ``name`` without evaluating it (a property may raise: torch's
    ``__cuda_array_interface__`` raises KeyError for float8)."""
    return hasattr(type(obj), name) or name in getattr(obj, "__dict__", ())


def _array_converter(kind: type):
    """How to read an array of class ``kind``; None when the class does not say it is one."""
    if issubclass(kind, np.ndarray):
        return _from_numpy
    if is_cupy_type(kind):
        return _from_cupy
    if is_torch_type(kind):
        return _from_torch
    if is_numba_type(kind):
        return _from_numba
    if hasattr(kind, "__cuda_array_interface__"):
        return _from_interface
    if hasattr(kind, "__dlpack__"):
        return _from_dlpack
    return None


def _instance_converter(obj):
    """For objects whose instances, not their class, carry the array protocol."""
    if _has_attribute(obj, "__cuda_array_interface__"):
        return _from_interface
    if _has_attribute(obj, "__dlpack__"):
        return _from_dlpack
    return None


def _unchanged(obj, stream: int = 0):
    return obj


def _convert_other(obj, stream: int = 0):
    convert = _instance_converter(obj)
    return obj if convert is None else convert(obj, stream)


# Per argument type, how a launch converts it: decided once per type, as launches repeat types.
_CONVERTERS: dict[type, object] = {}
_PASSED_AS_IS = (DeviceView, int, float, bool, str, tuple, np.generic, type(None))


def _converter(kind: type):
    if issubclass(kind, _PASSED_AS_IS) or kind.__module__.startswith("jittile"):
        return _unchanged
    return _array_converter(kind) or _convert_other


def takes_stream(kind: type) -> bool:
    """Whether arguments of class ``kind`` are read through a protocol that orders the producer's
    work before the launch's stream (DLPack, ``__cuda_array_interface__``), so that they are
    converted once that stream is known."""
    convert = _CONVERTERS.get(kind)
    if convert is None:
        convert = _CONVERTERS[kind] = _converter(kind)
    return convert is _from_interface or convert is _from_dlpack or convert is _convert_other


def convert_argument(obj, stream: int = 0):
    """An array argument as a DeviceView; anything else (scalars, specs, TensorMaps) unchanged.
    ``stream`` is the launch's: arrays read through a protocol are ordered before it."""
    convert = _CONVERTERS.get(type(obj))
    if convert is None:
        convert = _CONVERTERS[type(obj)] = _converter(type(obj))
    return convert(obj, stream)


def device_view(obj) -> DeviceView:
    """Adapt one array argument (raises LaunchError for anything else)."""
    convert = _array_converter(type(obj)) or _instance_converter(obj)
    if convert is None:
        raise LaunchError(f"cannot pass {type(obj).__name__} as an array argument")
    return convert(obj)
