"""Kernels applying ``T.cuda.atomic_*`` from every thread of a few CTAs, and the NumPy
expectations that hold in any order of the atomics (tests/test_atomics.py interpreted,
tests/test_gpu_atomics.py on the GPU)."""

import numpy as np

import jittile
from jittile import T

THREADS, BLOCKS = 64, 3
N = THREADS * BLOCKS
REDUCE = {
    "add": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
INTEGERS = ["int32", "uint32", "int64", "uint64"]


@jittile.kernel
def apply(target, values, old, OP: T.constexpr):
    """Thread i applies ``OP`` with ``values[i]`` to ``target[i % 4]`` (from 3 CTAs) and keeps
    the old value in ``old[i]``."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=THREADS))
    i = T.cuda.block_idx() * THREADS + T.cuda.thread_idx()
    if OP == "add":
        old[i] = T.cuda.atomic_add(target, i % 4, values[i])
    elif OP == "max":
        old[i] = T.cuda.atomic_max(target, i % 4, values[i], sem="acquire")
    elif OP == "min":
        old[i] = T.cuda.atomic_min(target, i % 4, values[i], sem="release", scope="cta")
    elif OP == "and":
        old[i] = T.cuda.atomic_and(target, i % 4, values[i], scope="sys")
    elif OP == "or":
        old[i] = T.cuda.atomic_or(target, i % 4, values[i], scope="cluster")
    elif OP == "xor":
        old[i] = T.cuda.atomic_xor(target, i % 4, values[i], sem="acq_rel")
    else:
        old[i] = T.cuda.atomic_exch(target, i % 4, values[i])


@jittile.kernel
def first_wins(slot: T.Tensor((2, 3), "uint64"), winners: T.Tensor((N,), "int32")):
    """Every thread tries to claim ``slot[1, 2]`` (0 = free) with its id + 1; one succeeds."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=THREADS))
    i = T.cuda.block_idx() * THREADS + T.cuda.thread_idx()
    seen = T.cuda.atomic_cas(slot, (1, 2), 0, i + 1, sem="acq_rel")
    winners[i] = 1 if seen == 0 else 0


@jittile.kernel
def float_cas(x: T.Tensor((1,), "float32"), out: T.Tensor((2,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    out[0] = T.cuda.atomic_cas(x, 0, 0.0, 5.0)  # x holds -0.0: bits differ, no swap
    out[1] = T.cuda.atomic_cas(x, 0, -0.0, 7.0)  # now it swaps


@jittile.kernel
def fenced(flag: T.Tensor((1,), "int32"), data: T.Tensor((1,), "int32")):
    """The message-passing pattern: write, release fence, relaxed flag; a fence after."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    data[0] = 42
    T.cuda.threadfence()
    T.cuda.atomic_exch(flag, 0, 1)
    T.cuda.threadfence(sem="sc", scope="sys")


def operands(dtype, seed=0):
    """Start values of the 4 targets and one value per thread, over the whole range of dtype."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    start = rng.integers(info.min, info.max, 4, dtype=dtype, endpoint=True)
    values = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    return start, values


def run_reduction(launch, op, dtype):
    """``apply`` of ``op`` (``launch`` is the kernel or its ``.interpret``): the targets end as
    NumPy's reduction in any order; returns (start, values, old) for order checks."""
    start, values = operands(dtype)
    target, old = start.copy(), np.zeros(N, dtype)
    launch(target, values, old, op)
    with np.errstate(over="ignore"):
        expected = np.array([REDUCE[op].reduce(np.r_[start[j], values[j::4]]) for j in range(4)])
    np.testing.assert_array_equal(target, expected.astype(dtype))
    return start, values, old


def check_exchanges(launch, dtype):
    """Exchanges pass every value along once: the old values and the final one are the start
    and the thread values, whatever the order."""
    if dtype == "float32":
        start, values = np.float32([1.5, -0.0, 2.0, 3.0]), np.arange(N, dtype=np.float32) + 0.25
    else:
        start, values = operands(dtype, seed=1)
    target, old = start.copy(), np.zeros(N, dtype)
    launch(target, values, old, "exch")
    for j in range(4):
        chain = sorted(old[j::4].tolist() + [target[j]])
        assert chain == sorted([start[j]] + values[j::4].tolist())


def check_tickets(launch):
    """int32 adds of 1: each target's old values are 0 .. 47, each once."""
    start, values = np.zeros(4, np.int32), np.ones(N, np.int32)
    old = np.full(N, -1, np.int32)
    launch(start, values, old, "add")
    assert start.tolist() == [N // 4] * 4
    for j in range(4):
        assert sorted(old[j::4].tolist()) == list(range(N // 4))


def check_signedness(launch):
    """max.s32 keeps 0 over -1, max.u32 takes 0xFFFFFFFF."""
    values = np.full(N, -1, np.int32)
    target, old = np.zeros(4, np.int32), np.zeros(N, np.int32)
    launch(target, values, old, "max")
    assert (target == 0).all()
    target, old = np.zeros(4, np.uint32), np.zeros(N, np.uint32)
    launch(target, values.view(np.uint32), old, "max")
    assert (target == 0xFFFFFFFF).all()


def check_float_adds(launch):
    """atom.global.add.f32 rounds to nearest even and flushes subnormal inputs and results
    (every case here gives the same result in any order)."""
    tiny = np.float32(1e-40)  # subnormal
    target = np.float32([0.0, 1.0, 2.0**24, tiny])
    values = np.tile(np.float32([tiny, 2.0**-30, 1.0, 0.0]), N // 4)
    old = np.zeros(N, np.float32)
    launch(target, values, old, "add")
    assert target[0] == 0.0  # every subnormal addend flushed
    assert target[1] == 1.0  # 2^-30 is below half an ulp of 1 each time
    assert target[2] == 2.0**24  # 2^24 + 1 is a tie: nearest even stays 2^24
    assert target[3] == 0.0 and (old[3::4] == 0).sum() >= N // 4 - 1  # the stored subnormal: +0
    values = np.full(N, 0.5, np.float32)
    target = np.zeros(4, np.float32)
    launch(target, values, old, "add")
    assert (target == N // 8).all() and sorted(old[0::4].tolist()) == [x / 2 for x in range(48)]


def check_compare_and_swap(first, floats):
    """One thread of all wins the claim; float32 compares bits (-0.0 is not 0.0)."""
    slot, winners = np.zeros((2, 3), np.uint64), np.zeros(N, np.int32)
    first(slot, winners)
    assert winners.sum() == 1
    assert slot[1, 2] == np.flatnonzero(winners)[0] + 1 and slot.sum() == slot[1, 2]
    x, out = np.float32([-0.0]), np.zeros(2, np.float32)
    floats(x, out)
    assert x[0] == 7.0 and np.signbit(out[0]) and np.signbit(out[1])


@jittile.kernel
def message(flag: T.Tensor((1,), "int32"), data: T.Tensor((64,), "float32"), seen):
    """CTA 0 writes data, then releases a flag; CTA 1 spins on the flag with relaxed atomics,
    then acquires with a fence and reads the data (it runs after CTA 0 in the interpreter, and
    beside it on the GPU)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    i = T.cuda.thread_idx()
    if T.cuda.block_idx() == 0:
        data[i] = i * 0.5
        T.cuda.cta_sync()
        if i == 0:
            T.cuda.threadfence()
            T.cuda.atomic_exch(flag, 0, 1)
    else:
        if i == 0:
            while T.cuda.atomic_add(flag, 0, 0) == 0:
                pass
            T.cuda.threadfence()
        T.cuda.cta_sync()
        seen[i] = data[i]


@jittile.kernel
def handshake(flags: T.Tensor((2,), "int32"), seen: T.Tensor((2,), "int32")):
    """Two warps wait on each other through global flags: warp 1 raises flags[1] and polls
    flags[0]; warp 0 polls flags[1], then raises flags[0] to 2."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx()
    if tid == 0:
        while T.cuda.atomic_add(flags, 1, 0, sem="acquire") == 0:
            pass
        seen[0] = flags[1]
        T.cuda.atomic_exch(flags, 0, 2, sem="release")
    if tid == 32:
        T.cuda.atomic_exch(flags, 1, 1, sem="release")
        while T.cuda.atomic_add(flags, 0, 0, sem="acquire") == 0:
            pass
        seen[1] = flags[0]


@jittile.kernel
def reread(x: T.Tensor((1,), "int32"), out: T.Tensor((5,), "int32")):
    """One thread reads an element nobody writes five times from one atomic: a loop of reads,
    not a wait."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    if T.cuda.thread_idx() == 0:
        for i in range(5):
            out[i] = T.cuda.atomic_add(x, 0, 0) + i


@jittile.kernel
def waits_for_a_later_cta(flag: T.Tensor((1,), "int32")):
    """CTA 0 polls a flag CTA 1 raises: fine on a GPU that runs both at once, a deadlock for
    the interpreter, which runs one cluster (here one CTA) at a time."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
    if T.cuda.thread_idx() == 0:
        if T.cuda.block_idx() == 0:
            while T.cuda.atomic_add(flag, 0, 0, sem="acquire") == 0:
                pass
        else:
            T.cuda.atomic_exch(flag, 0, 1, sem="release")
