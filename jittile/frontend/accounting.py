"""Transaction-byte accounting: every mbarrier a load completes on must be armed with an expected
transaction count, and a static count should equal the bytes of the loads completing on it.

Both sides are declared elsewhere: raw instructions that set an expected count say which operand
is the barrier and which the byte count (``InstructionSpec.tx_count``); tile patterns mark each
plan record that completes on an mbarrier (``completion == "mbarrier"``, ``barrier``, ``bytes``).
Byte counts match barriers by their lowered expression (statics folded, so each unrolled stage is
its own barrier); arming matches them by shared buffer, as a ring of barriers indexed at run time
(``full.ptr_to([s])``) is armed one element at a time.
"""

from __future__ import annotations

from ..errors import ContractError, warn_at
from ..ir import Var
from ..ptx.instructions import ARMING_INSTRUCTIONS, arming_call
from .emit import address_buffer
from .syntax import src


def _completing_loads(sites: list, value_keys: dict) -> list:
    """``(site, barrier, lowered barrier or None, bytes)`` per tile call that completes on
    a barrier."""
    loads = []
    for site in sites:
        records = [r for r in site.plan if r.completion == "mbarrier" and r.barrier is not None]
        if records:
            barrier = records[0].barrier
            lowered = value_keys.get(barrier.name) if isinstance(barrier, Var) else None
            loads.append((site, barrier, lowered, sum(r.bytes for r in records)))
    return loads


def check_armed_barriers(sites: list, counts: list, value_keys: dict) -> None:
    """A load completing on an mbarrier of a shared buffer that no expected-transaction count
    of the kernel arms is a ContractError: its bytes are never expected, so the phase completes
    before the data lands or never (a hang). Barriers whose buffer is not known statically (an
    address held in a variable) are not judged, and nor is anything when an arming
    instruction's barrier is such an address (it may be any barrier)."""
    armed = {address_buffer(lowered) for _, _, lowered, _, _ in counts}
    if None in armed:
        return
    for site, barrier, lowered, nbytes in _completing_loads(sites, value_keys):
        buffer = address_buffer(lowered)
        if buffer is None or buffer in armed:
            continue
        raise ContractError(
            f"the load completes {nbytes} transaction bytes on mbarrier {barrier}, but no "
            f"{ARMING_INSTRUCTIONS} in the kernel arms a barrier of shared buffer {buffer!r}, "
            f"so its phase completes before the data lands, or never (the wait hangs)",
            site.location,
            opcode=site.opcode,
            parameter="mbar",
            hint=f"arm the barrier before the load: {arming_call(str(barrier), nbytes)}",
        )


def check_transaction_bytes(sites: list, counts: list, value_keys: dict) -> list[str]:
    """Warn where a count differs from the bytes completing on its barrier; returns the messages.

    ``counts`` holds ``(location, opcode, lowered barrier, barrier text, bytes or None)`` per
    counting instruction, ``value_keys`` the lowered expression of each temporary a plan names.
    One count accounts for every load site on its barrier (one phase); as many counts as load
    sites pair up in program order; anything else is left to the caller."""
    loads: dict[str, list] = {}
    for site, barrier, lowered, nbytes in _completing_loads(sites, value_keys):
        key = src(lowered) if lowered is not None else str(barrier)
        loads.setdefault(key, []).append((site.location, nbytes))
    expected: dict[str, list] = {}
    written = {}
    for location, opcode, lowered, text, count in counts:
        key = src(lowered)
        expected.setdefault(key, []).append((location, count, opcode))
        written.setdefault(key, text)
    messages = []
    for key, sets in expected.items():
        found = loads.get(key)
        if not found or any(count is None for _, count, _ in sets):
            continue
        if len(sets) == 1:
            pairs = [
                (
                    sets[0],
                    (", ".join(f"line {loc.lineno}" for loc, _ in found), sum(b for _, b in found)),
                )
            ]
        elif len(sets) == len(found):
            pairs = [(e, (f"line {loc.lineno}", b)) for e, (loc, b) in zip(sets, found)]
        else:
            continue
        for (location, count, opcode), (where, total) in pairs:
            if count != total:
                messages.append(
                    warn_at(
                        f"{opcode} expects {count} transaction bytes on "
                        f"{written[key]}, but the loads completing on it move "
                        f"{total} bytes ({where})",
                        location,
                        opcode=opcode,
                        hint=f"make the count {total}",
                    )
                )
    return messages
