"""examples/gemm_bf16.py on the H200 (torch tensors): square shapes and ragged ones whose M, N and
K are not multiples of the 128x256x64 tile (TMA fills the loads' out-of-bounds part with zeros and
clips the stores), against an fp32 torch product rounded once to bf16."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m, n, k", [(256, 512, 192), (1024, 1024, 1024), (200, 264, 136),
                                     (130, 8, 72)])
def test_gemm_matches_torch(m, n, k):
    torch = pytest.importorskip("torch")
    import gemm_bf16

    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_bf16.launch(a, b, c, torch.cuda.get_device_properties(0).multi_processor_count)
    expected = (a.float() @ b.float().T).to(torch.bfloat16).float()
    # the same fp32 sums in another order: at most one bf16 rounding step apart
    assert torch.isfinite(c.float()).all()
    error = (c.float() - expected).abs()
    assert (error <= expected.abs() * 2 ** -7 + 1e-3).all(), error.max().item()
