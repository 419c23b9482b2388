"""docs/language.md, the language reference: its generated sections are what the code declares,
it documents every public ``T`` name and every tile parameter, every ``python`` block in it
compiles, and its table of the Python a kernel may use says what the frontend does."""

from __future__ import annotations

import importlib.util
import re
import textwrap
import warnings
from pathlib import Path

import pytest

import jittile
from jittile import CompileError, JittileWarning, T, docs
from jittile.patterns import registry

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "language.md"
TEXT = REFERENCE.read_text()
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, re.MULTILINE | re.DOTALL)


def _section(name: str) -> str:
    return TEXT.split(docs.marker(name))[1].split(docs.marker(name, end=True))[0]


def test_generated_sections_match_the_declarations():
    assert docs.updated(TEXT) == TEXT, "run: python -m jittile.docs docs/language.md"


def test_the_generator_rewrites_a_stale_reference(tmp_path, capsys):
    stale = tmp_path / "language.md"
    stale.write_text(TEXT.replace("| `box` | static |", "| `box` | runtime |"))
    assert docs.main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert docs.main([str(stale)]) == 0
    assert stale.read_text() == TEXT and docs.main(["--check", str(stale)]) == 0


def _public_names():
    spaces = {"T": T, "T.cuda": T.cuda, "T.cuda.tile": T.cuda.tile}
    return [f"{owner}.{name}" for owner, space in spaces.items() for name in dir(space)]


@pytest.mark.parametrize("name", _public_names())
def test_every_public_T_name_is_documented(name):
    assert f"`{name}" in TEXT, name


@pytest.mark.parametrize("pattern", registry.patterns(), ids=lambda p: p.family)
def test_every_tile_parameter_is_documented(pattern):
    family = _section("patterns").split(f"### `{pattern.family}`")[1].split("\n### ")[0]
    assert pattern.parameters
    for parameter in pattern.parameters:
        assert f"| `{parameter.name}` | {parameter.kind} | {parameter.doc.split()[0]}" in family
    for form, roles in pattern.operand_forms.items():
        assert f"| {form} | " + "; ".join(f"`{r.name}`" for r in roles[:1]) in family
    assert "`scope=`" in TEXT


def _import(path: Path, source: str):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_every_python_block_compiles(tmp_path, index):
    module = _import(tmp_path / f"language_block_{index}.py", PYTHON_BLOCKS[index])
    kernels = [k for k in vars(module).values() if isinstance(k, jittile.Kernel)]
    tuners = [k for k in vars(module).values() if isinstance(k, jittile.Autotuner)]
    assert kernels or tuners, "a python block of the reference defines a kernel"
    with warnings.catch_warnings():
        warnings.simplefilter("error", JittileWarning)
        for kernel in kernels:
            assert kernel.compile(target=kernel.target or "sm_90a").cubin
        for tuner in tuners:  # every config, from the annotations of the untuned parameters
            tuned = {name for config in tuner.configs for name in config.kwargs}
            specializer = tuner.kernel.specializer
            specs = [
                ann if isinstance(ann, T.Tensor) else ann(0)
                for name, ann in zip(specializer.names, specializer.annotations)
                if name not in tuned
            ]
            compiled = tuner.compile_all(*specs, target="sm_90a")
            assert all(isinstance(c, jittile.CompiledKernel) for c in compiled.values()), compiled


