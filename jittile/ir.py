"""The plain data every stage shares: kernel IR, instruction plans and host descriptor specs.

The instruction plan is the single source of truth about a tile call: the frontend prints it into
the lowered kernel, ``ck.plan`` shows it, the cache stores it as JSON and the interpreter executes
it. So a plan value is typed data, never a string of code:

- a constant is a Python ``int``;
- :class:`Var` is a runtime value the lowered kernel holds (a kernel parameter, a local, or a
  temporary that evaluated one of the call's expressions), with the user's own text for it;
- :class:`Special` is a thread index register (lane, linear thread index, cluster rank);
- :class:`SharedAddress` / :class:`GlobalAddress` / :class:`HostParam` are addresses of planned
  shared buffers, tensor elements and grid-constant host descriptors;
- :class:`BinOp` combines them (``+ * % >> & |`` on unsigned integers).

``str()`` of any of them reads in the user's words. This module imports nothing of jittile but
``errors`` and ``dtypes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from enum import Enum
from typing import Union

from .dtypes import DType
from .errors import JittileError, Location

# ------------------------------------------------------------------------------ plan values


@dataclass(frozen=True)
class Var:
    """A runtime value of the lowered kernel: ``name`` there, ``text`` as the user wrote it.
    ``kind`` is ``param`` (a kernel parameter), ``local`` (a kernel variable) or ``temp`` (an
    expression of the call, evaluated once into a temporary)."""

    name: str
    text: str
    kind: str = "temp"

    def __str__(self) -> str:
        return self.text


# Special registers a plan may read; their spelling in the kernel language.
SPECIAL_REGISTERS = {
    "lane": "T.cuda.lane_id()",
    "thread": "T.cuda.thread_idx()",
    "cluster_rank": "T.cuda.cluster_ctarank()",
}


@dataclass(frozen=True)
class Special:
    """A thread-index register: ``lane``, ``thread`` (linear index in the CTA), ``cluster_rank``."""

    register: str

    def __post_init__(self):
        if self.register not in SPECIAL_REGISTERS:
            raise ValueError(f"unknown special register {self.register!r}")

    def __str__(self) -> str:
        return SPECIAL_REGISTERS[self.register]


@dataclass(frozen=True)
class SharedAddress:
    """The 32-bit shared-window address of byte ``offset`` of shared buffer ``buffer``."""

    buffer: str
    offset: Expr = 0

    def __str__(self) -> str:
        return f"&{self.buffer}" + ("" if self.offset == 0 else f"[+{_operand(self.offset)} B]")


@dataclass(frozen=True)
class GlobalAddress:
    """The 64-bit generic address of element ``index`` of tensor parameter ``tensor``."""

    tensor: str
    index: tuple

    def __str__(self) -> str:
        return f"&{self.tensor}[{', '.join(str(i) for i in self.index)}]"


@dataclass(frozen=True)
class HostParam:
    """The generic address of a grid-constant host descriptor parameter ``name`` (a TensorMap),
    built on the host from ``text`` (the user's tensor, or the caller's TensorMap argument)."""

    name: str
    text: str

    def __str__(self) -> str:
        return f"tensormap({self.text})"


BINARY_OPERATORS = ("+", "*", "%", ">>", "&", "|")


@dataclass(frozen=True)
class BinOp:
    """``left op right`` on unsigned integers."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self):
        if self.op not in BINARY_OPERATORS:
            raise ValueError(f"unknown plan operator {self.op!r}")

    def __str__(self) -> str:
        mine = _PRECEDENCE[self.op]

        def side(expr: Expr, right: bool) -> str:
            if self.op in ("&", "|") and isinstance(expr, int):
                return hex(expr)
            if isinstance(expr, BinOp):
                theirs = _PRECEDENCE[expr.op]
                # bitwise mixes always get parentheses, as C compilers advise
                if (
                    theirs < mine
                    or (right and theirs == mine)
                    or (mine <= _PRECEDENCE[">>"] and expr.op != self.op)
                ):
                    return f"({expr})"
                return str(expr)
            return _operand(expr)

        return f"{side(self.left, False)} {self.op} {side(self.right, True)}"


