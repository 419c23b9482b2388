"""Compile stages as data (jittile/stages.py): ``ck.asm`` on a fresh compile and a disk hit,
``JITTILE_DUMP_DIR``, ``JITTILE_OVERRIDE_DIR`` and ``JITTILE_ALWAYS_COMPILE``."""

from __future__ import annotations

import warnings

import pytest
from test_launch_fast_path import tma_rows

import jittile
from jittile import JittileWarning
from jittile.stages import STAGES

copy_rows = tma_rows.pyfunc  # a TMA load, then a copy out: every stage has something to show


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_every_stage_is_kept_and_identical_on_a_disk_hit(disk):
    fresh = jittile.kernel(copy_rows).compile(target="sm_90a")
    hit = jittile.kernel(copy_rows).compile(target="sm_90a")  # a new kernel object: the disk
    assert (fresh.metadata["cache"], hit.metadata["cache"]) == ("stored", "hit")
    assert list(fresh.asm) == list(hit.asm) == list(STAGES)
    for stage in ("checked", "plan", "python", "nvvm", "ptx", "cubin"):
        assert fresh.asm[stage] == hit.asm[stage], stage
    assert "cp.async.bulk.tensor.2d" in fresh.asm["checked"]
    assert fresh.asm["llir"] is fresh.asm["nvvm"] and "define" in fresh.asm["nvvm"]
    assert fresh.asm["ptx"] == fresh.ptx and fresh.asm["python"] == fresh.lowered_source
    with pytest.raises(KeyError, match="'ttgir' is not a compile stage; the stages are checked"):
        fresh.asm["ttgir"]


def test_the_dump_dir_holds_every_stage_named_after_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_DUMP_DIR", str(tmp_path / "dump"))
    ck = jittile.kernel(copy_rows, cache=False).compile(target="sm_90a")
    (folder,) = (tmp_path / "dump").iterdir()
    assert folder.name == ck.metadata["key"][:16]
    names = sorted(p.name for p in folder.iterdir())
    assert {
        "tma_rows.ptx",
        "tma_rows.ll",
        "tma_rows.py",
        "tma_rows.cubin",
        "tma_rows.plan.txt",
        "tma_rows.checked.txt",
    } <= set(names)
    assert (folder / "tma_rows.ptx").read_text() == ck.ptx
    assert (folder / "tma_rows.cubin").read_bytes() == ck.cubin


def test_an_override_ptx_is_linked_with_a_warning_and_never_cached(disk, monkeypatch):
    original = jittile.kernel(copy_rows, cache=False).compile(target="sm_90a")
    folder = disk / "override" / original.metadata["key"][:16]
    folder.mkdir(parents=True)
    edited = original.ptx.replace("\tret;", "\t// edited by hand\n\tret;", 1)
    assert edited != original.ptx
    (folder / "tma_rows.ptx").write_text(edited)
    monkeypatch.setenv("JITTILE_OVERRIDE_DIR", str(disk / "override"))
    with pytest.warns(JittileWarning, match="JITTILE_OVERRIDE_DIR: linking .*tma_rows.ptx"):
        overridden = jittile.kernel(copy_rows).compile(target="sm_90a")
    assert overridden.ptx == edited and overridden.metadata["cache"] == "off"
    assert jittile.cache.entries("tma_rows") == []


def test_always_compile_bypasses_the_memory_and_disk_caches(disk, monkeypatch):
    kernel = jittile.kernel(copy_rows)
    first = kernel.compile(target="sm_90a")
    assert kernel.compile(target="sm_90a") is first
    monkeypatch.setenv("JITTILE_ALWAYS_COMPILE", "1")
    again = kernel.compile(target="sm_90a")
    assert again is not first and again.metadata["cache"] != "hit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jittile.kernel(copy_rows).compile(target="sm_90a").metadata["cache"] != "hit"
