"""Run a jittile kernel on the CPU, thread by thread, computing what the GPU computes.

``kernel.interpret(*args)`` / ``kernel.interpret[grid, block](*args)``, or every launch with
``JITTILE_INTERPRET=1``. The kernel is lowered by the same frontend as for the GPU (no numba, no
driver): the lowered function runs as one generator per thread (:mod:`.program`), the plan
records and raw instructions it issues are carried out by :mod:`.instructions` over the memories
of :mod:`.memory`, and :mod:`.machine` schedules threads, barriers and warp collectives. Arrays
come back written as a GPU launch would leave them.

What it checks: out-of-bounds global and shared accesses, tensor memory outside the allocation,
misaligned shared addresses of async copies, waits that can never complete (deadlocks), reads of
an async copy's destination before its barrier phase completed, async-proxy reads of shared bytes
a generic write left without a ``fence.proxy.async`` (:class:`.memory.SharedMemory`),
warp-collective instructions reached by part of a warp. What it cannot know: timing, caches,
and anything the PTX ISA leaves undefined (it completes asynchronous copies at issue).
"""

from __future__ import annotations

from ..errors import LaunchError, public_entry
from ..language.cuda import LaunchConfig
from ..language.types import Tensor


def interpret(
    kernel,
    args: tuple,
    kwargs: dict,
    config: LaunchConfig | None = None,
    cluster=None,
    shared_bytes: int | None = None,
) -> None:
    """Interpret one launch of ``kernel``; array arguments are written back in place."""
    from ..targets import DEFAULT_TARGET
    from .arguments import HostArray, bind_arguments, host_argument
    from .instructions import execute
    from .machine import Machine
    from .program import program_for
    from .threads import globals_factory

    specializer = kernel.specializer
    args = specializer.bind(args, kwargs)
    hosts = [host_argument(a) for a in args]
    specs = [Tensor(h.data.shape, h.dtype.name) if isinstance(h, HostArray) else h for h in hosts]
    params = specializer.params(tuple(specs))
    if config is not None and cluster is not None:
        config = LaunchConfig(grid=config.grid, block=config.block, cluster=cluster)
    key_launch = (
        None if config is None else LaunchConfig(grid=1, block=config.block, cluster=config.cluster)
    )
    target = kernel.target or DEFAULT_TARGET
    program = program_for(kernel, params, target, key_launch)
    lowered = program.lowered
    ir = lowered.ir
    launch = config or ir.launch
    if launch is None:
        raise LaunchError(
            f"{kernel.__name__} has no launch configuration: use "
            f"T.device_entry(launch=...) or kernel.interpret[grid, block](...)"
        )
    memory, values, writebacks = bind_arguments(ir, params, hosts)
    size = ir.shared_bytes if shared_bytes is None else max(shared_bytes, ir.shared_bytes)
    machine = Machine(
        launch.grid,
        launch.block,
        launch.cluster,
        size,
        memory,
        program.code,
        globals_factory(lowered, launch, program.direct),
        values,
        execute,
        lowered.positions,
    )
    machine.namespace, machine.ir = lowered.namespace, ir
    machine.run()
    for writeback in writebacks:
        writeback()


class Interpreting:
    """``kernel.interpret`` and ``kernel.interpret[grid, block]``."""

    def __init__(self, kernel, config: LaunchConfig | None = None):
        self.kernel = kernel
        self.config = config

    def __getitem__(self, config) -> Interpreting:
        if not isinstance(config, tuple) or len(config) != 2:
            raise LaunchError("interpret with kernel.interpret[grid, block](...)")
        return Interpreting(self.kernel, LaunchConfig(grid=config[0], block=config[1]))

    @public_entry
    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs) -> None:
        interpret(self.kernel, args, kwargs, self.config, cluster, shared_bytes)
