"""The kernel language documents itself: every public ``T`` name has a real signature and a
docstring (``inspect.signature`` and ``help()`` show them), ``dir(T)`` lists only the language,
and the frontend checks each call of a ``T`` function against that same signature, with a
located error that shows it, and a did-you-mean for misspelled names."""

from __future__ import annotations

import inspect
import pydoc

import pytest
from kernel_files import body_kernel
from lines import line_of

from jittile import CompileError, T

NAMESPACES = {"T": T, "T.cuda": T.cuda, "T.cuda.tile": T.cuda.tile}
NOT_CALLED = {"T.constexpr", "T.cuda", "T.cuda.tile", "T.ptx"}


def public_names():
    return [
        (f"{owner}.{name}", getattr(space, name))
        for owner, space in NAMESPACES.items()
        for name in dir(space)
    ]


def test_dir_lists_only_the_language():
    for owner, space in NAMESPACES.items():
        names = dir(space)
        assert names and all(not n.startswith("_") for n in names), (owner, names)
        for leaked in (
            "annotations",
            "dataclass",
            "SimpleNamespace",
            "Intrinsic",
            "field",
            "inspect",
            "Namespace",
            "intrinsic",
            "PtxInstruction",
        ):
            assert leaked not in names, (owner, leaked)
    assert {"lane_id", "thread_idx", "tile", "LaunchConfig", "mbarrier_wait"} <= set(dir(T.cuda))
    assert {"Tensor", "alloc_shared", "uint32", "ptx", "unroll", "grid"} <= set(dir(T))


@pytest.mark.parametrize("qualname, obj", public_names(), ids=[n for n, _ in public_names()])
def test_every_public_name_has_a_docstring_and_a_real_signature(qualname, obj):
    assert (inspect.getdoc(obj) or "").strip(), qualname
    if qualname in NOT_CALLED:
        return
    signature = inspect.signature(obj)
    kinds = [p.kind for p in signature.parameters.values()]
    assert kinds != [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD], qualname


def test_signatures_say_what_the_calls_take():
    assert str(inspect.signature(T.cuda.lane_id)) == "() -> int"
    assert str(inspect.signature(T.cuda.mbarrier_wait)) == "(mbar: int, phase: int, /) -> None"
    assert list(inspect.signature(T.alloc_shared).parameters) == [
        "shape",
        "dtype",
        "layout",
        "align",
    ]
    assert str(inspect.signature(T.uint32)) == "(value, /)"
    apply = inspect.signature(T.cuda.tile.apply).parameters
    assert apply["scope"].default == "thread" and "operands" in apply


def test_help_shows_the_signature_and_the_docstring():
    text = pydoc.render_doc(T.cuda.thread_idx, renderer=pydoc.plaintext)
    assert "thread_idx(axis: str | None = None, /) -> int" in text
    assert "threadIdx.x" in text
    overview = pydoc.render_doc(T, renderer=pydoc.plaintext)
    assert "T.alloc_shared(shape" in overview and "T.cuda" in overview
    assert "``__`` becomes ``::``" in " ".join(inspect.getdoc(T.ptx).split())


def test_calling_outside_a_kernel_says_where_it_belongs():
    with pytest.raises(Exception, match=r"T.cuda.lane_id\(\) can only be used inside"):
        T.cuda.lane_id()


@pytest.mark.parametrize(
    "call, column_of, reason",
    [
        ("T.cuda.lane_id(1, 2)", "1, 2", "too many positional arguments"),
        ("T.cuda.thread_idx('x', 'y')", "'y'", "too many positional arguments"),
        ("T.cuda.cta_sync(5)", "5", "too many positional arguments"),
        ("T.uint32(1, 2)", "2)", "too many positional arguments"),
        ("T.cuda.thread_idx(axis='x')", "axis=", "positional only"),
        (
            "T.cuda.mbarrier_wait(0)",
            "T.cuda.mbarrier_wait(0)",
            "missing a required argument: 'phase'",
        ),
    ],
)
def test_calls_are_checked_against_the_signature(tmp_path, call, column_of, reason):
    kernel, path = body_kernel(tmp_path, f"x = {call}\n")
    with pytest.raises(CompileError) as info:
        kernel.compile(target="sm_90a")
    error = info.value
    line = path.read_text().splitlines()[error.lineno - 1]
    assert f"x = {call}" in line
    assert error.col_offset == line.index(column_of)
    assert reason in error.message and call in error.message
    assert "the signature is " in error.message
    name = call.split("(")[0]
    assert f"the signature is {name}{inspect.signature(eval(name, {'T': T}))}" in error.message


def test_a_misspelled_keyword_gets_a_did_you_mean(tmp_path):
    kernel, _ = body_kernel(tmp_path, 's = T.alloc_shared((4,), "uint32", aling=16)\n')
    with pytest.raises(
        CompileError,
        match=r"unexpected keyword argument 'aling' \(did you mean "
        r"align=\?\)",
    ):
        kernel.compile(target="sm_90a")


@pytest.mark.parametrize(
    "wrong, meant",
    [
        ("T.cuda.laneid()", "T.cuda.lane_id"),
        ("T.cuda.thread_id('x')", "T.cuda.thread_idx"),
        ("T.unit32(1)", "T.uint32"),
        ("T.cuda.tile.aply", "T.cuda.tile.apply"),
    ],
)
def test_misspelled_names_get_a_did_you_mean(tmp_path, wrong, meant):
    kernel, path = body_kernel(tmp_path, f"x = {wrong}\n")
    with pytest.raises(CompileError, match=f"did you mean {meant}\\?") as info:
        kernel.compile(target="sm_90a")
    assert info.value.lineno == len(path.read_text().splitlines())


def test_helpers_calls_are_checked_in_the_helpers_file(tmp_path):
    from kernel_files import module_from

    module = module_from(
        tmp_path,
        """
        @jittile.func
        def helper(A):
            A[0] = T.cuda.warp_id(3)


        @jittile.kernel
        def kernel(A: T.Tensor((16,), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            helper(A)
        """,
    )
    with pytest.raises(CompileError, match=r"T.cuda.warp_id\(3\): too many") as info:
        module.kernel.compile(target="sm_90a")
    assert info.value.filename == module.__file__
    assert info.value.lineno == line_of(module.__file__, "A[0] = T.cuda.warp_id(3)")


def test_correct_calls_still_compile(tmp_path):
    kernel, _ = body_kernel(
        tmp_path,
        """\
        lane = T.cuda.thread_idx("x")
        s = T.alloc_shared((32,), dtype="uint32", align=16)
        s[lane] = T.uint32(lane) + T.uint32(T.cuda.block_dim("x"))
        T.cuda.cta_sync()
        A[lane % 16] = s[lane]
        """,
    )
    assert kernel.compile(target="sm_90a").ptx
