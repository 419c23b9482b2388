"""The TMA unit as a NumPy model: one ``cp.async.bulk.tensor`` load or store, or one
``cp.reduce.async.bulk.tensor`` reduction, of one box between global memory and one CTA's shared
memory (a multicast load is one :func:`tma_load` per destination CTA).

Written from the PTX ISA (Tensor chapter: bounding box, traversal stride, out-of-boundary access,
``.tile::gather4``/``.tile::scatter4``, sub-byte types, interleave layout, swizzling modes; Tensor
copy instructions and their restrictions) and the CUDA driver API's ``cuTensorMapEncodeTiled``.
Where those leave a choice, the H200 decided (probes of raw PTX against
``cuTensorMapEncodeTiled`` descriptors); each such fact says so where it is used:

- a shared address that is not 128-byte aligned traps (misaligned address) for loads and stores;
- a swizzled shared address need not be aligned to the swizzle period: the pattern follows the
  absolute address, as the ISA's "swizzle base offset" table says, so only 128 bytes are required;
- swizzled box rows narrower than the span land at the span pitch; the rest of each span is left
  as it was;
- the out-of-bound NaN is the 16-bit pattern 0x7FF7 repeated, whatever the float format;
- a ``TFLOAT32`` descriptor rounds loaded float32 values to tf32 (nearest even, NaN -> 0x7FFFE000)
  and stores them unchanged;
- stores and reductions at a negative coordinate trap (illegal instruction), as the ISA's
  ``.global.shared::cta`` restriction says; parts of a box past the tensor's end are not written;
- reductions round like IEEE arithmetic in the element type, keep subnormals (also the bulk
  ``add.f32``, whose ISA text says it flushes them), and return the canonical NaN of the type.

A box is walked in *units*: one element; with interleave one 16- or 32-byte channel slice (the
descriptor's innermost dimension counts slices, runtime/tensormap.py ``_interleaved``); for packed
FP4 one group of sixteen 4-bit values, 8 bytes of global data in the low half of a 16-byte shared
block. Every check runs before the first byte moves, so a faulting instruction writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import DTYPES, REDUCTIONS
from ..patterns.tma import tensor_reduction_type
from ..patterns.tma_opcodes import BulkTensorOpcode
from ..runtime.tensormap import TensorMapFields
from .memory import GlobalMemory, SharedMemory


class TmaFault(Exception):
    """A TMA instruction the hardware traps on, or a descriptor its encoder would refuse."""


SHARED_ALIGN = 128
SWIZZLE_SPAN = {1: 32, 2: 64, 3: 128}  # bytes of one swizzled row
PACKED = "float4_e2m1fn"  # CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B
PACKED_GROUP = 16  # 4-bit values per unit: 8 global bytes, a 16-byte shared block
NAN_FILL = np.array([0xF7, 0x7F], np.uint8)  # the OOB-NaN: 0x7FF7 little-endian
FLOAT_DESCRIPTORS = frozenset({"float16", "bfloat16", "float32", "float64", "tf32"})

# The NumPy type of each integer PTX type reductions compute on (.bN as unsigned N bits).
_WORDS = [d for d in DTYPES.values() if d.kind in ("uint", "int") and d.bits in (32, 64)]
_INTEGERS = {
    **{d.ptx: np.dtype(d.numpy).type for d in _WORDS},
    **{d.bit_type: np.dtype(d.numpy).type for d in _WORDS if d.kind == "uint"},
}
_INTEGER_OPS = {
    "add": np.add,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


# --------------------------------------------------------------------------------- the box
@dataclass(frozen=True)
class _Walk:
    """One box, unit by unit in shared-image order (outermost dimension first)."""

    unit: int  # global bytes per unit
    inside: np.ndarray  # bool: the unit lies inside the tensor
    glob: np.ndarray  # int64 global address of each unit (0 where outside)
    shared: np.ndarray  # int64 shared address of each unit's first byte, before the swizzle

    @property
    def payload(self) -> int:
        """Transaction bytes: the whole box, out-of-bound units included."""
        return self.inside.size * self.unit


def _s32(value: int) -> int:
    """A coordinate register read as .s32."""
    return (int(value) + 2**31) % 2**32 - 2**31


def _check_descriptor(fields: TensorMapFields, op: BulkTensorOpcode, gathered: bool) -> None:
    """The encoder's and the ISA's rules that the walk below relies on."""
    what = f"{op.native_text}: TensorMap"
    rank = len(fields.dims)
    if rank != op.rank:
        raise TmaFault(f"{what} has rank {rank}, the opcode is .{op.rank}d")
    if fields.oob_fill and fields.data_type not in FLOAT_DESCRIPTORS:
        raise TmaFault(
            f"{what}: NaN out-of-bound fill needs a floating-point format, the "
            f"descriptor is {fields.data_type}"
        )
    if fields.interleave:
        if rank < 3 or gathered:
            raise TmaFault(f"{what}: interleave needs rank 3..5 in tile mode")
        if fields.interleave == 2 and fields.swizzle != 1:
            raise TmaFault(
                f"{what}: 32-byte interleave needs the 32-byte swizzle, got swizzle="
                f"{fields.swizzle}"
            )
    if gathered and fields.box[1] != 1:
        raise TmaFault(f"{what}: {op.mode} needs a box of one row (box {fields.box})")
    if fields.data_type == PACKED:
        if op.kind != "load":
            raise TmaFault(f"{what}: 16U4_ALIGN16B (packed FP4) descriptors are load-only")
        if fields.box[0] != 128 or fields.dims[0] % 128 or fields.interleave:
            raise TmaFault(
                f"{what}: packed FP4 needs an inner box of 128 values and an inner "
                f"dimension a multiple of 128, without interleave (box {fields.box}, "
                f"dims {fields.dims})"
            )


def _coordinates(
    op: BulkTensorOpcode, coords: tuple, rows: tuple | None, gathered: bool
) -> tuple[list[int], list[int]]:
    """The coordinate registers read as .s32: one per dimension, or the column and the four
    rows of .tile::gather4/.tile::scatter4."""
    starts = [_s32(c) for c in coords]
    row_coords = [_s32(r) for r in rows] if gathered else []
    if len(starts) != (1 if gathered else op.rank) or len(row_coords) != (4 if gathered else 0):
        raise TmaFault(f"{op.native_text}: got coordinates {coords} and rows {rows}")
    if op.kind != "load" and min(starts + row_coords) < 0:
        raise TmaFault(
            f"{op.native_text}: coordinates {tuple(starts + row_coords)} must be "
            f"non-negative for a store or reduction (the H200 traps: illegal "
            f"instruction)"
        )
    return starts, row_coords


def _walk(
    fields: TensorMapFields, op: BulkTensorOpcode, coords: tuple, rows: tuple | None, address: int
) -> _Walk:
    """Where every unit of the box is: checks, then index arithmetic over the whole box."""
    gathered = op.mode in ("tile::gather4", "tile::scatter4")
    _check_descriptor(fields, op, gathered)
    if address % SHARED_ALIGN:
        raise TmaFault(
            f"{op.native_text}: shared address {address:#x} is not "
            f"{SHARED_ALIGN}-byte aligned (the H200 traps: misaligned address)"
        )
    starts, row_coords = _coordinates(op, coords, rows, gathered)
    dims, box = list(fields.dims), list(fields.box)
    steps = list(fields.element_strides)
    packed = fields.data_type == PACKED
    if packed:
        if starts[0] % 128:
            raise TmaFault(
                f"{op.native_text}: packed FP4 needs the first coordinate to be a "
                f"multiple of 128, got {starts[0]}"
            )
        unit, block = PACKED_GROUP // 2, PACKED_GROUP
        dims[0], box[0], starts[0] = (v // PACKED_GROUP for v in (dims[0], box[0], starts[0]))
    else:
        unit = 16 * fields.interleave or DTYPES[fields.data_type].bytes
        block = unit
    if not fields.interleave:
        steps[0] = 1  # the hardware ignores the innermost stride: whole box rows
    extents = [math.ceil(b / s) for b, s in zip(box, steps)]
    if fields.interleave:
        extents[-2] = 1  # one channel slice per issue
    positions = [
        start + step * np.arange(extent, dtype=np.int64)
        for start, step, extent in zip(starts, steps, extents)
    ]
    if gathered:
        positions.append(np.array(row_coords, dtype=np.int64))
    rank = len(positions)
    shape = tuple(len(p) for p in reversed(positions))
    inside = np.ones(shape, dtype=bool)
    glob = np.zeros(shape, dtype=np.int64)
    for axis, (p, extent, stride) in enumerate(zip(positions, dims, (unit, *fields.strides))):
        p = p.reshape([-1 if a == rank - 1 - axis else 1 for a in range(rank)])
        ok = (p >= 0) & (p < extent)
        inside = inside & ok
        glob = glob + np.where(ok, p, 0) * stride
    inside = inside.ravel()
    glob = np.where(inside, glob.ravel() + fields.address, 0)
    row_bytes = shape[-1] * block
    pitch = row_bytes
    if fields.swizzle and not fields.interleave:
        span = SWIZZLE_SPAN[fields.swizzle]
        if row_bytes > span:
            raise TmaFault(
                f"{op.native_text}: the inner box is {row_bytes} bytes of shared "
                f"memory, wider than the {span}-byte swizzle span"
            )
        pitch = span  # narrower rows land at the span pitch (H200)
    index = np.arange(inside.size, dtype=np.int64)
    shared = address + index // shape[-1] * pitch + index % shape[-1] * block
    return _Walk(unit, inside, glob, shared)


def _shared_bytes(walk: _Walk, smem: SharedMemory, swizzle: int, what: str) -> np.ndarray:
    """Byte indices into ``smem.data`` of every unit, one row per unit, swizzled by absolute
    address: 16-byte chunk bits [4, 4+mode) XOR address bits [7, 7+mode)."""
    linear = walk.shared[:, None] + np.arange(walk.unit, dtype=np.int64)
    physical = linear ^ (((linear >> 7) & ((1 << swizzle) - 1)) << 4)
    low, high = int(physical.min()), int(physical.max()) + 1
    if low < 0 or high > smem.size:
        raise TmaFault(
            f"{what}: the box's shared bytes [{low:#x}, {high:#x}) lie outside CTA "
            f"{smem.cta}'s {smem.size} bytes of shared memory"
        )
    return physical


def _global_bytes(
    memory: GlobalMemory, starts: np.ndarray, unit: int
) -> tuple[np.ndarray, np.ndarray]:
    """The buffer bytes holding the units at ``starts``, and their indices (one row per unit);
    a unit outside every allocation raises MemoryFault."""
    index = starts[:, None] + np.arange(unit, dtype=np.int64)
    low, high = int(index.min()), int(index.max()) + 1
    buffer, offset = memory.buffer_at(low, high - low)
    return buffer.data, index - low + offset


# ------------------------------------------------------------------------------ load / store
def round_tf32(bits: np.ndarray) -> np.ndarray:
    """float32 bit patterns rounded to tf32's 10 mantissa bits, to nearest even; every NaN
    becomes 0x7FFFE000 (what a TFLOAT32 descriptor loads on the H200)."""
    bits = bits.astype(np.uint32)
    rounded = (bits + np.uint32(0xFFF) + ((bits >> 13) & 1)) & np.uint32(0xFFFFE000)
    return np.where((bits & 0x7FFFFFFF) > 0x7F800000, np.uint32(0x7FFFE000), rounded)


def tma_load(
    fields: TensorMapFields,
    op: BulkTensorOpcode,
    coords: tuple[int, ...],
    rows: tuple[int, ...] | None,
    memory: GlobalMemory,
    smem: SharedMemory,
    address: int,
) -> int:
    """Copy one box into ``smem`` at shared address ``address``; returns the transaction bytes
    (what complete_tx adds). ``coords`` are in PTX order (innermost first; the column alone for
    .tile::gather4, whose four row coordinates are ``rows``)."""
    walk = _walk(fields, op, coords, rows, int(address))
    target = _shared_bytes(walk, smem, fields.swizzle, op.native_text)
    data = np.zeros((walk.inside.size, walk.unit), dtype=np.uint8)
    if fields.oob_fill:
        data[:] = np.resize(NAN_FILL, walk.unit)
    if walk.inside.any():
        buffer, index = _global_bytes(memory, walk.glob[walk.inside], walk.unit)
        values = buffer[index]
        if fields.data_type == "tf32":
            values = round_tf32(values.view(np.uint32)).view(np.uint8)
        data[walk.inside] = values
    smem.data[target] = data
    return walk.payload


def tma_store(
    fields: TensorMapFields,
    op: BulkTensorOpcode,
    coords: tuple[int, ...],
    rows: tuple[int, ...] | None,
    memory: GlobalMemory,
    smem: SharedMemory,
    address: int,
) -> None:
    """Store one box from ``smem`` (``op.kind == "store"``, .tile or .tile::scatter4), or
    reduce it into global memory with ``op.redop`` (``op.kind == "reduce"``); units outside the
    tensor are not written. A TFLOAT32 descriptor stores float32 bits unchanged (H200)."""
    walk = _walk(fields, op, coords, rows, int(address))
    source = _shared_bytes(walk, smem, fields.swizzle, op.native_text)
    if op.kind == "reduce":
        element = tensor_reduction_type(op.redop, fields.data_type)
        if element is None:
            raise TmaFault(
                f"{op.native_text}: .{op.redop} is not defined for a "
                f"{fields.data_type} descriptor (the H200 raises an illegal "
                f"instruction)"
            )
    if not walk.inside.any():
        return
    data = smem.data[source[walk.inside]]
    buffer, index = _global_bytes(memory, walk.glob[walk.inside], walk.unit)
    if op.kind == "reduce":
        data = reduce_values(op.redop, element, buffer[index].ravel(), data.ravel()).reshape(
            index.shape
        )
    buffer[index] = data


# -------------------------------------------------------------------------------- reductions
def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 bit patterns, to nearest even (integer bit
    arithmetic: add half an ulp of bfloat16 plus the tie's parity, drop 16 bits); NaN -> 0x7FFF."""
    values = np.asarray(values, dtype=np.float32)
    rounded = round_to_bfloat16(values.view(np.uint32)).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FFF), rounded)


