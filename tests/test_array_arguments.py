"""Array arguments of every dtype the contract accepts, from every protocol (issue #13), on the CPU.

Fakes stand in for device arrays: a torch-like tensor whose ``__cuda_array_interface__`` raises as
torch's does for float8, and DLPack producers built with ctypes. Host arrays go through a fake
driver whose "device memory" is host memory, so the upload and copy-back run without a GPU.
"""

import ctypes

import ml_dtypes
import numpy as np
import pytest

import jittile
from jittile import LaunchError, T
from jittile.dtypes import dtype
from jittile.runtime import arrays
from jittile.runtime.arrays import DeviceView, convert_argument, device_view


# ------------------------------------------------------------------------------ torch-like tensor
class _TorchDType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_TYPESTRS = {"bfloat16": "<V2", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "float16": "<f2"}


class _TorchLikeCuda:
    """Shaped like a torch CUDA tensor: module ``torch``, ``data_ptr()``, element strides, and a
    ``__cuda_array_interface__`` that raises KeyError for float8 (torch's has no typestr for it)."""

    __module__ = "torch"

    def __init__(self, ptr, shape, stride, name):
        self._ptr, self.shape, self._stride, self.dtype = ptr, shape, stride, _TorchDType(name)
        self.is_cuda = True
        self.interface_reads = 0

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return 0

    def stride(self):
        return self._stride

    @property
    def __cuda_array_interface__(self):
        self.interface_reads += 1
        return {
            "data": (self._ptr, False),
            "shape": self.shape,
            "version": 3,
            "strides": None,
            "typestr": _TYPESTRS[self.dtype.name],
        }  # KeyError for float8, as in torch


@pytest.mark.parametrize(
    "name,size",
    [
        ("float8_e4m3fn", 1),
        ("float8_e5m2", 1),
        ("bfloat16", 2),
        ("uint16", 2),
        ("uint32", 4),
        ("uint64", 8),
    ],
)
def test_torch_cuda_tensors_convert_through_torch_accessors(name, size):
    tensor = _TorchLikeCuda(0x7000_0000, (4, 6), (12, 2), name)  # every other column
    for _ in range(2):  # the second time through the per-type converter
        view = convert_argument(tensor)
        assert (view.ptr, view.shape, view.strides) == (0x7000_0000, (4, 6), (12 * size, 2 * size))
        assert view.dtype == dtype(name) and not view.c_contiguous
    assert device_view(tensor).dtype == dtype(name)
    assert tensor.interface_reads == 0


@pytest.mark.parametrize(
    "name,match", [("float4_e2m1fn_x2", r"uint8 tensor"), ("complex64", "no jittile equivalent")]
)
def test_torch_dtypes_without_an_equivalent_are_launch_errors(name, match):
    with pytest.raises(LaunchError, match=match):
        convert_argument(_TorchLikeCuda(0x1000, (4,), (1,), name))


@jittile.kernel
def bf16_fill(A: T.Tensor((None,), "bfloat16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    A[T.cuda.thread_idx("x")] = A[0]


def test_float8_tensor_dtype_is_checked_against_the_annotation():
    with pytest.raises(
        LaunchError, match="dtype float8_e4m3fn does not match the annotated bfloat16"
    ):
        bf16_fill(_TorchLikeCuda(0x1000, (32,), (1,), "float8_e4m3fn"))


# -------------------------------------------------------------------------------------- DLPack
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _DLPackProducer:
    """A DLPack producer over given memory, legacy (``dltensor``) or versioned capsules."""

    def __init__(
        self,
        device,
        ptr,
        shape,
        strides,
        code,
        bits,
        lanes=1,
        byte_offset=0,
        versioned=True,
        major=1,
        read_only=False,
        keep=None,
    ):
        self.device = (device, 0)
        self.keep = keep  # what owns the memory
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * len(shape))(*strides)
        tensor = arrays._DLTensor(
            ptr,
            device,
            0,
            len(shape),
            code,
            bits,
            lanes,
            ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            None if strides is None else ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)),
            byte_offset,
        )
        if versioned:
            self._managed = arrays._DLManagedTensorVersioned(
                major, 1, None, None, int(read_only), tensor
            )
            self._name = b"dltensor_versioned"
        else:
            self._managed, self._name = tensor, b"dltensor"
        self.calls = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None):
        self.calls.append({"stream": stream, "max_version": max_version})
        return _PyCapsule_New(ctypes.addressof(self._managed), self._name, None)


