"""``@jittile.autotune``: pick the fastest of several configurations of a kernel, per key.

Triton's conventions. A :class:`Config` sets some of the kernel's ``T.constexpr`` parameters (and
optionally the block and cluster shape); ``key`` names the arguments whose values select a tuning.
The first call with new key values (on a device) compiles every config, in parallel worker
processes where the disk cache can carry their cubins back, drops those that fail to compile
(shared memory, registers, contract) with their reason, times the rest with CUDA events on the
caller's arrays and stream, and launches the fastest. The choice is kept in memory and on disk
(``jittile/cache/tunings.py``), keyed by the kernel's code, the configs, the key values and the
device name, so later calls and later processes reuse it without timing anything.

    @jittile.autotune(configs=[jittile.Config({"BM": 128}), jittile.Config({"BM": 64})],
                      key=["M"])
    @jittile.kernel
    def k(A, M: T.int32, BM: T.constexpr): ...

    k[lambda meta: (triton_cdiv(meta["M"], meta["BM"]),), 128](a, m)

``JITTILE_PRINT_AUTOTUNING=1`` prints each choice; ``JITTILE_AUTOTUNE_JOBS=N`` caps the worker
processes (1: compile in this process).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import JittileError, LaunchError, public_entry
from .kernel import Kernel, parse_target
from .language.cuda import LaunchConfig
from .language.types import constexpr
from .launch import launch_target
from .targets import Target
from .tuned_launch import TunedFastPaths

__all__ = ["Autotuner", "Config", "autotune"]


class Config:
    """One tuning candidate: ``kwargs`` sets ``T.constexpr`` parameters of the kernel; ``block``
    and ``cluster``, where given, set the launch's block and cluster shape for this config (as
    Triton's ``num_warps`` does); ``pre_hook(named_args)`` runs before each of its launches and
    ``post_hook(named_args)`` after each (a split-K config's reduction kernel, say), timed
    with it."""

    def __init__(
        self,
        kwargs: dict,
        *,
        block=None,
        cluster=None,
        pre_hook: Callable[[dict], None] | None = None,
        post_hook: Callable[[dict], None] | None = None,
    ):
        self.kwargs = dict(kwargs)
        self.block = block
        self.cluster = cluster
        self.pre_hook = pre_hook
        self.post_hook = post_hook

    def as_json(self) -> dict:
        return {
            "kwargs": {k: _plain(v) for k, v in sorted(self.kwargs.items())},
            "block": _plain(self.block),
            "cluster": _plain(self.cluster),
        }

    def _identity(self) -> tuple:
        return (tuple(sorted(self.kwargs.items())), self.block, self.cluster)

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        parts = [", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())]
        parts += [
            f"{name}={value!r}"
            for name, value in (("block", self.block), ("cluster", self.cluster))
            if value
        ]
        return f"Config({', '.join(p for p in parts if p)})"


def _plain(value):
    """A JSON-able form of a config or key value."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def autotune(
    configs: list[Config],
    key: list[str],
    *,
    prune_configs_by: dict | None = None,
    reset_to_zero: list[str] | None = None,
    restore_value: list[str] | None = None,
    warmup: int = 5,
    rep: int = 20,
    do_bench: Callable | None = None,
):
    """Decorator over ``@jittile.kernel``: tune ``configs`` per value of the ``key`` arguments.

    ``prune_configs_by={"early_config_prune": fn}`` filters configs (``fn(configs, named_args)``)
    before compiling; ``reset_to_zero`` / ``restore_value`` name array arguments the kernel
    writes, zeroed before each timed launch / restored to their values before the tuning;
    ``warmup`` and ``rep`` are launch counts per config (the median of ``rep`` CUDA-event times is
    kept); ``do_bench(fn) -> milliseconds`` replaces the timing."""

    def decorate(kernel: Kernel) -> Autotuner:
        if not isinstance(kernel, Kernel):
            raise JittileError("@jittile.autotune decorates a @jittile.kernel: put it above it")
        return Autotuner(
            kernel,
            configs,
            key,
            prune_configs_by=prune_configs_by,
            reset_to_zero=reset_to_zero,
            restore_value=restore_value,
            warmup=warmup,
            rep=rep,
            do_bench=do_bench,
        )

    return decorate


