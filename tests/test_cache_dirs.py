"""Cache directories that cannot be used as usual (issue #11): read-only ones are still read, odd
``JITTILE_CACHE_DIR`` values give one clear message, and kernels compile in every case.

Permissions are enforced for real: as root (which ignores them), the child processes that must meet
them drop the capabilities that override file permissions before they start; other users need no
help. The test skips where neither is possible.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from jittile.cache.keys import make_key
from jittile.cache.store import DiskStore
from jittile.errors import JittileWarning

REPO = Path(__file__).resolve().parents[1]
CUBIN = b"\x7fELF fake cubin " + bytes(range(256))
PTX = ".version 8.7\n.target sm_90a\n.visible .entry tma_load() { ret; }\n"
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2
CANNOT_RESTRICT = 97

TINY_KERNEL = """\
import jittile
from jittile import T


@jittile.kernel
def tiny(A, Out, SCALE: T.constexpr):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    Out[tid] = A[tid] * SCALE
"""

# Compiles the tiny kernel once per (cache directory, SCALE) step, each with a fresh kernel object,
# and prints what happened: the cache outcome and the warnings.
COMPILE = r"""
import importlib.util, json, os, sys, warnings
from jittile import T

F32 = T.Tensor((32,), "float32")
results = []
for n, (directory, scale) in enumerate(json.loads(sys.argv[2])):
    os.environ["JITTILE_CACHE_DIR"] = directory
    spec = importlib.util.spec_from_file_location(f"tiny_{n}", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = module.tiny.compile(F32, F32, scale, target="sm_90a")
    results.append({"cache": compiled.metadata["cache"], "cubin": len(compiled.cubin),
                    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]})
print(json.dumps(results))
"""


def components(block: int = 64) -> dict:
    return {
        "source": "def tma_load(A):\n    pass\n",
        "static_params": {"BLOCK": block},
        "target": "sm_90a",
    }


def put(store: DiskStore, block: int = 64) -> str:
    comps = components(block)
    key = make_key(comps)
    meta = {"name": "tma_load", "target": "sm_90a", "key_components": comps, "registers": 24}
    assert store.store(key, CUBIN, PTX, meta) is not None
    return key


def _without_permission_override() -> None:
    """Runs in the child before exec: as root, drop the capabilities that override file permissions
    from the bounding set, so that the new program never has them."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            os._exit(CANNOT_RESTRICT)


def child_env(**extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), JITTILE_CACHE="1")
    env.pop("JITTILE_DEBUG", None)
    env.update(extra)
    return env


def run(argv: list[str], *, restricted: bool, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=300,
        preexec_fn=_without_permission_override if restricted else None,
    )


def cli(
    *argv: str, directory: Path, restricted: bool = True, **env: str
) -> subprocess.CompletedProcess:
    return run(
        [sys.executable, "-m", "jittile", "cache", *argv],
        restricted=restricted,
        JITTILE_CACHE_DIR=str(directory),
        **env,
    )


def python(
    code: str, *args: str, restricted: bool = True, **env: str
) -> subprocess.CompletedProcess:
    return run([sys.executable, "-c", textwrap.dedent(code), *args], restricted=restricted, **env)


def set_modes(root: Path, directories: int, files: int) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(directories if path.is_dir() else files)


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch):
    """conftest turns the disk cache off for the test process; these tests use it."""
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.delenv("JITTILE_DEBUG", raising=False)


@pytest.fixture(scope="module")
def permissions_enforced(tmp_path_factory) -> None:
    """Skip unless a restricted child really meets permissions: a write into a read-only folder fails."""
    locked = tmp_path_factory.mktemp("probe") / "locked"
    locked.mkdir(mode=0o555)
    try:
        done = python(f"open({str(locked / 'x')!r}, 'w')")
    finally:
        locked.chmod(0o755)
    if (
        done.returncode == 0
        or done.returncode == CANNOT_RESTRICT
        or "PermissionError" not in done.stderr
    ):
        pytest.skip("file permissions cannot be enforced on a child process here")


@pytest.fixture
def read_only(tmp_path, permissions_enforced):
    """Makes a directory tree read-only (folders r-x, files r--), and writable again afterwards."""
    locked = []

    def lock(directory: Path) -> Path:
        set_modes(directory, 0o555, 0o444)
        locked.append(directory)
        return directory

    yield lock
    for directory in locked:
        set_modes(directory, 0o755, 0o644)


