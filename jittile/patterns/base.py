"""The operand model and the contract every tile-pattern module implements.

A pattern module declares what it is (:class:`TilePattern`'s class attributes: the opcode prefixes
and grammar it claims, its parameters, its operand roles, how its instructions complete) and
implements the contract: the frontend hands it a :class:`CallSite` (the opcode text, operands
already classified as shared regions, global regions, caller-encoded TensorMaps or tensor-memory
regions, and the keyword parameters, static values or runtime :class:`~jittile.ir.Var` s), the
pattern checks it and returns a :class:`Lowering`: the instruction plan, one typed
:class:`~jittile.ir.PlanRecord` per native instruction, which the frontend prints into the kernel.
Host setup (TensorMaps, argument alignment) goes through :meth:`LoweringContext.host_setup`.
Patterns are pure Python: no numba, no driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..dtypes import DType
from ..errors import ContractError, Location, closest_name
from ..ir import ArgumentAlignment, Expr, HostParam, HostTensorMap, PlanFields, PlanRecord, Var
from ..targets import Target


@dataclass(frozen=True)
class SharedBuffer:
    """A ``T.alloc_shared`` buffer: logical shape, dtype, layout object and planned placement."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    layout: object
    align: int
    offset: int  # byte offset inside jittile's shared block, whose base is aligned to ``align``
    location: Location

    @property
    def nbytes(self) -> int:
        return layout_span(self.layout, self.shape) * self.dtype.bytes

    def element_offset(self, coords: tuple[int, ...]) -> int:
        """Physical element offset of logical ``coords`` (the layout's swizzle included)."""
        return self.layout.memory_offset(tuple(coords), self.shape)


def layout_span(layout, shape) -> int:
    """Elements a layout occupies: one past its largest offset. Strides are non-negative, so the
    unswizzled maximum is at the last coordinate; an XOR swizzle only permutes bits below
    ``per_element + swizzle_len``, so rounding up to that granule covers every swizzled offset."""
    inner = getattr(layout, "tile_layout", layout)
    span = inner.memory_offset(tuple(e - 1 for e in shape), shape) + 1
    if inner is not layout:
        granule = 1 << (layout.per_element + layout.swizzle_len)
        span = (span + granule - 1) // granule * granule
    return span


