"""Issue #20, a new user's first hour: each mistake's error names the fix (the exact rewrite where
there is one) at the line where the change must be made, and the rewrite it gives works."""

import importlib.util
import itertools
import re
import textwrap

import numpy as np
import pytest

import jittile
from jittile import CompileError, ContractError, JittileError, T

_serial = itertools.count()

HEADER = """\
import jittile
from jittile import T
from jittile.layout import swizzle, tiled_swizzle

"""
LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"


def module(tmp_path, body: str):
    """Import ``HEADER + body`` as a fresh module file; returns the module and its path."""
    name = f"first_hour_{next(_serial)}"
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def line_of(path: str, marker: str) -> int:
    (line,) = [i for i, text in enumerate(open(path).read().splitlines(), 1) if marker in text]
    return line


def compile_error(kernel, kind=JittileError, target="sm_90a"):
    with pytest.raises(kind) as info:
        kernel.compile(target=target)
    return info.value


# ------------------------------------------------------------------ wide swizzled tiles
def wide_copy(alloc: str, box: str, steps: str = "", read: str = "tile[r, lane]") -> str:
    """A 64x64 float32 tile loaded with 128B swizzle, then written back element by element."""
    return f'''
    @jittile.kernel
    def wide(A: T.Tensor((64, 64), "float32"), Out: T.Tensor((64, 64), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        lane = T.cuda.thread_idx("x")
        tile = {alloc}  # alloc
        mbar = T.alloc_shared((1,), "uint64", layout="default")
        if lane == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(16384))
        T.cuda.cta_sync()
        if lane == 0:
            T.cuda.tile.apply(T.ptx["{LOAD}"], tile, A,  # call
                              box={box}, coords=(0, 0), swizzle=3, {steps}mbar=mbar.ptr_to([0]))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for r in range(64):
            Out[r, lane] = {read}
    '''


WIDE = 'T.alloc_shared((64, 64), "float32", layout=swizzle(3, (64, 64), "float32"), align=1024)'
REWRITE = (
    'tile = T.alloc_shared((2, 64, 32), "float32", layout=swizzle(3, (2, 64, 32), '
    '"float32"), align=1024) and pass box=(64, 32), coord_steps=((0, 32),)'
)


@pytest.mark.parametrize(
    "alloc, box, rule",
    [
        (WIDE, "(64, 64)", "the inner box is 256 bytes, wider than the 128-byte span of swizzle=3"),
        (WIDE, "(64, 32)", r"shared image \(64, 64\) must end in the box image \(64, 32\)"),
        (
            WIDE.replace("layout=swizzle", "layout=tiled_swizzle"),
            "(64, 32)",
            r"shared image \(64, 64\) must end in the box image \(64, 32\)",
        ),
    ],
    ids=["box-wider-than-span", "buffer-wider-than-box", "tiled-swizzle-buffer"],
)
def test_a_wide_swizzled_tile_error_gives_the_rewrite_and_the_rewrite_runs(
    tmp_path, alloc, box, rule
):
    mod, path = module(tmp_path, wide_copy(alloc, box))
    error = compile_error(mod.wide, ContractError)
    assert re.search(rule, str(error)) and error.lineno == line_of(path, "box=")
    assert REWRITE in error.hint
    assert "element (i0, i1) of the tile is then tile[i1 // 32, i0, i1 % 32]" in error.hint
    # The rewrite, applied as the hint spells it, compiles and copies the tile exactly.
    fixed, _ = module(
        tmp_path,
        wide_copy(
            'T.alloc_shared((2, 64, 32), "float32", layout=swizzle(3, (2, 64, 32), "float32"), '
            "align=1024)",
            "(64, 32)",
            "coord_steps=((0, 32),), ",
            "tile[lane // 32, r, lane % 32]",
        ),
    )
    plan = fixed.wide.compile(target="sm_90a").plan
    assert [record.shared_offset for site in plan for record in site.plan] == [0, 8192]
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = np.zeros_like(a)
    fixed.wide.interpret(a, out)
    np.testing.assert_array_equal(out, a)


def test_the_tiled_swizzle_documentation_no_longer_offers_it_for_tma():
    from jittile.layout import tiled_swizzle

    doc = tiled_swizzle.__doc__
    assert "what TMA leaves" not in doc and "coord_steps=((0, 32),)" in doc


