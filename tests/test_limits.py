"""Guards instead of hangs: inputs that once folded or unrolled for minutes fail within a second,
with the limit and what to do instead; and the repository's own kernels stay far below every
limit and warn of no divergent synchronisation."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from test_hostile_kernels import HEADER, compile_module, write

from jittile import CompileError, JittileWarning, T
from jittile.frontend import checks, loops
from jittile.frontend import lower as lowering
from jittile.frontend.static import sequence_length
from jittile.targets import Target

HANGS = [  # (body, what the message says); each took from 20 s to over 15 minutes before
    ("x = 10 ** 10 ** 8", "folding limit of 4096 bits"),
    ("x = 1 << 10 ** 9", "folding limit of 4096 bits"),
    ("x = (0,) * 10 ** 9", "folding limit of 1000000"),
    ("x = sum(range(10 ** 12))", "folding limit of 1000000"),
    ("for i in T.unroll(2000):\n    Out[0, 0] = i", "use range"),
    ("for i in T.unroll(20000):\n    Out[0, 0] = i", "use range"),
    (
        "for i in T.unroll(256):\n    for j in T.unroll(256):\n        Out[0, 0] = i",
        "more than 1024 statements",
    ),
]


@pytest.mark.parametrize("body, says", HANGS, ids=[b.split("\n")[0] for b, _ in HANGS])
def test_what_used_to_hang_fails_fast(body, says, tmp_path):
    name, path = write(HEADER + "".join(f"    {line}\n" for line in body.splitlines()), tmp_path)
    start = time.perf_counter()
    with pytest.raises(CompileError, match=says):
        compile_module(name, path, "sm_90a")
    assert time.perf_counter() - start < 2.0


def test_sequence_length_counts_ranges_past_a_machine_word():
    assert sequence_length(range(10**30)) == 10**30
    assert sequence_length(range(10, 0, -3)) == 4
    assert sequence_length(range(5, 5)) == 0
    assert sequence_length((1, 2)) == 2 and sequence_length(7) is None


class Measuring(lowering.KernelLowering):
    """Lowering that records the largest T.unroll it expands."""

    largest_unroll = 0

    def unrolled_for(self, node):
        bounds = [self.static(a) for a in node.iter.args]
        Measuring.largest_unroll = max(Measuring.largest_unroll, sequence_length(range(*bounds)))
        return super().unrolled_for(node)


def _repository_kernels():
    """The kernels of examples/, tests/gpu_kernels.py, tests/bulk_kernels.py and bench/, with
    the arguments their tests and benchmarks use (the largest pipelines included)."""
    import bulk_kernels
    import gpu_kernels
    from tma_reduce_add import tma_reduce_add
    from tma_store import tma_store
    from tma_swizzled_copy import swizzled_copy
    from tma_two_boxes import tma_load
    from tmem_copy_readback import copy_to_tmem
    from tmem_decompress import decompress_to_tmem

    from bench import tma_copy as bench

    dyn2 = T.Tensor((None, None), "float32")
    f32 = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    load = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    store = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
    return [
        (tma_load, (), "sm_90a"),
        (tma_store, (), "sm_90a"),
        (tma_reduce_add, (), "sm_90a"),
        (swizzled_copy, (dyn2, dyn2, 4096, 4096, 64, 32), "sm_90a"),
        (copy_to_tmem, (), "sm_100a"),
        (decompress_to_tmem, (), "sm_100a"),
        (gpu_kernels.staged_copy, (f32(4096), f32(4096), 4096, 256), "sm_90a"),
        (gpu_kernels.cluster_big_smem, (f32(65536), f32(65536), np.zeros(4, np.int32)), "sm_90a"),
        (
            gpu_kernels.tma_roundtrip,
            (f32(32, 32), f32(32, 32), load, store, (8, 16), (0, 0), 512),
            "sm_90a",
        ),
        (gpu_kernels.tma_swizzled, (f32(96, 64), f32(3, 32, 32), 3, 32), "sm_90a"),
        (gpu_kernels.tma_with_helper, (f32(16, 16), f32(16, 16)), "sm_90a"),
        (gpu_kernels.tma_runtime_stage, (f32(16, 16), f32(16, 16)), "sm_90a"),
        (bulk_kernels.bulk_staged, (f32(4, 64), f32(4, 64)), "sm_90a"),
        (bench.tma_copy, (dyn2, dyn2), "sm_90a"),
        (bench.tma_copy_box, (dyn2, dyn2, 64, 256, 0), "sm_90a"),
        (bench.tma_copy_ring, (dyn2, dyn2, 32, 256, 1, 8192, 4), "sm_90a"),
        (bench.tma_copy_ring_lagged, (dyn2, dyn2, 32, 256, 1, 8192, 4), "sm_90a"),
        (bench.tma_copy_pipelined, (dyn2, dyn2, 128, 16384, 4), "sm_90a"),
    ]


def test_the_repository_kernels_stay_far_below_the_limits():
    """Measured: at most 128 lowered statements (the 4-stage lagged ring), 4 unrolled iterations,
    syntax trees 16 deep, 196744 bytes of shared memory as launched (the 3-stage 64x256 ring;
    131216 with 4 stages of 32x256 here); ints of 17 bits and sequences of 99 elements (opcode
    strings) while folding."""
    Measuring.largest_unroll = 0
    for kernel, args, target in _repository_kernels():
        specializer = kernel.specializer
        params = specializer.params(
            specializer.example_specs(args) if args else tuple(specializer.annotation_specs())
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", JittileWarning)
            lowered = Measuring(kernel.source, params, Target.parse(target)).lower()
        statements = loops.statement_count(lowered.function.body)
        assert statements <= loops.MAX_STATEMENTS // 4, (kernel, statements)
        assert checks._deepest(kernel.source.tree)[1] <= checks.MAX_NESTING // 4
        assert lowered.ir.launch_shared_bytes <= Target.parse(target).max_shared_bytes
    assert 2 <= Measuring.largest_unroll <= loops.MAX_UNROLL // 32