# One kernel-body snippet per row of the reference's table of Python constructs ("yes": it
# compiles; "no": a CompileError; "compile time": it compiles where a compile-time value is due).
SUBSET = {
    "`if` / `elif` / `else`": "if n == 0:\n    A[0] = 1\nelif n == 1:\n    A[0] = 2\nelse:\n"
    "    A[0] = 3\n",
    "`for x in range(...)`": "for i in range(0, n, 2):\n    A[i] = 1\n",
    "`for i, j in T.grid(M, N)`": "for i, j in T.grid(2, 8):\n    A[i * 8 + j] = 1\n",
    "`for s in T.unroll(N)`": "for s in T.unroll(4):\n    A[s] = T.uint32(s)\n",
    "`while`": "i = 0\nwhile i < n:\n    A[i] = 1\n    i += 1\n",
    "`break`, `continue`, `pass`, `return`": "for i in range(8):\n    if i == n:\n        break\n"
    "    if i == 2:\n        continue\n    pass\n"
    "if n > 4:\n    return\n",
    "ternary `a if c else b`": "A[0] = T.uint32(1) if n > 0 else T.uint32(2)\n",
    "`min`, `max`, `abs`": "A[0] = T.uint32(min(n, 3) + max(n, 1) + abs(n) + min(2, 3))\n",
    "arithmetic, bitwise, comparison and boolean operators": "if 0 < n < 4 and not n == 2 or "
    "n == 9:\n    A[0] = T.uint32((n * 3"
    " // 2 % 5) << 1 | n & 3 ^ 1)\n",
    "assignment, tuple unpacking, augmented assignment (`+=`, ...)": "a, b = n, n + 1\na += b\n"
    "A[0] = T.uint32(a)\n",
    "`T.uint32(x)` & co.": "A[0] = T.uint32(T.float32(n) * 0.5)\n",
    "calls of `@jittile.func` helpers": "store_one(A, 3)\n",
    "`len`, `int`, `float`, `bool`, `tuple`, `sum`": "s = T.alloc_shared((len(SHAPE) * sum(SHAPE),)"
    ", 'uint32')\nif int(2.5) == 2 and bool(1) "
    "and tuple(SHAPE) == SHAPE and float(1) == 1.0:\n"
    "    for i in T.unroll(len(SHAPE)):\n"
    "        A[i] = T.uint32(i)\n",
    "`for ... else`, `while ... else`": "for i in range(4):\n    pass\nelse:\n    pass\n",
    "`for x in` anything but `range`, `T.grid`, `T.unroll`": "for i in SHAPE:\n    A[i] = 1\n",
    "list, set and dict comprehensions, `dict` / `set` literals": "x = [i for i in range(4)]\n",
    "`lambda`, nested `def`, `class`": "f = lambda v: v + 1\n",
    "`try`, `with`, `assert`, `raise`, `del`, `global`, `nonlocal`, `match`": "assert n > 0\n",
    "f-strings, `print`": "print(n)\n",
    "`math.*`, NumPy and other host functions": "A[0] = T.uint32(math.sqrt(n))\n",
    "`return value`, `yield`, `:=`": "return n\n",
}
MORE_NOS = [
    "x = {i for i in range(4)}\n",
    "x = {1: 2}\n",
    "x = {1, 2}\n",
    "def f():\n    pass\n",
    "class C:\n    pass\n",
    "try:\n    pass\nexcept Exception:\n    pass\n",
    "with n:\n    pass\n",
    "raise ValueError()\n",
    "x = n\ndel x\n",
    "global SHAPE\n",
    "match n:\n    case 1:\n        pass\n",
    "s = f'{n}'\n",
    "A[0] = T.uint32(np.sqrt(n))\n",
    "yield n\n",
    "if (m := n) > 1:\n    pass\n",
    "while n > 0:\n    break\nelse:\n    pass\n",
]
SUBSET_HEADER = """\
import math

import numpy as np

import jittile
from jittile import T

SHAPE = (1, 2)


@jittile.func
def store_one(dst, index):
    dst[index] = 1


@jittile.kernel
def kernel(A: T.Tensor((64,), "uint32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
"""


def _subset_rows() -> dict[str, str]:
    table = TEXT.split("| construct | in a kernel | notes |")[1].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return {cells[0].lstrip("| ").strip(): cells[1].strip() for cells in rows}


def test_every_documented_construct_is_checked():
    assert set(_subset_rows()) == set(SUBSET)


def _compiles(tmp_path, body: str, serial=iter(range(10**6))) -> bool:  # noqa: B008
    try:  # some definitions are refused when decorated, the rest when compiled
        module = _import(
            tmp_path / f"subset_{next(serial)}.py", SUBSET_HEADER + textwrap.indent(body, "    ")
        )
        module.kernel.compile(target="sm_90a")
    except CompileError:
        return False
    return True


@pytest.mark.parametrize("construct", list(SUBSET))
def test_the_documented_python_subset_is_what_the_frontend_does(tmp_path, construct):
    verdict = _subset_rows()[construct]
    assert verdict in ("yes", "no", "compile time")
    assert _compiles(tmp_path, SUBSET[construct]) is (verdict != "no"), (construct, verdict)


@pytest.mark.parametrize("body", MORE_NOS)
def test_the_other_unsupported_constructs_are_compile_errors(tmp_path, body):
    assert not _compiles(tmp_path, body)
