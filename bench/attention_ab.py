"""A/B of two builds of examples/attention_fwd.py on the H200: the working tree's against an
earlier version of the file (BASELINE, imported under another name), samples interleaved with
torch SDPA's cuDNN and flash backends over bench/attention.py's shapes of the given head
dimensions (``attention.measure``); the JSON names the baseline file.

    PYTHONPATH=$PWD python3 bench/attention_ab.py RUN BASELINE [D ...]
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

    run, baseline = sys.argv[1], Path(sys.argv[2])
    head_dims = tuple(int(d) for d in sys.argv[3:]) or (64, 128, 256)
    spec = importlib.util.spec_from_file_location("attention_fwd_baseline", baseline)
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    found = attention.contenders(torch)
    found["jittile_baseline"] = lambda q, k, v, causal: before.attention(q, k, v, causal=causal)
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
                    for name in ("jittile", "jittile_baseline", "sdpa_cudnn", "sdpa_flash")
                    if "tflops" in row.get(name, {})
                )
                + f"; new/baseline {row['jittile_vs_baseline']:.3f}",
                flush=True,
            )
    common.save(f"attention_ab_run{run}", {"baseline": baseline.name, "results": results})


if __name__ == "__main__":
    main()
