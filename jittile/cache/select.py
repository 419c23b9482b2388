"""Which cache entries a command names: ``KERNEL`` (a function name or qualified name) or
``FILE.py:KERNEL`` (that kernel of that file), and the kernels they belong to.

A kernel is its defining file and qualified name, not its name alone: two files' ``tile_copy``
kernels are two kernels, whose entries ``jittile cache why`` never compares with each other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .store import Entry


@dataclass(frozen=True)
class KernelId:
    """One kernel: its qualified name and the file it is defined in (None where unrecorded)."""

    qualname: str
    source_file: str | None

    def __str__(self) -> str:
        return f"{self.source_file}:{self.qualname}" if self.source_file else self.qualname


def kernel_of(metadata: dict) -> KernelId:
    where = metadata.get("source_file")
    return KernelId(
        str(metadata.get("qualname", metadata.get("name"))),
        where if isinstance(where, str) else None,
    )


def _same_file(recorded: str | None, given: str) -> bool:
    """``given`` (as typed: relative, absolute, or a trailing part of the path) names the
    recorded file."""
    if recorded is None:
        return False
    recorded, absolute = os.path.normpath(recorded), os.path.abspath(given)
    return recorded == absolute or recorded.endswith(os.sep + os.path.normpath(given))


def selects(selector: str, metadata: dict) -> bool:
    """Whether ``selector`` (``KERNEL`` or ``FILE.py:KERNEL``) names the entry of ``metadata``."""
    filename, colon, name = selector.rpartition(":")
    if not colon or not filename.endswith(".py"):
        filename, name = "", selector
    names = (metadata.get("name"), metadata.get("qualname"))
    return name in names and (not filename or _same_file(kernel_of(metadata).source_file, filename))


def selected(entries: list[Entry], selector: str | None) -> list[Entry]:
    """The entries ``selector`` names (all of them for None), in their order."""
    return [e for e in entries if selector is None or selects(selector, e.metadata)]


def by_kernel(entries: list[Entry]) -> dict[KernelId, list[Entry]]:
    """The entries grouped by kernel, each group in the entries' order."""
    groups: dict[KernelId, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(kernel_of(entry.metadata), []).append(entry)
    return groups
