"""cp.async.bulk / cp.reduce.async.bulk / cp.async.bulk.prefetch: the non-tensor bulk copies.

Sections follow the seed documents' order: call parameters, data representation, operand
specification, legality conditions, host setup, code generation. A bulk copy moves one contiguous
run of bytes between global and shared memory (or reduces it into global memory, or prefetches it
into L2) without a TensorMap: one native instruction per call, whose size is the region's bytes.
Like the TMA pattern it elects no thread and inserts no waits, fences or expected-transaction
counts.

Forms (PTX ISA, "cp.async.bulk", "cp.reduce.async.bulk", "cp.async.bulk.prefetch"):

- loads ``cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes{.L2::cache_hint}`` and
  ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{.multicast::cluster}
  {.L2::cache_hint}``: ``[dstMem], [srcMem], size, [mbar]{, ctaMask}{, cache-policy}``;
- the store ``cp.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}``;
- reductions ``cp.reduce.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}.redOp{.noftz}
  .type``;
- ``cp.async.bulk.prefetch.L2.global{.L2::cache_hint}``: ``[srcMem], size{, cache-policy}``.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

from ..dtypes import REDUCTIONS, reduced_dtypes
from ..errors import ContractError
from ..ir import (
    ArgumentAlignment,
    GlobalAddress,
    PlanFields,
    PlanRecord,
    SharedAddress,
    Var,
    add,
    mul,
)
from ..layout import byte_swizzle_mode
from ..ptx.asm import AsmCall, scoped
from ..ptx.grammar import Slot, match_slots, split_opcode
from ..ptx.opcodes import MULTICAST_ADVISED_TARGETS, check_target
from ..ptx.operands import OperandKind
from ..targets import satisfies
from .base import (
    MBARRIER,
    NO_COMPLETION,
    CallSite,
    Companion,
    Completion,
    GlobalRegion,
    Lowering,
    LoweringContext,
    OperandRole,
    Parameter,
    SharedRegion,
    TilePattern,
    runtime_index_step,
)

# ---------------------------------------------------------------------------- call parameters
PARAMETERS = (
    Parameter(
        "mbar",
        "runtime",
        "loads: the mbarrier (shared address, e.g. mbar.ptr_to([0])) "
        "whose transaction count the copy completes",
    ),
    Parameter("cta_mask", "runtime", ".multicast::cluster: the 16-bit mask of destination CTAs"),
    Parameter("cache_policy", "runtime", ".L2::cache_hint: the 64-bit cache policy (createpolicy)"),
    Parameter("pred", "runtime", "a runtime bool gating the copy (False: checked, nothing issued)"),
)

# ----------------------------------------------------------------------- data representation
GRANULE = 16  # sizes and both addresses are multiples of 16 bytes
MAX_BYTES = 2**32 - 16  # the size operand is a 32-bit register

# Reduction operator x .type with a global destination: the shared facts
# (:data:`jittile.dtypes.REDUCTIONS`), exactly what ptxas 13.5 accepts for sm_90a
# (tests/test_bulk_copy.py checks it against ptxas); .f16/.bf16 additions are spelled .add.noftz.
_TYPES = ("u32", "s32", "u64", "s64", "b32", "b64", "f16", "bf16", "f32", "f64")
_NOFTZ = ("f16", "bf16")


def _reduction_spellings() -> dict[str, tuple[str, ...]]:
    """redOp (``add.noftz`` for the 16-bit float additions) -> its .types, in ``_TYPES`` order."""
    out = {}
    for redop, defined in REDUCTIONS.items():
        types = [t for t in _TYPES if t in defined]
        out[redop] = tuple(t for t in types if not (redop == "add" and t in _NOFTZ))
        if redop == "add":
            out["add.noftz"] = tuple(t for t in types if t in _NOFTZ)
    return out


REDUCTION_TYPES = _reduction_spellings()
# The element types each .type reads; .bN is any integer of N bits.
TYPE_STORAGE = {t: tuple(d.name for d in reduced_dtypes(t)) for t in _TYPES}
_REDOPS = tuple(REDUCTIONS)

_HINT = Slot("level::cache_hint", ("L2::cache_hint",), required=False)
_MBARRIER = "mbarrier::complete_tx::bytes"
_GRAMMARS = {
    "load": (
        "cp.async.bulk",
        (
            Slot("dst", ("shared::cta", "shared::cluster")),
            Slot("src", ("global",)),
            Slot("completion_mechanism", (_MBARRIER,)),
            Slot("multicast", ("multicast::cluster",), required=False),
            _HINT,
        ),
    ),
    "store": (
        "cp.async.bulk",
        (
            Slot("dst", ("global",)),
            Slot("src", ("shared::cta",)),
            Slot("completion_mechanism", ("bulk_group",)),
            _HINT,
        ),
    ),
    "reduce": (
        "cp.reduce.async.bulk",
        (
            Slot("dst", ("global",)),
            Slot("src", ("shared::cta",)),
            Slot("completion_mechanism", ("bulk_group",)),
            _HINT,
            Slot("redOp", _REDOPS),
            Slot("noftz", ("noftz",), required=False),
            Slot("type", _TYPES),
        ),
    ),
    "prefetch": (
        "cp.async.bulk.prefetch",
        (Slot("level", ("L2",)), Slot("src", ("global",)), _HINT),
    ),
}


# ------------------------------------------------------------------------ completion
BULK_GROUP = Completion(
    "bulk_group",
    "joins the thread's bulk async-group: `T.ptx.cp.async_.bulk.commit_group()`, "
    "then `T.ptx.cp.async_.bulk.wait_group(n)`",
)
# The bulk async-group's instructions (PTX 8.0, sm_90; the group count an immediate), which TMA
# stores and reductions complete through too.
COMPANIONS = (
    Companion("cp.async.bulk.commit_group"),
    Companion("cp.async.bulk.wait_group", "{op} $0;", (("n", OperandKind.IMM),)),
    Companion("cp.async.bulk.wait_group.read", "{op} $0;", (("n", OperandKind.IMM),)),
)


@dataclass(frozen=True)
class BulkCopyFields(PlanFields):
    """A bulk copy's plan fields: its reduction (``add.u32``...) and whether the instruction
    checks its global address' alignment at run time."""

    reduction: str | None = None
    runtime_alignment_check: bool = False


