"""Target requirements of opcodes: the check every family's contract and the raw instruction table
make (:func:`check_target`), and where the ISA advises multicast.

The families' own opcode grammars live with them (``jittile/patterns/``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ContractError, Location
from ..targets import Target, satisfies

# Targets on which the ISA says multicast performs well; it is legal from sm_90 on (PTX ISA,
# cp.async.bulk.tensor, Notes: "advised to be used with .target sm_90a/sm_100f/sm_100a/...").
MULTICAST_ADVISED_TARGETS = ("sm_90a", "sm_100a")


def check_target(
    requirement: str | Sequence[str],
    target: str | Target,
    opcode: str,
    location: Location | None = None,
) -> None:
    """Raise :class:`ContractError` unless ``target`` satisfies ``requirement`` (one target
    string, or alternatives of which any one suffices), naming both."""
    alternatives = [requirement] if isinstance(requirement, str) else list(requirement)
    if any(satisfies(target, req) for req in alternatives):
        return
    wanted = " or ".join(_describe_requirement(req) for req in alternatives)
    raise ContractError(
        f"requires target {wanted}, but the kernel is compiled for {Target.from_name(target).name}",
        location,
        opcode=opcode,
        parameter="target",
    )


def _describe_requirement(requirement: str) -> str:
    parsed = Target.from_name(requirement)
    if parsed.suffix == "a":
        return f"{parsed.name} (or a target of its architecture family)"
    if parsed.suffix == "f":
        return f"{parsed.name} (family-specific)"
    return f"{parsed.name} or newer"
