"""Thin, checked access to the CUDA driver through ``cuda.bindings.driver``.

Every call's status is checked; failures raise :class:`LaunchError` naming the call. Nothing is
initialised until first use, so importing jittile on a machine without a GPU costs nothing.
"""

from __future__ import annotations

import functools
import sys

from ..errors import LaunchError


@functools.cache
def bindings():
    """``cuda.bindings.driver``, imported on first use (``import jittile`` does not load it)."""
    from cuda.bindings import driver

    return driver


def check(result, what: str):
    """Unpack a ``cuda.bindings`` result tuple, raising on a non-success status."""
    driver = bindings()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise LaunchError(f"{what} failed: {name}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


@functools.cache
def _initialised() -> bool:
    try:
        check(bindings().cuInit(0), "cuInit")
        return check(bindings().cuDeviceGetCount(), "cuDeviceGetCount") > 0
    except Exception:
        return False


def available() -> bool:
    """Whether a CUDA driver and at least one device are present."""
    return _initialised()


@functools.cache
def device_count() -> int:
    """How many CUDA devices the driver sees (0 without a driver)."""
    if not available():
        return 0
    return check(bindings().cuDeviceGetCount(), "cuDeviceGetCount")


@functools.cache
def device_capability(device: int) -> tuple[int, int]:
    """Compute capability of device ``device`` (an ordinal)."""
    if not available():
        raise LaunchError(NO_DEVICE)
    driver = bindings()
    handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = check(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
        "cuDeviceGetAttribute",
    )
    minor = check(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
        "cuDeviceGetAttribute",
    )
    return major, minor


@functools.cache
def device_name(device: int) -> str:
    """The device's name (``NVIDIA H200``): tunings are kept per device model."""
    if not available():
        raise LaunchError(NO_DEVICE)
    driver = bindings()
    handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
    name = check(driver.cuDeviceGetName(256, handle), "cuDeviceGetName")
    return name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)


def current_context() -> int:
    """The current context's handle (0 when none)."""
    return int(bindings().cuCtxGetCurrent()[1])


def current_device() -> int:
    """The ordinal of the current context's device; 0 when this thread has no context (the
    device torch, CuPy and numba start on)."""
    if current_context() == 0:
        return 0
    return int(check(bindings().cuCtxGetDevice(), "cuCtxGetDevice"))


def current_device_capability() -> tuple[int, int] | None:
    """Compute capability of the current device; None without a driver."""
    if not available():
        return None
    return device_capability(current_device())


NO_DEVICE = (
    "no CUDA device: kernels can be compiled (kernel.compile) and run on the CPU "
    "interpreter (kernel.interpret(...), or JITTILE_INTERPRET=1 for every launch), but "
    "not launched"
)


