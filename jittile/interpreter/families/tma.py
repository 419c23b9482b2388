"""The TMA tile copies for the interpreter: a load lands late on its mbarrier (into every CTA of a
multicast mask); a store or reduction reads its box through the async proxy and writes global
memory at issue (:mod:`..tma` models the unit itself)."""

from __future__ import annotations

from ...ir import PlanRecord
from ..asynchronous import async_read, destinations, issue_load
from ..tma import PACKED, tma_load, tma_store


def execute(machine, thread, record: PlanRecord, op, ops: dict) -> None:
    """Carry out one TMA instruction (``op`` its parsed opcode, ``ops`` its operands by role)."""
    gathered = op.mode in ("tile::gather4", "tile::scatter4")
    coords = tuple(ops[f"coord{i}"] for i in range(5 if gathered else op.rank))
    rows = None
    if gathered:
        coords, rows = coords[:1], coords[1:]
    fields = ops["tensormap"]
    footprint = record.bytes * (2 if fields.data_type in PACKED else 1)
    if op.kind != "load":
        with async_read(machine, thread, record.opcode):
            thread.cta.smem.check(ops["shared"], footprint)
        tma_store(fields, op, coords, rows, machine.memory, thread.cta.smem, ops["shared"])
        return None
    for cta in destinations(machine, thread, ops):

        def write(cta=cta):
            return tma_load(fields, op, coords, rows, machine.memory, cta.smem, ops["shared"])

        issue_load(machine, thread, cta, ops["shared"], footprint, ops["barrier"], record, write)
    return None
