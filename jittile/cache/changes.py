"""What changed between a kernel's cache entries (``jittile cache why``): the newest entry against
the nearest entry of the same target, as differing key components and a unified diff of the
kernel's source text (recorded in each entry's metadata as ``source_text``)."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from .keys import differences, differing_components
from .store import Entry


@dataclass(frozen=True)
class Changes:
    """``newest`` against ``nearest`` (None: no other entry of its target). ``components`` holds
    ``(dotted path, nearest's value, newest's value)`` for each differing key component but the
    source; ``source_diff`` the unified diff lines of the source text (empty when the text is the
    same) or None when an entry has no recorded text."""

    newest: Entry
    nearest: Entry | None
    components: list
    source_changed: bool
    source_diff: list[str] | None


def _components(entry: Entry) -> dict:
    return entry.metadata.get("key_components", {})


def _label(entry: Entry) -> str:
    where = entry.metadata.get("source_file")
    line = entry.metadata.get("source_line")
    place = f" ({os.path.basename(str(where))}:{line})" if where else ""
    return f"{entry.qualname} {entry.key[:12]}{place}"


def source_diff(old: Entry, new: Entry) -> list[str] | None:
    """Unified diff lines from ``old``'s source text to ``new``'s; None when one has none."""
    before, after = old.metadata.get("source_text"), new.metadata.get("source_text")
    if not isinstance(before, str) or not isinstance(after, str):
        return None
    return list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), _label(old), _label(new), lineterm=""
        )
    )


def nearest(newest: Entry, others: list[Entry]) -> Entry | None:
    """The entry of ``newest``'s target with the fewest differing key components (the most
    recently created on a tie)."""
    same = [e for e in others if e.target == newest.target and e.key != newest.key]
    if not same:
        return None
    same.sort(key=lambda e: -e.created)
    return min(same, key=lambda e: len(differing_components(_components(newest), _components(e))))


def what_changed(entries: list[Entry]) -> Changes:
    """The newest (last created) of ``entries`` against its nearest entry of the same target."""
    newest = max(entries, key=lambda e: e.created)
    other = nearest(newest, entries)
    if other is None:
        return Changes(newest, None, [], False, None)
    changes = differences(_components(other), _components(newest))
    source = [c for c in changes if c[0] == "source" or c[0].startswith("source.")]
    return Changes(
        newest,
        other,
        [c for c in changes if c not in source],
        bool(source),
        source_diff(other, newest) if source else [],
    )
