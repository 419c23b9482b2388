"""TMA tile-pattern contract: every legality condition of the specification, violated and just met.

Each case renders one kernel into its own temporary module (jittile reads kernel source with
``inspect``). The violating kernel must raise ``ContractError`` at ``compile()`` -- before any
backend work -- pointing at the offending line, naming the opcode and the parameter, with the rule in the
message. The satisfying kernel differs from it by the one field that matters and must lower cleanly.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import textwrap
import warnings
from dataclasses import dataclass, field

import pytest

from jittile import ContractError, JittileWarning
from jittile.dtypes import dtype as as_dtype
from jittile.frontend.lower import lower_kernel
from jittile.targets import Target

LOAD2 = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
LOAD3 = "cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE2 = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
MCAST2 = (
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".multicast::cluster"
)
GATHER = "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
SCATTER = "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group"


def reduce2(op: str) -> str:
    return f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"


# ------------------------------------------------------------------------------ kernel rendering
HEADER = """\
import jittile
from jittile import T
from jittile.layout import ComposeLayout, row_major, swizzle


@jittile.kernel
def kernel({params}):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}{cluster}))
    lane = T.cuda.lane_id()
    mbar = T.alloc_shared((1,), "uint64")
"""
_serial = itertools.count()


@dataclass
class Spec:
    """One tile call in a small kernel; every keyword goes on its own tagged line."""

    op: str = LOAD2
    target: str = "sm_90a"
    params: str = 'A: T.Tensor((16, 16), "uint32")'
    shared: str = 'T.alloc_shared((8, 16), "uint32", align=128)'
    operands: str = "s, A"
    kw: dict = field(
        default_factory=lambda: {"box": "(8, 16)", "coords": "(0, 0)", "mbar": "mbar.ptr_to([0])"}
    )
    cluster: tuple | None = None
    block: int = 32
    extra: str = ""  # statements before the call

    def but(self, kw: dict | None = None, **changes) -> Spec:
        """A copy with fields replaced and keywords added/replaced (None removes one)."""
        new = Spec(**{**self.__dict__, **changes})
        new.kw = dict(self.kw)
        for name, value in (kw or {}).items():
            if value is None:
                new.kw.pop(name, None)
            else:
                new.kw[name] = value
        return new


LOAD = Spec()
STORE = Spec(op=STORE2, operands="A, s", kw={"box": "(8, 16)", "coords": "(0, 0)"})
MCAST = Spec(
    op=MCAST2,
    cluster=(2, 1, 1),
    kw={
        "box": "(8, 16)",
        "coords": "(0, 0)",
        "mbar": "mbar.ptr_to([0])",
        "cta_mask": "T.uint16(3)",
    },
)
GATHER4 = Spec(
    op=GATHER,
    target="sm_100a",
    shared='T.alloc_shared((4, 16), "uint32", align=128)',
    kw={
        "box": "(1, 16)",
        "coords": "(0, 0)",
        "gather4": "(lane, 3, 7, 11)",
        "mbar": "mbar.ptr_to([0])",
    },
)
SCATTER4 = Spec(
    op=SCATTER,
    target="sm_100a",
    operands="A, s",
    shared='T.alloc_shared((4, 16), "uint32", align=128)',
    kw={"box": "(1, 16)", "coords": "(0, 0)", "gather4": "(0, 1, 2, 3)"},
)
# uint16 with 32-byte interleave: global (N, C_slices, W, Ci=16), box (N, C, W), atom (1, 1, 8, 16).
INTERLEAVE = Spec(
    op=LOAD3,
    params='A: T.Tensor((2, 4, 8, 16), "uint16")',
    shared='T.alloc_shared((1, 1, 8, 16), "uint16", '
    'layout=swizzle(1, (1, 1, 8, 16), "uint16"), align=256)',
    kw={
        "box": "(1, 1, 8)",
        "coords": "(0, 0, 0)",
        "interleave": "2",
        "swizzle": "1",
        "mbar": "mbar.ptr_to([0])",
    },
)
FP4 = Spec(
    target="sm_100a",
    params='A: T.Tensor((16, 256), "uint8")',
    shared='T.alloc_shared((8, 128), "uint8", align=128)',
    kw={
        "box": "(8, 128)",
        "coords": "(0, 0)",
        "format": '"float4_e2m1fn"',
        "mbar": "mbar.ptr_to([0])",
    },
)


def render(spec: Spec, directory) -> tuple[str, dict[str, int]]:
    """Source of ``spec``'s kernel and the line number of each tagged line."""
    cluster = f", cluster={spec.cluster}" if spec.cluster else ""
    lines = HEADER.format(params=spec.params, block=spec.block, cluster=cluster).splitlines()
    tags = {"shared": len(lines) + 1}
    lines.append(f"    s = {spec.shared}")
    lines += ["    " + line for line in textwrap.dedent(spec.extra).strip().splitlines()]
    tags["call"] = len(lines) + 1
    lines.append("    T.cuda.tile.apply(")
    lines.append(f'        T.ptx["{spec.op}"],')
    tags["operands"] = len(lines) + 1
    lines.append(f"        {spec.operands},")
    for name, value in spec.kw.items():
        tags[name] = len(lines) + 1
        lines.append(f"        {name}={value},")
    lines.append("    )")
    return "\n".join(lines) + "\n", tags


def load_kernel(spec: Spec, directory):
    source, tags = render(spec, directory)
    name = f"tma_contract_{next(_serial)}"
    path = directory / f"{name}.py"
    path.write_text(source)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.kernel, str(path), tags


