"""Issue #13, third bug: a changed global that a kernel reads must not run code compiled for its
old value, neither through ``compile()`` (the in-memory specializations) nor through a repeated
launch (the prepared-launch table). CPU only: launches go to a recording stand-in launcher."""

from __future__ import annotations

import importlib
import itertools
import re
import types

import pytest

from jittile import watch
from jittile.cache.components import value_text
from jittile.dtypes import dtype
from jittile.entry import CompiledKernel
from jittile.runtime.arrays import DeviceView

_serial = itertools.count()

KERNELS = """\
import jittile
from jittile import T
from {helpers} import store_rows

ROWS = 8
SHAPE = (8, 16)
LIMITS = [8]
TABLE = {{8: 1}}
SIZES = [2]
NESTED = {{"rows": [4]}}


class Cfg:
    pass


cfg = Cfg()
cfg.TILE = 8


@jittile.kernel
def fill(Out: T.Tensor((None,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    if i < ROWS:
        Out[i] = T.uint32(SHAPE[1] + LIMITS[0] + cfg.TILE)


@jittile.kernel
def tabled(Out: T.Tensor((None,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    Out[T.cuda.thread_idx("x")] = T.uint32(100 * TABLE[8] + 10 * SIZES[0])


@jittile.kernel
def nested(Out: T.Tensor((None,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    Out[T.cuda.thread_idx("x")] = T.uint32(NESTED["rows"][0])


@jittile.kernel
def via_helper(Out: T.Tensor((None,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    store_rows(Out, T.cuda.thread_idx("x"))


def make():
    n = 8

    @jittile.kernel
    def closed(Out: T.Tensor((None,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.thread_idx("x")
        if i < n:
            Out[i] = T.uint32(n)

    def set_n(value):
        nonlocal n
        n = value

    return closed, set_n
"""

