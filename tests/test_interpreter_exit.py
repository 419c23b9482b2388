"""What the interpreter checks when a kernel exits: tensor memory allocated with tcgen05.alloc
must have been freed with tcgen05.dealloc (jittile/interpreter/machine.py), reported at the
line of the allocation that leaked."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import jittile
from jittile import InterpreterError, T


@jittile.kernel(target="sm_100a")
def tmem_alloc(Out: T.Tensor((2,), "uint32"), FREE: T.constexpr):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    address = T.alloc_shared((1,), "uint32", layout="default")
    T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(
        T.address_of(address), T.uint32(32)
    )
    T.cuda.cta_sync()
    if T.cuda.lane_id() == 0:
        Out[0] = address[0]
    if FREE:
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(address[0], T.uint32(32))


def _alloc_line() -> int:
    lines, first = inspect.getsourcelines(tmem_alloc.pyfunc)
    return first + next(i for i, line in enumerate(lines) if "tcgen05.alloc" in line)


def test_a_kernel_that_frees_its_tensor_memory_exits_cleanly():
    out = np.full(2, 7, dtype=np.uint32)
    tmem_alloc.interpret(out, True)
    assert out.tolist() == [0, 7]  # the allocation's TMEM address: lane 0, column 0


def test_a_kernel_that_leaks_tensor_memory_is_reported_at_the_allocation():
    with pytest.raises(
        InterpreterError,
        match=r"CTA \(0, 0, 0\): the kernel exits with TMEM "
        r"still allocated \(allocated columns: 0..31\); "
        r"every tcgen05.alloc needs a tcgen05.dealloc "
        r"\(columns 0..31 allocated at .*:\d+",
    ) as info:
        tmem_alloc.interpret(np.zeros(2, dtype=np.uint32), False)
    assert info.value.location.lineno == _alloc_line()
    assert f"test_interpreter_exit.py:{_alloc_line()}" in str(info.value)
