"""Package layering: what may import what, at any level (function-level imports included).

The kernel language is what kernels are written in; it must not depend on the PTX tables or the
frontend that consume it. Target rules are pure data; the device query that picks a default
target lives with the code that launches. ``ir.py`` is plain data every stage shares; patterns
are pure Python (no numba, no driver); the runtime launches what it is given and knows neither the
frontend nor the patterns. The frontend holds no opcode text: the patterns and the PTX tables do.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jittile.targets import Target, device_target

PACKAGE = Path(__file__).resolve().parents[1] / "jittile"

# (files, forbidden module prefixes)
RULES = [
    (["jittile/targets.py"], ("jittile.runtime",)),
    (
        sorted(
            p.relative_to(PACKAGE.parent).as_posix() for p in (PACKAGE / "language").rglob("*.py")
        ),
        ("jittile.ptx", "jittile.frontend"),
    ),
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
            base = parts[: len(parts) - node.level + 1] if node.level else []
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
    source = (
        "from . import cuda\nfrom ..errors import X\n"
        "def f():\n    from ..ptx.grammar import split_opcode\n    import numpy\n"
    )
    assert imported_modules(source, "jittile.language") == {
        "jittile.language",
        "jittile.language.cuda",
        "jittile.errors",
        "jittile.errors.X",
        "jittile.ptx.grammar",
        "jittile.ptx.grammar.split_opcode",
        "numpy",
    }


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, package: str, modules) -> set[str]:
    """What each import statement of ``source`` (a module of ``package``) imports, at any depth
    (inside functions, under ``if TYPE_CHECKING``): ``from a import b`` is ``a.b`` where that is
    one of ``modules``, else ``a`` (``b`` is a name defined in ``a``); ``import a.b`` is ``a.b``."""
    parts = package.split(".")
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.add(submodule if submodule in modules else module)
    return found


def _module_files() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    """jittile module -> the modules it imports explicitly, at any level: jittile's modules by
    name, others by top-level package (``cuda.*`` in full). Importing a module does not count as
    importing its package's ``__init__``, which Python runs first: counted, every module would
    depend on ``jittile/__init__.py``, which imports the kernel and through it everything."""
    files = _module_files()
    graph = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        edges = set()
        for name in imported_names(path.read_text(), package, files):
            if name.startswith("jittile"):
                edges.add(name)
            else:
                edges.add(name if name.startswith("cuda") else name.split(".")[0])
        graph[module] = edges - {module}
    return graph


def reachable(graph: dict, start: str) -> dict[str, list[str]]:
    """Every module reachable from ``start``, with one import path to it."""
    paths, todo = {start: [start]}, [start]
    while todo:
        current = todo.pop()
        for target in sorted(graph.get(current, ())):
            if target not in paths:
                paths[target] = paths[current] + [target]
                todo.append(target)
    return paths


# (modules whose name starts with, may never reach a module starting with)
REACHABILITY_RULES = [
    ("jittile.runtime", ("jittile.frontend", "jittile.patterns", "jittile.backend")),
    ("jittile.language", ("jittile.frontend", "jittile.ptx", "jittile.backend", "numba")),
    (
        "jittile.patterns",
        ("jittile.runtime", "jittile.backend", "jittile.frontend", "numba", "llvmlite", "cuda"),
    ),
    (
        "jittile.ir",
        tuple(
            f"jittile.{p}"
            for p in (
                "frontend",
                "patterns",
                "ptx",
                "backend",
                "runtime",
                "cache",
                "language",
                "layout",
                "targets",
                "kernel",
            )
        ),
    ),
    ("jittile.targets", ("jittile.runtime", "cuda")),
]


@pytest.mark.parametrize(
    "owner, forbidden", REACHABILITY_RULES, ids=[owner for owner, _ in REACHABILITY_RULES]
)
def test_import_graph_holds(owner, forbidden):
    graph = import_graph()
    owned = [m for m in graph if m == owner or m.startswith(owner + ".")]
    assert owned
    broken = {}
    for module in owned:
        for target, path in reachable(graph, module).items():
            if target.startswith(forbidden):
                broken[module] = " -> ".join(path)
    assert not broken, broken


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None: a depth-first
    search that meets a module still on its path."""
    state: dict[str, str] = {}  # module -> "open" while on the path, "done" after

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target in graph and target not in state:
                found = visit(target, path)
                if found:
                    return found
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [])
            if found:
                return found
    return None


def test_no_import_cycles():
    """Imports at every depth count: a function-level or ``TYPE_CHECKING`` import of a module
    that imports this one back is a cycle, hidden only until someone moves the import up."""
    graph = {
        m: {t for t in edges if t.startswith("jittile")} for m, edges in import_graph().items()
    }
    assert all(t in graph for edges in graph.values() for t in edges)  # edges are modules
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_find_cycle_reports_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_import_graph_sees_every_import_statement():
    """``from . import __version__`` in a module that also imports ``jittile.x`` still names
    ``jittile`` (one statement's submodule does not hide another statement's package)."""
    source = (
        "from . import __version__\nfrom .cache import store\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .kernel import Kernel\n"
    )
    modules = {"jittile", "jittile.cache", "jittile.cache.store", "jittile.kernel"}
    assert imported_names(source, "jittile", modules) == {
        "jittile",
        "jittile.cache.store",
        "jittile.kernel",
        "typing",
    }


