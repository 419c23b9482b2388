"""Launching a compiled kernel: argument packing, TensorMaps, cluster launch, copy-back.

Parameters are packed into one preallocated buffer whose layout follows numba-cuda's flattening
(arrays: meminfo, parent, nitems, itemsize, data, shape..., strides...; scalars; 128-byte
TensorMaps); a launch only rewrites the values, which keeps the host cost near a raw
``cuLaunchKernel``.

Threads: a :class:`LoadedCubin` (the module loaded once per context) is shared by every thread;
a :class:`Launcher` (the parameter buffer and its kept TensorMap encodings) belongs to one thread
(``CompiledKernel.launcher()`` makes one per thread), so concurrent launches never write one
buffer. The driver copies the parameters when ``cuLaunchKernel`` returns (also into a graph node
under stream capture), so a thread may rewrite its buffer for the next launch at once.
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading

from ..errors import LaunchError
from ..ir import ArrayParam, KernelIR, ScalarParam
from ..targets import Target
from . import driver
from .arrays import DeviceView, device_view
from .tensormap import TENSORMAP_BYTES, TensorMap, encode, region_fields

_SCALAR_FORMATS = {
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float32": "f",
    "float64": "d",
    "bool": "?",
    "float16": "e",
}


# Encoded TensorMaps kept per host TensorMap of a launcher: a launch whose array has the pointer,
# extents and strides of a kept one reuses its 128 bytes instead of calling cuTensorMapEncodeTiled.
_ENCODINGS_KEPT = 64


class ParamBuffer:
    """One contiguous host buffer holding every kernel parameter, plus the ``void*[]`` the driver
    reads them through."""

    def __init__(self, layout: list):
        slots = []  # (offset, size) per flattened parameter
        offset = 0
        self.fields = []  # per runtime param: offset of its first slot
        for kind in layout:
            self.fields.append(len(slots))
            if kind[0] == "array":
                for _ in range(5 + 2 * kind[1]):
                    offset = (offset + 7) // 8 * 8
                    slots.append((offset, 8))
                    offset += 8
            elif kind[0] == "scalar":
                size = struct.calcsize(_SCALAR_FORMATS[kind[1]])
                offset = (offset + size - 1) // size * size
                slots.append((offset, size))
                offset += size
            else:
                offset = (offset + 63) // 64 * 64
                slots.append((offset, TENSORMAP_BYTES))
                offset += TENSORMAP_BYTES
        self.storage = ctypes.create_string_buffer(offset + 64)
        base = ctypes.addressof(self.storage)
        shift = (-base) % 64  # 64-byte aligned TensorMaps
        self.slots = [(o + shift, s) for o, s in slots]
        self.pointers = (ctypes.c_void_p * max(len(slots), 1))(*[base + o for o, _ in self.slots])
        self.view = memoryview(self.storage).cast("B")
        self.address = ctypes.addressof(self.pointers)  # the driver's kernelParams

    def put_bytes(self, index: int, data: bytes) -> None:
        offset = self.slots[self.fields[index]][0]
        self.view[offset : offset + len(data)] = data


class LoadedCubin:
    """One cubin, loaded once per CUDA context and shared by every thread that launches it."""

    def __init__(
        self, name: str, cubin: bytes, entry: str, target: Target | None, dynamic_shared: int
    ):
        self.name, self.cubin, self.entry, self.target = name, cubin, entry, target
        self.dynamic_shared = dynamic_shared
        self._by_context: dict[int, tuple] = {}  # context -> (function, launch call)
        self._lock = threading.Lock()

    def function(self, ctx: int, device: int) -> tuple:
        """``(function, launch call)`` in context ``ctx`` of ``device``: loaded at its first use
        there, once however many threads ask, after the device is checked against the target."""
        found = self._by_context.get(ctx)
        if found is None:
            with self._lock:
                found = self._by_context.get(ctx)
                if found is None:
                    check_device(self.target, driver.device_capability(device), self.name)
                    _, function = driver.load_function(
                        self.cubin, self.entry, max(self.dynamic_shared, 0)
                    )
                    found = (function, driver.launch_call(function, f"launch of {self.name}"))
                    self._by_context[ctx] = found
        return found


class Launcher:
    """One thread's launches of a :class:`LoadedCubin`: its own parameter buffer and the context
    it last launched in."""

    def __init__(self, ir: KernelIR, loaded: LoadedCubin, param_layout: list):
        self.ir = ir
        self.loaded = loaded
        self.layout = param_layout
        self.params = ParamBuffer(param_layout)
        self._function = None
        self._context = None  # the context the function was taken from
        self.device = None  # that context's device
        self._one_device = True  # whether the process sees one device (read at bind)
        self._launch_call = None  # driver.launch_call of the function
        self.packed_by = None  # the FastLaunch whose arguments the buffer holds (fastpath.py)
        names = [p.name for p in ir.runtime_params]
        # Per host TensorMap: its parameter slot, the argument it describes, its spec and the
        # encodings already made, keyed by what of the array enters the encoding.
        self._tensormaps = [
            (len(names) + offset, names.index(spec.tensor), spec, {})
            for offset, spec in enumerate(ir.host_tensormaps)
        ]
        self._writers = [
            self._writer(index, param) for index, param in enumerate(ir.runtime_params)
        ]
        self.dynamic_shared = ir.launch_shared_bytes
        self._pointer = struct.Struct("<q")  # an array's data pointer, the fifth of its slots
        # Per runtime array argument: its data pointer's offset, the alignment its uses need (the
        # largest, and each), and its TensorMaps (slot, spec, kept encodings).
        self._arrays = {}
        for index, param in enumerate(ir.runtime_params):
            if isinstance(param, ArrayParam):
                needs = [a for a in ir.alignments if a.tensor == param.name]
                self._arrays[index] = (
                    self.params.slots[self.params.fields[index] + 4][0],
                    max((a.bytes for a in needs), default=1),
                    needs,
                    [
                        (slot, spec, kept)
                        for slot, argument, spec, kept in self._tensormaps
                        if argument == index
                    ],
                )

    def bind(self, device: int) -> int | None:
        """Make a context of ``device`` current on this thread, with the cubin loaded in it;
        returns the context to make current again after the launch (None: nothing to undo)."""
        ctx = driver.context_for(device)
        previous = driver.use_context(ctx)
        if ctx != self._context:
            self._function, self._launch_call = self.loaded.function(ctx, device)
            self._context, self.device = ctx, device
            self._one_device = driver.device_count() <= 1
        return previous

    @property
    def function(self):
        """The loaded function (a ``CUfunction``) in the context last bound."""
        return self._function

    def launch(
        self, args: list, grid, block, stream: int, cluster=None, shared_bytes: int | None = None
    ) -> None:
        """Launch with ``args`` (DeviceViews for arrays) on ``stream`` in the context
        :meth:`bind` made current; NumPy-backed views are uploaded here and synchronised after,
        so the caller can copy them back. Host copies cannot be captured into a CUDA graph: a
        launch with host arrays on a capturing stream is refused before anything is copied."""
        host = any(type(arg) is DeviceView and arg.host is not None for arg in args)
        if host and driver.stream_capturing(stream):
            raise LaunchError(
                f"{self.ir.name} is being captured into a CUDA graph, but a NumPy (host) "
                f"argument would be copied to the device and back, which a graph cannot record: "
                f"pass device arrays (torch CUDA tensors, CuPy or Numba device arrays) to "
                f"launches made during capture"
            )
        self.packed_by = None
        self.pack(args)
        self.launch_packed(grid, block, stream, cluster, shared_bytes)
        if host:
            driver.synchronize(stream)

    def launch_packed(self, grid, block, stream: int, cluster, shared_bytes: int | None) -> None:
        """Launch with the parameters the buffer holds, in the context last bound."""
        dynamic = self.dynamic_shared if shared_bytes is None else shared_bytes
        if cluster is None:
            self._launch_call(grid, block, dynamic, stream, self.params.address)
        else:
            driver.check(
                self._launch_cluster(self._function, grid, block, dynamic, stream, cluster),
                f"launch of {self.ir.name}",
            )

    def launch_unchecked(self, grid, block, stream: int, cluster, shared_bytes: int | None) -> None:
        """Launch with the parameters the buffer holds, in the context the function was taken
        from, without asking the driver which context is current (a call as costly as the rest
        of a fast launch) where the process sees one device; a launch the driver refuses is
        retried after that check, so that a switched (or, in a new thread, absent) context
        binds again. With several devices the current context is compared first."""
        if (
            cluster is None
            and self._launch_call is not None
            and (self._one_device or driver.current_context() == self._context)
        ):
            try:
                self._launch_call(
                    grid,
                    block,
                    self.dynamic_shared if shared_bytes is None else shared_bytes,
                    stream,
                    self.params.address,
                )
                return
            except LaunchError:
                if driver.current_context() == self._context:
                    raise
        previous = self.bind(self.device or 0)
        try:
            self.launch_packed(grid, block, stream, cluster, shared_bytes)
        finally:
            driver.restore_context(previous)

    def repoint(self, index: int, view: DeviceView, ptr: int) -> None:
        """Runtime array argument ``index``, packed from ``view``, moved to ``ptr`` with the same
        extents, strides and dtype: the alignment its uses need is checked, then only its data
        pointer and the TensorMaps over it are rewritten (kept encodings when seen before)."""
        offset, align, needs, tensormaps = self._arrays[index]
        if ptr % align:
            check_array(
                self.ir.runtime_params[index],
                DeviceView(ptr, view.shape, view.strides, view.dtype),
                needs,
            )
        self._pointer.pack_into(self.params.view, offset, ptr)
        for slot, spec, encoded in tensormaps:
            data = encoded.get((ptr, view.shape, view.strides))
            if data is None:
                self._put_tensormap(
                    slot, spec, encoded, DeviceView(ptr, view.shape, view.strides, view.dtype)
                )
            else:
                self.params.put_bytes(slot, data)

    def write(self, index: int, value) -> None:
        """Write runtime argument ``index`` (a DeviceView for an array) and, for an array, the
        TensorMaps that describe it."""
        view = self._writers[index](value)
        for slot, argument, spec, encoded in self._tensormaps:
            if argument == index:
                self._put_tensormap(slot, spec, encoded, view)

    def _writer(self, index: int, param):
        """A function writing one argument into the parameter buffer, specialised once so that a
        launch does no type dispatch."""
        buf = self.params.view
        offset = self.params.slots[self.params.fields[index]][0]
        if isinstance(param, ArrayParam):
            layout = struct.Struct(f"<{5 + 2 * param.ndim}q")
            dtype, ndim, itemsize = param.dtype, param.ndim, param.dtype.bytes
            static = [
                (axis, extent)
                for axis, extent in enumerate(param.static_shape)
                if extent is not None
            ]
            contiguous = param.layout == "C"
            needs = [a for a in self.ir.alignments if a.tensor == param.name]
            align = max((a.bytes for a in needs), default=1)

            def write_array(view):
                if type(view) is not DeviceView:
                    view = device_view(view)
                shape = view.shape
                if (
                    view.dtype is not dtype
                    or len(shape) != ndim
                    or (static and any(shape[a] != e for a, e in static))
                    or (contiguous and not view.c_contiguous)
                ):
                    check_array(param, view)
                if view.host is not None and not view.owned:
                    view.upload()
                if view.ptr % align:  # the device pointer: checked after an upload
                    check_array(param, view, needs)
                layout.pack_into(
                    buf, offset, 0, 0, math.prod(shape), itemsize, view.ptr, *shape, *view.strides
                )
                return view

            return write_array
        if isinstance(param, ScalarParam):
            scalar = struct.Struct("<" + _SCALAR_FORMATS[param.dtype.name])

            def write_scalar(value):
                scalar.pack_into(buf, offset, value)

            return write_scalar

        def write_tensormap(value):
            if not isinstance(value, TensorMap):
                raise LaunchError(f"argument {param.name!r} must be a jittile.TensorMap")
            buf[offset : offset + TENSORMAP_BYTES] = value.data

        return write_tensormap

    def pack(self, args: tuple) -> None:
        views = [write(value) for write, value in zip(self._writers, args)]
        for slot, argument, spec, encoded in self._tensormaps:
            self._put_tensormap(slot, spec, encoded, views[argument])

    def _put_tensormap(self, slot: int, spec, encoded: dict, view: DeviceView) -> None:
        """Write the TensorMap of ``spec`` over ``view``: kept bytes when the pointer, extents and
        strides were seen before, else a new encoding."""
        key = (view.ptr, view.shape, view.strides)
        data = encoded.get(key)
        if data is None:
            data = encode(region_fields(spec, view))
            if len(encoded) >= _ENCODINGS_KEPT:
                encoded.clear()
            encoded[key] = data
        self.params.put_bytes(slot, data)

    def _launch_cluster(self, function, grid, block, shared: int, stream: int, cluster):
        config = _cluster_config(grid, block, shared, stream, cluster)
        return driver.bindings().cuLaunchKernelEx(config, function, self.params.address, 0)

    def max_active_clusters(self, cluster, block, shared_bytes: int | None = None) -> int:
        """How many clusters of shape ``cluster`` (blocks of ``block`` threads, ``shared_bytes``
        of dynamic shared memory, by default the kernel's) the device runs at the same time, in
        the context last bound (``cuOccupancyMaxActiveClusters``)."""
        dynamic = self.dynamic_shared if shared_bytes is None else shared_bytes
        config = _cluster_config(cluster, block, dynamic, 0, cluster)
        return driver.check(
            driver.bindings().cuOccupancyMaxActiveClusters(self._function, config),
            f"cuOccupancyMaxActiveClusters of {self.ir.name}",
        )


def _cluster_config(grid, block, shared: int, stream: int, cluster):
    """A ``CUlaunchConfig`` with the cluster-dimension attribute (x, y, z tuples)."""
    drv = driver.bindings()
    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared
    config.hStream = stream
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config.attrs = [attr]
    config.numAttrs = 1
    return config


def check_device(built: Target | None, capability: tuple[int, int] | None, name: str) -> None:
    """A cubin for an architecture-specific target runs only on that architecture; a generic one on
    that capability or newer. Refuse before the driver does, with a readable reason."""
    if built is None or capability is None:
        return
    device = capability[0] * 10 + capability[1]
    fits = device == built.capability if built.suffix == "a" else device >= built.capability
    if built.suffix == "f":
        fits = capability[0] == built.major and device >= built.capability
    if not fits:
        raise LaunchError(
            f"{name} was compiled for {built.name}, which cannot run on this device "
            f"(compute capability {capability[0]}.{capability[1]}); compile it with "
            f"target='sm_{capability[0]}{capability[1]}a' or leave target unset"
        )


def check_array(param: ArrayParam, view: DeviceView, alignments: list = ()) -> None:
    """Dtype, rank, static extents and data alignment of an array argument against its
    specialization."""
    if view.dtype.name != param.dtype.name:
        raise LaunchError(
            f"argument {param.name!r}: dtype {view.dtype.name} does not match the "
            f"kernel's {param.dtype.name}"
        )
    if view.ndim != param.ndim:
        raise LaunchError(
            f"argument {param.name!r}: rank {view.ndim} does not match the kernel's "
            f"rank {param.ndim}"
        )
    for axis, (want, got) in enumerate(zip(param.static_shape, view.shape)):
        if want is not None and want != got:
            raise LaunchError(
                f"argument {param.name!r}: extent {got} on axis {axis} does not match "
                f"the annotated {want}"
            )
    if param.layout == "C" and not view.c_contiguous:
        raise LaunchError(
            f"argument {param.name!r} is not C-contiguous but the kernel was "
            f"specialised for a contiguous array"
        )
    for need in alignments:
        if view.ptr % need.bytes:
            raise LaunchError(
                f"argument {param.name!r}: its data at {view.ptr:#x} is not "
                f"{need.bytes}-byte aligned, which {need.why} needs; pass an array "
                f"whose data starts on a {need.bytes}-byte boundary"
            )