def round_to_bfloat16(bits):
    """The rounding of :func:`bfloat16_bits` on the float32 bits of a value that is not NaN
    (a Python int or a uint32 array): add half an ulp of bfloat16 plus the tie's parity, drop
    16 bits. The sum stays below 2^32: the largest non-NaN pattern is -inf, 0xFF800000."""
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def half_values(bits: np.ndarray, brain: bool) -> np.ndarray:
    """float16 / bfloat16 bit patterns as exact float32 values."""
    if brain:
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def _half_min_max(redop: str, a: np.ndarray, b: np.ndarray, infinity: int) -> np.ndarray:
    """PTX min/max of 16-bit floats on their bits: -0 < +0, a NaN operand yields the other,
    two NaNs the canonical 0x7FFF (as the H200 computes them)."""

    def order(bits):  # monotonic in the value, -0 below +0
        magnitude = (bits & 0x7FFF).astype(np.int32)
        return np.where(bits & 0x8000, -magnitude - 1, magnitude)

    nan_a, nan_b = (a & 0x7FFF) > infinity, (b & 0x7FFF) > infinity
    keep_a = order(a) <= order(b) if redop == "min" else order(a) >= order(b)
    out = np.where(keep_a, a, b)
    out = np.where(nan_a, b, out)
    out = np.where(nan_b, a, out)
    return np.where(nan_a & nan_b, np.uint16(0x7FFF), out)


