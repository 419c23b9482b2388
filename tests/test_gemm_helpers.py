"""What the GEMM examples' helpers rely on: a whole local array passed to a @jittile.func helper
is the caller's array (the helper's writes are the caller's), an element of it is a value."""

import numpy as np

import jittile
from jittile import T


@jittile.func
def fill_twice(values, first):
    for i in T.unroll(4):
        values[i] = first + 2 * i


@jittile.func
def doubled(value):
    value = value * 2
    return value


@jittile.kernel
def through_helpers(Out: T.Tensor((32, 8), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    values = T.alloc_local((4,), "int32")
    fill_twice(values, lane)
    for i in T.unroll(4):
        Out[lane, i] = values[i]
        Out[lane, 4 + i] = doubled(values[i])  # an element: passed by value


def test_a_helper_writes_the_callers_local_array_and_takes_elements_by_value():
    out = np.zeros((32, 8), np.int32)
    through_helpers.interpret(out)
    lanes = np.arange(32)[:, None]
    expected = lanes + 2 * np.arange(4)[None, :]
    np.testing.assert_array_equal(out[:, :4], expected)
    np.testing.assert_array_equal(out[:, 4:], 2 * expected)


@jittile.func
def scaled(value, FACTOR):
    return value * FACTOR


@jittile.autotune(configs=[jittile.Config({"FACTOR": f}) for f in (2, 3)], key=["n"])
@jittile.kernel
def tuned_with_a_helper(Out: T.Tensor((None,), "int32"), n: T.int32, FACTOR: T.constexpr):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    if i < n:
        Out[i] = scaled(i, FACTOR)


def test_worker_compiles_of_a_kernel_with_helpers_are_the_callers_cache_entries(
    tmp_path, monkeypatch
):
    """Helpers enter the cache key by module and qualname: the worker processes import the
    kernel's module under its own name, so the caller loads what they compiled."""
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JITTILE_AUTOTUNE_JOBS", "2")
    tuned_with_a_helper.kernel._memory = {}
    result = tuned_with_a_helper.compile_all(T.Tensor((64,), "int32"), T.int32(0), target="sm_90a")
    assert [ck.metadata["cache"] for ck in result.values()] == ["hit", "hit"]


STDIN_TUNING = """
import sys
sys.path.insert(0, sys.argv[1])
from autotune_kernels import tiled_fill
from jittile import T
result = tiled_fill.compile_all(T.Tensor((64,), "float32"), T.int32(0), target="sm_90a")
print([getattr(result[c], "metadata", {}).get("cache") for c in tiled_fill.configs[:2]])
"""


def test_compile_workers_run_under_a_script_read_from_stdin(tmp_path):
    """``python -`` has no ``__main__`` file: the compile workers must not need one (run 48's
    BrokenProcessPool), and their cubins are the caller's cache hits."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "JITTILE_CACHE": "1",
        "JITTILE_CACHE_DIR": str(tmp_path / "cache"),
        "JITTILE_AUTOTUNE_JOBS": "2",
        "PYTHONPATH": str(tests.parent),
    }
    done = subprocess.run(
        [sys.executable, "-", str(tests)],
        input=STDIN_TUNING,
        text=True,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['hit', 'hit']", done.stdout + done.stderr
