"""Index maps of the interpreter's collective instructions, computed once and cached.

A wgmma operand's element-to-byte map and a register fragment's register-to-element map are the
compiler's own scalar rules (``patterns.matrix_descriptors.walk_address``,
``fragment.FragmentLayout.element``) evaluated once on NumPy index arrays instead of once per
element per instruction; the same code, so the interpreter still checks the compiler's rules and
not a second copy of them. Every map is read-only and shared by all instructions with the same
fields, shape and element type, so one instruction moves a whole operand with one gather or
scatter.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..fragment import WARPGROUP_THREADS, FragmentLayout
from ..patterns.matrix_descriptors import MatrixWalk, walk_address


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@lru_cache(maxsize=1024)
def matrix_addresses(walk: MatrixWalk, mn: int, k: int, element_bytes: int) -> np.ndarray:
    """(mn, k) int64: the physical shared byte address of each element of the matrix ``walk``
    reads (its first byte; elements are ``element_bytes`` wide)."""
    rows = np.arange(mn, dtype=np.int64)[:, None]
    columns = np.arange(k, dtype=np.int64)[None, :]
    return _frozen(np.asarray(walk_address(walk, rows, columns, element_bytes), dtype=np.int64))


@lru_cache(maxsize=256)
def fragment_elements(
    layout: FragmentLayout, registers: int, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns), each (128, registers) int64: where the first element of register ``r``
    of warpgroup thread ``t`` sits in the fragment's tile; the register's other elements follow
    in the next columns."""
    threads = np.arange(WARPGROUP_THREADS, dtype=np.int64)[:, None]
    register = np.arange(registers, dtype=np.int64)[None, :]
    rows, columns = layout.element(register, threads, dtype)
    shape = (WARPGROUP_THREADS, registers)
    return (
        _frozen(np.broadcast_to(rows, shape).astype(np.int64)),
        _frozen(np.broadcast_to(columns, shape).astype(np.int64)),
    )
