"""Let numba-cuda 0.30 import under NumPy 2.5.

NumPy 2.5 removed ``np.row_stack`` (deprecated alias of ``np.vstack`` since 2.0); numba-cuda 0.30.4
still registers a typing template for it at first compile and fails with ``AttributeError``. Restoring
the alias before numba-cuda loads is exactly what NumPy < 2.5 had, so it changes no behaviour.
"""

from __future__ import annotations

import numpy as np


def install() -> None:
    """Restore NumPy aliases numba-cuda still refers to; a no-op on NumPy versions that have them."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
