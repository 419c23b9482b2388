"""The ``jittile`` command line: cache list/show/clear/prune/why, and ``compile`` with a stand-in kernel.

CPU only: entries hold fake cubins and ``compile`` runs against a duck-typed kernel object, so neither a
compiler nor the rest of jittile is needed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
import uuid
from pathlib import Path

import pytest

import jittile.cache as cache
from jittile.cache.keys import make_key
from jittile.cli import main

REPO = Path(__file__).resolve().parents[1]
CUBIN = b"\x7fELF fake cubin"
PTX = ".version 8.7\n.target sm_90a\n.visible .entry tma_load() { ret; }\n"
SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                     /* 0x0000000000007919 */
        /*0020*/              @!P0 LDC R2, c[0x0][0x380] ;                /* 0x0000e000ff028b82 */
        /*0030*/                   EXIT ;                                 /* 0x000000000000794d */
"""
HEADER = ["KEY", "KERNEL", "TARGET", "STATICS", "SIZE", "HITS", "LAST USED", "SOURCE"]


def components(
    block: int = 64, target: str = "sm_90a", source: str = "def tma_load(A):\n    pass\n"
) -> dict:
    return {
        "source": source,
        "static_params": {"BLOCK": block},
        "target": target,
        "args": [{"shape": [16, 16], "dtype": "uint32"}],
        "versions": {"jittile": "0.1"},
    }


def put(name: str = "tma_load", extra: dict | None = None, **kw) -> str:
    comps = components(**kw)
    key = make_key(comps)
    meta = {
        "name": name,
        "qualname": name,
        "target": comps["target"],
        "key_components": comps,
        "static_params": comps["static_params"],
        "registers": 24,
        "shared_bytes": 2048,
        **(extra or {}),
    }
    assert cache.default_store().store(key, CUBIN, PTX, meta) is not None
    return key


def set_last_used(key: str, when: float) -> None:
    path = cache.default_store().entry_dir(key) / "usage.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), last_used=when)))


def why_paths(output: str) -> list[str]:
    match = re.search(r"entries differ in: (.*)$", output, re.MULTILINE)
    assert match, output
    return match.group(1).split(", ")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("JITTILE_CACHE", raising=False)
    return tmp_path / "cache"


# -- cache list / show / clear / prune -------------------------------------------------------------


def test_list_table(capsys, cache_dir):
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out == f"no entries in {cache_dir}\n"
    old, new = put(block=64), put(block=128, target="sm_100a")
    set_last_used(old, 1.0)
    cache.default_store().load(new)
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "KEY",
        "KERNEL",
        "TARGET",
        "STATICS",
        "SIZE",
        "HITS",
        "LAST",
        "USED",
        "SOURCE",
    ]
    starts = [lines[0].index(column) for column in HEADER]
    assert starts == sorted(starts)
    first, second = lines[1].split(), lines[2].split()
    assert first[:4] == [new[:12], "tma_load", "sm_100a", "BLOCK=128"] and first[5] == "1"
    assert second[:4] == [old[:12], "tma_load", "sm_90a", "BLOCK=64"] and second[5] == "0"
    assert re.fullmatch(r"\d+B|\d+\.\dK", first[4])
    assert lines[-1].startswith("2 entries,") and str(cache_dir) in lines[-1]


def test_show_prints_metadata_ptx_and_sass_summary(capsys, monkeypatch):
    key = put()
    toolchain = types.ModuleType("jittile.backend.toolchain")
    toolchain.disassemble = lambda cubin: SASS if cubin == CUBIN else ""
    monkeypatch.setitem(sys.modules, "jittile.backend.toolchain", toolchain)
    assert main(["cache", "show", key[:8]]) == 0
    out = capsys.readouterr().out
    assert f"entry {key}" in out and '"registers": 24' in out and "\nhits  0, last used " in out
    assert PTX.strip() in out
    summary = out.split("--- SASS summary ---\n", 1)[1]
    assert summary.startswith("4 instructions\n")
    assert re.search(r"^\s+LDC\s+2$", summary, re.MULTILINE) and "EXIT" in summary


