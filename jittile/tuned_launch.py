"""The tuned launch's fast path: a call of a tuned kernel whose arguments fingerprint as an earlier
call's did, pointers aside, reuses that call's choice without naming, converting or keying its
arguments again.

Why that is sound: a tuning is chosen per key values and device. Key values are scalars' values
and arrays' shapes and dtypes; the device is the arrays'. A fingerprint without its pointer
(``jittile/runtime/fingerprints.py``) holds an array's shape, strides and dtype, and for torch
and CuPy its device; a scalar's is its value, and the signature holds every argument's type. So
equal signatures mean equal key values and, where each array says its device, the same device.
Where an array does not (Numba arrays, ``__cuda_array_interface__`` objects) or no argument is an
array, the device is the current one: the fast path is kept only in a process that sees one GPU.
Host arrays (NumPy, torch CPU tensors) take the full path, as they do in the kernel's own fast
path; so do calls with keyword arguments.

What runs on every launch, as Triton's does: the grid and block callables, the config's
``pre_hook`` and ``post_hook``, and the kernel's own launch (with its fast path,
``jittile/launch.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Protocol

from .runtime.fingerprints import places, reader


class Config(Protocol):
    """What a launch reads of a ``jittile.Config`` (jittile/tuning.py, which imports this)."""

    kwargs: dict
    block: object
    cluster: object
    pre_hook: Callable[[dict], None] | None
    post_hook: Callable[[dict], None] | None


class Autotuner(Protocol):
    """What a kept launch needs of its tuner: the kernel and its parameters' names, all and
    those a call passes."""

    kernel: object
    parameter_names: list[str]
    free_names: list[str]


_VALUE = reader(int, False)  # the reader of scalars and T.constexpr values: the value itself


class TunedLaunch:
    """One signature's launch: its config and how its positional arguments and the config's
    values make the kernel's arguments. The launch shape is the call's: a tuning does not depend
    on it (the tuner keys its choices by key values and device alone), and a grid written as a
    lambda in the caller's function is a new object on every call."""

    __slots__ = ("config", "arrange", "constants", "free", "cluster", "kernel", "hooked")

    def __init__(self, tuner: Autotuner, config: Config, count: int):
        names, free = tuner.parameter_names, tuner.free_names[:count]
        self.config, self.free, self.kernel = config, free, tuner.kernel
        self.constants = tuple(config.kwargs[n] for n in names if n in config.kwargs)
        constant_at = {n: count + i for i, n in enumerate(n for n in names if n in config.kwargs)}
        order = [constant_at[n] if n in constant_at else free.index(n) for n in names]
        # None where the call's arguments and then the config's values are the parameters' order
        # (T.constexpr parameters last, as usual): nothing to rearrange
        self.arrange = None if order == list(range(len(order))) else _picker(order)
        self.cluster = config.cluster
        self.hooked = config.pre_hook is not None or config.post_hook is not None

    def __call__(
        self, args: tuple, prints: list, grid, block, stream, shared_bytes: int | None
    ) -> None:
        """Launch for ``args``, whose fingerprints ``prints`` the signature read, with the
        call's ``grid`` and ``block`` (values, callables of ``meta``, or None)."""
        config = self.config
        if config.block is not None:
            block = config.block
        meta = None
        if self.hooked or callable(grid) or callable(block):
            meta = dict(zip(self.free, args))
            meta.update(config.kwargs)
            if callable(grid):
                grid = grid(meta)
            if callable(block):
                block = block(meta)
            if config.pre_hook is not None:
                config.pre_hook(meta)
        full = args + self.constants
        if self.arrange is not None:
            full = self.arrange(full)
        if grid is None and block is None:
            self.kernel(*full, stream=stream, cluster=self.cluster, shared_bytes=shared_bytes)
        else:
            prints.extend(self.constants)
            if self.arrange is not None:
                prints = list(self.arrange(prints))
            # kept by the kernel for plain int shapes
            self.kernel[grid, block].launch_printed(
                full, prints, stream, self.cluster, shared_bytes
            )
        if config.post_hook is not None:
            config.post_hook(meta)


def _picker(order: list[int]) -> Callable[[tuple], tuple]:
    """``values -> tuple(values[i] for i in order)``, in C."""
    if len(order) == 1:
        only = order[0]
        return lambda values: (values[only],)
    return itemgetter(*order)


KEPT = 1024  # entries a table keeps before it starts again (distinct shapes, not calls)


class TunedFastPaths:
    """A tuned kernel's kept launches: signature -> TunedLaunch."""

    def __init__(self, static_positions: frozenset):
        self.static = static_positions  # positions of free T.constexpr parameters: values
        self.table: dict = {}
        # argument classes -> (their fingerprint readers, the positions of arrays), or None
        self.readers: dict = {}
        self.several_devices: bool | None = None  # asked of the driver once, when first needed

    def signature(self, args: tuple) -> tuple[tuple, list] | None:
        """What of ``args`` decides the choice, with their fingerprints; None where the full path
        must decide. The key is the fingerprints, arrays' without their pointers, then the
        classes."""
        kinds = tuple(map(type, args))
        reads = self.readers.get(kinds, False)
        if reads is False:
            reads = self.readers[kinds] = self._readers(kinds)
        if reads is None:
            return None
        readers, arrays = reads
        prints = [read(a) for read, a in zip(readers, args)]
        key = prints.copy()
        for i in arrays:
            key[i] = key[i][1:]
        key.append(kinds)
        return tuple(key), prints

    def _readers(self, kinds: tuple) -> tuple[tuple, tuple] | None:
        """The fingerprint readers of arguments of these classes and the positions of the arrays
        among them (whose pointers the key leaves out), or None where one has no reader (host
        arrays: the full path) or there are no arguments."""
        readers = tuple(
            reader(kind, position in self.static) for position, kind in enumerate(kinds)
        )
        if not readers or None in readers:
            return None
        return readers, tuple(i for i, read in enumerate(readers) if read is not _VALUE)

    def find(self, args: tuple) -> tuple[TunedLaunch, list] | None:
        """The kept launch for ``args`` and their fingerprints, or None."""
        read = self.signature(args)
        if read is None:
            return None
        kept = self.table.get(read[0])
        return None if kept is None else (kept, read[1])

    def keep(self, tuner: Autotuner, config: Config, args: tuple) -> None:
        """Keep the launch the full path just chose for ``args``, where its signature decides
        the choice alone."""
        read = self.signature(args)
        if read is None or not self._device_is_read(args):
            return
        if len(self.table) >= KEPT:
            self.table.clear()
        self.table[read[0]] = TunedLaunch(tuner, config, len(args))

    def _device_is_read(self, args: tuple) -> bool:
        """Whether the signature says the launch's device: it does where every array argument's
        fingerprint names its device, and always in a process that sees one GPU."""
        readers, positions = self.readers[tuple(map(type, args))]
        if positions and all(places(readers[i]) for i in positions):
            return True
        if self.several_devices is None:
            from .runtime import driver

            self.several_devices = driver.device_count() > 1
        return not self.several_devices

    def clear(self) -> None:
        self.table.clear()
