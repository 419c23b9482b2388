"""setmaxnreg takes effect: a kernel that sets register budgets links through a standalone ptxas
as a whole program (nvJitLink's ptxas ignores them, C7504), measured in the SASS; where no such
ptxas can build it, nvJitLink links it with a JittileWarning saying so."""

import warnings

import pytest

import jittile
from jittile import T
from jittile.backend import toolchain

BUDGET_SASS = "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8"  # 232 registers


@jittile.kernel
def budgets(Out: T.Tensor((384,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    if T.cuda.warp_id() // 4 == 0:
        T.ptx.setmaxnreg.dec.sync.aligned.u32(40)
    else:
        T.ptx.setmaxnreg.inc.sync.aligned.u32(232)
    Out[T.cuda.thread_idx("x")] = 1.0


@jittile.kernel
def no_budgets(Out: T.Tensor((384,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    Out[T.cuda.thread_idx("x")] = 1.0


def _replace_ptxas(monkeypatch, path):
    """``find_tool("ptxas")`` gives ``path``; the disassemblers stay."""
    found = toolchain.find_tool
    monkeypatch.setattr(
        toolchain, "find_tool", lambda name: path if name == "ptxas" else found(name)
    )


def _both_told(caught, reason: str) -> None:
    """The fallback's reason, and nvJitLink's own C7504 advisory after it."""
    messages = [str(w.message) for w in caught]
    assert any(reason in m for m in messages), messages
    assert any("'setmaxnreg' ignored" in m for m in messages), messages


def _compile(kernel):
    return kernel.compile(T.Tensor((384,), "float32"), target="sm_90a")


def test_budgets_link_through_ptxas_and_show_in_the_sass():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no C7504 "setmaxnreg ignored"
        ck = _compile(budgets)
    assert ck.metadata["toolchain"]["linker"].startswith("ptxas ")
    assert BUDGET_SASS in ck.sass and "USETMAXREG.DEALLOC.CTAPOOL 0x28" in ck.sass


def test_a_kernel_without_budgets_links_with_nvjitlink():
    ck = _compile(no_budgets)
    assert ck.metadata["toolchain"]["linker"].startswith("nvJitLink ")


def test_without_a_standalone_ptxas_nvjitlink_links_with_a_warning(monkeypatch):
    monkeypatch.setenv("JITTILE_ALWAYS_COMPILE", "1")  # not the build of the first test
    _replace_ptxas(monkeypatch, None)
    with pytest.warns(jittile.JittileWarning) as caught:
        ck = _compile(budgets)
    _both_told(caught, "needs a standalone ptxas")
    assert ck.metadata["toolchain"]["linker"].startswith("nvJitLink ")


def test_a_ptxas_that_cannot_build_it_falls_back_with_its_reason(monkeypatch, tmp_path):
    broken = tmp_path / "ptxas"
    broken.write_text("#!/bin/sh\necho 'ptxas fatal   : Unsupported .version 9.9' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("JITTILE_ALWAYS_COMPILE", "1")
    _replace_ptxas(monkeypatch, str(broken))
    with pytest.warns(jittile.JittileWarning) as caught:
        ck = _compile(budgets)
    _both_told(caught, "Unsupported .version 9.9")
    assert ck.metadata["toolchain"]["linker"].startswith("nvJitLink ")
    assert BUDGET_SASS not in ck.sass
