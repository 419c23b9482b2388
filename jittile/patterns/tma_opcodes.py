"""The TMA opcodes (``cp.async.bulk.tensor``, ``cp.reduce.async.bulk.tensor``) parsed once into
:class:`BulkTensorOpcode`, for the TMA family (:mod:`.tma`) and its interpreter model.

A tile call names its native instruction in full (``T.ptx["cp.async.bulk.tensor.2d..."]``); the
pattern needs that opcode as structured fields (direction, rank, mode, multicast...) to check
operands and to plan one instruction per box. The grammars follow the Syntax blocks of the PTX ISA
(9.5), minus the im2col modes and the sm_107 override/report qualifiers:

- loads: ``cp.async.bulk.tensor.dim.dst.src{.load_mode}.completion_mechanism{.multicast}
  {.cta_group}{.level::cache_hint}``;
- stores: ``cp.async.bulk.tensor.dim.dst.src{.load_mode}.completion_mechanism
  {.level::cache_hint}``;
- reductions: ``cp.reduce.async.bulk.tensor.dim.dst.src.redOp{.load_mode}.completion_mechanism
  {.level::cache_hint}``.

ptxas accepts these qualifiers in any order; jittile insists on the ISA's order so that one opcode
has one spelling (and one cache key), and says which order it wants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ..dtypes import REDUCTIONS
from ..errors import ContractError, Location
from ..ptx.grammar import Slot, did_you_mean, match_slots, split_opcode
from ..ptx.opcodes import MULTICAST_ADVISED_TARGETS, check_target
from ..targets import Target

_TMA_HEAD = "cp.async.bulk.tensor"
_REDUCE_HEAD = "cp.reduce.async.bulk.tensor"
_MBARRIER_COMPLETION = "mbarrier::complete_tx::bytes"
_BULK_GROUP = "bulk_group"
_REDUCE_OPS = tuple(REDUCTIONS)

_DIM = Slot("dim", ("1d", "2d", "3d", "4d", "5d"))
_CACHE_HINT = Slot("level::cache_hint", ("L2::cache_hint",), required=False)
_LOAD_SLOTS = (
    _DIM,
    Slot("dst", ("shared::cta", "shared::cluster")),
    Slot("src", ("global",)),
    Slot("load_mode", ("tile", "tile::gather4"), required=False),
    Slot("completion_mechanism", (_MBARRIER_COMPLETION,)),
    Slot(
        "multicast",
        ("multicast::cluster", "multicast::cluster::16b", "multicast::cluster::32b"),
        required=False,
    ),
    Slot("cta_group", ("cta_group::1", "cta_group::2"), required=False),
    _CACHE_HINT,
)
_STORE_SLOTS = (
    _DIM,
    Slot("dst", ("global",)),
    Slot("src", ("shared::cta",)),
    Slot("load_mode", ("tile", "tile::scatter4"), required=False),
    Slot("completion_mechanism", (_BULK_GROUP,)),
    _CACHE_HINT,
)
_REDUCE_SLOTS = (
    _DIM,
    Slot("dst", ("global",)),
    Slot("src", ("shared::cta",)),
    Slot("redOp", _REDUCE_OPS),
    Slot("load_mode", ("tile",), required=False),
    Slot("completion_mechanism", (_BULK_GROUP,)),
    _CACHE_HINT,
)


@dataclass(frozen=True)
class BulkTensorOpcode:
    """A parsed TMA tile opcode: a load, store or reduction between a TensorMap and shared
    memory."""

    text: str
    kind: str  # 'load' | 'store' | 'reduce'
    rank: int
    dst_space: str
    src_space: str
    mode: str  # 'tile' | 'tile::gather4' | 'tile::scatter4'
    redop: str | None
    completion: str  # 'mbarrier::complete_tx::bytes' | 'bulk_group'
    multicast: bool
    multicast_bits: int | None  # width of the ctaMask operand: 16, 32, or None without multicast
    cta_group: int | None
    cache_hint: bool
    native_text: str

    @property
    def requirements(self) -> tuple[tuple[int, int], list[str]]:
        """``(min PTX ISA version, target alternatives)``; a target must satisfy one of them.

        From the PTX ISA notes of cp.async.bulk.tensor / cp.reduce.async.bulk.tensor: sm_90 and
        PTX 8.0 for the base forms; PTX 8.6 for a ``.shared::cta`` destination, gather4/scatter4
        and ``.cta_group``; PTX 9.4 for ``.multicast::cluster::16b/::32b``. gather4 into
        ``.shared::cta`` needs sm_100 or higher, into ``.shared::cluster`` the sm_100a family, as
        do scatter4 and ``.cta_group``; a 32-bit ctaMask needs the sm_107f family.
        """
        ptx = (8, 0)
        if (
            (self.kind == "load" and self.dst_space == "shared::cta")
            or self.mode != "tile"
            or self.cta_group is not None
        ):
            ptx = (8, 6)
        if any(w.startswith("multicast::cluster::") for w in self.native_text.split(".")):
            ptx = (9, 4)
        if self.multicast_bits == 32:
            targets = ["sm_107a", "sm_107f"]
        elif (
            self.cta_group is not None
            or self.mode == "tile::scatter4"
            or (self.mode == "tile::gather4" and self.dst_space == "shared::cluster")
        ):
            targets = ["sm_100a"]
        elif self.mode == "tile::gather4":
            targets = ["sm_100"]
        else:
            targets = ["sm_90"]
        return ptx, targets

    @property
    def advised_targets(self) -> tuple[str, ...]:
        """Targets on which the ISA advises this opcode for performance; empty when any legal
        target is fine. Multicast is legal from sm_90 but "may have substantially reduced
        performance" off sm_90a and the sm_100a/sm_100f families."""
        return MULTICAST_ADVISED_TARGETS if self.multicast else ()

    def check_target(self, target: str | Target, location: Location | None = None) -> None:
        check_target(self.requirements[1], target, self.native_text, location)