def lower(kernel, target: str):
    """Frontend lowering only (the pattern's checks and plan; no numba)."""
    params = kernel.specializer.params(kernel.specializer.annotation_specs())
    return lower_kernel(kernel.source, params, Target.parse(target))


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")


# ------------------------------------------------------------------------------------ the cases
@dataclass
class Case:
    id: str
    bad: Spec
    good: Spec
    parameter: str
    match: str  # regex over str(ContractError)
    line: str | None = None  # tag of the expected line; default: the parameter's, else the call's


F32 = 'A: T.Tensor((16, 32), "float32")'


def swizzled(mode: int, align: int) -> str:
    """An (8, span) float32 buffer with the matching swizzle layout."""
    shape = (8, 8 << (mode - 1))
    return (
        f'T.alloc_shared({shape}, "float32", layout=swizzle({mode}, {shape}, "float32"), '
        f"align={align})"
    )


SWZ2, SWZ3 = swizzled(2, 1024), swizzled(3, 1024)

CASES = [
    # ----------------------------------------------------------------- opcode grammar
    Case(
        "unknown-qualifier",
        LOAD.but(op=LOAD2.replace("::bytes", "::bytez")),
        LOAD,
        "opcode",
        r"unknown qualifier '\.mbarrier::complete_tx::bytez'",
    ),
    Case(
        "unknown-load-mode",
        LOAD.but(op=LOAD2.replace(".tile.", ".tiles.")),
        LOAD,
        "opcode",
        r"unknown qualifier '\.tiles'",
    ),
    Case(
        "misordered-qualifier",
        MCAST.but(
            op=MCAST2.replace(".multicast::cluster", ".L2::cache_hint.multicast::cluster"),
            kw={"cache_policy": "T.uint64(0)"},
        ),
        MCAST.but(op=MCAST2 + ".L2::cache_hint", kw={"cache_policy": "T.uint64(0)"}),
        "opcode",
        r"out of order",
    ),
    Case(
        "missing-completion",
        LOAD.but(op=LOAD2.replace(".mbarrier::complete_tx::bytes", "")),
        LOAD,
        "opcode",
        r"missing \.completion_mechanism",
    ),
    Case(
        "im2col",
        LOAD.but(
            op=LOAD3.replace(".tile.", ".im2col."),
            params='A: T.Tensor((4, 8, 16), "uint32")',
            shared='T.alloc_shared((1, 8, 16), "uint32", align=128)',
            kw={"box": "(1, 8, 16)", "coords": "(0, 0, 0)"},
        ),
        LOAD.but(
            op=LOAD3,
            params='A: T.Tensor((4, 8, 16), "uint32")',
            shared='T.alloc_shared((1, 8, 16), "uint32", align=128)',
            kw={"box": "(1, 8, 16)", "coords": "(0, 0, 0)"},
        ),
        "opcode",
        r"im2col modes are not supported",
    ),
    Case(
        "store-with-mbarrier-completion",
        STORE.but(op=STORE2.replace("bulk_group", "mbarrier::complete_tx::bytes")),
        STORE,
        "opcode",
        r"completes loads",
    ),
    Case(
        "load-with-bulk-group",
        LOAD.but(op=LOAD2.replace("mbarrier::complete_tx::bytes", "bulk_group")),
        LOAD,
        "opcode",
        r"completes stores and reductions",
    ),
    Case(
        "multicast-into-shared-cta",
        MCAST.but(op=MCAST2.replace("shared::cluster", "shared::cta")),
        MCAST,
        "opcode",
        r"needs the \.shared::cluster destination",
    ),
    Case(
        "gather4-rank3",
        GATHER4.but(op=GATHER.replace(".2d.", ".3d.")),
        GATHER4,
        "opcode",
        r"needs rank 2",
    ),
    Case(
        "not-a-tma-opcode",
        LOAD.but(op=LOAD2.replace("tensor", "tensr", 1)),
        LOAD,
        "opcode",
        r"no tile pattern handles this opcode",
    ),
    # ------------------------------------------------------------------------- targets
    Case(
        "multicast-needs-sm90a",
        MCAST.but(target="sm_90"),
        MCAST,
        "target",
        r"requires target sm_90a or sm_100a .* compiled for sm_90",
    ),
    Case(
        "multicast-not-on-sm120a",
        MCAST.but(target="sm_120a"),
        MCAST.but(target="sm_100a"),
        "target",
        r"compiled for sm_120a",
    ),
    Case(
        "multicast-32b-needs-sm107",
        MCAST.but(op=MCAST2 + "::32b", target="sm_100a", kw={"cta_mask": "T.uint32(3)"}),
        MCAST.but(op=MCAST2 + "::32b", target="sm_107a", kw={"cta_mask": "T.uint32(3)"}),
        "target",
        r"sm_107a",
    ),
    Case(
        "gather4-needs-sm100",
        GATHER4.but(target="sm_90a"),
        GATHER4,
        "target",
        r"requires target sm_100 or newer",
    ),
    Case(
        "gather4-cluster-needs-sm100a",
        GATHER4.but(op=GATHER.replace("shared::cta", "shared::cluster"), target="sm_120a"),
        GATHER4.but(op=GATHER.replace("shared::cta", "shared::cluster")),
        "target",
        r"requires target sm_100a",
    ),
    Case(
        "scatter4-needs-sm100a",
        SCATTER4.but(target="sm_90a"),
        SCATTER4,
        "target",
        r"requires target sm_100a",
    ),
    Case(
        "cta-group-needs-sm100a",
        LOAD.but(op=LOAD2 + ".cta_group::2"),
        LOAD.but(op=LOAD2 + ".cta_group::2", target="sm_100a"),
        "target",
        r"requires target sm_100a",
    ),
    # -------------------------------------------------------------------- keywords
    Case(
        "unknown-keyword",
        LOAD.but(kw={"swizzle_mode": "0"}),
        LOAD,
        "swizzle_mode",
        r"is not a parameter of cp\.async\.bulk\.tensor",
    ),
    Case(
        "qualifier-as-keyword",
        LOAD.but(kw={"multicast": "True"}),
        LOAD,
        "multicast",
        r"qualifiers go in the opcode",
    ),
    Case("missing-box", LOAD.but(kw={"box": None}), LOAD, "box", r"is required", line="call"),
    Case(
        "missing-coords", LOAD.but(kw={"coords": None}), LOAD, "coords", r"is required", line="call"
    ),
    Case(
        "missing-mbar",
        LOAD.but(kw={"mbar": None}),
        LOAD,
        "mbar",
        r"is required: loads complete on an mbarrier",
        line="call",
    ),
    Case(
        "mbar-on-store",
        STORE.but(kw={"mbar": "mbar.ptr_to([0])"}),
        STORE,
        "mbar",
        r"not allowed here: stores and reductions complete through bulk groups",
    ),
    Case(
        "mbar-on-reduce",
        STORE.but(op=reduce2("add"), kw={"mbar": "mbar.ptr_to([0])"}),
        STORE.but(op=reduce2("add")),
        "mbar",
        r"not allowed here",
    ),
    Case(
        "mbar-static",
        LOAD.but(kw={"mbar": "0"}),
        LOAD,
        "mbar",
        r"must be a runtime shared-memory pointer",
    ),
    Case(
        "cta-mask-without-multicast",
        LOAD.but(kw={"cta_mask": "T.uint16(3)"}),
        LOAD,
        "cta_mask",
        r"only \.multicast::cluster opcodes take a CTA mask",
    ),
    Case(
        "multicast-without-cta-mask",
        MCAST.but(kw={"cta_mask": None}),
        MCAST,
        "cta_mask",
        r"is required: multicast needs the CTA mask",
        line="call",
    ),
    Case(
        "cta-mask-too-wide",
        MCAST.but(kw={"cta_mask": "65536"}),
        MCAST.but(kw={"cta_mask": "65535"}),
        "cta_mask",
        r"16-bit operand, got 65536",
    ),
    Case(
        "cta-mask-not-an-integer",
        MCAST.but(kw={"cta_mask": "(1, 2)"}),
        MCAST.but(kw={"cta_mask": "lane"}),
        "cta_mask",
        r"runtime 16-bit integer operand",
    ),
    Case(
        "cache-policy-without-hint",
        STORE.but(kw={"cache_policy": "T.uint64(0)"}),
        STORE,
        "cache_policy",
        r"only \.L2::cache_hint opcodes take a cache policy",
    ),
    Case(
        "cache-hint-without-policy",
        STORE.but(op=STORE2 + ".L2::cache_hint"),
        STORE.but(op=STORE2 + ".L2::cache_hint", kw={"cache_policy": "T.uint64(lane)"}),
        "cache_policy",
        r"is required: \.L2::cache_hint needs the cache-policy operand",
        line="call",
    ),
    Case(
        "gather4-rows-on-tile-mode",
        LOAD.but(kw={"gather4": "(0, 1, 2, 3)"}),
        LOAD,
        "gather4",
        r"only used by \.tile::gather4 / \.tile::scatter4",
    ),
    Case(
        "gather4-mode-without-rows",
        GATHER4.but(kw={"gather4": None}),
        GATHER4,
        "gather4",
        r"is required \(4 runtime integers\)",
        line="call",
    ),
    Case(
        "gather4-three-rows",
        GATHER4.but(kw={"gather4": "(0, 1, 2)"}),
        GATHER4,
        "gather4",
        r"needs 4 entries",
    ),
    Case(
        "coords-wrong-length",
        LOAD.but(kw={"coords": "(0, 0, 0)"}),
        LOAD,
        "coords",
        r"needs 2 entries",
    ),
    Case(
        "coords-not-integers",
        LOAD.but(kw={"coords": "(0.5, 0)"}),
        LOAD.but(kw={"coords": "(T.int32(1), lane)"}),
        "coords",
        r"entries must be integers",
    ),
    Case(
        "coords-beyond-s32",
        LOAD.but(kw={"coords": "(2 ** 31, 0)"}),
        LOAD.but(kw={"coords": "(2 ** 31 - 1, -2 ** 31)"}),
        "coords",
        r"signed 32-bit",
    ),
    Case(
        "pred-not-bool",
        LOAD.but(kw={"pred": "1"}),
        LOAD.but(kw={"pred": "lane == 0"}),
        "pred",
        r"must be a runtime bool or None",
    ),
    Case(
        "pred-false-still-checked",
        LOAD.but(kw={"pred": "False", "box": "(8, 8)"}),
        LOAD.but(kw={"pred": "False"}),
        "box",
        r"must end in the box image",
    ),
    # ---------------------------------------------------------------------- box
    Case(
        "box-extent-zero",
        LOAD.but(kw={"box": "(0, 16)"}),
        LOAD,
        "box",
        r"each box extent must be in 1\.\.256, got 0",
    ),
    Case(
        "box-extent-257",
        LOAD.but(
            params='A: T.Tensor((512, 16), "uint32")',
            shared='T.alloc_shared((257, 4), "uint32", align=128)',
            kw={"box": "(257, 4)"},
        ),
        LOAD.but(
            params='A: T.Tensor((512, 16), "uint32")',
            shared='T.alloc_shared((256, 4), "uint32", align=128)',
            kw={"box": "(256, 4)"},
        ),
        "box",
        r"1\.\.256, got 257",
    ),
    Case(
        "box-rank-entries",
        LOAD.but(kw={"box": "(1, 8, 16)"}),
        LOAD,
        "box",
        r"needs 2 entries \(one per opcode dimension\)",
    ),
    Case("box-runtime", LOAD.but(kw={"box": "(lane, 16)"}), LOAD, "box", r"compile-time value"),
    # --------------------------------------------------------------- element strides
    Case(
        "element-stride-zero",
        LOAD.but(kw={"element_strides": "(0, 1)"}),
        LOAD.but(kw={"element_strides": "(1, 1)"}),
        "element_strides",
        r"each element stride must be in 1\.\.8, got 0",
    ),
    Case(
        "element-stride-nine",
        LOAD.but(
            shared='T.alloc_shared((1, 16), "uint32", align=128)', kw={"element_strides": "(9, 1)"}
        ),
        LOAD.but(
            shared='T.alloc_shared((1, 16), "uint32", align=128)', kw={"element_strides": "(8, 1)"}
        ),
        "element_strides",
        r"got 9",
    ),
    Case(
        "element-strides-rank",
        LOAD.but(kw={"element_strides": "(1,)"}),
        LOAD,
        "element_strides",
        r"needs 2 entries",
    ),
    Case(
        "element-strides-runtime",
        LOAD.but(kw={"element_strides": "(1, lane)"}),
        LOAD,
        "element_strides",
        r"compile-time value",
    ),
    # -------------------------------------------------------------- enum fields
    Case(
        "swizzle-4",
        LOAD.but(kw={"swizzle": "4"}),
        LOAD.but(kw={"swizzle": "0"}),
        "swizzle",
        r"must be in 0\.\.3, got 4",
    ),
    Case(
        "swizzle-runtime",
        LOAD.but(kw={"swizzle": "lane"}),
        LOAD.but(kw={"swizzle": "0"}),
        "swizzle",
        r"must be a static integer in 0\.\.3",
    ),
    Case(
        "interleave-3",
        INTERLEAVE.but(kw={"interleave": "3"}),
        INTERLEAVE,
        "interleave",
        r"must be in 0\.\.2, got 3",
    ),
    Case(
        "l2-promotion-4",
        LOAD.but(kw={"l2_promotion": "4"}),
        LOAD.but(kw={"l2_promotion": "3"}),
        "l2_promotion",
        r"must be in 0\.\.3, got 4",
    ),
    Case(
        "l2-promotion-negative",
        LOAD.but(kw={"l2_promotion": "-1"}),
        LOAD,
        "l2_promotion",
        r"got -1",
    ),
    Case(
        "oob-fill-2",
        LOAD.but(
            params=F32, shared='T.alloc_shared((8, 16), "float32", align=128)', kw={"oob_fill": "2"}
        ),
        LOAD.but(
            params=F32, shared='T.alloc_shared((8, 16), "float32", align=128)', kw={"oob_fill": "1"}
        ),
        "oob_fill",
        r"must be in 0\.\.1, got 2",
    ),
    Case(
        "oob-fill-nan-needs-float",
        LOAD.but(kw={"oob_fill": "1"}),
        LOAD.but(kw={"oob_fill": "0"}),
        "oob_fill",
        r"NaN fill needs a floating-point format",
    ),
    Case(
        "format-runtime",
        LOAD.but(kw={"format": "lane"}),
        LOAD.but(kw={"format": '"uint32"'}),
        "format",
        r"must be a static dtype string",
    ),
    Case(
        "coord-steps-runtime",
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((lane, 0),)"},
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0),)"},
        ),
        "coord_steps",
        r"compile-time value",
    ),
    # ------------------------------------------------------------------ formats
    Case(
        "tf32-over-uint32",
        LOAD.but(kw={"format": '"tf32"'}),
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 16), "float32", align=128)',
            kw={"format": '"tf32"'},
        ),
        "format",
        r"tf32 reads float32 storage",
    ),
    Case(
        "reinterpret-int32",
        LOAD.but(kw={"format": '"int32"'}),
        LOAD.but(kw={"format": '"uint32"'}),
        "format",
        r"does not reinterpret storage",
    ),
    Case(
        "reinterpret-float16",
        LOAD.but(
            params='A: T.Tensor((16, 16), "uint16")',
            shared='T.alloc_shared((8, 16), "uint16", align=128)',
            kw={"format": '"float16"'},
        ),
        LOAD.but(
            params='A: T.Tensor((16, 16), "float16")',
            shared='T.alloc_shared((8, 16), "float16", align=128)',
            kw={"format": '"float16"'},
        ),
        "format",
        r"differs from the operand dtype",
    ),
    Case(
        "unknown-format",
        LOAD.but(kw={"format": '"float13"'}),
        LOAD,
        "format",
        r"unknown descriptor format 'float13'",
    ),
    Case(
        "interleave-inner-box-8-bytes",
        INTERLEAVE.but(
            shared='T.alloc_shared((1, 1, 4, 16), "uint16", '
            'layout=swizzle(1, (1, 1, 4, 16), "uint16"), align=256)',
            kw={"box": "(1, 1, 4)"},
        ),
        INTERLEAVE,
        "box",
        r"with interleave the innermost spatial box extent is 8 bytes \(4 x 2 B\); it must be "
        r"a multiple of 16 bytes",
    ),
    Case(
        "fp4-store",
        FP4.but(op=STORE2, operands="A, s", kw={"mbar": None}),
        FP4,
        "format",
        r"load-only format",
    ),
    Case(
        "fp4-on-sm90",
        FP4.but(target="sm_90a"),
        FP4,
        "format",
        r"float4_e2m1fn \(16U4_ALIGN16B\) descriptors need sm_100a or newer; the kernel is "
        r"compiled for sm_90a",
    ),
    Case(
        "fp4-over-uint16",
        FP4.but(
            params='A: T.Tensor((16, 256), "uint16")',
            shared='T.alloc_shared((8, 128), "uint16", align=128)',
        ),
        FP4,
        "format",
        r"packed FP4 is stored as uint8",
    ),
    Case(
        "fp4-inner-box-64",
        FP4.but(shared='T.alloc_shared((8, 64), "uint8", align=128)', kw={"box": "(8, 64)"}),
        FP4,
        "box",
        r"packed FP4 needs an inner box of 128, got 64",
    ),
    Case(
        "fp4-swizzle-2",
        FP4.but(
            shared='T.alloc_shared((8, 128), "uint8", layout=swizzle(2, (8, 128), "uint8"), '
            "align=1024)",
            kw={"swizzle": "2"},
        ),
        FP4.but(
            shared='T.alloc_shared((8, 128), "uint8", layout=swizzle(3, (8, 128), "uint8"), '
            "align=1024)",
            kw={"swizzle": "3"},
        ),
        "swizzle",
        r"packed FP4 images use swizzle 0 or 3, got 2",
    ),
    Case(
        "fp4-interleave",
        FP4.but(
            op=LOAD3,
            params='A: T.Tensor((2, 2, 8, 16), "uint8")',
            shared='T.alloc_shared((1, 1, 8, 16), "uint8", align=128)',
            kw={"box": "(1, 1, 128)", "coords": "(0, 0, 0)", "interleave": "1"},
        ),
        FP4,
        "interleave",
        r"packed FP4 does not combine with interleave",
    ),
    Case(
        "global-dtype-differs",
        LOAD.but(params='A: T.Tensor((16, 16), "int32")'),
        LOAD,
        "operands",
        r"global operand is int32 but shared operand is uint32",
        line="call",
    ),
    Case(
        "dtype-tma-cannot-move",
        LOAD.but(
            params='A: T.Tensor((16, 16), "bool")',
            shared='T.alloc_shared((8, 16), "bool", align=128)',
        ),
        LOAD.but(
            params='A: T.Tensor((16, 16), "uint8")',
            shared='T.alloc_shared((8, 16), "uint8", align=128)',
        ),
        "format",
        r"TMA cannot move bool elements",
        line="call",
    ),
    # ------------------------------------------------------------ global rank
    Case(
        "global-rank",
        LOAD.but(params='A: T.Tensor((2, 16, 16), "uint32")'),
        LOAD,
        "operands",
        r"global tensor 'A' has rank 3; the opcode rank is 2",
        line="call",
    ),
    Case(
        "global-rank-interleave",
        INTERLEAVE.but(params='A: T.Tensor((2, 8, 16), "uint16")'),
        INTERLEAVE,
        "operands",
        r"has rank 3; the opcode rank is 3 plus the explicit channel",
        line="call",
    ),
    Case(
        "interleave-slice-extent",
        INTERLEAVE.but(params='A: T.Tensor((2, 4, 8, 8), "uint16")'),
        INTERLEAVE,
        "operands",
        r"one 32-byte slice, 16 elements; 'A' has 8",
        line="call",
    ),
    # ------------------------------------------------------------ shared image
    Case(
        "image-shape",
        LOAD.but(shared='T.alloc_shared((8, 32), "uint32", align=128)'),
        LOAD,
        "box",
        r"must end in the box image \(8, 16\)",
    ),
    Case(
        "image-ceil-element-strides",
        LOAD.but(
            shared='T.alloc_shared((3, 16), "uint32", align=128)',
            kw={"box": "(7, 16)", "element_strides": "(2, 1)"},
        ),
        LOAD.but(
            shared='T.alloc_shared((4, 16), "uint32", align=128)',
            kw={"box": "(7, 16)", "element_strides": "(2, 1)"},
        ),
        "box",
        r"must end in the box image \(4, 16\)",
    ),
    Case(
        "gather4-image",
        GATHER4.but(shared='T.alloc_shared((1, 16), "uint32", align=128)'),
        GATHER4,
        "box",
        r"must end in the box image \(4, 16\)",
    ),
    Case(
        "interleave-image",
        INTERLEAVE.but(
            shared='T.alloc_shared((1, 1, 8, 8), "uint16", layout=swizzle(1, (1, 1, 8, 8), "uint16"), '
            "align=256)"
        ),
        INTERLEAVE,
        "box",
        r"box image \(1, 1, 8, 16\)",
    ),
    Case(
        "group-extent-vs-scope",
        LOAD.but(
            shared='T.alloc_shared((16, 2, 16), "uint32", align=128)',
            kw={"coord_steps": "((2, 0),)", "box": "(2, 16)", "scope": '"warp"'},
        ),
        LOAD.but(
            shared='T.alloc_shared((32, 2, 16), "uint32", align=128)',
            kw={"coord_steps": "((2, 0),)", "box": "(2, 16)", "scope": '"warp"'},
        ),
        "scope",
        r"group axis 0 of the shared operand has extent 16, but scope 'warp' has 32",
    ),
    Case(
        "unknown-scope",
        LOAD.but(kw={"scope": '"grid"'}),
        LOAD.but(kw={"scope": '"thread"'}),
        "scope",
        r"must be one of thread, warp, warpgroup, cta, cluster",
    ),
    Case(
        "cluster-scope-without-cluster",
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0),)", "scope": '"cluster"'},
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            cluster=(2, 1, 1),
            kw={"coord_steps": "((8, 0),)", "scope": '"cluster"'},
        ),
        "scope",
        r"needs a cluster",
    ),
    Case(
        "coord-steps-missing",
        LOAD.but(shared='T.alloc_shared((2, 8, 16), "uint32", align=128)'),
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0),)"},
        ),
        "coord_steps",
        r"needs one rank-2 increment per group/repeat axis \(1: .*got 0",
        line="call",
    ),
    Case(
        "coord-steps-count",
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0), (0, 0))"},
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0),)"},
        ),
        "coord_steps",
        r"increment per group/repeat axis \(1: .*got 2",
    ),
    Case(
        "coord-steps-without-repeat",
        LOAD.but(kw={"coord_steps": "((8, 0),)"}),
        LOAD,
        "coord_steps",
        r"\(0: group \(\), repeat \(\)\), got 1",
    ),
    Case(
        "coord-steps-rank-length",
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)', kw={"coord_steps": "((8,),)"}
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 8, 16), "uint32", align=128)',
            kw={"coord_steps": "((8, 0),)"},
        ),
        "coord_steps",
        r"needs 2 entries",
    ),
    Case(
        "coord-steps-two-axes",
        LOAD.but(
            shared='T.alloc_shared((2, 3, 4, 16), "uint32", align=128)',
            kw={"box": "(4, 16)", "coord_steps": "((4, 0),)"},
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 3, 4, 16), "uint32", align=128)',
            kw={"box": "(4, 16)", "coord_steps": "((12, 0), (4, 0))"},
        ),
        "coord_steps",
        r"\(2: group \(\), repeat \(2, 3\)\), got 1",
    ),
    # ------------------------------------------------------------ alignment
    Case(
        "buffer-align-64",
        LOAD.but(shared='T.alloc_shared((8, 16), "uint32", align=64)'),
        LOAD,
        "align",
        r"aligned to 64 bytes; every TMA shared origin must be 128-byte aligned",
        line="shared",
    ),
    Case(
        "subregion-origin",
        LOAD.but(
            shared='T.alloc_shared((12, 16), "uint32", align=128)',
            operands="s[1:5, :], A",
            kw={"box": "(4, 16)"},
        ),
        LOAD.but(
            shared='T.alloc_shared((12, 16), "uint32", align=128)',
            operands="s[2:6, :], A",
            kw={"box": "(4, 16)"},
        ),
        "operands",
        r"shared origin is at byte 64 of 's'",
        line="call",
    ),
    Case(
        "repeat-origin-step",
        LOAD.but(
            shared='T.alloc_shared((2, 1, 16), "uint32", align=128)',
            kw={"box": "(1, 16)", "coord_steps": "((1, 0),)"},
        ),
        LOAD.but(
            shared='T.alloc_shared((2, 2, 16), "uint32", align=128)',
            kw={"box": "(2, 16)", "coord_steps": "((2, 0),)"},
        ),
        "operands",
        r"repeat/group axis 0 steps the shared origin by 64 bytes",
        line="call",
    ),
    Case(
        "image-not-compact",
        LOAD.but(shared='T.alloc_shared((8, 32), "uint32", align=128)', operands="s[:, 0:16], A"),
        LOAD.but(shared='T.alloc_shared((2, 8, 16), "uint32", align=128)', operands="s[1], A"),
        "operands",
        r"not the compact box image",
        line="call",
    ),
    Case(
        "swizzle-layout-mismatch",
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 32), "float32", '
            'layout=swizzle(2, (8, 32), "float32"), align=1024)',
            kw={"box": "(8, 32)", "swizzle": "3"},
        ),
        LOAD.but(params=F32, shared=SWZ3, kw={"box": "(8, 32)", "swizzle": "3"}),
        "swizzle",
        r"swizzle=3 does not match the shared buffer 's', whose layout has swizzle "
        r"mode 2",
    ),
    Case(
        "swizzle-on-default-layout",
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 32), "float32", align=1024)',
            kw={"box": "(8, 32)", "swizzle": "3"},
        ),
        LOAD.but(params=F32, shared=SWZ3, kw={"box": "(8, 32)", "swizzle": "3"}),
        "swizzle",
        r"whose layout has swizzle mode 0",
    ),
    Case(
        "swizzled-layout-without-swizzle",
        LOAD.but(params=F32, shared=SWZ3, kw={"box": "(8, 32)"}),
        LOAD.but(params=F32, shared=SWZ3, kw={"box": "(8, 32)", "swizzle": "3"}),
        "swizzle",
        r"swizzle=0 does not match",
        line="call",
    ),
    Case(
        "nonstandard-compose-layout",
        LOAD.but(
            shared='T.alloc_shared((8, 16), "uint32", '
            "layout=ComposeLayout(2, 1, 4, row_major((8, 16))), align=1024)"
        ),
        LOAD,
        "swizzle",
        r"no TMA swizzle layout",
        line="call",
    ),
    *[
        Case(
            f"swizzle{mode}-period",
            LOAD.but(
                params=F32,
                shared=swizzled(mode, 64 << mode),
                kw={"box": f"(8, {8 << (mode - 1)})", "swizzle": str(mode)},
            ),
            LOAD.but(
                params=F32,
                shared=swizzled(mode, 128 << mode),
                kw={"box": f"(8, {8 << (mode - 1)})", "swizzle": str(mode)},
            ),
            "align",
            rf"swizzle={mode} needs the whole {128 << mode}-byte period",
            line="shared",
        )
        for mode in (1, 2, 3)
    ],
    # ------------------------------------------------------------ inner box bytes
    Case(
        "inner-box-8-bytes",
        LOAD.but(shared='T.alloc_shared((8, 2), "uint32", align=128)', kw={"box": "(8, 2)"}),
        LOAD.but(shared='T.alloc_shared((8, 4), "uint32", align=128)', kw={"box": "(8, 4)"}),
        "box",
        r"inner box is 8 bytes .* multiple of 16 bytes",
    ),
    # "Without interleave, the innermost step is one" (the H200 ignores it and overruns the image).
    Case(
        "innermost-element-stride",
        LOAD.but(
            shared='T.alloc_shared((8, 8), "uint32", align=128)', kw={"element_strides": "(1, 2)"}
        ),
        LOAD.but(
            shared='T.alloc_shared((4, 16), "uint32", align=128)', kw={"element_strides": "(2, 1)"}
        ),
        "element_strides",
        r"without interleave the innermost element stride must be 1, got 2",
    ),
    # Swizzled box rows land at the span pitch on the H200: a narrower row cannot be compact.
    Case(
        "inner-box-narrower-than-swizzle-span",
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 16), "float32", '
            'layout=swizzle(3, (8, 16), "float32"), align=1024)',
            kw={"swizzle": "3"},
        ),
        LOAD.but(params=F32, shared=SWZ2, kw={"swizzle": "2"}),
        "box",
        r"inner box is 64 bytes but swizzle=3 lays each box row out at its 128-byte "
        r"span.*use swizzle=2",
    ),
    Case(
        "inner-box-beyond-swizzle-span",
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 16), "float32", '
            'layout=swizzle(1, (8, 16), "float32"), align=256)',
            kw={"box": "(8, 16)", "swizzle": "1"},
        ),
        LOAD.but(
            params=F32,
            shared='T.alloc_shared((8, 8), "float32", '
            'layout=swizzle(1, (8, 8), "float32"), align=256)',
            kw={"box": "(8, 8)", "swizzle": "1"},
        ),
        "box",
        r"inner box is 64 bytes, wider than the 32-byte span of swizzle=1",
    ),
    # ------------------------------------------------------------ interleave
    Case(
        "interleave-rank2",
        LOAD.but(
            params='A: T.Tensor((16, 16), "uint16")',
            shared='T.alloc_shared((8, 16), "uint16", align=128)',
            kw={"interleave": "1"},
        ),
        INTERLEAVE.but(
            kw={"interleave": "1", "swizzle": None},
            params='A: T.Tensor((2, 4, 8, 8), "uint16")',
            shared='T.alloc_shared((1, 1, 8, 8), "uint16", align=128)',
        ),
        "interleave",
        r"interleave needs a rank-3\.\.5 opcode, got \.2d",
    ),
    Case(
        "interleave2-needs-swizzle1",
        INTERLEAVE.but(
            kw={"swizzle": None}, shared='T.alloc_shared((1, 1, 8, 16), "uint16", align=256)'
        ),
        INTERLEAVE,
        "swizzle",
        r"interleave=2 \(32B\) requires swizzle=1 \(32B\), got swizzle=0",
        line="call",
    ),
    Case(
        "interleave16-swizzle-traps-on-sm100a",
        INTERLEAVE.but(
            target="sm_100a",
            params='A: T.Tensor((2, 4, 8, 8), "uint16")',
            shared='T.alloc_shared((1, 1, 8, 8), "uint16", '
            'layout=swizzle(1, (1, 1, 8, 8), "uint16"), align=256)',
            kw={"interleave": "1"},
        ),
        INTERLEAVE.but(
            target="sm_90a",
            params='A: T.Tensor((2, 4, 8, 8), "uint16")',
            shared='T.alloc_shared((1, 1, 8, 8), "uint16", '
            'layout=swizzle(1, (1, 1, 8, 8), "uint16"), align=256)',
            kw={"interleave": "1"},
        ),
        "swizzle",
        r"16B interleave with swizzle 1 can trap on sm_100a",
    ),
    Case(
        "gather4-interleave",
        GATHER4.but(kw={"interleave": "1"}),
        GATHER4,
        "interleave",
        r"gather4/scatter4 do not use interleave",
    ),
    # ------------------------------------------------------------ gather4 / scatter4
    Case(
        "gather4-box-rows",
        GATHER4.but(kw={"box": "(2, 16)"}),
        GATHER4,
        "box",
        r"gather4/scatter4 use box=\(1, width\), got \(2, 16\)",
    ),
    Case(
        "scatter4-box-rows",
        SCATTER4.but(kw={"box": "(4, 16)"}),
        SCATTER4,
        "box",
        r"use box=\(1, width\)",
    ),
    Case(
        "gather4-element-strides",
        GATHER4.but(kw={"element_strides": "(2, 1)"}),
        GATHER4,
        "element_strides",
        r"gather4/scatter4 take unit element strides",
    ),
    Case(
        "gather4-row-step",
        GATHER4.but(
            shared='T.alloc_shared((2, 4, 16), "uint32", align=128)',
            kw={"coord_steps": "((4, 0),)"},
        ),
        GATHER4.but(
            shared='T.alloc_shared((2, 4, 16), "uint32", align=128)',
            kw={"coord_steps": "((0, 16),)"},
        ),
        "coord_steps",
        r"a row step\s+would be dropped",
    ),
]

