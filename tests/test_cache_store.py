"""The disk cache: keys, atomic entries, validation, concurrency across processes, degradation, pruning.

CPU only: entries hold fake cubin bytes, so no compiler is needed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import jittile.cache as cache
from jittile.cache.keys import differing_components, explain_miss, make_key
from jittile.cache.store import FORMAT_VERSION, DiskStore, parse_size
from jittile.errors import JittileError, JittileWarning

REPO = Path(__file__).resolve().parents[1]
CUBIN = b"\x7fELF fake cubin " + bytes(range(256)) * 4
PTX = ".version 8.7\n.target sm_90a\n.visible .entry tma_load() { ret; }\n"


def components(block: int = 64, target: str = "sm_90a") -> dict:
    return {
        "source": "def tma_load(A, Out):\n    pass\n",
        "static_params": {"BLOCK": block},
        "args": [{"shape": [16, 16], "dtype": "uint32"}, {"shape": [16, 16], "dtype": "uint32"}],
        "launch": {"block": [32, 1, 1], "cluster": None},
        "target": target,
        "versions": {"jittile": "0.1", "numba_cuda": "0.30.4", "nvvm": "2.0", "nvjitlink": "13.0"},
    }


def metadata(comps: dict, name: str = "tma_load") -> dict:
    return {
        "name": name,
        "qualname": name,
        "target": comps["target"],
        "key_components": comps,
        "static_params": comps["static_params"],
        "source_file": "/src/k.py",
        "source_line": 3,
        "registers": 24,
        "shared_bytes": 2048,
        "local_bytes": 0,
        "compile_seconds": 0.5,
    }


def put(store: DiskStore, name: str = "tma_load", **kw) -> str:
    comps = components(**kw)
    key = make_key(comps)
    assert store.store(key, CUBIN, PTX, metadata(comps, name)) is not None
    return key


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.startswith((".tmp-", ".trash-"))]


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch):
    monkeypatch.delenv("JITTILE_CACHE", raising=False)
    monkeypatch.delenv("JITTILE_DEBUG", raising=False)


@pytest.fixture
def store(tmp_path) -> DiskStore:
    return DiskStore(tmp_path / "cache")


# -- keys ------------------------------------------------------------------------------------------


def test_key_is_canonical():
    a = {"static_params": {"N": 3, "BLOCK": 64}, "launch": (32, 1, 1), "target": "sm_90a"}
    b = {"target": "sm_90a", "launch": [32, 1, 1], "static_params": {"BLOCK": 64, "N": 3}}
    assert make_key(a) == make_key(b)
    assert len(make_key(a)) == 64 and int(make_key(a), 16) >= 0
    assert make_key(a) != make_key(dict(a, target="sm_100a"))
    assert make_key({"x": 1}) != make_key({"x": 1.0}) != make_key({"x": True})


def test_key_rejects_objects_without_stable_text():
    with pytest.raises(JittileError, match="stable text"):
        make_key({"x": object()})


def test_differing_components_paths():
    assert differing_components(components(64), components(128)) == ["static_params.BLOCK"]
    assert differing_components(components(target="sm_90a"), components(target="sm_100a")) == [
        "target"
    ]
    a, b = components(), components()
    b["args"][1]["dtype"] = "float32"
    b["static_params"]["EXTRA"] = 1
    assert differing_components(a, b) == ["args.1.dtype", "static_params.EXTRA"]
    b = components()
    b["args"][0]["shape"] = [32, 16]
    assert differing_components(a, b) == ["args.0.shape"]
    assert differing_components(a, components()) == []


def test_explain_miss_names_closest_entry(store):
    put(store, block=64)
    put(store, block=64, target="sm_100a")
    message = explain_miss(components(128), store.entries())
    assert message.startswith("miss: differs from entry ")
    assert "static_params.BLOCK (64 -> 128)" in message and "target" not in message
    assert explain_miss(components(), []) == "miss: no cached entry of this kernel yet"


# -- store and load --------------------------------------------------------------------------------


def test_store_then_load_counts_hits(store):
    comps = components()
    key = make_key(comps)
    stored = store.store(key, CUBIN, PTX, metadata(comps))
    assert stored.hits == 0 and stored.key == key and stored.kernel == "tma_load"
    assert sorted(p.name for p in stored.path.iterdir()) == [
        "tma_load.cubin",
        "tma_load.json",
        "tma_load.ptx",
        "usage.json",
    ]
    assert stored.path == store.directory / key[:2] / key
    assert stored.size == sum(p.stat().st_size for p in stored.path.iterdir())

    first = store.load(key)
    second = store.load(key)
    assert (first.hits, second.hits) == (1, 2)
    assert stored.created <= first.last_used <= second.last_used
    assert second.cubin() == CUBIN and second.ptx() == PTX
    assert second.static_params == {"BLOCK": 64} and second.target == "sm_90a"
    meta = json.loads((stored.path / "tma_load.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION and "hits" not in meta
    assert json.loads((stored.path / "usage.json").read_text())["hits"] == 2
    assert meta["key_components"] == json.loads(json.dumps(comps))
    assert meta["source_line"] == 3 and meta["registers"] == 24
    assert leftovers(store.directory) == []
    assert store.load("0" * 64) is None


@pytest.mark.parametrize(
    "umask, directories, files", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)]
)
def test_entries_follow_the_umask(store, umask, directories, files):
    """Entries other users may read (a shared cache) when the umask says so, private when it does not."""
    old = os.umask(umask)
    try:
        key = put(store)
        assert store.load(key).hits == 1  # usage.json is rewritten too
    finally:
        os.umask(old)
    path = store.entry_dir(key)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (path.parent, path)] == [directories] * 2
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.iterdir()} == {
        name: files for name in ("tma_load.cubin", "tma_load.ptx", "tma_load.json", "usage.json")
    }


def test_store_requires_consistent_metadata(store):
    comps = components()
    with pytest.raises(JittileError, match="key_components"):
        store.store(make_key(comps), CUBIN, PTX, {"name": "k", "target": "sm_90a"})
    with pytest.raises(JittileError, match="not the hash"):
        store.store("a" * 64, CUBIN, PTX, metadata(comps))
    with pytest.raises(JittileError, match="'static_params' is not a dict"):
        store.store(make_key(comps), CUBIN, PTX, dict(metadata(comps), static_params=[64]))
    with pytest.raises(JittileError, match="static parameters that are not an object"):
        odd = dict(comps, static_params=[64])
        store.store(
            make_key(odd), CUBIN, PTX, {"name": "k", "target": "sm_90a", "key_components": odd}
        )


def test_incomplete_write_is_invisible(store):
    key = put(store)
    # A writer that died mid-entry leaves only a temporary sibling: never listed, never loaded.
    shard = store.directory / "ab"
    (shard / f".tmp-{'ab' * 8}-x").mkdir(parents=True)
    (shard / f".tmp-{'ab' * 8}-x" / "tma_load.cubin").write_bytes(b"\x7fEL")
    assert [e.key for e in store.entries()] == [key]
    assert store.load("ab" * 32) is None


def test_second_process_reuses_entry(store):
    key = put(store)
    script = textwrap.dedent(f"""
        from pathlib import Path
        from jittile.cache.store import DiskStore
        entry = DiskStore(Path({str(store.directory)!r})).load({key!r})
        assert entry is not None and entry.cubin() == {CUBIN!r}
        print(entry.hits)
    """)
    for expected in (1, 2):
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            check=True,
        )
        assert result.stdout.strip() == str(expected), result.stderr
    meta = json.loads((store.entry_dir(key) / "tma_load.json").read_text())
    usage = json.loads((store.entry_dir(key) / "usage.json").read_text())
    assert usage["hits"] == 2 and usage["last_used"] > meta["created"] - 1


def test_processes_storing_together_leave_one_entry(tmp_path):
    directory, go = tmp_path / "cache", tmp_path / "go"
    comps = components()
    key = make_key(comps)
    script = textwrap.dedent(f"""
        import json, os, time, warnings
        from pathlib import Path
        from jittile.cache.store import DiskStore
        warnings.simplefilter("error")
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        store = DiskStore(Path({str(directory)!r}))
        metadata = json.loads({json.dumps(json.dumps(metadata(comps)))})
        stored = store.store({key!r}, {CUBIN!r}, {PTX!r}, metadata)
        loaded = store.load({key!r})
        assert stored is not None and loaded is not None and loaded.cubin() == {CUBIN!r}
        print(stored.created)
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(8)
    ]
    go.touch()
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(rc == 0 and err == "" for _, err, rc in results), results
    assert [p.name for p in directory.iterdir()] == [key[:2]]
    assert [p.name for p in (directory / key[:2]).iterdir()] == [key]
    assert leftovers(directory) == []
    # Losers return the winner's entry, so every process agrees on one creation time.
    assert len({out.strip() for out, _, _ in results}) == 1
    entry = DiskStore(directory).load(key)
    assert entry.cubin() == CUBIN and 1 <= entry.hits <= 9


