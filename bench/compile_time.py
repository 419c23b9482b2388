"""Compile-time costs, CPU only (no GPU needed): the issue #5 targets.

    PYTHONPATH=$PWD python3 bench/compile_time.py [--runs 5]

Every number comes from fresh Python processes (medians over ``--runs`` processes):

- ``import``: ``import jittile`` (target <= 0.2 s; numba must not load);
- ``first_compile``: ``tma_two_boxes.tma_load.compile(target="sm_90a")`` with the disk cache off, the
  first compile of the process (numba-cuda and NVVM load here; target <= 0.9 s), split into parts;
  ``first_compile_uninstrumented``: the same without the split, as a user meets it;
- ``further_specialization``: after that, the same kernel (``tma_boxes`` below) again with another
  ``T.constexpr`` value or another dtype, cache off (target <= 50 ms each);
- ``disk_hit``: ``.compile()`` when the entry exists, in a fresh process (target <= 10 ms per kernel):
  the first kernel of the process (which also pays one-time imports of the frontend's pattern modules
  and the cache package), a second kernel, and a second specialization of that kernel;
- ``gemm_example``: the GEMM example (``examples/gemm_bf16.py``, 128 accumulator registers per
  thread) compiled after a first compile, cache off, split into parts, ``reshape``
  (``jittile/backend/reshape.py``) among them.

Floors, for comparison (what numba-cuda costs before jittile does anything): ``import numba.cuda``
alone, and ``numba.cuda.compile_ptx`` of a one-line kernel (first in a fresh process including that
import, then a second one-line kernel), each with NumPy already imported as jittile has it.

Python's bytecode cache is on for the measured processes (``PYTHONPYCACHEPREFIX`` in a temporary
directory, warmed by one unmeasured run), as for a normal install; ``import_no_bytecode_cache`` repeats
the import with ``PYTHONDONTWRITEBYTECODE=1`` and no cache, the state this repository's test
environment runs in.
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

import jittile  # noqa: E402
from jittile import T  # noqa: E402

TARGETS = {
    "import_s": 0.2,
    "first_compile_s": 0.9,
    "further_specialization_s": 0.050,
    "disk_hit_s": 0.010,
}  # issue #13 (first compile, further specialization), issue #5


@jittile.kernel
def tma_boxes(A, Out, ROWS: T.constexpr, DTYPE: T.constexpr):
    """examples/tma_two_boxes.py with the box height and the element type as parameters."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, ROWS, 16), DTYPE, layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(2 * ROWS * 16 * 4))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            shared,
            A,
            box=(ROWS, 16),
            coords=(0, 0),
            coord_steps=((ROWS, 0),),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.cuda.cta_sync()
    for g, r in T.grid(2, ROWS):
        if lane < 16:
            Out[g * ROWS + r, lane] = shared[g, r, lane]


def boxes_args(rows: int, dtype: str) -> tuple:
    spec = T.Tensor((2 * rows, 16), dtype)
    return spec, spec, rows, dtype


FIRST_SPEC = (8, "uint32")
FURTHER_SPECS = [(4, "uint32"), (2, "uint32"), (8, "float32"), (8, "int32"), (16, "uint32")]

