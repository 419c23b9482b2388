"""The target table lists only what compiles, and an unknown or unsupported target is a clear
JittileError naming the supported ones, wherever a target is named."""

from __future__ import annotations

import importlib.util
import re

import pytest
from tma_two_boxes import tma_load

import jittile
from jittile import JittileError
from jittile.targets import SUPPORTED_TARGETS, TARGETS, Target, satisfies


@pytest.mark.parametrize("target", SUPPORTED_TARGETS)
def test_every_listed_target_compiles_the_readme_example(target):
    ck = tma_load.compile(target=target)
    assert ck.metadata["target"] == target and ck.cubin


def test_the_table_holds_no_target_the_compilers_refuse():
    assert "sm_101a" not in TARGETS  # CUDA 13 calls it sm_110a; NVVM refuses compute_101a
    assert {"sm_90a", "sm_100a", "sm_103a", "sm_110a", "sm_120a"} <= set(TARGETS)


@pytest.mark.parametrize(
    "name", ["sm_99", "sm_101a", "sm_80", "sm_90f", "sm_100x", "hopper", "", "sm_", 90]
)
def test_an_unsupported_target_names_the_supported_ones(name):
    with pytest.raises(JittileError) as info:
        Target.parse(name)
    message = str(info.value)
    assert repr(name) in message
    assert all(t in message for t in SUPPORTED_TARGETS)


@pytest.mark.parametrize("how", ["compile", "decorator"])
def test_compiling_for_an_unsupported_target_is_a_jittile_error(how):
    if how == "compile":
        call = lambda: tma_load.compile(target="sm_99")  # noqa: E731
    else:  # the decorator reports it where it is written, before any compile
        call = lambda: jittile.kernel(target="sm_99")(tma_load.pyfunc)  # noqa: E731
    with pytest.raises(
        JittileError,
        match=r"unsupported target 'sm_99': jittile compiles for "
        r"sm_90, sm_90a, ",
    ):
        call()


def test_instruction_requirements_still_name_older_architectures():
    """The instruction table's minimum targets (sm_80...) are not compile targets."""
    assert satisfies("sm_90a", "sm_80") and not satisfies("sm_80", "sm_90")
    assert Target.from_name("sm_80").capability == 80


@pytest.mark.parametrize("target", SUPPORTED_TARGETS)
def test_every_target_states_its_shared_memory_per_block(target):
    limit = Target.parse(target).max_shared_bytes
    expected = 99 * 1024 if re.match(r"sm_12\d", target) else 227 * 1024
    assert limit == expected


def test_the_shared_limit_is_the_targets_own(tmp_path):
    """100 KB of shared memory compile for sm_90a and are refused for sm_120a."""
    path = tmp_path / "big_shared.py"
    path.write_text(
        "import jittile\nfrom jittile import T\n\n\n@jittile.kernel\n"
        "def big(A: T.Tensor((16,), 'uint8')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        "    b = T.alloc_shared((100 * 1024,), 'uint8')\n"
        "    b[T.cuda.lane_id()] = A[0]\n"
    )
    spec = importlib.util.spec_from_file_location("big_shared", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.big.compile(target="sm_90a").metadata["shared_bytes"] == 100 * 1024
    with pytest.raises(jittile.CompileError, match=r"99 KB\) one block may use on sm_120a") as info:
        module.big.compile(target="sm_120a")
    assert (info.value.filename, info.value.lineno) == (str(path), 8)


def test_an_unknown_compile_target_is_reported_at_the_call_with_the_closest_name():
    with pytest.raises(jittile.CompileError) as info:
        tma_load.compile(target="sm_90z")  # the line reported
    error = info.value
    assert error.location.filename == __file__ and "did you mean target='sm_90'?" in str(error)
    assert (
        "tma_load.compile(target=" in open(__file__).read().splitlines()[error.location.lineno - 1]
    )


def test_a_target_travels_typed_and_keys_as_its_name():
    ck = tma_load.compile(target=Target.parse("sm_100a"))
    assert ck.target == Target.parse("sm_100a") and ck.metadata["target"] == "sm_100a"
    assert ck.metadata["key_components"]["target"] == "sm_100a"
    assert tma_load.compile(target="sm_100a") is ck  # the same specialization, memory hit
