"""Marker objects that the kernel language is made of.

Outside a kernel these objects do nothing but explain themselves: the frontend recognises them by
identity after resolving names through the kernel function's globals, so aliases work.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Sequence
from types import SimpleNamespace

from ..errors import ContractError, JittileError


class Intrinsic:
    """A function of the kernel language such as ``T.cuda.cta_sync``; only meaningful inside a
    kernel, where the frontend checks each call against its signature and lowers it.

    The signature and docstring are those of the declaration it is made from (see
    :func:`intrinsic`), so ``inspect.signature`` and ``help()`` show them. Like a plain function
    it is a non-data descriptor that never binds, which is also what makes ``help()`` document it
    as a function rather than as an instance of this class.
    """

    def __init__(self, qualname: str, declaration: Callable):
        self.qualname = qualname
        self.__name__ = declaration.__name__
        self.__qualname__ = qualname
        self.__doc__ = inspect.getdoc(declaration)
        self.__signature__ = inspect.signature(declaration, eval_str=True)

    def __get__(self, instance, owner=None) -> Intrinsic:
        return self

    def __call__(self, *args, **kwargs):
        raise JittileError(f"{self.qualname}() can only be used inside a @jittile.kernel function")

    def __repr__(self) -> str:
        return f"<jittile intrinsic {self.qualname}{self.__signature__}>"


def intrinsic(qualname: str) -> Callable[[Callable], Intrinsic]:
    """Decorator: the ``def`` below declares an intrinsic's parameters, return type and docstring;
    its body is never run (the frontend lowers each call)."""

    def declare(declaration: Callable) -> Intrinsic:
        return Intrinsic(qualname, declaration)

    return declare


class Namespace(SimpleNamespace):
    """A namespace of the kernel language (``T``, ``T.cuda.tile``): ``dir()`` lists its public
    names and ``help()`` shows each one's signature and summary."""

    def __init__(self, qualname: str, summary: str, **members):
        super().__init__(**members)
        object.__setattr__(self, "_qualname", qualname)
        object.__setattr__(self, "__doc__", summary + "\n\n" + describe_members(qualname, members))

    def __dir__(self) -> list[str]:
        return sorted(name for name in vars(self) if not name.startswith("_"))

    def __repr__(self) -> str:
        return f"<jittile kernel language {self._qualname}>"


