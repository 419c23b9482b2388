"""wgmma.mma_async: the Hopper warpgroup matrix multiply-accumulate pattern.

``T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype"], D, A, B, ...)``
computes ``D = A @ B + scale_d * D`` for one warpgroup: ``D`` is a register fragment (the
accumulator, ``(64, N)``), ``A`` a shared region ``(64, K)`` or a register fragment, ``B`` a shared
region ``(K, N)`` (write ``buf.T`` for a buffer stored ``(N, K)``). Regions larger than one
instruction expand into the sequence: along K one instruction per ``k`` (the accumulator chains
through them), along N one per ``N`` of the opcode (each on its own accumulator registers).

Sections follow the tile-pattern documents: parameters, data representation (opcode forms and
types), operand specification (fragments; shared descriptors derived from the layouts), legality,
code generation. The pattern issues the MMAs only: ``wgmma.fence``, ``commit_group`` and
``wait_group`` are the kernel's (raw PTX), as the PTX ISA makes them: the family's companion
instructions (:data:`COMPANIONS`), whose order :func:`check_order` checks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import CompileError, ContractError, Location
from ..fragment import FragmentLayout
from ..ir import (
    START_ADDRESS_MASK,
    Asm,
    DescriptorWord,
    PlanFields,
    PlanRecord,
    SharedAddress,
    Var,
    add,
    mul,
)
from ..ptx.grammar import did_you_mean, split_opcode
from ..ptx.opcodes import check_target
from ..ptx.operands import OperandKind
from .base import (
    CallSite,
    Companion,
    Completion,
    FragmentRegion,
    Lowering,
    LoweringContext,
    OperandRole,
    OrderFinding,
    Parameter,
    SharedRegion,
    TilePattern,
    operand_kind,
    runtime_index_step,
)
from .descriptors import DescriptorError
from .matrix_descriptors import MAJORS, Major, MatrixWalk, derive_matrix_walk
from .swizzle import swizzle_period

# ---------------------------------------------------------------------------- call parameters
PARAMETERS = (
    Parameter(
        "scale_d",
        "either",
        "1 (default): D = A @ B + D; 0: D = A @ B (the accumulator is "
        "not read). A runtime value is tested != 0 (the PTX ISA's "
        "scale-d predicate)",
    ),
    Parameter("scale_a", "static", "1 (default) or -1: negate A (imm-scale-a; floating types)"),
    Parameter("scale_b", "static", "1 (default) or -1: negate B (imm-scale-b; floating types)"),
)

# ----------------------------------------------------------------------- data representation
HEAD = "wgmma.mma_async.sync.aligned"
TARGET = "sm_90a"
M = 64


@dataclass(frozen=True)
class InputType:
    """An A/B type of the PTX ISA: its jittile element types, K of one instruction, the
    accumulator types it allows and whether it may be transposed (MN-major)."""

    ptx: str
    elements: tuple[str, ...]
    k: int
    accumulators: tuple[str, ...]
    transposable: bool


INPUT_TYPES = {
    t.ptx: t
    for t in (
        InputType("f16", ("float16",), 16, ("f32", "f16"), True),
        InputType("bf16", ("bfloat16",), 16, ("f32",), True),
        InputType("tf32", ("tf32", "float32"), 8, ("f32",), False),
        InputType("e4m3", ("float8_e4m3fn",), 32, ("f32", "f16"), False),
        InputType("e5m2", ("float8_e5m2",), 32, ("f32", "f16"), False),
        InputType("s8", ("int8",), 32, ("s32",), False),
        InputType("u8", ("uint8",), 32, ("s32",), False),
    )
}
ACCUMULATOR_ELEMENTS = {"f32": "float32", "f16": "float16", "s32": "int32"}
# Legal N: multiples of 8 up to 256 for floating types; integer forms skip the odd multiples of 8
# above 32 (PTX ISA, "Matrix shape" of wgmma.mma_async).
FLOAT_N = tuple(range(8, 257, 8))
INTEGER_N = (8, 16, 24) + tuple(range(32, 257, 16))


@dataclass(frozen=True)
class WgmmaOpcode:
    """A parsed dense wgmma opcode."""

    text: str
    n: int
    k: int
    dtype: str
    atype: InputType
    btype: InputType
    satfinite: bool

    @property
    def integer(self) -> bool:
        return self.dtype == "s32"


def element_bytes(itype: InputType) -> int:
    """Bytes of one A/B element: an instruction's K always spans 32 bytes."""
    return 32 // itype.k


