"""``T.cuda``: thread indices, synchronisation, tensor memory and the tile-pattern entry point."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from .markers import Intrinsic


def _dims(value, what: str) -> tuple[int, int, int]:
    from ..errors import JittileError

    if isinstance(value, int):
        value = (value,)
    value = tuple(value)
    if not 1 <= len(value) <= 3 or not all(isinstance(v, int) and v >= 1 for v in value):
        raise JittileError(f"{what} must be a positive int or a tuple of 1-3 positive ints, got {value!r}")
    return value + (1,) * (3 - len(value))


@dataclass(frozen=True)
class LaunchConfig:
    """Grid, block and cluster dimensions (each an int or a 1-3 tuple), normalised to 3-tuples."""

    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    cluster: tuple | None = None

    def __init__(self, grid=1, block=1, cluster=None):
        object.__setattr__(self, "grid", _dims(grid, "grid"))
        object.__setattr__(self, "block", _dims(block, "block"))
        object.__setattr__(self, "cluster", None if cluster is None else _dims(cluster, "cluster"))
        object.__setattr__(self, "_hash", hash((self.grid, self.block, self.cluster)))

    def __hash__(self) -> int:  # launches look configs up in a dict: hash once
        return self._hash

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


lane_id = Intrinsic("T.cuda.lane_id", "Lane index of the calling thread within its warp (0..31).")
warp_id = Intrinsic("T.cuda.warp_id", "Warp index within the CTA (linear thread index // 32).")
thread_idx = Intrinsic("T.cuda.thread_idx", "threadIdx.x/y/z; with no axis the linear index in the CTA.")
block_idx = Intrinsic("T.cuda.block_idx", "blockIdx.x/y/z; with no axis the linear CTA index.")
block_dim = Intrinsic("T.cuda.block_dim", "blockDim.x/y/z.")
grid_dim = Intrinsic("T.cuda.grid_dim", "gridDim.x/y/z.")
cluster_ctarank = Intrinsic("T.cuda.cluster_ctarank", "Rank of this CTA in its cluster (%cluster_ctarank).")
cta_sync = Intrinsic("T.cuda.cta_sync", "Barrier across the CTA (bar.sync 0).")
cluster_sync = Intrinsic("T.cuda.cluster_sync", "barrier.cluster.arrive + wait across the cluster.")
mbarrier_wait = Intrinsic("T.cuda.mbarrier_wait", "Spin on mbarrier.try_wait.parity until the phase completes.")
decl_tmem = Intrinsic("T.cuda.decl_tmem", "View a tensor-memory address as a typed TMEM tensor.")

tile = SimpleNamespace(apply=Intrinsic(
    "T.cuda.tile.apply", "Issue a tile pattern: T.cuda.tile.apply(T.ptx[opcode], *operands, **params)."))
