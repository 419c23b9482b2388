"""``@jittile.autotune`` on the H200: a real tuning with CUDA events, its disk record reused by
a fresh tuner (as a later process would), in well under 10 ms."""

from __future__ import annotations

import time

import pytest
from autotune_kernels import strided_scale

import jittile

pytestmark = pytest.mark.gpu


def test_a_tuning_on_the_gpu_is_correct_recorded_and_reused(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path))
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    grid = lambda meta: (  # noqa: E731
        (meta["n"] + 256 * meta["PER_THREAD"] - 1) // (256 * meta["PER_THREAD"]),
    )
    strided_scale[grid, 256](x, out, n)
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)
    assert set(strided_scale.timings) == set(strided_scale.configs)
    assert all(t > 0 for t in strided_scale.timings.values())
    (record,) = strided_scale.cache
    assert record["identity"]["device"] == torch.cuda.get_device_name(0)
    fresh = jittile.autotune(configs=strided_scale.configs, key=["n"])(strided_scale.kernel)
    out.zero_()
    started = time.perf_counter()
    fresh[grid, 256](x, out, n)
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()
    assert fresh.best_config == strided_scale.best_config and torch.equal(out, x * 2)
    assert elapsed < 0.010, elapsed


def test_the_tuners_timing_sees_the_gpus_time_not_the_launch_cost():
    """A short kernel behind the gate times as its device work; the same launches timed with
    events around each call, the GPU idle, include the host's cost of issuing them (run 50's
    tuner picked short GEMM configs by that cost)."""
    torch = pytest.importorskip("torch")
    from jittile.runtime import timing

    x = torch.randn(1 << 12, device="cuda")
    out = torch.zeros_like(x)
    kernel = strided_scale.kernel
    stream = torch.cuda.current_stream().cuda_stream

    def ten_launches():
        for _ in range(10):
            kernel[(16,), 256](x, out, 1 << 12, 1)

    gated = timing.event_median(lambda: None, ten_launches, 3, 15, stream)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ungated = []
    for _ in range(15):
        start.record()
        ten_launches()
        time.sleep(0.0005)  # a host that is slower than the GPU, as with heavy launch paths
        stop.record()
        stop.synchronize()
        ungated.append(start.elapsed_time(stop))
    ungated = sorted(ungated)[7]
    assert gated < 0.5 * ungated, (gated, ungated)
    assert torch.equal(out, x * 2)


def test_a_timed_launch_that_synchronizes_its_stream_does_not_deadlock():
    """NumPy arguments are copied in and out synchronously: the gate's watchdog opens it."""
    import numpy as np

    from jittile.runtime import timing

    x = np.ones(1024, np.float32)
    out = np.zeros(1024, np.float32)
    started = time.perf_counter()
    ms = timing.event_median(
        lambda: None, lambda: strided_scale.kernel[(4,), 256](x, out, 1024, 1), 1, 2, 0
    )
    assert ms > 0 and time.perf_counter() - started < 5
    np.testing.assert_array_equal(out, 2 * x)


def test_a_tuned_launch_costs_the_host_little_more_than_the_kernels(tmp_path, monkeypatch):
    """The tuned fast path: a repeated signature reuses its choice."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path))
    n = 1 << 16
    x, out = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")
    grid = lambda meta: ((meta["n"] + 255) // 256,)  # noqa: E731
    strided_scale[grid, 256](x, out, n)
    config = strided_scale.best_config
    direct = strided_scale.kernel[grid({"n": n}), 256]
    extra = (config.kwargs["PER_THREAD"],)

    def per_call(fn, calls=2000):
        fn()
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = (time.perf_counter() - started) / calls
        torch.cuda.synchronize()
        return elapsed * 1e6

    tuned, plain = [], []
    for _ in range(5):  # interleaved: a slower stretch of the host touches both
        tuned.append(per_call(lambda: strided_scale[grid, 256](x, out, n)))
        plain.append(per_call(lambda: direct(x, out, n, *extra)))
    tuned, plain = min(tuned), min(plain)
    print(f"tuned launch {tuned:.2f} us, the kernel's own {plain:.2f} us")
    assert tuned < plain + 6, (tuned, plain)
