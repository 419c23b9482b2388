"""Cache fault injection (issue #11): damaged, edited and stray entries, garbage use counts, odd cache
directories. Every fault ends in a discard and rebuild with one warning, or in one clear message; never
in a traceback, a silently used edit, or a cache that stays broken.

CPU only: entries hold fake cubins, so no compiler is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from jittile.cache.keys import make_key
from jittile.cache.store import FORMAT_VERSION, DiskStore, metadata_digest
from jittile.cli import main
from jittile.errors import JittileWarning

REPO = Path(__file__).resolve().parents[1]
CUBIN = b"\x7fELF fake cubin " + bytes(range(256)) * 4
PTX = ".version 8.7\n.target sm_90a\n.visible .entry tma_load() { ret; }\n"


def components(block: int = 64) -> dict:
    return {
        "source": "def tma_load(A, Out):\n    pass\n",
        "static_params": {"BLOCK": block},
        "args": [{"shape": [16, 16], "dtype": "uint32"}],
        "launch": None,
        "target": "sm_90a",
        "versions": {"jittile": "0.1"},
    }


def metadata(comps: dict) -> dict:
    """Metadata shaped like a kernel's; the store treats ``kernel_ir`` as opaque JSON."""
    return {
        "name": "tma_load",
        "qualname": "tma_load",
        "target": "sm_90a",
        "key_components": comps,
        "static_params": comps["static_params"],
        "entry": "jittile_tma_load",
        "registers": 24,
        "shared_bytes": 2048,
        "param_layout": [["tensormap", 0, 128], ["pointer", 128, 8]],
        "lowered_source": "def tma_load(A, Out):\n    pass\n",
        "kernel_ir": {
            "launch": {"grid": [1, 1, 1], "block": [32, 1, 1]},
            "host_tensormaps": [{"box": [8, 16], "swizzle": "128B", "dtype": "float32"}],
            "sites": [
                {
                    "location": ["/k.py", 7, 8],
                    "opcode": "cp.async.bulk.tensor.2d",
                    "plan": [
                        {
                            "opcode": "cp.async.bulk.tensor.2d",
                            "coords": [0, 8],
                            "shared_offset": 0,
                            "bytes": 512,
                        }
                    ],
                }
            ],
        },
    }


def put(store: DiskStore, block: int = 64) -> str:
    comps = components(block)
    key = make_key(comps)
    assert store.store(key, CUBIN, PTX, metadata(comps)) is not None
    return key


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.startswith((".tmp-", ".trash-"))]


def edit_meta(path: Path, change) -> None:
    """Apply ``change`` to the parsed meta.json and write it back as valid JSON, digest untouched."""
    meta = json.loads((path / "tma_load.json").read_text())
    change(meta)
    (path / "tma_load.json").write_text(json.dumps(meta, indent=1))


def broken_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, JittileWarning)]


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch):
    monkeypatch.delenv("JITTILE_CACHE", raising=False)
    monkeypatch.delenv("JITTILE_DEBUG", raising=False)


@pytest.fixture
def store(tmp_path) -> DiskStore:
    return DiskStore(tmp_path / "cache")


