"""The interpreter's memories: global memory as byte buffers at device-like addresses, and each
CTA's shared memory as bytes at the planned offsets (so swizzled images and aliasing are real).

Every access is checked: an address outside any buffer raises :class:`MemoryFault` naming the
address, the size and the nearest buffer, which the interpreter reports at the kernel's source
line with the thread that made it.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

GLOBAL_BASE = 0x7F00_0000_0000  # where the first buffer lands (like a device pointer)
GLOBAL_ALIGN = 256  # cudaMalloc's alignment


class MemoryFault(Exception):
    """An access outside the memory the kernel may touch."""


@dataclass
class Buffer:
    """One global allocation: ``data`` (bytes, C order) at ``address``, known to the user as
    ``name``."""

    name: str
    address: int
    data: np.ndarray  # uint8, one-dimensional

    @property
    def end(self) -> int:
        return self.address + self.data.size


@dataclass
class GlobalMemory:
    """Device global memory: buffers at 256-byte-aligned, non-adjacent addresses."""

    buffers: list = field(default_factory=list)
    _next: int = GLOBAL_BASE

    def allocate(self, name: str, nbytes: int) -> Buffer:
        buffer = Buffer(name, self._next, np.zeros(max(nbytes, 1), dtype=np.uint8))
        # a guard gap after each buffer: an overrun faults instead of landing in the next one
        self._next += (max(nbytes, 1) + 2 * GLOBAL_ALIGN - 1) // GLOBAL_ALIGN * GLOBAL_ALIGN
        self.buffers.append(buffer)
        return buffer

    def buffer_at(self, address: int, nbytes: int) -> tuple[Buffer, int]:
        """The buffer holding ``[address, address + nbytes)`` and the offset into it."""
        starts = [b.address for b in self.buffers]
        index = bisect.bisect_right(starts, address) - 1
        if index >= 0:
            buffer = self.buffers[index]
            if address + nbytes <= buffer.end:
                return buffer, address - buffer.address
            raise MemoryFault(f"global access of {nbytes} bytes at {address:#x} runs past the end "
                              f"of {buffer.name!r} ({buffer.data.size} bytes at "
                              f"{buffer.address:#x}) by {address + nbytes - buffer.end} bytes")
        raise MemoryFault(f"global access of {nbytes} bytes at {address:#x} is outside every "
                          f"buffer")

    def read(self, address: int, nbytes: int) -> np.ndarray:
        buffer, offset = self.buffer_at(address, nbytes)
        return buffer.data[offset:offset + nbytes]

    def write(self, address: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buffer, offset = self.buffer_at(address, raw.size)
        buffer.data[offset:offset + raw.size] = raw


class SharedMemory:
    """One CTA's shared memory: ``size`` bytes whose shared-window addresses are 0..size-1."""

    def __init__(self, size: int, cta: tuple):
        self.data = np.zeros(max(size, 1), dtype=np.uint8)
        self.size = size
        self.cta = cta

    def check(self, address: int, nbytes: int) -> int:
        if address < 0 or address + nbytes > self.size:
            raise MemoryFault(f"shared access of {nbytes} bytes at {address:#x} is outside CTA "
                              f"{self.cta}'s {self.size} bytes of shared memory")
        return address

    def read(self, address: int, nbytes: int) -> np.ndarray:
        self.check(address, nbytes)
        return self.data[address:address + nbytes]

    def write(self, address: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.check(address, raw.size)
        self.data[address:address + raw.size] = raw