def test_a_misaligned_swizzled_buffer_is_reported_at_its_allocation(tmp_path):
    mod, path = module(
        tmp_path,
        wide_copy(
            WIDE.replace("(64, 64)", "(64, 32)").replace("1024", "128"),
            "(64, 32)",
            read="tile[r, lane % 32]",
        ),
    )
    error = compile_error(mod.wide, ContractError)
    assert (error.filename, error.lineno) == (path, line_of(path, "# alloc"))
    assert error.parameter == "align"
    assert "swizzle=3 needs the whole 1024-byte period" in str(error)
    assert f"the tile call at {path}:{line_of(path, '# call')}:" in str(error)
    assert error.hint == (
        "allocate it with align=1024: tile = T.alloc_shared((64, 32), "
        '"float32", layout=swizzle(3, (64, 32), "float32"), align=1024)'
    )


# ------------------------------------------------------------------ tcgen05.cp descriptor walk
TCGEN05 = """
from jittile.axis import TLane, TCol
from jittile.layout import S, TileLayout


@jittile.kernel(target="sm_100a")
def readback(A: T.Tensor((128, 8), "uint32"), Out: T.Tensor((128, 8), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    warp = T.cuda.warp_id()
    shared = T.alloc_shared((128, 8), "uint32", LAYOUT)  # alloc
    address = T.alloc_shared((1,), "uint32", layout="default")
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if warp == 0:
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(T.address_of(address),
                                                                      T.uint32(32))
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    for j in range(8):
        shared[tid, j] = A[tid, j]
    T.cuda.cta_sync()
    T.ptx.fence.proxy.async_.shared__cta()
    mem = T.cuda.decl_tmem(address[0], ty_args=[
        T.Tensor((128, 8), "uint32", scope="tmem",
                 layout=TileLayout(S[(128, 8) : (1 @ TLane, 1 @ TCol)]))])
    if tid == 0:
        T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.128x256b"], mem, shared)  # call
        T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
            mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.ptx.tcgen05.fence__after_thread_sync()
    word = T.alloc_local((1,), "uint32", layout="default")
    for j in range(8):
        T.ptx["tcgen05.ld.sync.aligned.32x32b.x1.b32"](word[0], address[0] + T.uint32(j))
        T.ptx.tcgen05.wait__ld.sync.aligned()
        Out[tid, j] = word[0]
    T.cuda.cta_sync()
    if warp == 0:
        T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(address[0], T.uint32(32))
"""


def test_a_tcgen05_cp_layout_no_descriptor_reads_names_the_allocation_to_write(tmp_path):
    mod, path = module(tmp_path, TCGEN05.replace("LAYOUT", 'layout="default", align=16'))
    error = compile_error(mod.readback, ContractError, "sm_100a")
    assert "no descriptor address walk reproduces the shared layout" in str(error)
    assert (error.lineno, error.parameter) == (line_of(path, "# alloc"), "layout")
    assert f"the tile call at {path}:{line_of(path, '# call')}:" in str(error)
    rewrite = (
        'shared = T.alloc_shared((128, 8), "uint32", layout=swizzle(1, (128, 8), '
        '"uint32"), align=256)'
    )
    assert error.hint.endswith(rewrite)
    fixed, _ = module(
        tmp_path, TCGEN05.replace("LAYOUT", 'layout=swizzle(1, (128, 8), "uint32"), align=256')
    )
    a = np.arange(128 * 8, dtype=np.uint32).reshape(128, 8)
    out = np.zeros_like(a)
    fixed.readback.interpret(a, out)
    np.testing.assert_array_equal(out, a)


# ------------------------------------------------------------------ messages
STATEMENT = """
VALUES = (3, 5, 7)


@jittile.kernel
def k(Out: T.Tensor((4,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    BODY
"""


def test_a_list_comprehension_is_named_in_python_words_with_the_rewrite(tmp_path):
    mod, path = module(tmp_path, STATEMENT.replace("BODY", "xs = [i for i in range(4)]"))
    error = compile_error(mod.k, CompileError)
    assert "list comprehensions are not supported in kernels" in str(error)
    assert "ListComp" not in str(error)
    assert "for i in range(n):" in error.hint and "T.unroll(n)" in error.hint
    assert "module-level tuple" in error.hint


