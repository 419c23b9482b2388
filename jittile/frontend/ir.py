"""What the frontend learns about a kernel: parameters, shared plan, tile call sites, launch."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..dtypes import DType
from ..errors import Location
from ..patterns.base import HostTensorMap, PlanRecord, SharedBuffer


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
    shared_buffers: list[SharedBuffer] = field(default_factory=list)
    shared_bytes: int = 0
    shared_align: int = 16
    launch: object = None  # LaunchConfig from T.device_entry, or None
    sites: list[SiteRecord] = field(default_factory=list)
    folded_globals: dict = field(default_factory=dict)
    helper_sources: dict = field(default_factory=dict)

    @property
    def dynamic_shared(self) -> bool:
        """Above 48 KB jittile places its buffers in dynamic shared memory."""
        return self.shared_bytes > 48 * 1024

    @property
    def runtime_params(self) -> list:
        return [p for p in self.params if not isinstance(p, ConstexprParam)]
