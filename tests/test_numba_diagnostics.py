"""numba-cuda's failures on a lowered kernel come back as CompileErrors at the user's expression:
the lowered function carries one line number per node (``Lowered.positions``), and numba's
location of a failure (on the error, in its traceback, or in its message) maps back through it."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
import types

import pytest

from jittile import CompileError
from jittile.backend import diagnose
from jittile.backend.diagnose import LOWERED_FILENAME, failing_line, summary
from jittile.errors import Location
from jittile.frontend.positions import Origin, number_lines, tag

_serial = itertools.count()

HELPER = """\
import jittile
from jittile import T


@jittile.func
def poke(x):
    x[0] = 1  # poke-line
"""
KERNEL = """\
import jittile
from jittile import T
from {helper} import poke


@jittile.kernel
def kernel(Out: T.Tensor((4,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    {body}
"""


def load(tmp_path, body: str):
    helper = f"numba_helper_{next(_serial)}"
    (tmp_path / f"{helper}.py").write_text(HELPER)
    name = f"numba_kernel_{next(_serial)}"
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(helper=helper, body=body))
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tmp_path))
    return module.kernel, str(path), str(tmp_path / f"{helper}.py")


def test_a_typing_error_inside_a_helper_points_into_the_helpers_file(tmp_path):
    kernel, _, helper_path = load(tmp_path, "poke(lane)")
    with pytest.raises(CompileError) as info:
        kernel.compile(target="sm_90a")
    assert (info.value.filename, info.value.lineno) == (helper_path, 7)
    assert "'x[0] = 1' cannot be compiled" in str(info.value)


def test_the_failing_sub_expression_is_named_not_only_its_statement(tmp_path):
    kernel, path, _ = load(tmp_path, "Out[0] = lane + Out[0] * (1, 2)")
    with pytest.raises(CompileError) as info:
        kernel.compile(target="sm_90a")
    assert (info.value.filename, info.value.lineno) == (path, 10)
    assert "'Out[0] * (1, 2)' cannot be compiled: numba-cuda has no implementation of '*'" in str(
        info.value
    )


def test_a_failure_numba_does_not_locate_is_told_at_the_kernel(tmp_path, monkeypatch):
    from jittile.backend import compiler

    def fail(*args, **kwargs):
        raise RuntimeError("Error at driver init:\nCUDA driver library cannot be found.")

    monkeypatch.setattr(compiler, "numba_ptx", fail)
    kernel, path, _ = load(tmp_path, "Out[0] = lane")
    with pytest.raises(CompileError) as info:
        kernel.compile(target="sm_90a")
    assert (info.value.filename, info.value.lineno) == (path, 7)  # the def, under its decorator
    assert (
        str(info.value)
        .splitlines()[0]
        .endswith("numba-cuda could not compile the kernel: Error at driver init:")
    )


def test_the_failing_line_comes_from_the_error_its_traceback_or_its_message():
    loc = types.SimpleNamespace(filename=LOWERED_FILENAME, line=7)
    located = Exception("x")
    located.loc = loc
    assert failing_line(located) == 7

    def constraint(loc):
        raise ValueError("inner")

    try:
        constraint(types.SimpleNamespace(filename=LOWERED_FILENAME, line=12))
    except ValueError as exc:
        assert failing_line(exc) == 12

    class Driver:  # numba's driver objects initialise the CUDA driver in __getattr__
        def __getattr__(self, name):
            raise RuntimeError("Error at driver init")

    def typing(self, loc):
        raise ValueError("inner")

    try:
        typing(Driver(), types.SimpleNamespace(filename=LOWERED_FILENAME, line=4))
    except ValueError as exc:
        assert failing_line(exc) == 4
    message = Exception(
        f'failed\nFile "{LOWERED_FILENAME}", line 3:\nFile "{LOWERED_FILENAME}", line 5:'
    )
    assert failing_line(message) == 5
    elsewhere = Exception("x")
    elsewhere.loc = types.SimpleNamespace(filename="other.py", line=7)
    assert failing_line(elsewhere) is None


def test_summary_names_the_operation_and_types_and_drops_numbas_noise():
    text = summary(
        "No implementation of function Function(<built-in function getitem>) found "
        "for signature:\n \n >>> getitem(array(uint32, 1d, C), float64)\n \nThere are "
        "18 candidate implementations:\n - Of which 1 did not match due to:\n "
        "Rejected as the implementation raised a specific error:\n    NumbaTypeError: "
        "Unsupported array index type float64\n"
    )
    assert text.startswith(
        "numba-cuda has no implementation of indexing for operand types "
        "(array(uint32, 1d, C), float64) (Unsupported array index type "
        "float64); kernel values are"
    )
    assert summary(
        "Failed in cuda mode pipeline (step: x)\nCannot unify int64 and "
        "Tuple() for '$12binary.3' and 'x.2'\n\nFile \"f\", line 1:"
    ) == ("Cannot unify int64 and Tuple() for a temporary value and 'x'")


def test_every_node_gets_its_own_line_mapped_to_its_origin():
    tree = ast.parse("def f(a):\n    b = a + 1\n    return b\n").body[0]
    kernel = Origin(Location("k.py", 1, 0), tree)
    tag(tree, kernel)
    statement = tree.body[0]
    tag(statement, Origin(Location("k.py", 2, 4), statement))
    table = number_lines(tree)
    lines = [n.lineno for n in ast.walk(tree) if "lineno" in n._attributes]
    assert sorted(lines) == list(range(1, len(lines) + 1)) == sorted(table)
    assert table[tree.lineno] is kernel and table[tree.body[1].lineno] is kernel
    assert table[statement.value.right.lineno].location == Location("k.py", 2, 4)  # inherited
    compile(ast.Module(body=[tree], type_ignores=[]), LOWERED_FILENAME, "exec")
    error = diagnose.numba_failure(Exception("boom"), table)
    assert (error.location, error.message) == (
        kernel.location,
        "numba-cuda could not compile the kernel: boom",
    )


def test_a_link_failure_is_told_at_the_kernel(tmp_path, monkeypatch):
    from jittile.backend import toolchain
    from jittile.errors import ToolchainError

    def fail(ptx, target, name):
        raise ToolchainError(f"nvJitLink could not assemble {name} for {target}: ptxas error")

    monkeypatch.setattr(toolchain, "link_cubin", fail)
    kernel, path, _ = load(tmp_path, "Out[0] = lane")
    with pytest.raises(ToolchainError) as info:
        kernel.compile(target="sm_90a")
    assert (info.value.filename, info.value.lineno) == (path, 7)
    assert "ptxas error" in str(info.value)


def test_an_nvjitlink_older_than_the_target_is_a_toolchain_error(monkeypatch):
    from cuda.bindings import nvjitlink

    from jittile.backend import toolchain
    from jittile.errors import ToolchainError
    from jittile.targets import Target

    def create(count, options):
        raise nvjitlink.nvJitLinkError(nvjitlink.Result.ERROR_UNRECOGNIZED_ARCH)

    monkeypatch.setattr(nvjitlink, "create", create)
    with pytest.raises(ToolchainError, match=r"cannot build for sm_110a: ERROR_UNRECOGNIZED_ARCH"):
        toolchain.link_cubin(".version 8.0\n", Target.parse("sm_110a"))