# Reduction operator x element type: PTX ISA, cp.reduce.async.bulk.tensor (.add: .u32 .s32 .u64
# .f32 .f16 .bf16; .min/.max: .u32 .s32 .u64 .s64 .f16 .bf16; .inc/.dec: .u32; .and/.or/.xor:
# .b32 .b64), where the H200 runs a signed 64-bit and/or/xor descriptor into an illegal-instruction
# error (bench/results/probe_reduce_types.json): .b64 is the unsigned descriptor type only. The
# element type is the descriptor format's.
REDUCTIONS = {
    "add": ["uint32", "int32", "uint64", "float32", "float16", "bfloat16"],
    "min": ["uint32", "int32", "uint64", "int64", "float16", "bfloat16"],
    "max": ["uint32", "int32", "uint64", "int64", "float16", "bfloat16"],
    "inc": ["uint32"],
    "dec": ["uint32"],
    "and": ["uint32", "int32", "uint64"],
    "or": ["uint32", "int32", "uint64"],
    "xor": ["uint32", "int32", "uint64"],
}
REDUCTION_DTYPES = [
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
]


def reduce_spec(op: str, dtype: str, fmt: str | None = None) -> Spec:
    size = as_dtype(dtype).bytes
    width = 64 // size  # 64-byte rows
    kw = {"box": f"(4, {width})", "coords": "(0, 0)"}
    if fmt:
        kw["format"] = f'"{fmt}"'
    return Spec(
        op=reduce2(op),
        operands="A, s",
        params=f'A: T.Tensor((8, {2 * width}), "{dtype}")',
        shared=f'T.alloc_shared((4, {width}), "{dtype}", align=128)',
        kw=kw,
    )


