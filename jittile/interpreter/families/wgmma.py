"""The warpgroup MMA for the interpreter: a warp collective whose product reads A and B through
the async proxy (:mod:`..wgmma` computes it); it completes at issue."""

from __future__ import annotations

from ...ir import PlanRecord
from ..asynchronous import async_read
from ..machine import Block
from ..memory import MemoryFault
from ..wgmma import wgmma


def execute(machine, thread, record: PlanRecord, op, values: tuple) -> Block:
    """Issue one MMA (``op`` its parsed opcode, ``values`` the thread's operands in the record's
    role order): the warp's lanes meet, then one of them computes the warp's rows."""
    kind, key, run, operands = wgmma(machine, thread, record, op, values).reason

    def product(per_lane, threads):
        with async_read(machine, threads[0], record.opcode):
            try:
                return run(per_lane, threads)
            except MemoryFault as exc:
                raise machine.error(threads[0], str(exc)) from None

    return Block((kind, key, product, operands))


execute.blocks = True
