"""The PTX opcode grammar, the raw-instruction table and inline-asm building (numba-free)."""
