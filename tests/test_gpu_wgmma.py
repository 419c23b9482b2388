"""wgmma.mma_async on the H200: single products of every dtype form, with shared operands in each
swizzle mode and majorness (or A in registers), exact against NumPy with the accumulation types
of the PTX ISA (the inputs are small powers of two, so every sum is exact).

The CPU half (``test_wgmma_forms_assemble``) assembles the same kernels for sm_90a and reads the
HGMMA instructions in their SASS.
"""

import numpy as np
import pytest
from wgmma_kernels import CASES, run_case


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=str)
def test_wgmma_product_is_exact(case):
    _, _, result, expected = run_case(case)
    np.testing.assert_array_equal(result.astype(np.float64), expected)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_wgmma_forms_assemble(case):
    kernel, args, _, _ = run_case(case, launch=False)
    ck = kernel.compile(*args[:4], np.int32(1), target="sm_90a")
    shape = case.opcode.split(".")[4]
    n = shape[shape.index("n") + 1 : shape.index("k")]
    gmma = [line for line in ck.sass.splitlines() if "GMMA.64x" in line]
    assert gmma and all(f"GMMA.64x{n}x" in line for line in gmma), ck.sass[:2000]
    assert ck.metadata["local_bytes"] == 0