def assert_discarded_then_rebuilt(store: DiskStore, key: str, reason: str) -> None:
    """One load: a miss with exactly one warning naming ``reason``; the entry is gone and a new store
    of the same key is loaded again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.load(key) is None
    (message,) = broken_warnings(caught)
    assert f"broken entry {key[:12]}" in message and reason in message and "rebuilt" in message, (
        message
    )
    assert not os.path.lexists(store.entry_dir(key))
    assert leftovers(store.directory) == []
    put(store)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        entry = store.load(key)
    assert entry is not None and entry.cubin() == CUBIN and entry.ptx() == PTX and entry.hits == 1


# -- damaged files -----------------------------------------------------------------------------------


def _truncate(name: str, keep: int):
    def damage(path: Path) -> None:
        (path / name).write_bytes((path / name).read_bytes()[:keep])

    return damage


def _random_bytes(name: str):
    def damage(path: Path) -> None:
        size = (path / name).stat().st_size
        (path / name).write_bytes(os.urandom(max(size, 16)))

    return damage


def _delete(name: str):
    def damage(path: Path) -> None:
        (path / name).unlink()

    return damage


def _flip_one_byte(name: str):
    def damage(path: Path) -> None:
        data = bytearray((path / name).read_bytes())
        data[len(data) // 2] ^= 0x01
        (path / name).write_bytes(bytes(data))

    return damage


def _symlink_to_copy(name: str):
    """The same bytes, behind a link: the store follows no links inside entries."""

    def damage(path: Path) -> None:
        copy = path.parent / f"copy-of-{name}"
        copy.write_bytes((path / name).read_bytes())
        (path / name).unlink()
        (path / name).symlink_to(copy)

    return damage


def _fifo(name: str):
    """A FIFO would block a plain read forever."""

    def damage(path: Path) -> None:
        (path / name).unlink()
        os.mkfifo(path / name)

    return damage


def _directory_instead(name: str):
    def damage(path: Path) -> None:
        (path / name).unlink()
        (path / name).mkdir()

    return damage


FILE_DAMAGE = {
    "cubin truncated": (_truncate("tma_load.cubin", 100), "tma_load.cubin has 100 bytes"),
    "cubin empty": (_truncate("tma_load.cubin", 0), "tma_load.cubin has 0 bytes"),
    "cubin random bytes": (_random_bytes("tma_load.cubin"), "tma_load.cubin does not match"),
    "cubin one bit": (_flip_one_byte("tma_load.cubin"), "tma_load.cubin does not match"),
    "cubin deleted": (_delete("tma_load.cubin"), "tma_load.cubin is missing"),
    "cubin symlink": (
        _symlink_to_copy("tma_load.cubin"),
        "cannot read tma_load.cubin (a symbolic link)",
    ),
    "cubin fifo": (_fifo("tma_load.cubin"), "tma_load.cubin (a special file, not a file)"),
    "ptx truncated": (_truncate("tma_load.ptx", 10), "tma_load.ptx has 10 bytes"),
    "ptx random bytes": (_random_bytes("tma_load.ptx"), "tma_load.ptx"),
    "ptx one bit": (_flip_one_byte("tma_load.ptx"), "tma_load.ptx does not match"),
    "ptx deleted": (_delete("tma_load.ptx"), "tma_load.ptx is missing"),
    "meta truncated": (_truncate("tma_load.json", 200), "tma_load.json is not valid JSON"),
    "meta empty": (_truncate("tma_load.json", 0), "tma_load.json is not valid JSON"),
    "meta random bytes": (_random_bytes("tma_load.json"), "tma_load.json is not valid JSON"),
    "meta deleted": (_delete("tma_load.json"), "tma_load.json is missing"),
    "meta a directory": (_directory_instead("tma_load.json"), "cannot read tma_load.json"),
}


@pytest.mark.parametrize("case", FILE_DAMAGE)
def test_damaged_file_is_discarded_and_rebuilt(store, case):
    damage, reason = FILE_DAMAGE[case]
    key = put(store)
    damage(store.entry_dir(key))
    assert_discarded_then_rebuilt(store, key, reason)


# -- valid-JSON edits: the digest catches every one ----------------------------------------------------


def _set(*path_and_value):
    *path, value = path_and_value

    def change(meta: dict) -> None:
        node = meta
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


SEMANTIC_EDITS = {
    "shared_bytes": _set("shared_bytes", 4096),
    "shared_bytes as float": _set("shared_bytes", 2048.0),
    "tensormap box": _set("kernel_ir", "host_tensormaps", 0, "box", [16, 16]),
    "tensormap swizzle": _set("kernel_ir", "host_tensormaps", 0, "swizzle", "none"),
    "tensormap dtype": _set("kernel_ir", "host_tensormaps", 0, "dtype", "float16"),
    "grid": _set("kernel_ir", "launch", "grid", [0, 1, 1]),
    "block": _set("kernel_ir", "launch", "block", [64, 1, 1]),
    "plan coords": _set("kernel_ir", "sites", 0, "plan", 0, "coords", [0, 16]),
    "param_layout": _set("param_layout", [["tensormap", 0, 64], ["pointer", 64, 8]]),
    "entry name": _set("entry", "jittile_other"),
    "kernel name": _set("name", "other"),
    "static_params not an object": _set("static_params", []),
    "key components": _set("key_components", "static_params", "BLOCK", 128),
    "hits inside meta.json": _set("hits", float("inf")),
    "an added field": _set("launch", {"grid": [0, 1, 1]}),
    "a removed field": lambda meta: meta.pop("lowered_source"),
    "created": _set("created", 1.0),
    "cubin size": _set("cubin_size", 100),
    "digest itself": _set("digest", "0" * 64),
    "digest removed": lambda meta: meta.pop("digest"),
}


@pytest.mark.parametrize("case", SEMANTIC_EDITS)
def test_semantic_metadata_edit_is_discarded_and_rebuilt(store, case):
    key = put(store)
    edit_meta(store.entry_dir(key), SEMANTIC_EDITS[case])
    assert_discarded_then_rebuilt(store, key, "tma_load.json does not match its digest")


@pytest.mark.parametrize(
    "change, reason",
    [
        (_set("format_version", FORMAT_VERSION - 1), f"cache format {FORMAT_VERSION - 1}"),
        (_set("key", "0" * 64), "records key '0000000000000000'"),
    ],
)
def test_foreign_format_or_key_is_discarded(store, change, reason):
    key = put(store)
    edit_meta(store.entry_dir(key), change)
    assert_discarded_then_rebuilt(store, key, reason)


def test_layout_only_rewrite_of_meta_still_verifies(store):
    """Spacing, indentation and key order are not edits: the digest is over canonical JSON."""
    key = put(store)
    path = store.entry_dir(key) / "tma_load.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(dict(reversed(list(meta.items()))), separators=(" ,", " :  ")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.load(key).metadata == meta


def test_metadata_field_types_are_checked_even_when_signed(store):
    """A signed entry whose fields the store reads have the wrong type is broken, not a traceback."""
    key = put(store)

    def change(meta: dict) -> None:
        meta["static_params"] = []
        meta["digest"] = metadata_digest(meta)

    edit_meta(store.entry_dir(key), change)
    survey = store.survey()
    assert survey.entries == [] and [d.key for d in survey.damaged] == [key]
    assert "static_params" in survey.damaged[0].reason
    assert_discarded_then_rebuilt(store, key, "'static_params' is not a dict")


# -- things standing where an entry or a shard goes ------------------------------------------------


def test_file_at_an_entry_path_is_replaced(store):
    key = put(store)
    path = store.entry_dir(key)
    store.remove(key)
    path.write_text("a file where the entry directory goes")
    assert_discarded_then_rebuilt(store, key, "a file stands where its directory goes")


def test_symlink_at_an_entry_path_is_removed_not_followed(store, tmp_path):
    key = put(store)
    path = store.entry_dir(key)
    elsewhere = tmp_path / "elsewhere"
    path.rename(elsewhere)
    path.symlink_to(elsewhere, target_is_directory=True)
    assert_discarded_then_rebuilt(store, key, "a symbolic link stands where its directory goes")
    assert sorted(p.name for p in elsewhere.iterdir()) == [
        "tma_load.cubin",
        "tma_load.json",
        "tma_load.ptx",
        "usage.json",
    ]


def test_store_over_a_file_at_the_entry_path(store):
    """store() alone (no load first) also replaces a file standing at the entry's path."""
    comps = components()
    key = make_key(comps)
    store.entry_dir(key).parent.mkdir(parents=True)
    store.entry_dir(key).write_text("stray")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stored = store.store(key, CUBIN, PTX, metadata(comps))
    assert stored is not None and store.writable
    assert len(broken_warnings(caught)) == 1
    assert store.load(key).cubin() == CUBIN


