"""Every dense wgmma form the contract accepts assembles for sm_90a: each type combination and
accumulator, every legal N, A from a descriptor (K-major, and MN-major where the type may be
transposed) or from registers, scale-d static or at run time, negated inputs, .satfinite (a
static scale-d of 0 is compiled by the kernels of test_wgmma_contract.py and test_gpu_wgmma.py:
here it would cut the chain of accumulators that keeps ptxas from removing earlier MMAs). The
asm comes from the pattern itself (``instruction_asm``); ptxas assembles all of it in one module
and the SASS holds one HGMMA/QGMMA/IGMMA per instruction."""

import re
import subprocess

import pytest
from test_ptx_instructions import PTXAS, needs_ptxas

from jittile.errors import Location
from jittile.patterns.base import CallSite
from jittile.patterns.wgmma import (
    FLOAT_N,
    INPUT_TYPES,
    INTEGER_N,
    check_types,
    instruction_asm,
    parse_wgmma,
)
from jittile.targets import Target


def _forms():
    """(opcode text, A majors to try) for every legal dense form."""
    fp8 = ("e4m3", "e5m2")
    pairs = [
        ("f16", "f16", "f16"),
        ("f32", "f16", "f16"),
        ("f32", "bf16", "bf16"),
        ("f32", "tf32", "tf32"),
    ]
    pairs += [(d, a, b) for d in ("f16", "f32") for a in fp8 for b in fp8]
    pairs += [("s32", a, b) for a in ("s8", "u8") for b in ("s8", "u8")]
    for dtype, a, b in pairs:
        k = INPUT_TYPES[a].k
        integer = dtype == "s32"
        for n in INTEGER_N if integer else FLOAT_N:
            for satfinite in (False, True) if integer else (False,):
                shape = f"m64n{n}k{k}" + (".satfinite" if satfinite else "")
                yield f"wgmma.mma_async.sync.aligned.{shape}.{dtype}.{a}.{b}", n


def _site(opcode: str) -> CallSite:
    return CallSite(Location("forms.py", 1, 0), opcode, [], {}, {}, Target.from_name("sm_90a"))


def _instantiate(asm) -> str:
    names = []
    for index, letter in enumerate(asm.outputs + asm.inputs):
        if letter.isdigit():
            names.append(names[int(letter)])
        elif letter == "f":
            names.append(f"%f{index}")
        elif letter == "r" and index < len(asm.outputs):
            names.append(f"%r{index}")
        elif letter == "r":  # an input register: A fragments and the runtime scale-d
            names.append("%r200")
        else:
            names.append("%rd1")
    return re.sub(r"\$(\d+)", lambda m: names[int(m.group(1))], asm.template)


def _statements():
    for opcode, n in _forms():
        site = _site(opcode)
        op = parse_wgmma(opcode, site.location)
        check_types(site, op)  # the contract accepts it
        variants = [("K", "K", 1, 1)]  # scale-d 1: each MMA reads the previous one's registers
        if n == 64:  # the other operand forms on one N per type
            variants += [(None, "K", "runtime", 1), ("K", "K", "runtime", 1)]
            if op.atype.transposable:
                variants += [("MN", "MN", 1, 1), (None, "MN", 1, 1)]
            if not op.integer:
                variants += [("K", "K", 1, -1)]
        for a_major, b_major, scale_d, scale_a in variants:
            yield instruction_asm(
                op,
                a_major,
                b_major,
                "runtime" if scale_d == "runtime" else scale_d,
                scale_a,
                scale_a,
            )


def test_the_forms_cover_the_isa():
    forms = list(_forms())
    assert len(forms) == 12 * 32 + 4 * 2 * 18  # twelve floating combinations, four integer


@needs_ptxas
def test_every_form_assembles_to_hgmma(tmp_path):
    statements = [_instantiate(asm) for asm in _statements()]
    body = "\n".join(statements)
    module = "\n".join(
        [
            ".version 8.5",
            ".target sm_90a",
            ".address_size 64",
            ".visible .entry forms()",
            "{",
            ".reg .f32 %f<300>;",
            ".reg .b32 %r<300>;",
            ".reg .b64 %rd<2>;",
            "mov.b64 %rd1, 0;",
            "mov.b32 %r200, 1;",
            "wgmma.fence.sync.aligned;",
            body,
            "wgmma.commit_group.sync.aligned;",
            "wgmma.wait_group.sync.aligned 0;",
            *[f"st.global.f32 [%rd1+{4 * i}], %f{i};" for i in range(128)],
            *[f"st.global.b32 [%rd1+{512 + 4 * i}], %r{i};" for i in range(128)],
            "ret;",
            "}",
        ]
    )
    cubin, source = tmp_path / "forms.cubin", tmp_path / "forms.ptx"
    source.write_text(module)
    result = subprocess.run(
        [str(PTXAS), "-arch=sm_90a", str(source), "-o", str(cubin)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[:2000]
    nvdisasm = PTXAS.parent / "nvdisasm"
    if not nvdisasm.exists():
        pytest.skip("nvdisasm is absent: the forms assembled, their SASS is unread")
    sass = subprocess.run(
        [str(nvdisasm), str(cubin)], capture_output=True, text=True, timeout=120
    ).stdout
    # HGMMA (16-bit and tf32 inputs), QGMMA (fp8), IGMMA (integer): every form shows up with
    # its shape and types, and (almost) every instruction survives as one
    found = set(re.findall(r"\b([HQI]GMMA\.64x\d+x\d+(?:\.[A-Z0-9]+)*)", sass))
    assert {_sass_name(opcode) for opcode, _ in _forms()} <= found
    assert len(re.findall(r"\b[HQI]GMMA\.64x", sass)) >= 0.99 * len(statements)


def _sass_name(opcode: str) -> str:
    """The SASS mnemonic ptxas gives a wgmma opcode (e.g. ``HGMMA.64x64x16.F32.BF16``)."""
    *_, shape, dtype, a, b = opcode.split(".")
    satfinite = ".satfinite." in opcode
    if satfinite:
        shape = opcode.split(".")[4]
    n, k = re.fullmatch(r"m64n(\d+)k(\d+)", shape).groups()
    head = f"64x{n}x{k}"
    if a in ("s8", "u8"):
        return f"IGMMA.{head}.{a.upper()}.{b.upper()}" + (".SAT" if satfinite else "")
    if a in ("e4m3", "e5m2"):
        return f"QGMMA.{head}.{dtype.upper()}.{a.upper()}.{b.upper()}"
    if a == "f16":
        return f"HGMMA.{head}.{dtype.upper()}"
    return f"HGMMA.{head}.F32.{a.upper()}"
