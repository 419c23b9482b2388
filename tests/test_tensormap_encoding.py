"""Host TensorMaps on the CPU: the cuTensorMapEncodeTiled arguments jittile derives from a spec and
an array (packed FP4 counts its inner dimension in values), and launches that reuse an encoding
while the array's pointer, extents and strides stay the same (issue #13)."""

import pytest

import jittile
from jittile import LaunchError, T
from jittile.dtypes import dtype
from jittile.patterns.base import HostTensorMap
from jittile.runtime import launcher as launcher_module
from jittile.runtime.arrays import DeviceView
from jittile.runtime.launcher import Launcher, LoadedCubin
from jittile.runtime.tensormap import region_fields

BASE = 0x7000_0000  # 256-byte aligned, like an allocation


def _spec(data_type="float4_e2m1fn", box=(8, 128), starts=(0, 0), extents=(None, None)):
    return HostTensorMap(
        param="__jt_tmap0",
        tensor="A",
        region_starts=starts,
        region_extents=extents,
        data_type=data_type,
        box=box,
        element_strides=(1,) * len(box),
        interleave=0,
        swizzle=0,
        l2_promotion=0,
        oob_fill=0,
    )


def _uint8(shape, row_bytes=None, ptr=BASE):
    return DeviceView(ptr, shape, (row_bytes or shape[1], 1), dtype("uint8"))


# ------------------------------------------------------------------------------- packed FP4
@pytest.mark.parametrize(
    "shape,dims", [((64, 64), (128, 64)), ((64, 128), (256, 64)), ((16, 256), (512, 16))]
)
def test_fp4_inner_global_dimension_counts_values(shape, dims):
    fields = region_fields(_spec(), _uint8(shape))
    assert fields.dims == dims  # innermost first, in 4-bit values
    assert fields.strides == (shape[1],)  # bytes
    assert (fields.address, fields.box, fields.element_strides) == (BASE, (128, 8), (1, 1))
    assert fields.data_type == "float4_e2m1fn"


def test_fp4_sub_region_starts_in_bytes_and_spans_values():
    """``A[8:, 64:]`` of a (64, 128)-byte array: the address moves 8 rows and 64 bytes; the region
    holds 56 rows of 64 bytes, 128 values each."""
    fields = region_fields(_spec(starts=(8, 64)), _uint8((64, 128)))
    assert fields.address == BASE + 8 * 128 + 64
    assert fields.dims == (128, 56) and fields.strides == (128,)


def test_fp4_spec_of_a_compiled_kernel_encodes_values():
    """The spec the frontend records for a packed FP4 load of ``A[:, 64:]`` (sm_100a; compiled on
    the CPU) gives the driver 128 values for the 64 bytes left in each row."""
    ck = fp4_subregion_load.compile(
        T.Tensor((64, 128), "uint8"), T.Tensor((4,), "uint8"), target="sm_100a"
    )
    (spec,) = ck.ir.host_tensormaps
    fields = region_fields(spec, _uint8((64, 128)))
    assert fields.dims == (128, 64) and fields.address == BASE + 64 and fields.box == (128, 8)


@jittile.kernel
def fp4_subregion_load(A, Out):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    buf = T.alloc_shared((8, 128), "uint8", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if T.cuda.thread_idx("x") == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(512))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A[:, 64:],
            box=(8, 128),
            coords=(0, 0),
            format="float4_e2m1fn",
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    Out[0] = buf[0, 0]


@pytest.mark.parametrize(
    "view,match",
    [
        (_uint8((64, 32)), r"multiple of 128 values \(64 bytes\), got 64 values \(32 bytes\)"),
        (_uint8((64, 96)), r"got 192 values \(96 bytes\)"),
        (_uint8((64, 64), row_bytes=80), "80 bytes must be a positive multiple of 32"),
        (_uint8((64, 64), ptr=BASE + 16), "must be 32-byte aligned"),
        (DeviceView(BASE, (64, 64), (64, 2), dtype("uint8")), r"one element \(1 bytes\), got 2"),
    ],
)
def test_fp4_validation_speaks_in_values_and_bytes(view, match):
    with pytest.raises(LaunchError, match=match):
        region_fields(_spec(), view)


