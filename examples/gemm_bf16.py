"""A bf16 GEMM on Hopper tensor cores: ``C = A @ B.T`` (A is (M, K), B is (N, K), both K-major as
nn.Linear keeps its weights; fp32 accumulation, bf16 out), tuned per shape.

The kernel is the classic warp-specialized persistent design, written once as ``@jittile.func``
helpers (``gemm_body``) that ``examples/gemm_fp8.py`` shares:

- one *producer* warpgroup whose first thread streams BMx64 tiles of A and BNx64 tiles of B into
  a ``STAGES``-deep ring of 128B-swizzled shared buffers with TMA, each stage guarded by a
  ``full`` mbarrier (TMA transaction bytes) and an ``empty`` one (released by the consumers);
- ``CONSUMERS[BM // 64]`` *consumer* warpgroups (one, two or three), each owning 64 rows of the
  BMxBN output tile as a register fragment (a 256-row tile's two: 128 rows, two fragments),
  issuing ``wgmma.mma_async.m64nBNk16`` per stage and fragment (one tile call: the 64-element
  K-slice expands into four instructions with advancing descriptors), keeping one wgmma group
  in flight while they release the stage before it;
- a persistent loop over jobs (one CTA per SM), so the producer already loads the next job while
  the consumers run the epilogue: round to bf16 pairs, store them with ``stmatrix`` into
  64-column parts that alternate between two 128B-swizzled shared buffers (a part is staged
  while the last one's store still reads), and write each with a TMA store that clips at M and
  N.

The tuning space (``BF16_SPACE``; ``jittile.autotune`` keyed on M, N, K, see docs/gemm.md):

- tiles 128x256 (4 stages, GROUP_M 8 or 16, or 3 stages), 128x192 (5; fewer idle SMs in the
  last wave where 128x256's is partial), 128x128 (6 stages), 64x256 (5), 64x128 (8) and 64x32
  (12; M <= 64: 128 tiles at N = 4096 fill the GPU over all of K, cuBLAS's tiles there): 64-row
  tiles run one consumer warpgroup (256 threads);
- shape-fitted tiles, as cuBLAS picks 176x192 or 152x256 tiles for shapes whose 128x256 tiles
  end in a partial wave: 128 rows by any width from 136 to 240 in steps of 8, 192 rows
  (three consumers, 512 threads) by 128 to 176 or 192, and 256 rows (two consumers of 128 rows,
  each two 64-row accumulators: ``CONSUMERS``) by 128 to 160; ``candidates`` keeps the two of
  128 or 192 rows and the one of 256 whose waves cost least by a model of wave counts, tile
  areas and edges (``Space._fitted``), where that beats 128x256's (4097x4104: 660 tiles of
  128x208 in five waves, 0.96x cuBLAS, where 128x256 split in four reached 0.89x). A width
  that is not a multiple of 64 ends its epilogue in a 64-column part flush with its last
  column, which overlaps the part before it (``epilogue``);
- split-K (``SPLIT`` 2, 4, 8), in one launch: the K range is cut in SPLIT pieces, and the
  splits of each 64-row block of a tile meet in ``settle``: each takes a ticket
  (``T.cuda.atomic_add``); all but the last store their fp32 fragments into a workspace from
  registers and count themselves done (release), the last waits for that count (acquire), adds
  the others' fragments to its own in split order (the result does not depend on which came
  last) and writes the block as an unsplit job does, then resets the counters for the next
  launch (``settle`` cites the memory-model rules). Over several waves of tiles only the last
  partial wave's split (``job_split``), so that it fills the GPU;
- swap-AB for M <= 64 (``SWAP``): ``C.T = B @ A.T``, B's rows fill wgmma's 64-row side in 128-row
  tiles (and 64-row ones at N = 16) and M becomes wgmma's N (16, 32 or 64); the epilogue
  transposes with ``stmatrix .trans``; with split-K 1, 2, 4 or 8.

``prune`` keeps the candidates that fit the shape (``candidates`` says which and why): at most
about a dozen, so a new shape tunes within seconds.

Registers: the 384-thread block gives every thread 168 registers, and the consumers' 128-float
accumulator plus their loop state fit in them (0 bytes of local memory). A 128x256 split-K
config's meeting does not (24 bytes of spill), nor fp8's promoted fragments, nor a 256-row
tile's two fragments per consumer: those configs move registers from the producer to the
consumers with ``setmaxnreg`` (40 and 232; jittile then assembles the kernel with a standalone
ptxas, as nvJitLink's ignores it, and it allocates up to the budget: 210 registers in 256x152's
consumers). Its index
arithmetic stays 32-bit: a 64-bit division is a call, and a call makes ptxas serialize every
wgmma (C7509); the consumers count their stages in 32 bits, so that a 5- or 6-stage ring's index
is a 32-bit modulo by a constant (a 64-bit signed one took about 30 instructions, twice per
stage).

M, N and K need not be multiples of the tile: TMA loads fill out-of-bounds elements with zeros
(they add nothing to the products) and TMA stores skip them. TMA needs 16-byte row strides (K
and N multiples of 8) and elements side by side in a row: ``launch`` copies an operand that is
not so (a transposed view, K = 1000 + 1) into one that is, zero-padding K, and a C into a
padded one it copies back (``stage``), at the cost of the copies.
"""

import functools

import numpy as np

import jittile
from jittile import T
from jittile.layout import swizzle, wgmma_accumulator
from jittile.runtime.arrays import device_view

