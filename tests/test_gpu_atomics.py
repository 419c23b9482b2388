"""GPU tests: ``T.cuda.atomic_*`` and ``T.cuda.threadfence`` on the H200, with the expectations
that hold in any order of the atomics (tests/atomic_kernels.py; tests/test_atomics.py adds the
interpreter's order). Without a device the kernels are interpreted against the same checks.

Run on the H200 with ``pytest -m gpu tests/test_gpu_atomics.py``."""

import atomic_kernels as ak
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", ak.INTEGERS)
@pytest.mark.parametrize("op", list(ak.REDUCE))
def test_integer_atomics_on_the_gpu(op, dtype):
    ak.run_reduction(ak.apply, op, dtype)


@pytest.mark.parametrize("dtype", ak.INTEGERS + ["float32"])
def test_exchanges_on_the_gpu(dtype):
    ak.check_exchanges(ak.apply, dtype)


def test_tickets_and_signedness_on_the_gpu():
    ak.check_tickets(ak.apply)
    ak.check_signedness(ak.apply)


def test_float32_adds_on_the_gpu():
    ak.check_float_adds(ak.apply)


def test_compare_and_swap_on_the_gpu():
    ak.check_compare_and_swap(ak.first_wins, ak.float_cas)


def test_a_released_flag_publishes_the_data_to_another_cta():
    flag, data = np.zeros(1, np.int32), np.zeros(64, np.float32)
    seen = np.full(64, -1.0, np.float32)
    ak.message(flag, data, seen)
    np.testing.assert_array_equal(seen, np.arange(64, dtype=np.float32) * 0.5)


def test_two_warps_waiting_on_each_others_flags_on_the_gpu():
    """The interpreter's polling test (tests/test_atomics.py) on the GPU: the same outcome."""
    flags, seen = np.zeros(2, np.int32), np.zeros(2, np.int32)
    ak.handshake(flags, seen)
    assert flags.tolist() == [2, 1] and seen.tolist() == [1, 2]
