"""Every accepted TMA opcode form compiles and assembles for its target; the plan follows the spec.

Forms are enumerated from the PTX ISA syntax (rank x direction x mode x destination x multicast x
cta_group x cache hint, with and without ``pred``). The expected verdict per target is written out
here from the specification, independently of the pattern: accepted forms are batched into one
kernel per (target, rank) and assembled, and the SASS must hold exactly one ``UTMALDG`` /
``UTMASTG`` / ``UTMAREDG`` of the matching variant per issued instruction; rejected forms must raise
``ContractError`` naming the target.
"""

from __future__ import annotations

import collections
import importlib.util
import itertools
import textwrap
from pathlib import Path

import pytest

from jittile import ContractError
from jittile.backend.toolchain import sass_opcodes
from jittile.frontend.lower import lower_kernel
from jittile.targets import Target

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("sm_90a", "sm_100a")
REDOPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
LOAD2 = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
LOAD3 = "cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
GATHER = "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
_serial = itertools.count()


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")


# ------------------------------------------------------------------------------ the form space
def load_forms(rank: int):
    for dst, mode, mcast, group, hint in itertools.product(
        ("shared::cta", "shared::cluster"),
        ("", ".tile", ".tile::gather4"),
        ("", ".multicast::cluster", ".multicast::cluster::16b", ".multicast::cluster::32b"),
        ("", ".cta_group::1", ".cta_group::2"),
        ("", ".L2::cache_hint"),
    ):
        yield dict(
            kind="load",
            rank=rank,
            dst=dst,
            mode=mode,
            mcast=mcast,
            group=group,
            hint=hint,
            text=f"cp.async.bulk.tensor.{rank}d.{dst}.global{mode}"
            f".mbarrier::complete_tx::bytes{mcast}{group}{hint}",
        )


def store_forms(rank: int):
    for mode, hint in itertools.product(("", ".tile", ".tile::scatter4"), ("", ".L2::cache_hint")):
        yield dict(
            kind="store",
            rank=rank,
            mode=mode,
            hint=hint,
            mcast="",
            group="",
            text=f"cp.async.bulk.tensor.{rank}d.global.shared::cta{mode}.bulk_group{hint}",
        )
    for op, mode, hint in itertools.product(REDOPS, ("", ".tile"), ("", ".L2::cache_hint")):
        yield dict(
            kind="reduce",
            rank=rank,
            mode=mode,
            hint=hint,
            mcast="",
            group="",
            op=op,
            text=f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op}{mode}"
            f".bulk_group{hint}",
        )


def all_forms(rank: int):
    return list(load_forms(rank)) + list(store_forms(rank))


def verdict(form: dict, target: str) -> str | None:
    """None if ``form`` is legal on ``target``; else the ContractError parameter it must raise."""
    gathered = form["mode"] in (".tile::gather4", ".tile::scatter4")
    if gathered and form["rank"] != 2:
        return "opcode"
    if form["mcast"] and form["dst"] != "shared::cluster":
        return "opcode"
    if form["mcast"].endswith("::32b"):  # a 32-bit ctaMask: the sm_107a/f family only
        return "target"
    if form["group"] or form["mode"] == ".tile::scatter4":
        return None if target == "sm_100a" else "target"
    if form["mode"] == ".tile::gather4":  # sm_100+ into shared::cta, sm_100a into shared::cluster
        return None if target == "sm_100a" else "target"
    return None  # tile forms, multicast included, are legal on sm_90a and sm_100a


def sass_name(form: dict) -> str:
    """The SASS mnemonic ptxas emits for one instruction of ``form``."""
    rank = form["rank"]
    if form["kind"] == "reduce":
        return f"UTMAREDG.{rank}D.{form['op'].upper()}"
    if form["kind"] == "store":
        return f"UTMASTG.{rank}D" + (".SCATTER4" if form["mode"] == ".tile::scatter4" else "")
    name = f"UTMALDG.{rank}D"
    if form["mode"] == ".tile::gather4":
        name += ".GATHER4"
    if form["mcast"]:
        name += ".MULTICAST"
    if form["group"] == ".cta_group::2":
        name += ".2CTA"
    return name


# ------------------------------------------------------------------------------ kernel building
HEADER = (
    """\
import jittile
from jittile import T
from jittile.layout import swizzle

LOAD2 = "%s"
LOAD3 = "%s"
GATHER = "%s"
"""  # noqa: UP031
    % (LOAD2, LOAD3, GATHER)
    + """

@jittile.kernel
def kernel({params}):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block={block}, cluster=(2, 1, 1)))
    lane = T.cuda.lane_id()
    policy = T.uint64(lane)
    mbar = T.alloc_shared((1,), "uint64")
"""
)