@functools.cache
def parse_wgmma(text: str, location: Location | None = None) -> WgmmaOpcode:
    """Parse ``wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.dtype.atype.btype``."""
    words = split_opcode(text, location)
    head = HEAD.split(".")
    form = f"{HEAD}.m64nNkK{{.satfinite}}.dtype.atype.btype"

    def fail(message: str) -> ContractError:
        return ContractError(message, location, opcode=text, parameter="opcode")

    if words[: len(head)] != head:
        raise fail(f"is not a dense wgmma opcode: expected {form}")
    rest = words[len(head) :]
    satfinite = "satfinite" in rest
    if satfinite:
        rest = [w for w in rest if w != "satfinite"]
    if len(rest) != 4:
        raise fail(
            f"expected {form} (shape, accumulator type, A type, B type), got "
            f"{'.'.join(rest)!r} after {HEAD}"
        )
    shape, dtype, a, b = rest
    for word, known, what in (
        (dtype, ACCUMULATOR_ELEMENTS, "accumulator"),
        (a, INPUT_TYPES, "A"),
        (b, INPUT_TYPES, "B"),
    ):
        if word not in known:
            raise fail(
                f"'.{word}' is not a wgmma {what} type; known: "
                f"{', '.join(known)}{did_you_mean(word, known)}"
            )
    atype, btype = INPUT_TYPES[a], INPUT_TYPES[b]
    n, k = _shape(fail, shape)
    return WgmmaOpcode(".".join(words), n, k, dtype, atype, btype, satfinite)


def _shape(fail, shape: str) -> tuple[int, int]:
    import re

    match = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    if match is None:
        raise fail(f"'.{shape}' is not a wgmma shape: expected m64nNkK (e.g. m64n128k16)")
    m, n, k = map(int, match.groups())
    if m != M:
        raise fail(f"wgmma shapes have M = 64 (one warpgroup), got m{m}")
    return n, k


# ---------------------------------------------------------------------- legality conditions
def check_types(site: CallSite, op: WgmmaOpcode) -> None:
    """Type combinations, K, N and qualifiers the PTX ISA allows."""
    a, b = op.atype, op.btype
    fp8 = ("e4m3", "e5m2")
    same_family = (
        a.ptx == b.ptx
        or (a.ptx in fp8 and b.ptx in fp8)
        or (op.integer and a.ptx in ("s8", "u8") and b.ptx in ("s8", "u8"))
    )
    if not same_family:
        raise site.error(
            f"A type .{a.ptx} and B type .{b.ptx} do not form a wgmma: A and B are "
            f"the same type, except that e4m3/e5m2 and s8/u8 mix",
            "opcode",
        )
    if op.dtype not in a.accumulators:
        allowed = ", ".join("." + d for d in a.accumulators)
        raise site.error(f".{a.ptx} inputs accumulate into {allowed}, not .{op.dtype}", "opcode")
    if op.k != a.k:
        raise site.error(
            f".{a.ptx} inputs take k{a.k} (32 bytes of K per instruction), got k{op.k}", "opcode"
        )
    legal = INTEGER_N if op.integer else FLOAT_N
    if op.n not in legal:
        raise site.error(
            f"n{op.n} is not a legal N for .{op.dtype}.{a.ptx}: N is one of "
            f"{', '.join(map(str, legal))}",
            "opcode",
        )
    if op.satfinite and not op.integer:
        raise site.error(".satfinite is only for the integer (.s32) forms", "opcode")


