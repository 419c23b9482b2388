"""Plans as data: every example's plan reads in the user's words and survives the cache entry's
JSON exactly; plan values are typed expression trees with their own JSON form."""

import importlib
import json

import pytest

from jittile import T
from jittile.ir import (
    BinOp,
    DescriptorWord,
    GlobalAddress,
    HostParam,
    KernelIR,
    SharedAddress,
    Special,
    Var,
    add,
    descriptor_word,
    expr_from_json,
    expr_to_json,
    mul,
)
from jittile.patterns import registry

EXAMPLES = [
    ("tma_two_boxes", "tma_load", "sm_90a", None),
    ("tma_store", None, "sm_90a", None),
    ("tma_reduce_add", None, "sm_90a", None),
    (
        "tma_swizzled_copy",
        None,
        "sm_90a",
        (T.Tensor((256, 256), "float32"), T.Tensor((256, 256), "float32"), 256, 256, 64, 32),
    ),
    ("tmem_copy_readback", None, "sm_100a", None),
    ("tmem_decompress", None, "sm_100a", None),
]


def _kernels(module_name: str, name: str | None):
    module = importlib.import_module(module_name)
    import jittile

    found = [
        v
        for k, v in vars(module).items()
        if isinstance(v, jittile.Kernel) and (name is None or k == name)
    ]
    assert found
    return found


@pytest.mark.parametrize("module_name, name, target, args", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_plans_read_in_user_names_and_round_trip(module_name, name, target, args):
    from jittile.frontend.lower import lower_kernel
    from jittile.targets import Target

    for kernel in _kernels(module_name, name):
        params = kernel.specializer.params(args or tuple(kernel.specializer.annotation_specs()))
        lowered = lower_kernel(kernel.source, params, Target.parse(target))
        text = str(lowered.ir.plan)
        assert "__jt_" not in text and lowered.ir.sites, text
        record = json.loads(json.dumps(lowered.ir.record(kernel.source.node_indices())))
        assert (
            KernelIR.restore(record, params, kernel.source.locate, registry.plan_schema())
            == lowered.ir
        )


def test_seed_example_plan_shows_each_instruction():
    import tma_two_boxes

    ck = tma_two_boxes.tma_load.compile(target="sm_90a")
    lines = str(ck.plan).splitlines()
    opcode = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    assert lines[0].endswith("tile call of family cp.async.bulk.tensor")
    assert lines[1].split() == [
        opcode,
        "[0]",
        "ptx",
        "coords",
        "{0,",
        "0}",
        "shared",
        "+0",
        "512",
        "B",
        "barrier",
        "mbar.ptr_to([0])",
        "tensormap(A)",
        "box=(8,",
        "16)",
        "swizzle=0",
    ]
    assert "ptx coords {0, 8}  shared +512  512 B  barrier mbar.ptr_to([0])" in lines[2]


VALUES = [
    7,
    Var("__jt_v0", "t * 64"),
    Special("lane"),
    SharedAddress("buf", 512),
    SharedAddress("buf", BinOp("*", Var("__jt_v1", "s % 2"), 1024)),
    GlobalAddress("A", (Var("__jt_v2", "row"), 0)),
    HostParam("__jt_tmap0", "A[0:64, :]"),
    BinOp("|", BinOp("&", BinOp(">>", SharedAddress("s"), 4), 0x3FFF), 1 << 62),
    DescriptorWord(SharedAddress("s", BinOp("*", Var("__jt_v3", "stage"), 16384)), 1 << 62),
]


@pytest.mark.parametrize("value", VALUES, ids=str)
def test_plan_values_round_trip_through_json(value):
    assert expr_from_json(json.loads(json.dumps(expr_to_json(value)))) == value
    assert "__jt_" not in str(value)


def test_plan_value_text_and_folding():
    t = Var("__jt_v0", "t % 2")
    assert str(add(mul(t, 1024), 128)) == "(t % 2) * 1024 + 128"
    assert str(mul(add(t, 1), 4)) == "((t % 2) + 1) * 4"
    assert add(3, 4) == 7 and mul(t, 1) is t and mul(t, 0) == 0
    assert str(BinOp("+", Special("thread"), 1)) == "T.cuda.thread_idx() + 1"
    with pytest.raises(ValueError):
        expr_from_json(["var", 1, "x", "temp"])
    with pytest.raises(ValueError):
        expr_from_json(["nope"])
    with pytest.raises(TypeError):
        expr_to_json(True)


def test_a_descriptor_word_puts_the_address_bits_4_to_17_under_its_constant_fields():
    # 128B swizzle (bits 62-63 = 1), SBO 1024 B (64 << 32), LBO 16 B (1 << 16): by hand from the
    # PTX ISA's matrix-descriptor format; the start field is (address & 0x3FFFF) >> 4
    fields = (1 << 62) | (64 << 32) | (1 << 16)
    assert descriptor_word(0x1230, fields) == fields | 0x123
    assert descriptor_word(0x3FFF0, fields) == fields | 0x3FFF
    assert descriptor_word(0x40010, fields) == fields | 0x1  # bits past 17 do not reach it
    word = DescriptorWord(SharedAddress("s", 32), fields)
    assert str(word) == f"((&s[+32 B] >> 4) & 0x3fff) | {fields:#x}"
    with pytest.raises(ValueError, match="overlap the start address field"):
        DescriptorWord(SharedAddress("s"), fields | 0x10)
    with pytest.raises(ValueError):
        expr_from_json(["descriptor", ["shared", "s", 0], True])
