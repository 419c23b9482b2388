"""numba-cuda's failures on a lowered kernel, told at the user's code.

The lowered function is compiled under :data:`LOWERED_FILENAME` with the line numbers the frontend
gave it (one per node, ``Lowered.positions``). numba reports a typing failure at a line of that
file (on the error, or only on the typing constraint that raised it, deep in the traceback); that
line names the user's expression. numba's words are reduced to the operation and the operand types
that have no implementation.
"""

from __future__ import annotations

import re

from ..errors import CompileError

LOWERED_FILENAME = "<jittile lowered kernel>"

_MESSAGE_LINE = re.compile(r'File "' + re.escape(LOWERED_FILENAME) + r'", line (\d+)')
_SIGNATURE = re.compile(r">>> (\w+)\((.*)\)\s*$", re.M)
_NOISE = re.compile(r'(Failed in .* pipeline|During: |File "|<source missing|\^)')
_SPECIFIC = re.compile(r"raised a specific error:\s*\n\s*(?:\w+: )?(.+)")
_OPERATIONS = {
    "getitem": "indexing",
    "setitem": "an element store",
    "add": "'+'",
    "iadd": "'+='",
    "sub": "'-'",
    "isub": "'-='",
    "mul": "'*'",
    "imul": "'*='",
    "truediv": "'/'",
    "floordiv": "'//'",
    "mod": "'%'",
    "pow": "'**'",
    "lshift": "'<<'",
    "rshift": "'>>'",
    "and_": "'&'",
    "or_": "'|'",
    "xor": "'^'",
    "lt": "'<'",
    "le": "'<='",
    "gt": "'>'",
    "ge": "'>='",
    "eq": "'=='",
    "ne": "'!='",
    "neg": "unary '-'",
    "invert": "'~'",
    "not_": "'not'",
    "truth": "a truth test",
    "asm_intrinsic": "an inline-PTX instruction",
    "smem_view": "a shared-memory view",
    "shared_address": "a shared address",
    "global_address": "a global address",
    "set_element": "a register-fragment element store",
    "fill": "a register fragment's initial value",
}
_HINT = (
    "kernel values are ints, floats and bools (T.uint32(x) and friends convert); tensors and "
    "buffers are indexed one element at a time, and inline-PTX operands are integers"
)


def numba_failure(exc: BaseException, positions: dict) -> CompileError:
    """A :class:`CompileError` at the user's code for numba's ``exc``; positions maps lines of
    :data:`LOWERED_FILENAME` to ``Origin``s (line 1: the kernel's definition)."""
    line = failing_line(exc)
    origin = positions.get(line) if line is not None else None
    if origin is None:
        origin = positions[1]
        return CompileError(
            f"numba-cuda could not compile the kernel: {summary(str(exc))}", origin.location
        )
    return CompileError(f"{origin.text!r} cannot be compiled: {summary(str(exc))}", origin.location)


def failing_line(exc: BaseException) -> int | None:
    """The line of the lowered kernel numba failed at: the error's own location, else the
    innermost frame of its traceback that holds one (numba's typing constraints keep theirs in
    ``self.loc`` or a ``loc`` local), else one its message names."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        line = _line_of(getattr(exc, "loc", None))
        if line is None:
            line = _traceback_line(exc.__traceback__)
        if line is None:
            match = _MESSAGE_LINE.findall(str(exc))
            line = int(match[-1]) if match else None
        if line is not None:
            return line
        exc = exc.__cause__ or exc.__context__
    return None


def _line_of(loc) -> int | None:
    if getattr(loc, "filename", None) == LOWERED_FILENAME and isinstance(
        getattr(loc, "line", None), int
    ):
        return loc.line
    return None


def _traceback_line(tb) -> int | None:
    found = None
    while tb is not None:
        frame_locals = tb.tb_frame.f_locals
        for candidate in (frame_locals.get("loc"), _own_loc(frame_locals.get("self"))):
            line = _line_of(candidate)
            if line is not None:
                found = line
        tb = tb.tb_next
    return found


def _own_loc(obj):
    """``obj.loc`` where the object itself holds one; never runs an object's ``__getattr__``
    (numba's driver objects initialise the CUDA driver there)."""
    try:
        return vars(obj).get("loc")
    except TypeError:
        return None


def summary(message: str) -> str:
    """numba's message as the operation that failed and its operand types, plus what kernels
    can compute; other messages by their first line, numba's temporaries named plainly."""
    signature = _SIGNATURE.search(message)
    if signature:
        name, types = signature.groups()
        what = _OPERATIONS.get(name, f"'{name}'")
        text = f"numba-cuda has no implementation of {what} for operand types ({types})"
        specific = _SPECIFIC.search(message)
        if specific:
            text += f" ({specific.group(1).strip()})"
        return f"{text}; {_HINT}"
    lines = [
        line.strip()
        for line in message.strip().splitlines()
        if line.strip() and not _NOISE.match(line.strip())
    ]
    first = lines[0] if lines else "unknown error"
    first = re.sub(r"'\$[\w.]+'", "a temporary value", first)
    first = re.sub(r"'([A-Za-z_]\w*)\.\d+'", r"'\1'", first)
    first = re.sub(r"__jt_h\d+_", "", first)
    return first if len(first) <= 300 else first[:297] + "..."
