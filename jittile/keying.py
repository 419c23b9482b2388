"""Keying: what a specialization's cubin depends on, known before lowering so that a cache hit
needs none (jittile/cache/components.py says what is in and out of a key)."""

from __future__ import annotations

from .cache.components import helper_components, referenced_globals
from .cache.components import source_digest as tree_digest
from .frontend.source import KernelSource
from .ir import ArrayParam, ConstexprParam, ScalarParam, TensorMapParam
from .targets import Target
from .version import __version__


def toolchain_versions() -> dict:
    """Versions that change generated code: jittile (release, and a digest of its code-generating
    modules), numba-cuda, NVVM, nvJitLink and llvmlite; computed once per process."""
    from .cache.components import toolchain_versions as versions

    return versions(__version__)


def source_digest(source: KernelSource) -> str:
    """Digest of the kernel's code, insensitive to comments, formatting, the docstring, the file and
    the line it starts on."""
    return tree_digest(source)


def argument_components(params: list) -> list[dict]:
    """Runtime parameters as key data. Arrays enter by dtype, rank, static extents and layout; the
    alignment of their data is not a component: the generated code does not depend on it (TMA
    operands' 16-byte alignment is checked at launch), so it would only duplicate cubins."""
    args = []
    for p in params:
        if isinstance(p, ArrayParam):
            args.append(
                {
                    "name": p.name,
                    "kind": "array",
                    "dtype": p.dtype.name,
                    "ndim": p.ndim,
                    "static_shape": list(p.static_shape),
                    "layout": p.layout,
                }
            )
        elif isinstance(p, ScalarParam):
            args.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
        elif isinstance(p, TensorMapParam):
            args.append({"name": p.name, "kind": "tensormap"})
    return args


def key_components(
    qualname: str, source: KernelSource, params: list, target: Target, launch
) -> dict:
    """Everything the cubin of ``params`` depends on.

    Globals: every data value the body reads from its module or closure, including attribute
    reads like ``cfg.TILE`` (all that the frontend can fold). ``launch`` is the block and cluster
    of a ``kernel[grid, block]`` launch, or None for the kernel's own ``T.device_entry`` (which its
    source, globals and static parameters decide).
    """
    return {
        "kernel": qualname,
        "source": source_digest(source),
        "globals": referenced_globals(source, source.globals, source.closure),
        "helpers": helper_components(source, source.globals, source.closure),
        "static_params": {p.name: repr(p.value) for p in params if isinstance(p, ConstexprParam)},
        "args": argument_components(params),
        "launch": None
        if launch is None
        else {"block": list(launch.block), "cluster": launch.cluster and list(launch.cluster)},
        "target": target.name,
        "versions": toolchain_versions(),
    }
