"""Launching a kernel: arguments to device values, the prepared-launch table, the launch.

A repeated launch whose arguments fingerprint as the last one of its launch configuration did
launches the kept parameter buffer (jittile/runtime/fastpath.py), after an identity check of the
globals the kernel reads (jittile/watch.py). Otherwise every argument is converted and the
prepared launch of their kinds found by a dictionary lookup; only the first launch of a kind
specializes, compiles (or hits a cache) and resolves the launch configuration.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, NoReturn, Protocol

from .errors import LaunchError, public_entry, user_location, user_traceback
from .ir import ConstexprParam
from .language.cuda import LaunchConfig
from .specialize import Specializer
from .targets import Target, device_target

if TYPE_CHECKING:
    from .entry import CompiledKernel
    from .watch import GlobalsWatch


class FastPaths(threading.local):
    """A kernel's fast paths (``table``: (launch config, cluster) -> runtime.fastpath.FastLaunch),
    one table per thread: a fast path packs its thread's launcher, so threads never share one."""

    def __init__(self):
        self.table: dict = {}


class LaunchedKernel(Protocol):
    """What a launch needs of a kernel (``jittile.Kernel``, which imports this module)."""

    __name__: str
    target: Target | None
    specializer: Specializer
    watch: GlobalsWatch | None
    prepared: dict
    fast_paths: FastPaths

    def specialization(self, params: list, target: Target, launch) -> CompiledKernel: ...

    def refresh(self) -> None: ...


_runtime_arrays = None  # jittile.runtime.arrays, imported by the first launch


def _import_runtime_arrays():
    global _runtime_arrays
    from .runtime import arrays

    _runtime_arrays = arrays
    return arrays


def _fastpath():
    from .runtime import fastpath

    return fastpath


def _streams():
    from .runtime import streams

    return streams


# ``JITTILE_INTERPRET=1``: every launch runs on the CPU interpreter. Read once, at import: the
# launch path is timed in microseconds.
INTERPRET = os.environ.get("JITTILE_INTERPRET", "") not in ("", "0")


CONFIGURED_KEPT = 64  # launch dimensions whose Configured a kernel keeps (then it starts over)


def plain_dimensions(config) -> bool:
    """Whether ``kernel[grid, block]``'s item is a grid and a block of exact ints or tuples of
    them: the only items whose Configured a kernel keeps (by equality ``True`` would be ``1``
    and ``2.0`` would be ``2``, which LaunchConfig rejects)."""
    if type(config) is not tuple or len(config) != 2:
        return False
    for dims in config:  # plain loops: this runs on every such launch
        kind = type(dims)
        if kind is tuple:
            for extent in dims:
                if type(extent) is not int:
                    return False
        elif kind is not int:
            return False
    return True


class Configured:
    """``kernel[grid, block]``: a kernel with its launch dimensions, called to launch."""

    def __init__(self, kernel: LaunchedKernel, config: LaunchConfig):
        self.kernel = kernel
        self.config = config

    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs) -> None:
        fast = None if kwargs else self.kernel.fast_paths.table.get((self.config, cluster))
        try:
            if fast is None or not fast.launch(args, stream, shared_bytes):
                launch_kernel(self.kernel, args, kwargs, self.config, stream, cluster, shared_bytes)
        except LaunchError as error:
            raise launch_failure(error, self.kernel.__name__) from None

    def launch_printed(self, args: tuple, prints: list, stream, cluster, shared_bytes) -> None:
        """A call whose arguments' fingerprints (jittile/runtime/fingerprints.py) the caller has
        read already: the tuned launch's, which reads them to find its choice."""
        fast = self.kernel.fast_paths.table.get((self.config, cluster))
        try:
            if fast is None or not fast.launch_printed(args, prints, stream, shared_bytes):
                launch_kernel(self.kernel, args, {}, self.config, stream, cluster, shared_bytes)
        except LaunchError as error:
            raise launch_failure(error, self.kernel.__name__) from None


def launch_failure(error: LaunchError, name: str) -> LaunchError:
    """``error`` as the user sees it: located at the user's line that launched kernel ``name``
    (the first frame outside jittile), naming the kernel, without jittile's frames, and with a
    way to run the kernel on the CPU when there is no GPU."""
    if getattr(error, "kernel", None) is not None:
        return error  # already located (a kernel launching another, say)
    location = user_location()
    hint = error.hint
    driver = sys.modules.get("jittile.runtime.driver")
    if hint is None and driver is not None and driver.NO_DEVICE in error.message:
        hint = (
            f"without a GPU, run it on the CPU interpreter: {name}.interpret(...) (or "
            f"{name}.interpret[grid, block](...)), or set JITTILE_INTERPRET=1 for every launch"
        )
    message = error.message
    if not message.startswith(f"launch of {name}"):
        message = f"launch of {name}: {message}"
    located = LaunchError(message, location, hint=hint)
    located.kernel = name
    return located.with_traceback(user_traceback(error.__traceback__))


@public_entry
def launch_kernel(
    kernel: LaunchedKernel,
    args: tuple,
    kwargs: dict,
    config: LaunchConfig | None,
    stream,
    cluster,
    shared_bytes: int | None,
) -> None:
    """Launch ``kernel`` with ``config`` (None: its ``T.device_entry`` launch); NumPy arguments are
    copied to the device and back. Callers try the kernel's fast path (``kernel.fast_paths``) first;
    what it refuses comes here."""
    if INTERPRET:
        from .interpreter import interpret

        interpret(kernel, args, kwargs, config, cluster, shared_bytes)
        return
    watch = kernel.watch
    if watch is not None and watch.changed():
        kernel.refresh()
    _launch_converted(kernel, args, kwargs, config, stream, cluster, shared_bytes)


