"""Seeded fuzzing of ``T.cuda.tile.apply``: thousands of random calls, each either lowering or
failing with a jittile error located in the kernel's file at a line of the kernel. No other
exception may escape (a ``ValueError`` from a pattern, a ``KeyError`` from the frontend...).

Every draw starts from a legal call of one of the families (TMA tensor copies and reductions,
non-tensor bulk copies, ``tcgen05.cp``) and perturbs it: the opcode is mutated or replaced, an
operand replaced by another operand, a value, a region with bad bounds or a name of the wrong
kind, keywords dropped, added (any family's parameter names and made-up ones) or given values of
every kind. Most draws are only lowered (``lower_kernel``: no numba); a few that lower cleanly are
compiled in full. ``JITTILE_FUZZ_SEED`` and ``JITTILE_FUZZ_DRAWS`` vary the run.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import warnings
from dataclasses import dataclass

import pytest

from jittile import JittileError
from jittile.dtypes import dtype as as_dtype
from jittile.frontend.lower import lower_kernel
from jittile.ir import ScalarParam, TensorMapParam
from jittile.patterns import registry
from jittile.specialize import array_param
from jittile.targets import Target

SEED = int(os.environ.get("JITTILE_FUZZ_SEED", "20260611"))
DRAWS = int(os.environ.get("JITTILE_FUZZ_DRAWS", "2400"))
COMPILES = 12

HEADER = """\
import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.layout import S, TileLayout, swizzle

TMEM_LAYOUT = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])


