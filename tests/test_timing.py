"""The tuner's timing (jittile/runtime/timing.py) on the CPU, against a stand-in of the driver
that records the calls: every sample's launches are issued behind a closed gate that opens only
once the stop event is recorded, and a launch that waits for its stream cannot deadlock."""

from __future__ import annotations

import ctypes
import time
import types

import pytest

from jittile.runtime import driver, timing


class StandInDriver:
    """The driver calls event_median makes, logged; events elapse ``elapsed`` ms."""

    CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE = 2, 1
    CUresult = types.SimpleNamespace(CUDA_SUCCESS=0, CUDA_ERROR_NOT_SUPPORTED=801)
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DEFAULT=0)
    CUstreamWaitValue_flags = types.SimpleNamespace(CU_STREAM_WAIT_VALUE_GEQ=0)

    def __init__(self, waits_supported: bool = True):
        self.log, self.elapsed = [], 0.5
        self.waits_supported = waits_supported
        self.buffer = ctypes.create_string_buffer(4)
        self.word = ctypes.c_uint32.from_buffer(self.buffer)

    def cuMemHostAlloc(self, nbytes, flags):
        assert nbytes == 4 and flags == 3
        return 0, ctypes.addressof(self.buffer)

    def cuMemHostGetDevicePointer(self, host, flags):
        return 0, 0xD000

    def cuMemFreeHost(self, host):
        self.log.append("free")
        return (0,)

    def cuStreamWaitValue32(self, stream, address, value, flags):
        assert (address, value, flags) == (0xD000, 1, 0) and self.word.value == 0
        self.log.append(("wait", stream))
        return (0 if self.waits_supported else 801,)

    def cuEventCreate(self, flags):
        return 0, object()

    def cuEventRecord(self, event, stream):
        self.log.append(("record", self.word.value))
        return (0,)

    def cuEventSynchronize(self, event):
        self.log.append(("sync", self.word.value))
        return (0,)

    def cuEventElapsedTime(self, start, stop):
        return 0, self.elapsed

    def cuEventDestroy(self, event):
        return (0,)

    CUdevice_attribute = types.SimpleNamespace(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE=38)

    def cuDeviceGetAttribute(self, attribute, device):
        assert attribute == 38
        return 0, 50 << 20  # the H200's 50 MB

    def cuMemsetD32Async(self, pointer, value, words, stream):
        self.log.append(("flush", pointer, value, words, stream, self.word.value))
        return (0,)


@pytest.fixture
def stand_in(monkeypatch):
    fake = StandInDriver()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(
        driver, "check", lambda result, what: result[1] if len(result) > 1 else None
    )
    return fake


def test_each_sample_is_issued_behind_a_gate_opened_after_the_stop_event(stand_in):
    calls = []
    median = timing.event_median(
        lambda: calls.append("prepare"),
        lambda: (calls.append("fn"), stand_in.log.append(("fn", stand_in.word.value))),
        warmup=1,
        rep=2,
        stream=7,
    )
    assert median == 0.5 and calls == ["prepare", "fn"] * 3
    sample = [("wait", 7), ("record", 0), ("fn", 0), ("record", 0), ("sync", 1)]
    assert stand_in.log == [("fn", 1)] + sample * 2 + ["free"]


def test_work_that_waits_for_its_stream_is_released_by_the_watchdog(stand_in, monkeypatch):
    """A launch that synchronizes its stream (a host array's copy) would wait for the gate
    forever; the watchdog opens it."""
    monkeypatch.setattr(timing, "GATE_TIMEOUT_S", 0.05)

    def synchronizing_launch():
        deadline = time.monotonic() + 5
        while stand_in.word.value == 0:  # the stream cannot run until the gate opens
            assert time.monotonic() < deadline, "deadlocked"
            time.sleep(0.001)

    assert timing.event_median(lambda: None, synchronizing_launch, 0, 2, 0) == 0.5


def test_after_the_watchdog_opened_a_gate_the_config_times_ungated(stand_in, monkeypatch):
    """Work that waits for its stream would cost every gated sample the timeout: after the
    first, the remaining samples are not gated."""
    monkeypatch.setattr(timing, "GATE_TIMEOUT_S", 0.05)
    opened = []

    def synchronizing_launch():
        while stand_in.word.value == 0:
            time.sleep(0.001)
        opened.append(True)

    started = time.monotonic()
    assert timing.event_median(lambda: None, synchronizing_launch, 0, 6, 3) == 0.5
    assert stand_in.log.count(("wait", 3)) == 1 and len(opened) == 6
    assert time.monotonic() - started < 6 * 0.05


def test_without_stream_memory_operations_the_events_time_ungated(stand_in):
    stand_in.waits_supported = False
    seen = []
    timing.event_median(lambda: None, lambda: seen.append(stand_in.word.value), 0, 3, 0)
    assert seen == [1, 1, 1]  # never closed


def test_with_a_flush_device_each_sample_starts_from_a_cold_l2(stand_in, monkeypatch):
    """Before each timed sample (not the warmup), outside the gate, the stream overwrites one
    buffer of twice the device's L2, allocated once in that device's context."""
    allocated, contexts = [], []
    monkeypatch.setattr(timing, "_flush_buffers", {})
    monkeypatch.setattr(driver, "alloc", lambda nbytes: allocated.append(nbytes) or 0xF000)
    monkeypatch.setattr(driver, "context_for", lambda device: ("ctx", device))
    monkeypatch.setattr(driver, "use_context", lambda ctx: contexts.append(ctx) or "previous")
    monkeypatch.setattr(driver, "restore_context", lambda previous: contexts.append(previous))
    for _ in range(2):
        timing.event_median(lambda: None, lambda: None, warmup=1, rep=3, stream=5, flush_device=1)
    assert allocated == [100 << 20]
    flush = ("flush", 0xF000, 0, (100 << 20) // 4, 5, 1)  # gate still open: before the wait
    sample = [flush, ("wait", 5), ("record", 0), ("record", 0), ("sync", 1)]
    assert stand_in.log == (sample * 3 + ["free"]) * 2
    assert contexts == [("ctx", 1), "previous"] * 6


def test_without_a_flush_device_nothing_is_overwritten(stand_in):
    timing.event_median(lambda: None, lambda: None, warmup=0, rep=2, stream=5)
    assert not any(entry[0] == "flush" for entry in stand_in.log if isinstance(entry, tuple))
