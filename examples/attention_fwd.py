"""Attention forward on Hopper: ``o = softmax(q @ k.T * sm_scale) @ v`` per (batch, head), bf16 in
and out, fp32 softmax and accumulation, FlashAttention-3's warp-specialized design in jittile.

Tensors are ``(B, H, S, D)`` (K and V may have fewer heads, ``H % H_kv == 0``: grouped-query
attention), D in {64, 128, 256}, any S (the ragged end is masked; TMA loads fill beyond S with
zeros and TMA stores clip at S), causal or not, any strides with contiguous rows (the 4-D
TensorMaps take a model's ``(B, S, H, D)`` projections viewed as ``(B, H, S, D)``; a torch
``o`` is laid out as ``q``); ``return_lse=True`` also returns the natural log-sum-exp of every
row's scaled scores, float32 ``(B, H, S)``.

A tile is a block of ``64 * WG`` rows of one head's queries, ``WG`` being the CTA's consumer
warpgroups (FlashAttention-3's: 3 at D=64, 2 at D=128 and D=256); the grid has one persistent
CTA per SM (``ctas=``), each with:

- a *producer* warpgroup, its register budget lowered by ``setmaxnreg`` (24, or 32 beside three
  consumers), whose first thread loads the Q block once and streams K and V blocks of ``BN``
  rows (``DEFAULT_KEY_ROWS``: 128 at D=64, 96 causal; 128 at D=128, where FlashAttention-3
  has 176 without the causal mask; 80 at D=256; ``key_rows=`` picks another of
  ``KEY_ROWS[D]``) into a ring (4 stages
  at D=64, 2 at D=128 and D=256) of
  128B-swizzled shared buffers with TMA (``kfull`` / ``vfull`` barriers per stage, with
  transaction bytes, and ``kfree`` / ``vfree`` ones the consumers release: K as soon as its
  ``Q K^T`` is done, V after its ``P V``);
- the *consumer* warpgroups (budgets raised to 240, or 160 for three), each owning 64 query
  rows: ``S = Q K^T`` with ``wgmma.m64n{BN}k16`` from shared memory, the online softmax in
  registers (row maxima across the quad by ``shfl.sync.bfly``, ``ex2.approx`` with the scale
  folded into log2(e), the running sum kept per thread and reduced once at the end), ``O``
  rescaled in registers only where a row's maximum moved by more than ``RESCALE_LOG2``
  (FlashAttention-4's conditional rescaling: D=256 went from 0.92-0.94x cuDNN to 0.98-1.03x,
  runs 60 and 71), then ``P`` rounded
  to a bf16 A fragment in registers and ``O += P V`` with V's MN-major descriptor:
  FlashAttention-3's one ``wgmma.m64n{D}k16`` over V's whole stage into one (64, D) accumulator
  (``tiled_swizzle``: the TMA boxes' 64-column chunks one after another);
- ping-pong at D=64 and D=128 (``TURNS``, FlashAttention-3's rule): the consumers take turns
  at the tensor cores (named barriers 4 on), each issuing its MMAs in its turn and handing the
  turn to the next, so one warpgroup's softmax runs under the others' MMAs;
- FlashAttention-3's intra-warpgroup overlap: a turn issues block ``j``'s ``Q K^T`` together
  with block ``j - 1``'s ``P V``; ``wait_group(1)`` waits for ``Q K^T`` only, so block ``j``'s
  softmax also runs while this warpgroup's own ``P V`` is in flight (block 0 issues a ``P V``
  whose result block 1's, with ``scale_d`` 0, overwrites: a branch around the MMAs would make
  ptxas serialize them);
- the epilogue divides by the row sums, stores bf16 pairs with ``stmatrix`` into a
  128B-swizzled shared buffer (bank-conflict free) and writes them with a TMA store; the LSE
  goes out with element stores. Where Q and the ring leave no room for an output buffer (D=256:
  64 KB and 160 KB; D=128 with 176-row blocks: 32 KB and 176 KB) each warpgroup stages its rows
  of O in its own part of Q's buffer, once its MMAs are done.

The score mask is a few statements per register (the kernel's statement budget) and compares
each register's constant column offset with two per-thread limits: 64-bit column values per
register, hoisted out of the loop by ptxas, spilled 320 bytes at 176 columns (S 88 registers,
P 44, O 64). Persistent, as FlashAttention-3: one CTA per SM takes work items in turn
(``tile_of``: pairs of one head's longest and shortest row blocks, equal causal work), the
ring, Q's buffer and the turns carrying on from tile to tile, so that the next tile's K, V and
Q load under this one's epilogue (run 99: 1.01-1.12x the one-tile-per-CTA grid). The fragment helpers come from
``jittile.fragment_algebra``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

import jittile
from jittile import T
from jittile.fragment_algebra import (
    exp2_rows,
    quad_sum,
    row_max,
    scale_rows,
    thread_row_sum,
    to_bf16_a,
)
from jittile.layout import swizzle, tiled_swizzle, wgmma_a, wgmma_accumulator

# Per head dimension: the consumer warpgroups a CTA may have, 64 query rows each, the default
# first (FlashAttention-3's: three at D=64, its 192-row blocks; two at D=128 and D=256, where a
# third would not get the registers for S and O), and their register budgets with the
# producer's (setmaxnreg: 2 x 240 + 24, or 3 x 160 + 32, of the SM's 512 registers per 4 threads)
CONSUMERS = {64: (3, 2), 128: (2,), 256: (2,)}
BUDGETS = {2: (24, 240), 3: (32, 160)}  # consumers -> (producer, consumer) registers
# Per head dimension: whether the consumers take turns at the tensor cores (ping-pong), as
# FlashAttention-3 has them at D <= 128 and not at D=256 (run 71: 0.4-1.7% faster without)
TURNS = {64: True, 128: True, 256: False}
# Every exponential on the MUFU unit: at D=64 a block's exponentials (16 a clock an SM) take as
# long as its MMAs, but moving a share to the FMA pipes (T.exp2_fma in fragment_algebra's
# exp2_rows, fma_every=k) was slower on an H100 (run 134, TFLOP/s, non-causal / causal: all on
# MUFU 497 / 413, an eighth on the FMA pipes 476 / 416, a quarter 449 / 375, half 390 / 337).
# Per head dimension: the key rows per pipeline stage (BN) a build may use; the K/V ring has 4
# stages at D=64, 2 at D=128 and D=256. At D=64 192x128 tiles (FlashAttention-3's) and, causal,
# 192x96: with three consumers' budgets of 160 registers the causal 192x128 build spills 8
# bytes (two values kept across the loop), though it ran 2% faster in run 72 (399 against 390
# TFLOP/s). At D=128 128x128 tiles, causal or not, and FA3's 128x176 (S 88 registers beside
# O's 64; Q's 32 KB and 2 stages of 176-row K and V, 176 KB, leave no room for an O buffer):
# on the H200 128 rows ran faster without the causal mask at S <= 4096 (run 104, against cuDNN:
# S=4096 0.999x where 176 rows gave 0.986x, S=1024 0.951x / 0.907x, ragged 3000 1.092x /
# 1.077x, grouped-query 1.007x / 0.995x) and 0.8% slower at S=8192 (1.009x / 1.017x), and with
# it everywhere (fewer masked scores on the diagonal); at D=256 FA3's 128x80 tiles: S stays 40
# registers beside O's 128, and Q (64 KB) plus 2 stages of 80-row K and V (160 KB) fill the
# shared memory. KEY_ROWS and DEFAULT_KEY_ROWS (by head dimension and causal mask) are the
# host's (key_block, the benchmark): the kernel reads only immutable globals, since one that
# reads a mutable global has it re-checked on every launch (jittile/watch.py).
KEY_ROWS = {64: (128, 96), 128: (128, 176), 256: (80,)}
DEFAULT_KEY_ROWS = {
    (64, False): 128,
    (64, True): 96,
    (128, False): 128,
    (128, True): 128,
    (256, False): 80,
    (256, True): 80,
}
SHARED_BYTES = 232448  # the H200's opt-in shared memory per block
SMS = 132  # the H200's SMs: the interpreter's persistent CTAs (a launch asks its device)
LOAD = "cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"
# The bf16 wgmma forms by N (8, 16, ... 256: index N // 8 - 1): Q K^T's n=BN, P V's n=D.
MMA = tuple(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16" for n in range(8, 257, 8))
NEG = -1.0e30  # a masked score: exp2 of it (minus any finite row maximum) is 0
# A row's running maximum moves only when a block's scores exceed it by more than this (in log2
# units, after the scale): the probabilities of the blocks in between are at most 2**2 times
# what they would be under the exact maximum, and O is rescaled only where a maximum moved
# (FlashAttention-4's conditional rescaling; the result divides by the sum taken under the same
# maximum, so it is the softmax either way). FlashAttention-4's 8 was faster still but less
# accurate: up to 1.5x cuDNN's max error against float32 on the H200, where rescaling at any
# move matched it, 1.5-5.7% slower (run 97); 2 stays within 1.06x of it, 0.4-1.6% slower than 8
# (run 98). Interpreted, 8 gave 1.32x the bf16 rounding floor, 2 gives 1.09x
# (tests/test_attention.py).
RESCALE_LOG2 = 2.0
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
HEAD_DIMS = tuple(KEY_ROWS)
PINGPONG = 4  # named barriers 4 on: the consumer warpgroups' turns (1 to 3: their O stores)


@jittile.func
def mask_scores(s_acc, kv0, q0, seq, causal):
    """Scores of keys at or beyond ``seq`` (and, causal, after the query) become NEG. Each
    register is compared by its column's constant offset from the thread's first column (a
    compare with an immediate) against the thread's two row limits, computed once in 32 bits:
    per-register 64-bit column values would be hoisted out of the loop, two registers each."""
    first = T.int32(kv0 + s_acc.col(0))  # the key of the thread's first column
    # every step truncated to 32 bits: numba widens int32 arithmetic to 64 bits, and a 64-bit
    # compare is two ISETPs
    top_end = T.int32(T.int32(seq) - first)  # columns at offsets from here on are masked
    bottom_end = top_end
    if causal:
        top_end = min(top_end, T.int32(T.int32(q0 + s_acc.row(0)) + 1 - first))
        bottom_end = min(bottom_end, T.int32(T.int32(q0 + s_acc.row(2)) + 1 - first))
    for i in T.unroll(s_acc.size // 4):
        offset = T.int32(s_acc.col(4 * i) - s_acc.col(0))  # registers 4i, 4i + 1: columns +0, +1
        after = T.int32(offset + 1)
        s_acc[4 * i] = s_acc[4 * i] if offset < top_end else NEG
        s_acc[4 * i + 1] = s_acc[4 * i + 1] if after < top_end else NEG
        s_acc[4 * i + 2] = s_acc[4 * i + 2] if offset < bottom_end else NEG
        s_acc[4 * i + 3] = s_acc[4 * i + 3] if after < bottom_end else NEG


@jittile.func
def softmax_step(
    s_acc, top_max, bottom_max, top_sum, bottom_sum, scale, rescale, kv0, q0, seq, causal
):
    """The online softmax of one block of scores, in place (``s_acc`` becomes the unnormalized
    probabilities): the running row maxima (moved only past ``rescale``) and this thread's
    running row sums, the factors ``alpha`` that rescale what was accumulated under the old
    maxima (1 where a maximum stayed), and whether either maximum moved."""
    BN = s_acc.shape[1]  # the key block's rows
    if kv0 + BN > seq or (causal and kv0 + BN > q0):
        mask_scores(s_acc, kv0, q0, seq, causal)
    block_top, block_bottom = row_max(s_acc)
    move_top = (block_top - top_max) * scale > rescale
    move_bottom = (block_bottom - bottom_max) * scale > rescale
    new_top = block_top if move_top else top_max
    new_bottom = block_bottom if move_bottom else bottom_max
    top_alpha = T.exp2((top_max - new_top) * scale)  # exactly 1 where the maximum stayed
    bottom_alpha = T.exp2((bottom_max - new_bottom) * scale)
    exp2_rows(s_acc, scale, new_top, new_bottom)
    block_top, block_bottom = thread_row_sum(s_acc)
    return (
        new_top,
        new_bottom,
        top_sum * top_alpha + block_top,
        bottom_sum * bottom_alpha + block_bottom,
        top_alpha,
        bottom_alpha,
        move_top or move_bottom,
    )


@jittile.func
def block_boundary(LSE, top_sum, bottom_sum, seq):
    """A branch never taken (``seq`` is never negative) whose block reads the row sums: it ends
    the softmax's basic block. ptxas places a wgmma wait as early as its basic block allows, so
    without it the wait for this warpgroup's own ``P V`` lands above the softmax's first exp2
    (every build, in the SASS) and FlashAttention-3's intra-warpgroup overlap does not happen."""
    if seq < 0:
        for r in T.unroll(8):
            LSE[0, 0, r] = top_sum + bottom_sum * r


