"""Hardware probe of the TMA reduction table: which operator x element type pairs of
``cp.reduce.async.bulk.tensor`` run, and compute what the PTX ISA defines, on this GPU.

    PYTHONPATH=$PWD python3 bench/probe_reduce_types.py

Each pair runs in its own process (an unsupported pair can end in an illegal-instruction error,
which poisons the CUDA context), with jittile's contract table widened to the pair, so pairs the
contract refuses are probed too. Writes ``bench/results/probe_reduce_types.json``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO / "tests")]

INTEGERS = ("uint32", "int32", "uint64", "int64")
FLOATS = ("float32", "float16", "bfloat16", "float64")
CANDIDATES = {
    "add": INTEGERS + FLOATS,
    "min": INTEGERS + FLOATS,
    "max": INTEGERS + FLOATS,
    "inc": INTEGERS,
    "dec": INTEGERS,
    "and": INTEGERS,
    "or": INTEGERS,
    "xor": INTEGERS,
}


def run_case(op: str, dtype: str) -> str:
    """Run one pair in this process; returns "match" or "mismatch: ..."."""
    import gpu_kernels
    import numpy as np

    from jittile.patterns import tma

    tma.REDUCTION_TYPES[op] = set(tma.REDUCTION_TYPES[op]) | {dtype}
    got, want = gpu_kernels.run_reduction(op, dtype, np.random.default_rng(7))
    bad = int((got != want).sum())
    return "match" if bad == 0 else f"mismatch: {bad} of {want.size} elements differ"


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--case":
        print("RESULT " + run_case(sys.argv[2], sys.argv[3]), flush=True)
        return
    import common

    from jittile.patterns.tma import REDUCTION_TYPES

    env = dict(os.environ, PYTHONPATH=str(REPO), JITTILE_CACHE="0")
    results = {}
    for op, dtypes in CANDIDATES.items():
        for dtype in dtypes:
            try:
                done = subprocess.run(
                    [sys.executable, __file__, "--case", op, dtype],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                if lines:
                    outcome = lines[-1][len("RESULT ") :]
                else:
                    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                    outcome = f"error: {last[:200]}"
            except subprocess.TimeoutExpired:
                outcome = "error: timed out"
            results[f"{op}.{dtype}"] = {
                "outcome": outcome,
                "in_contract": dtype in REDUCTION_TYPES[op],
            }
            print(f"{op:4} {dtype:9} {outcome}", flush=True)
    supported = {
        op: sorted(d for d in dtypes if results[f"{op}.{d}"]["outcome"] == "match")
        for op, dtypes in CANDIDATES.items()
    }
    common.save("probe_reduce_types", {"results": results, "supported": supported})


if __name__ == "__main__":
    main()