@dataclass(frozen=True)
class BulkOpcode:
    """A parsed bulk-copy opcode."""

    text: str
    kind: str  # load | store | reduce | prefetch
    dst: str | None
    multicast: bool
    cache_hint: bool
    redop: str | None  # "add", "add.noftz", "min"... for reductions
    type: str | None

    @property
    def operator(self) -> str | None:
        """The reduction's operator without its ``.noftz`` spelling (``add``, ``min``...)."""
        return None if self.redop is None else self.redop.split(".")[0]


@functools.cache
def parse_bulk(text: str, location=None) -> BulkOpcode:
    """Parse a bulk-copy opcode in the PTX ISA's qualifier order (ContractError otherwise)."""
    words = split_opcode(text, location)
    if words[:4] == ["cp", "async", "bulk", "prefetch"]:
        kind, rest = "prefetch", words[4:]
    elif words[:4] == ["cp", "reduce", "async", "bulk"]:
        kind, rest = "reduce", words[4:]
    elif words[:3] == ["cp", "async", "bulk"]:
        kind, rest = ("store" if words[3:4] == ["global"] else "load"), words[3:]
    else:
        raise ContractError(
            "is not a cp.async.bulk / cp.reduce.async.bulk opcode",
            location,
            opcode=text,
            parameter="opcode",
        )
    head, slots = _GRAMMARS[kind]
    found = match_slots(rest, slots, head=head, opcode=text, location=location)
    redop = found.get("redOp")
    if found.get("noftz"):
        redop = f"{redop}.noftz"
    return BulkOpcode(
        ".".join(words),
        kind,
        found.get("dst"),
        bool(found.get("multicast")),
        bool(found.get("level::cache_hint")),
        redop,
        found.get("type"),
    )


