"""compile_time.py's fast measurements for two checkouts, interleaved, so that the load of a shared
machine falls on both alike (a before/after comparison of two sequential compile_time.py runs
measures the machine as much as the change):

    python3 bench/compile_time_ab.py BEFORE_DIR AFTER_DIR [--runs 7] [--name NAME]

Per round, each checkout in turn (which goes first alternates): ``import jittile``, a further specialization (``FURTHER``: the
compile and jittile's part of it) and the disk hits (``DISK``), each in a fresh process with its
own bytecode cache and disk cache. Medians over the rounds; with ``--name`` the result is saved
under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import common  # noqa: E402
import compile_time  # noqa: E402


def _run(code: str, repo: Path, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=repo, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"measurement process failed in {repo}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _envs(repo: Path, scratch: Path) -> tuple[dict, dict]:
    base = dict(os.environ, PYTHONPATH=str(repo), PYTHONPYCACHEPREFIX=str(scratch / "pycache"))
    for name in ("JITTILE_DEBUG", "PYTHONDONTWRITEBYTECODE"):
        base.pop(name, None)
    return (
        dict(base, JITTILE_CACHE="0"),
        dict(base, JITTILE_CACHE="1", JITTILE_CACHE_DIR=str(scratch / "cache")),
    )


def measure(repos: dict[str, Path], runs: int) -> dict:
    samples = {
        label: {"import": [], "further": [], "further_jittile": [], "disk": []} for label in repos
    }
    with tempfile.TemporaryDirectory(prefix="jittile-ab-") as tmp:
        envs = {label: _envs(repo, Path(tmp) / label) for label, repo in repos.items()}
        for label, repo in repos.items():
            off, on = envs[label]
            _run(compile_time.FURTHER, repo, off)  # warms the bytecode cache
            _run("CHECK = False\n" + compile_time.DISK, repo, on)  # fills the disk cache
        for round_ in range(runs):
            order = list(repos.items())
            for label, repo in order if round_ % 2 == 0 else order[::-1]:
                off, on = envs[label]
                got = samples[label]
                got["import"].append(_run(compile_time.IMPORT, repo, off)["s"])
                further = _run(compile_time.FURTHER, repo, off)
                got["further"].append(statistics.median(further["times"].values()))
                got["further_jittile"].append(
                    statistics.median(parts["jittile"] for parts in further["parts"].values())
                )
                got["disk"].append(_run("CHECK = True\n" + compile_time.DISK, repo, on))
    out = {}
    for label, got in samples.items():
        disk = got.pop("disk")
        out[label] = {name: round(statistics.median(values), 4) for name, values in got.items()}
        out[label]["disk_hit"] = {
            hit: round(statistics.median(d[hit] for d in disk), 4) for hit in disk[0]
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--name", help="result file name under bench/results (no .json)")
    args = parser.parse_args()
    result = {
        "runs": args.runs,
        **measure({"before": args.before.resolve(), "after": args.after.resolve()}, args.runs),
    }
    if args.name:
        common.save(args.name, result)  # prints it too
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