@pytest.mark.parametrize("stray", ["file", "symlink"])
def test_stray_at_a_shard_path_is_replaced_with_one_warning(store, tmp_path, stray):
    comps = components()
    key = make_key(comps)
    shard = store.directory / key[:2]
    store.directory.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not jittile's")
    if stray == "file":
        shard.write_text("stray")
    else:
        shard.symlink_to(outside, target_is_directory=True)
    assert store.load(key) is None  # a miss, not a broken entry
    (damaged,) = store.survey().damaged
    assert damaged.key is None and damaged.path == shard
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.store(key, CUBIN, PTX, metadata(comps)) is not None
    (message,) = broken_warnings(caught)
    assert "removed a" in message and str(shard) in message
    assert shard.is_dir() and not shard.is_symlink() and store.load(key).cubin() == CUBIN
    assert (outside / "keep.txt").read_text() == "not jittile's"


# -- garbage use counts ------------------------------------------------------------------------------

USAGE_GARBAGE = {
    "hits Infinity": '{"hits": Infinity, "last_used": 5.0}',
    "hits -Infinity": '{"hits": -Infinity, "last_used": 5.0}',
    "hits NaN": '{"hits": NaN, "last_used": 5.0}',
    "hits string": '{"hits": "x", "last_used": 5.0}',
    "hits negative": '{"hits": -3, "last_used": 5.0}',
    "hits fraction": '{"hits": 1.5, "last_used": 5.0}',
    "hits bool": '{"hits": true, "last_used": 5.0}',
    "hits overflow": '{"hits": 1e400, "last_used": 5.0}',
    "hits too many digits": '{"hits": ' + "9" * 5000 + ', "last_used": 5.0}',
    "last_used Infinity": '{"hits": 0, "last_used": Infinity}',
    "last_used NaN": '{"hits": 0, "last_used": NaN}',
    "last_used negative": '{"hits": 0, "last_used": -5}',
    "last_used far future": '{"hits": 0, "last_used": 1e300}',
    "last_used string": '{"hits": 0, "last_used": "yesterday"}',
    "not JSON": "{hits",
    "not an object": "[1, 2]",
    "nested too deep": "[" * 100000,
    "empty": "",
}