# ---------------------------------------------------------------------- operand specification
_SHARED = OperandRole(
    "shared",
    ("shared",),
    "a contiguous shared region (a whole unswizzled buffer or a slice such as shared[s])",
)
_GLOBAL = OperandRole(
    "global",
    ("global",),
    "a contiguous region of a C-contiguous tensor, e.g. "
    "A[row, 0:256] (integer indices may be runtime)",
)
OPERAND_FORMS = {
    "load": (_SHARED, _GLOBAL),
    "store": (_GLOBAL, _SHARED),
    "reduce": (_GLOBAL, _SHARED),
    "prefetch": (_GLOBAL,),
}


class BulkCopyPattern(TilePattern):
    family = "cp.async.bulk"
    prefixes = ("cp.async.bulk", "cp.reduce.async.bulk")
    grammar = tuple(
        head + "".join(slot.spelling() for slot in slots) for head, slots in _GRAMMARS.values()
    )
    operand_forms = OPERAND_FORMS
    parameters = PARAMETERS
    example = (
        'buf = T.alloc_shared((256,), "uint32", layout="default", align=128)\n'
        'T.cuda.tile.apply(T.ptx["cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"],\n'
        "                  buf, A[row, 0:256], mbar=mbar.ptr_to([0]))"
    )
    completions = {
        "load": MBARRIER,
        "store": BULK_GROUP,
        "reduce": BULK_GROUP,
        "prefetch": NO_COMPLETION,
    }
    companions = COMPANIONS
    fields_type = BulkCopyFields
    interpreter = "jittile.interpreter.families.bulk_copy"
    async_reads = {"store": ("shared",), "reduce": ("shared",)}

    def parse(self, opcode: str, location=None) -> BulkOpcode:
        return parse_bulk(opcode, location)

    def form(self, opcode: str) -> str:
        return parse_bulk(opcode).kind

    def claims(self, opcode: str) -> bool:
        """A copy form: the word after the head is a state space or ``prefetch`` (so not the raw
        ``cp.async.bulk.commit_group`` / ``wait_group``, nor a misspelled ``.tensor``; the tensor
        forms go to the TMA pattern, whose longer prefix is tried first)."""
        words = opcode.split(".")
        first = words[4:5] if words[1:2] == ["reduce"] else words[3:4]
        return first in (["global"], ["shared::cta"], ["shared::cluster"]) or (
            first == ["prefetch"] and words[1:2] == ["async"]
        )

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering:
        op = self._opcode(site)
        self.check_parameter_names(site, " (qualifiers go in the opcode)")
        if site.scope != "thread":
            raise site.error(
                f"a bulk copy moves one contiguous run per issuing thread and has "
                f"no group axes: scope must be 'thread', got {site.scope!r}",
                "scope",
                hint="issue the copy from the threads that should, under "
                "an if, or use a TMA tensor copy with group axes",
            )
        shared, glob = self._operands(site, op)
        size = self._size(site, op, shared, glob)
        operands = self._runtime_operands(site, op)
        pred = self.predicate(site)
        if pred is False:
            return Lowering(plan=[])
        ctx.host_setup(
            ArgumentAlignment(glob.param, GRANULE, f"the {op.text} at {site.location}"), glob.param
        )
        return Lowering(plan=[self._record(site, op, shared, glob, size, operands)], predicate=pred)

    # ------------------------------------------------------------------------------ opcode
    @staticmethod
    def _opcode(site: CallSite) -> BulkOpcode:
        try:
            op = parse_bulk(site.opcode, site.location)
            check_target("sm_90", site.target, site.opcode, site.location)
        except ContractError as exc:
            raise ContractError(
                exc.rule, site.location, opcode=site.opcode, parameter=exc.parameter
            ) from None
        if op.multicast and not any(satisfies(site.target, t) for t in MULTICAST_ADVISED_TARGETS):
            raise site.error(
                f"requires target sm_90a or sm_100a (multicast::cluster), but the "
                f"kernel is compiled for {site.target.name}",
                "target",
            )
        if op.kind == "reduce":
            allowed = REDUCTION_TYPES.get(op.redop, ())
            if op.type not in allowed:
                spelled = [
                    f".{r}.{t}"
                    for r, ts in REDUCTION_TYPES.items()
                    for t in ts
                    if r.split(".")[0] == op.redop.split(".")[0]
                ]
                raise site.error(
                    f"'.{op.redop}.{op.type}' is not a reduction of a global bulk "
                    f"copy; '.{op.redop.split('.')[0]}' takes "
                    f"{', '.join(spelled)}",
                    "opcode",
                )
        return op

    # -------------------------------------------------------------------- legality: operands
    def _operands(self, site: CallSite, op: BulkOpcode):
        roles = OPERAND_FORMS[op.kind]
        names = ", ".join(r.name for r in roles)
        if len(site.operands) != len(roles):
            raise site.error(
                f"takes {len(roles)} operand{'s' * (len(roles) > 1)} ({names}), "
                f"got {len(site.operands)}",
                "operands",
            )
        shared = glob = None
        for index, (role, operand) in enumerate(zip(roles, site.operands)):
            want = SharedRegion if role.name == "shared" else GlobalRegion
            if not isinstance(operand, want):
                raise site.error(
                    f"operand {index} ({role.name}) must be {role.doc}, got "
                    f"{type(operand).__name__}",
                    f"operand {index}",
                )
            if role.name == "shared":
                shared = operand
            else:
                glob = operand
        gidx = [r.name for r in roles].index("global")
        _check_global(site, glob, f"operand {gidx}")
        if shared is not None:
            sidx = [r.name for r in roles].index("shared")
            _check_shared(site, shared, f"operand {sidx}")
            if shared.dtype != glob.dtype:
                raise site.error(
                    f"the global region is {glob.dtype.name} but the shared region "
                    f"is {shared.dtype.name}; a bulk copy moves one element type",
                    "operands",
                )
        if op.kind == "reduce" and glob.dtype.name not in TYPE_STORAGE[op.type]:
            raise site.error(
                f"'.{op.type}' reduces {' or '.join(TYPE_STORAGE[op.type])} "
                f"elements, but the regions hold {glob.dtype.name}",
                "opcode",
            )
        return shared, glob

    @staticmethod
    def _size(
        site: CallSite, op: BulkOpcode, shared: SharedRegion | None, glob: GlobalRegion
    ) -> int:
        """The copy's bytes: both regions' element counts agree, a positive multiple of 16."""
        count = math.prod(glob.extent(a) for a in range(glob.ndim))
        if shared is not None and math.prod(shared.shape) != count:
            raise site.error(
                f"the shared region {tuple(shared.shape)} holds "
                f"{math.prod(shared.shape)} elements but the global region holds "
                f"{count}; both sides of a bulk copy have one size",
                "operands",
            )
        size = count * glob.dtype.bytes
        if size % GRANULE or not 0 < size <= MAX_BYTES:
            raise site.error(
                f"moves {size} bytes ({count} x {glob.dtype.bytes} B); the size "
                f"must be a positive multiple of {GRANULE} bytes (below 2^32)",
                "operands",
            )
        return size

    @staticmethod
    def _runtime_operands(site: CallSite, op: BulkOpcode) -> dict:
        """mbar (loads), cta_mask (multicast) and cache_policy (cache hint): each required
        exactly where the form has it."""
        out = {}
        for name, present, bits, required, forbidden in (
            (
                "mbar",
                op.kind == "load",
                32,
                "loads complete on an mbarrier",
                "stores and reductions complete through bulk groups, prefetches not at all",
            ),
            (
                "cta_mask",
                op.multicast,
                16,
                ".multicast::cluster needs the CTA mask",
                "only .multicast::cluster loads take a CTA mask",
            ),
            (
                "cache_policy",
                op.cache_hint,
                64,
                ".L2::cache_hint needs the cache policy",
                "only .L2::cache_hint forms take a cache policy",
            ),
        ):
            value = site.params.get(name)
            if value is None and present:
                raise site.error(f"is required: {required}", name)
            if value is not None and not present:
                raise site.error(f"is not allowed here: {forbidden}", name)
            if value is not None:
                out[name] = _operand_value(site, name, value, bits)
        return out

    # ----------------------------------------------------------------------- code generation
    def _record(
        self,
        site: CallSite,
        op: BulkOpcode,
        shared: SharedRegion | None,
        glob: GlobalRegion,
        size: int,
        operands: dict,
    ) -> PlanRecord:
        gaddr = GlobalAddress(glob.param, tuple(glob.starts))
        guard = not _global_offset_is_aligned(glob)
        pairs = [("global", gaddr)]
        static_offset = 0
        if shared is not None:
            origin = shared.byte_address((0,) * len(shared.shape))
            stages = [
                mul(value, runtime_index_step(site, shared, axis, GRANULE))
                for value, axis in shared.runtime_indices
            ]
            smem = ("shared", SharedAddress(shared.buffer.name, add(origin, *stages)))
            pairs = [smem, *pairs] if op.kind == "load" else [*pairs, smem]
            static_offset = shared.buffer.offset + origin
        pairs.append(("size", size))
        pairs += [
            ("barrier" if role == "mbar" else role, operands[role])
            for role in ("mbar", "cta_mask", "cache_policy")
            if role in operands
        ]
        return PlanRecord(
            opcode=op.text,
            instance=(),
            coords=(),
            shared_offset=static_offset,
            bytes=size,
            operands=tuple(pairs),
            asm=_asm(op, [role for role, _ in pairs], guard),
            completion=self.completions[op.kind].name,
            barrier=operands.get("mbar"),
            fields=BulkCopyFields(f"{op.redop}.{op.type}" if op.kind == "reduce" else None, guard),
        )


