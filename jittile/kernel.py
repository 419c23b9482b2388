"""``@jittile.kernel``: specialization, compilation, caching and launching of one kernel.

Data flows one way: arguments -> specialization (parameter kinds) -> cache key -> memory / disk
cache, or frontend lowering and backend compile -> launcher. The key needs no lowering, so a disk
hit loads the cubin and the kernel's recorded IR without running the frontend or numba.
"""
from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .dtypes import dtype as lookup_dtype
from .errors import CompileError, LaunchError
from .ir import ArrayParam, ConstexprParam, KernelIR, Plan, ScalarParam, TensorMapParam
from .frontend.source import KernelSource, load_source
from .language.cuda import LaunchConfig
from .language.types import ScalarType, Tensor, _Constexpr
from .targets import Target, default_target


def toolchain_versions() -> dict:
    """Versions that change generated code: jittile (release, and a digest of its code-generating
    modules), numba-cuda, NVVM, nvJitLink and llvmlite; computed once per process."""
    from .cache.components import toolchain_versions as versions

    return versions(__version__)


@dataclass
class CompiledKernel:
    """One specialization: PTX, cubin, metadata and the per-call-site instruction plan."""

    ptx: str
    cubin: bytes
    metadata: dict
    ir: KernelIR
    lowered_source: str
    entry: str
    param_layout: list
    _sass: str | None = field(default=None, repr=False)
    _launcher: object = field(default=None, repr=False)

    @property
    def sass(self) -> str:
        if self._sass is None:
            from .backend.toolchain import disassemble

            self._sass = disassemble(self.cubin)
        return self._sass

    @property
    def plan(self) -> Plan:
        """Per tile call site (:class:`jittile.ir.SiteRecord`): location, opcode, family and its
        native instructions (:class:`jittile.ir.PlanRecord`); ``print(ck.plan)`` reads them in
        the kernel's own names."""
        return self.ir.plan

    def launcher(self):
        if self._launcher is None:
            from .runtime.launcher import Launcher

            self._launcher = Launcher(self.ir, self.cubin, self.entry, self.param_layout,
                                      target=self.metadata.get("target"))
        return self._launcher


_runtime_arrays = None  # jittile.runtime.arrays, imported by the first launch


def _import_runtime_arrays():
    global _runtime_arrays
    from .runtime import arrays

    _runtime_arrays = arrays
    return arrays


def _is_runtime_argument(value) -> bool:
    """Whether ``value`` is a DeviceView or a TensorMap. Neither exists before its module is
    imported, so the classes are looked up among the loaded modules rather than imported."""
    for module_name, class_name in (("jittile.runtime.arrays", "DeviceView"),
                                    ("jittile.runtime.tensormap", "TensorMap")):
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, getattr(module, class_name)):
            return True
    return False


def _source_digest(source: KernelSource) -> str:
    """Digest of the kernel's code, insensitive to comments, formatting, the docstring, the file and
    the line it starts on."""
    from .cache.components import source_digest

    return source_digest(source.tree)


