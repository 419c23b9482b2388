"""GPU targets (``sm_90a``, ``sm_100a``...) and what each one can run.

A requirement such as ``sm_90a`` is met by every target whose feature set includes sm_90a's
architecture-specific instructions: in practice ``sm_90a`` itself and the Blackwell ``a`` targets that
the PTX ISA lists for the same instructions. Requirements are sets of accepting targets, so each
instruction table entry states exactly where it assembles.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import JittileError

_TARGET_RE = re.compile(r"^sm_(\d+)([af]?)$")


@dataclass(frozen=True, order=True)
class Target:
    """A compute target: ``major``/``minor`` compute capability and the ``a``/``f`` suffix."""

    major: int
    minor: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: "str | Target") -> "Target":
        if isinstance(text, Target):
            return text
        match = _TARGET_RE.match(str(text).strip())
        if not match:
            raise JittileError(f"unknown target {text!r}: expected a name like 'sm_90a' or 'sm_100a'")
        digits, suffix = match.groups()
        return cls(int(digits[:-1]), int(digits[-1]), suffix)

    @property
    def name(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def cc(self) -> tuple:
        """The ``cc`` tuple numba-cuda's ``compile_ptx`` takes."""
        return (self.major, self.minor, self.suffix) if self.suffix else (self.major, self.minor)

    @property
    def capability(self) -> int:
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return self.name


SUPPORTED_TARGETS = ("sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_101a", "sm_103a", "sm_110a",
                     "sm_120a")

# Architecture-specific feature sets: which targets accept instructions that the PTX ISA restricts to
# a family. Generic (no suffix) requirements accept any target of at least that capability.
_FAMILY = {
    "sm_90a": {"sm_90a"},
    "sm_100a": {"sm_100a", "sm_100f", "sm_101a", "sm_103a", "sm_110a"},
}


def satisfies(target: "str | Target", requirement: str) -> bool:
    """Whether ``target`` can assemble an instruction that needs ``requirement``."""
    target = Target.parse(target)
    req = Target.parse(requirement)
    if not req.suffix:
        return target.capability >= req.capability
    return target.name in _FAMILY.get(req.name, {req.name})


def device_target(capability: tuple[int, int] | None) -> str:
    """The ``a`` target of a device of compute ``capability``; ``sm_90a`` when there is no device."""
    if capability is None:
        return "sm_90a"
    major, minor = capability
    if major == 9:
        return "sm_90a"
    return f"sm_{major}{minor}a"
