"""The non-tensor bulk-copy family (patterns/bulk_copy.py): every legality condition violated and
just met, every form assembled to SASS, the reduction table checked against ptxas, and plans in
the user's words. Kernels are rendered like the TMA contract tests (tests/test_tma_contract.py)."""

from __future__ import annotations

import re
import subprocess
import tempfile

import pytest
from test_tma_contract import Case, Spec, load_kernel, lower

from jittile import ContractError, LaunchError
from jittile.backend.toolchain import find_tool, sass_opcodes
from jittile.dtypes import dtype as as_dtype
from jittile.ir import ArgumentAlignment, ArrayParam, KernelIR
from jittile.patterns import registry
from jittile.patterns.bulk_copy import REDUCTION_TYPES, TYPE_STORAGE
from jittile.runtime.launcher import check_array

LOAD_CTA = "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"
LOAD_CLUSTER = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
MCAST = LOAD_CLUSTER + ".multicast::cluster"
STORE = "cp.async.bulk.global.shared::cta.bulk_group"
PREFETCH = "cp.async.bulk.prefetch.L2.global"
HINT = ".L2::cache_hint"


def reduce_op(op: str, type_: str) -> str:
    return f"cp.reduce.async.bulk.global.shared::cta.bulk_group.{op}.{type_}"


ROWS = 'A: T.Tensor((4, 256), "uint32")'
LINE = 'T.alloc_shared((256,), "uint32", align=128)'
POLICY = 'policy = T.ptx["createpolicy.fractional.L2::evict_last.b64"]()'
LOAD = Spec(
    op=LOAD_CTA,
    params=ROWS,
    shared=LINE,
    operands="s, A[1, 0:256]",
    kw={"mbar": "mbar.ptr_to([0])"},
)
STORE_SPEC = Spec(op=STORE, params=ROWS, shared=LINE, operands="A[1, 0:256], s", kw={})
REDUCE = Spec(
    op=reduce_op("add", "u32"), params=ROWS, shared=LINE, operands="A[1, 0:256], s", kw={}
)
PREFETCH_SPEC = Spec(op=PREFETCH, params=ROWS, shared=LINE, operands="A[1, 0:256]", kw={})
MULTICAST = Spec(
    op=MCAST,
    params=ROWS,
    shared=LINE,
    operands="s, A[1, 0:256]",
    cluster=(2, 1, 1),
    kw={"mbar": "mbar.ptr_to([0])", "cta_mask": "T.uint16(3)"},
)


def _typed(spec: Spec, op: str, dtype: str) -> Spec:
    return spec.but(
        op=op,
        params=f'A: T.Tensor((4, 256), "{dtype}")',
        shared=f'T.alloc_shared((256,), "{dtype}", align=128)',
    )