def _truncate_cubin(path: Path) -> None:
    cubin = path / "tma_load.cubin"
    cubin.write_bytes(cubin.read_bytes()[:100])


def _garbage_meta(path: Path) -> None:
    (path / "tma_load.json").write_bytes(b'{"name": "tma_lo\x00\xff')


def _foreign_version(path: Path) -> None:
    meta = json.loads((path / "tma_load.json").read_text())
    (path / "tma_load.json").write_text(json.dumps(dict(meta, format_version=FORMAT_VERSION + 1)))


def _meta_not_object(path: Path) -> None:
    (path / "tma_load.json").write_text("[1, 2]")


def _ptx_edited(path: Path) -> None:
    (path / "tma_load.ptx").write_text(PTX.replace("ret", "trap"))


def _cubin_missing(path: Path) -> None:
    (path / "tma_load.cubin").unlink()


@pytest.mark.parametrize(
    "damage",
    [
        _truncate_cubin,
        _garbage_meta,
        _foreign_version,
        _meta_not_object,
        _ptx_edited,
        _cubin_missing,
    ],
)
def test_broken_entry_is_dropped_and_rebuilt(store, damage):
    key = put(store)
    damage(store.entry_dir(key))
    with pytest.warns(JittileWarning, match=f"broken entry {key[:12]}.*rebuilt"):
        assert store.load(key) is None
    assert not store.entry_dir(key).exists()
    assert leftovers(store.directory) == []
    put(store)
    assert store.load(key).cubin() == CUBIN


