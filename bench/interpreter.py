"""How fast the CPU interpreter runs the two seed examples (the TMA two-box load, the tcgen05.cp
copy and readback), a 256x256 float32 tiled TMA copy (16 CTAs x 32 threads, one 64x64 box each,
loaded and stored through shared memory) and examples/gemm_bf16.py on a 130x264x136 product
(2 CTAs of 384 threads: TMA, mbarriers, wgmma, stmatrix, the TMA store).

    python bench/interpreter.py [--runs 3] [--name interpreter]

Targets on the 2-core CI machine: seed examples < 1 s, tiled copy < 5 s (issue #10); the GEMM
<= 1.5 s (issue #22). Writes bench/results/<name>.json (medians of wall-clock seconds, lowering
included, outputs checked exactly).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from common import save

import jittile
from jittile import T

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@jittile.kernel
def tiled_copy(A: T.Tensor((256, 256), "float32"), Out: T.Tensor((256, 256), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(4, 4), block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("y") * 64
    col = T.cuda.block_idx("x") * 64
    tile = T.alloc_shared((64, 64), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(16384))
        T.cuda.tile.apply(
            T.ptx[LOAD], tile, A, box=(64, 64), coords=(row, col), mbar=mbar.ptr_to([0])
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(T.ptx[STORE], Out, tile, box=(64, 64), coords=(row, col))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def _timed(run, *args) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of ``run(*args)`` (the CPU time is what a shared,
    loaded machine distorts least)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def _seed() -> tuple[float, float]:
    import tma_two_boxes

    x = np.arange(256, dtype=np.uint32).reshape(16, 16)
    out = np.zeros_like(x)
    elapsed = _timed(tma_two_boxes.tma_load.interpret, x, out)
    np.testing.assert_array_equal(out, x)
    return elapsed


def _readback() -> tuple[float, float]:
    import tmem_copy_readback

    x = np.arange(512, dtype=np.uint32).reshape(128, 4)
    out = np.zeros_like(x)
    elapsed = _timed(tmem_copy_readback.copy_to_tmem.interpret, x, out)
    np.testing.assert_array_equal(out, x)
    return elapsed


def _gemm() -> tuple[float, float]:
    """Small integers: every partial sum is exact in fp32 and bf16, so the output is exact."""
    import gemm_bf16
    from ml_dtypes import bfloat16

    m, n, k = 130, 264, 136
    rng = np.random.default_rng(0)
    a = rng.integers(-2, 3, (m, k)).astype(bfloat16)
    b = rng.integers(-2, 3, (n, k)).astype(bfloat16)
    c = np.full((m, n), np.nan, dtype=bfloat16)
    elapsed = _timed(gemm_bf16.gemm_bf16.interpret[(2,), (384,)], a, b, c, m, n, k)
    np.testing.assert_array_equal(
        c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32).T
    )
    return elapsed


def _tiled() -> tuple[float, float]:
    a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    out = np.zeros_like(a)
    elapsed = _timed(tiled_copy.interpret, a, out)
    np.testing.assert_array_equal(out, a)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--name", default="interpreter", help="results file bench/results/NAME.json"
    )
    options = parser.parse_args()
    cases = {
        "seed_example_s": (_seed, 1.0),
        "tcgen05_cp_readback_s": (_readback, 1.0),
        "tiled_copy_256x256_16ctas_s": (_tiled, 5.0),
        "gemm_130x264x136_2ctas_s": (_gemm, 1.5),
    }
    result = {
        "what": "CPU interpreter seconds (lowering included), outputs checked exactly: "
        "median wall-clock, and the process CPU time of each run",
        "runs": options.runs,
        "load_average_before": os.getloadavg(),
    }
    for name, (case, target) in cases.items():
        times = [case() for _ in range(options.runs)]
        wall = [w for w, _ in times]
        result[name] = {
            "median": statistics.median(wall),
            "all": wall,
            "cpu_median": statistics.median(c for _, c in times),
            "cpu_all": [c for _, c in times],
            "target": target,
        }
    result["load_average_after"] = os.getloadavg()
    save(options.name, result)
    for name, (_, target) in cases.items():
        print(
            f"{name}: {result[name]['median']:.3f} s wall, {result[name]['cpu_median']:.3f} s "
            f"CPU (target {target} s)"
        )


if __name__ == "__main__":
    main()
