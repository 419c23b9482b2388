"""Shared TMA operands indexed by a runtime integer (a pipeline stage, ``buf[t % 2]``): the origin
moves by index * step at run time, and the step must keep every origin legal. CPU only."""
from __future__ import annotations

from pathlib import Path

import pytest
from lines import line_of

import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.errors import ContractError
from jittile.layout import S, TileLayout, swizzle

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
HERE = Path(__file__).resolve()


def _line(marker: str) -> int:
    return line_of(HERE, marker)


# float32 columns of a box row: the swizzle span (32/64/128 B), 32 when unswizzled.
COLUMNS = {0: 32, 1: 8, 2: 16, 3: 32}


def staged_load(stages: int, rows: int, sw: int):
    """Loads (rows, COLUMNS[sw]) float32 boxes into buf[t % stages] for t = 0..3."""
    cols = COLUMNS[sw]
    layout = swizzle(sw, (stages, rows, cols), "float32") if sw else "default"
    align = 1024 if sw else 128

    @jittile.kernel
    def staged(A: T.Tensor((64, 32), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        buf = T.alloc_shared((stages, rows, cols), "float32", layout=layout, align=align)
        mbar = T.alloc_shared((stages,), "uint64")
        for t in range(4):
            if T.cuda.thread_idx("x") == 0:
                T.cuda.tile.apply(T.ptx[LOAD], buf[t % stages], A, box=(rows, cols),  # staged
                                  coords=(t * rows, 0), swizzle=sw, mbar=mbar.ptr_to([t % stages]))

    return staged


STAGED_LINE = _line("# staged")


@pytest.mark.parametrize("stages, rows, sw, step", [(2, 8, 0, 1024), (3, 1, 0, 128),
                                                   (2, 8, 3, 1024), (2, 8, 2, 512),
                                                   (2, 8, 1, 256)])
def test_a_runtime_stage_moves_the_shared_origin(stages, rows, sw, step):
    ck = staged_load(stages, rows, sw).compile(target="sm_90a")
    (site,) = ck.plan
    (instruction,) = site["instructions"]
    assert instruction["shared_offset"] == 0
    shared = instruction.operand("shared")
    assert str(shared.offset) == f"(t % stages) * {step}"  # as written
    assert [str(c) for c in instruction.coords] == ["0", "t * rows"]
    assert f"shared address &buf[+((t % stages) * {step}) B]" in str(site)
    assert f"* {step}, __jt_tmap0" in ck.lowered_source
    assert ck.sass.count("UTMALDG.2D") >= 1  # ptxas may unroll the four-trip loop


@pytest.mark.parametrize("rows, sw, need, step", [(4, 1, 256, 128), (4, 2, 512, 256),
                                                  (4, 3, 1024, 512)])
def test_a_runtime_stage_step_must_keep_origins_aligned(rows, sw, need, step):
    # Four rows of one swizzle span are half the swizzle period (eight rows): each stage would
    # start mid-period, where the statically undone swizzle no longer applies.
    with pytest.raises(ContractError, match=f"steps the origin by {step} bytes; every origin "
                                            f"must be {need}-byte aligned") as info:
        staged_load(2, rows, sw).compile(target="sm_90a")
    assert (info.value.lineno, info.value.opcode, info.value.parameter) == (
        STAGED_LINE, LOAD, "operands")


def test_an_unaligned_unswizzled_step_is_refused():
    @jittile.kernel
    def narrow(A: T.Tensor((64, 16), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        buf = T.alloc_shared((2, 1, 16), "float32", align=128)  # 64-byte stages
        mbar = T.alloc_shared((1,), "uint64")
        for t in range(2):
            T.cuda.tile.apply(T.ptx[LOAD], buf[t % 2], A, box=(1, 16), coords=(t, 0),  # narrow
                              mbar=mbar.ptr_to([0]))

    with pytest.raises(ContractError, match="steps the origin by 64 bytes") as info:
        narrow.compile(target="sm_90a")
    assert info.value.lineno == _line("# narrow") and info.value.parameter == "operands"


def test_runtime_slice_bounds_stay_compile_time():
    @jittile.kernel
    def sliced(A: T.Tensor((64, 32), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        buf = T.alloc_shared((16, 32), "float32", align=128)
        mbar = T.alloc_shared((1,), "uint64")
        for t in range(2):
            T.cuda.tile.apply(T.ptx[LOAD], buf[t * 8:t * 8 + 8, :], A, box=(8, 32),  # sliced
                              coords=(0, 0), mbar=mbar.ptr_to([0]))

    with pytest.raises(ContractError, match="region bounds must be compile-time") as info:
        sliced.compile(target="sm_90a")
    assert info.value.lineno == _line("# sliced") and info.value.parameter == "operand 0"


def test_tcgen05_cp_shared_indices_stay_compile_time():
    layout = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])

    @jittile.kernel
    def to_tmem(A: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        shared = T.alloc_shared((2, 128, 4), "uint32", align=128)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor((128, 4), "uint32", scope="tmem",
                                                             layout=layout)])
        stage = T.cuda.thread_idx("x") % 2
        T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.128x128b"], mem, shared[stage])  # cp

    with pytest.raises(ContractError, match="runtime value 'stage'") as info:
        to_tmem.compile(target="sm_100a")
    assert info.value.lineno == _line("# cp") and info.value.parameter == "operand 1"
