"""A/B of builds of examples/attention_fwd.py on the H200: the working tree's against earlier
versions of the file (BASELINE, comma-separated paths, each imported under another name: the
first is ``jittile_baseline``, the others ``jittile_<file stem>``), samples interleaved with
torch SDPA's cuDNN and flash backends over bench/attention.py's shapes of the given head
dimensions (``attention.measure``; the working tree's other builds too); the JSON names the
baseline files.

    PYTHONPATH=$PWD python3 bench/attention_ab.py RUN BASELINE[,OTHER...] [D ...]
    # bench/results/attention_ab_runRUN.json
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention
import common


def main() -> None:
    import torch

    run, baselines = sys.argv[1], [Path(p) for p in sys.argv[2].split(",")]
    head_dims = tuple(int(d) for d in sys.argv[3:]) or (64, 128, 256)
    found = attention.contenders(torch)
    for i, path in enumerate(baselines):
        name = "jittile_baseline" if i == 0 else f"jittile_{path.stem}"
        spec = importlib.util.spec_from_file_location(f"attention_fwd_{path.stem}", path)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        found[name] = (lambda fn: lambda q, k, v, causal: fn(q, k, v, causal=causal))(
            before.attention
        )
    results = []
    for shape in (shape for shape in attention.SHAPES if shape[-1] in head_dims):
        for causal in (False, True):
            row = attention.measure(torch, shape, causal, found)
            row["jittile_vs_baseline"] = (
                row["jittile"]["tflops"] / row["jittile_baseline"]["tflops"]
            )
            results.append(row)
            print(
                f"{'x'.join(map(str, shape))} causal={causal}: "
                + ", ".join(
                    f"{name} {row[name]['tflops']:.0f} err {row[name]['max_abs_error']:.2g}"
                    for name in row
                    if isinstance(row[name], dict) and "tflops" in row[name]
                )
                + f"; new/baseline {row['jittile_vs_baseline']:.3f}",
                flush=True,
            )
    common.save(
        f"attention_ab_run{run}",
        {"baseline": ",".join(p.name for p in baselines), "results": results},
    )


if __name__ == "__main__":
    main()