class Autotuner:
    """A kernel with its tuning space; call it like the kernel (``tuned(...)``,
    ``tuned[grid, block](...)``), where grid and block may be functions of the named arguments
    and the config's values (``meta``)."""

    def __init__(
        self,
        kernel: Kernel,
        configs: list[Config],
        key: list[str],
        *,
        prune_configs_by=None,
        reset_to_zero=None,
        restore_value=None,
        warmup=5,
        rep=20,
        do_bench=None,
    ):
        self.kernel = kernel
        self.__name__, self.__qualname__ = kernel.__name__, kernel.__qualname__
        self.__doc__ = kernel.__doc__
        self.configs = list(configs)
        self.key = list(key)
        self.prune_configs_by = prune_configs_by or {}
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        self.warmup, self.rep, self.do_bench = warmup, rep, do_bench
        self.best_config: Config | None = None
        self.dropped: dict[Config, JittileError] = {}  # of the last compile of the configs
        self.timings: dict[Config, float] = {}  # milliseconds, of the last tuning
        self.compile_workers = 1  # worker processes the last compile of the configs used
        # of that compile: the configs this process compiled itself (a worker's cubin missed)
        # and what the workers that failed wrote last
        self.compiled_here = 0
        self.worker_failures: list[str] = []
        self.compile_seconds: dict[Config, float] = {}  # in its worker, then here
        self._chosen: dict[tuple, Config] = {}
        specializer = kernel.specializer
        self.parameter_names = self._names = specializer.names
        self._check_declaration(specializer)
        set_by_configs = {n for c in self.configs for n in c.kwargs}
        self._set_by_configs = sorted(set_by_configs)
        # the parameters a call passes, in order (those no config sets)
        self.free_names = [n for n in self._names if n not in set_by_configs]
        statics = {n for n, a in zip(self._names, specializer.annotations) if a is constexpr}
        self._fast = TunedFastPaths(
            frozenset(i for i, n in enumerate(self.free_names) if n in statics)
        )

    def _check_declaration(self, specializer) -> None:
        if not self.configs:
            raise JittileError(f"@jittile.autotune of {self.__name__}: no configs")
        static = {
            name
            for name, ann in zip(specializer.names, specializer.annotations)
            if ann is constexpr
        }
        for config in self.configs:
            if not isinstance(config, Config):
                raise JittileError(
                    f"@jittile.autotune of {self.__name__}: configs are "
                    f"jittile.Config objects, got {config!r}"
                )
            for name in config.kwargs:
                if name not in static:
                    raise JittileError(
                        f"@jittile.autotune of {self.__name__}: {config!r} sets {name!r}, which is "
                        f"not a T.constexpr parameter of the kernel (those are: "
                        f"{', '.join(sorted(static)) or 'none'})"
                    )
        for name in (*self.key, *self.reset_to_zero, *self.restore_value):
            if name not in specializer.names:
                raise JittileError(
                    f"@jittile.autotune of {self.__name__}: {name!r} is not a "
                    f"parameter of the kernel ({', '.join(specializer.names)})"
                )

    def __repr__(self) -> str:
        return (
            f"<jittile.autotune {self.__qualname__}: {len(self.configs)} configs, key {self.key}>"
        )

    # -- arguments ------------------------------------------------------------------------------
    def _named(self, args: tuple, kwargs: dict, config: Config | None = None) -> dict:
        """The user's arguments by name; positional ones fill the parameters no config sets."""
        free = self.free_names
        if len(args) > len(free):
            raise LaunchError(
                f"{self.__name__} takes {len(free)} positional arguments besides "
                f"its tuned ones ({', '.join(self._set_by_configs)}), got "
                f"{len(args)}"
            )
        named = dict(zip(free, args))
        for name, value in kwargs.items():
            if name not in self._names:
                raise LaunchError(f"{self.__name__}: got an unexpected keyword argument {name!r}")
            named[name] = value
        return named

    def _full(self, named: dict, config: Config) -> tuple:
        """Every kernel argument for ``config``, in parameter order."""
        values = {**named, **config.kwargs}
        missing = [n for n in self._names if n not in values]
        if missing:
            raise LaunchError(
                f"{self.__name__} with {config!r}: {', '.join(repr(m) for m in missing)} missing"
            )
        return tuple(values[n] for n in self._names)

    def _key_values(self, named: dict) -> tuple:
        out = []
        for name in self.key:
            value = named.get(name)
            shape = getattr(value, "shape", None)
            if shape is not None and not isinstance(value, np.generic):
                out.append(
                    ("array", tuple(int(s) for s in shape), str(getattr(value, "dtype", "")))
                )
            else:
                out.append(_plain(value))
        return tuple(out)

    # -- launching ------------------------------------------------------------------------------
    def __getitem__(self, launch) -> _TunedLaunch:
        if not isinstance(launch, tuple) or len(launch) != 2:
            raise LaunchError("launch with tuned[grid, block](...)")
        return _TunedLaunch(self, launch[0], launch[1])

    def __call__(self, *args, stream=None, shared_bytes=None, **kwargs) -> None:
        self._run(args, kwargs, None, None, stream, shared_bytes)

    def _run(self, args, kwargs, grid, block, stream, shared_bytes) -> None:
        if not kwargs:  # a signature seen before: its choice (jittile/tuned_launch.py)
            found = self._fast.find(args)
            if found is not None:
                kept, prints = found
                self.best_config = kept.config
                kept(args, prints, grid, block, stream, shared_bytes)
                return
        named = self._named(args, kwargs)
        device = _launch_device(named)
        key = (self._key_values(named), device)
        config = self._chosen.get(key)
        if config is None:
            config = self._chosen[key] = self._tune(named, grid, block, stream, device)
        self.best_config = config
        self._launch(config, named, grid, block, stream, shared_bytes)
        if not kwargs:
            self._fast.keep(self, config, args)

    def reset(self) -> None:
        """Forget the choices made in this process (the tuning cache on disk stays): the next
        call with any key values chooses again, from the disk cache or by timing."""
        self._chosen.clear()
        self._fast.clear()

    def _launch_shape(self, config: Config, named: dict, grid, block):
        """``(grid, block, cluster)`` of a launch of ``config``: None for what the kernel's
        ``T.device_entry`` gives."""
        meta = {**named, **config.kwargs}
        grid = grid(meta) if callable(grid) else grid
        block = (
            config.block
            if config.block is not None
            else (block(meta) if callable(block) else block)
        )
        return grid, block, config.cluster

    def _launch(self, config, named, grid, block, stream, shared_bytes) -> None:
        grid, block, cluster = self._launch_shape(config, named, grid, block)
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.kwargs})
        full = self._full(named, config)
        if grid is None and block is None:
            self.kernel(*full, stream=stream, cluster=cluster, shared_bytes=shared_bytes)
        else:
            if grid is None or block is None:
                raise LaunchError(f"{self.__name__}: give both grid and block, or neither")
            self.kernel[grid, block](
                *full, stream=stream, cluster=cluster, shared_bytes=shared_bytes
            )
        if config.post_hook is not None:
            config.post_hook({**named, **config.kwargs})

    # -- tuning ---------------------------------------------------------------------------------
    def _identity(self, key_values: tuple, device_name: str) -> dict:
        from .keying import source_digest

        return {
            "kernel": self.__name__,
            "qualname": self.__qualname__,
            "source": source_digest(self.kernel.source),
            "source_file": self.kernel.source.filename,
            "configs": [c.as_json() for c in self.configs],
            "key": self.key,
            "key_values": _plain(list(key_values)),
            "device": device_name,
        }

    def _tune(self, named: dict, grid, block, stream, device: int) -> Config:
        from .cache import tunings
        from .runtime import driver

        started = time.perf_counter()
        identity = self._identity(self._key_values(named), driver.device_name(device))
        record = tunings.load(identity)
        if record is not None:
            chosen = self.configs[record["best"]]
            _report(
                self,
                chosen,
                identity,
                f"from the tuning cache ({tunings.folder()}), "
                f"{(time.perf_counter() - started) * 1e3:.1f} ms",
            )
            return chosen
        launch_stream = _launch_stream(named, stream)
        if driver.stream_capturing(launch_stream):  # timing needs synchronizing: not in a graph
            raise LaunchError(
                f"{self.__name__}: a first launch for key "
                f"{self._key_values(named)} is being captured into a CUDA graph, "
                f"and tuning it would time the configs on a capturing stream: "
                f"launch once with these key values before the capture (the "
                f"choice is then reused, and cached on disk)"
            )
        candidates = self._pruned(named)
        target = launch_target(self.kernel, device)
        compiling = time.perf_counter()
        compiled = self._compile(candidates, named, grid, block, target)
        compiling = time.perf_counter() - compiling
        runnable = [c for c in candidates if not isinstance(compiled[c], JittileError)]
        if not runnable:
            reasons = "; ".join(f"{c!r}: {compiled[c].message}" for c in candidates)
            raise LaunchError(f"{self.__name__}: no config compiles for these arguments: {reasons}")
        progress = _Progress(self.__name__, len(runnable), started)
        timings, spent = {}, {}  # device ms per config; host seconds its timing took
        saved = _Saved(named, self.restore_value, launch_stream)
        try:
            for config in runnable:
                timing = time.perf_counter()
                timings[config] = self._time(config, named, grid, block, stream, saved, device)
                spent[config] = time.perf_counter() - timing
                progress.step()
        finally:
            saved.restore()
            progress.done()
        chosen = min(runnable, key=lambda c: timings[c])
        self.timings = timings
        seconds = {
            "compiling": round(compiling, 3),
            "compile_workers": self.compile_workers,
            "compiled_here": self.compiled_here,
            "worker_failures": self.worker_failures,
            "compile": {repr(c): t for c, t in self.compile_seconds.items()},
            "timing": {repr(c): round(t, 3) for c, t in spent.items()},
        }
        tunings.save(
            identity,
            self.configs.index(chosen),
            {repr(c): round(t, 6) for c, t in timings.items()},
            {repr(c): compiled[c].message for c in candidates if c not in timings},
            seconds,
        )
        slowest = max(spent, key=spent.get)
        _report(
            self,
            chosen,
            identity,
            f"{len(timings)} configs timed, "
            f"{len(candidates) - len(timings)} dropped, "
            f"{time.perf_counter() - started:.2f} s: compiling {compiling:.2f} s "
            f"({self.compile_workers} worker processes, {self.compiled_here} configs compiled "
            f"here, longest {max(self.compile_seconds.values(), default=0):.2f} s"
            f"{_failures(self.worker_failures)}), timing {sum(spent.values()):.2f} s "
            f"(longest {spent[slowest]:.2f} s, {slowest!r})",
            timings[chosen],
        )
        return chosen

    def _pruned(self, named: dict) -> list[Config]:
        prune = self.prune_configs_by.get("early_config_prune")
        configs = list(prune(self.configs, named)) if prune else list(self.configs)
        if not configs:
            raise LaunchError(f"{self.__name__}: early_config_prune left no config")
        return configs

    def _time(self, config, named, grid, block, stream, saved: _Saved, device: int) -> float:
        """``config``'s median device milliseconds, each sample from a cold L2 (timing.py)."""
        handle = saved.stream

        def prepare():
            saved.restore()
            for name in self.reset_to_zero:
                _zero(named[name], handle)

        def launch():
            self._launch(config, named, grid, block, stream, None)

        if self.do_bench is not None:
            return float(self.do_bench(lambda: (prepare(), launch())))
        from .runtime.timing import event_median

        return event_median(prepare, launch, self.warmup, self.rep, handle, flush_device=device)

    def _compile(self, configs: list[Config], named: dict, grid, block, target) -> dict:
        """Each config's CompiledKernel, or the JittileError that drops it."""
        jobs = self.compile_workers = _worker_count(self.kernel, len(configs))
        self.worker_failures, self.compile_seconds = [], {}
        if jobs > 1:
            self.worker_failures, self.compile_seconds = _compile_in_workers(
                self, configs, named, grid, block, target, jobs
            )
        result = {}
        for config in configs:
            started = time.perf_counter()
            try:
                result[config] = self._compile_one(config, named, grid, block, target)
            except JittileError as error:
                result[config] = error
            here = time.perf_counter() - started
            self.compile_seconds[config] = round(self.compile_seconds.get(config, 0) + here, 3)
        self.compiled_here = sum(
            1
            for c in result.values()
            if not isinstance(c, JittileError) and c.metadata.get("cache") in ("stored", "off")
        )
        self.dropped = {c: e for c, e in result.items() if isinstance(e, JittileError)}
        return result

    def _compile_one(self, config: Config, named: dict, grid, block, target):
        _, block, cluster = self._launch_shape(config, named, grid, block)
        launch = None if block is None else LaunchConfig(grid=1, block=block, cluster=cluster)
        return self.kernel.compile(*self._full(named, config), target=target, launch=launch)

    @public_entry
    def compile_all(self, *args, target: str | Target | None = None, **kwargs) -> dict:
        """Compile every config for example arguments (arrays or ``T.Tensor`` specs), without a
        GPU; returns ``{Config: CompiledKernel or the JittileError that dropped it}``."""
        from .specialize import resolve_target

        requested = None if target is None else parse_target(target)
        named = self._named(args, kwargs)
        return self._compile(
            self.configs, named, None, None, resolve_target(requested, self.kernel.target)
        )

    @property
    def interpret(self) -> _Interpreting:
        """``tuned.interpret(...)`` / ``tuned.interpret[grid, block](...)``: run the first config
        that compiles on the CPU interpreter, untimed."""
        return _Interpreting(self)

    @property
    def cache(self) -> list:
        """This kernel's tuning records on disk (``jittile/cache/tunings.py``)."""
        from .cache import tunings

        return [r for r in tunings.records() if r["identity"]["qualname"] == self.__qualname__]


