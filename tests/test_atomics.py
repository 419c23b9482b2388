"""``T.cuda.atomic_*`` and ``T.cuda.threadfence``: read-modify-writes of global memory that
return the old value, interpreted against NumPy for every operation and element type, compiled
to their ``atom`` / ``fence`` instruction, and refused with a located error where the PTX ISA has
no such atomic (shared memory, other element types, wrong indices, unknown orderings)."""

import ml_dtypes
import numpy as np
import pytest
from kernel_files import body_kernel

import jittile
from jittile import T

THREADS, BLOCKS = 64, 3
N = THREADS * BLOCKS


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


_REDUCE = {
    "add": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
INTEGERS = ["int32", "uint32", "int64", "uint64"]


def _operands(dtype, seed=0):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    start = rng.integers(info.min, info.max, 4, dtype=dtype, endpoint=True)
    values = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    return start, values


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("op", list(_REDUCE))
def test_integer_atomics_combine_every_thread_and_return_old_values(op, dtype):
    start, values = _operands(dtype)
    target, old = start.copy(), np.zeros(N, dtype)
    apply.interpret(target, values, old, op)
    with np.errstate(over="ignore"):
        expected = np.array([_REDUCE[op].reduce(np.r_[start[j], values[j::4]]) for j in range(4)])
    np.testing.assert_array_equal(target, expected.astype(dtype))
    for j in range(4):  # the interpreter runs the threads one by one, in order
        with np.errstate(over="ignore"):
            prefixes = _REDUCE[op].accumulate(np.r_[start[j], values[j::4]].astype(dtype))
        np.testing.assert_array_equal(old[j::4], prefixes[:-1].astype(dtype))


@pytest.mark.parametrize("dtype", INTEGERS + ["float32"])
def test_exchanges_pass_every_value_along_once(dtype):
    if dtype == "float32":
        start, values = np.float32([1.5, -0.0, 2.0, 3.0]), np.arange(N, dtype=np.float32) + 0.25
    else:
        start, values = _operands(dtype, seed=1)
    target, old = start.copy(), np.zeros(N, dtype)
    apply.interpret(target, values, old, "exch")
    for j in range(4):  # the chain start -> ... -> final holds every value exactly once
        assert sorted(old[j::4].tolist() + [target[j]]) == sorted(
            [start[j]] + values[j::4].tolist()
        )


def test_int32_tickets_are_unique_across_ctas():
    start, values = np.zeros(4, np.int32), np.ones(N, np.int32)
    old = np.full(N, -1, np.int32)
    apply.interpret(start, values, old, "add")
    assert start.tolist() == [N // 4] * 4
    for j in range(4):
        assert sorted(old[j::4].tolist()) == list(range(N // 4))


def test_signed_and_unsigned_compare_as_their_type():
    values = np.full(N, -1, np.int32)
    target, old = np.zeros(4, np.int32), np.zeros(N, np.int32)
    apply.interpret(target, values, old, "max")
    assert (target == 0).all()  # max.s32: -1 < 0
    target, old = np.zeros(4, np.uint32), np.zeros(N, np.uint32)
    apply.interpret(target, values.view(np.uint32), old, "max")
    assert (target == 0xFFFFFFFF).all()  # max.u32: 0xFFFFFFFF is the largest


def test_float32_add_rounds_each_step_and_flushes_subnormals():
    """atom.global.add.f32 rounds to nearest even and flushes subnormal inputs and results."""
    tiny = np.float32(1e-40)  # subnormal
    target = np.float32([0.0, 1.0, 2.0**24, tiny])
    values = np.tile(np.float32([tiny, 2.0**-30, 1.0, 0.0]), N // 4)
    old = np.zeros(N, np.float32)
    apply.interpret(target, values, old, "add")
    assert target[0] == 0.0  # every subnormal addend flushed
    assert target[1] == 1.0  # 2^-30 is below half an ulp of 1 each time
    assert target[2] == 2.0**24  # 2^24 + 1 is a tie: nearest even stays 2^24
    assert target[3] == 0.0 and old[3] == tiny  # the flushed stored subnormal reads as +0
    values = np.full(N, 0.5, np.float32)
    target = np.zeros(4, np.float32)
    apply.interpret(target, values, old, "add")
    assert (target == N // 8).all() and sorted(old[0::4].tolist()) == [x / 2 for x in range(48)]


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


def test_compare_and_swap_lets_exactly_one_thread_win():
    slot, winners = np.zeros((2, 3), np.uint64), np.zeros(N, np.int32)
    first_wins.interpret(slot, winners)
    assert winners.sum() == 1
    assert slot[1, 2] == np.flatnonzero(winners)[0] + 1 and slot.sum() == slot[1, 2]
    x, out = np.float32([-0.0]), np.zeros(2, np.float32)
    float_cas.interpret(x, out)
    assert x[0] == 7.0 and np.signbit(out[0]) and np.signbit(out[1])


# ---------------------------------------------------------------------------- the PTX
@pytest.mark.parametrize(
    "op, dtype, opcode",
    [
        ("add", "int32", "atom.relaxed.gpu.global.add.s32"),
        ("add", "uint32", "atom.relaxed.gpu.global.add.u32"),
        ("add", "int64", "atom.relaxed.gpu.global.add.u64"),
        ("add", "float32", "atom.relaxed.gpu.global.add.f32"),
        ("max", "int32", "atom.acquire.gpu.global.max.s32"),
        ("max", "uint64", "atom.acquire.gpu.global.max.u64"),
        ("min", "int64", "atom.release.cta.global.min.s64"),
        ("and", "uint32", "atom.relaxed.sys.global.and.b32"),
        ("or", "int64", "atom.relaxed.cluster.global.or.b64"),
        ("xor", "int32", "atom.acq_rel.gpu.global.xor.b32"),
        ("exch", "float32", "atom.relaxed.gpu.global.exch.b32"),
        ("exch", "uint64", "atom.relaxed.gpu.global.exch.b64"),
    ],
)
def test_each_atomic_compiles_to_its_atom_instruction(op, dtype, opcode):
    spec = T.Tensor((None,), dtype)
    ck = apply.compile(spec, spec, spec, op, target="sm_90a")
    assert opcode in {line.split()[0] for line in ck.ptx.splitlines() if line.strip()}
    assert "ATOMG." in ck.sass


def test_cas_and_fences_compile():
    ptx = first_wins.compile(target="sm_90a").ptx
    assert "atom.acq_rel.gpu.global.cas.b64" in ptx
    assert "atom.relaxed.gpu.global.cas.b32" in float_cas.compile(target="sm_90a").ptx
    ptx = fenced.compile(target="sm_90a").ptx
    assert "fence.acq_rel.gpu;" in ptx and "fence.sc.sys;" in ptx


@jittile.kernel
def fenced(flag: T.Tensor((1,), "int32"), data: T.Tensor((1,), "int32")):
    """The message-passing pattern: write, release fence, relaxed flag; a fence after."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    data[0] = 42
    T.cuda.threadfence()
    T.cuda.atomic_exch(flag, 0, 1)
    T.cuda.threadfence(sem="sc", scope="sys")


def test_fences_run_in_the_interpreter():
    flag, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    fenced.interpret(flag, data)
    assert flag[0] == 1 and data[0] == 42


# ---------------------------------------------------------------------------------- errors
PARAMS = (
    'A: T.Tensor((16,), "int32"), F: T.Tensor((4, 4), "float32"), '
    'H: T.Tensor((16,), "bfloat16"), s: T.int32'
)


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "buf = T.alloc_shared((16,), 'int32')\nT.cuda.atomic_add(buf, 0, 1)  # HERE",
            r"parameter 'array': must be a tensor parameter \(global memory\), got shared buffer 'buf'",
        ),
        (
            "loc = T.alloc_local((4,), 'int32')\nT.cuda.atomic_add(loc, 0, 1)  # HERE",
            r"got local array 'loc'",
        ),
        ("T.cuda.atomic_add(s, 0, 1)  # HERE", r"must be a tensor parameter .*got 's'"),
        (
            "T.cuda.atomic_add(H, 0, 1.0)  # HERE",
            r"tensor 'H' holds bfloat16 elements, but atom.add takes int32, uint32, int64, "
            r"uint64, float32",
        ),
        ("T.cuda.atomic_max(F, (0, 0), 1.0)  # HERE", r"tensor 'F' holds float32 elements"),
        ("T.cuda.atomic_xor(F, (0, 0), 1)  # HERE", r"atom.xor takes int32, uint32, int64"),
        ("T.cuda.atomic_add(A, 0, 1.5)  # HERE", r"operand 2'.*is the float 1.5, but the tensor"),
        ("T.cuda.atomic_cas(A, 0, 0, 'x')  # HERE", r"operand 3'.*must be a number"),
        ("T.cuda.atomic_add(A, 1.0, 1)  # HERE", r"index '1.0' of tensor 'A' is a float"),
        ("T.cuda.atomic_add(A, 16, 1)  # HERE", r"index 16 is outside axis extent 16"),
        ("T.cuda.atomic_add(F, 0, 1.0)  # HERE", r"tensor 'F' has rank 2, indexed with 1"),
        (
            "T.cuda.atomic_add(A, 0, 1, sem='seq_cst')  # HERE",
            r"parameter 'sem': must be a compile-time string, one of 'relaxed', 'acquire', "
            r"'release', 'acq_rel'; got 'seq_cst'",
        ),
        ("T.cuda.atomic_min(A, 0, 1, scope='grid')  # HERE", r"parameter 'scope'.*got 'grid'"),
        ("T.cuda.atomic_min(A, 0, 1, scope=A[0])  # HERE", r"parameter 'scope'.*got A\[0\]"),
        ("T.cuda.threadfence(sem='relaxed')  # HERE", r"one of 'acq_rel', 'sc'; got 'relaxed'"),
        ("T.cuda.atomic_add(A, 0)  # HERE", r"missing a required argument: 'value'"),
        ("T.cuda.atomic_cas(A, 0, 1)  # HERE", r"missing a required argument: 'value'"),
    ],
)
def test_atomic_errors_name_the_argument_and_the_rule(tmp_path, body, message):
    kernel, path = body_kernel(tmp_path, body, PARAMS)
    with pytest.raises(jittile.CompileError, match=message) as info:
        kernel.compile(target="sm_90a")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "# HERE" in text)
    assert f"{path.name}:{line}:" in str(info.value)


def test_the_same_calls_compile_where_they_are_legal(tmp_path):
    body = """
    T.cuda.atomic_add(A, 15, 1)
    T.cuda.atomic_add(F, (3, 3), 1)
    T.cuda.atomic_cas(A, T.cuda.lane_id() % 16, 0, s, sem='acq_rel', scope='sys')
    T.cuda.threadfence(sem='sc', scope='cta')
    """
    kernel, _ = body_kernel(tmp_path, body, PARAMS)
    assert "atom.acq_rel.sys.global.cas.b32" in kernel.compile(target="sm_90a").ptx


def test_a_runtime_float_index_is_an_error_compiled_and_interpreted(tmp_path):
    body = "x = F[0, 0] * 0.5\nT.cuda.atomic_add(F, (x, 0), 1.0)  # HERE"
    kernel, path = body_kernel(tmp_path, body, PARAMS)
    with pytest.raises(jittile.CompileError, match="no implementation of a global address"):
        kernel.compile(target="sm_90a")
    arrays = (np.zeros(16, np.int32), np.ones((4, 4), np.float32), np.zeros(16, ml_dtypes.bfloat16))
    with pytest.raises(jittile.InterpreterError, match=r"index \(0.5, 0\) of a global address"):
        kernel.interpret(*arrays, 0)
