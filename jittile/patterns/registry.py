"""The one place opcode families are registered: adding a family is one module plus one line here.

Everything else is derived from the modules' declarations (:class:`~.base.TilePattern`): which
opcodes a family claims (the longest declared prefix that matches whole qualifiers wins, so
``cp.async.bulk`` and ``cp.async.bulk.tensor`` coexist), and through :func:`pattern_for` which
raw-PTX opcodes are tile-pattern opcodes instead; the raw instructions families bring along
(:func:`companions`); the completion mechanisms (:func:`completions`); what restoring a recorded
plan needs (:func:`plan_schema`); the interpreter's dispatch and the generated reference. Modules
load on the first lookup, not at ``import jittile``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..ir import PlanSchema

if TYPE_CHECKING:
    from .base import Companion, Completion, TilePattern

# Family name -> its module: one line per family. The name lets a cache hit restore a site's plan
# by loading that family's module alone (registration checks that the module declares it).
FAMILY_MODULES = {
    "cp.async.bulk.tensor": "tma",
    "tcgen05.cp": "tmem_copy",
    "cp.async.bulk": "bulk_copy",
    "wgmma.mma_async": "wgmma",
}

_loaded: dict[str, TilePattern] = {}


def family(name: str) -> TilePattern:
    """The registered family called ``name`` (a plan site's ``family``), loading its module
    alone; KeyError otherwise."""
    pattern = _loaded.get(name)
    if pattern is None:
        from .base import check_declarations  # not at import: a cache hit needs only the names

        pattern = importlib.import_module(f"{__package__}.{FAMILY_MODULES[name]}").PATTERN
        if pattern.family != name:
            raise ValueError(
                f"module {FAMILY_MODULES[name]!r} declares family "
                f"{pattern.family!r}, registered as {name!r}"
            )
        check_declarations(pattern)
        _loaded[name] = pattern
    return pattern


def patterns() -> list[TilePattern]:
    """Every registered family's pattern, in registration order."""
    return [family(name) for name in FAMILY_MODULES]


def _matches(opcode: str, prefix: str) -> bool:
    return opcode == prefix or opcode.startswith(prefix + ".")


def pattern_for(opcode: str) -> TilePattern | None:
    """The family that claims ``opcode``, or None. Candidates are tried longest prefix first."""
    text = opcode.strip()
    candidates = sorted(
        (
            (len(prefix), pattern)
            for pattern in patterns()
            for prefix in pattern.prefixes
            if _matches(text, prefix)
        ),
        key=lambda item: -item[0],
    )
    for _, pattern in candidates:
        if pattern.claims(text):
            return pattern
    return None


def closest_family(opcode: str) -> str | None:
    """The declared prefix nearest to ``opcode``'s leading words, for a did-you-mean."""
    import difflib

    words = opcode.strip().split(".")
    best, score = None, 0.0
    for prefix in family_names():
        head = ".".join(words[: prefix.count(".") + 1])
        ratio = difflib.SequenceMatcher(None, head, prefix).ratio()
        if ratio > score:
            best, score = prefix, ratio
    return best if score >= 0.75 else None


def family_names() -> list[str]:
    """The opcode prefixes tile calls accept, for error messages."""
    return [prefix for pattern in patterns() for prefix in pattern.prefixes]


def completions() -> dict[str, Completion]:
    """Every completion mechanism a family declares, by name, in registration order."""
    from .base import NO_COMPLETION

    found = {NO_COMPLETION.name: NO_COMPLETION}
    for pattern in patterns():
        for completion in pattern.completions.values():
            found.setdefault(completion.name, completion)
    return found


def companions() -> list[tuple[TilePattern, Companion]]:
    """Every family's raw instructions, with their family."""
    return [(pattern, companion) for pattern in patterns() for companion in pattern.companions]


def _plan_facts(name: str) -> tuple[type, frozenset[str]]:
    pattern = family(name)
    return pattern.fields_type, frozenset(c.name for c in pattern.completions.values())


def plan_schema() -> PlanSchema:
    """What :meth:`jittile.ir.KernelIR.restore` needs of a site's family: its plan fields and
    completions (a cache hit loads only the families its kernel uses)."""
    return PlanSchema(frozenset(FAMILY_MODULES), _plan_facts)
