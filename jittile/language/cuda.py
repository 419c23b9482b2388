"""``T.cuda``: thread indices, synchronisation, tensor memory and the tile-pattern entry point."""

from __future__ import annotations

from ..ir import LaunchConfig  # re-exported: T.cuda.LaunchConfig
from .markers import Namespace, intrinsic


@intrinsic("T.cuda.lane_id")
def lane_id() -> int:
    """Lane index of the calling thread within its warp (0..31, ``%laneid``)."""


@intrinsic("T.cuda.warp_id")
def warp_id() -> int:
    """Warp index of the calling thread within its CTA: the linear thread index // 32."""


@intrinsic("T.cuda.thread_idx")
def thread_idx(axis: str | None = None, /) -> int:
    """``threadIdx.x``, ``.y`` or ``.z`` for ``axis`` 'x', 'y' or 'z'; with no axis the linear
    thread index in the CTA (``x + y * blockDim.x + z * blockDim.x * blockDim.y``)."""


@intrinsic("T.cuda.block_idx")
def block_idx(axis: str | None = None, /) -> int:
    """``blockIdx.x``, ``.y`` or ``.z`` for ``axis`` 'x', 'y' or 'z'; with no axis the linear CTA
    index in the grid."""


@intrinsic("T.cuda.block_dim")
def block_dim(axis: str, /) -> int:
    """``blockDim.x``, ``.y`` or ``.z``: the CTA's extent along ``axis`` ('x', 'y' or 'z')."""


@intrinsic("T.cuda.grid_dim")
def grid_dim(axis: str, /) -> int:
    """``gridDim.x``, ``.y`` or ``.z``: the grid's extent along ``axis`` ('x', 'y' or 'z')."""


@intrinsic("T.cuda.cluster_ctarank")
def cluster_ctarank() -> int:
    """Rank of this CTA within its cluster (``%cluster_ctarank``)."""


@intrinsic("T.cuda.cta_sync")
def cta_sync() -> None:
    """Barrier across every thread of the CTA (``bar.sync 0``, ``__syncthreads()``)."""


@intrinsic("T.cuda.cluster_sync")
def cluster_sync() -> None:
    """Barrier across every thread of the cluster (``barrier.cluster.arrive`` then ``wait``)."""


@intrinsic("T.cuda.mbarrier_wait")
def mbarrier_wait(mbar: int, phase: int, /) -> None:
    """Wait until the phase ``phase`` (0 or 1) of the mbarrier at shared address ``mbar`` (e.g.
    ``mbar.ptr_to([0])``) completes, spinning on ``mbarrier.try_wait.parity``."""


@intrinsic("T.cuda.decl_tmem")
def decl_tmem(address: int, /, *, ty_args: list):
    """View the tensor-memory address ``address`` (as written by ``tcgen05.alloc``) as a TMEM
    tensor: ``ty_args=[T.Tensor(shape, dtype, scope="tmem", layout=...)]``, whose layout maps
    its axes to TMEM lanes and columns (``TLane``, ``TCol``). Assign it to a name; tile calls
    take it (or a region of it) as an operand."""


@intrinsic("T.cuda.tile.apply")
def apply(instruction, /, *operands, scope: str = "thread", **parameters) -> None:
    """Issue the tile pattern of ``instruction`` (``T.ptx[opcode]``) on ``operands`` (shared,
    global, TensorMap or TMEM regions, in the order the opcode's family declares) with the
    family's keyword ``parameters``. The call is checked against the family's contract at
    compile time and expands into one native instruction per group/repeat instance (see
    ``ck.plan``). ``scope`` names the execution scope whose indices the leading group axes of
    the operands follow; it elects no thread."""


FULL_MASK = 0xFFFFFFFF


@intrinsic("T.cuda.shfl_xor")
def shfl_xor(value, lane_mask: int, /, *, mask: int = FULL_MASK, width: int = 32):
    """``value`` of lane ``lane_id ^ lane_mask`` (``shfl.sync.bfly.b32``), a butterfly for
    reductions; ``width`` (a compile-time power of two up to 32) splits the warp into segments
    that stay apart. ``value`` is a float (returned as float32, bit for bit) or a 32-bit
    integer (signed stays int32, unsigned uint32); every lane of ``mask`` executes it together,
    and a lane reads its own value where the source lane lies outside its segment."""


@intrinsic("T.cuda.shfl_down")
def shfl_down(value, delta: int, /, *, mask: int = FULL_MASK, width: int = 32):
    """``value`` of lane ``lane_id + delta`` (``shfl.sync.down.b32``); the last ``delta`` lanes
    of a segment keep their own value. Operands as for ``T.cuda.shfl_xor``."""


@intrinsic("T.cuda.shfl_up")
def shfl_up(value, delta: int, /, *, mask: int = FULL_MASK, width: int = 32):
    """``value`` of lane ``lane_id - delta`` (``shfl.sync.up.b32``); the first ``delta`` lanes
    of a segment keep their own value. Operands as for ``T.cuda.shfl_xor``."""


