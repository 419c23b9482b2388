"""Which stream a launch runs on when the call names none, and on which device.

The rule (Triton's, extended to every framework jittile takes): the current stream of the
arrays' framework on the arrays' device. The first framework present among the arguments, in
the order torch, CuPy, Numba, chooses:

- a torch CUDA tensor: ``torch.cuda.current_stream(device)``, so launches join torch's stream
  order and are recorded by ``torch.cuda.graph`` capture, ``make_graphed_callables`` and
  ``torch.compile(mode="reduce-overhead")``;
- a CuPy array: CuPy's current stream of its device (CuPy's stream capture records it);
- a Numba device array: numba's default stream (the per-thread default stream when numba is
  configured with ``CUDA_PER_THREAD_DEFAULT_STREAM``, else the legacy default stream);
- NumPy arrays, ``__cuda_array_interface__`` and DLPack objects alone: the legacy default
  stream; a ``__cuda_array_interface__`` v3 ``stream`` is ordered before the launch's stream
  and DLPack producers are handed the launch's stream (arrays.py).

Arrays of another framework in the same launch are taken as ready on that stream (as Triton
takes them); ``stream=`` overrides the choice.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..errors import LaunchError
from . import driver
from .arrays import DeviceView, is_cupy_type, is_numba_type, is_torch_type

LEGACY = 0  # cuLaunchKernel's legacy default stream


def _legacy() -> int:
    return LEGACY


def _torch_reader(device: int) -> Callable[[], int]:
    torch = sys.modules.get("torch")
    if torch is None:  # a stand-in for a torch tensor (the CPU tests')
        return _legacy
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
    if raw is not None:
        return lambda: raw(device)
    return lambda: torch.cuda.current_stream(device).cuda_stream


def _cupy_reader(device: int) -> Callable[[], int]:
    cupy = sys.modules.get("cupy")
    if cupy is None:  # a stand-in for a CuPy array (the CPU benchmarks')
        return _legacy

    current = cupy.cuda.get_current_stream
    if driver.device_count() <= 1:
        return lambda: current().ptr

    def on_device() -> int:  # CuPy keeps a current stream per device
        if cupy.cuda.runtime.getDevice() == device:
            return current().ptr
        with cupy.cuda.Device(device):
            return current().ptr

    return on_device


def _numba_reader() -> Callable[[], int]:
    from numba.core import config

    handle = 2 if getattr(config, "CUDA_PER_THREAD_DEFAULT_STREAM", False) else LEGACY
    return lambda: handle  # CU_STREAM_PER_THREAD is 2


def stream_handle(stream) -> int:
    """A raw CUstream from an int, a CuPy/torch/Numba/cuda.core stream, or 0 (the legacy
    default stream)."""
    if stream == 0:
        return 0
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)  # cuda.core's stream protocol
    if protocol is not None:
        return int(protocol()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            return int(getattr(value, "value", value) or 0)
    raise LaunchError(f"cannot use {type(stream).__name__} as a stream")


def current_stream_reader(args, views) -> Callable[[], int]:
    """A function returning, at each call, the stream that launches with ``args`` (converted to
    ``views``) run on by default: the rule in this module's docstring. Fixed for the argument
    types and devices, so that the fast path calls it without looking at the arguments."""
    for wanted, make in ((is_torch_type, _torch_reader), (is_cupy_type, _cupy_reader)):
        for arg, view in zip(args, views):
            if type(view) is DeviceView and view.host is None and wanted(type(arg)):
                return make(view.device or 0)
    if any(is_numba_type(type(arg)) for arg in args):
        return _numba_reader()
    return _legacy


def launch_device(names, views) -> int | None:
    """The device that holds the launch's device arrays (None: no device array, so the current
    device); arrays on two devices are a LaunchError naming both."""
    found: dict[int, str] = {}
    for name, view in zip(names, views):
        if type(view) is not DeviceView or view.host is not None or not view.ptr:
            continue
        device = view.device
        if device is None:  # read through a protocol that does not say (numba, the interface)
            device = driver.pointer_device(view.ptr) if driver.device_count() > 1 else 0
            view.device = device
        if device is not None and device not in found:
            found[device] = name
    if len(found) > 1:
        (first, a), (second, b) = list(found.items())[:2]
        raise LaunchError(
            f"arguments {a!r} and {b!r} are on different devices (cuda:{first} and "
            f"cuda:{second}); a kernel runs on one device: move them to one device "
            f"first (torch: .to('cuda:{first}'); CuPy: copy under "
            f"cupy.cuda.Device({first}))"
        )
    return next(iter(found), None)
