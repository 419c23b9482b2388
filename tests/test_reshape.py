"""backend/reshape.py: the lowered function rewritten so numba-cuda has less to type and lower
(constant shared addresses hoisted, register fragments packed into one tuple), without changing
what the kernel computes."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import jittile
from jittile import T
from jittile.backend.reshape import reshape
from jittile.layout import wgmma_accumulator

REPO = Path(__file__).resolve().parent.parent


def _reshaped(source: str, namespace: dict, views=None, fragments=None) -> str:
    """The reshaped function's source; the globals it added are put in ``namespace`` for the
    caller to look at, after checking that reshaping left its inputs as they were."""
    function = ast.parse(source).body[0]
    before, names = ast.dump(function, include_attributes=True), dict(namespace)
    reshaped = reshape(function, namespace, views or {}, fragments or {})
    assert ast.dump(function, include_attributes=True) == before and namespace == names
    module = ast.Module(body=[reshaped.function], type_ignores=[])
    compile(module, "<reshaped>", "exec")  # still valid, every node located
    namespace.update(reshaped.namespace)
    return ast.unparse(reshaped.function)


def test_constant_shared_addresses_become_one_variable_each_and_unused_views_go():
    namespace = {"__jt_smem_bar_0": ("smem", None), "__jt_smem_buf_1": ("smem", None)}
    out = _reshaped(
        "def k(x):\n"
        "    bar = __jt_smem_bar_0()\n"
        "    buf = __jt_smem_buf_1()\n"
        "    f(__jt_saddr(bar, 0), 1)\n"
        "    f(__jt_saddr(bar, 0), 2)\n"
        "    g(__jt_saddr(buf, 2) + 256, buf[x])\n"
        "    g(__jt_saddr(buf, x), 0)\n",
        namespace,
        views={"bar": "__jt_smem_bar_0", "buf": "__jt_smem_buf_1"},
    )
    lines = out.splitlines()
    assert lines[1:3] == ["    __jt_addr0 = __jt_sa2()", "    __jt_addr1 = __jt_sa3()"]
    assert namespace["__jt_sa2"] == ("saddr_const", "__jt_smem_bar_0", 0, 0)
    assert namespace["__jt_sa3"] == ("saddr_const", "__jt_smem_buf_1", 2, 256)
    assert "bar = __jt_smem_bar_0()" not in out  # only its address was used
    assert "buf = __jt_smem_buf_1()" in out  # still indexed, and addressed at a runtime index
    assert "f(__jt_addr0, 1)" in out and "f(__jt_addr0, 2)" in out
    assert "g(__jt_addr1, buf[x])" in out and "g(__jt_saddr(buf, x), 0)" in out


def test_a_rebound_buffer_name_is_not_taken_for_the_buffer():
    source = (
        "def k(x):\n"
        "    bar = __jt_smem_bar_0()\n"
        "    if x:\n"
        "        bar = other()\n"
        "    f(__jt_saddr(bar, 0))\n"
    )
    out = _reshaped(source, {}, views={"bar": "__jt_smem_bar_0"})
    assert out == ast.unparse(ast.parse(source).body[0])


def _fragment_namespace() -> dict:
    return {"__jt_r0_0": ("record", 0, 0), "__jt_asm0": ("asm", None), "__jt_t_float32": ("type",)}


REGS = tuple(f"__jt_frag_acc_{i}" for i in range(4))
ALL = ", ".join(REGS)


def test_a_fragment_becomes_one_tuple_through_instructions_reads_and_writes():
    namespace = _fragment_namespace()
    out = _reshaped(
        "def k(d):\n"
        f"    {ALL} = (__jt_t_float32(0), __jt_t_float32(0), __jt_t_float32(0), __jt_t_float32(0))\n"
        "    for i in range(d):\n"
        f"        {ALL} = __jt_r0_0({ALL}, d, i)\n"
        "    __jt_frag_acc_2 = __jt_frag_acc_2 * 2.0\n"
        "    __jt_frag_acc_3 += 1.0\n"
        "    __jt_frag_acc_0, __jt_frag_acc_1 = __jt_asm0(__jt_frag_acc_0, __jt_frag_acc_1)\n"
        "    store(__jt_frag_acc_1, __jt_asm0(__jt_frag_acc_3, __jt_frag_acc_2))\n",
        namespace,
        fragments={"acc": REGS},
    )
    assert "__jt_frag_acc_" not in out.replace("__jt_frag_acc =", "").replace(
        "__jt_frag_acc[", ""
    ).replace("__jt_frag_acc,", "").replace("__jt_frag_acc)", "")
    specs = {name: spec for name, spec in namespace.items() if name.startswith("__jt_pk")}
    by_kind = {spec[0]: (name, spec) for name, spec in specs.items()}
    fill, _ = by_kind["fill"]
    assert f"__jt_frag_acc = {fill}(__jt_t_float32(0))" in out
    packed = [(n, s) for n, s in specs.items() if s[0] == "packed"]
    whole = next(n for n, s in packed if s == ("packed", "__jt_r0_0", ((0, 4, 4), None, None)))
    assert f"__jt_frag_acc = {whole}(__jt_frag_acc, d, i)" in out
    pair = next(n for n, s in packed if s == ("packed", "__jt_asm0", ((0, 2, 4),)))
    splice = next(n for n, s in specs.items() if s == ("splice", 0, 2))
    assert f"__jt_frag_acc = {splice}(__jt_frag_acc, {pair}(__jt_frag_acc))" in out
    set2 = next(n for n, s in specs.items() if s == ("set", 2))
    set3 = next(n for n, s in specs.items() if s == ("set", 3))
    assert f"__jt_frag_acc = {set2}(__jt_frag_acc, __jt_frag_acc[2] * 2.0)" in out
    assert f"__jt_frag_acc = {set3}(__jt_frag_acc, __jt_frag_acc[3] + 1.0)" in out
    # registers out of order are single reads, not a run
    assert "store(__jt_frag_acc[1], __jt_asm0(__jt_frag_acc[3], __jt_frag_acc[2]))" in out


def test_a_second_fragment_in_the_same_call_composes_the_grouping():
    namespace = _fragment_namespace()
    a = tuple(f"__jt_frag_a_{i}" for i in range(2))
    out = _reshaped(
        "def k(d):\n"
        f"    {ALL} = (0.0, 0.0, 0.0, 0.0)\n"
        f"    {', '.join(a)} = (1, 1)\n"
        f"    {ALL} = __jt_r0_0({ALL}, {', '.join(a)}, d)\n",
        namespace,
        fragments={"acc": REGS, "a": a},
    )
    name = next(
        n
        for n, s in namespace.items()
        if s == ("packed", "__jt_r0_0", ((0, 4, 4), (0, 2, 2), None))
    )
    assert f"__jt_frag_acc = {name}(__jt_frag_acc, __jt_frag_a, d)" in out


@pytest.mark.parametrize(
    "body",
    [
        "    x, __jt_frag_acc_0 = g()\n",  # a register among other targets
        f"    {ALL} = (1.0, 2.0, 3.0, 4.0)\n",  # different values
        "    for __jt_frag_acc_1 in range(3):\n        pass\n",  # a register as a loop variable
    ],
)
def test_a_use_the_tuple_cannot_express_keeps_the_scalar_form(body):
    source = f"def k(d):\n    {ALL} = (0.0, 0.0, 0.0, 0.0)\n" + body + f"    __jt_r0_0({ALL}, d)\n"
    namespace = _fragment_namespace()
    out = _reshaped(source, namespace, fragments={"acc": REGS})
    assert out == ast.unparse(ast.parse(source).body[0])
    assert not any(name.startswith("__jt_pk") for name in namespace)


@jittile.kernel
def _scaled_accumulator(Out, A):
    """A fragment written, read and updated element by element (no instruction): the tuple form
    must keep it in registers."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    acc = T.alloc_local((64, 8), "float32", layout=wgmma_accumulator)
    for i in T.unroll(acc.size):
        acc[i] = A[acc.row(i), acc.col(i)]
    for i in T.unroll(acc.size):
        acc[i] *= 2.0
        Out[acc.row(i), acc.col(i)] = acc[i] + 1.0