_PRECEDENCE = {"|": 1, "&": 2, ">>": 3, "+": 4, "*": 5, "%": 5}


START_ADDRESS_MASK = 0x3FFF  # a matrix descriptor's bits 0-13: bits 4-17 of its start address


def descriptor_word(start: int, fields: int) -> int:
    """A matrix descriptor's word for the shared address ``start`` (``DescriptorWord``)."""
    return ((int(start) >> 4) & START_ADDRESS_MASK) | int(fields)


@dataclass(frozen=True)
class DescriptorWord:
    """The 64-bit word of a shared-memory matrix descriptor (wgmma, tcgen05): the constant
    fields ``fields`` or-ed with bits 4-17 of the 32-bit shared address ``start`` in bits 0-13.
    A node of its own, not ``BinOp``s, so that the start field is computed in 32 bits: as 64-bit
    plan arithmetic a descriptor cost ptxas a dozen instructions (64-bit adds and shifts, then
    moves into uniform registers) per wgmma, about half of a GEMM's consumer loop."""

    start: Expr
    fields: int

    def __post_init__(self):
        if self.fields & START_ADDRESS_MASK:
            raise ValueError(f"descriptor fields {self.fields:#x} overlap the start address field")

    def __str__(self) -> str:
        return f"(({_operand(self.start)} >> 4) & {START_ADDRESS_MASK:#x}) | {self.fields:#x}"


Expr = Union[  # noqa: UP007
    int, Var, Special, SharedAddress, GlobalAddress, HostParam, BinOp, DescriptorWord
]


def _operand(expr: Expr) -> str:
    text = str(expr)
    return (
        f"({text})"
        if isinstance(expr, BinOp) or (isinstance(expr, Var) and not text.isidentifier())
        else text
    )


def add(*terms: Expr) -> Expr:
    """The sum of ``terms``, constants folded (an all-constant sum is an int)."""
    const = sum(t for t in terms if isinstance(t, int))
    rest = [t for t in terms if not isinstance(t, int)]
    out: Expr | None = None
    for term in rest:
        out = term if out is None else BinOp("+", out, term)
    if out is None:
        return const
    return BinOp("+", out, const) if const else out


def mul(expr: Expr, factor: int) -> Expr:
    """``expr * factor`` with the trivial factors folded."""
    if isinstance(expr, int):
        return expr * factor
    if factor == 0:
        return 0
    return expr if factor == 1 else BinOp("*", expr, factor)


def leaves(expr: Expr):
    """Every non-constant leaf of ``expr`` (Vars, Specials, addresses, host parameters)."""
    if isinstance(expr, BinOp):
        yield from leaves(expr.left)
        yield from leaves(expr.right)
    elif isinstance(expr, SharedAddress):
        yield expr
        yield from leaves(expr.offset)
    elif isinstance(expr, GlobalAddress):
        yield expr
        for index in expr.index:
            yield from leaves(index)
    elif isinstance(expr, DescriptorWord):
        yield from leaves(expr.start)
    elif not isinstance(expr, int):
        yield expr


_EXPR_TAGS = {
    "var": Var,
    "special": Special,
    "shared": SharedAddress,
    "global": GlobalAddress,
    "host": HostParam,
    "binop": BinOp,
    "descriptor": DescriptorWord,
}
_TAG_OF = {cls: tag for tag, cls in _EXPR_TAGS.items()}


def expr_to_json(expr: Expr):
    """A JSON value for ``expr``: ints stay ints, nodes become ``[tag, fields...]``."""
    if isinstance(expr, bool) or not isinstance(expr, (int, *_TAG_OF)):
        raise TypeError(f"not a plan value: {expr!r}")
    if isinstance(expr, int):
        return expr
    if isinstance(expr, Var):
        return ["var", expr.name, expr.text, expr.kind]
    if isinstance(expr, Special):
        return ["special", expr.register]
    if isinstance(expr, SharedAddress):
        return ["shared", expr.buffer, expr_to_json(expr.offset)]
    if isinstance(expr, GlobalAddress):
        return ["global", expr.tensor, [expr_to_json(i) for i in expr.index]]
    if isinstance(expr, HostParam):
        return ["host", expr.name, expr.text]
    if isinstance(expr, DescriptorWord):
        return ["descriptor", expr_to_json(expr.start), expr.fields]
    return ["binop", expr.op, expr_to_json(expr.left), expr_to_json(expr.right)]


