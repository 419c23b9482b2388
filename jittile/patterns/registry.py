"""The one place opcode families are registered: adding a family is one module plus one line here.

Each entry names the module under ``jittile.patterns`` (exposing ``PATTERN``) and the opcode
prefixes it handles, so that compiling a kernel imports only the families it uses.
"""
from __future__ import annotations

import importlib

from .base import TilePattern

FAMILIES = {
    "tma": ("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor"),
    "tmem_copy": ("tcgen05.cp",),
}


def pattern_for(opcode: str) -> TilePattern | None:
    """The family that claims ``opcode``, or None."""
    for module, prefixes in FAMILIES.items():
        if opcode.startswith(prefixes):
            pattern = importlib.import_module(f"{__package__}.{module}").PATTERN
            if pattern.claims(opcode):
                return pattern
    return None


def family_names() -> list[str]:
    """The opcode prefixes tile calls accept, for error messages."""
    return [prefix for prefixes in FAMILIES.values() for prefix in prefixes]
