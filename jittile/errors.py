"""The exceptions and warnings users see.

Every error raised while compiling a kernel names the source position of the offending call first, so
that editors and terminals can jump to it (``path:line:col: message``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in a kernel's source file (1-based line, 0-based column, like ``ast``)."""

    filename: str
    lineno: int
    col_offset: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col_offset}"


class JittileError(Exception):
    """Base class of every error jittile raises on purpose."""

    def __init__(self, message: str, location: Location | None = None):
        self.message = message
        self.location = location
        self.filename = location.filename if location else None
        self.lineno = location.lineno if location else None
        self.col_offset = location.col_offset if location else None
        super().__init__(f"{location}: {message}" if location else message)


class CompileError(JittileError):
    """The kernel body uses something jittile cannot compile (unsupported syntax, unknown name...)."""


class ContractError(CompileError):
    """A tile call or PTX instruction breaks its opcode's contract; raised before any GPU work."""

    def __init__(self, message: str, location: Location | None = None, *, opcode: str | None = None,
                 parameter: str | None = None):
        self.opcode = opcode
        self.parameter = parameter
        prefix = []
        if opcode:
            prefix.append(f"opcode {opcode!r}")
        if parameter:
            prefix.append(f"parameter {parameter!r}")
        full = f"{', '.join(prefix)}: {message}" if prefix else message
        super().__init__(full, location)
        self.rule = message


class LaunchError(JittileError):
    """Arguments that cannot be launched; raised before the launch, leaving the context usable."""


class InterpreterError(JittileError):
    """The interpreter saw what the GPU would fault or hang on, or a race it can see: names the
    kernel's source line, the CTA and thread, and the values."""


class ToolchainError(JittileError):
    """A CUDA compiler piece (NVVM, nvJitLink, nvdisasm...) is missing or failed."""


class JittileWarning(UserWarning):
    """Legal but almost certainly wrong, e.g. an expect_tx count that differs from the loads' bytes."""
