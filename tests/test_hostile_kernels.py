"""Hostile kernels: a corpus of malformed kernels, each of which must fail with a jittile error (of
the expected class) that names the kernel's file and the offending line, before any GPU work.

Cases come from templates: a bad expression in several contexts, memory used where a value is
needed, tile calls with wrong operands, names, limits, unsupported syntax, typing mistakes only
numba-cuda sees, and bad definitions. Each case renders one kernel into its own module under
``tmp_path`` (jittile reads kernel source from the file); the line marked ``#!`` is the one the
error must name.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import textwrap
from dataclasses import dataclass

import pytest

from jittile import CompileError, ContractError, JittileError

HEADER = """\
import jittile
from jittile import T
from jittile.layout import swizzle

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"


@jittile.func
def add_one(x):
    return x + 1  # helper-line


@jittile.func
def reserved_helper(x):
    __jt_y = x  # reserved-line
    return __jt_y


@jittile.func
def early_helper(x):
    y = z + x  # early-line
    z = 1
    return y


@jittile.kernel
def kernel(A: T.Tensor((16, 16), "uint32"), Out: T.Tensor((16, 16), "uint32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    lane = T.cuda.lane_id()
    tid = T.cuda.thread_idx()
    mbar = T.alloc_shared((1,), "uint64")
    s = T.alloc_shared((8, 16), "uint32", align=128)
    frag = T.alloc_local((4,), "uint32")
"""
LOAD_OPCODE = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
_serial = itertools.count()


@dataclass
class Case:
    id: str
    body: str  # kernel statements; the line marked "#!" is where the error must point
    error: type = CompileError
    match: str = ""  # regex over the message
    target: str = "sm_90a"
    source: str | None = None  # a whole module instead of HEADER + body
    marker: str = "#!"  # what marks the line (a helper's line in HEADER has its own)


def render(case: Case) -> tuple[str, int]:
    """The module's text and the 1-based line the error must name."""
    text = (
        case.source
        if case.source is not None
        else (HEADER + textwrap.indent(textwrap.dedent(case.body).strip("\n"), "    ") + "\n")
    )
    return text, next(i for i, line in enumerate(text.splitlines(), 1) if case.marker in line)


def write(text: str, directory) -> tuple[str, str]:
    """Write a module; returns its name and path."""
    name = f"hostile_{next(_serial)}"
    path = directory / f"{name}.py"
    path.write_text(text)
    return name, str(path)


def compile_module(name: str, path: str, target: str) -> None:
    """Import the module (decorators run) and compile its kernel, or its helper alone."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.kernel.compile(target=target)


# ----------------------------------------------------------------------------- the templates
# Compile-time expressions that fail or exceed the folding limits.
BAD_FOLDS = [
    ("floordiv-zero", "1 // 0", "ZeroDivisionError"),
    ("mod-zero", "7 % 0", "ZeroDivisionError"),
    ("truediv-zero", "1.0 / 0", "ZeroDivisionError"),
    ("str-lt-int", "'a' < 1", "TypeError"),
    ("int-of-word", "int('abc')", "ValueError"),
    ("int-too-many-digits", "int('9' * 5000)", "ValueError"),
    ("len-huge-range", "len(range(10 ** 20))", "folding limit of 1000000"),
    ("max-of-nothing", "max()", "TypeError"),
    ("min-of-empty", "min(())", "ValueError"),
    ("abs-of-str", "abs('x')", "TypeError"),
    ("power-tower", "10 ** 10 ** 8", "folding limit of 4096 bits"),
    ("power-past-limit", "2 ** 4097", "folding limit of 4096 bits"),
    ("shift-huge", "1 << 10 ** 6", "folding limit of 4096 bits"),
    ("product-huge", "(3 ** 2500) * (3 ** 2500)", "folding limit of 4096 bits"),
    ("negative-shift", "1 << -1", "ValueError"),
    ("tuple-repeat", "(0,) * 10 ** 7", "folding limit of 1000000"),
    ("str-repeat", "'ab' * 10 ** 7", "folding limit of 1000000"),
    ("tuple-of-range", "tuple(range(10 ** 7))", "folding limit of 1000000"),
    ("sum-of-range", "sum(range(10 ** 8))", "folding limit of 1000000"),
    ("float-overflow", "float(10 ** 400)", "OverflowError"),
    ("float-power-overflow", "10.0 ** 400", "OverflowError"),
    ("launch-config-keyword", "T.cuda.LaunchConfig(grid=1, block=32, warps=4)", "warps"),
    ("launch-config-zero-grid", "T.cuda.LaunchConfig(grid=0, block=32)", "grid must be"),
    ("swizzle-mode", "swizzle(4, (8, 16), 'uint32')", "swizzle mode must be"),
    ("star-star-fold", "max(**{'a': 1})", r"\*\*"),
]
FOLD_CONTEXTS = [
    ("assign", "x = {e}  #!"),
    ("shape", "b = T.alloc_shared(({e}, 4), 'uint32')  #!"),
    ("branch", "if {e}:  #!\n    Out[0, 0] = 1"),
]

# Memory where a value is needed: (name, kind in the message).
MEMORY = [("A", "tensor"), ("s", "shared buffer"), ("frag", "local array")]
VALUE_CONTEXTS = [
    ("assign", "x = {m}  #!"),
    ("arith", "x = lane + {m}  #!"),
    ("store", "Out[0, 0] = {m}  #!"),
    ("convert", "x = T.uint32({m})  #!"),
    ("branch", "if {m}:  #!\n    Out[0, 0] = 1"),
    ("negate", "x = -{m}  #!"),
    ("compare", "x = {m} < 3  #!"),
    ("loop-bound", "for i in range({m}):  #!\n    Out[0, 0] = i"),
]

# Tile calls: a TMA load with one keyword replaced.
TILE = (
    "T.cuda.tile.apply(T.ptx[LOAD], s, A, box=(8, 16), coords=(0, 0),\n"
    "                  mbar={mbar})  #!"
)
BAD_TILE_VALUES = [
    ("mbar-tensor", "A", "tensor 'A'"),
    ("mbar-shared", "s", "shared buffer 's'"),
    ("mbar-local", "frag", "local array 'frag'"),
]
TILE_CASES = [
    Case(
        "tile-bare-ptx",
        "T.cuda.tile.apply(T.ptx, s, A, box=(8, 16))  #!",
        ContractError,
        "needs an opcode",
    ),
    Case(
        "tile-no-opcode",
        "T.cuda.tile.apply()  #!",
        match="missing a required argument: 'instruction'",
    ),
    Case(
        "tile-opcode-not-ptx", "T.cuda.tile.apply(LOAD, s, A)  #!", ContractError, "must be T.ptx"
    ),
    Case("tile-opcode-int", "T.cuda.tile.apply(T.ptx[5], s, A)  #!", CompileError, "opcode string"),
    Case(
        "tile-unknown-family",
        'T.cuda.tile.apply(T.ptx["cp.nothing"], s, A)  #!',
        ContractError,
        "no tile pattern",
    ),
    Case(
        "tile-operand-scalar",
        "T.cuda.tile.apply(T.ptx[LOAD], lane, A, box=(8, 16))  #!",
        ContractError,
        "operand 0",
    ),
    Case(
        "tile-operand-local",
        "T.cuda.tile.apply(T.ptx[LOAD], frag, A, box=(8, 16))  #!",
        ContractError,
        "operand 0",
    ),
    Case(
        "tile-operand-out-of-extent",
        "T.cuda.tile.apply(T.ptx[LOAD], s[9, 0:16], A, box=(1, 16),  #!\n"
        "                  coords=(0, 0), mbar=mbar.ptr_to([0]))",
        ContractError,
        "outside extent",
    ),
    Case(
        "tile-kwargs",
        "T.cuda.tile.apply(T.ptx[LOAD], s, A, **{'box': (8, 16)})  #!",
        match=r"cannot take \*\*\{'box'",
    ),
    Case(
        "tile-coords-tensor",
        "T.cuda.tile.apply(T.ptx[LOAD], s, A, box=(8, 16), coords=(A, 0),  #!\n"
        "                  mbar=mbar.ptr_to([0]))",
        ContractError,
        "got tensor 'A'",
    ),
    Case(
        "raw-ptx-operand-tensor",
        "T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), A)  #!",
        ContractError,
        "got tensor 'A'",
    ),
    Case(
        "raw-ptx-operand-shared",
        "T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), s)  #!",
        ContractError,
        "got shared buffer 's'",
    ),
    Case("raw-ptx-bare", "T.ptx()  #!", ContractError, "needs an opcode"),
    Case("raw-ptx-tile-opcode", "T.ptx[LOAD](s, A)  #!", ContractError, "tile-pattern opcode"),
    Case("raw-ptx-unknown", "T.ptx.mbarrier.explode()  #!", ContractError, "explode"),
    Case(
        "raw-ptx-keyword",
        "T.ptx.fence.proxy.async_(x=1)  #!",
        ContractError,
        "positional operands only",
    ),
    Case(
        "raw-ptx-immediate-runtime",
        "T.ptx.cp.async_.bulk.wait_group(lane)  #!",
        ContractError,
        "compile-time integer",
    ),
]

INDEX_CASES = [
    Case("tensor-rank-low", "x = A[0]  #!", match="rank 2, indexed with 1"),
    Case("tensor-rank-high", "x = A[0, 0, 0]  #!", match="rank 2, indexed with 3"),
    Case("tensor-extent", "x = A[16, 0]  #!", match="outside axis extent 16"),
    Case("tensor-negative-extent", "x = A[0, -17]  #!", match="outside axis extent 16"),
    Case("tensor-float-index", "x = A[1.5, 0]  #!", match="float; indices are integers"),
    Case("tensor-slice", "x = A[0:4, 0]  #!", match="slices of tensors"),
    Case("local-extent", "x = frag[4]  #!", match="outside axis extent 4"),
    Case("local-rank", "x = frag[0, 0]  #!", match="rank 1, indexed with 2"),
    Case("shared-rank", "x = s[0]  #!", match="rank 2, indexed with 1"),
    Case("shared-extent", "x = s[0, 16]  #!", match="outside axis extent 16"),
    Case("shared-slice", "x = s[0, 0:4]  #!", match="shared-buffer slices"),
    Case("store-tensor-extent", "Out[0, 99] = 1  #!", match="outside axis extent 16"),
    Case("index-constant", "x = (1, 2)[5]  #!", match="cannot index"),
    Case("ptr-to-scalar", "x = lane.ptr_to([0])  #!", match="has no ptr_to"),
    Case("ptr-to-not-list", "x = s.ptr_to(0)  #!", match="one list of indices"),
    Case("address-of-scalar", "x = T.address_of(lane)  #!", match="needs a shared buffer"),
]

NAME_CASES = [
    Case("reserved-assign", "__jt_v0 = 1  #!", match="reserved"),
    Case("reserved-loop", "for __jt_i in range(4):  #!\n    Out[0, 0] = 1", match="reserved"),
    Case("reserved-read", "x = __jt_cuda  #!", match="reserved"),
    Case(
        "reserved-parameter",
        "",
        match="reserved",
        source=HEADER.replace("n: T.int32):", "__jt_n: T.int32):  #!"),
    ),
    Case("read-before-assign", "x = y + 1  #!\ny = 2", match="'y' is read here before"),
    Case("augassign-unassigned", "q += 1  #!", match="'q' is read here before"),
    Case(
        "read-in-loop-before-assign",
        "for i in range(4):\n    if i > 0:\n        Out[0, 0] = z  #!\n    z = i",
        match="'z' is read here before",
    ),
    Case(
        "read-before-branch-assign",
        "if lane == 0:\n    Out[0, 0] = w  #!\nw = 3",
        match="'w' is read here before",
    ),
    Case("shadowed-global-read-first", "x = LOAD  #!\nLOAD = 3", match="'LOAD' is read here"),
    Case("undefined-name", "x = nowhere + 1  #!", match="'nowhere' is not defined"),
    Case(
        "reassigned-dtype",
        "dt = 'uint32'  #!\ndt = 'int32'\nb = T.alloc_shared((8,), dt)",
        match=r"assigned more than once \(lines \d+, \d+\)",
    ),
    Case(
        "reassigned-layout",
        "lay = swizzle(1, (8, 8), 'uint32')  #!\nlay = 'default'\n"
        "b = T.alloc_shared((8, 8), 'uint32', layout=lay)",
        match="assigned more than once",
    ),
    Case("reassigned-none", "v = None  #!\nv = None", match="assigned more than once"),
    Case("rebind-tensor", "A = 3  #!", match="cannot rebind 'A'"),
    Case("rebind-shared", "s = 3  #!", match="cannot rebind 's'"),
    Case("rebind-local", "frag = 3  #!", match="cannot rebind 'frag'"),
    Case("unknown-intrinsic", "x = T.cuda.nothing()  #!", match="T.cuda has no name 'nothing'"),
    Case("builtin-call", "print(lane)  #!", match="cannot be called inside a kernel"),
    Case("builtin-value", "Out[0, 0] = open  #!", match="'open' .* is not a kernel value"),
    Case("module-value", "x = T\nOut[0, 0] = x  #!", match="'x' .* is not a kernel value"),
    Case("helper-value", "Out[0, 0] = add_one  #!", match="is not a kernel value"),
    Case("helper-in-expression", "x = add_one(lane) + 1  #!", match="as a statement"),
    Case("helper-tensor-arith", "x = add_one(A)", match="tensor 'A'", marker="# helper-line"),
    Case(
        "helper-fold-in-its-names",
        "x = add_one(T)",
        match=r"'x \+ 1' fails: TypeError",
        marker="# helper-line",
    ),
    Case(
        "helper-reserved-name",
        "x = reserved_helper(lane)",
        match="reserved",
        marker="# reserved-line",
    ),
    Case(
        "helper-read-before-assign",
        "x = early_helper(lane)",
        match="'z' is read here before",
        marker="# early-line",
    ),
    Case(
        "string-value", "x = 'word'\ny = x + lane  #!", match="'x' \\(str\\) is not a kernel value"
    ),
    Case("none-value", "Out[0, 0] = None  #!", match="compile-time NoneType"),
]

LIMIT_CASES = [
    Case(
        "unroll-too-many",
        "for i in T.unroll(1000):  #!\n    Out[0, 0] = i",
        match="1000 iterations is more than the 256",
    ),
    Case(
        "unroll-huge",
        "for i in T.unroll(10 ** 30):  #!\n    Out[0, 0] = i",
        match="more than the 256",
    ),
    Case(
        "unroll-zero-step",
        "for i in T.unroll(0, 10, 0):  #!\n    Out[0, 0] = i",
        match="step must not be zero",
    ),
    Case(
        "unroll-runtime-bound",
        "for i in T.unroll(n):  #!\n    Out[0, 0] = i",
        match="compile-time integers",
    ),
    Case(
        "unroll-float-bound",
        "for i in T.unroll(1.5):  #!\n    Out[0, 0] = i",
        match="compile-time integers",
    ),
    Case(
        "unroll-four-bounds",
        "for i in T.unroll(1, 2, 3, 4):  #!\n    Out[0, 0] = i",
        match="too many positional arguments",
    ),
    Case(
        "unroll-tuple-target",
        "for i, j in T.unroll(4):  #!\n    Out[0, 0] = i",
        match="single loop name",
    ),
    Case(
        "unroll-nested-budget",
        "for i in T.unroll(200):  #!\n    for j in T.unroll(200):\n        Out[i % 16, j % 16] = i",
        match="more than 1024 statements",
    ),
    Case(
        "unroll-body-budget",
        "for i in T.unroll(250):  #!\n" + "".join(f"    Out[{k}, 0] = i\n" for k in range(5)),
        match="more than 1024 statements",
    ),
    Case("int-past-uint64", "Out[0, 0] = 2 ** 64  #!", match="does not fit in 64 bits"),
    Case(
        "int-below-int64", "x = -(2 ** 63) - 1\ny = lane + x  #!", match="does not fit in 64 bits"
    ),
    Case(
        "range-past-uint64",
        "for i in range(10 ** 30):  #!\n    Out[0, 0] = 1",
        match="does not fit in 64 bits",
    ),
    Case(
        "shared-over-sm90a",
        "big = T.alloc_shared((300 * 1024,), 'uint8')  #!",
        match=r"over the 232448 bytes \(227 KB\) one block may use on sm_90a",
    ),
    Case(
        "shared-over-sm120a",
        "big = T.alloc_shared((100 * 1024,), 'uint8')  #!",
        match=r"101376 bytes \(99 KB\) one block may use on sm_120a",
        target="sm_120a",
    ),
    Case(
        "shared-over-by-sum",
        "b1 = T.alloc_shared((120 * 1024,), 'uint8')\nb2 = T.alloc_shared((120 * 1024,), 'uint8')  #!",
        match="'b2'",
    ),
    Case(
        "shared-over-by-slack",
        "b1 = T.alloc_shared((227 * 1024 - 1024,), 'uint8', align=1024)  #!",
        match="alignment slack",
    ),
    Case(
        "shared-huge", "big = T.alloc_shared((1024, 1024, 25), 'uint8')  #!", match="26214400 bytes"
    ),
    Case("nesting-expression", "x = lane" + " + 1" * 150 + "  #!", match="nests 153 levels deep"),
    Case(
        "nesting-call",
        "x = T.uint32(" * 120 + "lane" + ")" * 120 + "  #!",
        match="more than the 100 jittile lowers",
    ),
]

SYNTAX_CASES = [
    Case("with", "with lane:  #!\n    pass", match="with blocks are not supported"),
    Case("try", "try:  #!\n    pass\nexcept Exception:\n    pass", match="try blocks are not"),
    Case("import", "import os  #!", match="import statements are not"),
    Case("global", "global LOAD  #!", match="global declarations are not"),
    Case("delete", "del lane  #!", match="del statements are not"),
    Case("assert", "assert lane  #!", match="assert statements are not"),
    Case("raise", "raise ValueError()  #!", match="raise statements are not"),
    Case("class", "class C:  #!\n    pass", match="class definitions are not"),
    Case("nested-def", "def f():  #!\n    pass", match="nested function definitions are not"),
    Case(
        "list-comprehension",
        "x = [i for i in range(3)]  #!",
        match="list comprehensions are not supported",
    ),
    Case("dict-literal", "x = {1: 2}  #!", match=r"dict displays \(\{\.\.\.: \.\.\.\}\) are not"),
    Case("set-literal", "x = {lane}  #!", match="set displays"),
    Case("lambda", "x = lambda: 1  #!", match="lambdas are not"),
    Case("f-string", "x = f'{lane}'  #!", match="f-strings are not"),
    Case("walrus", "x = (y := lane)  #!", match=r"assignment expressions \(:=\)"),
    Case("starred", "x = (*frag,)  #!", match=r"starred expressions \(\*x\)"),
    Case("return-value", "return 1  #!", match="cannot return a value"),
    Case("while-else", "while lane:  #!\n    pass\nelse:\n    pass", match="while/else"),
    Case("for-else", "for i in range(3):  #!\n    pass\nelse:\n    pass", match="for/else"),
    Case("for-over-scalar", "for i in lane:  #!\n    pass", match="iterate over range"),
    Case("grid-names", "for i, j in T.grid(4):  #!\n    pass", match="as many loop names"),
    Case("grid-one-name", "for i in T.grid(4, 4):  #!\n    pass", match="as many loop names"),
    Case(
        "device-entry-no-launch",
        "T.device_entry()  #!",
        match="missing a required argument: 'launch'",
    ),
    Case("device-entry-bad-launch", "T.device_entry(launch=5)  #!", match="static T.cuda.Launch"),
    Case(
        "launch-too-many-threads",
        "T.device_entry(launch=T.cuda.LaunchConfig(block=(64, 32)))  #!",
        match=r"block \(64, 32, 1\) has 2048 threads, over the 1024",
    ),
    Case(
        "launch-block-z",
        "T.device_entry(launch=T.cuda.LaunchConfig(block=(1, 1, 128)))  #!",
        match="block extent 128 on axis z is over the 64",
    ),
    Case(
        "launch-grid-y",
        "T.device_entry(launch=T.cuda.LaunchConfig(grid=(1, 70000)))  #!",
        match="grid extent 70000 on axis y is over the 65535",
    ),
    Case(
        "launch-cluster",
        "T.device_entry(launch=T.cuda.LaunchConfig(cluster=(4, 4)))  #!",
        match=r"cluster \(4, 4, 1\) has 16 CTAs, over the 8",
    ),
    Case("alloc-shared-empty", "b = T.alloc_shared((0,), 'uint32')  #!", match="positive ints"),
    Case("alloc-shared-dtype", "b = T.alloc_shared((8,), 'float128')  #!", match="float128"),
    Case(
        "alloc-shared-align",
        "b = T.alloc_shared((8,), 'uint32', align=3)  #!",
        match="power of two",
    ),
    Case(
        "alloc-shared-runtime-shape",
        "b = T.alloc_shared((n,), 'uint32')  #!",
        match="compile-time value",
    ),
    Case(
        "alloc-shared-keyword",
        "b = T.alloc_shared((8,), 'uint32', colour=1)  #!",
        match="unexpected keyword argument 'colour'",
    ),
    Case("alloc-local-empty", "b = T.alloc_local((0,), 'uint32')  #!", match="positive ints"),
    Case("alloc-local-dtype", "b = T.alloc_local((4,), 'nope')  #!", match="nope"),
    Case(
        "alloc-as-value", "x = T.alloc_shared((8,), 'uint32') + 1  #!", match="cannot be used here"
    ),
    Case("thread-axis", "x = T.cuda.thread_idx('w')  #!", match="'x', 'y' or 'z'"),
    Case("decl-tmem-no-type", "t = T.cuda.decl_tmem(0)  #!", match="ty_args"),
    Case("cast-two-args", "x = T.uint32(1, 2)  #!", match="too many positional arguments"),
    Case(
        "cast-runtime-two-args", "x = T.uint32(lane, 2)  #!", match="too many positional arguments"
    ),
    Case("cast-word", "x = T.uint32('abc')  #!", match="ValueError"),
    Case(
        "cast-tuple", "x = T.int32((1, 2))  #!", match="makes an array; kernel values are scalars"
    ),
    Case("max-of-one", "x = max(lane)  #!", match=r"max\(\) in a kernel takes two or more values"),
    Case("abs-of-two", "x = abs(lane, 2)  #!", match=r"abs\(\) in a kernel takes one value"),
    Case("tuple-unpack-scalar", "x, y = 1  #!", match="cannot be compiled: failed to unpack"),
]

# Typing mistakes that only numba-cuda sees: told at the user's expression.
NUMBA_CASES = [
    Case("index-a-scalar", "x = lane\nx[0] = 1  #!", match=r"'x\[0\] = 1' cannot be compiled"),
    Case("float-index", "x = A[lane * 0.5, 0]  #!", match="Unsupported array index type float64"),
    Case(
        "tuple-plus-int",
        "Out[0, 0] = A[0, 0] + (1, 2)  #!",
        match=r"'A\[0, 0\] \+ \(1, 2\)' cannot be compiled: .*'\+'",
    ),
    Case("store-a-tuple", "x = (1, 2)\nx = (lane, 3)\nOut[0, 0] = x  #!", match="an element store"),
    Case(
        "float-ptx-operand",
        "T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), 1.5 * lane)  #!",
        match="inline-PTX instruction",
    ),
]

DEFINITION = """\
import jittile
from jittile import T


{decorator}
{definition}  #!
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    {statement}
"""


def definition(decorator: str, header: str, statement: str = "pass") -> str:
    return DEFINITION.format(decorator=decorator, definition=header, statement=statement)


DEFINITION_CASES = [
    Case(
        "async-kernel",
        "",
        match="async def",
        source=definition("@jittile.kernel", 'async def kernel(A: T.Tensor((8,), "uint32")):'),
    ),
    Case(
        "generator-kernel",
        "",
        match="cannot yield",
        source=definition("@jittile.kernel", 'def kernel(A: T.Tensor((8,), "uint32")):', "yield 1"),
    ),
    Case(
        "star-args-kernel",
        "",
        match=r"\*args",
        source=definition("@jittile.kernel", "def kernel(*args):"),
    ),
    Case(
        "star-kwargs-kernel",
        "",
        match=r"\*\*kwargs",
        source=definition("@jittile.kernel", "def kernel(A, **options):"),
    ),
    Case(
        "async-helper",
        "",
        match="async def",
        source=definition("@jittile.func", "async def helper(x):"),
    ),
    Case(
        "star-args-helper",
        "",
        match=r"\*args",
        source=definition("@jittile.func", "def helper(*xs):"),
    ),
    Case(
        "unannotated-parameter",
        "",
        match="'n' has no T.Tensor or scalar annotation",
        source=definition("@jittile.kernel", 'def kernel(A: T.Tensor((8,), "uint32"), n):'),
    ),
    Case(
        "annotation-does-not-evaluate",
        "",
        match="annotations do not evaluate",
        source="from __future__ import annotations\n"
        + definition("@jittile.kernel", "def kernel(A: T.Tensr((8,), 'uint32')):"),
    ),
]


def _fold_cases() -> list[Case]:
    return [
        Case(f"fold-{name}-{where}", context.format(e=expr), match=match)
        for name, expr, match in BAD_FOLDS
        for where, context in FOLD_CONTEXTS
    ]


def _value_cases() -> list[Case]:
    cases = []
    for (name, kind), (where, context) in itertools.product(MEMORY, VALUE_CONTEXTS):
        cases.append(
            Case(
                f"value-{kind.replace(' ', '-')}-{where}",
                context.format(m=name),
                match=f"{kind} '{name}' cannot be used as a value",
            )
        )
    for name, value, match in BAD_TILE_VALUES:
        cases.append(Case(f"tile-{name}", TILE.format(mbar=value), ContractError, match))
    return cases


CASES = (
    _fold_cases()
    + _value_cases()
    + TILE_CASES
    + INDEX_CASES
    + NAME_CASES
    + LIMIT_CASES
    + SYNTAX_CASES
    + NUMBA_CASES
    + DEFINITION_CASES
)


def test_the_corpus_is_large_and_its_ids_unique():
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_kernel_fails_with_a_located_jittile_error(case, tmp_path):
    text, line = render(case)
    name, path = write(text, tmp_path)
    with pytest.raises(JittileError) as info:
        compile_module(name, path, case.target)
    error = info.value
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    assert (error.filename, error.lineno) == (path, line), str(error)
    assert isinstance(error.col_offset, int) and error.col_offset >= 0
    assert str(error).startswith(f"{path}:{line}:{error.col_offset}: ")
    assert "__jt_" not in str(error) or "reserved" in case.id, str(error)
    assert re.search(case.match, str(error)), str(error)


@pytest.mark.parametrize(
    "error",
    [
        CompileError("scope 'cluster' needs a cluster"),
        ContractError("a rule", opcode=LOAD_OPCODE, parameter="box"),
    ],
    ids=["compile-error", "contract-error"],
)
def test_a_patterns_error_without_a_place_is_told_at_the_call(error, tmp_path, monkeypatch):
    """A pattern (or a lowering service it calls, such as group_indices) that raises without a
    location gets the tile call's."""
    from jittile.patterns import registry

    pattern = registry.pattern_for(LOAD_OPCODE)

    def lower(site, ctx):
        raise error

    monkeypatch.setattr(pattern, "lower", lower)
    case = Case("unlocated", "T.cuda.tile.apply(T.ptx[LOAD], s, A, box=(8, 16))  #!")
    text, line = render(case)
    name, path = write(text, tmp_path)
    with pytest.raises(type(error)) as info:
        compile_module(name, path, "sm_90a")
    assert (info.value.filename, info.value.lineno) == (path, line)
    assert info.value.message.endswith(error.message)
