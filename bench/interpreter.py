"""How fast the CPU interpreter runs the seed TMA example and a 256x256 float32 tiled TMA copy
(16 CTAs x 32 threads, one 64x64 box each, loaded and stored through shared memory).

    python bench/interpreter.py [--runs 3]

Targets (issue #10, on the 2-core CI machine): seed example < 1 s, tiled copy < 5 s. Writes
bench/results/interpreter.json (medians of wall-clock seconds, outputs checked exactly).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import jittile  # noqa: E402
from jittile import T  # noqa: E402

from common import save, versions  # noqa: E402

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
        T.cuda.tile.apply(T.ptx[LOAD], tile, A, box=(64, 64), coords=(row, col),
                          mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(T.ptx[STORE], Out, tile, box=(64, 64), coords=(row, col))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def _seed() -> float:
    import tma_two_boxes

    x = np.arange(256, dtype=np.uint32).reshape(16, 16)
    out = np.zeros_like(x)
    start = time.perf_counter()
    tma_two_boxes.tma_load.interpret(x, out)
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(out, x)
    return elapsed


def _tiled() -> float:
    a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    out = np.zeros_like(a)
    start = time.perf_counter()
    tiled_copy.interpret(a, out)
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(out, a)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    seed = [_seed() for _ in range(runs)]
    tiled = [_tiled() for _ in range(runs)]
    result = {
        "what": "CPU interpreter wall-clock seconds (lowering included), outputs checked exactly",
        "versions": versions(), "runs": runs,
        "seed_example_s": {"median": statistics.median(seed), "all": seed, "target": 1.0},
        "tiled_copy_256x256_16ctas_s": {"median": statistics.median(tiled), "all": tiled,
                                        "target": 5.0},
    }
    save("interpreter", result)
    print(f"seed example {result['seed_example_s']['median']:.3f} s (target 1 s); tiled copy "
          f"{result['tiled_copy_256x256_16ctas_s']['median']:.3f} s (target 5 s)")


if __name__ == "__main__":
    main()
