"""Where a tuned launch's host time goes on the GPU machine, next to the kernel's own launch:
tests/test_gpu_autotune.py's strided_scale on torch tensors, cProfile over 2000 calls of each
(the top functions by own time), and the plain per-call microseconds of each.

    PYTHONPATH=$PWD python3 bench/tuned_launch_profile.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    import torch
    from autotune_kernels import strided_scale

    n = 1 << 16
    x, out = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")

    def grid(meta):
        return ((meta["n"] + 255) // 256,)

    strided_scale[grid, 256](x, out, n)
    config = strided_scale.best_config
    direct = strided_scale.kernel[grid({"n": n}), 256]
    extra = (config.kwargs["PER_THREAD"],)
    calls = {
        "tuned": lambda: strided_scale[grid, 256](x, out, n),
        "plain": lambda: direct(x, out, n, *extra),
    }
    for name, fn in calls.items():
        for _ in range(3):
            fn()
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(2000):
                fn()
            print(f"{name}: {(time.perf_counter() - started) / 2000 * 1e6:.2f} us per call")
            torch.cuda.synchronize()
    for name, fn in calls.items():
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            fn()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(22)
        print(f"== {name}\n" + "\n".join(text.getvalue().splitlines()[6:32]))


if __name__ == "__main__":
    main()
