"""A disk memo of the facts the key reads off a function's AST: its source digest and the name
chains its body reads (``jittile/cache/components.py``).

Why: both are pure functions of the function's text, but computing them (an AST dump, walks over
every node) cost a fresh process 60-70 ms for the GEMM example's kernel and nine helpers, on a
first launch that otherwise only loads a cached cubin.

Layout: ``<cache dir>/facts/<sha256>.json``, the name being the SHA-256 of the Python version
and the function's text as written (decorators included); the file holds ``{"digest": str,
"chains": [[name, ...], ...]}``.

Guarantees: a file is written whole to a temporary file and renamed into place; one that does not
parse or has another shape is ignored, and the facts are computed and written again. Only JSON is
read. ``JITTILE_CACHE=0`` (or an unusable cache directory) turns the memo off with the rest of
the disk cache.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from .store import replace_file, side_folder

FOLDER = "facts"
Facts = tuple[str, tuple[tuple[str, ...], ...]]


def _path(text: str) -> Path | None:
    folder = side_folder(FOLDER)
    if folder is None:
        return None
    name = hashlib.sha256(f"{sys.version}\0{text}".encode()).hexdigest()
    return folder / f"{name}.json"


def load(text: str) -> Facts | None:
    """The facts kept for a function of this text, or None."""
    path = _path(text)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text())
        digest, chains = record["digest"], record["chains"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(digest, str) or not isinstance(chains, list):
        return None
    if not all(isinstance(c, list) and all(isinstance(n, str) for n in c) for c in chains):
        return None
    return digest, tuple(tuple(c) for c in chains)


def save(text: str, facts: Facts) -> None:
    """Keep ``facts`` for a function of this text (nothing where the disk cache is off or the
    directory cannot be written: the memo only saves time)."""
    path = _path(text)
    if path is None:
        return
    try:
        replace_file(path, json.dumps({"digest": facts[0], "chains": [list(c) for c in facts[1]]}))
    except OSError:
        return
