"""GPU tests: bfloat16 and float8 arrays from torch (directly, through DLPack, from the CPU) launch,
and TMA moves their bytes exactly; a changed array re-encodes its TensorMap (issue #13).

Run on the H200 with ``pytest -m gpu tests/test_gpu_torch_dtypes.py``; skipped without a device.
"""

import pytest

import jittile
from jittile import T

pytestmark = pytest.mark.gpu

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
BOX, COORDS = (8, 64), (16, 64)  # rows 16..23, columns 64..127 of a (32, 192) array


@jittile.kernel
def tma_copy_box(A, Out, DTYPE: T.constexpr, NBYTES: T.constexpr):
    """TMA-load one (8, 64) box of A into shared memory, TMA-store it to the same place in Out."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((8, 64), DTYPE, align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NBYTES))
        T.cuda.tile.apply(T.ptx[LOAD], buf, A, box=(8, 64), coords=(16, 64), mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if tid == 0:
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.tile.apply(T.ptx[STORE], Out, buf, box=(8, 64), coords=(16, 64))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


class _DLPackOnly:
    """A CUDA array known only through DLPack (as from a library without a torch or CuPy path)."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


def _random_bits(torch, dtype, generator):
    """A (32, 192) tensor of ``dtype`` holding random bytes (every bit pattern, NaNs too)."""
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (32, 192 * size), dtype=torch.uint8, generator=generator)
    return raw.view(dtype)


def _expected(a, poison):
    region = (slice(COORDS[0], COORDS[0] + BOX[0]), slice(COORDS[1], COORDS[1] + BOX[1]))
    expected = poison.clone()
    expected[region] = a[region]
    return expected


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("route", ["cuda", "dlpack", "cpu"])
def test_torch_low_precision_tensors_copy_bit_exactly(name, route):
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, name)
    generator = torch.Generator().manual_seed(13)
    a, poison = _random_bits(torch, dtype, generator), _random_bits(torch, dtype, generator)
    expected = _expected(a, poison)
    nbytes = BOX[0] * BOX[1] * a.element_size()
    if route == "cpu":  # copied to the device and back, like NumPy
        out = poison.clone()
        tma_copy_box(a, out, name, nbytes)
    else:
        dev_a, out = a.cuda(), poison.cuda()
        tma_copy_box(
            dev_a if route == "cuda" else _DLPackOnly(dev_a),
            out if route == "cuda" else _DLPackOnly(out),
            name,
            nbytes,
        )
        torch.cuda.synchronize()
        out = out.cpu()
    assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))


def test_a_new_array_re_encodes_its_tensormap():
    """Launches alternate between two bfloat16 sources and two outputs: each launch must read and
    write the arrays it was given (a TensorMap kept for another pointer would not)."""
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(14)
    sources = [_random_bits(torch, torch.bfloat16, generator).cuda() for _ in range(2)]
    poison = _random_bits(torch, torch.bfloat16, generator)
    outs = [poison.cuda() for _ in range(2)]
    for step in range(4):
        src, out = sources[step % 2], outs[step // 2 % 2]
        out.copy_(poison)
        tma_copy_box(src, out, "bfloat16", BOX[0] * BOX[1] * 2)
        torch.cuda.synchronize()
        expected = _expected(src.cpu(), poison)
        assert torch.equal(out.cpu().view(torch.uint8), expected.view(torch.uint8)), step
