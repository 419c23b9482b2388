"""The first compile of a process loads, beside jittile's frontend, what the backend will need
from native code: NVVM and nvJitLink (whose first link initialises the linker). What overlaps is
native work (library loading, the linker's start-up); numba-cuda's import is Python and stays in
the compile's own thread: imported in a second thread it only contended for the interpreter lock,
and the first compile was slower for it (``bench/first_compile_overlap.py``: 1.19 s with it, 1.00 s
without, on the H200 host; 0.69 / 0.67 s on the CPU machine).
"""

from __future__ import annotations

import threading

from ..targets import Target

# A kernel that does nothing, for the warm-up link; PTX 8.0 is accepted by every nvJitLink that
# builds for Hopper.
_EMPTY_PTX = (
    ".version 8.0\n.target {target}\n.address_size 64\n.visible .entry warmup() {{ ret; }}\n"
)
_started = threading.Lock()


def start(target: Target) -> None:
    """Start the background loading once per process (later calls return at once)."""
    if not _started.acquire(blocking=False):
        return
    threading.Thread(
        target=_load_toolchain, args=(target,), name="jittile-load-toolchain", daemon=True
    ).start()


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
