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

from ..dtypes import DType
from ..ptx.instructions import ASYNC_SHARED_FENCE_CALL

GLOBAL_BASE = 0x7F00_0000_0000  # where the first buffer lands (like a device pointer)
GLOBAL_ALIGN = 256  # cudaMalloc's alignment


# A generic write's record, one int64 per shared byte: thread + 1 (a block has at most 1024
# threads), the lowered kernel line, and the CTA's synchronization count, from the lowest bit.
_LINE_SHIFT = 11
_SYNC_SHIFT = 32
_THREAD_MASK = (1 << _LINE_SHIFT) - 1


def storage_dtype(dtype: DType) -> np.dtype:
    """The NumPy type memory holds ``dtype`` elements in: narrow floats as the unsigned integer
    of their width, as the compiled kernel stores them (element accesses convert)."""
    return np.dtype(dtype.storage.numpy)


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
            raise MemoryFault(
                f"global access of {nbytes} bytes at {address:#x} runs past the end "
                f"of {buffer.name!r} ({buffer.data.size} bytes at "
                f"{buffer.address:#x}) by {address + nbytes - buffer.end} bytes"
            )
        raise MemoryFault(
            f"global access of {nbytes} bytes at {address:#x} is outside every buffer"
        )

    def read(self, address: int, nbytes: int) -> np.ndarray:
        buffer, offset = self.buffer_at(address, nbytes)
        return buffer.data[offset : offset + nbytes]

    def write(self, address: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buffer, offset = self.buffer_at(address, raw.size)
        buffer.data[offset : offset + raw.size] = raw


@dataclass(frozen=True)
class AsyncReader:
    """An async-proxy instruction reading shared memory: ``what`` it is, ``describe(thread,
    line)`` naming a generic write's thread and kernel position and ``name(address)`` the
    shared byte, for a race report."""

    what: str
    describe: object
    name: object


class SharedMemory:
    """One CTA's shared memory: ``size`` bytes whose shared-window addresses are 0..size-1.

    It also models the async proxy (PTX ISA, Memory Consistency Model, "Proxies" and
    "Proxy-preserved base causality order"): a generic-proxy write (an ordinary store,
    ``st.shared``, ``stmatrix``) and a later async-proxy read of the same bytes (a TMA or bulk
    store, a wgmma or tcgen05.cp operand) are ordered only through a ``fence.proxy.async`` on
    the causality path between them. Each byte records the generic write not yet fenced
    (thread + 1, the lowered line, the CTA's synchronization count then, packed into one word
    so that a store costs one assignment); a proxy fence by a thread clears its own writes and
    those a synchronization since ordered before it. An async read of a byte still recorded is
    a race; an async write (a load landing) replaces it."""

    def __init__(self, size: int, cta: tuple):
        self.data = np.zeros(max(size, 1), dtype=np.uint8)
        self.size = size
        self.cta = cta
        self.generic = np.zeros(max(size, 1), dtype=np.int64)  # 0: visible to the async proxy
        self.unfenced = False  # whether any byte holds an unfenced generic write
        self.low, self.high = self.size, 0  # the bytes [low, high) hold every unfenced write
        self.reader: AsyncReader | None = None  # the async-proxy instruction reading now

    def check(self, address: int, nbytes: int) -> int:
        if address < 0 or address + nbytes > self.size:
            raise MemoryFault(
                f"shared access of {nbytes} bytes at {address:#x} is outside CTA "
                f"{self.cta}'s {self.size} bytes of shared memory"
            )
        if self.reader is not None and self.unfenced:
            self._check_fenced(address, nbytes)
        return address

    # ------------------------------------------------------------------------- the proxies
    def generic_write(self, address: int, nbytes: int, thread: int, line: int, syncs: int) -> None:
        """Bytes ``thread`` (linear index) wrote through the generic proxy at lowered ``line``,
        when its CTA had completed ``syncs`` synchronizations."""
        self.generic[address : address + nbytes] = (
            syncs << _SYNC_SHIFT | line << _LINE_SHIFT | thread + 1
        )
        self.unfenced = True
        if address < self.low:
            self.low = address
        if address + nbytes > self.high:
            self.high = address + nbytes

    def proxy_fence(self, thread: int, syncs: int) -> None:
        """``fence.proxy.async`` by ``thread``: its generic writes, and every write made before
        the last of the CTA's ``syncs`` synchronizations, become visible to the async proxy."""
        if self.unfenced:  # only the span the unfenced writes lie in (a staging buffer, say)
            span = self.generic[self.low : self.high]
            own = (span & _THREAD_MASK) == thread + 1
            span[own | (span >> _SYNC_SHIFT < syncs)] = 0
            self.unfenced = bool(span.any())
            if not self.unfenced:
                self.low, self.high = self.size, 0

    def async_write(self, address: int, nbytes: int) -> None:
        """Bytes an async-proxy write replaced: no generic write is pending on them."""
        if self.unfenced:
            self.generic[max(address, 0) : address + nbytes] = 0

    def _check_fenced(self, address: int, nbytes: int) -> None:
        written = np.flatnonzero(self.generic[address : address + nbytes])
        if written.size:
            byte = address + int(written[0])
            word = int(self.generic[byte])
            who = self.reader.describe(
                (word & _THREAD_MASK) - 1,
                word >> _LINE_SHIFT & (1 << _SYNC_SHIFT - _LINE_SHIFT) - 1,
            )
            raise MemoryFault(
                f"race: {self.reader.what} reads {self.reader.name(byte)} through the async "
                f"proxy, but "
                f"{who} wrote it through the generic proxy with no fence.proxy.async ordering "
                f"the write before this read (the async proxy may read the old bytes); fence "
                f"after the writes, before the barrier that orders them with the issuing "
                f"thread: {ASYNC_SHARED_FENCE_CALL}"
            )

    def read(self, address: int, nbytes: int) -> np.ndarray:
        self.check(address, nbytes)
        return self.data[address : address + nbytes]

    def write(self, address: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.check(address, raw.size)
        self.data[address : address + raw.size] = raw
