"""Whether the module globals and closure variables that a kernel's code (its body and its
``@jittile.func`` helpers) reads have changed since it was compiled. A kernel's in-memory
specializations and prepared launches hold only while they have not (issue #13).

The disk key records those reads as text (jittile/cache/components.py); making texts on every
launch would cost too much, so a watch keeps the objects read and compares identities, in C: one
``operator.attrgetter`` call reads them all, ``map(operator.is_, ...)`` compares. Only where an
identity differs are texts compared, so rebinding a name to an equal value (a new ``(8, 8)``)
keeps the compiled code. A dict, list or set whose keys and items are all immutable keeps a
shallow snapshot of them: it is unchanged in place while its items are those very objects, in
order (``map(operator.is_, ...)``, in C; ``==`` would take ``1`` for ``True`` and ``0.0`` for
``-0.0``, whose texts differ). Other values that can change in place (a list of lists, arrays,
plain objects) are compared by text on every check. Attributes of the kernel language (``T.cuda.lane_id``) and of
jittile's modules are jittile's code, not watched.
"""

from __future__ import annotations

import dataclasses
import operator
import types

from .cache.components import terminal_reads, value_text
from .language import T
from .language.markers import DeviceFunction

_IMMUTABLE = (bool, int, float, complex, str, bytes, type(None))
_is = operator.is_


class _Scope:
    """Attribute access to a globals dict (this object's ``__dict__`` is that very dict), so that
    ``operator.attrgetter`` reads module globals as they are now."""

    def __init__(self, namespace: dict):
        self.__dict__ = namespace


def _opaque(value) -> bool:
    """The kernel language and jittile's modules: their attributes are jittile's code."""
    return value is T or (
        isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == "jittile"
    )


def _immutable(value) -> bool:
    """Values that cannot change while keeping their identity."""
    if isinstance(value, _IMMUTABLE):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    if (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and value.__dataclass_params__.frozen
    ):
        return all(_immutable(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def _snapshot(value) -> tuple | None:
    """The items of a dict, list or set (exact types) whose keys and items are all immutable, as
    they are now (a dict's keys and values); None for anything else."""
    kind = type(value)
    if kind is dict:
        if all(map(_immutable, value)) and all(map(_immutable, value.values())):
            return tuple(value), tuple(value.values())
    elif (kind is list or kind is set) and all(map(_immutable, value)):
        return (tuple(value),)
    return None


def _same_items(value, snapshot: tuple) -> bool:
    """Whether ``value`` holds the very objects of ``snapshot`` (:func:`_snapshot`), in order."""
    if len(value) != len(snapshot[0]):
        return False
    if len(snapshot) == 2:
        return all(map(_is, value, snapshot[0])) and all(map(_is, value.values(), snapshot[1]))
    return all(map(_is, value, snapshot[0]))


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # objects that compare elementwise, or not at all
        return False


def _reader(names: list[str]):
    """A function of the scope namespace returning the values of ``names`` as a tuple."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        read_one = operator.attrgetter(names[0])
        return lambda scope: (read_one(scope),)
    return lambda scope: ()


class GlobalsWatch:
    """The values a kernel's code reads from module globals and closures, as they were when the
    watch was made (before the kernel is keyed and compiled)."""

    def __init__(self, source):
        """``source``: the kernel's KernelSource; the helpers it calls are found through it."""
        scopes: dict[int, str] = {}  # id of a globals dict or closure cell -> its name in _scope
        objects: dict[str, object] = {}
        names: dict[str, None] = {}  # attribute paths into _scope; helpers of a module share
        self.helpers: list[DeviceFunction] = []  # their parsed sources capture closure values

        def scope_name(obj, make) -> str:
            if id(obj) not in scopes:
                scopes[id(obj)] = f"s{len(scopes)}"
                objects[scopes[id(obj)]] = make(obj)
            return scopes[id(obj)]

        pending = [source]
        while pending:
            unit = pending.pop()
            code = unit.pyfunc.__code__
            cells = dict(zip(code.co_freevars, unit.pyfunc.__closure__ or ()))
            closure = {}
            for name, cell in cells.items():
                try:
                    closure[name] = cell.cell_contents
                except ValueError:  # not bound yet
                    continue
            for chain, value in terminal_reads(unit, unit.globals, closure, _opaque):
                if chain[0] in closure:
                    path = (scope_name(cells[chain[0]], lambda c: c), "cell_contents", *chain[1:])
                else:
                    path = (scope_name(unit.globals, _Scope), *chain)
                names[".".join(path)] = None
                if isinstance(value, DeviceFunction) and value not in self.helpers:
                    self.helpers.append(value)
                    pending.append(value.source)
        self._scope = types.SimpleNamespace(**objects)
        self._read = _reader(list(names))
        values = self._read(self._scope)
        self._texts = tuple(value_text(v) for v in values)
        self._record(values)

    def _record(self, values: tuple) -> None:
        """Keep ``values`` (equal to the compiled ones) for the fast test: their identities, the
        snapshots of the containers that have one, whether any other can change in place. Made
        aside and set with ``_in_place`` up meanwhile: another thread's check then takes the text
        path, never a half-set fast test."""
        snapshots: list[tuple[int, tuple]] = []
        in_place = False
        for i, (value, text) in enumerate(zip(values, self._texts)):
            if text is None or _immutable(value):
                continue
            snapshot = _snapshot(value)
            if snapshot is None:
                in_place = True
            else:
                snapshots.append((i, snapshot))
        self._in_place = True
        self._snapshots, self._values = snapshots, values
        self._in_place = in_place

    def changed(self) -> bool:
        """Whether a value read differs from the recorded one: by identity first (and a snapshot's
        items by identity), then by text (for code, by equality)."""
        try:
            current = self._read(self._scope)
        except Exception:  # a global deleted, an attribute gone, a cell emptied
            return True
        if (
            not self._in_place
            and all(map(_is, current, self._values))
            and all(_same_items(current[i], snapshot) for i, snapshot in self._snapshots)
        ):
            return False
        for now, then, text in zip(current, self._values, self._texts):
            if text is None:
                same = value_text(now) is None and (now is then or _equal(now, then))
            else:
                same = (now is then and _immutable(now)) or value_text(now) == text
            if not same:
                return True
        self._record(current)  # equal values under new identities: the fast test holds again
        return False