CASES = [
    Case(
        "size-multiple-of-16",
        LOAD.but(shared='T.alloc_shared((3,), "uint32", align=16)', operands="s, A[1, 0:3]"),
        LOAD.but(shared='T.alloc_shared((4,), "uint32", align=16)', operands="s, A[1, 0:4]"),
        "operands",
        r"12 bytes .* multiple of 16",
    ),
    Case(
        "one-size",
        LOAD.but(operands="s, A[1, 0:128]"),
        LOAD,
        "operands",
        r"holds 256 elements but the global region holds 128",
    ),
    Case(
        "one-element-type",
        LOAD.but(shared='T.alloc_shared((256,), "float32", align=128)'),
        LOAD,
        "operands",
        r"one element type",
    ),
    Case(
        "shared-buffer-alignment",
        LOAD.but(shared='T.alloc_shared((256,), "uint32")'),
        LOAD.but(shared='T.alloc_shared((256,), "uint32", align=16)'),
        "operand 0",
        r"aligned to 8 bytes; bulk copies need 16",
    ),
    Case(
        "shared-region-alignment",
        LOAD.but(
            shared='T.alloc_shared((40,), "uint32", align=16)', operands="s[2:34], A[1, 0:32]"
        ),
        LOAD.but(
            shared='T.alloc_shared((40,), "uint32", align=16)', operands="s[4:36], A[1, 0:32]"
        ),
        "operand 0",
        r"starts at byte 8 .* 16-byte aligned",
    ),
    Case(
        "shared-unswizzled",
        LOAD.but(
            shared='T.alloc_shared((8, 32), "uint32", layout=swizzle(3, (8, 32), "uint32"), '
            "align=1024)",
            operands="s, A[1, 0:256]",
        ),
        LOAD.but(shared='T.alloc_shared((8, 32), "uint32", align=1024)', operands="s, A[1, 0:256]"),
        "operand 0",
        r"swizzled",
    ),
    Case(
        "shared-contiguous",
        LOAD.but(
            shared='T.alloc_shared((4, 128), "uint32", align=128)',
            operands="s[0:2, 0:64], A[1, 0:128]",
        ),
        LOAD.but(
            shared='T.alloc_shared((4, 128), "uint32", align=128)',
            operands="s[1, 0:128], A[1, 0:128]",
        ),
        "operand 0",
        r"shared region is not contiguous",
    ),
    Case(
        "runtime-stage-step",
        LOAD.but(
            shared='T.alloc_shared((2, 6), "uint32", align=16)', operands="s[lane % 2], A[1, 0:6]"
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 8), "uint32", align=16)', operands="s[lane % 2], A[1, 0:8]"
        ),
        "operands",
        r"steps the origin by 24 bytes",
    ),
    Case(
        "global-contiguous",
        LOAD.but(operands="s, A[0:2, 0:128]"),
        LOAD.but(operands="s, A[0:1, 0:256]"),
        "operand 1",
        r"not contiguous: axis 0 spans 2 elements",
    ),
    Case(
        "global-static-extent",
        LOAD.but(params='A: T.Tensor((4, None), "uint32")', operands="s, A[1, :]"),
        LOAD.but(params='A: T.Tensor((4, None), "uint32")', operands="s, A[1, 0:256]"),
        "operand 1",
        r"dynamic; give the slice explicit bounds",
    ),
    Case(
        "global-index-inside",
        LOAD.but(operands="s, A[4, 0:256]"),
        LOAD.but(operands="s, A[3, 0:256]"),
        "operand 1",
        r"inside the axis",
    ),
    Case(
        "mbar-required",
        LOAD.but(kw={"mbar": None}),
        LOAD,
        "mbar",
        r"is required: loads complete on an mbarrier",
    ),
    Case(
        "mbar-only-for-loads",
        STORE_SPEC.but(kw={"mbar": "mbar.ptr_to([0])"}),
        STORE_SPEC,
        "mbar",
        r"not allowed here",
    ),
    Case(
        "mbar-is-a-pointer",
        LOAD.but(kw={"mbar": "0"}),
        LOAD,
        "mbar",
        r"runtime shared-memory pointer",
    ),
    Case(
        "cta-mask-only-multicast",
        LOAD.but(kw={"cta_mask": "T.uint16(3)"}),
        LOAD,
        "cta_mask",
        r"only .multicast::cluster loads take a CTA mask",
    ),
    Case(
        "cta-mask-required",
        MULTICAST.but(kw={"cta_mask": None}),
        MULTICAST,
        "cta_mask",
        r"needs the CTA mask",
    ),
    Case(
        "cta-mask-16-bit",
        MULTICAST.but(kw={"cta_mask": "70000"}),
        MULTICAST.but(kw={"cta_mask": "3"}),
        "cta_mask",
        r"16-bit operand, got 70000",
    ),
    Case(
        "multicast-target",
        MULTICAST.but(target="sm_90"),
        MULTICAST,
        "target",
        r"requires target sm_90a or sm_100a",
    ),
    Case(
        "cache-policy-only-hinted",
        STORE_SPEC.but(extra=POLICY, kw={"cache_policy": "policy"}),
        STORE_SPEC.but(op=STORE + HINT, extra=POLICY, kw={"cache_policy": "policy"}),
        "cache_policy",
        r"only .L2::cache_hint forms take a cache policy",
    ),
    Case(
        "cache-policy-required",
        PREFETCH_SPEC.but(op=PREFETCH + HINT),
        PREFETCH_SPEC.but(op=PREFETCH + HINT, extra=POLICY, kw={"cache_policy": "policy"}),
        "cache_policy",
        r"needs the cache policy",
    ),
    Case(
        "f16-add-is-noftz",
        _typed(REDUCE, reduce_op("add", "f16"), "float16"),
        _typed(REDUCE, reduce_op("add.noftz", "f16"), "float16"),
        "opcode",
        r"'.add.f16' is not a reduction .* \.add\.noftz\.f16",
    ),
    Case(
        "logic-ops-are-bitwise",
        REDUCE.but(op=reduce_op("and", "u32")),
        REDUCE.but(op=reduce_op("and", "b32")),
        "opcode",
        r"'.and' takes .and.b32, .and.b64",
    ),
    Case(
        "type-matches-elements",
        _typed(REDUCE, reduce_op("add", "u32"), "int32"),
        _typed(REDUCE, reduce_op("add", "s32"), "int32"),
        "opcode",
        r"'.u32' reduces uint32 elements, but the regions hold int32",
    ),
    Case(
        "qualifier-order",
        LOAD.but(op="cp.async.bulk.shared::cta.global" + HINT + ".mbarrier::complete_tx::bytes"),
        LOAD,
        "opcode",
        r"missing \.completion_mechanism .* before '\.L2::cache_hint'",
    ),
    Case(
        "unknown-parameter",
        LOAD.but(kw={"box": "(8, 16)"}),
        LOAD,
        "box",
        r"is not a parameter of cp.async.bulk",
    ),
    Case(
        "operand-count",
        PREFETCH_SPEC.but(operands="A[1, 0:256], s"),
        PREFETCH_SPEC,
        "operands",
        r"takes 1 operand \(global\), got 2",
    ),
    Case(
        "operand-roles",
        LOAD.but(operands="A[1, 0:256], s"),
        LOAD,
        "operand 0",
        r"operand 0 \(shared\) must be",
    ),
    Case(
        "pred-is-a-bool",
        LOAD.but(kw={"pred": "3"}),
        LOAD.but(kw={"pred": "lane == 0"}),
        "pred",
        r"runtime bool or None",
    ),
    Case(
        "no-group-axes",
        LOAD.but(kw={"scope": "'warp'"}),
        LOAD.but(kw={"scope": "'thread'"}),
        "scope",
        r"no group axes: scope must be 'thread', got 'warp'",
    ),
]