class _LegacyProducer(_DLPackProducer):
    """A producer from before DLPack 1.0: ``__dlpack__`` takes no ``max_version``."""

    def __dlpack__(self, *, stream=None):
        self.calls.append({"stream": stream})
        return _PyCapsule_New(ctypes.addressof(self._managed), self._name, None)


@pytest.mark.parametrize(
    "code,bits,name",
    [
        (4, 16, "bfloat16"),
        (10, 8, "float8_e4m3fn"),
        (12, 8, "float8_e5m2"),
        (6, 8, "bool"),
        (1, 16, "uint16"),
        (1, 64, "uint64"),
        (0, 8, "int8"),
        (2, 16, "float16"),
        (2, 64, "float64"),
    ],
)
@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_cuda_arrays_of_every_dtype(code, bits, name, versioned):
    size = bits // 8
    producer = _DLPackProducer(
        2, 0x7000_0000, (3, 4), (8, 2), code, bits, byte_offset=64, versioned=versioned
    )
    view = convert_argument(producer)
    assert (view.ptr, view.shape, view.strides) == (0x7000_0040, (3, 4), (8 * size, 2 * size))
    assert view.dtype == dtype(name) and view.host is None
    assert producer.calls[0]["stream"] == 1  # the legacy default stream, as launches default to


def test_dlpack_without_strides_or_max_version_is_row_major():
    producer = _LegacyProducer(2, 0x1000, (3, 4), None, 4, 16, versioned=False)
    view = device_view(producer)
    assert view.strides == (8, 2) and view.c_contiguous and view.dtype == dtype("bfloat16")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(code=17, bits=4), "packed FP4 as a uint8"),
        (dict(code=2, bits=32, lanes=4), "4 lanes"),
        (dict(code=5, bits=64), "code 5"),
        (dict(code=2, bits=32, major=2), "DLPack 2.1"),
        (dict(code=2, bits=32, device=4), "device type 4"),  # OpenCL
    ],
)
def test_dlpack_arrays_jittile_cannot_take_are_launch_errors(kwargs, match):
    kwargs = {"device": 2, **kwargs}
    with pytest.raises(LaunchError, match=match):
        device_view(_DLPackProducer(ptr=0x1000, shape=(4,), strides=(1,), **kwargs))


class _InterfaceAndDLPack(_DLPackProducer):
    """``__cuda_array_interface__`` that calls bfloat16 opaque ``<V2`` (as torch and ml_dtypes do),
    plus DLPack, which names it."""

    @property
    def __cuda_array_interface__(self):
        return {
            "data": (0x2000, False),
            "shape": (4,),
            "typestr": "<V2",
            "strides": None,
            "version": 3,
        }


def test_an_opaque_interface_typestr_defers_to_dlpack():
    view = convert_argument(_InterfaceAndDLPack(2, 0x2000, (4,), (1,), 4, 16))
    assert view.dtype == dtype("bfloat16") and view.ptr == 0x2000


class _InterfaceOnly:
    def __init__(self, typestr):
        self.__cuda_array_interface__ = {
            "data": (0x2000, False),
            "shape": (4,),
            "version": 3,
            "typestr": typestr,
        }


def test_an_opaque_interface_typestr_without_dlpack_is_a_launch_error():
    with pytest.raises(LaunchError, match="typestr '<V2' names no jittile dtype"):
        convert_argument(_InterfaceOnly("<V2"))


