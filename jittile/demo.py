"""``python -m jittile.demo``: compile the specification's TMA example and show what jittile made.

With no GPU it still does the real work: the kernel is lowered, compiled by NVVM for sm_90a, linked
by nvJitLink and disassembled. With a GPU it also runs and checks the result.
"""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import numpy as np

    import jittile
    from jittile.backend.toolchain import sass_opcodes
    from jittile.runtime import driver

    from tma_two_boxes import tma_load

    start = time.perf_counter()
    ck = tma_load.compile(target="sm_90a")
    print(f"jittile {jittile.__version__}: compiled {ck.metadata['name']} for "
          f"{ck.metadata['target']} in {time.perf_counter() - start:.2f} s "
          f"(cache key {ck.metadata['key'][:12]})")
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
    print(f"Resources: {meta['registers']} registers, {meta['shared_bytes']} B shared (planned), "
          f"{meta['local_bytes']} B local, {meta['spill_stores']} B spilled")
    if not driver.available():
        print("\nNo CUDA device here: compiled and inspected only.")
        return 0
    x = np.arange(256, dtype=np.uint32).reshape(16, 16)
    out = np.zeros_like(x)
    tma_load(x, out)
    np.testing.assert_array_equal(out, x)
    print(f"\nRan on the GPU (driver {driver.driver_version()}): output matches the input.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
