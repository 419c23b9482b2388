"""Source -> AST -> checked call sites -> lowered Python function (numba-free)."""
