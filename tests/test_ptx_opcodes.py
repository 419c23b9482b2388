"""Parsing the tile-pattern opcodes (TMA load/store/reduce, tcgen05.cp) and checking targets.

Every rejection is paired with the nearest spelling that is accepted. ptxas agreement for all
canonical combinations lives in test_ptx_instructions.py.
"""

from __future__ import annotations

import pytest

from jittile.errors import ContractError, Location
from jittile.patterns.tma_opcodes import BulkTensorOpcode, parse_bulk_tensor
from jittile.patterns.tmem_copy_opcodes import Tcgen05CpOpcode, parse_tcgen05_cp
from jittile.ptx.opcodes import check_target

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
GATHER = "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group"
MULTICAST = (
    "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".multicast::cluster.cta_group::2.L2::cache_hint"
)


def test_seed_load() -> None:
    op = parse_bulk_tensor(LOAD)
    assert isinstance(op, BulkTensorOpcode)
    assert (op.kind, op.rank, op.dst_space, op.src_space, op.mode) == (
        "load",
        2,
        "shared::cta",
        "global",
        "tile",
    )
    assert (op.completion, op.multicast, op.multicast_bits, op.cta_group, op.cache_hint) == (
        "mbarrier::complete_tx::bytes",
        False,
        None,
        None,
        False,
    )
    assert op.redop is None and op.text == LOAD and op.native_text == LOAD
    assert op.requirements == ((8, 6), ["sm_90"])  # .shared::cta destination: PTX 8.6
    assert op.advised_targets == ()


def test_load_mode_may_be_omitted_and_is_kept_as_written() -> None:
    text = "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
    op = parse_bulk_tensor(f"  {text} ")
    assert op.mode == "tile" and op.native_text == text
    assert op.requirements == ((8, 0), ["sm_90"])
    assert parse_bulk_tensor(LOAD).native_text.count(".tile.") == 1


def test_seed_gather4() -> None:
    op = parse_bulk_tensor(GATHER)
    assert (op.kind, op.mode, op.rank) == ("load", "tile::gather4", 2)
    assert op.requirements == ((8, 6), ["sm_100"])  # sm_100 or higher into .shared::cta
    cluster = parse_bulk_tensor(GATHER.replace("shared::cta", "shared::cluster"))
    assert cluster.requirements == ((8, 6), ["sm_100a"])


def test_multicast_cta_group_and_cache_hint() -> None:
    op = parse_bulk_tensor(MULTICAST)
    fields = (op.rank, op.dst_space, op.multicast, op.multicast_bits, op.cta_group, op.cache_hint)
    assert fields == (3, "shared::cluster", True, 16, 2, True)
    assert op.requirements == ((8, 6), ["sm_100a"])
    assert op.advised_targets == ("sm_90a", "sm_100a")


@pytest.mark.parametrize(
    "suffix, bits, ptx, targets",
    [
        ("multicast::cluster", 16, (8, 0), ["sm_90"]),
        ("multicast::cluster::16b", 16, (9, 4), ["sm_90"]),
        ("multicast::cluster::32b", 32, (9, 4), ["sm_107a", "sm_107f"]),
    ],
)
def test_multicast_mask_widths(
    suffix: str, bits: int, ptx: tuple[int, int], targets: list[str]
) -> None:
    op = parse_bulk_tensor(
        f"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.{suffix}"
    )
    assert op.multicast and op.multicast_bits == bits
    assert op.requirements == (ptx, targets)


def test_store_and_scatter4() -> None:
    op = parse_bulk_tensor(STORE)
    assert (op.kind, op.dst_space, op.src_space, op.completion, op.mode) == (
        "store",
        "global",
        "shared::cta",
        "bulk_group",
        "tile",
    )
    assert op.requirements == ((8, 0), ["sm_90"])
    scatter = parse_bulk_tensor(
        "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group.L2::cache_hint"
    )
    assert (scatter.mode, scatter.cache_hint) == ("tile::scatter4", True)
    assert scatter.requirements == ((8, 6), ["sm_100a"])


@pytest.mark.parametrize("redop", ["add", "min", "max", "inc", "dec", "and", "or", "xor"])
def test_reductions(redop: str) -> None:
    op = parse_bulk_tensor(
        f"cp.reduce.async.bulk.tensor.5d.global.shared::cta.{redop}.tile.bulk_group.L2::cache_hint"
    )
    fields = (op.kind, op.rank, op.redop, op.mode, op.cache_hint)
    assert fields == ("reduce", 5, redop, "tile", True)
    assert op.requirements == ((8, 0), ["sm_90"])
    assert parse_bulk_tensor(REDUCE).redop == "add"


