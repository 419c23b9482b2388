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
CANDIDATES = {"add": INTEGERS + FLOATS, "min": INTEGERS + FLOATS, "max": INTEGERS + FLOATS,
              "inc": INTEGERS, "dec": INTEGERS, "and": INTEGERS, "or": INTEGERS, "xor": INTEGERS}


def expected(op: str, before, src):
    """The PTX ISA meaning of ``op`` applied to global ``before`` with shared ``src``."""
    import numpy as np

    if op == "inc":
        return np.where(before >= src, 0, before + 1).astype(before.dtype)
    if op == "dec":
        return np.where((before == 0) | (before > src), src, before - 1).astype(before.dtype)
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return ufunc(before, src)


def run_case(op: str, dtype: str) -> str:
    """Run one pair in this process; returns "match" or "mismatch: ..."."""
    import numpy as np

    import gpu_kernels
    from jittile.patterns import tma

    tma.REDUCTION_TYPES[op] = set(tma.REDUCTION_TYPES[op]) | {dtype}
    opcode = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"
    rng = np.random.default_rng(7)
    if dtype == "bfloat16":
        import torch

        src = torch.randn(16, 32, device="cuda").bfloat16()
        out = torch.randn(32, 64, device="cuda").bfloat16()
        before = out.float().cpu().numpy()
        gpu_kernels.tma_reduce(src, out, opcode, dtype)
        torch.cuda.synchronize()
        region = expected(op, before[8:24, 32:64], src.float().cpu().numpy())
        want = before.copy()
        want[8:24, 32:64] = torch.from_numpy(region).bfloat16().float().numpy()
        got = out.float().cpu().numpy()
    else:
        if op in ("inc", "dec"):
            src = rng.integers(0, 8, size=(16, 32)).astype(dtype)
            out = rng.integers(0, 10, size=(32, 64)).astype(dtype)
        elif dtype.startswith("uint"):
            src = rng.integers(0, 2 ** 31, size=(16, 32)).astype(dtype)
            out = rng.integers(0, 2 ** 31, size=(32, 64)).astype(dtype)
        elif dtype.startswith("int"):
            src = rng.integers(-1000, 1000, size=(16, 32)).astype(dtype)
            out = rng.integers(-1000, 1000, size=(32, 64)).astype(dtype)
        else:
            src = rng.standard_normal((16, 32)).astype(dtype)
            out = rng.standard_normal((32, 64)).astype(dtype)
        before = out.copy()
        gpu_kernels.tma_reduce(src, out, opcode, dtype)
        want = before.copy()
        want[8:24, 32:64] = expected(op, before[8:24, 32:64], src)
        got = out
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
                done = subprocess.run([sys.executable, __file__, "--case", op, dtype], env=env,
                                      capture_output=True, text=True, timeout=120)
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                if lines:
                    outcome = lines[-1][len("RESULT "):]
                else:
                    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                    outcome = f"error: {last[:200]}"
            except subprocess.TimeoutExpired:
                outcome = "error: timed out"
            results[f"{op}.{dtype}"] = {"outcome": outcome,
                                        "in_contract": dtype in REDUCTION_TYPES[op]}
            print(f"{op:4} {dtype:9} {outcome}", flush=True)
    supported = {op: sorted(d for d in dtypes if results[f"{op}.{d}"]["outcome"] == "match")
                 for op, dtypes in CANDIDATES.items()}
    common.save("probe_reduce_types", {"results": results, "supported": supported})


if __name__ == "__main__":
    main()