@intrinsic("T.cuda.shfl_idx")
def shfl_idx(value, lane: int, /, *, mask: int = FULL_MASK, width: int = 32):
    """``value`` of lane ``lane`` of the caller's segment (``shfl.sync.idx.b32``): a broadcast
    with one ``lane`` for all. Operands as for ``T.cuda.shfl_xor``. ptxas knows the result is
    the same in every lane, so a warp-uniform value computed per thread (a warpgroup index from
    ``T.cuda.warp_id()``) broadcast from lane 0 keeps what depends on it, such as wgmma
    descriptors, in uniform registers (``examples/gemm_bf16.py``'s ``consume``)."""


SHUFFLES = {shfl_xor: "bfly", shfl_down: "down", shfl_up: "up", shfl_idx: "idx"}


# ------------------------------------------------------------------------------- atomics
@intrinsic("T.cuda.atomic_add")
def atomic_add(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically add ``value`` to ``array[index]`` and return the element's old value
    (``atom.<sem>.<scope>.global.add``). ``array`` is a tensor parameter (global memory) of
    int32, uint32, int64, uint64 or float32 elements; ``index`` an integer, or a tuple of one
    per axis; ``value`` converts to the element type (integers wrap). A float32 add rounds to
    nearest even and flushes subnormal inputs and results to zero, as ``atom.global.add.f32``
    does. ``sem`` ('relaxed', 'acquire', 'release', 'acq_rel') and ``scope`` ('cta', 'cluster',
    'gpu', 'sys') are compile-time strings: the PTX memory-model ordering the operation takes
    part in."""


@intrinsic("T.cuda.atomic_max")
def atomic_max(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``max(array[index], value)``, returning the old value (``atom...max``);
    integer elements only (int32, uint32, int64, uint64), compared signed or unsigned as the
    element type is. Operands as for ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_min")
def atomic_min(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``min(array[index], value)``, returning the old value (``atom...min``);
    integer elements only. Operands as for ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_and")
def atomic_and(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``array[index] & value``, returning the old value (``atom...and.b32`` /
    ``.b64``); integer elements only. Operands as for ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_or")
def atomic_or(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``array[index] | value``, returning the old value; integer elements
    only. Operands as for ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_xor")
def atomic_xor(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``array[index] ^ value``, returning the old value; integer elements
    only. Operands as for ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_exch")
def atomic_exch(array, index, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Atomically store ``value`` into ``array[index]``, returning the old value
    (``atom...exch.b32`` / ``.b64``); every element type of ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.atomic_cas")
def atomic_cas(array, index, compare, value, /, *, sem: str = "relaxed", scope: str = "gpu"):
    """Compare and swap: atomically store ``value`` into ``array[index]`` if the element equals
    ``compare``, and return the old value either way (``atom...cas.b32`` / ``.b64``); a float32
    element compares its bits (so -0.0 differs from 0.0, and a NaN equals its own bits). Every
    element type of ``T.cuda.atomic_add``."""


@intrinsic("T.cuda.threadfence")
def threadfence(*, sem: str = "acq_rel", scope: str = "gpu") -> None:
    """A memory fence (``fence.<sem>.<scope>``): with ``sem='acq_rel'`` (the default) the
    calling thread's memory operations before it are ordered before those after it for every
    thread of ``scope`` ('cta', 'cluster', 'gpu' or 'sys') that synchronizes with it, e.g.
    through an atomic flag (a release before a relaxed atomic, an acquire after one);
    ``sem='sc'`` is the sequentially consistent fence that CUDA's ``__threadfence()``
    (``membar.gl``) is at gpu scope. It orders the generic proxy only: TMA and bulk copies need
    ``T.ptx.fence.proxy.async...`` as well."""


# Each read-modify-write intrinsic -> its PTX operation.
ATOMICS = {
    atomic_add: "add",
    atomic_max: "max",
    atomic_min: "min",
    atomic_and: "and",
    atomic_or: "or",
    atomic_xor: "xor",
    atomic_exch: "exch",
    atomic_cas: "cas",
}

tile = Namespace(
    "T.cuda.tile",
    "Tile patterns: T.cuda.tile.apply(T.ptx[opcode], *operands, **parameters).",
    apply=apply,
)

__all__ = [
    "LaunchConfig",
    "lane_id",
    "warp_id",
    "thread_idx",
    "block_idx",
    "block_dim",
    "grid_dim",
    "cluster_ctarank",
    "cta_sync",
    "cluster_sync",
    "mbarrier_wait",
    "decl_tmem",
    "shfl_xor",
    "shfl_down",
    "shfl_up",
    "shfl_idx",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_exch",
    "atomic_cas",
    "threadfence",
    "tile",
]


def __dir__() -> list[str]:
    return sorted(__all__)