# ------------------------------------------------------------------------ legality helpers
def _operand_value(site: CallSite, name: str, value, bits: int):
    if isinstance(value, Var):
        return value
    if name != "mbar" and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if not 0 <= int(value) < 2**bits:
            raise site.error(f"is a {bits}-bit operand, got {int(value)}", name)
        return int(value)
    what = (
        "a runtime shared-memory pointer such as mbar.ptr_to([0])"
        if name == "mbar"
        else f"a {bits}-bit integer"
    )
    raise site.error(f"must be {what}, got {value!r}", name)


def _check_global(site: CallSite, glob: GlobalRegion, parameter: str) -> None:
    """Static extents, and contiguous: below the outermost axis with more than one element, every
    axis is whole (start 0, the tensor's full static extent)."""
    if glob.layout != "C":
        raise site.error(
            f"tensor {glob.param!r} may be strided; a bulk copy reads one contiguous "
            f"run, so pass a C-contiguous array",
            parameter,
        )
    extents = [glob.extent(a) for a in range(glob.ndim)]
    if None in extents:
        axis = extents.index(None)
        raise site.error(
            f"the region of {glob.param!r} runs to the end of axis {axis}, whose "
            f"extent is dynamic; give the slice explicit bounds (A[..., 0:256]) or "
            f"annotate the extent with T.Tensor",
            parameter,
        )
    outer = next((a for a, e in enumerate(extents) if e > 1), glob.ndim - 1)
    for axis in range(outer + 1, glob.ndim):
        whole = glob.starts[axis] == 0 and extents[axis] == glob.static_shape[axis]
        if not whole:
            full = glob.static_shape[axis]
            raise site.error(
                f"the region of {glob.param!r} is not contiguous: axis {outer} "
                f"spans {extents[outer]} elements, so every inner axis must be "
                f"whole, but axis {axis} covers {extents[axis]} of "
                f"{'a dynamic extent' if full is None else full} from "
                f"{glob.starts[axis]}",
                parameter,
            )


