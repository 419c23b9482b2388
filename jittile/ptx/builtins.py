"""The PTX behind the kernel language's built-in functions (``T.cuda.mbarrier_wait``,
``T.cuda.cluster_ctarank``, ``T.cuda.cluster_sync``), so that the frontend holds no PTX text."""

from __future__ import annotations

from .asm import AsmCall, scoped

MBARRIER_WAIT = AsmCall(
    scoped("""
.reg .pred jt_done;
jt_wait_loop:
mbarrier.try_wait.parity.shared::cta.b64 jt_done, [$0], $1;
@!jt_done bra jt_wait_loop;
"""),
    (),
    ("r", "r"),
    comment="T.cuda.mbarrier_wait",
)
CLUSTER_CTARANK = AsmCall(
    "mov.u32 $0, %cluster_ctarank;", ("r",), (), memory=False, comment="T.cuda.cluster_ctarank"
)
CLUSTER_SYNC = AsmCall(
    "barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;", comment="T.cuda.cluster_sync"
)
