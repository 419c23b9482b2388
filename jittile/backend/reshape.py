"""The lowered function in the form numba-cuda is given: the same program, less for numba to do.

numba-cuda types and lowers every call, variable and statement of the function it compiles, and
its cost per item is high (``bench/numba_costs.py`` measures it): about a millisecond per call,
and variables are carried through SSA reconstruction and every analysis pass. Two rewrites remove
what the frontend's literal form makes numba redo:

- **Constant shared addresses.** Every shared buffer sits at a planned byte offset of the kernel's
  shared block, so the address of an element at a static index is a constant. The frontend writes
  ``__jt_saddr(buf, 3)`` (plus constant bytes) wherever one is used; here each distinct constant
  address gets one variable, set once at the top of the kernel from an argument-less intrinsic,
  and a buffer's array view is dropped when only its addresses were used.
- **Register fragments as one tuple.** The frontend gives each register of a fragment its own
  variable; a 64x256 f32 accumulator is 128 of them, threaded through every wgmma call (a call of
  131 arguments, 128 results). Here a fragment becomes one tuple variable: instructions take it
  (or a contiguous run of it) as one argument and return it as one value, ``frag[i]`` reads are
  constant tuple indexes and writes replace one element. NVVM splits the tuple back into
  registers (no local memory). A fragment used in a way this rewrite does not recognise keeps its
  scalar form.

Rewritten nodes keep the line of the node they replace, so numba's errors still point at the
user's code. The result is a new tree: only the nodes on a path to a change are new, every other
node is shared with the frontend's form, which stays as it was (the interpreter runs it, and a
re-lowering of a cached kernel reads the kernel's parsed source, which it shares nodes with).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from ..frontend.emit import SHARED_ADDRESS
from ..frontend.syntax import name as _name

ADDRESS_PREFIX = "__jt_sa"
PACKED_PREFIX = "__jt_pk"
_INSTRUCTIONS = ("asm", "record", "packed")  # kinds of the instruction intrinsics


@dataclass(frozen=True)
class Reshaped:
    """The function numba-cuda is given, and the globals it uses: the lowered ones and those the
    rewrites added."""

    function: ast.FunctionDef
    namespace: dict


def reshape(
    function: ast.FunctionDef,
    namespace: dict,
    shared_views: dict[str, str],
    fragments: dict[str, tuple[str, ...]],
) -> Reshaped:
    """``function`` rewritten, leaving ``function`` and ``namespace`` as they were; the globals
    the new function also uses are ``("saddr_const", view, index, extra_bytes)``,
    ``("packed", callee, groups)`` (an instruction taking grouped operands, see
    :func:`~jittile.backend.intrinsics.make_asm`), ``("fill", count)``, ``("set", index)`` and
    ``("splice", start, count)``."""
    namespace = dict(namespace)
    function = _hoist_constant_addresses(function, namespace, shared_views)
    for fragment, registers in fragments.items():
        function = _pack_fragment(function, namespace, f"__jt_frag_{fragment}", registers)
    return Reshaped(function, namespace)


def _shallow(node: ast.AST) -> ast.AST:
    """A new node with ``node``'s fields and location (its children shared)."""
    new = node.__class__.__new__(node.__class__)
    new.__dict__.update(node.__dict__)
    return new


def _rebuilt(node: ast.AST, transform: Callable[[ast.AST], ast.AST]) -> ast.AST:
    """``node`` with each child node replaced by ``transform(child)``: ``node`` itself when no
    child changes, else a shallow copy holding the new children (path copying)."""
    changes = {}
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            new = transform(value)
            if new is not value:
                changes[field] = new
        elif isinstance(value, list):
            new = [transform(v) if isinstance(v, ast.AST) else v for v in value]
            if any(a is not b for a, b in zip(new, value)):
                changes[field] = new
    if not changes:
        return node
    copy = _shallow(node)
    copy.__dict__.update(changes)
    return copy


def _fresh(namespace: dict, prefix: str, spec: tuple) -> str:
    """The global bound to ``spec``, added under a new name the first time."""
    for name, existing in namespace.items():
        if name.startswith(prefix) and existing == spec:
            return name
    name = f"{prefix}{len(namespace)}"
    namespace[name] = spec
    return name


def _stores(function: ast.FunctionDef) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _is_int(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)  # the nodes that hold statements


def _without(node: ast.AST, drop: Callable[[ast.stmt], bool]) -> ast.AST:
    """``node`` without the statements ``drop`` selects, at any depth (bodies and else branches;
    one emptied keeps a ``pass``), path-copied."""
    new = _rebuilt(
        node, lambda child: _without(child, drop) if isinstance(child, _BLOCKS) else child
    )
    for field in ("body", "orelse"):
        stmts = getattr(new, field, None)
        if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
            kept = [s for s in stmts if not drop(s)]
            if len(kept) != len(stmts):
                new = _shallow(new) if new is node else new
                setattr(new, field, kept or [ast.copy_location(ast.Pass(), stmts[0])])
    return new


