"""Host cost per launch of a tiny kernel: jittile vs a raw prepacked cuLaunchKernel, CuPy
RawKernel, Triton and numba-cuda, measured in one run: the wall time to issue batches of
``BATCH`` asynchronous launches, fewer than the driver's launch queue holds, so that a kernel's
device time never blocks the host and the figure is the host's own cost.
jittile is also timed with a torch tensor argument (torch's own pointer/shape path), and launching a
one-CTA TMA copy, whose two host TensorMaps are kept from launch to launch rather than re-encoded;
CuPy's raw ``launchKernel`` wrapper (the call jittile makes where CuPy is installed) and the host
time to issue a 1 GiB copy (jittile's TMA copy vs memcpy) are recorded next to them, and the device
time per launch of each batch (``device_us_per_launch``), which tells a host-bound figure from one
the device paced.

    PYTHONPATH=$PWD python3 bench/launch_overhead.py
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import jittile  # noqa: E402
from jittile import T  # noqa: E402

BATCH = 256  # launches per sample: the queue never fills, so the host is never paced
SAMPLES = 40


@jittile.kernel
def touch(A: T.Tensor((None,), "float32")):
    i = T.cuda.thread_idx("x")
    if i == 0:
        A[0] = A[0] + 1.0


# Device microseconds per launch over the same batches (CUDA events on the legacy default stream,
# which every contender launches on): where it is close to the host figure, the device, not the
# host, set the pace (a full launch queue blocks the host), and the host figure is an upper bound.
DEVICE_US: dict = {}


def per_launch_us(fn, sync, name: str | None = None) -> float:
    import cupy

    samples, device = [], []
    for _ in range(SAMPLES):
        fn()
        sync()
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        begin.record()
        start = time.perf_counter()
        for _ in range(BATCH):
            fn()
        elapsed = time.perf_counter() - start
        end.record()
        end.synchronize()
        sync()
        samples.append(elapsed / BATCH * 1e6)
        device.append(cupy.cuda.get_elapsed_time(begin, end) / BATCH * 1e3)
    if name is not None:
        DEVICE_US[name] = statistics.median(device)
    return statistics.median(samples)


def main() -> None:
    import cupy

    from jittile.runtime import driver

    a = cupy.zeros(1024, dtype=cupy.float32)
    sync = cupy.cuda.runtime.deviceSynchronize
    results = {}

    launch = touch[1, 32]
    results["jittile"] = per_launch_us(lambda: launch(a), sync, "jittile")
    try:
        import torch

        ta = torch.as_tensor(a, device="cuda")
        results["jittile_torch"] = per_launch_us(lambda: launch(ta), sync, "jittile_torch")
    except ImportError as exc:
        results["jittile_torch"] = repr(exc)

    import tma_copy

    tile, tile_out = cupy.zeros((64, 64), dtype=cupy.float32), cupy.zeros((64, 64), cupy.float32)
    copy_tile = tma_copy.tma_copy[(1, 1), 32]
    results["jittile_tma_copy_64x64"] = per_launch_us(lambda: copy_tile(tile, tile_out), sync,
                                                      "jittile_tma_copy_64x64")

    # Raw prepacked cuLaunchKernel on the same cubin and parameter buffer.
    ck = touch.compile(a, launch=jittile.T.cuda.LaunchConfig(grid=1, block=32))
    launcher = ck.launcher()
    fn = launcher.function()
    view = __import__("jittile.runtime.arrays", fromlist=["device_view"]).device_view(a)
    launcher.pack((view,))
    drv = driver._driver()
    address = launcher.params.address
    results["raw_cuLaunchKernel_prepacked"] = per_launch_us(
        lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, address, 0), sync,
        "raw_cuLaunchKernel_prepacked")
    # ... and on the benchmark's kernel itself: the TMA copy's cubin, its two TensorMaps packed.
    from jittile.runtime.arrays import device_view

    copy_ck = tma_copy.tma_copy.compile(tile, tile_out,
                                        launch=jittile.T.cuda.LaunchConfig(grid=1, block=32))
    copy_launcher = copy_ck.launcher()
    copy_fn = copy_launcher.function()
    copy_launcher.pack((device_view(tile), device_view(tile_out)))
    copy_address = copy_launcher.params.address
    results["raw_cuLaunchKernel_prepacked_tma_copy"] = per_launch_us(
        lambda: drv.cuLaunchKernel(copy_fn, 1, 1, 1, 32, 1, 1, 0, 0, copy_address, 0), sync,
        "raw_cuLaunchKernel_prepacked_tma_copy")
    cupy_launch = driver._cupy_launch()  # the wrapper jittile launches through where CuPy is
    if cupy_launch is not None:
        handle = int(fn)
        results["raw_cupy_launchKernel_prepacked"] = per_launch_us(
            lambda: cupy_launch(handle, 1, 1, 1, 32, 1, 1, 0, 0, address, 0), sync,
            "raw_cupy_launchKernel_prepacked")

    raw = cupy.RawKernel(r'''extern "C" __global__ void touch(float* a) {
        if (threadIdx.x == 0) a[0] += 1.0f; }''', "touch")
    results["cupy_RawKernel"] = per_launch_us(lambda: raw((1,), (32,), (a,)), sync,
                                              "cupy_RawKernel")

    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def ttouch(ptr):
            x = tl.load(ptr)
            tl.store(ptr, x + 1.0)

        ta = torch.as_tensor(a, device="cuda")
        results["triton"] = per_launch_us(lambda: ttouch[(1,)](ta), torch.cuda.synchronize,
                                          "triton")
    except Exception as exc:
        results["triton"] = repr(exc)

    # numba-cuda 0.30 needs NumPy's row_stack alias at its first compile; jittile restores it
    # only when it compiles, and a warm disk cache compiles nothing
    from jittile.backend import numpy_compat

    numpy_compat.install()
    from numba import cuda as ncuda

    @ncuda.jit
    def ntouch(arr):
        if ncuda.threadIdx.x == 0:
            arr[0] += 1.0

    na = ncuda.as_cuda_array(a)
    results["numba_cuda"] = per_launch_us(lambda: ntouch[1, 32](na), sync, "numba_cuda")
    base = results["raw_cuLaunchKernel_prepacked"]
    results["host_parts"] = host_parts(a)
    ratios = {k: v / base for k, v in results.items() if isinstance(v, float)}
    triton = results.get("triton")
    vs_triton = ({k: v / triton for k, v in results.items() if k.startswith("jittile")}
                 if isinstance(triton, float) else None)
    raw_copy = results["raw_cuLaunchKernel_prepacked_tma_copy"]
    ratios["jittile_tma_copy_64x64_vs_its_raw_launch"] = results["jittile_tma_copy_64x64"] / raw_copy
    common.save("launch_overhead", {"launches_per_sample": BATCH, "us_per_launch": results,
                                    "ratio_vs_raw": ratios, "ratio_vs_triton": vs_triton,
                                    "device_us_per_launch": DEVICE_US,
                                    "copy_1gib_host_us_per_call": copy_host_cost(tma_copy)})


def host_parts(a) -> dict:
    """Microseconds of the pieces of a fast launch that depend on the array library: reading a
    fingerprint (jittile/runtime/fingerprints.py) of a CuPy array and of a torch tensor."""
    from jittile.runtime import fingerprints

    parts = {}

    def each(fn, count=100000) -> float:
        start = time.perf_counter()
        for _ in range(count):
            fn()
        return (time.perf_counter() - start) / count * 1e6

    parts["fingerprint_cupy"] = each(lambda: fingerprints._cupy(a))
    try:
        import torch

        ta = torch.as_tensor(a, device="cuda")
        parts["fingerprint_torch"] = each(lambda: fingerprints._torch(ta))
    except ImportError:
        pass
    return parts


def copy_host_cost(tma_copy) -> dict:
    """Host microseconds to issue one 1 GiB copy (bench/tma_copy.py's timing: batches of 10 calls
    while the device is busy): D2D memcpy vs jittile's swizzled 64x64 TMA copy."""
    import cupy

    m = n = tma_copy.M
    a = cupy.ones((m, n), dtype=cupy.float32)
    out = cupy.zeros_like(a)
    launch = tma_copy.tma_copy[(n // 64, m // 64), 32]
    runs = {"memcpy_d2d": lambda: cupy.cuda.runtime.memcpyAsync(out.data.ptr, a.data.ptr, a.nbytes,
                                                                3, 0),
            "jittile_tma_64x64_sw128": lambda: launch(a, out)}
    host = {name: common.time_gpu(run)["host_us_per_call"] for name, run in runs.items()}
    host["ratio"] = host["jittile_tma_64x64_sw128"] / host["memcpy_d2d"]
    return host


if __name__ == "__main__":
    main()
