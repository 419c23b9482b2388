"""Does the first compile gain from loading things in the background (jittile/backend/warmup.py)?
The first compile of ``examples/tma_two_boxes.py`` in fresh processes, disk cache off: as shipped
(NVVM and nvJitLink load in a background thread), with no background work, and with numba-cuda's
import in a second background thread as well (jittile before run 38); the variants alternate so
drift reaches them alike.

    PYTHONPATH=$PWD python3 bench/first_compile_overlap.py [--runs 7] [--name ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

MEASURE = """
import json, sys, threading, time
sys.path.insert(0, {examples!r})
import tma_two_boxes
from jittile.backend import numpy_compat, warmup
variant = {variant!r}
if variant == "none":
    warmup.start = lambda target: None
elif variant == "numba_import_too":
    shipped = warmup.start
    def start(target):
        shipped(target)
        numpy_compat.install()  # what numba-cuda's import needs on NumPy 2.5
        threading.Thread(target=lambda: __import__("numba.cuda"), daemon=True).start()
    warmup.start = start
begin = time.perf_counter()
tma_two_boxes.tma_load.compile(target="sm_90a")
print(json.dumps(time.perf_counter() - begin))
"""
VARIANTS = ("shipped", "none", "numba_import_too")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--name", default="first_compile_overlap_cpu")
    args = parser.parse_args()
    samples = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="jittile-bench-") as tmp:
        env = dict(
            os.environ,
            PYTHONPATH=str(REPO),
            JITTILE_CACHE="0",
            PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"),
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a normal install has its bytecode cached
        for index in range(args.runs + 1):  # the first round warms the bytecode cache
            for variant in VARIANTS:
                code = MEASURE.format(examples=str(REPO / "examples"), variant=variant)
                done = subprocess.run(
                    [sys.executable, "-c", code],
                    env=env,
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=True,
                )
                if index:
                    samples[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    common.save(
        args.name,
        {
            "cpus": os.cpu_count(),
            "first_compile_s": {
                v: {"median": round(statistics.median(s), 4), "runs": [round(x, 4) for x in s]}
                for v, s in samples.items()
            },
            "note": "shipped: NVVM/nvJitLink load in a background thread while the frontend lowers; "
            "none: all of it in the compile's own thread; numba_import_too: numba-cuda "
            "imported in a second background thread as well",
        },
    )


if __name__ == "__main__":
    main()