def test_a_packed_fragment_stays_in_registers():
    spec = T.Tensor((64, 8), "float32")
    ck = _scaled_accumulator.compile(spec, spec, target="sm_90a")
    assert "__jt_frag_acc = " in ck.lowered_source
    assert "__jt_frag_acc_0" not in ck.lowered_source
    assert ck.metadata["local_bytes"] == 0


@pytest.mark.gpu
def test_a_packed_fragment_computes_what_its_scalar_form_does():
    """On the device, the packed form numba compiled; without one, the interpreter's run of the
    frontend's scalar form: the same exact expectation for both."""
    a = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    out = np.zeros_like(a)
    _scaled_accumulator(out, a)
    np.testing.assert_array_equal(out, a * 2 + 1)


def test_the_gemm_example_hands_numba_one_accumulator_and_constant_addresses():
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import gemm_bf16
    finally:
        sys.path.remove(str(REPO / "examples"))
    spec = T.Tensor((None, None), "bfloat16")
    ck = gemm_bf16.gemm_bf16.compile(
        spec, spec, spec, np.int32(1), np.int32(1), np.int32(1), target="sm_90a"
    )
    source = ck.lowered_source
    (acc,) = set(re.findall(r"(__jt_frag_\w*_acc) = ", source))  # renamed apart in its helper
    assert f"{acc}_1," not in source  # 128 registers were 128 variables
    assert source.count(f"{acc} = ") >= 5  # the fill and one per wgmma of a stage
    assert not re.search(r"__jt_saddr\(\w*full, 0\)", source) and "__jt_addr0 = " in source


