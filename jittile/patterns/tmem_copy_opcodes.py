"""The ``tcgen05.cp`` opcode parsed once into :class:`Tcgen05CpOpcode`, for the tensor-memory copy
family (:mod:`.tmem_copy`) and its interpreter model: ``tcgen05.cp.cta_group.shape{.multicast}
{.dst_fmt.src_fmt}`` in the PTX ISA's qualifier order."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import ContractError, Location
from ..ptx.grammar import Slot, did_you_mean, match_slots, split_opcode
from ..ptx.opcodes import check_target
from ..targets import Target

_TCGEN05_CP_HEAD = "tcgen05.cp"
_TCGEN05_CP_SLOTS = (
    Slot("cta_group", ("cta_group::1", "cta_group::2")),
    Slot("shape", ("128x256b", "4x256b", "128x128b", "64x128b", "32x128b")),
    Slot("multicast", ("warpx2::02_13", "warpx2::01_23", "warpx4"), required=False),
    Slot("dst_fmt", ("b8x16",), required=False),
    Slot("src_fmt", ("b6x16_p32", "b4x16_p64"), required=False),
)
# Which multicast qualifiers each shape takes (PTX ISA, tcgen05.cp Syntax: ** and *** marks).
_TCGEN05_CP_MULTICAST = {
    "128x256b": (None,),
    "4x256b": (None,),
    "128x128b": (None,),
    "64x128b": ("warpx2::02_13", "warpx2::01_23"),
    "32x128b": ("warpx4",),
}


@dataclass(frozen=True)
class Tcgen05CpOpcode:
    """A parsed ``tcgen05.cp`` opcode: one shared-memory -> tensor-memory copy of (rows, words)."""

    text: str
    cta_group: int
    shape: str
    rows: int
    bits: int
    multicast: str | None
    decompress: str | None  # 'b4x16_p64' | 'b6x16_p32' | None
    native_text: str

    @property
    def words(self) -> int:
        """32-bit TMEM columns per row."""
        return self.bits // 32

    @property
    def requirements(self) -> tuple[tuple[int, int], list[str]]:
        """PTX ISA 8.6 and the sm_100a family (tcgen05.cp Target ISA notes)."""
        return (8, 6), ["sm_100a"]

    def check_target(self, target: str | Target, location: Location | None = None) -> None:
        check_target(self.requirements[1], target, self.native_text, location)


@functools.cache
def parse_tcgen05_cp(text: str, location: Location | None = None) -> Tcgen05CpOpcode:
    """Parse ``tcgen05.cp.cta_group.shape{.multicast}{.dst_fmt.src_fmt}``."""
    words = split_opcode(text, location)
    native = ".".join(words)

    def fail(message: str) -> ContractError:
        return ContractError(message, location, opcode=text, parameter="opcode")

    if words[:2] != _TCGEN05_CP_HEAD.split("."):
        given = ".".join(words[:2])
        raise fail(
            f"{given!r} is not a tcgen05.cp opcode: expected {_TCGEN05_CP_HEAD}.*"
            f"{did_you_mean(given, (_TCGEN05_CP_HEAD,), prefix='')}"
        )
    found = match_slots(
        words[2:], _TCGEN05_CP_SLOTS, head=_TCGEN05_CP_HEAD, opcode=text, location=location
    )
    shape, multicast = found["shape"], found["multicast"]
    allowed = _TCGEN05_CP_MULTICAST[shape]
    if multicast not in allowed:
        if allowed == (None,):
            owner = next(s for s, m in _TCGEN05_CP_MULTICAST.items() if multicast in m)
            raise fail(
                f"'.{shape}' takes no multicast qualifier; '.{multicast}' belongs to '.{owner}'"
            )
        spelled = " or ".join(f"'.{m}'" for m in allowed)
        raise fail(
            f"'.{shape}' needs the multicast qualifier {spelled} right after it "
            f"(e.g. '{native.replace(shape, f'{shape}.{allowed[0]}', 1)}')"
        )
    if (found["dst_fmt"] is None) != (found["src_fmt"] is None):
        raise fail(
            "decompression is spelled with both formats: '.b8x16.b4x16_p64' or '.b8x16.b6x16_p32'"
        )
    rows, bits = shape[:-1].split("x")
    cta_group = found["cta_group"]
    return Tcgen05CpOpcode(
        text=text,
        cta_group=int(cta_group.rsplit("::", 1)[1]),
        shape=shape,
        rows=int(rows),
        bits=int(bits),
        multicast=multicast,
        decompress=found["src_fmt"],
        native_text=native,
    )
