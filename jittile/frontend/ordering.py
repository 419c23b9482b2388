"""Ordering rules the kernel's own code must keep around asynchronous tile instructions (a wgmma's
fence, commit and wait), checked in program order over the events lowering records.

The rules belong to the families (:meth:`~jittile.patterns.base.TilePattern.check_order`); this
module hands each family that the kernel calls the whole event list, raises the first error and
issues the warnings. Program order is textual: loops are not unrolled, so what a rule cannot
decide statically it warns about rather than refuses.
"""

from __future__ import annotations

from ..errors import ContractError, warn_at
from ..patterns import registry


def check_ordering(sites: list, events: list) -> list[str]:
    """Apply the rules of every family the kernel calls; returns the warning texts."""
    families = {site.family for site in sites}
    warned = []
    for pattern in registry.patterns():
        if pattern.family not in families:
            continue
        findings = pattern.check_order(events)
        for finding in findings:
            if finding.error:
                raise ContractError(
                    finding.message, finding.location, opcode=finding.opcode, parameter="order"
                )
        warned += [warn_at(f.message, f.location, opcode=f.opcode) for f in findings]
    return warned
