"""wgmma.mma_async for the interpreter: what one warp of the warpgroup computes.

Each warp owns 16 rows of the (64, N) accumulator, and its rows of the product depend only on its
own registers, its rows of A and all of B, so the instruction runs as a warp collective: once the
32 lanes arrived, their accumulator registers are gathered into the warp's rows (through the
fragment layout), A and B are read from shared memory through the descriptor values the lanes
pass (decoded as the hardware reads them: start address, LBO, SBO, swizzle, the record's
majorness) or from the A registers, and the new registers go back to each lane. Each of those
moves is one NumPy gather or scatter through a cached map (:mod:`.operand_maps`). The MMA completes
at issue (``commit_group`` / ``wait_group`` have nothing left to wait for).

Arithmetic is exact (float64, then the accumulator type): the hardware's fp32 rounding order is
not modelled, so results agree with the GPU wherever every partial sum is representable, which
the tests' inputs ensure.
"""

from __future__ import annotations

from functools import cache
from operator import itemgetter

import numpy as np

from ..fragment import WARPGROUP_THREADS, FragmentLayout, wgmma_a, wgmma_accumulator
from ..ir import PlanRecord
from ..patterns.matrix_descriptors import Major, MatrixDescriptor, MatrixWalk
from ..patterns.wgmma import ACCUMULATOR_ELEMENTS, InputType, WgmmaOpcode, element_bytes
from .machine import Block
from .operand_maps import fragment_elements, matrix_addresses
from .tma import half_values


def wgmma(machine, thread, record: PlanRecord, op: WgmmaOpcode, values: tuple):
    """Issue: wait for the warp's 32 lanes, then compute (see the module's docstring); ``op`` is
    the record's parsed opcode, ``values`` the thread's operands in the record's role order."""
    key = (record.opcode, thread.instruction())
    return Block(
        (
            "warp",
            key,
            lambda per_lane, threads: _warp_product(threads[0].cta, record, op, per_lane, threads),
            values,
        )
    )


def _warp_product(cta, record: PlanRecord, op: WgmmaOpcode, per_lane: list, threads: list) -> list:
    n, k = op.n, op.k
    fields = record.fields
    scale_a, scale_b = fields.scales
    accumulator = ACCUMULATOR_ELEMENTS[op.dtype]
    position = {role: i for i, (role, _) in enumerate(record.operands)}
    first = per_lane[0]
    lanes = np.array([t.linear % WARPGROUP_THREADS for t in threads], dtype=np.int64)
    warp_rows = 16 * int(lanes[0] // 32)
    count = len(record.results)
    d = _gather(
        per_lane,
        lanes,
        [position[f"d[{j}]"] for j in range(count)],
        wgmma_accumulator,
        accumulator,
        (64, n),
    )
    if fields.a_major is None:  # A from registers
        a_positions = [i for role, i in position.items() if role.startswith("a[")]
        a = _gather(per_lane, lanes, a_positions, wgmma_a, op.atype.elements[0], (64, k))
    else:
        a = _read_matrix(cta, first[position["a_desc"]], fields.a_major, op.atype, 64, k)
    b = _read_matrix(cta, first[position["b_desc"]], fields.b_major, op.btype, n, k).T  # (K, N)
    rows = slice(warp_rows, warp_rows + 16)
    product = (scale_a * scale_b) * (a[rows] @ b)
    scale_d = first[position["scale_d"]] if "scale_d" in position else fields.scale_d
    d[rows] = product + (d[rows] if scale_d else 0)
    return _scatter(d, lanes, count, accumulator)


def _gather(
    per_lane, lanes: np.ndarray, positions: list, layout: FragmentLayout, dtype: str, shape
) -> np.ndarray:
    """The tile the lanes' registers (operands at ``positions``) hold, as float64; zeros where
    this warp holds nothing."""
    tile = np.zeros(shape)
    rows, columns = _register_elements(layout, len(positions), dtype, lanes)
    pick = itemgetter(*positions)
    registers = [pick(lane) for lane in per_lane]
    if len(positions) == 1:
        registers = [[r] for r in registers]
    values = _unpack(registers, dtype)
    tile[rows[..., None], columns[..., None] + np.arange(values.shape[-1])] = values
    return tile


def _scatter(tile: np.ndarray, lanes: np.ndarray, count: int, dtype: str) -> list:
    """Each lane's new accumulator registers: a tuple, or the value itself for one register."""
    rows, columns = _register_elements(wgmma_accumulator, count, dtype, lanes)
    per = wgmma_accumulator.per_register(dtype)
    registers = _pack(tile[rows[..., None], columns[..., None] + np.arange(per)], dtype)
    return [tuple(r) if count > 1 else r[0] for r in registers]


def _register_elements(
    layout: FragmentLayout, count: int, dtype: str, lanes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    rows, columns = fragment_elements(layout, count, dtype)
    return rows[lanes], columns[lanes]


def _unpack(values: list, dtype: str) -> np.ndarray:
    """(lanes, registers, elements per register) float64: the elements of 32-bit registers."""
    if dtype == "float32":  # registers hold float32 scalars, which convert fastest as such
        return np.array(values, dtype=np.float32).astype(np.float64)[..., None]
    words = np.array([[int(v) & 0xFFFFFFFF for v in lane] for lane in values], dtype=np.uint32)
    if dtype == "int32":
        return words.view(np.int32).astype(np.float64)[..., None]
    return _decode(words[..., None].view(np.uint8), dtype)


def _pack(values: np.ndarray, dtype: str) -> list:
    """Registers from (lanes, registers, elements per register) float64 values: float32
    scalars, or Python ints (s32 saturated, f16 pairs packed low first)."""
    if dtype == "float32":
        return list(values[..., 0].astype(np.float32))
    if dtype == "int32":
        return np.clip(values[..., 0], -(2**31), 2**31 - 1).astype(np.int64).tolist()
    halves = values.astype(np.float16).view(np.uint16).astype(np.int64)
    return (halves[..., 0] | halves[..., 1] << 16).tolist()


def _read_matrix(
    cta, descriptor: int, major: Major, itype: InputType, mn: int, k: int
) -> np.ndarray:
    """The (mn, k) operand the descriptor walks, decoded to float64."""
    fields = MatrixDescriptor.decode(int(descriptor))
    walk = MatrixWalk(major, fields.swizzle, fields.start_address, fields.lbo, fields.sbo)
    size = element_bytes(itype)
    addresses = matrix_addresses(walk, mn, k, size)
    for extreme in (addresses.min(), addresses.max()):
        cta.smem.check(int(extreme), size)
    raw = cta.smem.data[addresses[..., None] + np.arange(size)]  # (mn, k, size) bytes
    return _decode(raw, itype.elements[0])[..., 0]


def _decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian element bytes (..., bytes) as float64 values (..., elements) (tf32 read as
    the tensor cores do: the low 13 mantissa bits ignored)."""
    raw = np.ascontiguousarray(raw)
    if dtype in ("bfloat16", "float16"):
        return half_values(raw.view(np.uint16), dtype == "bfloat16").astype(np.float64)
    if dtype == "tf32":
        return (raw.view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
    if dtype in ("int8", "uint8"):
        return raw.view(np.dtype(dtype)).astype(np.float64)
    return _fp8_table(dtype)[raw]


@cache
def _fp8_table(dtype: str) -> np.ndarray:
    """The value of each of the 256 bytes of an fp8 format."""
    return np.array([_fp8(byte, dtype) for byte in range(256)])


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