def check_scales(site: CallSite, op: WgmmaOpcode) -> tuple[object, int, int]:
    """(scale_d: int or runtime Var, imm-scale-a, imm-scale-b)."""
    scale_d = site.params.get("scale_d", 1)
    if type(scale_d).__name__ == "bool_":  # a folded NumPy comparison
        scale_d = bool(scale_d)
    if isinstance(scale_d, bool):
        scale_d = int(scale_d)
    if not isinstance(scale_d, Var) and scale_d not in (0, 1):
        raise site.error(
            f"must be 0, 1 or a runtime value (tested != 0), got {scale_d!r}", "scale_d"
        )
    scales = []
    for name in ("scale_a", "scale_b"):
        value = site.params.get(name, 1)
        if isinstance(value, Var) or value not in (1, -1) or isinstance(value, bool):
            raise site.error(f"must be the compile-time value 1 or -1, got {value!r}", name)
        if value == -1 and op.integer:
            raise site.error(
                "integer wgmma forms have no imm-scale operands; negation is only "
                "for floating types",
                name,
            )
        scales.append(value)
    return scale_d, scales[0], scales[1]


def check_launch(site: CallSite, ctx: LoweringContext) -> None:
    """A static block must consist of whole warpgroups."""
    try:
        ((threads, _),) = ctx.group_indices("cta")
    except CompileError:
        return  # launched with a block given at the call: checked by the hardware's contract
    if threads % 128:
        raise site.error(
            f"wgmma is issued by whole warpgroups of 128 threads, but the kernel's "
            f"block has {threads} threads; launch a multiple of 128",
            "operands",
        )


# ---------------------------------------------------------------------- operand specification
@dataclass(frozen=True)
class SharedOperand:
    """A shared A or B operand: the region, seen as ``(mn, k)``, and its element type."""

    role: str  # "A" or "B"
    region: SharedRegion
    mn_extent: int
    k_extent: int

    def address_of(self, mn0: int, k0: int):
        """Physical bytes from the buffer base of element ``(mn0 + mn, k0 + k)``."""
        if self.role == "A":
            return lambda mn, k: self.region.byte_address((mn0 + mn, k0 + k))
        return lambda mn, k: self.region.byte_address((k0 + k, mn0 + mn))


def fragment_operand(
    site: CallSite,
    operand,
    index: int,
    layout_kind: str,
    element: str,
    shape: tuple[int, int] | None = None,
) -> FragmentRegion:
    what = "D (the accumulator)" if layout_kind == "accumulator" else "A"
    if not isinstance(operand, FragmentRegion):
        raise site.error(
            f"operand {index} ({what}) must be a register fragment "
            f"(T.alloc_local(..., layout=wgmma_{layout_kind})), got "
            f"{operand_kind(operand)}",
            f"operand {index}",
        )
    if not isinstance(operand.layout, FragmentLayout) or operand.layout.kind != layout_kind:
        raise site.error(
            f"operand {index} ({what}) {operand.name!r} has layout "
            f"{operand.layout!r}; it needs wgmma_{layout_kind}",
            f"operand {index}",
        )
    if operand.dtype.name != element:
        raise site.error(
            f"operand {index} ({what}) {operand.name!r} holds {operand.dtype.name}, "
            f"but the opcode's type needs {element}",
            f"operand {index}",
        )
    if shape is not None and tuple(operand.shape) != shape:
        raise site.error(
            f"operand {index} ({what}) {operand.name!r} has shape "
            f"{tuple(operand.shape)}; it must be {shape}",
            f"operand {index}",
        )
    return operand


def shared_operand(
    site: CallSite, operand, index: int, role: str, elements: tuple[str, ...]
) -> SharedOperand:
    if not isinstance(operand, SharedRegion):
        raise site.error(
            f"operand {index} ({role}) must be a shared region, got {operand_kind(operand)}",
            f"operand {index}",
        )
    if len(operand.shape) != 2:
        want = "(64, K)" if role == "A" else "(K, N); write buf.T for a buffer stored (N, K)"
        raise site.error(
            f"operand {index} ({role}) has shape {tuple(operand.shape)}; it must be "
            f"a two-axis region {want}",
            f"operand {index}",
        )
    if operand.dtype.name not in elements:
        raise site.error(
            f"operand {index} ({role}) holds {operand.dtype.name}, but the opcode's "
            f"type needs {' or '.join(elements)}",
            f"operand {index}",
        )
    rows, cols = operand.shape
    return SharedOperand(
        role, operand, rows if role == "A" else cols, cols if role == "A" else rows
    )


