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
    for name in ("jittile", "numba-cuda", "numba", "llvmlite", "numpy", "cuda-bindings", "cupy-cuda13x",
                 "torch", "triton", "nvidia-nvvm", "nvidia-nvjitlink"):
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


def time_gpu(fn, repeat: int = 20, warmup: int = 3) -> dict:
    """Median/min milliseconds of ``fn`` measured with CUDA events (CuPy) around each call."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "runs": repeat}


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "command": " ".join([Path(sys.executable).name] + sys.argv),
               "versions": versions(), "device": device(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    print(json.dumps(payload, indent=2, default=str))
    return path
