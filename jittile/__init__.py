"""jittile: Hopper/Blackwell data-movement kernels from Python, with checked tile patterns.

``import jittile`` is cheap: numba-cuda and the driver load on first compile or launch. The cache
package (standard library only) loads with it, as every kernel's first compile or disk hit needs it.
"""

from __future__ import annotations

from . import cache
from .errors import (
    CompileError,
    ContractError,
    InterpreterError,
    JittileError,
    JittileWarning,
    LaunchError,
)
from .kernel import CompiledKernel, Kernel, func, kernel
from .language import T
from .tuning import Autotuner, Config, autotune
from .version import __version__


def __getattr__(name: str):
    if name == "TensorMap":
        from .runtime.tensormap import TensorMap

        return TensorMap
    raise AttributeError(f"module 'jittile' has no attribute {name!r}")


__all__ = [
    "kernel",
    "func",
    "Kernel",
    "CompiledKernel",
    "T",
    "TensorMap",
    "cache",
    "autotune",
    "Config",
    "Autotuner",
    "JittileError",
    "ContractError",
    "CompileError",
    "LaunchError",
    "InterpreterError",
    "JittileWarning",
    "__version__",
]
