"""The CPU interpreter (jittile/interpreter/): results as the GPU leaves them, and the faults,
deadlocks and races it reports with the kernel's line and the thread."""

import time

import interp_kernels as k
import ml_dtypes
import numpy as np
import pytest
from lines import line_of

import jittile

KERNELS = "tests/interp_kernels.py"


def _line(marker: str) -> int:
    from pathlib import Path

    return line_of(Path(k.__file__), marker)


def test_shared_memory_and_cta_barrier():
    a = np.arange(128, dtype=np.float32).reshape(4, 32)
    out = np.zeros_like(a)
    k.reverse_rows.interpret(a, out)
    np.testing.assert_array_equal(out, (a * np.float32(1.5))[:, ::-1])


def test_gpu_integer_and_float_semantics():
    out, f = np.zeros(4, dtype=np.uint32), np.zeros(2, dtype=np.float32)
    k.wrapping.interpret(out, f)
    assert out.tolist() == [0, 4294967295, 4294967295, (3000000000 * 2) % 2**32]
    assert f[0] == np.float32(16777216.0) and f[1] == np.float32(0.1)


def test_bulk_copies_through_a_runtime_stage():
    a = np.arange(1024, dtype=np.uint32).reshape(4, 256)
    out = np.zeros_like(a)
    k.bulk_rows.interpret(a, out)
    np.testing.assert_array_equal(out, a)


def test_launch_configuration_at_the_call():
    a = np.arange(128, dtype=np.float32).reshape(4, 32)
    out = np.zeros_like(a)
    k.reverse_rows.interpret[(2, 1, 1), 32](a, out)  # only two CTAs run
    np.testing.assert_array_equal(out[:2], (a * np.float32(1.5))[:2, ::-1])
    assert not out[2:].any()


def test_a_wrong_transaction_count_is_a_deadlock_report():
    a = np.arange(256, dtype=np.uint32)
    start = time.perf_counter()
    with pytest.warns(jittile.JittileWarning), pytest.raises(jittile.InterpreterError) as info:
        k.expects_too_much.interpret(a, np.zeros_like(a))
    assert time.perf_counter() - start < 1.0
    text = str(info.value)
    assert "deadlock" in text and "threads 0-31" in text
    assert "0 of 1 arrivals and 1024 transaction bytes pending" in text
    assert info.value.lineno == _line("# waits forever")


def test_reading_a_load_destination_before_the_wait_is_a_race():
    a = np.arange(256, dtype=np.uint32)
    with pytest.raises(jittile.InterpreterError) as info:
        k.reads_too_early.interpret(a, np.zeros_like(a))
    assert "race" in str(info.value) and "buf[" in str(info.value)
    assert info.value.lineno == _line("# the race")


def test_a_warp_collective_reached_by_half_a_warp():
    with pytest.raises(jittile.InterpreterError, match=r"elect.sync .* lanes 0-15 of warp 0 only"):
        k.half_warp_elect.interpret(np.zeros(32, dtype=np.uint32))


def test_elect_sync_picks_the_lowest_member_lane():
    out = np.zeros(32, dtype=np.uint32)
    k.elected.interpret(out)
    assert out.tolist() == [0] * 4 + [1] + [0] * 27


def test_out_of_bounds_global_write_names_the_thread_and_line():
    with pytest.raises(jittile.InterpreterError) as info:
        k.out_of_bounds.interpret(np.zeros(32, dtype=np.uint32))
    assert "lane 31" in str(info.value) and info.value.lineno == _line("writes past the end")


def test_jittile_interpret_environment_switch():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(k.__file__).resolve().parents[1]
    script = (
        "import numpy as np, interp_kernels as k\n"
        "a = np.arange(128, dtype=np.float32).reshape(4, 32); out = np.zeros_like(a)\n"
        "k.reverse_rows(a, out)\n"  # a plain launch: interpreted, no GPU needed
        "assert (out == (a * np.float32(1.5))[:, ::-1]).all()\nprint('interpreted')\n"
    )
    env = dict(
        os.environ,
        JITTILE_INTERPRET="1",
        JITTILE_CACHE="0",
        PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]),
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "interpreted" in result.stdout, result.stderr


def test_torch_tensors_come_back_written():
    torch = pytest.importorskip("torch")
    a = torch.arange(128, dtype=torch.float32).reshape(4, 32)
    out = torch.zeros_like(a)
    k.reverse_rows.interpret(a, out)
    assert torch.equal(out, (a * 1.5).flip(1))


def test_bfloat16_arrays_move_as_raw_bits():
    """Every bfloat16 bit pattern (NaN payloads too) through a bulk copy, as ml_dtypes arrays."""
    bits = np.random.default_rng(3).permutation(np.arange(1 << 16, dtype=np.uint16))[:256]
    a = bits.view(ml_dtypes.bfloat16)
    out = np.zeros_like(a)
    k.bulk_bf16.interpret(a, out)
    assert out.view(np.uint16).tolist() == bits.tolist()


def test_an_empty_array_is_an_argument_like_any_other():
    out = np.full(1, -1, np.int32)
    k.count_into.interpret(np.zeros(0, np.int32), out, 0)
    assert out[0] == 0
    k.count_into.interpret(np.zeros(3, np.int32), out, 3)
    assert out[0] == 3


def test_benchmark_copy_kernels_interpret():
    """bench/tma_copy.py's kernels (swizzled two-box tiles, one wide box, persistent mbarrier rings
    with runtime stages) on a small matrix: rings of 2 and 3 stages over 3 CTAs, rounds part-full."""
    from bench import tma_copy as bench_copy

    a = np.random.default_rng(1).standard_normal((64, 512)).astype(np.float32)
    out = np.full_like(a, np.nan)
    bench_copy.tma_copy.interpret[(512 // 64, 64 // 64), 32](a, out)
    np.testing.assert_array_equal(out, a)
    out[:] = np.nan
    bench_copy.tma_copy_box.interpret[(512 // 256, 64 // 32), 32](a, out, 32, 256, 0)
    np.testing.assert_array_equal(out, a)
    rows_a, rows_out = a.reshape(-1, 256), out.reshape(-1, 256)
    for ring in (bench_copy.tma_copy_ring, bench_copy.tma_copy_ring_lagged):
        for stages in (2, 3):
            out[:] = np.nan
            ring.interpret[3, 32](rows_a, rows_out, 32, 256, 1, rows_a.shape[0] // 32, stages)
            np.testing.assert_array_equal(out, a)
