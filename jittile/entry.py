"""A compiled specialization and the metadata codec of its cache entry.

The metadata (``<kernel>.json`` of a disk entry) records, besides what ``jittile cache`` reports, the
kernel's IR and parameter layout, so that a disk hit can launch and report a kernel without
lowering it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .frontend.source import KernelSource
from .ir import KernelIR, Plan, launch_dims
from .stages import pack_text
from .targets import Target


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
    target: Target
    _sass: str | None = field(default=None, repr=False)
    _stages: object = field(default=None, repr=False, compare=False)  # stages.Stages, made once
    _loaded: object = field(default=None, repr=False, compare=False)  # runtime LoadedCubin
    _threads: threading.local = field(
        default_factory=threading.local, repr=False, compare=False
    )  # .launcher: this thread's Launcher

    def __repr__(self) -> str:
        meta = self.metadata
        return (
            f"<jittile.CompiledKernel {meta.get('name')} for {meta.get('target')}: "
            f"{meta.get('registers')} registers, {meta.get('shared_bytes')} B shared, "
            f"key {str(meta.get('key'))[:12]}>"
        )

    @property
    def sass(self) -> str:
        if self._sass is None:
            from .backend.toolchain import disassemble

            self._sass = disassemble(self.cubin)
        return self._sass

    @property
    def asm(self):
        """Every compile stage by name (jittile/stages.py): ``checked``, ``plan``, ``python``,
        ``nvvm`` (also ``llir``), ``ptx``, ``cubin``, ``sass``; the same on a fresh compile and
        a cache hit."""
        stages = self._stages
        if stages is None:
            from .stages import Stages, unpack_text

            packed = self.metadata.get("nvvm_ir")
            makers = {
                "checked": lambda: "\n".join(
                    f"{site.location}: {site.family}: {site.opcode}" for site in self.ir.plan
                ),
                "plan": lambda: str(self.ir.plan),
                "python": lambda: self.lowered_source,
                "ptx": lambda: self.ptx,
                "cubin": lambda: self.cubin,
                "sass": lambda: self.sass,
            }
            if packed:
                makers["nvvm"] = lambda: unpack_text(packed)
            stages = self._stages = Stages(makers)
        return stages

    @property
    def plan(self) -> Plan:
        """Per tile call site (:class:`jittile.ir.SiteRecord`): location, opcode, family and its
        native instructions (:class:`jittile.ir.PlanRecord`); ``print(ck.plan)`` reads them in
        the kernel's own names."""
        return self.ir.plan

    def launcher(self):
        """This thread's runtime launcher of the cubin (its own parameter buffer; the loaded
        module is shared by every thread), made on first use: it imports the driver."""
        launcher = getattr(self._threads, "launcher", None)
        if launcher is None:
            from .runtime.launcher import Launcher, LoadedCubin

            with _LOADING:
                if self._loaded is None:
                    self._loaded = LoadedCubin(
                        self.ir.name,
                        self.cubin,
                        self.entry,
                        self.target,
                        self.ir.launch_shared_bytes,
                    )
            launcher = self._threads.launcher = Launcher(self.ir, self._loaded, self.param_layout)
        return launcher

    def max_active_clusters(
        self, cluster, block, shared_bytes: int | None = None, device: int = 0
    ) -> int:
        """How many clusters of shape ``cluster`` (an int or an (x, y, z) tuple) of ``block``
        threads each this kernel keeps resident at once on GPU ``device``: the most a
        persistent grid should launch, as a GPC's SM count need not be a multiple of the
        cluster size. ``shared_bytes``: dynamic shared memory, by default the kernel's."""
        from .runtime import driver

        launcher = self.launcher()
        previous = launcher.bind(device)
        try:
            return launcher.max_active_clusters(
                launch_dims(cluster, "cluster"), launch_dims(block, "block"), shared_bytes
            )
        finally:
            driver.restore_context(previous)


_LOADING = threading.Lock()  # one LoadedCubin per CompiledKernel however many threads launch


def encode(
    name: str,
    qualname: str,
    source: KernelSource,
    target: Target,
    key: str,
    components: dict,
    lowered,
    artifact,
    seconds: float,
) -> dict:
    """The metadata of a freshly compiled specialization (``lowered`` from the frontend,
    ``artifact`` from the backend)."""
    ir = lowered.ir
    return {
        "name": name,
        "qualname": qualname,
        "target": target.name,
        "key": key,
        "key_components": components,
        "static_params": components["static_params"],
        "source_file": source.filename,
        "source_line": source.firstlineno,
        "source_text": source.text,
        "entry": artifact.entry,
        "registers": artifact.usage["registers"],
        "shared_bytes": ir.shared_bytes,
        "static_shared_bytes": artifact.usage["static_shared_bytes"],
        "dynamic_shared": ir.dynamic_shared,
        "local_bytes": artifact.usage["local_bytes"],
        "spill_stores": artifact.usage["spill_stores"],
        "spill_loads": artifact.usage["spill_loads"],
        "compile_seconds": round(seconds, 4),
        "param_layout": [list(p) for p in artifact.param_layout],
        "toolchain": artifact.toolchain,
        "kernel_ir": ir.record(source.node_indices()),
        "lowered_source": artifact.python,
        "nvvm_ir": None if artifact.nvvm is None else pack_text(artifact.nvvm),
        "lowering_warnings": lowered.warnings,
    }


class BrokenEntry(Exception):
    """A disk entry whose metadata cannot describe the kernel it is keyed for."""


def decode(
    metadata: dict,
    cubin: bytes,
    ptx: str,
    source: KernelSource,
    params: list,
    target: Target,
    launch,
    key: str,
) -> CompiledKernel:
    """The compiled kernel of a disk entry, its IR restored from the metadata; raises
    :class:`BrokenEntry` when the metadata lacks or garbles what it needs.

    A kernel whose lowering warned is lowered again, so that the warnings are issued again, at
    the kernel's current lines.
    """
    from .patterns import registry

    meta = dict(metadata)
    try:
        layout = [tuple(p) for p in meta["param_layout"]]
        ir = KernelIR.restore(meta["kernel_ir"], params, source.locate, registry.plan_schema())
        lowered_source = meta["lowered_source"]
        if (
            not isinstance(meta["entry"], str)
            or meta.get("key") != key
            or not cubin
            or not isinstance(lowered_source, str)
        ):
            raise ValueError("entry name, key, cubin or lowered source")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BrokenEntry(f"metadata lacks or garbles {exc}") from None
    if meta.get("lowering_warnings"):  # the IR at the current lines; the stages as stored
        from .frontend.lower import lower_kernel

        ir = lower_kernel(source, params, target, launch).ir
    # The file and line are not part of the key: report where this kernel is now.
    meta.update(cache="hit", source_file=source.filename, source_line=source.firstlineno)
    return CompiledKernel(ptx, cubin, meta, ir, lowered_source, meta["entry"], layout, target)
