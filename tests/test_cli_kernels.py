"""The ``jittile`` command on real kernels: ``compile`` (default target, ``--arg NAME=VALUE``, the
plan), ``cache why`` (a source diff of an edited kernel file), and the short repr of compiled
kernels."""

from __future__ import annotations

import pytest
from kernel_files import module_from

from jittile.cli import main

KERNEL = """
TILE = {tile}


@jittile.kernel
def copy(A: T.Tensor((64,), "uint32"), Out: T.Tensor((64,), "uint32"), BLOCK: T.constexpr,
         scale: T.uint32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=BLOCK))
    i = T.cuda.thread_idx("x")
    if i < TILE:
        Out[i] = A[i] * scale + {offset}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _write(tmp_path, tile=8, offset=1):
    return module_from(tmp_path, KERNEL.format(tile=tile, offset=offset))


def test_compile_defaults_the_target_and_takes_named_arguments(
    tmp_path, cache_dir, capsys, monkeypatch
):
    from jittile.runtime import driver

    monkeypatch.setattr(driver, "current_device_capability", lambda: None)  # no GPU: sm_90a
    module = _write(tmp_path)
    assert (
        main(["compile", f"{module.__file__}:copy", "--arg", "BLOCK=64", "--arg", "scale=3"]) == 0
    )
    out = capsys.readouterr().out
    fields = dict(line.split(None, 1) for line in out.split("\n\n")[0].splitlines())
    assert fields["target"] == "sm_90a"
    (entry,) = module.copy.cache
    assert entry.static_params == {"BLOCK": "64"} and entry.target == "sm_90a"
    assert "\n\nplan:\n(no tile calls)\n" in out


def test_compile_prints_the_plan(tmp_path, cache_dir, capsys):
    assert main(["compile", "examples/tma_two_boxes.py:tma_load", "--target", "sm_90a"]) == 0
    plan = capsys.readouterr().out.split("\n\nplan:\n")[1]
    assert "tile call of family cp.async.bulk.tensor" in plan and "ptx coords {0, 8}" in plan


def test_a_parameter_without_value_or_annotation_is_named(tmp_path, cache_dir, capsys):
    module = _write(tmp_path)
    assert main(["compile", f"{module.__file__}:copy", "--arg", "scale=3"]) == 1
    assert "parameter 'BLOCK' has no --arg" in capsys.readouterr().err


def test_why_shows_the_edit_and_the_changed_global(tmp_path, cache_dir, capsys):
    from pathlib import Path

    first = _write(tmp_path, tile=8, offset=1)
    first.copy.compile(target="sm_90a", *_specs(64))  # noqa: B026
    path = first.__file__
    # The same file, edited: the same kernel (another file's copy would be another kernel).
    second = module_from(tmp_path, KERNEL.format(tile=16, offset=2), path=Path(path))
    key = second.copy.compile(target="sm_90a", *_specs(64)).metadata["key"]  # noqa: B026
    assert main(["cache", "why", "copy"]) == 0
    out = capsys.readouterr().out
    assert "  globals.TILE: 8 -> 16" in out
    assert "    -        Out[i] = A[i] * scale + 1" in out
    assert "    +        Out[i] = A[i] * scale + 2" in out
    assert out.startswith(f"{path}:copy: 2 entries differ in: ")
    (entry,) = [e for e in second.copy.cache if e.key == key]
    assert entry.metadata["source_text"].startswith("@jittile.kernel\ndef copy(")
    assert entry.metadata["source_text"].endswith("Out[i] = A[i] * scale + 2\n")


def _specs(block):
    from jittile import T

    return (T.Tensor((64,), "uint32"), T.Tensor((64,), "uint32"), block, T.uint32(1))


def test_compiled_kernels_have_a_short_repr(tmp_path):
    module = _write(tmp_path)
    compiled = module.copy.compile(*_specs(32), target="sm_90a")
    text = repr(compiled)
    meta = compiled.metadata
    assert text == (
        f"<jittile.CompiledKernel copy for sm_90a: {meta['registers']} registers, "
        f"0 B shared, key {meta['key'][:12]}>"
    )