# ------------------------------------------------------------------------------ completion
FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
WAIT = "wgmma.wait_group.sync.aligned"
# The warpgroup's MMA group instructions: PTX 8.0, sm_90a; wait_group's count is an immediate.
COMPANIONS = (
    Companion(FENCE, target=TARGET),
    Companion(COMMIT, target=TARGET),
    Companion(
        WAIT, "{op} $0;", (("n", OperandKind.IMM),), target=TARGET, immediate_range=(0, 7, 1)
    ),
)
WGMMA_GROUP = Completion(
    "wgmma_group",
    f"joins the warpgroup's wgmma group: `T.ptx.{COMMIT}()`, then "
    f"`T.ptx.{WAIT}(n)` before the registers are read; `T.ptx.{FENCE}()` before "
    f"the first MMA and after the kernel touches its registers",
)


@dataclass(frozen=True)
class WgmmaFields(PlanFields):
    """One MMA's plan fields: the accumulator registers it chains, the B (and shared A) walks in
    words, the operands' majorness (what the interpreter reads the descriptors with: their values
    carry the rest; ``a_major`` None where A is registers), the imm-scales and a compile-time
    ``scale_d`` (a runtime one is an operand)."""

    accumulator: str
    b: str
    b_major: Major
    a: str | None = None
    a_major: Major | None = None
    scales: tuple[int, int] = (1, 1)
    scale_d: int = 1  # a compile-time 0 lives in the asm text alone: the interpreter reads it here

    @classmethod
    def decode(cls, name: str, value):
        return Major(value) if name in ("a_major", "b_major") else value


# ------------------------------------------------------------------------------ the pattern
class WgmmaPattern(TilePattern):
    family = "wgmma.mma_async"
    prefixes = ("wgmma.mma_async",)
    grammar = (
        f"{HEAD}.shape.dtype.atype.btype d, a-desc, b-desc, scale-d, imm-scale-a, "
        f"imm-scale-b{{, imm-trans-a, imm-trans-b}}",
        f"{HEAD}.shape.dtype.atype.btype d, a, b-desc, scale-d, imm-scale-a, imm-scale-b"
        f"{{, imm-trans-b}}",
        f"{HEAD}.shape{{.satfinite}}.s32.atype.btype d, a-desc|a, b-desc, scale-d",
    )
    operand_forms = {
        "mma": (
            OperandRole(
                "D",
                ("fragment",),
                "the accumulator: a (64, N) wgmma_accumulator fragment "
                "of the opcode's accumulator type",
            ),
            OperandRole(
                "A",
                ("shared", "fragment"),
                "a (64, K) shared region (its descriptor "
                "derived from the layout) or a wgmma_a "
                "fragment",
            ),
            OperandRole(
                "B",
                ("shared",),
                "a (K, N) shared region (buf.T for a buffer stored "
                "(N, K)); its descriptor is derived from the layout",
            ),
        )
    }
    parameters = PARAMETERS
    completions = {"mma": WGMMA_GROUP}
    companions = COMPANIONS
    fields_type = WgmmaFields
    interpreter = "jittile.interpreter.families.wgmma"
    register_operands = True  # the accumulator and A fragments are the kernel's registers
    example = (
        'acc = T.alloc_local((64, 256), "float32", layout=wgmma_accumulator)\n'
        'T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"],\n'
        "                  acc, A_s[s, half], B_s[s].T, scale_d=kt)"
    )
    async_reads = {"mma": ("A", "B")}  # through their matrix descriptors
    accepts_transposed = True

    def parse(self, opcode: str, location: Location | None = None) -> WgmmaOpcode:
        return parse_wgmma(opcode, location)

    def claims(self, opcode: str) -> bool:
        return opcode.startswith(self.prefixes[0] + ".")

    def check_order(self, events: list) -> list:
        return check_order(events)

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering:
        try:
            check_target(TARGET, site.target, site.opcode)
        except ContractError as exc:
            raise site.error(exc.rule, "target") from None
        if site.scope != "thread":
            raise site.error(
                "wgmma is always issued by a whole warpgroup; it takes no scope", "scope"
            )
        self.check_parameter_names(site)
        op = self.parse(site.opcode, site.location)
        check_types(site, op)
        scale_d, scale_a, scale_b = check_scales(site, op)
        check_launch(site, ctx)
        if len(site.operands) != 3:
            raise site.error(
                f"takes three operands (D, A, B), got {len(site.operands)}", "operands"
            )
        return plan_instructions(site, op, scale_d, scale_a, scale_b)