SMS = 132  # the H200's SMs: one persistent CTA each
BM, BN, BK = 128, 256, 64  # gemm_bf16's output tile and the K-slice of one pipeline stage
STAGES = 4
CLUSTER_SIZE = 2  # a clustered config's CTAs: two row blocks sharing one multicast B tile
GROUP_M = 8  # tiles run in bands of 8 row-blocks, so concurrent CTAs share A and B in L2
ROW_BYTES = 128  # a stage's K-slice is one 128-byte swizzle row: 64 bf16 or 128 fp8 elements
SHARED_LIMIT = 232448  # the H200's opt-in shared memory per block
# What a ring and its epilogue buffers may take of it: 1 KB stays for the barriers
RING_ROOM = SHARED_LIMIT - 1024
PART_BYTES = 64 * 64 * 2  # one consumer's 64x64 bf16 epilogue buffer
LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
MULTICAST_LOAD = (
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".multicast::cluster"
)
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
# The operand loads' L2 promotion (the TensorMap's L2 sector promotion: 0 none, 1/2/3 64/128/256
# bytes): what a load that misses the L2 fetches from the DRAM
L2_PROMOTION = 0
# The wgmma forms by N (bf16: 8, 16, ... 256, index N // 8 - 1; fp8: 16, 32, ... 256, index
# N // 16 - 1). Tuples of strings, not a dict: a kernel that reads a mutable global has it
# re-checked on every launch (jittile/watch.py), which cost a third of a tuned launch's host time.
BF16_MMA = tuple(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16" for n in range(8, 257, 8))
E4M3_MMA = tuple(
    f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3" for n in range(16, 257, 16)
)


def promoted_piece(n: int) -> int:
    """The column width an fp8 stage of an N-wide tile is multiplied in under promotion: its
    product fragment and the fp32 total share the consumer's registers (N / 2 + piece / 2 of
    232), so N = 256 goes in two 128-wide pieces, narrower tiles whole."""
    return n if n <= 192 else n // 2


# By N (index N // 16 - 1): promotion's piece width and its wgmma form, for the kernels.
PROMOTED_PIECE = tuple(promoted_piece(n) for n in range(16, 257, 16))
PROMOTED_MMA = tuple(E4M3_MMA[promoted_piece(n) // 16 - 1] for n in range(16, 257, 16))
MMA = BF16_MMA[BN // 8 - 1]
# Consumer warpgroups by tile rows (index BM // 64): each owns 64 rows, but a 256-row tile's two
# own 128 (two 64-row accumulators each, cuBLAS's and CUTLASS's 256-row tiles): four 64-row
# consumers would launch 640 threads with 96 registers each
CONSUMERS = (0, 1, 2, 3, 2)


def block_of(meta) -> int:
    """A producer warpgroup and the tile's consumers (``CONSUMERS``)."""
    return 128 * (1 + CONSUMERS[meta["BM"] // 64])


@jittile.func
def tile_origin(tile, tiles_m, tiles_n, TILE_M, TILE_N, GROUP):
    """(row, column) of output tile ``tile``: column-major within bands of GROUP row-blocks.
    The divisions are 32-bit: a 64-bit one is a call into ptxas' runtime, and a call in the
    kernel makes ptxas serialize every wgmma."""
    band_tiles = T.uint32(GROUP * tiles_n)
    first = T.uint32(tile) // band_tiles * GROUP
    rows = T.uint32(min(tiles_m - first, GROUP))
    within = T.uint32(tile) % band_tiles
    return (first + within % rows) * TILE_M, (within // rows) * TILE_N


@jittile.func
def job_split(job, whole, SPLIT):
    """(tile, split, parts) of a job: the first ``whole`` jobs are whole tiles (split 0 of 1
    part), and each tile after them, the last partial wave's, takes SPLIT consecutive jobs."""
    tile = T.uint32(job)
    split = T.uint32(0)
    parts = T.uint32(1)
    if SPLIT > 1:
        if tile >= whole:
            past = tile - whole
            tile = T.uint32(whole + past // SPLIT)
            split = T.uint32(past % SPLIT)
            parts = T.uint32(SPLIT)
    return tile, split, parts


@jittile.func
def k_range(split, parts, k_tiles):
    """The first K-tile and the K-tile count of split ``split`` of ``parts`` (0 or less:
    none). 32-bit: no division call."""
    per = T.uint32(k_tiles + parts - 1) // parts
    first = T.int32(split * per)
    return first, min(T.int32(per), k_tiles - first)


@jittile.func
def split_count(k_tiles, SPLIT):
    """How many of the SPLIT splits have K-tiles (the others are empty jobs): the arrivals that
    complete a tile."""
    per = (k_tiles + SPLIT - 1) // SPLIT
    return T.uint32(k_tiles + per - 1) // T.uint32(max(per, 1))  # 32-bit: no division call


@jittile.func
def cluster_rank(CLUSTER):
    """This CTA's rank in its cluster (0 without one)."""
    rank = T.uint32(0)
    if CLUSTER > 1:
        rank = T.uint32(T.cuda.cluster_ctarank())
    return rank


@jittile.func
def job_origin(tile, rank, tiles_m, tiles_n, TILE_M, TILE_N, GROUP, CLUSTER):
    """(row, column) of the tile a CTA of rank ``rank`` computes for a job on ``tile``: a
    cluster's tile is CLUSTER tiles stacked along M (they share their B tile), the CTA of rank r
    taking the r-th."""
    pairs_m = (tiles_m + CLUSTER - 1) // CLUSTER
    m0, n0 = tile_origin(tile, pairs_m, tiles_n, CLUSTER * TILE_M, TILE_N, GROUP)
    return m0 + rank * TILE_M, n0


@jittile.func
def release(empty, consumed, s, CLUSTER):
    """A consumer warpgroup is done reading stage ``s`` (its ``wgmma.wait_group`` returned, so
    the reads are complete): a local arrival at the stage's ``empty`` barrier, or in a cluster
    at its ``consumed`` one, which the CTA's ``relay`` thread passes on to every CTA of the
    cluster. A consumer that arrived at the other CTAs' barriers itself lost a round trip to
    them per stage (128x128 tiles in clusters of two 8-21% slower than alone, as slow without
    multicast, as slow with five stages as six; arriving at its own CTA only, as fast as alone:
    runs 122-124)."""
    if CLUSTER == 1:
        T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]))
    else:
        T.ptx.mbarrier.arrive.shared.b64(consumed.ptr_to([s]))


@jittile.func
def relay(consumed, empty, jobs, whole, k_tiles, RING, SPLIT, CLUSTER):
    """The relay thread of a cluster's CTA: as each stage's consumers arrive at its ``consumed``
    barrier, arrive at that stage's ``empty`` barrier in every CTA of the cluster, whose
    producers multicast into this CTA's stage (the remote arrivals' round trips wait here, not
    in the consumers' loop). It steps through the jobs' stages as the producer does."""
    s = T.uint32(0)
    lap = T.uint32(0)  # the phase parity of stage s's consumption on this lap
    job = T.cuda.block_idx("x") // CLUSTER
    while job < jobs:
        _, split, parts = job_split(job, whole, SPLIT)
        _, count = k_range(split, parts, k_tiles)
        for _ in range(count):
            T.cuda.mbarrier_wait(consumed.ptr_to([s]), lap)
            for r in T.unroll(CLUSTER):
                T.ptx.mbarrier.arrive.shared__cluster.b64(
                    T.ptx.mapa.shared__cluster.u32(empty.ptr_to([s]), T.uint32(r))
                )
            s = T.uint32(s + 1)
            if s == RING:
                s = T.uint32(0)
                lap = T.uint32(1 - lap)
        job += T.cuda.grid_dim("x") // CLUSTER


@jittile.func
def produce(
    R,
    Q,
    R_s,
    Q_s,
    full,
    empty,
    jobs,
    whole,
    tiles_m,
    tiles_n,
    k_tiles,
    TILE_M,
    TILE_N,
    TILE_K,
    RING,
    GROUP,
    SPLIT,
    CLUSTER,
):
    """The producer thread: stream each job's K-slices of R and Q into the ring. In a cluster,
    the CTA of rank r loads about rows [r, r + 1) * TILE_N / CLUSTER of the shared Q tile and
    multicasts them to every CTA of the cluster (the shares cut at multiples of 8 rows, so that
    each starts at a whole 1024-byte swizzle period: 72 and 80 rows of a 152-row tile)."""
    # the ring position as a stage and a lap parity, stepped (no division: a ring of 5, 6 or 12
    # stages made the stage index a 64-bit signed modulo of a load count, ~30 instructions)
    s = T.uint32(0)
    free = T.uint32(1)  # the phase parity in which stage s is free on this lap
    rank = cluster_rank(CLUSTER)
    job = T.cuda.block_idx("x") // CLUSTER
    while job < jobs:
        tile, split, parts = job_split(job, whole, SPLIT)
        m0, n0 = job_origin(tile, rank, tiles_m, tiles_n, TILE_M, TILE_N, GROUP, CLUSTER)
        first, count = k_range(split, parts, k_tiles)
        for i in range(count):
            k0 = (first + i) * TILE_K
            T.cuda.mbarrier_wait(empty.ptr_to([s]), free)
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                full.ptr_to([s]), T.uint32((TILE_M + TILE_N) * ROW_BYTES)
            )
            if TILE_M > 64:  # one 64-row box per consumer
                T.cuda.tile.apply(
                    T.ptx[LOAD],
                    R_s[s],
                    R,
                    box=(64, TILE_K),
                    coords=(m0, k0),
                    coord_steps=((64, 0),),
                    swizzle=3,
                    l2_promotion=L2_PROMOTION,
                    mbar=full.ptr_to([s]),
                )
            else:
                T.cuda.tile.apply(
                    T.ptx[LOAD],
                    R_s[s, 0],
                    R,
                    box=(64, TILE_K),
                    coords=(m0, k0),
                    swizzle=3,
                    l2_promotion=L2_PROMOTION,
                    mbar=full.ptr_to([s]),
                )
            if CLUSTER == 1:
                T.cuda.tile.apply(
                    T.ptx[LOAD],
                    Q_s[s],
                    Q,
                    box=(TILE_N, TILE_K),
                    coords=(n0, k0),
                    swizzle=3,
                    l2_promotion=L2_PROMOTION,
                    mbar=full.ptr_to([s]),
                )
            else:
                for r in T.unroll(CLUSTER):
                    if rank == r:  # its share of the rows, cut at whole 8-row swizzle periods
                        lo = r * TILE_N // CLUSTER // 8 * 8
                        hi = (r + 1) * TILE_N // CLUSTER // 8 * 8
                        T.cuda.tile.apply(
                            T.ptx[MULTICAST_LOAD],
                            Q_s[s, lo:hi],
                            Q,
                            box=(hi - lo, TILE_K),
                            coords=(n0 + lo, k0),
                            swizzle=3,
                            l2_promotion=L2_PROMOTION,
                            cta_mask=T.uint16((1 << CLUSTER) - 1),
                            mbar=full.ptr_to([s]),
                        )
            s = T.uint32(s + 1)
            if s == RING:
                s = T.uint32(0)
                free = T.uint32(1 - free)
        job += T.cuda.grid_dim("x") // CLUSTER
    if CLUSTER > 1:  # every stage released by every CTA of the cluster (CUTLASS's tail):
        for i in T.unroll(RING):  # no other CTA arrives at this CTA's barriers after this
            wraps = T.uint32(s + i >= RING)  # the i-th stage from here is on the next lap
            T.cuda.mbarrier_wait(
                empty.ptr_to([T.uint32(s + i - RING * wraps)]),
                T.uint32(free + wraps) & T.uint32(1),
            )


@jittile.func
def stage_bf16(frag, S_s, scale, part, first, half, lane, WIDTH, BUFFERS, SWAP, SCALED):
    """Round the fragment's columns [first, first + WIDTH) (``first`` a multiple of 8) of
    output part ``part`` to bf16 pairs with stmatrix into
    ``S_s[half]`` (transposed with SWAP), else into its buffer ``part % BUFFERS``. Lanes 8i..8i+7
    address the rows of matrix i: rows +8 for odd i, columns +8 for i >= 2 of the warp's 16 rows
    (with .trans: those columns' rows)."""
    warp_row = (T.cuda.warp_id() % 4) * 16
    for j in T.unroll(WIDTH // 16):  # 16 columns: four 8x8 matrices
        r = first // 2 + 8 * j  # their first accumulator register
        w0 = bf16_pair(frag, r, scale, SCALED)
        w1 = bf16_pair(frag, r + 2, scale, SCALED)
        w2 = bf16_pair(frag, r + 4, scale, SCALED)
        w3 = bf16_pair(frag, r + 6, scale, SCALED)
        if SWAP:
            T.ptx.stmatrix.sync.aligned.m8n8.x4.trans.shared.b16(
                S_s.ptr_to(
                    [half, 16 * j + 8 * (lane // 16) + lane % 8, warp_row + 8 * ((lane // 8) % 2)]
                ),
                w0,
                w1,
                w2,
                w3,
            )
        else:
            T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
                S_s.ptr_to(
                    [
                        half,
                        part % BUFFERS,
                        warp_row + lane % 8 + 8 * ((lane // 8) % 2),
                        16 * j + 8 * (lane // 16),
                    ]
                ),
                w0,
                w1,
                w2,
                w3,
            )


@jittile.func
def bf16_pair(frag, r, scale, SCALED):
    """Registers r and r + 1 (scaled) as one bf16x2 word, r in the low half."""
    if SCALED:
        word = T.ptx.cvt.rn.bf16x2.f32(frag[r + 1] * scale, frag[r] * scale)
    else:
        word = T.ptx.cvt.rn.bf16x2.f32(frag[r + 1], frag[r])
    return word


@jittile.func
def epilogue(
    frag,
    C,
    S_s,
    scale,
    row0,
    col0,
    rows,
    cols,
    half,
    row_block,
    leader,
    TILE_N,
    WIDTH,
    BUFFERS,
    SWAP,
    SCALED,
):
    """Write consumer ``half``'s 64 x TILE_N fragment of the tile's 64-row block ``row_block``
    at (row0, col0) of the rows x cols (transposed with SWAP) output: rounded to bf16 in parts
    of WIDTH columns, each staged in shared memory and written with a TMA store that clips at
    the output's edges. Without SWAP, 64-column parts alternate between two 128B-swizzled
    buffers where they fit (``gemm_body``), so that a part is staged while the store of the one
    before it still reads, and stmatrix's rows fall in different bank groups. A width that is
    not a multiple of 64 ends in a part flush with the tile's last column, overlapping the one
    before it (152: columns 0, 64 and 88 on): the overlap is written twice with the same values,
    where bounds-checked element stores of the columns past the last whole part cost 256x152
    tiles 8% of their time at 3000x5000x2000 (run 118: 98.9 us against 91.2 without them)."""
    lane = T.cuda.lane_id()
    for p in T.unroll((TILE_N + WIDTH - 1) // WIDTH):
        first = min(p * WIDTH, TILE_N - WIDTH)  # the part's first column
        if leader:  # the store that last read this part's buffer is done with it (a tile's
            # first part: every store, the buffers' last use perhaps an odd part count ago)
            if p == 0 or BUFFERS == 1:
                T.ptx.cp.async_.bulk.wait_group.read(0)
            else:
                T.ptx.cp.async_.bulk.wait_group.read(1)
        T.ptx.bar.sync(1 + half, 128)
        stage_bf16(frag, S_s, scale, p, first, half, lane, WIDTH, BUFFERS, SWAP, SCALED)
        T.ptx.fence.proxy.async_.shared__cta()  # the staged tile, into the async proxy
        T.ptx.bar.sync(1 + half, 128)
        if leader:
            if SWAP:
                T.cuda.tile.apply(
                    T.ptx[STORE],
                    C,
                    S_s[half],
                    box=(TILE_N, 64),
                    coords=(col0, row0 + 64 * row_block),
                )
            elif WIDTH == 64:
                T.cuda.tile.apply(
                    T.ptx[STORE],
                    C,
                    S_s[half, p % BUFFERS],
                    box=(64, 64),
                    coords=(row0 + 64 * row_block, col0 + first),
                    swizzle=3,
                )
            else:
                T.cuda.tile.apply(
                    T.ptx[STORE],
                    C,
                    S_s[half, 0],
                    box=(64, WIDTH),
                    coords=(row0 + 64 * row_block, col0),
                )
            T.ptx.cp.async_.bulk.commit_group()


@jittile.func
def settle(frag, W, Arrivals, last_s, block, blocks, split, splits, leader, TILE_N, SPLIT):
    """Split-K's meeting of the splits of one 64-row block of a tile (``block`` of ``blocks``):
    whether this split is the block's last, which writes it. Each split takes a ticket
    (``Arrivals[2 * block]``). A split that is not the last stores its fp32 fragment into its
    slot of ``W`` (``split_slot``: thread-major, so that every store of a warp is one 128-byte
    line, whatever the tile's orientation and edges) and counts itself done
    (``Arrivals[2 * block + 1]``); the last waits until the others are done, replaces its
    fragment by the sum of every split's and resets both counters for the next launch. The sum
    does not depend on which split came last: two add in either order alike, and with more
    the last stores its own fragment too and adds all of them in split order. ``W`` is never
    read before it is written: it needs no zeroing, only the counters start at zero.
    The memory model (PTX ISA 9.1): each writer thread's ``fence.acq_rel.gpu`` (9.7.13.4,
    ``membar``/``fence``) orders its stores before the ``bar.sync`` (9.7.13.1) after which its
    leader's release atomic (9.7.13.5, ``atom``) counts the slot done; the last split's leader
    reads the count with an acquire atomic, and its threads, after a ``bar.sync``, fence
    (acquire) before they load the slots: the release/acquire pattern of the memory model
    (section 8), extended to the warpgroup by the barriers and fences."""
    half = T.cuda.warp_id() // 4 - 1
    t = T.cuda.thread_idx("x") % 128
    if leader:
        last_s[half] = T.cuda.atomic_add(Arrivals, 2 * block, 1)
    T.ptx.bar.sync(1 + half, 128)
    last = last_s[half] == splits - 1
    if SPLIT > 2 or not last:
        slot = split_slot(split, block, blocks, t, TILE_N)
        for r in T.unroll(TILE_N // 2):
            W[slot + T.uint64(128 * r)] = frag[r]
    if last:
        if leader:
            while T.cuda.atomic_add(Arrivals, 2 * block + 1, 0, sem="acquire") < splits - 1:
                pass
            Arrivals[2 * block] = 0  # every split took its ticket and is done: none adds again
            Arrivals[2 * block + 1] = 0
        T.ptx.bar.sync(1 + half, 128)
        T.cuda.threadfence()
        if SPLIT > 2:
            for r in T.unroll(TILE_N // 2):
                frag[r] = 0.0
        for s in range(splits):
            if SPLIT > 2 or s != split:
                at = split_slot(s, block, blocks, t, TILE_N)
                for r in T.unroll(TILE_N // 2):
                    frag[r] += W[at + T.uint64(128 * r)]
    else:
        T.cuda.threadfence()
        T.ptx.bar.sync(1 + half, 128)
        if leader:
            T.cuda.atomic_add(Arrivals, 2 * block + 1, 1, sem="release")
    return last


@jittile.func
def split_slot(split, block, blocks, t, TILE_N):
    """Where thread ``t``'s register 0 of split ``split``'s fp32 fragment of 64-row block
    ``block`` lies in ``W``; its register r lies ``128 * r`` further. Unsigned 64-bit, so that
    those constant offsets fold into the loads' and stores' addresses (a signed index would
    also be checked for Python's negative-index wraparound, element by element)."""
    return T.uint64((split * blocks + block) * (64 * TILE_N) + t)


@jittile.func
def consume(
    R_s,
    Q_s,
    S_s,
    full,
    empty,
    consumed,
    C,
    W,
    Arrivals,
    last_s,
    scale,
    jobs,
    whole,
    tiles_m,
    tiles_n,
    k_tiles,
    rows,
    cols,
    MMA_OP,
    TILE_M,
    TILE_N,
    WIDTH,
    BUFFERS,
    RING,
    GROUP,
    SPLIT,
    SWAP,
    PROMOTE,
    SCALED,
    CLUSTER,
    SUM_STAGES,
):
    """A consumer warpgroup's persistent loop: each job's K range into its ``BLOCKS`` 64-row
    accumulators (``acc``, and ``acc2`` for the second 64 rows of a 256-row tile's 128), or with
    PROMOTE, the width of MMA_OP's N, each SUM_STAGES K-stages alone into ``part``, PROMOTE
    columns at a time, added into ``total`` (``total2``), then each block's end: ``finish``."""
    # a broadcast from lane 0, which ptxas knows to be warp-uniform: the A operand's
    # descriptors, which depend on it, are then computed in uniform registers as B's are,
    # not per thread and moved (R2UR) before every wgmma (CUTLASS's warp-group index)
    half = T.cuda.shfl_idx(T.int32(T.cuda.warp_id() // 4 - 1), 0)
    BLOCKS = TILE_M // 64 // CONSUMERS[TILE_M // 64]  # this warpgroup's 64-row blocks
    first_block = T.int32(half * BLOCKS)  # its first, of the tile's (32-bit, as half)
    leader = T.cuda.thread_idx("x") % 128 == 0
    splits = split_count(k_tiles, SPLIT)
    blocks = (tiles_m * tiles_n - whole) * (TILE_M // 64)  # split-K's 64-row blocks
    acc = T.alloc_local((64, TILE_N), "float32", layout=wgmma_accumulator)
    if BLOCKS == 2:
        acc2 = T.alloc_local((64, TILE_N), "float32", layout=wgmma_accumulator)
    if PROMOTE:  # a stage's product, one column piece at a time, and the fp32 totals
        part = T.alloc_local((64, PROMOTE), "float32", layout=wgmma_accumulator)
        total = T.alloc_local((64, TILE_N), "float32", layout=wgmma_accumulator)
        if BLOCKS == 2:
            total2 = T.alloc_local((64, TILE_N), "float32", layout=wgmma_accumulator)
    # counted in 32 bits (each step truncated: numba widens sums to 64), so that a ring of 5 or
    # 6 stages costs a 32-bit modulo per stage, not a 64-bit signed one (30 instructions; the
    # producer steps its position instead: a 32-bit count made 128x256 split builds spill)
    it = T.uint32(0)
    ring = T.uint32(RING)
    rank = cluster_rank(CLUSTER)
    job = T.cuda.block_idx("x") // CLUSTER
    while job < jobs:
        tile, split, parts = job_split(job, whole, SPLIT)
        _, count = k_range(split, parts, k_tiles)
        if count > 0:
            if PROMOTE:  # SUM_STAGES stages at a time, each piece alone into part, into total
                for r in T.unroll(TILE_N // 2):
                    total[r] = 0.0
                    if BLOCKS == 2:
                        total2[r] = 0.0
                for _ in range(T.uint32(count) // T.uint32(SUM_STAGES)):
                    for j in T.unroll(SUM_STAGES):
                        at = T.uint32(it + j)
                        T.cuda.mbarrier_wait(full.ptr_to([at % ring]), (at // ring) & 1)
                    T.ptx.wgmma.fence.sync.aligned()
                    for piece in T.unroll(TILE_N // PROMOTE):
                        for b in T.unroll(BLOCKS):
                            if piece > 0 or b > 0:  # part was read since its last wgmma
                                T.ptx.wgmma.fence.sync.aligned()
                            for j in T.unroll(SUM_STAGES):
                                stage = T.uint32(it + j) % ring
                                T.cuda.tile.apply(
                                    T.ptx[MMA_OP],
                                    part,
                                    R_s[stage, first_block + b],
                                    Q_s[stage, piece * PROMOTE : (piece + 1) * PROMOTE].T,
                                    scale_d=min(j, 1),
                                )
                            T.ptx.wgmma.commit_group.sync.aligned()
                            T.ptx.wgmma.wait_group.sync.aligned(0)
                            if piece == TILE_N // PROMOTE - 1 and b == BLOCKS - 1:
                                if leader:
                                    for j in T.unroll(SUM_STAGES):
                                        release(empty, consumed, T.uint32(it + j) % ring, CLUSTER)
                            for r in T.unroll(PROMOTE // 2):
                                if b == 0:
                                    total[piece * PROMOTE // 2 + r] += part[r]
                                else:
                                    total2[piece * PROMOTE // 2 + r] += part[r]
                    it = T.uint32(it + SUM_STAGES)
            else:  # pipelined, one wgmma group in flight
                for i in range(count):
                    s = it % ring
                    T.cuda.mbarrier_wait(full.ptr_to([s]), (it // ring) & 1)
                    T.ptx.wgmma.fence.sync.aligned()
                    T.cuda.tile.apply(T.ptx[MMA_OP], acc, R_s[s, first_block], Q_s[s].T, scale_d=i)
                    if BLOCKS == 2:
                        T.cuda.tile.apply(
                            T.ptx[MMA_OP], acc2, R_s[s, first_block + 1], Q_s[s].T, scale_d=i
                        )
                    T.ptx.wgmma.commit_group.sync.aligned()
                    T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's are done
                    if i > 0 and leader:
                        release(empty, consumed, T.uint32(it + RING - 1) % ring, CLUSTER)
                    it = T.uint32(it + 1)
            row0, col0 = job_origin(tile, rank, tiles_m, tiles_n, TILE_M, TILE_N, GROUP, CLUSTER)
            if PROMOTE:  # every stage was waited for: acc is free (a renaming, no moves)
                for r in T.unroll(TILE_N // 2):
                    acc[r] = total[r]
                    if BLOCKS == 2:
                        acc2[r] = total2[r]
            else:
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    release(empty, consumed, T.uint32(it + RING - 1) % ring, CLUSTER)
            block = (tile - whole) * (TILE_M // 64) + first_block  # of a split tile
            finish(
                acc,
                C,
                W,
                Arrivals,
                S_s,
                last_s,
                scale,
                row0,
                col0,
                rows,
                cols,
                half,
                first_block,
                leader,
                block,
                blocks,
                split,
                splits,
                parts,
                TILE_N,
                WIDTH,
                BUFFERS,
                SPLIT,
                SWAP,
                SCALED,
            )
            if BLOCKS == 2:
                finish(
                    acc2,
                    C,
                    W,
                    Arrivals,
                    S_s,
                    last_s,
                    scale,
                    row0,
                    col0,
                    rows,
                    cols,
                    half,
                    T.int32(first_block + 1),
                    leader,
                    block + 1,
                    blocks,
                    split,
                    splits,
                    parts,
                    TILE_N,
                    WIDTH,
                    BUFFERS,
                    SPLIT,
                    SWAP,
                    SCALED,
                )
        job += T.cuda.grid_dim("x") // CLUSTER
    if leader:
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.func
def finish(
    frag,
    C,
    W,
    Arrivals,
    S_s,
    last_s,
    scale,
    row0,
    col0,
    rows,
    cols,
    half,
    row_block,
    leader,
    block,
    blocks,
    split,
    splits,
    parts,
    TILE_N,
    WIDTH,
    BUFFERS,
    SPLIT,
    SWAP,
    SCALED,
):
    """The end of a job for one 64-row block (``row_block`` of the tile) of consumer warpgroup
    ``half``: the epilogue, after the splits' meeting for a split tile (``settle``: only its
    last split writes the block)."""
    writes = True
    if SPLIT > 1:  # first: an unsplit build has no workspace to lower settle on
        if parts > 1:
            writes = settle(
                frag, W, Arrivals, last_s, block, blocks, split, splits, leader, TILE_N, SPLIT
            )
    if writes:
        epilogue(
            frag,
            C,
            S_s,
            scale,
            row0,
            col0,
            rows,
            cols,
            half,
            row_block,
            leader,
            TILE_N,
            WIDTH,
            BUFFERS,
            SWAP,
            SCALED,
        )


@jittile.func
def gemm_body(
    R,
    Q,
    C,
    W,
    Arrivals,
    scale,
    rows,
    cols,
    K,
    ELEMENT,
    MMA_OP,
    TILE_M,
    TILE_N,
    TILE_K,
    RING,
    GROUP,
    SPLIT,
    SWAP,
    PROMOTE,
    SCALED,
    CLUSTER,
    PROMOTION,
):
    """The whole kernel over ``R @ Q.T`` (rows x cols): shared ring, barriers, producer and
    consumers. ``C`` (bf16) receives the product, transposed with SWAP; with SPLIT > 1 the
    splits of a 64-row block of a tile meet in ``settle``: all but the last store their fp32
    fragments into the workspace ``W`` (``split_sums`` elements, any contents on entry), and
    the last adds them to its own and writes the block into C; ``Arrivals`` (two int32 counters
    per block: ``arrival_slots``) is zero on entry and on exit. With CLUSTER > 1
    (SPLIT 1, no SWAP; launched in clusters of CLUSTER CTAs along x) the CTAs of a cluster
    compute CLUSTER tiles stacked along M and multicast their shared Q tile: each stage's
    ``empty`` barrier then counts one arrival from each CTA's ``relay`` thread (which passes on
    its own consumers' releases), and the producer waits for every stage's release before its
    CTA may leave (an aligned cluster barrier at the
    end hung on the H200, run 60). With PROMOTE (fp8), an unsplit job adds its pieces into the
    fp32 total once per PROMOTION K-stages."""
    consumers = CONSUMERS[TILE_M // 64]
    # a consumer's staged output part: the whole (transposed) tile with SWAP or below 64
    # columns, else 64 columns (128-byte rows, 128B-swizzled) in two alternating buffers
    # (a width that is not a multiple of 64 ends in a part that overlaps the one before it:
    # ``epilogue``), one where the ring leaves no room for two (128x192: five 40 KB stages;
    # 192-row tiles)
    width = TILE_N if SWAP or TILE_N < 64 else 64
    ring_bytes = RING * (TILE_M + TILE_N) * ROW_BYTES
    two = ring_bytes + consumers * 2 * PART_BYTES <= RING_ROOM
    buffers = 2 if width == 64 and two else 1
    R_s = T.alloc_shared(  # the tile's 64-row blocks of R
        (RING, TILE_M // 64, 64, TILE_K),
        ELEMENT,
        layout=swizzle(3, (RING, TILE_M // 64, 64, TILE_K), ELEMENT),
        align=1024,
    )
    Q_s = T.alloc_shared(
        (RING, TILE_N, TILE_K),
        ELEMENT,
        layout=swizzle(3, (RING, TILE_N, TILE_K), ELEMENT),
        align=1024,
    )
    if SWAP:
        S_s = T.alloc_shared((consumers, TILE_N, 64), "bfloat16", align=1024)
    elif width == 64:
        S_s = T.alloc_shared(
            (consumers, buffers, 64, 64),
            "bfloat16",
            layout=swizzle(3, (consumers, buffers, 64, 64), "bfloat16"),
            align=1024,
        )
    else:
        S_s = T.alloc_shared((consumers, 1, 64, width), "bfloat16", align=1024)
    full = T.alloc_shared((RING,), "uint64")
    empty = T.alloc_shared((RING,), "uint64")
    consumed = T.alloc_shared((RING,), "uint64")  # a cluster's local releases, for ``relay``
    last_s = T.alloc_shared((consumers,), "int32")  # a split's arrival, told its warpgroup
    if T.cuda.thread_idx("x") == 0:
        for s in T.unroll(RING):
            T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
            if CLUSTER == 1:
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(consumers))
            else:  # one arrival from each CTA's relay; the relay's from this CTA's consumers
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(CLUSTER))
                T.ptx.mbarrier.init.shared.b64(consumed.ptr_to([s]), T.uint32(consumers))
        if CLUSTER == 1:
            T.ptx.fence.proxy.async_.shared__cta()
        else:  # the barriers, for the other CTAs' multicasts and arrivals
            T.ptx.fence.mbarrier_init.release.cluster()
    if CLUSTER == 1:
        T.cuda.cta_sync()
    else:
        T.cuda.cluster_sync()
    tiles_m = (rows + TILE_M - 1) // TILE_M
    tiles_n = (cols + TILE_N - 1) // TILE_N
    tiles = (tiles_m + CLUSTER - 1) // CLUSTER * tiles_n  # a cluster's tiles
    # with split-K, the tiles of the last partial wave of the grid split (all of them where the
    # tiles are fewer than the CTAs), the others run whole: ``job_split``
    whole = tiles
    if SPLIT > 1:
        whole = tiles - T.uint32(tiles) % T.uint32(T.cuda.grid_dim("x"))
    jobs = whole + (tiles - whole) * SPLIT
    k_tiles = (K + TILE_K - 1) // TILE_K
    # with PROMOTE, an unsplit job's pieces sum PROMOTION K-stages in the wgmma before each add,
    # its K-stages made a multiple by stages past K (TMA loads them as zeros, which add nothing)
    sum_stages = PROMOTION if PROMOTE and SPLIT == 1 else 1
    k_tiles = (k_tiles + sum_stages - 1) // sum_stages * sum_stages
    if T.cuda.warp_id() < 4:  # producer
        # its registers to the consumers' product fragments and totals (PROMOTE), to their
        # split-K meeting over a wide tile (168 registers would spill 24 bytes at 128x256), or
        # to a 256-row tile's two accumulators per consumer
        if (PROMOTE or SPLIT > 1) and TILE_M == 128 and TILE_N > 128 or TILE_M == 256:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(40)
        if T.cuda.thread_idx("x") == 0:
            produce(
                R,
                Q,
                R_s,
                Q_s,
                full,
                empty,
                jobs,
                whole,
                tiles_m,
                tiles_n,
                k_tiles,
                TILE_M,
                TILE_N,
                TILE_K,
                RING,
                GROUP,
                SPLIT,
                CLUSTER,
            )
        if CLUSTER > 1 and T.cuda.thread_idx("x") == 32:
            relay(consumed, empty, jobs, whole, k_tiles, RING, SPLIT, CLUSTER)
    else:  # consumer warpgroup w computes 64-row blocks (w - 1) * BLOCKS .. w * BLOCKS - 1
        if (PROMOTE or SPLIT > 1) and TILE_M == 128 and TILE_N > 128 or TILE_M == 256:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(232)
        consume(
            R_s,
            Q_s,
            S_s,
            full,
            empty,
            consumed,
            C,
            W,
            Arrivals,
            last_s,
            scale,
            jobs,
            whole,
            tiles_m,
            tiles_n,
            k_tiles,
            rows,
            cols,
            MMA_OP,
            TILE_M,
            TILE_N,
            width,
            buffers,
            RING,
            GROUP,
            SPLIT,
            SWAP,
            PROMOTE,
            SCALED,
            CLUSTER,
            sum_stages,
        )


@jittile.kernel
def gemm_bf16(
    A: T.Tensor((None, None), "bfloat16"),
    B: T.Tensor((None, None), "bfloat16"),
    C: T.Tensor((None, None), "bfloat16"),
    M: T.int32,
    N: T.int32,
    K: T.int32,
):
    """The 128x256 configuration alone (no tuning)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=132, block=384))
    gemm_body(
        A,
        B,
        C,
        C,
        C,
        1.0,
        M,
        N,
        K,
        "bfloat16",
        MMA,
        BM,
        BN,
        BK,
        STAGES,
        GROUP_M,
        1,
        False,
        False,
        False,
        1,
        1,
    )


class Space:
    """The configs of a tuned GEMM over inputs of ``element_bytes``, and its shape -> candidates
    pruning (docs/gemm.md)."""

    def __init__(
        self,
        element_bytes: int,
        tiles: tuple,
        swap_tiles: tuple,
        splits: tuple,
        fitted: tuple = (),
    ):
        """``tiles``: (BM, BN, STAGES, GROUP_M, its SPLIT values, with clusters of
        CLUSTER_SIZE); ``swap_tiles``: (BM, BN, STAGES), each with SPLIT 1 and ``splits``;
        ``fitted``: (BM, its BN values) of the tiles that ``candidates`` fits to a shape's
        waves (unsplit, GROUP_M 8, each with the deepest ring that fits: ``fitted_stages``)."""
        self.tile_k = ROW_BYTES // element_bytes
        self._chosen: dict[tuple, list] = {}
        self.configs = []
        listed = {(tm, tn) for tm, tn, *_ in tiles}
        self.fitted = tuple(
            (tm, tn) for tm, widths in fitted for tn in widths if (tm, tn) not in listed
        )
        tiles += tuple((tm, tn, fitted_stages(tm, tn), 8, UNSPLIT, False) for tm, tn in self.fitted)
        for tm, tn, ring, group, tile_splits, clustered in tiles:
            for split in tile_splits:
                self.configs.append(self._config(tm, tn, ring, group, split, False))
            if clustered:
                self.configs.append(self._config(tm, tn, ring, group, 1, False, CLUSTER_SIZE))
        for tm, tn, ring in swap_tiles:
            for split in (1,) + splits:
                self.configs.append(self._config(tm, tn, ring, 8, split, True))

    @staticmethod
    def _config(tm, tn, ring, group, split, swap, cluster=1) -> jittile.Config:
        return jittile.Config(
            {
                "BM": tm,
                "BN": tn,
                "STAGES": ring,
                "GROUP_M": group,
                "SPLIT": split,
                "SWAP": swap,
                "CLUSTER": cluster,
            },
            block=block_of({"BM": tm}),
            cluster=(cluster, 1, 1) if cluster > 1 else None,
        )

    def candidates(self, m: int, n: int, k: int, sms: int = SMS) -> list:
        """The configs worth timing for an M x N x K product (rules in docs/gemm.md); kept per
        shape, as every launch asks."""
        shape = (m, n, k, sms)
        if shape not in self._chosen:
            self._chosen[shape] = self._candidates(m, n, k, sms)
        return self._chosen[shape]

    def _candidates(self, m: int, n: int, k: int, sms: int) -> list:
        k_tiles = -(-k // self.tile_k)
        out = []
        fitted = self._fitted(m, n, sms)
        for config in self.configs:
            v = config.kwargs
            rows, cols = (n, m) if v["SWAP"] else (m, n)
            tiles = -(-rows // v["BM"]) * -(-cols // v["BN"])
            if (v["BM"], v["BN"]) in self.fitted:
                fits = (v["BM"], v["BN"]) in fitted
            elif v["SWAP"]:
                fits = m <= 64 and v["BN"] == min(b for b in (16, 32, 64) if b >= m)
            elif v["BN"] == 32:  # M <= 64: enough narrow tiles to fill the GPU over all of K
                fits = m <= 64  # (cuBLAS's 64x32 tiles at 64x4096x4096, run 85)
            elif v["BM"] == 64:  # small M, or where 128-row tiles of this width leave SMs idle
                fits = 32 < m <= 512 or (m > 512 and -(-m // 128) * -(-n // v["BN"]) < sms)
            else:
                fits = m > 64
            if v["CLUSTER"] > 1:  # the cluster's tiles stack along M: as many row blocks;
                # over half a wave of tiles (below that every tile splits, rule 3): multicast
                # halves the B bytes each CTA reads from L2 (cuBLAS's clusters at 512 rows)
                fits = fits and -(-rows // v["BM"]) >= v["CLUSTER"] and 2 * tiles > sms
            per = -(-k_tiles // v["SPLIT"])
            if v["SPLIT"] > 1 and tiles * 2 <= sms:  # the tiles leave SMs idle: all split
                fits = fits and tiles * v["SPLIT"] <= 2 * sms and per >= 4
            elif v["SPLIT"] > 1:  # 128x256 over several waves: the last partial one splits
                tail = tiles % sms
                fits = fits and v["BN"] == 256 and 0 < tail * v["SPLIT"] <= sms and per >= 4
            elif tiles < 2 * sms and v["GROUP_M"] != 8:
                fits = False  # L2 banding matters only over several waves
            if fits:
                out.append(config)
        return out

    def _fitted(self, m: int, n: int, sms: int, keep: int = 2) -> tuple:
        """The ``keep`` fitted tiles of 128 or 192 rows and the one of 256 rows whose waves cost
        least on an M x N output of more than a wave of 128x256 tiles, where that cost is below
        the 128x256 tile's: cuBLAS's way with a shape whose 128x256 tiles end in a partial wave
        (4097x4104: 561 tiles, 4.25 waves, where 660 128x208 ones make 5 waves of smaller tiles
        and 528 192x176 ones exactly 4; 3000x5000: 480, 3.6 waves, where 528 128x232 ones make
        4 and 396 256x152 ones 3). A 256-row tile is kept beside the others, not instead of
        them, as the model ranks 256x136 first at 4097x4104, where 192x176 runs 8% faster (run
        119). The cost: waves of tiles on ``sms`` SMs times a tile's time, its area plus
        ``TILE_EDGE_COST`` times its perimeter (the operand rows it streams per K-step), times
        ``ROWS_COST`` for its rows."""

        def cost(tile):
            tm, tn = tile
            return waves(m, n, tm, tn, sms) * (tm * tn + TILE_EDGE_COST * (tm + tn)) * ROWS_COST[tm]

        if -(-m // 128) * -(-n // 256) <= sms:  # one wave: no partial one to fit
            return ()
        ranked = sorted((t for t in self.fitted if t[0] < m), key=lambda t: (cost(t), -t[1]))
        ranked = [t for t in ranked if cost(t) < cost((128, 256))]
        return (
            tuple(t for t in ranked if t[0] < 256)[:keep]
            + tuple(t for t in ranked if t[0] == 256)[:1]
        )


def in_clusters(config: jittile.Config, size: int) -> jittile.Config:
    """``config`` launched in clusters of ``size`` CTAs that share its B tile by multicast (of
    the space's configs only the listed tiles have one: fitted tiles in clusters of two ran 1-2%
    slower than alone on an H100, run 119: 256x152 0.970x cuBLAS against 0.980, 192x176 0.987
    against 1.007)."""
    v = config.kwargs
    return Space._config(v["BM"], v["BN"], v["STAGES"], v["GROUP_M"], v["SPLIT"], v["SWAP"], size)


def waves(m: int, n: int, tm: int, tn: int, sms: int) -> int:
    """The waves of TM x TN tiles over an M x N output on ``sms`` SMs."""
    return -(-(-(-m // tm) * -(-n // tn)) // sms)


# A tile's time per K-step beyond its MMAs, per operand row, in units of one output element's:
# run 106's tunings of 3000x5000x2000 (128x128: 8 waves in 115.4 us, 128x192: 5 in 98.6,
# 128x256: 4 in 97.3) fit area + 107 x (BM + BN) per wave within 2%
TILE_EDGE_COST = 100
# A wave's time by tile rows, beyond the area-and-edges model: three consumers' tiles took 8-12%
# longer while widths past the last 64-column part stored those columns from registers (runs
# 110-111, hot L2: 192x176 197.2 us at 4096^3 against 128x256's 178.6, whose model cost is 0.8%
# more; 197.6 at 4097x4104 against 128x208's 194.7), and none with the overlapping last part
# (run 119: 192x176 186.8 us at 4097x4104 against 128x208's 198.9, the model's ratio 0.938 to
# the measured 0.939); 5% keeps them out where 128x256 fills its waves (4096^3), as measured
# Two consumers of 128 rows each (256-row tiles): taken as 128-row tiles' cost (run 119: 256x152
# 93.2 us at 3000x5000x2000 against 128x232's 96.6, the model's ratio 0.910)
ROWS_COST = {128: 1.0, 192: 1.05, 256: 1.0}


def fitted_stages(tm: int, tn: int, most: int = 4) -> int:
    """The deepest ring (up to ``most``) of a TM x TN bf16 tile's stages that fits in shared
    memory beside one 64x64 epilogue buffer per consumer (and 1 KB for the barriers)."""
    stage = (tm + tn) * ROW_BYTES
    return min(most, (RING_ROOM - CONSUMERS[tm // 64] * PART_BYTES) // stage)


UNSPLIT, ANY_SPLIT = (1,), (1, 2, 4, 8)  # a tile's SPLIT values in a Space

BF16_SPACE = Space(
    2,
    tiles=(
        (128, 256, 4, 8, ANY_SPLIT, True),
        (128, 256, 4, 16, UNSPLIT, False),
        (128, 192, 5, 8, UNSPLIT, True),
        (128, 128, 6, 8, ANY_SPLIT, True),
        (64, 256, 5, 8, ANY_SPLIT, True),
        (64, 128, 8, 8, ANY_SPLIT, True),
        (64, 32, 12, 8, ANY_SPLIT, False),
    ),
    swap_tiles=((128, 16, 8), (128, 32, 8), (128, 64, 8), (64, 16, 12)),
    splits=(2, 4, 8),
    # 128-row tiles of widths to 240, 192-row ones (three consumers) to 176 and 192: wider ones
    # need more than the 128 registers per thread a 512-thread block launches with (ptxas 13.5:
    # C7602 from 208; it allocates within that count whatever setmaxnreg budgets the code sets,
    # as NVIDIA/cutlass issue 2904 found for CuTe DSL's three-consumer kernels), and 128x248,
    # 192x184 and 192x200 spilled 8-24 bytes (the addresses of the element stores that wrote
    # the columns past the last 64-column part then; bench/gemm_configs.py)
    fitted=(
        (128, range(136, 241, 8)),
        (192, (*range(128, 177, 8), 192)),
        (256, range(128, 161, 8)),
    ),
)


def prune(space: Space):
    """An early_config_prune over ``space``: its candidates for the call's M, N, K."""

    def early_config_prune(configs, named):
        keep = set(space.candidates(int(named["M"]), int(named["N"]), int(named["K"])))
        return [c for c in configs if c in keep]

    return early_config_prune


@jittile.autotune(
    configs=BF16_SPACE.configs,
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": prune(BF16_SPACE)},
)
@jittile.kernel
def gemm_bf16_tuned(
    A: T.Tensor((None, None), "bfloat16"),
    B: T.Tensor((None, None), "bfloat16"),
    C: T.Tensor((None, None), "bfloat16"),
    W: T.Tensor((None,), "float32"),
    Arrivals: T.Tensor((None,), "int32"),
    M: T.int32,
    N: T.int32,
    K: T.int32,
    BM: T.constexpr,
    BN: T.constexpr,
    STAGES: T.constexpr,
    GROUP_M: T.constexpr,
    SPLIT: T.constexpr,
    SWAP: T.constexpr,
    CLUSTER: T.constexpr,
):
    """gemm_bf16 over the tuning space; with SPLIT > 1 the splits of a block meet through the
    fp32 workspace W and the counters Arrivals (zero before and after a launch), and the last
    rounds the block's sum into C; CLUSTER CTAs of a cluster share (multicast) their B tile."""
    if SWAP:
        gemm_body(
            B,
            A,
            C,
            W,
            Arrivals,
            1.0,
            N,
            M,
            K,
            "bfloat16",
            BF16_MMA[BN // 8 - 1],
            BM,
            BN,
            BK,
            STAGES,
            GROUP_M,
            SPLIT,
            True,
            False,
            False,
            CLUSTER,
            1,
        )
    else:
        gemm_body(
            A,
            B,
            C,
            W,
            Arrivals,
            1.0,
            M,
            N,
            K,
            "bfloat16",
            BF16_MMA[BN // 8 - 1],
            BM,
            BN,
            BK,
            STAGES,
            GROUP_M,
            SPLIT,
            False,
            False,
            False,
            CLUSTER,
            1,
        )


@functools.cache
def persistent_grid(sms: int):
    """The tuned kernels' grid: one CTA per job, at most one per SM (one function per SM count,
    made once: launches repeat)."""

    def grid(meta):
        rows, cols = (meta["N"], meta["M"]) if meta["SWAP"] else (meta["M"], meta["N"])
        size = meta["CLUSTER"]
        jobs = -(-rows // (meta["BM"] * size)) * -(-cols // meta["BN"]) * meta["SPLIT"]
        return (size * min(resident_clusters(sms, size), jobs),)

    return grid


@functools.cache
def resident_clusters(sms: int, size: int) -> int:
    """How many clusters of ``size`` CTAs a persistent grid launches: at most ``sms // size``,
    and on a GPU no more than it runs at once (``cuOccupancyMaxActiveClusters``: its GPCs'
    SM counts need not be multiples of the size, and a cluster that does not fit would run
    after the others, doubling the time). Every config keeps one CTA per SM (over half its
    shared memory), so the untuned kernel's count holds for all of them."""
    from jittile.runtime import driver

    if size == 1 or not driver.available():
        return sms // size
    resident = gemm_bf16.compile(target="sm_90a").max_active_clusters(
        (size, 1, 1), block_of({"BM": BM})
    )
    return min(sms // size, resident)


def arrival_slots(m: int, n: int) -> int:
    """Split-K's counters, enough for every config of an M x N product: two per 64-row block
    of a tile (tickets, and the splits done), at most 2 * ceil(rows / 128) * ceil(cols / 16)
    blocks in either orientation."""
    return 2 * max(2 * -(-rows // 128) * -(-cols // 16) for rows, cols in ((m, n), (n, m)))


def split_sums(values: dict, m: int, n: int, sms: int | None = None) -> int:
    """The fp32 elements of ``W`` a split-K config (``Config.kwargs``) uses on an M x N output
    on a persistent grid for ``sms`` SMs: a slot of every split tile's fragments per split
    (``split_slot``), the split tiles being those of the last partial wave (``job_split``),
    all of them where ``sms`` is None (any grid); 0 without split-K."""
    if values["SPLIT"] == 1:
        return 0
    rows, cols = (n, m) if values["SWAP"] else (m, n)
    tiles = -(-rows // values["BM"]) * -(-cols // values["BN"])
    if sms is not None:
        tiles %= min(sms, tiles * values["SPLIT"])  # the grid's CTAs (``persistent_grid``)
    return values["SPLIT"] * tiles * values["BM"] * values["BN"]


def workspace_for(space: Space, c, m: int, n: int, k: int, sms: int = SMS) -> tuple:
    """The split-K workspace (fp32 partial sums, int32 counters) for the candidates of an
    M x N x K product: made once per size, device and stream, as a launch's host work must stay
    small (a 1 x 4 output's placeholder where none splits). Every split-K launch leaves its
    counters zero, so launches in one stream's order share it; a launch on another stream (which
    may run at the same time) gets its own."""
    sums = max(split_sums(config.kwargs, m, n, sms) for config in space.candidates(m, n, k, sms))
    device = str(getattr(c, "device", "host"))
    if sums == 0:
        key, shape = (0, device, None), (1, 4)
    else:
        key, shape = (sums, arrival_slots(m, n), device, current_stream(c)), (m, n)
    found = WORKSPACES.get(key)
    if found is None:
        found = WORKSPACES[key] = new_workspace(c, *shape, sums=sums)
    return found


def current_stream(c) -> int | None:
    """The stream a launch on ``c`` runs on when it names none: its framework's current stream
    on its device (jittile's rule), None for NumPy (the interpreter) and Numba (the default)."""
    if hasattr(c, "new_empty"):  # torch
        import torch

        return torch.cuda.current_stream(c.device).cuda_stream
    if type(c).__module__.split(".")[0] == "cupy":
        import cupy

        with c.device:
            return cupy.cuda.get_current_stream().ptr
    return None


WORKSPACES: dict = {}  # (sums, counters, device, stream) -> (sums, counters), for split-K


def new_workspace(c, m: int, n: int, sums: int | None = None) -> tuple:
    """A split-K workspace for an M x N output where ``c`` lives: ``sums`` fp32 elements
    (default: enough for every config of the spaces, ``split_sums`` at 128x256, 128x192 or
    swapped 128x64 tiles split 8; 4 at least), left as they are, and ``arrival_slots(m, n)``
    int32 counters, zeroed; device arrays of c's framework (a launch during a CUDA graph capture
    can take no host array), else NumPy for the interpreter."""
    if sums is None:
        sums = max(
            split_sums({"SPLIT": 8, "SWAP": swap, "BM": 128, "BN": width}, m, n)
            for swap, width in ((False, 256), (False, 192), (True, 64))
        )
    return (
        allocate(c, (max(sums, 4),), "float32"),
        allocate(c, (arrival_slots(m, n),), "int32", zeroed=True),
    )


def allocate(like, shape: tuple, dtype: str | None = None, zeroed: bool = False):
    """A new C-contiguous array of ``shape`` where ``like`` lives, in its framework (torch,
    CuPy, a Numba device array, else NumPy for the interpreter): of ``dtype`` (a NumPy name),
    or of like's own element type where None; zeros where ``zeroed``, else left as it is."""
    if hasattr(like, "new_empty"):  # torch
        import torch

        kind = like.dtype if dtype is None else getattr(torch, dtype)
        make = torch.zeros if zeroed else torch.empty
        return make(shape, dtype=kind, device=like.device)
    kind = like.dtype if dtype is None else np.dtype(dtype)
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy

        with like.device:
            return (cupy.zeros if zeroed else cupy.empty)(shape, kind)
    host = (np.zeros if zeroed else np.empty)(shape, kind)
    if hasattr(like, "__cuda_array_interface__"):  # a Numba device array
        from numba import cuda

        return cuda.to_device(host)
    return host


RESTAGE_THREADS = 256
RESTAGE_CTAS = 1024  # at most; a CTA copies every RESTAGE_CTAS-th row


@jittile.kernel
def restage(Src, Dst, rows: T.int32, cols: T.int32, height: T.int32, width: T.int32):
    """``Dst`` (``height`` x ``width``) = ``Src`` (``rows`` x ``cols``) where both have the
    element, zero where only ``Dst`` has it: an operand copied into (or the output out of) a
    layout that TMA can describe, for ``stage``. Any strides on either side."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=RESTAGE_CTAS, block=RESTAGE_THREADS))
    for r in range(T.cuda.block_idx(), height, T.cuda.grid_dim("x")):
        for col in range(T.cuda.thread_idx(), width, RESTAGE_THREADS):
            if r < rows and col < cols:
                Dst[r, col] = Src[r, col]
            else:
                Dst[r, col] = 0


def copy_into(src, dst, rows: int, cols: int) -> None:
    """``restage`` on the GPU, else on the CPU interpreter, in the current stream's order."""
    from jittile.runtime import driver

    kernel = restage if driver.available() else restage.interpret
    height, width = dst.shape
    grid = max(1, min(height, RESTAGE_CTAS))
    kernel[grid, RESTAGE_THREADS](src, dst, rows, cols, height, width)


def aligned_width(cols: int, element_bytes: int) -> int:
    """The fewest columns, at least ``cols`` and one, whose row is a multiple of 16 bytes: the
    row stride a TensorMap needs."""
    per_16 = 16 // element_bytes
    return -(-max(cols, 1) // per_16) * per_16


def tma_ready(view) -> bool:
    """Whether a 2-D array (its ``jittile.runtime.arrays.device_view``) is as TMA reads and
    writes it: elements side by side in a row, rows a positive multiple of 16 bytes apart and
    not overlapping, the start 16-byte aligned (a host array's view is its contiguous upload)."""
    size, (rows, cols) = view.dtype.bytes, view.shape
    row, inner = view.strides
    return (
        (inner == size or cols == 1)
        and (row % 16 == 0 and row >= size * cols or rows == 1 and size * cols % 16 == 0)
        and view.ptr % 16 == 0
    )


def plain(x) -> bool:
    """Whether a 2-D ``x`` is ``tma_ready`` with rows a multiple of 16 bytes, as its framework's
    own flags tell a C-contiguous array with an aligned start (a torch tensor, a CuPy or NumPy
    array: a fraction of a microsecond, where their ``device_view`` takes a few): the common
    case, checked first; False where they cannot tell."""
    size = getattr(x, "itemsize", None)
    if size is None or x.shape[1] * size % 16:
        return False
    if hasattr(x, "is_contiguous"):  # torch
        return x.is_contiguous() and x.data_ptr() % 16 == 0
    if not getattr(getattr(x, "flags", None), "c_contiguous", False):  # Numba's flags: a dict
        return False
    return isinstance(x, np.ndarray) or x.data.ptr % 16 == 0  # a host array: uploaded anew


def stage(a, b, c) -> tuple:
    """``(a, b, c)`` as the kernels' TensorMaps can take them, and the output to copy back:
    each of A (M, K), B (N, K) and C (M, N) that is not ``tma_ready`` or whose row is not a
    multiple of 16 bytes (K or N not a multiple of 8 bf16 or 16 fp8 elements) is copied into
    a new array, A's and B's K zero-padded alike (zeros add nothing to the products), C's N
    padded (those columns are dropped); the second item is the padded C to copy into ``c``
    after the product, or None where ``c`` itself was written. Such a product pays the copies
    (``restage``, one pass over each staged array) besides the GEMM."""
    (m, k), n = a.shape, b.shape[0]
    if plain(a) and plain(b) and plain(c):
        return (a, b, c), None
    views = [device_view(x) for x in (a, b, c)]
    width = aligned_width(k, views[0].dtype.bytes)
    operands = []
    for x, view in zip((a, b), views):
        if width == k and tma_ready(view):
            operands.append(x)
        else:
            operands.append(allocate(x, (x.shape[0], width)))
            copy_into(x, operands[-1], x.shape[0], k)
    out = aligned_width(n, views[2].dtype.bytes)
    if out == n and tma_ready(views[2]):
        return (*operands, c), None
    padded = allocate(c, (m, out))
    return (*operands, padded), padded


def product_shape(a, b, c) -> tuple:
    """(M, N, K) of ``c = a @ b.T``; a ValueError naming the shapes unless a is (M, K), b (N, K)
    and c (M, N)."""
    if len(a.shape) == 2 and len(b.shape) == 2:
        (m, k), (n, width) = a.shape, b.shape
        if width == k and tuple(c.shape) == (m, n):
            return m, n, k
    raise ValueError(
        f"c = a @ b.T needs a (M, K), b (N, K) and c (M, N): got a {tuple(a.shape)}, "
        f"b {tuple(b.shape)} and c {tuple(c.shape)}"
    )


def run_tuned(
    tuned, space: Space, args: tuple, c, m: int, n: int, k: int, sms: int, extra: tuple = ()
) -> None:
    """Launch a tuned kernel (``args``: A, B, C, then the workspace; M, N, K and ``extra``
    after it): tuned on the GPU, else the first candidate on the CPU interpreter, one CTA per
    job at most. Operands that TMA cannot describe go through aligned copies (``stage``)."""
    from jittile.runtime import driver

    if m == 0 or n == 0:
        return
    if k == 0:  # every element an empty sum
        copy_into(c, c, 0, 0)
        return
    args, padded = stage(*args)
    workspace = workspace_for(space, args[2], m, n, k, sms)
    if driver.available():
        tuned[persistent_grid(sms), block_of](*args, *workspace, m, n, k, *extra)
    else:
        config = space.candidates(m, n, k, sms)[0]
        run_config(tuned, config, args, workspace, m, n, k, sms, extra, interpret=True)
    if padded is not None:
        copy_into(padded, c, m, n)


CONSTANTS = ("BM", "BN", "STAGES", "GROUP_M", "SPLIT", "SWAP", "CLUSTER")  # the tuned kernels'


def run_config(
    tuned,
    config: jittile.Config,
    args: tuple,
    workspace: tuple,
    m: int,
    n: int,
    k: int,
    sms: int = SMS,
    extra: tuple = (),
    interpret: bool = False,
) -> None:
    """One config of a tuned kernel, untuned (on the CPU interpreter with ``interpret``), on a
    ``workspace`` (``new_workspace``) whose counters are zero, as it leaves them."""
    meta = {"M": m, "N": n, **config.kwargs}
    kernel = tuned.kernel.interpret if interpret else tuned.kernel
    kernel[persistent_grid(sms)(meta), block_of(meta)](
        *args,
        *workspace,
        m,
        n,
        k,
        *extra,
        *(config.kwargs[name] for name in CONSTANTS),
        cluster=config.cluster,
    )


def launch(a, b, c, sms: int = SMS) -> None:
    """``c = a @ b.T`` for device arrays (torch or CuPy), tuned per (M, N, K). Without a GPU it
    runs on the CPU interpreter (NumPy ``ml_dtypes.bfloat16`` arrays) with the shape's first
    candidate config."""
    m, n, k = product_shape(a, b, c)
    run_tuned(gemm_bf16_tuned, BF16_SPACE, (a, b, c), c, m, n, k, sms)


def main() -> None:
    ck = gemm_bf16.compile(target="sm_90a")
    hgmma = [
        line.split(";")[0].split("*/")[-1].strip()
        for line in ck.sass.splitlines()
        if "HGMMA" in line
    ]
    print(
        f"gemm_bf16: {len(hgmma)} HGMMA per stage ({hgmma[0]}), "
        f"{ck.metadata['registers']} registers, {ck.metadata['local_bytes']} bytes of local "
        f"memory, {ck.metadata['shared_bytes']} bytes of shared memory"
    )
    from jittile.runtime import driver

    if not driver.available():
        print(
            "gemm_bf16: no GPU here; compiled only (launch(a, b, c) runs it on the CPU "
            "interpreter, ml_dtypes.bfloat16 NumPy arrays in and out)"
        )
        return
    import torch

    for m, n, k in ((512, 768, 320), (300, 520, 200), (16, 4096, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        launch(a, b, c, torch.cuda.get_device_properties(0).multi_processor_count)
        expected = a.float() @ b.float().T
        error = (c.float() - expected).abs().max().item()
        assert error <= 0.02 * expected.abs().max().item(), error
        print(
            f"gemm_bf16 {m}x{n}x{k}: OK on the GPU with {gemm_bf16_tuned.best_config} "
            f"(max |error| {error:.3g})"
        )


if __name__ == "__main__":
    main()
