"""Property test: random TMA opcode forms and parameters either raise ``ContractError`` or lower
(and, for a smaller sample, compile and assemble); no other exception escapes.

The generator starts from a coherent call (opcode, dtype, box, image, alignment, runtime operands)
and perturbs individual pieces, so that most draws probe one contract rule at a time. Each draw is
written to its own module file, because jittile reads kernel source with ``inspect``.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import random
import tempfile
import textwrap

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jittile import ContractError
from jittile.backend.toolchain import sass_opcodes
from jittile.frontend.lower import lower_kernel
from jittile.targets import Target

BYTES = {
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "uint16": 2,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "uint32": 4,
    "int32": 4,
    "float32": 4,
    "uint64": 8,
    "int64": 8,
    "float64": 8,
}
# numba-cuda has scalar types for these; bfloat16/float8 shared buffers and tensors do not compile
# yet (jittile.backend.compiler.numba_scalar), so the compiled sample leaves them out.
COMPILABLE_DTYPES = [
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float16",
    "float32",
    "float64",
]
ALL_DTYPES = COMPILABLE_DTYPES + ["bfloat16", "float8_e4m3fn", "float8_e5m2", "bool"]
REDOPS = ["add", "min", "max", "inc", "dec", "and", "or", "xor"]
REDUCE_TYPES = {  # PTX ISA, cp.reduce.async.bulk.tensor: redOp x element type
    "add": ["uint32", "int32", "uint64", "float32", "float16", "bfloat16"],
    "min": ["uint32", "int32", "uint64", "int64", "float16", "bfloat16"],
    "max": ["uint32", "int32", "uint64", "int64", "float16", "bfloat16"],
    "inc": ["uint32"],
    "dec": ["uint32"],
    "and": ["uint32", "int32", "uint64"],
    "or": ["uint32", "int32", "uint64"],
    "xor": ["uint32", "int32", "uint64"],
}
SPAN = {1: 32, 2: 64, 3: 128}

_serial = itertools.count()
_DIR = tempfile.mkdtemp(prefix="jittile_tma_property_")


class Chooser:
    """Uniform choices from ``random.Random(seed)``, the seed drawn by Hypothesis (its own draws
    lean towards boundary values, which would fire every perturbation at once). ``chance`` picks
    legal features at fixed rates; ``perturb`` breaks one rule at a rate scaled by ``mutate``."""

    def __init__(self, draw, mutate: float):
        self.rnd = random.Random(draw(st.integers(0, 2**64 - 1)))
        self.mutate = mutate

    def chance(self, p: float) -> bool:
        return self.rnd.random() < p

    def perturb(self, p: float) -> bool:
        return self.rnd.random() < p * self.mutate

    def pick(self, options):
        return self.rnd.choice(list(options))

    def int(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)


def opcode(c: Chooser, sm100: bool) -> tuple[str, dict]:
    """An opcode in ISA order (legal for the target unless perturbed) and what it selects."""
    kind = c.pick(["load", "load", "store", "reduce"])
    rank = c.int(1, 5)
    info = dict(kind=kind, multicast="", hint="", mode="")
    hint = ".L2::cache_hint" if c.chance(0.3) else ""
    if kind == "load":
        mode = c.pick(["", ".tile"])
        if (sm100 and c.chance(0.2)) or c.perturb(0.03):
            mode = ".tile::gather4"
        dst = c.pick(["shared::cta", "shared::cluster"])
        mcast = ""
        if (dst == "shared::cluster" and c.chance(0.4)) or c.perturb(0.02):
            mcast = c.pick(
                [".multicast::cluster", ".multicast::cluster", ".multicast::cluster::16b"]
            )
        if c.perturb(0.02):
            mcast = ".multicast::cluster::32b"
        group = ""
        if (sm100 and c.chance(0.2)) or c.perturb(0.02):
            group = c.pick([".cta_group::1", ".cta_group::2"])
        words = [
            f"{rank}d",
            dst,
            "global",
            mode,
            "mbarrier::complete_tx::bytes",
            mcast,
            group,
            hint,
        ]
        head = "cp.async.bulk.tensor"
        info["multicast"] = mcast
    else:
        mode = c.pick(["", ".tile"])
        if kind == "store" and ((sm100 and c.chance(0.2)) or c.perturb(0.03)):
            mode = ".tile::scatter4"
        if kind == "store":
            head = "cp.async.bulk.tensor"
            words = [f"{rank}d", "global", "shared::cta", mode, "bulk_group", hint]
        else:
            head = "cp.reduce.async.bulk.tensor"
            info["redop"] = c.pick(REDOPS)
            words = [f"{rank}d", "global", "shared::cta", info["redop"], mode, "bulk_group", hint]
    info["hint"] = hint
    gathered = mode.endswith("4")
    if gathered and not c.perturb(0.2):
        words[0], rank = "2d", 2
    info.update(rank=rank, mode=mode, gathered=gathered)
    words = [w.strip(".") for w in words if w]
    # Grammar perturbations: swap two qualifiers, replace or drop one.
    if c.perturb(0.05):
        i, j = c.int(0, len(words) - 1), c.int(0, len(words) - 1)
        words[i], words[j] = words[j], words[i]
    if c.perturb(0.04):
        words[c.int(0, len(words) - 1)] = c.pick(
            ["tiles", "im2col", "L2::evict_first", "3x", "shared", "bulk_group"]
        )
    if c.perturb(0.03):
        del words[c.int(0, len(words) - 1)]
    return head + "." + ".".join(words), info


@st.composite
def tma_kernels(draw, compilable: bool = False):
    """(kernel source, target, facts) for one random tile call."""
    c = Chooser(draw, mutate=0.15 if compilable else 1.0)
    target = c.pick(["sm_90a", "sm_100a"])
    if c.perturb(0.05):
        target = c.pick(["sm_90", "sm_120a"])
    op, info = opcode(c, target == "sm_100a")
    rank, kind, gathered = info["rank"], info["kind"], info["gathered"]
    dtype = c.pick(COMPILABLE_DTYPES if compilable else ALL_DTYPES)
    if kind == "reduce" and not c.perturb(0.3):  # an element type the ISA allows for the redOp
        dtype = c.pick(
            [
                d
                for d in REDUCE_TYPES[info["redop"]]
                if compilable is False or d in COMPILABLE_DTYPES
            ]
        )
    size = BYTES[dtype]
    kw: dict[str, str] = {}

    fmt = None
    if c.chance(0.05) and kind == "load":
        fmt = c.pick(['"tf32"', '"float4_e2m1fn"'])
        dtype, size = ("float32", 4) if fmt == '"tf32"' else ("uint8", 1)
    if c.perturb(0.04):
        fmt = c.pick(['"tf32"', '"float4_e2m1fn"', '"float32"', '"int32"', '"float13"', "lane"])
    if fmt:
        kw["format"] = fmt
    fp4 = fmt == '"float4_e2m1fn"'

    interleave = 0
    if (rank >= 3 and not gathered and not fp4 and c.chance(0.08)) or c.perturb(0.01):
        interleave = c.pick([1, 2])
    if c.perturb(0.01):
        interleave = 3
    if interleave:
        kw["interleave"] = str(interleave)
    slice_elems = max(16 * max(interleave, 1) // size, 1)

    swizzle = 0
    if c.chance(0.25) and not (fp4 and c.chance(0.5)):
        swizzle = 3 if fp4 else c.pick([1, 2, 3])
    if interleave == 2 and not c.perturb(0.2):
        swizzle = 1
    if interleave == 1 and target == "sm_100a" and not c.perturb(0.2):
        swizzle = 0
    if c.perturb(0.02):
        swizzle = c.pick([4, -1])
    if swizzle or c.chance(0.05):
        kw["swizzle"] = str(swizzle)

    # Box: the inner row is one swizzle span (or 16..256 bytes); outer extents stay small.
    inner_bytes = SPAN.get(swizzle) or c.pick([16, 32, 64, 128, 256])
    if c.perturb(0.08):
        inner_bytes = c.pick([16, 32, 64, 128, 256])
    inner = 128 if fp4 else max(inner_bytes // size, 1)
    if c.perturb(0.05):
        inner = c.int(0, 300)
    outer = [c.pick([1, 1, 2, 3, 4]) for _ in range(rank - 1)]
    if outer and c.perturb(0.03):
        outer[c.int(0, len(outer) - 1)] = c.pick([0, 257])
    box = tuple(outer) + (inner,)
    if gathered:
        box = (1 if not c.perturb(0.05) else 2, inner)
    if interleave:
        box = box[:-1] + (c.pick([1, 2, 4, 8]),)  # the innermost spatial extent
    if c.perturb(0.03):
        box = box + (1,)
    kw["box"] = str(box) if not c.perturb(0.02) else "(lane,) * %d" % len(box)  # noqa: UP031

    strides = (1,) * len(box)
    if c.chance(0.1) and not gathered:
        strides = tuple(c.pick([1, 1, 2, 3, 8]) for _ in box[:-1]) + (1,)
        if interleave:
            strides = strides[:1] + (1,) + strides[2:]
    if c.perturb(0.04):
        strides = strides[:-1] + (c.pick([0, 2, 9]),)
    if strides != (1,) * len(box) or c.chance(0.05):
        kw["element_strides"] = str(strides)

    for name, count in (("l2_promotion", 4), ("oob_fill", 2)):
        if c.chance(0.1):
            kw[name] = str(c.int(0, count - 1) if not c.perturb(0.3) else c.pick([count, -1]))
    if (
        "oob_fill" in kw
        and kw["oob_fill"] == "1"
        and dtype not in ("float16", "bfloat16", "float32", "float64")
        and not c.perturb(0.3)
    ):
        kw["oob_fill"] = "0"

    # The shared image the specification expects, occasionally perturbed.
    image = tuple(math.ceil(b / s) if s > 0 else 1 for b, s in zip(box, strides))
    if gathered:
        image = (4, box[-1])
    elif interleave:
        image = (image[0], 1) + image[2:] + (slice_elems,)
    image = tuple(max(e, 1) for e in image)
    if c.perturb(0.04):
        i = c.int(0, len(image) - 1)
        image = image[:i] + (max(image[i] + c.pick([-1, 1]), 1),) + image[i + 1 :]

    # Every instance origin must stay 128-byte aligned: lead axes and sub-regions need whole
    # 128-byte atoms (unless perturbed).
    whole = math.prod(image) * size % 128 == 0 or c.perturb(0.2)
    lead: list[int] = []
    if whole and c.chance(0.1):
        scope = c.pick(["warp", "warp", "cluster", "cta"])
        lead.append({"warp": 32, "cluster": 2, "cta": 64}[scope])
        kw["scope"] = f'"{scope}"'
    repeats = [c.pick([1, 2, 3]) for _ in range(c.pick([0, 0, 0, 1, 2]) if whole else 0)]
    lead += repeats
    if lead or c.perturb(0.03):
        steps = [tuple(c.int(0, 3) for _ in range(rank)) for _ in lead]
        if gathered:
            steps = [(0,) + s[1:] for s in steps]
        if c.perturb(0.05):
            steps = steps[:-1] if steps else [(1,) * rank]
        if steps and c.perturb(0.03):
            steps = [s[:-1] for s in steps]
        kw["coord_steps"] = repr(tuple(steps))
    shape = tuple(lead) + image

    subregion = whole and c.chance(0.08)
    alloc_shape = ((2,) + shape) if subregion else shape
    layout = ""
    align = 128
    if swizzle in SPAN and not c.perturb(0.1):
        layout = f', layout=swizzle({swizzle}, {alloc_shape}, "{dtype}")'
        align = 128 << swizzle
    if c.perturb(0.05):
        align = c.pick([16, 64])
    if math.prod(alloc_shape) * size > 96 * 1024:  # keep the kernel launchable
        return draw(tma_kernels(compilable))
    shared = f's = T.alloc_shared({alloc_shape}, "{dtype}"{layout}, align={align})'
    operand = "s[1]" if subregion else "s"

    # Global tensor: opcode rank (+ the channel-slice axis with interleave).
    gdtype = dtype if not c.perturb(0.03) else c.pick(ALL_DTYPES)
    grank = rank + (1 if interleave else 0)
    if c.perturb(0.03):
        grank = max(grank + c.pick([-1, 1]), 1)
    gshape = [64] * grank
    if interleave:
        gshape[-1] = slice_elems
    if fp4:
        gshape[-1] = 256
    params = f'A: T.Tensor({tuple(gshape)}, "{gdtype}")'

    coords = ["lane" if c.chance(0.2) else str(c.int(0, 8)) for _ in range(rank)]
    if c.perturb(0.03):
        coords[0] = c.pick(["0.5", "2 ** 40"])
    if c.perturb(0.02):
        coords.append("0")
    if not c.perturb(0.02):
        kw["coords"] = "(" + ", ".join(coords) + ",)"
    if gathered != c.perturb(0.03):
        kw["gather4"] = c.pick(
            ["(lane, 1, 2, 3)", "(0, 2, 4, 6)"] + (["(0, 1, 2)"] if c.perturb(0.2) else [])
        )
    if (kind == "load") != c.perturb(0.03):
        kw["mbar"] = "mbar.ptr_to([0])" if not c.perturb(0.1) else "0"
    if bool(info["multicast"]) != c.perturb(0.03):
        kw["cta_mask"] = c.pick(
            ["T.uint32(3)", "lane"]
            if info["multicast"].endswith("32b")
            else ["T.uint16(3)", "lane", "3"]
        )
    if bool(info["hint"]) != c.perturb(0.03):
        kw["cache_policy"] = c.pick(["policy", "T.uint64(0)"])
    if c.chance(0.15):
        kw["pred"] = c.pick(["lane == 0", "True", "False"] + (["1"] if c.perturb(0.3) else []))
    if c.perturb(0.02):
        kw[c.pick(["boxes", "multicast", "stride"])] = "1"

    operands = f"{operand}, A" if kind == "load" else f"A, {operand}"
    call = (
        f'T.cuda.tile.apply(T.ptx["{op}"], {operands}, '
        + ", ".join(f"{k}={v}" for k, v in kw.items())
        + ")"
    )
    source = textwrap.dedent(f"""\
        import jittile
        from jittile import T
        from jittile.layout import swizzle


        @jittile.kernel
        def kernel({params}):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=(2, 1, 1)))
            lane = T.cuda.lane_id()
            policy = T.uint64(lane)
            mbar = T.alloc_shared((1,), "uint64")
            {shared}
            if lane == 0:
                {call}
        """)
    return source, target, dict(op=op, repeats=math.prod(repeats), kw=kw)


def load_kernel(source: str):
    name = f"tma_property_{os.getpid()}_{next(_serial)}"
    path = os.path.join(_DIR, f"{name}.py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def lower_or_contract_error(source: str, target: str):
    """The Lowered kernel, or None when the call breaks the contract; anything else fails."""
    kernel = load_kernel(source)
    params = kernel.specializer.params(kernel.specializer.annotation_specs())
    try:
        return kernel, lower_kernel(kernel.source, params, Target.parse(target))
    except ContractError as error:
        assert error.opcode and error.parameter and error.lineno, str(error)
        assert str(error).startswith(f"{error.filename}:{error.lineno}:")
        event(f"ContractError: {error.parameter}")
        return kernel, None


def check_plan(lowered, facts) -> int:
    (site,) = lowered.ir.sites
    expected = 0 if facts["kw"].get("pred") == "False" else facts["repeats"]
    assert len(site.plan) == expected
    for record in site.plan:
        assert record.bytes > 0 and record.shared_offset % 128 == 0
        assert record.opcode == ".".join(facts["op"].split("."))
    return expected


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")


COMMON = dict(
    deadline=None,
    database=None,
    derandomize=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


@settings(max_examples=int(os.environ.get("JITTILE_TMA_PROPERTY_EXAMPLES", "500")), **COMMON)
@given(tma_kernels())
def test_random_calls_lower_or_raise_contract_error(case):
    source, target, facts = case
    try:
        _, lowered = lower_or_contract_error(source, target)
    except ContractError:
        raise
    except Exception as exc:  # pragma: no cover - the failure report
        raise AssertionError(f"{type(exc).__name__} escaped ({target}):\n{source}") from exc
    if lowered is not None:
        check_plan(lowered, facts)
        event("lowered")


@settings(max_examples=int(os.environ.get("JITTILE_TMA_PROPERTY_COMPILES", "30")), **COMMON)
@given(tma_kernels(compilable=True))
def test_random_calls_compile_and_assemble(case):
    source, target, facts = case
    try:
        kernel, lowered = lower_or_contract_error(source, target)
        if lowered is None:
            return
        issued = check_plan(lowered, facts)
        ck = kernel.compile(target=target)
    except Exception as exc:  # pragma: no cover - the failure report
        raise AssertionError(f"{type(exc).__name__} escaped ({target}):\n{source}") from exc
    tma = {
        name: n
        for name, n in sass_opcodes(ck.sass).items()
        if name.startswith(("UTMALDG", "UTMASTG", "UTMAREDG"))
    }
    assert sum(tma.values()) == issued, (tma, source)
    event("compiled and assembled")


@pytest.mark.gpu
@settings(max_examples=int(os.environ.get("JITTILE_TMA_PROPERTY_ENCODES", "400")), **COMMON)
@given(tma_kernels())
def test_the_driver_encodes_every_descriptor_the_contract_accepts(case):
    """Differential check against cuTensorMapEncodeTiled: a call the contract accepts yields host
    TensorMaps the driver encodes for an array of the annotated shape (a descriptor rule that only
    the driver knew would surface as a LaunchError at launch instead of a ContractError)."""
    from jittile.runtime import driver
    from jittile.runtime.arrays import DeviceView
    from jittile.runtime.tensormap import encode, region_fields

    source, target, _ = case
    driver.ensure_context()
    major, minor = driver.current_device_capability()
    if Target.parse(target).capability != major * 10 + minor:
        event("another architecture's descriptor")  # the driver validates for this device
        return
    kernel, lowered = lower_or_contract_error(source, target)
    if lowered is None or not lowered.ir.host_tensormaps:
        return
    (param,) = [p for p in lowered.ir.params if p.name == "A"]
    shape = tuple(param.static_shape)
    strides, step = [], param.dtype.bytes
    for extent in reversed(shape):
        strides.insert(0, step)
        step *= extent
    ptr = driver.alloc(step)
    try:
        view = DeviceView(ptr, shape, tuple(strides), param.dtype)
        for spec in lowered.ir.host_tensormaps:
            try:
                encode(region_fields(spec, view))
            except Exception as exc:  # pragma: no cover - the failure report
                raise AssertionError(
                    f"the contract accepted a descriptor the driver refuses: {exc}\n{source}"
                ) from exc
    finally:
        driver.free(ptr)
    event("encoded")