def tma_ops(sass: str) -> dict[str, int]:
    """SASS counts of the TMA data-movement instructions (not UTMACMDFLUSH & co.)."""
    return {
        name: n
        for name, n in sass_opcodes(sass).items()
        if name.startswith(("UTMALDG", "UTMASTG", "UTMAREDG"))
    }


def load_module(source: str, directory: Path):
    name = f"tma_forms_{next(_serial)}"
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_source(body: str, params: str, block: int = 32) -> str:
    return HEADER.format(params=params, block=block) + textwrap.indent(
        textwrap.dedent(body).strip() + "\n", "    "
    )


def tile_call(form: dict, pred: bool) -> str:
    rank = form["rank"]
    gathered = form["mode"] in (".tile::gather4", ".tile::scatter4")
    kw = [
        "box=(1, 16)" if gathered else f"box={(1,) * (rank - 1) + (16,)}",
        "coords=(" + ", ".join(["lane"] + ["0"] * (rank - 1)) + ",)",
    ]
    if gathered:
        kw.append("gather4=(lane, lane + 3, 7, 11)")
    if form["kind"] == "load":
        kw.append("mbar=mbar.ptr_to([0])")
    if form["mcast"]:
        kw.append("cta_mask=T.uint16(3)")
    if form["hint"]:
        kw.append("cache_policy=policy")
    if pred:
        kw.append("pred=lane == 0")
    shared = "rows4" if gathered else "box"
    operands = f"{shared}, A" if form["kind"] == "load" else f"A, {shared}"
    return f'T.cuda.tile.apply(T.ptx["{form["text"]}"], {operands}, {", ".join(kw)})'


def forms_kernel(forms: list[dict], rank: int, directory: Path):
    lines = [
        f'box = T.alloc_shared({(1,) * (rank - 1) + (16,)}, "uint32", align=128)',
        'rows4 = T.alloc_shared((4, 16), "uint32", align=128)',
    ]
    for form in forms:
        lines += [tile_call(form, pred=False), tile_call(form, pred=True)]
    params = f'A: T.Tensor({(32,) * rank}, "uint32")'
    return load_module(kernel_source("\n".join(lines), params), directory).kernel


# ------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_accepted_forms_assemble(rank, target, tmp_path):
    forms = [f for f in all_forms(rank) if verdict(f, target) is None]
    assert forms
    ck = forms_kernel(forms, rank, tmp_path).compile(target=target)
    expected = collections.Counter()
    for form in forms:
        expected[sass_name(form)] += 2  # unconditional + predicated
    assert tma_ops(ck.sass) == dict(expected)
    assert [len(site["instructions"]) for site in ck.plan] == [1] * (2 * len(forms))
    for site, form in zip(ck.plan, [f for f in forms for _ in (0, 1)]):
        assert site["opcode"] == form["text"]
    # The predicated copy of each form is guarded by its runtime predicate.
    assert ck.lowered_source.count("if __jt_v") >= len(forms)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_rejected_forms_raise(rank, target, tmp_path):
    forms = [f for f in all_forms(rank) if verdict(f, target) is not None]
    params = f'A: T.Tensor({(32,) * rank}, "uint32")'
    for form in forms:
        body = "\n".join(
            [
                f'box = T.alloc_shared({(1,) * (rank - 1) + (16,)}, "uint32", align=128)',
                'rows4 = T.alloc_shared((4, 16), "uint32", align=128)',
                tile_call(form, pred=False),
            ]
        )
        kernel = load_module(kernel_source(body, params), tmp_path).kernel
        specs = kernel.specializer.params(kernel.specializer.annotation_specs())
        with pytest.raises(ContractError) as info:
            lower_kernel(kernel.source, specs, Target.parse(target))
        assert info.value.parameter == verdict(form, target), (form["text"], str(info.value))
        assert info.value.opcode == form["text"]


