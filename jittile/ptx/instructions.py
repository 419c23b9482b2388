"""The instruction table for raw ``T.ptx.*`` calls: operand kinds, minimum PTX ISA and target,
and the inline-asm template of every opcode a kernel may issue directly.

Families are generated from their ISA syntax (qualifier products) rather than listed by hand, so one
rule change reaches every variant. Versions and targets come from each instruction's "PTX ISA notes"
and "Target ISA notes"; every entry is assembled by ptxas in the tests.

Results: register outputs come first in the template (``$0...``), inputs follow. A predicate result
(``mbarrier.try_wait``, ``elect.sync``) is returned as a u32 0/1 through ``selp`` inside a braced
scope, so the predicate register stays local when the asm is inlined more than once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import groupby, product
from types import MappingProxyType

from ..errors import ContractError, Location
from ..targets import Target
from .asm import AsmCall, operand_list, scoped
from .grammar import did_you_mean, split_opcode
from .opcodes import check_target
from .operands import OperandKind


@dataclass(frozen=True)
class InstructionSpec:
    """One raw PTX instruction: operands, where it assembles, and its asm template."""

    opcode: str
    inputs: tuple[OperandKind, ...]
    outputs: tuple[OperandKind, ...]
    min_ptx: tuple[int, int]
    requirement: str
    template: str
    input_names: tuple[str, ...]
    # (barrier operand, byte-count operand) of an instruction that sets an mbarrier's expected
    # transaction bytes, so that the frontend can check them against the loads completing on it.
    tx_count: tuple[int, int] | None = None
    # (lowest, highest, multiple of) for compile-time integer operands the ISA restricts
    immediate_range: tuple[int, int, int] | None = None
    # whether it initialises the mbarrier at operand 0 (a kernel that initialises none is a
    # fragment that byte accounting does not judge)
    initialises: bool = False
    # its part in the proxy rules: GENERIC_SHARED_WRITE (operand 0 is a shared address it writes
    # through the generic proxy) or ASYNC_SHARED_FENCE (a proxy fence covering shared memory)
    proxy: str | None = None

    @property
    def warp_aligned(self) -> bool:
        """Whether the opcode carries ``.aligned``: every thread of the warp must execute this
        same instruction together (PTX ISA: executing it in divergent code is undefined)."""
        return "aligned" in self.opcode.split(".")

    def asm(self) -> AsmCall:
        return AsmCall(
            self.template,
            tuple(k.constraint for k in self.outputs),
            tuple(k.constraint for k in self.inputs),
            memory=True,
            comment=self.opcode,
        )

    def describe_operands(self, destinations: bool = False) -> str:
        """``addr: shared_addr, count: u32``; runs of one operand collapse to ``4 x r: b32``.
        With ``destinations`` the result registers lead, as ``dst``."""
        pairs = [("dst", kind) for kind in self.outputs] if destinations else []
        pairs += zip(self.input_names, self.inputs)
        parts = []
        for (name, kind), run in groupby(pairs):
            count = len(list(run))
            parts.append(
                f"{count} x {name}: {kind.name.lower()}"
                if count > 1
                else f"{name}: {kind.name.lower()}"
            )
        return ", ".join(parts) or "none"


GENERIC_SHARED_WRITE = "generic_shared_write"
ASYNC_SHARED_FENCE = "async_shared_fence"
# The instructions that set an mbarrier's expected transaction bytes, for messages.
ARMING_INSTRUCTIONS = "mbarrier.arrive.expect_tx or mbarrier.expect_tx"


def arming_call(barrier: str, nbytes: int) -> str:
    """The kernel-language call that arms ``barrier`` for ``nbytes`` transaction bytes."""
    return f"T.ptx.mbarrier.arrive.expect_tx.shared.b64({barrier}, T.uint32({nbytes}))"


# The fence that makes shared-memory writes of the generic proxy visible to the async proxy.
ASYNC_SHARED_FENCE_CALL = "T.ptx.fence.proxy.async_.shared__cta()"

_TABLE: dict[str, InstructionSpec] = {}
_SA, _GP, _U16, _U32, _B32, _F32, _IMM = (
    OperandKind.SHARED_ADDR,
    OperandKind.GENERIC_PTR,
    OperandKind.U16,
    OperandKind.U32,
    OperandKind.B32,
    OperandKind.F32,
    OperandKind.IMM,
)


def _add(
    opcode: str,
    template: str,
    inputs: Iterable[tuple[str, OperandKind]] = (),
    outputs: Iterable[OperandKind] = (),
    *,
    ptx: tuple[int, int],
    target: str,
    tx_count: tuple[int, int] | None = None,
    immediate_range: tuple[int, int, int] | None = None,
    proxy: str | None = None,
    initialises: bool = False,
) -> None:
    """Register ``opcode``; ``{op}`` in ``template`` stands for the opcode itself."""
    pairs = tuple(inputs)
    _TABLE[opcode] = InstructionSpec(
        opcode=opcode,
        inputs=tuple(kind for _, kind in pairs),
        outputs=tuple(outputs),
        min_ptx=ptx,
        requirement=target,
        template=template.replace("{op}", opcode),
        input_names=tuple(name for name, _ in pairs),
        tx_count=tx_count,
        immediate_range=immediate_range,
        proxy=proxy,
        initialises=initialises,
    )


def _dotted(*words: str) -> str:
    """Join the non-empty qualifier words with dots."""
    return ".".join(w for w in words if w)


def _predicate_result(body: str) -> str:
    """Template returning the predicate ``%jt_p`` that ``body`` sets, as u32 ``$0``."""
    return scoped(f".reg .pred %jt_p;\n{body}\nselp.u32 $0, 1, 0, %jt_p;")


def _mbarrier() -> None:
    # mbarrier.init / inval: PTX 7.0, sm_80; the .shared::cta spelling needs PTX 7.8.
    for space in ("shared", "shared::cta"):
        ptx = (7, 0) if space == "shared" else (7, 8)
        _add(
            f"mbarrier.init.{space}.b64",
            "{op} [$0], $1;",
            [("addr", _SA), ("count", _U32)],
            ptx=ptx,
            target="sm_80",
            initialises=True,
        )
        _add(f"mbarrier.inval.{space}.b64", "{op} [$0];", [("addr", _SA)], ptx=ptx, target="sm_80")
    # arrive: the state result is discarded with the sink '_' (PTX 7.8). .release/.cta/.cluster
    # and .shared::cluster (a remote barrier, through mapa) need PTX 8.0 and sm_90, .relaxed PTX
    # 8.6. arrive.expect_tx needs PTX 8.0 and sm_90 in every form. The semantics default to
    # .release.cta: a remote arrive in that form (CUTLASS's ClusterBarrier::arrive) assembles,
    # like .relaxed, to a lone SYNCS.ARRIVE, where .release.cluster puts a MEMBAR.ALL.GPU before
    # it (ptxas of nvJitLink 13, sm_90a; tests/test_ptx_instructions.py reads the SASS).
    semantics = ("", "release.cta", "release.cluster", "relaxed.cta", "relaxed.cluster")
    for sem, space in product(semantics, ("shared", "shared::cta", "shared::cluster")):
        remote = space == "shared::cluster"
        ptx = (8, 6) if sem.startswith("relaxed") else (8, 0) if sem or remote else (7, 8)
        _add(
            _dotted("mbarrier.arrive", sem, space, "b64"),
            "{op} _, [$0];",
            [("addr", _SA)],
            ptx=ptx,
            target="sm_90" if sem or remote else "sm_80",
        )
        _add(
            _dotted("mbarrier.arrive.expect_tx", sem, space, "b64"),
            "{op} _, [$0], $1;",
            [("addr", _SA), ("tx_count", _U32)],
            ptx=max(ptx, (8, 0)),
            target="sm_90",
            tx_count=(0, 1),
        )
    # try_wait.parity: PTX 7.8, sm_90; .acquire.{cta,cluster} PTX 8.0.
    for sem, space in product(("", "acquire.cta", "acquire.cluster"), ("shared", "shared::cta")):
        _add(
            _dotted("mbarrier.try_wait.parity", sem, space, "b64"),
            _predicate_result("{op} %jt_p, [$1], $2;"),
            [("addr", _SA), ("parity", _U32)],
            [_U32],
            ptx=(8, 0) if sem else (7, 8),
            target="sm_90",
        )
    # expect_tx: PTX 8.0, sm_90.
    for scope, space in product(("cta", "cluster"), ("shared", "shared::cta", "shared::cluster")):
        _add(
            f"mbarrier.expect_tx.relaxed.{scope}.{space}.b64",
            "{op} [$0], $1;",
            [("addr", _SA), ("tx_count", _U32)],
            ptx=(8, 0),
            target="sm_90",
            tx_count=(0, 1),
        )


def _fences_and_groups() -> None:
    # fence.proxy.async{.global|.shared::cta|.shared::cluster}, fence.mbarrier_init: PTX 8.0, sm_90.
    # Without a state space the proxy fence covers every space; .global leaves shared out.
    for space in ("", "global", "shared::cta", "shared::cluster"):
        _add(
            _dotted("fence.proxy.async", space),
            "{op};",
            ptx=(8, 0),
            target="sm_90",
            proxy=None if space == "global" else ASYNC_SHARED_FENCE,
        )
    _add("fence.mbarrier_init.release.cluster", "{op};", ptx=(8, 0), target="sm_90")
    # mapa: the shared::cluster address of the variable at a shared::cta address in the CTA of
    # a cluster rank (for a remote mbarrier arrive, say). PTX 7.8, sm_90.
    _add(
        "mapa.shared::cluster.u32",
        "{op} $0, $1, $2;",
        [("addr", _SA), ("rank", _U32)],
        [_U32],
        ptx=(7, 8),
        target="sm_90",
    )
    _add("prefetch.tensormap", "{op} [$0];", [("tensormap", _GP)], ptx=(8, 0), target="sm_90")
    # createpolicy.fractional (fraction 1.0 by default): the 64-bit L2 cache-policy operand of
    # .L2::cache_hint forms. PTX 7.4, sm_80.
    for priority in ("evict_last", "evict_normal", "evict_first", "evict_unchanged"):
        _add(
            f"createpolicy.fractional.L2::{priority}.b64",
            "{op} $0;",
            (),
            [OperandKind.B64],
            ptx=(7, 4),
            target="sm_80",
        )
    _add(
        "elect.sync",
        _predicate_result("{op} _|%jt_p, $1;"),
        [("membermask", _U32)],
        [_U32],
        ptx=(8, 0),
        target="sm_90",
    )
    # barrier.cluster: PTX 7.8, sm_90; the .release/.relaxed/.acquire semantics need PTX 8.0.
    for sem, aligned in product(("", "release", "relaxed"), ("", "aligned")):
        _add(
            _dotted("barrier.cluster.arrive", sem, aligned),
            "{op};",
            ptx=(8, 0) if sem else (7, 8),
            target="sm_90",
        )
    for sem, aligned in product(("", "acquire"), ("", "aligned")):
        _add(
            _dotted("barrier.cluster.wait", sem, aligned),
            "{op};",
            ptx=(8, 0) if sem else (7, 8),
            target="sm_90",
        )


# tcgen05.ld/st: register count per .num for each shape (PTX ISA, tcgen05.ld, "number of registers
# in vector r"): 32x32b and 16x64b take num registers (.x1-.x128), 16x128b 2*num (.x1-.x64),
# 16x256b 4*num (.x1-.x32). .pack::16b/.unpack::16b do not change the count.
_TCGEN05_LDST_SHAPES = {
    "32x32b": (1, 128),
    "16x64b": (1, 128),
    "16x128b": (2, 64),
    "16x256b": (4, 32),
}


def _tcgen05() -> None:
    # Every tcgen05 instruction: PTX 8.6, sm_100a (and its family).
    add = partial(_add, ptx=(8, 6), target="sm_100a")
    for group in ("cta_group::1", "cta_group::2"):
        add(
            f"tcgen05.alloc.{group}.sync.aligned.shared::cta.b32",
            "{op} [$0], $1;",
            [("dst", _SA), ("ncols", _U32)],
        )
        add(
            f"tcgen05.dealloc.{group}.sync.aligned.b32",
            "{op} $0, $1;",
            [("taddr", _U32), ("ncols", _U32)],
        )
        add(f"tcgen05.relinquish_alloc_permit.{group}.sync.aligned", "{op};")
        # Without a state space the barrier address is generic (64-bit), with .shared::cluster
        # it is a shared-window address; the multicast mask is 16 bits wide.
        for space, multicast in product(("", "shared::cluster"), ("", "multicast::cluster")):
            inputs = [("mbar", _SA if space else _GP)] + ([("cta_mask", _U16)] if multicast else [])
            template = "{op} [$0], $1;" if multicast else "{op} [$0];"
            add(
                _dotted(f"tcgen05.commit.{group}.mbarrier::arrive::one", space, multicast, "b64"),
                template,
                inputs,
            )
    for shape, (per_num, max_num) in _TCGEN05_LDST_SHAPES.items():
        for num in (n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n <= max_num):
            count = per_num * num
            for pack in ("", "pack::16b"):
                add(
                    _dotted("tcgen05.ld.sync.aligned", shape, f"x{num}", pack, "b32"),
                    f"{{op}} {{{operand_list(0, count)}}}, [${count}];",
                    [("taddr", _U32)],
                    [_B32] * count,
                )
            for unpack in ("", "unpack::16b"):
                add(
                    _dotted("tcgen05.st.sync.aligned", shape, f"x{num}", unpack, "b32"),
                    f"{{op}} [$0], {{{operand_list(1, count)}}};",
                    [("taddr", _U32)] + [("r", _B32)] * count,
                )
    for kind in ("ld", "st"):
        add(f"tcgen05.wait::{kind}.sync.aligned", "{op};")
    for when in ("before", "after"):
        add(f"tcgen05.fence::{when}_thread_sync", "{op};")


def _warpgroups_and_registers() -> None:
    add = partial(_add, ptx=(8, 0), target="sm_90a")
    # setmaxnreg: a warpgroup's per-thread register budget (24..256, a multiple of 8), PTX 8.0,
    # sm_90a; ptxas needs the kernel's block size (.maxntid) to use it.
    for direction in ("inc", "dec"):
        add(
            f"setmaxnreg.{direction}.sync.aligned.u32",
            "{op} $0;",
            [("count", _IMM)],
            immediate_range=(24, 256, 8),
        )
    # cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo: two floats rounded into one packed register, hi in
    # the upper half (PTX 7.0, sm_80); relu clamps negatives to zero.
    for relu, packed in product(("", "relu"), ("bf16x2", "f16x2")):
        _add(
            _dotted("cvt.rn", relu, packed, "f32"),
            "{op} $0, $1, $2;",
            [("hi", _F32), ("lo", _F32)],
            [_B32],
            ptx=(7, 0),
            target="sm_80",
        )
    # st.shared: one 32-bit word or a 16-byte vector of four (the epilogue's stores).
    _add(
        "st.shared.b32",
        "{op} [$0], $1;",
        [("addr", _SA), ("value", _B32)],
        ptx=(7, 0),
        target="sm_80",
        proxy=GENERIC_SHARED_WRITE,
    )
    _add(
        "st.shared.v4.b32",
        "{op} [$0], {$1, $2, $3, $4};",
        [("addr", _SA)] + [("value", _B32)] * 4,
        ptx=(7, 0),
        target="sm_80",
        proxy=GENERIC_SHARED_WRITE,
    )
    # stmatrix: a warp stores 1, 2 or 4 8x8 matrices of b16 from mma-fragment registers (one
    # packed pair per matrix per thread); lanes 8i..8i+7 give the row addresses of matrix i.
    # .trans stores them transposed. PTX 7.8, sm_90.
    for count, trans in product((1, 2, 4), ("", "trans")):
        _add(
            _dotted("stmatrix.sync.aligned.m8n8", f"x{count}", trans, "shared.b16"),
            f"{{op}} [$0], {{{operand_list(1, count)}}};",
            [("addr", _SA)] + [("r", _B32)] * count,
            ptx=(7, 8),
            target="sm_90",
            proxy=GENERIC_SHARED_WRITE,
        )
    # Named barriers: a subset of the block's warps (count threads) meets on barrier id 0..15.
    for sync in ("bar.sync", "bar.arrive"):
        _add(sync, "{op} $0, $1;", [("id", _U32), ("count", _U32)], ptx=(7, 0), target="sm_80")


_mbarrier()
_fences_and_groups()
_tcgen05()
_warpgroups_and_registers()


def _companions() -> None:
    """The raw instructions the opcode families declare (their fences, commits and waits)."""
    from ..patterns import registry

    for _, companion in registry.companions():
        _add(
            companion.opcode,
            companion.template,
            companion.inputs,
            ptx=companion.ptx,
            target=companion.target,
            immediate_range=companion.immediate_range,
        )


_companions()

INSTRUCTIONS: Mapping[str, InstructionSpec] = MappingProxyType(_TABLE)


def lookup(opcode: str, target: str | Target, location: Location | None = None) -> InstructionSpec:
    """The table entry for ``opcode``, checked against ``target``.

    Raises :class:`ContractError` with parameter ``opcode`` for an opcode that is not in the table
    (naming the first unknown qualifier and the closest known opcode), and with parameter ``target``
    when ``target`` is too old for it.
    """
    native = ".".join(split_opcode(opcode, location))
    spec = _TABLE.get(native)
    if spec is None:
        raise ContractError(
            _unknown_opcode_message(native), location, opcode=opcode, parameter="opcode"
        )
    check_target(spec.requirement, target, native, location)
    return spec


def check_operands(
    spec: InstructionSpec,
    count: int,
    location: Location | None = None,
    *,
    destinations: bool = False,
) -> None:
    """Raise :class:`ContractError` (parameter ``operands``) unless a call passes ``count``
    operands.

    With ``destinations`` the call also passes its result registers first, in PTX order (as
    ``T.ptx["tcgen05.ld..."](dst, taddr)`` does); otherwise results are returned.
    """
    expected = len(spec.inputs) + (len(spec.outputs) if destinations else 0)
    if count == expected:
        return
    raise ContractError(
        f"expects {expected} operand{'' if expected == 1 else 's'} "
        f"({spec.describe_operands(destinations)}), got {count}",
        location,
        opcode=spec.opcode,
        parameter="operands",
    )


def _unknown_opcode_message(native: str) -> str:
    """Name the first qualifier that no known opcode continues with, and the closest opcode."""
    words = native.split(".")
    known = [key.split(".") for key in _TABLE]
    for depth, word in enumerate(words):
        continuations = {k[depth] for k in known if len(k) > depth and k[:depth] == words[:depth]}
        if word not in continuations:
            break
    else:
        depth = len(words)
        continuations = {k[depth] for k in known if len(k) > depth and k[:depth] == words}
    closest = difflib.get_close_matches(native, list(_TABLE), n=1, cutoff=0.0)
    mean = f" (did you mean '{closest[0]}'?)" if closest else ""
    after = f" after '{'.'.join(words[:depth])}'" if depth else ""
    options = ", ".join(f".{c}" for c in sorted(continuations, key=lambda c: (len(c), c))[:12])
    if depth == len(words):
        return f"is incomplete: it continues with one of {options}{mean}"
    if not continuations:
        return (
            f"unknown qualifier '.{words[depth]}': '{'.'.join(words[:depth])}' is already a "
            f"complete opcode"
        )
    if depth == 0:
        return f"'{words[0]}' is not a known raw PTX instruction{mean}"
    hint = did_you_mean(words[depth], continuations)
    closest_text = f"; closest known opcode: '{closest[0]}'" if closest else ""
    return f"unknown qualifier '.{words[depth]}'{after}{hint}; known: {options}{closest_text}"
