"""GPU tests: float element loads and stores (float16, bfloat16, float8_e4m3fn, float8_e5m2) on
the H200 leave the bytes ``kernel.interpret`` leaves, for torch tensors and NumPy (ml_dtypes)
arrays, and those of the PTX ISA's ``cvt`` (tests/float_kernels.py): ties, overflow and
``.satfinite``, NaN, subnormals and signed zeros, every bit pattern loaded.

Run on the H200 with ``pytest -m gpu tests/test_gpu_floats.py``. Without a device the NumPy runs
are interpreted against the same reference and the torch ones skip.
"""

import numpy as np
import pytest
from float_kernels import (
    FORMATS,
    reference_load,
    reference_store,
    roundtrip_kernel,
    special_values,
    storage,
)

pytestmark = pytest.mark.gpu


def _inputs(name: str):
    """(values, bits, stored, loaded, tensor, n): every pattern of the format loaded, the special
    values stored; the outputs poisoned."""
    values = special_values(name)
    bits = np.arange(1 << (8 if name.startswith("float8") else 16), dtype=storage(name))
    n = max(len(values), len(bits))
    values, bits = np.resize(values, n), np.resize(bits, n)
    stored = np.full((n, 3), 0x55, storage(name))
    loaded = np.full((n, 3), np.nan, np.float32)
    tensor = np.full(n, 0x55, storage(name)).view(FORMATS[name])
    return values, bits, stored, loaded, tensor, n


def _torch(array: np.ndarray, name: str | None = None):
    import torch

    raw = {1: np.uint8, 2: np.int16}  # the bits in a type torch.from_numpy takes
    tensor = torch.from_numpy(
        np.ascontiguousarray(array.view(raw[array.itemsize]) if name else array)
    )
    if name:
        tensor = tensor.view(getattr(torch, name))
    return tensor.cuda()


def _host(tensor, like: np.ndarray) -> np.ndarray:
    import torch

    return tensor.cpu().contiguous().view(torch.uint8).numpy().view(like.dtype).reshape(like.shape)


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("arrays", ["numpy", "torch"])
def test_float_elements_on_the_gpu_are_the_interpreters_bytes(name, arrays):
    values, bits, stored, loaded, tensor, n = _inputs(name)
    kernel = roundtrip_kernel(name)
    interpreted = [a.copy() for a in (values, bits, stored, loaded, tensor)]
    kernel.interpret(*interpreted, n)
    if arrays == "numpy":
        kernel(values, bits, stored, loaded, tensor, n)
        results = [stored, loaded, tensor]
    else:
        pytest.importorskip("torch")
        import torch

        # the float tensors from torch (the bit arrays stay NumPy: torch.uint16 is barely a type)
        loaded_dev, tensor_dev = _torch(loaded), _torch(tensor, name)
        kernel(_torch(values), bits, stored, loaded_dev, tensor_dev, n)
        torch.cuda.synchronize()
        results = [stored, _host(loaded_dev, loaded), _host(tensor_dev, tensor)]
    for result, expected in zip(results, interpreted[2:]):
        different = np.flatnonzero(result.view(np.uint8) != expected.view(np.uint8))
        assert not len(different), f"{name}: GPU and interpreter differ at bytes {different[:8]}"
    expected_bits = reference_store(values, name)
    assert all((results[0][:, c] == expected_bits).all() for c in range(3))
    assert all(
        results[1][:, c].view(np.uint32).tolist()
        == reference_load(bits, name).view(np.uint32).tolist()
        for c in range(3)
    )
