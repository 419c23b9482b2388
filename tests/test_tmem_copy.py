"""The tcgen05.cp tile pattern (jittile/patterns/tmem_copy.py), CPU only.

Kernels are compiled for sm_100a (no GPU needed) and checked through their plan, PTX and SASS; every
legality condition of the specification is exercised both violated and just satisfied, and each
rejection is a ContractError naming the line, the opcode and the parameter.
"""

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lines import line_of

import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.backend.toolchain import sass_opcodes
from jittile.dtypes import dtype as lookup_dtype
from jittile.errors import ContractError, Location
from jittile.ir import DescriptorWord, SharedAddress, Special, Var
from jittile.layout import R, S, TileLayout, resolve_layout, swizzle
from jittile.patterns import registry
from jittile.patterns.base import CallSite, SharedBuffer, SharedRegion, TmemRegion
from jittile.patterns.descriptors import SmemDescriptor, derive_walk
from jittile.patterns.tmem_copy import PATTERN, atom_lane, atom_replicas
from jittile.patterns.tmem_copy_opcodes import parse_tcgen05_cp
from jittile.targets import Target

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
CP = "tcgen05.cp.cta_group::1.128x128b"
LANES_128x4 = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")


def _line(marker: str) -> int:
    return line_of(HERE, marker)


def utccp(ck) -> int:
    return sum(n for op, n in sass_opcodes(ck.sass).items() if op.startswith("UTCCP"))


def instructions(ck) -> list[dict]:
    return [i for site in ck.plan if site["family"] == "tcgen05.cp" for i in site["instructions"]]


def rejects(kernel, *, parameter: str, line: int, opcode: str = CP, target: str = "sm_100a",
            match: str | None = None) -> ContractError:
    with pytest.raises(ContractError) as info:
        kernel.compile(target=target)
    err = info.value
    assert err.parameter == parameter, str(err)
    assert err.lineno == line, str(err)
    assert err.opcode == opcode, str(err)
    assert err.filename == str(HERE)
    if match is not None:
        assert match in str(err), str(err)
    return err


# ------------------------------------------------------------------------------ kernel factory
def copy_kernel(opcode: str, tmem_shape, tmem_layout, smem_shape, smem_layout="default", *,
                align: int = 16, rows=None, repeat: bool = False, dtype: str = "uint32",
                tmem_dtype: str = "uint32"):
    """A kernel issuing ``opcode`` from ``shared`` (rows ``rows`` of the row axis, all if None) into
    the whole TMEM tensor ``mem``; ``repeat`` says the operands have one leading repeat axis."""
    r0, r1 = rows if rows is not None else (0, smem_shape[-2])
    layout = TileLayout(tmem_layout) if not isinstance(tmem_layout, TileLayout) else tmem_layout

    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared(smem_shape, dtype, layout=smem_layout, align=align)  # factory alloc
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(
            address[0], ty_args=[T.Tensor(tmem_shape, tmem_dtype, scope="tmem", layout=layout)]
        )
        if T.cuda.thread_idx("x") == 0:
            if repeat:
                T.cuda.tile.apply(T.ptx[opcode], mem, shared[:, r0:r1, :])  # factory call (repeat)
            else:
                T.cuda.tile.apply(T.ptx[opcode], mem, shared[r0:r1, :])  # factory call (atom)

    return copy


FACTORY_LINE = _line("# factory call (atom)")
FACTORY_ALLOC_LINE = _line("# factory alloc")
FACTORY_REPEAT_LINE = _line("# factory call (repeat)")