class _TunedLaunch:
    __slots__ = ("tuner", "grid", "block")  # one is made per ``tuned[grid, block]`` call

    def __init__(self, tuner: Autotuner, grid, block):
        self.tuner, self.grid, self.block = tuner, grid, block

    def __call__(self, *args, stream=None, shared_bytes=None, **kwargs) -> None:
        self.tuner._run(args, kwargs, self.grid, self.block, stream, shared_bytes)


class _Interpreting:
    def __init__(self, tuner: Autotuner, grid=None, block=None):
        self.tuner, self.grid, self.block = tuner, grid, block

    def __getitem__(self, launch) -> _Interpreting:
        return _Interpreting(self.tuner, *launch)

    def __call__(self, *args, **kwargs) -> None:
        from .errors import CompileError

        tuner = self.tuner
        named = tuner._named(args, kwargs)
        problems = []
        for config in tuner.configs:
            grid, block, cluster = tuner._launch_shape(config, named, self.grid, self.block)
            run = tuner.kernel.interpret if grid is None else tuner.kernel.interpret[grid, block]
            try:
                run(*tuner._full(named, config))
            except CompileError as error:  # raised before anything executes: try the next
                problems.append(f"{config!r}: {error.message}")
                continue
            tuner.best_config = config
            return
        raise LaunchError(f"{tuner.__name__}: no config compiles: {'; '.join(problems)}")