def test_the_loop_rule_names_t_unroll_and_the_tuple_walk_it_suggests_works(tmp_path):
    mod, path = module(tmp_path, STATEMENT.replace("BODY", "for v in VALUES:\n        pass"))
    error = compile_error(mod.k, CompileError)
    assert "range(...), T.grid(...) or T.unroll(...), not VALUES" in str(error)
    assert "T.unroll(len(values))" in error.hint
    fixed, _ = module(
        tmp_path,
        STATEMENT.replace(
            "BODY",
            "for s in T.unroll(len(VALUES)):\n        if lane == 0:\n"
            "            Out[s] = T.uint32(VALUES[s])",
        ),
    )
    out = np.zeros(4, dtype=np.uint32)
    fixed.k.interpret(out)
    assert out.tolist() == [3, 5, 7, 0]


TILE_CALL = """
@jittile.kernel
def k(A: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(LAUNCH))
    shared = T.alloc_shared((16, 16), "uint32", layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    T.cuda.tile.apply(T.ptx["{LOAD}"], shared, A, box=(16, 16), coords=(0, 0),
                      KEYWORD=mbar.ptr_to([0]))
""".replace("{LOAD}", LOAD)


@pytest.mark.parametrize(
    "keyword, meant",
    [("barrier", "mbar"), ("mbarrier", "mbar"), ("coord", "coords"), ("boxx", "box")],
)
def test_an_unknown_tile_call_keyword_says_what_was_meant(tmp_path, keyword, meant):
    mod, _ = module(
        tmp_path, TILE_CALL.replace("LAUNCH", "grid=1, block=32").replace("KEYWORD", keyword)
    )
    error = compile_error(mod.k, ContractError)
    assert error.parameter == keyword and f"(did you mean {meant}=?)" in str(error)


@pytest.mark.parametrize(
    "keyword, meant", [("threads", "block"), ("num_blocks", "grid"), ("blok", "block")]
)
def test_an_unknown_launch_config_keyword_says_what_was_meant(tmp_path, keyword, meant):
    mod, path = module(
        tmp_path, TILE_CALL.replace("LAUNCH", f"{keyword}=32").replace("KEYWORD", "mbar")
    )
    error = compile_error(mod.k, CompileError)
    assert f"unexpected keyword argument '{keyword}' (did you mean {meant}=?)" in str(error)


def test_an_unknown_decorator_target_is_reported_where_it_is_written(tmp_path):
    body = """
    @jittile.kernel(target="sm_99z")
    def k(A: T.Tensor((16,), "uint32")):
        pass
    """
    with pytest.raises(CompileError) as info:
        module(tmp_path, body)
    error = info.value
    assert error.lineno == 6 and error.col_offset == body.splitlines()[1].strip().index("target")
    assert "unknown target 'sm_99z'" in str(error) and "target='sm_90a'" in error.hint


