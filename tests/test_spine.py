"""CPU acceptance of the spine: compile to cubins with no GPU, SASS checks, located errors."""

import pytest

import jittile
from jittile import CompileError, ContractError, T
from jittile.backend.toolchain import sass_opcodes


@jittile.kernel
def mbarrier_kernel(A: T.Tensor((256,), "float32"), Out: T.Tensor((256,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((2, 128), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(128))
    T.ptx.fence.proxy.async_()
    T.cuda.cta_sync()
    for g, r in T.grid(2, 1):
        buf[g, tid + r] = A[g * 128 + tid]
    T.ptx.mbarrier.arrive.shared.b64(mbar.ptr_to([0]))
    done = T.ptx.mbarrier.try_wait.parity.shared.b64(mbar.ptr_to([0]), T.uint32(0))
    while done == 0:
        done = T.ptx.mbarrier.try_wait.parity.shared.b64(mbar.ptr_to([0]), T.uint32(0))
    Out[tid] = buf[1, tid]


@jittile.kernel
def tmem_kernel(Out: T.Tensor((128,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    warp = T.cuda.warp_id()
    address = T.alloc_shared((1,), "uint32")
    if warp == 0:
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(
            T.address_of(address), T.uint32(32)
        )
    T.cuda.cta_sync()
    word = T.alloc_local((1,), "uint32")
    T.ptx["tcgen05.ld.sync.aligned.32x32b.x1.b32"](word[0], address[0])
    T.ptx.tcgen05.wait__ld.sync.aligned()
    Out[tid] = word[0]
    T.cuda.cta_sync()
    if warp == 0:
        T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(address[0], T.uint32(32))


def test_mbarrier_kernel_sass_has_syncs_ops():
    ck = mbarrier_kernel.compile(target="sm_90a")
    ops = sass_opcodes(ck.sass)
    assert any(op.startswith("SYNCS.EXCH") for op in ops), ops  # mbarrier.init
    assert any(op.startswith("SYNCS.ARRIVE") for op in ops), ops  # mbarrier.arrive
    assert any(op.startswith("SYNCS.PHASECHK") for op in ops), ops  # try_wait.parity
    assert ck.cubin[:4] == b"\x7fELF"
    assert ".target sm_90a" in ck.ptx and ck.metadata["registers"] > 0


def test_tcgen05_kernel_compiles_for_sm100a_and_is_rejected_for_sm90a():
    ck = tmem_kernel.compile(target="sm_100a")
    assert "LDTM" in "".join(sass_opcodes(ck.sass))
    with pytest.raises(ContractError, match="sm_100a") as info:
        tmem_kernel.compile(target="sm_90a")
    assert info.value.parameter == "target"
    assert info.value.lineno == tmem_kernel.source.firstlineno + 7  # the tcgen05.alloc line


def _kernel_from(tmp_path, body: str):
    import importlib.util

    path = tmp_path / "k.py"
    path.write_text(
        "import jittile\nfrom jittile import T\n\n@jittile.kernel\n"
        "def k(A: T.Tensor((16,), 'uint32')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n" + body
    )
    spec = importlib.util.spec_from_file_location("k_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k, str(path)


def test_misspelled_opcode_is_located_with_suggestion(tmp_path):
    k, path = _kernel_from(tmp_path, "    T.ptx.fence.proxy.asynk()\n")
    with pytest.raises(ContractError) as info:
        k.compile(target="sm_90a")
    assert str(info.value).startswith(f"{path}:7:4:")
    assert info.value.parameter == "opcode" and "async" in str(info.value)


def test_wrong_operand_count_is_located(tmp_path):
    k, path = _kernel_from(
        tmp_path,
        "    buf = T.alloc_shared((1,), 'uint64')\n"
        "    T.ptx.mbarrier.init.shared.b64(buf.ptr_to([0]))\n",
    )
    with pytest.raises(ContractError) as info:
        k.compile(target="sm_90a")
    assert info.value.lineno == 8 and "2 operands" in str(info.value).replace("two", "2")


@pytest.mark.parametrize("align,ok", [(48, False), (0, False), (64, True)])
def test_alloc_shared_align_must_be_power_of_two(tmp_path, align, ok):
    k, path = _kernel_from(
        tmp_path, f"    buf = T.alloc_shared((4,), 'uint32', align={align})\n    buf[0] = A[0]\n"
    )
    if ok:
        k.compile(target="sm_90a")
        return
    with pytest.raises(CompileError, match="power of two") as info:
        k.compile(target="sm_90a")
    assert info.value.lineno == 7 and str(info.value).startswith(path)
