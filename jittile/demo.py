"""``python -m jittile.demo``: compile the specification's TMA example and show what jittile made.

The kernel ships with the package (it is the seed's "two explicit 8x16 boxes" load, as in
examples/tma_two_boxes.py), so the demo runs from any installed copy and any working directory.
With no GPU it still does the real work: the kernel is lowered, compiled by NVVM for sm_90a,
linked by nvJitLink and disassembled. With a GPU it also runs and checks the result.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time

import numpy as np

import jittile
from jittile import T


@jittile.kernel
def tma_load(A: T.Tensor((16, 16), "uint32"), Out: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 16), "uint32", layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            shared,
            A,
            box=(8, 16),
            coords=(0, 0),
            coord_steps=((8, 0),),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.cuda.cta_sync()
    for g, r in T.grid(2, 8):
        if lane < 16:
            Out[g * 8 + r, lane] = shared[g, r, lane]


def provenance(ck: jittile.CompiledKernel, seconds: float) -> str:
    """Where ``ck`` came from, honestly: compiled now, or loaded from a disk-cache entry that an
    earlier run (perhaps another process) wrote, and where that entry is."""
    from jittile import cache

    meta = ck.metadata
    what = f"{meta['name']} for {meta['target']}"
    entry = cache.default_store().entry_dir(meta["key"])
    if meta.get("cache") == "hit":
        written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta["created"]))
        return (
            f"loaded {what} from the disk cache in {seconds:.2f} s, not compiled: entry "
            f"{entry}, written {written} (`jittile cache clear {meta['name']}` forgets it)"
        )
    where = (
        f"stored in the disk cache at {entry}"
        if meta.get("cache") == "stored"
        else "not stored (disk cache off)"
    )
    return f"compiled {what} in {seconds:.2f} s, {where}"


def main() -> int:
    from jittile.backend.toolchain import sass_opcodes
    from jittile.runtime import driver

    start = time.perf_counter()
    ck = tma_load.compile(target="sm_90a")
    print(f"jittile {jittile.__version__}: {provenance(ck, time.perf_counter() - start)}")
    print("\nInstruction plan:")
    print(textwrap.indent(str(ck.plan), "  "))
    print("\nPTX excerpt (TMA issue):")
    for line in ck.ptx.splitlines():
        if "cp.async.bulk.tensor" in line or "mbarrier" in line:
            print("  " + line.strip())
    try:
        ops = sass_opcodes(ck.sass)
        shown = {k: v for k, v in sorted(ops.items()) if k.startswith(("UTMA", "SYNCS"))}
        print(f"\nSASS: {sum(ops.values())} instructions; TMA/mbarrier: {shown}")
    except jittile.JittileError as exc:
        print(f"\nSASS unavailable: {exc}")
    meta = ck.metadata
    print(
        f"Resources: {meta['registers']} registers, {meta['shared_bytes']} B shared (planned), "
        f"{meta['local_bytes']} B local, {meta['spill_stores']} B spilled"
    )
    x = np.arange(256, dtype=np.uint32).reshape(16, 16)
    out = np.zeros_like(x)
    if driver.available():
        tma_load(x, out)
        where = f"Ran on the GPU (driver {driver.driver_version()})"
    else:
        tma_load.interpret(x, out)
        where = (
            "No CUDA device here: interpreted on the CPU (jittile's interpreter runs every "
            "thread, the TMA boxes and the mbarrier)"
        )
    np.testing.assert_array_equal(out, x)
    print(f"\n{where}: output matches the input.")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # `python -m jittile.demo | head`: stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
