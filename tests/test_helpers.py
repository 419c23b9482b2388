"""``@jittile.func`` helpers: inlined where a kernel calls them, names renamed apart, free names
resolved in the helper's module, errors located in the helper's file, code and data in the key."""

from __future__ import annotations

import importlib
import itertools
import textwrap

import pytest

import jittile
from jittile import CompileError, ContractError, JittileError, JittileWarning
from jittile.cache.keys import differing_components
from jittile.frontend.lower import lower_kernel
from jittile.keying import key_components
from jittile.targets import Target

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
_serial = itertools.count()

HELPERS = '''\
import jittile
from jittile import T

LOAD = "{load}"
ROWS = {rows}


@jittile.func
def box_bytes(rows, cols, elem=4):
    return rows * cols * elem


@jittile.func
def load_boxes(dst, src, row, bar):
    """Two (ROWS, 16) boxes, one per group of dst."""{comment}
    T.cuda.tile.apply(T.ptx[LOAD], dst, src, box=(ROWS, 16), coords=(row, 0),
                      coord_steps=((ROWS, 0),), mbar=bar)


@jittile.func
def load_one(dst, src, row, bar):
    T.cuda.tile.apply(T.ptx[LOAD], dst, src, box=(ROWS, 16), coords=(row, 0), mbar=bar)


@jittile.func
def shadowing(out):
    lane = 3
    out[0, 0] = lane
'''

# Both kernels start alike: one CTA of 32 threads, two (8, 16) uint32 groups and a barrier.
SETUP = """\
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 16), "uint32", layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
"""
SIGNATURE = '(A: T.Tensor((16, 16), "uint32"), Out: T.Tensor((16, 16), "uint32")):'
KERNELS = f"""\
import jittile
from jittile import T
from {{helpers}} import box_bytes, load_boxes, load_one, shadowing

ROWS = 4  # the helpers read their own module's ROWS


@jittile.kernel
def two_boxes{SIGNATURE}
{SETUP}    nbytes = box_bytes(8, 16)
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32({{expect}}))
    T.cuda.cta_sync()
    if lane == 0:
        load_boxes(shared, A, lane * 0, mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)


@jittile.kernel
def per_stage{SIGNATURE}
{SETUP}    if lane == 0:
        for s in T.unroll(2):
            load_one(shared[s], A, s * 8, bar=mbar.ptr_to([0]))
    shadowing(Out)
    Out[1, 1] = lane
"""


def _modules(tmp_path, monkeypatch, expect=1024, rows=8, comment="", kernels=KERNELS):
    monkeypatch.syspath_prepend(str(tmp_path))
    serial = next(_serial)
    helpers = f"helpers_{serial}"
    (tmp_path / f"{helpers}.py").write_text(HELPERS.format(load=LOAD, rows=rows, comment=comment))
    (tmp_path / f"kernels_{serial}.py").write_text(kernels.format(helpers=helpers, expect=expect))
    return importlib.import_module(f"kernels_{serial}"), tmp_path / f"{helpers}.py"


def _lower(kernel, target="sm_90a"):
    params = kernel.specializer.params(kernel.specializer.annotation_specs())
    return lower_kernel(kernel.source, params, Target.parse(target))


def _line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_inlined_helper_expands_like_the_seed_example(tmp_path, monkeypatch):
    kernels, helpers = _modules(tmp_path, monkeypatch)
    lowered = _lower(kernels.two_boxes)
    (site,) = lowered.ir.sites
    assert site.location.filename == str(helpers)
    assert site.location.lineno == _line_of(helpers, "T.cuda.tile.apply(T.ptx[LOAD], dst, src, box")
    assert [r.bytes for r in site.plan] == [512, 512]
    assert [r.shared_offset for r in site.plan] == [0, 512]
    assert "nbytes = 512" in lowered.source  # a static return value folds, the default included
    assert lowered.source.count("lane * 0") == 1  # a runtime argument is evaluated once
    ck = kernels.two_boxes.compile(target="sm_90a")
    assert [tuple(map(str, i.coords)) for i in ck.plan[0].plan] == [("0", "row"), ("0", "row + 8")]
    assert ck.sass.count("UTMALDG.2D") == 2


def test_regions_and_addresses_are_substituted(tmp_path, monkeypatch):
    kernels, _ = _modules(tmp_path, monkeypatch)
    lowered = _lower(kernels.per_stage)
    first, second = lowered.ir.sites
    assert [r.shared_offset for r in first.plan + second.plan] == [0, 512]
    assert [r.coords for r in first.plan + second.plan] == [(0, 0), (0, 8)]
    assert str(first.plan[0].barrier) == str(second.plan[0].barrier) == "mbar.ptr_to([0])"


def test_helper_locals_do_not_touch_the_callers(tmp_path, monkeypatch):
    kernels, _ = _modules(tmp_path, monkeypatch)
    source = _lower(kernels.per_stage).source
    assert "Out[0, 0] = 3" in source or "_lane = 3" in source
    assert "Out[1, 1] = lane" in source


