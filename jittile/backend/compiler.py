"""Lowered function -> numba-cuda PTX -> post-pass -> nvJitLink cubin."""

from __future__ import annotations

import ast
import re
import time
import warnings
from dataclasses import dataclass

from . import numpy_compat

numpy_compat.install()

from numba import cuda  # noqa: E402
from numba.cuda import types  # noqa: E402

from ..dtypes import DType  # noqa: E402
from ..errors import CompileError, JittileWarning, ToolchainError, user_stacklevel, warn_at  # noqa: E402
from ..frontend.lower import Lowered  # noqa: E402
from ..ir import ArrayParam, KernelIR, ScalarParam, TensorMapParam  # noqa: E402
from ..ptx import math as ptx_math  # noqa: E402
from ..ptx.conversions import conversion  # noqa: E402
from ..targets import Target  # noqa: E402
from . import intrinsics, ptx_post, toolchain  # noqa: E402
from .diagnose import LOWERED_FILENAME, numba_failure  # noqa: E402
from .reshape import reshape  # noqa: E402

_NUMBA_SCALARS = {
    "int8": types.int8,
    "uint8": types.uint8,
    "int16": types.int16,
    "uint16": types.uint16,
    "int32": types.int32,
    "uint32": types.uint32,
    "int64": types.int64,
    "uint64": types.uint64,
    "float16": types.float16,
    "float32": types.float32,
    "float64": types.float64,
    "bool": types.boolean,
}


def numba_scalar(name: str):
    """The numba type of a scalar (a parameter, a ``T.uint32(...)`` conversion)."""
    if name not in _NUMBA_SCALARS:
        raise CompileError(f"dtype {name} has no numba-cuda scalar type")
    return _NUMBA_SCALARS[name]


def numba_storage(dtype: DType):
    """The numba type memory holds ``dtype`` elements in: narrow floats as unsigned integers of
    their width, which TMA and tcgen05 move untouched and element accesses convert
    (:mod:`jittile.ptx.conversions`)."""
    return numba_scalar(dtype.storage.name)


@dataclass
class Artifact:
    """What compiling one specialization produces."""

    ptx: str
    cubin: bytes
    entry: str
    usage: dict
    param_layout: list  # per runtime param: ("array", ndim) | ("scalar", dtype) | ("tensormap",)
    compile_seconds: float
    toolchain: dict  # versions of the NVVM and nvJitLink libraries, and the linker that built it
    python: str  # the lowered function numba-cuda compiled (after reshaping)
    nvvm: str | None  # the NVVM IR numba-cuda handed NVVM (None where numba-cuda hides it)


def _namespace(ir: KernelIR, names: dict) -> dict:
    """The objects numba-cuda's function reads, made from the specs ``names`` gives them."""
    shared = (max(ir.shared_bytes, 1), ir.shared_align, ir.dynamic_shared)

    def asm_of(spec: tuple):
        return spec[1] if spec[0] == "asm" else ir.sites[spec[1]].plan[spec[2]].asm

    out = {}
    for name, spec in names.items():
        kind = spec[0]
        if kind == "cuda":
            out[name] = cuda
        elif kind == "saddr":
            out[name] = intrinsics.shared_address
        elif kind == "gaddr":
            out[name] = intrinsics.global_address
        elif kind == "mdesc":
            out[name] = intrinsics.descriptor_word
        elif kind in ("asm", "record"):
            asm = asm_of(spec)
            word = asm.comment.startswith(ptx_math.SHUFFLE_PREFIX)
            out[name] = (intrinsics.make_word_asm if word else intrinsics.make_asm)(asm)
        elif kind == "packed":  # an instruction taking a packed fragment (backend/reshape.py)
            out[name] = intrinsics.make_asm(asm_of(names[spec[1]]), spec[2])
        elif kind == "type":
            out[name] = numba_scalar(spec[1].name)
        elif kind == "storage":
            out[name] = numba_storage(spec[1])
        elif kind == "convert":  # a float element's load or store (ptx/conversions.py)
            out[name] = intrinsics.make_asm(conversion(spec[1], spec[2].name))
        elif kind == "smem":
            buf = spec[1]
            count = buf.nbytes // buf.dtype.bytes
            out[name] = intrinsics.make_smem_view(
                buf.offset, count, numba_storage(buf.dtype), *shared
            )
        elif kind == "saddr_const":  # element ``index`` of a view, plus ``extra`` bytes
            _, view, index, extra = spec
            buf = names[view][1]
            itemsize = numba_storage(buf.dtype).bitwidth // 8
            out[name] = intrinsics.make_smem_address(buf.offset + index * itemsize + extra, *shared)
        elif kind == "fill":
            out[name] = intrinsics.make_fill(spec[1])
        elif kind == "set":
            out[name] = intrinsics.make_set(spec[1])
        elif kind == "splice":
            out[name] = intrinsics.make_splice(spec[1], spec[2])
        else:
            raise AssertionError(kind)
    return out