# --------------------------------------------------------------- ordering (the kernel's code)
def check_order(events: list) -> list[OrderFinding]:
    """The PTX ISA's wgmma discipline, in program order: a ``wgmma.fence`` before the first MMA
    and between the kernel touching a fragment and an MMA using it; a ``commit_group`` after the
    MMAs; a ``wait_group`` between an MMA and the kernel reading its fragments (``wait_group(N)``
    completes all but the N most recently committed groups). A missing
    instruction is an error; an access that only textual order puts in the wrong place (loops
    may make it right) is a warning."""
    findings = []
    fenced = False  # a fence since the kernel last touched a fragment
    touched: dict[str, object] = {}  # fragment -> where plain code last touched it
    pending: dict[str, tuple] = {}  # fragment -> (location, opcode) of an uncommitted MMA
    groups: list[dict[str, tuple]] = []  # committed groups, oldest first, not yet waited on
    for index, event in enumerate(events):
        in_flight = {name: where for group in (*groups, pending) for name, where in group.items()}
        if event.kind == "ptx" and event.opcode == FENCE:
            fenced, touched = True, {}
        elif event.kind == "ptx" and event.opcode == COMMIT:
            groups, pending = groups + [pending], {}
        elif event.kind == "ptx" and event.opcode == WAIT and isinstance(event.immediate, int):
            # wait_group(N): all but the N most recent committed groups are complete (N = 0
            # also clears MMAs not yet committed; a missing commit is reported on the MMA)
            groups = groups[max(0, len(groups) - event.immediate) :] if event.immediate else []
            pending = pending if event.immediate else {}
        elif event.kind == "access":
            (name,) = event.fragments
            if name in in_flight:
                findings.append(
                    OrderFinding(
                        event.location,
                        in_flight[name][1],
                        f"reads or writes register fragment {name!r} while the wgmma at "
                        f"{in_flight[name][0]} may still be using it: wait for it first "
                        f"(T.ptx.wgmma.wait_group.sync.aligned(0))",
                    )
                )
            touched[name] = event.location
        elif event.kind == "tile" and event.opcode.startswith(HEAD):
            findings += _check_mma(event, events[index + 1 :], fenced, touched)
            pending.update({name: (event.location, event.opcode) for name in event.fragments})
    return findings


def _check_mma(event, after: list, fenced: bool, touched: dict) -> list[OrderFinding]:
    findings = []
    if not fenced:
        findings.append(
            OrderFinding(
                event.location,
                event.opcode,
                "no T.ptx.wgmma.fence.sync.aligned() comes before this "
                "wgmma: the PTX ISA requires one before the first MMA",
                error=True,
            )
        )
    for name in event.fragments:
        if fenced and name in touched:
            findings.append(
                OrderFinding(
                    event.location,
                    event.opcode,
                    f"register fragment {name!r} was touched at {touched[name]} after the last "
                    f"wgmma.fence; fence again (T.ptx.wgmma.fence.sync.aligned()) between touching "
                    f"its registers and the MMA",
                )
            )
    if not any(e.kind == "ptx" and e.opcode == COMMIT for e in after):
        findings.append(
            OrderFinding(
                event.location,
                event.opcode,
                "no T.ptx.wgmma.commit_group.sync.aligned() follows this "
                "wgmma, so no wait_group can ever complete it",
                error=True,
            )
        )
    return findings


