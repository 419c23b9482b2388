"""Single-product wgmma kernels for the tests: one warpgroup computes ``D = A @ B`` (or with the
accumulator scaled/negated) from operands staged in shared memory by plain element copies, in any
layout the test picks, and writes the accumulator fragment out element by element.

Operands travel as their storage bits (uint16 for bf16, uint8 for fp8, uint32 for tf32), copied
into the shared operands' ``.bits``, so the tests need NumPy only; ``exact_values`` draws values
every wgmma type represents exactly.
"""

from dataclasses import dataclass

import numpy as np

import jittile
from jittile import T
from jittile.layout import tiled_swizzle, wgmma_a, wgmma_accumulator

# jittile element type -> (storage dtype of the global array, exponent bias, mantissa bits)
STORAGE = {
    "bfloat16": ("uint16", None, None),
    "float16": ("float16", None, None),
    "tf32": ("uint32", None, None),
    "float32": ("float32", None, None),
    "float8_e4m3fn": ("uint8", 7, 3),
    "float8_e5m2": ("uint8", 15, 2),
    "int8": ("int8", None, None),
    "uint8": ("uint8", None, None),
}
ACCUMULATOR = {"f32": "float32", "f16": "float16", "s32": "int32"}
OUTPUT = {"f32": "float32", "f16": "uint32", "s32": "int32"}  # D's global storage


@dataclass(frozen=True)
class Case:
    opcode: str
    atype: str
    btype: str
    n: int
    k: int  # K of the whole product (a multiple of the instruction's)
    a_major: str = "K"  # "K", "MN" or "registers"
    b_major: str = "K"
    a_swizzle: int = 3
    b_swizzle: int = 3
    scale_a: int = 1
    accumulate: bool = True  # start from D (scale_d=1); else scale_d=0 on a zero accumulator

    @property
    def dtype(self) -> str:
        return self.opcode.split(".")[-3]

    def __str__(self) -> str:
        return (
            f"{self.opcode.split('.', 4)[-1]}-K{self.k}-A{self.a_major}{self.a_swizzle}"
            f"-B{self.b_major}{self.b_swizzle}" + ("-neg" if self.scale_a < 0 else "")
        )


def exact_values(shape: tuple, element: str, rng: np.random.Generator) -> np.ndarray:
    """Values in {0, +-0.5, +-1, +-2} (integers -3..3 for integer types) as float64."""
    if element in ("int8", "uint8"):
        low = 0 if element == "uint8" else -3
        return rng.integers(low, 4, size=shape).astype(np.float64)
    return rng.choice([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0], size=shape)


def storage_bits(values: np.ndarray, element: str) -> np.ndarray:
    """The global array holding ``values`` as ``element`` (exact for ``exact_values``)."""
    storage, bias, mantissa = STORAGE[element]
    if element == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if element == "tf32":  # the float32 bits (a shared tf32 buffer holds raw 32-bit words)
        return values.astype(np.float32).view(np.uint32)
    if bias is not None:
        bits = np.zeros(values.shape, np.uint8)
        nonzero = values != 0
        exponent = np.log2(np.abs(values[nonzero])).astype(int) + bias
        bits[nonzero] = (exponent << mantissa) | (np.signbit(values[nonzero]) << 7)
        return bits
    return values.astype(storage)


def stored_shape(role: str, major: str, rows: int, cols: int) -> tuple[int, int]:
    """How an operand is kept in shared memory: A is (64, K) K-major, (K, 64) MN-major; B is
    (N, K) K-major and (K, N) MN-major."""
    if role == "A":
        return (cols, rows) if major == "MN" else (rows, cols)
    return (cols, rows) if major == "K" else (rows, cols)


