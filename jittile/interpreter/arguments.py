"""Kernel arguments for the interpreter: host copies of every array (from NumPy, CuPy, torch,
Numba device arrays, ``__cuda_array_interface__`` or DLPack), placed in the interpreter's global
memory, and written back into the caller's arrays afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import DType, from_numpy
from ..dtypes import dtype as lookup_dtype
from ..errors import LaunchError
from ..ir import ArrayParam, ConstexprParam, KernelIR, ScalarParam, TensorMapParam
from .memory import GlobalMemory, storage_dtype

_SCALARS = (int, float, bool, np.generic)


@dataclass
class HostArray:
    """A C-contiguous host copy of an array argument (``data`` in its storage type) and how to
    put the result back where it came from."""

    data: np.ndarray
    dtype: DType
    write_back: Callable[[np.ndarray], None]


def host_argument(value):
    """An array argument as a :class:`HostArray`; scalars and TensorMaps pass through."""
    from ..runtime.tensormap import TensorMap

    if isinstance(value, _SCALARS) or isinstance(value, TensorMap) or not hasattr(value, "shape"):
        return value  # scalars, TensorMaps, compile-time values (strings, tuples...)
    if isinstance(value, np.ndarray):

        def back(result, target=value):
            target[...] = result.view(target.dtype).reshape(target.shape)

        return HostArray(np.ascontiguousarray(value), from_numpy(value.dtype), back)
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        return _torch(value)
    if module == "cupy":
        host = value.get()

        def back(result, target=value):
            target.set(result.view(host.dtype).reshape(target.shape))

        return HostArray(np.ascontiguousarray(host), from_numpy(host.dtype), back)
    if hasattr(value, "copy_to_host") and hasattr(value, "copy_to_device"):  # numba
        host = value.copy_to_host()

        def back(result, target=value):
            target.copy_to_device(
                np.ascontiguousarray(result.view(host.dtype).reshape(target.shape))
            )

        return HostArray(np.ascontiguousarray(host), from_numpy(host.dtype), back)
    raise LaunchError(
        f"the interpreter cannot read a {type(value).__name__} argument: pass a "
        f"NumPy, CuPy, torch or Numba array"
    )


def _torch(tensor):
    """torch tensors, including dtypes NumPy lacks (bfloat16, float8), moved as raw bits."""
    import torch

    name = str(tensor.dtype).replace("torch.", "")
    dtype = lookup_dtype(name)
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
    plain = dtype.numpy is not None
    source = tensor.detach().contiguous()
    host = (source if plain else source.view(raw)).cpu().numpy()
    if not plain:
        host = host.view(f"uint{8 * tensor.element_size()}")

    def back(result, target=tensor):
        data = torch.from_numpy(
            np.ascontiguousarray(result).view(host.dtype).reshape(tuple(target.shape)).copy()
        )
        if not plain:
            data = data.view(raw).view(target.dtype)
        target.copy_(data.to(target.device))

    return HostArray(np.ascontiguousarray(host), dtype, back)


def bind_arguments(ir: KernelIR, params: list, hosts: list):
    """Global memory holding every array, the lowered function's argument values (arrays as
    views of that memory, TensorMaps as their encoder fields), and the write-backs."""
    from ..runtime.arrays import DeviceView
    from ..runtime.tensormap import region_fields

    memory = GlobalMemory()
    views, values, writebacks = {}, [], []
    for param, host in zip(params, hosts):
        if isinstance(param, ConstexprParam):
            continue
        if isinstance(param, ArrayParam):
            buffer = memory.allocate(param.name, host.data.nbytes)
            storage = buffer.data[: host.data.nbytes]  # all of it but an empty array's one byte
            storage[:] = host.data.reshape(-1).view(np.uint8)
            array = storage.view(storage_dtype(param.dtype)).reshape(host.data.shape)
            views[param.name] = DeviceView(buffer.address, array.shape, array.strides, param.dtype)
            values.append(array)
            writebacks.append(lambda a=array, h=host: h.write_back(a))
        elif isinstance(param, ScalarParam):
            values.append(np.array(host).astype(param.dtype.numpy)[()])
        elif isinstance(param, TensorMapParam):
            values.append(_caller_tensormap(memory, host, writebacks))
    for spec in ir.host_tensormaps:
        values.append(region_fields(spec, views[spec.tensor]))
    return memory, values, writebacks


def _caller_tensormap(memory: GlobalMemory, tensormap, writebacks: list):
    """A caller-encoded TensorMap: its array copied into global memory, its fields pointed
    there."""
    host = host_argument(tensormap.array)
    buffer = memory.allocate("TensorMap array", host.data.nbytes)
    buffer.data[:] = host.data.reshape(-1).view(np.uint8)
    offset = tensormap.fields.address - _data_pointer(tensormap.array)
    writebacks.append(
        lambda: host.write_back(buffer.data.view(host.data.dtype).reshape(host.data.shape))
    )
    return dataclasses.replace(tensormap.fields, address=buffer.address + offset)


def _data_pointer(array) -> int:
    from ..runtime.arrays import device_view

    return device_view(array).ptr
