"""The first compile of a process starts, beside jittile's frontend, what the backend will need:
numba-cuda's import and the loading of NVVM and nvJitLink (whose first link initialises the
linker). Python work shares one interpreter lock, so what overlaps is the native part (library
loading, file reads, the linker's start-up), not the Python of either side.

Only libraries are imported in the background, never jittile modules, so the threads cannot wait
on each other's import locks.
"""
from __future__ import annotations

import threading

from . import numpy_compat
from ..targets import Target

# A kernel that does nothing, for the warm-up link; PTX 8.0 is accepted by every nvJitLink that
# builds for Hopper.
_EMPTY_PTX = ".version 8.0\n.target {target}\n.address_size 64\n.visible .entry warmup() {{ ret; }}\n"
_started = threading.Lock()


def start(target: Target) -> None:
    """Start the background work once per process (later calls return at once)."""
    if not _started.acquire(blocking=False):
        return
    numpy_compat.install()  # before numba-cuda loads, in whichever thread imports it first
    for work, args in ((_import_numba_cuda, ()), (_load_toolchain, (target,))):
        threading.Thread(target=work, args=args, name=f"jittile-{work.__name__}",
                         daemon=True).start()


def _import_numba_cuda() -> None:
    try:
        import numba.cuda  # noqa: F401
    except Exception:  # the compile's own import reports it
        pass


def _load_toolchain(target: Target) -> None:
    try:
        from cuda.bindings import nvjitlink, nvvm

        nvvm.version()
        options = [f"-arch={target.name}"]
        handle = nvjitlink.create(len(options), options)
        try:
            data = _EMPTY_PTX.format(target=target.name).encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "warmup.ptx")
            nvjitlink.complete(handle)
        finally:
            nvjitlink.destroy(handle)
    except Exception:  # a missing library or an unsupported target: the compile reports it
        pass
