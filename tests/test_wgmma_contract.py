"""The wgmma contract on the CPU: descriptors against values computed by hand from the PTX ISA,
register-fragment mappings, and each legality rule both ways (a legal call compiles, the broken
one is a located ContractError naming the parameter)."""

import numpy as np
import pytest

import jittile
from jittile import T
from jittile.fragment import wgmma_a, wgmma_accumulator
from jittile.layout import swizzle, tiled_swizzle
from jittile.patterns.descriptors import DescriptorError
from jittile.patterns.matrix_descriptors import MatrixDescriptor, derive_matrix_walk

MMA = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"


# -- descriptors, by hand from the PTX ISA's matrix-descriptor format --------------------------


def test_descriptor_fields_encode_by_hand():
    # start 0x400 >> 4 = 0x40; LBO 16 >> 4 = 1 at bit 16; SBO 1024 >> 4 = 0x40 at bit 32;
    # 128B swizzle = 1 at bits 62-63
    value = MatrixDescriptor(0x400, 16, 1024, swizzle=3).encode()
    assert value == 0x40 | (1 << 16) | (0x40 << 32) | (1 << 62) == 0x4000004000010040
    assert MatrixDescriptor.decode(value) == MatrixDescriptor(0x400, 16, 1024, 3)
    assert MatrixDescriptor(0, 128, 256, swizzle=1).encode() >> 62 == 3  # 32B swizzle
    assert MatrixDescriptor(0, 128, 256, swizzle=2).encode() >> 62 == 2  # 64B swizzle
    with pytest.raises(DescriptorError, match="16-byte"):
        MatrixDescriptor(8, 16, 1024)


def test_k_major_128b_swizzle_walk_advances_32_bytes_per_k16():
    layout = swizzle(3, (64, 64), "bfloat16")
    for step in range(4):
        walk = derive_matrix_walk(
            lambda mn, k: layout.memory_offset((mn, k + 16 * step), (64, 64)) * 2,  # noqa: B023
            64,
            16,
            2,
            base_align=1024,
        )
        assert (walk.major, walk.swizzle, walk.origin, walk.sbo) == ("K", 3, 32 * step, 1024)


def test_mn_major_chunks_give_lbo_of_one_chunk():
    layout = tiled_swizzle(3, (64, 256), "bfloat16")  # (K, N): four 64-column chunks
    walk = derive_matrix_walk(
        lambda n, k: layout.memory_offset((k, n), (64, 256)) * 2, 256, 16, 2, base_align=1024
    )
    # the next 64 N-elements are one (64 x 128 B) chunk further; the next 8 K-rows 1024 B on
    assert (walk.major, walk.swizzle, walk.lbo, walk.sbo) == ("MN", 3, 64 * 128, 1024)


def test_no_swizzle_core_matrices():
    layout = tiled_swizzle(0, (64, 16), "bfloat16")  # 16-byte columns of all 64 rows
    walk = derive_matrix_walk(
        lambda m, k: layout.memory_offset((m, k), (64, 16)) * 2, 64, 16, 2, base_align=16
    )
    # core matrices: rows 16 B apart, 8-row groups 128 B (SBO), the next 8 K 1024 B (LBO)
    assert (walk.major, walk.swizzle, walk.sbo, walk.lbo) == ("K", 0, 128, 1024)


def test_a_layout_no_descriptor_expresses_is_refused():
    with pytest.raises(DescriptorError, match="no canonical"):
        derive_matrix_walk(lambda m, k: (m * 16 + k) * 2, 64, 16, 2, base_align=16)


def test_swizzled_buffer_must_be_period_aligned():
    layout = swizzle(3, (64, 64), "bfloat16")
    with pytest.raises(DescriptorError, match="1024-byte swizzle period"):
        derive_matrix_walk(
            lambda m, k: layout.memory_offset((m, k), (64, 64)) * 2, 64, 16, 2, base_align=128
        )


# -- register fragments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, shape, dtype",
    [
        (wgmma_accumulator, (64, 256), "float32"),
        (wgmma_accumulator, (64, 64), "float16"),
        (wgmma_a, (64, 64), "bfloat16"),
        (wgmma_a, (64, 32), "tf32"),
        (wgmma_a, (64, 64), "float8_e4m3fn"),
    ],
)
def test_fragments_cover_the_tile_once(layout, shape, dtype):
    seen = np.zeros(shape, int)
    per = layout.per_register(dtype)
    for thread in range(128):
        for register in range(layout.registers(shape, dtype)):
            row, col = layout.element(register, thread, dtype)
            seen[row, col : col + per] += 1
    assert (seen == 1).all()