@pytest.fixture
def kernel_file(tmp_path) -> Path:
    path = tmp_path / "tiny.py"
    path.write_text(TINY_KERNEL)
    return path


def compile_steps(kernel_file: Path, steps: list, restricted: bool) -> list[dict]:
    done = run(
        [sys.executable, "-c", COMPILE, str(kernel_file), json.dumps(steps)], restricted=restricted
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


# -- read-only cache directories -----------------------------------------------------------------------


def test_read_only_cache_is_read_and_stores_are_skipped_quietly(tmp_path, read_only):
    directory = tmp_path / "cache"
    key = put(DiskStore(directory))
    other = make_key(components(128))
    read_only(directory)
    done = python(
        f"""
        import warnings
        from pathlib import Path
        from jittile.cache.keys import make_key
        from jittile.cache.store import DiskStore
        warnings.simplefilter("error")
        store = DiskStore(Path({str(directory)!r}))
        assert store.enabled and not store.writable, store.read_only_reason
        entry = store.load({key!r})
        assert entry.cubin() == {CUBIN!r} and entry.ptx() == {PTX!r} and entry.hits == 1
        meta = {{"name": "tma_load", "target": "sm_90a", "key_components": {components(128)!r}}}
        assert store.store({other!r}, {CUBIN!r}, {PTX!r}, meta) is None
        assert [e.key for e in store.entries()] == [{key!r}]
        print("read-only:", store.read_only_reason)
    """,
        JITTILE_DEBUG="cache",
    )
    assert done.returncode == 0, done.stderr
    assert "Permission denied" in done.stdout
    debug = done.stderr.splitlines()
    assert any("entries are read, new ones are not stored" in line for line in debug), debug
    assert any(line.startswith(f"jittile cache: not storing {other[:12]}") for line in debug), debug
    assert json.loads((DiskStore(directory).entry_dir(key) / "usage.json").read_text())["hits"] == 0


def test_commands_on_a_read_only_cache(tmp_path, read_only):
    directory = tmp_path / "cache"
    store = DiskStore(directory)
    keys = [put(store, block) for block in (16, 32)]
    read_only(directory)
    listed = cli("list", directory=directory)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert (
        all(k[:12] in listed.stdout for k in keys)
        and f"in {directory} (read-only)" in listed.stdout
    )
    shown = cli("show", keys[0][:8], directory=directory)
    assert shown.returncode == 0 and PTX.strip() in shown.stdout and "Traceback" not in shown.stderr
    why = cli("why", "tma_load", directory=directory)
    assert why.returncode == 0 and "static_params.BLOCK" in why.stdout
    pruned = cli("prune", "--max-size", "0", directory=directory)
    assert pruned.returncode == 1 and "0 entries removed" in pruned.stdout
    assert pruned.stderr.splitlines() == [
        f"jittile: some entries could not be removed from {directory} (read-only)"
    ]
    cleared = cli("clear", directory=directory)
    assert cleared.returncode == 1 and cleared.stdout == f"removed 0 entries from {directory}\n"
    failures = cleared.stderr.splitlines()
    assert len(failures) == 2 and all(
        f.startswith("jittile: cannot remove ") and f.endswith("(Permission denied)")
        for f in failures
    ), failures
    assert {e.key for e in store.entries()} == set(keys)


def test_broken_entry_in_a_read_only_cache_warns_once(tmp_path, read_only):
    directory = tmp_path / "cache"
    store = DiskStore(directory)
    key = put(store)
    (store.entry_dir(key) / "tma_load.cubin").write_bytes(b"\x7fEL")
    read_only(directory)
    done = python(f"""
        import warnings
        from pathlib import Path
        from jittile.cache.store import DiskStore
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store = DiskStore(Path({str(directory)!r}))
            assert store.load({key!r}) is None and store.load({key!r}) is None
        for w in caught:
            print(w.category.__name__, w.message)
    """)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"JittileWarning jittile cache: ignoring broken entry {key[:12]}")
    assert "tma_load.cubin has 3 bytes" in line and "cannot be removed" in line
    assert (store.entry_dir(key) / "tma_load.cubin").exists()


