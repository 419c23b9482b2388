"""The disk cache through real kernels (issue #5): real cubins compiled on this CPU-only machine.

Kernels live in temporary files (jittile reads their source with ``inspect``); an edit is a new file
imported under a fresh module name. Child processes compile them with their own ``JITTILE_CACHE_DIR``;
the tests assert on entries, hits and metadata (never on timing). Compiled entries are reused: one
child builds the base entry, cache directories for the other cases start as copies of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jittile
import jittile.cache as cache
from jittile import T
from jittile.cache.keys import differing_components
from jittile.cache.store import DiskStore
from jittile.cli import main

REPO = Path(__file__).resolve().parents[1]
KERNEL = "cache_probe"

KERNEL_SOURCE = '''\
"""Cache-key probe: {note}."""
import jittile
from jittile import T
{padding}
TILE = {tile}


class Cfg:
    PAD = {pad}


@jittile.kernel
def cache_probe(A, Out, BLOCK: T.constexpr):
    {docstring}
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x"){comment}
    buf = T.alloc_shared((BLOCK * TILE,), "float32", align=16)
    for i in range(TILE):
        buf[tid * TILE + i] = A[tid * TILE + i]
    T.cuda.cta_sync()
    for i in range(TILE):
        Out[tid * TILE + i] = buf[BLOCK * TILE - 1 - tid * TILE - i] + Cfg.PAD
'''

# Runs in the children: a list of steps from a JSON file; prints one JSON result per step.
DRIVER = r"""
import hashlib, importlib.util, json, os, sys, time, warnings

import jittile
from jittile import T

modules = {}


def load(path, name):
    if name not in modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules[name]


def run(step):
    os.environ["JITTILE_CACHE_DIR"] = step["dir"]
    kernel = load(step["file"], step["module"]).cache_probe
    if step.get("ready"):
        open(step["ready"], "w").close()
        deadline = time.time() + 120
        while not os.path.exists(step["go"]) and time.time() < deadline:
            time.sleep(0.005)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ck = kernel.compile(T.Tensor((None,), "float32"), T.Tensor((None,), "float32"), step["block"],
                            target=step["target"])
    return {"cache": ck.metadata.get("cache"), "key": ck.metadata["key"],
            "source_line": ck.metadata.get("source_line"), "cubin_size": len(ck.cubin),
            "cubin_sha256": hashlib.sha256(ck.cubin).hexdigest(), "ptx_has_entry": ".entry" in ck.ptx,
            "warnings": [[w.category.__name__, str(w.message)] for w in caught],
            "jittile_source": ck.metadata["key_components"]["versions"]["jittile_source"],
            "kernel_cache": [[e.key, e.hits] for e in kernel.cache]}


for step in json.load(open(sys.argv[1])):
    print("RESULT " + json.dumps(run(step)), flush=True)
