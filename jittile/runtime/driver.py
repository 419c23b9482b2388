"""Thin, checked access to the CUDA driver through ``cuda.bindings.driver``.

Every call's status is checked; failures raise :class:`LaunchError` naming the call. Nothing is
initialised until first use, so importing jittile on a machine without a GPU costs nothing.
"""
from __future__ import annotations

import functools

from ..errors import LaunchError


@functools.lru_cache(maxsize=None)
def _driver():
    from cuda.bindings import driver

    return driver


def check(result, what: str):
    """Unpack a ``cuda.bindings`` result tuple, raising on a non-success status."""
    driver = _driver()
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


@functools.lru_cache(maxsize=None)
def _initialised() -> bool:
    try:
        check(_driver().cuInit(0), "cuInit")
        return check(_driver().cuDeviceGetCount(), "cuDeviceGetCount") > 0
    except Exception:
        return False


def available() -> bool:
    """Whether a CUDA driver and at least one device are present."""
    return _initialised()


def current_device_capability() -> tuple[int, int] | None:
    if not available():
        return None
    driver = _driver()
    device = check(driver.cuDeviceGet(0), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                              device), "cuDeviceGetAttribute")
    minor = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                              device), "cuDeviceGetAttribute")
    return major, minor


def ensure_context() -> int:
    """Make the device's primary context current (the one CuPy, torch and numba share); returns
    its handle as an int."""
    if not available():
        raise LaunchError("no CUDA device: kernels can be compiled (kernel.compile) but not launched")
    driver = _driver()
    ctx = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        device = check(driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return int(ctx)


def current_context() -> int:
    """The current context's handle (0 when none)."""
    return int(_driver().cuCtxGetCurrent()[1])


@functools.lru_cache(maxsize=None)
def _cupy_launch():
    """CuPy's Cython ``cuLaunchKernel`` (``cupy_backends``), where CuPy is installed: it takes
    plain integers and makes no objects, which ``cuda.bindings``' wrapper does; None without it."""
    try:
        from cupy_backends.cuda.api import driver as cupy_driver

        return cupy_driver.launchKernel
    except Exception:  # not installed, or not loadable here
        return None


def launch_call(function, what: str):
    """A function ``launch(grid, block, shared, stream, params)`` making the checked
    ``cuLaunchKernel`` of a loaded ``function`` with a packed ``void*[]`` of parameters; made once
    per loaded function, so that a launch looks nothing up. It calls CuPy's wrapper where CuPy is
    installed, else ``cuda.bindings``' (a ctypes call into libcuda measured slower than both on
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
    drv = _driver()
    launch, success = drv.cuLaunchKernel, drv.CUresult.CUDA_SUCCESS

    def launch_through_bindings(grid, block, shared: int, stream: int, params: int) -> None:
        status = launch(function, *grid, *block, shared, stream, params, 0)[0]
        if status is not success and status != success:
            check((status,), what)
    return launch_through_bindings


def driver_version() -> str | None:
    if not available():
        return None
    version = check(_driver().cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{version // 1000}.{version % 1000 // 10}"


def load_function(cubin: bytes, entry: str, dynamic_shared: int):
    """Load a cubin into the current context and return its entry function, with the dynamic
    shared-memory limit raised when the kernel needs more than 48 KB."""
    driver = _driver()
    module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    function = check(driver.cuModuleGetFunction(module, entry.encode()), "cuModuleGetFunction")
    if dynamic_shared > 48 * 1024:
        check(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            dynamic_shared), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    return module, function


def alloc(nbytes: int) -> int:
    return int(check(_driver().cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))


def free(ptr: int) -> None:
    check(_driver().cuMemFree(ptr), "cuMemFree")


def copy_to_device(dst: int, src_host: int, nbytes: int) -> None:
    check(_driver().cuMemcpyHtoD(dst, src_host, nbytes), "cuMemcpyHtoD")


def copy_to_host(dst_host: int, src: int, nbytes: int) -> None:
    check(_driver().cuMemcpyDtoH(dst_host, src, nbytes), "cuMemcpyDtoH")


def synchronize() -> None:
    check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")
