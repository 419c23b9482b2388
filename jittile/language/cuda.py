"""``T.cuda``: thread indices, synchronisation, tensor memory and the tile-pattern entry point."""
from __future__ import annotations

from types import SimpleNamespace

from ..ir import LaunchConfig  # re-exported: T.cuda.LaunchConfig
from .markers import Intrinsic


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