def test_kernels_hit_a_read_only_cache(tmp_path, kernel_file, read_only):
    directory = str(tmp_path / "cache")
    (built,) = compile_steps(kernel_file, [[directory, 2]], restricted=False)
    assert built["cache"] == "stored"
    read_only(Path(directory))
    hit, new = compile_steps(kernel_file, [[directory, 2], [directory, 3]], restricted=True)
    assert hit == dict(built, cache="hit") and hit["warnings"] == []
    assert new["cache"] == "off" and new["cubin"] > 0 and new["warnings"] == []


# -- odd JITTILE_CACHE_DIR values ----------------------------------------------------------------------


def odd_directory(tmp_path: Path, case: str) -> tuple[str, str]:
    """A JITTILE_CACHE_DIR value, and what the message about it says."""
    (tmp_path / "a_file").write_text("not a directory")
    return {
        "unknown user": ("~nosuchuser_jittile/x", "cannot expand '~nosuchuser_jittile'"),
        "empty": ("", "JITTILE_CACHE_DIR is set to '', which names no directory"),
        "blank": ("  ", "JITTILE_CACHE_DIR is set to '  ', which names no directory"),
        "a file": (str(tmp_path / "a_file"), "is a file, not a directory"),
        "under a file": (str(tmp_path / "a_file" / "cache"), "cannot create the cache directory"),
    }[case]


ODD = ["unknown user", "empty", "blank", "a file", "under a file"]


@pytest.mark.parametrize("case", ODD)
def test_odd_cache_dir_turns_the_disk_cache_off_with_one_warning(tmp_path, monkeypatch, case):
    value, says = odd_directory(tmp_path, case)
    monkeypatch.setenv("JITTILE_CACHE_DIR", value)
    comps = components()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = DiskStore()
        assert not store.enabled and not store.enabled and not store.writable
        assert store.load(make_key(comps)) is None and store.entries() == []
        assert (
            store.store(
                make_key(comps),
                CUBIN,
                PTX,
                {"name": "k", "target": "sm_90a", "key_components": comps},
            )
            is None
        )
    (warning,) = caught
    assert issubclass(warning.category, JittileWarning)
    assert says in str(warning.message) and "memory only" in str(warning.message)
    assert says in store.disabled_reason
    assert (tmp_path / "a_file").read_text() == "not a directory"


@pytest.mark.parametrize("case", ODD)
def test_commands_with_an_odd_cache_dir_say_so_in_one_line(tmp_path, case):
    value, says = odd_directory(tmp_path, case)
    for argv in (["list"], ["show", "ab"], ["why", "k"], ["prune", "--max-size", "0"], ["clear"]):
        done = cli(*argv, directory=value, restricted=False)
        assert done.returncode == 1 and done.stdout == "", (argv, done)
        (line,) = done.stderr.splitlines()
        assert line.startswith("jittile: error: the disk cache is off: ") and says in line, line
    assert (tmp_path / "a_file").read_text() == "not a directory"  # clear never removes it


def test_cache_dir_without_permission(tmp_path, permissions_enforced):
    directory = tmp_path / "closed"
    directory.mkdir(mode=0o000)
    try:
        done = cli("list", directory=directory)
        below = cli("list", directory=directory / "cache")
    finally:
        directory.chmod(0o755)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"jittile: error: the disk cache is off: cannot read the cache directory {directory} (Permission denied)"
    ]
    assert (
        below.returncode == 1
        and "(Permission denied)" in below.stderr
        and len(below.stderr.splitlines()) == 1
    )


def test_kernels_compile_in_memory_with_an_odd_cache_dir(
    tmp_path, kernel_file, permissions_enforced
):
    """One warning per process and directory, naming the problem; the kernel compiles all the same."""
    steps = [[odd_directory(tmp_path, case)[0], 2] for case in ODD]
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o000)
    try:
        found = compile_steps(
            kernel_file, [*steps, [str(closed), 2], [str(closed), 3]], restricted=True
        )
    finally:
        closed.chmod(0o755)
    says = [odd_directory(tmp_path, case)[1] for case in ODD] + ["cannot read the cache directory"]
    for result, text in zip(found, says):
        assert result["cache"] == "off" and result["cubin"] > 0
        (warning,) = result["warnings"]
        assert warning.startswith("JittileWarning: jittile cache: ") and text in warning, warning
    assert (
        found[-1]["cache"] == "off" and found[-1]["warnings"] == []
    )  # same directory: warned once
    assert stat.S_IMODE(closed.stat().st_mode) == 0o755
