"""Where a further specialization's compile time goes, and why: a profile of numba-cuda on jittile's
lowered kernels (issue #13). CPU only; run it on the machine whose numbers it explains.

    PYTHONPATH=$PWD python3 bench/numba_costs.py [--name numba_costs_cpu]

It reports, in one process after the first compile (numba-cuda and NVVM loaded):

- ``split``: a further specialization of ``bench/compile_time.py:tma_boxes`` (its five
  specializations, median) by part: each numba-cuda pass, NVVM, nvJitLink, and jittile's own
  work (the rest), in milliseconds;
- ``fixed``: what any kernel pays: ``compile_ptx`` of an empty kernel (NVVM's share apart) and
  nvJitLink of an empty PTX kernel;
- ``per_construct``: the marginal cost of one construct of a lowered kernel, from 20 copies added
  to an empty kernel (numba's Python apart from NVVM): an inline-PTX call, a shared address, a
  ``+`` on integers, a comparison, an ``if``, a ``range`` loop, a 2-D element store, a shared
  load stored to global memory;
- ``gemm_example``: the first compile of ``examples/gemm_bf16.py`` in this process, by part.

Together they bound what jittile can remove: the kernel's constructs times their numba cost,
plus the fixed costs, is the compile time of a kernel written that way.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "examples"), str(BENCH)]

import common  # noqa: E402

COPIES = 20
# One statement (or statement pair) of each kind, as the lowered kernel of ``tma_boxes`` has them;
# ``{i}`` makes every copy a distinct constant.
CONSTRUCTS = {
    "inline_ptx_call": "    __jt_asm2(lane, {i})\n",
    "shared_address_call": "    __jt_asm2(__jt_saddr(mbar, {i}), lane)\n",
    "integer_add": "    x{i} = lane + {i}\n",
    "comparison": "    c{i} = lane < {i}\n",
    "if_statement": "    if lane < {i}:\n        __jt_cuda.syncthreads()\n",
    "range_loop": "    for i{i} in range(2):\n        __jt_cuda.syncthreads()\n",
    "store_2d": "    Out[{i}, lane] = lane\n",
    "shared_load_store": "    Out[{i}, 0] = shared[lane]\n",
}
HEAD = (
    "def tma_boxes(A, Out, __jt_tmap0):\n    lane = __jt_cuda.laneid\n"
    "    shared = __jt_smem_shared_0()\n    mbar = __jt_smem_mbar_1()\n"
)


class Split:
    """Milliseconds by part while active: numba-cuda's passes, NVVM, nvJitLink, compile_ptx."""

    def __init__(self):
        from numba.cuda.core import compiler_machinery
        from numba.cuda.cudadrv import nvvm

        from jittile.backend import compiler, toolchain

        self.spent: collections.Counter = collections.Counter()
        manager = compiler_machinery.PassManager
        run_pass = manager._runPass

        def timed_pass(pm, index, pss, state):
            start = time.perf_counter()
            try:
                return run_pass(pm, index, pss, state)
            finally:
                self.spent[f"pass:{pss.name()}"] += time.perf_counter() - start

        manager._runPass = timed_pass
        for module, attr, part in (
            (nvvm, "compile_ir", "nvvm"),
            (toolchain, "link_cubin", "nvjitlink"),
            (compiler, "numba_ptx", "compile_ptx"),
        ):
            setattr(module, attr, self._timed(getattr(module, attr), part))

    def _timed(self, fn, part: str):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[part] += time.perf_counter() - start

        return run

    def measure(self, fn, runs: int = 1) -> dict:
        self.spent.clear()
        start = time.perf_counter()
        for _ in range(runs):
            fn()
        total = time.perf_counter() - start
        parts = {k: v / runs * 1000 for k, v in self.spent.items()}
        passes = sum(v for k, v in parts.items() if k.startswith("pass:"))
        parts["numba_outside_passes_and_nvvm"] = (
            parts.get("compile_ptx", 0) - passes - parts.get("nvvm", 0)
        )
        parts["jittile"] = (
            total / runs * 1000 - parts.get("compile_ptx", 0) - parts.get("nvjitlink", 0)
        )
        parts["total"] = total / runs * 1000
        return {k: round(v, 2) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}