def _ids(cases):
    return [c.id for c in cases]


def _tagged_line(case: Case, tags: dict) -> int:
    return tags[
        case.parameter
        if case.parameter in case.bad.kw
        else "operands"
        if case.parameter.startswith("operand ")
        else "call"
    ]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_violation_is_a_located_contract_error(case: Case, tmp_path):
    kernel, path, tags = load_kernel(case.bad, tmp_path)
    with pytest.raises(ContractError) as info:
        kernel.compile(target=case.bad.target)
    error = info.value
    assert error.filename == path and error.lineno == _tagged_line(case, tags), str(error)
    assert error.opcode == case.bad.op and error.parameter == case.parameter, str(error)
    assert re.search(case.match, str(error)), str(error)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_just_satisfied_lowers(case: Case, tmp_path):
    kernel, _, _ = load_kernel(case.good, tmp_path)
    (site,) = lower(kernel, case.good.target).ir.sites
    assert site.family == "cp.async.bulk" and len(site.plan) == 1
    assert site.plan[0].bytes % 16 == 0


FORMS = [
    (LOAD, "UBLKCP.S.G"),
    (LOAD.but(op=LOAD_CLUSTER), "UBLKCP.S.G"),
    (MULTICAST, "UBLKCP.S.G.MULTICAST"),
    (STORE_SPEC, "UBLKCP.G.S"),
    (REDUCE, "UBLKRED.G.S.ADD"),
    (PREFETCH_SPEC, "UBLKPF.L2"),
]
FORMS += [
    (
        spec.but(
            op=spec.op.replace(".add.u32", "") + HINT + (".add.u32" if spec is REDUCE else ""),
            extra=POLICY,
            kw={**spec.kw, "cache_policy": "policy"},
        ),
        sass,
    )
    for spec, sass in list(FORMS)
]


@pytest.mark.parametrize("spec,sass", FORMS, ids=[s.op for s, _ in FORMS])
def test_every_form_assembles(spec, sass, tmp_path):
    kernel, _, _ = load_kernel(spec, tmp_path)
    ck = kernel.compile(target="sm_90a")
    opcodes = sass_opcodes(ck.sass)
    assert any(name.startswith(sass) for name in opcodes), opcodes
    assert not any("TRAP" in name for name in opcodes)  # static offsets: no runtime check