@jittile.func
def multiply_qk(s_acc, q_s, k_s, consumer, stage, DH):
    """``S = Q K^T`` of the warpgroup's 64 rows against K's ``stage`` (committed; the caller
    fences)."""
    for d in T.unroll(DH):
        T.cuda.tile.apply(
            T.ptx[MMA[s_acc.shape[1] // 8 - 1]],
            s_acc,
            q_s[d, consumer, 0, 0],
            k_s[stage, d, 0, 0].T,
            scale_d=min(d, 1),
        )
    T.ptx.wgmma.commit_group.sync.aligned()


@jittile.func
def multiply_pv(o_acc, p_frag, v_s, stage, accumulate):
    """``O += P V`` (``O = P V`` unless ``accumulate``) from the bf16 P fragment and V's
    ``stage``: FlashAttention-3's one n=D MMA over the whole stage; the caller fences and
    commits."""
    T.cuda.tile.apply(
        T.ptx[MMA[o_acc.shape[1] // 8 - 1]], o_acc, p_frag, v_s[stage, 0, 0], scale_d=accumulate
    )


@jittile.func
def load_block(ring, stage, src, origin, mbar, BN):
    """TMA: ``BN`` rows of ``src`` from ``origin`` (batch, head, row) into ``ring[stage]``, one
    box per 64 columns of D (the ring's second axis), completing on ``mbar``."""
    batch, head, row = origin
    T.cuda.tile.apply(
        T.ptx[LOAD],
        ring[stage],
        src,
        box=(1, 1, BN, 64),
        coords=(batch, head, row, 0),
        coord_steps=((0, 0, 0, 64),),
        swizzle=3,
        mbar=mbar,
    )


@jittile.func
def store_rows(o_acc, o_s, d0, consumer, row, lane, top_inv, bottom_inv):
    """An accumulator of O, its rows divided (``top_inv`` / ``bottom_inv``: the inverse row
    sums), as bf16 into ``o_s[d0 + d, consumer]`` for its 64-column blocks ``d`` (registers
    ``32d`` on): four 8x8 matrices per 16 columns."""
    scale_rows(o_acc, top_inv, bottom_inv)
    for k in T.unroll(o_acc.shape[1] // 16):
        r = 8 * k  # columns 16k.. of O: block k // 4, 16-column group k % 4
        T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
            o_s.ptr_to([d0 + k // 4, consumer, 0, 0, row, 16 * (k % 4) + 8 * (lane // 16)]),
            T.ptx.cvt.rn.bf16x2.f32(o_acc[r + 1], o_acc[r]),
            T.ptx.cvt.rn.bf16x2.f32(o_acc[r + 3], o_acc[r + 2]),
            T.ptx.cvt.rn.bf16x2.f32(o_acc[r + 5], o_acc[r + 4]),
            T.ptx.cvt.rn.bf16x2.f32(o_acc[r + 7], o_acc[r + 6]),
        )


@jittile.func
def store_output(o_acc, o_s, out, origin, consumer, lane, leader, inverse, DH):
    """Consumer warpgroup ``consumer``'s 64 rows of O (``o_acc``), multiplied by the inverse row
    sums (``inverse``: top, bottom), into ``o_s[:, consumer]`` (128B-swizzled: a stmatrix's 16-byte
    rows fall in eight different bank groups), then written by one TMA store at ``origin``
    (batch, head, first row); the caller waits for the bulk group."""
    top_inv, bottom_inv = inverse
    batch, head, q0 = origin
    row = (T.cuda.warp_id() % 4) * 16 + lane % 8 + 8 * ((lane // 8) % 2)
    store_rows(o_acc, o_s, 0, consumer, row, lane, top_inv, bottom_inv)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.sync(1 + consumer, 128)
    if leader:
        T.cuda.tile.apply(
            T.ptx[STORE],
            out,
            o_s[0:DH, consumer],
            box=(1, 1, 64, 64),
            coords=(batch, head, q0, 0),
            coord_steps=((0, 0, 0, 64),),
            swizzle=3,
        )
        T.ptx.cp.async_.bulk.commit_group()


@jittile.func
def tile_of(j, first, ctas, pairs, row_blocks, heads):
    """The ``j``-th tile of the persistent CTA ``first`` of ``ctas``: its row block, head and batch
    and whether it exists. The CTA takes work items ``first``, ``first + ctas``, ... in turn, each
    a pair of one head's row blocks, the longest first (``R - 1 - p``, then ``p``, of ``R``), so
    that causal or not every item is about ``R + 1`` key blocks of work and a static round robin
    keeps the SMs equally busy; an odd ``R``'s middle block is its pair alone (``exists`` is
    false for its second half). Consecutive items are one head's, which shares K and V in the L2.
    32-bit unsigned division: a 64-bit one is a call."""
    item = T.uint32(T.uint32(first) + T.uint32(T.uint32(j) // 2) * T.uint32(ctas))
    pair = T.int32(item % T.uint32(pairs))
    rest = T.uint32(item // T.uint32(pairs))
    head = T.int32(rest % T.uint32(heads))
    batch = T.int32(rest // T.uint32(heads))
    mirror = T.int32(row_blocks - 1 - pair)
    second = (j % 2) == 1
    row_block = pair if second else mirror
    return row_block, head, batch, not second or pair != mirror


@jittile.func
def tile_rows(row_block, seq, BM, BN, CAUSAL):
    """A tile's first query row and how many BN-row K/V blocks it attends to (with CAUSAL, those
    up to its last row): one rule for the producer, which loads them, and the consumers."""
    m0 = row_block * BM
    kv_end = seq
    if CAUSAL:
        kv_end = min(seq, m0 + BM)
    return m0, T.int32(T.int32(kv_end + BN - 1) // BN)


@jittile.kernel
def attention_fwd(
    Q: T.Tensor((None, None, None, None), "bfloat16"),
    K: T.Tensor((None, None, None, None), "bfloat16"),
    V: T.Tensor((None, None, None, None), "bfloat16"),
    O: T.Tensor((None, None, None, None), "bfloat16"),  # noqa: E741
    LSE: T.Tensor((None, None, None), "float32"),
    seq: T.int32,
    heads: T.int32,
    batches: T.int32,
    group: T.int32,
    scale: T.float32,
    rescale: T.float32,  # O is rescaled where a row maximum moves by more than this (log2 units)
    D: T.constexpr,
    CAUSAL: T.constexpr,
    BN: T.constexpr,  # key rows per pipeline stage, one of KEY_ROWS[D]
    WG: T.constexpr,  # consumer warpgroups, one of CONSUMERS[D]
    PRODUCER_REGS: T.constexpr,  # the register budgets, BUDGETS[WG]
    CONSUMER_REGS: T.constexpr,
    TURNS: T.constexpr,  # whether the consumers take turns at the tensor cores (ping-pong)
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128 * (WG + 1)))
    BM = 64 * WG  # query rows per tile
    DH = D // 64  # 64-column blocks of the head dimension (one 128-byte swizzle atom each)
    STAGES = 4 if D == 64 else 2  # K and V blocks in the ring
    # O staged in Q's buffer (each warpgroup's part, once its MMAs are done) where Q, the ring and
    # an O buffer would not fit (1 KB left for the barriers)
    O_IN_Q = 2 * (BM * D * 2) + STAGES * 2 * (BN * D * 2) > SHARED_BYTES - 1024
    tid = T.cuda.thread_idx("x")
    # broadcast from lane 0, which ptxas knows to be warp-uniform: what depends on it (the
    # consumers' Q and O descriptors) is computed in uniform registers, not moved per wgmma
    warpgroup = T.cuda.shfl_idx(T.int32(T.cuda.warp_id() // 4), 0)
    # persistent: CTA `first` of `ctas` takes every ctas-th work item (a pair of row blocks)
    first = T.cuda.block_idx("x")
    ctas = T.cuda.grid_dim("x")
    row_blocks = T.int32(T.int32(seq + BM - 1) // BM)
    pairs = T.int32(T.int32(row_blocks + 1) // 2)
    items = T.int32(pairs * T.int32(heads * batches))
    tiles = 2 * T.int32(T.int32(items - first + ctas - 1) // ctas)  # halves of this CTA's items
    Q_s = T.alloc_shared(
        (DH, WG, 1, 1, 64, 64),
        "bfloat16",
        layout=swizzle(3, (DH, WG, 1, 1, 64, 64), "bfloat16"),
        align=1024,
    )
    K_s = T.alloc_shared(
        (STAGES, DH, 1, 1, BN, 64),
        "bfloat16",
        layout=swizzle(3, (STAGES, DH, 1, 1, BN, 64), "bfloat16"),
        align=1024,
    )
    # V's stages as one (BN, D) B operand of the P V MMA: 64-column swizzled chunks one after
    # another, as the TMA boxes fill them
    V_s = T.alloc_shared(
        (STAGES, 1, 1, BN, D),
        "bfloat16",
        layout=tiled_swizzle(3, (STAGES, 1, 1, BN, D), "bfloat16"),
        align=1024,
    )
    if not O_IN_Q:
        O_s = T.alloc_shared(
            (DH, WG, 1, 1, 64, 64),
            "bfloat16",
            layout=swizzle(3, (DH, WG, 1, 1, 64, 64), "bfloat16"),  # stmatrix without conflicts
            align=1024,
        )
    qfull = T.alloc_shared((1,), "uint64")
    qfree = T.alloc_shared((1,), "uint64")
    kfull = T.alloc_shared((STAGES,), "uint64")
    vfull = T.alloc_shared((STAGES,), "uint64")
    kfree = T.alloc_shared((STAGES,), "uint64")
    vfree = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(qfull.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.init.shared.b64(qfree.ptr_to([0]), T.uint32(WG))
        for s in T.unroll(STAGES):
            T.ptx.mbarrier.init.shared.b64(kfull.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(vfull.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(kfree.ptr_to([s]), T.uint32(WG))
            T.ptx.mbarrier.init.shared.b64(vfree.ptr_to([s]), T.uint32(WG))
        T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    # K/V ring positions and Q's uses count on across the CTA's tiles, in 32 bits (64-bit is two
    # registers and two compares)
    loaded, consumed = T.int32(0), T.int32(0)  # K/V blocks through the ring, per side
    q_loads, q_uses = T.int32(0), T.int32(0)
    if warpgroup == 0:  # producer
        T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
        if tid == 0:
            for t in range(tiles):
                load_block_row, load_head, load_batch, load_exists = tile_of(
                    t, first, ctas, pairs, row_blocks, heads
                )
                if load_exists:
                    load_m0, load_blocks = tile_rows(load_block_row, seq, BM, BN, CAUSAL)
                    kv_head = T.int32(T.uint32(load_head) // T.uint32(group))
                    for load in range(load_blocks):
                        load_at = T.int32(loaded + load)
                        load_stage = T.int32(load_at % STAGES)
                        free_phase = T.int32(T.int32(load_at // STAGES) & 1) ^ 1
                        T.cuda.mbarrier_wait(kfree.ptr_to([load_stage]), free_phase)
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                            kfull.ptr_to([load_stage]), T.uint32(BN * D * 2)
                        )
                        load_block(
                            K_s,
                            load_stage,
                            K,
                            (load_batch, kv_head, load * BN),
                            kfull.ptr_to([load_stage]),
                            BN,
                        )
                        if load == 0:  # Q once the last tile's consumers are done with its buffer
                            T.cuda.mbarrier_wait(qfree.ptr_to([0]), T.int32(q_loads & 1) ^ 1)
                            T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                                qfull.ptr_to([0]), T.uint32(BM * D * 2)
                            )
                            T.cuda.tile.apply(
                                T.ptx[LOAD],
                                Q_s,
                                Q,
                                box=(1, 1, 64, 64),
                                coords=(load_batch, load_head, load_m0, 0),
                                coord_steps=((0, 0, 0, 64), (0, 0, 64, 0)),
                                swizzle=3,
                                mbar=qfull.ptr_to([0]),
                            )
                        T.cuda.mbarrier_wait(vfree.ptr_to([load_stage]), free_phase)
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                            vfull.ptr_to([load_stage]), T.uint32(BN * D * 2)
                        )
                        for d in T.unroll(DH):  # one box per 64-column chunk
                            T.cuda.tile.apply(
                                T.ptx[LOAD],
                                V_s[load_stage, 0:1, 0:1, 0:BN, 64 * d : 64 * d + 64],
                                V,
                                box=(1, 1, BN, 64),
                                coords=(load_batch, kv_head, load * BN, 64 * d),
                                swizzle=3,
                                mbar=vfull.ptr_to([load_stage]),
                            )
                    loaded = T.int32(loaded + load_blocks)
                    q_loads = T.int32(q_loads + 1)
    else:  # consumers: warpgroup 1 owns a tile's query rows m0..m0+63, warpgroup 2 the next 64...
        T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
        consumer = warpgroup - 1
        leader = tid % 128 == 0
        lane = T.cuda.lane_id()
        s_acc = T.alloc_local((64, BN), "float32", layout=wgmma_accumulator)
        p_frag = T.alloc_local((64, BN), "bfloat16", layout=wgmma_a)
        o_acc = T.alloc_local((64, D), "float32", layout=wgmma_accumulator)
        if TURNS:
            if consumer == WG - 1:  # the turns go round: warpgroup 1 issues its MMAs first
                T.ptx.bar.arrive(PINGPONG, 256)
        for j in range(tiles):
            row_block, head, batch, exists = tile_of(j, first, ctas, pairs, row_blocks, heads)
            if exists:
                m0, blocks = tile_rows(row_block, seq, BM, BN, CAUSAL)
                q0 = m0 + 64 * consumer
                T.cuda.mbarrier_wait(qfull.ptr_to([0]), T.int32(q_uses & 1))
                top_max, bottom_max = T.float32(NEG), T.float32(NEG)
                top_sum, bottom_sum = T.float32(0.0), T.float32(0.0)
                # FlashAttention-3's intra-warpgroup overlap: each turn at the tensor cores
                # issues this block's S = Q K^T and the previous block's O += P V, and the
                # softmax runs after wait_group(1) (Q K^T done) while P V is still in flight.
                # Block 0's P V has no block before it: it runs on whatever the registers and
                # V's other stage hold, and block 1's (or the last) P V overwrites O (scale_d 0),
                # so no branch divides the MMAs (a branch would make ptxas serialize them).
                for block in range(blocks):
                    at = T.int32(consumed + block)
                    stage = T.int32(at % STAGES)
                    previous = T.int32(T.int32(at + STAGES - 1) % STAGES)
                    T.cuda.mbarrier_wait(kfull.ptr_to([stage]), T.int32(at // STAGES) & 1)
                    if block > 0:
                        T.cuda.mbarrier_wait(
                            vfull.ptr_to([previous]), T.int32(T.int32(at - 1) // STAGES) & 1
                        )
                    if TURNS:
                        T.ptx.bar.sync(PINGPONG + consumer, 256)
                    T.ptx.wgmma.fence.sync.aligned()
                    multiply_qk(s_acc, Q_s, K_s, consumer, stage, DH)
                    multiply_pv(o_acc, p_frag, V_s, previous, block > 1)
                    T.ptx.wgmma.commit_group.sync.aligned()
                    if TURNS:  # the next warpgroup's turn (the last one's goes round)
                        T.ptx.bar.arrive(PINGPONG + (consumer + 1) % WG, 256)
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    if leader:
                        T.ptx.mbarrier.arrive.shared.b64(kfree.ptr_to([stage]))
                        # the tile's last Q K^T is done: the next tile's Q may load under this
                        # block's softmax, its P V and the epilogue
                        if not O_IN_Q and block == blocks - 1:
                            T.ptx.mbarrier.arrive.shared.b64(qfree.ptr_to([0]))
                    top_max, bottom_max, top_sum, bottom_sum, top_alpha, bottom_alpha, moved = (
                        softmax_step(
                            s_acc,
                            top_max,
                            bottom_max,
                            top_sum,
                            bottom_sum,
                            scale,
                            rescale,
                            block * BN,
                            q0,
                            seq,
                            CAUSAL,
                        )
                    )
                    if D >= 128:  # at D=64, P's registers held to the wait would spill
                        block_boundary(LSE, top_sum, bottom_sum, seq)
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if leader and block > 0:
                        T.ptx.mbarrier.arrive.shared.b64(vfree.ptr_to([previous]))
                    if moved:  # before the first P V: O is overwritten
                        scale_rows(o_acc, top_alpha, bottom_alpha)
                    to_bf16_a(s_acc, p_frag)
                at = T.int32(consumed + blocks - 1)
                last = T.int64(at % STAGES)  # 64-bit: it feeds a 64-bit descriptor
                T.cuda.mbarrier_wait(vfull.ptr_to([last]), T.int32(at // STAGES) & 1)
                T.ptx.wgmma.fence.sync.aligned()
                multiply_pv(o_acc, p_frag, V_s, last, blocks > 1)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    T.ptx.mbarrier.arrive.shared.b64(vfree.ptr_to([last]))
                top_sum = quad_sum(top_sum)
                bottom_sum = quad_sum(bottom_sum)
                inverse = (T.rcp(top_sum, approx=True), T.rcp(bottom_sum, approx=True))
                # the previous tile's O store has read the buffer (its leader waits for that
                # here, not after issuing it, where the warpgroup's next MMAs would wait too)
                if leader and not O_IN_Q:
                    T.ptx.cp.async_.bulk.wait_group.read(0)
                T.ptx.bar.sync(1 + consumer, 128)
                # the warpgroup's MMAs are done with its part of Q: O may be staged there
                if O_IN_Q:
                    store_output(
                        o_acc, Q_s, O, (batch, head, q0), consumer, lane, leader, inverse, DH
                    )
                else:
                    store_output(
                        o_acc, O_s, O, (batch, head, q0), consumer, lane, leader, inverse, DH
                    )
                if T.uint32(lane) % 4 == 0:  # 32-bit: a 64-bit lane test spilled at D=256
                    top_row = q0 + s_acc.row(0)
                    if top_row < seq:
                        LSE[batch, head, top_row] = (top_max * scale + T.log2(top_sum)) * LN2
                    if top_row + 8 < seq:
                        LSE[batch, head, top_row + 8] = (
                            bottom_max * scale + T.log2(bottom_sum)
                        ) * LN2
                if leader and O_IN_Q:  # Q's buffer, holding O, may take the next tile's Q
                    T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.ptx.mbarrier.arrive.shared.b64(qfree.ptr_to([0]))
                consumed = T.int32(consumed + blocks)
                q_uses = T.int32(q_uses + 1)
        if TURNS:
            if consumer == 0:  # the last warpgroup's final hand-over
                T.ptx.bar.sync(PINGPONG, 256)
        if leader:
            T.ptx.cp.async_.bulk.wait_group(0)


def _constants(
    head_dim: int, causal: bool, key_rows: int | None, consumers: int | None, turns: bool | None
) -> tuple:
    """The kernel's T.constexpr arguments of a build: D, CAUSAL, BN, WG, the budgets and
    TURNS (``turns``, or the head dimension's default)."""
    rows = key_block(head_dim, causal, key_rows)  # refuses head dimensions not built
    choices = CONSUMERS[head_dim]
    if consumers is None:
        consumers = choices[0]
    elif consumers not in choices:
        raise ValueError(
            f"attention: consumers={consumers} is not built at head dimension {head_dim} "
            f"(one of {choices})"
        )
    return (
        head_dim,
        causal,
        rows,
        consumers,
        *BUDGETS[consumers],
        TURNS[head_dim] if turns is None else turns,
    )


def _specs(head_dim: int):
    bf16 = T.Tensor((None, None, None, None), "bfloat16")
    return (
        bf16,
        bf16,
        bf16,
        bf16,
        T.Tensor((None, None, None), "float32"),
        np.int32(1),
        np.int32(1),
        np.int32(1),
        np.int32(1),
        np.float32(1.0),
        np.float32(RESCALE_LOG2),
    )


def compiled(
    head_dim: int = 128,
    causal: bool = False,
    target: str = "sm_90a",
    key_rows: int | None = None,
    consumers: int | None = None,
    turns: bool | None = None,
):
    """The CompiledKernel of one configuration (PTX, SASS, registers...), without a GPU."""
    constants = _constants(head_dim, causal, key_rows, consumers, turns)
    return attention_fwd.compile(*_specs(head_dim), *constants, target=target)


def other_builds(head_dim: int, causal: bool) -> list[dict]:
    """The ``attention`` options of every build besides the default one at this head dimension:
    each other key block, consumer count, turn-taking the other way, and O rescaled at every
    move of a row maximum (what bench/attention.py times beside the default)."""
    default = key_block(head_dim, causal)
    return (
        [{"key_rows": rows} for rows in KEY_ROWS[head_dim] if rows != default]
        + [{"consumers": n} for n in CONSUMERS[head_dim][1:]]
        + [{"turns": not TURNS[head_dim]}]
        + [{"rescale_log2": 0.0}]
    )


def key_block(head_dim: int, causal: bool, key_rows: int | None = None) -> int:
    """The key block of a build: ``key_rows`` if given (one of ``KEY_ROWS[head_dim]``), else
    ``DEFAULT_KEY_ROWS`` of the head dimension and the causal mask."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(
            f"attention: head dimension {head_dim} is not supported (one of {HEAD_DIMS})"
        )
    choices = KEY_ROWS[head_dim]
    if key_rows is None:
        return DEFAULT_KEY_ROWS[head_dim, causal]
    if key_rows not in choices:
        raise ValueError(
            f"attention: key_rows={key_rows} is not built at head dimension {head_dim} "
            f"(one of {choices})"
        )
    return key_rows


def attention(
    q,
    k,
    v,
    causal: bool = False,
    sm_scale: float | None = None,
    return_lse: bool = False,
    key_rows: int | None = None,
    consumers: int | None = None,
    turns: bool | None = None,
    ctas: int | None = None,
    rescale_log2: float = RESCALE_LOG2,
):
    """``softmax(q @ k.T * sm_scale) @ v`` over (B, H, S, D) bf16 tensors (K/V with H_kv heads,
    H % H_kv == 0); ``sm_scale`` defaults to 1/sqrt(D). torch CUDA tensors launch on the GPU;
    NumPy ``ml_dtypes.bfloat16`` arrays run on the CPU interpreter. Returns ``o`` (and, with
    ``return_lse``, the float32 (B, H, S) natural log-sum-exp of the scaled scores).
    ``key_rows`` picks another of ``KEY_ROWS[D]`` than the default (``DEFAULT_KEY_ROWS``),
    ``consumers`` another of ``CONSUMERS[D]`` than its consumer warpgroups, ``turns`` whether
    the consumers take turns at the tensor cores (default ``TURNS[D]``), ``ctas`` how many
    persistent CTAs share the tiles (default one per SM; the interpreter's: ``SMS``),
    ``rescale_log2`` how far (in log2 units of the scaled scores) a row's maximum must move
    before O is rescaled (default ``RESCALE_LOG2``; 0 rescales at every move, FlashAttention-3's
    rule, the most accurate)."""
    if not rescale_log2 >= 0.0:  # NaN too
        raise ValueError(
            f"attention: rescale_log2 must be a number >= 0, got {rescale_log2!r} (the "
            f"probabilities of a block may reach 2**rescale_log2 before O is rescaled)"
        )
    if len(q.shape) != 4 or len(k.shape) != 4:
        raise ValueError(
            f"attention: q, k and v must be (B, H, S, D) tensors, got {tuple(q.shape)}, "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    constants = _constants(head_dim, causal, key_rows, consumers, turns)
    if tuple(k.shape) != (batch, kv_heads, seq, head_dim) or tuple(v.shape) != tuple(k.shape):
        raise ValueError(
            f"attention: k and v must be (B, H_kv, S, D) = "
            f"({batch}, H_kv, {seq}, {head_dim}), got {tuple(k.shape)} and "
            f"{tuple(v.shape)}"
        )
    if heads % kv_heads:
        raise ValueError(
            f"attention: {heads} query heads are not a multiple of {kv_heads} key/value heads"
        )
    scale = (1.0 / math.sqrt(head_dim) if sm_scale is None else sm_scale) * LOG2E
    consumers = constants[3]
    rows = 64 * consumers
    items = (-(-seq // rows) + 1) // 2 * heads * batch  # pairs of row blocks (tile_of)
    block = (128 * (consumers + 1),)
    args = (
        np.int32(seq),
        np.int32(heads),
        np.int32(batch),
        np.int32(heads // kv_heads),
        np.float32(scale),
        np.float32(rescale_log2),
        *constants,
    )
    if isinstance(q, np.ndarray):
        o = np.zeros(q.shape, q.dtype)
        lse = np.zeros((batch, heads, seq), np.float32)
        grid = (min(items, ctas or SMS),)
        attention_fwd.interpret[grid, block](q, k, v, o, lse, *args)
    else:
        import torch

        o = torch.empty_like(q)
        lse = torch.empty((batch, heads, seq), device=q.device, dtype=torch.float32)
        grid = (min(items, ctas or _multiprocessors(q.device.index)),)
        attention_fwd[grid, block](q, k, v, o, lse, *args)
    return (o, lse) if return_lse else o


@functools.cache
def _multiprocessors(device: int | None) -> int:
    """The SMs of a torch CUDA device: the persistent grid's CTAs."""
    import torch

    return torch.cuda.get_device_properties(device or 0).multi_processor_count


def reference(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """float32 NumPy attention (and its LSE) of NumPy inputs, for tests."""
    q, k, v = (np.asarray(x, np.float32) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    seq, head_dim = q.shape[2], q.shape[3]
    scores = q @ k.swapaxes(-1, -2) * (1.0 / math.sqrt(head_dim) if sm_scale is None else sm_scale)
    if causal:
        scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(-1, keepdims=True)
    return (weights / total) @ v, (top + np.log(total))[..., 0]


def main() -> None:
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            ck = compiled(head_dim, causal)
            print(
                f"attention_fwd D={head_dim} causal={causal}: {ck.metadata['registers']} "
                f"registers, {ck.metadata['local_bytes']} bytes of local memory, "
                f"{ck.metadata['shared_bytes']} bytes of shared memory"
            )


if __name__ == "__main__":
    main()
