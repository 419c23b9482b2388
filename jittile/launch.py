"""Launching a kernel: arguments to device values, the prepared-launch table, the launch.

A repeated launch whose arguments fingerprint as the last one of its launch configuration did
launches the kept parameter buffer (jittile/runtime/fastpath.py), after an identity check of the
globals the kernel reads (jittile/watch.py). Otherwise every argument is converted and the
prepared launch of their kinds found by a dictionary lookup; only the first launch of a kind
specializes, compiles (or hits a cache) and resolves the launch configuration.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, NoReturn

from .errors import LaunchError, public_entry
from .ir import ConstexprParam
from .language.cuda import LaunchConfig
from .specialize import resolve_target

if TYPE_CHECKING:
    from .kernel import Kernel

_runtime_arrays = None  # jittile.runtime.arrays, imported by the first launch


def _import_runtime_arrays():
    global _runtime_arrays
    from .runtime import arrays

    _runtime_arrays = arrays
    return arrays


def _fastpath():
    from .runtime import fastpath

    return fastpath


# ``JITTILE_INTERPRET=1``: every launch runs on the CPU interpreter. Read once, at import: the
# launch path is timed in microseconds.
INTERPRET = os.environ.get("JITTILE_INTERPRET", "") not in ("", "0")


class Configured:
    """``kernel[grid, block]``: a kernel with its launch dimensions, called to launch."""

    def __init__(self, kernel: Kernel, config: LaunchConfig):
        self.kernel = kernel
        self.config = config

    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs) -> None:
        fast = None if kwargs else self.kernel._fast.get((self.config, cluster))
        if fast is None or not fast.launch(args, stream, shared_bytes):
            launch_kernel(self.kernel, args, kwargs, self.config, stream, cluster, shared_bytes)


@public_entry
def launch_kernel(kernel: Kernel, args: tuple, kwargs: dict, config: LaunchConfig | None, stream,
                  cluster, shared_bytes: int | None) -> None:
    """Launch ``kernel`` with ``config`` (None: its ``T.device_entry`` launch); NumPy arguments are
    copied to the device and back. Callers try the kernel's fast path (``kernel._fast``) first;
    what it refuses comes here."""
    if INTERPRET:
        from .interpreter import interpret

        interpret(kernel, args, kwargs, config, cluster, shared_bytes)
        return
    watch = kernel._watch
    if watch is not None and watch.changed():
        kernel._drop_if_stale()
    _launch_converted(kernel, args, kwargs, config, stream, cluster, shared_bytes)


def _launch_converted(kernel: Kernel, args: tuple, kwargs: dict, config: LaunchConfig | None,
                      stream, cluster, shared_bytes: int | None) -> None:
    """The full path: convert every argument, find (or prepare) the launch of these argument
    kinds, pack, launch; then keep a fast path for launches that fingerprint alike."""
    arrays = _runtime_arrays or _import_runtime_arrays()
    view_type = arrays.DeviceView
    specializer = kernel._specializer
    if kwargs:
        args = specializer.bind(args, kwargs)
    try:
        converted = [arrays.convert_argument(a) for a in args]
    except LaunchError as problem:  # e.g. a NumPy array and no device to copy it to
        _raise_argument_error_first(specializer, args, problem)
    static = specializer.static_positions
    if static:
        kinds = [("static", v) if i in static else (v.kind if type(v) is view_type else type(v))
                 for i, v in enumerate(converted)]
    else:
        kinds = [v.kind if type(v) is view_type else type(v) for v in converted]
    key = (config, cluster, *kinds)
    try:
        prepared = kernel._prepared.get(key)
        if prepared is None:
            prepared = prepare(kernel, tuple(converted), config, cluster)
            kernel._prepared[key] = prepared
        compiled, grid, block, cluster_dims, runtime_positions = prepared
        launcher = compiled.launcher()
        launcher.launch([converted[i] for i in runtime_positions], grid, block, stream,
                        cluster_dims, shared_bytes)
    finally:
        for value in converted:
            if type(value) is view_type and value.owned:
                value.finish()
    fast = _fastpath().FastLaunch.after(launcher, grid, block, cluster_dims, kernel._watch, args,
                                        converted, static, runtime_positions)
    if fast is not None:
        kernel._fast[(config, cluster)] = fast


def _raise_argument_error_first(specializer, args: tuple, problem: LaunchError) -> NoReturn:
    """Raise what is wrong with the arguments (count, kind, rank, dtype, static extents), checked
    without the device, before ``problem``: so that without a GPU a mistake reads as it does with
    one, not as the missing device."""
    try:
        specializer.params(specializer.example_specs(args))
    except LaunchError as error:
        raise error from None
    raise problem


def prepare(kernel: Kernel, converted: tuple, config: LaunchConfig | None, cluster) -> tuple:
    """What repeated launches of these argument kinds reuse: the compiled kernel, grid, block,
    cluster dimensions and the positions of the runtime (non-constexpr) arguments."""
    if kernel._launch_target is None:
        kernel._launch_target = resolve_target(None, kernel.target)
    if config is not None and cluster is not None:
        config = LaunchConfig(grid=config.grid, block=config.block, cluster=cluster)
    key_launch = None if config is None else LaunchConfig(grid=1, block=config.block,
                                                           cluster=config.cluster)
    params = kernel._specializer.params(converted)
    compiled = kernel._compiled(params, kernel._launch_target, key_launch)
    launch_config = config or compiled.ir.launch
    if launch_config is None:
        raise LaunchError(f"{kernel.__name__} has no launch configuration: use "
                          f"T.device_entry(launch=...) or kernel[grid, block](...)")
    cluster_dims = cluster if cluster is not None else launch_config.cluster
    if cluster_dims is not None:
        cluster_dims = LaunchConfig(cluster=cluster_dims).cluster
    runtime = tuple(i for i, p in enumerate(params) if not isinstance(p, ConstexprParam))
    return compiled, launch_config.grid, launch_config.block, cluster_dims, runtime
