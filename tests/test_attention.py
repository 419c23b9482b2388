"""examples/attention_fwd.py on the CPU: interpreted within bf16 tolerance of a float32 NumPy
reference (ragged length, causal and not, grouped-query heads, the log-sum-exp), its argument
checks, and its sm_90a builds at D=64, 128 and 256 (setmaxnreg in the SASS, no local memory, no
ptxas advisory, the HGMMA forms of each tile shape)."""

import warnings

import attention_fwd as attn
import ml_dtypes
import numpy as np
import pytest


def _inputs(heads: int, kv_heads: int, seq: int, head_dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((1, h, seq, head_dim)).astype(ml_dtypes.bfloat16)
        for h in (heads, kv_heads, kv_heads)
    ]


@pytest.mark.parametrize(
    "head_dim, causal, heads, kv_heads, seq, key_rows",
    [
        (64, False, 2, 1, 200, None),
        (64, True, 1, 1, 200, None),
        (128, True, 2, 1, 140, None),
        (64, True, 1, 1, 520, None),  # 5 key blocks: D=64's 4-stage ring wraps around
        (128, False, 1, 1, 400, None),  # 3 key blocks of 176 rows: the ring wraps, O in Q's buffer
        (128, True, 1, 1, 300, 176),  # causal 176-row blocks: rows of block 1 wholly masked
        (256, False, 1, 1, 100, None),  # 2 key blocks of 80 rows, the second ragged
        (256, True, 2, 1, 200, None),  # 3 key blocks: D=256's 2-stage ring wraps around
    ],
)
def test_interpreted_attention_matches_float32(head_dim, causal, heads, kv_heads, seq, key_rows):
    q, k, v = _inputs(heads, kv_heads, seq, head_dim)
    o, lse = attn.attention(q, k, v, causal=causal, return_lse=True, key_rows=key_rows)
    expected, expected_lse = attn.reference(q, k, v, causal=causal)
    assert o.dtype == ml_dtypes.bfloat16 and o.shape == q.shape
    np.testing.assert_allclose(o.astype(np.float32), expected, atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-4)


def test_sm_scale_is_applied():
    q, k, v = _inputs(1, 1, 64, 64, seed=3)
    o = attn.attention(q, k, v, sm_scale=0.5)
    expected, _ = attn.reference(q, k, v, sm_scale=0.5)
    np.testing.assert_allclose(o.astype(np.float32), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 2, 64, 96), (1, 2, 64, 96)), "head dimension 96"),
        (((1, 2, 64, 512), (1, 2, 64, 512)), "head dimension 512"),
        (((1, 3, 64, 64), (1, 2, 64, 64)), "not a multiple"),
        (((1, 2, 64, 64), (1, 2, 32, 64)), "must be"),
    ],
)
def test_unsupported_shapes_are_refused(shapes, message):
    q, k = (np.zeros(s, ml_dtypes.bfloat16) for s in shapes)
    with pytest.raises(ValueError, match=message):
        attn.attention(q, k, k)


@pytest.mark.parametrize("head_dim, key_rows", [(64, 176), (128, 80), (256, 128)])
def test_key_blocks_not_built_are_refused(head_dim, key_rows):
    q = np.zeros((1, 1, 64, head_dim), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=f"key_rows={key_rows} is not built"):
        attn.attention(q, q, q, key_rows=key_rows)


@pytest.mark.parametrize("head_dim, causal, key_rows", [(128, False, 176), (128, True, 128)])
def test_default_key_blocks_are_flash_attention_3s(head_dim, causal, key_rows):
    assert attn.key_block(head_dim, causal, None) == key_rows
    assert attn.key_block(head_dim, causal, 128) == 128  # the other block, when asked for


@pytest.mark.parametrize(
    "head_dim, causal, hgmma_forms",
    [
        # Q K^T: B from shared, head_dim / 16 k-steps. P V: A from registers, FlashAttention-3's
        # one n=D MMA, issued in the loop and once more for the last block, one per 16 key rows.
        # D=64: a 128-row key block (8 k-steps); D=128 causal: the same n=128 form as Q K^T;
        # D=128 non-causal: FlashAttention-3's 128x176 tiles (11 k-steps); D=256: its 128x80
        # tiles (5 k-steps)
        (64, True, {"HGMMA.64x128x16.F32.BF16": 4, "HGMMA.64x64x16.F32.BF16": 2 * 8}),
        (128, True, {"HGMMA.64x128x16.F32.BF16": 8 + 2 * 8}),
        (128, False, {"HGMMA.64x176x16.F32.BF16": 8, "HGMMA.64x128x16.F32.BF16": 2 * 11}),
        (256, True, {"HGMMA.64x80x16.F32.BF16": 16, "HGMMA.64x256x16.F32.BF16": 2 * 5}),
    ],
)
def test_the_sm90a_build_sets_register_budgets_without_spilling(head_dim, causal, hgmma_forms):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ptxas advisory (serialized wgmma, setmaxnreg ignored)
        ck = attn.compiled(head_dim=head_dim, causal=causal, target="sm_90a")
    assert ck.metadata["local_bytes"] == 0
    assert "STL" not in ck.sass and "LDL" not in ck.sass
    assert ck.metadata["shared_bytes"] <= 232448  # the H200's opt-in shared memory per block
    assert ck.metadata["toolchain"]["linker"].startswith("ptxas")
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0" in ck.sass  # consumers: 240
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x18" in ck.sass  # producer: 24
    for form, count in hgmma_forms.items():
        assert ck.sass.count(form) == count, form
    assert ck.sass.count("HGMMA.") == sum(hgmma_forms.values())  # no other MMA
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ck.sass  # the softmax overlaps the in-flight P V
