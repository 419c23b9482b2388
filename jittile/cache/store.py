"""The on-disk cache: one directory per key holding the cubin, the PTX and JSON metadata.

Layout: ``<dir>/<key[:2]>/<key>/{kernel.cubin, kernel.ptx, meta.json}``. Nothing is ever unpickled, so
loading an entry executes nothing. Every change is a rename, which POSIX makes atomic:

- a new entry is written whole into a temporary sibling directory and renamed into place, so an entry
  is visible only once complete; when several processes store the same key, the first rename wins and
  the others discard their copy;
- ``meta.json`` updates (hits, last used) go through a temporary file and ``os.replace``, so readers see
  the old or the new file, never a torn one (two racing updates may lose one hit, which is harmless);
- removal first renames the entry to a ``.trash-`` sibling, so it disappears at once, then deletes it.

Loading checks the metadata's format version and the recorded size and SHA-256 of the cubin and PTX;
an entry that fails (truncated by a crash, overwritten, written by another format) is removed with a
warning and the caller rebuilds it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import JittileError, JittileWarning
from .keys import make_key, normalize

FORMAT_VERSION = 1
CUBIN_FILE = "kernel.cubin"
PTX_FILE = "kernel.ptx"
META_FILE = "meta.json"
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
# A temporary directory untouched this long belongs to a writer that died; clear() may delete it.
_STALE_SECONDS = 3600.0
_DISABLED_VALUES = {"0", "false", "off", "no"}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# Metadata fields the caller must give; the store adds format_version, key, created, last_used, hits
# and the cubin/PTX sizes and digests.
REQUIRED_METADATA = ("name", "target", "key_components")


def parse_size(text: str | int) -> int:
    """Bytes in a size like ``"500M"``, ``"1.5G"``, ``"64KiB"`` or ``"4096"``.

    Suffixes K, M, G, T are binary (powers of 1024, like ``du -h``), with or without a trailing
    ``B``/``iB``; case is ignored.
    """
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise JittileError(f"invalid size {text!r}: expected a number with an optional K, M, G or T suffix")
    number, unit = match.groups()
    return int(float(number) * _SIZE_UNITS[unit.lower()])


def default_directory() -> Path:
    """``$JITTILE_CACHE_DIR``, else ``~/.cache/jittile``."""
    configured = os.environ.get("JITTILE_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path("~/.cache/jittile").expanduser()


def disk_cache_requested() -> bool:
    """False when ``JITTILE_CACHE`` turns the disk cache off (``0``, ``false``, ``off``, ``no``)."""
    return os.environ.get("JITTILE_CACHE", "1").strip().lower() not in _DISABLED_VALUES


@dataclass(frozen=True)
class Entry:
    """One cached compilation as found on disk; ``metadata`` is the whole ``meta.json``.

    The dict fields take no part in equality, so entries stay hashable (usable in sets).
    """

    key: str
    kernel: str
    qualname: str
    target: str
    static_params: dict = field(compare=False)
    size: int
    created: float
    last_used: float
    hits: int
    path: Path
    metadata: dict = field(compare=False)
    # The files' bytes as verified by DiskStore.load: the caller uses exactly what was checked.
    verified: dict = field(default_factory=dict, compare=False, repr=False)

    def cubin(self) -> bytes:
        if CUBIN_FILE in self.verified:
            return self.verified[CUBIN_FILE]
        return (self.path / CUBIN_FILE).read_bytes()

    def ptx(self) -> str:
        if PTX_FILE in self.verified:
            return self.verified[PTX_FILE].decode("utf-8")
        return (self.path / PTX_FILE).read_text(encoding="utf-8")

    @classmethod
    def from_metadata(cls, path: Path, meta: dict, size: int) -> "Entry":
        components = meta.get("key_components", {})
        return cls(
            key=meta["key"], kernel=meta["name"], qualname=meta.get("qualname", meta["name"]),
            target=meta["target"],
            static_params=meta.get("static_params", components.get("static_params", {})),
            size=size, created=float(meta["created"]),
            last_used=float(meta["last_used"]), hits=int(meta["hits"]), path=path, metadata=meta)


class _Broken(Exception):
    """An entry on disk that must not be used; the message says why."""


def _directory_size(path: Path) -> int:
    total = 0
    for child in path.iterdir():
        try:
            total += child.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _write_file(path: Path, data: bytes) -> None:
    """Write and flush to disk, so a crash cannot leave a renamed-but-empty file behind."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _encode_meta(meta: dict) -> bytes:
    return json.dumps(meta, sort_keys=True, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"


class DiskStore:
    """The cache directory of one process; every method is safe against other processes using it."""

    def __init__(self, directory: Path | None = None):
        self.directory = Path(directory).expanduser() if directory is not None else default_directory()
        self._disabled_reason: str | None = None if disk_cache_requested() else "JITTILE_CACHE=0"
        self._checked = self._disabled_reason is not None

    # -- availability ------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Whether entries are read and written; checked once, with one warning when it cannot be."""
        if not self._checked:
            self._checked = True
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                handle, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
                os.close(handle)
                os.unlink(probe)
            except OSError as exc:
                self._disable(f"cannot write the cache directory {self.directory} ({exc.strerror or exc})")
        return self._disabled_reason is None

    @property
    def disabled_reason(self) -> str | None:
        """Why the disk cache is off (``None`` while it is on)."""
        return None if self.enabled else self._disabled_reason

    def _disable(self, reason: str) -> None:
        self._disabled_reason = reason
        self._checked = True
        warnings.warn(f"jittile cache: {reason}; compiled kernels are cached in memory only",
                      JittileWarning, stacklevel=3)

    def entry_dir(self, key: str) -> Path:
        """Where the entry of ``key`` lives (whether or not it exists)."""
        return self.directory / key[:2] / key

    # -- reading -----------------------------------------------------------------------------------

    def _read(self, key: str, *, verify: bool) -> Entry:
        """The entry of ``key``; ``FileNotFoundError`` when there is none, ``_Broken`` when unusable."""
        path = self.entry_dir(key)
        try:
            raw = (path / META_FILE).read_bytes()
        except FileNotFoundError:
            if path.is_dir():
                raise _Broken(f"{META_FILE} is missing") from None
            raise
        try:
            meta = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise _Broken(f"{META_FILE} is not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise _Broken(f"{META_FILE} is not a JSON object")
        if meta.get("format_version") != FORMAT_VERSION:
            raise _Broken(f"format version {meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        if meta.get("key") != key:
            raise _Broken(f"{META_FILE} records key {meta.get('key')!r}")
        verified = {}
        if verify:
            for name, part in ((CUBIN_FILE, "cubin"), (PTX_FILE, "ptx")):
                try:
                    data = (path / name).read_bytes()
                except FileNotFoundError:
                    if not path.is_dir():
                        raise  # removed by another process while we read: a plain miss
                    raise _Broken(f"{name} is missing") from None
                if len(data) != meta.get(f"{part}_size"):
                    raise _Broken(f"{name} has {len(data)} bytes, expected {meta.get(f'{part}_size')}")
                if hashlib.sha256(data).hexdigest() != meta.get(f"{part}_sha256"):
                    raise _Broken(f"{name} does not match its recorded SHA-256")
                verified[name] = data
            try:
                verified[PTX_FILE].decode("utf-8")
            except UnicodeDecodeError:
                raise _Broken(f"{PTX_FILE} is not UTF-8 text") from None
        try:
            return replace(Entry.from_metadata(path, meta, _directory_size(path)), verified=verified)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _Broken(f"{META_FILE} lacks or garbles a field ({exc!r})") from None

    def _discard_broken(self, key: str, reason: object) -> None:
        warnings.warn(f"jittile cache: ignoring broken entry {key[:12]} in {self.directory}: {reason}; "
                      "it will be rebuilt", JittileWarning, stacklevel=3)
        self.remove(key)

    def load(self, key: str) -> Entry | None:
        """The verified entry of ``key`` with its hit counted, or ``None`` (miss, broken, or disabled)."""
        if not self.enabled:
            return None
        try:
            entry = self._read(key, verify=True)
        except FileNotFoundError:
            return None
        except (_Broken, OSError) as reason:
            self._discard_broken(key, reason)
            return None
        meta = dict(entry.metadata, hits=entry.hits + 1, last_used=time.time())
        self._replace_meta(entry.path, meta)
        return replace(entry, hits=meta["hits"], last_used=meta["last_used"], metadata=meta)

    def _replace_meta(self, path: Path, meta: dict) -> None:
        """Atomically swap in new metadata; a vanished entry (removed meanwhile) is left alone."""
        try:
            handle, temp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".json", dir=path)
        except OSError:
            return
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(_encode_meta(meta))
            os.replace(temp, path / META_FILE)
        except OSError:
            Path(temp).unlink(missing_ok=True)

    def _shard_children(self) -> Iterator[Path]:
        """Everything inside the ``<key[:2]>`` shard directories: entries, temporaries, trash."""
        if not self.directory.is_dir():
            return
        for shard in self.directory.iterdir():
            if len(shard.name) == 2 and shard.is_dir():
                yield from shard.iterdir()

    def _scan(self) -> list[tuple[str, Path]]:
        """Every ``(key, directory)`` that looks like an entry, complete or not."""
        return [(path.name, path) for path in self._shard_children()
                if _KEY_RE.match(path.name) and path.name[:2] == path.parent.name]

    def entries(self) -> list[Entry]:
        """Every readable entry, most recently used first (files are not hashed here; ``load`` does)."""
        if not self.enabled:
            return []
        found = []
        for key, _ in self._scan():
            try:
                found.append(self._read(key, verify=False))
            except (OSError, _Broken):
                continue
        return sorted(found, key=lambda e: e.last_used, reverse=True)

    def find(self, prefix: str) -> Entry:
        """The one entry whose key starts with ``prefix``."""
        prefix = prefix.strip().lower()
        matches = [e for e in self.entries() if e.key.startswith(prefix)] if prefix else []
        if not matches:
            raise JittileError(f"no cache entry with key prefix {prefix!r} in {self.directory}")
        if len(matches) > 1:
            keys = ", ".join(sorted(e.key[:16] for e in matches))
            raise JittileError(f"key prefix {prefix!r} is ambiguous: {len(matches)} entries match ({keys})")
        return matches[0]

    # -- writing -----------------------------------------------------------------------------------

    def store(self, key: str, cubin: bytes, ptx: str, metadata: dict[str, Any]) -> Entry | None:
        """Write the entry of ``key`` and return it; ``None`` when the disk cache is off.

        When another process stored the same key first, its (verified) entry is kept and returned.
        """
        missing = [name for name in REQUIRED_METADATA if name not in metadata]
        if missing:
            raise JittileError(f"cache metadata lacks {', '.join(missing)}")
        if make_key(metadata["key_components"]) != key:
            raise JittileError(f"cache key {key[:12]} is not the hash of the metadata's key_components")
        if not self.enabled:
            return None
        ptx_bytes = ptx.encode("utf-8")
        now = time.time()
        meta = dict(normalize(metadata), format_version=FORMAT_VERSION, key=key, created=now,
                    last_used=now, hits=0, cubin_size=len(cubin),
                    cubin_sha256=hashlib.sha256(cubin).hexdigest(), ptx_size=len(ptx_bytes),
                    ptx_sha256=hashlib.sha256(ptx_bytes).hexdigest())
        meta_bytes = _encode_meta(meta)
        target = self.entry_dir(key)
        temp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{key[:16]}-", dir=target.parent))
            _write_file(temp / CUBIN_FILE, cubin)
            _write_file(temp / PTX_FILE, ptx_bytes)
            _write_file(temp / META_FILE, meta_bytes)
            if self._publish(temp, target):
                return Entry.from_metadata(target, meta, len(cubin) + len(ptx_bytes) + len(meta_bytes))
        except OSError as exc:
            self._disable(f"cannot write cache entry {key[:12]} in {self.directory} ({exc.strerror or exc})")
            return None
        finally:
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        return self._existing(key)

    @staticmethod
    def _publish(temp: Path, target: Path) -> bool:
        """Rename ``temp`` into place; False when another writer's entry is already there."""
        try:
            os.rename(temp, target)
            return True
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                return False
            raise

    def _existing(self, key: str) -> Entry | None:
        """The entry another writer stored first; a broken one is removed (the next store rebuilds)."""
        try:
            return self._read(key, verify=True)
        except FileNotFoundError:
            return None
        except _Broken as reason:
            self._discard_broken(key, reason)
            return None

    # -- removal -----------------------------------------------------------------------------------

    def remove(self, key: str) -> bool:
        """Remove the entry of ``key``; False when there was none."""
        path = self.entry_dir(key)
        if not path.is_dir():
            return False
        try:
            trash = Path(tempfile.mkdtemp(prefix=f"{_TRASH_PREFIX}{key[:16]}-", dir=path.parent))
        except OSError:
            return False
        try:
            os.rename(path, trash / key)
        except OSError:
            shutil.rmtree(trash, ignore_errors=True)
            return False
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def clear(self) -> int:
        """Remove every entry (and leftovers of crashed writers); returns how many entries went."""
        if not self.enabled:
            return 0
        removed = sum(self.remove(key) for key, _ in self._scan())
        for leftover in self._leftovers():
            shutil.rmtree(leftover, ignore_errors=True)
        return removed

    def _leftovers(self) -> list[Path]:
        """Trash directories and temporary directories of writers that died (older than an hour)."""
        cutoff = time.time() - _STALE_SECONDS
        found = []
        for path in self._shard_children():
            try:
                if path.name.startswith(_TRASH_PREFIX) or (
                        path.name.startswith(_TMP_PREFIX) and path.stat().st_mtime < cutoff):
                    found.append(path)
            except FileNotFoundError:
                continue
        return found

    def prune(self, max_bytes: int) -> list[Entry]:
        """Remove least recently used entries until the cache holds at most ``max_bytes``.

        Unreadable entries count as least recently used and go first; the returned list holds the
        readable entries removed, oldest first.
        """
        if not self.enabled:
            return []
        ranked: list[tuple[float, Path, Entry | None]] = []
        for key, path in self._scan():
            try:
                entry = self._read(key, verify=False)
                ranked.append((entry.last_used, path, entry))
            except (OSError, _Broken):
                ranked.append((float("-inf"), path, None))
        ranked.sort(key=lambda item: item[0])
        sizes = {path: _safe_size(path) for _, path, _ in ranked}
        total = sum(sizes.values())
        removed = []
        for _, path, entry in ranked:
            if total <= max_bytes:
                break
            if self.remove(path.name):
                total -= sizes[path]
                if entry is not None:
                    removed.append(entry)
        return removed


def _safe_size(path: Path) -> int:
    """Size of an entry directory, 0 when it vanished (another process removed it)."""
    try:
        return _directory_size(path)
    except OSError:
        return 0
