"""Host cost per launch of a tiny kernel: jittile vs a raw prepacked cuLaunchKernel, CuPy
RawKernel, Triton and numba-cuda, measured in one run: the wall time to issue batches of
``BATCH`` asynchronous launches, fewer than the driver's launch queue holds, so that a kernel's
device time never blocks the host and the figure is the host's own cost.
jittile is also timed with a torch tensor argument (torch's own pointer/shape path), and launching a
one-CTA TMA copy, whose two host TensorMaps are kept from launch to launch rather than re-encoded;
CuPy's raw ``launchKernel`` wrapper (the call jittile makes where CuPy is installed) and the host
time to issue a 1 GiB copy (jittile's TMA copy vs memcpy) are recorded next to them, and the device
time per launch of each batch (``device_us_per_launch``), which tells a host-bound figure from one
the device paced. Every contender launches once before the measurement, and the samples are
interleaved (one batch of each contender per round).

    PYTHONPATH=$PWD python3 bench/launch_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import jittile
from jittile import T

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


def per_launch_us(contenders: dict) -> dict:
    """Median host microseconds per launch of each contender (``name -> (launch, sync)``). The
    samples are interleaved, one batch of each contender per round, so that a host's clock or
    load drifting during the run reaches every contender alike (the first one measured used to
    look slower)."""
    import cupy

    host = {name: [] for name in contenders}
    device = {name: [] for name in contenders}
    for _ in range(SAMPLES):
        for name, (fn, sync) in contenders.items():
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
            host[name].append(elapsed / BATCH * 1e6)
            device[name].append(cupy.cuda.get_elapsed_time(begin, end) / BATCH * 1e3)
    DEVICE_US.update({name: statistics.median(v) for name, v in device.items()})
    return {name: statistics.median(v) for name, v in host.items()}


def main() -> None:
    import cupy

    from jittile.runtime import driver

    a = cupy.zeros(1024, dtype=cupy.float32)
    sync = cupy.cuda.runtime.deviceSynchronize
    results, contenders = {}, {}

    launch = touch[1, 32]
    contenders["jittile"] = (lambda: launch(a), sync)
    try:
        import torch

        ta = torch.as_tensor(a, device="cuda")
        contenders["jittile_torch"] = (lambda: launch(ta), sync)
    except ImportError as exc:
        results["jittile_torch"] = repr(exc)

    import tma_copy

    tile, tile_out = cupy.zeros((64, 64), dtype=cupy.float32), cupy.zeros((64, 64), cupy.float32)
    copy_tile = tma_copy.tma_copy[(1, 1), 32]
    contenders["jittile_tma_copy_64x64"] = (lambda: copy_tile(tile, tile_out), sync)

    # Raw prepacked cuLaunchKernel on the same cubin and parameter buffer.
    ck = touch.compile(a, launch=jittile.T.cuda.LaunchConfig(grid=1, block=32))
    launcher = ck.launcher()
    launcher.bind(driver.current_device())
    fn = launcher.function
    view = __import__("jittile.runtime.arrays", fromlist=["device_view"]).device_view(a)
    launcher.pack((view,))
    drv = driver.bindings()
    address = launcher.params.address
    contenders["raw_cuLaunchKernel_prepacked"] = (
        lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, address, 0),
        sync,
    )
    # ... and on the benchmark's kernel itself: the TMA copy's cubin, its two TensorMaps packed.
    from jittile.runtime.arrays import device_view

    copy_ck = tma_copy.tma_copy.compile(
        tile, tile_out, launch=jittile.T.cuda.LaunchConfig(grid=1, block=32)
    )
    copy_launcher = copy_ck.launcher()
    copy_launcher.bind(driver.current_device())
    copy_fn = copy_launcher.function
    copy_launcher.pack((device_view(tile), device_view(tile_out)))
    copy_address = copy_launcher.params.address
    contenders["raw_cuLaunchKernel_prepacked_tma_copy"] = (
        lambda: drv.cuLaunchKernel(copy_fn, 1, 1, 1, 32, 1, 1, 0, 0, copy_address, 0),
        sync,
    )
    cupy_launch = driver._cupy_launch()  # the wrapper jittile launches through where CuPy is
    if cupy_launch is not None:
        handle = int(fn)
        contenders["raw_cupy_launchKernel_prepacked"] = (
            lambda: cupy_launch(handle, 1, 1, 1, 32, 1, 1, 0, 0, address, 0),
            sync,
        )

    raw = cupy.RawKernel(
        r"""extern "C" __global__ void touch(float* a) {
        if (threadIdx.x == 0) a[0] += 1.0f; }""",
        "touch",
    )
    contenders["cupy_RawKernel"] = (lambda: raw((1,), (32,), (a,)), sync)

    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def ttouch(ptr):
            x = tl.load(ptr)
            tl.store(ptr, x + 1.0)

        ta = torch.as_tensor(a, device="cuda")
        ttouch[(1,)](ta)  # compiled before the measurement
        contenders["triton"] = (lambda: ttouch[(1,)](ta), torch.cuda.synchronize)
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
    contenders["numba_cuda"] = (lambda: ntouch[1, 32](na), sync)
    for launch_once, _ in contenders.values():  # compiles, loads, first fast-path launches
        launch_once()
    sync()
    results.update(per_launch_us(contenders))
    base = results["raw_cuLaunchKernel_prepacked"]
    results["host_parts"] = host_parts(a)
    ratios = {k: v / base for k, v in results.items() if isinstance(v, float)}
    triton = results.get("triton")
    vs_triton = (
        {k: v / triton for k, v in results.items() if k.startswith("jittile")}
        if isinstance(triton, float)
        else None
    )
    raw_copy = results["raw_cuLaunchKernel_prepacked_tma_copy"]
    ratios["jittile_tma_copy_64x64_vs_its_raw_launch"] = (
        results["jittile_tma_copy_64x64"] / raw_copy
    )
    common.save(
        "launch_overhead",
        {
            "launches_per_sample": BATCH,
            "samples": SAMPLES,
            "us_per_launch": results,
            "ratio_vs_raw": ratios,
            "ratio_vs_triton": vs_triton,
            "device_us_per_launch": DEVICE_US,
            "copy_1gib_host_us_per_call": copy_host_cost(tma_copy),
        },
    )


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
    runs = {
        "memcpy_d2d": lambda: cupy.cuda.runtime.memcpyAsync(
            out.data.ptr, a.data.ptr, a.nbytes, 3, 0
        ),
        "jittile_tma_64x64_sw128": lambda: launch(a, out),
    }
    host = {name: common.time_gpu(run)["host_us_per_call"] for name, run in runs.items()}
    host["ratio"] = host["jittile_tma_64x64_sw128"] / host["memcpy_d2d"]
    return host


if __name__ == "__main__":
    main()