def reduce_values(redop: str, type_: str, old: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``old`` (the global bytes) combined element-wise with ``data`` (the shared bytes) by
    reduction ``redop`` over PTX element type ``type_`` (u32, s32, b64, f16, bf16, f32...); the
    bytes to write back. Integers wrap; inc/dec follow the PTX ISA's atom rules; floats round to
    nearest even in the element type, keep subnormals, and yield the type's canonical NaN
    (f64: a NaN operand's payload, quieted, or 0xFFF8000000000000), as the H200 computes them."""
    if type_ not in REDUCTIONS.get(redop, ()):
        raise TmaFault(f"reduction .{redop}.{type_} is not defined")
    old, data = np.asarray(old, dtype=np.uint8), np.asarray(data, dtype=np.uint8)
    if type_ in _INTEGERS:
        kind = _INTEGERS[type_]
        a, b = old.view(kind), data.view(kind)
        if redop == "inc":
            out = np.where(a >= b, 0, a + 1)
        elif redop == "dec":
            out = np.where((a == 0) | (a > b), b, a - 1)
        else:
            out = _INTEGER_OPS[redop](a, b)
        return out.astype(kind).view(np.uint8)
    return _reduce_floats(redop, type_, old, data)


@np.errstate(over="ignore", invalid="ignore")  # inf and NaN results are values, not warnings
def _reduce_floats(redop: str, type_: str, old: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The floating-point part of :func:`reduce_values`."""
    if type_ in ("f16", "bf16"):
        a, b = old.view(np.uint16), data.view(np.uint16)
        brain = type_ == "bf16"
        if redop != "add":
            return _half_min_max(redop, a, b, 0x7F80 if brain else 0x7C00).view(np.uint8)
        # Rounding to float32 first, then to the 16-bit type, equals one rounding of the exact
        # sum: 24 significand bits >= 2 * 11 + 2 (double rounding is innocuous).
        total = half_values(a, brain) + half_values(b, brain)
        if brain:
            return bfloat16_bits(total).view(np.uint8)
        bits = total.astype(np.float16).view(np.uint16)
        return np.where(np.isnan(total), np.uint16(0x7FFF), bits).view(np.uint8)
    if type_ == "f32":
        total = old.view(np.float32) + data.view(np.float32)
        return np.where(np.isnan(total), np.uint32(0x7FFFFFFF), total.view(np.uint32)).view(
            np.uint8
        )
    a, b = old.view(np.float64), data.view(np.float64)
    quiet = np.uint64(1 << 51)
    total = a + b
    bits = np.where(np.isnan(total), np.uint64(0xFFF8000000000000), total.view(np.uint64))
    bits = np.where(np.isnan(b), b.view(np.uint64) | quiet, bits)
    return np.where(np.isnan(a), a.view(np.uint64) | quiet, bits).view(np.uint8)
