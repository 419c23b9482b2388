"""Float element types: a load of a float16 / bfloat16 / float8_e4m3fn / float8_e5m2 element yields
its float32 value, a store rounds to nearest even (fp8 with ``.satfinite``), in the compiled PTX
(``cvt``, never an integer conversion) and in the interpreter; ``buf.bits[i]`` is the raw bits.
The references and their differences from ml_dtypes: tests/float_kernels.py.
"""

import re

import ml_dtypes
import numpy as np
import pytest
from float_kernels import (
    FORMATS,
    f32,
    reference_load,
    reference_store,
    roundtrip_kernel,
    run_roundtrip,
    special_values,
    storage,
)

import jittile
from jittile import CompileError, ContractError, T

# the cvt forms each conversion is written in (ptx/conversions.py)
STORE_CVT = {
    "float16": "cvt.rn.f16.f32",
    "bfloat16": "cvt.rn.bf16.f32",
    "float8_e4m3fn": "cvt.rn.satfinite.e4m3x2.f32",
    "float8_e5m2": "cvt.rn.satfinite.e5m2x2.f32",
}
# a float <-> integer conversion: cvt with one integer and one float type, in either order
INTEGER_CVT = re.compile(r"\bcvt(\.\w+)*\.((s|u)\d+\.(b?f)\d+|(b?f)\d+\.(s|u)\d+)\b")


@pytest.mark.parametrize("name", list(FORMATS))
def test_stores_round_and_loads_are_exact_as_the_ptx_cvt_defines(name):
    patterns = np.arange(1 << (8 if name.startswith("float8") else 16), dtype=storage(name))
    values, bits, stored, loaded, tensor = run_roundtrip(name, special_values(name), patterns)
    expected = reference_store(values, name)
    for column in range(3):  # shared buffer, local array, tensor
        wrong = np.flatnonzero(stored[:, column] != expected)
        assert not len(wrong), (
            column,
            values[wrong[:8]],
            stored[wrong[:8], column],
            expected[wrong[:8]],
        )
        assert (
            loaded[:, column].view(np.uint32).tolist()
            == reference_load(bits, name).view(np.uint32).tolist()
        )
    assert tensor.view(storage(name)).tolist() == bits.tolist()  # written back as raw bits


def test_the_reference_differs_from_ml_dtypes_where_the_ptx_isa_says():
    """The cases the module docstring names, so that the reference is the ISA's and not ml_dtypes'
    (1.75 is the bug this fixed: an integer conversion stored 1.0)."""
    values = f32([0x43F00000, 0x7F800000, 0xC7800000, 0x3FE00000])  # 480, inf, -65536, 1.75
    _, _, stored, _, _ = run_roundtrip("float8_e4m3fn", values, np.zeros(4, np.uint8))
    assert stored[:, 0].tolist() == [0x7E, 0x7E, 0xFE, 0x3E]  # 448, 448, -448, 1.75
    assert np.isnan(values[:3].astype(ml_dtypes.float8_e4m3fn).astype(np.float32)).all()
    _, _, stored, _, _ = run_roundtrip("float8_e5m2", values, np.zeros(4, np.uint8))
    assert stored[:, 0].tolist() == [0x60, 0x7B, 0xFB, 0x3F]  # 512 (a tie), 57344, -57344, 1.75
    assert np.isinf(values[1:3].astype(ml_dtypes.float8_e5m2).astype(np.float32)).all()
    _, _, stored, _, _ = run_roundtrip("bfloat16", values, np.zeros(4, np.uint16))
    assert stored[:, 0].tolist() == [0x43F0, 0x7F80, 0xC780, 0x3FE0]


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_ptx_converts_as_floats_and_assembles(name):
    kernel = roundtrip_kernel(name)
    bits_type = "uint8" if name.startswith("float8") else "uint16"
    for target in ("sm_90a", "sm_100a"):
        ck = kernel.compile(
            T.Tensor((None,), "float32"),
            T.Tensor((None,), bits_type),
            T.Tensor((None, 3), bits_type),
            T.Tensor((None, 3), "float32"),
            T.Tensor((None,), name),
            np.int32(1),
            target=target,
        )
        conversions = [line.strip() for line in ck.ptx.splitlines() if "cvt." in line]
        assert not [c for c in conversions if INTEGER_CVT.search(c)], conversions
        assert any(c.startswith(STORE_CVT[name] + " ") for c in conversions), conversions
        if name.startswith("float8"):
            assert any(
                c.startswith("cvt.rn.f16x2." + STORE_CVT[name].split(".")[3]) for c in conversions
            ), conversions
        assert "F2FP" in ck.sass or "F2F" in ck.sass  # ptxas assembled the conversions


