"""Where a cached tuning's first launch spends its time in a fresh process on the GPU machine:
one process tunes a shape of examples/gemm_bf16.py into an empty cache directory, a second
(fresh) process profiles its first ``launch`` (the tuning found on disk, the cubin loaded from the
disk cache) with cProfile and prints the functions by cumulative time.

    PYTHONPATH=$PWD python3 bench/first_launch_profile.py [--json FILE]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SHAPE = (384, 2048, 1024)

CHILD = """
import cProfile, io, pstats, sys, time
sys.path.insert(0, {examples!r})
import torch
started = time.perf_counter()
import gemm_bf16
imported = time.perf_counter() - started
m, n, k = {shape}
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
profile = cProfile.Profile() if {profiled} else None
started = time.perf_counter()
if profile: profile.enable()
gemm_bf16.launch(a, b, c)
torch.cuda.synchronize()
if profile: profile.disable()
first = time.perf_counter() - started
started = time.perf_counter()
gemm_bf16.launch(a, b, c)
torch.cuda.synchronize()
print("TIMES", imported * 1e3, first * 1e3, (time.perf_counter() - started) * 1e3)
if profile:
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
    print(text.getvalue())
"""


def child(profiled: bool, env: dict) -> tuple[list[float], str]:
    script = CHILD.format(examples=str(EXAMPLES), shape=SHAPE, profiled=profiled)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("TIMES"))
    return [round(float(v), 2) for v in line.split()[1:]], out.stdout + out.stderr


def main() -> None:
    cache = tempfile.mkdtemp(prefix="jittile-first-launch-")
    env = {**os.environ, "JITTILE_CACHE": "1", "JITTILE_CACHE_DIR": cache}
    env["JITTILE_PRINT_AUTOTUNING"] = "1"
    tuned, _ = child(False, env)  # tunes and compiles into the empty cache
    plain = [child(False, env)[0] for _ in range(3)]
    times, profile = child(True, env)
    result = {
        "shape": SHAPE,
        "tuning_process_ms": tuned,
        "fresh_processes_ms": [dict(zip(("import", "first", "second"), t)) for t in plain],
        "profiled_ms": times,
        "profile": profile.splitlines()[:90],
    }
    print(json.dumps({k: v for k, v in result.items() if k != "profile"}, indent=1))
    print("\n".join(result["profile"]))
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