@pytest.mark.parametrize(
    "bad, good, fragments",
    [
        # im2col is outside the tile pattern
        (
            "cp.async.bulk.tensor.3d.shared::cta.global.im2col.mbarrier::complete_tx::bytes",
            "cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes",
            ["im2col modes are not supported by the tile pattern"],
        ),
        (
            "cp.async.bulk.tensor.3d.global.shared::cta.im2col_no_offs.bulk_group",
            "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group",
            ["im2col modes are not supported by the tile pattern"],
        ),
        # unknown qualifier with a suggestion
        (LOAD.replace(".tile.", ".tiel."), LOAD, ["'.tiel'", "did you mean '.tile'?"]),
        (LOAD.replace("shared::cta", "shared::cat"), LOAD, ["did you mean '.shared::cta'?"]),
        (LOAD.replace("2d", "6d"), LOAD.replace("2d", "5d"), ["'.6d'", ".dim (one of .1d"]),
        (REDUCE.replace(".add.", ".mul."), REDUCE, ["'.mul'", ".redOp"]),
        # misordered and missing
        (
            "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes.tile",
            LOAD,
            [
                "out of order",
                "must come before '.mbarrier::complete_tx::bytes'",
                "cp.async.bulk.tensor.dim.dst.src{.load_mode}.completion_mechanism",
            ],
        ),
        (
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".cta_group::1.multicast::cluster",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".multicast::cluster.cta_group::1",
            ["'.multicast::cluster' (.multicast) is out of order"],
        ),
        (
            "cp.async.bulk.tensor.2d.shared::cta.global.tile",
            LOAD,
            ["missing .completion_mechanism"],
        ),
        (
            "cp.reduce.async.bulk.tensor.2d.global.shared::cta.bulk_group",
            REDUCE,
            ["missing .redOp"],
        ),
        (STORE + ".L2::cache_hint.L2::cache_hint", STORE + ".L2::cache_hint", ["appears twice"]),
        # direction rules
        (
            LOAD.replace("mbarrier::complete_tx::bytes", "bulk_group"),
            LOAD,
            ["'.bulk_group' completes stores", "'.mbarrier::complete_tx::bytes'"],
        ),
        (
            STORE.replace("bulk_group", "mbarrier::complete_tx::bytes"),
            STORE,
            ["completes loads", "completes with '.bulk_group'"],
        ),
        # multicast needs a .shared::cluster destination
        (
            LOAD + ".multicast::cluster",
            LOAD.replace("shared::cta", "shared::cluster") + ".multicast::cluster",
            [
                "needs the .shared::cluster destination",
                "did you mean 'cp.async.bulk.tensor.2d.shared::cluster.global",
            ],
        ),
        # gather4/scatter4 need rank 2
        (GATHER.replace("2d", "3d"), GATHER, ["needs rank 2", "got '.3d'"]),
        (
            "cp.async.bulk.tensor.1d.global.shared::cta.tile::scatter4.bulk_group",
            "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group",
            ["needs rank 2"],
        ),
        # gather4 belongs to loads, scatter4 to stores
        (
            STORE.replace(".tile.", ".tile::gather4."),
            STORE.replace(".tile.", ".tile::scatter4."),
            ["did you mean '.tile::scatter4'?"],
        ),
        # not a TMA opcode at all
        (
            LOAD.replace("tensor", "tensr"),
            LOAD,
            ["not a TMA tile opcode", "cp.async.bulk.tensor'?"],
        ),
    ],
)
def test_bulk_tensor_rejections(bad: str, good: str, fragments: list[str]) -> None:
    with pytest.raises(ContractError) as info:
        parse_bulk_tensor(bad)
    assert info.value.parameter == "opcode" and info.value.opcode == bad
    for fragment in fragments:
        assert fragment in str(info.value)
    assert parse_bulk_tensor(good).native_text == good


def test_errors_carry_the_call_location() -> None:
    where = Location("kernel.py", 12, 8)
    with pytest.raises(ContractError) as info:
        parse_bulk_tensor(LOAD.replace("tile", "tiel"), where)
    assert str(info.value).startswith(f"kernel.py:12:8: opcode '{LOAD.replace('tile', 'tiel')}'")
    assert (info.value.filename, info.value.lineno, info.value.col_offset) == ("kernel.py", 12, 8)
    with pytest.raises(ContractError, match=r"^kernel.py:12:8:"):
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.64x128b", where)


# -- tcgen05.cp ---------------------------------------------------------------------------------


def test_seed_tcgen05_cp() -> None:
    op = parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b")
    assert isinstance(op, Tcgen05CpOpcode)
    assert (op.cta_group, op.shape, op.rows, op.bits, op.words) == (1, "128x128b", 128, 128, 4)
    assert (op.multicast, op.decompress) == (None, None)
    assert op.requirements == ((8, 6), ["sm_100a"])
    assert op.native_text == "tcgen05.cp.cta_group::1.128x128b"


