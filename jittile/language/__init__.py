"""The kernel language ``T``: what ``@jittile.kernel`` functions are written in.

Nothing here imports numba or the CUDA driver: these objects are markers the frontend recognises.
``help(T)`` lists every name with its signature; docs/language.md is the reference.
"""

from __future__ import annotations

from . import cuda, math
from .markers import Intrinsic, Namespace, PtxInstruction, intrinsic
from .types import ScalarType, Tensor, constexpr

_SCALARS = (
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bool",
)
SCALAR_TYPES = {name: ScalarType(name) for name in _SCALARS}


@intrinsic("T.device_entry")
def device_entry(*, launch) -> None:
    """Declare the kernel's launch configuration, a static ``T.cuda.LaunchConfig(grid=...,
    block=..., cluster=...)``; ``kernel(...)`` launches with it, ``kernel[grid, block](...)``
    overrides it. Write it as a statement, usually the first of the body."""


@intrinsic("T.alloc_shared")
def alloc_shared(shape: tuple[int, ...], dtype: str, layout="default", align: int | None = None):
    """Allocate a shared-memory buffer of the static ``shape`` and ``dtype``, placed by jittile
    in the kernel's shared block at an ``align``-byte boundary (default: the element size, at
    least 8). ``layout`` is ``"default"`` (row-major) or a ``TileLayout`` / ``ComposeLayout``
    such as ``swizzle(3, shape, dtype)``. Assign it to a name: ``buf = T.alloc_shared(...)``;
    index it (``buf[i, j]``), take addresses (``buf.ptr_to([i, j])``) or pass it, or a region
    of it, to tile calls. Narrow float elements (float16, bfloat16, float8) load as float32 and
    store rounded to nearest even; ``buf.bits[i, j]`` is an element's raw bits."""


@intrinsic("T.alloc_local")
def alloc_local(shape: tuple[int, ...], dtype: str, layout="default"):
    """Allocate a per-thread local array (registers or local memory) of the static ``shape`` and
    ``dtype``; assign it to a name and index it (narrow floats as for ``T.alloc_shared``, raw
    bits as ``arr.bits[i]``), or pass it as a raw PTX destination. With
    ``layout=wgmma_accumulator`` or ``wgmma_a`` (``jittile.layout``) it is a register fragment of
    a ``(64, N)`` warpgroup tile: one scalar register per variable, indexed ``frag[i]`` with a
    compile-time ``i`` (``frag.size`` registers), located by ``frag.row(i)`` / ``frag.col(i)``,
    and passed whole to ``wgmma.mma_async`` tile calls."""


@intrinsic("T.address_of")
def address_of(x, /) -> int:
    """The address of a shared buffer or shared element (a 32-bit shared-window address) or of a
    tensor parameter (a 64-bit global address)."""


@intrinsic("T.grid")
def grid(*extents: int):
    """Nested loops over ``extents``: ``for i, j in T.grid(M, N):`` runs ``i`` over ``range(M)``
    and, inside, ``j`` over ``range(N)``; one loop name per extent."""


@intrinsic("T.unroll")
def unroll(start_or_stop: int, stop: int | None = None, step: int | None = None, /):
    """A loop unrolled at compile time, with ``range``'s arguments (compile-time integers):
    ``for s in T.unroll(STAGES):`` makes one copy of the body per value, ``s`` static in each,
    so it may index tile-call operands and barriers."""


ptx = PtxInstruction()

T = Namespace(
    "T",
    "The jittile kernel language; docs/language.md is its reference.",
    Tensor=Tensor,
    constexpr=constexpr,
    cuda=cuda,
    ptx=ptx,
    device_entry=device_entry,
    alloc_shared=alloc_shared,
    alloc_local=alloc_local,
    address_of=address_of,
    grid=grid,
    unroll=unroll,
    **{function.__name__: function for function in math.FUNCTIONS},
    **SCALAR_TYPES,
)

__all__ = ["T", "Tensor", "constexpr", "Intrinsic", "PtxInstruction", "ScalarType", "SCALAR_TYPES"]