def test_the_python_stage_is_the_same_on_a_fresh_compile_and_a_hit_that_lowers_again(
    tmp_path, monkeypatch
):
    """Reshaping builds a new tree: the frontend's function (which shares nodes with the
    kernel's parsed source) stays as it was, so a disk hit that lowers again (its lowering
    warned) and a fresh lowering reshaped anew both show the Python of the first compile."""
    from test_cache_hit import _load

    from jittile import JittileWarning
    from jittile.backend.compiler import compile_lowered
    from jittile.frontend.lower import lower_kernel
    from jittile.targets import Target

    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    kernel, _ = _load(tmp_path, expect=512)  # expect_tx of 512 bytes for 1024: lowering warns
    with pytest.warns(JittileWarning, match="expects 512 transaction bytes"):
        fresh = kernel.compile(target="sm_90a")
    again, _ = _load(tmp_path, expect=512)
    with pytest.warns(JittileWarning, match="expects 512 transaction bytes"):
        hit = again.compile(target="sm_90a")
    assert (fresh.metadata["cache"], hit.metadata["cache"]) == ("stored", "hit")
    assert hit.asm["python"] == fresh.asm["python"] == fresh.lowered_source == hit.lowered_source

    params = again.specializer.params(again.specializer.annotation_specs())
    with pytest.warns(JittileWarning):
        lowered = lower_kernel(again.source, params, Target.parse("sm_90a"), None)
    before = ast.dump(lowered.function, include_attributes=True)
    names = dict(lowered.namespace)
    reshaped = reshape(lowered.function, lowered.namespace, lowered.shared_views, lowered.fragments)
    assert ast.unparse(reshaped.function) == fresh.asm["python"] != lowered.source
    assert ast.dump(lowered.function, include_attributes=True) == before
    assert lowered.namespace == names
    compile_lowered(lowered, Target.parse("sm_90a"))
    assert ast.dump(lowered.function, include_attributes=True) == before


@jittile.kernel
def _chosen_scale(
    out: T.Tensor((32,), "float32"), a: T.Tensor((32,), "float32"), SCALED: T.constexpr
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    out[i] = a[i] * 3.0 if SCALED else a[i] + 1.0


@pytest.mark.parametrize("scaled", [True, False])
def test_a_conditional_expression_on_a_constant_lowers_only_its_branch(scaled):
    """``x if CONSTANT else y`` is decided at compile time, as an ``if`` statement on one is:
    numba-cuda gets only the chosen branch to type, and the kernel computes it."""
    spec = T.Tensor((32,), "float32")
    source = _chosen_scale.compile(spec, spec, scaled, target="sm_90a").lowered_source
    assert (" * 3.0" in source, " + 1.0" in source) == (scaled, not scaled)
    assert " if " not in source.split("out[", 1)[1].split("\n", 1)[0]
    a = np.arange(32, dtype=np.float32)
    out = np.zeros_like(a)
    _chosen_scale.interpret(out, a, scaled)
    np.testing.assert_array_equal(out, a * 3 if scaled else a + 1)
