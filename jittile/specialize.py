"""Specialization: a kernel's arguments become parameter kinds, the part of a call that selects
compiled code (dtype, rank, static extents and layout of arrays; types of scalars; values of
``T.constexpr`` parameters).

Nothing here needs the device but choosing the default target.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np

from .dtypes import dtype as lookup_dtype
from .errors import CompileError, LaunchError, closest_name
from .frontend.checks import definition_location
from .ir import ArrayParam, ConstexprParam, ScalarParam, TensorMapParam
from .language.types import ScalarType, Tensor, constexpr
from .targets import Target, device_target

# The keywords of ``kernel.compile`` and of launches, which a misspelled one most likely meant.
CALL_KEYWORDS = ("target", "launch", "stream", "cluster", "shared_bytes")


def default_target() -> Target:
    """The current GPU's target, or ``sm_90a`` without one (compiling needs no GPU)."""
    from .runtime import driver

    return device_target(driver.current_device_capability())


def resolve_target(requested: Target | None, default: Target | None) -> Target:
    """The requested target, else the kernel's default, else the device's (each parsed where
    it entered: the decorator, ``compile``)."""
    return requested or default or default_target()


def is_runtime_argument(value) -> bool:
    """Whether ``value`` is a DeviceView or a TensorMap. Neither exists before its module is
    imported, so the classes are looked up among the loaded modules rather than imported."""
    for module_name, class_name in (
        ("jittile.runtime.arrays", "DeviceView"),
        ("jittile.runtime.tensormap", "TensorMap"),
    ):
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, getattr(module, class_name)):
            return True
    return False


class Specializer:
    """A kernel's signature: binds arguments and turns them into parameter kinds."""

    def __init__(self, pyfunc):
        self.name = pyfunc.__name__
        self.location = definition_location(pyfunc.__code__)
        try:
            self.signature = inspect.signature(pyfunc, eval_str=True)
        except Exception as exc:  # a string annotation that does not evaluate
            raise CompileError(
                f"{self.name}: the parameter annotations do not evaluate: "
                f"{type(exc).__name__}: {exc}",
                self.location,
            ) from None
        self.names = list(self.signature.parameters)
        self.annotations = [
            None if p.annotation is inspect.Parameter.empty else p.annotation
            for p in self.signature.parameters.values()
        ]
        self.static_positions = frozenset(
            i for i, ann in enumerate(self.annotations) if ann is constexpr
        )

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """Positional and keyword arguments in parameter order; an unknown keyword is named with
        the parameter, or the keyword of ``compile`` or of a launch, it most likely stands for."""
        if not kwargs:
            return args
        for keyword in kwargs:
            if keyword not in self.signature.parameters:
                close = closest_name(keyword, [*self.signature.parameters, *CALL_KEYWORDS])
                mean = f" (did you mean {close}=?)" if close else ""
                raise LaunchError(
                    f"{self.name}: got an unexpected keyword argument "
                    f"{keyword!r}{mean}; its parameters are "
                    f"{', '.join(self.signature.parameters)}"
                )
        try:
            return tuple(self.signature.bind(*args, **kwargs).arguments.values())
        except TypeError as exc:
            raise LaunchError(f"{self.name}: {exc}") from None

    def params(self, args: tuple) -> list:
        """Parameter kinds for ``args``: ``T.Tensor`` specs, DeviceViews, TensorMaps and scalars.

        Specs and scalars are told apart without the runtime package, so compiling from specs
        (and a disk hit) does not import it.
        """
        if len(args) != len(self.names):
            missing = ", ".join(repr(n) for n in self.names[len(args) :])
            raise LaunchError(
                f"{self.name} takes {len(self.names)} arguments, got {len(args)}"
                + (f": {missing} missing" if missing else "")
            )
        return [
            self._param(name, ann, value)
            for name, ann, value in zip(self.names, self.annotations, args)
        ]

    def _param(self, name: str, ann, value):
        if ann is constexpr:
            if isinstance(value, Tensor) or is_runtime_argument(value):
                raise LaunchError(f"constexpr parameter {name!r} needs a value, got {value!r}")
            return ConstexprParam(name, value)
        if isinstance(value, Tensor):
            return array_param(name, ann, value)
        if isinstance(ann, ScalarType) or isinstance(value, (int, float, bool, np.generic)):
            return scalar_param(name, ann, value)
        from .runtime.arrays import DeviceView
        from .runtime.tensormap import TensorMap

        if isinstance(value, TensorMap):
            return TensorMapParam(name)
        if isinstance(value, DeviceView):
            return array_param(name, ann, value)
        raise LaunchError(f"argument {name!r}: cannot pass {type(value).__name__}")

    def annotation_specs(self) -> list:
        """Example arguments made of the annotations, for ``compile()`` without arguments."""
        specs = []
        for name, ann in zip(self.names, self.annotations):
            if isinstance(ann, Tensor):
                specs.append(ann)
            elif isinstance(ann, ScalarType):
                specs.append(ann(0))
            else:
                raise CompileError(
                    f"{self.name}: parameter {name!r} has no T.Tensor or scalar "
                    f"annotation; pass example arguments to compile()",
                    self.location,
                )
        return specs

    def example_specs(self, args: tuple) -> tuple:
        """Arguments as ``params`` takes them, without the device: NumPy arrays become
        ``T.Tensor`` specs (inspected, never copied); other arrays become DeviceViews."""
        specs = []
        for a in args:
            if isinstance(a, np.ndarray):
                specs.append(Tensor(a.shape, a.dtype.name))
            elif (
                isinstance(a, (Tensor, int, float, bool, np.generic))
                or is_runtime_argument(a)
                or not hasattr(a, "shape")
            ):
                specs.append(a)
            else:
                from .runtime.arrays import device_view

                specs.append(device_view(a))
        return tuple(specs)