def test_uncreatable_directory_degrades_to_memory_only(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    directory = tmp_path / "file" / "cache"
    comps = components()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = DiskStore(directory)
        assert store.enabled is False
        assert store.store(make_key(comps), CUBIN, PTX, metadata(comps)) is None
        assert store.load(make_key(comps)) is None
        assert store.entries() == [] and store.enabled is False
    assert len(caught) == 1 and issubclass(caught[0].category, JittileWarning)
    assert "memory only" in str(caught[0].message) and str(directory) in str(caught[0].message)
    assert "cannot create the cache directory" in store.disabled_reason


def test_cache_switched_off_without_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")
    comps = components()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = DiskStore(tmp_path / "cache")
        assert not store.enabled and store.disabled_reason == "JITTILE_CACHE=0"
        assert store.store(make_key(comps), CUBIN, PTX, metadata(comps)) is None
    assert not (tmp_path / "cache").exists()


# -- inspection and removal ------------------------------------------------------------------------


def _set_last_used(store: DiskStore, key: str, when: float) -> None:
    path = store.entry_dir(key) / "usage.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), last_used=when)))


def test_prune_removes_least_recently_used(store):
    keys = [put(store, block=b) for b in (16, 32, 64)]
    for when, key in zip((300.0, 100.0, 200.0), keys):
        _set_last_used(store, key, when)
    one = store.entries()[0].size
    assert store.prune(10 * one) == []
    removed = store.prune(one)
    assert [e.key for e in removed] == [keys[1], keys[2]]
    assert [e.key for e in store.entries()] == [keys[0]]
    assert store.prune(0)[0].key == keys[0] and store.entries() == []


def test_prune_drops_unreadable_entries_first(store):
    good, bad = put(store, block=16), put(store, block=32)
    _garbage_meta(store.entry_dir(bad))
    (removed,) = store.prune(store.entries()[0].size)
    assert removed.key == bad and "not valid JSON" in removed.reason
    assert not store.entry_dir(bad).exists() and store.entry_dir(good).exists()


def test_entries_and_clear(store):
    keys = {put(store, block=b) for b in (16, 32)}
    _set_last_used(store, min(keys), 1.0)
    listed = store.entries()
    assert {e.key for e in listed} == keys and listed[-1].key == min(keys)
    assert store.clear().removed == 2 and store.entries() == [] and leftovers(store.directory) == []
    assert list(store.directory.iterdir()) == []  # the emptied shard folders went too


def test_find_by_prefix(store):
    key = put(store, block=1)
    by_first_digit: dict[str, str] = {key[0]: key}
    block = 2
    while True:
        other = put(store, block=block)
        if other[0] in by_first_digit:
            break
        by_first_digit[other[0]] = other
        block += 1
    assert store.find(key[:10]).key == key and store.find(key.upper()).key == key
    with pytest.raises(JittileError, match="ambiguous"):
        store.find(other[0])
    with pytest.raises(JittileError, match="no cache entry"):
        store.find("zz")


@pytest.mark.parametrize(
    "text, size",
    [
        ("500M", 500 << 20),
        ("1.5G", 3 << 29),
        ("64KiB", 64 << 10),
        ("10kb", 10 << 10),
        ("4096", 4096),
        (" 2 T ", 2 << 40),
        (7, 7),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_parse_size_rejects_garbage():
    with pytest.raises(JittileError, match="invalid size"):
        parse_size("lots")
    with pytest.raises(JittileError, match="too large"):
        parse_size("9" * 400 + "T")


# -- module-level API ------------------------------------------------------------------------------


def test_default_store_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "a"))
    first = cache.default_store()
    assert cache.default_store() is first and first.directory == tmp_path / "a"
    put(first)
    assert len(cache.entries()) == 1 and cache.entries("tma_load") and not cache.entries("other")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "b"))
    assert cache.default_store().directory == tmp_path / "b" and cache.entries() == []
    monkeypatch.setenv("JITTILE_CACHE", "0")
    assert not cache.default_store().enabled
    monkeypatch.delenv("JITTILE_CACHE")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "a"))
    assert cache.prune("0") and cache.clear() == 0


