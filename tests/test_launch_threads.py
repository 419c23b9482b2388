"""Launches from many threads, the default stream and device, CUDA-graph capture refusals: on a
stand-in driver that records what each launch hands the driver (CPU only; the same on the H200
in tests/test_gpu_runtime.py)."""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np
import pytest

import jittile
from bench.launch_host_cpu import CupyLike, driver_stand_ins
from jittile import LaunchError, T
from jittile.runtime import driver

THREADS, LAUNCHES = 8, 1500


@jittile.kernel
def scaled(A: T.Tensor((None,), "float32"), Out: T.Tensor((None,), "float32"), k: T.float32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    Out[i] = A[i] * k


def _pointer_slots(params: int, count: int) -> list[int]:
    """What the driver would read: the data pointer of each array (the fifth of numba's slots)
    and the float after the two arrays, through the ``void*[]`` the launch passes."""
    slots = (ctypes.c_void_p * count).from_address(params)
    return [
        ctypes.c_int64.from_address(slots[4]).value,
        ctypes.c_int64.from_address(slots[11]).value,
        ctypes.c_float.from_address(slots[14]).value,
    ]


@pytest.fixture
def switching_often():
    """Threads switch every microsecond (CPython's default is 5 ms), so that a launch is interrupted
    between packing its arguments and the driver call as often as a GPU host's would be."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


@pytest.fixture
def recorded(monkeypatch):
    """Every launch as (thread, stream, [A pointer, Out pointer, k]) read at the driver call,
    when a real driver would copy the parameters."""
    record = []

    def launch(grid, block, shared, stream, params):
        record.append((threading.get_ident(), stream, _pointer_slots(params, 15)))

    for name, value in driver_stand_ins(launch).items():
        monkeypatch.setattr(driver, name, value)
    scaled._memory, scaled.prepared = {}, {}
    scaled.fast_paths.table.clear()
    return record


def test_concurrent_launches_from_many_threads_pack_their_own_arguments(recorded, switching_often):
    """Each thread launches its own arrays and scalar; every launch the driver sees carries
    exactly the calling thread's values (shared launch state used to mix them)."""
    start = threading.Barrier(THREADS)
    expected = {}

    def worker(t: int):
        pairs = [
            (
                CupyLike(0x1000_0000 * (t + 1) + 0x1000 * j, (32,)),
                CupyLike(0x8000_0000 * (t + 1) + 0x1000 * j, (32,)),
            )
            for j in range(4)
        ]
        expected[threading.get_ident()] = {
            (a.data.ptr, out.data.ptr, float(t + j)) for j, (a, out) in enumerate(pairs)
        }
        start.wait()
        for i in range(LAUNCHES):
            j = i % 4
            scaled(*pairs[j], float(t + j))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(recorded) == THREADS * LAUNCHES
    wrong = [r for r in recorded if tuple(r[2]) not in expected[r[0]]]
    assert wrong == []


def test_simultaneous_first_calls_compile_once(recorded, monkeypatch):
    kernel_module = sys.modules["jittile.kernel"]

    builds = []
    real = kernel_module.build

    def counting(*args, **kwargs):
        builds.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel_module, "build", counting)
    start = threading.Barrier(THREADS)

    def worker(t: int):
        start.wait()
        scaled(CupyLike(0x1000 * (t + 1), (32,)), CupyLike(0x9000 * (t + 1), (32,)), 1.0)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(recorded) == THREADS and len(scaled._memory) == 1


def test_the_stream_argument_overrides_and_default_is_the_legacy_stream(recorded):
    a, out = CupyLike(0x1000, (32,)), CupyLike(0x2000, (32,))
    scaled(a, out, 1.0)
    scaled(a, out, 1.0, stream=0x77)
    scaled(a, out, 1.0)
    assert [r[1] for r in recorded] == [0, 0x77, 0]  # a stand-in CuPy array: no CuPy, stream 0


class _Interface:
    """A device array known through ``__cuda_array_interface__`` v3, with a producer stream."""

    def __init__(self, ptr, stream):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": (32,),
            "typestr": "<f4",
            "strides": None,
            "version": 3,
            "stream": stream,
        }


def test_an_interface_stream_is_ordered_before_the_launch_stream(recorded, monkeypatch):
    ordered = []
    monkeypatch.setattr(driver, "order_streams", lambda p, c: ordered.append((p, c)))
    for _ in range(2):  # no fast path: each launch orders again
        scaled(_Interface(0x1000, 5), _Interface(0x2000, None), 1.0, stream=9)
    assert ordered == [(5, 9), (5, 9)] and [r[1] for r in recorded] == [9, 9]


def test_host_arrays_cannot_be_captured_into_a_graph(recorded, monkeypatch):
    monkeypatch.setattr(driver, "stream_capturing", lambda stream: True)
    monkeypatch.setattr(driver, "alloc", lambda n: pytest.fail("copied during capture"))
    with pytest.raises(LaunchError, match="captured into a CUDA graph.*pass device arrays"):
        scaled(np.zeros(32, np.float32), np.zeros(32, np.float32), 1.0)
    assert recorded == []


def test_arrays_on_two_devices_are_a_launch_error_naming_both(recorded):
    a, out = CupyLike(0x1000, (32,)), CupyLike(0x2000, (32,))
    out.data.device_id = 1
    with pytest.raises(
        LaunchError,
        match=r"'A' and 'Out' are on different devices \(cuda:0 and "
        r"cuda:1\)",
    ):
        scaled(a, out, 1.0)
    assert recorded == []


def test_a_launch_runs_in_the_context_of_its_arrays_device(recorded, monkeypatch):
    """Arrays on device 1: its context is made current for the launch, the current one after."""
    switches = []
    monkeypatch.setattr(driver, "context_for", lambda device: 100 + device)
    monkeypatch.setattr(driver, "use_context", lambda ctx: switches.append(ctx) or 100)
    monkeypatch.setattr(driver, "restore_context", lambda previous: switches.append(previous))
    a, out = CupyLike(0x1000, (32,)), CupyLike(0x2000, (32,))
    a.data.device_id = out.data.device_id = 1
    scaled(a, out, 1.0)
    assert switches == [101, 100] and len(recorded) == 1


def test_a_dlpack_producer_is_handed_the_launch_stream(recorded):
    from test_array_arguments import _DLPackProducer

    a = _DLPackProducer(2, 0x1000, (32,), (1,), 2, 32)
    out = _DLPackProducer(2, 0x2000, (32,), (1,), 2, 32)
    scaled(a, out, 1.0, stream=0x55)
    scaled(a, out, 1.0)
    assert [call["stream"] for call in a.calls] == [0x55, 1]  # 1: DLPack's legacy default stream
    assert [r[1] for r in recorded] == [0x55, 0]