@pytest.mark.parametrize("case", USAGE_GARBAGE)
def test_garbage_use_counts_count_as_absent_and_are_rewritten(store, monkeypatch, capsys, case):
    key = put(store)
    created = store.load(key).created
    (store.entry_dir(key) / "usage.json").write_text(USAGE_GARBAGE[case])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (listed,) = store.entries()
        # Each field counts on its own, in a file that parses (Python refuses 5000-digit integers).
        parses = case.startswith("hits") and case != "hits too many digits"
        assert (listed.hits, listed.last_used) == (0, 5.0 if parses else created)
        entry = store.load(key)
    assert entry is not None and entry.cubin() == CUBIN and entry.hits == 1
    usage = json.loads((store.entry_dir(key) / "usage.json").read_text())
    assert usage == {"hits": entry.hits, "last_used": entry.last_used}
    # The commands that print counts and times work on garbage too.
    (store.entry_dir(key) / "usage.json").write_text(USAGE_GARBAGE[case])
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(store.directory))
    monkeypatch.setitem(sys.modules, "jittile.backend.toolchain", None)
    for argv in (["list"], ["show", key[:10]], ["why", "tma_load"], ["prune", "--max-size", "1G"]):
        assert main(["cache", *argv]) == 0, argv
    out = capsys.readouterr().out
    assert key[:12] in out


def test_missing_or_odd_usage_file_is_harmless(store):
    key = put(store)
    usage = store.entry_dir(key) / "usage.json"
    usage.unlink()
    (listed,) = store.entries()
    assert (listed.hits, listed.last_used) == (0, listed.created)
    assert store.load(key).hits == 1 and json.loads(usage.read_text())["hits"] == 1
    usage.unlink()
    usage.mkdir()  # cannot be replaced by a file: the hit goes uncounted, the entry still loads
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.load(key).cubin() == CUBIN and store.load(key).hits == 1


# -- the commands on a damaged cache -------------------------------------------------------------------


def run_cli(*argv: str, directory: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m jittile cache ...`` in a fresh process: what a user sees, tracebacks included."""
    environment = dict(
        os.environ, PYTHONPATH=str(REPO), JITTILE_CACHE="1", JITTILE_CACHE_DIR=str(directory)
    )
    environment.pop("JITTILE_DEBUG", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "jittile", "cache", *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


@pytest.fixture
def damaged_cache(store) -> dict:
    """One good entry, one with garbage use counts, five damaged ones, a stray file where a shard folder
    goes, and things that are not jittile's: a file at the root, a folder, a note inside a shard."""
    keys = {
        name: put(store, block)
        for block, name in enumerate(
            [
                "good",
                "garbage hits",
                "no cubin",
                "no ptx",
                "garbage meta",
                "edited statics",
                "file at entry",
            ],
            1,
        )
    }
    paths = {name: store.entry_dir(key) for name, key in keys.items()}
    (paths["garbage hits"] / "usage.json").write_text('{"hits": Infinity, "last_used": "x"}')
    (paths["no cubin"] / "tma_load.cubin").unlink()
    (paths["no ptx"] / "tma_load.ptx").unlink()
    (paths["garbage meta"] / "tma_load.json").write_bytes(b"\x00\xff{")
    edit_meta(paths["edited statics"], _set("static_params", []))
    store.remove(keys["file at entry"])
    paths["file at entry"].write_text("stray")
    shard = next(f"{i:02x}" for i in range(256) if all(k[:2] != f"{i:02x}" for k in keys.values()))
    (store.directory / shard).write_text("stray where a shard folder goes")
    (store.directory / "notes.txt").write_text("mine")
    (store.directory / "mine").mkdir()
    (paths["good"].parent / "README").write_text("mine too")
    return {
        "keys": keys,
        "paths": paths,
        "stray shard": store.directory / shard,
        "not jittile's": [
            store.directory / "notes.txt",
            store.directory / "mine",
            paths["good"].parent / "README",
        ],
    }


DAMAGED = ["no cubin", "no ptx", "garbage meta", "edited statics", "file at entry"]


def test_list_reads_what_it_can_and_names_each_damaged_entry(store, damaged_cache):
    keys = damaged_cache["keys"]
    done = run_cli("list", directory=store.directory)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:] if line.strip()}
    assert rows[keys["good"][:12]][5] == "0" and rows[keys["garbage hits"][:12]][5] == "0"
    assert all(keys[name][:12] not in done.stdout for name in DAMAGED)
    assert "2 entries," in done.stdout and "6 damaged" in done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 6 and all(line.startswith("jittile: damaged ") for line in lines), lines
    by_label = {line.split()[2].rstrip(":"): line for line in lines}
    assert "tma_load.cubin is missing" in by_label[keys["no cubin"][:12]]
    assert "tma_load.ptx is missing" in by_label[keys["no ptx"][:12]]
    assert "not valid JSON" in by_label[keys["garbage meta"][:12]]
    assert "does not match its digest" in by_label[keys["edited statics"][:12]]
    assert "a file stands where its directory goes" in by_label[keys["file at entry"][:12]]
    assert "a file stands where a shard folder goes" in by_label[str(damaged_cache["stray shard"])]


