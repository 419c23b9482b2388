"""Tile patterns: one module per opcode family (contract, plan, host setup, code generation)."""