# Per shape/multicast: TMEM (shape, layout) and shared (buffer shape, layout, align, rows) of one
# atom, and the same with a leading repeat axis of 2.
FORMS = {
    "128x256b": (
        ((128, 8), S[(128, 8) : (1 @ TLane, 1 @ TCol)],
         (128, 8), swizzle(1, (128, 8), "uint32"), 256, None),
        ((2, 128, 8), S[(2, 128, 8) : (8 @ TCol, 1 @ TLane, 1 @ TCol)],
         (2, 128, 8), swizzle(1, (2, 128, 8), "uint32"), 256, None)),
    "4x256b": (
        ((4, 8), S[(4, 8) : (32 @ TLane, 1 @ TCol)],
         (8, 8), swizzle(1, (8, 8), "uint32"), 256, (0, 4)),
        ((2, 4, 8), S[(2, 4, 8) : (8 @ TCol, 32 @ TLane, 1 @ TCol)],
         (2, 8, 8), swizzle(1, (2, 8, 8), "uint32"), 256, (0, 4))),
    "128x128b": (
        ((128, 4), S[(128, 4) : (1 @ TLane, 1 @ TCol)], (128, 4), "default", 16, None),
        ((2, 128, 4), S[(2, 128, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)],
         (2, 128, 4), "default", 16, None)),
    "64x128b.warpx2::02_13": (
        ((64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane],
         (64, 4), "default", 16, None),
        ((2, 64, 4), S[(2, 64, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane],
         (2, 64, 4), "default", 16, None)),
    "64x128b.warpx2::01_23": (
        ((64, 4), S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane],
         (64, 4), "default", 16, None),
        ((2, 64, 4), S[(2, 2, 32, 4) : (4 @ TCol, 64 @ TLane, 1 @ TLane, 1 @ TCol)]
         + R[2 : 32 @ TLane], (2, 64, 4), "default", 16, None)),
    "32x128b.warpx4": (
        ((32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane],
         (32, 4), "default", 16, None),
        ((2, 32, 4), S[(2, 32, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane],
         (2, 32, 4), "default", 16, None)),
}
DECOMPRESSION = ("", ".b8x16.b4x16_p64", ".b8x16.b6x16_p32")


def form_kernel(shape: str, cta_group: int, decompress: str, repeat: bool):
    atom, repeated = FORMS[shape]
    tshape, tlayout, sshape, slayout, align, rows = repeated if repeat else atom
    opcode = f"tcgen05.cp.cta_group::{cta_group}.{shape}{decompress}"
    return opcode, copy_kernel(opcode, tshape, tlayout, sshape, slayout, align=align, rows=rows,
                               repeat=repeat)


# ------------------------------------------------------------------------------ registration
def test_registered_family_claims_tcgen05_cp() -> None:
    assert "tcgen05.cp" in registry.family_names()
    assert registry.pattern_for(CP) is PATTERN
    assert registry.pattern_for("tcgen05.cp.cta_group::2.32x128b.warpx4") is PATTERN
    assert not PATTERN.claims("tcgen05.ld.sync.aligned.32x32b.x1.b32")
    assert not PATTERN.claims("cp.async.bulk.tensor.2d.shared::cta.global.tile."
                              "mbarrier::complete_tx::bytes")


def test_opcode_lane_maps_follow_the_table() -> None:
    def lanes(text):
        op = parse_tcgen05_cp(text)
        return [atom_lane(op, r) for r in range(op.rows)], atom_replicas(op)

    assert lanes("tcgen05.cp.cta_group::1.128x256b") == (list(range(128)), (0,))
    assert lanes("tcgen05.cp.cta_group::1.128x128b") == (list(range(128)), (0,))
    assert lanes("tcgen05.cp.cta_group::1.4x256b") == ([0, 32, 64, 96], (0,))
    assert lanes("tcgen05.cp.cta_group::1.64x128b.warpx2::02_13") == (list(range(64)), (0, 64))
    assert lanes("tcgen05.cp.cta_group::1.64x128b.warpx2::01_23") == (
        list(range(32)) + list(range(64, 96)), (0, 32))
    assert lanes("tcgen05.cp.cta_group::1.32x128b.warpx4") == (list(range(32)), (0, 32, 64, 96))


def fields_reach_ptx(descriptor: int, ptx: str) -> bool:
    """Whether a descriptor's static fields reach the PTX as constants: its low word or-ed in
    after the start address field, its high word moved in whole (``jittile.ir.DescriptorWord``,
    computed in 32 bits)."""
    return (
        f"or.b32 %jt_lo, %jt_lo, {descriptor & 0xFFFFFFFF};" in ptx
        and f"mov.b32 %jt_hi, {descriptor >> 32};" in ptx
    )


# --------------------------------------------------------------------------- the seed example
def test_seed_example_compiles_to_one_utccp_and_ldtm_readback() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import tmem_copy_readback as example
    finally:
        sys.path.remove(str(ROOT / "examples"))
    ck = example.copy_to_tmem.compile(target="sm_100a")
    counts = sass_opcodes(ck.sass)
    assert utccp(ck) == 1
    assert sum(n for op, n in counts.items() if op.startswith("LDTM")) == 4
    [site] = [s for s in ck.plan if s["family"] == "tcgen05.cp"]
    [record] = site["instructions"]
    assert record["opcode"] == CP
    assert record["bytes"] == 2048  # one cp copies 2048 bytes
    assert record["coords"] == (0, 0)
    assert record["instance"] == ()
    assert (record["ldo"], record["sdo"], record["swizzle"]) == (128, 128, 0)
    assert record["replicas"] == (0,)
    # One native instruction, no election, fence, commit or wait added by the pattern.
    assert ck.ptx.count("tcgen05.cp.cta_group::1.128x128b [") == 1
    assert ck.ptx.count("tcgen05.commit") == 1  # the caller's own commit
    assert ck.ptx.count("tcgen05.fence") == 1  # the caller's own fence::after_thread_sync
    descriptor = int(record["descriptor"], 16)
    assert fields_reach_ptx(descriptor, ck.ptx)


def test_decompress_example_compiles() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import tmem_decompress as example
    finally:
        sys.path.remove(str(ROOT / "examples"))
    ck = example.decompress_to_tmem.compile(target="sm_100a")
    assert utccp(ck) == 1
    assert "tcgen05.cp.cta_group::1.128x128b.b8x16.b4x16_p64 [" in ck.ptx
    [record] = instructions(ck)
    assert record["bytes"] == 2048 and record["decompress"] == "b4x16_p64"
    # The packing helper puts sixteen nibbles then eight bytes of padding in each 16-byte block.
    import numpy as np

    codes = np.arange(16, dtype=np.uint8).reshape(1, 16)
    block = example.pack_fp4(codes).view(np.uint8)[0]
    assert list(block[:8]) == [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]
    assert list(example.expand_fp4(codes).view(np.uint8)[0]) == [4 * c for c in range(16)]


def test_cli_compile_shows_utccp() -> None:
    env = dict(os.environ, JITTILE_CACHE="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "jittile", "compile", "examples/tmem_copy_readback.py:copy_to_tmem",
         "--target", "sm_100a", "--sass"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "UTCCP" in result.stdout
    assert sum(1 for line in result.stdout.splitlines() if "UTCCP" in line) == 1


# ----------------------------------------------------------------------- every opcode form
@pytest.mark.parametrize("cta_group", (1, 2))
@pytest.mark.parametrize("decompress", DECOMPRESSION)
@pytest.mark.parametrize("shape", list(FORMS))
def test_every_form_assembles_one_utccp_per_repeat(shape, cta_group, decompress) -> None:
    repeat = decompress == ""  # a leading repeat axis of 2 on the plain forms
    opcode, kernel = form_kernel(shape, cta_group, decompress, repeat)
    ck = kernel.compile(target="sm_100a")
    op = parse_tcgen05_cp(opcode)
    records = instructions(ck)
    count = 2 if repeat else 1
    assert utccp(ck) == count
    assert ck.ptx.count(f"{opcode} [") == count
    assert len(records) == count
    assert [r["instance"] for r in records] == ([(0,), (1,)] if repeat else [()])
    for k, record in enumerate(records):
        assert record["opcode"] == opcode
        assert record["bytes"] == op.rows * op.bits // 8
        assert record["coords"] == (0, k * op.words)  # repeat k sits op.words columns further
        assert record["replicas"] == atom_replicas(op)
        assert record["cta_group"] == cta_group
    if repeat:
        step = records[1]["shared_offset"] - records[0]["shared_offset"]
        assert step == op.rows * op.words * 4 * (2 if shape == "4x256b" else 1)


def test_plan_bytes_per_shape() -> None:
    assert {s: parse_tcgen05_cp(f"tcgen05.cp.cta_group::1.{s}").rows
            * parse_tcgen05_cp(f"tcgen05.cp.cta_group::1.{s}").bits // 8
            for s in ("128x256b", "4x256b", "128x128b")} == {
        "128x256b": 4096, "4x256b": 128, "128x128b": 2048}


# ------------------------------------------------------------------------------ call parameters
def test_unknown_keyword_is_rejected_at_the_keyword() -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[
            T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
        T.cuda.tile.apply(T.ptx[CP], mem, shared,
                          swizzle=0)  # bad keyword
    err = rejects(copy, parameter="swizzle", line=_line("swizzle=0)  # bad keyword"))
    assert "pred" in str(err)


def test_pred_static_and_runtime() -> None:
    def kernel(pred_kind: str):
        @jittile.kernel
        def copy(A: T.Tensor((1,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
            address = T.alloc_shared((1,), "uint32", layout="default")
            mem = T.cuda.decl_tmem(address[0], ty_args=[
                T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
            tid = T.cuda.thread_idx("x")
            if pred_kind == "false":
                T.cuda.tile.apply(T.ptx[CP], mem, shared, pred=False)
            elif pred_kind == "true":
                T.cuda.tile.apply(T.ptx[CP], mem, shared, pred=True)
            elif pred_kind == "runtime":
                T.cuda.tile.apply(T.ptx[CP], mem, shared, pred=tid == 0)
            else:
                T.cuda.tile.apply(T.ptx[CP], mem, shared,
                                  pred="yes")  # bad pred
        return copy

    assert utccp(kernel("false").compile(target="sm_100a")) == 0
    assert instructions(kernel("false").compile(target="sm_100a")) == []
    assert utccp(kernel("true").compile(target="sm_100a")) == 1
    runtime = kernel("runtime").compile(target="sm_100a")
    assert utccp(runtime) == 1 and len(instructions(runtime)) == 1
    assert "if __jt_v" in runtime.lowered_source  # the predicate gates the issue
    rejects(kernel("bad"), parameter="pred", line=_line('pred="yes")  # bad pred'))


# ------------------------------------------------------------------------------ target
def test_sm_90a_is_rejected_naming_sm_100a() -> None:
    kernel = copy_kernel(CP, (128, 4), LANES_128x4, (128, 4))
    err = rejects(kernel, parameter="target", line=FACTORY_LINE, target="sm_90a")
    assert "sm_100a" in str(err) and "sm_90a" in str(err)
    assert utccp(kernel.compile(target="sm_100a")) == 1


def test_bad_opcode_names_opcode() -> None:
    text = "tcgen05.cp.cta_group::1.64x128b"  # the multicast qualifier is required
    kernel = copy_kernel(text, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)], (64, 4))
    rejects(kernel, parameter="opcode", line=FACTORY_LINE, opcode=text, match="warpx2")


# ----------------------------------------------------------------------- data representation
@pytest.mark.parametrize("dtype, ok", [("uint32", True), ("int32", True), ("float32", True),
                                       ("uint16", False), ("uint64", False), ("uint8", False)])
def test_shared_storage_is_32_bit(dtype, ok) -> None:
    words = {2: 8, 8: 2, 1: 16}.get(lookup_dtype(dtype).bytes, 4)
    shape = (128, 4) if ok else (128, words)
    kernel = copy_kernel(CP, (128, 4), LANES_128x4, shape, dtype=dtype)
    if ok:
        assert utccp(kernel.compile(target="sm_100a")) == 1
    else:
        rejects(kernel, parameter="operand 1", line=FACTORY_LINE, match="32-bit")


@pytest.mark.parametrize("dtype, ok", [("float32", True), ("int32", True), ("uint16", False)])
def test_tmem_storage_is_32_bit(dtype, ok) -> None:
    kernel = copy_kernel(CP, (128, 4), LANES_128x4, (128, 4), tmem_dtype=dtype)
    if ok:
        assert utccp(kernel.compile(target="sm_100a")) == 1
    else:
        rejects(kernel, parameter="operand 0", line=FACTORY_LINE, match="32-bit")


# ------------------------------------------------------------------------ operand specification
def test_operand_kinds_and_count() -> None:
    @jittile.kernel
    def swapped(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[
            T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
        T.cuda.tile.apply(T.ptx[CP], shared, mem)  # swapped operands

    @jittile.kernel
    def alone(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[
            T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
        T.cuda.tile.apply(T.ptx[CP], mem)  # one operand

    @jittile.kernel
    def from_global(A: T.Tensor((128, 4), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[
            T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
        T.cuda.tile.apply(T.ptx[CP], mem, A)  # global source

    rejects(swapped, parameter="operand 0", line=_line("# swapped operands"))
    rejects(alone, parameter="operands", line=_line("# one operand"))
    rejects(from_global, parameter="operand 1", line=_line("# global source"))


@pytest.mark.parametrize("smem, ok", [((128, 4), True), ((128, 8), False), ((64, 4), False)])
def test_shared_must_end_in_the_atom(smem, ok) -> None:
    kernel = copy_kernel(CP, (128, 4), LANES_128x4, smem)
    if ok:
        assert utccp(kernel.compile(target="sm_100a")) == 1
    else:
        rejects(kernel, parameter="operand 1", line=FACTORY_LINE, match="(128, 4)")


def test_tmem_must_end_in_the_atom() -> None:
    kernel = copy_kernel(CP, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)], (64, 4))
    rejects(kernel, parameter="operand 0", line=FACTORY_LINE, match="(128, 4)")


def test_repeats_must_agree() -> None:
    tmem = S[(2, 128, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)]
    bad = copy_kernel(CP, (2, 128, 4), tmem, (3, 128, 4), repeat=True)
    rejects(bad, parameter="operands", line=FACTORY_REPEAT_LINE, match="repeat")
    good = copy_kernel(CP, (2, 128, 4), tmem, (2, 128, 4), repeat=True)
    assert utccp(good.compile(target="sm_100a")) == 2


def test_two_repeat_axes_issue_one_copy_each() -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((2, 3, 32, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (2, 3, 32, 4), "uint32", scope="tmem",
            layout=TileLayout(S[(2, 3, 32, 4) : (12 @ TCol, 4 @ TCol, 1 @ TLane, 1 @ TCol)]
                              + R[4 : 32 @ TLane]))])
        T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.32x128b.warpx4"], mem, shared)

    ck = copy.compile(target="sm_100a")
    records = instructions(ck)
    assert utccp(ck) == 6
    assert [r["instance"] for r in records] == list(itertools.product(range(2), range(3)))
    assert [r["coords"] for r in records] == [(0, 4 * k) for k in range(6)]
    assert [r["shared_offset"] for r in records] == [512 * k for k in range(6)]


def test_warp_scope_group_axis() -> None:
    def kernel(groups: int):
        @jittile.kernel
        def copy(A: T.Tensor((1,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            shared = T.alloc_shared((groups, 32, 4), "uint32", layout="default", align=16)
            address = T.alloc_shared((1,), "uint32", layout="default")
            mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
                (groups, 32, 4), "uint32", scope="tmem",
                layout=TileLayout(S[(groups, 32, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)]
                                  + R[4 : 32 @ TLane]))])
            if T.cuda.warp_id() == 0:
                T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.32x128b.warpx4"], mem, shared,
                                  scope="warp")  # warp scope
        return copy

    ck = kernel(32).compile(target="sm_100a")
    assert utccp(ck) == 1  # one issue per lane, each at its own group index
    [record] = instructions(ck)
    assert record["coords"] == (0, 0) and record["instance"] == ()
    assert "laneid * 4" in ck.lowered_source  # TMEM column step of the group axis
    assert "laneid * 512" in ck.lowered_source  # shared byte step of the group axis
    assert record["group_steps"] == ((0, 4, 512),)  # (lane, column, shared byte) per group index
    rejects(kernel(16), parameter="scope", line=_line("# warp scope"),
            opcode="tcgen05.cp.cta_group::1.32x128b.warpx4")


def test_integer_indexed_tmem_region() -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (2, 128, 4), "uint32", scope="tmem",
            layout=TileLayout(S[(2, 128, 4) : (4 @ TCol, 1 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx[CP], mem[1], shared)

    [record] = instructions(copy.compile(target="sm_100a"))
    assert record["coords"] == (0, 4) and record["instance"] == ()


def test_integer_index_drops_the_indexed_axis() -> None:
    # mem[0] of a (128, 128, 4) tensor keeps axes 1 and 2: lanes 0..127, columns 0..3.
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (128, 128, 4), "uint32", scope="tmem",
            layout=TileLayout(S[(128, 128, 4) : (0 @ TCol, 1 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx[CP], mem[0], shared)

    plan = copy.compile(target="sm_100a").plan[0]["instructions"]
    assert [ins["coords"] for ins in plan] == [(0, 0)]


# ------------------------------------------------------------- legality: TMEM lanes/replicas
WARPX4 = "tcgen05.cp.cta_group::1.32x128b.warpx4"
W02_13 = "tcgen05.cp.cta_group::1.64x128b.warpx2::02_13"
W01_23 = "tcgen05.cp.cta_group::1.64x128b.warpx2::01_23"
FOUR = "tcgen05.cp.cta_group::1.4x256b"


@pytest.mark.parametrize("opcode, tshape, tlayout, ok", [
    # consecutive 128 lanes, consecutive columns
    (CP, (128, 4), S[(128, 4) : (1 @ TLane, 1 @ TCol)], True),
    (CP, (128, 4), S[(128, 4) : (1 @ TCol, 1 @ TLane)], False),  # transposed
    (CP, (128, 4), S[(128, 4) : (1 @ TLane, 2 @ TCol)], False),  # columns not consecutive
    (CP, (128, 4), S[(2, 64, 4) : (1 @ TLane, 2 @ TLane, 1 @ TCol)], False),  # lanes permuted
    (CP, (128, 4), S[(128, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 4 @ TCol], False),  # stray replica
    # 4x256b: lanes 0, 32, 64, 96
    (FOUR, (4, 8), S[(4, 8) : (32 @ TLane, 1 @ TCol)], True),
    (FOUR, (4, 8), S[(4, 8) : (1 @ TLane, 1 @ TCol)], False),
    # 02_13: 64 consecutive lanes, replicas 64 apart
    (W02_13, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane], True),
    (W02_13, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)], False),  # multicast not stated
    (W02_13, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane], False),
    (W02_13, (64, 4), S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane],
     False),
    # 01_23: row r at 64*(r//32) + r%32, replicas 32 apart
    (W01_23, (64, 4), S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane],
     True),
    (W01_23, (64, 4), S[(64, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane], False),
    (W01_23, (64, 4), S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane],
     False),
    # warpx4: 32 lanes, four replicas 32 apart (two R factors spell the same set)
    (WARPX4, (32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane], True),
    (WARPX4, (32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[(2, 2) : (64 @ TLane, 32 @ TLane)],
     True),
    (WARPX4, (32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)], False),
    (WARPX4, (32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane], False),
    (WARPX4, (32, 4), S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TCol], False),
])
def test_tmem_lane_mapping_and_replicas_match_exactly(opcode, tshape, tlayout, ok) -> None:
    rows, words = tshape
    smem, srows, slayout, align = (8, 8), (0, 4), swizzle(1, (8, 8), "uint32"), 256
    if rows != 4:
        smem, srows, slayout, align = (rows, words), None, "default", 16
    kernel = copy_kernel(opcode, tshape, tlayout, smem, slayout, align=align, rows=srows)
    if ok:
        assert utccp(kernel.compile(target="sm_100a")) == 1
    else:
        rejects(kernel, parameter="operand 0", line=FACTORY_LINE, opcode=opcode)


@pytest.mark.parametrize("start, ok", [(4, True), (8, True), (2, False), (1, False)])
def test_column_origin_is_128_bit_aligned(start, ok) -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (128, 16), "uint32", scope="tmem",
            layout=TileLayout(S[(128, 16) : (1 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx[CP], mem[:, start:start + 4], shared)  # column slice

    if ok:
        ck = copy.compile(target="sm_100a")
        assert utccp(ck) == 1 and instructions(ck)[0]["coords"] == (0, start)
    else:
        rejects(copy, parameter="operand 0", line=_line("# column slice"), match="128-bit")


@pytest.mark.parametrize("start, ok", [(508, True), (512, False)])
def test_columns_stay_below_512(start, ok) -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (128, 520), "uint32", scope="tmem",
            layout=TileLayout(S[(128, 520) : (1 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx[CP], mem[:, start:start + 4], shared)  # far columns

    if ok:
        ck = copy.compile(target="sm_100a")
        assert instructions(ck)[0]["coords"] == (0, 508)
        assert "mem + 508," in ck.lowered_source  # TMEM address: column 508 in bits 15:0
    else:
        rejects(copy, parameter="operand 0", line=_line("# far columns"), match="512 columns")


@pytest.mark.parametrize("lane, ok", [(31, True), (32, False)])
def test_lanes_stay_below_128_for_4x256b(lane, ok) -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((1, 8, 8), "uint32", layout=swizzle(1, (1, 8, 8), "uint32"),
                                align=256)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (40, 4, 8), "uint32", scope="tmem",
            layout=TileLayout(S[(40, 4, 8) : (1 @ TLane, 32 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx[FOUR], mem[lane:lane + 1], shared[:, 0:4, :])  # lane origin

    if ok:
        ck = copy.compile(target="sm_100a")
        assert instructions(ck)[0]["coords"] == (31, 0)
        assert f"mem + {31 << 16}," in ck.lowered_source  # TMEM address: lane 31 in bits 31:16
    else:
        rejects(copy, parameter="operand 0", line=_line("# lane origin"), opcode=FOUR,
                match="128 lanes")


@pytest.mark.parametrize("lane, ok", [(0, True), (1, False)])
def test_replicas_count_in_the_footprint(lane, ok) -> None:
    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((1, 32, 4), "uint32", layout="default", align=16)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (2, 32, 4), "uint32", scope="tmem",
            layout=TileLayout(S[(2, 32, 4) : (1 @ TLane, 1 @ TLane, 1 @ TCol)]
                              + R[4 : 32 @ TLane]))])
        T.cuda.tile.apply(T.ptx[WARPX4], mem[lane:lane + 1], shared)  # replicated origin

    if ok:
        assert utccp(copy.compile(target="sm_100a")) == 1
    else:
        rejects(copy, parameter="operand 0", line=_line("# replicated origin"), opcode=WARPX4,
                match="replicas included")


# ------------------------------------------------------------- legality: shared descriptor walk
@pytest.mark.parametrize("layout, ok", [
    ("default", True),
    # 8-row core-matrix groups 144 bytes apart: SDO 144, a 16-byte multiple
    (TileLayout(S[(16, 8, 4) : (36, 4, 1)]), True),
    # ... 136 bytes apart: SDO 136 is no 16-byte multiple
    (TileLayout(S[(16, 8, 4) : (34, 4, 1)]), False),
])
def test_sdo_is_a_16_byte_multiple(layout, ok) -> None:
    kernel = copy_kernel(CP, (128, 4), LANES_128x4, (128, 4), layout)
    if ok:
        ck = kernel.compile(target="sm_100a")
        assert instructions(ck)[0]["sdo"] == (128 if layout == "default" else 144)
    else:
        # The fix is the allocation's layout: reported there, with a layout that works.
        err = rejects(kernel, parameter="SDO", line=FACTORY_ALLOC_LINE, match="16-byte")
        assert err.hint.startswith('allocate it with the layout a descriptor walk reads: shared '
                                   '= T.alloc_shared((128, 4), "uint32", layout=')


def test_ldo_is_derived_for_256_bit_rows() -> None:
    # 128x256b without swizzle: words 4..7 are a second core-matrix column, LDO bytes away.
    good = copy_kernel("tcgen05.cp.cta_group::1.128x256b", (128, 8),
                       S[(128, 8) : (1 @ TLane, 1 @ TCol)], (128, 8),
                       TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)]))
    [record] = instructions(good.compile(target="sm_100a"))
    assert (record["ldo"], record["sdo"], record["swizzle"]) == (128, 256, 0)
    # Row-major 32-byte rows without a swizzle match no descriptor walk.
    bad = copy_kernel("tcgen05.cp.cta_group::1.128x256b", (128, 8),
                      S[(128, 8) : (1 @ TLane, 1 @ TCol)], (128, 8))
    # ... reported at the allocation, whose layout must change, with the layout that works.
    err = rejects(bad, parameter="layout", line=FACTORY_ALLOC_LINE,
                  opcode="tcgen05.cp.cta_group::1.128x256b", match="no descriptor address walk")
    assert 'layout=swizzle(1, (128, 8), "uint32"), align=256' in err.hint
    assert f"the tile call at {HERE}:{FACTORY_LINE}:" in str(err)


def test_shared_origin_is_16_byte_aligned() -> None:
    # Region [1] of a (2, 128, 4) buffer whose second slice starts one word in: byte origin 4.
    bad = TileLayout(S[(2, 128, 4) : (1, 4, 1)])
    good = TileLayout(S[(2, 128, 4) : (512, 4, 1)])
    for layout, ok in ((bad, False), (good, True)):
        @jittile.kernel
        def copy(A: T.Tensor((1,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            shared = T.alloc_shared((2, 128, 4), "uint32", layout=layout, align=16)  # slices  # noqa: B023
            address = T.alloc_shared((1,), "uint32", layout="default")
            mem = T.cuda.decl_tmem(address[0], ty_args=[
                T.Tensor((128, 4), "uint32", scope="tmem", layout=LANES_128x4)])
            T.cuda.tile.apply(T.ptx[CP], mem, shared[1, :, :])  # second slice

        if ok:
            ck = copy.compile(target="sm_100a")
            assert instructions(ck)[0]["shared_offset"] == 2048
        else:
            # The layout must change: reported at the allocation, with one that works.
            err = rejects(copy, parameter="origin", line=_line("# slices"), match="16-byte")
            assert err.hint.endswith('shared = T.alloc_shared((2, 128, 4), "uint32", '
                                     'layout="default", align=16)')


@pytest.mark.parametrize("mode, shape, words", [(1, (128, 8), 8), (2, (128, 16), 8),
                                                 (3, (128, 32), 8), (3, (128, 32), 4)])
def test_swizzled_allocation_aligns_to_its_period(mode, shape, words) -> None:
    period = 128 << mode
    opcode = f"tcgen05.cp.cta_group::1.128x{words * 32}b"
    tmem = S[(128, words) : (1 @ TLane, 1 @ TCol)]
    layout = swizzle(mode, shape, "uint32")

    def kernel(align):
        @jittile.kernel
        def copy(A: T.Tensor((1,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            shared = T.alloc_shared(shape, "uint32", layout=layout, align=align)  # swizzled alloc
            address = T.alloc_shared((1,), "uint32", layout="default")
            mem = T.cuda.decl_tmem(address[0], ty_args=[
                T.Tensor((128, words), "uint32", scope="tmem", layout=TileLayout(tmem))])
            T.cuda.tile.apply(T.ptx[opcode], mem, shared[:, 0:words])  # swizzled source
        return copy

    ck = kernel(period).compile(target="sm_100a")
    [record] = instructions(ck)
    assert (record["swizzle"], record["sdo"]) == (mode, 8 * (16 << mode))
    # The alignment must change: reported at the allocation.
    err = rejects(kernel(period // 2), parameter="base_align", line=_line("# swizzled alloc"),
                  opcode=opcode, match=f"{period}-byte")
    assert err.hint.endswith(f"keep its layout and pass align={period} to T.alloc_shared")


def test_swizzle_phase_of_an_inner_origin() -> None:
    # Words 8..15 of 128B-swizzled rows: the walk starts 32 bytes into the swizzle row.
    layout = swizzle(3, (128, 32), "uint32")

    @jittile.kernel
    def copy(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((128, 32), "uint32", layout=layout, align=1024)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor(
            (128, 8), "uint32", scope="tmem",
            layout=TileLayout(S[(128, 8) : (1 @ TLane, 1 @ TCol)]))])
        T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.128x256b"], mem, shared[:, 8:16])

    [record] = instructions(copy.compile(target="sm_100a"))
    assert (record["swizzle"], record["sdo"], record["shared_offset"]) == (3, 1024, 32)


@pytest.mark.parametrize("rows, ok", [(8, True), (4, False)])
def test_four_row_region_needs_the_eight_row_backing_block(rows, ok) -> None:
    layout = swizzle(1, (rows, 8), "uint32")
    kernel = copy_kernel(FOUR, (4, 8), S[(4, 8) : (32 @ TLane, 1 @ TCol)], (rows, 8), layout,
                         align=256, rows=(0, 4))
    if ok:
        [record] = instructions(kernel.compile(target="sm_100a"))
        assert record["bytes"] == 128
    else:
        rejects(kernel, parameter="backing_bytes", line=FACTORY_LINE, opcode=FOUR,
                match="eight-row")


# ------------------------------------------------------------- descriptor constant in the plan
@pytest.mark.parametrize("opcode, shape, layout, align, cols", [
    (CP, (128, 4), "default", 16, None),
    (CP, (128, 4), TileLayout(S[(16, 8, 4) : (36, 4, 1)]), 16, None),
    ("tcgen05.cp.cta_group::1.128x256b", (128, 8), TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)]),
     16, None),
    ("tcgen05.cp.cta_group::1.128x256b", (128, 8), swizzle(1, (128, 8), "uint32"), 256, None),
    ("tcgen05.cp.cta_group::1.128x256b", (128, 16), swizzle(2, (128, 16), "uint32"), 512, 8),
    ("tcgen05.cp.cta_group::1.128x256b", (128, 32), swizzle(3, (128, 32), "uint32"), 1024, 8),
])
def test_descriptor_constant_decodes_to_the_layout_walk(opcode, shape, layout, align, cols) -> None:
    words = parse_tcgen05_cp(opcode).words
    tmem = S[(128, words) : (1 @ TLane, 1 @ TCol)]
    kernel = copy_kernel(opcode, (128, words), tmem, shape, layout, align=align)
    if cols is not None:
        @jittile.kernel
        def kernel(A: T.Tensor((1,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            shared = T.alloc_shared(shape, "uint32", layout=layout, align=align)
            address = T.alloc_shared((1,), "uint32", layout="default")
            mem = T.cuda.decl_tmem(address[0], ty_args=[
                T.Tensor((128, words), "uint32", scope="tmem", layout=TileLayout(tmem))])
            T.cuda.tile.apply(T.ptx[opcode], mem, shared[:, 0:cols])
    ck = kernel.compile(target="sm_100a")
    [record] = instructions(ck)
    decoded = SmemDescriptor.decode(int(record["descriptor"], 16))
    # The walk derived independently from the layout's element addresses.
    resolved = resolve_layout(layout, shape, "uint32")
    walk = derive_walk(lambda r, w: resolved.memory_offset((r, w), shape) * 4, 128, words,
                       base_align=align, backing_bytes=10 ** 6)
    assert (decoded.ldo, decoded.sdo, decoded.swizzle) == (walk.ldo, walk.sdo, walk.swizzle)
    assert (record["ldo"], record["sdo"], record["swizzle"]) == (walk.ldo, walk.sdo, walk.swizzle)
    assert decoded.start_address == 0 and decoded.base_offset == 0  # start is OR-ed in at run time
    assert fields_reach_ptx(int(record["descriptor"], 16), ck.ptx)


# ---------------------------------------------- the pattern on its own (boundary strides)
class _Ctx:
    def group_indices(self, scope):
        return [] if scope == "thread" else [(32, Special("lane"))]


def _site(layout, shape, opcode=CP, **params) -> CallSite:
    location = Location("k.py", 7, 4)
    buf = SharedBuffer("s", shape, lookup_dtype("uint32"), layout, 16, 0, location)
    rows, words = parse_tcgen05_cp(opcode).rows, parse_tcgen05_cp(opcode).words
    tmem = TmemRegion("mem", Var("mem", "mem", "local"), (rows, words), lookup_dtype("uint32"),
                      TileLayout(S[(rows, words) : (1 @ TLane, 1 @ TCol)]), (0, 0), (rows, words),
                      (0, 1))
    region = SharedRegion(buf, (0,) * len(shape), (rows, words), (len(shape) - 2, len(shape) - 1))
    return CallSite(location, opcode, [tmem, region], params, {}, Target.parse("sm_100a"))


@pytest.mark.parametrize("sdo_elems, ok", [((1 << 16) - 4, True), (1 << 16, False)])
def test_sdo_below_2_18_at_the_boundary(sdo_elems, ok) -> None:
    layout = TileLayout(S[(16, 8, 4) : (sdo_elems, 4, 1)])
    site = _site(layout, (128, 4))
    if ok:
        lowering = PATTERN.lower(site, _Ctx())
        [record] = lowering.plan
        assert record.fields["sdo"] == (1 << 18) - 16
        assert SmemDescriptor.decode(int(record.fields["descriptor"], 16)).sdo == (1 << 18) - 16
    else:
        with pytest.raises(ContractError) as info:
            PATTERN.lower(site, _Ctx())
        assert info.value.parameter == "SDO" and info.value.lineno == 7
        assert "2^18" in str(info.value)


@pytest.mark.parametrize("ldo_elems, ok", [((1 << 16) - 4, True), (1 << 16, False)])
def test_ldo_below_2_18_at_the_boundary(ldo_elems, ok) -> None:
    layout = TileLayout(S[(16, 8, 2, 4) : (64, 4, ldo_elems, 1)])
    site = _site(layout, (128, 8), "tcgen05.cp.cta_group::1.128x256b")
    if ok:
        [record] = PATTERN.lower(site, _Ctx()).plan
        assert record.fields["ldo"] == (1 << 18) - 16
    else:
        with pytest.raises(ContractError) as info:
            PATTERN.lower(site, _Ctx())
        assert info.value.parameter == "LDO" and "2^18" in str(info.value)


def test_planned_operands() -> None:
    lowering = PATTERN.lower(_site(resolve_layout("default", (128, 4), "uint32"), (128, 4)), _Ctx())
    [record] = lowering.plan
    assert record.asm.template == f"{CP} [$0], $1;"
    assert record.asm.inputs == ("r", "l") and record.asm.outputs == ()
    (_, taddr), (_, sdesc) = record.operands
    assert taddr == Var("mem", "mem", "local")
    constant = int(record.fields["descriptor"], 16)
    assert sdesc == DescriptorWord(SharedAddress("s", 0), constant)
    assert str(sdesc) == f"((&s >> 4) & 0x3fff) | {hex(constant)}"
    pred = Var("p", "p")
    runtime = PATTERN.lower(_site(resolve_layout("default", (128, 4), "uint32"), (128, 4),
                                  pred=pred), _Ctx())
    assert runtime.predicate == pred and len(runtime.plan) == 1
