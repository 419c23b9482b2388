"""The source rewrites that contract errors suggest, spelled as the user would type them.

A rule that says what is wrong ("the inner box is 256 bytes, wider than the 128-byte span") leaves
a newcomer to work out the fix; where the fix is one rewrite (split a wide tile into span-wide
boxes, allocate a buffer with another layout or alignment), the error's hint gives that rewrite
in full, computed from the call's own values.
"""

from __future__ import annotations

from dataclasses import replace

from ..layout import byte_swizzle_mode
from .base import SharedBuffer
from .swizzle import SWIZZLE_SPAN, swizzle_period

SHARED_ORIGIN_ALIGN = 128


def _quoted(name: str) -> str:
    """A dtype as kernels spell it: ``"float32"``."""
    return f'"{name}"'


def layout_text(mode: int, shape: tuple, dtype_name: str) -> str:
    """The ``layout=..., align=...`` arguments of a TMA shared buffer of ``shape`` with ``mode``."""
    if not mode:
        return f'layout="default", align={SHARED_ORIGIN_ALIGN}'
    return f"layout=swizzle({mode}, {shape}, {_quoted(dtype_name)}), align={swizzle_period(mode)}"


def buffer_mode(buf: SharedBuffer) -> int:
    """The buffer's TMA swizzle mode, 0 when its layout is not a TMA swizzle."""
    try:
        return byte_swizzle_mode(buf.layout, buf.dtype)
    except (TypeError, ValueError):
        return 0


def alloc_text(buf: SharedBuffer, shape: tuple, mode: int) -> str:
    """``name = T.alloc_shared(shape, dtype, layout=..., align=...)``."""
    return (
        f"{buf.name} = T.alloc_shared({shape}, {_quoted(buf.dtype.name)}, "
        f"{layout_text(mode, shape, buf.dtype.name)})"
    )


def one_axis_multiple(shape: tuple, atom: tuple) -> tuple[int, int] | None:
    """``(axis, k)`` when ``shape`` is ``atom`` with one axis ``k > 1`` times as long."""
    if len(shape) != len(atom):
        return None
    differ = [i for i, (s, a) in enumerate(zip(shape, atom)) if s != a]
    if len(differ) != 1 or shape[differ[0]] % atom[differ[0]]:
        return None
    return differ[0], shape[differ[0]] // atom[differ[0]]


def split_boxes(
    buf: SharedBuffer, lead: tuple, box: tuple, axis: int, k: int, mode: int, steps: tuple
) -> str:
    """The rewrite that issues ``k`` boxes ``box`` one after another along ``axis`` into a
    buffer with one more leading axis, one box image per index (``coord_steps`` moves each box
    by its extent along ``axis``)."""
    shape = (*lead, k, *box)
    step = tuple(box[axis] if i == axis else 0 for i in range(len(box)))
    index = [f"i{n}" for n in range(len(box))]
    index[axis] = f"i{axis} % {box[axis]}"
    element = f"{buf.name}[i{axis} // {box[axis]}, {', '.join(index)}]"
    return (
        f"{alloc_text(buf, shape, mode)} and pass box={box}, coord_steps="
        f"{(*steps, step)}: {k} boxes of {box}, the i-th at coordinates + i * {step}; "
        f"element ({', '.join(f'i{n}' for n in range(len(box)))}) of the tile is then "
        f"{element}"
    )


def wide_box(
    buf: SharedBuffer | None, shape: tuple, box: tuple, element_bytes: int, mode: int, steps: tuple
) -> str:
    """How to load a box whose inner extent is wider than the swizzle span: span-wide boxes."""
    span = SWIZZLE_SPAN[mode]
    width = span // element_bytes
    if box[-1] % width or buf is None:
        return f"make the inner box {width} elements ({span} bytes) wide"
    lead = shape[: len(shape) - len(box)] if tuple(shape[len(shape) - len(box) :]) == box else ()
    narrow = (*box[:-1], width)
    return split_boxes(buf, lead, narrow, len(box) - 1, box[-1] // width, mode, steps)


def descriptor_layout(buf: SharedBuffer, fits) -> tuple[str, SharedBuffer] | None:
    """The allocation text, and the buffer, of the first allocation with which ``fits(buffer)``
    holds: the buffer's own layout aligned to its swizzle period, else a standard layout
    (row-major, ``swizzle`` of modes 1, 2, 3, then ``tiled_swizzle``) aligned to its period; what to
    allocate when no descriptor walk reads the buffer as it is."""
    from ..layout import swizzle, tiled_swizzle

    own = buffer_mode(buf)
    candidates = [(None, own)] + [
        (make, mode) for make in (swizzle, tiled_swizzle) for mode in (0, 1, 2, 3)
    ]
    for make, mode in candidates:
        align = max(buf.align, swizzle_period(mode) if mode else 16)
        try:
            layout = buf.layout if make is None else make(mode, buf.shape, buf.dtype.name)
        except ValueError:
            continue
        candidate = replace(buf, layout=layout, align=align)
        if (make is None and align == buf.align) or not fits(candidate):
            continue
        if make is None:
            return f"keep its layout and pass align={align} to T.alloc_shared", candidate
        spelled = (
            '"default"'
            if make is swizzle and not mode
            else f"{make.__name__}({mode}, {buf.shape}, {_quoted(buf.dtype.name)})"
        )
        return (
            f"{buf.name} = T.alloc_shared({buf.shape}, {_quoted(buf.dtype.name)}, layout={spelled}, "
            f"align={align})"
        ), candidate
    return None