# ------------------------------------------------------------------ constant shared addresses
@dataclass(frozen=True)
class _Address:
    """Element ``index`` of ``buffer``'s view, plus ``extra`` bytes."""

    buffer: str
    index: int
    extra: int


class _AddressRewriter:
    def __init__(self, buffers: set[str]):
        self.buffers = buffers
        self.variables: dict[_Address, str] = {}

    def rewrite(self, node: ast.AST) -> ast.AST:
        """``node`` with each constant shared address as its variable (path-copied)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_int(node.right):
            address = self._address(node.left)
            if address is not None:
                return self._use(
                    _Address(address.buffer, address.index, address.extra + node.right.value), node
                )
        elif isinstance(node, ast.Call):
            address = self._address(node)
            if address is not None:
                return self._use(address, node)
        return _rebuilt(node, self.rewrite)

    def _address(self, node: ast.expr) -> _Address | None:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == SHARED_ADDRESS
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in self.buffers
            and _is_int(node.args[1])
        ):
            return _Address(node.args[0].id, node.args[1].value, 0)
        return None

    def _use(self, address: _Address, node: ast.expr) -> ast.Name:
        if address not in self.variables:
            self.variables[address] = f"__jt_addr{len(self.variables)}"
        return ast.copy_location(_name(self.variables[address]), node)


def _hoist_constant_addresses(
    function: ast.FunctionDef, namespace: dict, views: dict[str, str]
) -> ast.FunctionDef:
    stores = _stores(function)
    # A buffer variable bound once (by its allocation) always names the buffer.
    rewriter = _AddressRewriter({var for var in views if stores.get(var) == 1})
    rewritten = rewriter.rewrite(function)
    if not rewriter.variables:
        return function
    first = function.body[0]
    hoisted = []
    for address, var in rewriter.variables.items():
        intrinsic = _fresh(
            namespace,
            ADDRESS_PREFIX,
            ("saddr_const", views[address.buffer], address.index, address.extra),
        )
        stmt = ast.Assign(
            targets=[_name(var, ast.Store())],
            value=ast.Call(func=_name(intrinsic), args=[], keywords=[]),
        )
        hoisted.append(ast.fix_missing_locations(ast.copy_location(stmt, first)))
    rewritten.body = hoisted + rewritten.body  # ``rewritten`` is a copy: an address changed
    return _drop_unused_views(rewritten, {a.buffer for a in rewriter.variables}, views)


def _drop_unused_views(
    function: ast.FunctionDef, buffers: set[str], views: dict[str, str]
) -> ast.FunctionDef:
    """Without ``buf = <view>()`` where ``buf`` is no longer read: numba would still type it."""
    read = {
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    unused = {var for var in buffers if var not in read}

    def allocates(stmt: ast.stmt) -> bool:
        return (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in unused
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == views[stmt.targets[0].id]
        )

    return _without(function, allocates) if unused else function


# ------------------------------------------------------------------ register fragments as tuples
class _Unpackable(Exception):
    """A use of a fragment register the tuple form does not express: keep the scalar form."""


def _pack_fragment(
    function: ast.FunctionDef, namespace: dict, packed: str, registers: tuple[str, ...]
) -> ast.FunctionDef:
    index = {r: i for i, r in enumerate(registers)}
    if not any(isinstance(n, ast.Name) and n.id in index for n in ast.walk(function)):
        return function
    packer = _FragmentPacker(dict(namespace), packed, index)
    try:
        body = packer.statements(function.body)
    except _Unpackable:  # nothing was changed: the rewrite builds new nodes
        return function
    namespace.update(packer.namespace)
    new = _shallow(function)
    new.body = body
    return new


class _FragmentPacker:
    """Rewrites the uses of one fragment's registers into new nodes, leaving the original
    statements as they were until the whole body has been rewritten."""

    def __init__(self, namespace: dict, packed: str, index: dict[str, int]):
        self.namespace = namespace
        self.packed = packed
        self.index = index
        self.count = len(index)

    # statements ---------------------------------------------------------------------------
    def statements(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        return [self.statement(s) for s in stmts]

    def statement(self, stmt: ast.stmt) -> ast.stmt:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Tuple) and any(
                self.register(e) is not None for e in target.elts
            ):
                return self.assign_run(stmt, self.run(target.elts))
            if self.register(target) is not None:
                return self.set_register(stmt, self.register(target), self.expr(stmt.value))
        if isinstance(stmt, ast.AugAssign) and self.register(stmt.target) is not None:
            i = self.register(stmt.target)
            value = ast.BinOp(
                left=self.read(i, stmt.target), op=stmt.op, right=self.expr(stmt.value)
            )
            return self.set_register(stmt, i, value)
        return _rebuilt(stmt, self.part)

    def part(self, node: ast.AST) -> ast.AST:
        """A part of a statement: a nested statement, or an expression (or handler) that must
        not write a register."""
        if isinstance(node, ast.stmt):
            return self.statement(node)
        self.check_no_store(node)
        return self.expr(node)

    def check_no_store(self, node) -> None:
        if not isinstance(node, ast.AST):
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in self.index and not isinstance(n.ctx, ast.Load):
                raise _Unpackable(f"{n.id} written where its fragment cannot be packed")

    def assign_run(self, stmt: ast.Assign, run: tuple[int, int] | None) -> ast.stmt:
        """``r_a, ..., r_b = value``: the fragment's initial fill, or an instruction's results."""
        if run is None:
            raise _Unpackable("a tuple assignment mixing registers with other variables")
        start, count = run
        value = stmt.value
        if isinstance(value, ast.Tuple):
            first = ast.dump(value.elts[0]) if value.elts else None
            if count != self.count or any(ast.dump(e) != first for e in value.elts):
                raise _Unpackable("registers assigned a tuple other than one value for all")
            fill = _fresh(self.namespace, PACKED_PREFIX, ("fill", count))
            return self.assign(
                stmt, ast.Call(func=_name(fill), args=[self.expr(value.elts[0])], keywords=[])
            )
        result = self.expr(value)
        if count == self.count:
            return self.assign(stmt, result)
        splice = _fresh(self.namespace, PACKED_PREFIX, ("splice", start, count))
        return self.assign(
            stmt, ast.Call(func=_name(splice), args=[_name(self.packed), result], keywords=[])
        )

    def set_register(self, stmt: ast.stmt, i: int, value: ast.expr) -> ast.stmt:
        setter = _fresh(self.namespace, PACKED_PREFIX, ("set", i))
        return self.assign(
            stmt, ast.Call(func=_name(setter), args=[_name(self.packed), value], keywords=[])
        )

    def assign(self, stmt: ast.stmt, value: ast.expr) -> ast.stmt:
        new = ast.Assign(targets=[_name(self.packed, ast.Store())], value=value)
        return ast.fix_missing_locations(ast.copy_location(new, stmt))

    # expressions ----------------------------------------------------------------------------
    def expr(self, node: ast.AST) -> ast.AST:
        """``node`` with register reads as tuple indexes and instructions taking register runs
        packed; ``node`` itself where nothing in it changes."""
        if isinstance(node, ast.Name):
            i = self.register(node)
            return node if i is None else self.read(i, node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and self.namespace.get(node.func.id, ("",))[0] in _INSTRUCTIONS
        ):
            return self.instruction(node)
        return _rebuilt(node, self.expr)

    def instruction(self, call: ast.Call) -> ast.Call:
        """An instruction's call with each run of consecutive registers passed as the packed
        fragment, the intrinsic told which elements to take; a call already taking another
        packed fragment keeps that grouping."""
        spec = self.namespace[call.func.id]
        if spec[0] == "packed":
            base, existing = spec[1], spec[2]
        else:
            base, existing = call.func.id, (None,) * len(call.args)
        args, groups = [], []
        i = 0
        while i < len(call.args):
            run = self.longest_run(call.args, i) if existing[i] is None else None
            if run is not None and run[1] > 1:
                start, count = run
                args.append(ast.copy_location(_name(self.packed), call.args[i]))
                groups.append((start, count, self.count))
                i += count
            else:
                args.append(self.expr(call.args[i]))
                groups.append(existing[i])
                i += 1
        func = call.func
        if tuple(groups) != tuple(existing):
            func = ast.copy_location(
                _name(_fresh(self.namespace, PACKED_PREFIX, ("packed", base, tuple(groups)))),
                call.func,
            )
        return ast.copy_location(ast.Call(func=func, args=args, keywords=[]), call)

    def longest_run(self, elts: list, at: int) -> tuple[int, int] | None:
        first = self.register(elts[at])
        if first is None:
            return None
        count = 1
        while at + count < len(elts) and self.register(elts[at + count]) == first + count:
            count += 1
        return first, count

    def run(self, elts: list) -> tuple[int, int] | None:
        run = self.longest_run(elts, 0) if elts else None
        return run if run is not None and run[1] == len(elts) else None

    def register(self, node: ast.expr) -> int | None:
        return self.index.get(node.id) if isinstance(node, ast.Name) else None

    def read(self, i: int, node: ast.expr) -> ast.expr:
        sub = ast.Subscript(value=_name(self.packed), slice=ast.Constant(value=i), ctx=ast.Load())
        return ast.fix_missing_locations(ast.copy_location(sub, node))
