"""Timing device work with CUDA events, the host's cost of issuing it left out.

Events around a launch measure from the GPU reaching the start event to it reaching the stop
event. When the GPU is idle as the host records the start, that interval includes the host's
work to issue the launch: a 10 us kernel whose launch costs the host 30 us times as 30 us, and a
tuner comparing short configs would pick the one with the cheapest launch (run 50,
``bench/results/gemm_diagnose_run50.json``: tuned launches then cost 48-75 us of host time).

A gate closes that gap. Before the start event the stream waits on a word of mapped host memory
(``cuStreamWaitValue32``, the driver's stream memory operations); the host records the start,
issues the work and records the stop, then opens the gate with one store to that word, and the
GPU runs them back to back. If the issued work itself waits for the stream (a synchronous copy,
say), a watchdog thread opens the gate after ``GATE_TIMEOUT_S``, so a sample is never stuck, and
the config's remaining samples time without a gate: such work keeps the host behind the GPU
anyway, and gating it would cost every sample the timeout. Where the driver refuses stream
memory operations the events time without a gate.

The tuner's samples also start from a cold L2, as Triton's ``do_bench`` has them: before each,
outside the timed region, the stream overwrites a buffer of twice the device's L2
(``flush_device``; kept per device for the process, as Triton keeps its one). Repeated on the
same arrays, a short product's operands would otherwise stay in the L2 (a 4096 x 4096 bf16
weight is 32 MB of the H200's 50): run 87's tuning timed the M = 64 GEMM's chosen config at
14.6 us, the benchmark's rotating inputs at 19.6, and the configs whose operands come from the
DRAM rank differently.
"""

from __future__ import annotations

import ctypes
import statistics
import threading
from collections.abc import Callable

from . import driver

GATE_TIMEOUT_S = 0.25  # far above any launch sequence's host time; a safety net only
_flush_buffers: dict[int, tuple[int, int]] = {}  # device -> (pointer, 32-bit words)


class _Gate:
    """One 32-bit word of mapped, pinned host memory that a stream waits on."""

    def __init__(self):
        drv = driver.bindings()
        flags = drv.CU_MEMHOSTALLOC_DEVICEMAP | drv.CU_MEMHOSTALLOC_PORTABLE
        self.host = int(driver.check(drv.cuMemHostAlloc(4, flags), "cuMemHostAlloc"))
        self.device = driver.check(
            drv.cuMemHostGetDevicePointer(self.host, 0), "cuMemHostGetDevicePointer"
        )
        self.word = ctypes.c_uint32.from_address(self.host)
        self.word.value = 1

    def close(self, stream: int) -> bool:
        """Make ``stream`` wait until ``open``; False (no wait) where the driver refuses."""
        drv = driver.bindings()
        self.word.value = 0
        geq = drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        (result,) = drv.cuStreamWaitValue32(stream, self.device, 1, geq)
        if result != drv.CUresult.CUDA_SUCCESS:
            self.word.value = 1
            return False
        return True

    def open(self) -> None:
        self.word.value = 1

    def free(self) -> None:
        self.open()
        driver.bindings().cuMemFreeHost(self.host)


def _flush_l2(device: int, stream: int) -> None:
    """Overwrite twice ``device``'s L2 on ``stream``: what the next sample reads comes from the
    DRAM."""
    drv = driver.bindings()
    previous = driver.use_context(driver.context_for(device))
    try:
        if device not in _flush_buffers:
            attribute = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
            l2 = driver.check(drv.cuDeviceGetAttribute(attribute, device), "cuDeviceGetAttribute")
            words = max(2 * int(l2), 1 << 20) // 4
            _flush_buffers[device] = (driver.alloc(4 * words), words)
        pointer, words = _flush_buffers[device]
        driver.check(drv.cuMemsetD32Async(pointer, 0, words, stream), "cuMemsetD32Async")
    finally:
        driver.restore_context(previous)


def event_median(
    prepare: Callable[[], None],
    fn: Callable[[], None],
    warmup: int,
    rep: int,
    stream: int,
    flush_device: int | None = None,
) -> float:
    """Median milliseconds of ``fn``'s device work on ``stream`` over ``rep`` samples (after
    ``warmup`` untimed calls), each issued behind a gate; ``prepare`` (resets, restores) runs
    before each, outside the timed region, and with ``flush_device`` the L2 of that device is
    overwritten before each sample."""
    drv = driver.bindings()
    flags = drv.CUevent_flags.CU_EVENT_DEFAULT
    start = driver.check(drv.cuEventCreate(flags), "cuEventCreate")
    stop = driver.check(drv.cuEventCreate(flags), "cuEventCreate")
    gate = _Gate()
    opened_late = []  # the watchdog opened the gate: fn waited for its own stream

    def release() -> None:
        opened_late.append(True)
        gate.open()

    try:
        for _ in range(warmup):
            prepare()
            fn()
        samples = []
        for _ in range(rep):
            prepare()
            if flush_device is not None:
                _flush_l2(flush_device, stream)
            watchdog = None
            if not opened_late and gate.close(stream):
                watchdog = threading.Timer(GATE_TIMEOUT_S, release)
                watchdog.start()
            try:
                driver.check(drv.cuEventRecord(start, stream), "cuEventRecord")
                fn()
                driver.check(drv.cuEventRecord(stop, stream), "cuEventRecord")
            finally:
                gate.open()
                if watchdog is not None:
                    watchdog.cancel()
            driver.check(drv.cuEventSynchronize(stop), "cuEventSynchronize")
            samples.append(driver.check(drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime"))
        return statistics.median(samples)
    finally:
        gate.free()
        drv.cuEventDestroy(start)
        drv.cuEventDestroy(stop)
