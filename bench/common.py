"""Shared benchmark plumbing: environment facts, CUDA-event timing, result files."""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in (
        "jittile",
        "numba-cuda",
        "numba",
        "llvmlite",
        "numpy",
        "cuda-bindings",
        "cupy-cuda13x",
        "torch",
        "triton",
        "nvidia-nvvm",
        "nvidia-nvjitlink",
    ):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device() -> dict:
    from jittile.runtime import driver

    info = {"driver": driver.driver_version()}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        info["name"] = props["name"].decode()
        info["sms"] = props["multiProcessorCount"]
    except Exception as exc:  # no CuPy: still record the driver
        info["name"] = f"unknown ({exc})"
    return info


def time_gpu(fn, repeat: int = 15, warmup: int = 3, batch: int = 10) -> dict:
    """Milliseconds per call of ``fn``, from CUDA events (CuPy) around ``batch`` back-to-back calls:
    the median and minimum over ``repeat`` samples. Batching keeps the device busy while the host
    issues the next call, so a contender's host-side launch cost is not counted as device time; the
    single-call median (events around one call, host cost included) and the host time to issue a
    call (from the batched samples) are reported next to it."""
    import cupy

    host = []

    def sample(calls: int) -> float:
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        issued = time.perf_counter()
        for _ in range(calls):
            fn()
        host.append((time.perf_counter() - issued) / calls)
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop) / calls

    for _ in range(warmup):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    times = [sample(batch) for _ in range(repeat)]
    batched_host = statistics.median(host)
    single = [sample(1) for _ in range(repeat)]
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "runs": repeat,
        "calls_per_run": batch,
        "single_call_median_ms": statistics.median(single),
        "host_us_per_call": 1e6 * batched_host,
    }


def provenance() -> dict:
    """What every results file starts with: when, the command, the versions, the device."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "versions": versions(),
        "device": device(),
    }


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {**provenance(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    print(json.dumps(payload, indent=2, default=str))
    return path


# ~1 ms at the H200's clock: longer than any contender's host cost per call (a tuned launch's
# first sight of new arrays took 77-92 us on the H200 host, run 55; behind run 61's 100 us spin
# 1024^3 measured 67.5 us for jittile and 68.9 for Triton, their device time about 15)
SPIN_CYCLES = 2_000_000


def spin(torch, cycles: int = SPIN_CYCLES) -> None:
    """Keep the GPU busy for ``cycles`` clocks (``torch.cuda._sleep``) so that the host enqueues
    what follows while the GPU runs: CUDA events recorded after it then time the device work of
    the call between them, not the host time to issue it."""
    torch.cuda._sleep(cycles)


def host_us(torch, fn, calls: int = 200) -> float:
    """Host microseconds per call of ``fn`` with the GPU busy (a ~25 ms spin queued first,
    longer than the calls take to issue), so that no call waits on the GPU."""
    spin(torch, 50_000_000)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return elapsed


def median_ms(
    contenders: dict, repeat: int = 20, warmup: int = 3, cycles: int = SPIN_CYCLES
) -> dict:
    """Median device milliseconds per contender. Samples alternate between the contenders (one
    call of each per round), so clock and thermal drift during the run reaches all of them
    alike. Each sample is gated behind a GPU spin of ``cycles`` clocks (:func:`spin`): the host
    issues the start event, the call and the stop event while the GPU is busy, so the events
    see the call's device time; on an idle GPU they would also count the host time to issue
    the call (:func:`host_us` measures that separately), a short kernel's largest part."""
    import torch

    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            spin(torch, cycles)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            samples[name].append(start.elapsed_time(stop))
    return {name: statistics.median(values) for name, values in samples.items()}
