"""Host microseconds jittile spends per launch, on a machine without a GPU: the driver calls are
replaced by stand-ins that do nothing, so what is timed is jittile's own Python work per call
(argument fingerprints or conversion, checks, parameter packing, TensorMap reuse, the globals
watch). Arrays are CuPy-shaped stand-ins (module ``cupy``, ``.data.ptr``, byte strides).

    PYTHONPATH=$PWD python3 bench/launch_host_cpu.py [--json FILE]

The numbers add to the driver's own cost (a raw prepacked ``cuLaunchKernel``) on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

LAUNCHES = 20000


class _Data:
    def __init__(self, ptr: int):
        self.ptr, self.device_id = ptr, 0


class CupyLike:
    """What the launch path reads of a CuPy array."""

    __module__ = "cupy._core.core"
    __cuda_array_interface__ = property(lambda self: {})

    def __init__(self, ptr: int, shape: tuple, dtype=np.float32):
        self.data, self.shape, self.dtype = _Data(ptr), shape, np.dtype(dtype)
        step, strides = self.dtype.itemsize, []
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        self.strides = tuple(reversed(strides))


def driver_stand_ins(launch) -> dict:
    """Stand-ins for the driver calls a launch makes on a one-device machine, by name in
    ``jittile.runtime.driver``; ``launch`` stands in for each ``cuLaunchKernel``."""
    return {
        "available": lambda: True,
        "device_count": lambda: 1,
        "ensure_context": lambda: 1,
        "current_context": lambda: 1,
        "current_device": lambda: 0,
        "context_for": lambda device: 1,
        "use_context": lambda ctx: None,
        "restore_context": lambda previous: None,
        "current_device_capability": lambda: (9, 0),
        "device_capability": lambda d: (9, 0),
        "stream_capturing": lambda stream: False,
        "pointer_device": lambda ptr: 0,
        "load_function": lambda cubin, entry, shared: (None, 7),
        "launch_call": lambda function, what: launch,
    }


def fake_driver() -> dict:
    """Replace every driver call of a launch by a stand-in; returns counters of the calls made."""
    from jittile.runtime import driver, tensormap

    calls = {"launch": 0, "encode": 0}
    success = types.SimpleNamespace(CUDA_SUCCESS=0)

    def launch(*args):
        calls["launch"] += 1
        return (0,)

    fake = types.SimpleNamespace(CUresult=success, cuLaunchKernel=launch)
    driver.bindings = lambda: fake
    for name, value in driver_stand_ins(launch).items():
        setattr(driver, name, value)

    def encode(fields):
        calls["encode"] += 1
        return bytes(128)

    tensormap.encode = encode
    import jittile.runtime.launcher as launcher_module

    launcher_module.encode = encode
    return calls


def per_launch_us(fn) -> dict:
    """Microseconds per launch over 7 samples of ``LAUNCHES`` calls: the median and the fastest
    sample of wall time, and the median of the process's CPU time (on a machine shared with
    other work, the CPU time and the fastest sample move least with the load)."""
    wall, cpu = [], []
    for _ in range(7):
        fn()
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(LAUNCHES):
            fn()
        wall.append((time.perf_counter() - start) / LAUNCHES * 1e6)
        cpu.append((time.process_time() - start_cpu) / LAUNCHES * 1e6)
    return {
        "median": statistics.median(wall),
        "min": min(wall),
        "cpu_median": statistics.median(cpu),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this file")
    options = parser.parse_args()
    calls = fake_driver()
    import tma_copy
    from launch_overhead import touch

    a = CupyLike(0x7000_0000_0000, (1024,))
    tile, tile_out = CupyLike(0x7100_0000_0000, (64, 64)), CupyLike(0x7200_0000_0000, (64, 64))
    touch_launch, copy_launch = touch[1, 32], tma_copy.tma_copy[(1, 1), 32]
    ring = [
        (
            CupyLike(0x7300_0000_0000 + i * 0x10_0000, (64, 64)),
            CupyLike(0x7400_0000_0000 + i * 0x10_0000, (64, 64)),
        )
        for i in range(4)
    ]
    state = {"i": 0}

    def rotating():
        state["i"] = (state["i"] + 1) % 4
        copy_launch(*ring[state["i"]])

    measured = {
        "touch_1_array": per_launch_us(lambda: touch_launch(a)),
        "tma_copy_64x64_2_tensormaps": per_launch_us(lambda: copy_launch(tile, tile_out)),
        "tma_copy_64x64_4_rotating_pairs": per_launch_us(rotating),
    }
    payload = {
        "us_per_launch_without_driver": {k: v["median"] for k, v in measured.items()},
        "fastest_sample_us": {k: v["min"] for k, v in measured.items()},
        "cpu_time_us": {k: v["cpu_median"] for k, v in measured.items()},
        "driver_calls": calls,
        "python": sys.version.split()[0],
    }
    emit(payload, options.json)


def emit(payload: dict, path: str | None) -> None:
    """Print a CPU benchmark's results, and write them to ``path`` where given."""
    print(json.dumps(payload, indent=2))
    if path:
        Path(path).write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