# ----------------------------------------------------------------------- code generation
def plan_instructions(
    site: CallSite, op: WgmmaOpcode, scale_d, scale_a: int, scale_b: int
) -> Lowering:
    d_operand, a_operand, b_operand = site.operands
    b = shared_operand(site, b_operand, 2, "B", op.btype.elements)
    if b.k_extent % op.k or b.mn_extent % op.n:
        raise site.error(
            f"operand 2 (B) is ({b.k_extent}, {b.mn_extent}); its K must be a "
            f"multiple of k{op.k} and its N a multiple of n{op.n}",
            "operand 2",
        )
    repeats_n, steps_k = b.mn_extent // op.n, b.k_extent // op.k
    accumulator = fragment_operand(
        site, d_operand, 0, "accumulator", ACCUMULATOR_ELEMENTS[op.dtype], (M, b.mn_extent)
    )
    if isinstance(a_operand, FragmentRegion):
        a = fragment_operand(site, a_operand, 1, "a", op.atype.elements[0], (M, b.k_extent))
    else:
        a = shared_operand(site, a_operand, 1, "A", op.atype.elements)
        if (a.mn_extent, a.k_extent) != (M, b.k_extent):
            raise site.error(
                f"operand 1 (A) is {tuple(a.region.shape)}; it must be (64, "
                f"{b.k_extent}): 64 rows and B's K",
                "operand 1",
            )
    per_instruction = len(accumulator.registers) // repeats_n
    plan = []
    for rn in range(repeats_n):
        d_registers = accumulator.registers[rn * per_instruction : (rn + 1) * per_instruction]
        for kk in range(steps_k):
            b_walk = _walk(site, op, b, rn * op.n, kk * op.k, op.n, 2)
            if isinstance(a, FragmentRegion):
                a_inputs = tuple((f"a[{4 * kk + j}]", a.registers[4 * kk + j]) for j in range(4))
                a_walk = None
            else:
                a_walk = _walk(site, op, a, 0, kk * op.k, M, 1)
                a_inputs = (("a_desc", _descriptor(a.region, a_walk, site)),)
            registers = f"{accumulator.name}[{rn * per_instruction}:{(rn + 1) * per_instruction}]"
            plan.append(
                _record(
                    site,
                    op,
                    (rn, kk),
                    d_registers,
                    a_inputs,
                    a_walk,
                    b,
                    b_walk,
                    scale_d if kk == 0 else 1,
                    scale_a,
                    scale_b,
                    registers,
                )
            )
    return Lowering(plan=plan)


def _walk(
    site: CallSite,
    op: WgmmaOpcode,
    operand: SharedOperand,
    mn0: int,
    k0: int,
    mn_extent: int,
    index: int,
) -> MatrixWalk:
    itype = op.atype if operand.role == "A" else op.btype
    majors = MAJORS if itype.transposable else (Major.K,)
    buffer = operand.region.buffer
    element_bytes = operand.region.dtype.bytes
    try:
        return derive_matrix_walk(
            operand.address_of(mn0, k0),
            mn_extent,
            op.k,
            element_bytes,
            base_align=buffer.align,
            majors=majors,
        )
    except DescriptorError as exc:
        extra = (
            ""
            if itype.transposable
            else (f"; .{itype.ptx} operands must be K-major (only 16-bit types may be MN-major)")
        )
        raise site.error(
            f"operand {index} ({operand.role}) in shared buffer {buffer.name!r}, "
            f"instruction at ({'m' if operand.role == 'A' else 'n'} {mn0}, k {k0}): "
            f"{exc.rule} (got {exc.value!r}){extra}",
            f"operand {index}",
        ) from None


