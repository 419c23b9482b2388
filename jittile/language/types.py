"""Types of the kernel language: tensors, scalars and the ``constexpr`` marker."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from ..dtypes import DType, convert
from ..dtypes import dtype as lookup_dtype
from ..errors import JittileError


class ScalarType:
    """A scalar type (``T.uint32`` & co.): ``x: T.uint32`` annotates a scalar parameter of that
    type; ``T.uint32(value)`` converts a value (inside a kernel: a conversion in the generated
    code; on the host: the NumPy scalar)."""

    def __init__(self, name: str):
        self.dtype_name = name
        self.dtype: DType = lookup_dtype(name)
        self.__doc__ = (
            f"Convert ``value`` to {name} (inside a kernel: a conversion in the "
            f"generated code; on the host: the NumPy scalar). As an annotation, "
            f"``x: T.{name}`` makes a scalar parameter of that type."
        )
        self.__signature__ = inspect.Signature(
            [inspect.Parameter("value", inspect.Parameter.POSITIONAL_ONLY)]
        )

    def __call__(self, value):
        """Outside a kernel (and when folded at compile time): the NumPy scalar of this type;
        integers wrap to its width as a conversion on the GPU does (``T.uint32(-1)`` is
        4294967295)."""
        return convert(value, self.dtype.numpy)

    def __repr__(self) -> str:
        return f"T.{self.dtype_name}"


class _Constexpr:
    """``x: T.constexpr`` annotates a static parameter: its value is folded at compile time (it
    may size shared buffers and feed static tile parameters) and is part of the cache key."""

    def __repr__(self) -> str:
        return "T.constexpr"


constexpr = _Constexpr()


@dataclass(frozen=True)
class Tensor:
    """``T.Tensor(shape, dtype)``: a tensor annotation, a compile-time argument spec, or (with
    ``scope="tmem"``) the type of a tensor-memory region given to ``T.cuda.decl_tmem``.

    An int extent is static (checked at launch); a string or ``None`` extent is dynamic.
    """

    shape: tuple
    dtype: str
    scope: str = "global"
    layout: object = field(default=None, compare=False)

    def __init__(self, shape, dtype, scope="global", layout=None):
        if isinstance(shape, (int, str)) or shape is None:
            shape = (shape,)
        shape = tuple(shape)
        for extent in shape:
            if isinstance(extent, bool) or not (extent is None or isinstance(extent, (int, str))):
                raise JittileError(f"T.Tensor extent {extent!r} must be an int, a name or None")
            if isinstance(extent, int) and extent < 0:
                raise JittileError(f"T.Tensor extent {extent} must be non-negative")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", lookup_dtype(dtype).name)
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "layout", layout)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_shape(self) -> tuple:
        """Extents with dynamic ones as ``None``."""
        return tuple(e if isinstance(e, int) else None for e in self.shape)

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"
