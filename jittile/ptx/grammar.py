"""Opcode spelling: splitting PTX opcodes into qualifier words and matching them against a grammar.

PTX opcodes are dot-separated words whose sub-qualifiers use ``::`` (``shared::cta``,
``mbarrier::complete_tx::bytes``); a word never contains a dot, so splitting on dots keeps every
``::`` part inside its word. (Kernels may also spell an opcode as Python attributes, which
``jittile.language.markers.opcode_from_attributes`` turns into this PTX spelling.)

:func:`match_slots` checks words against an ordered list of qualifier slots, the form in which the
PTX ISA writes its syntax (``.dim.dst.src{.load_mode}.completion_mechanism{.multicast}...``), so
that every opcode family reports unknown, missing and misordered qualifiers the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from ..errors import ContractError, Location


def split_opcode(text: str, location: Location | None = None) -> list[str]:
    """Split ``text`` into its qualifier words (``shared::cta`` stays one word).

    Raises :class:`ContractError` for an empty opcode or an empty word (``a..b``, a leading or
    trailing dot), since those can only be typos.
    """
    stripped = text.strip()
    if not stripped:
        raise ContractError("the opcode is empty", location, opcode=text, parameter="opcode")
    words = stripped.split(".")
    if any(not word or word != word.strip() for word in words):
        raise ContractError(
            f"{stripped!r} has an empty or blank qualifier between dots",
            location,
            opcode=text,
            parameter="opcode",
        )
    return words


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, or None when nothing is plausibly meant."""
    matches = difflib.get_close_matches(word, list(dict.fromkeys(candidates)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str], prefix: str = ".") -> str:
    """`` (did you mean '.x'?)`` for the closest candidate, or an empty string."""
    match = suggest(word, candidates)
    return f" (did you mean '{prefix}{match}'?)" if match else ""


@dataclass(frozen=True)
class Slot:
    """One position of an opcode grammar: a named set of alternative qualifier words."""

    name: str
    choices: tuple[str, ...]
    required: bool = True

    def spelling(self) -> str:
        """The slot as the PTX ISA writes it: ``.name`` or ``{.name}``."""
        return f".{self.name}" if self.required else f"{{.{self.name}}}"

    def describe(self) -> str:
        if len(self.choices) == 1:
            return f".{self.name} ('.{self.choices[0]}')"
        return f".{self.name} (one of {', '.join('.' + c for c in self.choices)})"


def syntax(head: str, slots: Sequence[Slot]) -> str:
    """The grammar rule, e.g. ``cp.async.bulk.tensor.dim.dst.src{.load_mode}...``."""
    return head + "".join(slot.spelling() for slot in slots)


def match_slots(
    words: Sequence[str],
    slots: Sequence[Slot],
    *,
    head: str,
    opcode: str,
    location: Location | None = None,
) -> dict[str, str | None]:
    """Assign each word to the next slot that accepts it, in order.

    Returns ``{slot name: word or None}``. Raises :class:`ContractError` (parameter ``opcode``)
    naming the first word that is unknown, repeated or out of order, or the first required slot
    left empty, together with the grammar rule and a suggestion.
    """
    rule = syntax(head, slots)
    found: dict[str, str | None] = {slot.name: None for slot in slots}
    position = 0
    previous: str | None = None
    for word in words:
        index = next((i for i in range(position, len(slots)) if word in slots[i].choices), None)
        if index is None:
            _reject_unplaced(word, previous, slots, position, found, rule, opcode, location)
        missing = next((s for s in slots[position:index] if s.required), None)
        if missing is not None:
            raise ContractError(
                f"missing {missing.describe()} before '.{word}'; the rule is {rule}",
                location,
                opcode=opcode,
                parameter="opcode",
            )
        found[slots[index].name] = word
        position = index + 1
        previous = word
    missing = next((s for s in slots[position:] if s.required), None)
    if missing is not None:
        after = f" after '.{previous}'" if previous else ""
        raise ContractError(
            f"missing {missing.describe()}{after}; the rule is {rule}",
            location,
            opcode=opcode,
            parameter="opcode",
        )
    return found


def _reject_unplaced(
    word: str,
    previous: str | None,
    slots: Sequence[Slot],
    position: int,
    found: dict[str, str | None],
    rule: str,
    opcode: str,
    location: Location | None,
) -> NoReturn:
    """Raise the error for a word that no remaining slot accepts: repeated, misordered or
    unknown."""
    earlier = next((s for s in slots[:position] if word in s.choices), None)
    where = f" after '.{previous}'" if previous else ""
    if earlier is not None:
        if found[earlier.name] == word:
            reason = f"'.{word}' appears twice"
        elif found[earlier.name] is not None:
            reason = (
                f"'.{word}' conflicts with '.{found[earlier.name]}': only one "
                f".{earlier.name} qualifier is allowed"
            )
        else:
            reason = (
                f"'.{word}' (.{earlier.name}) is out of order: it must come before '.{previous}'"
            )
        raise ContractError(
            f"{reason}; the rule is {rule}", location, opcode=opcode, parameter="opcode"
        )
    expected = _expected_here(slots, position)
    upcoming = [c for s in expected for c in s.choices] or [c for s in slots for c in s.choices]
    allowed = " or ".join(s.describe() for s in expected) or "no further qualifier"
    raise ContractError(
        f"unknown qualifier '.{word}'{where}{did_you_mean(word, upcoming)}; expected {allowed}; "
        f"the rule is {rule}",
        location,
        opcode=opcode,
        parameter="opcode",
    )


def _expected_here(slots: Sequence[Slot], position: int) -> list[Slot]:
    """The slots a word at ``position`` may fill: optional ones up to the next required one."""
    expected: list[Slot] = []
    for slot in slots[position:]:
        expected.append(slot)
        if slot.required:
            break
    return expected