def construct_costs(lowered) -> tuple[dict, dict]:
    """(fixed costs, marginal cost per construct) in milliseconds."""
    from numba import cuda
    from numba.cuda.cudadrv import nvvm

    from jittile.backend import compiler

    namespace = compiler._namespace(lowered)
    argtys = tuple(compiler._signature(lowered.ir)[0])
    nvvm_compile = nvvm.compile_ir
    nvvm_spent = [0.0]

    def counted(*args, **kwargs):
        start = time.perf_counter()
        try:
            return nvvm_compile(*args, **kwargs)
        finally:
            nvvm_spent[0] += time.perf_counter() - start

    nvvm.compile_ir = counted

    def compile_ms(body: str, runs: int = 5) -> tuple[float, float]:
        samples, nvvm_ms = [], []
        for _ in range(runs):
            scope = dict(namespace)
            exec(HEAD + body + "    return\n", scope)
            nvvm_spent[0] = 0.0
            start = time.perf_counter()
            cuda.compile_ptx(scope["tma_boxes"], argtys, cc=(9, 0))
            samples.append((time.perf_counter() - start) * 1000)
            nvvm_ms.append(nvvm_spent[0] * 1000)
        return statistics.median(samples), statistics.median(nvvm_ms)

    try:
        empty, empty_nvvm = compile_ms("")
        per = {}
        for name, text in CONSTRUCTS.items():
            total, in_nvvm = compile_ms("".join(text.format(i=i) for i in range(COPIES)))
            per[name] = {
                "numba_ms": round((total - in_nvvm - (empty - empty_nvvm)) / COPIES, 3),
                "nvvm_ms": round((in_nvvm - empty_nvvm) / COPIES, 3),
            }
    finally:
        nvvm.compile_ir = nvvm_compile
    fixed = {
        "empty_kernel_compile_ptx_ms": round(empty, 2),
        "of_which_nvvm_ms": round(empty_nvvm, 2),
        "nvjitlink_empty_kernel_ms": round(_empty_link_ms(), 2),
    }
    return fixed, per


def _empty_link_ms() -> float:
    from jittile.backend import toolchain
    from jittile.targets import Target

    ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry empty() { ret; }\n"
    target = Target.parse("sm_90a")
    samples = []
    for _ in range(10):
        start = time.perf_counter()
        toolchain.link_cubin(ptx, target, "empty")
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="numba_costs_cpu", help="result file name (no .json)")
    args = parser.parse_args()
    import os

    os.environ["JITTILE_CACHE"] = "0"
    import compile_time as bench
    import gemm_bf16
    import numpy as np
    import tma_two_boxes

    from jittile import T
    from jittile.backend import compiler

    tma_two_boxes.tma_load.compile(target="sm_90a")  # numba-cuda, NVVM and nvJitLink load here
    bench.tma_boxes.compile(*bench.boxes_args(*bench.FIRST_SPEC), target="sm_90a")
    split = Split()
    per_spec = [
        split.measure(
            lambda s=spec: bench.tma_boxes.compile(*bench.boxes_args(*s), target="sm_90a")
        )
        for spec in bench.FURTHER_SPECS
    ]
    median_split = {
        part: round(statistics.median(p.get(part, 0.0) for p in per_spec), 2)
        for part in per_spec[0]
    }
    grabbed = []
    lower = compiler.compile_lowered

    def grab(lowered, target):
        grabbed.append(lowered)
        return lower(lowered, target)

    compiler.compile_lowered = grab  # jittile/build.py imports it at each compile
    bench.tma_boxes.compile(*bench.boxes_args(12, "uint32"), target="sm_90a")  # not compiled yet
    compiler.compile_lowered = lower
    fixed, per = construct_costs(grabbed[0])
    spec = T.Tensor((None, None), "bfloat16")
    gemm = split.measure(
        lambda: gemm_bf16.gemm_bf16.compile(
            spec, spec, spec, np.int32(1), np.int32(1), np.int32(1), target="sm_90a"
        )
    )
    common.save(
        args.name,
        {
            "cpus": os.cpu_count(),
            "split_ms": dict(
                median_split,
                kernel="bench/compile_time.py:tma_boxes",
                note="median over its further specializations",
            ),
            "fixed_ms": fixed,
            "per_construct_ms": dict(
                per, copies=COPIES, note="marginal cost of one construct; numba_ms excludes NVVM"
            ),
            "gemm_example_ms": gemm,
        },
    )


if __name__ == "__main__":
    main()