@jittile.kernel
def kernel(A: T.Tensor((64, 64), "uint32"), B: T.Tensor((None, 256), "float32"),
           C: T.Tensor((512,), "uint8"), M, r: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128{cluster}))
    lane = T.cuda.lane_id()
    mbar = T.alloc_shared((2,), "uint64")
    s32 = T.alloc_shared((8, 64), "uint32", align=128)
    sf = T.alloc_shared((2, 8, 32), "float32", layout=swizzle(3, (2, 8, 32), "float32"),
                        align=1024)
    s8 = T.alloc_shared((256,), "uint8", align=128)
    st = T.alloc_shared((128, 4), "uint32", align=16)
    taddr = T.alloc_shared((1,), "uint32")
    tm = T.cuda.decl_tmem(taddr[0], ty_args=[T.Tensor((128, 4), "uint32", scope="tmem",
                                                      layout=TMEM_LAYOUT)])
    T.cuda.tile.apply(
"""
FIRST_CALL_LINE = HEADER.count("\n") + 1

TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
BASES = [  # (opcode, operands, keywords): legal calls, one or more per family
    (TMA, ["s32", "A"], {"box": "(8, 64)", "coords": "(0, 0)", "mbar": "mbar.ptr_to([0])"}),
    (
        TMA,
        ["sf", "B"],
        {
            "box": "(8, 32)",
            "coords": "(r, 0)",
            "coord_steps": "((0, 32),)",
            "swizzle": "3",
            "mbar": "mbar.ptr_to([1])",
        },
    ),
    (
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
        ["A", "s32"],
        {"box": "(8, 64)", "coords": "(8, 0)"},
    ),
    (
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group",
        ["A", "s32"],
        {"box": "(8, 64)", "coords": "(0, 0)"},
    ),
    (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster",
        ["s32", "A"],
        {
            "box": "(8, 64)",
            "coords": "(0, 0)",
            "mbar": "mbar.ptr_to([0])",
            "cta_mask": "T.uint16(3)",
        },
    ),
    (
        "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes",
        ["s8", "C[0:256]"],
        {"mbar": "mbar.ptr_to([0])"},
    ),
    ("cp.async.bulk.global.shared::cta.bulk_group", ["B[r, 0:64]", "s32[0, :]"], {}),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32", ["A[3, 0:64]", "s32[1, :]"], {}),
    ("cp.async.bulk.prefetch.L2.global", ["C[0:512]"], {}),
    (
        "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.L2::cache_hint",
        ["s8", "C[256:512]"],
        {"mbar": "mbar.ptr_to([1])", "cache_policy": "T.uint64(0)"},
    ),
    ("tcgen05.cp.cta_group::1.128x128b", ["tm", "st"], {}),
    ("tcgen05.cp.cta_group::1.128x128b", ["tm[0:128, 0:4]", "st"], {"scope": "'thread'"}),
]
OPCODE_WORDS = [
    "tile",
    "im2col",
    "1d",
    "3d",
    "5d",
    "shared::cta",
    "shared::cluster",
    "global",
    "bulk_group",
    "mbarrier::complete_tx::bytes",
    "multicast::cluster",
    "L2::cache_hint",
    "add",
    "min",
    "xor",
    "u32",
    "f16",
    "noftz",
    "128x256b",
    "cta_group::2",
    "warpx4",
    "tile::gather4",
    "",
    "cp",
    "tensor",
    "b8x16.b6x16_p32",
]
OPERANDS = [
    "s32",
    "sf",
    "s8",
    "st",
    "A",
    "B",
    "C",
    "M",
    "tm",
    "sf[1]",
    "sf[r]",
    "s32[0:4, :]",
    "s32[lane, 0:16]",
    "s32[9, :]",
    "s32[0:0, :]",
    "s32[::2, :]",
    "s32[1.5, :]",
    "s8[0:100]",
    "A[0:8, 0:16]",
    "A[0:8]",
    "A[lane, 0:64]",
    "A[64, 0:64]",
    "A[:, 3]",
    "B[r, :]",
    "B[-1, 0:16]",
    "C[0:15]",
    "C[16:]",
    "C[r]",
    "tm[0:64, :]",
    "tm[0:300, :]",
    "mbar",
    "mbar.ptr_to([0])",
    "lane",
    "r",
    "5",
    "1.5",
    "None",
    "'x'",
    "(1, 2)",
    "T.ptx",
    "T.uint32(3)",
    "mbar[0]",
    "taddr[0]",
    "s32.ptr_to([0, 0])",
    "A[0, 0]",
]
VALUES = [
    "0",
    "1",
    "3",
    "8",
    "16",
    "-1",
    "256",
    "257",
    "2 ** 40",
    "10 ** 30",
    "1.5",
    "True",
    "None",
    "'tile'",
    "'galaxy'",
    "'thread'",
    "'warp'",
    "'warpgroup'",
    "'cta'",
    "'cluster'",
    "'float4_e2m1fn'",
    "'tf32'",
    "'uint32'",
    "lane",
    "lane + 1",
    "r",
    "A",
    "s32",
    "tm",
    "M",
    "mbar.ptr_to([0])",
    "mbar.ptr_to([1])",
    "mbar[0]",
    "T.uint16(3)",
    "T.uint64(0)",
    "T.uint32(1)",
    "swizzle(1, (8, 8), 'uint32')",
    "T.ptx",
    "(8, 64)",
    "(8, 32)",
    "(0, 0)",
    "(r, 0)",
    "(lane, 3, 7, 11)",
    "((8, 0),)",
    "((0, 32),)",
    "(1, 1)",
    "(2, 1)",
    "()",
    "(0,)",
    "(8, 64, 1)",
    "(300, 1)",
    "(8, -4)",
    "(8, 'a')",
    "(None, 1)",
    "((1, 2, 3),)",
    "(((0,),),)",
    "(1.5, 2)",
    "(A, 0)",
    "(s32, 0)",
]


def keyword_names() -> list[str]:
    names = {p.name for pattern in registry.patterns() for p in pattern.parameters}
    return sorted(names) + ["scope", "colour", "boxes", "mbarrier", "pred"]


@dataclass
class Draw:
    source: str
    target: str
    first_line: int
    last_line: int


def draw(rnd: random.Random, keywords: list[str]) -> Draw:
    opcode, operands, kw = rnd.choice(BASES)
    operands, kw = list(operands), dict(kw)
    for _ in range(rnd.choice([0, 1, 1, 2, 3])):
        mutation = rnd.randrange(6)
        if mutation == 0:
            words = opcode.split(".")
            words.insert(rnd.randrange(len(words) + 1), rnd.choice(OPCODE_WORDS))
            if rnd.random() < 0.5 and len(words) > 2:
                del words[rnd.randrange(len(words))]
            opcode = ".".join(words)
        elif mutation == 1 and operands:
            operands[rnd.randrange(len(operands))] = rnd.choice(OPERANDS)
        elif mutation == 2:
            if rnd.random() < 0.5 and operands:
                operands.pop(rnd.randrange(len(operands)))
            else:
                operands.insert(rnd.randrange(len(operands) + 1), rnd.choice(OPERANDS))
        elif mutation == 3 and kw:
            kw.pop(rnd.choice(sorted(kw)))
        elif mutation == 4:
            kw[rnd.choice(keywords)] = rnd.choice(VALUES)
        elif kw:
            kw[rnd.choice(sorted(kw))] = rnd.choice(VALUES)
    opcode_text = rnd.choice(
        [f'T.ptx["{opcode}"]'] * 18
        + ["T.ptx", "T.ptx[5]", "LAST", 'T.ptx["' + opcode.upper() + '"]']
    )
    cluster = rnd.choice(["", ", cluster=(2, 1, 1)"])
    lines = [f"        {opcode_text},"] + [f"        {o}," for o in operands]
    lines += [f"        {name}={value}," for name, value in kw.items()]
    source = HEADER.format(cluster=cluster) + "\n".join(lines) + "\n    )\n"
    target = rnd.choice(["sm_90a", "sm_90a", "sm_100a", "sm_100a", "sm_90", "sm_120a"])
    first = HEADER.index("def kernel")
    return Draw(source, target, HEADER[:first].count("\n") + 1, source.count("\n"))


_serial = itertools.count()


def load(source: str, directory) -> tuple:
    name = f"fuzz_{next(_serial)}"
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel, str(path)


def params(kernel) -> list:
    annotations = dict(zip(kernel.specializer.names, kernel.specializer.annotations))
    return [array_param(name, annotations[name], annotations[name]) for name in "ABC"] + [
        TensorMapParam("M"),
        ScalarParam("r", as_dtype("int32")),
    ]


def check_located(error: JittileError, path: str, case: Draw) -> None:
    assert error.filename == path, f"{error!r} not located in {path}:\n{case.source}"
    assert case.first_line <= error.lineno <= case.last_line, f"{error}\n{case.source}"
    assert str(error).startswith(f"{path}:{error.lineno}:{error.col_offset}: ")


def test_random_tile_calls_lower_or_raise_located_jittile_errors(tmp_path):
    rnd = random.Random(SEED)
    keywords = keyword_names()
    outcomes = {"lowered": 0, "error": 0, "compiled": 0}
    for _ in range(DRAWS):
        case = draw(rnd, keywords)
        kernel, path = load(case.source, tmp_path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lower_kernel(kernel.source, params(kernel), Target.parse(case.target))
        except JittileError as error:
            check_located(error, path, case)
            outcomes["error"] += 1
            continue
        except Exception as error:
            pytest.fail(f"{type(error).__name__}: {error}\n{case.source}")
        outcomes["lowered"] += 1
        if outcomes["compiled"] < COMPILES:
            compile_fully(kernel, path, case)
            outcomes["compiled"] += 1
    # Both outcomes must be common, or the draws test little.
    assert outcomes["lowered"] >= DRAWS // 20 and outcomes["error"] >= DRAWS // 2, outcomes
    assert outcomes["compiled"] == COMPILES


def compile_fully(kernel, path: str, case: Draw) -> None:
    """The whole pipeline (numba-cuda and nvJitLink too) on a draw that lowered: it compiles, or
    fails with a located jittile error."""
    from jittile.backend.compiler import compile_lowered

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = lower_kernel(kernel.source, params(kernel), Target.parse(case.target))
        try:
            compile_lowered(lowered, Target.parse(case.target))
        except JittileError as error:
            check_located(error, path, case)