# The code each measured process runs; it prints one JSON line.
_PRELUDE = f"""
import json, sys, time
sys.path[:0] = [{str(REPO / "examples")!r}, {str(BENCH)!r}]
"""
IMPORT = """
import json, sys, time
start = time.perf_counter()
import jittile
print(json.dumps({"s": time.perf_counter() - start, "numba": "numba" in sys.modules,
                  "numpy": "numpy" in sys.modules}))
"""
# Where a compile's time goes: numba-cuda (typing, lowering, NVVM), nvJitLink, the backend's
# reshaping of the lowered function, and jittile (the rest: the frontend, keying, post-passes).
_SPLIT = """
from jittile.backend import compiler, toolchain
spent = {}


def timed(part, fn):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[part] = spent.get(part, 0.0) + time.perf_counter() - start
    return run


compiler.numba_ptx = timed("numba_cuda", compiler.numba_ptx)
toolchain.link_cubin = timed("nvjitlink", toolchain.link_cubin)
compiler.reshape = timed("reshape", compiler.reshape)
"""
FIRST = (
    _PRELUDE
    + """
import tma_two_boxes
start = time.perf_counter()
"""
    + _SPLIT
    + """
imported = time.perf_counter()  # numba-cuda loaded, as the first compile would load it
ck = tma_two_boxes.tma_load.compile(target="sm_90a")
total = time.perf_counter() - start
parts = dict(spent, numba_cuda_import=imported - start)
parts["jittile"] = total - sum(parts.values())
print(json.dumps({"s": total, "cache": ck.metadata.get("cache"), "parts": parts}))
"""
)
# The first compile as a user meets it: no instrumentation, so numba-cuda's import and the linker's
# start-up may overlap jittile's frontend (jittile/backend/warmup.py).
FIRST_PLAIN = (
    _PRELUDE
    + """
import tma_two_boxes
start = time.perf_counter()
ck = tma_two_boxes.tma_load.compile(target="sm_90a")
print(json.dumps({"s": time.perf_counter() - start, "cache": ck.metadata.get("cache")}))
"""
)
FURTHER = (
    _PRELUDE
    + """
import tma_two_boxes, compile_time as bench
tma_two_boxes.tma_load.compile(target="sm_90a")  # numba-cuda and NVVM load here
bench.tma_boxes.compile(*bench.boxes_args(*bench.FIRST_SPEC), target="sm_90a")
"""
    + _SPLIT
    + """
times, parts = {}, {}
for rows, dtype in bench.FURTHER_SPECS:
    spent.clear()
    start = time.perf_counter()
    ck = bench.tma_boxes.compile(*bench.boxes_args(rows, dtype), target="sm_90a")
    label = f"ROWS={rows},DTYPE={dtype}"
    times[label] = time.perf_counter() - start
    parts[label] = dict(spent, jittile=times[label] - sum(spent.values()))
    assert ck.metadata.get("cache") == "off", ck.metadata.get("cache")
print(json.dumps({"times": times, "parts": parts}))
"""
)
GEMM = (
    _PRELUDE
    + """
import numpy as np
import gemm_bf16, tma_two_boxes
from jittile import T
tma_two_boxes.tma_load.compile(target="sm_90a")  # numba-cuda and NVVM load here
"""
    + _SPLIT
    + """
spec = T.Tensor((None, None), "bfloat16")
start = time.perf_counter()
ck = gemm_bf16.gemm_bf16.compile(spec, spec, spec, np.int32(1), np.int32(1), np.int32(1),
                                 target="sm_90a")
total = time.perf_counter() - start
assert ck.metadata.get("cache") == "off", ck.metadata.get("cache")
print(json.dumps({"s": total, "parts": dict(spent, jittile=total - sum(spent.values()))}))
"""
)
DISK = (
    _PRELUDE
    + """
import tma_two_boxes, compile_time as bench
calls = [("tma_load (first kernel of the process)", tma_two_boxes.tma_load, (), "sm_90a"),
         ("tma_boxes (second kernel)", bench.tma_boxes, bench.boxes_args(*bench.FIRST_SPEC), "sm_90a"),
         ("tma_boxes (second specialization)", bench.tma_boxes, bench.boxes_args(4, "uint32"), "sm_90a")]
times = {}
for label, kernel, args, target in calls:
    start = time.perf_counter()
    ck = kernel.compile(*args, target=target)
    times[label] = time.perf_counter() - start
    assert not CHECK or ck.metadata.get("cache") == "hit", (label, ck.metadata.get("cache"))
print(json.dumps(times))
"""
)
# Floors: numba-cuda by itself, in the state jittile's first compile finds it (NumPy loaded).
FLOOR = """
import json, time
from jittile.backend import numpy_compat  # NumPy 2.5 needs the alias numba-cuda uses
numpy_compat.install()
start = time.perf_counter()
from numba import cuda
imported = time.perf_counter()


def first(a):
    a[0] = 1


def second(a):
    a[1] = 2


cuda.compile_ptx(first, "void(float32[:])", cc=(9, 0))
compiled = time.perf_counter()
cuda.compile_ptx(second, "void(int32[:])", cc=(9, 0))
print(json.dumps({"import": imported - start, "first": compiled - start,
                  "second": time.perf_counter() - compiled}))
"""