# -- helpers ------------------------------------------------------------------------------------
def _launch_device(named: dict) -> int:
    """The device the launch will run on (part of the tuning key: devices differ)."""
    from .runtime import arrays, driver, streams

    if not driver.available():
        raise LaunchError(driver.NO_DEVICE)
    names = list(named)
    views = [arrays.convert_argument(named[n]) for n in names]
    device = streams.launch_device(names, views)
    return driver.current_device() if device is None else device


def _launch_stream(named: dict, stream) -> int:
    from .runtime import arrays, streams

    if stream is not None:
        return streams.stream_handle(stream)
    values = list(named.values())
    return streams.current_stream_reader(values, [arrays.convert_argument(v) for v in values])()


def _device_view(value):
    from .runtime.arrays import device_view

    view = device_view(value)
    if not view.c_contiguous:
        raise LaunchError("reset_to_zero and restore_value take contiguous arrays")
    return view, math.prod(view.shape) * view.dtype.bytes


def _zero(value, stream: int) -> None:
    """Zero an array argument in place, in ``stream``'s order (host memory: at once)."""
    from .runtime import driver

    view, nbytes = _device_view(value)
    if view.host is not None:
        view.host[...] = 0
    else:
        driver.check(
            driver.bindings().cuMemsetD8Async(view.ptr, 0, nbytes, stream), "cuMemsetD8Async"
        )


