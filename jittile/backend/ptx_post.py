"""PTX post-pass: what numba-cuda cannot express, applied to its PTX text.

- a stable entry name (numba mangles a new one per compile);
- grid-constant TensorMap parameters: numba sees a ``uint64``; the entry gets a 64-byte aligned
  128-byte ``.param`` and every load of it becomes the parameter's generic address, exactly what
  NVRTC emits for ``const __grid_constant__ CUtensorMap``;
- cluster directives ``.explicitcluster`` / ``.reqnctapercluster``;
- ``.maxntid`` from the block the specialization is launched with (``T.device_entry`` or the
  ``kernel[grid, block]`` it was built for): ptxas then allocates no more registers per thread
  than that block can launch with (a 384-thread block gets at most 168), and can apply
  ``setmaxnreg`` (with ``.minnctapersm 1`` where the kernel uses it: the budgets move registers
  from the count at entry).
"""

from __future__ import annotations

import re

from ..errors import ToolchainError

_SETMAXNREG = re.compile(r"^\s*setmaxnreg\.", re.MULTILINE)


def uses_setmaxnreg(ptx: str) -> bool:
    """Whether the PTX sets register budgets (a ``setmaxnreg`` instruction)."""
    return _SETMAXNREG.search(ptx) is not None


_ENTRY = re.compile(r"\.visible\s+\.entry\s+([A-Za-z_$][\w$]*)\s*\(")


def entry_name(ptx: str) -> str:
    match = _ENTRY.search(ptx)
    if not match:
        raise ToolchainError("no .entry in the PTX numba-cuda produced")
    return match.group(1)


def rewrite(
    ptx: str,
    stable_name: str,
    grid_constant_params: list[int],
    cluster: tuple[int, int, int] | None,
    block: tuple[int, int, int] | None = None,
) -> str:
    """Apply the rewrites; ``grid_constant_params`` are flattened parameter indices, ``block``
    the block the kernel is launched with (None: unknown)."""
    old = entry_name(ptx)
    ptx = ptx.replace(old, stable_name)
    for index in grid_constant_params:
        param = f"{stable_name}_param_{index}"
        decl = re.compile(rf"\.param\s+\.u64\s+{re.escape(param)}\b")
        if not decl.search(ptx):
            raise ToolchainError(f"TensorMap parameter {param} not found in the PTX")
        ptx = decl.sub(f".param .align 64 .b8 {param}[128]", ptx)
        ptx = re.sub(
            rf"ld\.param\.u64\s+(%rd\d+),\s*\[{re.escape(param)}\];",
            rf"mov.b64 \1, {param};\n\tcvta.param.u64 \1, \1;",
            ptx,
        )
    if block is not None:
        x, y, z = block
        # setmaxnreg budgets move registers from the count at entry, which ptxas knows only
        # when it may assume one CTA per SM (CUDA's __launch_bounds__(threads, 1))
        one_cta = "\n.minnctapersm 1" if uses_setmaxnreg(ptx) else ""
        ptx = re.sub(
            rf"(\.entry\s+{re.escape(stable_name)}\s*\((?:[^)]*)\))",
            rf"\1\n.maxntid {x}, {y}, {z}{one_cta}",
            ptx,
            count=1,
        )
    if cluster is not None:
        x, y, z = cluster
        ptx = re.sub(
            rf"(\.entry\s+{re.escape(stable_name)}\s*\((?:[^)]*)\))",
            rf"\1\n.explicitcluster\n.reqnctapercluster {x}, {y}, {z}",
            ptx,
            count=1,
        )
    return ptx
