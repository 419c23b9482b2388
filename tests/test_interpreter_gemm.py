"""examples/gemm_bf16.py on the CPU interpreter: every instruction it issues is modelled (TMA,
mbarriers, wgmma, named barriers, stmatrix, the TMA store), and a ragged product over a persistent
loop of 4 tiles on 2 CTAs comes out exact (small integers: every sum is representable)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def test_the_gemm_example_interpreted_is_exact():
    torch = pytest.importorskip("torch")  # bfloat16 arrays on the CPU
    import gemm_bf16

    m, n, k = 130, 264, 136
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-2, 3, (m, k), generator=generator).to(torch.bfloat16)
    b = torch.randint(-2, 3, (n, k), generator=generator).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    gemm_bf16.gemm_bf16.interpret[(2,), (384,)](a, b, c, m, n, k)
    assert torch.equal(c.float(), a.float() @ b.float().T)


def _named(count: int):
    import jittile
    from jittile import T

    @jittile.kernel
    def named(Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        flags = T.alloc_shared((64,), "int32")
        flags[tid] = tid
        T.ptx.bar.sync(1, count)
        Out[tid] = flags[63 - tid]

    return named


def test_named_barriers_wait_for_their_count():
    import numpy as np

    import jittile

    out = np.zeros(64, np.int32)
    _named(64).interpret(out)
    assert (out == np.arange(63, -1, -1)).all()
    with pytest.raises(jittile.InterpreterError, match="named barrier 1 for 96 threads, of "
                                                       "which 64 arrived"):
        _named(96).interpret(np.zeros(64, np.int32))
