"""examples/gemm_bf16.py against an earlier copy of it (BASELINE, a file: e.g. ``git show
REV:examples/gemm_bf16.py > ab/gemm_bf16_base.py``, carried untracked to the GPU machine), one
config per spec side by side with cuBLAS (hot L2, samples interleaved; bench/gemm_ab.py's
specs ``MxNxK:BMxBN[/SPLIT]``).

    PYTHONPATH=$PWD python3 bench/base_ab.py RUN BASELINE [MxNxK:BMxBN[/SPLIT] ...]

writes bench/results/base_ab_runRUN.json.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gemm_ab import time_variants


def main() -> None:
    import gemm_bf16

    path = Path(sys.argv.pop(2))
    spec = importlib.util.spec_from_file_location("gemm_bf16_baseline", path)
    baseline = importlib.util.module_from_spec(spec)
    sys.modules["gemm_bf16_baseline"] = baseline
    spec.loader.exec_module(baseline)
    time_variants("base_ab", (("new", gemm_bf16, 1), ("baseline", baseline, 1)))


if __name__ == "__main__":
    main()
