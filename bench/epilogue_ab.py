"""What the epilogue costs a tile (issue #23: 3000x5000x2000 runs 256x152 tiles, cuBLAS's, at
about 0.92x cuBLAS; its 32 K-stages per tile leave the epilogue a larger share than on the
squares): the example beside a timing-only variant whose output is wrong, its time not: ``no
epilogue``, no job writes its tile at all. Run 118 (commit 2239971) also timed ``no edge``, the
columns past the last 64-column part not stored (``edge_stores``, the element stores from
registers that the example had then, replaced since by an overlapping last part).

    PYTHONPATH=$PWD python3 bench/epilogue_ab.py RUN [MxNxK:BMxBN[/SPLIT][@CLUSTER] ...]

writes bench/results/epilogue_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

NO_EPILOGUE = {"    writes = True\n": "    writes = rows < 0\n"}
SPECS = (
    "3000x5000x2000:256x152",
    "4097x4104x4096:128x208",
    "3072x5120x2048:128x256",
    "4096x4096x4096:128x256",
)


def main() -> None:
    folder = tempfile.mkdtemp()
    variants = [
        ("example", variant(folder, "epilogue_example", {}), 1),
        ("no epilogue", variant(folder, "epilogue_none", NO_EPILOGUE), 1),
    ]
    time_variants("epilogue_ab", variants, SPECS)


if __name__ == "__main__":
    main()
