"""``@jittile.kernel``: the kernel object users hold, a facade over the modules that do the work.

Data flows one way: arguments -> specialization (jittile/specialize.py: parameter kinds) -> key
(jittile/keying.py) -> memory or disk cache, else frontend lowering and backend compile
(jittile/build.py, with the entry metadata codec in jittile/entry.py) -> launcher
(jittile/launch.py). The key needs no lowering, so a disk hit loads the cubin and the kernel's
recorded IR without running the frontend or numba.
"""

from __future__ import annotations

import linecache
import threading

from .build import build
from .entry import CompiledKernel
from .errors import (
    CompileError,
    JittileError,
    LaunchError,
    Location,
    closest_name,
    public_entry,
    strictness,
    user_frame,
)
from .frontend.checks import definition_problem
from .frontend.source import KernelSource, load_source
from .keying import source_digest, toolchain_versions
from .language.cuda import LaunchConfig
from .launch import (
    CONFIGURED_KEPT,
    Configured,
    FastPaths,
    launch_failure,
    launch_kernel,
    plain_dimensions,
)
from .specialize import Specializer, resolve_target
from .stages import always_compile
from .targets import SUPPORTED_TARGETS, Target
from .watch import GlobalsWatch

__all__ = ["CompiledKernel", "Kernel", "func", "kernel", "toolchain_versions"]


class Kernel:
    """A ``@jittile.kernel`` function. Use it as:

    - ``k(*args)``: launch on the GPU with the launch of its ``T.device_entry``; arrays are
      NumPy, CuPy, PyTorch or Numba (``stream=``, ``cluster=``, ``shared_bytes=`` override);
    - ``k[grid, block](*args)``: launch with this grid and block instead;
    - ``k.compile(*args, target="sm_90a")``: compile without a GPU (arrays or ``T.Tensor``
      specs; none: the annotations) and return a :class:`CompiledKernel` with ``.ptx``,
      ``.cubin``, ``.sass``, ``.plan`` and ``.metadata``;
    - ``k.interpret(*args)`` / ``k.interpret[grid, block](*args)``: run it on the CPU
      interpreter, bit-exactly as the GPU would, writing the arrays back;
    - ``k.cache``: its disk-cache entries (``jittile cache list NAME`` on the command line).

    What launches and the interpreter use: ``specializer`` (the signature), ``specialization()``
    and ``refresh()``, ``watch`` (the globals the code reads), ``prepared`` (launches by argument
    kinds and device) and ``fast_paths`` (this thread's fast paths by launch configuration).
    """

    def __init__(
        self, pyfunc, target: str | Target | None = None, cache: bool = True, strict: bool = False
    ):
        self.pyfunc = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.target = None if target is None else Target.parse(target)
        self.use_disk_cache = cache
        self.strict = strict
        self.specializer = Specializer(pyfunc)
        self._source: KernelSource | None = None
        self._memory: dict = {}
        self.prepared: dict = {}
        self.fast_paths = FastPaths()
        self._configured: dict = {}  # kernel[grid, block] items of plain ints -> Configured
        self.watch: GlobalsWatch | None = None  # made with the first specialization
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<jittile.kernel {self.__qualname__}>"

    @property
    def interpret(self):
        """``kernel.interpret(*args)`` / ``kernel.interpret[grid, block](*args)``: run this call
        on the CPU interpreter (jittile/interpreter/) instead of the GPU."""
        from .interpreter import Interpreting

        return Interpreting(self)

    @property
    def source(self) -> KernelSource:
        """The kernel's parsed definition; read again after a closure variable changed."""
        if self._source is None:
            self._source = load_source(self.pyfunc)
        return self._source

    @public_entry
    def compile(
        self, *args, target: str | Target | None = None, launch=None, **kwargs
    ) -> CompiledKernel:
        """Compile for example arguments (arrays or ``T.Tensor`` specs; none: the annotations);
        needs no GPU. NumPy arrays are only inspected, never copied."""
        specializer = self.specializer
        args = specializer.bind(args, kwargs) or tuple(specializer.annotation_specs())
        params = specializer.params(specializer.example_specs(args))
        requested = None if target is None else parse_target(target)
        return self.specialization(params, resolve_target(requested, self.target), launch)

    def specialization(self, params: list, target: Target, launch) -> CompiledKernel:
        """The specialization for ``params``: from memory, else built (disk cache or compile).
        The globals watch is made before the first build keys the kernel, so that a change
        during a build is noticed later rather than missed."""
        self.refresh()
        memo_key = (target.name, tuple(params), launch)
        again = always_compile()
        found = None if again else self._memory.get(memo_key)
        if found is not None:
            return found
        with self._lock:
            if self.watch is None:
                self.watch = GlobalsWatch(self.source)
            found = None if again else self._memory.get(memo_key)
            if found is None:
                with strictness(self.strict):
                    found = build(
                        self.__name__,
                        self.__qualname__,
                        self.source,
                        params,
                        target,
                        launch,
                        self.use_disk_cache,
                    )
                self._memory[memo_key] = found
        return found

    def refresh(self) -> None:
        """Forget every specialization when a global or closure variable the kernel's code reads
        has changed since it was compiled; the next use keys and compiles with the current
        values (issue #13: never run code compiled for old values)."""
        watch = self.watch
        if watch is None or not watch.changed():
            return
        with self._lock:
            if self.watch is watch:
                for helper in watch.helpers:
                    helper.reread()
                self._source = self.watch = None  # a re-read source captures the closure anew
                self._memory, self.prepared, self.fast_paths = {}, {}, FastPaths()

    @property
    def cache(self) -> list:
        """This kernel's disk-cache entries, most recently used first: those of its qualified name
        compiled from this kernel's code (wherever the file was) or from this file (older versions
        of the code); a same-named kernel of another file with other code is not this kernel."""
        from . import cache as jcache

        digest, filename = source_digest(self.source), self.source.filename
        return [
            e
            for e in jcache.entries()
            if e.qualname == self.__qualname__
            and (
                e.metadata.get("key_components", {}).get("source") == digest
                or e.metadata.get("source_file") == filename
            )
        ]

    def __getitem__(self, config) -> Configured:
        """``k[grid, block]``; the Configured of plain int dimensions is kept (a repeated launch
        shape makes no LaunchConfig: a few microseconds of every such launch's host time)."""
        plain = plain_dimensions(config)
        found = self._configured.get(config) if plain else None
        if found is None:
            if not isinstance(config, tuple) or len(config) != 2:
                raise LaunchError("launch with kernel[grid, block](...)")
            found = Configured(self, LaunchConfig(grid=config[0], block=config[1]))
            if plain:
                if len(self._configured) >= CONFIGURED_KEPT:
                    self._configured.clear()
                self._configured[config] = found
        return found

    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs) -> None:
        fast = None if kwargs else self.fast_paths.table.get((None, cluster))
        try:
            if fast is None or not fast.launch(args, stream, shared_bytes):
                launch_kernel(self, args, kwargs, None, stream, cluster, shared_bytes)
        except LaunchError as error:
            raise launch_failure(error, self.__name__) from None


