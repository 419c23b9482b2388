"""The kernel language ``T``: what ``@jittile.kernel`` functions are written in.

Nothing here imports numba or the CUDA driver: these objects are markers the frontend recognises.
"""
from __future__ import annotations

from types import SimpleNamespace

from . import cuda
from .markers import Intrinsic, PtxInstruction
from .types import ScalarType, Tensor, constexpr

_SCALARS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
            "float32", "float64", "bool")
SCALAR_TYPES = {name: ScalarType(name) for name in _SCALARS}

device_entry = Intrinsic("T.device_entry", "Declare the kernel's launch configuration.")
alloc_shared = Intrinsic("T.alloc_shared", "Allocate a shared-memory buffer planned by jittile.")
alloc_local = Intrinsic("T.alloc_local", "Allocate a per-thread local array.")
address_of = Intrinsic("T.address_of", "Address of a buffer (shared-window address for shared buffers).")
grid = Intrinsic("T.grid", "Nested loops: `for i, j in T.grid(M, N)`.")
unroll = Intrinsic("T.unroll", "A loop unrolled at compile time (`for s in T.unroll(STAGES)`): the "
                   "loop variable is static in each copy, so it may index tile-call operands.")
ptx = PtxInstruction()

T = SimpleNamespace(
    Tensor=Tensor, constexpr=constexpr, cuda=cuda, ptx=ptx, device_entry=device_entry,
    alloc_shared=alloc_shared, alloc_local=alloc_local, address_of=address_of, grid=grid,
    unroll=unroll,
    **SCALAR_TYPES,
)

__all__ = ["T", "Tensor", "constexpr", "Intrinsic", "PtxInstruction", "ScalarType", "SCALAR_TYPES"]
