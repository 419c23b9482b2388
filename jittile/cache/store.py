"""The on-disk cache: one directory per key holding the cubin, the PTX, the metadata and the use counts.

Layout: ``<dir>/<key[:2]>/<key>/`` holds, named after the kernel (its function's ``__name__``, so
that ``ls ~/.cache/jittile/*/*/tma_load.*`` finds a kernel's entries, as Triton's
``<hash>/<kernel>.{ptx,cubin,json}`` does):

- ``<kernel>.cubin`` and ``<kernel>.ptx``;
- ``<kernel>.json``, the metadata: the caller's metadata plus the fields the store owns (``format_version``, ``key``,
  ``created``, ``cubin_size``, ``cubin_sha256``, ``ptx_size``, ``ptx_sha256``, ``digest``). It never
  changes after the entry is stored. ``digest`` is the SHA-256 of the canonical JSON (sorted keys, no
  spaces, ASCII) of every other field; as those include the SHA-256 of the cubin and of the PTX, the
  digest covers all three, and any edit of a value (not of spacing or key order) fails verification;
- ``usage.json``: ``hits`` and ``last_used``, the only mutable part (a kernel named ``usage`` keeps
  its files as ``usage_kernel.*``), outside the digest. A value there
  that is not a count or a plausible time (``Infinity``, a string, a negative number) counts as absent
  and is rewritten at the next hit.

Nothing is ever unpickled, so loading an entry executes nothing. Every change is a rename, which POSIX
makes atomic:

- a new entry is written whole into a temporary sibling directory and renamed into place, so an entry
  is visible only once complete (a writer killed midway leaves an invisible ``.tmp-`` directory that
  ``clear`` removes once it is an hour old); when several processes store the same key, the first
  rename wins and the others return the winner's entry;
- ``usage.json`` updates go through a temporary file and ``os.replace``, so readers see the old or the
  new file, never a torn one (two racing hits may count once, which is harmless);
- removal first renames the entry to a ``.trash-`` sibling, so it disappears at once, then deletes it.

``load`` reads and verifies everything; an entry that fails (truncated, edited, another format, a file
standing where its directory goes) is removed with one warning and the caller rebuilds it. Entries of
cache format 2 (``kernel.cubin``, ``meta.json``: jittile before kernel-named files) are such entries:
each is rebuilt once, in the new layout. Listing
checks the metadata's digest and the files' sizes without hashing the files.

A cache directory that cannot be written is still read: hits work, stores are skipped (a debug line
with ``JITTILE_DEBUG=cache``). One that cannot be read or created turns the disk cache off for the
process, with one warning; the kernels still compile, in memory only.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import JittileError, JittileWarning, debug_requested, user_stacklevel
from .keys import make_key, normalize

FORMAT_VERSION = 4  # 4: plan fields are each family's typed dataclass (wgmma majors per operand)
USAGE_FILE = "usage.json"
PARTS = ("cubin", "ptx", "json")
DIGEST_FIELD = "digest"
DEFAULT_DIRECTORY = "~/.cache/jittile"
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_SHARD_RE = re.compile(r"^[0-9a-f]{2}$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
# A temporary directory untouched this long belongs to a writer that died; clear() may delete it.
_STALE_SECONDS = 3600.0
# Times beyond this (the year 5138) are garbage, not a clock: they could not even be printed.
_LATEST_TIME = 1e11
# Errors that mean "not allowed to write here": the cache is read-only, which is not worth a warning.
_WRITE_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
_PUBLISH_ATTEMPTS = 3
# Making the temporary entry directory: another process's clear or prune may remove the empty
# shard folder between its creation and the directory made in it, again and again while it
# runs in a loop (tests/test_cache_atomic.py lost three times in a row under load)
_SHARD_ATTEMPTS = 64
_DISABLED_VALUES = {"0", "false", "off", "no"}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# Metadata fields the caller must give, and their types; the store adds the fields it owns.
REQUIRED_METADATA = {"name": str, "target": str, "key_components": dict}
_OPTIONAL_METADATA = {"qualname": str, "static_params": dict}


def parse_size(text: str | int) -> int:
    """Bytes in a size like ``"500M"``, ``"1.5G"``, ``"64KiB"`` or ``"4096"``.

    Suffixes K, M, G, T are binary (powers of 1024, like ``du -h``), with or without a trailing
    ``B``/``iB``; case is ignored.
    """
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise JittileError(
            f"invalid size {text!r}: expected a number with an optional K, M, G or T suffix"
        )
    number, unit = match.groups()
    size = float(number) * _SIZE_UNITS[unit.lower()]
    if not math.isfinite(size):
        raise JittileError(f"invalid size {text!r}: too large")
    return int(size)


def resolve_directory(
    setting: str | os.PathLike | None, source: str = "JITTILE_CACHE_DIR"
) -> tuple[Path, str | None]:
    """The cache directory a setting names (``None``: the default), and why it cannot be used, if so.

    The path is absolute unless the setting is unusable; then it is the setting as given, for messages.
    """
    text = DEFAULT_DIRECTORY if setting is None else os.fspath(setting)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if not text.strip():
        return Path(text), (
            f"{source} is set to {text!r}, which names no directory; set it to one, "
            "or JITTILE_CACHE=0 to turn the disk cache off"
        )
    if "\0" in text:
        return Path(text.replace("\0", "\\0")), f"{source} {text!r} holds a NUL character"
    what = f"{source} {text!r}" if setting is not None else f"the default cache directory {text}"
    try:
        return Path(text).expanduser().absolute(), None
    except RuntimeError:  # pathlib's word for an unknown ~user or no home directory
        user = text.split("/", 1)[0]
        return Path(text), f"{what}: cannot expand {user!r} (no such user, or no home directory)"
    except OSError as exc:  # the working directory a relative path needs is gone
        return Path(text), f"{what}: cannot make it absolute ({_why(exc)})"


def side_folder(name: str) -> Path | None:
    """``<cache dir>/<name>``, where the tuning records and the facts memo live beside the
    entries; None when the disk cache is off or its directory is unusable."""
    if not disk_cache_requested():
        return None
    directory, problem = resolve_directory(os.environ.get("JITTILE_CACHE_DIR"))
    return None if problem is not None else directory / name


def disk_cache_requested() -> bool:
    """False when ``JITTILE_CACHE`` turns the disk cache off (``0``, ``false``, ``off``, ``no``)."""
    return os.environ.get("JITTILE_CACHE", "1").strip().lower() not in _DISABLED_VALUES


def debug_enabled() -> bool:
    """Whether ``JITTILE_DEBUG`` (a comma- or space-separated list) names ``cache`` (or is ``1`` /
    ``all``)."""
    return debug_requested("cache")


def log(message: str) -> None:
    """One cache debug line on stderr."""
    print(f"jittile cache: {message}", file=sys.stderr, flush=True)


def entry_files(kernel: str) -> dict[str, str]:
    """The file names of an entry of ``kernel``, by part (``cubin``, ``ptx``, ``json``): the
    kernel's name made a plain file name, never ``usage`` (the use counts' file)."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", kernel) or "kernel"
    stem = "usage_kernel" if stem == "usage" else stem
    return {part: f"{stem}.{part}" for part in PARTS}


