"""Cache keys: a hash of the components that change the cubin, and the comparison of components.

The key is the SHA-256 of the components' canonical JSON, so two processes (or two jittile installs
sharing a cache directory) agree on it without sharing any state. Keeping the components themselves in
each entry's metadata is what lets ``jittile cache why`` and ``JITTILE_DEBUG=cache`` say *which*
component made a kernel recompile.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import JittileError

_VALUE_WIDTH = 40


class _Missing:
    """Marks a component that one side lacks."""

    def __repr__(self) -> str:
        return "<absent>"


MISSING: Any = _Missing()


def normalize(value: Any) -> Any:
    """``value`` as plain JSON data: tuples become lists, dict keys strings, other objects ``str()``.

    Objects whose only text is the default ``<X object at 0x...>`` are rejected: their text changes from
    run to run, which would make every key a miss.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    kind = type(value)
    if kind.__str__ is object.__str__ and kind.__repr__ is object.__repr__:
        raise JittileError(
            f"cache key component of type {kind.__qualname__} has no stable text form"
        )
    return str(value)


def canonical_json(components: dict[str, object]) -> str:
    """The one JSON spelling of ``components`` (sorted keys, no spaces) that the key hashes."""
    return json.dumps(
        normalize(components), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def make_key(components: dict[str, object]) -> str:
    """The cache key of ``components``: 64 hex digits of SHA-256 over their canonical JSON."""
    return hashlib.sha256(canonical_json(components).encode("utf-8")).hexdigest()


def _is_container(value: object) -> bool:
    return isinstance(value, (dict, list))


def _diff(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(dotted path, a's value, b's value)`` for each place where ``a`` and ``b`` differ.

    Dicts are descended key by key. Lists of dicts or lists (per-argument specs) are descended by index
    when both have the same length; other lists (a shape, say) are compared whole, since "shape.0"
    says less than "shape".
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(set(a) | set(b)):
            yield from _diff(
                a.get(name, MISSING), b.get(name, MISSING), f"{path}.{name}" if path else name
            )
    elif (
        isinstance(a, list)
        and isinstance(b, list)
        and len(a) == len(b)
        and any(_is_container(v) for v in a + b)
    ):
        for index, (x, y) in enumerate(zip(a, b)):
            yield from _diff(x, y, f"{path}.{index}" if path else str(index))
    elif a != b or type(a) is not type(b):
        yield path, a, b


def differences(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    """``(dotted path, a's value, b's value)`` for each component where ``a`` and ``b`` differ."""
    return list(_diff(normalize(a), normalize(b), ""))


def differing_components(a: dict, b: dict) -> list[str]:
    """Dotted paths (``"static_params.BLOCK"``, ``"target"``) of the components where ``a`` and ``b`` differ."""
    return [path for path, _, _ in _diff(normalize(a), normalize(b), "")]


def lookup(components: dict, path: str) -> Any:
    """The value at a dotted path from :func:`differing_components`; ``MISSING`` when absent."""
    return _lookup(normalize(components), path.split("."))


def _lookup(node: Any, parts: list[str]) -> Any:
    """Dict keys may themselves hold dots (the global ``cfg.TILE``): the longest key that matches wins."""
    if not parts:
        return node
    if isinstance(node, dict):
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            if name in node:
                found = _lookup(node[name], parts[end:])
                if found is not MISSING:
                    return found
        return MISSING
    if isinstance(node, list) and parts[0].isdigit() and int(parts[0]) < len(node):
        return _lookup(node[int(parts[0])], parts[1:])
    return MISSING


def describe(value: Any) -> str:
    """A short one-line rendering of a component value; long text (kernel source) shows as a digest."""
    if value is MISSING:
        return "<absent>"
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"))
    )
    if len(text) > _VALUE_WIDTH or "\n" in text:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
        return f"<{len(text)} chars, sha256 {digest}>"
    return text


def _components_of(entry: object) -> dict:
    """Key components of an :class:`~jittile.cache.store.Entry` or of a plain components dict."""
    if isinstance(entry, dict):
        return entry
    return getattr(entry, "metadata", {}).get("key_components", {})


def explain_miss(components: dict[str, object], entries: Iterable[object]) -> str:
    """One line naming what differs between ``components`` and the closest of ``entries``.

    ``entries`` are the existing entries of the *same kernel* (``kernel.cache``), as
    :class:`~jittile.cache.store.Entry` objects or components dicts; "closest" is the one with the fewest
    differing components, the most recently used on a tie.
    """
    candidates = list(entries)
    if not candidates:
        return "miss: no cached entry of this kernel yet"
    candidates.sort(key=lambda e: -float(getattr(e, "last_used", 0.0)))
    best = min(candidates, key=lambda e: len(differing_components(components, _components_of(e))))
    changes = [
        f"{path} ({describe(old)} -> {describe(new)})"
        for path, new, old in _diff(normalize(components), normalize(_components_of(best)), "")
    ]
    label = f"entry {best.key[:12]}" if hasattr(best, "key") else "the closest entry"
    if not changes:
        return f"miss: key components equal those of {label}"
    return f"miss: differs from {label} in " + ", ".join(changes)