def test_import_graph_sees_function_level_edges():
    graph = import_graph()
    assert "jittile.runtime.driver" in reachable(graph, "jittile.specialize")  # inside a function
    assert "jittile.ir" in graph["jittile.runtime.launcher"]


OPCODE_TEXT = ("mbarrier.", "cp.async", "cp.reduce", "tcgen05.", "expect_tx")


def test_frontend_holds_no_opcode_text():
    for path in (PACKAGE / "frontend").rglob("*.py"):
        text = path.read_text()
        assert not [w for w in OPCODE_TEXT if w in text], path


def test_a_raw_call_of_a_tile_opcode_points_to_tile_apply(tmp_path):
    from test_tma_contract import Spec, load_kernel

    from jittile import ContractError

    opcode = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    spec = Spec(extra=f'T.ptx["{opcode}"](T.address_of(s), mbar.ptr_to([0]))')
    kernel, _, _ = load_kernel(spec, tmp_path)
    with pytest.raises(
        ContractError,
        match=r"tile-pattern opcode of the cp.async.bulk.tensor "
        r"family: issue it with T.cuda.tile.apply",
    ):
        kernel.compile(target="sm_90a")


@pytest.mark.parametrize(
    "capability, target",
    [
        (None, "sm_90a"),
        ((9, 0), "sm_90a"),
        ((10, 0), "sm_100a"),
        ((10, 3), "sm_103a"),
        ((12, 0), "sm_120a"),
    ],
)
def test_device_target(capability, target):
    assert device_target(capability) == Target.parse(target)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_definitions(tree: ast.Module) -> set[str]:
    """The private names a module defines: its private functions, classes and globals, its
    classes' private methods and attributes, and private attributes it sets on any object."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
        ):
            names.add(node.args[1].value)
    return {n for n in names if isinstance(n, str) and _private(n)}


def private_reads(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each private name the module reads from an object other than
    ``self``/``cls`` (``obj._x``, ``getattr(obj, "_x")``) or imports from a jittile module
    (``from .m import _x``)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and _private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append((node.lineno, node.args[1].value))
        elif isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith(package.split(".")[0])
        ):
            found.extend((node.lineno, a.name) for a in node.names if _private(a.name))
    return found


def test_no_module_reads_another_modules_private_names():
    """A module reads a private name (``obj._x``, ``from .m import _x``) only where it defines
    that name itself: its own classes' attributes, on objects other than ``self`` too (a
    comparison with another instance, a helper class of the module). A private name that some
    other jittile module defines is that module's business: ask it through a public name.
    Private names no jittile module defines (``sys._getframe``, ``torch._C``) belong to other
    libraries and are not this test's concern."""
    trees = {m: ast.parse(p.read_text()) for m, p in _module_files().items()}
    defined = {m: private_definitions(t) for m, t in trees.items()}
    reaches = []
    for module, tree in trees.items():
        others = set().union(*(names for m, names in defined.items() if m != module))
        reaches += [
            f"{module}:{line}: {name}"
            for line, name in private_reads(tree, module)
            if name not in defined[module] and name in others
        ]
    assert not reaches, reaches


def test_private_reads_are_seen_in_every_spelling():
    source = (
        "from .launch import _fast\nfrom numpy import _core\nimport sys\n"
        "def f(kernel, self):\n    kernel._prepared\n    self._own\n    sys._getframe()\n"
        "    getattr(kernel, '_watch', None)\n"
    )
    names = sorted(name for _, name in private_reads(ast.parse(source), "jittile.kernel"))
    assert names == ["_fast", "_getframe", "_prepared", "_watch"]  # numpy's _core: not jittile
    tree = ast.parse(
        "class K:\n    _table = {}\n    def _m(self):\n        self._x = 1\n"
        "def _f():\n    other._y = 2\n    setattr(other, '_z', 3)\n"
    )
    assert private_definitions(tree) == {"_table", "_m", "_x", "_f", "_y", "_z"}


# jittile modules the code generator reaches that cannot change what a kernel compiles to
NOT_CODEGEN = {"jittile.errors": "error messages only"}


def test_every_module_the_code_generator_reaches_is_in_the_cache_key():
    """A cache entry is keyed by a digest of the modules that shape generated code (``cache/
    components.py``'s ``_CODEGEN_PARTS``): a module the frontend, backend, patterns, PTX tables
    or kernel language reach but the digest leaves out would let a changed jittile load a cubin
    the earlier code built (``ir.py``'s folding, ``scalars.py``'s typing, ``fragment.py``'s
    layouts were left out until 2026-12-03)."""
    from jittile.cache.components import _CODEGEN_PARTS

    graph = import_graph()
    stages = ("frontend", "backend", "patterns", "ptx", "language")
    starts = [m for m in graph if m.split(".")[1:2] and m.split(".")[1] in stages]
    assert starts
    missing = {}
    for start in starts:
        for module, path in reachable(graph, start).items():
            parts = module.split(".")
            if parts[0] != "jittile" or len(parts) < 2 or module in NOT_CODEGEN:
                continue
            if parts[1] not in _CODEGEN_PARTS and f"{parts[1]}.py" not in _CODEGEN_PARTS:
                missing[module] = " -> ".join(path)
    assert not missing, missing