def expr_from_json(data) -> Expr:
    """The inverse of :func:`expr_to_json`; raises ValueError on anything it did not write."""
    if isinstance(data, int) and not isinstance(data, bool):
        return data
    if not isinstance(data, list) or not data or data[0] not in _EXPR_TAGS:
        raise ValueError(f"not a recorded plan value: {data!r}")
    tag, *rest = data
    try:
        if tag == "var":
            name, text, kind = rest
            return Var(_str(name), _str(text), _str(kind))
        if tag == "special":
            (register,) = rest
            return Special(_str(register))
        if tag == "shared":
            buffer, offset = rest
            return SharedAddress(_str(buffer), expr_from_json(offset))
        if tag == "global":
            tensor, index = rest
            return GlobalAddress(_str(tensor), tuple(expr_from_json(i) for i in index))
        if tag == "host":
            name, text = rest
            return HostParam(_str(name), _str(text))
        if tag == "descriptor":
            start, fields = rest
            if not isinstance(fields, int) or isinstance(fields, bool):
                raise TypeError(f"descriptor fields {fields!r} are not an integer")
            return DescriptorWord(expr_from_json(start), fields)
        op, left, right = rest
        return BinOp(_str(op), expr_from_json(left), expr_from_json(right))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a recorded plan value: {data!r} ({exc})") from None


def _str(value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


# --------------------------------------------------------------------------- instructions


@dataclass(frozen=True)
class Asm:
    """One inline-asm statement: PTX template with ``$N`` placeholders (outputs first, then
    inputs, as LLVM numbers them), one constraint letter per operand, and whether it touches
    memory."""

    template: str
    outputs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    memory: bool = True
    comment: str = field(default="", compare=False)

    @property
    def constraint_string(self) -> str:
        parts = [f"={c}" for c in self.outputs] + list(self.inputs)
        if self.memory:
            parts.append("~{memory}")
        return ",".join(parts)


@dataclass(frozen=True)
class PlanFields:
    """The static descriptor facts of one family's instructions, the family's own frozen
    dataclass (this base has none: a record of no family). A field is a JSON scalar, a tuple of
    them or a string :class:`~enum.Enum`; one at its default is absent: not shown, not stored.
    ``record.fields["box"]`` reads a field mapping-style, as the ``fields`` dict of plans before
    they were typed did (deprecated alias)."""

    def items(self) -> list[tuple[str, object]]:
        """The present fields, in declaration order."""
        return [
            (f.name, getattr(self, f.name))
            for f in dataclass_fields(self)
            if getattr(self, f.name) != f.default
        ]

    def to_json(self) -> dict:
        return {name: _jsonable(value) for name, value in self.items()}

    @classmethod
    def from_json(cls, data: dict) -> PlanFields:
        """The inverse of :meth:`to_json`; raises ValueError on a field the class lacks."""
        known = {f.name for f in dataclass_fields(cls)}
        if not isinstance(data, dict) or not set(data) <= known:
            raise ValueError(f"not recorded {cls.__name__}: {data!r}")
        return cls(**{name: cls.decode(name, _tuples(value)) for name, value in data.items()})

    @classmethod
    def decode(cls, name: str, value):
        """A field's typed value from its JSON (lists already tuples); subclasses with Enum
        fields turn their strings back into members here."""
        return value

    def __getitem__(self, key: str):
        present = dict(self.items())
        if key not in present:
            raise KeyError(key)
        return present[key]

    def __contains__(self, key: str) -> bool:
        return key in dict(self.items())


@dataclass(frozen=True)
class PlanSchema:
    """What restoring a recorded plan needs to know of the registered families: their names, and
    ``facts(family)``: its :class:`PlanFields` class and the names of its completion mechanisms
    (which may load the family's module, so :class:`RecordedPlan` asks only on first use)."""

    families: frozenset[str]
    facts: Callable[[str], tuple[type[PlanFields], frozenset[str]]]

    def record(self, data: dict, family: str) -> PlanRecord:
        """The record :meth:`PlanRecord.to_json` wrote for a site of ``family``; ValueError where
        the family is not registered or does not complete that way."""
        if family not in self.families:
            raise ValueError(f"no family {family!r} is registered")
        fields, completions = self.facts(family)
        if data["completion"] not in completions | {"none"}:
            raise ValueError(f"unknown completion {data['completion']!r} for {family}")
        return PlanRecord.from_json(data, fields)


class RecordedPlan(Sequence):
    """A site's plan as a cache entry recorded it, decoded by its family (:class:`PlanSchema`)
    on first use, so that a disk hit that only launches loads no family module. It reads, and
    compares, as the list of :class:`PlanRecord` s it decodes to."""

    def __init__(self, data: list, family: str, schema: PlanSchema):
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ValueError(f"not a recorded plan: {data!r}")
        if family not in schema.families:
            raise ValueError(f"no family {family!r} is registered")
        self._data, self._family, self._schema = data, family, schema
        self._records: list | None = None

    def records(self) -> list[PlanRecord]:
        if self._records is None:
            try:
                self._records = [self._schema.record(r, self._family) for r in self._data]
            except (KeyError, TypeError, ValueError) as exc:
                raise JittileError(
                    f"a cached plan of the {self._family} family does not decode "
                    f"({exc}); remove the entry (jittile cache clear)"
                ) from None
        return self._records

    def __getitem__(self, index):
        return self.records()[index]

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other) -> bool:
        return self.records() == (other.records() if isinstance(other, RecordedPlan) else other)

    __hash__ = None  # as a list's

    def __repr__(self) -> str:
        return repr(self.records())


