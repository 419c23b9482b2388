"""Warp-synchronous operations under conditions that differ between the lanes of a warp.

A ``.aligned`` PTX instruction (the instruction table says which: ``InstructionSpec.warp_aligned``)
must be executed by every thread of the warp together, and ``T.cuda.cta_sync()`` by every thread
of the block; under ``if lane == 0:`` neither can be. The lowering marks such calls
(:func:`mark`); :func:`divergent_operations` finds the marked calls that run under a lane-dependent
condition of the lowered kernel, after a loop bound or a branch that differs between lanes, or
after a ``return``/``break``/``continue`` that some lanes take.

Which values differ between lanes is a small, flow-insensitive analysis: the lane index and the
thread index vary, and so does anything computed from them or assigned under a condition that
varies, except a thread index divided by a multiple of 32 (the warp index) or compared against a
multiple of 32 (whole warps on each side). A store ``x[i] = v`` assigns ``x`` alone (not the
names in its index), and a store into memory every lane sees (a shared buffer, a tensor
parameter) assigns nothing: a warp's load of one address gives every lane the same value, so
such memory read at a lane-independent index is lane-independent whoever wrote it (a thread's
local array, by contrast, differs by lane after a store under a lane-dependent condition).
Being flow-insensitive, it follows names, not program order: a name assigned under a
lane-dependent condition anywhere (in a producer warp's ``if tid == 0:``, say) differs by lane
wherever it is read, so a warning whose condition depends on such an assignment names it
(:func:`cause_of`).
``threadIdx.y``/``.z`` are taken as uniform across a warp, which holds when ``blockDim.x`` is a
multiple of 32. A condition this analysis cannot see (a runtime value that happens to differ) is
not reported: the check finds what is statically visible.
"""

from __future__ import annotations

import ast

from .emit import CUDA
from .positions import Origin, origin_of

LANE = "lane"  # differs between the lanes of a warp
THREAD = "thread"  # a thread index: a run of 32 consecutive values per warp

_LOOP_EXITS = (ast.Break, ast.Continue)


def mark(call: ast.Call, rule: str) -> ast.Call:
    """Mark a lowered call as warp-synchronous; ``rule`` says what it requires."""
    call._jt_sync_rule = rule
    return call


def divergent_operations(
    function: ast.FunctionDef,
) -> list[tuple[Origin, str, Origin, tuple[str, Origin, Origin] | None]]:
    """``(where, rule, condition, cause)`` for each marked call that runs under a lane-dependent
    condition; ``cause`` is :func:`cause_of` the condition."""
    kinds: dict[str, str | None] = {}
    seen_by_all = _memory_every_lane_sees(function)
    while True:  # name kinds, to a fixed point (conditions depend on them and they on conditions)
        before = dict(kinds)
        collector = _Walker(kinds, origin_of(function), seen_by_all, collect=True)
        collector.block(function.body, None)
        if kinds == before:
            break
    walker = _Walker(kinds, origin_of(function), seen_by_all, collect=False)
    walker.block(function.body, None)
    return [
        (where, rule, condition, cause_of(node, kinds, collector.under, collector.sources))
        for where, rule, (condition, node) in walker.found
    ]


def _memory_every_lane_sees(function: ast.FunctionDef) -> frozenset[str]:
    """The names of the lowered kernel that stand for memory all its threads share: its
    parameters (the tensors; scalars are never stored into) and its shared buffers (assigned
    from the lowering's ``__jt_smem_*`` views)."""
    names = {a.arg for a in function.args.args}
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id.startswith("__jt_smem_")
        ):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def cause_of(
    node: ast.expr, kinds: dict, under: dict, sources: dict
) -> tuple[str, Origin, Origin] | None:
    """``(name, assignment, condition)``: the nearest name the lane-dependent expression ``node``
    reads, directly or through the names it was computed from, that is lane-dependent because
    an assignment to it runs under a lane-dependent condition; None where the dependence comes
    from the lane or thread index alone."""
    seen: set[str] = set()
    queue = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and kinds.get(n.id)]
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in under:
            return (name, *under[name])
        queue += sorted(sources.get(name, ()))
    return None


