"""What ``help(T.ptx[opcode])`` shows for a tile opcode. Here, below the language, so that
``T.ptx``'s docstring can ask for it without importing the reference generator
(jittile/docs.py), which imports the language."""

from __future__ import annotations

from . import registry


def opcode_help(opcode: str) -> str | None:
    """What ``help(T.ptx[opcode])`` shows for a tile opcode (its family's
    :meth:`~jittile.patterns.base.TilePattern.help_text`); None for an opcode no family claims
    (a raw instruction)."""
    pattern = registry.pattern_for(opcode)
    return None if pattern is None else pattern.help_text(opcode)