def _reduction_cases():
    for op, allowed in REDUCTIONS.items():
        good = reduce_spec(op, allowed[0])
        for dtype in REDUCTION_DTYPES:
            if dtype not in allowed:
                yield Case(
                    f"reduce-{op}-{dtype}",
                    reduce_spec(op, dtype),
                    good,
                    "opcode",
                    rf"\.{op} reductions support .*; got {dtype}",
                    line="call",
                )
    yield Case(
        "reduce-add-tf32",
        reduce_spec("add", "float32", "tf32"),
        reduce_spec("add", "float32"),
        "opcode",
        r"\.add reductions support .*; got tf32",
        line="call",
    )


CASES += list(_reduction_cases())


def _ids(cases):
    return [c.id for c in cases]


def _expected_line(case: Case, tags: dict) -> int:
    tag = case.line or (case.parameter if case.parameter in case.bad.kw else "call")
    return tags[tag]


def test_case_ids_are_unique():
    assert len(set(_ids(CASES))) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_violation_raises_contract_error(case: Case, tmp_path):
    kernel, path, tags = load_kernel(case.bad, tmp_path)
    with pytest.raises(ContractError) as info:
        kernel.compile(target=case.bad.target)
    error = info.value
    line = _expected_line(case, tags)
    assert error.lineno == line, (str(error), tags)
    assert error.filename == path
    assert str(error).startswith(f"{path}:{line}:")
    assert error.opcode == case.bad.op
    assert error.parameter == case.parameter, str(error)
    assert re.search(case.match, str(error)), str(error)
    assert case.bad.op in str(error) and repr(case.parameter) in str(error)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_just_satisfied_lowers(case: Case, tmp_path):
    kernel, _, _ = load_kernel(case.good, tmp_path)
    lowered = lower(kernel, case.good.target)
    (site,) = lowered.ir.sites
    assert site.opcode == case.good.op
    if case.good.kw.get("pred") == "False":
        assert site.plan == []
    else:
        assert site.plan and all(r.bytes > 0 and r.shared_offset % 128 == 0 for r in site.plan)
    assert (render(case.good, tmp_path)[0], case.good.target) != (
        render(case.bad, tmp_path)[0],
        case.bad.target,
    )