def test_free_names_resolve_in_the_helpers_module(tmp_path, monkeypatch):
    kernels, _ = _modules(tmp_path, monkeypatch, rows=8)
    (site,) = _lower(kernels.two_boxes).ir.sites
    assert site.plan[0].fields["box"] == (8, 16)  # the helper's ROWS, not the kernel module's 4


def test_byte_accounting_sees_through_helpers(tmp_path, monkeypatch):
    kernels, helpers = _modules(tmp_path, monkeypatch, expect=512)
    with pytest.warns(JittileWarning, match="expects 512 transaction bytes") as record:
        _lower(kernels.two_boxes)
    (warning,) = [w for w in record if issubclass(w.category, JittileWarning)]
    assert f"line {_line_of(helpers, 'T.cuda.tile.apply(T.ptx[LOAD], dst, src, box')}" in str(
        warning.message
    )


BAD_HELPERS = """\
import jittile
from jittile import T


@jittile.func
def bad_box(dst, src, bar):
    T.cuda.tile.apply(
        T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
        dst, src, box=(8, 300), coords=(0, 0), mbar=bar)


@jittile.func
def recursive(x):
    recursive(x)


@jittile.func
def early(x):
    if x > 0:
        return 1
    return 2


@jittile.func
def nothing(x):
    pass


def plain(x):
    return x
"""


@pytest.mark.parametrize(
    "call, where, message",
    [
        ("bad_box(shared, A, mbar.ptr_to([0]))", "helper", "box"),
        ("recursive(lane)", "helper", "cannot recurse"),
        ("y = early(lane)", "helper", "return only as its last statement"),
        ("y = nothing(lane)", "call", "returns no value"),
        ("nothing(lane, lane)", "call", "takes 1 arguments, got 2"),
        ("nothing(y=lane)", "call", "has no parameter 'y'"),
        ("y = 1 + nothing(lane)", "call", "as a statement or as the whole right side"),
        ("y = plain(lane)", "call", "decorate it with @jittile.func"),
    ],
)
def test_helper_errors_are_located(tmp_path, monkeypatch, call, where, message):
    monkeypatch.syspath_prepend(str(tmp_path))
    serial = next(_serial)
    (tmp_path / f"bad_{serial}.py").write_text(BAD_HELPERS)
    (tmp_path / f"uses_{serial}.py").write_text(
        textwrap.dedent(f"""\
        import jittile
        from jittile import T
        from bad_{serial} import bad_box, recursive, early, nothing, plain


        @jittile.kernel
        def uses(A: T.Tensor((16, 512), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            shared = T.alloc_shared((8, 300), "float32", align=128)
            mbar = T.alloc_shared((1,), "uint64")
            {call}
        """)
    )
    kernel = importlib.import_module(f"uses_{serial}").uses
    with pytest.raises((CompileError, ContractError), match=message) as info:
        _lower(kernel)
    error = info.value
    if where == "call":
        assert error.filename.endswith(f"uses_{serial}.py") and error.lineno == 12
    else:
        assert error.filename.endswith(f"bad_{serial}.py")
    if isinstance(error, ContractError):
        assert error.parameter == "box" and error.lineno == 9  # the box= argument


def test_a_helper_called_on_the_host_explains_itself(tmp_path, monkeypatch):
    kernels, _ = _modules(tmp_path, monkeypatch)
    helpers = importlib.import_module(kernels.box_bytes.__module__)
    with pytest.raises(JittileError, match="@jittile.func helper"):
        helpers.box_bytes(1, 2)
    assert isinstance(jittile.func(lambda: None), type(helpers.box_bytes))


def _components(kernel):
    params = kernel.specializer.params(kernel.specializer.annotation_specs())
    return key_components(kernel.__qualname__, kernel.source, params, Target.parse("sm_90a"), None)


def test_helper_code_and_data_enter_the_key(tmp_path, monkeypatch):
    base, _ = _modules(tmp_path, monkeypatch)
    comment, _ = _modules(tmp_path, monkeypatch, comment="\n    # only a comment")
    rows, _ = _modules(tmp_path, monkeypatch, rows=4)
    ref = _components(base.two_boxes)

    def same_module_names(kernel):  # each copy of the helpers is its own module: compare by role
        components = _components(kernel)
        components["helpers"] = {k.split(".", 1)[1]: v for k, v in components["helpers"].items()}
        return components

    ref = same_module_names(base.two_boxes)
    assert set(ref["helpers"]) == {"box_bytes", "load_boxes"}
    assert differing_components(ref, same_module_names(comment.two_boxes)) == []
    assert differing_components(ref, same_module_names(rows.two_boxes)) == [
        "helpers.load_boxes.globals.ROWS"
    ]
    changed = HELPERS.replace("rows * cols * elem", "rows * cols * elem * 2")
    (tmp_path / "changed_helpers.py").write_text(changed.format(load=LOAD, rows=8, comment=""))
    (tmp_path / "changed_kernels.py").write_text(
        KERNELS.format(helpers="changed_helpers", expect=1024)
    )
    edited = importlib.import_module("changed_kernels")
    assert differing_components(ref, same_module_names(edited.two_boxes)) == [
        "helpers.box_bytes.source"
    ]
