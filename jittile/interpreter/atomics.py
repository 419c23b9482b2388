"""What ``T.cuda.atomic_*`` does, for the interpreter: a read-modify-write of one element of
global memory, returning the old value.

The interpreter runs one thread at a time up to its next blocking instruction, so every
instruction is atomic with respect to every other; what an atomic adds is the operation on the
element in memory, with the PTX ISA's types (``jittile/ptx/atomics.py``). The memory orderings
(``sem=``, ``scope=``, ``T.cuda.threadfence``) change nothing here: the interpreter's memory is
sequentially consistent, so it shows one of the outcomes the GPU allows, never a weaker one.

A spin: a thread that runs on until it blocks would loop forever on an atomic that polls a value
another thread has still to write (``while T.cuda.atomic_add(flags, 0, 0) == 0:``), the other
thread never getting its turn. So a thread whose atomic leaves its element unchanged and reads
the same value at the same address, from the same instruction, as its last atomic did is
polling: it suspends until the element changes (``Block(("spin", ...))``), then does the atomic
again. When no other thread can move, the machine resumes the pollers with the value they read
(a loop that merely reads the element again and again goes on), up to ``Machine.POLL_ROUNDS``
times without the element changing; then the launch ends as a deadlock naming the address and
the value (nothing will write it: the writer is done or blocked, or in a cluster the interpreter
has not started, as it runs one cluster at a time).
"""

from __future__ import annotations

import numpy as np

from ..ptx.atomics import parse_atomic
from .machine import Block, Fault
from .math import add_ftz_f32

_OPERATIONS = {
    "add": lambda old, b: old + b,
    "max": max,
    "min": min,
    "and": lambda old, b: old & b,
    "or": lambda old, b: old | b,
    "xor": lambda old, b: old ^ b,
    "exch": lambda old, b: b,
}


def _integer(value, bits: int, signed: bool) -> int:
    """An operand as its register holds it: the low ``bits`` bits, read signed or not."""
    raw = int(value) & ((1 << bits) - 1)
    return raw - (1 << bits) if signed and raw >> (bits - 1) else raw


def _float_bits(value) -> int:
    """A float operand's float32 bits (the value rounded to float32, as its register holds it)."""
    return int(np.float32(value).view(np.uint32))


def atomic(machine, thread, opcode, values, name):
    """``atom.<sem>.<scope>.global.<op>.<type> d, [address], b{, c}``: the element at
    ``address`` becomes ``op(old, b{, c})``; the old value returns in the asm's register type
    (float32 for a float register, else the unsigned bits of the width)."""
    op, ptx_type = parse_atomic(opcode)
    address, *operands = values
    floating = machine.namespace[name][1].outputs[0] == "f"  # a float32 tensor's atomic
    size = 8 if ptx_type.endswith("64") else 4
    if address % size:
        raise Fault(f"{opcode} at {address:#x}: the address is not {size}-byte aligned")
    bits = np.dtype(np.uint32 if size == 4 else np.uint64)
    element = machine.memory.read(address, size).view(bits)
    old = int(element[0])
    polled = thread.polled
    thread.polled = None
    if ptx_type == "f32":  # add.f32: rounded to nearest even, subnormals flushed, NaN canonical
        element.view(np.float32)[0] = add_ftz_f32(element.view(np.float32)[0], operands[0])
    else:
        width = size * 8
        if floating:
            operands = [_float_bits(v) for v in operands]
        signed = ptx_type[0] == "s"
        b = [_integer(v, width, signed) for v in operands]
        current = _integer(old, width, signed)
        if op == "cas":
            new = b[1] if current == b[0] else current
        else:
            new = _OPERATIONS[op](current, b[0])
        element[0] = new & ((1 << width) - 1)
    if int(element[0]) == old:  # nothing written: a read, polling if it repeats the last one
        site = (address, old, thread.instruction())
        if polled == site:
            again = lambda: atomic(machine, thread, opcode, values, name)  # noqa: E731
            return Block(("spin", address, size, old, again, _result(old, floating, bits)))
        thread.polled = site
    return _result(old, floating, bits)


atomic.blocks = True  # a poll suspends its thread: every atomic is yielded to the scheduler


def _result(old: int, floating: bool, bits: np.dtype):
    """The old value in the asm's register type."""
    if floating:
        return np.uint32(old).view(np.float32)
    return bits.type(old)
