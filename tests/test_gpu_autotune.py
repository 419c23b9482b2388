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
