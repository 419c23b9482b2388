"""Seeded fuzzing of kernel statements: random expressions over every kind of name a kernel has
(scalars, tensors, shared buffers, local arrays, addresses, typed scalars, compile-time values,
modules, helpers) in assignments, element stores, branches, loops, helper calls and raw PTX.
Each kernel compiles or fails with a jittile error in its own file; no other exception escapes.
Most draws are compiled in full (numba-cuda's typing is where such escapes hide), a few hundred
per run; ``JITTILE_FUZZ_SEED`` varies the draws."""

from __future__ import annotations

import os
import random
import warnings

import pytest
from test_hostile_kernels import HEADER, compile_module, write

from jittile import JittileError

SEED = int(os.environ.get("JITTILE_FUZZ_SEED", "20260611"))
DRAWS = int(os.environ.get("JITTILE_STATEMENT_FUZZ_DRAWS", "600"))

ATOMS = [
    "lane",
    "tid",
    "n",
    "A",
    "s",
    "frag",
    "mbar",
    "A[0, 0]",
    "A[lane, 1]",
    "s[0, lane]",
    "frag[0]",
    "frag[lane]",
    "1",
    "0",
    "-1",
    "2.5",
    "True",
    "None",
    "'x'",
    "(1, 2)",
    "T.uint32(3)",
    "T.float32(1.5)",
    "T.int64(lane)",
    "mbar.ptr_to([0])",
    "s.ptr_to([0, 1])",
    "A.ptr_to([0, 0])",
    "T.address_of(s)",
    "T.cuda.warp_id()",
    "T.cuda.block_idx('x')",
    "T.cuda.cluster_ctarank()",
    "LOAD",
    "swizzle(1, (8, 8), 'uint32')",
    "T",
    "T.ptx",
    "range(3)",
    "len((1, 2))",
    "max(lane, 3)",
    "min(1, 2)",
    "abs(n)",
    "add_one",
    "2 ** 70",
]
OPS = ["+", "-", "*", "//", "%", "/", "<<", ">>", "&", "|", "^", "<", "==", "and", "or", "**"]
CALLS = ["T.uint32", "T.int32", "abs", "max", "int", "T.cuda.mbarrier_wait", "len", "T.float16"]


def expression(rnd: random.Random, depth: int = 0) -> str:
    if depth > 2 or rnd.random() < 0.4:
        return rnd.choice(ATOMS)
    a, b, c = (expression(rnd, depth + 1) for _ in range(3))
    return rnd.choice(
        [
            f"({a} {rnd.choice(OPS)} {b})",
            f"({rnd.choice(['-', 'not ', '~'])}{a})",
            f"({a} if {b} else {c})",
            f"{rnd.choice(CALLS)}({a})",
        ]
    )


def statement(rnd: random.Random) -> str:
    e, f = expression(rnd), expression(rnd)
    return rnd.choice(
        [
            f"x = {e}",
            f"Out[{rnd.choice(['0', 'lane', 'lane % 16'])}, 0] = {e}",
            f"if {e}:\n    Out[0, 0] = {f}",
            f"for i in range({e}):\n    Out[0, 1] = i",
            f"frag[0] = {e}",
            f"x = add_one({e})",
            f"s[0, 0] = {e}",
            f"T.ptx.mbarrier.init.shared.b64({e}, {f})",
        ]
    )


@pytest.mark.parametrize("block", range(3))
def test_random_statements_compile_or_raise_located_jittile_errors(block, tmp_path):
    rnd = random.Random(SEED * 3 + block)
    outcomes = {"compiled": 0, "error": 0}
    for _ in range(DRAWS // 3):
        body = "\n".join(statement(rnd) for _ in range(rnd.randint(1, 3)))
        text = HEADER + "".join(f"    {line}\n" for line in body.splitlines())
        name, path = write(text, tmp_path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile_module(name, path, "sm_90a")
        except JittileError as error:  # in the kernel, or in the helper above it
            assert error.filename == path and 1 <= error.lineno <= text.count("\n"), (error, body)
            assert str(error).startswith(f"{path}:{error.lineno}:") and "__jt_" not in str(error)
            outcomes["error"] += 1
            continue
        except Exception as error:
            pytest.fail(f"{type(error).__name__}: {error}\n{body}")
        outcomes["compiled"] += 1
    assert outcomes["compiled"] >= DRAWS // 30 and outcomes["error"] >= DRAWS // 6, outcomes
