"""Transaction-byte accounting: a static expected-transaction count set on an mbarrier should
equal the bytes of the asynchronous instructions completing on it.

Both sides are declared elsewhere: raw instructions that set an expected count say which operand
is the barrier and which the byte count (``InstructionSpec.tx_count``); tile patterns mark each
plan record that completes on an mbarrier (``completion == "mbarrier"``, ``barrier``, ``bytes``).
Barriers are matched by their lowered expression (statics folded, so each unrolled stage is its
own barrier).
"""
from __future__ import annotations

from ..errors import warn_at
from ..ir import Var


def check_transaction_bytes(sites: list, counts: list, value_keys: dict) -> list[str]:
    """Warn where a count differs from the bytes completing on its barrier; returns the messages.

    ``counts`` holds ``(location, opcode, barrier key, barrier text, bytes or None)`` per counting
    instruction, ``value_keys`` the lowered expression of each temporary a plan names. One count
    accounts for every load site on its barrier (one phase); as many counts as load sites pair
    up in program order; anything else is left to the caller."""
    loads: dict[str, list] = {}
    for site in sites:
        records = [r for r in site.plan if r.completion == "mbarrier" and r.barrier is not None]
        if records:
            barrier = records[0].barrier
            key = value_keys.get(barrier.name, str(barrier)) if isinstance(barrier, Var) \
                else str(barrier)
            loads.setdefault(key, []).append((site.location, sum(r.bytes for r in records)))
    expected: dict[str, list] = {}
    written = {}
    for location, opcode, key, text, count in counts:
        expected.setdefault(key, []).append((location, count, opcode))
        written.setdefault(key, text)
    messages = []
    for key, sets in expected.items():
        found = loads.get(key)
        if not found or any(count is None for _, count, _ in sets):
            continue
        if len(sets) == 1:
            pairs = [(sets[0], (", ".join(f"line {loc.lineno}" for loc, _ in found),
                                sum(b for _, b in found)))]
        elif len(sets) == len(found):
            pairs = [(e, (f"line {loc.lineno}", b)) for e, (loc, b) in zip(sets, found)]
        else:
            continue
        for (location, count, opcode), (where, total) in pairs:
            if count != total:
                messages.append(warn_at(f"{opcode} expects {count} transaction bytes on "
                                        f"{written[key]}, but the loads completing on it move "
                                        f"{total} bytes ({where})", location, opcode=opcode,
                                        hint=f"make the count {total}"))
    return messages
