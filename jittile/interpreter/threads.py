"""Each thread's globals: the names the lowered kernel uses, bound to the interpreter.

The lowered function refers to numba-cuda (thread registers, local arrays), to shared-buffer
views, to address intrinsics and to scalar conversions by generated global names; here they are
NumPy views of the CTA's shared bytes, address arithmetic over the interpreter's memories and
conversions with the GPU's wraparound, float element loads and stores with its rounding.
"""

from __future__ import annotations

import builtins
import sys
from types import SimpleNamespace

import numpy as np

from ..dtypes import convert
from ..errors import InterpreterError
from ..frontend.emit import CUDA, DESCRIPTOR_WORD, GLOBAL_ADDRESS, SHARED_ADDRESS
from ..ir import descriptor_word
from ..scalars import GLOBALS as ARITHMETIC
from .floats import conversion
from .instructions import handler
from .machine import Fault, Machine
from .memory import storage_dtype


class Cast:
    """``T.uint32(x)`` and friends: conversion to a scalar type, integers wrapping as on the
    GPU; also the dtype of ``cuda.local.array``."""

    def __init__(self, numpy_dtype: np.dtype):
        self.dtype = np.dtype(numpy_dtype)
        self.integer = self.dtype.kind in "ui"

    def __call__(self, value):
        if self.integer:  # a float truncates first, as the GPU's conversion does
            return convert(int(value), self.dtype)
        return self.dtype.type(value)  # what convert does for a float type, without its checks


class SharedView:
    """A shared buffer's flat view in one CTA: element reads check that no asynchronous copy
    still owns the bytes (a read before its barrier phase completed is a race)."""

    __slots__ = ("array", "cta", "offset", "itemsize", "name")

    def __init__(self, array: np.ndarray, cta, offset: int, name: str):
        self.array, self.cta, self.offset, self.name = array, cta, offset, name
        self.itemsize = array.itemsize

    def __getitem__(self, index):
        if self.cta.pending:
            self._check(index)
        return self.array[index]

    def __setitem__(self, index, value):
        self.array[index] = value
        cta = self.cta  # a generic-proxy write by the running thread, at its caller's line
        cta.smem.generic_write(
            self.offset + int(index) * self.itemsize,
            self.itemsize,
            cta.running.linear,
            sys._getframe(1).f_lineno,
            cta.syncs,
        )

    def __len__(self) -> int:
        return len(self.array)

    def _check(self, index) -> None:
        start = self.offset + int(index) * self.itemsize
        for pending in self.cta.pending:
            if pending.start < start + self.itemsize and start < pending.end:
                raise Fault(
                    f"race: reads {self.name}[{int(index)}] (shared {start:#x}) before "
                    f"the mbarrier at shared {pending.barrier:#x} completed phase "
                    f"{pending.phase}, on which the {pending.where} writing it completes; "
                    f"wait on the barrier first (T.cuda.mbarrier_wait)"
                )


def _local(shape, cast: Cast) -> np.ndarray:
    return np.zeros(shape, dtype=cast.dtype)


def globals_factory(lowered, launch, direct: list[str]):
    """``make(machine, thread)`` -> the globals of one thread's copy of the kernel; the
    instruction globals in ``direct`` (those that never block) carry their instruction out when
    called."""
    casts = {
        name: Cast(spec[1].numpy) for name, spec in lowered.namespace.items() if spec[0] == "type"
    }
    casts.update(
        {
            name: Cast(storage_dtype(spec[1]))
            for name, spec in lowered.namespace.items()
            if spec[0] == "storage"
        }
    )
    casts.update(
        {
            name: conversion(spec[1], spec[2].name)
            for name, spec in lowered.namespace.items()
            if spec[0] == "convert"
        }
    )
    buffers = {name: spec[1] for name, spec in lowered.namespace.items() if spec[0] == "smem"}
    per_cta: dict = {}

    def cta_globals(machine: Machine, cta) -> dict:
        base = {"__builtins__": builtins, **ARITHMETIC, **casts}
        for name, buf in buffers.items():
            count = buf.nbytes // buf.dtype.bytes
            raw = cta.smem.data[buf.offset : buf.offset + buf.nbytes]
            view = SharedView(raw.view(storage_dtype(buf.dtype))[:count], cta, buf.offset, buf.name)
            base[name] = lambda v=view: v
        base[SHARED_ADDRESS] = _shared_address
        base[GLOBAL_ADDRESS] = _global_address(machine)
        base[DESCRIPTOR_WORD] = descriptor_word
        return base

    def make(machine: Machine, thread) -> dict:
        key = (id(machine), thread.cta.index)
        if key not in per_cta:
            per_cta[key] = cta_globals(machine, thread.cta)
        env = dict(per_cta[key])
        cuda = Machine.specials(thread, launch.grid, launch.block)
        cuda.local = SimpleNamespace(array=_local)
        env[CUDA] = cuda
        for name in direct:
            env[name] = _instruction(machine, thread, name)
        return env

    return make


def _instruction(machine: Machine, thread, name: str):
    run = handler(machine, name)  # resolved once per launch, bound once per thread
    return lambda *args: run(machine, thread, args)


def _shared_address(view: SharedView, index) -> int:
    if type(view) is not SharedView:
        raise InterpreterError(f"a shared address of a non-shared value {view!r}")
    return view.offset + int(index) * view.itemsize


def _global_address(machine: Machine):
    def address(array: np.ndarray, index) -> int:
        if not all(isinstance(i, (int, np.integer)) for i in index):
            shown = ", ".join(str(i) for i in index)
            raise Fault(f"the index ({shown}) of a global address is not all integers")
        for buffer in machine.memory.buffers:
            base = buffer.data.ctypes.data
            if base <= array.ctypes.data < base + buffer.data.size:
                offset = array.ctypes.data - base
                offset += sum(int(i) * s for i, s in zip(index, array.strides))
                return buffer.address + offset
        raise Fault("an address of an array outside global memory")

    return address
