"""Cache atomicity across processes (issue #11): concurrent writers of one key, loads racing removals,
and writers killed with SIGKILL at every step of a store, a hit count and a removal. No process ever
sees a broken entry, and a killed writer leaves nothing visible but an invisible temporary that
``clear`` removes.

CPU only: fake cubins; the processes are forked with multiprocessing (Linux).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import time
import warnings
from pathlib import Path

import pytest

import jittile.cache.store as store_module
from jittile.cache.keys import make_key
from jittile.cache.store import DiskStore

CUBIN = b"\x7fELF fake cubin " + bytes(range(256)) * 16
PTX = ".version 8.7\n.target sm_90a\n.visible .entry k() { ret; }\n"
COMPONENTS = {"source": "def k(A):\n    pass\n", "static_params": {"BLOCK": 64}, "target": "sm_90a"}
KEY = make_key(COMPONENTS)
METADATA = {"name": "k", "target": "sm_90a", "key_components": COMPONENTS, "shared_bytes": 0}

fork = multiprocessing.get_context("fork")


def cubin_of(writer: int) -> bytes:
    """Each writer's own cubin bytes, as numba numbers symbols per process."""
    return CUBIN + writer.to_bytes(4, "little")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def visible(directory: Path) -> list[str]:
    """Names at entry places: what other processes could read."""
    return sorted(p.name for p in directory.glob("??/*") if not p.name.startswith("."))


def leftovers(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.name.startswith((".tmp-", ".trash-")))


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch):
    monkeypatch.delenv("JITTILE_CACHE", raising=False)
    monkeypatch.delenv("JITTILE_DEBUG", raising=False)


# -- concurrent writers ------------------------------------------------------------------------------


def _store_together(directory: str, writer: int, barrier, results) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = DiskStore(Path(directory))
        barrier.wait()
        stored = store.store(KEY, cubin_of(writer), PTX, METADATA)
        loaded = store.load(KEY)
    results.put(
        (writer, sha(stored.cubin()), sha(loaded.cubin()), [str(w.message) for w in caught])
    )


def test_writers_of_one_key_agree_on_one_entry(tmp_path):
    directory, count = tmp_path / "cache", 8
    barrier, results = fork.Barrier(count), fork.Queue()
    writers = [
        fork.Process(target=_store_together, args=(str(directory), i, barrier, results))
        for i in range(count)
    ]
    for w in writers:
        w.start()
    found = [results.get(timeout=60) for _ in writers]
    for w in writers:
        w.join(timeout=60)
    assert [w.exitcode for w in writers] == [0] * count
    assert all(not messages for *_, messages in found), found
    # Losers return the winner's entry, so every process ends up with the same bytes.
    winners = {stored for _, stored, _, _ in found} | {loaded for _, _, loaded, _ in found}
    assert len(winners) == 1 and winners <= {sha(cubin_of(i)) for i in range(count)}
    assert visible(directory) == [KEY] and leftovers(directory) == []
    assert sha(DiskStore(directory).load(KEY).cubin()) in winners


def _use(directory: str, seconds: float, results) -> None:
    """Load, or store when missing, for a while; report what was read and any warning."""
    deadline, seen = time.time() + seconds, set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = DiskStore(Path(directory))
        writer = os.getpid()
        while time.time() < deadline:
            entry = store.load(KEY) or store.store(KEY, cubin_of(writer), PTX, METADATA)
            if entry is not None:
                seen.add(entry.cubin()[: len(CUBIN)] == CUBIN)
        results.put((seen, store.writable, [str(w.message) for w in caught]))


def _remove_repeatedly(directory: str, seconds: float, results) -> None:
    deadline, failures = time.time() + seconds, []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = DiskStore(Path(directory))
        rounds = 0
        while time.time() < deadline:
            failures += store.clear().failures if rounds % 2 else []
            store.prune(0)
            rounds += 1
        results.put((rounds, failures, [str(w.message) for w in caught]))


def test_loads_and_stores_race_with_clear_and_prune(tmp_path):
    """Entries vanish and reappear under readers: every read is a whole entry or a miss, never a
    broken one, and no process stops writing."""
    directory, seconds = tmp_path / "cache", 2.0
    DiskStore(directory).store(KEY, cubin_of(0), PTX, METADATA)
    results = fork.Queue()
    users = [fork.Process(target=_use, args=(str(directory), seconds, results)) for _ in range(4)]
    remover = fork.Process(target=_remove_repeatedly, args=(str(directory), seconds, results))
    for p in [*users, remover]:
        p.start()
    found = [results.get(timeout=60) for _ in range(5)]
    for p in [*users, remover]:
        p.join(timeout=60)
    assert [p.exitcode for p in [*users, remover]] == [0] * 5
    ((rounds, failures, removal_warnings),) = [r for r in found if isinstance(r[0], int)]
    assert rounds > 10 and failures == [] and removal_warnings == []
    for seen, writable, messages in (r for r in found if isinstance(r[0], set)):
        assert seen == {True} and writable and messages == [], (seen, writable, messages)


