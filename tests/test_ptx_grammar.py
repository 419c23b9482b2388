"""Opcode splitting, the attribute spelling of opcodes, suggestions and the qualifier-slot
matcher."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jittile.errors import ContractError, Location
from jittile.language.markers import opcode_from_attributes
from jittile.ptx.grammar import Slot, match_slots, split_opcode, suggest, syntax


def test_split_opcode_keeps_sub_qualifiers_inside_words() -> None:
    assert split_opcode("cp.async.bulk.tensor.2d.shared::cta.global") == [
        "cp",
        "async",
        "bulk",
        "tensor",
        "2d",
        "shared::cta",
        "global",
    ]
    assert split_opcode("tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64")[3] == (
        "mbarrier::arrive::one"
    )
    assert split_opcode("  fence.proxy.async ") == ["fence", "proxy", "async"]


@pytest.mark.parametrize(
    "text", ["", "   ", "fence..proxy", ".fence.proxy", "fence.proxy.", "fence. proxy"]
)
def test_split_opcode_rejects_empty_words(text: str) -> None:
    with pytest.raises(ContractError) as info:
        split_opcode(text)
    assert info.value.parameter == "opcode"


word = st.from_regex(r"[a-z0-9][a-z0-9_]{0,6}(::[a-z0-9_]{1,6}){0,2}", fullmatch=True)


@given(st.lists(word, min_size=1, max_size=8))
def test_split_opcode_inverts_joining(words: list[str]) -> None:
    assert split_opcode(".".join(words)) == words


@pytest.mark.parametrize(
    "parts, opcode",
    [
        (["fence", "proxy", "async_", "shared__cta"], "fence.proxy.async.shared::cta"),
        (["tcgen05", "fence__after_thread_sync"], "tcgen05.fence::after_thread_sync"),
        (["tcgen05", "wait__ld", "sync", "aligned"], "tcgen05.wait::ld.sync.aligned"),
        (["mbarrier", "init", "shared", "b64"], "mbarrier.init.shared.b64"),
        (["cp", "async_", "bulk", "commit_group"], "cp.async.bulk.commit_group"),
        (
            [
                "tcgen05",
                "commit",
                "cta_group__1",
                "mbarrier__arrive__one",
                "shared__cluster",
                "b64",
            ],
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
        ),
        (
            ["tcgen05", "relinquish_alloc_permit", "cta_group__2", "sync", "aligned"],
            "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned",
        ),
    ],
)
def test_opcode_from_attributes(parts: list[str], opcode: str) -> None:
    assert opcode_from_attributes(parts) == opcode


attribute_word = st.from_regex(
    r"[a-z][a-z0-9]{0,5}(_[a-z0-9]{1,5}){0,2}(::[a-z0-9]{1,5}){0,2}", fullmatch=True
)


@given(st.lists(attribute_word, min_size=1, max_size=6), st.data())
def test_attribute_spelling_round_trips(words: list[str], data: st.DataObject) -> None:
    """Any PTX word spelled as an attribute (``::`` as ``__``, optionally a keyword-dodging
    trailing ``_``) reads back as the same word."""
    parts = [w.replace("::", "__") + ("_" if data.draw(st.booleans()) else "") for w in words]
    assert opcode_from_attributes(parts) == ".".join(words)


def test_opcode_from_attributes_needs_a_word() -> None:
    with pytest.raises(ContractError):
        opcode_from_attributes([])


def test_suggest() -> None:
    assert suggest("tiel", ["tile", "tile::gather4", "im2col"]) == "tile"
    assert suggest("shared::cat", ["shared::cta", "shared::cluster"]) == "shared::cta"
    assert suggest("zzzz", ["tile", "global"]) is None
    assert suggest("x", []) is None


SLOTS = (
    Slot("dim", ("1d", "2d")),
    Slot("dst", ("shared::cta", "shared::cluster")),
    Slot("mode", ("tile", "tile::gather4"), required=False),
    Slot("completion", ("mbarrier::complete_tx::bytes",)),
    Slot("hint", ("L2::cache_hint",), required=False),
)


def match(text: str) -> dict[str, str | None]:
    return match_slots(text.split("."), SLOTS, head="op", opcode=f"op.{text}")


def test_syntax_writes_the_rule_like_the_isa() -> None:
    assert syntax("op", SLOTS) == "op.dim.dst{.mode}.completion{.hint}"


def test_match_slots_fills_slots_in_order() -> None:
    assert match("2d.shared::cta.mbarrier::complete_tx::bytes") == {
        "dim": "2d",
        "dst": "shared::cta",
        "mode": None,
        "completion": "mbarrier::complete_tx::bytes",
        "hint": None,
    }
    full = match("1d.shared::cluster.tile::gather4.mbarrier::complete_tx::bytes.L2::cache_hint")
    assert full["mode"] == "tile::gather4" and full["hint"] == "L2::cache_hint"


@pytest.mark.parametrize(
    "text, fragments",
    [
        (
            "2d.shared::cta.tiel.mbarrier::complete_tx::bytes",
            [
                "unknown qualifier '.tiel'",
                "after '.shared::cta'",
                "did you mean '.tile'?",
                "the rule is op.dim.dst{.mode}.completion{.hint}",
            ],
        ),
        (
            "2d.shared::cta.mbarrier::complete_tx::bytes.tile",
            ["'.tile' (.mode) is out of order", "must come before '.mbarrier::complete_tx::bytes'"],
        ),
        ("2d.shared::cta.tile.tile.mbarrier::complete_tx::bytes", ["'.tile' appears twice"]),
        (
            "2d.shared::cta.tile.tile::gather4.mbarrier::complete_tx::bytes",
            ["'.tile::gather4' conflicts with '.tile'", "only one .mode"],
        ),
        (
            "2d.tile.mbarrier::complete_tx::bytes",
            ["missing .dst (one of .shared::cta, .shared::cluster) before '.tile'"],
        ),
        (
            "2d.shared::cta.tile",
            ["missing .completion ('.mbarrier::complete_tx::bytes')", "after '.tile'"],
        ),
        (
            "2d.mbarrier::complete_tx::bytes",
            ["missing .dst", "before '.mbarrier::complete_tx::bytes'"],
        ),
        (
            "2d.shared::cta.mbarrier::complete_tx::bytes.L2::cache_hint.extra",
            ["unknown qualifier '.extra'", "expected no further qualifier"],
        ),
    ],
)
def test_match_slots_rejects(text: str, fragments: list[str]) -> None:
    with pytest.raises(ContractError) as info:
        match(text)
    assert info.value.parameter == "opcode" and info.value.opcode == f"op.{text}"
    for fragment in fragments:
        assert fragment in str(info.value)


def test_match_slots_reports_the_location() -> None:
    with pytest.raises(ContractError) as info:
        match_slots(["3d"], SLOTS, head="op", opcode="op.3d", location=Location("k.py", 4, 2))
    assert str(info.value).startswith("k.py:4:2: opcode 'op.3d', parameter 'opcode':")
    assert info.value.lineno == 4


@given(
    st.lists(
        st.sampled_from(
            [
                "1d",
                "2d",
                "shared::cta",
                "shared::cluster",
                "tile",
                "tile::gather4",
                "mbarrier::complete_tx::bytes",
                "L2::cache_hint",
                "bogus",
            ]
        ),
        max_size=6,
    )
)
def test_match_slots_accepts_exactly_the_canonical_sequences(words: list[str]) -> None:
    """Either the words fill the slots in order (then each slot holds a word it allows), or a
    ContractError is raised; never anything else."""
    try:
        found = match_slots(words, SLOTS, head="op", opcode="op")
    except ContractError:
        return
    assert [w for w in found.values() if w is not None] == words
    for slot in SLOTS:
        assert found[slot.name] is None and not slot.required or found[slot.name] in slot.choices
