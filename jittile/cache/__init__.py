"""The compiled-kernel cache: keys, the disk store, and the process-wide store the kernels share.

Each kernel object keeps its own in-memory entries; this package is the disk side shared by processes.
It imports only the standard library (no numba), so the ``jittile cache`` commands start fast and run
where no CUDA toolchain is installed.
"""

from __future__ import annotations

import os
import threading

from .keys import differing_components, explain_miss, make_key
from .select import selected, selects
from .store import (
    Damaged,
    DiskStore,
    Entry,
    debug_enabled,
    disk_cache_requested,
    log,
    parse_size,
    resolve_directory,
)

__all__ = [
    "Damaged",
    "DiskStore",
    "Entry",
    "clear",
    "debug_enabled",
    "default_store",
    "differing_components",
    "entries",
    "explain_miss",
    "log",
    "make_key",
    "parse_size",
    "prune",
]

_lock = threading.Lock()
_store: DiskStore | None = None
_store_config: tuple | None = None


def default_store() -> DiskStore:
    """This process's store; made anew when ``JITTILE_CACHE_DIR`` or ``JITTILE_CACHE`` changes."""
    global _store, _store_config
    config = (resolve_directory(os.environ.get("JITTILE_CACHE_DIR")), disk_cache_requested())
    with _lock:
        if _store is None or config != _store_config:
            _store, _store_config = DiskStore(), config
        return _store


def entries(kernel: str | None = None) -> list[Entry]:
    """Disk entries, most recently used first; ``kernel`` (a name, qualified name, or
    ``FILE.py:NAME``) keeps that kernel's."""
    return selected(default_store().entries(), kernel)


def clear(kernel: str | None = None) -> int:
    """Remove every disk entry (damaged ones included), or only ``kernel``'s (a name, qualified
    name, or ``FILE.py:NAME``); returns how many went."""
    chosen = None if kernel is None else (lambda metadata: selects(kernel, metadata))
    return default_store().clear(chosen).removed


def prune(max_size: int | str) -> list[Entry | Damaged]:
    """Remove damaged entries, then least recently used ones until the disk cache holds at most
    ``max_size`` (``"500M"``); returns what went."""
    return default_store().prune(parse_size(max_size))