# -- writers killed midway ---------------------------------------------------------------------------


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_while_storing(directory: str, step: str) -> None:
    real_write = store_module._write_file

    def write(path: Path, data: bytes) -> None:
        if step == "after the cubin" and path.name == "k.ptx":
            _die()
        if step == "halfway through meta.json" and path.name == "k.json":
            with open(path, "wb") as handle:
                handle.write(data[: len(data) // 2])
            _die()
        real_write(path, data)

    store_module._write_file = write
    if step == "before the rename":
        DiskStore._publish = staticmethod(lambda temp, target: _die())
    DiskStore(Path(directory)).store(KEY, CUBIN, PTX, METADATA)


def _kill_while_counting_a_hit(directory: str, step: str) -> None:
    real_replace = os.replace

    def replace(source, target):
        if Path(target).name == "usage.json":
            _die()
        real_replace(source, target)

    os.replace = replace
    DiskStore(Path(directory)).load(KEY)


def _kill_while_removing(directory: str, step: str) -> None:
    store_module.shutil.rmtree = lambda path, ignore_errors=False: _die()
    DiskStore(Path(directory)).remove(KEY)


def _killed(target, directory: Path, step: str) -> None:
    child = fork.Process(target=target, args=(str(directory), step))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL


def _age(paths: list[Path]) -> None:
    """Make temporaries look like those of a writer that died long ago."""
    old = time.time() - 2 * 3600
    for path in paths:
        os.utime(path, (old, old), follow_symlinks=False)


@pytest.mark.parametrize(
    "step", ["after the cubin", "halfway through meta.json", "before the rename"]
)
def test_writer_killed_mid_store_leaves_no_visible_entry(tmp_path, step):
    directory = tmp_path / "cache"
    _killed(_kill_while_storing, directory, step)
    store = DiskStore(directory)
    temporaries = leftovers(directory)
    assert visible(directory) == [] and len(temporaries) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        survey = store.survey()
        assert survey.entries == [] and survey.damaged == []
        assert store.load(KEY) is None
        assert store.store(KEY, CUBIN, PTX, METADATA) is not None
        assert store.load(KEY).cubin() == CUBIN
    # A fresh temporary may be a live writer's: clear leaves it; an hour-old one goes.
    assert store.clear().removed == 1 and leftovers(directory) == temporaries
    _age(temporaries)
    store.clear()
    assert leftovers(directory) == [] and list(directory.iterdir()) == []


def test_process_killed_while_counting_a_hit_keeps_the_entry(tmp_path):
    directory = tmp_path / "cache"
    store = DiskStore(directory)
    store.store(KEY, CUBIN, PTX, METADATA)
    assert store.load(KEY).hits == 1
    _killed(_kill_while_counting_a_hit, directory, "usage")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        entry = store.load(KEY)
    assert (
        entry.cubin() == CUBIN and entry.hits == 2
    )  # the killed hit went uncounted, nothing broke
    assert [p.parent.name for p in leftovers(directory)] == [KEY]  # its temporary, inside the entry


def test_process_killed_while_removing_leaves_only_trash(tmp_path):
    directory = tmp_path / "cache"
    store = DiskStore(directory)
    store.store(KEY, CUBIN, PTX, METADATA)
    _killed(_kill_while_removing, directory, "remove")
    assert visible(directory) == [] and [p.name[:7] for p in leftovers(directory)] == [".trash-"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.load(KEY) is None and store.survey().damaged == []
    store.clear()
    assert leftovers(directory) == [] and list(directory.iterdir()) == []


@pytest.mark.parametrize("times", [1, 10])
def test_store_survives_a_clear_emptying_the_shard_meanwhile(tmp_path, monkeypatch, times):
    """Another process's clear may remove the empty shard folder between its creation and the
    temporary directory made in it, ``times`` times in a row (a clear or prune in a loop): the
    store makes it again instead of giving up writing."""
    store, removed = DiskStore(tmp_path / "cache"), []
    real_new_directory = store_module._new_directory

    def new_directory(parent: Path, prefix: str) -> Path:
        if len(removed) < times and prefix.startswith(".tmp-"):
            os.rmdir(parent)
            removed.append(parent)
        return real_new_directory(parent, prefix)

    monkeypatch.setattr(store_module, "_new_directory", new_directory)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.store(KEY, CUBIN, PTX, METADATA) is not None
    assert removed and store.writable and store.load(KEY).cubin() == CUBIN
