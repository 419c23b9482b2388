"""Package layering: what may import what, at any level (function-level imports included).

The kernel language is what kernels are written in; it must not depend on the PTX tables or the
frontend that consume it. Target rules are pure data; the device query that picks a default
target lives with the code that launches.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jittile.targets import device_target

PACKAGE = Path(__file__).resolve().parents[1] / "jittile"

# (files, forbidden module prefixes)
RULES = [
    (["jittile/targets.py"], ("jittile.runtime",)),
    (sorted(p.relative_to(PACKAGE.parent).as_posix() for p in (PACKAGE / "language").rglob("*.py")),
     ("jittile.ptx", "jittile.frontend")),
]


def imported_modules(source: str, package: str) -> set[str]:
    """Every module that ``source``, a module of ``package``, imports, relative imports resolved;
    ``from a import b`` counts as both ``a`` and ``a.b``."""
    parts = package.split(".")
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[:len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _package_of(relative: str) -> str:
    return relative.rsplit("/", 1)[0].replace("/", ".")


@pytest.mark.parametrize("files, forbidden", RULES, ids=["targets", "language"])
def test_layers_import_nothing_above_them(files, forbidden):
    assert files
    bad = {}
    for relative in files:
        modules = imported_modules((PACKAGE.parent / relative).read_text(), _package_of(relative))
        bad[relative] = sorted(m for m in modules if m.startswith(forbidden))
    assert not {f: m for f, m in bad.items() if m}


def test_imported_modules_resolves_relative_and_nested_imports():
    source = ("from . import cuda\nfrom ..errors import X\n"
              "def f():\n    from ..ptx.grammar import split_opcode\n    import numpy\n")
    assert imported_modules(source, "jittile.language") == {
        "jittile.language", "jittile.language.cuda", "jittile.errors", "jittile.errors.X",
        "jittile.ptx.grammar", "jittile.ptx.grammar.split_opcode", "numpy"}


@pytest.mark.parametrize("capability, target", [(None, "sm_90a"), ((9, 0), "sm_90a"),
                                                ((10, 0), "sm_100a"), ((10, 3), "sm_103a"),
                                                ((12, 0), "sm_120a")])
def test_device_target(capability, target):
    assert device_target(capability) == target