@dataclass(frozen=True)
class SharedRegion:
    """A rectangular sub-region of a shared buffer: ``origin`` per buffer axis and the region shape
    (axes indexed by an integer are dropped from ``shape``; ``axes`` maps region axes to buffer axes).
    ``runtime_indices`` holds ``(Var, buffer axis)`` for axes indexed by a runtime integer (a
    pipeline stage, say): their ``origin`` is 0 and the pattern adds the index times that axis'
    byte step at run time."""

    buffer: SharedBuffer
    origin: tuple[int, ...]
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    runtime_indices: tuple = ()

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    def buffer_coords(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        full = list(self.origin)
        for axis, value in zip(self.axes, coords):
            full[axis] += value
        return tuple(full)

    def byte_address(self, coords: tuple[int, ...]) -> int:
        """Byte offset of region element ``coords`` from the buffer base (physical, swizzled)."""
        return self.buffer.element_offset(self.buffer_coords(coords)) * self.buffer.dtype.bytes

    @property
    def transposed(self) -> bool:
        """Whether the region's axes are permuted from the buffer's (``buf[...].T``)."""
        return list(self.axes) != sorted(self.axes)

    def transpose(self) -> SharedRegion:
        """The region with its axes reversed (``region.T``)."""
        return SharedRegion(
            self.buffer, self.origin, self.shape[::-1], self.axes[::-1], self.runtime_indices
        )


@dataclass(frozen=True)
class GlobalRegion:
    """A kernel tensor parameter or a region of it. Per axis: ``starts`` (an int, or a runtime
    :class:`~jittile.ir.Var` on an axis indexed by a runtime integer), ``extents`` (an int, or None
    where a slice runs to the parameter's end) and ``dropped`` (indexed by an integer: extent one,
    not an axis of the region)."""

    param: str
    dtype: DType
    ndim: int
    static_shape: tuple  # the parameter's extents, None where dynamic
    starts: tuple
    extents: tuple
    dropped: tuple = ()
    layout: str = "C"  # "C" contiguous, "A" strided

    @property
    def is_whole(self) -> bool:
        return all(s == 0 for s in self.starts) and all(e is None for e in self.extents)

    @property
    def is_sliced(self) -> bool:
        """Every axis kept (slices, no integer index) with static starts: a TMA region."""
        return not any(self.dropped) and all(isinstance(s, int) for s in self.starts)

    def extent(self, axis: int) -> int | None:
        """The region's static extent on ``axis`` (None where it runs to a dynamic end)."""
        if self.dropped and self.dropped[axis]:
            return 1
        if self.extents[axis] is not None:
            return self.extents[axis]
        full = self.static_shape[axis]
        return (
            None
            if full is None or not isinstance(self.starts[axis], int)
            else full - self.starts[axis]
        )


@dataclass(frozen=True)
class FragmentRegion:
    """A register fragment (``T.alloc_local(..., layout=wgmma_accumulator)``): its tile shape,
    element type, :class:`~jittile.fragment.FragmentLayout` and one Var per 32-bit register of
    the running thread."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    layout: object
    registers: tuple


@dataclass(frozen=True)
class TensorMapOperand:
    """A caller-encoded ``jittile.TensorMap`` kernel argument: opaque, its fields are the caller's."""

    param: str


@dataclass(frozen=True)
class TmemRegion:
    """A ``T.cuda.decl_tmem`` tensor (or a region of it): ``base`` is its runtime TMEM address."""

    name: str
    base: Var
    shape: tuple[int, ...]
    dtype: DType
    layout: object
    origin: tuple[int, ...]
    region_shape: tuple[int, ...]
    axes: tuple[int, ...]  # which tensor axes the region keeps (integer indices drop one)


def operand_kind(operand) -> str:
    """What a classified tile-call operand is, in the words of error messages."""
    return {
        "GlobalRegion": "a global tensor region",
        "TensorMapOperand": "a jittile.TensorMap",
        "SharedRegion": "a shared region",
        "TmemRegion": "a TMEM tensor",
        "FragmentRegion": "a register fragment",
    }.get(type(operand).__name__, type(operand).__name__)


@dataclass
class CallSite:
    """One ``T.cuda.tile.apply`` call, classified by the frontend."""

    location: Location
    opcode: str
    operands: list
    params: dict[str, object]  # static values, or Var / tuples with Vars for runtime ones
    param_locations: dict[str, Location]
    target: Target
    scope: str = "thread"

    def error(
        self, message: str, parameter: str | None = None, *, hint: str | None = None
    ) -> ContractError:
        location = (
            self.param_locations.get(parameter, self.location) if parameter else self.location
        )
        return ContractError(message, location, opcode=self.opcode, parameter=parameter, hint=hint)


@dataclass(frozen=True)
class OrderEvent:
    """One step of the kernel, in program (textual) order, for families whose instructions
    must be ordered by the kernel's own code: ``kind`` is ``tile`` (a call of the family, with
    the register fragments it uses), ``ptx`` (a raw PTX instruction, with its first immediate)
    or ``access`` (plain code reading or writing a register fragment)."""

    kind: str
    location: Location
    opcode: str | None = None
    fragments: tuple[str, ...] = ()
    immediate: int | None = None


@dataclass(frozen=True)
class OrderFinding:
    """A broken ordering rule: an error (a ContractError) or a warning."""

    location: Location
    opcode: str
    message: str
    error: bool = False


@dataclass
class Lowering:
    """What a pattern returns for one checked call site: its plan and the runtime bool (if any)
    that gates every instruction of it."""

    plan: list[PlanRecord]
    predicate: Expr | None = None


class LoweringContext(Protocol):
    """Services the frontend offers patterns while they lower a call site."""

    def host_setup(self, item: HostTensorMap | ArgumentAlignment, text: str) -> HostParam | None:
        """Register a host-side setup item of the launch: a TensorMap to encode (its ``param``
        is assigned here; returns the grid-constant parameter, shown as ``text``) or an
        argument alignment to check (returns None)."""

    def group_indices(self, scope: str) -> list[tuple[int, Expr]]:
        """(extent, running thread's index) per group axis of ``scope``."""


@dataclass(frozen=True)
class Parameter:
    """A keyword parameter of a tile call: ``static`` (a compile-time value), ``runtime`` (any
    value, evaluated once per call) or ``either``."""

    name: str
    kind: str
    doc: str


@dataclass(frozen=True)
class OperandRole:
    """A positional operand of a tile call: its role name, the region kinds it accepts
    (``shared``, ``global``, ``tensormap``, ``tmem``) and what it is."""

    name: str
    kinds: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Completion:
    """How an asynchronous instruction completes: ``name`` in plan records
    (``PlanRecord.completion``) and what it asks of the caller, in the reference's words."""

    name: str
    text: str


MBARRIER = Completion(
    "mbarrier",
    "completes on the `mbar=` barrier: each instruction's bytes count against the "
    "barrier's expected transaction bytes (set them with `mbarrier.arrive.expect_tx`, "
    "then `T.cuda.mbarrier_wait`)",
)
NO_COMPLETION = Completion("none", "nothing to wait for")


@dataclass(frozen=True)
class Companion:
    """A raw PTX instruction of a family (a fence, commit or wait the kernel issues itself with
    ``T.ptx...``): its opcode, asm template (``{op}`` is the opcode), inputs as ``(name, kind)``
    with a :class:`~jittile.ptx.operands.OperandKind`, minimum PTX ISA and target, the range of an
    immediate operand, and its semantics in the interpreter (``interpreted``: ``"at issue"``, as
    the family's instructions complete when issued, so it has nothing left to order or wait
    for)."""

    opcode: str
    template: str = "{op};"
    inputs: tuple = ()
    ptx: tuple[int, int] = (8, 0)
    target: str = "sm_90"
    immediate_range: tuple[int, int, int] | None = None
    interpreted: str = "at issue"


class TilePattern:
    """An opcode family. Subclasses declare:

    - ``family``: its name; ``prefixes``: the opcode heads it claims (the registry picks the
      longest prefix that matches a whole qualifier, so ``cp.async.bulk`` and
      ``cp.async.bulk.tensor`` coexist); ``grammar``: its PTX ISA syntax lines;
    - ``operand_forms``: per form (e.g. ``load``/``store``), the ordered :class:`OperandRole` s;
    - ``parameters``: its keyword :class:`Parameter` s (``scope`` is the frontend's);
    - ``completions``: how each form completes (a :class:`Completion`);
    - ``companions``: its raw instructions (:class:`Companion`), which the raw ``T.ptx`` table
      and the interpreter take from here;
    - ``fields_type``: its :class:`~jittile.ir.PlanFields` dataclass (what its records'
      ``fields`` are, and what a cache entry's are restored as);
    - ``interpreter``: its module of ``jittile/interpreter/families/`` (dotted path), whose
      ``execute(machine, thread, record, op, operands)`` carries out one of its records (``op``
      the parsed opcode, ``operands`` a dict role -> value, or with ``register_operands`` the
      values as the kernel holds them, in the record's role order); patterns never import it;
    - ``accepts_transposed``: whether its shared operands may be transposed regions (``buf.T``);
    - ``example``: one call, as a kernel writes it (``help(T.ptx[opcode])`` shows it);
    - ``async_reads``: per form, the operand roles its instructions read through the async proxy
      (with :meth:`form` where the family has more than one form);

    and implement :meth:`parse` (opcode text -> its typed opcode, once: ContractError where it is
    not one), :meth:`claims` (whether an opcode under its prefixes is one of its forms) and
    :meth:`lower` (contract -> plan)."""

    family: str = ""
    prefixes: tuple[str, ...] = ()
    grammar: tuple[str, ...] = ()
    operand_forms: dict = {}
    parameters: tuple[Parameter, ...] = ()
    completions: dict = {}  # form -> Completion
    companions: tuple[Companion, ...] = ()
    fields_type: type[PlanFields] = PlanFields
    interpreter: str = ""
    register_operands = False
    example: str = ""  # one call of the family, as a kernel writes it (help(T.ptx[opcode]))
    accepts_transposed = False  # whether shared operands may be transposed regions (``buf.T``)
    async_reads: dict = {}  # form -> the operand roles read through the async proxy

    def parse(self, opcode: str, location: Location | None = None):
        raise NotImplementedError

    def claims(self, opcode: str) -> bool:
        raise NotImplementedError

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering:
        raise NotImplementedError

    def form(self, opcode: str) -> str:
        """Which of ``operand_forms`` a (checked) opcode of the family takes."""
        return next(iter(self.operand_forms))

    def async_shared_reads(self, site: CallSite) -> tuple[str, ...]:
        """The shared buffers a checked call reads through the async proxy (generic writes to
        them must be fenced into it first), from the roles ``async_reads`` declares."""
        form = self.form(site.opcode)
        roles = self.async_reads.get(form, ())
        return tuple(
            operand.buffer.name
            for role, operand in zip(self.operand_forms[form], site.operands)
            if role.name in roles and isinstance(operand, SharedRegion)
        )

    def check_order(self, events: list) -> list:
        """The :class:`OrderFinding` s of the kernel's :class:`OrderEvent` s (families whose
        completion the kernel orders with raw PTX declare their rules here)."""
        return []

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def check_parameter_names(self, site: CallSite, hint: str = "") -> None:
        """Every keyword of ``site`` is a declared parameter (else a ContractError with the
        closest name)."""
        for name in site.params:
            if name not in self.parameter_names:
                close = closest_name(name, self.parameter_names)
                mean = f" (did you mean {close}=?)" if close else ""
                raise site.error(
                    f"is not a parameter of {self.family}{mean}; parameters are "
                    f"{', '.join(self.parameter_names)}{hint}",
                    name,
                )

    @staticmethod
    def predicate(site: CallSite):
        """The ``pred=`` parameter: None (always), False (nothing is issued) or a runtime Var."""
        pred = site.params.get("pred")
        if type(pred).__name__ == "bool_":  # a folded NumPy comparison
            pred = bool(pred)
        if pred is not None and not isinstance(pred, (Var, bool)):
            raise site.error(f"must be a runtime bool or None, got {pred!r}", "pred")
        return None if pred is True else pred

    # ---------------------------------------------------------------------------- reference
    def reference(self) -> str:
        """The family's section of the language reference (docs/language.md, generated by
        ``python -m jittile.docs``): its opcodes, PTX grammar, operands and completion per form,
        parameters, companion instructions and an example."""
        prefixes = ", ".join(f"`{p}...`" for p in self.prefixes)
        lines = [
            f"### `{self.family}`",
            "",
            f"Opcodes: {prefixes}. PTX ISA syntax:",
            "",
            "```text",
            *self.grammar,
            "```",
            "",
            "| form | operands, in order | completion |",
            "|---|---|---|",
        ]
        for form, roles in self.operand_forms.items():
            operands = "; ".join(f"`{r.name}` ({' or '.join(r.kinds)}): {r.doc}" for r in roles)
            completion = self.completions[form]
            lines.append(
                f"| {form} | {_cell(operands)} | `{completion.name}`: {_cell(completion.text)} |"
            )
        lines += ["", "| parameter | kind | meaning |", "|---|---|---|"]
        lines += [f"| `{p.name}` | {p.kind} | {_cell(p.doc)} |" for p in self.parameters]
        if self.companions:
            raw = ", ".join(f"`{c.opcode}`" for c in self.companions)
            lines += ["", f"Companion raw instructions (issued with `T.ptx...`): {raw}."]
        lines += ["", "Example:", "", "```text", self.example, "```"]
        return "\n".join(lines) + "\n"

    def help_text(self, opcode: str) -> str:
        """What ``help(T.ptx[opcode])`` shows for one of its opcodes: forms, completions,
        parameters (``static``: a compile-time value, ``runtime``: any value) and an example."""
        lines = [
            f"T.ptx[{opcode!r}]: a tile opcode of the {self.family} family, issued by "
            f"T.cuda.tile.apply(T.ptx[opcode], *operands, **parameters).",
            "",
            "PTX ISA syntax:",
            *(f"    {g}" for g in self.grammar),
            "",
            "Operands, per form:",
        ]
        for form, roles in self.operand_forms.items():
            operands = ", ".join(role.name for role in roles)
            lines.append(f"    {form}: ({operands}); {self.completions[form].text}")
            lines += [f"        {r.name} ({' or '.join(r.kinds)}): {r.doc}" for r in roles]
        width = max(len(p.name) for p in self.parameters)
        lines += ["", "Parameters (T.ptx[opcode].parameters):"]
        lines += [
            f"    {p.name:<{width}}  {p.kind:<7}  {' '.join(p.doc.split())}"
            for p in self.parameters
        ]
        lines += ["", "Example:", *(f"    {line}" for line in self.example.splitlines())]
        return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def check_declarations(pattern: TilePattern) -> None:
    """A pattern declares a completion for each form and a plan-fields dataclass (checked at
    registration)."""
    for form in pattern.operand_forms:
        if not isinstance(pattern.completions.get(form), Completion):
            raise ValueError(f"{pattern.family}: form {form!r} declares no Completion")
    if not issubclass(pattern.fields_type, PlanFields):
        raise ValueError(f"{pattern.family}: fields_type is not a PlanFields dataclass")


SCOPE_GROUP_AXES = {"thread": 0, "warp": 1, "warpgroup": 1, "cta": 1, "cluster": 1}


def static_tuple(
    site: CallSite,
    name: str,
    value,
    length: int | None = None,
    check: Callable[[int], bool] | None = None,
    rule: str = "",
) -> tuple[int, ...]:
    """Validate a static integer tuple parameter (each entry optionally checked)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if isinstance(value, Var) or (
        isinstance(value, (tuple, list)) and any(isinstance(v, Var) for v in value)
    ):
        raise site.error(
            "must be a compile-time value (a literal, a T.constexpr parameter or "
            "arithmetic on them)",
            name,
        )
    if not isinstance(value, (tuple, list)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise site.error(f"must be a static tuple of integers, got {value!r}", name)
    value = tuple(value)
    if length is not None and len(value) != length:
        raise site.error(
            f"needs {length} entries (one per opcode dimension), got {len(value)}: {value!r}", name
        )
    if check is not None:
        for v in value:
            if not check(v):
                raise site.error(f"{rule}, got {v} in {value!r}", name)
    return value


def runtime_index_step(site: CallSite, shared: SharedRegion, axis: int, need: int) -> int:
    """Bytes one step of a runtime-indexed buffer axis moves the (unswizzled) origin. It must
    be the same for every index, so that the offset is index * step, and a multiple of the
    origin alignment (the swizzle period when swizzled), so that every origin is legal and
    the statically undone swizzle stays right."""
    buf = shared.buffer
    inner = getattr(buf.layout, "tile_layout", buf.layout)

    def at(index: int) -> int:
        coords = list(shared.origin)
        coords[axis] = index
        return inner.memory_offset(tuple(coords), buf.shape) * buf.dtype.bytes

    base = at(0)
    step = at(1) - base if buf.shape[axis] > 1 else 0
    for index in range(buf.shape[axis]):
        if at(index) - base != index * step:
            raise site.error(
                f"axis {axis} of shared buffer {buf.name!r} is indexed at run "
                f"time but is not evenly strided: index {index} is at byte "
                f"{at(index) - base}, expected {index * step}",
                "operands",
            )
    if step % need:
        raise site.error(
            f"a runtime index on axis {axis} of shared buffer {buf.name!r} steps "
            f"the origin by {step} bytes; every origin must be {need}-byte "
            f"aligned, so the step must be a multiple of {need}",
            "operands",
        )
    return step
