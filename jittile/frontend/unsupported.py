"""What a kernel body cannot contain, said in Python's words rather than ``ast`` class names, with
the rewrite a kernel can use.

Kernel values are scalars (and tensors, shared buffers, local arrays and fragments): anything that
builds a Python container or object at run time has no lowering, but the same value computed at
compile time (a module-level tuple, a ``T.constexpr``) folds, and a loop over ``range``,
``T.grid`` or ``T.unroll`` replaces iteration over a container.
"""

from __future__ import annotations

import ast

from ..errors import CompileError, Location

_LOOP = (
    "use a `for i in range(n):` loop (or `T.unroll(n)` to unroll it at compile time), "
    "storing into a `T.alloc_local((n,), dtype)` array"
)
_STATIC = (
    "or build the value outside the kernel: a module-level tuple or a T.constexpr "
    "parameter is folded at compile time and can be indexed with compile-time integers"
)

# ast class name -> (what it is in the user's words, how to write it instead)
_WORDS: dict[str, tuple[str, str]] = {
    "ListComp": ("list comprehensions", f"{_LOOP}, {_STATIC}"),
    "SetComp": ("set comprehensions", f"{_LOOP}, {_STATIC}"),
    "DictComp": ("dict comprehensions", f"{_LOOP}, {_STATIC}"),
    "GeneratorExp": ("generator expressions", f"{_LOOP}, {_STATIC}"),
    "List": ("list displays ([...]) as runtime values", f"use a tuple (...), {_STATIC}"),
    "Set": ("set displays ({...})", _STATIC),
    "Dict": ("dict displays ({...: ...})", _STATIC),
    "Lambda": ("lambdas", "define a `@jittile.func` helper at module level and call it"),
    "JoinedStr": ("f-strings", "kernels have no strings at run time; compute text on the host"),
    "Starred": ("starred expressions (*x)", "write the elements out"),
    "NamedExpr": ("assignment expressions (:=)", "assign on a line of its own"),
    "Await": ("await expressions", "kernels are not coroutines"),
    "Yield": (
        "yield expressions",
        "kernels are not generators: write results into an output tensor",
    ),
    "YieldFrom": (
        "yield from expressions",
        "kernels are not generators: write results into an output tensor",
    ),
    "Slice": ("slices outside a subscript or tile-call operand", "index with integers"),
    "FunctionDef": (
        "nested function definitions",
        "define a `@jittile.func` helper at module level and call it",
    ),
    "ClassDef": ("class definitions", "define classes outside the kernel"),
    "With": ("with blocks", "kernels have no context managers: write the code inline"),
    "Try": ("try blocks", "kernels cannot raise or catch exceptions: check values with if"),
    "Raise": (
        "raise statements",
        "kernels cannot raise exceptions: check values with if, or return",
    ),
    "Assert": (
        "assert statements",
        "kernels cannot raise exceptions: check values with if, or return",
    ),
    "Import": ("import statements", "import at module level; the kernel reads module globals"),
    "ImportFrom": ("import statements", "import at module level; the kernel reads module globals"),
    "Global": ("global declarations", "kernels cannot assign module globals; write to a tensor"),
    "Nonlocal": ("nonlocal declarations", "write to a tensor or a local array instead"),
    "Delete": ("del statements", "leave the name unused"),
    "Match": ("match statements", "use if/elif"),
}


def unsupported(node: ast.AST, location: Location, kind: str) -> CompileError:
    """The error for a ``kind`` ("statement", "expression") node no kernel can contain."""
    name = type(node).__name__
    words, hint = _WORDS.get(name, (f"{name} {kind}s", None))
    return CompileError(f"{words} are not supported in kernels", location, hint=hint)


LOOP_HINT = (
    "write `for i in range(n):`, `for i, j in T.grid(m, n):`, or `for s in T.unroll(n):` "
    "to unroll at compile time (its index may then name shared buffers and mbarriers in "
    "tile calls); to walk a compile-time tuple, loop over `T.unroll(len(values))` and "
    "index it"
)
