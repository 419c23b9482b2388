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
    with one ``lane`` for all. Operands as for ``T.cuda.shfl_xor``."""


SHUFFLES = {shfl_xor: "bfly", shfl_down: "down", shfl_up: "up", shfl_idx: "idx"}

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
    "tile",
]


def __dir__() -> list[str]:
    return sorted(__all__)