@pytest.mark.parametrize(
    "name, says",
    [
        ("no cubin", ["(SASS unavailable: tma_load.cubin is missing)", ".visible .entry tma_load"]),
        ("no ptx", ["(tma_load.ptx is missing)", '"registers": 24']),
        ("garbage meta", ["--- metadata ---\n(unreadable)", ".visible .entry tma_load"]),
        ("edited statics", ['"static_params": []', "--- plan ---"]),
        ("file at entry", ["(unreadable)", "(cannot read <kernel>.ptx: Not a directory)"]),
    ],
)
def test_show_of_a_damaged_entry_says_what_is_wrong(store, damaged_cache, name, says):
    key = damaged_cache["keys"][name]
    done = run_cli("show", key[:10], directory=store.directory)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"entry {key}" in done.stdout and "DAMAGED: " in done.stdout
    assert all(text in done.stdout for text in says), done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"jittile: damaged {key[:12]}: ")


def test_show_of_entries_with_missing_files_after_listing(store, monkeypatch, capsys):
    """A file deleted after the entry was listed: show verifies again and says so."""
    key = put(store)
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(store.directory))
    monkeypatch.setitem(sys.modules, "jittile.backend.toolchain", None)
    assert main(["cache", "show", key]) == 0
    (store.entry_dir(key) / "tma_load.ptx").write_text("edited")
    assert main(["cache", "show", key]) == 1
    out, err = capsys.readouterr()
    assert "tma_load.ptx has 6 bytes" in out and err.startswith(
        f"jittile: damaged {key[:12]}: tma_load.ptx"
    )


def test_why_and_prune_on_a_damaged_cache(store, damaged_cache):
    keys = damaged_cache["keys"]
    done = run_cli("why", "tma_load", directory=store.directory)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "tma_load: 2 entries differ in: static_params.BLOCK" in done.stdout
    # Damaged entries of this kernel, or of no kernel one can tell (and the stray): one line each.
    assert len(done.stderr.splitlines()) == 6
    done = run_cli("prune", "--max-size", "1G", directory=store.directory)
    assert done.returncode == 0 and done.stderr == ""
    removed = [line for line in done.stdout.splitlines() if line.startswith("removed damaged ")]
    assert len(removed) == 6 and "6 entries removed" in done.stdout
    assert {e.key for e in store.entries()} == {keys["good"], keys["garbage hits"]}
    assert store.survey().damaged == []
    assert all(os.path.lexists(p) for p in damaged_cache["not jittile's"])


def test_clear_removes_what_jittile_wrote_and_nothing_else(store, damaged_cache):
    done = run_cli("clear", directory=store.directory)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"removed 7 entries from {store.directory}\n"
    kept = damaged_cache["not jittile's"]
    assert all(os.path.lexists(p) for p in kept)
    remaining = sorted(p for p in store.directory.rglob("*"))
    assert remaining == sorted([*kept, kept[2].parent]), remaining  # the shard holding README stays


def test_clear_does_not_follow_a_symlinked_shard(store, tmp_path):
    key = put(store)
    outside = tmp_path / "outside"
    moved = outside / key[:2] / key
    outside.mkdir()
    store.entry_dir(key).parent.rename(outside / key[:2])
    (store.directory / key[:2]).symlink_to(outside / key[:2], target_is_directory=True)
    assert store.clear().removed == 0
    assert not os.path.lexists(store.directory / key[:2]) and (moved / "tma_load.cubin").exists()
