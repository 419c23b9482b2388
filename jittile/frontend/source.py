"""Kernel source: the function's AST with positions that point into the real file."""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass, field

from ..errors import CompileError, Location


@dataclass
class KernelSource:
    """A kernel function's definition and the scopes its names resolve in. ``text`` is the
    definition as written (decorators included; what ``jittile cache why`` diffs and the key's
    facts memo is keyed by); ``tree`` is parsed on first use, which a cache hit never needs where
    the memo holds the facts (jittile/cache/facts.py)."""

    pyfunc: object
    name: str
    qualname: str
    filename: str
    firstlineno: int
    globals: dict
    closure: dict
    text: str
    parsed: ast.FunctionDef | None = field(default=None, repr=False)
    key_facts: tuple | None = field(default=None, repr=False)  # cache/components.py's, once read

    @property
    def tree(self) -> ast.FunctionDef:
        if self.parsed is None:
            self.parsed = _parse_definition(self.pyfunc, self.filename)
        return self.parsed

    def location(self, node: ast.AST) -> Location:
        lineno = getattr(node, "lineno", self.firstlineno)
        end = (
            getattr(node, "end_col_offset", None)
            if getattr(node, "end_lineno", None) == lineno
            else None
        )
        return Location(self.filename, lineno, getattr(node, "col_offset", 0), end)

    def node_indices(self) -> dict[Location, int]:
        """Each position of this kernel's code -> the index of its first node in ``ast.walk``
        order: how a cache entry records where a call site is, independent of comments and line
        breaks (which the cache key ignores)."""
        starts: dict[Location, int] = {}
        for index, node in enumerate(ast.walk(self.tree)):
            if hasattr(node, "lineno"):
                starts.setdefault(self.location(node), index)
        return starts

    def locate(self, index: int, recorded: Location) -> Location:
        """Where the node :meth:`node_indices` numbered ``index`` is now; ``recorded`` for a site
        from another file (a helper's), numbered -1."""
        if isinstance(index, int) and index >= 0:
            nodes = self._walk()
            if index < len(nodes) and hasattr(nodes[index], "lineno"):
                return self.location(nodes[index])
        return recorded

    def _walk(self) -> list:
        if getattr(self, "_nodes", None) is None:
            self._nodes = list(ast.walk(self.tree))
        return self._nodes


def load_source(pyfunc) -> KernelSource:
    """Parse ``pyfunc``'s source; line and column numbers of every node match the file.

    The definition is found in the parsed file (by name and first line), which keeps the file's
    positions as they are and avoids ``inspect``'s tokenizer on the cache-hit path; a function
    the file does not show that way is read through ``inspect``. Source that is not in a file is
    found in ``linecache`` (IPython and Jupyter keep their cells there; code run with
    ``exec(compile(src, name, "exec"))`` can be registered there under ``name``).
    """
    try:
        filename = inspect.getsourcefile(pyfunc) or inspect.getfile(pyfunc)
    except TypeError as exc:
        raise CompileError(f"cannot read the source of {pyfunc!r}: {exc}") from exc
    code = pyfunc.__code__
    lines = linecache.getlines(filename, pyfunc.__globals__)
    if not lines:
        raise _no_source(pyfunc, filename)
    parsed, last = None, _last_line(code)
    if last is None:  # Python 3.10: no end positions in code objects; the tree says
        parsed = _parse_definition(pyfunc, filename)
        last = parsed.end_lineno
    closure = {}
    if pyfunc.__closure__:
        for name, cell in zip(code.co_freevars, pyfunc.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
    return KernelSource(
        pyfunc,
        pyfunc.__name__,
        pyfunc.__qualname__,
        filename,
        code.co_firstlineno,
        pyfunc.__globals__,
        closure,
        "".join(lines[code.co_firstlineno - 1 : last]),
        parsed,
    )


def _last_line(code: types.CodeType) -> int | None:
    """The last line the function's code covers (its nested functions' too), from the code
    objects' positions (Python 3.11+), or None where code objects have no end positions."""
    if not hasattr(code, "co_positions"):
        return None
    last = code.co_firstlineno
    for _, end, _, _ in code.co_positions():
        if end is not None and end > last:
            last = end
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            last = max(last, _last_line(constant))
    return last


def _parse_definition(pyfunc, filename: str) -> ast.FunctionDef:
    """The function's definition parsed, its positions those of the file, decorators dropped."""
    code = pyfunc.__code__
    tree = _definition_in_file(filename, pyfunc.__globals__, pyfunc.__name__, code.co_firstlineno)
    if tree is None:
        tree = _definition_by_inspect(pyfunc, filename)
    tree.decorator_list = []
    return tree


def _no_source(pyfunc, filename: str) -> CompileError:
    """Why the source of ``pyfunc`` cannot be read, and what to do."""
    where = Location(filename, pyfunc.__code__.co_firstlineno, 0)
    if filename.startswith("<") and filename.endswith(">"):
        return CompileError(
            f"cannot read the source of {pyfunc.__qualname__}: it was defined in {filename} (the "
            f"plain Python REPL, python -c or exec of a string), which keeps no source text, and "
            f"jittile compiles a kernel from its source",
            where,
            hint="put the kernel in a .py file and import it; for exec, register the source in "
            "linecache first: linecache.cache[name] = (len(src), None, "
            "src.splitlines(True), name); exec(compile(src, name, 'exec')) (IPython and "
            "Jupyter keep their cells there already)",
        )
    return CompileError(
        f"cannot read the source of {pyfunc.__qualname__}: its file {filename} "
        f"no longer exists or cannot be read",
        where,
        hint="jittile compiles a kernel from its source file; keep the file "
        "where the kernel's module was imported from",
    )


_parsed_files: dict[str, tuple[list, ast.Module]] = {}


def _definition_in_file(
    filename: str, module_globals: dict, name: str, firstlineno: int
) -> ast.FunctionDef | None:
    lines = linecache.getlines(filename, module_globals)
    if not lines:
        return None
    parsed = _parsed_files.get(filename)
    if parsed is None or parsed[0] is not lines:
        try:
            parsed = (lines, ast.parse("".join(lines), filename))
        except (SyntaxError, ValueError):
            return None
        _parsed_files[filename] = parsed
    for node in ast.walk(parsed[1]):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first == firstlineno:
                return copy.copy(node)  # shallow: the file's tree keeps its decorators
    return None


def _definition_by_inspect(pyfunc, filename: str) -> ast.FunctionDef:
    try:
        lines, firstlineno = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError) as exc:
        raise CompileError(f"cannot read the source of {pyfunc!r}: {exc}") from exc
    text = textwrap.dedent("".join(lines))
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    funcs = [
        n for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    if not funcs:
        raise CompileError(
            f"{pyfunc.__qualname__} is not a function definition",
            Location(filename, firstlineno, 0),
        )
    tree = funcs[0]
    ast.increment_lineno(tree, firstlineno - 1)
    if indent:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset"):
                node.col_offset += indent
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += indent
    return tree