def _launch_converted(
    kernel: LaunchedKernel,
    args: tuple,
    kwargs: dict,
    config: LaunchConfig | None,
    stream,
    cluster,
    shared_bytes: int | None,
) -> None:
    """The full path: convert every argument, find the device and stream, find (or prepare) the
    launch of these argument kinds, pack, launch; then keep this thread's fast path for
    launches that fingerprint alike."""
    arrays = _runtime_arrays or _import_runtime_arrays()
    streams = _streams()
    view_type = arrays.DeviceView
    specializer = kernel.specializer
    if kwargs:
        args = specializer.bind(args, kwargs)
    try:
        converted = [
            arrays.convert_argument(a) if not arrays.takes_stream(type(a)) else None for a in args
        ]
        stream_of = streams.current_stream_reader(args, converted)
        launch_stream = stream_of() if stream is None else streams.stream_handle(stream)
        for position, arg in enumerate(args):  # protocol arrays: ordered before that stream
            if converted[position] is None:
                converted[position] = arrays.convert_argument(arg, launch_stream)
    except LaunchError as problem:  # e.g. a NumPy array and no device to copy it to
        _raise_argument_error_first(specializer, args, problem)
    static = specializer.static_positions
    kinds = _argument_kinds(converted, static, view_type)
    previous = None
    try:
        device = streams.launch_device(specializer.names, converted)
        if device is None:  # no device array: the current device
            if not streams.driver.available():
                _raise_argument_error_first(
                    specializer, args, LaunchError(streams.driver.NO_DEVICE)
                )
            device = streams.driver.current_device()
        key = (config, cluster, device, *kinds)
        prepared = kernel.prepared.get(key)
        if prepared is None:
            prepared = prepare(kernel, tuple(converted), config, cluster, device)
            kernel.prepared[key] = prepared
        compiled, grid, block, cluster_dims, runtime_positions = prepared
        launcher = compiled.launcher()
        previous = launcher.bind(device)
        launcher.launch(
            [converted[i] for i in runtime_positions],
            grid,
            block,
            launch_stream,
            cluster_dims,
            shared_bytes,
        )
    finally:
        for value in converted:
            if type(value) is view_type and value.owned:
                value.finish()
        streams.driver.restore_context(previous)
    fast = _fastpath().FastLaunch.after(
        launcher,
        grid,
        block,
        cluster_dims,
        kernel.watch,
        args,
        converted,
        static,
        runtime_positions,
        stream_of,
    )
    if fast is not None:
        kernel.fast_paths.table[(config, cluster)] = fast


def _argument_kinds(converted: list, static, view_type) -> list:
    """What a prepared launch is keyed by, per argument: a static's value, an array's kind, or
    a scalar's type."""
    if static:
        return [
            ("static", v) if i in static else (v.kind if type(v) is view_type else type(v))
            for i, v in enumerate(converted)
        ]
    return [v.kind if type(v) is view_type else type(v) for v in converted]


def _raise_argument_error_first(specializer, args: tuple, problem: LaunchError) -> NoReturn:
    """Raise what is wrong with the arguments (count, kind, rank, dtype, static extents), checked
    without the device, before ``problem``: so that without a GPU a mistake reads as it does with
    one, not as the missing device."""
    try:
        specializer.params(specializer.example_specs(args))
    except LaunchError as error:
        raise error from None
    raise problem


def launch_target(kernel: LaunchedKernel, device: int) -> Target:
    """The target a launch on ``device`` compiles for: the kernel's, else the device's (``sm_90a``
    where no driver can say)."""
    driver = _streams().driver
    return kernel.target or device_target(
        driver.device_capability(device) if driver.available() else None
    )


def prepare(
    kernel: LaunchedKernel, converted: tuple, config: LaunchConfig | None, cluster, device: int
) -> tuple:
    """What repeated launches of these argument kinds on ``device`` reuse: the compiled kernel
    (for the kernel's target, else the device's), grid, block, cluster dimensions and the
    positions of the runtime (non-constexpr) arguments."""
    if config is not None and cluster is not None:
        config = LaunchConfig(grid=config.grid, block=config.block, cluster=cluster)
    key_launch = (
        None if config is None else LaunchConfig(grid=1, block=config.block, cluster=config.cluster)
    )
    params = kernel.specializer.params(converted)
    compiled = kernel.specialization(params, launch_target(kernel, device), key_launch)
    launch_config = config or compiled.ir.launch
    if launch_config is None:
        raise LaunchError(
            f"{kernel.__name__} has no launch configuration: use "
            f"T.device_entry(launch=...) or kernel[grid, block](...)"
        )
    cluster_dims = cluster if cluster is not None else launch_config.cluster
    if cluster_dims is not None:
        cluster_dims = LaunchConfig(cluster=cluster_dims).cluster
    runtime = tuple(i for i, p in enumerate(params) if not isinstance(p, ConstexprParam))
    return compiled, launch_config.grid, launch_config.block, cluster_dims, runtime
