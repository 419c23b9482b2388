"""The raw-PTX instruction table, and ptxas assembling every entry and every parsed tile opcode.

NVVM never checks inline-asm text, so a bad template would only fail at link time with PTX line
numbers. These tests assemble each template (and each canonical TMA / tcgen05.cp opcode) with the
wheel's ptxas, batched into one module per target so that the whole check takes a few seconds, and
check that the recorded targets are needed: what the table says needs sm_100a fails on sm_90a.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
from collections import Counter, defaultdict
from itertools import product
from pathlib import Path

import pytest

from jittile.errors import ContractError, Location
from jittile.language.markers import opcode_from_attributes
from jittile.patterns.tma_opcodes import BulkTensorOpcode, parse_bulk_tensor
from jittile.patterns.tmem_copy_opcodes import parse_tcgen05_cp
from jittile.ptx.asm import AsmCall
from jittile.ptx.instructions import (
    INSTRUCTIONS,
    InstructionSpec,
    OperandKind,
    check_operands,
    lookup,
)
from jittile.targets import satisfies


def _find_ptxas() -> Path | None:
    """The ptxas of the ``nvidia-cuda-nvcc`` cu13 wheel (the one matching NVVM 13.5)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "cu13" / "bin" / "ptxas"
        if candidate.is_file():
            return candidate
    return None


PTXAS = _find_ptxas()
needs_ptxas = pytest.mark.skipif(
    PTXAS is None, reason="the nvidia-cuda-nvcc wheel's ptxas (nvidia/cu13/bin/ptxas) is absent"
)

_REGISTER = {"h": "%h", "r": "%r", "l": "%rd", "f": "%f"}


def instantiate(call: AsmCall, immediate: int = 1) -> str:
    """The template with each ``$N`` replaced by a declared register of its width (or the
    ``immediate`` for ``n``), as the backend's inline asm would receive them."""
    counters: Counter[str] = Counter()
    names = []
    for letter in call.outputs + call.inputs:
        if letter == "n":
            names.append(str(immediate))
            continue
        names.append(f"{_REGISTER[letter]}{counters[letter]}")
        counters[letter] += 1
    return re.sub(r"\$(\d+)", lambda m: names[int(m.group(1))], call.template)


def _entry_group(text: str) -> str:
    """ptxas refuses one function mixing .cta_group::1 and ::2, so each gets its own entry."""
    match = re.search(r"cta_group::(\d)", text)
    return f"g{match.group(1)}" if match else "any"