@pytest.mark.parametrize(
    "shape_and_multicast, rows, words",
    [
        ("128x256b", 128, 8),
        ("4x256b", 4, 8),
        ("128x128b", 128, 4),
        ("64x128b.warpx2::02_13", 64, 4),
        ("64x128b.warpx2::01_23", 64, 4),
        ("32x128b.warpx4", 32, 4),
    ],
)
@pytest.mark.parametrize("decompress", [None, "b4x16_p64", "b6x16_p32"])
def test_tcgen05_cp_shapes(
    shape_and_multicast: str, rows: int, words: int, decompress: str | None
) -> None:
    text = f"tcgen05.cp.cta_group::2.{shape_and_multicast}"
    if decompress:
        text += f".b8x16.{decompress}"
    op = parse_tcgen05_cp(text)
    assert (op.cta_group, op.rows, op.words, op.bits, op.decompress) == (
        2,
        rows,
        words,
        words * 32,
        decompress,
    )
    assert op.multicast == (
        shape_and_multicast.split(".", 1)[1] if "." in shape_and_multicast else None
    )


@pytest.mark.parametrize(
    "bad, good, fragments",
    [
        (
            "tcgen05.cp.cta_group::1.64x128b",
            "tcgen05.cp.cta_group::1.64x128b.warpx2::02_13",
            ["'.64x128b' needs the multicast qualifier '.warpx2::02_13' or '.warpx2::01_23'"],
        ),
        (
            "tcgen05.cp.cta_group::1.32x128b.warpx2::01_23",
            "tcgen05.cp.cta_group::1.32x128b.warpx4",
            ["'.32x128b' needs the multicast qualifier '.warpx4'"],
        ),
        (
            "tcgen05.cp.cta_group::1.128x128b.warpx4",
            "tcgen05.cp.cta_group::1.128x128b",
            ["takes no multicast qualifier", "belongs to '.32x128b'"],
        ),
        (
            "tcgen05.cp.cta_group::1.128x256b.b8x16",
            "tcgen05.cp.cta_group::1.128x256b.b8x16.b6x16_p32",
            ["both formats"],
        ),
        (
            "tcgen05.cp.cta_group::1.128x256b.b4x16_p64",
            "tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64",
            ["both formats"],
        ),
        (
            "tcgen05.cp.cta_group::1.128x256b.b4x16_p64.b8x16",
            "tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64",
            ["out of order"],
        ),
        (
            "tcgen05.cp.cta_group::3.128x128b",
            "tcgen05.cp.cta_group::2.128x128b",
            ["'.cta_group::3'", "did you mean '.cta_group::"],
        ),
        ("tcgen05.cp.128x128b", "tcgen05.cp.cta_group::1.128x128b", ["missing .cta_group"]),
        (
            "tcgen05.cp.cta_group::1.128x64b",
            "tcgen05.cp.cta_group::1.128x128b",
            ["'.128x64b'", "did you mean"],
        ),
        (
            "tcgen05.cp.cta_group::1.warpx4.32x128b",
            "tcgen05.cp.cta_group::1.32x128b.warpx4",
            ["missing .shape"],
        ),
        (
            "tcgen05.copy.cta_group::1.128x128b",
            "tcgen05.cp.cta_group::1.128x128b",
            ["not a tcgen05.cp opcode"],
        ),
    ],
)
def test_tcgen05_cp_rejections(bad: str, good: str, fragments: list[str]) -> None:
    with pytest.raises(ContractError) as info:
        parse_tcgen05_cp(bad)
    assert info.value.parameter == "opcode" and info.value.opcode == bad
    for fragment in fragments:
        assert fragment in str(info.value)
    assert parse_tcgen05_cp(good).native_text == good


# -- targets ------------------------------------------------------------------------------------


def test_check_target_accepts_and_rejects() -> None:
    check_target("sm_90", "sm_90a", "op")
    check_target("sm_90", "sm_100a", "op")
    check_target("sm_100a", "sm_103a", "op")  # same architecture family
    check_target(["sm_107a", "sm_107f"], "sm_107f", "op")
    with pytest.raises(ContractError) as info:
        check_target(
            "sm_100a", "sm_90a", "tcgen05.cp.cta_group::1.128x128b", Location("k.py", 1, 0)
        )
    message = str(info.value)
    assert message.startswith("k.py:1:0:") and info.value.parameter == "target"
    assert "requires target sm_100a" in message and "compiled for sm_90a" in message
    with pytest.raises(ContractError, match="sm_90 or newer.*compiled for sm_80"):
        check_target("sm_90", "sm_80", "op")
    with pytest.raises(ContractError, match="sm_107a .* or sm_107f"):
        check_target(["sm_107a", "sm_107f"], "sm_100a", "op")


def test_opcode_check_target_methods() -> None:
    parse_bulk_tensor(LOAD).check_target("sm_90a")
    parse_bulk_tensor(GATHER).check_target("sm_100a")
    with pytest.raises(ContractError, match="sm_100 or newer.*compiled for sm_90a"):
        parse_bulk_tensor(GATHER).check_target("sm_90a")
    tcgen05 = parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b")
    tcgen05.check_target("sm_100a")
    with pytest.raises(ContractError) as info:
        tcgen05.check_target("sm_90a")
    assert info.value.opcode == "tcgen05.cp.cta_group::1.128x128b"
