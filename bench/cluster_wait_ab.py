"""Whether the clusters' cost is the barrier wait (issue #23; run 124: 128x128 tiles in clusters
of two run 8-21% slower than alone when each stage waits for the consumers of both CTAs, as fast
when each waits for its own, and at one rate whatever the ring's depth: one stage per ~500 ns,
as if a waiter suspended in ``mbarrier.try_wait`` woke late where the phase's last arrival came
from the other CTA). The example's kernels built with another ``T.cuda.mbarrier_wait`` (the
builtin's PTX swapped in this process while a contender compiles; the disk cache off):

- ``try_wait``: the builtin (``mbarrier.try_wait.parity``, no time hint);
- ``test_wait spin``: ``mbarrier.test_wait.parity`` in a loop, which never suspends;
- ``try_wait 10 ms hint``: ``try_wait`` with CUTLASS's suspend-time hint (0x989680 ns).

Beside cuBLAS, hot L2, samples interleaved, each alone and in clusters of two.

    PYTHONPATH=$PWD python3 bench/cluster_wait_ab.py RUN

writes bench/results/cluster_wait_ab_runRUN.json.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

os.environ["JITTILE_CACHE"] = "0"  # before jittile reads it

from cluster_cost_ab import CLUSTERED_128
from gemm_ab import time_variants, variant

WAITS = {
    "test_wait spin": "mbarrier.test_wait.parity.shared::cta.b64 jt_done, [$0], $1;",
    "try_wait 10 ms hint": "mbarrier.try_wait.parity.shared::cta.b64 jt_done, [$0], $1, 10000000;",
}


def with_wait(folder: str, name: str, line: str):
    """A copy of the example whose kernels compile with ``line`` as the wait's PTX."""
    from jittile.ptx import builtins

    module = variant(folder, name, {"import jittile\n": f"import jittile  # {name}\n"})
    wait = dataclasses.replace(
        builtins.MBARRIER_WAIT,
        template=builtins.MBARRIER_WAIT.template.replace(
            "mbarrier.try_wait.parity.shared::cta.b64 jt_done, [$0], $1;", line
        ),
    )
    assert wait.template != builtins.MBARRIER_WAIT.template
    run_config = module.run_config

    def run_with_wait(*args, **kwargs):
        saved, builtins.MBARRIER_WAIT = builtins.MBARRIER_WAIT, wait
        try:
            run_config(*args, **kwargs)
        finally:
            builtins.MBARRIER_WAIT = saved

    module.run_config = run_with_wait
    return module


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        variants = [("try_wait", gemm_bf16, 1), ("try_wait cluster", gemm_bf16, 2)]
        for i, (label, line) in enumerate(WAITS.items()):
            module = with_wait(folder, f"gemm_bf16_wait{i}", line)
            variants += [(label, module, 1), (f"{label} cluster", module, 2)]
        time_variants(
            "cluster_wait_ab",
            variants,
            (*CLUSTERED_128, "1024x1024x1024:64x128"),
        )


if __name__ == "__main__":
    main()