def call_signature(obj) -> inspect.Signature | None:
    """The signature a kernel-language callable is checked against, or None where it has none
    (``T.ptx`` instructions: their operands depend on the opcode)."""
    if isinstance(obj, PtxInstruction) or not callable(obj):
        return None
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def summary(obj) -> str:
    """The first paragraph of ``obj``'s documentation, on one line."""
    doc = (inspect.getdoc(obj) or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def describe_members(qualname: str, members: dict) -> str:
    """Per member: its qualified name and signature, then its summary, indented."""
    lines = []
    for name in sorted(members):
        obj = members[name]
        signature = call_signature(obj)
        lines.append(f"{qualname}.{name}{signature if signature is not None else ''}")
        lines += textwrap.wrap(summary(obj), 96, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines)


def _attribute_word(word: str) -> str:
    """One attribute name in PTX spelling: a single trailing ``_`` drops (it only dodges Python
    keywords such as ``async``), then every ``__`` becomes ``::``."""
    if word.endswith("_") and not word.endswith("__"):
        word = word[:-1]
    return word.replace("__", "::")


def opcode_from_attributes(parts: Sequence[str]) -> str:
    """The PTX opcode spelled by the attribute chain ``T.ptx.<parts[0]>.<parts[1]>...``.

    ``["fence", "proxy", "async_", "shared__cta"]`` -> ``"fence.proxy.async.shared::cta"``.
    """
    if not parts:
        raise ContractError(
            "T.ptx needs an opcode, e.g. T.ptx.fence.proxy.async_()", parameter="opcode"
        )
    return ".".join(_attribute_word(part) for part in parts)


class _InstructionDoc:
    """``__doc__`` of :class:`PtxInstruction`: the class's text on the class, and on a tile
    opcode (``help(T.ptx["tcgen05.cp..."])``) its family's operands, parameters and an example,
    looked up only when asked for."""

    def __init__(self, text: str):
        self.text = text

    def __get__(self, instance, owner=None) -> str:
        if instance is None or not (instance._parts or instance._text):
            return self.text
        from ..patterns.help import opcode_help

        return (
            opcode_help(instance.opcode) or f"{instance!r}: a raw PTX instruction.\n\n{self.text}"
        )


class PtxInstruction:
    __doc__ = _InstructionDoc(
        """``T.ptx.a.b.c(...)`` or ``T.ptx["a.b.c"](...)``: a raw PTX instruction by name (or, as
    the first argument of ``T.cuda.tile.apply``, a tile opcode: ``help(T.ptx[opcode])`` and
    ``T.ptx[opcode].parameters`` describe its family). In the attribute spelling a trailing ``_``
    drops (``async_`` -> ``async``) and ``__`` becomes ``::`` (``shared__cta`` ->
    ``shared::cta``)."""
    )

    def __init__(self, parts: tuple[str, ...] = (), text: str | None = None):
        self._parts = parts
        self._text = text

    @property
    def opcode(self) -> str:
        if self._text is not None:
            return self._text
        return opcode_from_attributes(self._parts)

    @property
    def parameters(self) -> tuple:
        """The keyword parameters of this tile opcode's family (``name``, ``kind``: static,
        runtime or either, ``doc``); a JittileError for an opcode no family claims."""
        from ..patterns.registry import pattern_for

        pattern = pattern_for(self.opcode)
        if pattern is None:
            raise JittileError(
                f"{self!r} is not a tile opcode (no T.cuda.tile.apply family "
                f"claims it), so it has no tile parameters"
            )
        return pattern.parameters

    def __getattr__(self, name: str) -> PtxInstruction:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if self._text is not None:
            raise JittileError(f"T.ptx[{self._text!r}] cannot be extended with .{name}")
        return PtxInstruction(self._parts + (name,))

    def __getitem__(self, text: str) -> PtxInstruction:
        if self._parts or self._text is not None:
            raise JittileError("T.ptx[...] takes the whole opcode: write T.ptx['a.b.c']")
        if not isinstance(text, str):
            raise JittileError(f"T.ptx[...] takes an opcode string, got {text!r}")
        return PtxInstruction(text=text)

    def __call__(self, *args, **kwargs):
        raise JittileError(
            f"PTX instruction {self.opcode!r} can only be issued inside a @jittile.kernel"
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, PtxInstruction) and (self._parts, self._text) == (
            other._parts,
            other._text,
        )

    def __hash__(self) -> int:
        return hash((self._parts, self._text))

    def __repr__(self) -> str:
        return f"T.ptx[{self.opcode!r}]" if (self._parts or self._text) else "T.ptx"


class DeviceFunction:
    """A ``@jittile.func`` helper, written in the kernel language like a kernel body. A kernel that
    calls it (as a statement, or as the whole right side of an assignment) gets its body inlined,
    its names renamed apart; its code and the globals it reads enter the kernel's cache key."""

    __jittile_helper__ = True

    def __init__(self, pyfunc, load_source: Callable):
        """``load_source`` is the frontend's source reader, handed in by ``jittile.func`` so that
        the kernel language does not import the frontend."""
        self.pyfunc = pyfunc
        self._load_source = load_source
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__module__ = pyfunc.__module__
        self.__doc__ = pyfunc.__doc__
        self._source = None
        # A contract on the compile-time values of the arguments ({parameter: value}, RUNTIME
        # for runtime ones): returns (parameter, problem) or None; checked at every call.
        self.requires: Callable[[dict], tuple[str, str] | None] | None = None

    @property
    def source(self):
        """The helper's parsed definition (a ``KernelSource``), read once."""
        if self._source is None:
            self._source = self._load_source(self.pyfunc)
        return self._source

    def reread(self) -> None:
        """Read the definition again on next use: a parsed source holds the closure's values."""
        self._source = None

    def __call__(self, *args, **kwargs):
        raise JittileError(
            f"{self.__qualname__} is a @jittile.func helper: call it inside a "
            f"@jittile.kernel function"
        )

    def __repr__(self) -> str:
        return f"<jittile.func {self.__qualname__}>"