class Kernel:
    """A JIT kernel; call it (``k(*args)`` or ``k[grid, block](*args)``) or ``k.compile(...)``."""

    def __init__(self, pyfunc, target: str | None = None, cache: bool = True):
        self.pyfunc = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.target = target
        self.use_disk_cache = cache
        self._signature = inspect.signature(pyfunc, eval_str=True)
        self._source: KernelSource | None = None
        self._memory: dict = {}
        self._prepared: dict = {}
        self._launch_target: Target | None = None
        self._static_positions = {i for i, p in enumerate(self._signature.parameters.values())
                                  if isinstance(p.annotation, _Constexpr)}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<jittile.kernel {self.__qualname__}>"

    # ---------------------------------------------------------------------- specialization
    @property
    def source(self) -> KernelSource:
        if self._source is None:
            self._source = load_source(self.pyfunc)
        return self._source

    def _params(self, args: tuple) -> tuple[list, list]:
        """Parameter kinds for ``args``, and the argument values that the launch passes.

        ``T.Tensor`` specs and scalars are told apart without the runtime package, so compiling
        from specs (and a disk hit) does not import it.
        """
        names = list(self._signature.parameters)
        if len(args) != len(names):
            raise LaunchError(f"{self.__name__} takes {len(names)} arguments, got {len(args)}")
        params, values = [], []
        for name, value in zip(names, args):
            ann = self._signature.parameters[name].annotation
            ann = None if ann is inspect.Parameter.empty else ann
            if isinstance(ann, _Constexpr):
                if isinstance(value, Tensor) or _is_runtime_argument(value):
                    raise LaunchError(f"constexpr parameter {name!r} needs a value, got {value!r}")
                params.append(ConstexprParam(name, value))
                continue
            if isinstance(value, Tensor):
                params.append(self._array_param(name, ann, value))
            elif isinstance(ann, ScalarType) or isinstance(value, (int, float, bool, np.generic)):
                params.append(self._scalar_param(name, ann, value))
            else:
                from .runtime.arrays import DeviceView
                from .runtime.tensormap import TensorMap

                if isinstance(value, TensorMap):
                    params.append(TensorMapParam(name))
                elif isinstance(value, DeviceView):
                    params.append(self._array_param(name, ann, value))
                else:
                    raise LaunchError(f"argument {name!r}: cannot pass {type(value).__name__}")
            values.append(value)
        return params, values

    def _array_param(self, name: str, ann, value) -> ArrayParam:
        if isinstance(value, Tensor):
            dtype, ndim, shape, layout = lookup_dtype(value.dtype), value.ndim, value.static_shape, "C"
        else:
            dtype, ndim, shape = value.dtype, value.ndim, value.shape
            layout = "C" if value.c_contiguous else "A"
        static = (None,) * ndim
        if isinstance(ann, Tensor):
            if ann.ndim != ndim:
                raise LaunchError(f"argument {name!r}: rank {ndim} does not match the annotated "
                                  f"T.Tensor{ann.shape}")
            if lookup_dtype(ann.dtype) != dtype:
                raise LaunchError(f"argument {name!r}: dtype {dtype.name} does not match the "
                                  f"annotated {ann.dtype}")
            static = ann.static_shape
            for axis, (want, got) in enumerate(zip(static, shape)):
                if want is not None and got is not None and want != got:
                    raise LaunchError(f"argument {name!r}: extent {got} on axis {axis} does not "
                                      f"match the annotated {want}")
        return ArrayParam(name, dtype, ndim, static, layout)

    def _scalar_param(self, name: str, ann, value) -> ScalarParam:
        if isinstance(ann, ScalarType):
            return ScalarParam(name, ann.dtype)
        if isinstance(value, np.generic):
            return ScalarParam(name, lookup_dtype(value.dtype.name))
        if isinstance(value, bool):
            return ScalarParam(name, lookup_dtype("bool"))
        return ScalarParam(name, lookup_dtype("int64" if isinstance(value, int) else "float64"))

    def _annotation_specs(self) -> list:
        specs = []
        for name, p in self._signature.parameters.items():
            ann = p.annotation
            if isinstance(ann, Tensor):
                specs.append(ann)
            elif isinstance(ann, ScalarType):
                specs.append(ann(0))
            else:
                raise CompileError(f"{self.__name__}: parameter {name!r} has no T.Tensor or scalar "
                                   f"annotation; pass example arguments to compile()")
        return specs

    # ---------------------------------------------------------------------------- compiling
    def _resolve_target(self, target) -> Target:
        return Target.parse(target or self.target or default_target())

    def _components(self, params: list, target: Target, launch) -> dict:
        """What the cubin depends on (jittile/cache/components.py says what is in and out), known
        before lowering so that a cache hit needs none.

        Globals: every data value the body reads from its module or closure, including attribute
        reads like ``cfg.TILE`` (all that the frontend can fold). Arrays enter by dtype, rank,
        static extents and layout; the alignment of their data is not a component: the generated
        code does not depend on it (TMA operands' 16-byte alignment is checked at launch), so it
        would only duplicate identical cubins. ``launch`` is the block and cluster of a
        ``kernel[grid, block]`` launch, or None for the kernel's own ``T.device_entry`` (which its
        source, globals and static parameters decide).
        """
        from .cache.components import helper_components, referenced_globals

        args = []
        for p in params:
            if isinstance(p, ArrayParam):
                args.append({"name": p.name, "kind": "array", "dtype": p.dtype.name, "ndim": p.ndim,
                             "static_shape": list(p.static_shape), "layout": p.layout})
            elif isinstance(p, ScalarParam):
                args.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
            elif isinstance(p, TensorMapParam):
                args.append({"name": p.name, "kind": "tensormap"})
        return {
            "kernel": self.__qualname__,
            "source": _source_digest(self.source),
            "globals": referenced_globals(self.source.tree, self.source.globals,
                                          self.source.closure),
            "helpers": helper_components(self.source.tree, self.source.globals,
                                         self.source.closure),
            "static_params": {p.name: repr(p.value) for p in params
                              if isinstance(p, ConstexprParam)},
            "args": args,
            "launch": None if launch is None else {"block": list(launch.block),
                                                   "cluster": launch.cluster and list(launch.cluster)},
            "target": target.name,
            "versions": toolchain_versions(),
        }

    def compile(self, *args, target: str | None = None, launch=None, **kwargs) -> CompiledKernel:
        """Compile for example arguments (arrays or ``T.Tensor`` specs; none: the annotations);
        needs no GPU. NumPy arrays are only inspected, never copied."""
        args = self._bind(args, kwargs)
        if not args:
            args = tuple(self._annotation_specs())
        specs = []
        for a in args:
            if isinstance(a, np.ndarray):
                specs.append(Tensor(a.shape, a.dtype.name))
            elif (isinstance(a, (Tensor, int, float, bool, np.generic)) or _is_runtime_argument(a)
                  or not hasattr(a, "shape")):
                specs.append(a)
            else:
                from .runtime.arrays import device_view

                specs.append(device_view(a))
        params, _ = self._params(tuple(specs))
        return self._compiled(params, self._resolve_target(target), launch)

    def _compiled(self, params: list, target: Target, launch) -> CompiledKernel:
        memo_key = (target.name, tuple(params), launch)
        found = self._memory.get(memo_key)
        if found is not None:
            return found
        with self._lock:
            found = self._memory.get(memo_key)
            if found is None:
                found = self._build(params, target, launch)
                self._memory[memo_key] = found
        return found

    def _build(self, params: list, target: Target, launch) -> CompiledKernel:
        """Key, then load the disk entry, or lower, compile and store it.

        ``metadata["cache"]`` says which: ``"hit"`` (loaded from disk, not lowered again unless
        lowering warned), ``"stored"`` (compiled and written, or written first by a racing
        process), ``"off"`` (compiled; disk cache off or not writable). ``JITTILE_DEBUG=cache``
        logs each hit and miss, a miss with the components that differ from the closest entry of
        the same kernel.
        """
        from . import cache as jcache

        start = time.perf_counter()
        components = self._components(params, target, launch)
        key = jcache.make_key(components)
        debug = jcache.debug_enabled()
        store = jcache.default_store() if self.use_disk_cache else None
        usable = store is not None and store.enabled
        if usable:
            entry = store.load(key)
            compiled = self._from_entry(entry, params, target, launch, key) if entry else None
            if compiled is not None:
                if debug:
                    jcache.log(f"hit {self.__qualname__} {key[:12]} ({target.name}, "
                               f"{entry.hits} hits, {1000 * (time.perf_counter() - start):.1f} ms)")
                return compiled
        if debug:
            if usable:
                previous = [e for e in store.entries() if e.qualname == self.__qualname__]
                why = jcache.explain_miss(components, previous)
            else:
                why = "miss: disk cache off (" + ("cache=False on this kernel" if store is None
                                                   else store.disabled_reason) + ")"
            jcache.log(f"{self.__qualname__} {key[:12]} {why}")
        from .backend.compiler import compile_lowered
        from .frontend.lower import lower_kernel

        lowered = lower_kernel(self.source, params, target, launch)
        artifact = compile_lowered(lowered, target, self.source.filename)
        ir = lowered.ir
        meta = {
            "name": self.__name__, "qualname": self.__qualname__, "target": target.name,
            "key": key, "key_components": components, "static_params": components["static_params"],
            "source_file": self.source.filename, "source_line": self.source.firstlineno,
            "entry": artifact.entry, "registers": artifact.usage["registers"],
            "shared_bytes": ir.shared_bytes, "static_shared_bytes":
                artifact.usage["static_shared_bytes"], "dynamic_shared": ir.dynamic_shared,
            "local_bytes": artifact.usage["local_bytes"],
            "spill_stores": artifact.usage["spill_stores"],
            "spill_loads": artifact.usage["spill_loads"],
            "compile_seconds": round(time.perf_counter() - start, 4),
            "param_layout": [list(p) for p in artifact.param_layout],
            "toolchain": artifact.toolchain,
            "kernel_ir": ir.record(self.source.node_indices()),
            "lowered_source": lowered.source,
            "lowering_warnings": lowered.warnings,
        }
        stored = store.store(key, artifact.cubin, artifact.ptx, meta) if usable else None
        meta["cache"] = "stored" if stored is not None else "off"
        if debug:
            jcache.log(f"{'stored' if stored is not None else 'compiled (memory only)'} "
                       f"{self.__qualname__} {key[:12]} in {meta['compile_seconds']:.3f} s")
        return CompiledKernel(artifact.ptx, artifact.cubin, meta, ir, lowered.source,
                              artifact.entry, artifact.param_layout)

    def _from_entry(self, entry, params: list, target: Target, launch,
                    key: str) -> CompiledKernel | None:
        """The compiled kernel of a verified disk entry, its IR restored from the metadata;
        ``None`` (a miss) when its files vanished meanwhile or its metadata cannot describe this
        launch (then it is removed, with a warning). A kernel whose lowering warned is lowered
        again, so that the warnings are issued again, at the kernel's current lines."""
        import warnings

        from . import cache as jcache
        from .errors import JittileWarning

        meta = dict(entry.metadata)
        try:
            cubin, ptx = entry.cubin(), entry.ptx()
        except FileNotFoundError:
            return None  # removed by another process (prune, clear) since it was verified
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"unreadable files ({exc})"
        else:
            try:
                layout = [tuple(p) for p in meta["param_layout"]]
                ir = KernelIR.restore(meta["kernel_ir"], params, self.source.locate)
                lowered_source = meta["lowered_source"]
                if (not isinstance(meta["entry"], str) or meta.get("key") != key or not cubin
                        or not isinstance(lowered_source, str)):
                    raise ValueError("entry name, key, cubin or lowered source")
                problem = None
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                problem = f"metadata lacks or garbles {exc}"
        if problem is not None:
            warnings.warn(f"jittile cache: ignoring broken entry {key[:12]} in {entry.path.parent.parent}: "
                          f"{problem}; it will be rebuilt", JittileWarning, stacklevel=5)
            jcache.default_store().remove(key)
            return None
        if meta.get("lowering_warnings"):
            from .frontend.lower import lower_kernel

            lowered = lower_kernel(self.source, params, target, launch)
            ir, lowered_source = lowered.ir, lowered.source
        # The file and line are not part of the key: report where this kernel is now.
        meta.update(cache="hit", source_file=self.source.filename, source_line=self.source.firstlineno)
        return CompiledKernel(ptx, cubin, meta, ir, lowered_source, meta["entry"], layout)

    @property
    def cache(self) -> list:
        """This kernel's disk-cache entries, most recently used first: those of its qualified name
        compiled from this kernel's code (wherever the file was) or from this file (older versions
        of the code); a same-named kernel of another file with other code is not this kernel."""
        from . import cache as jcache

        digest, filename = _source_digest(self.source), self.source.filename
        return [e for e in jcache.entries() if e.qualname == self.__qualname__
                and (e.metadata.get("key_components", {}).get("source") == digest
                     or e.metadata.get("source_file") == filename)]

    # ---------------------------------------------------------------------------- launching
    def __getitem__(self, config) -> "_Configured":
        if not isinstance(config, tuple) or len(config) != 2:
            raise LaunchError("launch with kernel[grid, block](...)")
        return _Configured(self, LaunchConfig(grid=config[0], block=config[1]))

    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs):
        return self._launch(args, kwargs, None, stream, cluster, shared_bytes)

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        try:
            return tuple(self._signature.bind(*args, **kwargs).arguments.values())
        except TypeError as exc:
            raise LaunchError(f"{self.__name__}: {exc}") from None

    def _launch(self, args, kwargs, config: LaunchConfig | None, stream, cluster, shared_bytes):
        """Launch; repeated launches with the same argument kinds take a dictionary lookup to find
        the compiled kernel, its launch dimensions and its parameter buffer."""
        arrays = _runtime_arrays or _import_runtime_arrays()
        view_type = arrays.DeviceView
        if kwargs:
            args = self._bind(args, kwargs)
        converted = [arrays.convert_argument(a) for a in args]
        static = self._static_positions
        if static:
            kinds = [("static", v) if i in static else (v.kind if type(v) is view_type else type(v))
                     for i, v in enumerate(converted)]
        else:
            kinds = [v.kind if type(v) is view_type else type(v) for v in converted]
        key = (config, cluster, *kinds)
        try:
            prepared = self._prepared.get(key)
            if prepared is None:
                prepared = self._prepare(tuple(converted), config, cluster)
                self._prepared[key] = prepared
            compiled, grid, block, cluster_dims, runtime_positions = prepared
            compiled.launcher().launch([converted[i] for i in runtime_positions], grid, block,
                                       stream, cluster_dims, shared_bytes)
        finally:
            for value in converted:
                if type(value) is view_type and value.owned:
                    value.finish()

    def _prepare(self, converted: tuple, config: LaunchConfig | None, cluster):
        if self._launch_target is None:
            self._launch_target = self._resolve_target(None)
        if config is not None and cluster is not None:
            config = LaunchConfig(grid=config.grid, block=config.block, cluster=cluster)
        key_launch = None if config is None else LaunchConfig(grid=1, block=config.block,
                                                               cluster=config.cluster)
        params, _ = self._params(converted)
        compiled = self._compiled(params, self._launch_target, key_launch)
        launch = config or compiled.ir.launch
        if launch is None:
            raise LaunchError(f"{self.__name__} has no launch configuration: use "
                              f"T.device_entry(launch=...) or kernel[grid, block](...)")
        cluster_dims = cluster if cluster is not None else launch.cluster
        if cluster_dims is not None:
            cluster_dims = LaunchConfig(cluster=cluster_dims).cluster
        runtime = tuple(i for i, p in enumerate(params) if not isinstance(p, ConstexprParam))
        return compiled, launch.grid, launch.block, cluster_dims, runtime


class _Configured:
    def __init__(self, kernel: Kernel, config: LaunchConfig):
        self.kernel = kernel
        self.config = config

    def __call__(self, *args, stream=None, cluster=None, shared_bytes=None, **kwargs):
        return self.kernel._launch(args, kwargs, self.config, stream, cluster, shared_bytes)


def func(fn):
    """Decorator: ``@jittile.func`` marks a device helper that kernels inline where they call it."""
    from .language.markers import DeviceFunction

    return DeviceFunction(fn)


def kernel(fn=None, *, target: str | None = None, cache: bool = True):
    """Decorator: ``@jittile.kernel`` or ``@jittile.kernel(target="sm_90a", cache=True)``."""
    if fn is None:
        return lambda f: Kernel(f, target=target, cache=cache)
    return Kernel(fn, target=target, cache=cache)