def test_debug_switch_and_log(monkeypatch, capsys):
    assert not cache.debug_enabled()
    monkeypatch.setenv("JITTILE_DEBUG", "ptx, cache")
    assert cache.debug_enabled()
    monkeypatch.setenv("JITTILE_DEBUG", "nocache")
    assert not cache.debug_enabled()
    cache.log("miss tma_load")
    assert capsys.readouterr().err == "jittile cache: miss tma_load\n"


def test_cache_package_imports_without_numba():
    code = "import sys, jittile.cache, jittile.cli; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run(
        [sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )


def test_distribution_versions_read_install_metadata_names(tmp_path, monkeypatch):
    from jittile.cache.components import distribution_versions

    first, second = tmp_path / "first", tmp_path / "second"
    for folder, entries in (
        (first, ["numba_cuda-0.30.4.dist-info", "llvmlite-0.50.0-py3.11.egg-info"]),
        (second, ["numba_cuda-0.1.0.dist-info", "nvidia_nvjitlink-13.5.37.dist-info"]),
    ):
        for entry in entries:
            (folder / entry).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    assert distribution_versions(["numba-cuda", "llvmlite", "nvidia-nvjitlink", "nvidia-nvvm"]) == {
        "numba-cuda": "0.30.4",
        "llvmlite": "0.50.0",
        "nvidia-nvjitlink": "13.5.37",
        "nvidia-nvvm": "absent",
    }


def test_a_format_2_entry_is_rebuilt_once_in_the_kernel_named_layout(store):
    """Entries of jittile before kernel-named files (kernel.cubin, meta.json) are misses: the
    first load discards each with one warning, and the rebuilt entry has the new names."""
    key = put(store)
    path = store.entry_dir(key)
    meta = json.loads((path / "tma_load.json").read_text())
    for old, new in (
        ("tma_load.cubin", "kernel.cubin"),
        ("tma_load.ptx", "kernel.ptx"),
        ("tma_load.json", "meta.json"),
    ):
        (path / old).rename(path / new)
    (path / "meta.json").write_text(json.dumps(dict(meta, format_version=2)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.load(key) is None
        assert store.load(key) is None  # gone: a plain miss, no second warning
    (warning,) = caught
    assert f"written in cache format 2; this jittile reads format {FORMAT_VERSION}" in str(
        warning.message
    )
    assert put(store) == key
    assert sorted(p.name for p in path.iterdir()) == [
        "tma_load.cubin",
        "tma_load.json",
        "tma_load.ptx",
        "usage.json",
    ]


def test_a_kernel_named_usage_keeps_its_use_counts_apart(store):
    key = put(store, name="usage")
    assert sorted(p.name for p in store.entry_dir(key).iterdir()) == [
        "usage.json",
        "usage_kernel.cubin",
        "usage_kernel.json",
        "usage_kernel.ptx",
    ]
    assert store.load(key).hits == 1 and store.load(key).cubin() == CUBIN