def assemble(target: str, items: dict[str, str], version: str = "9.5") -> dict[str, str]:
    """Assemble ``{label: PTX statement(s)}`` as one module; returns ``{label: ptxas error}`` for
    the items ptxas rejects (empty when all assemble)."""
    lines = [f".version {version}", f".target {target}", ".address_size 64", ""]
    owner: dict[int, str] = {}
    groups: dict[str, list[str]] = defaultdict(list)
    for label in items:
        groups[_entry_group(label)].append(label)
    for group, labels in groups.items():
        lines += [
            f".visible .entry jt_{group}()",
            "{",
            ".reg .b16 %h<4>;",
            ".reg .b32 %r<160>;",
            ".reg .b64 %rd<4>;",
            ".reg .f32 %f<4>;",
        ]
        for label in labels:
            for text in items[label].splitlines():
                lines.append(text)
                owner[len(lines)] = label
        lines += ["ret;", "}", ""]
    result = subprocess.run(
        [str(PTXAS), f"-arch={target}", "--input-as-string", "\n".join(lines), "-o", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors: dict[str, str] = {}
    for message in (result.stdout + result.stderr).splitlines():
        found = re.search(r"line (\d+); error", message)
        if found:
            errors.setdefault(owner.get(int(found.group(1)), "<module>"), message)
    if result.returncode and not errors:
        errors["<module>"] = result.stderr.strip()
    return errors


def _specs_for(target: str) -> dict[str, str]:
    return {
        op: _instantiate_spec(spec)
        for op, spec in INSTRUCTIONS.items()
        if satisfies(target, spec.requirement)
    }


def _instantiate_spec(spec) -> str:
    """``instantiate`` with the lowest immediate the entry allows."""
    return instantiate(spec.asm(), spec.immediate_range[0] if spec.immediate_range else 1)


# -- ptxas: every table entry --------------------------------------------------------------------


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_every_table_entry_assembles(target: str) -> None:
    items = _specs_for(target)
    hopper = {op for op, spec in INSTRUCTIONS.items() if not spec.opcode.startswith("tcgen05.")}
    blackwell = {op for op, spec in INSTRUCTIONS.items() if spec.requirement != "sm_90a"}
    assert set(items) == (blackwell if target == "sm_100a" else hopper)
    assert assemble(target, items) == {}


@needs_ptxas
def test_every_table_entry_is_covered_by_some_target() -> None:
    covered = set(_specs_for("sm_90a")) | set(_specs_for("sm_100a"))
    assert covered == set(INSTRUCTIONS)


@needs_ptxas
def test_sm100a_entries_are_rejected_on_sm90a() -> None:
    items = {
        op: instantiate(spec.asm())
        for op, spec in INSTRUCTIONS.items()
        if spec.requirement == "sm_100a"
    }
    assert set(assemble("sm_90a", items)) == set(items)


@needs_ptxas
def test_sm90_entries_are_rejected_on_sm80() -> None:
    # ptxas is laxer than the ISA for .release.cta/.relaxed.cta arrives and accepts them on sm_80;
    # the table follows the ISA (sm_90), so only check the entries ptxas also gates.
    lax = re.compile(r"^mbarrier\.arrive\.(release|relaxed)\.cta\.")
    items = {
        op: instantiate(spec.asm())
        for op, spec in INSTRUCTIONS.items()
        if spec.requirement == "sm_90" and not lax.match(op)
    }
    assert set(assemble("sm_80", items)) == set(items)


@needs_ptxas
def test_min_ptx_versions_suffice() -> None:
    """Each entry assembles at its recorded minimum PTX ISA version on its minimum target."""
    base = {"sm_80": "sm_80", "sm_90": "sm_90", "sm_90a": "sm_90a", "sm_100a": "sm_100a"}
    batches: dict[tuple[tuple[int, int], str], dict[str, str]] = defaultdict(dict)
    for op, spec in INSTRUCTIONS.items():
        batches[(spec.min_ptx, spec.requirement)][op] = _instantiate_spec(spec)
    for (version, requirement), items in batches.items():
        assert assemble(base[requirement], items, f"{version[0]}.{version[1]}") == {}


@needs_ptxas
def test_min_ptx_versions_are_needed_for_new_spellings() -> None:
    """One version below the minimum, the spellings the ISA introduced later fail."""
    samples = [
        "mbarrier.init.shared::cta.b64",
        "mbarrier.arrive.relaxed.cta.shared::cta.b64",
        "barrier.cluster.arrive.release",
        "mbarrier.try_wait.parity.acquire.cta.shared.b64",
        "mbarrier.arrive.shared::cluster.b64",
    ]
    for op in samples:
        spec = INSTRUCTIONS[op]
        major, minor = spec.min_ptx
        below = f"{major}.{minor - 1}" if minor else f"{major - 1}.8"
        assert op in assemble("sm_90", {op: instantiate(spec.asm())}, below), op


@pytest.mark.parametrize(
    ("semantics", "membars"),
    [
        ("", []),
        ("release.cta", []),
        ("relaxed.cluster", []),
        ("release.cluster", ["MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU"]),
    ],
)
def test_remote_arrive_fences_in_sass(semantics: str, membars: list) -> None:
    """What a remote arrive (through mapa) costs in SASS: the default .release.cta form (CUTLASS's
    ClusterBarrier::arrive) and .relaxed are a lone SYNCS.ARRIVE; .release.cluster puts two
    membars before it, twice per pipeline stage in a clustered GEMM (examples/gemm_bf16.py)."""
    from jittile.backend import toolchain
    from jittile.targets import Target

    arrive = ".".join(w for w in ("mbarrier.arrive", semantics, "shared::cluster.b64") if w)
    ptx = "\n".join(
        [
            ".version 8.6",
            ".target sm_90a",
            ".address_size 64",
            ".visible .entry remote_arrive(.param .u32 rank)",
            "{",
            ".reg .b32 %r<4>;",
            ".shared .align 8 .b64 bar;",
            "ld.param.u32 %r1, [rank];",
            "mov.u32 %r2, bar;",
            "mapa.shared::cluster.u32 %r3, %r2, %r1;",
            INSTRUCTIONS[arrive].template.replace("$0", "%r3"),
            "ret;",
            "}",
        ]
    )
    cubin, _ = toolchain.link_cubin(ptx, Target.parse("sm_90a"), "remote_arrive")
    opcodes = [
        line.split("*/")[-1].split()[0]
        for line in toolchain.disassemble(cubin).splitlines()
        if "MEMBAR" in line or "SYNCS.ARRIVE" in line
    ]
    assert opcodes == [*membars, "SYNCS.ARRIVE.TRANS64.RED.A1T0"]


# -- ptxas: parsed tile opcodes ------------------------------------------------------------------


def _bulk_tensor_candidates() -> list[str]:
    """Canonically ordered TMA opcodes over every qualifier choice (accepted or not)."""
    texts = []
    for rank in range(1, 6):
        dim = f"{rank}d"
        for dst, mode, multicast, group, hint in product(
            ("shared::cta", "shared::cluster"),
            ("", "tile", "tile::gather4"),
            ("", "multicast::cluster", "multicast::cluster::16b", "multicast::cluster::32b"),
            ("", "cta_group::1", "cta_group::2"),
            ("", "L2::cache_hint"),
        ):
            words = [
                "cp.async.bulk.tensor",
                dim,
                dst,
                "global",
                mode,
                "mbarrier::complete_tx::bytes",
                multicast,
                group,
                hint,
            ]
            texts.append(".".join(w for w in words if w))
        for mode, hint in product(("", "tile", "tile::scatter4"), ("", "L2::cache_hint")):
            words = ["cp.async.bulk.tensor", dim, "global", "shared::cta", mode, "bulk_group", hint]
            texts.append(".".join(w for w in words if w))
        for op, mode, hint in product(
            ("add", "min", "max", "inc", "dec", "and", "or", "xor"),
            ("", "tile"),
            ("", "L2::cache_hint"),
        ):
            words = [
                "cp.reduce.async.bulk.tensor",
                dim,
                "global",
                "shared::cta",
                op,
                mode,
                "bulk_group",
                hint,
            ]
            texts.append(".".join(w for w in words if w))
    return texts


def bulk_tensor_statement(text: str) -> str:
    """The opcode with hand-built operands: smem %r0, tensormap %rd0, coordinates %r1..,
    mbarrier %r10, ctaMask %h0 or %r11, cache policy %rd1."""
    op = parse_bulk_tensor(text)
    count = 5 if op.mode != "tile" else op.rank
    tensor = f"[%rd0, {{{', '.join(f'%r{i + 1}' for i in range(count))}}}]"
    tail = ""
    if op.multicast:
        tail += ", %r11" if op.multicast_bits == 32 else ", %h0"
    if op.cache_hint:
        tail += ", %rd1"
    if op.kind == "load":
        return f"{op.native_text} [%r0], {tensor}, [%r10]{tail};"
    return f"{op.native_text} {tensor}, [%r0]{tail};"


def _raw_bulk_statement(text: str) -> str:
    """Operands for an opcode the parser rejects, built from its words alone."""
    words = text.split(".")
    rank = next(int(w[0]) for w in words if w.endswith("d") and w[0].isdigit())
    count = 5 if any(w.startswith("tile::") for w in words) else rank
    tensor = f"[%rd0, {{{', '.join(f'%r{i + 1}' for i in range(count))}}}]"
    tail = ", %h0" if "multicast::cluster" in words else ""
    tail += ", %r11" if "multicast::cluster::32b" in words else ""
    tail += ", %h0" if "multicast::cluster::16b" in words else ""
    tail += ", %rd1" if "L2::cache_hint" in words else ""
    if words[5] == "global" or text.startswith("cp.reduce"):
        return f"{text} {tensor}, [%r0]{tail};"
    return f"{text} [%r0], {tensor}, [%r10]{tail};"


# The PTX ISA version that introduced each target (ptxas rejects older .version lines).
TARGET_MIN_PTX = {"sm_90": (7, 8), "sm_100": (8, 6), "sm_100a": (8, 6)}


@functools.cache
def _parsed_bulk_tensor() -> tuple[dict[str, BulkTensorOpcode], list[str]]:
    accepted, rejected = {}, []
    for text in _bulk_tensor_candidates():
        try:
            accepted[text] = parse_bulk_tensor(text)
        except ContractError:
            rejected.append(text)
    return accepted, rejected


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_107a"])
def test_parsed_bulk_tensor_opcodes_assemble_where_required(target: str) -> None:
    accepted, _ = _parsed_bulk_tensor()
    wanted = {
        text: bulk_tensor_statement(text)
        for text, op in accepted.items()
        if any(satisfies(target, req) for req in op.requirements[1])
    }
    assert wanted
    assert assemble(target, wanted) == {}


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_parsed_bulk_tensor_opcodes_fail_where_not_required(target: str) -> None:
    accepted, _ = _parsed_bulk_tensor()
    unmet = {
        text: bulk_tensor_statement(text)
        for text, op in accepted.items()
        if not any(satisfies(target, req) for req in op.requirements[1])
    }
    assert unmet
    assert set(assemble(target, unmet)) == set(unmet)


@needs_ptxas
def test_parsed_bulk_tensor_min_ptx_versions_suffice() -> None:
    accepted, _ = _parsed_bulk_tensor()
    batches: dict[tuple[tuple[int, int], str], dict[str, str]] = defaultdict(dict)
    for text, op in accepted.items():
        version, targets = op.requirements
        batches[(version, targets[0])][text] = bulk_tensor_statement(text)
    assert len(batches) >= 4
    for (version, target), items in batches.items():
        assert assemble(target, items, f"{version[0]}.{version[1]}") == {}, (version, target)
        below = (version[0], version[1] - 1)
        # One version lower fails each item, where the target itself exists at that version.
        if version > (8, 0) and below >= TARGET_MIN_PTX.get(target, version):
            failing = assemble(target, items, f"{below[0]}.{below[1]}")
            assert set(failing) == set(items), (version, target)


@needs_ptxas
def test_bulk_tensor_opcodes_the_parser_rejects_also_fail_in_ptxas() -> None:
    """In canonical order, the parser rejects exactly what ptxas rejects on a target that has
    every feature (multicast into shared::cta, gather4/scatter4 at rank != 2)."""
    _, rejected = _parsed_bulk_tensor()
    assert rejected
    items = {text: _raw_bulk_statement(text) for text in rejected}
    failing = set(assemble("sm_107a", items))
    assert failing == set(items)


@needs_ptxas
def test_multicast_is_legal_on_plain_sm90() -> None:
    """The ISA only advises sm_90a for multicast; it is legal from sm_90, as recorded."""
    text = (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster"
    )
    op = parse_bulk_tensor(text)
    assert op.requirements[1] == ["sm_90"] and "sm_90a" in op.advised_targets
    assert assemble("sm_90", {text: bulk_tensor_statement(text)}) == {}


def _tcgen05_cp_candidates() -> list[str]:
    texts = []
    for group, shape, multicast, fmt in product(
        ("cta_group::1", "cta_group::2"),
        ("128x256b", "4x256b", "128x128b", "64x128b", "32x128b"),
        ("", "warpx2::02_13", "warpx2::01_23", "warpx4"),
        ("", "b8x16.b6x16_p32", "b8x16.b4x16_p64"),
    ):
        texts.append(".".join(w for w in ("tcgen05.cp", group, shape, multicast, fmt) if w))
    return texts


@needs_ptxas
def test_tcgen05_cp_opcodes_agree_with_ptxas() -> None:
    accepted, rejected = {}, {}
    for text in _tcgen05_cp_candidates():
        try:
            accepted[text] = f"{parse_tcgen05_cp(text).native_text} [%r0], %rd0;"
        except ContractError:
            rejected[text] = f"{text} [%r0], %rd0;"
    assert len(accepted) == 36
    assert assemble("sm_100a", accepted) == {}
    assert set(assemble("sm_90a", accepted)) == set(accepted)
    assert set(assemble("sm_100a", rejected)) == set(rejected)


# -- the table itself ----------------------------------------------------------------------------

REQUIRED = [
    "mbarrier.init.shared.b64",
    "mbarrier.init.shared::cta.b64",
    "mbarrier.arrive.shared.b64",
    "mbarrier.arrive.shared::cta.b64",
    "mbarrier.arrive.expect_tx.shared.b64",
    "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",
    "mbarrier.arrive.expect_tx.release.cluster.shared::cta.b64",
    "mbarrier.try_wait.parity.shared.b64",
    "mbarrier.try_wait.parity.shared::cta.b64",
    "mbarrier.inval.shared.b64",
    "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
    "fence.proxy.async",
    "fence.proxy.async.shared::cta",
    "fence.proxy.async.global",
    "fence.mbarrier_init.release.cluster",
    "mapa.shared::cluster.u32",
    "mbarrier.arrive.release.cluster.shared::cluster.b64",
    "mbarrier.arrive.shared::cluster.b64",
    "cp.async.bulk.commit_group",
    "cp.async.bulk.wait_group",
    "cp.async.bulk.wait_group.read",
    "prefetch.tensormap",
    "elect.sync",
    "barrier.cluster.arrive",
    "barrier.cluster.arrive.release",
    "barrier.cluster.arrive.relaxed",
    "barrier.cluster.arrive.aligned",
    "barrier.cluster.arrive.release.aligned",
    "barrier.cluster.wait",
    "barrier.cluster.wait.acquire",
    "barrier.cluster.wait.aligned",
    "barrier.cluster.wait.acquire.aligned",
    "tcgen05.wait::ld.sync.aligned",
    "tcgen05.wait::st.sync.aligned",
    "tcgen05.fence::before_thread_sync",
    "tcgen05.fence::after_thread_sync",
] + [
    op
    for g in (1, 2)
    for op in (
        f"tcgen05.alloc.cta_group::{g}.sync.aligned.shared::cta.b32",
        f"tcgen05.dealloc.cta_group::{g}.sync.aligned.b32",
        f"tcgen05.relinquish_alloc_permit.cta_group::{g}.sync.aligned",
        f"tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.b64",
        f"tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.shared::cluster.b64",
        f"tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.shared::cluster"
        ".multicast::cluster.b64",
    )
]


@pytest.mark.parametrize("opcode", REQUIRED)
def test_required_opcodes_are_in_the_table(opcode: str) -> None:
    assert opcode in INSTRUCTIONS


# (shape, num) -> registers, from the ISA table "number of registers in vector r".
LDST_REGISTERS = {
    **{(s, n): n for s in ("32x32b", "16x64b") for n in (1, 2, 4, 8, 16, 32, 64, 128)},
    **{("16x128b", n): 2 * n for n in (1, 2, 4, 8, 16, 32, 64)},
    **{("16x256b", n): 4 * n for n in (1, 2, 4, 8, 16, 32)},
}


@pytest.mark.parametrize("pack", ["", ".pack::16b"])
def test_tcgen05_ld_variants_and_register_counts(pack: str) -> None:
    for (shape, num), count in LDST_REGISTERS.items():
        spec = INSTRUCTIONS[f"tcgen05.ld.sync.aligned.{shape}.x{num}{pack}.b32"]
        assert spec.outputs == (OperandKind.B32,) * count
        assert spec.inputs == (OperandKind.U32,)
        assert spec.template.endswith(f"}}, [${count}];")
    loads = [
        op for op in INSTRUCTIONS if op.startswith("tcgen05.ld.") and (".pack" in op) == bool(pack)
    ]
    assert len(loads) == len(LDST_REGISTERS)


@pytest.mark.parametrize("unpack", ["", ".unpack::16b"])
def test_tcgen05_st_variants_and_register_counts(unpack: str) -> None:
    for (shape, num), count in LDST_REGISTERS.items():
        spec = INSTRUCTIONS[f"tcgen05.st.sync.aligned.{shape}.x{num}{unpack}.b32"]
        assert spec.outputs == ()
        assert spec.inputs == (OperandKind.U32,) + (OperandKind.B32,) * count
        assert spec.template.startswith(f"tcgen05.st.sync.aligned.{shape}.x{num}")


def test_asm_call_of_a_predicate_result_is_scoped() -> None:
    call = INSTRUCTIONS["mbarrier.try_wait.parity.shared::cta.b64"].asm()
    assert call.outputs == ("r",) and call.inputs == ("r", "r")
    assert call.template.startswith("{") and call.template.endswith("}")
    assert "selp.u32 $0, 1, 0" in call.template and "[$1], $2" in call.template
    assert call.constraint_string == "=r,r,r,~{memory}"


def test_operand_kinds_and_constraints() -> None:
    letters = {kind: kind.constraint for kind in OperandKind}
    assert letters == {
        OperandKind.SHARED_ADDR: "r",
        OperandKind.GENERIC_PTR: "l",
        OperandKind.U16: "h",
        OperandKind.U32: "r",
        OperandKind.B32: "r",
        OperandKind.S32: "r",
        OperandKind.U64: "l",
        OperandKind.B64: "l",
        OperandKind.F32: "f",
        OperandKind.IMM: "n",
    }
    assert OperandKind.U16.bits == 16 and OperandKind.GENERIC_PTR.bits == 64


def test_operand_kinds_of_key_entries() -> None:
    sa, gp, u16, u32 = (
        OperandKind.SHARED_ADDR,
        OperandKind.GENERIC_PTR,
        OperandKind.U16,
        OperandKind.U32,
    )
    assert INSTRUCTIONS["mbarrier.init.shared.b64"].inputs == (sa, u32)
    assert INSTRUCTIONS["mbarrier.arrive.shared.b64"].template == (
        "mbarrier.arrive.shared.b64 _, [$0];"
    )
    assert INSTRUCTIONS["mbarrier.try_wait.parity.shared.b64"].outputs == (u32,)
    assert INSTRUCTIONS["cp.async.bulk.wait_group"].inputs == (OperandKind.IMM,)
    assert INSTRUCTIONS["prefetch.tensormap"].inputs == (gp,)
    assert INSTRUCTIONS["elect.sync"].inputs == (u32,)
    assert INSTRUCTIONS["elect.sync"].outputs == (u32,)
    alloc = "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32"
    assert INSTRUCTIONS[alloc].inputs == (sa, u32)
    assert INSTRUCTIONS["tcgen05.dealloc.cta_group::2.sync.aligned.b32"].inputs == (u32, u32)
    commit = "tcgen05.commit.cta_group::1.mbarrier::arrive::one"
    assert INSTRUCTIONS[f"{commit}.shared::cluster.b64"].inputs == (sa,)
    assert INSTRUCTIONS[f"{commit}.b64"].inputs == (gp,)  # generic addressing without a space
    assert INSTRUCTIONS[f"{commit}.shared::cluster.multicast::cluster.b64"].inputs == (sa, u16)
    assert INSTRUCTIONS["mapa.shared::cluster.u32"].inputs == (sa, u32)
    assert INSTRUCTIONS["mapa.shared::cluster.u32"].outputs == (u32,)


def test_requirements_follow_the_isa() -> None:
    expect = {
        "mbarrier.init.shared.b64": ((7, 0), "sm_80"),
        "mbarrier.arrive.expect_tx.shared.b64": ((8, 0), "sm_90"),
        "mbarrier.try_wait.parity.shared::cta.b64": ((7, 8), "sm_90"),
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64": ((8, 0), "sm_90"),
        "fence.proxy.async.shared::cta": ((8, 0), "sm_90"),
        "barrier.cluster.wait": ((7, 8), "sm_90"),
        "barrier.cluster.arrive.relaxed.aligned": ((8, 0), "sm_90"),
        "mapa.shared::cluster.u32": ((7, 8), "sm_90"),
        "mbarrier.arrive.shared::cluster.b64": ((8, 0), "sm_90"),
        "mbarrier.arrive.shared.b64": ((7, 8), "sm_80"),
        "tcgen05.fence::after_thread_sync": ((8, 6), "sm_100a"),
        "tcgen05.ld.sync.aligned.32x32b.x1.b32": ((8, 6), "sm_100a"),
    }
    for op, (ptx, target) in expect.items():
        assert (INSTRUCTIONS[op].min_ptx, INSTRUCTIONS[op].requirement) == (ptx, target), op


# -- lookup and operand checks: rejected and accepted --------------------------------------------


def test_lookup_accepts_known_opcodes_and_normalizes_spacing() -> None:
    spec = lookup(" mbarrier.init.shared.b64 ", "sm_90a")
    assert isinstance(spec, InstructionSpec) and spec.opcode == "mbarrier.init.shared.b64"


@pytest.mark.parametrize(
    "bad, good, words",
    [
        ("mbarrier.int.shared.b64", "mbarrier.init.shared.b64", ["'.int'", "did you mean '.init'"]),
        (
            "mbarrier.init.shared.b32",
            "mbarrier.init.shared.b64",
            ["'.b32'", "mbarrier.init.shared.b64"],
        ),
        ("fence.proxy.asinc", "fence.proxy.async", ["did you mean '.async'"]),
        (
            "barier.cluster.arrive",
            "barrier.cluster.arrive",
            ["did you mean 'barrier.cluster.arrive'"],
        ),
        ("mbarrier.init.shared", "mbarrier.init.shared.b64", ["incomplete", ".b64"]),
        (
            "tcgen05.ld.sync.aligned.16x256b.x64.b32",
            "tcgen05.ld.sync.aligned.16x256b.x32.b32",
            ["'.x64'", ".x32"],
        ),
        (
            "fence.proxy.async.shared::cta.extra",
            "fence.proxy.async.shared::cta",
            ["'.extra'", "complete opcode"],
        ),
    ],
)
def test_lookup_rejects_unknown_opcodes_with_a_suggestion(
    bad: str, good: str, words: list[str]
) -> None:
    with pytest.raises(ContractError) as info:
        lookup(bad, "sm_100a")
    assert info.value.parameter == "opcode" and info.value.opcode == bad
    for word in words:
        assert word in str(info.value)
    assert lookup(good, "sm_100a").opcode == good


def test_lookup_does_not_know_tile_opcodes() -> None:
    """The raw table leaves tile-pattern opcodes to the pattern registry (the frontend points
    raw calls of them to T.cuda.tile.apply: tests/test_layering.py)."""
    for text in (
        "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes",
        "tcgen05.cp.cta_group::1.128x128b",
    ):
        with pytest.raises(ContractError) as info:
            lookup(text, "sm_100a")
        assert info.value.parameter == "opcode"


def test_lookup_rejects_a_too_old_target() -> None:
    where = Location("k.py", 7, 4)
    with pytest.raises(ContractError) as info:
        lookup("tcgen05.fence::after_thread_sync", "sm_90a", where)
    message = str(info.value)
    assert message.startswith("k.py:7:4:") and "sm_100a" in message and "sm_90a" in message
    assert info.value.parameter == "target"
    assert lookup("tcgen05.fence::after_thread_sync", "sm_100a").requirement == "sm_100a"
    assert lookup("tcgen05.fence::after_thread_sync", "sm_103a")  # same family
    with pytest.raises(ContractError, match="sm_90"):
        lookup("elect.sync", "sm_80")
    assert lookup("elect.sync", "sm_90")


def test_check_operands() -> None:
    spec = lookup("mbarrier.init.shared.b64", "sm_90a")
    check_operands(spec, 2)
    with pytest.raises(ContractError) as info:
        check_operands(spec, 1, Location("k.py", 3, 8))
    assert info.value.parameter == "operands"
    assert "expects 2 operands (addr: shared_addr, count: u32), got 1" in str(info.value)
    assert str(info.value).startswith("k.py:3:8:")


def test_check_operands_with_destinations() -> None:
    spec = lookup("tcgen05.ld.sync.aligned.32x32b.x4.b32", "sm_100a")
    check_operands(spec, 1)
    check_operands(spec, 5, destinations=True)
    with pytest.raises(
        ContractError, match=r"expects 5 operands \(4 x dst: b32, taddr: u32\), got 2"
    ):
        check_operands(spec, 2, destinations=True)
    store = lookup("tcgen05.st.sync.aligned.32x32b.x2.b32", "sm_100a")
    check_operands(store, 3)
    with pytest.raises(
        ContractError, match=r"expects 3 operands \(taddr: u32, 2 x r: b32\), got 2"
    ):
        check_operands(store, 2)
    fence = lookup("fence.proxy.async", "sm_90")
    check_operands(fence, 0)
    with pytest.raises(ContractError, match=r"expects 0 operands \(none\), got 1"):
        check_operands(fence, 1)


@pytest.mark.parametrize(
    "parts, operands",
    [
        (["mbarrier", "init", "shared", "b64"], 2),
        (["mbarrier", "arrive", "expect_tx", "shared", "b64"], 2),
        (["fence", "proxy", "async_", "shared__cta"], 0),
        (["cp", "async_", "bulk", "commit_group"], 0),
        (["cp", "async_", "bulk", "wait_group"], 1),
        (["prefetch", "tensormap"], 1),
        (["tcgen05", "alloc", "cta_group__1", "sync", "aligned", "shared__cta", "b32"], 2),
        (
            [
                "tcgen05",
                "commit",
                "cta_group__1",
                "mbarrier__arrive__one",
                "shared__cluster",
                "b64",
            ],
            1,
        ),
        (["tcgen05", "fence__after_thread_sync"], 0),
        (["tcgen05", "wait__ld", "sync", "aligned"], 0),
        (["tcgen05", "relinquish_alloc_permit", "cta_group__1", "sync", "aligned"], 0),
        (["tcgen05", "dealloc", "cta_group__1", "sync", "aligned", "b32"], 2),
    ],
)
def test_seed_attribute_calls_resolve(parts: list[str], operands: int) -> None:
    """Every raw call the seed documents, in its attribute spelling, with its operand count."""
    check_operands(lookup(opcode_from_attributes(parts), "sm_100a"), operands)


def test_seed_subscript_call_passes_its_destination() -> None:
    spec = lookup("tcgen05.ld.sync.aligned.32x32b.x1.b32", "sm_100a")
    check_operands(spec, 2, destinations=True)  # (word[0], taddr)
