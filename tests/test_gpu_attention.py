"""examples/attention_fwd.py on the H200 (torch bf16 tensors) against a float32 reference: head
dimensions 64, 128 and 256, ragged lengths, causal and not, grouped-query heads, the log-sum-exp; its
error within twice that of torch SDPA's own bf16 kernel (both against the same float32 reference)."""

import math

import attention_fwd as attn
import pytest

pytestmark = pytest.mark.gpu


def _reference(torch, q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    k, v = (x.float().repeat_interleave(group, dim=1) for x in (k, v))
    scores = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[2]
        scores = scores.masked_fill(
            torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


@pytest.mark.parametrize(
    "batch, heads, kv_heads, seq, head_dim",
    [
        (2, 4, 4, 512, 128),
        (1, 4, 4, 1000, 128),
        (2, 4, 4, 384, 64),
        (1, 8, 2, 333, 64),
        (1, 8, 2, 777, 128),
        (1, 2, 2, 64, 64),
        (1, 2, 2, 4096, 128),
        (1, 2, 1, 4000, 64),
        (2, 4, 4, 512, 256),
        (1, 4, 4, 1000, 256),
        (1, 8, 2, 777, 256),
        (1, 2, 1, 4000, 256),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_float32(batch, heads, kv_heads, seq, head_dim, causal):
    _check_against_float32(batch, heads, kv_heads, seq, head_dim, causal)


@pytest.mark.parametrize(
    "head_dim, causal, options",
    [
        (head_dim, causal, options)
        for head_dim in attn.HEAD_DIMS
        for causal in (False, True)
        for options in attn.other_builds(head_dim, causal)
    ],
)
def test_the_other_builds_match_float32(head_dim, causal, options):
    """The builds bench/attention.py times beside the default, on a ragged length with grouped
    heads."""
    _check_against_float32(1, 8, 2, 1000, head_dim, causal, **options)


def _check_against_float32(batch, heads, kv_heads, seq, head_dim, causal, **options):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seq + head_dim)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (
        torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
        for _ in range(2)
    )
    o, lse = attn.attention(q, k, v, causal=causal, return_lse=True, **options)
    expected, expected_lse = _reference(torch, q, k, v, causal)
    error = (o.float() - expected).abs().max().item()
    group = heads // kv_heads
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), is_causal=causal
    )
    sdpa_error = (sdpa.float() - expected).abs().max().item()
    assert torch.isfinite(o.float()).all()
    assert error <= max(2 * sdpa_error, 8e-3), (error, sdpa_error)
    assert (lse - expected_lse).abs().max().item() <= 1e-3


@pytest.mark.parametrize("head_dim", attn.HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ctas", [1, 7])
def test_few_persistent_ctas_take_every_tile(head_dim, causal, ctas):
    """The persistent grid cut to a few CTAs, each taking many tiles in turn (the ring, Q's
    buffer, the O buffer and the consumers' turns carried from tile to tile)."""
    _check_against_float32(2, 4, 2, 1500, head_dim, causal, ctas=ctas)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_heads_as_a_transposed_view_give_the_contiguous_result(head_dim):
    """q, k, v as a model makes them: (B, S, H, D) projections viewed as (B, H, S, D), strided;
    the output as of contiguous copies, bit for bit, and o laid out as q."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(head_dim)
    batch, seq, heads, kv_heads = 2, 700, 8, 2
    q = torch.randn(batch, seq, heads, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (
        torch.randn(batch, seq, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16)
        for _ in range(2)
    )
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    o = attn.attention(q, k, v, causal=True)
    dense = attn.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    assert torch.equal(o, dense)
