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
    def parse(cls, text: str | Target) -> Target:
        """A compile target by name; an unknown or unsupported name raises :class:`JittileError`
        naming the supported targets."""
        if isinstance(text, Target):
            return text
        target = cls.from_name(text)
        if target.name not in TARGETS:
            raise JittileError(
                f"unsupported target {text!r}: jittile compiles for {', '.join(TARGETS)}"
            )
        return target

    @classmethod
    def from_name(cls, text: str | Target) -> Target:
        """Any well-formed ``sm_XY[a|f]`` name, supported or not (an instruction's minimum target
        such as ``sm_80`` is one)."""
        if isinstance(text, Target):
            return text
        match = _TARGET_RE.match(str(text).strip())
        if not match:
            raise JittileError(
                f"unknown target {text!r}: expected a name like 'sm_90a' or "
                f"'sm_100a'; jittile compiles for {', '.join(TARGETS)}"
            )
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

    @property
    def max_shared_bytes(self) -> int:
        """The most shared memory one block may use (static and dynamic) on this target."""
        return TARGETS[self.name]

    def __str__(self) -> str:
        return self.name


# Every target jittile compiles for (each compiles the README example: tests/test_targets.py), with
# the most shared memory one block may use there: the CUDA C++ Programming Guide's "Technical
# Specifications per Compute Capability" give 227 KB per block (of 228 KB per SM) for compute
# capabilities 9.0, 10.x and 11.0, and 99 KB (of 100 KB) for 12.x. sm_101 is not here: CUDA 13
# renamed it sm_110, and its compilers refuse it.
_KB = 1024
TARGETS = {
    "sm_90": 227 * _KB,
    "sm_90a": 227 * _KB,
    "sm_100": 227 * _KB,
    "sm_100a": 227 * _KB,
    "sm_100f": 227 * _KB,
    "sm_103": 227 * _KB,
    "sm_103a": 227 * _KB,
    "sm_103f": 227 * _KB,
    "sm_107a": 227 * _KB,
    "sm_107f": 227 * _KB,
    "sm_110": 227 * _KB,
    "sm_110a": 227 * _KB,
    "sm_110f": 227 * _KB,
    "sm_120": 99 * _KB,
    "sm_120a": 99 * _KB,
    "sm_120f": 99 * _KB,
    "sm_121": 99 * _KB,
    "sm_121a": 99 * _KB,
    "sm_121f": 99 * _KB,
}
SUPPORTED_TARGETS = tuple(TARGETS)

# Launch shapes every supported target accepts (CUDA C++ Programming Guide, technical
# specifications: compute capability 9.0 and newer): threads and extents of a block, extents of a
# grid, and the CTAs of a cluster without the non-portable opt-in (which jittile does not request).
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_CLUSTER_CTAS = 8

# Architecture-specific feature sets: which targets accept instructions that the PTX ISA restricts to
# a family. Generic (no suffix) requirements accept any target of at least that capability.
_FAMILY = {
    "sm_90a": {"sm_90a"},
    "sm_100a": {"sm_100a", "sm_100f", "sm_103a", "sm_110a"},
}


def satisfies(target: str | Target, requirement: str) -> bool:
    """Whether ``target`` can assemble an instruction that needs ``requirement``."""
    target = Target.from_name(target)
    req = Target.from_name(requirement)
    if not req.suffix:
        return target.capability >= req.capability
    return target.name in _FAMILY.get(req.name, {req.name})


DEFAULT_TARGET = Target(9, 0, "a")  # compiling and interpreting without a GPU


def device_target(capability: tuple[int, int] | None) -> Target:
    """The ``a`` target of a device of compute ``capability``; ``sm_90a`` when there is no device.
    A device jittile does not compile for (an Ampere GPU) raises :class:`JittileError`."""
    if capability is None:
        return DEFAULT_TARGET
    major, minor = capability
    if major == 9:
        return DEFAULT_TARGET
    return Target.parse(f"sm_{major}{minor}a")
