"""The one place opcode families are registered: adding a family is one module plus one line here."""
from __future__ import annotations

import importlib

from .base import TilePattern

# Module names under jittile.patterns, each exposing PATTERN (a TilePattern).
FAMILIES = ("tma", "tmem_copy")


def _patterns() -> list[TilePattern]:
    found = []
    for module in FAMILIES:
        found.append(importlib.import_module(f"{__package__}.{module}").PATTERN)
    return found


def pattern_for(opcode: str) -> TilePattern | None:
    """The family that claims ``opcode`` (by its leading words), or None."""
    for pattern in _patterns():
        if pattern.claims(opcode):
            return pattern
    return None


def family_names() -> list[str]:
    return [p.family for p in _patterns()]
