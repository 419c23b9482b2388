"""wgmma.mma_async for the interpreter: what one warp of the warpgroup computes.

Each warp owns 16 rows of the (64, N) accumulator, and its rows of the product depend only on its
own registers, its rows of A and all of B, so the instruction runs as a warp collective: once the
32 lanes arrived, their accumulator registers are gathered into the warp's rows (through the
fragment layout), A and B are read from shared memory through the descriptor values the lanes
pass (decoded as the hardware reads them: start address, LBO, SBO, swizzle, the record's
majorness) or from the A registers, and the new registers go back to each lane. The MMA completes
at issue (``commit_group`` / ``wait_group`` have nothing left to wait for).

Arithmetic is exact (float64, then the accumulator type): the hardware's fp32 rounding order is
not modelled, so results agree with the GPU wherever every partial sum is representable, which
the tests' inputs ensure.
"""
from __future__ import annotations

import numpy as np

from ..fragment import WARPGROUP_THREADS, wgmma_a, wgmma_accumulator
from ..ir import PlanRecord
from ..patterns.matrix_descriptors import MatrixDescriptor, MatrixWalk, walk_address
from ..patterns.wgmma import ACCUMULATOR_ELEMENTS, INPUT_TYPES, element_bytes
from .machine import Block
from .tma import half_values



def wgmma(machine, thread, record: PlanRecord, ops: dict):
    """Issue: wait for the warp's 32 lanes, then compute (see the module's docstring)."""
    line = thread.line(machine.where)
    key = (record.opcode, line.lineno if line else 0)
    return Block(("warp", key, lambda per_lane, threads: _warp_product(threads[0].cta, record,
                                                                        per_lane, threads), ops))


def _warp_product(cta, record: PlanRecord, per_lane: list, threads: list) -> list:
    words = record.opcode.split(".")
    shape, dtype, a_type, b_type = [w for w in words[4:] if w != "satfinite"]
    n, k = (int(x) for x in shape[shape.index("n") + 1:].split("k"))
    a_major, b_major = record.fields["majors"]
    scale_a, scale_b = record.fields.get("scales", (1, 1))
    accumulator = ACCUMULATOR_ELEMENTS[dtype]
    warp_rows = 16 * (threads[0].linear % WARPGROUP_THREADS // 32)
    count = len(record.results)
    d = _gather(per_lane, threads, [f"d[{j}]" for j in range(count)], wgmma_accumulator,
                accumulator, (64, n))
    if a_major == "registers":
        roles = [role for role, _ in record.operands if role.startswith("a[")]
        a = _gather(per_lane, threads, roles, wgmma_a, INPUT_TYPES[a_type].elements[0], (64, k))
    else:
        a = _read_matrix(cta, per_lane[0]["a_desc"], a_major, a_type, 64, k)
    b = _read_matrix(cta, per_lane[0]["b_desc"], b_major, b_type, n, k).T  # (K, N)
    rows = slice(warp_rows, warp_rows + 16)
    product = (scale_a * scale_b) * (a[rows] @ b)
    scaled = product + (d[rows] if per_lane[0].get("scale_d", 1) else 0)
    d[rows] = scaled
    return _scatter(d, threads, count, accumulator, (64, n))


def _gather(per_lane, threads, roles, layout, dtype: str, shape) -> np.ndarray:
    """The tile the lanes' registers hold (float64), zeros where this warp holds nothing."""
    tile = np.zeros(shape)
    per = layout.per_register(dtype)
    for values, t in zip(per_lane, threads):
        for register, role in enumerate(roles):
            row, col = layout.element(register, t.linear, dtype)
            tile[row, col:col + per] = _unpack(values[role], dtype, per)
    return tile


def _scatter(tile, threads, count: int, dtype: str, shape) -> list:
    per = wgmma_accumulator.per_register(dtype)
    out = []
    for t in threads:
        registers = []
        for register in range(count):
            row, col = wgmma_accumulator.element(register, t.linear, dtype)
            registers.append(_pack(tile[row, col:col + per], dtype))
        out.append(tuple(registers) if count > 1 else registers[0])
    return out


def _unpack(value, dtype: str, per: int) -> np.ndarray:
    """The ``per`` elements of one 32-bit register value."""
    if dtype == "float32":
        return np.array([value], dtype=np.float64)
    if dtype == "int32":
        return np.array([np.int64(np.uint32(int(value) & 0xFFFFFFFF).view(np.int32))])
    word = np.array([int(value) & 0xFFFFFFFF], dtype=np.uint32)
    return _decode(word.view(np.uint8), dtype)[:per]


def _pack(values: np.ndarray, dtype: str):
    if dtype == "float32":
        return np.float32(values[0])
    if dtype == "int32":
        return int(np.clip(values[0], -2 ** 31, 2 ** 31 - 1))
    return int(values.astype(np.float16).view(np.uint16).astype(np.uint32) @ [1, 1 << 16])


def _read_matrix(cta, descriptor: int, major: str, ptx_type: str, mn: int, k: int) -> np.ndarray:
    """The (mn, k) operand the descriptor walks, decoded to float64."""
    fields = MatrixDescriptor.decode(int(descriptor))
    walk = MatrixWalk(major, fields.swizzle, fields.start_address, fields.lbo, fields.sbo)
    itype = INPUT_TYPES[ptx_type]
    size = element_bytes(itype)
    out = np.empty((mn, k))
    for row in range(mn):
        for col in range(k):
            raw = cta.smem.read(walk_address(walk, row, col, size), size)
            out[row, col] = _decode(raw, itype.elements[0])[0]
    return out


def _decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian element bytes as float64 values (tf32 read as the tensor cores do: the
    low 13 mantissa bits ignored)."""
    if dtype in ("bfloat16", "float16"):
        return half_values(raw.view(np.uint16), dtype == "bfloat16").astype(np.float64)
    if dtype == "tf32":
        return (raw.view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
    if dtype in ("int8", "uint8"):
        return raw.view(np.dtype(dtype)).astype(np.float64)
    return np.array([_fp8(int(b), dtype) for b in raw])


def _fp8(byte: int, dtype: str) -> float:
    """An e4m3 (bias 7, no infinities) or e5m2 (bias 15) byte."""
    mantissa_bits, bias = (3, 7) if dtype == "float8_e4m3fn" else (2, 15)
    sign = -1.0 if byte & 0x80 else 1.0
    exponent = (byte >> mantissa_bits) & ((1 << (7 - mantissa_bits)) - 1)
    mantissa = byte & ((1 << mantissa_bits) - 1)
    if dtype == "float8_e4m3fn" and exponent == 15 and mantissa == 7:
        return float("nan")
    if dtype == "float8_e5m2" and exponent == 31:
        return float("nan") if mantissa else sign * float("inf")
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)
