"""The autotuner's disk records: which config won for a kernel, key values and device.

Layout: ``<cache dir>/tunings/<sha256>.json``, one file per (kernel code, its configs, key names,
key values, device name), the file name being the SHA-256 of those. A record holds them in the
clear (``kernel``, ``qualname``, ``source_file``, ``key``, ``key_values``, ``device``,
``configs``), the winner (``best``, an index into ``configs``), the median milliseconds of each
timed config and why the others were dropped, where the tuning's time went (``seconds``:
compiling, the worker processes it used, the configs it compiled itself, what dead workers
last wrote, each config's compile seconds, and the host seconds timing each config took), and
``created``.

Guarantees: a record is written whole to a temporary file and renamed into place, so readers see
a complete record or none; a record that does not parse, or whose fields do not say what its name
says (an edited config list, another kernel), is ignored and rewritten by the next tuning. Only
JSON is read: loading a record executes nothing. ``JITTILE_CACHE=0`` turns the records off with
the rest of the disk cache.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from .store import replace_file, side_folder

FOLDER = "tunings"
FORMAT_VERSION = 1


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def record_name(identity: dict) -> str:
    """The file name of the record of ``identity`` (kernel digest, configs, key, values, device)."""
    return hashlib.sha256(_canonical(identity).encode()).hexdigest() + ".json"


def folder() -> Path | None:
    """Where records live; None when the disk cache is off or its directory is unusable."""
    return side_folder(FOLDER)


def load(identity: dict) -> dict | None:
    """The record of ``identity``, or None (absent, unreadable, or not about ``identity``)."""
    where = folder()
    if where is None:
        return None
    try:
        record = json.loads((where / record_name(identity)).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("identity") != identity:
        return None
    best = record.get("best")
    if not isinstance(best, int) or not 0 <= best < len(identity["configs"]):
        return None
    return record


def save(
    identity: dict, best: int, timings: dict, dropped: dict, seconds: dict | None = None
) -> Path | None:
    """Write the record of a tuning (atomically); None where the cache cannot be written.
    ``seconds``: where the tuning's time went (compiling, and timing each config)."""
    where = folder()
    if where is None:
        return None
    record = {
        "format_version": FORMAT_VERSION,
        "identity": identity,
        "best": best,
        "timings_ms": timings,
        "dropped": dropped,
        "seconds": seconds or {},
        "created": time.time(),
    }
    target = where / record_name(identity)
    try:
        replace_file(target, json.dumps(record, indent=1, sort_keys=True))
        return target
    except OSError:
        return None


def records() -> list[dict]:
    """Every readable record, newest first (for ``jittile cache``), each with its ``path``."""
    where = folder()
    if where is None or not where.is_dir():
        return []
    found = []
    for path in where.glob("*.json"):
        try:
            record = json.loads(path.read_text())
            identity = record["identity"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(identity, dict) and path.name == record_name(identity):
            found.append({**record, "path": str(path)})
    return sorted(found, key=lambda r: r.get("created", 0), reverse=True)


def clear() -> int:
    """Remove every record; returns how many went."""
    where = folder()
    if where is None or not where.is_dir():
        return 0
    removed = 0
    for path in where.glob("*.json"):
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    return removed
