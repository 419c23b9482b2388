"""Kernels defined outside a file: IPython/Jupyter cells and ``exec`` of a string registered in
``linecache`` compile like kernels of a file; where no source can be found (``python -c``, the plain
REPL, an unregistered ``exec``, a deleted file) the CompileError says why and what to do."""

from __future__ import annotations

import importlib.util
import linecache
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jittile import CompileError

REPO = Path(__file__).resolve().parents[1]
SOURCE = """\
import jittile
from jittile import T


@jittile.kernel
def kernel(A: T.Tensor((16,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    A[T.cuda.lane_id() % 16] = T.uint32(1)
"""
BROKEN = SOURCE.replace("T.cuda.lane_id()", "T.cuda.lane_id(7)")


def _exec(source: str, name: str, register: bool) -> dict:
    if register:
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {"__name__": "__main__"}
    exec(compile(source, name, "exec"), namespace)
    return namespace


@pytest.fixture
def registered_names():
    names = []
    yield names
    for name in names:
        linecache.cache.pop(name, None)


def test_exec_of_a_registered_source_compiles(registered_names):
    registered_names.append("<jittile-test-exec>")
    namespace = _exec(SOURCE, "<jittile-test-exec>", register=True)
    compiled = namespace["kernel"].compile(target="sm_90a")
    assert compiled.metadata["source_file"] == "<jittile-test-exec>" and compiled.ptx


def test_an_ipython_cell_compiles_and_its_errors_quote_the_cell(registered_names):
    # What IPython's CachingCompiler does with each cell: its lines under a made-up file name.
    name = "<ipython-input-3-5f0f9c2d8e1a>"
    registered_names.append(name)
    linecache.cache[name] = (len(BROKEN), None, [line + "\n" for line in BROKEN.splitlines()], name)
    namespace = {"__name__": "__main__"}
    exec(compile(BROKEN, name, "exec"), namespace)
    with pytest.raises(CompileError) as info:
        namespace["kernel"].compile(target="sm_90a")
    error = info.value
    assert error.filename == name and error.lineno == 8
    assert "A[T.cuda.lane_id(7) % 16] = T.uint32(1)" in str(error).splitlines()[1]


def test_an_unregistered_exec_says_what_to_do():
    namespace = _exec(SOURCE, "<jittile-test-unregistered>", register=False)
    with pytest.raises(CompileError) as info:
        namespace["kernel"].compile(target="sm_90a")
    error = info.value
    assert "defined in <jittile-test-unregistered>" in error.message
    assert "keeps no source text" in error.message
    assert "put the kernel in a .py file" in error.hint and "linecache.cache[name]" in error.hint


def test_python_dash_c_says_what_to_do(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), JITTILE_CACHE="0")
    script = SOURCE + "kernel.compile(target='sm_90a')\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 1
    assert (
        "jittile.errors.CompileError: <string>:5:0: cannot read the source of kernel"
        in result.stderr
    )
    assert "hint: put the kernel in a .py file" in result.stderr


def test_a_deleted_file_says_so(tmp_path):
    path = tmp_path / "vanishing_kernels.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("vanishing_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.unlink()
    linecache.checkcache(str(path))
    with pytest.raises(CompileError, match="no longer exists or cannot be read"):
        module.kernel.compile(target="sm_90a")