@dataclass(frozen=True)
class PlanRecord:
    """One native instruction of a call site's expansion.

    ``operands`` are the instruction's inputs in asm order, as ``(role, value)`` pairs; ``asm``
    issues them. ``coords`` are the TMA/TMEM coordinates in PTX order (innermost first),
    ``shared_offset`` the static byte offset of its shared operand from the shared block base,
    ``bytes`` its payload. ``completion`` names how it completes (a completion mechanism its family
    declares) and ``barrier`` is the mbarrier whose transaction count it completes
    (``completion == "mbarrier"``). ``fields`` are the static descriptor facts of its family (the
    family's :class:`PlanFields`). ``results`` are the kernel variables
    the instruction writes (register fragments), in the asm's output order."""

    opcode: str
    instance: tuple[int, ...]
    coords: tuple
    shared_offset: int
    bytes: int
    operands: tuple = ()
    asm: Asm | None = None
    completion: str = "none"
    barrier: Expr | None = None
    fields: PlanFields = PlanFields()
    results: tuple = ()

    def operand(self, role: str) -> Expr:
        for name, value in self.operands:
            if name == role:
                return value
        raise KeyError(role)

    def __getitem__(self, key: str):
        """Mapping-style access, as ``ck.plan`` entries were dicts before plans were typed
        (deprecated alias): the record's attributes, ``mbar`` (the barrier's text),
        ``tensormap`` and the family's ``fields``."""
        if key in ("opcode", "instance", "coords", "shared_offset", "bytes"):
            return getattr(self, key)
        if key == "mbar":
            return None if self.barrier is None else str(self.barrier)
        if key == "tensormap":
            return str(self.operand("tensormap"))
        return self.fields[key]

    def __repr__(self) -> str:
        """The readable line (``str``), not a dump of the operand trees and asm."""
        return f"<instruction {self}>"

    def __str__(self) -> str:
        parts = [self.opcode]
        if self.instance:
            parts.append(f"[{', '.join(map(str, self.instance))}]")
        if self.coords:
            parts.append("ptx coords {" + ", ".join(str(c) for c in self.coords) + "}")
        if any(role in ("shared", "descriptor") for role, _ in self.operands):
            parts.append(f"shared +{self.shared_offset}")
        parts.append(f"{self.bytes} B")
        if self.barrier is not None:
            parts.append(f"barrier {self.barrier}")
        elif self.completion != "none":
            parts.append(f"completes via {self.completion.replace('_', ' ')}")
        for role, value in self.operands:
            if (
                role in ("barrier", "size")
                or role.startswith("coord")
                or "[" in role
                or (
                    role == "shared"
                    and isinstance(value, SharedAddress)
                    and isinstance(value.offset, int)
                )
            ):
                continue  # shown above, or one register of a fragment the fields name
            parts.append(
                str(value)
                if isinstance(value, HostParam)
                else f"{'shared address' if role == 'shared' else role} {value}"
            )
        parts += [f"{k}={_field_text(v)}" for k, v in self.fields.items()]
        return "  ".join(parts)

    def to_json(self) -> dict:
        return {
            "opcode": self.opcode,
            "instance": list(self.instance),
            "coords": [expr_to_json(c) for c in self.coords],
            "shared_offset": self.shared_offset,
            "bytes": self.bytes,
            "operands": [[role, expr_to_json(v)] for role, v in self.operands],
            "asm": None
            if self.asm is None
            else {
                "template": self.asm.template,
                "outputs": list(self.asm.outputs),
                "inputs": list(self.asm.inputs),
                "memory": self.asm.memory,
                "comment": self.asm.comment,
            },
            "completion": self.completion,
            "barrier": None if self.barrier is None else expr_to_json(self.barrier),
            "fields": self.fields.to_json(),
            "results": [expr_to_json(v) for v in self.results],
        }

    @classmethod
    def from_json(cls, data: dict, fields: type[PlanFields] = PlanFields) -> PlanRecord:
        """The record :meth:`to_json` wrote, its fields of class ``fields`` (the family's;
        :meth:`PlanSchema.record` also checks the completion)."""
        asm = data["asm"]
        return cls(
            opcode=_str(data["opcode"]),
            instance=tuple(_int(i) for i in data["instance"]),
            coords=tuple(expr_from_json(c) for c in data["coords"]),
            shared_offset=_int(data["shared_offset"]),
            bytes=_int(data["bytes"]),
            operands=tuple((_str(role), expr_from_json(v)) for role, v in data["operands"]),
            asm=None
            if asm is None
            else Asm(
                _str(asm["template"]),
                tuple(map(_str, asm["outputs"])),
                tuple(map(_str, asm["inputs"])),
                bool(asm["memory"]),
                _str(asm["comment"]),
            ),
            completion=data["completion"],
            barrier=None if data["barrier"] is None else expr_from_json(data["barrier"]),
            fields=fields.from_json(data["fields"]),
            results=tuple(expr_from_json(v) for v in data.get("results", ())),
        )