def _descriptor(region: SharedRegion, walk: MatrixWalk, site: CallSite):
    """The 64-bit descriptor as a plan value: the constant fields, or-ed with the start address
    (the buffer's runtime shared address + the walk's origin + runtime index steps)."""
    constant = walk.descriptor(0)
    constant_bits = constant.encode() & ~START_ADDRESS_MASK
    steps = [
        mul(value, runtime_index_step(site, region, axis, swizzle_period(walk.swizzle)))
        for value, axis in region.runtime_indices
    ]
    start = SharedAddress(region.buffer.name, add(walk.origin, *steps))
    return DescriptorWord(start, constant_bits)


def instruction_asm(
    op: WgmmaOpcode,
    a_major: Major | None,
    b_major: Major,
    scale_d,
    scale_a: int = 1,
    scale_b: int = 1,
) -> Asm:
    """The inline asm of one wgmma: accumulator registers as outputs tied to inputs, then A (a
    descriptor, or four registers where ``a_major`` is None), B's descriptor, and ``scale_d``
    (an int is written into the template, a runtime value is one more ``r`` input)."""
    count = op.n // 2 if op.dtype in ("f32", "s32") else op.n // 4
    register = "f" if op.dtype == "f32" else "r"
    a_from_registers = a_major is None
    first_a = 2 * count
    first_b = first_a + (4 if a_from_registers else 1)
    a_text = (
        "{" + ", ".join(f"${first_a + j}" for j in range(4)) + "}"
        if a_from_registers
        else f"${first_a}"
    )
    immediates = []
    if not op.integer:
        immediates = [str(scale_a), str(scale_b)]
        if op.atype.transposable:
            if not a_from_registers:
                immediates.append(str(int(a_major == "MN")))
            immediates.append(str(int(b_major == "MN")))
    runtime_scale = not isinstance(scale_d, int)
    predicate = f"${first_b + 1}" if runtime_scale else str(scale_d)
    d_list = "{" + ", ".join(f"${j}" for j in range(count)) + "}"
    template = (
        "{\n.reg .pred %jt_p;\n"
        f"setp.ne.b32 %jt_p, {predicate}, 0;\n"
        f"{op.text} {d_list}, {a_text}, ${first_b}, " + ", ".join(["%jt_p"] + immediates) + ";\n}"
    )
    inputs = (
        tuple(str(j) for j in range(count))
        + (("r",) * 4 if a_from_registers else ("l",))
        + ("l",)
        + (("r",) if runtime_scale else ())
    )
    return Asm(template, (register,) * count, inputs, comment=op.text)


def _record(
    site: CallSite,
    op: WgmmaOpcode,
    instance: tuple,
    d_registers: tuple,
    a_inputs: tuple,
    a_walk: MatrixWalk | None,
    b: SharedOperand,
    b_walk: MatrixWalk,
    scale_d,
    scale_a: int,
    scale_b: int,
    accumulator: str,
) -> PlanRecord:
    asm = instruction_asm(
        op, None if a_walk is None else a_walk.major, b_walk.major, scale_d, scale_a, scale_b
    )
    scale_operand = () if isinstance(scale_d, int) else (("scale_d", scale_d),)
    operands = (
        tuple((f"d[{j}]", v) for j, v in enumerate(d_registers))
        + a_inputs
        + (("b_desc", _descriptor(b.region, b_walk, site)),)
        + scale_operand
    )
    fields = WgmmaFields(
        accumulator,
        _walk_text(b_walk),
        b_walk.major,
        None if a_walk is None else _walk_text(a_walk),
        None if a_walk is None else a_walk.major,
        (scale_a, scale_b),
        0 if scale_d == 0 else 1,
    )
    read = (0 if a_walk is None else M * op.k) * element_bytes(
        op.atype
    ) + op.n * op.k * element_bytes(op.btype)
    return PlanRecord(
        opcode=op.text,
        instance=instance,
        coords=(),
        shared_offset=b.region.buffer.offset + b_walk.origin,
        bytes=read,
        operands=operands,
        asm=asm,
        completion=WGMMA_GROUP.name,
        fields=fields,
        results=d_registers,
    )


def _walk_text(walk: MatrixWalk) -> str:
    return f"{walk.major}-major swizzle {walk.swizzle} LBO {walk.lbo} SBO {walk.sbo} +{walk.origin}"


PATTERN = WgmmaPattern()