class _Walker:
    """One pass over the lowered kernel, tracking the lane-dependent condition each statement
    runs under: collecting the kind of each assigned name (a value assigned under such a
    condition differs between lanes), or finding marked calls under one."""

    def __init__(self, kinds: dict, origin: Origin, seen_by_all: frozenset, collect: bool):
        self.kinds = kinds
        self.origin = origin
        self.seen_by_all = seen_by_all
        self.collect = collect
        self.found: list[tuple[Origin, str, tuple[Origin, ast.expr]]] = []
        # name -> (its first assignment under a lane-dependent condition, that condition)
        self.under: dict[str, tuple[Origin, Origin]] = {}
        self.sources: dict[str, set[str]] = {}  # name -> the lane-dependent names it is made of

    def block(self, statements: list, condition: Origin | None) -> tuple:
        """Walk ``statements`` under ``condition`` (the lane-dependent condition they run under
        and its expression, or None); returns the conditions under which some lanes returned and
        left the loop."""
        returned = left_loop = None
        for statement in statements:
            active = condition or returned or left_loop
            origin = origin_of(statement) or self.origin
            if isinstance(statement, ast.Return):
                returned = returned or active
            elif isinstance(statement, _LOOP_EXITS):
                left_loop = left_loop or active
            elif isinstance(statement, ast.If):
                self.scan(statement.test, active, origin)
                inner = active or self.condition(statement.test, origin)
                for body in (statement.body, statement.orelse):
                    ret, loop = self.block(body, inner)
                    returned, left_loop = returned or ret, left_loop or loop
            elif isinstance(statement, (ast.For, ast.While)):
                head = statement.iter if isinstance(statement, ast.For) else statement.test
                self.scan(head, active, origin)
                inner = active or self.condition(head, origin)
                if isinstance(statement, ast.For):
                    self.assign(statement.target, head, inner, origin)
                ret, _ = self.block(statement.body, inner)
                returned = returned or ret
            else:
                self.scan(statement, active, origin)
                for target, value in _assignments(statement):
                    self.assign(target, value, active, origin)
        return returned, left_loop

    def assign(self, target: ast.expr, value: ast.expr, condition, origin: Origin) -> None:
        if not self.collect:
            return
        kind = LANE if condition is not None else kind_of(value, self.kinds)
        read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name) and self.kinds.get(n.id)}
        for name in self.assigned(target):
            self.kinds[name] = _join(self.kinds.get(name), kind, name in self.kinds)
            if condition is not None:
                self.under.setdefault(name, (origin, condition[0]))
            self.sources.setdefault(name, set()).update(read - {name})

    def assigned(self, target: ast.expr) -> list[str]:
        """The names a store into ``target`` changes: a name, the names of a tuple, the array
        of a subscript unless every lane sees its memory."""
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [name for element in target.elts for name in self.assigned(element)]
        if isinstance(target, ast.Starred):
            return self.assigned(target.value)
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Name) and target.id not in self.seen_by_all:
            return [target.id]
        return []

    def condition(self, node: ast.expr, origin: Origin) -> tuple[Origin, ast.expr] | None:
        return ((origin_of(node) or origin), node) if kind_of(node, self.kinds) else None

    def scan(self, node: ast.AST, condition: Origin | None, origin: Origin) -> None:
        if condition is None or self.collect:
            return
        for sub in ast.walk(node):
            rule = getattr(sub, "_jt_sync_rule", None)
            if rule is not None:
                self.found.append((origin_of(sub) or origin, rule, condition))


def _assignments(statement: ast.stmt) -> list[tuple[ast.expr, ast.expr]]:
    if isinstance(statement, ast.Assign):
        return [(target, statement.value) for target in statement.targets]
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and statement.value is not None:
        return [(statement.target, statement.value)]
    return []


def _join(old: str | None, new: str | None, seen: bool) -> str | None:
    if not seen:
        return new
    if old == new:
        return old
    return LANE if (old or new) else None


def kind_of(node: ast.AST, kinds: dict) -> str | None:
    """LANE, THREAD or None (the same in every lane of a warp) for a lowered expression."""
    special = _special_register(node)
    if special is not None:
        return {"laneid": LANE, "x": THREAD}.get(special)
    if isinstance(node, ast.Name):
        return kinds.get(node.id)
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.BinOp):
        return _binop_kind(node, kinds)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left = kind_of(node.left, kinds)
        right = node.comparators[0]
        if left == THREAD and kind_of(right, kinds) is None and _warp_boundary(node.ops[0], right):
            return None
    children = [
        kind_of(child, kinds) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)
    ]
    return LANE if any(children) else None


def _binop_kind(node: ast.BinOp, kinds: dict) -> str | None:
    left, right = kind_of(node.left, kinds), kind_of(node.right, kinds)
    if not (left or right):
        return None
    constant = node.right.value if isinstance(node.right, ast.Constant) else None
    if left == THREAD and right is None:
        if isinstance(node.op, ast.FloorDiv) and _multiple_of_32(constant):
            return None
        if isinstance(node.op, ast.RShift) and isinstance(constant, int) and constant >= 5:
            return None
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return THREAD  # a uniform offset: threadIdx.y * blockDim.x and the like
    if right == THREAD and left is None and isinstance(node.op, ast.Add):
        return THREAD
    return LANE


def _warp_boundary(op: ast.cmpop, right: ast.expr) -> bool:
    """``tid < 32k`` and friends: whole warps fall on each side of the comparison."""
    if not isinstance(right, ast.Constant) or not isinstance(right.value, int):
        return False
    k = right.value
    if isinstance(op, (ast.Lt, ast.GtE)):
        return _multiple_of_32(k)
    return isinstance(op, (ast.LtE, ast.Gt)) and _multiple_of_32(k + 1)


def _multiple_of_32(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value % 32 == 0


def _special_register(node: ast.AST) -> str | None:
    """``laneid`` for ``__jt_cuda.laneid``, the axis for ``__jt_cuda.threadIdx.<axis>``."""
    if not isinstance(node, ast.Attribute):
        return None
    base = node.value
    if isinstance(base, ast.Name) and base.id == CUDA and node.attr == "laneid":
        return "laneid"
    if (
        isinstance(base, ast.Attribute)
        and base.attr == "threadIdx"
        and isinstance(base.value, ast.Name)
        and base.value.id == CUDA
    ):
        return node.attr
    return None
