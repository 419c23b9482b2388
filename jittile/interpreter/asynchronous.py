"""What the interpreter's asynchronous instructions share: mbarrier arrivals and transaction
bytes, loads that land late, the destination CTAs of a multicast, and async-proxy reads."""

from __future__ import annotations

import contextlib

from .machine import Fault, MBarrier, Pending
from .memory import AsyncReader


def barrier_at(cta, address: int) -> MBarrier:
    """The mbarrier initialised at shared ``address`` of ``cta``."""
    barrier = cta.mbarriers.get(address)
    if barrier is None:
        raise Fault(f"no mbarrier was initialised at shared {address:#x} of CTA {cta.index}")
    return barrier


def arrive(machine, cta, address: int, count: int = 1) -> None:
    """``count`` arrivals on the barrier at ``address``."""
    barrier = barrier_at(cta, address)
    barrier.pending -= count
    maybe_complete(cta, address, barrier)


def complete_tx(machine, cta, address: int, nbytes: int) -> None:
    """``nbytes`` of the barrier's expected transaction bytes arrived."""
    barrier = barrier_at(cta, address)
    barrier.tx -= nbytes
    maybe_complete(cta, address, barrier)


def maybe_complete(cta, address: int, barrier: MBarrier) -> None:
    """Complete the barrier's phase once every arrival and transaction byte is in."""
    if barrier.pending < 0:
        raise Fault(
            f"mbarrier at shared {address:#x} received more arrivals than its count "
            f"({barrier.count}) in phase {barrier.phase}"
        )
    if barrier.pending == 0 and barrier.tx == 0:
        barrier.phase += 1
        cta.syncs += 1
        barrier.pending = barrier.count
        cta.pending = [p for p in cta.pending if p.barrier != address]


@contextlib.contextmanager
def async_read(machine, thread, what: str):
    """While the block runs, every shared access of ``thread``'s CTA is an async-proxy read of
    ``what``, which must not see an unfenced generic write."""
    cta = thread.cta

    def describe(writer: int, line: int) -> str:
        t = cta.threads[writer]
        return f"thread {t.index} (warp {t.warp}, lane {t.lane}) at {machine.where(line)}"

    def name(address: int) -> str:
        buffers = (spec[1] for spec in machine.namespace.values() if spec[0] == "smem")
        for buffer in buffers:
            if buffer.offset <= address < buffer.offset + buffer.nbytes:
                return f"byte {address - buffer.offset} of {buffer.name!r} (shared {address:#x})"
        return f"shared {address:#x}"

    cta.smem.reader = AsyncReader(what, describe, name)
    try:
        yield
    finally:
        cta.smem.reader = None


def destinations(machine, thread, ops: dict) -> list:
    """The CTAs a copy writes: those of a ``cta_mask`` operand (multicast), else the issuer's."""
    if "cta_mask" in ops:
        mask = ops["cta_mask"]
        return [machine.cta_of_rank(r) for r in range(16) if mask >> r & 1]
    return [thread.cta]


def issue_load(
    machine, thread, cta, address: int, footprint: int, barrier: int, record, write
) -> None:
    """An asynchronous load into ``cta``'s shared memory: its bytes are unreadable until the
    barrier phase completes; it lands (``write()`` -> bytes) and completes its transaction
    bytes only when no thread can move without it (as late as the GPU may)."""
    phase = barrier_at(cta, barrier).phase
    line = thread.line(machine.where)
    cta.pending.append(
        Pending(address, address + footprint, barrier, phase, f"{record.opcode} at {line}")
    )

    def land() -> None:
        nbytes = write()
        cta.smem.async_write(address, footprint)
        complete_tx(machine, cta, barrier, nbytes)

    machine.inflight.append(land)
