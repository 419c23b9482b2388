"""Compiler-quality diagnostics: tracebacks without jittile's frames, the user's source line with
a caret under the offending argument, fix hints, warnings attributed to the user's line, and
strict mode (warnings as errors)."""

from __future__ import annotations

import os
import traceback
import warnings

import pytest
from kernel_files import module_from
from lines import line_of

import jittile
from jittile import CompileError, ContractError, JittileWarning

PACKAGE = os.path.dirname(os.path.abspath(jittile.__file__)) + os.sep
LOAD2 = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

SWIZZLED = f'''
from jittile.layout import swizzle


@jittile.kernel
def kernel(A: T.Tensor((64, 32), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tile = T.alloc_shared((64, 32), "float32", layout=swizzle(3, (64, 32), "float32"), align=1024)
    mbar = T.alloc_shared((1,), "uint64")
    T.cuda.tile.apply(T.ptx["{LOAD2}"], tile, A, box=(64, 32),
                      coords=(0, 0), swizzle=0, mbar=mbar.ptr_to([0]))
'''

ACCOUNTING = f'''
@jittile.kernel{{decorator}}
def kernel(A: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    shared = T.alloc_shared((8, 16), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if T.cuda.lane_id() == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(T.ptx["{LOAD2}"], shared, A, box=(8, 16), coords=(0, 0),
                          mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
'''
EXPECT = "T.ptx.mbarrier.arrive.expect_tx"
HOST_CALL = """
import math


@jittile.kernel
def kernel(A: T.Tensor((16,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    A[0] = math.sqrt(A[1])
"""


def _raised(call):
    with pytest.raises(CompileError) as info:
        call()
    return info.value


def _jittile_frames(error: BaseException) -> list:
    return [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if os.path.abspath(f.filename).startswith(PACKAGE)
    ]


def test_tracebacks_show_the_users_frames_not_jittiles(tmp_path):
    module = module_from(tmp_path, SWIZZLED)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    inside = _jittile_frames(error)
    assert len(inside) == 1 and inside[0].name == "without_jittile_frames", inside
    assert traceback.extract_tb(error.__traceback__)[0].filename == __file__


def test_jittile_debug_keeps_every_frame(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_DEBUG", "1")
    module = module_from(tmp_path, SWIZZLED)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    files = {os.path.relpath(f.filename, PACKAGE) for f in _jittile_frames(error)}
    assert {"frontend/lower.py", "frontend/tile_calls.py", "patterns/tma.py"} <= files


def test_the_message_shows_the_source_line_with_a_caret_under_the_argument(tmp_path):
    module = module_from(tmp_path, SWIZZLED)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    lines = str(error).splitlines()
    assert lines[0].startswith(f"{module.__file__}:{error.lineno}:{error.col_offset}: ")
    source = open(module.__file__).read().splitlines()[error.lineno - 1]
    quoted, caret = lines[1], lines[2]
    assert quoted.endswith(source) and quoted.strip().startswith(f"{error.lineno} | ")
    column = quoted.index(source) + source.index("swizzle=0") + len("swizzle=")
    assert caret[column] == "^" and caret[:column].strip() == "|"


def test_the_caret_spans_the_offending_expression(tmp_path):
    module = module_from(tmp_path, HOST_CALL)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    quoted, caret = str(error).splitlines()[1:3]
    start = quoted.index("math.sqrt")
    assert caret[start:] == "^" + "~" * (len("math.sqrt(A[1])") - 1)


def test_the_swizzle_mismatch_says_how_to_fix_it(tmp_path):
    module = module_from(tmp_path, SWIZZLED)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    assert isinstance(error, ContractError) and error.parameter == "swizzle"
    assert "pass swizzle=3" in error.hint and 'layout="default"' in error.hint
    assert f"hint: {error.hint}" in str(error)


def test_a_call_of_a_host_function_says_what_to_do(tmp_path):
    module = module_from(tmp_path, HOST_CALL)
    error = _raised(lambda: module.kernel.compile(target="sm_90a"))
    assert "'math.sqrt' cannot be called inside a kernel" in error.message
    assert "compute this value on the host" in error.hint and "T.constexpr" in error.hint


def test_warnings_point_at_the_users_line(tmp_path):
    module = module_from(tmp_path, ACCOUNTING.format(decorator=""))
    with pytest.warns(JittileWarning, match="expects 1024 transaction bytes") as record:
        module.kernel.compile(target="sm_90a")
    (warning,) = [w for w in record if issubclass(w.category, JittileWarning)]
    assert warning.filename == module.__file__
    assert warning.lineno == line_of(module.__file__, EXPECT)
    assert "make the count 512" in str(warning.message)


def _strict_error(kernel) -> ContractError:
    with warnings.catch_warnings():
        warnings.simplefilter("error", JittileWarning)  # strict raises; it never warns
        with pytest.raises(ContractError) as info:
            kernel.compile(target="sm_90a")
    return info.value


def test_strict_kernels_raise_their_warnings(tmp_path):
    module = module_from(tmp_path, ACCOUNTING.format(decorator="(strict=True)"))
    error = _strict_error(module.kernel)
    assert error.filename == module.__file__ and error.lineno == line_of(module.__file__, EXPECT)
    assert "expects 1024 transaction bytes" in error.message and "strict" in error.message
    assert error.hint == "make the count 512"


def test_jittile_strict_makes_every_kernel_strict(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_STRICT", "1")
    module = module_from(tmp_path, ACCOUNTING.format(decorator=""))
    assert _strict_error(module.kernel).lineno == line_of(module.__file__, EXPECT)


def test_strict_mode_applies_to_a_disk_cache_hit(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    lenient = module_from(tmp_path, ACCOUNTING.format(decorator=""))
    with pytest.warns(JittileWarning):
        lenient.kernel.compile(target="sm_90a")
    strict = jittile.kernel(lenient.kernel.pyfunc, strict=True)
    assert _strict_error(strict).lineno == line_of(lenient.__file__, EXPECT)
    (entry,) = lenient.kernel.cache
    assert entry.hits == 1  # the strict kernel loaded the lenient one's entry, then raised


def test_without_strict_the_kernel_compiles_with_its_warning(tmp_path):
    module = module_from(tmp_path, ACCOUNTING.format(decorator="(strict=False)"))
    with pytest.warns(JittileWarning):
        assert module.kernel.compile(target="sm_90a").ptx


def test_cache_warnings_name_the_users_call(tmp_path, monkeypatch):
    import json

    from jittile.cache.store import metadata_digest

    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    module = module_from(tmp_path, HOST_CALL.replace("math.sqrt(A[1])", "A[1]"))
    module.kernel.compile(target="sm_90a")
    (meta_file,) = (tmp_path / "cache").rglob("kernel.json")
    meta = json.loads(meta_file.read_text())
    del meta["kernel_ir"]
    meta["digest"] = metadata_digest(meta)
    meta_file.write_text(json.dumps(meta))
    again = jittile.kernel(module.kernel.pyfunc)
    with pytest.warns(JittileWarning, match="broken entry") as record:
        again.compile(target="sm_90a")
    (warning,) = [w for w in record if issubclass(w.category, JittileWarning)]
    assert warning.filename == __file__