def test_other_formats_count_elements():
    fields = region_fields(
        _spec("bfloat16", box=(8, 64)), DeviceView(BASE, (64, 96), (192, 2), dtype("bfloat16"))
    )
    assert fields.dims == (96, 64) and fields.strides == (192,)


# --------------------------------------------------------------------------- kept encodings
@jittile.kernel
def copy_box(A, Out):
    """TMA-load an (8, 32) box of A, TMA-store it into Out: two host TensorMaps."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if T.cuda.thread_idx("x") == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=(8, 32),
            coords=(0, 0),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if T.cuda.thread_idx("x") == 0:
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
            Out,
            buf,
            box=(8, 32),
            coords=(0, 0),
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


class _CountingEncoder:
    """Stands in for cuTensorMapEncodeTiled: 128 bytes naming the fields, one count per call."""

    def __init__(self):
        self.calls = []

    def __call__(self, fields):
        self.calls.append(fields)
        return self.bytes_for(fields)

    @staticmethod
    def bytes_for(fields):
        return repr((fields.address, fields.dims, fields.strides)).encode().ljust(128, b"\0")[:128]


@pytest.fixture
def counted(monkeypatch):
    encoder = _CountingEncoder()
    monkeypatch.setattr(launcher_module, "encode", encoder)
    ck = copy_box.compile(_array(BASE), _array(BASE), target="sm_90a")  # any row pitch
    assert [s.tensor for s in ck.ir.host_tensormaps] == ["A", "Out"]
    return Launcher(
        ck.ir, LoadedCubin(ck.ir.name, ck.cubin, ck.entry, None, 0), ck.param_layout
    ), encoder


def _array(ptr, rows=16, pitch=512):
    return DeviceView(ptr, (rows, 64), (pitch, 4), dtype("float32"))


def _tensormap_bytes(launcher, which):
    offset, size = launcher.params.slots[launcher.params.fields[2 + which]]
    return bytes(launcher.params.view[offset : offset + size])


def test_repeated_launches_reuse_encodings_and_changes_re_encode(counted):
    launcher, encoder = counted
    a, out = _array(BASE), _array(BASE + 0x10000)
    for _ in range(3):
        launcher.pack((a, out))
    assert len(encoder.calls) == 2  # one per TensorMap, not per launch
    first = _tensormap_bytes(launcher, 0)
    assert first == encoder.bytes_for(region_fields(launcher.ir.host_tensormaps[0], a))

    moved = _array(BASE + 0x20000)
    launcher.pack((moved, out))
    assert len(encoder.calls) == 3 and encoder.calls[2].address == BASE + 0x20000
    assert _tensormap_bytes(launcher, 0) == encoder.bytes_for(encoder.calls[2]) != first

    launcher.pack((a, out))  # back to the first array: its encoding is still kept
    assert len(encoder.calls) == 3 and _tensormap_bytes(launcher, 0) == first

    launcher.pack((_array(BASE, rows=32), out))  # same pointer, more rows
    assert len(encoder.calls) == 4 and encoder.calls[3].dims == (64, 32)

    launcher.pack((a, _array(BASE + 0x10000, pitch=1024)))
    assert len(encoder.calls) == 5 and encoder.calls[4].strides == (1024,)  # a new row pitch
    assert _tensormap_bytes(launcher, 1) == encoder.bytes_for(encoder.calls[4])


def test_each_tensormap_keeps_its_own_encodings(counted):
    """A and Out at the same address: the load's and the store's descriptors differ by spec and
    are encoded separately."""
    launcher, encoder = counted
    launcher.pack((_array(BASE), _array(BASE)))
    launcher.pack((_array(BASE), _array(BASE)))
    specs = launcher.ir.host_tensormaps
    assert len(encoder.calls) == 2
    assert [c.address for c in encoder.calls] == [BASE, BASE] and specs[0] != specs[1]
