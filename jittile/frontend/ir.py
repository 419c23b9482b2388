"""What the frontend learns about a kernel: parameters, shared plan, tile call sites, launch.

A :class:`KernelIR` is also what a disk-cache entry keeps besides the cubin (as JSON, see
:meth:`KernelIR.record`), so a cache hit can launch and report a kernel without lowering it again.
"""
from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field

from ..dtypes import DType
from ..errors import Location
from ..patterns.base import HostTensorMap, PlanRecord


@dataclass(frozen=True)
class ArrayParam:
    """A tensor argument: element type, rank, static extents (None = dynamic), memory layout."""

    name: str
    dtype: DType
    ndim: int
    static_shape: tuple
    layout: str  # numba layout: "C" (contiguous) or "A" (strided)


@dataclass(frozen=True)
class ScalarParam:
    name: str
    dtype: DType


@dataclass(frozen=True)
class ConstexprParam:
    name: str
    value: object


@dataclass(frozen=True)
class TensorMapParam:
    """A caller-encoded ``jittile.TensorMap`` argument, passed as a grid-constant parameter."""

    name: str


@dataclass(frozen=True)
class SiteRecord:
    """One tile call site after checking: its location, opcode and instruction plan."""

    location: Location
    opcode: str
    family: str
    plan: list[PlanRecord]


@dataclass
class KernelIR:
    """Everything later stages need besides the lowered function itself."""

    name: str
    params: list  # ArrayParam | ScalarParam | ConstexprParam | TensorMapParam, in call order
    host_tensormaps: list[HostTensorMap] = field(default_factory=list)
    shared_bytes: int = 0
    shared_align: int = 16
    launch: object = None  # LaunchConfig from T.device_entry, or None
    sites: list[SiteRecord] = field(default_factory=list)

    @property
    def dynamic_shared(self) -> bool:
        """Above 48 KB jittile places its buffers in dynamic shared memory."""
        return self.shared_bytes > 48 * 1024

    @property
    def runtime_params(self) -> list:
        return [p for p in self.params if not isinstance(p, ConstexprParam)]

    # ------------------------------------------------------------------ cache-entry record
    def record(self, tree: ast.AST, filename: str) -> dict:
        """Everything but the parameters as JSON data. The position of a site in the kernel
        (``tree``, from ``filename``) is kept as the index of its call in ``ast.walk(tree)`` order,
        which :meth:`restore` maps back to a position in the kernel as it is now (a cache hit may
        come from a copy with other comments or line breaks: the key ignores them); a site inlined
        from a ``@jittile.func`` helper keeps its file and line."""
        starts: dict[tuple[int, int], int] = {}
        for index, node in enumerate(ast.walk(tree)):
            if hasattr(node, "lineno"):
                starts.setdefault((node.lineno, node.col_offset), index)
        launch = self.launch
        return {
            "name": self.name,
            "host_tensormaps": [asdict(t) for t in self.host_tensormaps],
            "shared_bytes": self.shared_bytes,
            "shared_align": self.shared_align,
            "launch": None if launch is None else {"grid": launch.grid, "block": launch.block,
                                                   "cluster": launch.cluster},
            "sites": [{"node": starts.get((s.location.lineno, s.location.col_offset), -1)
                       if s.location.filename == filename else -1,
                       "location": [s.location.filename, s.location.lineno, s.location.col_offset],
                       "opcode": s.opcode, "family": s.family,
                       "plan": [asdict(r) for r in s.plan]} for s in self.sites],
        }

    @classmethod
    def restore(cls, data: dict, params: list, tree: ast.AST, filename: str) -> KernelIR:
        """The IR :meth:`record` wrote, for ``params`` (equal to those it was lowered for: they
        are part of the cache key) and the kernel's current ``tree``."""
        from ..language.cuda import LaunchConfig

        nodes = list(ast.walk(tree))

        def location(site: dict) -> Location:
            index = site["node"]
            if 0 <= index < len(nodes) and hasattr(nodes[index], "lineno"):
                return Location(filename, nodes[index].lineno, nodes[index].col_offset)
            return Location(*site["location"])

        launch = data["launch"]
        return cls(
            name=data["name"], params=list(params),
            host_tensormaps=[HostTensorMap(**_tuples(t)) for t in data["host_tensormaps"]],
            shared_bytes=data["shared_bytes"], shared_align=data["shared_align"],
            launch=None if launch is None else LaunchConfig(**launch),
            sites=[SiteRecord(location(s), s["opcode"], s["family"],
                              [PlanRecord(**_tuples(r)) for r in s["plan"]])
                   for s in data["sites"]])


def _tuples(value):
    """JSON data with its lists turned back into the tuples the IR holds (a record's ``fields``
    dict stays a dict)."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