def _check_shared(site: CallSite, shared: SharedRegion, parameter: str) -> None:
    """Unswizzled and compact row-major in the buffer's layout, 16-byte aligned."""
    buf = shared.buffer
    try:
        mode = byte_swizzle_mode(buf.layout, buf.dtype)
    except (TypeError, ValueError):
        mode = -1
    if mode != 0:
        raise site.error(
            f"shared buffer {buf.name!r} has a swizzled or non-linear layout; a bulk "
            f"copy moves bytes linearly, so its region must be unswizzled",
            parameter,
        )
    if buf.align < GRANULE:
        raise site.error(
            f"shared buffer {buf.name!r} is aligned to {buf.align} bytes; bulk "
            f"copies need {GRANULE} (allocate with align={GRANULE})",
            parameter,
        )
    elem = buf.dtype.bytes
    origin = shared.byte_address((0,) * len(shared.shape))
    expected = elem
    for axis in reversed(range(len(shared.shape))):
        for value in range(1, shared.shape[axis]):
            coords = [0] * len(shared.shape)
            coords[axis] = value
            got = shared.byte_address(tuple(coords)) - origin
            if got != value * expected:
                raise site.error(
                    f"the shared region is not contiguous: element {tuple(coords)} "
                    f"is {got} bytes from its start, expected {value * expected}",
                    parameter,
                )
        expected *= shared.shape[axis]
    if (buf.offset + origin) % GRANULE:
        raise site.error(
            f"the shared region starts at byte {origin} of {buf.name!r}; it must be "
            f"{GRANULE}-byte aligned",
            parameter,
        )
    for _, axis in shared.runtime_indices:
        runtime_index_step(site, shared, axis, GRANULE)


