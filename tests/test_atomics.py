"""``T.cuda.atomic_*`` and ``T.cuda.threadfence``: read-modify-writes of global memory that
return the old value, interpreted against NumPy for every operation and element type, compiled
to their ``atom`` / ``fence`` instruction, and refused with a located error where the PTX ISA has
no such atomic (shared memory, other element types, wrong indices, unknown orderings)."""

import atomic_kernels as ak
import ml_dtypes
import numpy as np
import pytest
from atomic_kernels import INTEGERS, REDUCE
from kernel_files import body_kernel

import jittile
from jittile import T


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("op", list(REDUCE))
def test_integer_atomics_combine_every_thread_and_return_old_values(op, dtype):
    start, values, old = ak.run_reduction(ak.apply.interpret, op, dtype)
    for j in range(4):  # the interpreter runs the threads one by one, in order
        with np.errstate(over="ignore"):
            prefixes = REDUCE[op].accumulate(np.r_[start[j], values[j::4]].astype(dtype))
        np.testing.assert_array_equal(old[j::4], prefixes[:-1].astype(dtype))


@pytest.mark.parametrize("dtype", INTEGERS + ["float32"])
def test_exchanges_pass_every_value_along_once(dtype):
    ak.check_exchanges(ak.apply.interpret, dtype)


def test_int32_tickets_are_unique_across_ctas():
    ak.check_tickets(ak.apply.interpret)


def test_signed_and_unsigned_compare_as_their_type():
    ak.check_signedness(ak.apply.interpret)


def test_float32_add_rounds_each_step_and_flushes_subnormals():
    ak.check_float_adds(ak.apply.interpret)


def test_compare_and_swap_lets_exactly_one_thread_win():
    ak.check_compare_and_swap(ak.first_wins.interpret, ak.float_cas.interpret)


def test_threads_polling_global_flags_let_the_writer_run():
    """A thread that polls an element (the same atomic reading the same value again) waits
    for another thread to change it, instead of looping forever ahead of it."""
    flags, seen = np.zeros(2, np.int32), np.zeros(2, np.int32)
    ak.handshake.interpret(flags, seen)
    assert flags.tolist() == [2, 1] and seen.tolist() == [1, 2]


def test_a_loop_of_reads_of_an_unwritten_element_runs_to_its_end():
    x, out = np.int32([7]), np.zeros(5, np.int32)
    ak.reread.interpret(x, out)
    assert out.tolist() == [7, 8, 9, 10, 11]


def test_polling_a_value_a_later_cta_writes_is_a_deadlock_naming_the_address():
    """The interpreter runs one CTA (cluster) at a time: CTA 0's wait for CTA 1 can never end,
    and the error says so instead of looping forever."""
    flag = np.zeros(1, np.int32)
    with pytest.raises(jittile.InterpreterError) as raised:
        ak.waits_for_a_later_cta.interpret(flag)
    message = str(raised.value)
    assert "deadlock" in message and "polls global memory at 0x" in message
    assert "reads 0 again and again" in message and "one cluster at a time" in message


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
    ck = ak.apply.compile(spec, spec, spec, op, target="sm_90a")
    assert opcode in {line.split()[0] for line in ck.ptx.splitlines() if line.strip()}
    assert "ATOMG." in ck.sass


def test_cas_and_fences_compile():
    ptx = ak.first_wins.compile(target="sm_90a").ptx
    assert "atom.acq_rel.gpu.global.cas.b64" in ptx
    assert "atom.relaxed.gpu.global.cas.b32" in ak.float_cas.compile(target="sm_90a").ptx
    ptx = ak.fenced.compile(target="sm_90a").ptx
    assert "fence.acq_rel.gpu;" in ptx and "fence.sc.sys;" in ptx


def test_fences_run_in_the_interpreter():
    flag, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    ak.fenced.interpret(flag, data)
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