def array_param(name: str, ann, value) -> ArrayParam:
    """The kind of an array argument (a ``T.Tensor`` spec or a DeviceView), checked against its
    annotation."""
    if isinstance(value, Tensor):
        dtype, ndim, shape, layout = lookup_dtype(value.dtype), value.ndim, value.static_shape, "C"
    else:
        dtype, ndim, shape = value.dtype, value.ndim, value.shape
        layout = "C" if value.c_contiguous else "A"
    static = (None,) * ndim
    if isinstance(ann, Tensor):
        if ann.ndim != ndim:
            raise LaunchError(
                f"argument {name!r}: rank {ndim} does not match the annotated T.Tensor{ann.shape}"
            )
        if lookup_dtype(ann.dtype) != dtype:
            raise LaunchError(
                f"argument {name!r}: dtype {dtype.name} does not match the annotated {ann.dtype}"
            )
        static = ann.static_shape
        for axis, (want, got) in enumerate(zip(static, shape)):
            if want is not None and got is not None and want != got:
                raise LaunchError(
                    f"argument {name!r}: extent {got} on axis {axis} does not "
                    f"match the annotated {want}"
                )
    return ArrayParam(name, dtype, ndim, static, layout)


def scalar_param(name: str, ann, value) -> ScalarParam:
    """The kind of a scalar argument: its annotated type, else the type of its value."""
    if isinstance(ann, ScalarType):
        return ScalarParam(name, ann.dtype)
    if isinstance(value, np.generic):
        kind = lookup_dtype(value.dtype.name)
        if kind.storage != kind:  # an ml_dtypes bfloat16/float8 scalar: passed as its float32
            kind = lookup_dtype("float32")
        return ScalarParam(name, kind)
    if isinstance(value, bool):
        return ScalarParam(name, lookup_dtype("bool"))
    return ScalarParam(name, lookup_dtype("int64" if isinstance(value, int) else "float64"))