def test_static_pred(tmp_path):
    load = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    body = f'''
    s = T.alloc_shared((8, 16), "uint32", align=128)
    T.cuda.tile.apply(T.ptx["{load}"], s, A, box=(8, 16), coords=(0, 0), mbar=mbar.ptr_to([0]),
                      pred=True)
    T.cuda.tile.apply(T.ptx["{load}"], s, A, box=(8, 16), coords=(8, 0), mbar=mbar.ptr_to([0]),
                      pred=False)
    '''
    module = load_module(kernel_source(body, 'A: T.Tensor((16, 16), "uint32")'), tmp_path)
    ck = module.kernel.compile(target="sm_90a")
    assert [len(site["instructions"]) for site in ck.plan] == [1, 0]
    assert tma_ops(ck.sass) == {"UTMALDG.2D": 1}


# ------------------------------------------------------------------------------ the seed example
def test_seed_example_plan_and_sass(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "tma_two_boxes_example", ROOT / "examples" / "tma_two_boxes.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ck = module.tma_load.compile(target="sm_90a")
    (site,) = ck.plan
    assert site["family"] == "cp.async.bulk.tensor"
    instructions = site["instructions"]
    assert [ins["coords"] for ins in instructions] == [(0, 0), (0, 8)]  # PTX order {col, row}
    assert [ins["bytes"] for ins in instructions] == [512, 512]
    assert [ins["shared_offset"] - instructions[0]["shared_offset"] for ins in instructions] == [
        0,
        512,
    ]
    mbars = {ins["mbar"] for ins in instructions}
    assert len(mbars) == 1 and None not in mbars
    assert sum(ins["bytes"] for ins in instructions) == 1024  # one barrier phase
    assert tma_ops(ck.sass) == {"UTMALDG.2D": 2}
    (tmap,) = ck.ir.host_tensormaps  # host descriptor setup, once, outside the device code
    assert tmap.tensor == "A" and tmap.box == (8, 16) and tmap.data_type == "uint32"


@pytest.mark.parametrize(
    "name,kernel,sass",
    [
        ("tma_store", "tma_store", {"UTMASTG.2D": 2}),
        ("tma_reduce_add", "tma_reduce_add", {"UTMAREDG.2D.ADD": 2}),
    ],
)
def test_examples_compile(name, kernel, sass):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ck = getattr(module, kernel).compile(target="sm_90a")
    assert tma_ops(ck.sass) == sass
    (site,) = ck.plan
    assert [i["bytes"] for i in site["instructions"]] == [1024, 1024]
    assert all(i["mbar"] is None for i in site["instructions"])


def test_swizzled_copy_example_compiles():
    from jittile import T

    spec = importlib.util.spec_from_file_location(
        "tma_swizzled_copy_example", ROOT / "examples" / "tma_swizzled_copy.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tensor = T.Tensor((module.M, module.N), "float32")
    ck = module.swizzled_copy.compile(
        tensor, tensor, module.M, module.N, module.BM, module.BN, target="sm_90a"
    )
    assert tma_ops(ck.sass) == {"UTMALDG.2D": 1, "UTMASTG.2D": 1}
    load, store = ck.plan
    assert load["instructions"][0]["bytes"] == store["instructions"][0]["bytes"] == 64 * 32 * 4
    assert {i["swizzle"] for s in ck.plan for i in s["instructions"]} == {3}
    assert ck.metadata["static_params"] == {"M": "4096", "N": "4096", "BM": "64", "BN": "32"}


# ------------------------------------------------------------------------------- code generation
def _lower(body: str, params: str, tmp_path, target="sm_90a", block=32):
    kernel = load_module(kernel_source(body, params, block), tmp_path).kernel
    specs = kernel.specializer.params(kernel.specializer.annotation_specs())
    return lower_kernel(kernel.source, specs, Target.parse(target))


def test_repeat_axes_step_coords_and_origins(tmp_path):
    """Two repeat axes (2, 3): coords + i*step0 + j*step1, reversed for PTX; shared origins walk
    the compact (2, 3, 1, 4, 16) image."""
    lowered = _lower(
        """
    s = T.alloc_shared((2, 3, 1, 4, 16), "uint32", align=128)
    T.cuda.tile.apply(T.ptx[LOAD3],
                      s, A, box=(1, 4, 16), coords=(5, 1, 2), coord_steps=((1, 0, 0), (0, 4, 0)),
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((8, 16, 32), "uint32")',
        tmp_path,
    )
    (site,) = lowered.ir.sites
    base = site.plan[0].shared_offset
    got = [(r.instance, r.coords, r.shared_offset - base, r.bytes) for r in site.plan]
    assert got == [
        ((i, j), (2, 1 + 4 * j, 5 + i), (i * 3 + j) * 256, 256) for i in range(2) for j in range(3)
    ]


def test_runtime_coords_and_group_axis(tmp_path):
    """scope='warp': the lane index selects the group slot, adds its coord step at run time and
    offsets the shared origin by the group stride."""
    lowered = _lower(
        """
    s = T.alloc_shared((32, 2, 16), "uint32", align=128)
    T.cuda.tile.apply(T.ptx[LOAD2],
                      s, A, box=(2, 16), coords=(lane, 16), coord_steps=((2, 0),),
                      mbar=mbar.ptr_to([0]), scope="warp")
    """,
        'A: T.Tensor((64, 32), "uint32")',
        tmp_path,
    )
    (site,) = lowered.ir.sites
    (record,) = site.plan
    col, row = record.coords
    assert col == 16 and "T.cuda.lane_id() * 2" in str(row)
    source = lowered.source
    assert "laneid * 128" in source


def test_swizzled_subregion_uses_unswizzled_origin(tmp_path):
    """A sub-region of a 128B-swizzled buffer is addressed at its linear (inverse-swizzled) origin:
    row 9 of a (16, 32) float32 buffer is at byte 9 * 128, not at its swizzled position."""
    lowered = _lower(
        """
    s = T.alloc_shared((16, 32), "float32", layout=swizzle(3, (16, 32), "float32"), align=1024)
    T.cuda.tile.apply(T.ptx[LOAD2],
                      s[9:13, :], A, box=(4, 32), coords=(0, 0), swizzle=3, mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((16, 32), "float32")',
        tmp_path,
    )
    (site,) = lowered.ir.sites
    (record,) = site.plan
    buffer = next(b for b in lowered.shared_buffers if b.name == "s")
    assert record.shared_offset - buffer.offset == 9 * 128
    assert record.bytes == 4 * 128


def test_gather4_coordinates(tmp_path):
    """gather4: {column, row0..row3}; one 512-byte issue for uint32 rows of 32."""
    lowered = _lower(
        """
    s = T.alloc_shared((4, 32), "uint32", align=128)
    T.cuda.tile.apply(T.ptx[GATHER],
                      s, A, box=(1, 32), coords=(0, 64), gather4=(3, 5, 8, 13),
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((16, 128), "uint32")',
        tmp_path,
        target="sm_100a",
    )
    (record,) = lowered.ir.sites[0].plan
    assert record.coords == (64, 3, 5, 8, 13)
    assert record.bytes == 512


def test_host_tensormap_fields(tmp_path):
    """Descriptor fields go to the host TensorMap as written; calls with equal fields share one."""
    lowered = _lower(
        """
    s = T.alloc_shared((8, 32), "float32", layout=swizzle(3, (8, 32), "float32"), align=1024)
    t = T.alloc_shared((4, 32), "float32", align=128)
    T.cuda.tile.apply(T.ptx[LOAD2],
                      s, A, box=(8, 32), coords=(0, 0), swizzle=3, l2_promotion=2, oob_fill=1,
                      format="tf32", mbar=mbar.ptr_to([0]))
    T.cuda.tile.apply(T.ptx[LOAD2],
                      s, A, box=(8, 32), coords=(8, 0), swizzle=3, l2_promotion=2, oob_fill=1,
                      format="tf32", mbar=mbar.ptr_to([0]))
    T.cuda.tile.apply(T.ptx[LOAD2],
                      t, A[4:20, 0:64], box=(7, 32), coords=(0, 0), element_strides=(2, 1),
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((32, 64), "float32")',
        tmp_path,
    )
    first, second = lowered.ir.host_tensormaps
    assert (
        first.tensor,
        first.data_type,
        first.box,
        first.element_strides,
        first.swizzle,
        first.l2_promotion,
        first.oob_fill,
        first.interleave,
    ) == ("A", "tf32", (8, 32), (1, 1), 3, 2, 1, 0)
    assert (second.region_starts, second.region_extents, second.box, second.element_strides) == (
        (4, 0),
        (16, 64),
        (7, 32),
        (2, 1),
    )
    sites = lowered.ir.sites
    assert sites[0].plan[0].operand("tensormap") == sites[1].plan[0].operand("tensormap")
    assert sites[2].plan[0].bytes == 4 * 32 * 4


def test_interleave_and_fp4_images(tmp_path):
    """32B interleave: one channel slice per issue, repeated over C by an explicit step; packed
    FP4: 128 values in a 128-byte image row, 64 payload bytes."""
    lowered = _lower(
        """
    s = T.alloc_shared((3, 1, 1, 8, 16), "uint16", layout=swizzle(1, (3, 1, 1, 8, 16), "uint16"),
                       align=256)
    f = T.alloc_shared((8, 128), "uint8", align=128)
    T.cuda.tile.apply(T.ptx[LOAD3],
                      s, A, box=(1, 1, 8), coords=(0, 0, 0), coord_steps=((0, 1, 0),),
                      interleave=2, swizzle=1, mbar=mbar.ptr_to([0]))
    T.cuda.tile.apply(T.ptx[LOAD2],
                      f, B, box=(8, 128), coords=(0, 0), format="float4_e2m1fn",
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((2, 4, 8, 16), "uint16"), B: T.Tensor((8, 256), "uint8")',
        tmp_path,
        target="sm_100a",
    )  # packed FP4 descriptors are Blackwell's
    interleaved, fp4 = lowered.ir.sites
    # The descriptor's axes are (N, C_slices, W), Ci implicit: PTX {w, c_slice, n}.
    assert [(r.coords, r.bytes) for r in interleaved.plan] == [((0, c, 0), 256) for c in range(3)]
    tmap = next(t for t in lowered.ir.host_tensormaps if t.tensor == "A")
    assert (tmap.box, tmap.element_strides, tmap.interleave, tmap.swizzle) == (
        (1, 1, 8),
        (1, 1, 1),
        2,
        1,
    )
    offsets = [r.shared_offset for r in interleaved.plan]
    assert [o - offsets[0] for o in offsets] == [0, 256, 512]
    assert [r.bytes for r in fp4.plan] == [8 * 64]


def test_gather4_fp4_payload(tmp_path):
    lowered = _lower(
        """
    s = T.alloc_shared((4, 128), "uint8", align=128)
    T.cuda.tile.apply(T.ptx[GATHER],
                      s, B, box=(1, 128), coords=(0, 0), gather4=(0, 2, 4, 6),
                      format="float4_e2m1fn", mbar=mbar.ptr_to([0]))
    """,
        'B: T.Tensor((8, 256), "uint8")',
        tmp_path,
        target="sm_100a",
    )
    (record,) = lowered.ir.sites[0].plan
    assert record.bytes == 4 * 64


def test_unit_lead_axes(tmp_path):
    """A repeat axis of extent one is one instance, whatever its atom size; a 64-byte atom needs no
    128-byte step when nothing steps."""
    lowered = _lower(
        """
    s = T.alloc_shared((1, 1, 16), "uint32", align=128)
    T.cuda.tile.apply(T.ptx[LOAD2],
                      s, A, box=(1, 16), coords=(3, 0), coord_steps=((1, 0),),
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((16, 16), "uint32")',
        tmp_path,
    )
    (record,) = lowered.ir.sites[0].plan
    assert (record.instance, record.coords, record.bytes) == ((0,), (0, 3), 64)


def test_interleave_selects_one_channel_slice(tmp_path):
    """A larger C box still moves one slice per issue: the descriptor's C box is one."""
    lowered = _lower(
        """
    s = T.alloc_shared((1, 1, 8, 8), "uint16", align=128)
    T.cuda.tile.apply(T.ptx[LOAD3], s, A, box=(1, 3, 8), coords=(0, 2, 0), interleave=1,
                      mbar=mbar.ptr_to([0]))
    """,
        'A: T.Tensor((2, 4, 8, 8), "uint16")',
        tmp_path,
    )
    (record,) = lowered.ir.sites[0].plan
    assert (record.coords, record.bytes) == ((0, 2, 0), 8 * 16)
    (tmap,) = lowered.ir.host_tensormaps
    assert tmap.box == (1, 1, 8)


def test_multicast_32bit_mask_on_sm107a(tmp_path):
    """The 32-bit ctaMask form is the sm_107a/f family's: rejected elsewhere (see the rejected
    forms), assembled there."""
    op = (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster::32b"
    )
    body = f'''
    s = T.alloc_shared((8, 16), "uint32", align=128)
    T.cuda.tile.apply(T.ptx["{op}"], s, A, box=(8, 16), coords=(0, 0), mbar=mbar.ptr_to([0]),
                      cta_mask=T.uint32(lane))
    '''
    module = load_module(kernel_source(body, 'A: T.Tensor((16, 16), "uint32")'), tmp_path)
    ck = module.kernel.compile(target="sm_107a")
    assert tma_ops(ck.sass) == {"UTMALDG.2D.MULTICAST32": 1}
