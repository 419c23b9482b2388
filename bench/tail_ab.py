"""Where a split-K tail's time goes (issue #23: 4097x4104x4096 split 4 spends about 28 us on its
last partial wave, 33 tiles cut in 132 quarter-K jobs, where 16 K-tiles at the whole waves'
rate take about 10): the example's split build beside timing-only variants of its ``settle``
(their outputs are wrong, their times are not):

- ``no sum``: the last split waits for the others as before but does not read their slots;
- ``no W``: neither the stores of the slots nor their reads, only the tickets and the wait;
- ``no settle``: no meeting at all, every split writes its own partial product.

    PYTHONPATH=$PWD python3 bench/tail_ab.py RUN [MxNxK:BMxBN[/SPLIT] ...]

writes bench/results/tail_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

SUM = "                    frag[r] += W[at + T.uint64(128 * r)]\n"
STORE = "            W[slot + T.uint64(128 * r)] = frag[r]\n"
NO_SUM = {SUM: "                    frag[r] += 0.0\n"}
NO_W = {**NO_SUM, STORE: "            frag[r] += 0.0\n"}
NO_SETTLE = {"                if parts > 1:\n": "                if parts > 4096:\n"}
SPECS = (
    "4097x4104x4096:128x256/4",
    "4097x4104x4096:128x256/2",
    "4097x4104x4096:128x256",
    "4224x4096x4096:128x256/4",
)


def main() -> None:
    folder = tempfile.mkdtemp()
    variants = [
        ("example", variant(folder, "tail_example", {}), 1),
        ("no sum", variant(folder, "tail_no_sum", NO_SUM), 1),
        ("no W", variant(folder, "tail_no_w", NO_W), 1),
        ("no settle", variant(folder, "tail_no_settle", NO_SETTLE), 1),
    ]
    time_variants("tail_ab", variants, SPECS)


if __name__ == "__main__":
    main()