def make_kernel(case: Case):
    """The kernel of ``case`` (its shapes, layouts and opcode are closure constants)."""
    a_shape = stored_shape("A", case.a_major, 64, case.k)
    b_shape = stored_shape("B", case.b_major, case.k, case.n)
    a_storage, b_storage = STORAGE[case.atype][0], STORAGE[case.btype][0]
    a_layout = tiled_swizzle(case.a_swizzle, a_shape, case.atype)
    b_layout = tiled_swizzle(case.b_swizzle, b_shape, case.btype)
    accumulator, output = ACCUMULATOR[case.dtype], OUTPUT[case.dtype]
    per_word = 2 if case.dtype == "f16" else 1
    opcode, n, scale_a, accumulate = case.opcode, case.n, case.scale_a, case.accumulate
    a_rows, a_cols = a_shape
    b_rows, b_cols = b_shape
    a_registers = case.a_major == "registers"
    a_transposed, b_transposed = case.a_major == "MN", case.b_major == "K"
    a_bits, b_bits = a_storage != case.atype, b_storage != case.btype  # bits to .bits
    a_per_word = 32 // {"bfloat16": 16, "float16": 16, "tf32": 32}.get(case.atype, 8)

    @jittile.kernel
    def wgmma_product(
        A: T.Tensor(a_shape, a_storage),
        A_words: T.Tensor((None, None), "uint32"),
        B: T.Tensor(b_shape, b_storage),
        D: T.Tensor((64, None), output),
        SCALE_D: T.int32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        A_s = T.alloc_shared(a_shape, case.atype, layout=a_layout, align=1024)
        B_s = T.alloc_shared(b_shape, case.btype, layout=b_layout, align=1024)
        for i in range(tid, a_rows * a_cols, 128):
            if a_bits:
                A_s.bits[i // a_cols, i % a_cols] = A[i // a_cols, i % a_cols]
            else:
                A_s[i // a_cols, i % a_cols] = A[i // a_cols, i % a_cols]
        for i in range(tid, b_rows * b_cols, 128):
            if b_bits:
                B_s.bits[i // b_cols, i % b_cols] = B[i // b_cols, i % b_cols]
            else:
                B_s[i // b_cols, i % b_cols] = B[i // b_cols, i % b_cols]
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        acc = T.alloc_local((64, n), accumulator, layout=wgmma_accumulator)
        if accumulate:
            for i in T.unroll(acc.size):
                acc[i] = D[acc.row(i), acc.col(i) // per_word]
        if a_registers:
            frag = T.alloc_local((64, a_cols), case.atype, layout=wgmma_a)
            for i in T.unroll(frag.size):
                frag[i] = A_words[frag.row(i), frag.col(i) // a_per_word]
        T.ptx.wgmma.fence.sync.aligned()
        if a_registers:
            T.cuda.tile.apply(
                T.ptx[opcode],
                acc,
                frag,
                B_s.T if b_transposed else B_s,
                scale_d=SCALE_D,
                scale_a=scale_a,
            )
        elif a_transposed:
            T.cuda.tile.apply(
                T.ptx[opcode],
                acc,
                A_s.T,
                B_s.T if b_transposed else B_s,
                scale_d=SCALE_D,
                scale_a=scale_a,
            )
        else:
            T.cuda.tile.apply(
                T.ptx[opcode],
                acc,
                A_s,
                B_s.T if b_transposed else B_s,
                scale_d=SCALE_D,
                scale_a=scale_a,
            )
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        for i in T.unroll(acc.size):
            D[acc.row(i), acc.col(i) // per_word] = acc[i]

    return wgmma_product


def run_case(case: Case, launch: bool = True, seed: int = 0):
    """Build the inputs, run (or only compile) the kernel; returns (kernel, D, expected)."""
    rng = np.random.default_rng(seed)
    a = exact_values((64, case.k), case.atype, rng)
    b = exact_values((case.k, case.n), case.btype, rng)
    c = exact_values((64, case.n), "int8" if case.dtype == "s32" else "float32", rng)
    a_stored = a if case.a_major != "MN" else a.T
    b_stored = b.T if case.b_major == "K" else b
    a_bits = np.ascontiguousarray(storage_bits(a_stored, case.atype))
    words = (
        np.ascontiguousarray(storage_bits(a, case.atype)).view(np.uint32)
        if case.a_major == "registers"
        else np.zeros((1, 1), np.uint32)
    )
    b_bits = np.ascontiguousarray(storage_bits(b_stored, case.btype))
    if case.dtype == "f16":
        d = c.astype(np.float16).view(np.uint32)
    else:
        d = c.astype(OUTPUT[case.dtype])
    kernel = make_kernel(case)
    expected = case.scale_a * (a @ b) + (c if case.accumulate else 0)
    if launch:
        kernel(a_bits, words, b_bits, d, int(case.accumulate))
    result = d.view(np.float16) if case.dtype == "f16" else d
    return kernel, (a_bits, words, b_bits, d, 1), result, expected


BF16 = "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"
CASES = [
    Case(BF16.format(n=128), "bfloat16", "bfloat16", 128, 64, "K", "MN", 3, 3),
    Case(BF16.format(n=256), "bfloat16", "bfloat16", 256, 64, "K", "K", 3, 3, accumulate=False),
    Case(BF16.format(n=8), "bfloat16", "bfloat16", 8, 32, "K", "K", 1, 0),
    Case(BF16.format(n=64), "bfloat16", "bfloat16", 64, 32, "MN", "MN", 2, 1, scale_a=-1),
    Case(BF16.format(n=64), "bfloat16", "bfloat16", 64, 32, "registers", "MN", 0, 3),
    Case(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
        "float16",
        "float16",
        64,
        16,
        "MN",
        "K",
        0,
        0,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16",
        "float16",
        "float16",
        64,
        32,
        "K",
        "MN",
        2,
        2,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n32k16.f16.f16.f16",
        "float16",
        "float16",
        32,
        16,
        "registers",
        "K",
        0,
        1,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32",
        "tf32",
        "tf32",
        64,
        32,
        "K",
        "K",
        3,
        3,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32",
        "tf32",
        "tf32",
        24,
        8,
        "registers",
        "K",
        0,
        0,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
        "float8_e4m3fn",
        "float8_e4m3fn",
        128,
        128,
        "K",
        "K",
        3,
        3,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n64k32.f16.e5m2.e4m3",
        "float8_e5m2",
        "float8_e4m3fn",
        64,
        32,
        "K",
        "K",
        1,
        1,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e5m2",
        "float8_e4m3fn",
        "float8_e5m2",
        32,
        32,
        "registers",
        "K",
        0,
        1,
        scale_a=-1,
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8", "int8", "int8", 64, 128, "K", "K", 3, 0
    ),
    Case(
        "wgmma.mma_async.sync.aligned.m64n48k32.s32.u8.s8",
        "uint8",
        "int8",
        48,
        32,
        "registers",
        "K",
        0,
        1,
    ),
]