# ------------------------------------------------------------------ host arrays, fake device
class _HostMemoryDriver:
    """The driver calls a host array's launch makes, over host memory: alloc, copies, free."""

    def __init__(self):
        self.blocks = {}

    def alloc(self, nbytes):
        block = ctypes.create_string_buffer(max(nbytes, 1))
        self.blocks[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    def free(self, ptr):
        del self.blocks[ptr]

    def copy_to_device(self, dst, src, nbytes):
        ctypes.memmove(dst, src, nbytes)

    def copy_to_host(self, dst, src, nbytes):
        ctypes.memmove(dst, src, nbytes)

    def device_bytes(self, view):
        return ctypes.string_at(view.ptr, view.staging.nbytes)


@pytest.fixture
def host_driver(monkeypatch):
    fake = _HostMemoryDriver()
    for name in ("alloc", "free", "copy_to_device", "copy_to_host"):
        monkeypatch.setattr(arrays.driver, name, getattr(fake, name))
    return fake


def _kernel_writes(fake, view, values: np.ndarray):
    """Stand in for a kernel storing ``values`` (same bytes as the staging copy) on the device."""
    ctypes.memmove(view.ptr, np.ascontiguousarray(values).ctypes.data, view.staging.nbytes)


def test_describing_a_host_array_touches_no_device(monkeypatch):
    monkeypatch.setattr(arrays.driver, "alloc", lambda n: pytest.fail("allocated while describing"))
    view = device_view(np.zeros((4, 8), np.float32))
    assert (view.ptr, view.owned, view.strides, view.dtype) == (0, False, (32, 4), dtype("float32"))


def test_a_strided_numpy_array_uploads_and_copies_back(host_driver):
    base = np.arange(48, dtype=np.int32).reshape(6, 8)
    host = base[::2, 1::2]
    view = device_view(host)
    view.upload()
    assert view.owned and host_driver.device_bytes(view) == np.ascontiguousarray(host).tobytes()
    _kernel_writes(host_driver, view, -np.ones((3, 4), np.int32))
    view.finish()
    assert (host == -1).all() and base[1].tolist() == list(range(8, 16)) and not host_driver.blocks


def test_a_read_only_host_array_is_not_copied_back(host_driver):
    host = np.arange(8, dtype=np.int32)
    host.flags.writeable = False
    view = device_view(host)
    view.upload()
    _kernel_writes(host_driver, view, np.zeros(8, np.int32))
    view.finish()
    assert host.tolist() == list(range(8)) and not host_driver.blocks


@pytest.mark.parametrize(
    "code,bits,container", [(4, 16, np.int16), (10, 8, np.uint8), (12, 8, np.uint8)]
)
def test_cpu_dlpack_arrays_numpy_cannot_type_round_trip(host_driver, code, bits, container):
    base = np.arange(24, dtype=container).reshape(4, 6)
    producer = _DLPackProducer(1, base.ctypes.data, (4, 3), (6, 2), code, bits, keep=base)
    view = device_view(producer)
    assert view.ptr == 0 and view.shape == (4, 3) and view.strides == (3 * bits // 8, bits // 8)
    assert producer.calls[0]["stream"] is None
    view.upload()
    assert host_driver.device_bytes(view) == np.ascontiguousarray(base[:, ::2]).tobytes()
    _kernel_writes(host_driver, view, np.full((4, 3), 7, container))
    view.finish()
    assert (base[:, ::2] == 7).all() and base[:, 1::2].ravel().tolist() == list(range(1, 24, 2))


def test_a_read_only_cpu_dlpack_array_is_not_copied_back(host_driver):
    base = np.arange(8, dtype=np.float32)
    view = device_view(
        _DLPackProducer(1, base.ctypes.data, (8,), (1,), 2, 32, read_only=True, keep=base)
    )
    view.upload()
    _kernel_writes(host_driver, view, np.zeros(8, np.float32))
    view.finish()
    assert base.tolist() == list(range(8))


def test_the_launcher_uploads_host_arrays_after_checking_them(host_driver):
    """A mismatched host array is refused before anything is allocated; a matching one is packed
    with its device copy's address."""
    from test_launcher_pack import _launcher, _slot

    launcher = _launcher()
    with pytest.raises(LaunchError, match="dtype"):
        launcher.pack((device_view(np.zeros((4, 8), np.int32)), 1, 1.0))
    assert not host_driver.blocks
    view = device_view(np.ones((4, 8), np.float32))
    launcher.pack((view, 1, 1.0))
    assert view.owned and _slot(launcher, 4, "<q") == view.ptr != 0
    view.finish()


# ---------------------------------------------------------------------- ml_dtypes NumPy arrays
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_arrays_round_trip_as_their_bits(host_driver, name):
    """NumPy's bfloat16 and float8 arrays (ml_dtypes) upload and copy back bit for bit, NaN
    patterns included, strided both ways."""
    scalar = getattr(ml_dtypes, name)
    size = np.dtype(scalar).itemsize
    raw = np.random.default_rng(5).integers(0, 256, (4, 12 * size), dtype=np.uint8)
    array = raw.view(scalar)[:, ::2].T
    view = device_view(array)
    assert view.dtype == dtype(name) and view.shape == (6, 4) and view.c_contiguous
    view.upload()
    assert host_driver.device_bytes(view) == np.ascontiguousarray(array).tobytes()
    written = np.random.default_rng(6).integers(0, 256, (6, 4 * size), dtype=np.uint8)
    _kernel_writes(host_driver, view, written)
    view.finish()
    assert np.ascontiguousarray(array).view(np.uint8).tobytes() == written.tobytes()


def test_ml_dtypes_array_dtype_is_checked_against_the_annotation():
    with pytest.raises(
        LaunchError, match="dtype float8_e5m2 does not match the annotated bfloat16"
    ):
        bf16_fill(np.zeros(32, ml_dtypes.float8_e5m2))


# ------------------------------------------------------------------------------------ real torch
def test_torch_cpu_tensors_of_every_dtype_describe_without_a_device(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(arrays.driver, "alloc", lambda n: pytest.fail("allocated while describing"))
    names = [
        "bool",
        "uint8",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "float8_e4m3fn",
        "float8_e5m2",
    ]
    for name in names:
        tensor = torch.zeros((4, 6), dtype=getattr(torch, name))[:, ::2]
        view = device_view(tensor)
        assert view.dtype == dtype(name) and view.shape == (4, 3) and view.c_contiguous, name
        assert view.staging.nbytes == 12 * tensor.element_size(), name


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_torch_cpu_low_precision_tensors_round_trip(host_driver, name):
    torch = pytest.importorskip("torch")
    base = torch.randint(0, 256, (4, 12), dtype=torch.uint8).view(getattr(torch, name))
    tensor = base[:, ::2].t()  # strided both ways
    view = device_view(tensor)
    view.upload()
    assert host_driver.device_bytes(view) == bytes(tensor.contiguous().view(torch.uint8).numpy())
    rows, cols = tensor.shape
    written = torch.randint(0, 256, (rows, cols * tensor.element_size()), dtype=torch.uint8)
    _kernel_writes(host_driver, view, written.numpy())
    view.finish()
    assert torch.equal(tensor.contiguous().view(torch.uint8), written)


def test_torch_cpu_tensor_that_requires_grad_is_passed():
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(8, dtype=torch.float32, requires_grad=True)
    assert device_view(tensor).shape == (8,)


def test_torch_cpu_tensor_dtype_is_checked_against_the_annotation():
    torch = pytest.importorskip("torch")
    with pytest.raises(
        LaunchError, match="dtype float8_e5m2 does not match the annotated bfloat16"
    ):
        bf16_fill(torch.zeros(32, dtype=torch.float8_e5m2))


def test_torch_dlpack_capsules_read_as_torch_describes_them():
    """torch's own capsules (legacy and versioned) through the DLPack reader."""
    torch = pytest.importorskip("torch")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "uint16", "bool"):
        tensor = torch.zeros((5, 8), dtype=getattr(torch, name))[1:, ::2]
        array = arrays.read_dlpack(tensor)
        size = tensor.element_size()
        assert (array.device_type, array.ptr, array.shape) == (1, tensor.data_ptr(), (4, 4)), name
        assert array.strides == (8 * size, 2 * size) and array.dtype == dtype(name), name


def test_a_device_view_passes_through_unchanged():
    view = DeviceView(0x1000, (4,), (2,), dtype("bfloat16"))
    assert convert_argument(view) is view