def metadata_digest(meta: dict) -> str:
    """The ``digest`` field's value for ``meta``: SHA-256 of the canonical JSON of its other fields."""
    text = json.dumps(
        {k: v for k, v in meta.items() if k != DIGEST_FIELD},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One cached compilation as found on disk; ``metadata`` is the whole (verified)
    ``<kernel>.json``.

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
    # The files' bytes by part ("cubin", "ptx") as verified by DiskStore.load (or as written by
    # store): the caller uses exactly what was checked, even if the entry is removed meanwhile.
    verified: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def files(self) -> dict[str, Path]:
        """The entry's files by part: ``cubin``, ``ptx`` and ``json`` (the metadata)."""
        return {part: self.path / name for part, name in entry_files(self.kernel).items()}

    def cubin(self) -> bytes:
        if "cubin" in self.verified:
            return self.verified["cubin"]
        return _read_regular(self.files["cubin"])

    def ptx(self) -> str:
        if "ptx" in self.verified:
            return self.verified["ptx"].decode("utf-8")
        return _read_regular(self.files["ptx"]).decode("utf-8")

    def __repr__(self) -> str:
        return (
            f"<jittile cache entry {self.key[:12]} {self.qualname} {self.target}, {self.size} bytes, "
            f"{self.hits} hit{'' if self.hits == 1 else 's'}>"
        )


@dataclass(frozen=True)
class Damaged:
    """Something in the cache that cannot be used: an entry that fails verification (``key`` set), or a
    stray or unreadable thing where a shard folder goes (``key`` ``None``).

    ``metadata`` is ``<kernel>.json`` as parsed when it was a JSON object (unverified), else
    ``None``.
    """

    key: str | None
    path: Path
    reason: str
    metadata: dict | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        return self.key[:12] if self.key else str(self.path)

    def file_name(self, part: str) -> str:
        """The name of the entry's file of ``part`` (``cubin``, ``ptx``): from the metadata's
        kernel name, else the one such file there is, else ``<kernel>.<part>``."""
        if isinstance(self.metadata, dict) and isinstance(self.metadata.get("name"), str):
            return entry_files(self.metadata["name"])[part]
        found = sorted(p.name for p in self.path.glob(f"*.{part}")) if self.path.is_dir() else []
        return found[0] if len(found) == 1 else f"<kernel>.{part}"

    def read(self, part: str) -> bytes:
        """The entry's file of ``part`` (``cubin``, ``ptx``), unverified; ``OSError`` when it is
        missing or cannot be read."""
        return _read_regular(self.path / self.file_name(part))


@dataclass(frozen=True)
class Survey:
    """What a directory holds: usable entries (most recently used first) and damaged ones."""

    entries: list[Entry]
    damaged: list[Damaged]


@dataclass(frozen=True)
class Cleared:
    """What ``clear`` did: entries removed (damaged ones included), and one line per thing it could not."""

    removed: int
    failures: list[str]


class _Broken(Exception):
    """An entry on disk that must not be used; the message says why."""

    def __init__(self, reason: str, metadata: dict | None = None):
        super().__init__(reason)
        self.metadata = metadata


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "a symbolic link"
        return exc.strerror or str(exc)
    return str(exc)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a special file"


def _read_regular(path: Path | str, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file; ``OSError`` for a link, a directory or a device, which are neither
    followed nor read (a FIFO would block, ``/dev/zero`` never end)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    with os.fdopen(os.open(path, flags, dir_fd=dir_fd), "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(
                errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, f"{_kind(mode)}, not a file"
            )
        return handle.read()


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_time(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value <= _LATEST_TIME


def _parse_json(raw: bytes) -> object:
    """``ValueError`` for anything that is not JSON text (bad UTF-8, syntax, absurd nesting)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _encode(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=True).encode("ascii") + b"\n"


def _write_file(path: Path, data: bytes) -> None:
    """Write and flush to disk, so a crash cannot leave a renamed-but-empty file behind."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _new_directory(parent: Path, prefix: str) -> Path:
    """A new directory with a random name, its mode from the umask like ``mkdir``'s (``mkdtemp`` makes
    it private, which would hide the entry from the other users of a shared cache)."""
    path = parent / f"{prefix}{secrets.token_hex(8)}"
    os.mkdir(path, 0o777)
    return path


def _new_file(parent: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new file with a random name, open for writing, its mode from the umask (``mkstemp``: private)."""
    path = parent / f"{prefix}{secrets.token_hex(8)}{suffix}"
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to a new file beside ``path`` and rename it into place (its folder made if
    missing), so readers see the old file, the new one or none, never a part: the tuning records'
    and the facts memo's writes. ``OSError`` where that cannot be done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = _new_file(path.parent, _TMP_PREFIX, path.suffix)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def _sync_directory(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _delete(path: Path) -> None:
    """Remove whatever stands at ``path`` without following links; ``OSError`` if it stays."""
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _listing(path: Path) -> list[os.DirEntry]:
    with os.scandir(path) as children:
        return list(children)


class _Opened:
    """An entry directory opened once. Every file is read through the one descriptor, so all of them
    come from the same entry even when another process renames it away (a removal) or stores a new
    entry at its path meanwhile."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        )

    def close(self) -> None:
        os.close(self.fd)

    def read(self, name: str) -> bytes:
        """A file's bytes; ``_Broken`` when it is missing or unreadable, ``FileNotFoundError`` when the
        whole entry was removed meanwhile (a plain miss)."""
        try:
            return _read_regular(name, dir_fd=self.fd)
        except FileNotFoundError:
            raise self.missing(name) from None
        except OSError as exc:
            raise _Broken(f"cannot read {name} ({_why(exc)})") from None

    def size_of(self, name: str) -> int:
        """A regular file's size, without reading it; errors as :meth:`read`."""
        try:
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise self.missing(name) from None
        except OSError as exc:
            raise _Broken(f"cannot examine {name} ({_why(exc)})") from None
        if not stat.S_ISREG(info.st_mode):
            raise _Broken(f"{name} is {_kind(info.st_mode)}, not a file")
        return info.st_size

    def missing(self, name: str) -> Exception:
        """A file is missing: broken if this directory is still the entry, else the entry went."""
        try:
            now, mine = os.lstat(self.path), os.fstat(self.fd)
        except OSError:
            return FileNotFoundError(errno.ENOENT, "entry removed", str(self.path))
        if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            return FileNotFoundError(errno.ENOENT, "entry replaced", str(self.path))
        return _Broken(f"{name} is missing")

    def metadata_name(self) -> str:
        """The metadata file's name: the one ``*.json`` besides ``usage.json`` (temporary files
        start with a dot); ``_Broken`` when there is none or several, ``FileNotFoundError`` when
        the entry was removed meanwhile."""
        with os.scandir(self.fd) as children:
            names = sorted(c.name for c in children if not c.name.startswith("."))
        found = [n for n in names if n.endswith(".json") and n != USAGE_FILE]
        if len(found) == 1:
            return found[0]
        if found:
            raise _Broken(f"holds several metadata files ({', '.join(found)})")
        cubins = [n for n in names if n.endswith(".cubin")]
        expected = entry_files(cubins[0][: -len(".cubin")])["json"] if cubins else "<kernel>.json"
        raise self.missing(expected)

    def total_size(self) -> int:
        total = 0
        with os.scandir(self.fd) as children:
            for child in children:
                try:
                    total += child.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
        return total

    def usage(self) -> dict:
        """``usage.json`` as a dict; empty when missing or unreadable (its values are checked later)."""
        try:
            usage = _parse_json(_read_regular(USAGE_FILE, dir_fd=self.fd))
        except (OSError, ValueError):
            return {}
        return usage if isinstance(usage, dict) else {}


def _field_problem(meta: dict) -> str | None:
    """What is wrong with the metadata fields the store reads (a missing one, a wrong type), if anything."""
    for name, kind in {**REQUIRED_METADATA, **_OPTIONAL_METADATA}.items():
        if name in REQUIRED_METADATA and name not in meta:
            return f"lacks {name!r}"
        if name in meta and not isinstance(meta[name], kind):
            return f"field {name!r} is not a {kind.__name__}"
    if not isinstance(
        meta.get("static_params", meta["key_components"].get("static_params", {})), dict
    ):
        return "records static parameters that are not an object"
    return None


def _entry(path: Path, meta: dict, usage: dict, size: int, verified: dict) -> Entry:
    """The entry of verified metadata; ``_Broken`` when a field the store reads is missing or garbled."""
    problem = _field_problem(meta)
    if problem is not None:
        raise _Broken(f"{entry_files(str(meta.get('name')))['json']} {problem}")
    statics = meta.get("static_params", meta["key_components"].get("static_params", {}))
    hits = usage["hits"] if _is_count(usage.get("hits")) else 0
    last_used = usage["last_used"] if _is_time(usage.get("last_used")) else meta["created"]
    return Entry(
        key=meta["key"],
        kernel=meta["name"],
        qualname=meta.get("qualname", meta["name"]),
        target=meta["target"],
        static_params=statics,
        size=size,
        created=float(meta["created"]),
        last_used=float(last_used),
        hits=hits,
        path=path,
        metadata=meta,
        verified=verified,
    )


def _check_owned_fields(meta: dict, key: str, meta_file: str) -> None:
    """The store's own fields: format, key, digest, then the types the digest cannot vouch for."""
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise _Broken(
            f"written in cache format {version!r}; this jittile reads format {FORMAT_VERSION}"
        )
    if meta.get("key") != key:
        raise _Broken(f"{meta_file} records key {str(meta.get('key'))[:16]!r}")
    if meta.get(DIGEST_FIELD) != metadata_digest(meta):
        raise _Broken(f"{meta_file} does not match its digest (edited or damaged)")
    for part in ("cubin", "ptx"):
        sha = meta.get(f"{part}_sha256")
        if not _is_count(meta.get(f"{part}_size")) or not (
            isinstance(sha, str) and _KEY_RE.match(sha)
        ):
            raise _Broken(f"{meta_file} lacks the size or SHA-256 of the {part}")
    if not _is_time(meta.get("created")):
        raise _Broken(f"{meta_file} records no valid creation time")
    if not isinstance(meta.get("name"), str) or entry_files(meta["name"])["json"] != meta_file:
        raise _Broken(
            f"{meta_file} records kernel {meta.get('name')!r}, whose files are named otherwise"
        )


def _read_opened(opened: _Opened, key: str, verify: bool) -> Entry:
    """The entry in an opened directory (see ``DiskStore._read``)."""
    meta_file = opened.metadata_name()
    try:
        meta = _parse_json(opened.read(meta_file))
    except ValueError as exc:
        raise _Broken(f"{meta_file} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _Broken(f"{meta_file} is not a JSON object")
    try:
        _check_owned_fields(meta, key, meta_file)
        verified = {}
        files = entry_files(meta["name"])
        for part in ("cubin", "ptx"):
            name = files[part]
            data = opened.read(name) if verify else None
            size = len(data) if verify else opened.size_of(name)
            if size != meta[f"{part}_size"]:
                raise _Broken(f"{name} has {size} bytes, expected {meta[f'{part}_size']}")
            if verify:
                if hashlib.sha256(data).hexdigest() != meta[f"{part}_sha256"]:
                    raise _Broken(f"{name} does not match its recorded SHA-256")
                verified[part] = data
        if verify:
            try:
                verified["ptx"].decode("utf-8")
            except UnicodeDecodeError:
                raise _Broken(f"{files['ptx']} is not UTF-8 text") from None
        return _entry(opened.path, meta, opened.usage(), opened.total_size(), verified)
    except _Broken as exc:
        exc.metadata = meta
        raise
    except FileNotFoundError:
        raise
    except OSError as exc:  # the directory became unreadable while we read it
        raise _Broken(f"cannot read the entry ({_why(exc)})", meta) from None


class StoreMaintenance:
    """Removing entries: one, all of jittile's (``clear``) or the least recently used beyond a
    size (``prune``). A part of :class:`DiskStore`."""

    def _remove(self, path: Path) -> OSError | None:
        """Remove the entry (or stray) at ``path``, renaming it away first; the error if it stays."""
        try:
            os.lstat(path)
            trash = _new_directory(path.parent, f"{_TRASH_PREFIX}{path.name[:16]}-")
        except FileNotFoundError:
            return None
        except OSError as exc:
            return exc
        try:
            os.rename(path, trash / path.name)
        except FileNotFoundError:
            pass  # another process removed it meanwhile
        except OSError as exc:
            shutil.rmtree(trash, ignore_errors=True)
            return exc
        shutil.rmtree(trash, ignore_errors=True)
        return None

    def remove(self, key: str) -> bool:
        """Remove the entry of ``key`` (or whatever stands at its path); False when nothing went."""
        path = self.entry_dir(key)
        try:
            os.lstat(path)
        except OSError:
            return False
        return self._remove(path) is None

    def _remove_damaged(self, damaged: Damaged) -> OSError | None:
        if damaged.key is not None:
            return self._remove(damaged.path)
        try:
            _delete(damaged.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return exc
        return None

    def clear(self, chosen: Callable[[dict], bool] | None = None) -> Cleared:
        """Remove every entry, damaged ones and strays where entries go included, leftovers of writers
        that died, and the emptied shard folders; nothing else in the directory. With ``chosen``
        (a test of an entry's metadata), only the entries, damaged or not, whose metadata it
        accepts."""
        if not self.enabled:
            return Cleared(0, [])
        removed, failures = 0, []
        survey = self.survey()
        items = [*survey.entries, *survey.damaged]
        if chosen is not None:
            items = [i for i in items if isinstance(i.metadata, dict) and chosen(i.metadata)]
        for item in items:
            error = (
                self._remove(item.path) if isinstance(item, Entry) else self._remove_damaged(item)
            )
            if error is not None:
                failures.append(f"cannot remove {item.path} ({_why(error)})")
            elif item.key is not None:
                removed += 1
        if chosen is None:
            for leftover in self._leftovers():
                shutil.rmtree(leftover, ignore_errors=True)
        self._remove_empty_shards()
        return Cleared(removed, failures)

    def _remove_empty_shards(self) -> None:
        """Remove the shard folders that hold nothing (a writer that finds its shard gone makes it
        again)."""
        for shard in self._shard_folders():
            try:
                os.rmdir(shard)
            except OSError:
                pass  # not empty: something of another writer, or not jittile's

    def _shard_folders(self) -> list[Path]:
        try:
            return [
                Path(s.path)
                for s in _listing(self.directory)
                if _SHARD_RE.match(s.name) and s.is_dir(follow_symlinks=False)
            ]
        except OSError:
            return []

    def _leftovers(self) -> list[Path]:
        """Trash directories, and temporary files and directories of writers that died (an hour old)."""
        cutoff = time.time() - _STALE_SECONDS
        found = []
        for folder in [self.directory, *self._shard_folders()]:
            try:
                children = _listing(folder)
            except OSError:
                continue
            for child in children:
                try:
                    if child.name.startswith(_TRASH_PREFIX) or (
                        child.name.startswith(_TMP_PREFIX)
                        and child.stat(follow_symlinks=False).st_mtime < cutoff
                    ):
                        found.append(Path(child.path))
                except OSError:
                    continue
        return found

    def prune(self, max_bytes: int) -> list[Entry | Damaged]:
        """Remove every damaged entry, then least recently used entries until the cache holds at most
        ``max_bytes``; returns what went, damaged entries first, then entries oldest first."""
        if not self.enabled:
            return []
        survey = self.survey()
        removed: list[Entry | Damaged] = [
            d for d in survey.damaged if self._remove_damaged(d) is None
        ]
        total = sum(e.size for e in survey.entries)
        for entry in sorted(survey.entries, key=lambda e: e.last_used):
            if total <= max_bytes:
                break
            if self._remove(entry.path) is None:
                total -= entry.size
                removed.append(entry)
        if removed:
            self._remove_empty_shards()
        return removed


class DiskStore(StoreMaintenance):
    """The cache directory of one process; every method is safe against other processes using it."""

    def __init__(self, directory: str | os.PathLike | None = None):
        if directory is None:
            self.directory, problem = resolve_directory(os.environ.get("JITTILE_CACHE_DIR"))
        else:
            self.directory, problem = resolve_directory(directory, "the cache directory")
        self._setting_problem = problem
        # Until _check runs: nothing is known. JITTILE_CACHE=0 is a choice, so it is never warned about.
        self._checked = not disk_cache_requested()
        self._disabled_reason: str | None = "JITTILE_CACHE=0" if self._checked else None
        self._warned_disabled = self._checked
        self._read_only_reason: str | None = None
        self._warned_broken: set[str] = set()

    # -- availability ------------------------------------------------------------------------------

    def _check(self) -> None:
        """Whether the directory can be read, and written; once per store, quietly."""
        if self._checked:
            return
        self._checked = True
        self._disabled_reason = self._setting_problem or self._readable_problem()
        if self._disabled_reason is None:
            self._probe_writable()

    def _readable_problem(self) -> str | None:
        directory = self.directory
        try:
            mode = os.stat(directory).st_mode
        except (FileNotFoundError, NotADirectoryError):  # missing, or a file stands above it
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                return f"cannot create the cache directory {directory} ({_why(exc)})"
            mode = stat.S_IFDIR
        except OSError as exc:
            return f"cannot use the cache directory {directory} ({_why(exc)})"
        if not stat.S_ISDIR(mode):
            return f"the cache directory {directory} is {_kind(mode)}, not a directory"
        try:
            _listing(directory)
        except OSError as exc:
            return f"cannot read the cache directory {directory} ({_why(exc)})"
        return None

    def _probe_writable(self) -> None:
        try:
            handle, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
            os.close(handle)
            os.unlink(probe)
        except OSError as exc:
            self._stop_writing(f"cannot write the cache directory {self.directory}", exc)

    @property
    def enabled(self) -> bool:
        """Whether entries are read; when they cannot be, one warning says why (once per store)."""
        self._check()
        if self._disabled_reason is not None and not self._warned_disabled:
            self._warned_disabled = True
            warnings.warn(
                f"jittile cache: {self._disabled_reason}; compiled kernels are cached in memory "
                "only",
                JittileWarning,
                stacklevel=user_stacklevel(),
            )
        return self._disabled_reason is None

    @property
    def disabled_reason(self) -> str | None:
        """Why the disk cache is off (``None`` while it is on); checks without warning."""
        self._check()
        return self._disabled_reason

    @property
    def writable(self) -> bool:
        """Whether new entries and hit counts are written (the cache is on and not read-only)."""
        self._check()
        return self._disabled_reason is None and self._read_only_reason is None

    @property
    def read_only_reason(self) -> str | None:
        """Why entries are read but not written (``None`` when they are written, or the cache is off)."""
        self._check()
        return self._read_only_reason

    def _stop_writing(self, what: str, exc: OSError) -> None:
        """Keep reading, stop writing: quietly when writing is not allowed, else with one warning."""
        if self._read_only_reason is not None:
            return
        self._read_only_reason = f"{what} ({_why(exc)})"
        if exc.errno in _WRITE_DENIED:
            self._debug(f"{self._read_only_reason}: entries are read, new ones are not stored")
        else:
            warnings.warn(
                f"jittile cache: {self._read_only_reason}; new kernels are cached in memory only",
                JittileWarning,
                stacklevel=user_stacklevel(),
            )

    @staticmethod
    def _debug(message: str) -> None:
        if debug_enabled():
            log(message)

    def entry_dir(self, key: str) -> Path:
        """Where the entry of ``key`` lives (whether or not it exists)."""
        return self.directory / key[:2] / key

    # -- reading -----------------------------------------------------------------------------------

    def _read(self, key: str, *, verify: bool) -> Entry:
        """The entry of ``key``; ``FileNotFoundError`` when there is none, ``_Broken`` when unusable.

        Without ``verify`` the files are checked by size only (listing); with it, by SHA-256 too.
        """
        path = self.entry_dir(key)
        try:
            shard_mode = os.lstat(path.parent).st_mode
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(errno.ENOENT, "no entry", str(path)) from None
        except OSError as exc:
            raise _Broken(f"cannot examine the entry ({_why(exc)})") from None
        if not stat.S_ISDIR(
            shard_mode
        ):  # a stray where a shard goes holds no entry; store replaces it
            raise FileNotFoundError(errno.ENOENT, "no entry", str(path))
        if not stat.S_ISDIR(mode):
            raise _Broken(f"{_kind(mode)} stands where its directory goes")
        try:
            opened = _Opened(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _Broken(f"cannot open the entry ({_why(exc)})") from None
        try:
            return _read_opened(opened, key, verify)
        finally:
            opened.close()

    def _discard_broken(self, key: str, reason: object) -> None:
        """Remove a broken entry, with one warning per key and store."""
        error = self._remove(self.entry_dir(key)) if self.writable else None
        if key in self._warned_broken:
            return
        self._warned_broken.add(key)
        if not self.writable:
            then = "it cannot be removed (the cache is read-only), so the kernel is compiled without it"
        elif error is not None:
            then = f"it cannot be removed ({_why(error)}), so the kernel is compiled without it"
        else:
            then = "it will be rebuilt"
        warnings.warn(
            f"jittile cache: ignoring broken entry {key[:12]} in {self.directory}: {reason}; {then}",
            JittileWarning,
            stacklevel=user_stacklevel(),
        )

    def load(self, key: str) -> Entry | None:
        """The verified entry of ``key`` with its hit counted, or ``None`` (miss, broken, or disabled)."""
        if not self.enabled:
            return None
        try:
            entry = self._read(key, verify=True)
        except FileNotFoundError:
            return None
        except _Broken as reason:
            self._discard_broken(key, reason)
            return None
        hits, now = entry.hits + 1, time.time()
        if self.writable:
            self._write_usage(entry.path, hits, now)
        return replace(entry, hits=hits, last_used=now)

    def _write_usage(self, path: Path, hits: int, when: float) -> None:
        """Atomically swap in new use counts; a vanished or unwritable entry is left as it is."""
        try:
            handle, temp = _new_file(path, _TMP_PREFIX, ".json")
        except OSError as exc:
            self._debug(f"hit not counted in {path} ({_why(exc)})")
            return
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(_encode({"hits": hits, "last_used": when}))
            os.replace(temp, path / USAGE_FILE)
        except OSError as exc:
            self._debug(f"hit not counted in {path} ({_why(exc)})")
            temp.unlink(missing_ok=True)

    def inspect(self, key: str) -> Entry | Damaged:
        """The fully verified entry of ``key``, or what is wrong with it; nothing is counted or removed."""
        try:
            return self._read(key, verify=True)
        except FileNotFoundError:
            raise JittileError(f"no cache entry {key[:12]} in {self.directory}") from None
        except _Broken as reason:
            return Damaged(key, self.entry_dir(key), str(reason), reason.metadata)

    def survey(self) -> Survey:
        """Every entry, usable or damaged (files are checked by size, not hashed: ``load`` does that)."""
        if not self.enabled:
            return Survey([], [])
        found: list[Entry] = []
        damaged: list[Damaged] = []
        try:
            shards = _listing(self.directory)
        except OSError as exc:
            return Survey(
                [],
                [Damaged(None, self.directory, f"cannot read the cache directory ({_why(exc)})")],
            )
        for shard in sorted(shards, key=lambda s: s.name):
            if not _SHARD_RE.match(shard.name):
                continue
            try:
                mode = shard.stat(follow_symlinks=False).st_mode
                children = _listing(Path(shard.path)) if stat.S_ISDIR(mode) else None
            except FileNotFoundError:
                continue
            except OSError as exc:
                damaged.append(
                    Damaged(None, Path(shard.path), f"cannot read this shard folder ({_why(exc)})")
                )
                continue
            if children is None:
                damaged.append(
                    Damaged(
                        None, Path(shard.path), f"{_kind(mode)} stands where a shard folder goes"
                    )
                )
                continue
            for child in sorted(children, key=lambda c: c.name):
                if not (_KEY_RE.match(child.name) and child.name.startswith(shard.name)):
                    continue
                try:
                    found.append(self._read(child.name, verify=False))
                except FileNotFoundError:
                    continue
                except _Broken as reason:
                    damaged.append(
                        Damaged(child.name, Path(child.path), str(reason), reason.metadata)
                    )
        found.sort(key=lambda e: e.last_used, reverse=True)
        return Survey(found, damaged)

    def entries(self) -> list[Entry]:
        """Every usable entry, most recently used first (files are not hashed here; ``load`` does)."""
        return self.survey().entries

    def find(self, prefix: str) -> Entry | Damaged:
        """The one entry whose key starts with ``prefix``: verified, or what is wrong with it."""
        prefix = prefix.strip().lower()
        survey = self.survey()
        keys = {e.key for e in survey.entries} | {d.key for d in survey.damaged if d.key}
        matches = sorted(k for k in keys if k.startswith(prefix)) if prefix else []
        if not matches:
            raise JittileError(f"no cache entry with key prefix {prefix!r} in {self.directory}")
        if len(matches) > 1:
            listed = ", ".join(k[:16] for k in matches)
            raise JittileError(
                f"key prefix {prefix!r} is ambiguous: {len(matches)} entries match ({listed})"
            )
        return self.inspect(matches[0])

    # -- writing -----------------------------------------------------------------------------------

    def store(self, key: str, cubin: bytes, ptx: str, metadata: dict[str, Any]) -> Entry | None:
        """Write the entry of ``key`` and return it; ``None`` when the disk cache is off or read-only.

        When another process stored the same key first, its (verified) entry is kept and returned.
        """
        problem = _field_problem(metadata)
        if problem is not None:
            raise JittileError(f"cache metadata {problem}")
        if make_key(metadata["key_components"]) != key:
            raise JittileError(
                f"cache key {key[:12]} is not the hash of the metadata's key_components"
            )
        if not self.enabled:
            return None
        if not self.writable:
            self._debug(f"not storing {key[:12]}: {self._read_only_reason}")
            return None
        ptx_bytes = ptx.encode("utf-8")
        now = time.time()
        meta = dict(
            normalize(metadata),
            format_version=FORMAT_VERSION,
            key=key,
            created=now,
            cubin_size=len(cubin),
            cubin_sha256=hashlib.sha256(cubin).hexdigest(),
            ptx_size=len(ptx_bytes),
            ptx_sha256=hashlib.sha256(ptx_bytes).hexdigest(),
        )
        meta[DIGEST_FIELD] = metadata_digest(meta)
        names = entry_files(meta["name"])
        files = {
            names["cubin"]: cubin,
            names["ptx"]: ptx_bytes,
            names["json"]: _encode(meta),
            USAGE_FILE: _encode({"hits": 0, "last_used": now}),
        }
        target = self.entry_dir(key)
        temp = None
        try:
            temp = self._temporary_entry(key)
            for name, data in files.items():
                _write_file(temp / name, data)
            _sync_directory(temp)
            for _ in range(_PUBLISH_ATTEMPTS):
                if self._publish(temp, target):
                    return _entry(
                        target,
                        meta,
                        {"hits": 0, "last_used": now},
                        sum(map(len, files.values())),
                        {"cubin": cubin, "ptx": ptx_bytes},
                    )
                existing = self._existing(key)
                if existing is not None:
                    return existing
        except OSError as exc:
            self._stop_writing(f"cannot write cache entry {key[:12]} in {self.directory}", exc)
            return None
        finally:
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        self._debug(f"not storing {key[:12]}: its place stayed occupied")
        return None

    def _temporary_entry(self, key: str) -> Path:
        """A new temporary directory beside the entry's place, the shard folder made first."""
        shard = self.entry_dir(key).parent
        attempts = _SHARD_ATTEMPTS
        while True:
            self._make_shard(shard)
            try:
                return _new_directory(shard, f"{_TMP_PREFIX}{key[:16]}-")
            except (
                FileNotFoundError
            ):  # another process's clear removed the empty shard folder meanwhile
                attempts -= 1
                if not attempts:
                    raise

    def _make_shard(self, shard: Path) -> None:
        """Make the shard folder; a file or link standing there is jittile's to replace (one warning)."""
        try:
            mode = os.lstat(shard).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISDIR(mode):
            _delete(shard)
            warnings.warn(
                f"jittile cache: removed {_kind(mode)} standing where the cache keeps entries "
                f"({shard})",
                JittileWarning,
                stacklevel=user_stacklevel(),
            )
        try:
            os.mkdir(shard)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(shard).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(shard)) from None

    @staticmethod
    def _publish(temp: Path, target: Path) -> bool:
        """Rename ``temp`` into place; False when something already stands there."""
        try:
            os.rename(temp, target)
            return True
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                return False
            raise

    def _existing(self, key: str) -> Entry | None:
        """The entry another writer stored first; ``None`` once what stood there is removed (broken,
        a stray file) or gone, so that the caller's copy can take its place."""
        try:
            return self._read(key, verify=True)
        except FileNotFoundError:
            return None
        except _Broken as reason:
            self._discard_broken(key, reason)
            return None