def test_accumulator_mapping_by_hand():
    # PTX ISA: thread 5 (lane 5: group 1, quad 1) holds d0,d1 at row 1, columns 2,3 and
    # d2,d3 at row 9; d4 starts the next 8-column chunk
    assert [wgmma_accumulator.element(r, 5, "float32") for r in range(5)] == [
        (1, 2),
        (1, 3),
        (9, 2),
        (9, 3),
        (1, 10),
    ]
    assert wgmma_accumulator.element(0, 32, "float32") == (16, 0)  # warp 1 owns rows 16..31


# -- legality, both ways ----------------------------------------------------------------------------


def _kernel(
    opcode=MMA,
    n=64,
    acc_dtype="float32",
    a_shape=(64, 64),
    b_layout="K",
    block=128,
    scale_d=1,
    scale_a=1,
    b_swizzle=3,
    acc_shape=None,
):
    b_shape = (n, 64) if b_layout == "K" else (64, n)
    b_lay = tiled_swizzle(b_swizzle, b_shape, "bfloat16")
    acc_shape = acc_shape or (64, n)

    @jittile.kernel
    def mma(D: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        A_s = T.alloc_shared(
            a_shape, "bfloat16", layout=tiled_swizzle(3, a_shape, "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(b_shape, "bfloat16", layout=b_lay, align=1024)
        acc = T.alloc_local(acc_shape, acc_dtype, layout=wgmma_accumulator)
        T.ptx.wgmma.fence.sync.aligned()
        T.cuda.tile.apply(
            T.ptx[opcode],
            acc,
            A_s,
            B_s.T if b_layout == "K" else B_s,
            scale_d=scale_d,
            scale_a=scale_a,
        )
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        D[acc.row(0), acc.col(0)] = acc[0]

    return mma


def _lower(kernel):
    """Compile for sm_90a (a ContractError comes from the lowering, before numba runs)."""
    return kernel.compile(T.Tensor((64, None), "float32"), target="sm_90a")


def _rejects(kernel, parameter, match):
    with pytest.raises(jittile.ContractError, match=match) as info:
        _lower(kernel)
    assert info.value.parameter == parameter
    assert str(info.value).startswith(__file__)


def test_the_legal_call_lowers_to_four_instructions():
    ck = _lower(_kernel())
    assert str(ck.plan).count("wgmma.mma_async.sync.aligned.m64n64k16") == 4
    assert ck.sass.count("HGMMA.64x64x16.F32.BF16") == 4 and ck.metadata["local_bytes"] == 0


@pytest.mark.parametrize(
    "opcode, match",
    [
        ("wgmma.mma_async.sync.aligned.m64n64k16.f16.bf16.bf16", "accumulate into .f32"),
        ("wgmma.mma_async.sync.aligned.m64n64k8.f32.bf16.bf16", "take k16"),
        ("wgmma.mma_async.sync.aligned.m64n60k16.f32.bf16.bf16", "not a legal N"),
        ("wgmma.mma_async.sync.aligned.m32n64k16.f32.bf16.bf16", "M = 64"),
        ("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.f16", "do not form a wgmma"),
        ("wgmma.mma_async.sync.aligned.m64n64k16.satfinite.f32.bf16.bf16", "only for the integer"),
    ],
)
def test_opcode_rules(opcode, match):
    _rejects(_kernel(opcode=opcode), "opcode", match)


def test_fragment_shape_must_be_m64n():
    _rejects(_kernel(acc_shape=(64, 128)), "operand 0", r"must be \(64, 64\)")


def test_accumulator_type_must_match():
    with pytest.raises(jittile.JittileError, match="holds"):
        _lower(_kernel(acc_dtype="int32"))


def test_a_and_b_must_agree_on_k():
    _rejects(_kernel(a_shape=(64, 128)), "operand 1", "B's K")


def test_whole_warpgroups():
    assert _lower(_kernel(block=256)).plan
    _rejects(_kernel(block=96), "operands", "whole warpgroups")


def test_scales():
    assert _lower(_kernel(scale_a=-1, scale_d=0)).plan
    _rejects(_kernel(scale_a=2), "scale_a", "1 or -1")
    _rejects(_kernel(scale_d=3), "scale_d", "0, 1 or a runtime value")


def test_layout_a_descriptor_cannot_express():
    # a 128B swizzle over 32-byte K rows is no canonical layout
    @jittile.kernel
    def narrow(D: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        A_s = T.alloc_shared(
            (64, 16), "bfloat16", layout=swizzle(3, (64, 16), "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(
            (16, 64), "bfloat16", layout=tiled_swizzle(3, (16, 64), "bfloat16"), align=1024
        )
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        T.cuda.tile.apply(T.ptx[MMA], acc, A_s, B_s)

    _rejects(narrow, "operand 1", "no canonical K-major or MN-major layout")


def test_transpose_only_for_16_bit_types():
    @jittile.kernel
    def tf32_mn(D: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        A_s = T.alloc_shared(
            (32, 64), "tf32", layout=tiled_swizzle(3, (32, 64), "tf32"), align=1024
        )
        B_s = T.alloc_shared(
            (64, 32), "tf32", layout=tiled_swizzle(3, (64, 32), "tf32"), align=1024
        )
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        T.cuda.tile.apply(
            T.ptx["wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"], acc, A_s.T, B_s.T
        )

    _rejects(tf32_mn, "operand 1", "only 16-bit types may be MN-major")


def test_other_families_refuse_transposed_regions():
    @jittile.kernel
    def tma_t(A: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        buf = T.alloc_shared((64, 64), "float32", align=128)
        mbar = T.alloc_shared((1,), "uint64")
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf.T,
            A,
            box=(64, 64),
            coords=(0, 0),
            mbar=mbar.ptr_to([0]),
        )

    with pytest.raises(jittile.ContractError, match="transposed shared region"):
        _lower(tma_t)


def test_fragment_indices_are_compile_time():
    @jittile.kernel
    def dynamic(D: T.Tensor((64, 64), "float32"), i: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        D[0, 0] = acc[i]

    with pytest.raises(jittile.CompileError, match="compile-time integer"):
        dynamic.compile(T.Tensor((64, 64), "float32"), np.int32(0), target="sm_90a")


def test_setmaxnreg_count_is_checked():
    @jittile.kernel
    def budget(D: T.Tensor((64, 64), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        T.ptx.setmaxnreg.inc.sync.aligned.u32(230)

    with pytest.raises(jittile.ContractError, match="multiple of 8"):
        budget.compile(T.Tensor((64, 64), "float32"), target="sm_90a")


def test_ptxas_serializing_the_wgmmas_is_a_warning():
    """A 64-bit division is a call into ptxas' runtime; with a call in the kernel ptxas issues
    every wgmma alone (C7509). jittile passes that advisory on, at the kernel."""

    @jittile.kernel
    def divides(D: T.Tensor((64, None), "float32"), a: T.int64, b: T.int64):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        A_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        for kt in range(a // b):
            T.ptx.wgmma.fence.sync.aligned()
            T.cuda.tile.apply(T.ptx[MMA], acc, A_s, B_s.T, scale_d=kt)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)
        D[acc.row(0), acc.col(0)] = acc[0]

    with pytest.warns(
        jittile.JittileWarning, match="ptxas: wgmma.mma_async instructions are serialized"
    ):
        divides.compile(T.Tensor((64, None), "float32"), np.int64(1), np.int64(1), target="sm_90a")


def test_performance_advisories_are_read_from_the_log():
    from jittile.backend.toolchain import performance_advisories

    log = (
        "ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored\n"
        "ptxas info    : Used 168 registers\n"
    )
    assert performance_advisories(log) == ["'setmaxnreg' ignored"]
    assert performance_advisories("ptxas info    : Used 32 registers") == []


def _ordered(fence=True, commit=True, wait=True, touch_after_fence=False, read_early=False):
    @jittile.kernel
    def order(D: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        A_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        if fence:
            T.ptx.wgmma.fence.sync.aligned()
        if touch_after_fence:
            acc[0] = 1.0
        T.cuda.tile.apply(T.ptx[MMA], acc, A_s, B_s.T)
        if commit:
            T.ptx.wgmma.commit_group.sync.aligned()
        if read_early:
            D[0, 0] = acc[0]
        if wait:
            T.ptx.wgmma.wait_group.sync.aligned(0)
        D[acc.row(0), acc.col(0)] = acc[0]

    return order


def test_the_wgmma_discipline_holds_quietly():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", jittile.JittileWarning)
        assert _lower(_ordered()).plan


@pytest.mark.parametrize(
    "broken, match",
    [
        (dict(fence=False), "no T.ptx.wgmma.fence.sync.aligned"),
        (dict(commit=False), "no T.ptx.wgmma.commit_group.sync.aligned"),
    ],
)
def test_a_missing_fence_or_commit_is_an_error(broken, match):
    with pytest.raises(jittile.ContractError, match=match) as info:
        _lower(_ordered(**broken))
    assert info.value.parameter == "order"


@pytest.mark.parametrize(
    "broken, match",
    [
        (dict(touch_after_fence=True), "touched at .* after the last wgmma.fence"),
        (dict(read_early=True), "may still be using it"),
        (dict(wait=False), "may still be using it"),
    ],
)
def test_touching_registers_out_of_order_is_a_warning(broken, match):
    with pytest.warns(jittile.JittileWarning, match=match):
        _lower(_ordered(**broken))


def _two_groups(read: str):
    """Two committed groups (``first`` then ``second``), ``wait_group(1)``, then ``read`` is read:
    the older group is complete, the newer may not be (FlashAttention-3's softmax overlap)."""

    @jittile.kernel
    def overlap(D: T.Tensor((64, None), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        A_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(
            (64, 64), "bfloat16", layout=swizzle(3, (64, 64), "bfloat16"), align=1024
        )
        first = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        second = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        T.ptx.wgmma.fence.sync.aligned()
        T.cuda.tile.apply(T.ptx[MMA], first, A_s, B_s.T)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.cuda.tile.apply(T.ptx[MMA], second, A_s, B_s.T)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(1)
        if read == "first":
            D[0, 0] = first[0]
        else:
            D[0, 0] = second[0]
        T.ptx.wgmma.wait_group.sync.aligned(0)
        D[first.row(0), first.col(0)] = first[0] + second[0]

    return overlap


@pytest.mark.filterwarnings("ignore:.*ptxas. wgmma.mma_async instructions are serialized")
def test_wait_group_1_completes_all_but_the_newest_group():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", jittile.JittileWarning)
        assert _lower(_two_groups("first")).plan
    with pytest.warns(jittile.JittileWarning, match="'second' while the wgmma at"):
        _lower(_two_groups("second"))


def test_a_launch_with_a_partial_warpgroup_is_refused_at_compile_time():
    kernel = _kernel(block=128)
    with pytest.raises(jittile.ContractError, match="whole warpgroups") as info:
        kernel.compile(
            T.Tensor((64, None), "float32"),
            target="sm_90a",
            launch=T.cuda.LaunchConfig(grid=1, block=96),
        )
    assert info.value.parameter == "operands"
    assert kernel.compile(
        T.Tensor((64, None), "float32"),
        target="sm_90a",
        launch=T.cuda.LaunchConfig(grid=1, block=256),
    ).plan


def test_the_gemm_example_keeps_its_wgmmas_pipelined_in_registers():
    """examples/gemm_bf16.py: HGMMA.64x256x16 from one tile call per stage, no local memory, and
    one wait per group of four (ptxas serializes wgmmas into a wait each when anything in the
    kernel, such as a 64-bit division, makes a call)."""
    import sys
    import warnings
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import gemm_bf16

    spec = T.Tensor((None, None), "bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", jittile.JittileWarning)  # no ptxas advisory either
        ck = gemm_bf16.gemm_bf16.compile(
            spec, spec, spec, np.int32(1), np.int32(1), np.int32(1), target="sm_90a"
        )
    hgmma = ck.sass.count("HGMMA.64x256x16.F32.BF16")
    assert hgmma and hgmma % 4 == 0
    # a wait per wait_group (the loop's and the one after it), never one per instruction
    assert ck.sass.count("WARPGROUP.DEPBAR") <= hgmma // 4 + 1
    assert ck.metadata["local_bytes"] == 0