"""


def child_env(**extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), JITTILE_CACHE="1")
    env.pop("JITTILE_DEBUG", None)
    env.update(extra)
    return env


def write_steps(workdir: Path, name: str, steps: list[dict]) -> Path:
    path = workdir / f"{name}.json"
    path.write_text(
        json.dumps([{k: str(v) if isinstance(v, Path) else v for k, v in s.items()} for s in steps])
    )
    return path


def run_driver(workdir: Path, name: str, steps: list[dict], **popen) -> subprocess.CompletedProcess:
    steps_file = write_steps(workdir, name, steps)
    return subprocess.run(
        [sys.executable, str(workdir / "driver.py"), str(steps_file)],
        cwd=workdir,
        env=popen.pop("env", child_env()),
        text=True,
        timeout=300,
        **popen,
    )


def results(stdout: str) -> list[dict]:
    return [
        json.loads(line[len("RESULT ") :])
        for line in stdout.splitlines()
        if line.startswith("RESULT ")
    ]


def step(
    work: dict, version: str, module: str, directory: Path, block: int = 32, target: str = "sm_90a"
) -> dict:
    return {
        "file": work["files"][version],
        "module": module,
        "dir": directory,
        "block": block,
        "target": target,
    }


def same_jittile_code(*found: dict) -> None:
    """Skip when jittile's own code-generating sources changed between the compared processes (an
    edit saved while the test ran): the key includes their digest, so a miss would then be right."""
    digests = {r["jittile_source"] for r in found}
    if len(digests) > 1:
        pytest.skip(
            "jittile's sources were edited while this test ran (versions.jittile_source differs)"
        )


def entry_dirs(directory: Path) -> list[Path]:
    """Every entry directory, complete or not (the store's layout: <key[:2]>/<key>)."""
    return sorted(p for p in directory.glob("??/*") if re.fullmatch(r"[0-9a-f]{64}", p.name))


def leftovers(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("??/*") if p.name.startswith((".tmp-", ".trash-")))


def copy_cache(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.fixture(autouse=True)
def disk_cache_on(monkeypatch):
    """conftest turns the disk cache off for the test process; these tests read real entries."""
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.delenv("JITTILE_DEBUG", raising=False)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict:
    """The kernel file versions, and a cache holding one real entry built by a first process."""
    root = tmp_path_factory.mktemp("cache_kernel")
    (root / "driver.py").write_text(DRIVER)
    base = dict(
        note="base",
        padding="",
        tile=4,
        pad=1,
        docstring='"""Reverse through shared memory."""',
        comment="",
    )
    versions = {
        "base": base,
        # Only comments, blank lines (every line moves), the docstring and the module docstring change.
        "comment": dict(
            base,
            note="edited comments",
            padding="\n# Tile size of one thread.\n\n",
            docstring='"""Reverse through shared memory (docstring edited)."""',
            comment="  # this thread's index",
        ),
        "tile": dict(base, tile=8),
        "pad": dict(base, pad=2),
    }
    files = {}
    for name, fields in versions.items():
        files[name] = root / f"probe_{name}.py"
        files[name].write_text(KERNEL_SOURCE.format(**fields))
    found = {"root": root, "files": {k: str(v) for k, v in files.items()}}
    base_dir = root / "base"
    done = run_driver(
        root, "base", [step(found, "base", "probe_base", base_dir)], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    [built] = results(done.stdout)
    assert built["cache"] == "stored" and built["warnings"] == [], built
    found.update(base_dir=base_dir, base=built)
    return found


@pytest.fixture(scope="module")
def scenario(work) -> dict:
    """A second process: reuse, comment edit, one changed component per cache directory, corrupted
    entries and a cache directory that cannot be created."""
    root = work["root"]
    dirs = {
        name: copy_cache(work["base_dir"], root / name)
        for name in ("reuse", "block", "target", "tile", "pad", "truncated", "garbage")
    }
    key = work["base"]["key"]
    entry = dirs["truncated"] / key[:2] / key
    cubin = (entry / "cache_probe.cubin").read_bytes()
    (entry / "cache_probe.cubin").write_bytes(cubin[: len(cubin) // 2])
    (dirs["garbage"] / key[:2] / key / "cache_probe.json").write_text(
        '{"format_version": 1, "key": '
    )
    blocker = root / "not_a_directory"
    blocker.write_text("a regular file where the cache directory's parent should be")
    dirs["readonly"] = blocker / "cache"
    steps = {
        "reuse": step(work, "base", "probe_a", dirs["reuse"]),
        "comment": step(work, "comment", "probe_comment", dirs["reuse"]),
        "block": step(work, "base", "probe_a", dirs["block"], block=16),
        "target": step(work, "base", "probe_a", dirs["target"], target="sm_100a"),
        "tile": step(work, "tile", "probe_tile", dirs["tile"]),
        "pad": step(work, "pad", "probe_pad", dirs["pad"]),
        # Fresh modules: a kernel object keeps compiled kernels in memory, a new one starts empty.
        "truncated": step(work, "base", "probe_b", dirs["truncated"]),
        "garbage": step(work, "base", "probe_c", dirs["garbage"]),
        "readonly": step(work, "base", "probe_d", dirs["readonly"]),
        "readonly_again": step(work, "base", "probe_d", dirs["readonly"], block=64),
    }
    done = run_driver(root, "scenario", list(steps.values()), capture_output=True)
    assert done.returncode == 0, done.stderr
    found = dict(zip(steps, results(done.stdout)))
    assert len(found) == len(steps), done.stdout
    return {"dirs": dirs, "results": found, "stderr": done.stderr, "key": key}


def why(monkeypatch, capsys, directory: Path) -> str:
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(directory))
    assert main(["cache", "why", KERNEL]) == 0
    return capsys.readouterr().out


def test_second_process_reuses_the_entry(work, scenario):
    first, second = work["base"], scenario["results"]["reuse"]
    same_jittile_code(first, second)
    assert second["cache"] == "hit" and second["key"] == first["key"]
    assert second["cubin_sha256"] == first["cubin_sha256"]
    assert second["kernel_cache"] == [[first["key"], 1]]  # the hit is counted on disk
    assert [p.name for p in entry_dirs(scenario["dirs"]["reuse"])] == [first["key"]]


def test_comment_edit_hits_the_same_entry(work, scenario, monkeypatch, capsys):
    reuse, comment = scenario["results"]["reuse"], scenario["results"]["comment"]
    same_jittile_code(work["base"], reuse, comment)
    assert comment["cache"] == "hit" and comment["key"] == work["base"]["key"]
    assert comment["source_line"] == reuse["source_line"] + 3  # moved, and reported where it is now
    assert comment["kernel_cache"] == [[work["base"]["key"], 2]]  # hits went up, no new entry
    assert [p.name for p in entry_dirs(scenario["dirs"]["reuse"])] == [work["base"]["key"]]
    assert "1 entry" in why(monkeypatch, capsys, scenario["dirs"]["reuse"])


@pytest.mark.parametrize(
    "case, component, old, new",
    [
        ("block", "static_params.BLOCK", "32", "16"),
        ("target", "target", "sm_90a", "sm_100a"),
        ("tile", "globals.TILE", "4", "8"),
        ("pad", "globals.Cfg.PAD", "1", "2"),  # read through a class: folded, so it must be keyed
    ],
)
def test_changed_component_makes_a_new_entry_and_why_names_it(
    work, scenario, monkeypatch, capsys, case, component, old, new
):
    result = scenario["results"][case]
    same_jittile_code(work["base"], result)
    assert result["cache"] == "stored" and result["key"] != work["base"]["key"]
    assert len(entry_dirs(scenario["dirs"][case])) == 2
    out = why(monkeypatch, capsys, scenario["dirs"][case])
    if case in ("tile", "pad"):
        # The edited versions are other files here (probe_tile.py...): other kernels, which why
        # compares separately, so the comparison is asked of the entries' components directly.
        assert out.startswith("cache_probe: 2 kernels of that name, compared separately"), out
        base, edited = sorted(
            cache_entries(scenario["dirs"][case], monkeypatch),
            key=lambda e: e.key != work["base"]["key"],
        )
        assert differing_components(
            base.metadata["key_components"], edited.metadata["key_components"]
        ) == [component]
        return
    match = re.search(r"^/\S+\.py:cache_probe: 2 entries differ in: (.*)$", out, re.MULTILINE)
    assert match and match.group(1) == component, out
    rows = {line.split()[0]: line.split()[1] for line in out.split("\n\n")[0].splitlines()[2:]}
    assert rows == {work["base"]["key"][:12]: old, result["key"][:12]: new}, out


def cache_entries(directory: Path, monkeypatch) -> list:
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(directory))
    return cache.entries()


@pytest.mark.parametrize(
    "case, reason", [("truncated", "cache_probe.cubin has"), ("garbage", "not valid JSON")]
)
def test_corrupt_entry_is_rebuilt_with_a_warning(work, scenario, case, reason):
    result = scenario["results"][case]
    same_jittile_code(work["base"], result)
    broken = [m for c, m in result["warnings"] if c == "JittileWarning"]
    assert len(broken) == 1 and "broken entry" in broken[0] and reason in broken[0], result[
        "warnings"
    ]
    assert result["cache"] == "stored" and result["key"] == work["base"]["key"]
    store = DiskStore(scenario["dirs"][case])
    assert [p.name for p in entry_dirs(store.directory)] == [work["base"]["key"]]
    entry = store.load(work["base"]["key"])  # verifies sizes and SHA-256 of the rebuilt files
    # The rebuilt cubin is stored (not byte-equal to the first build's: numba numbers symbols per process).
    assert entry is not None and hashlib.sha256(entry.cubin()).hexdigest() == result["cubin_sha256"]
    assert entry.metadata["param_layout"] and entry.hits == 1
    assert not leftovers(store.directory)


def test_unwritable_cache_directory_still_compiles_in_memory(scenario):
    first, again = scenario["results"]["readonly"], scenario["results"]["readonly_again"]
    assert first["cache"] == again["cache"] == "off"
    assert first["cubin_size"] > 0 and again["cubin_size"] > 0 and first["ptx_has_entry"]
    warned = [m for c, m in first["warnings"] + again["warnings"] if c == "JittileWarning"]
    assert len(warned) == 1 and "memory only" in warned[0], warned
    assert first["kernel_cache"] == again["kernel_cache"] == []


def test_no_debug_output_without_jittile_debug(scenario):
    assert "jittile cache:" not in scenario["stderr"]


def test_prune_removes_least_recently_used_real_entries(work, scenario, monkeypatch, capsys):
    directory = work["root"] / "prune"
    copy_cache(work["base_dir"], directory)
    others = {case: scenario["results"][case]["key"] for case in ("block", "target", "tile")}
    for case, key in others.items():
        shutil.copytree(scenario["dirs"][case] / key[:2] / key, directory / key[:2] / key)
    store = DiskStore(directory)
    by_key = {e.key: e for e in store.entries()}
    assert len(by_key) == 4 and all(e.size > 1000 for e in by_key.values())
    # Oldest use first: block, target, tile (compiled in that order); then a hit makes base the newest.
    time.sleep(0.01)
    assert store.load(work["base"]["key"]) is not None
    keep = [others["tile"], work["base"]["key"]]
    sizes = {e.key: e.size for e in store.entries()}  # the hit rewrote base's meta.json
    limit = sum(sizes[k] for k in keep)
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(directory))
    assert main(["cache", "prune", "--max-size", str(limit)]) == 0
    out = capsys.readouterr().out
    removed = re.findall(r"^removed ([0-9a-f]{12})", out, re.MULTILINE)
    assert removed == [others["block"][:12], others["target"][:12]], out
    assert sorted(p.name for p in entry_dirs(directory)) == sorted(keep)
    assert all(store.load(k) is not None for k in keep)


def test_eight_processes_leave_one_valid_entry(work):
    root = work["root"] / "race"
    directory, gate = root / "cache", root / "gate"
    gate.mkdir(parents=True)
    children = []
    for i in range(8):
        s = step(work, "base", "probe_race", directory, block=64)
        s.update(ready=gate / f"ready{i}", go=gate / "go")
        steps_file = write_steps(root, f"race{i}", [s])
        children.append(
            subprocess.Popen(
                [sys.executable, str(work["root"] / "driver.py"), str(steps_file)],
                cwd=root,
                env=child_env(),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    try:
        deadline = time.time() + 120
        while len(list(gate.glob("ready*"))) < 8 and time.time() < deadline:
            assert all(c.poll() is None for c in children), [c.communicate() for c in children]
            time.sleep(0.01)
        (gate / "go").touch()  # all eight are imported and waiting: they start compiling together
        outputs = [c.communicate(timeout=300) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    assert all(c.returncode == 0 for c in children), [err for _, err in outputs]
    found = [results(out)[0] for out, _ in outputs]
    same_jittile_code(*found)
    keys = {r["key"] for r in found}
    assert len(keys) == 1
    assert sum(r["cache"] == "stored" for r in found) >= 2, found  # they really raced
    assert all(r["cache"] in ("stored", "hit") and not r["warnings"] for r in found), found
    [entry_dir] = entry_dirs(directory)
    assert entry_dir.name in keys and not leftovers(directory)
    entry = DiskStore(directory).load(entry_dir.name)
    assert entry is not None
    assert hashlib.sha256(entry.cubin()).hexdigest() in {r["cubin_sha256"] for r in found}


def test_debug_logs_hits_misses_and_the_differing_component(work, capfd):
    directory = copy_cache(work["base_dir"], work["root"] / "debug")
    steps = [
        step(work, "base", "probe_dbg", directory),
        step(work, "base", "probe_dbg", directory, block=8),
    ]
    # Inherited stderr: capfd sees what the child writes to file descriptor 2.
    done = run_driver(
        work["root"],
        "debug",
        steps,
        env=child_env(JITTILE_DEBUG="cache"),
        stdout=subprocess.DEVNULL,
    )
    assert done.returncode == 0
    err = capfd.readouterr().err
    if "versions.jittile_source" in err:
        same_jittile_code(work["base"], {"jittile_source": "edited meanwhile"})
    base = work["base"]["key"][:12]
    lines = [line for line in err.splitlines() if line.startswith("jittile cache: ")]
    assert re.search(
        rf"^jittile cache: hit cache_probe {base} \(sm_90a, 1 hits", err, re.MULTILINE
    ), err
    [miss] = [line for line in lines if "miss" in line]
    assert miss.endswith(f"miss: differs from entry {base} in static_params.BLOCK (32 -> 8)"), miss
    assert any(line.startswith("jittile cache: stored cache_probe") for line in lines), lines


# -- key components in-process (no compiler) -------------------------------------------------------


def test_referenced_globals_follow_the_kernel_body():
    import ast
    import types

    from jittile import T
    from jittile.cache.components import referenced_globals

    cfg = types.ModuleType("cfg")
    cfg.TILE, cfg.helper = 16, len
    tree = ast.parse(
        "def k(A, N: T.Constexpr):\n"
        "    '''doc'''\n"
        "    x = T.cuda.thread_idx('x') + cfg.TILE + SHAPE[0] + N + WIDTH\n"
        "    for y in range(x):\n"
        "        A[y] = cfg.helper(x) + Cfg.PAD + shadowed\n"
        "    shadowed = 1\n"
    ).body[0]
    Cfg = type("Cfg", (), {"PAD": 3})
    found = referenced_globals(
        tree,
        {"T": T, "cfg": cfg, "SHAPE": (4, 5), "N": 99, "Cfg": Cfg, "shadowed": 7, "WIDTH": 1},
        {"WIDTH": 2},
    )
    # Closure before module globals; parameters and assigned names shadow; code is left out.
    assert found == {"Cfg.PAD": "3", "SHAPE": "(4, 5)", "WIDTH": "2", "cfg.TILE": "16"}


def test_value_text_of_arrays_layouts_and_code():
    import numpy as np

    from jittile import T
    from jittile.cache.components import value_text
    from jittile.layout import swizzle

    a, b = np.arange(4, dtype="int32"), np.arange(4, dtype="int32")
    assert value_text(a) == value_text(b) != value_text(b[::-1].copy())
    assert value_text(swizzle(3, (64, 32), "float32")).startswith("ComposeLayout(")
    assert value_text(T.Tensor((16, None), "uint32")) == "T.Tensor((16, None), 'uint32')"
    assert value_text(T) is None and value_text(T.ptx) is None and value_text(np.float32) is None
    assert value_text(tuple(range(1000))).startswith("<")  # long values are digested


def test_source_digest_ignores_docstring_and_positions_only():
    import ast

    from jittile.cache.components import source_digest

    def digest(text: str) -> str:
        return source_digest(ast.parse(text).body[0])

    base = digest("def k(A):\n    '''doc'''\n    A[0] = 1\n")
    assert digest("\n\ndef k(A):  # moved\n    '''other doc'''\n\n    A[0] = 1  # one\n") == base
    assert digest("def k(A):\n    A[0] = 1\n") == base
    assert digest("def k(A):\n    A[0] = 2\n") != base
    assert digest("def k(A):\n    '''doc'''\n    A[0] = 1\n    A[1] = 1\n") != base


def test_toolchain_versions_match_installed_distributions():
    from importlib import metadata

    from jittile.kernel import toolchain_versions

    versions = toolchain_versions()
    assert versions["numba-cuda"] == metadata.version("numba-cuda")
    assert versions["nvvm"] == metadata.version("nvidia-nvvm")
    assert versions["nvjitlink"] == metadata.version("nvidia-nvjitlink")
    assert versions["llvmlite"] == metadata.version("llvmlite")
    assert re.fullmatch(r"[0-9a-f]{64}", versions["jittile_source"])


def test_why_table_reads_dotted_global_names():
    from jittile.cache.keys import lookup

    components = {"globals": {"cfg.TILE": "16", "cfg": "x"}, "args": [{"dtype": "f32"}]}
    assert lookup(components, "globals.cfg.TILE") == "16"
    assert lookup(components, "globals.cfg") == "x"
    assert lookup(components, "args.0.dtype") == "f32"
    assert repr(lookup(components, "globals.nope")) == "<absent>"


def _applying(fn):
    """A kernel applying ``fn``, a closure variable bound to code (a ``T`` math function)."""

    @jittile.kernel
    def apply(X: T.Tensor((32,), "float32"), Out: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.thread_idx("x")
        Out[i] = fn(X[i])

    return apply


def test_a_closure_bound_to_other_code_is_another_key(tmp_path, monkeypatch):
    """``fn = T.exp2`` and ``fn = T.log2`` compile differently: the disk cache must not hand one
    the other's cubin (it did: code values were left out of the key)."""
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path))
    exp2 = _applying(T.exp2).compile(target="sm_90a")
    log2 = _applying(T.log2).compile(target="sm_90a")
    assert exp2.metadata["key"] != log2.metadata["key"]
    assert "ex2.approx" in exp2.ptx and "lg2.approx" in log2.ptx and "ex2.approx" not in log2.ptx
    again = _applying(T.exp2).compile(target="sm_90a")
    assert again.metadata["cache"] == "hit" and again.ptx == exp2.ptx