def func(fn):
    """Decorator: ``@jittile.func`` marks a device helper that kernels inline where they call it."""
    from .language.markers import DeviceFunction

    _check_definition(fn, "helper")
    return DeviceFunction(fn, load_source)


@public_entry
def kernel(
    fn=None, *, target: str | Target | None = None, cache: bool = True, strict: bool = False
):
    """Decorator: ``@jittile.kernel`` or ``@jittile.kernel(target="sm_90a", cache=True,
    strict=False)`` makes a function written in the kernel language ``T`` a :class:`Kernel`:

    - ``k.compile(*args, target=...)`` compiles it without a GPU (``.ptx``, ``.cubin``,
      ``.sass``, ``.plan``);
    - ``k(*args)`` launches it on the GPU, ``k[grid, block](*args)`` with another launch;
    - ``k.interpret(*args)`` runs it on the CPU interpreter (or every launch, with
      ``JITTILE_INTERPRET=1``).

    ``target`` (default: the GPU's, else ``sm_90a``) is checked here, where it is written.
    ``cache=False`` keeps compiled code in memory only. ``strict=True`` (or
    ``JITTILE_STRICT=1``) raises each JittileWarning about the kernel's code as a ContractError
    at the kernel's line.

    jittile compiles a kernel from its source: a function of a ``.py`` file, or one whose source
    is in ``linecache`` under its code's file name (IPython and Jupyter cells are; for
    ``exec(compile(src, name, "exec"))`` register it first with ``linecache.cache[name] =
    (len(src), None, src.splitlines(True), name)``). A kernel defined in the plain REPL or with
    ``python -c`` has no source to read: compiling it raises a CompileError saying so."""
    if target is not None:
        target = parse_target(target)
    if fn is None:
        return lambda f: Kernel(_checked_definition(f), target=target, cache=cache, strict=strict)
    _check_definition(fn, "kernel")
    return Kernel(fn, target=target, cache=cache, strict=strict)


def _check_definition(fn, what: str) -> None:
    problem = definition_problem(fn, what)
    if problem is not None:
        raise problem


def _checked_definition(fn):
    _check_definition(fn, "kernel")
    return fn


def parse_target(target: str | Target) -> Target:
    """A ``target=`` a user passed, parsed where it enters (the decorator, ``compile``, the
    autotuner's ``compile_all``): an unknown or unsupported name is a CompileError at the user's
    line that names it, with the closest supported name, before any compile."""
    try:
        return Target.parse(target)
    except JittileError as exc:
        frame = user_frame()
        if frame is None:
            raise
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        line = linecache.getline(filename, lineno)
        col = line.find("target")
        end = line.find(",", col) if col >= 0 else -1
        end = end if end >= 0 else line.find(")", col)
        where = Location(filename, lineno, max(col, 0), end if col >= 0 and end > col else None)
        close = closest_name(str(target), SUPPORTED_TARGETS)
        hint = (
            (f"did you mean target={close!r}?" if close else "")
            + " Hopper is target='sm_90a', Blackwell target='sm_100a'; or leave target out to "
            "compile for the GPU present (sm_90a without one)"
        )
        raise CompileError(exc.message, where, hint=hint.strip()) from None