# ------------------------------------------------------------------------ accepted reductions
@pytest.mark.parametrize("op,dtype", [(op, d) for op, ds in REDUCTIONS.items() for d in ds])
def test_isa_reduction_pairs_are_accepted(op, dtype, tmp_path):
    kernel, _, _ = load_kernel(reduce_spec(op, dtype), tmp_path)
    (site,) = lower(kernel, "sm_90a").ir.sites
    (record,) = site.plan
    assert record.bytes == 4 * 64


# -------------------------------------------------------------------------------- byte accounting
ACCOUNTING = """\
import jittile
from jittile import T


@jittile.kernel
def kernel(A: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 16), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), {count})
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["{op}"],
            shared,
            A,
            box=(8, 16),
            coords=(0, 0),
            coord_steps=((8, 0),),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
"""
EXPECT_LINE, LOAD_LINE = 13, 16


def _accounting_kernel(tmp_path, count):
    source = ACCOUNTING.format(count=count, op=LOAD2)
    lines = source.splitlines()
    assert "expect_tx" in lines[EXPECT_LINE - 1] and "tile.apply" in lines[LOAD_LINE - 1]
    name = f"tma_accounting_{next(_serial)}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("count", [512, 1536])
def test_expect_tx_mismatch_warns_with_lines_and_bytes(tmp_path, count):
    kernel = _accounting_kernel(tmp_path, count)
    with pytest.warns(JittileWarning) as record:
        lower(kernel, "sm_90a")
    (warning,) = [w for w in record if issubclass(w.category, JittileWarning)]
    text = str(warning.message)
    assert f":{EXPECT_LINE}:" in text  # the expect_tx line
    assert f"line {LOAD_LINE}" in text  # the load that completes on the barrier
    assert f"expects {count} transaction bytes" in text and "move 1024 bytes" in text


def test_expect_tx_match_does_not_warn(tmp_path):
    kernel = _accounting_kernel(tmp_path, 1024)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JittileWarning)
        lowered = lower(kernel, "sm_90a")
    assert sum(r.bytes for r in lowered.ir.sites[0].plan) == 1024
