"""Key components that need more than the kernel's parameters: its code, the globals it reads, and the
versions of everything that generates code.

What is (and is not) in a key:

- ``source``: a digest of the kernel function's AST without positions and without its docstring, so
  comments, blank lines, formatting, the docstring, the file's path and the line the kernel starts on
  take no part. Moving a kernel, or sharing a cache directory between two checkouts, still hits; the
  entry's ``source_file``/``source_line`` metadata record where it was first compiled, and a hit
  reports the current place.
- ``globals``: every module global or closure variable the kernel body reads, with its value, and
  for attribute reads through modules, classes and namespaces (``cfg.TILE``, ``Cfg.PAD``) the value
  read. Functions, classes, modules and the kernel language itself are code, not data, and are left
  out (jittile's own code is covered by ``versions``).
- ``helpers``: per ``@jittile.func`` helper the kernel calls (directly or through other helpers),
  the digest of its code and the globals it reads, as for the kernel itself.
- ``versions``: jittile's release, a digest of the jittile modules that shape generated code (so a
  source checkout that changes the lowering never reuses an old cubin), and the numba-cuda, NVVM,
  nvJitLink and llvmlite distributions.

Standard library only; nothing here imports numba.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
import sys
import types

from . import facts as facts_memo

# Values whose text is longer than this are recorded as a digest, keeping the entry metadata (<kernel>.json) small.
_LONG_TEXT = 256
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
# jittile objects that are values a kernel may fold (everything else of jittile's is code).
_JITTILE_DATA_MODULES = ("jittile.layout", "jittile.axis", "jittile.dtypes")
_JITTILE_DATA_TYPES = {
    ("jittile.language.types", "Tensor"),
    ("jittile.language.cuda", "LaunchConfig"),
}
# jittile modules whose code decides what a kernel compiles to (the rest launch, cache or report).
_CODEGEN_PARTS = (
    "frontend",
    "patterns",
    "ptx",
    "backend",
    "language",
    "layout.py",
    "axis.py",
    "dtypes.py",
    "targets.py",
    "ir.py",
    "scalars.py",
    "fragment.py",
)
TOOLCHAIN_DISTRIBUTIONS = {
    "numba-cuda": "numba-cuda",
    "nvvm": "nvidia-nvvm",
    "nvjitlink": "nvidia-nvjitlink",
    "llvmlite": "llvmlite",
}

_versions_memo: dict | None = None


# -- the kernel's code ---------------------------------------------------------------------------


def _without_docstring(tree: ast.AST) -> ast.AST:
    body = getattr(tree, "body", None)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        tree = copy.copy(tree)  # shallow: the kernel's own tree is left as it is
        tree.body = body[1:] or [ast.Pass()]
    return tree


def source_digest(code) -> str:
    """SHA-256 of the function's AST without positions or docstring: comments, formatting, the
    docstring, the file and the line number do not change it. ``code``: the function's tree, or
    its source (the frontend's KernelSource: ``.text`` and a ``.tree`` parsed on first use)."""
    return _facts(code)[0]


def _facts(code) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """The source digest and the name chains the body reads (not shadowed by a local), computed once
    per tree or source: a kernel's code does not change, only the values its names resolve to
    may. A source (it carries its text) finds them in the disk memo of jittile/cache/facts.py
    when an earlier process computed them, and its tree is then never parsed."""
    if isinstance(code, ast.AST):
        facts = getattr(code, "_jittile_key_facts", None)
        if facts is None:
            facts = _computed_facts(code)
            try:
                code._jittile_key_facts = facts
            except AttributeError:
                pass
        return facts
    facts = code.key_facts
    if facts is None:
        facts = facts_memo.load(code.text)
        if facts is None:
            facts = _computed_facts(code.tree)
            facts_memo.save(code.text, facts)
        code.key_facts = facts
    return facts


def _computed_facts(tree: ast.AST) -> tuple[str, tuple[tuple[str, ...], ...]]:
    digest = hashlib.sha256(ast.dump(_without_docstring(tree), include_attributes=False).encode())
    local = _local_names(tree)
    chains: dict[tuple[str, ...], None] = {}
    for statement in getattr(tree, "body", []):
        for node in ast.walk(statement):
            if isinstance(node, (ast.Name, ast.Attribute)):
                chain = _dotted(node)
                if chain and chain[0] not in local:
                    chains[tuple(chain)] = None
    # A chain that starts another (``cfg`` of ``cfg.TILE``) is resolved on the way along it.
    prefixes = {chain[:end] for chain in chains for end in range(1, len(chain))}
    return digest.hexdigest(), tuple(c for c in chains if c not in prefixes)


# -- globals the kernel reads ----------------------------------------------------------------------


def _is_namespace(value: object) -> bool:
    """Objects whose attributes a kernel reads as qualified names: modules, classes, namespaces."""
    return isinstance(value, (types.ModuleType, type, types.SimpleNamespace))


def _default_repr(value: object) -> bool:
    return type(value).__repr__ is object.__repr__


def _digest_if_long(text: str) -> str:
    if len(text) <= _LONG_TEXT:
        return text
    return f"<{len(text)} chars, sha256 {hashlib.sha256(text.encode()).hexdigest()}>"


def value_text(value: object) -> str | None:
    """The stable text of a data value a kernel can fold, or ``None`` when ``value`` is code
    (a module, class, function, kernel-language object) or has no stable text."""
    if isinstance(value, _PLAIN):
        return _digest_if_long(repr(value))
    if isinstance(value, (tuple, list)):
        parts = [value_text(v) for v in value]
        if any(p is None for p in parts):
            return None
        if all(isinstance(v, _PLAIN) for v in value):
            return _digest_if_long(repr(value))  # plain data: its repr, as for a scalar
        inner = ", ".join(parts) + ("," if isinstance(value, tuple) and len(parts) == 1 else "")
        return _digest_if_long(f"({inner})" if isinstance(value, tuple) else f"[{inner}]")
    if isinstance(value, (set, frozenset)):
        parts = [value_text(v) for v in value]
        return (
            None
            if any(p is None for p in parts)
            else _digest_if_long("{" + ", ".join(sorted(parts)) + "}")
        )
    if _is_namespace(value) or callable(value):
        return None
    kind = type(value)
    module = kind.__module__ or ""
    if module == "numpy" and hasattr(value, "tobytes") and hasattr(value, "shape"):
        if getattr(value, "ndim", 0) == 0:
            return repr(value)
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return f"ndarray(dtype={value.dtype}, shape={tuple(value.shape)}, sha256 {digest})"
    if module.startswith("jittile"):
        if not (
            module.startswith(_JITTILE_DATA_MODULES)
            or (module, kind.__qualname__) in _JITTILE_DATA_TYPES
        ):
            return None
    if _default_repr(value):
        return None
    return _digest_if_long(_ADDRESS.sub("", repr(value)))


def code_identity(value: object) -> str | None:
    """``"code jittile.language.math.exp2"``: which function (or kernel-language object) a name
    the kernel reads is bound to, where that name is the kernel's own (a closure variable, a
    module global): ``fn = T.exp2`` and ``fn = T.log2`` compile differently, so the name's
    target is part of the key. Namespaces and classes have none (their attributes are read)."""
    if _is_namespace(value) or isinstance(value, type) or not callable(value):
        return None
    name = getattr(value, "__qualname__", None)
    module = getattr(value, "__module__", None)
    if isinstance(name, str) and isinstance(module, str):
        return f"code {module}.{name}"
    kind = type(value)
    return f"code {kind.__module__}.{kind.__qualname__} {_ADDRESS.sub('', repr(value))}"


def _dotted(node: ast.AST) -> list[str] | None:
    """``["cfg", "TILE"]`` for the expression ``cfg.TILE``; ``None`` for anything but a name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return None
    parts.append(node.id)
    return parts[::-1]


def _local_names(tree: ast.AST) -> set[str]:
    """Parameters and every name the function binds: they shadow globals."""
    names = set()
    args = getattr(tree, "args", None)
    if args is not None:
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                names.add(arg.arg)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node is not tree
        ):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.difference_update(node.names)
    return names


def _attribute(value: object, name: str) -> object:
    """``value.name`` for namespaces, and instance attributes of plain objects (no properties run)."""
    if _is_namespace(value):
        return getattr(value, name)
    if _default_repr(value) and name in getattr(value, "__dict__", {}):
        return value.__dict__[name]
    raise AttributeError(name)


def referenced_globals(code, globals_: dict, closure: dict) -> dict[str, str]:
    """``{"TILE": "4", "Cfg.PAD": "1"}``: the data values the kernel's body reads from its closure or
    module globals (closure first, as the frontend resolves them). Annotations are left out: what they
    fix is in the argument components."""
    found: dict[str, str] = {}
    for chain in _facts(code)[1]:
        if chain[0] in closure:
            value = closure[chain[0]]
        elif chain[0] in globals_:
            value = globals_[chain[0]]
        else:
            continue  # a builtin, or undefined (the frontend reports it)
        for depth in range(len(chain)):
            if depth:
                try:
                    value = _attribute(value, chain[depth])
                except Exception:
                    break
            text = value_text(value)
            if text is None and depth == 0 and not _is_helper(value):
                text = code_identity(value)  # a name bound to code: which code it is
            if text is not None:
                found[".".join(chain[: depth + 1])] = text
                break
            if not (_is_namespace(value) or _default_repr(value)):
                break
    return dict(sorted(found.items()))


def _resolve(chain: tuple[str, ...], globals_: dict, closure: dict) -> object:
    """The value a name chain (``helpers.load_tile``) reads, or None where it does not resolve."""
    scope = closure if chain[0] in closure else globals_
    if chain[0] not in scope:
        return None
    value = scope[chain[0]]
    for name in chain[1:]:
        try:
            value = _attribute(value, name)
        except Exception:
            return None
    return value


def _is_helper(value: object) -> bool:
    try:
        return getattr(value, "__jittile_helper__", False) is True
    except Exception:  # objects with unusual __getattr__ are not helpers
        return False


def helper_components(code, globals_: dict, closure: dict) -> dict[str, dict]:
    """``{"module.qualname": {"source": digest, "globals": {...}}}`` for every ``@jittile.func``
    helper the kernel calls, directly or through other helpers: their code and the data they read
    change the cubin as the kernel's own do."""
    found: dict[str, dict] = {}
    pending = [(code, globals_, closure)]
    while pending:
        code, globals_, closure = pending.pop()
        for chain in _facts(code)[1]:
            value = _resolve(chain, globals_, closure)
            if not _is_helper(value):
                continue
            name = f"{value.__module__}.{value.__qualname__}"
            if name in found:
                continue
            source = value.source
            found[name] = {
                "source": source_digest(source),
                "globals": referenced_globals(source, source.globals, source.closure),
            }
            pending.append((source, source.globals, source.closure))
    return dict(sorted(found.items()))


def terminal_reads(
    code, globals_: dict, closure: dict, opaque
) -> list[tuple[tuple[str, ...], object]]:
    """Per name chain the body reads, the prefix whose value its code depends on, with that value.

    A prefix ends at the first data value (the one :func:`referenced_globals` records), at code (a
    helper, a function), at a namespace that ``opaque(value)`` says not to look into, or where the
    chain ends or stops resolving. Chains of names bound nowhere (builtins) are left out.
    """
    found: dict[tuple[str, ...], object] = {}
    for chain in _facts(code)[1]:
        scope = closure if chain[0] in closure else globals_
        if chain[0] not in scope:
            continue
        value, depth = scope[chain[0]], 1
        while (
            depth < len(chain)
            and value_text(value) is None
            and not opaque(value)
            and (_is_namespace(value) or _default_repr(value))
        ):
            try:
                value = _attribute(value, chain[depth])
            except Exception:
                break
            depth += 1
        found[chain[:depth]] = value
    return list(found.items())


# -- versions --------------------------------------------------------------------------------------


def _normalize_distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def distribution_versions(names: list[str]) -> dict[str, str]:
    """Installed versions of ``names`` (``"absent"`` when not installed), first on ``sys.path`` wins.

    Reads the ``NAME-VERSION.dist-info`` and ``.egg-info`` entry names (one directory listing per
    ``sys.path`` entry), the metadata every pip, setuptools and conda install leaves: importing
    :mod:`importlib.metadata` costs about 20 ms, which a disk-cache hit should not pay.
    """
    wanted = {_normalize_distribution(n): n for n in names}
    found: dict[str, str] = {}
    for entry in sys.path:
        if len(found) == len(wanted):
            break
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for child in listing:
            stem, dot, suffix = child.rpartition(".")
            if suffix not in ("dist-info", "egg-info") or not dot:
                continue
            name, _, version = stem.partition("-")
            version = version.split("-py")[0]  # egg-info names may end in -pyX.Y
            original = wanted.get(_normalize_distribution(name))
            if original is not None and original not in found and version:
                found[original] = version
    return {name: found.get(name, "absent") for name in names}


def jittile_source_digest() -> str:
    """SHA-256 over the jittile modules that shape generated code (paths and contents)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = []
    for part in _CODEGEN_PARTS:
        path = os.path.join(package, part)
        if part.endswith(".py"):
            files.append(part)
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            relative = os.path.relpath(folder, package).replace(os.sep, "/")
            files += [f"{relative}/{n}" for n in sorted(names) if n.endswith(".py")]
    digest = hashlib.sha256()
    for name in files:
        try:
            with open(os.path.join(package, name), "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def toolchain_versions(jittile_version: str) -> dict:
    """Versions that change generated code; computed once per process."""
    global _versions_memo
    if _versions_memo is None or _versions_memo.get("jittile") != jittile_version:
        found = distribution_versions(list(TOOLCHAIN_DISTRIBUTIONS.values()))
        _versions_memo = {
            "jittile": jittile_version,
            "jittile_source": jittile_source_digest(),
            **{label: found[dist] for label, dist in TOOLCHAIN_DISTRIBUTIONS.items()},
        }
    return dict(_versions_memo)