def _int(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _field_text(value) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return (
            "(" + ", ".join(_field_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
        )
    return str(value)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value.value if isinstance(value, Enum) else value


def _tuples(value):
    """JSON data with its lists turned back into the tuples the IR holds."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


@dataclass(frozen=True)
class SiteRecord:
    """One tile call site after checking: its location, opcode, family and instruction plan (a
    list of :class:`PlanRecord` s; a :class:`RecordedPlan` when restored from a cache entry);
    ``predicate`` (a runtime bool) gates every instruction of the site."""

    location: Location
    opcode: str
    family: str
    plan: Sequence
    predicate: Expr | None = None

    def __getitem__(self, key: str):
        """Mapping-style access, as ``ck.plan`` entries were dicts before plans were typed
        (deprecated alias): ``location`` (text), ``opcode``, ``family``, ``instructions``."""
        if key == "location":
            return str(self.location)
        if key == "instructions":
            return self.plan
        if key in ("opcode", "family"):
            return getattr(self, key)
        raise KeyError(key)

    def __repr__(self) -> str:
        count = len(self.plan)
        return (
            f"<tile call site {self.location}: {self.opcode}, {count} instruction"
            f"{'' if count == 1 else 's'}>"
        )

    def __str__(self) -> str:
        head = f"{self.location}: tile call of family {self.family}"
        if self.predicate is not None:
            head += f"  if {self.predicate}"
        if not self.plan:
            return head + "\n  (no instruction issued)"
        return head + "".join(f"\n  {record}" for record in self.plan)


class Plan(list):
    """``ck.plan``: the kernel's tile call sites (:class:`SiteRecord`), in program order."""

    def __str__(self) -> str:
        return "\n".join(str(site) for site in self) or "(no tile calls)"

    def __repr__(self) -> str:
        """What the REPL shows for ``ck.plan``: a count, then the listing ``print`` gives (the
        records' typed fields are their attributes: ``ck.plan[0].plan[0].coords``...)."""
        sites, count = len(self), sum(len(site.plan) for site in self)
        head = (
            f"<jittile plan: {sites} tile call site{'' if sites == 1 else 's'}, {count} "
            f"native instruction{'' if count == 1 else 's'}>"
        )
        return f"{head}\n{self}" if self else head


# ------------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ArrayParam:
    """A tensor argument: element type, rank, static extents (None = dynamic), memory layout."""

    name: str
    dtype: DType
    ndim: int
    static_shape: tuple
    layout: str  # numba layout: "C" (contiguous) or "A" (strided)


@dataclass(frozen=True)
class ScalarParam:
    name: str
    dtype: DType


@dataclass(frozen=True)
class ConstexprParam:
    name: str
    value: object


@dataclass(frozen=True)
class TensorMapParam:
    """A caller-encoded ``jittile.TensorMap`` argument, passed as a grid-constant parameter."""

    name: str


# ------------------------------------------------------------------------------ host setup


@dataclass(frozen=True)
class HostTensorMap:
    """A TensorMap jittile encodes on the host at launch for a global region, passed as the kernel's
    grid-constant parameter ``param``."""

    param: str
    tensor: str
    region_starts: tuple[int, ...]
    region_extents: tuple
    data_type: str  # descriptor format: a dtype name, "tf32", "float4_e2m1fn"
    box: tuple[int, ...]  # outer-to-inner, as written
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


@dataclass(frozen=True)
class ArgumentAlignment:
    """A tensor argument whose data pointer must be ``bytes``-aligned at launch (a bulk copy reads
    it at 16-byte granules); ``why`` names the instruction that needs it."""

    tensor: str
    bytes: int
    why: str


# --------------------------------------------------------------------------------- launch


def launch_dims(value, what: str) -> tuple[int, int, int]:
    """A grid, block or cluster shape (an int or 1-3 positive ints) as (x, y, z)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    try:
        value = tuple(value)
    except TypeError:
        raise JittileError(
            f"{what} must be a positive int or a tuple of 1-3 positive ints, got {value!r}"
        ) from None
    if not 1 <= len(value) <= 3 or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value
    ):
        raise JittileError(
            f"{what} must be a positive int or a tuple of 1-3 positive ints, got {value!r}"
        )
    return value + (1,) * (3 - len(value))


@dataclass(frozen=True)
class LaunchConfig:
    """Grid, block and cluster dimensions (each an int or a 1-3 tuple), normalised to 3-tuples.

    ``T.cuda.LaunchConfig(grid=..., block=..., cluster=None)`` is the launch a kernel declares
    with ``T.device_entry``; a ``cluster`` (x, y, z) launches thread-block clusters."""

    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    cluster: tuple | None = None

    def __init__(self, grid=1, block=1, cluster=None):
        object.__setattr__(self, "grid", launch_dims(grid, "grid"))
        object.__setattr__(self, "block", launch_dims(block, "block"))
        object.__setattr__(
            self, "cluster", None if cluster is None else launch_dims(cluster, "cluster")
        )
        object.__setattr__(self, "_hash", hash((self.grid, self.block, self.cluster)))

    def __hash__(self) -> int:  # launches look configs up in a dict: hash once
        return self._hash

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


# ------------------------------------------------------------------------------ kernel IR


@dataclass
class KernelIR:
    """Everything later stages need besides the lowered function itself.

    It is also what a disk-cache entry keeps besides the cubin (as JSON, see :meth:`record`), so a
    cache hit can launch and report a kernel without lowering it again."""

    name: str
    params: list  # ArrayParam | ScalarParam | ConstexprParam | TensorMapParam, in call order
    host_tensormaps: list[HostTensorMap] = field(default_factory=list)
    alignments: list[ArgumentAlignment] = field(default_factory=list)
    shared_bytes: int = 0
    shared_align: int = 16
    launch: LaunchConfig | None = None  # from T.device_entry, or None
    sites: list[SiteRecord] = field(default_factory=list)

    @property
    def dynamic_shared(self) -> bool:
        """Above 48 KB jittile places its buffers in dynamic shared memory."""
        return self.shared_bytes > 48 * 1024

    @property
    def launch_shared_bytes(self) -> int:
        """The dynamic shared memory a launch requests: the planned bytes plus the slack that
        rounding the run-time base up to ``shared_align`` may take (the driver aligns it to 16);
        0 when the buffers are static."""
        if not self.dynamic_shared:
            return 0
        return self.shared_bytes + max(self.shared_align - 16, 0)

    @property
    def runtime_params(self) -> list:
        return [p for p in self.params if not isinstance(p, ConstexprParam)]

    @property
    def plan(self) -> Plan:
        return Plan(self.sites)

    def record(self, site_nodes: dict) -> dict:
        """Everything but the parameters as JSON data. ``site_nodes`` maps a site's location to
        the index of its call in the kernel's AST walk (or -1 for a site inlined from another
        file), which :meth:`restore` maps back to where that call is now."""
        launch = self.launch
        return {
            "name": self.name,
            "host_tensormaps": [asdict(t) for t in self.host_tensormaps],
            "alignments": [asdict(a) for a in self.alignments],
            "shared_bytes": self.shared_bytes,
            "shared_align": self.shared_align,
            "launch": None
            if launch is None
            else {
                "grid": list(launch.grid),
                "block": list(launch.block),
                "cluster": launch.cluster and list(launch.cluster),
            },
            "sites": [
                {
                    "node": site_nodes.get(s.location, -1),
                    "location": [s.location.filename, s.location.lineno, s.location.col_offset],
                    "opcode": s.opcode,
                    "family": s.family,
                    "predicate": None if s.predicate is None else expr_to_json(s.predicate),
                    "plan": [r.to_json() for r in s.plan],
                }
                for s in self.sites
            ],
        }

    @classmethod
    def restore(cls, data: dict, params: list, locate: Callable, schema: PlanSchema) -> KernelIR:
        """The IR :meth:`record` wrote, for ``params`` (equal to those it was lowered for: they are
        part of the cache key); ``locate(node_index, recorded_location)`` gives a site's current
        location; ``schema`` (``patterns.registry.plan_schema()``) the families' plan fields.
        Raises ValueError, KeyError or TypeError on data it did not write."""
        launch = data["launch"]

        def site(s: dict) -> SiteRecord:
            recorded = Location(
                _str(s["location"][0]), _int(s["location"][1]), _int(s["location"][2])
            )
            return SiteRecord(
                locate(s["node"], recorded),
                _str(s["opcode"]),
                _str(s["family"]),
                RecordedPlan(s["plan"], _str(s["family"]), schema),
                None if s["predicate"] is None else expr_from_json(s["predicate"]),
            )

        return cls(
            name=_str(data["name"]),
            params=list(params),
            host_tensormaps=[HostTensorMap(**_tuples(t)) for t in data["host_tensormaps"]],
            alignments=[ArgumentAlignment(**a) for a in data["alignments"]],
            shared_bytes=_int(data["shared_bytes"]),
            shared_align=_int(data["shared_align"]),
            launch=None if launch is None else LaunchConfig(**launch),
            sites=[site(s) for s in data["sites"]],
        )
