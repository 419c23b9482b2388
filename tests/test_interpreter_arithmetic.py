"""Scalar arithmetic in the interpreter and in compile-time folding follows numba's types, as
the GPU's code does (jittile/scalars.py): the rules against numba-cuda's own typing context for
every operator and operand type, and kernels whose NumPy-typed arithmetic would differ
(int32 products past 2**31, float32 times a Python float, uint32 constants) against the values
numba's types give, with the PTX showing the GPU computes them the same way."""

from __future__ import annotations

import itertools
import operator
import re

import numpy as np
import pytest

import jittile
from jittile import T, scalars

NUMPY = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


@pytest.fixture(scope="module")
def numba_typing():
    from numba.core import types
    from numba.cuda.descriptor import cuda_target

    context = cuda_target.typing_context
    context.refresh()

    def result(op, *operands):
        try:
            signature = context.resolve_function_type(
                op, tuple(getattr(types, t) for t in operands), {}
            )
        except Exception:  # numba does not type it (a float shift)
            return None
        return None if signature is None else NUMPY[str(signature.return_type)]

    return result


@pytest.mark.parametrize("name", sorted(scalars.BINARY))
def test_binary_result_types_are_numbas(numba_typing, name):
    op = scalars.BINARY[name]
    for left, right in itertools.product(NUMPY, repeat=2):
        expected = numba_typing(op, left, right)
        ours = scalars.result_type(op, NUMPY[left], NUMPY[right])
        if op is operator.pow and left == "bool" and right != "bool":
            continue  # numba types bool ** int as a float; kernels do not raise booleans
        assert ours == expected, (name, left, right)


@pytest.mark.parametrize("name", sorted(scalars.UNARY))
def test_unary_result_types_are_numbas(numba_typing, name):
    op = scalars.UNARY[name]
    for operand in NUMPY:
        expected = numba_typing(op, operand)
        if expected is not None:
            assert scalars.unary_type(op, NUMPY[operand]) == expected, (name, operand)


def test_python_literals_are_int64_and_float64():
    assert scalars.numba_type(7) is np.int64 and scalars.numba_type(1 << 63) is np.uint64
    assert scalars.numba_type(0.5) is np.float64 and scalars.numba_type(True) is np.bool_


@pytest.mark.parametrize(
    "op, a, b, expected",
    [
        (operator.mul, np.int32(100000), np.int32(100000), np.int64(10**10)),
        (operator.add, np.uint32(4294967295), 1, np.int64(4294967296)),
        (operator.sub, np.uint32(0), np.uint32(1), np.uint64(2**64 - 1)),
        (operator.sub, np.uint64(0), 1, np.int64(-1)),
        (operator.mul, np.int64(2**62), 4, np.int64(0)),  # 64-bit wraparound
        (operator.lshift, np.uint32(1), 40, np.uint64(1 << 40)),
        (operator.floordiv, np.int32(-7), 2, np.int64(-4)),
        (operator.mod, np.int32(-7), 2, np.int64(1)),
        (operator.floordiv, np.int32(7), 0, np.int64(0)),
        (operator.truediv, np.int32(1), np.int32(3), np.float64(1 / 3)),
        (operator.mul, np.float32(1.1), 0.1, np.float64(float(np.float32(1.1)) * 0.1)),
        (operator.add, np.float32(0.5), np.int32(1), np.float64(1.5)),
        (operator.pow, np.float32(1.5), 2, np.float32(2.25)),
        (operator.pow, np.int32(3), 41, np.int64(pow(3, 41, 1 << 64) - (1 << 64))),
        (operator.and_, np.bool_(True), np.bool_(False), np.bool_(False)),
    ],
)
def test_binop_computes_numbas_value_and_type(op, a, b, expected):
    value = scalars.binop(op, a, b)
    assert type(value) is type(expected) and value == expected


def test_unop_widens_as_numba():
    assert scalars.unop(operator.neg, np.uint32(1)) == np.uint64(2**64 - 1)
    assert type(scalars.unop(operator.neg, np.int32(-(2**31)))) is np.int64
    assert scalars.unop(operator.invert, np.uint32(0)) == np.uint64(2**64 - 1)
    assert scalars.unop(operator.invert, np.bool_(True)) == np.bool_(False)


@jittile.kernel
def numba_typed(
    A: T.Tensor((4,), "int32"),
    Out: T.Tensor((6,), "int64"),
    F: T.Tensor((2,), "float32"),
    G: T.Tensor((3,), "float64"),
):
    """Arithmetic whose NumPy types would differ from numba's (and so from the GPU's)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    x = A[0]
    Out[0] = x * x  # int64: 10**10, where int32 would wrap
    Out[1] = x + 2147483647
    u = T.uint32(4294967295)  # a compile-time constant: folded as numba computes it
    Out[2] = u + 1
    v = T.uint32(A[1])  # the same at run time
    Out[3] = v - 1
    total = x
    total += x * x  # augmented assignment to a name
    Out[4] = total
    acc = T.alloc_local((1,), "float32")
    acc[0] = F[0]
    acc[0] += 0.1  # float64, rounded to float32 once by the store
    F[1] = acc[0]
    G[0] = F[0] * 0.1
    G[1] = F[0] / 3
    G[2] = -T.uint32(A[2])  # unary minus of a uint32: uint64


def _run():
    a = np.array([100000, 0, 1, 0], np.int32)
    out, g = np.zeros(6, np.int64), np.zeros(3, np.float64)
    f = np.array([1.1, 0], np.float32)
    numba_typed.interpret(a, out, f, g)
    return out, f, g


def test_the_interpreter_computes_with_numbas_types():
    out, f, g = _run()
    x, f0 = 100000, float(np.float32(1.1))
    assert out.tolist() == [x * x, x + 2147483647, 4294967296, -1, x + x * x, 0]
    assert f[1] == np.float32(f0 + 0.1)  # not float32(1.1) + float32(0.1)
    assert g[0] == f0 * 0.1 and g[1] == f0 / 3 and g[2] == float(2**64 - 1)


def test_the_gpu_code_computes_the_same_way():
    """The PTX does these in 64 bits (integers) and float64, as the interpreter does."""
    ptx = numba_typed.compile(
        T.Tensor((4,), "int32"),
        T.Tensor((6,), "int64"),
        T.Tensor((2,), "float32"),
        T.Tensor((3,), "float64"),
        target="sm_90a",
    ).ptx
    assert re.search(r"mul\.wide\.s32", ptx)  # int32 x int32 -> int64
    assert re.search(r"add\.s64\s+%rd\d+, %rd\d+, 2147483647", ptx)
    assert re.search(r"mul\.f64", ptx) and re.search(r"div\.rn\.f64", ptx)
    assert "4294967296" in ptx  # the folded constant


def test_folding_a_numpy_scalar_expression_follows_numba():
    from jittile.frontend import static

    assert static.scalars is scalars
    assert scalars.binop(operator.add, np.uint32(4294967295), 1) == 4294967296