def _int_store():
    @jittile.kernel
    def int_store(Out: T.Tensor((128,), "uint16"), V: T.Tensor((128,), "int64")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        s = T.alloc_shared((128,), "bfloat16")
        t = T.cuda.thread_idx("x")
        s[t] = V[t]
        Out[t] = s.bits[t]

    return int_store


def float32_of_integer(value: int) -> np.float32:
    """``value`` rounded once to nearest even into float32 (24 significant bits), as
    ``cvt.rn.f32.s64`` does; ``float(value)`` would round to float64 first."""
    magnitude, drop = abs(value), max(0, abs(value).bit_length() - 24)
    kept, rest = divmod(magnitude, 1 << drop) if drop else (magnitude, 0)
    half = (1 << drop) >> 1
    if drop and (rest > half or (rest == half and kept & 1)):
        kept += 1
    return np.float32(float(kept << drop) * (-1 if value < 0 else 1))


def test_an_integer_stored_into_a_bfloat16_element_converts_as_a_float():
    values = [
        0,
        1,
        -1,
        3,
        257,
        259,
        -129,
        255,
        2**24 + 1,
        2**40 + 2**32 + 1,
        2**60 + 2**36 + 1,
        -(2**62) - 1,
        2**63 - 1,
    ] + list(range(115))
    out = np.zeros(128, np.uint16)
    _int_store().interpret(out, np.array(values, np.int64))
    # the GPU converts the int64 to float32 (cvt.rn.f32.s64), then rounds that to bfloat16
    as_f32 = np.array([float32_of_integer(v) for v in values], np.float32)
    assert as_f32[10] == np.float32(2**60 + 2**37)  # float64 first would give 2**60
    assert out.tolist() == reference_store(as_f32, "bfloat16").tolist()
    assert out[:6].tolist() == [0, 0x3F80, 0xBF80, 0x4040, 0x4380, 0x4382]  # 257 -> 256 (even)
    ptx = _int_store().compile(target="sm_90a").ptx
    assert "cvt.rn.bf16.f32" in ptx and "cvt.rzi" not in ptx


def test_tuple_chained_and_augmented_element_assignments_convert():
    @jittile.kernel
    def assignments(X: T.Tensor((32,), "float32"), Out: T.Tensor((32, 4), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        s = T.alloc_shared((32,), "bfloat16")
        e = T.alloc_shared((32,), "float8_e4m3fn")
        t = T.cuda.thread_idx("x")
        s[t], k = X[t], t
        e[t] = a = X[t] * 2
        s[t] += X[t]
        e[t] *= 3
        Out[t, 0] = s[t]
        Out[t, 1] = e[t]
        Out[t, 2] = a
        Out[t, 3] = k

    x = np.random.default_rng(4).standard_normal(32).astype(np.float32)
    out = np.zeros((32, 4), np.float32)
    assignments.interpret(x, out)
    bf16 = lambda v: np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    e4m3 = lambda v: np.asarray(v, np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)  # noqa: E731
    assert out[:, 0].tolist() == bf16(bf16(x) + x).tolist()
    assert out[:, 1].tolist() == e4m3(e4m3(x * 2) * 3).tolist()
    assert out[:, 2].tolist() == (x * 2).tolist() and out[:, 3].tolist() == list(range(32))


def _compile_error(body: str, tmp_path, error=CompileError, name="kernel"):
    source = (
        "import jittile\nfrom jittile import T\n\n@jittile.kernel\n"
        "def k(A: T.Tensor((32,), 'float32'), W: T.Tensor((32,), 'uint32')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        "    s = T.alloc_shared((32,), 'bfloat16')\n"
        "    w = T.alloc_shared((32,), 'tf32')\n"
        f"    {body}\n"
    )
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(error) as info:
        namespace["k"].compile(target="sm_90a")
    assert f"{path}:9:" in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("statement", ["A.bits[0] = 1", "A[0] = A.bits[1]", "A.bits[0] += 1"])
def test_bits_of_a_float32_buffer_is_an_error(tmp_path, statement):
    message = _compile_error(statement, tmp_path)
    assert "tensor 'A' holds float32; index it directly" in message


@pytest.mark.parametrize("statement", ["A[0] = w[0]", "w[0] = A[0]", "w[0] += 1", "w[0], b = 1, 2"])
def test_tf32_elements_are_reached_through_bits_only(tmp_path, statement):
    message = _compile_error(statement, tmp_path)
    assert "holds tf32, whose elements jittile does not convert" in message
    assert "w.bits[...]" in message


def test_a_raw_ptx_bit_register_needs_the_bits_of_a_float_element(tmp_path):
    message = _compile_error("T.ptx.st.shared.b32(s.ptr_to([0]), s[1])", tmp_path, ContractError)
    assert "operand 1" in message and "s.bits[1]" in message
    message = _compile_error(
        "T.ptx.cvt.rn.bf16x2.f32(s[0], A[0], A[1])", tmp_path, ContractError, name="destination"
    )
    assert "destination 0" in message and "s.bits[0]" in message


def test_raw_ptx_float_operands_take_the_value_and_bit_operands_the_bits():
    @jittile.kernel
    def packs(X: T.Tensor((2,), "float32"), W: T.Tensor((2,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((2,), "bfloat16")
        s[0] = X[0]
        s[1] = X[1]
        T.ptx.cvt.rn.bf16x2.f32(W[0], s[1], s[0])  # float registers: the elements' values
        W[1] = T.uint32(s.bits[1]) << 16 | T.uint32(s.bits[0])

    w = np.zeros(2, np.uint32)
    packs.interpret(np.array([1.75, -3.0], np.float32), w)
    assert w.tolist() == [0xC0403FE0, 0xC0403FE0]


def test_a_bfloat16_scalar_argument_is_its_float32_value():
    @jittile.kernel
    def scale(Out: T.Tensor((1,), "float32"), factor):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        Out[0] = factor

    out = np.zeros(1, np.float32)
    scale.interpret(out, ml_dtypes.bfloat16(1.75))
    assert out[0] == 1.75


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_interpreters_rounding_on_many_random_float32(name):
    """jittile.interpreter.floats against the reference on 40000 random float32 bit patterns
    (every exponent, NaNs and infinities among them) and 20000 near the format's range."""
    from jittile.interpreter.floats import encode

    rng = np.random.default_rng(7)
    patterns = rng.integers(0, 1 << 32, 40000, dtype=np.uint64).astype(np.uint32)
    top = float(ml_dtypes.finfo(FORMATS[name]).max)
    near = rng.uniform(-2, 2, 20000) * top * rng.choice([1, 2**-10, 2**-20], 20000)
    with np.errstate(over="ignore"):
        values = np.concatenate([patterns.view(np.float32), near.astype(np.float32)])
    assert [encode(v, name) for v in values] == reference_store(values, name).tolist()