class _Saved:
    """Copies of the ``restore_value`` arrays, put back (in ``stream``'s order) before each timed
    launch and at the end of the tuning."""

    def __init__(self, named: dict, names: list[str], stream: int):
        from .runtime import driver

        self.stream = stream
        self.copies = []
        for name in names:
            view, nbytes = _device_view(named[name])
            if view.host is not None:
                self.copies.append((view.host, view.host.copy(), 0))
            else:
                copy = driver.alloc(nbytes)
                self.copies.append((view.ptr, copy, nbytes))
                self._copy(copy, view.ptr, nbytes)

    def _copy(self, dst: int, src: int, nbytes: int) -> None:
        from .runtime import driver

        driver.check(
            driver.bindings().cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "cuMemcpyDtoDAsync"
        )

    def restore(self) -> None:
        for target, copy, nbytes in self.copies:
            if isinstance(target, np.ndarray):
                target[...] = copy
            else:
                self._copy(target, copy, nbytes)

    def __del__(self):
        from .runtime import driver

        for target, copy, _nbytes in getattr(self, "copies", ()):
            if not isinstance(target, np.ndarray):
                driver.free(copy)


class _Progress:
    """A one-line progress report on stderr, once a tuning has taken more than a second."""

    def __init__(self, name: str, total: int, started: float):
        self.name, self.total, self.started, self.count, self.shown = name, total, started, 0, False

    def step(self) -> None:
        self.count += 1
        if time.perf_counter() - self.started > 1.0:
            self.shown = True
            done = "#" * (20 * self.count // self.total)
            sys.stderr.write(
                f"\rjittile autotune {self.name}: [{done:<20}] {self.count}/"
                f"{self.total} configs timed"
            )
            sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def _report(
    tuner: Autotuner, config: Config, identity: dict, how: str, milliseconds: float | None = None
) -> None:
    if os.environ.get("JITTILE_PRINT_AUTOTUNING", "") in ("", "0"):
        return
    values = ", ".join(f"{k}={v}" for k, v in zip(identity["key"], identity["key_values"]))
    timing = "" if milliseconds is None else f" ({milliseconds:.4f} ms)"
    print(
        f"jittile autotune {tuner.__name__} [{values}] on {identity['device']}: "
        f"{config!r}{timing}; {how}",
        file=sys.stderr,
    )


# -- compiling in worker processes --------------------------------------------------------------
def _worker_count(kernel: Kernel, configs: int) -> int:
    """Worker processes for compiling ``configs``: only where their cubins come back through the
    disk cache and the kernel can be imported from its file."""
    from .cache.store import disk_cache_requested

    asked = os.environ.get("JITTILE_AUTOTUNE_JOBS")
    jobs = int(asked) if asked else (os.cpu_count() or 1)
    if (
        jobs <= 1
        or configs <= 1
        or not kernel.use_disk_cache
        or not disk_cache_requested()
        or "<locals>" in kernel.__qualname__
        or not os.path.isfile(kernel.source.filename)
    ):
        return 1
    return min(jobs, configs)


def _failures(failures: list[str]) -> str:
    return f"; {len(failures)} workers failed: {failures[0]}" if failures else ""


def _compile_in_workers(
    tuner: Autotuner, configs, named, grid, block, target, jobs: int
) -> tuple[list[str], dict]:
    """Compile ``configs`` in ``jobs`` fresh interpreters, each importing the kernel's file; their
    cubins land in the disk cache, where this process's compiles find them. What fails there
    fails again here, where it is reported; a worker that dies (not a config that fails to
    compile) leaves its configs to this process. Returns the last line of each dead worker's
    error output, and each config's compile seconds in its worker. The workers are plain
    subprocesses, not multiprocessing's: those re-run the parent's ``__main__``, which a script
    read from stdin (``python -``) or a REPL does not have as a file."""
    specs = tuner.kernel.specializer
    tasks = []
    for config in configs:
        full = tuner._full(named, config)
        _, config_block, cluster = tuner._launch_shape(config, named, grid, block)
        example = specs.example_specs(full)
        tasks.append(
            (
                tuner.kernel.source.filename,
                tuner.kernel.source.globals.get("__name__"),
                tuner.__qualname__,
                example,
                target,
                None if config_block is None else (config_block, cluster),
            )
        )
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    workers = []
    for share in range(jobs):
        payload = pickle.dumps({"path": list(sys.path), "tasks": tasks[share::jobs]})
        errors = tempfile.TemporaryFile()
        worker = subprocess.Popen(
            [sys.executable, "-c", _WORKER_MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
        )
        workers.append((worker, errors))
        # every worker gets its share before any is waited for, so they compile at once (each
        # used to get it only once the one before had finished); a worker that died early
        # refuses it, and its configs compile here instead
        with contextlib.suppress(OSError):
            worker.stdin.write(payload)
        with contextlib.suppress(OSError):
            worker.stdin.close()
    failures, seconds = [], {}
    for share, (worker, errors) in enumerate(workers):
        report = worker.stdout.read()  # a few bytes, written as the worker ends
        worker.stdout.close()
        worker.wait()
        with errors:
            if worker.returncode != 0:
                errors.seek(0)
                lines = errors.read().decode(errors="replace").strip().splitlines()
                failures.append(lines[-1] if lines else f"exit status {worker.returncode}")
        if worker.returncode == 0 and report:
            for config, took in zip(configs[share::jobs], pickle.loads(report)):
                seconds[config] = took
    return failures, seconds


_WORKER_MAIN = (
    "import pickle, sys; from jittile.tuning import _compile_tasks; "
    "_compile_tasks(pickle.load(sys.stdin.buffer), sys.stdout.buffer)"
)


def _compile_tasks(payload: dict, report) -> None:
    """A worker's whole life: the parent's import path, then its share of the configs; the
    seconds each took (the first with the kernel module's import) go back pickled on
    ``report``."""
    sys.path[:] = payload["path"]
    seconds = []
    for task in payload["tasks"]:
        started = time.perf_counter()
        _compile_task(task)
        seconds.append(round(time.perf_counter() - started, 3))
    pickle.dump(seconds, report)


_WORKER_MODULES: dict[str, Any] = {}


def _compile_task(task: tuple) -> bool:
    """In a worker: import the kernel's file (once per process) and compile one config."""
    filename, module_name, qualname, example, target, launch = task
    module = _WORKER_MODULES.get(filename)
    if module is None and module_name not in (None, "__main__"):
        # the parent's module by its own name (the spawned worker has the parent's sys.path):
        # helpers enter cache keys as module.qualname, so another name would miss the cubins
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
        if module is not None and getattr(module, "__file__", None) != filename:
            module = None
        if module is not None:
            _WORKER_MODULES[filename] = module
    if module is None:
        name = "jittile_autotune_" + str(abs(hash(filename)))
        spec = importlib.util.spec_from_file_location(name, filename)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _WORKER_MODULES[filename] = module
    found = module
    for part in qualname.split("."):
        found = getattr(found, part)
    kernel = found.kernel if isinstance(found, Autotuner) else found
    shape = None if launch is None else LaunchConfig(grid=1, block=launch[0], cluster=launch[1])
    try:
        kernel.compile(*example, target=target, launch=shape)
        return True
    except JittileError:
        return False
