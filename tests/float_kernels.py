"""Kernels and references for the float element tests (tests/test_float_elements.py on the CPU,
tests/test_gpu_floats.py on the H200).

ml_dtypes is the independent reference, corrected where the PTX ISA's ``cvt`` defines otherwise:
``.satfinite`` turns a magnitude above MAX_NORM (infinity included) into the sign-preserved
MAX_NORM, where ml_dtypes gives NaN (e4m3fn) or infinity (e5m2); a NaN result is the canonical NaN
(0x7FFF, 0x7F on a store; 0x7FFFFFFF on a float16/fp8 load, where ml_dtypes keeps the payload).
"""

import ml_dtypes
import numpy as np

import jittile
from jittile import T

FORMATS = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
CANONICAL_NAN = {"float16": 0x7FFF, "bfloat16": 0x7FFF, "float8_e4m3fn": 0x7F, "float8_e5m2": 0x7F}


def storage(name: str):
    return np.uint8 if name.startswith("float8") else np.uint16


def reference_store(values: np.ndarray, name: str) -> np.ndarray:
    """The bits the PTX ISA's cvt writes for float32 ``values`` (see the module docstring)."""
    fmt, bits_type = FORMATS[name], storage(name)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = values.astype(fmt).view(bits_type).copy()
    if name.startswith("float8"):
        top = ml_dtypes.finfo(fmt).max
        top_bits = np.array(top, fmt).view(bits_type)
        over = np.abs(values) > float(top)
        bits[over] = top_bits | np.where(np.signbit(values[over]), 0x80, 0).astype(bits_type)
    bits[np.isnan(values)] = CANONICAL_NAN[name]
    return bits


def reference_load(bits: np.ndarray, name: str) -> np.ndarray:
    """The float32 a load of ``bits`` yields: exact; bfloat16 keeps NaN payloads (a shift), the
    others give the canonical NaN (an arithmetic cvt)."""
    values = bits.view(FORMATS[name]).astype(np.float32)
    if name != "bfloat16":
        values.view(np.uint32)[np.isnan(values)] = 0x7FFFFFFF
    return values


def f32(bit_patterns) -> np.ndarray:
    return np.array(bit_patterns, dtype=np.uint32).view(np.float32)


def special_values(name: str) -> np.ndarray:
    """float32 inputs that decide a rounding: ties between neighbours (and one float32 ulp either
    side), overflow, NaN, infinities, subnormals of the format and of float32, signed zeros."""
    fmt, bits_type = FORMATS[name], storage(name)
    info = ml_dtypes.finfo(fmt) if fmt is not np.float16 else np.finfo(np.float16)
    top = np.array(info.max, fmt).view(bits_type).astype(np.int64)
    finite = np.arange(0, int(top) + 1)  # every non-negative finite pattern
    low = finite[:-1].astype(bits_type).view(fmt).astype(np.float64)
    high = finite[1:].astype(bits_type).view(fmt).astype(np.float64)
    ties = ((low + high) / 2).astype(np.float32)  # exact: one bit more than the format
    if len(ties) > 4096:
        ties = ties[np.random.default_rng(1).choice(len(ties), 4096, replace=False)]
    near = np.concatenate(
        [ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(0))]
    )
    tiny = float(info.smallest_subnormal)
    biggest = float(info.max)
    ulp_top = biggest - float(np.array(finite[-2], bits_type).view(fmt))
    with np.errstate(over="ignore"):  # bfloat16's beyond-the-top values are float32 infinity
        edges = np.array(
            [
                0.0,
                tiny,
                tiny / 2,
                tiny * 0.75,
                tiny * 1.5,
                tiny / 4,
                float(info.smallest_normal),
                float(info.smallest_normal) - tiny / 2,
                biggest,
                biggest + ulp_top / 2,
                biggest + ulp_top / 4,
                biggest + ulp_top,
                biggest * 2,
                1e30,
                3.4e38,
                np.inf,
                1.0,
                1.75,
                1.0 + 2**-8,
                1e-40,
                1e-45,
            ],
            dtype=np.float32,
        )
    nans = f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF, 0x7FFFFFFF])
    rng = np.random.default_rng(2)
    random = rng.integers(0, 1 << 32, 2048, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (rng.standard_normal(1024) * biggest / 4).astype(np.float32)
    positive = np.concatenate([near, edges, scaled])
    return np.concatenate([positive, -positive, nans, random]).astype(np.float32)


def roundtrip_kernel(name: str):
    """Each element of X stored into a ``name`` shared buffer, local array and tensor (their
    bits out), and each pattern of Bits loaded from the same three as float32."""
    bits_type = "uint8" if name.startswith("float8") else "uint16"

    @jittile.kernel
    def roundtrip(
        X: T.Tensor((None,), "float32"),
        Bits: T.Tensor((None,), bits_type),
        Stored: T.Tensor((None, 3), bits_type),
        Loaded: T.Tensor((None, 3), "float32"),
        G: T.Tensor((None,), name),
        n: T.int32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        s = T.alloc_shared((128,), name)
        local = T.alloc_local((1,), name)
        t = T.cuda.thread_idx("x")
        for i in range(t, n, 128):
            s[t] = X[i]
            local[0] = X[i]
            G[i] = X[i]
            Stored[i, 0] = s.bits[t]
            Stored[i, 1] = local.bits[0]
            Stored[i, 2] = G.bits[i]
            s.bits[t] = Bits[i]
            local.bits[0] = Bits[i]
            G.bits[i] = Bits[i]
            Loaded[i, 0] = s[t]
            Loaded[i, 1] = local[0]
            Loaded[i, 2] = G[i]

    return roundtrip


def run_roundtrip(name: str, values: np.ndarray, bits: np.ndarray):
    n = max(len(values), len(bits))
    values = np.resize(values, n)
    bits = np.resize(bits, n).astype(storage(name))
    stored = np.zeros((n, 3), storage(name))
    loaded = np.zeros((n, 3), np.float32)
    tensor = np.zeros(n, FORMATS[name])  # an ml_dtypes (NumPy) array argument
    roundtrip_kernel(name).interpret(values, bits, stored, loaded, tensor, n)
    return values, bits, stored, loaded, tensor
