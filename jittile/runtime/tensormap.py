"""Host TensorMaps: validation of the runtime fields, then ``cuTensorMapEncodeTiled``.

The rules checked here are the encoder's (CUDA driver API, ``cuTensorMapEncodeTiled``) for the
fields only known at launch: the array's address, extents and strides. Violations raise
:class:`LaunchError` naming the field before the driver sees them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..errors import LaunchError
from ..ir import HostTensorMap
from . import driver
from .arrays import DeviceView, device_view

TENSORMAP_BYTES = 128

# Descriptor data type per jittile format name (tf32 reads float32 storage; 8-bit floats move bytes).
_DATA_TYPES = {
    "uint8": "UINT8",
    "int8": "UINT8",
    "float8_e4m3fn": "UINT8",
    "float8_e5m2": "UINT8",
    "bool": "UINT8",
    "uint16": "UINT16",
    "int16": "UINT16",
    "uint32": "UINT32",
    "int32": "INT32",
    "uint64": "UINT64",
    "int64": "INT64",
    "float16": "FLOAT16",
    "bfloat16": "BFLOAT16",
    "float32": "FLOAT32",
    "float64": "FLOAT64",
    "tf32": "TFLOAT32",
    "float4_e2m1fn": "16U4_ALIGN16B",
}


_ELEMENT_BYTES = {
    "UINT8": 1,
    "UINT16": 2,
    "UINT32": 4,
    "INT32": 4,
    "UINT64": 8,
    "INT64": 8,
    "FLOAT16": 2,
    "BFLOAT16": 2,
    "FLOAT32": 4,
    "FLOAT64": 8,
    "TFLOAT32": 4,
    "16U4_ALIGN16B": 1,
}
_ELEMENT_BYTES = {name: _ELEMENT_BYTES[kind] for name, kind in _DATA_TYPES.items()}
# Values a storage byte holds in the packed formats, whose globalDim[0] counts values.
_VALUES_PER_BYTE = {"float4_e2m1fn": 2}


@dataclass(frozen=True)
class TensorMapFields:
    """The complete input of one ``cuTensorMapEncodeTiled`` call, innermost dimension first."""

    data_type: str
    address: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, dims 1..rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def region_fields(spec: HostTensorMap, view: DeviceView) -> TensorMapFields:
    """The encoder fields for ``spec`` applied to an actual array, validated.

    Pure host arithmetic on the array's pointer, extents and byte strides: no driver call. Region
    starts and extents are in the array's elements; for packed FP4 (a uint8 array, two values a
    byte) the innermost ``globalDim`` counts 4-bit values, as the driver does for its packed types,
    while the address and the strides stay in bytes.
    """
    rank = len(spec.box)
    what = f"TensorMap of {spec.tensor!r}"
    if view.ndim != len(spec.region_starts):
        raise LaunchError(
            f"{what}: the array has rank {view.ndim}, the call expects {len(spec.region_starts)}"
        )
    elem = view.dtype.bytes
    address = view.ptr
    dims = []
    for axis, (start, extent, full, stride) in enumerate(
        zip(spec.region_starts, spec.region_extents, view.shape, view.strides)
    ):
        length = full - start if extent is None else extent
        if start + length > full or length <= 0:
            raise LaunchError(
                f"{what}: region [{start}:{start + length}] on axis {axis} exceeds "
                f"the array extent {full}"
            )
        address += start * stride
        dims.append(length)
    strides = list(view.strides)
    if spec.interleave == 0:
        if strides[-1] != elem and dims[-1] > 1:
            raise LaunchError(
                f"{what}: globalStrides: the innermost stride must be one element "
                f"({elem} bytes), got {strides[-1]} bytes"
            )
    else:  # (N, C_slices, *spatial, Ci): the Ci axis is implicit in the descriptor rank
        if dims[-1] * elem != 16 * spec.interleave:
            raise LaunchError(
                f"{what}: interleave: the innermost axis must hold one "
                f"{16 * spec.interleave}-byte slice, got {dims[-1] * elem} bytes"
            )
        dims, strides = _interleaved(dims, strides, spec.interleave, what)
    if len(dims) != rank:
        raise LaunchError(
            f"{what}: the global region has rank {len(dims)}, the opcode rank is {rank}"
        )
    packed = spec.data_type == "float4_e2m1fn"
    if packed:
        dims[-1] *= _VALUES_PER_BYTE[spec.data_type]
    align = 32 if (spec.interleave == 2 or packed) else 16
    if address % align:
        raise LaunchError(f"{what}: globalAddress {address:#x} must be {align}-byte aligned")
    outer_strides = tuple(reversed(strides[:-1]))
    for stride in outer_strides:
        if stride % align or not 0 < stride < 2**40:
            raise LaunchError(
                f"{what}: globalStrides: {stride} bytes must be a positive multiple "
                f"of {align} below 2^40"
            )
    for axis, extent in enumerate(dims):
        if not 1 <= extent <= 2**32:
            unit = " FP4 values" if packed and axis == len(dims) - 1 else ""
            raise LaunchError(f"{what}: globalDim {extent}{unit} must be in 1..2^32")
    if packed and dims[-1] % 128:
        raise LaunchError(
            f"{what}: packed FP4 needs the inner global dimension to be a multiple "
            f"of 128 values (64 bytes), got {dims[-1]} values ({dims[-1] // 2} bytes)"
        )
    return TensorMapFields(
        spec.data_type,
        address,
        tuple(reversed(dims)),
        outer_strides,
        tuple(reversed(spec.box)),
        tuple(reversed(spec.element_strides)),
        spec.interleave,
        spec.swizzle,
        spec.l2_promotion,
        spec.oob_fill,
    )


def _interleaved(dims, strides, interleave: int, what):
    """Drop the implicit Ci axis of (N, C_slices, *spatial, Ci): the descriptor's dimensions are the
    remaining axes, whose innermost (spatial) stride must be exactly one slice. Verified on the
    H200 (bench/results/probe_tma_element_strides_interleave.log)."""
    slice_bytes = 16 * interleave
    if len(dims) < 4:
        raise LaunchError(f"{what}: interleave needs global axes (N, C_slices, *spatial, Ci)")
    if strides[-2] != slice_bytes:
        raise LaunchError(
            f"{what}: globalStrides: with interleave the innermost spatial stride "
            f"must be one {slice_bytes}-byte slice, got {strides[-2]} bytes"
        )
    return list(dims[:-1]), list(strides[:-1])


def encode(fields: TensorMapFields) -> bytes:
    """128 bytes of an encoded CUtensorMap."""
    drv = driver.bindings()
    dtype_enum = getattr(
        drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPES[fields.data_type]}"
    )
    interleave = [
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_32B,
    ][fields.interleave]
    swizzle = [
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
    ][fields.swizzle]
    l2 = [
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    ][fields.l2_promotion]
    oob = [
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    ][fields.oob_fill]
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
    # A rank-1 map has no outer strides; the driver still reads a non-null array, so pass one
    # (unused) entry rather than an empty list.
    strides = list(fields.strides) or [
        fields.dims[0]
        * _ELEMENT_BYTES[fields.data_type]
        // _VALUES_PER_BYTE.get(fields.data_type, 1)
    ]
    tmap = driver.check(
        drv.cuTensorMapEncodeTiled(
            dtype_enum,
            len(fields.dims),
            fields.address,
            [u64(d) for d in fields.dims],
            [u64(s) for s in strides],
            [u32(b) for b in fields.box],
            [u32(e) for e in fields.element_strides],
            interleave,
            swizzle,
            l2,
            oob,
        ),
        f"cuTensorMapEncodeTiled(dims={fields.dims}, strides={fields.strides}, box={fields.box}, "
        f"element_strides={fields.element_strides}, swizzle={fields.swizzle}, "
        f"interleave={fields.interleave})",
    )
    return ctypes.string_at(tmap.getPtr(), TENSORMAP_BYTES)


class TensorMap:
    """A caller-encoded TensorMap: ``jittile.TensorMap(array, box=(64, 64), swizzle=3)``.

    Passed as a kernel argument it is the opaque global operand of TMA calls; the caller owns the
    match between its fields and the calls that use it.
    """

    def __init__(
        self,
        array,
        box,
        *,
        dtype: str | None = None,
        element_strides=None,
        swizzle: int = 0,
        interleave: int = 0,
        l2_promotion: int = 0,
        oob_fill: int = 0,
    ):
        driver.ensure_context()
        self.array = array  # keeps the memory alive
        view = device_view(array)
        if view.host is not None:
            raise LaunchError("jittile.TensorMap needs a device array (CuPy, torch, Numba...)")
        box = tuple(box)
        spec = HostTensorMap(
            param="",
            tensor="TensorMap",
            region_starts=(0,) * view.ndim,
            region_extents=(None,) * view.ndim,
            data_type=dtype or view.dtype.name,
            box=box,
            element_strides=tuple(element_strides or (1,) * len(box)),
            interleave=interleave,
            swizzle=swizzle,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
        )
        self.fields = region_fields(spec, view)
        self.data = encode(self.fields)

    def __repr__(self) -> str:
        return f"jittile.TensorMap(dims={self.fields.dims[::-1]}, box={self.fields.box[::-1]})"