def _env(pycache: Path | None, **extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for name in ("JITTILE_DEBUG", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        env.pop(name, None)
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env.update(extra)
    return env


def _run(code: str, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"measurement process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(samples: list[float], target: float) -> dict:
    median = statistics.median(samples)
    return {
        "median_s": round(median, 4),
        "min_s": round(min(samples), 4),
        "runs": [round(s, 4) for s in samples],
        "target_s": target,
        "met": median <= target,
    }


def measure(runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="jittile-bench-") as tmp:
        tmp = Path(tmp)
        pycache = tmp / "pycache"
        off = _env(pycache, JITTILE_CACHE="0")
        on = _env(pycache, JITTILE_CACHE="1", JITTILE_CACHE_DIR=str(tmp / "cache"))
        _run(FURTHER, off)  # warms the bytecode cache of everything measured below
        _run("CHECK = False\n" + DISK, on)  # fills the disk cache (and the bytecode cache)
        imports = [_run(IMPORT, off) for _ in range(runs)]
        cold = [_run(IMPORT, _env(None))["s"] for _ in range(runs)]
        first = [_run(FIRST, off) for _ in range(runs)]
        first_plain = [_run(FIRST_PLAIN, off)["s"] for _ in range(runs)]
        further = [_run(FURTHER, off) for _ in range(runs)]
        disk = [_run("CHECK = True\n" + DISK, on) for _ in range(runs)]
        gemm = [_run(GEMM, off) for _ in range(runs)]
        floors = [_run(FLOOR, off) for _ in range(runs)]
    spec_labels = list(further[0]["times"])
    per_spec = {
        label: _summary([r["times"][label] for r in further], TARGETS["further_specialization_s"])
        for label in spec_labels
    }
    parts = {
        part: round(
            statistics.median(r["parts"][label][part] for r in further for label in spec_labels), 4
        )
        for part in further[0]["parts"][spec_labels[0]]
    }
    disk_labels = list(disk[0])
    per_hit = {
        label: _summary([r[label] for r in disk], TARGETS["disk_hit_s"]) for label in disk_labels
    }
    return {
        "import": dict(
            _summary([r["s"] for r in imports], TARGETS["import_s"]),
            numba_loaded=any(r["numba"] for r in imports),
            numpy_loaded=any(r["numpy"] for r in imports),
        ),
        "import_no_bytecode_cache": _summary(cold, TARGETS["import_s"]),
        "first_compile": dict(
            _summary([r["s"] for r in first], TARGETS["first_compile_s"]),
            kernel="examples/tma_two_boxes.py:tma_load",
            target="sm_90a",
            disk_cache="off",
            parts_median_s={
                part: round(statistics.median(r["parts"][part] for r in first), 4)
                for part in first[0]["parts"]
            },
            note="parts measured one after another (numba-cuda imported before "
            "the compile starts); first_compile_uninstrumented is the same "
            "compile with nothing imported ahead of it",
        ),
        "first_compile_uninstrumented": _summary(first_plain, TARGETS["first_compile_s"]),
        "further_specialization": dict(
            _summary(
                [statistics.median(r["times"].values()) for r in further],
                TARGETS["further_specialization_s"],
            ),
            kernel="bench/compile_time.py:tma_boxes",
            each=per_spec,
            parts_median_s=parts,
            note="median over the specializations of each process, then over processes; "
            "parts: numba-cuda's compile (typing, lowering, NVVM), nvJitLink, the "
            "backend's reshape of the lowered function, and jittile's own work (the rest)",
        ),
        "disk_hit": per_hit,
        "gemm_example": {
            "median_s": round(statistics.median(r["s"] for r in gemm), 4),
            "runs": [round(r["s"], 4) for r in gemm],
            "parts_median_s": {
                part: round(statistics.median(r["parts"][part] for r in gemm), 4)
                for part in gemm[0]["parts"]
            },
            "kernel": "examples/gemm_bf16.py:gemm_bf16",
            "target": "sm_90a",
            "disk_cache": "off",
        },
        "numba_cuda_floor": {
            "import_numba_cuda": _summary(
                [r["import"] for r in floors], TARGETS["first_compile_s"]
            ),
            "first_compile_ptx_of_one_line_kernel": _summary(
                [r["first"] for r in floors], TARGETS["first_compile_s"]
            ),
            "second_compile_ptx_of_one_line_kernel": _summary(
                [r["second"] for r in floors], TARGETS["further_specialization_s"]
            ),
            "note": "numba-cuda alone, no jittile code: the first compile cannot be faster than "
            "first_compile_ptx_of_one_line_kernel, nor a further one than the second",
        },
    }


_common_device = common.device


def _device() -> dict:
    try:
        info = _common_device()
    except Exception as exc:  # no driver, no CuPy: this benchmark needs neither
        return {"name": "cpu-only", "error": str(exc)}
    return info if info.get("driver") else {"name": "cpu-only", "driver": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per measurement")
    parser.add_argument("--name", default="compile_time_cpu", help="result file name (no .json)")
    args = parser.parse_args()
    payload = measure(args.runs)
    payload["cpus"] = os.cpu_count()
    common.device = _device
    common.save(args.name, payload)


if __name__ == "__main__":
    main()