def test_show_prints_the_recorded_plan_and_lowered_kernel(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jittile.backend.toolchain", None)
    site = {
        "node": 7,
        "location": ["/k.py", 22, 8],
        "opcode": "cp.async.bulk.tensor.2d.x",
        "family": "cp.async.bulk.tensor",
        "plan": [
            {
                "opcode": "cp.async.bulk.tensor.2d.x",
                "instance": [g],
                "coords": [0, 8 * g],
                "shared_offset": 512 * g,
                "bytes": 512,
                "fields": {},
            }
            for g in (0, 1)
        ],
    }
    key = put(
        extra={"kernel_ir": {"sites": [site]}, "lowered_source": "def tma_load(A):\n    pass\n"}
    )
    assert main(["cache", "show", key[:8]]) == 0
    out = capsys.readouterr().out
    metadata, rest = out.split("--- plan ---\n", 1)
    assert '"kernel_ir"' not in metadata and '"lowered_source"' not in metadata
    plan, rest = rest.split("\n\n--- lowered kernel ---\n", 1)
    assert plan.splitlines() == [
        "/k.py:22:8  cp.async.bulk.tensor.2d.x",
        "    cp.async.bulk.tensor.2d.x  coords [0, 0]  shared +0  512 bytes",
        "    cp.async.bulk.tensor.2d.x  coords [0, 8]  shared +512  512 bytes",
    ]
    assert rest.startswith("def tma_load(A):\n    pass\n\n--- PTX ---")


def test_show_without_toolchain_says_why(capsys, monkeypatch):
    key = put()
    monkeypatch.setitem(sys.modules, "jittile.backend.toolchain", None)
    assert main(["cache", "show", key]) == 0
    assert "(SASS unavailable: cannot import jittile.backend.toolchain" in capsys.readouterr().out


def test_show_unknown_key_fails(capsys):
    put()
    assert main(["cache", "show", "zz"]) == 1
    assert "no cache entry with key prefix 'zz'" in capsys.readouterr().err


def test_clear(capsys, cache_dir):
    put(block=1), put(block=2)
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"removed 2 entries from {cache_dir}\n"
    assert cache.entries() == []


def test_prune_keeps_most_recently_used(capsys):
    keys = [put(block=b) for b in (1, 2, 3)]
    for when, key in zip((30.0, 10.0, 20.0), keys):
        set_last_used(key, when)
    limit = cache.entries()[0].size + 10
    assert main(["cache", "prune", "--max-size", str(limit)]) == 0
    out = capsys.readouterr().out
    assert [e.key for e in cache.entries()] == [keys[0]]
    assert out.index(keys[1][:12]) < out.index(keys[2][:12]) and keys[0][:12] not in out
    assert "2 entries removed" in out


def test_prune_parses_sizes(capsys):
    put()
    assert main(["cache", "prune", "--max-size", "500M"]) == 0
    assert "0 entries removed" in capsys.readouterr().out and len(cache.entries()) == 1
    assert main(["cache", "prune", "--max-size", "lots"]) == 1
    assert "invalid size 'lots'" in capsys.readouterr().err


def test_output_into_a_closed_pipe_ends_quietly(cache_dir):
    """``jittile cache show KEY | head -1``: the reader leaves early, the command ends without a traceback."""
    key = put(extra={"lowered_source": "x = 1\n" * 100000})
    env = dict(os.environ, JITTILE_CACHE_DIR=str(cache_dir), PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, "-m", "jittile", "cache", "show", key],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    child.stdout.readline()
    child.stdout.close()
    assert child.wait(timeout=120) == 1
    assert child.stderr.read() == b""


# -- cache why -------------------------------------------------------------------------------------


def test_why_names_static_param(capsys):
    a, b = put(block=64), put(block=128)
    put(name="other", block=256)
    assert main(["cache", "why", "tma_load"]) == 0
    out = capsys.readouterr().out
    assert why_paths(out) == ["static_params.BLOCK"]
    table = out.split("\n\n")[0].splitlines()[2:]
    rows = {line.split()[0]: line.split()[1] for line in table}
    assert rows == {a[:12]: "64", b[:12]: "128"}


def test_why_names_target(capsys):
    put(target="sm_90a"), put(target="sm_100a")
    assert main(["cache", "why", "tma_load"]) == 0
    assert why_paths(capsys.readouterr().out) == ["target"]


def test_why_summarizes_long_values(capsys):
    put(source="def tma_load(A):\n    pass\n"), put(source="def tma_load(A):\n    return\n")
    assert main(["cache", "why", "tma_load"]) == 0
    out = capsys.readouterr().out
    assert why_paths(out) == ["source"] and re.search(r"<\d+ chars, sha256 [0-9a-f]{10}>", out)


def test_why_with_one_or_no_entries(capsys):
    key = put()
    assert main(["cache", "why", "tma_load"]) == 0
    assert f"1 entry ({key[:12]}); nothing to compare" in capsys.readouterr().out
    assert main(["cache", "why", "missing"]) == 1
    assert "no cache entries for kernel 'missing'" in capsys.readouterr().err


def test_cache_commands_report_disabled_cache(capsys, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")
    assert main(["cache", "list"]) == 1
    assert "the disk cache is off: JITTILE_CACHE=0" in capsys.readouterr().err


def test_python_dash_m(cache_dir):
    put(block=7)
    env = dict(os.environ, JITTILE_CACHE_DIR=str(cache_dir), PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "jittile", "cache", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cache_dir,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split()[:4] == HEADER[:4] and "BLOCK=7" in result.stdout


# -- compile ---------------------------------------------------------------------------------------

KERNEL_FILE = """
import jittile.cache as cache
from jittile.cache.keys import make_key


class Compiled:
    def __init__(self, specs, target):
        components = {"specs": repr(specs), "target": target}
        key = make_key(components)
        self.ptx = "// specs " + repr(specs) + "\\n"
        self.cubin = b"\\x7fELF"
        self.sass = "SASS for " + target
        self.plan = "plan of " + repr(specs)
        self.metadata = {"name": "saxpy", "target": target, "registers": 12, "shared_bytes": 0,
                         "local_bytes": 0, "key": key, "compile_seconds": 0.1}
        cache.default_store().store(key, self.cubin, self.ptx, dict(self.metadata, key_components=components))


class Kernel:
    def compile(self, *specs, target):
        return Compiled(specs, str(target))  # the CLI passes the Target it parsed

    @staticmethod
    def pyfunc(*specs):
        pass


saxpy = Kernel()
not_a_kernel = 3
"""


@pytest.fixture
def kernel_file(tmp_path) -> Path:
    path = tmp_path / f"kernels_{uuid.uuid4().hex}.py"
    path.write_text(KERNEL_FILE)
    yield path
    sys.modules.pop(path.stem, None)


def test_compile_summary_and_cache_path(capsys, kernel_file, cache_dir):
    assert main(["compile", f"{kernel_file}:saxpy", "--target", "sm_100a"]) == 0
    summary, plan = capsys.readouterr().out.split("\n\nplan:\n")
    (entry,) = cache.entries()
    assert plan == "plan of ()\n"
    fields = dict(line.split(None, 1) for line in summary.splitlines())
    assert fields == {
        "kernel": "saxpy",
        "target": "sm_100a",
        "key": entry.key[:12],
        "registers": "12",
        "shared": "0 bytes",
        "cache": str(entry.path),
    }
    assert entry.metadata["key_components"]["specs"] == "()"


def test_compile_ptx_and_sass_go_to_stdout(capsys, kernel_file):
    assert main(["compile", f"{kernel_file}:saxpy", "--target", "sm_90a", "--ptx"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "// specs ()\n" and "kernel" in captured.err
    assert main(["compile", f"{kernel_file}:saxpy", "--target", "sm_90a", "--sass"]) == 0
    assert capsys.readouterr().out == "SASS for sm_90a\n"
    with pytest.raises(SystemExit):
        main(["compile", f"{kernel_file}:saxpy", "--target", "sm_90a", "--ptx", "--sass"])


def test_compile_arg_specs(capsys, kernel_file, monkeypatch):
    language = types.ModuleType("jittile.language")
    language.T = types.SimpleNamespace(Tensor=lambda shape, dtype: ("Tensor", shape, dtype))
    monkeypatch.setitem(sys.modules, "jittile.language", language)
    argv = [
        "compile",
        f"{kernel_file}:saxpy",
        "--target",
        "sm_90a",
        "--ptx",
        "--arg",
        "uint32[16, 16]",
        "--arg",
        "float32[?,128]",
        "--arg",
        "int32=5",
        "--arg",
        "float32=2.5",
        "--arg",
        "uint8=0x10",
        "--arg",
        "bool=true",
        "--arg",
        "float16[]",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == (
        "// specs (('Tensor', (16, 16), 'uint32'), ('Tensor', (None, 128), "
        "'float32'), 5, 2.5, 16, True, ('Tensor', (), 'float16'))\n"
    )


def test_compile_memory_only_when_cache_off(capsys, kernel_file, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")
    assert main(["compile", f"{kernel_file}:saxpy", "--target", "sm_90a"]) == 0
    assert "memory only (JITTILE_CACHE=0)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "location, args, message",
    [
        ("{file}:saxpy", ["--arg", "int32=x"], "'x' is not a int32 value"),
        ("{file}:saxpy", ["--arg", "float32[4,n]"], "extents must be integers or '?'"),
        ("{file}:saxpy", ["--arg", "complex9[4]"], "unknown dtype"),
        ("{file}:saxpy", ["--arg", "float32"], "expected DTYPE[EXTENTS]"),
        ("{file}:missing", [], "defines no 'missing'"),
        ("{file}:not_a_kernel", [], "is not a jittile kernel"),
        ("{file}", [], "expected FILE.py:KERNEL"),
        ("/nonexistent/k.py:saxpy", [], "no such file"),
    ],
)
def test_compile_errors(capsys, kernel_file, location, args, message):
    argv = ["compile", location.format(file=kernel_file), "--target", "sm_90a", *args]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("jittile: error: ") and message in err


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "cache" in capsys.readouterr().out


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        main(["cache", "prune"])
    assert exit_info.value.code == 2


# -- first-hour polish -----------------------------------------------------------------------------


def test_version(capsys):
    from jittile import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out == f"jittile {__version__}\n"


def test_counts_read_as_english(capsys, cache_dir):
    put()
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 entry, ")
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"removed 1 entry from {cache_dir}\n"
    put()
    assert main(["cache", "prune", "--max-size", "0"]) == 0
    assert "\n1 entry removed; 0B left" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["clear"], ["prune", "--max-size", "0"]])
def test_clear_and_prune_leave_no_empty_folders(cache_dir, command):
    for block in range(6):
        put(block=block)
    assert len([p for p in cache_dir.iterdir() if p.is_dir()]) > 1
    assert main(["cache", *command]) == 0
    assert [p for p in cache_dir.rglob("*")] == []


def test_prune_keeps_the_folders_of_entries_it_keeps(cache_dir):
    kept = put(block=1)
    assert main(["cache", "prune", "--max-size", "1G"]) == 0
    assert (cache_dir / kept[:2] / kept).is_dir()


def test_list_shows_where_each_kernel_is_defined(capsys):
    put(extra={"source_file": "/home/me/kernels/copy.py", "source_line": 12})
    assert main(["cache", "list"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert row[header.index("SOURCE") :].strip() == "/home/me/kernels/copy.py:12"  # the whole path


def test_entries_have_a_short_repr():
    key = put()
    (entry,) = cache.entries()
    assert (
        repr(entry)
        == f"<jittile cache entry {key[:12]} tma_load sm_90a, {entry.size} bytes, 0 hits>"
    )


def _source_entry(text: str, block: int, target: str = "sm_90a") -> str:
    return put(
        block=block,
        target=target,
        source=text,
        extra={"source_text": text, "source_file": "/k/copy.py", "source_line": 3},
    )


def test_why_diffs_the_source_and_names_changed_statics(capsys):
    before = "@jittile.kernel\ndef tma_load(A):\n    x = 1\n    A[0] = x\n"
    after = "@jittile.kernel\ndef tma_load(A):\n    x = 2\n    A[0] = x\n"
    old = _source_entry(before, block=64)
    _source_entry(before, block=64, target="sm_100a")  # another target: never the comparison
    new = _source_entry(after, block=128)
    assert main(["cache", "why", "tma_load"]) == 0
    out = capsys.readouterr().out
    changes = out.split("\n\n", 1)[1].splitlines()
    assert changes[0].startswith(f"newest entry {new[:12]} (sm_90a, created ")
    assert f"against the nearest sm_90a entry {old[:12]}" in changes[0]
    assert "  static_params.BLOCK: 64 -> 128" in changes
    assert f"    --- tma_load {old[:12]} (copy.py:3)" in changes
    assert f"    +++ tma_load {new[:12]} (copy.py:3)" in changes
    assert "    -    x = 1" in changes and "    +    x = 2" in changes
    assert "     def tma_load(A):" in changes


def test_why_picks_the_nearest_entry_of_the_same_target(capsys):
    text = "def tma_load(A):\n    pass\n"
    far = put(
        block=1,
        target="sm_90a",
        source="def tma_load(A):\n    return\n",
        extra={"source_text": "def tma_load(A):\n    return\n", "source_file": "/k/copy.py"},
    )
    near = _source_entry(text, block=2)
    _source_entry(text, block=3, target="sm_100a")
    newest = _source_entry(text, block=3)
    assert main(["cache", "why", "tma_load"]) == 0
    out = capsys.readouterr().out
    assert f"entry {newest[:12]} (sm_90a" in out and f"nearest sm_90a entry {near[:12]}" in out
    assert far[:12] not in out.split("\n\n", 1)[1] and "source:" not in out.split("\n\n", 1)[1]


def test_why_says_when_an_entry_has_no_source_text(capsys):
    put(block=1, source="a")
    put(block=2, source="b", extra={"source_text": "b\n"})
    assert main(["cache", "why", "tma_load"]) == 0
    assert "  source: changed (an entry has no recorded source text)" in capsys.readouterr().out


def test_why_without_another_entry_of_the_newest_target(capsys):
    put(target="sm_90a")
    newest = put(target="sm_100a")
    assert main(["cache", "why", "tma_load"]) == 0
    out = capsys.readouterr().out
    assert f"newest entry {newest[:12]} (sm_100a" in out
    assert "no other sm_100a entry to compare it with" in out


# -- issue #20: entries by kernel name, per-kernel clear and list, --json, why per file ---------


def test_entries_are_files_named_after_the_kernel(cache_dir):
    key = put(name="tile_copy")
    entry_dir = cache_dir / key[:2] / key
    assert sorted(p.name for p in entry_dir.iterdir()) == [
        "tile_copy.cubin",
        "tile_copy.json",
        "tile_copy.ptx",
        "usage.json",
    ]
    assert [p.parent.name for p in cache_dir.glob("*/*/tile_copy.cubin")] == [key]


def test_list_and_clear_one_kernel(capsys, cache_dir):
    mine, other = put(name="tile_copy", block=1), put(name="other", block=2)
    assert main(["cache", "list", "tile_copy"]) == 0
    out = capsys.readouterr().out
    assert mine[:12] in out and other[:12] not in out and "1 entry," in out
    assert main(["cache", "list", "missing"]) == 0
    assert capsys.readouterr().out.startswith("no entries of kernel 'missing' in ")
    assert main(["cache", "clear", "tile_copy"]) == 0
    assert capsys.readouterr().out == f"removed 1 entry of kernel 'tile_copy' from {cache_dir}\n"
    assert [e.key for e in cache.entries()] == [other]
    assert cache.clear("other") == 1 and cache.entries() == []


def test_list_json(capsys, cache_dir):
    key = put(name="tile_copy", extra={"source_file": "/k/a.py", "source_line": 4})
    put(name="other", block=3)
    assert main(["cache", "list", "--json", "tile_copy"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["entries"]
    assert data["directory"] == str(cache_dir) and data["damaged"] == []
    assert (entry["key"], entry["kernel"], entry["source_file"], entry["source_line"]) == (
        key,
        "tile_copy",
        "/k/a.py",
        4,
    )
    assert entry["files"]["cubin"] == str(cache_dir / key[:2] / key / "tile_copy.cubin")
    assert entry["static_params"] == {"BLOCK": 64} and entry["hits"] == 0


def test_why_keeps_two_files_kernels_of_one_name_apart(capsys):
    a1 = put(name="tile_copy", block=1, extra={"source_file": "/proj/a/copy.py"})
    a2 = put(name="tile_copy", block=2, extra={"source_file": "/proj/a/copy.py"})
    b1 = put(name="tile_copy", target="sm_100a", extra={"source_file": "/proj/b/copy.py"})
    assert main(["cache", "why", "tile_copy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tile_copy: 2 kernels of that name, compared separately")
    assert "/proj/a/copy.py:tile_copy: 2 entries differ in: static_params.BLOCK" in out
    assert f"/proj/b/copy.py:tile_copy: 1 entry ({b1[:12]}); nothing to compare" in out
    assert "target" not in why_paths(out)  # b's sm_100a entry is not compared with a's
    assert main(["cache", "why", "b/copy.py:tile_copy"]) == 0
    assert (
        capsys.readouterr().out == f"/proj/b/copy.py:tile_copy: 1 entry ({b1[:12]}); "
        f"nothing to compare\n"
    )
    assert main(["cache", "why", "--json", "/proj/a/copy.py:tile_copy"]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["kernels"]
    assert (kernel["source_file"], kernel["differ_in"]) == (
        "/proj/a/copy.py",
        ["static_params.BLOCK"],
    )
    assert {e["key"]: e["components"] for e in kernel["entries"]} == {
        a1: {"static_params.BLOCK": 1},
        a2: {"static_params.BLOCK": 2},
    }
    assert kernel["changes"] == [{"path": "static_params.BLOCK", "old": 1, "new": 2}] or kernel[
        "changes"
    ] == [{"path": "static_params.BLOCK", "old": 2, "new": 1}]