@pytest.mark.parametrize("op,type_", [(o, t) for o, ts in REDUCTION_TYPES.items() for t in ts])
def test_every_accepted_reduction_assembles(op, type_, tmp_path):
    dtype = TYPE_STORAGE[type_][0]
    kernel, _, _ = load_kernel(_typed(REDUCE, reduce_op(op, type_), dtype), tmp_path)
    opcodes = sass_opcodes(kernel.compile(target="sm_90a").sass)
    assert any(name.startswith("UBLKRED.G.S") for name in opcodes), opcodes


def _ptxas_accepts(instruction: str) -> bool:
    ptxas = find_tool("ptxas")
    ptx = (
        ".version 8.6\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p) {\n"
        " .reg .b64 %rd<2>; .reg .b32 %r<3>;\n ld.param.u64 %rd1, [p];\n mov.u32 %r1, 0;\n"
        f" mov.u32 %r2, 256;\n {instruction} [%rd1], [%r1], %r2;\n ret;\n}}\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        return (
            subprocess.run(
                [ptxas, "-arch=sm_90a", f.name, "-o", "/dev/null"], capture_output=True
            ).returncode
            == 0
        )


@pytest.mark.skipif(find_tool("ptxas") is None, reason="needs ptxas (the dev extra)")
def test_reduction_table_is_exactly_what_ptxas_accepts():
    ops = ("add", "add.noftz", "min", "max", "inc", "dec", "and", "or", "xor")
    for op in ops:
        for type_ in TYPE_STORAGE:
            accepted = _ptxas_accepts(reduce_op(op, type_))
            assert accepted == (type_ in REDUCTION_TYPES[op]), (op, type_)


def test_runtime_index_with_an_unknown_stride_checks_alignment_at_run_time(tmp_path):
    spec = LOAD.but(params='A: T.Tensor((4, None), "uint32")', operands="s, A[lane % 4, 0:256]")
    kernel, _, _ = load_kernel(spec, tmp_path)
    ck = kernel.compile(target="sm_90a")
    (record,) = ck.plan[0].plan
    assert record.fields["runtime_alignment_check"] is True
    assert any("TRAP" in name for name in sass_opcodes(ck.sass))
    known = LOAD.but(operands="s, A[lane % 4, 0:256]")  # 1 KB rows: aligned whatever the row
    kernel, _, _ = load_kernel(known, tmp_path)
    (record,) = kernel.compile(target="sm_90a").plan[0].plan
    assert "runtime_alignment_check" not in record.fields


def test_plan_reads_in_the_users_words_and_round_trips(tmp_path):
    spec = LOAD.but(
        shared='T.alloc_shared((2, 256), "uint32", align=128)',
        operands="s[lane % 2], A[lane % 4, 0:256]",
    )
    kernel, _, _ = load_kernel(spec, tmp_path)
    lowered = lower(kernel, "sm_90a")
    text = str(lowered.ir.plan)
    assert "__jt_" not in text
    assert "barrier mbar.ptr_to([0])" in text and "global &A[lane % 4, 0]" in text
    assert "shared address &s[+((lane % 2) * 1024) B]" in text and "1024 B" in text
    record = lowered.ir.record(kernel.source.node_indices())
    assert (
        KernelIR.restore(record, lowered.ir.params, kernel.source.locate, registry.plan_schema())
        == lowered.ir
    )
    assert lowered.ir.alignments == [ArgumentAlignment("A", 16, lowered.ir.alignments[0].why)]


def test_registry_claims_copies_but_leaves_group_instructions_raw():
    assert registry.pattern_for(LOAD_CTA).family == "cp.async.bulk"
    assert registry.pattern_for(reduce_op("add", "u32")).family == "cp.async.bulk"
    assert (
        registry.pattern_for("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group").family
        == "cp.async.bulk.tensor"
    )
    assert registry.pattern_for("cp.async.bulk.commit_group") is None
    assert registry.pattern_for("cp.async.bulk.wait_group.read") is None


class _View:
    dtype, ndim, shape, strides, c_contiguous = as_dtype("uint32"), 2, (4, 256), (1024, 4), True

    def __init__(self, ptr: int):
        self.ptr = ptr


def test_launch_refuses_a_misaligned_tensor_before_launching():
    param = ArrayParam("A", as_dtype("uint32"), 2, (4, 256), "C")
    need = [ArgumentAlignment("A", 16, "the bulk copy at k.py:3:4")]
    check_array(param, _View(0x1000), need)
    with pytest.raises(LaunchError, match=r"not 16-byte aligned, which the bulk copy at k.py:3:4"):
        check_array(param, _View(0x1004), need)
