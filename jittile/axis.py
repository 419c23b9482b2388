"""Axis tags for layout strides.

A layout stride says how far one step of a shard or replica factor moves along some storage axis.
Plain integers move along memory (elements of a buffer); ``k @ TLane`` and ``k @ TCol`` move along the
tensor-memory lane and column axes, so one layout language describes shared buffers and TMEM alike.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Axis:
    """A storage axis; ``name`` is the key used in offset dictionaries ("mem", "lane", "col")."""

    name: str
    label: str

    def __rmatmul__(self, stride: int) -> AxisStride:
        # ``4 @ TLane``: int has no __matmul__, so Python asks the axis.
        if isinstance(stride, bool) or not isinstance(stride, int):
            return NotImplemented
        return AxisStride(stride, self)

    def __repr__(self) -> str:
        return self.label


Mem = Axis("mem", "Mem")
TLane = Axis("lane", "TLane")
TCol = Axis("col", "TCol")

AXES: tuple[Axis, ...] = (Mem, TLane, TCol)


@dataclass(frozen=True)
class AxisStride:
    """A stride on one axis: one step of its factor adds ``stride`` to ``axis``."""

    stride: int
    axis: Axis

    def __repr__(self) -> str:
        if self.axis == Mem:
            return str(self.stride)
        return f"{self.stride} @ {self.axis!r}"


def as_axis_stride(value: int | AxisStride) -> AxisStride:
    """Normalise a layout stride: a plain int is a memory stride."""
    if isinstance(value, AxisStride):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a layout stride is an int or `k @ TLane`/`k @ TCol`, not {value!r}")
    return AxisStride(value, Mem)
