"""The launch fast path (jittile/runtime/fastpath.py) on a stand-in driver: a repeated launch
converts nothing, a moved array rewrites its pointer and TensorMap, and every check still runs
when what it depends on changed. CPU only: nothing reaches a GPU."""

import struct
import sys

import numpy as np
import pytest

import jittile
from bench.launch_host_cpu import CupyLike, driver_stand_ins  # a CuPy array's stand-in
from jittile import LaunchError, T
from jittile.runtime import arrays, driver
from jittile.runtime import launcher as launcher_module

LIMIT = 32  # read by guarded_copy: changing it must recompile, fast path or not


@jittile.kernel
def tma_rows(A: T.Tensor((8, 32), "float32"), Out: T.Tensor((None, 32), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
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
    if tid < n:
        Out[0, tid] = buf[0, tid]


@jittile.kernel
def guarded_copy(A: T.Tensor((None,), "float32"), Out: T.Tensor((None,), "float32")):
    tid = T.cuda.thread_idx("x")
    if tid < LIMIT:
        Out[tid] = A[tid]


class TorchLike:
    """What a launch reads of a torch tensor (``is_cuda`` says where it lives)."""

    __module__ = "torch"

    def __init__(self, ptr, shape, is_cuda=True):
        import torch

        self.ptr, self.shape, self.dtype = ptr, torch.Size(shape), torch.float32
        self.is_cuda = is_cuda

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return 0 if self.is_cuda else -1

    def stride(self):
        return (self.shape[1], 1) if len(self.shape) == 2 else (1,)


@pytest.fixture
def gpu(monkeypatch):
    """A driver stand-in: launches and TensorMap encodings are recorded, not made."""
    record = {"launches": [], "encoded": [], "converted": 0}
    for name, value in driver_stand_ins(lambda *a: record["launches"].append(a)).items():
        monkeypatch.setattr(driver, name, value)

    def encode(fields):
        record["encoded"].append(fields.address)
        return fields.address.to_bytes(8, "little") * 16

    def convert(obj, stream=0, real=arrays.convert_argument):
        record["converted"] += 1
        return real(obj, stream)

    monkeypatch.setattr(launcher_module, "encode", encode)
    monkeypatch.setattr(arrays, "convert_argument", convert)
    for kernel in (tma_rows, guarded_copy):
        kernel._memory, kernel.prepared = {}, {}
        kernel.fast_paths.table.clear()
    return record


def _launcher(kernel):
    (fast,) = kernel.fast_paths.table.values()
    return fast.launcher


def _array_pointer(launcher, index):
    """The data pointer numba's flattening puts in the fifth slot of argument ``index``."""
    offset = launcher.params.slots[launcher.params.fields[index] + 4][0]
    return struct.unpack_from("<q", launcher.params.view, offset)[0]


def _tensormap_address(launcher):
    offset = launcher.params.slots[-1][0]
    return struct.unpack_from("<q", launcher.params.view, offset)[0]


def test_a_repeated_launch_converts_nothing_and_encodes_nothing(gpu):
    a, out = CupyLike(0x10000, (8, 32)), CupyLike(0x20000, (2, 32))
    tma_rows(a, out, 32)
    assert (gpu["converted"], len(gpu["encoded"])) == (3, 1)
    for _ in range(3):
        tma_rows(a, out, 32)
    assert (gpu["converted"], len(gpu["encoded"]), len(gpu["launches"])) == (3, 1, 4)


def test_a_moved_array_rewrites_its_pointer_and_reuses_kept_tensormaps(gpu):
    out = CupyLike(0x20000, (2, 32))
    first, second = CupyLike(0x10000, (8, 32)), CupyLike(0x30000, (8, 32))
    for a in (first, second, first, second):
        tma_rows(a, out, 32)
        launcher = _launcher(tma_rows)
        assert _array_pointer(launcher, 0) == a.data.ptr
        assert _tensormap_address(launcher) == a.data.ptr
    assert gpu["converted"] == 3 and gpu["encoded"] == [0x10000, 0x30000]


def test_a_scalar_value_is_rewritten(gpu):
    a, out = CupyLike(0x10000, (8, 32)), CupyLike(0x20000, (2, 32))
    for n in (5, 7):
        tma_rows(a, out, n)
        launcher = _launcher(tma_rows)
        offset = launcher.params.slots[launcher.params.fields[2]][0]
        assert struct.unpack_from("<i", launcher.params.view, offset)[0] == n


def test_a_misaligned_pointer_is_refused_after_a_fast_launch(gpu):
    out = CupyLike(0x20000, (2, 32))
    tma_rows(CupyLike(0x10000, (8, 32)), out, 32)
    with pytest.raises(LaunchError, match="aligned"):
        tma_rows(CupyLike(0x10004, (8, 32)), out, 32)
    assert len(gpu["launches"]) == 1


@pytest.mark.parametrize(
    "bad,match",
    [
        (CupyLike(0x10000, (4, 32)), "extent 4 on axis 0"),
        (CupyLike(0x10000, (8, 32), "int32"), "dtype"),
        (CupyLike(0x10000, (8, 8, 4)), "rank"),
    ],
)
def test_a_new_shape_or_dtype_is_checked(gpu, bad, match):
    out = CupyLike(0x20000, (2, 32))
    tma_rows(CupyLike(0x10000, (8, 32)), out, 32)
    with pytest.raises(LaunchError, match=match):
        tma_rows(bad, out, 32)


def test_launch_configurations_sharing_a_buffer_repack_it(gpu):
    a, b = CupyLike(0x10000, (64,)), CupyLike(0x40000, (64,))
    one, two = guarded_copy[1, 32], guarded_copy[2, 32]
    one(a, a)
    two(b, b)
    one(a, a)
    launcher = gpu["launches"]  # grid, block, shared, stream, params of each launch
    assert [call[0] for call in launcher] == [(1, 1, 1), (2, 1, 1), (1, 1, 1)]
    (fast, other) = guarded_copy.fast_paths.table.values()
    assert fast.launcher is other.launcher
    assert _array_pointer(fast.launcher, 0) == 0x10000


def test_a_changed_global_recompiles_on_the_fast_path(gpu, monkeypatch):
    a = CupyLike(0x10000, (64,))
    launch = guarded_copy[1, 32]
    launch(a, a)
    before = _launcher(guarded_copy)
    monkeypatch.setitem(globals(), "LIMIT", 16)
    launch(a, a)
    after = _launcher(guarded_copy)
    assert after is not before and after.loaded.cubin != before.loaded.cubin


def test_host_arrays_take_the_full_path_every_time(gpu, monkeypatch):
    allocations = []
    monkeypatch.setattr(driver, "alloc", lambda nbytes: allocations.append(nbytes) or 0x50000)
    for name in ("free", "copy_to_device", "copy_to_host", "synchronize"):
        monkeypatch.setattr(driver, name, lambda *args: None)
    a = np.zeros(64, np.float32)
    guarded_copy[1, 32](a, a)
    guarded_copy[1, 32](a, a)
    assert len(allocations) == 4 and not guarded_copy.fast_paths.table


def test_a_cpu_tensor_never_matches_a_cuda_fingerprint(gpu):
    pytest.importorskip("torch")
    out = CupyLike(0x20000, (2, 32))
    tma_rows(TorchLike(0x10000, (8, 32)), out, 32)
    (fast,) = tma_rows.fast_paths.table.values()
    assert fast.launch((TorchLike(0x10000, (8, 32)), out, 32), None, None)
    assert not fast.launch((TorchLike(0x10000, (8, 32), is_cuda=False), out, 32), None, None)


def test_a_launch_refused_in_another_context_loads_the_kernel_there(gpu, monkeypatch):
    """The fast path does not ask for the current context; a launch the driver refuses does."""
    context = {"now": 1, "loads": []}

    def load_function(cubin, entry, shared):
        context["loads"].append(context["now"])
        return None, context["now"]

    def launch_call(function, what):
        def launch(*args):
            if function != context["now"]:
                raise LaunchError(f"{what} failed: CUDA_ERROR_INVALID_HANDLE")
            gpu["launches"].append((function, *args))

        return launch

    monkeypatch.setattr(driver, "load_function", load_function)
    monkeypatch.setattr(driver, "launch_call", launch_call)
    monkeypatch.setattr(driver, "current_context", lambda: context["now"])
    monkeypatch.setattr(driver, "context_for", lambda device: context["now"])
    a = CupyLike(0x10000, (64,))
    launch = guarded_copy[1, 32]
    launch(a, a)
    context["now"] = 2
    launch(a, a)
    assert context["loads"] == [1, 2]
    assert [call[0] for call in gpu["launches"]] == [1, 2]


def test_a_launch_refused_in_its_own_context_is_a_launch_error(gpu, monkeypatch):
    calls = []

    def launch_call(function, what):
        def launch(*args):
            calls.append(args)
            if len(calls) > 1:
                raise LaunchError(f"{what} failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")

        return launch

    monkeypatch.setattr(driver, "launch_call", launch_call)
    a = CupyLike(0x10000, (64,))
    guarded_copy[1, 32](a, a)
    with pytest.raises(LaunchError, match="launch of guarded_copy failed"):
        guarded_copy[1, 32](a, a)


def test_cupy_driver_errors_become_launch_errors(monkeypatch):
    def refuse(*args):
        raise RuntimeError("CUDA_ERROR_INVALID_VALUE: invalid argument")

    monkeypatch.setattr(driver, "_cupy_launch", lambda: refuse)
    launch = driver.launch_call(7, "launch of k")
    with pytest.raises(LaunchError, match="launch of k failed: CUDA_ERROR_INVALID_VALUE"):
        launch((1, 1, 1), (32, 1, 1), 0, 0, 0x1000)


def test_a_moved_array_survives_another_configuration_packing_the_buffer(gpu):
    a, moved, b = CupyLike(0x10000, (64,)), CupyLike(0x60000, (64,)), CupyLike(0x40000, (64,))
    one, two = guarded_copy[1, 32], guarded_copy[2, 32]
    one(a, a)
    one(moved, a)  # a pointer-only change: rewritten in place
    two(b, b)  # the same compiled kernel's buffer, packed for another configuration
    one(moved, a)
    launcher = _launcher_of(guarded_copy, one)
    assert (_array_pointer(launcher, 0), _array_pointer(launcher, 1)) == (0x60000, 0x10000)
    assert gpu["converted"] == 4  # two full launches of two arrays; the rest fast


def _launcher_of(kernel, configured):
    return kernel.fast_paths.table[(configured.config, None)].launcher


class _Interface:
    """A device array known through ``__cuda_array_interface__`` alone, which may fail to say."""

    def __init__(self, ptr, shape, fails=False):
        self.ptr, self.shape, self.fails = ptr, shape, fails

    @property
    def __cuda_array_interface__(self):
        if self.fails:
            raise KeyError("typestr")
        return {
            "data": (self.ptr, False),
            "shape": self.shape,
            "typestr": "<f4",
            "strides": None,
            "version": 3,
        }


def test_an_argument_the_fast_path_cannot_read_gets_the_full_path_error(gpu):
    out = _Interface(0x20000, (64,))
    guarded_copy[1, 32](_Interface(0x10000, (64,)), out)
    guarded_copy[1, 32](_Interface(0x30000, (64,)), out)
    assert gpu["converted"] == 2 and len(gpu["launches"]) == 2
    with pytest.raises(LaunchError, match="cannot read __cuda_array_interface__"):
        guarded_copy[1, 32](_Interface(0x10000, (64,), fails=True), out)


def test_the_same_array_objects_launch_without_fingerprints_until_reshaped(gpu):
    """Re-passing the very objects of the last launch skips the fingerprints, except a CuPy
    array's shape (``a.shape = ...`` reshapes it in place): a reshaped array is checked again."""
    a, out = CupyLike(0x10000, (8, 32)), CupyLike(0x20000, (2, 32))
    tma_rows(a, out, 32)
    tma_rows(a, out, 32)
    assert len(gpu["launches"]) == 2 and gpu["converted"] == 3
    a.shape, a.strides = (4, 64), (256, 4)  # what an in-place reshape does
    with pytest.raises(LaunchError, match="extent 4 on axis 0"):
        tma_rows(a, out, 32)
    assert len(gpu["launches"]) == 2


def test_launches_call_cupys_wrapper_only_where_cupy_is_imported(monkeypatch):
    """Its first call imports CuPy (164 ms of a first launch in a torch process, run 55)."""
    import types

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert driver._cupy_launch() is None
    wrapper = types.SimpleNamespace(launchKernel=lambda *args: None)
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.setitem(
        sys.modules, "cupy_backends.cuda.api", types.SimpleNamespace(driver=wrapper)
    )
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api.driver", wrapper)
    assert driver._cupy_launch() is wrapper.launchKernel


def test_plain_launch_dimensions_keep_their_configured():
    """``k[grid, block]`` of exact ints makes its LaunchConfig once; ``True`` and ``1.0`` equal
    ``1`` but are not launch dimensions, so a kept ``(1, 1)`` does not let them through."""
    kept = tma_rows[(1, 1), 32]
    assert tma_rows[(1, 1), 32] is kept and kept.config == T.cuda.LaunchConfig((1, 1), 32)
    assert tma_rows[[1, 1], 32] is not tma_rows[[1, 1], 32]  # a list: made anew each time
    for bad in ((True, 1), (1.0, 1), (0, 1)):
        with pytest.raises(jittile.JittileError, match="positive int"):
            tma_rows[bad, 32]