def ensure_context() -> int:
    """Make device 0's primary context current when this thread has none; returns the current
    context's handle as an int."""
    if not available():
        raise LaunchError(NO_DEVICE)
    ctx = current_context()
    if ctx == 0:
        ctx = primary_context(0)
        check(bindings().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


_primary_contexts: dict[int, int] = {}


def primary_context(device: int) -> int:
    """The primary context of ``device`` (the one CuPy, torch and numba share), retained once per
    process; ``setdefault`` keeps one handle when two threads race."""
    found = _primary_contexts.get(device)
    if found is None:
        if not available():
            raise LaunchError(NO_DEVICE)
        driver = bindings()
        handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
        ctx = int(check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain"))
        found = _primary_contexts.setdefault(device, ctx)
    return found


def context_for(device: int) -> int:
    """The context a launch on ``device`` uses: the current one when it is on ``device`` (torch,
    CuPy and numba make the primary context current), else the device's primary context."""
    ctx = current_context()
    if ctx and (device_count() == 1 or current_device() == device):
        return ctx
    return primary_context(device)


def use_context(ctx: int) -> int | None:
    """Make ``ctx`` current on this thread; returns the context to restore afterwards, or None
    when there is nothing to undo (``ctx`` was current, or the thread had none: then it keeps
    ``ctx``, as it would after a torch or CuPy call)."""
    previous = current_context()
    if previous == ctx:
        return None
    check(bindings().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return previous or None


def restore_context(previous: int | None) -> None:
    """Undo :func:`use_context` (None: nothing was switched)."""
    if previous is not None:
        check(bindings().cuCtxSetCurrent(previous), "cuCtxSetCurrent")


def pointer_device(ptr: int) -> int | None:
    """The ordinal of the device that holds ``ptr``; None when the driver does not know the
    pointer (host memory, a null pointer)."""
    driver = bindings()
    err, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    return int(ordinal)


def order_streams(producer: int, consumer: int) -> None:
    """Make work queued on ``consumer`` from now on wait for the work queued on ``producer`` so
    far (an event recorded on one, waited on by the other): ``__cuda_array_interface__`` v3's
    ``stream`` handshake. Streams as the interface numbers them: 1 the legacy default stream
    (also 0 here), 2 the per-thread default stream."""
    legacy = (0, 1)
    if producer == consumer or (producer in legacy and consumer in legacy):
        return
    driver = bindings()
    event = check(
        driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate"
    )
    try:
        check(driver.cuEventRecord(event, producer), "cuEventRecord")
        check(driver.cuStreamWaitEvent(consumer, event, 0), "cuStreamWaitEvent")
    finally:
        check(driver.cuEventDestroy(event), "cuEventDestroy")


def stream_capturing(stream: int) -> bool:
    """Whether work put on ``stream`` would be captured into a CUDA graph, or refused for
    breaking one: the legacy stream while another stream captures in global or thread-local
    mode answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT."""
    driver = bindings()
    err, status = driver.cuStreamIsCapturing(stream)
    if err == driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    check((err,), "cuStreamIsCapturing")
    return status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _cupy_launch():
    """CuPy's Cython ``cuLaunchKernel`` (``cupy_backends``) where the process has imported CuPy:
    it takes plain integers and makes no objects, which ``cuda.bindings``' wrapper does. Not
    otherwise: its first call imports CuPy, 164 of a cached GEMM's 221 ms first launch in a
    fresh torch process on the H200 host (bench/results/first_launch_profile_run55.json), against
    the microseconds it saves per launch; None then, or without CuPy."""
    if "cupy" not in sys.modules:
        return None
    try:
        from cupy_backends.cuda.api import driver as cupy_driver

        return cupy_driver.launchKernel
    except Exception:  # not loadable here
        return None


def launch_call(function, what: str):
    """A function ``launch(grid, block, shared, stream, params)`` making the checked
    ``cuLaunchKernel`` of a loaded ``function`` with a packed ``void*[]`` of parameters; made once
    per loaded function, so that a launch looks nothing up. It calls CuPy's wrapper where CuPy is
    imported, else ``cuda.bindings``' (a ctypes call into libcuda measured slower than both on
    the H200 host: 7.4 us against 5.2 for ``cuda.bindings``, bench/results run 28)."""
    cupy_launch = _cupy_launch()
    if cupy_launch is not None:
        handle = int(function)

        def launch_through_cupy(grid, block, shared: int, stream: int, params: int) -> None:
            try:
                cupy_launch(handle, *grid, *block, shared, stream, params, 0)
            except RuntimeError as exc:  # CuPy's CUDADriverError names the status
                raise LaunchError(f"{what} failed: {exc}") from None

        return launch_through_cupy
    drv = bindings()
    launch, success = drv.cuLaunchKernel, drv.CUresult.CUDA_SUCCESS

    def launch_through_bindings(grid, block, shared: int, stream: int, params: int) -> None:
        status = launch(function, *grid, *block, shared, stream, params, 0)[0]
        if status is not success and status != success:
            check((status,), what)

    return launch_through_bindings


def driver_version() -> str | None:
    if not available():
        return None
    version = check(bindings().cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{version // 1000}.{version % 1000 // 10}"


def load_function(cubin: bytes, entry: str, dynamic_shared: int):
    """Load a cubin into the current context and return its entry function, with the dynamic
    shared-memory limit raised when the kernel needs more than 48 KB."""
    driver = bindings()
    module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    function = check(driver.cuModuleGetFunction(module, entry.encode()), "cuModuleGetFunction")
    if dynamic_shared > 48 * 1024:
        check(
            driver.cuFuncSetAttribute(
                function,
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic_shared,
            ),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
    return module, function


def alloc(nbytes: int) -> int:
    return int(check(bindings().cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))


def free(ptr: int) -> None:
    check(bindings().cuMemFree(ptr), "cuMemFree")


def copy_to_device(dst: int, src_host: int, nbytes: int) -> None:
    check(bindings().cuMemcpyHtoD(dst, src_host, nbytes), "cuMemcpyHtoD")


def copy_to_host(dst_host: int, src: int, nbytes: int) -> None:
    check(bindings().cuMemcpyDtoH(dst_host, src, nbytes), "cuMemcpyDtoH")


def synchronize(stream: int = 0) -> None:
    """Wait for the work of ``stream`` (the legacy default stream: and what it orders after)."""
    check(bindings().cuStreamSynchronize(stream), "cuStreamSynchronize")
