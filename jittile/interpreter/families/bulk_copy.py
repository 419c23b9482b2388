"""The bulk copies for the interpreter: a load lands late on its mbarrier (into every CTA of a
multicast mask), a store or reduction reads shared memory through the async proxy and writes
global memory at issue, a prefetch only checks its global bytes."""

from __future__ import annotations

from ...ir import PlanRecord
from ..asynchronous import async_read, destinations, issue_load
from ..machine import Fault
from ..tma import reduce_values


def execute(machine, thread, record: PlanRecord, op, ops: dict) -> None:
    """Carry out one bulk copy (``op`` its parsed opcode, ``ops`` its operands by role)."""
    size = ops["size"]
    if op.kind == "prefetch":
        machine.memory.read(ops["global"], size)  # faults like the GPU on a bad address
        return None
    _check_granule(ops["global"], "global")
    _check_granule(ops["shared"], "shared")
    if op.kind in ("store", "reduce"):
        with async_read(machine, thread, record.opcode):
            data = thread.cta.smem.read(ops["shared"], size).copy()
        if op.kind == "reduce":
            old = machine.memory.read(ops["global"], size).copy()
            data = reduce_values(op.operator, op.type, old, data)
        machine.memory.write(ops["global"], data)
        return None
    data = machine.memory.read(ops["global"], size).copy()

    def write(cta) -> int:
        cta.smem.write(ops["shared"], data)
        return size

    for cta in destinations(machine, thread, ops):
        cta.smem.check(ops["shared"], size)
        issue_load(
            machine,
            thread,
            cta,
            ops["shared"],
            size,
            ops["barrier"],
            record,
            lambda cta=cta: write(cta),
        )
    return None


def _check_granule(address: int, what: str) -> None:
    if address % 16:
        raise Fault(f"bulk copy {what} address {address:#x} is not 16-byte aligned")