# ------------------------------------------------------------------ the CLI and the user's module
def test_the_cli_shows_a_failing_import_as_the_users_own_traceback(tmp_path, capsys):
    from jittile.cli import main

    broken = tmp_path / "broken.py"
    broken.write_text("import jittile\n\n\ndef helper():\n    return 1 / 0\n\n\nhelper()\n")
    assert main(["compile", f"{broken}:k"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"jittile: error: importing {broken} failed:\nTraceback")
    assert f'File "{broken}", line 8, in <module>' in err
    assert f'File "{broken}", line 5, in helper' in err
    assert err.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "jittile/cli.py" not in err and "importlib" not in err


def test_the_cli_shows_a_syntax_error_in_the_users_module_without_its_own_frames(tmp_path, capsys):
    from jittile.cli import main

    broken = tmp_path / "syntax.py"
    broken.write_text("import jittile\nx = (\n")
    assert main(["compile", f"{broken}:k"]) == 1
    err = capsys.readouterr().err
    assert f'File "{broken}", line 2' in err and "SyntaxError" in err
    assert "jittile/cli.py" not in err and "Traceback" not in err


# ------------------------------------------------------------------ the demo and the cache
def test_the_demo_says_when_its_kernel_came_from_the_disk_cache(tmp_path, monkeypatch):
    from jittile import cache, demo

    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    first = jittile.kernel(demo.tma_load.pyfunc).compile(target="sm_90a")
    entry = cache.default_store().entry_dir(first.metadata["key"])
    assert demo.provenance(first, 0.5) == (
        f"compiled tma_load for sm_90a in 0.50 s, stored in the disk cache at {entry}"
    )
    # Another process (here: a new kernel object, with no memory of the first) finds the entry.
    hit = jittile.kernel(demo.tma_load.pyfunc).compile(target="sm_90a")
    said = demo.provenance(hit, 0.02)
    assert said.startswith(
        f"loaded tma_load for sm_90a from the disk cache in 0.02 s, not "
        f"compiled: entry {entry}, written "
    )
    assert "jittile cache clear tma_load" in said and not said.startswith("compiled")
    monkeypatch.setenv("JITTILE_CACHE", "0")
    off = jittile.kernel(demo.tma_load.pyfunc).compile(target="sm_90a")
    assert demo.provenance(off, 0.5).endswith("in 0.50 s, not stored (disk cache off)")


# ------------------------------------------------------------------ help() and repr
def _help(obj) -> str:
    import pydoc

    return pydoc.render_doc(obj, renderer=pydoc.plaintext)


def test_help_of_the_decorator_and_of_a_kernel_teaches_its_uses():
    from jittile import demo

    for text in (_help(jittile.kernel), _help(demo.tma_load)):
        assert ".compile(" in text and ".interpret(" in text and "[grid, block]" in text
    assert "_specializer" not in _help(demo.tma_load) and "launch.py" not in _help(demo.tma_load)


@pytest.mark.parametrize(
    "opcode, family, parameter",
    [
        (LOAD, "cp.async.bulk.tensor", "coord_steps"),
        ("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes", "cp.async.bulk", "mbar"),
        ("tcgen05.cp.cta_group::1.128x128b", "tcgen05.cp", "pred"),
        ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "wgmma.mma_async", "scale_d"),
    ],
)
def test_help_of_a_tile_opcode_lists_its_family_parameters_and_an_example(
    opcode, family, parameter
):
    from jittile import T
    from jittile.patterns.registry import pattern_for

    text = _help(T.ptx[opcode])
    assert f"a tile opcode of the {family} family" in text
    assert re.search(rf"\n\s+{parameter}\s+(static|runtime|either)\s+\S", text)
    assert "Example:" in text and "T.cuda.tile.apply(" in text.split("Example:")[1]
    assert T.ptx[opcode].parameters == pattern_for(opcode).parameters
    assert parameter in [p.name for p in T.ptx[opcode].parameters]


def test_a_raw_instruction_has_no_tile_parameters():
    from jittile import T

    assert "a raw PTX instruction" in _help(T.ptx.fence.proxy.async_)
    with pytest.raises(JittileError, match="is not a tile opcode"):
        T.ptx.fence.proxy.async_.parameters  # noqa: B018


def test_the_plan_repr_is_short_and_readable():
    from jittile import demo

    plan = demo.tma_load.compile(target="sm_90a").plan
    text = repr(plan)
    assert text.splitlines()[0] == "<jittile plan: 1 tile call site, 2 native instructions>"
    assert text.splitlines()[1:] == str(plan).splitlines()
    assert "__jt_" not in text and "PlanRecord(" not in text and "Asm(" not in text
    assert repr(plan[0]).endswith(f"{LOAD}, 2 instructions>")
    assert repr(plan[0].plan[1]).startswith(f"<instruction {LOAD}  [1]  ptx coords {{0, 8}}")


def test_a_misspelled_keyword_of_compile_says_what_was_meant():
    from jittile import LaunchError, demo

    with pytest.raises(
        LaunchError,
        match=r"tma_load: got an unexpected keyword argument 'targte' "
        r"\(did you mean target=\?\); its parameters are A, Out",
    ):
        demo.tma_load.compile(targte="sm_90a")
    with pytest.raises(LaunchError, match=r"'Output' \(did you mean Out=\?\)"):
        demo.tma_load.compile(T.Tensor((16, 16), "uint32"), Output=T.Tensor((16, 16), "uint32"))