def _signature(ir: KernelIR) -> tuple[list, list, list[int]]:
    """numba argument types, the launch-side parameter layout, and the flattened indices of the
    grid-constant TensorMap parameters."""
    argtys, layout, grid_constant = [], [], []
    flat = 0
    for p in ir.runtime_params:
        if isinstance(p, ArrayParam):
            argtys.append(types.Array(numba_storage(p.dtype), p.ndim, p.layout))
            layout.append(("array", p.ndim))
            flat += 5 + 2 * p.ndim
        elif isinstance(p, ScalarParam):
            argtys.append(numba_scalar(p.dtype.name))
            layout.append(("scalar", p.dtype.name))
            flat += 1
        elif isinstance(p, TensorMapParam):
            argtys.append(types.uint64)
            layout.append(("tensormap",))
            grid_constant.append(flat)
            flat += 1
    for _ in ir.host_tensormaps:
        argtys.append(types.uint64)
        layout.append(("tensormap",))
        grid_constant.append(flat)
        flat += 1
    return argtys, layout, grid_constant


def stable_entry_name(name: str) -> str:
    return "jittile_" + re.sub(r"\W", "_", name)


def numba_ptx(pyfunc, argtys: tuple, cc) -> tuple[str, str | None]:
    """PTX and NVVM IR of a kernel from numba-cuda: what ``cuda.compile_ptx`` does, keeping the
    code library so that its LLVM IR can be read (``compile_ptx`` returns only the PTX)."""
    from numba.cuda import compiler as numba_compiler

    compile_with_fixup = getattr(numba_compiler, "_compile_pyfunc_with_fixup", None)
    if compile_with_fixup is None:  # another numba-cuda: the PTX alone
        return cuda.compile_ptx(pyfunc, argtys, cc=cc)[0], None
    library, _ = compile_with_fixup(pyfunc, argtys, device=False, cc=cc, abi="numba")
    (ptx,) = library.get_asm_strs(cc=cc)
    return ptx, library.get_llvm_str()


def compile_lowered(lowered: Lowered, target: Target, override=None) -> Artifact:
    """Compile the lowered function for ``target`` and link it to a cubin; ``override`` (a path)
    is a PTX file linked instead of the generated PTX (``JITTILE_OVERRIDE_DIR``)."""
    start = time.perf_counter()
    ir = lowered.ir
    reshaped = reshape(lowered.function, lowered.namespace, lowered.shared_views, lowered.fragments)
    module = ast.Module(body=[reshaped.function], type_ignores=[])
    namespace = _namespace(ir, reshaped.namespace)
    code = compile(module, LOWERED_FILENAME, "exec")
    exec(code, namespace)
    pyfunc = namespace[reshaped.function.name]
    argtys, layout, grid_constant = _signature(ir)
    try:
        ptx, nvvm = numba_ptx(pyfunc, tuple(argtys), target.cc)
    except Exception as exc:  # numba's typing/lowering errors: told at the user's expression
        raise numba_failure(exc, lowered.positions) from exc
    entry = stable_entry_name(ir.name)
    cluster = ir.launch.cluster if ir.launch is not None else None
    block = ir.launch.block if ir.launch is not None else None
    ptx = ptx_post.rewrite(ptx, entry, grid_constant, cluster, block)
    if override is not None:  # a user's choice: a warning even in strict mode
        warnings.warn(
            f"{ir.name}: JITTILE_OVERRIDE_DIR: linking {override} instead of the generated PTX",
            JittileWarning,
            stacklevel=user_stacklevel(),
        )
        ptx = override.read_text()
    try:
        linked = toolchain.build_cubin(ptx, target, entry)
    except ToolchainError as exc:  # told at the kernel it failed to build
        raise ToolchainError(exc.message, lowered.positions[1].location) from exc
    usage = toolchain.resource_usage(linked.log)
    if linked.note is not None:
        warn_at(linked.note, lowered.positions[1].location)
    for advisory in toolchain.performance_advisories(linked.log):
        warn_at(f"ptxas: {advisory}", lowered.positions[1].location)
    return Artifact(
        ptx,
        linked.cubin,
        entry,
        usage,
        layout,
        time.perf_counter() - start,
        {**toolchain.libraries(), "linker": linked.linker},
        ast.unparse(reshaped.function),
        nvvm,
    )