HELPERS = """\
import jittile
from jittile import T

HELPER_ROWS = 8


@jittile.func
def store_rows(out, i):
    if i < HELPER_ROWS:
        out[i] = T.uint32(HELPER_ROWS)
"""


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Fresh kernel and helper modules (a module per test, so no test sees another's edits)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    serial = next(_serial)
    (tmp_path / f"watch_helpers_{serial}.py").write_text(HELPERS)
    (tmp_path / f"watch_kernels_{serial}.py").write_text(
        KERNELS.format(helpers=f"watch_helpers_{serial}")
    )
    kernels = importlib.import_module(f"watch_kernels_{serial}")
    return kernels, importlib.import_module(f"watch_helpers_{serial}")


def _guard(ck: CompiledKernel) -> str:
    return next(
        line.strip() for line in ck.lowered_source.splitlines() if line.strip().startswith("if ")
    )


def test_a_changed_global_recompiles(modules):
    kernels, _ = modules
    old = kernels.fill.compile()
    assert kernels.fill.compile() is old
    kernels.ROWS = 4
    new = kernels.fill.compile()
    assert new is not old
    assert (_guard(old), _guard(new)) == ("if i < 8:", "if i < 4:")
    assert new.ptx != old.ptx and new.metadata["key"] != old.metadata["key"]
    assert new.metadata["key_components"]["globals"]["ROWS"] == "4"
    assert kernels.fill.compile() is new


@pytest.mark.parametrize("edit", ["attribute", "in place"])
def test_changes_through_attributes_and_in_place_recompile(modules, edit):
    kernels, _ = modules
    old = kernels.fill.compile()
    if edit == "attribute":
        kernels.cfg.TILE = 1
    else:
        kernels.LIMITS[0] = 1  # the same list object, another value
    new = kernels.fill.compile()
    assert new is not old and "__jt_t_uint32(32)" in old.lowered_source
    assert "__jt_t_uint32(25)" in new.lowered_source


def test_rebinding_to_an_equal_value_keeps_the_compiled_kernel(modules):
    kernels, _ = modules
    old, before = kernels.fill.compile(), kernels.SHAPE
    kernels.SHAPE = tuple([8, 16])
    assert kernels.SHAPE is not before and kernels.fill.compile() is old


def test_a_changed_helper_global_recompiles(modules):
    kernels, helpers = modules
    old = kernels.via_helper.compile()
    helpers.HELPER_ROWS = 2
    new = kernels.via_helper.compile()
    assert new is not old
    assert "< 8" in old.lowered_source and "< 2" in new.lowered_source
    (component,) = new.metadata["key_components"]["helpers"].values()
    assert component["globals"] == {"HELPER_ROWS": "2"}


def test_a_changed_closure_variable_recompiles(modules):
    kernels, _ = modules
    closed, set_n = kernels.make()
    old = closed.compile()
    set_n(5)
    new = closed.compile()
    assert (_guard(old), _guard(new)) == ("if i < 8:", "if i < 5:")
    assert new.metadata["key_components"]["globals"] == {"n": "5"}


def test_a_repeated_launch_notices_a_changed_global(modules, monkeypatch):
    kernels, _ = modules
    launched = []  # the compiled kernel of each launch, recorded instead of launching it
    monkeypatch.setattr(
        CompiledKernel,
        "launcher",
        lambda self: types.SimpleNamespace(
            bind=lambda device: None, launch=lambda *args: launched.append(self)
        ),
    )
    out = DeviceView(0x1000, (32,), (4,), dtype("uint32"), device=0)
    kernels.fill(out)
    kernels.fill(out)
    assert launched[0] is launched[1] and len(kernels.fill.prepared) == 1
    kernels.ROWS = 4
    kernels.fill(out)
    assert launched[2] is not launched[0]
    assert (_guard(launched[0]), _guard(launched[2])) == ("if i < 8:", "if i < 4:")
    kernels.fill(out)
    assert launched[3] is launched[2]


def test_the_interpreter_runs_the_current_globals(modules):
    """The interpreter keeps a specialization's lowered program while what the kernel's code
    reads stays the same, like compile(): a changed global, helper global or closure variable
    lowers anew."""
    import numpy as np

    kernels, helpers = modules

    def run(kernel) -> list:
        out = np.zeros(8, np.uint32)
        kernel.interpret(out)
        return out.tolist()

    assert run(kernels.fill) == [32] * 8
    kernels.ROWS = 4
    assert run(kernels.fill) == [32] * 4 + [0] * 4
    kernels.LIMITS[0] = 1  # in place
    assert run(kernels.fill) == [25] * 4 + [0] * 4
    assert run(kernels.via_helper) == [8] * 8
    helpers.HELPER_ROWS = 2
    assert run(kernels.via_helper) == [2] * 2 + [0] * 6
    closed, set_n = kernels.make()
    assert run(closed) == [8] * 8
    set_n(3)
    assert run(closed) == [3] * 3 + [0] * 5


def _stored(ck: CompiledKernel) -> int:
    """The constant a one-store kernel stores, from its lowered source."""
    (value,) = re.findall(r"__jt_t_uint32\((\d+)\)", ck.lowered_source)
    return int(value)


@pytest.mark.parametrize(
    "edit, kernel, stored",
    [
        ("dict value", "tabled", 520),
        ("dict key added", "tabled", 120),
        ("list item", "tabled", 130),
        ("list appended", "tabled", 120),
        ("inner list of a dict", "nested", 9),
    ],
)
def test_containers_changed_in_place_recompile(modules, edit, kernel, stored):
    kernels, _ = modules
    kernel = getattr(kernels, kernel)
    old = kernel.compile()
    assert _stored(old) == (4 if kernel is kernels.nested else 120)
    if edit == "dict value":
        kernels.TABLE[8] = 5
    elif edit == "dict key added":
        kernels.TABLE[9] = 7
    elif edit == "list item":
        kernels.SIZES[0] = 3
    elif edit == "list appended":
        kernels.SIZES.append(7)
    else:
        kernels.NESTED["rows"][0] = 9
    new = kernel.compile()
    assert new is not old and _stored(new) == stored
    assert kernel.compile() is new


def test_an_equal_value_of_another_type_in_place_recompiles(modules):
    """``True == 1``, but its text differs: the snapshot compares the items by identity."""
    kernels, _ = modules
    old = kernels.tabled.compile()
    kernels.TABLE[8] = True
    new = kernels.tabled.compile()
    assert new is not old and new.metadata["key_components"]["globals"]["TABLE"] == "{8: True}"


def _texts_made(monkeypatch) -> list:
    texts = []
    monkeypatch.setattr(watch, "value_text", lambda v: texts.append(v) or value_text(v))
    return texts


def test_unchanged_containers_keep_the_compiled_kernel_without_texts(modules, monkeypatch):
    """A dict and a list of immutable items are checked against their snapshots: no text is
    made while they are unchanged; rebinding one to an equal copy keeps the compiled code."""
    kernels, _ = modules
    old = kernels.tabled.compile()
    texts = _texts_made(monkeypatch)
    assert kernels.tabled.compile() is old and kernels.tabled.compile() is old
    assert texts == []
    kernels.TABLE, kernels.SIZES = dict(kernels.TABLE), list(kernels.SIZES)
    assert kernels.tabled.compile() is old and kernels.TABLE in texts and kernels.SIZES in texts
    texts.clear()
    assert kernels.tabled.compile() is old and texts == []


def test_a_dict_holding_a_list_is_compared_by_text(modules, monkeypatch):
    kernels, _ = modules
    old = kernels.nested.compile()
    texts = _texts_made(monkeypatch)
    assert kernels.nested.compile() is old and any(t is kernels.NESTED for t in texts)
