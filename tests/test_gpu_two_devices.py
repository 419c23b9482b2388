"""Issue #25: kernels follow their arrays' device, on a host with two GPUs (``nvidia-h200-x2``).
Every test skips, saying why, where fewer than two devices are present."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bench import runtime_safety as safety
from jittile import LaunchError
from jittile.runtime import driver

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        driver.device_count() < 2, reason="needs two CUDA devices (the nvidia-h200-x2 machine)"
    ),
]


def _torch():
    return pytest.importorskip("torch")


def _pair(torch, device: str, value: float):
    base = torch.arange(64 * 64, dtype=torch.float32, device=device).reshape(64, 64)
    return base + value, torch.full((64, 64), -1.0, device=device)


def test_tensors_on_cuda_1_launch_there_and_leave_the_current_device():
    torch = _torch()
    torch.cuda.set_device(0)
    a, out = _pair(torch, "cuda:1", 5.0)
    safety.copy(a, out)
    torch.cuda.synchronize(1)
    assert torch.equal(out, a) and torch.cuda.current_device() == 0
    compiled = next(iter(safety._copy()._memory.values()))
    loaded = compiled._loaded._by_context
    assert driver.primary_context(1) in loaded  # the module was loaded on device 1


def test_alternating_devices_in_one_thread():
    torch = _torch()
    pairs = [_pair(torch, f"cuda:{d}", d * 100.0) for d in (0, 1)]
    outs = {d: list(torch.full((5000, 64, 64), -1.0, device=f"cuda:{d}").unbind(0)) for d in (0, 1)}
    for j in range(5000):
        d = j % 2
        safety.copy(pairs[d][0], outs[d][j])
    for d in (0, 1):
        torch.cuda.synchronize(d)
        got = torch.stack(outs[d][d::2])
        assert bool((got == pairs[d][0]).all()), d


def test_two_threads_each_on_its_own_device():
    torch = _torch()
    wrong = {}

    def worker(d: int):
        torch.cuda.set_device(d)
        a, _ = _pair(torch, f"cuda:{d}", d * 100.0)
        outs = list(torch.full((5000, 64, 64), -1.0, device=f"cuda:{d}").unbind(0))
        for out in outs:
            safety.copy(a, out)
        torch.cuda.synchronize(d)
        wrong[d] = int((torch.stack(outs) != a).flatten(1).any(1).sum())

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == {0: 0, 1: 0}


def test_cupy_arrays_under_device_1_and_numpy_under_a_current_device_of_1():
    cupy = pytest.importorskip("cupy")
    with cupy.cuda.Device(1):
        a = cupy.arange(64 * 64, dtype=cupy.float32).reshape(64, 64)
        out = cupy.full_like(a, -1.0)
        safety.copy(a, out)
        cupy.cuda.Device(1).synchronize()
        assert bool((out == a).all())
        host = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
        host_out = np.zeros_like(host)
        safety.copy(host, host_out)  # the current device: 1
        np.testing.assert_array_equal(host_out, host)


def test_arrays_on_two_devices_are_a_launch_error_naming_both():
    torch = _torch()
    a, _ = _pair(torch, "cuda:0", 0.0)
    _, out = _pair(torch, "cuda:1", 0.0)
    with pytest.raises(
        LaunchError,
        match=r"'A' and 'Out' are on different devices \(cuda:0 and "
        r"cuda:1\)",
    ):
        safety.copy(a, out)


def test_graph_capture_on_device_1():
    torch = _torch()
    with torch.cuda.device(1):
        result = safety.torch_graph("copy", "global")
    assert result["replays_correct"] == [True] * 3