def _global_offset_is_aligned(glob: GlobalRegion) -> bool:
    """Whether the region's byte offset from the tensor's data is known to be 16-byte aligned
    (static starts, static extents inside every nonzero start); otherwise the instruction checks
    its address at run time."""
    offset, stride = 0, glob.dtype.bytes
    for axis in reversed(range(glob.ndim)):
        start = glob.starts[axis]
        if isinstance(start, Var):  # any runtime index: aligned when its stride is
            if stride is None or stride % GRANULE:
                return False
        elif start and stride is None:
            return False
        else:
            offset += start * (stride or 0)
        full = glob.static_shape[axis]
        stride = None if stride is None or full is None else stride * full
    return offset % GRANULE == 0


def _asm(op: BulkOpcode, roles: list[str], guard: bool) -> AsmCall:
    """``op [..], [..], size{, [mbar]}{, mask}{, policy}``; with ``guard`` the global address is
    first checked for 16-byte alignment (a misaligned bulk copy is undefined: trap instead)."""
    constraint = {
        "shared": "r",
        "global": "l",
        "size": "r",
        "barrier": "r",
        "cta_mask": "h",
        "cache_policy": "l",
    }
    slots = [
        f"[${i}]" if role in ("shared", "global", "barrier") else f"${i}"
        for i, role in enumerate(roles)
    ]
    text = f"{op.text} {', '.join(slots)};"
    if guard:
        address = roles.index("global")
        text = scoped(
            f".reg .b64 jt_low;\n.reg .pred jt_misaligned;\n"
            f"and.b64 jt_low, ${address}, {GRANULE - 1};\n"
            f"setp.ne.b64 jt_misaligned, jt_low, 0;\n@jt_misaligned trap;\n{text}"
        )
    return AsmCall(text, (), tuple(constraint[r] for r in roles), comment=op.text)


PATTERN = BulkCopyPattern()
