"""The shared-memory -> tensor-memory copy for the interpreter: it reads its source through the
async proxy and completes at issue (the ``tcgen05.commit`` that follows arrives at once)."""

from __future__ import annotations

from ...ir import PlanRecord
from ..asynchronous import async_read
from ..tmem import tensor_memory


def execute(machine, thread, record: PlanRecord, op, ops: dict) -> None:
    """Carry out one copy (``op`` its parsed opcode, ``ops`` its operands by role)."""
    with async_read(machine, thread, record.opcode):
        tensor_memory(thread.cta).copy_from_shared(
            op, ops["taddr"], ops["descriptor"], thread.cta.smem
        )