@functools.cache
def parse_bulk_tensor(text: str, location: Location | None = None) -> BulkTensorOpcode:
    """Parse a ``cp.async.bulk.tensor`` / ``cp.reduce.async.bulk.tensor`` tile opcode."""
    words = split_opcode(text, location)
    native = ".".join(words)

    def fail(message: str) -> ContractError:
        return ContractError(message, location, opcode=text, parameter="opcode")

    im2col = next((w for w in words if w.startswith("im2col")), None)
    if im2col is not None:
        raise fail(
            f"'.{im2col}': im2col modes are not supported by the tile pattern; use "
            f".tile (or omit the load mode) with a tiled TensorMap"
        )
    if words[:5] == _REDUCE_HEAD.split("."):
        kind, head, slots, rest = "reduce", _REDUCE_HEAD, _REDUCE_SLOTS, words[5:]
    elif words[:4] == _TMA_HEAD.split("."):
        rest = words[4:]
        store = len(rest) > 1 and rest[1] == "global"
        kind, head, slots = (
            ("store", _TMA_HEAD, _STORE_SLOTS) if store else ("load", _TMA_HEAD, _LOAD_SLOTS)
        )
    else:
        given = ".".join(words[:5] if words[:2] == ["cp", "reduce"] else words[:4])
        raise fail(
            f"{given!r} is not a TMA tile opcode: expected {_TMA_HEAD}.* or "
            f"{_REDUCE_HEAD}.*{did_you_mean(given, (_TMA_HEAD, _REDUCE_HEAD), prefix='')}"
        )
    _check_completion_direction(kind, rest, fail)
    found = match_slots(rest, slots, head=head, opcode=text, location=location)

    rank = int(found["dim"][0])
    mode = found["load_mode"] or "tile"
    multicast_word = found.get("multicast")
    if multicast_word and found["dst"] != "shared::cluster":
        fixed = native.replace(f".{found['dst']}.", ".shared::cluster.", 1)
        raise fail(
            f"'.{multicast_word}' needs the .shared::cluster destination: the PTX ISA "
            f"defines multicast only for global -> shared::cluster "
            f"(did you mean '{fixed}'?)"
        )
    if mode != "tile" and rank != 2:
        fixed = native.replace(f".{found['dim']}.", ".2d.", 1)
        raise fail(
            f"'.{mode}' needs rank 2 (a 2d TensorMap; four rows of box[1] elements), got "
            f"'.{found['dim']}' (did you mean '{fixed}'?)"
        )
    cta_group = found.get("cta_group")
    return BulkTensorOpcode(
        text=text,
        kind=kind,
        rank=rank,
        dst_space=found["dst"],
        src_space=found["src"],
        mode=mode,
        redop=found.get("redOp"),
        completion=found["completion_mechanism"],
        multicast=multicast_word is not None,
        multicast_bits=(32 if multicast_word.endswith("::32b") else 16) if multicast_word else None,
        cta_group=int(cta_group.rsplit("::", 1)[1]) if cta_group else None,
        cache_hint=found["level::cache_hint"] is not None,
        native_text=native,
    )


def _check_completion_direction(
    kind: str, rest: list[str], fail: Callable[[str], ContractError]
) -> None:
    """Name the direction rule when a load uses a store's completion or the other way round, which
    the slot matcher would only report as an unknown qualifier."""
    if kind == "load" and _BULK_GROUP in rest:
        raise fail(
            "'.bulk_group' completes stores and reductions (spelled "
            "...global.shared::cta...); a load into shared memory completes on an "
            f"mbarrier: use '.{_MBARRIER_COMPLETION}'"
        )
    if kind != "load" and _MBARRIER_COMPLETION in rest:
        raise fail(
            f"'.{_MBARRIER_COMPLETION}' completes loads (spelled ...shared::cta.global... "
            f"or ...shared::cluster.global...); a {kind} from shared memory to global "
            f"completes with '.{_BULK_GROUP}'"
        )
