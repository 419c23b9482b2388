"""examples/attention_fwd.py on the CPU: interpreted within bf16 tolerance of a float32 NumPy
reference (ragged length, causal and not, grouped-query heads, the log-sum-exp), its argument
checks, and its sm_90a builds at D=64, 128 and 256 (setmaxnreg in the SASS, no local memory, no
ptxas advisory, the HGMMA forms of each tile shape)."""

import re
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
    "head_dim, causal, heads, kv_heads, seq, options",
    [
        (64, False, 2, 1, 200, {}),  # 192-row query blocks (three consumers): the second ragged
        (64, True, 1, 1, 200, {}),
        (128, True, 2, 1, 140, {}),
        (64, True, 1, 1, 520, {}),  # 6 key blocks of 96 rows: D=64's 4-stage ring wraps around
        (128, False, 1, 1, 400, {}),  # 4 key blocks of 128 rows: the ring wraps, O's own buffer
        (128, False, 1, 1, 400, {"key_rows": 176}),  # 3 key blocks of 176: O in Q's buffer
        (128, True, 1, 1, 300, {"key_rows": 176}),  # rows of block 1 wholly masked
        (256, False, 1, 1, 100, {}),  # 2 key blocks of 80 rows, the second ragged
        (256, True, 2, 1, 200, {}),  # 3 key blocks: D=256's 2-stage ring wraps around
        (64, True, 1, 1, 300, {"consumers": 2, "key_rows": 128}),  # two consumers take turns
        (128, False, 2, 1, 300, {"turns": False}),
        # persistent CTAs taking several tiles each: the ring, Q's buffer and the turns carry on
        # from tile to tile; 5 row blocks of 192 (an odd count: the middle one is its own pair)
        (64, True, 2, 1, 900, {"ctas": 1}),
        # O staged in Q's buffer before the next Q loads
        (128, False, 3, 1, 300, {"ctas": 2, "key_rows": 176}),
        (128, False, 3, 1, 300, {"ctas": 2}),
        (256, True, 2, 2, 300, {"ctas": 3}),  # no turns; 3 CTAs over 4 items
    ],
)
def test_interpreted_attention_matches_float32(head_dim, causal, heads, kv_heads, seq, options):
    q, k, v = _inputs(heads, kv_heads, seq, head_dim)
    o, lse = attn.attention(q, k, v, causal=causal, return_lse=True, **options)
    expected, expected_lse = attn.reference(q, k, v, causal=causal)
    assert o.dtype == ml_dtypes.bfloat16 and o.shape == q.shape
    np.testing.assert_allclose(o.astype(np.float32), expected, atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_a_maximum_that_moves_past_the_threshold_rescales_o(causal):
    """Keys past row 200 score eight times higher: their rows' maxima move by more than
    RESCALE_LOG2 in a later key block, so O and the sums are rescaled there (and not for the
    blocks whose scores stay under the threshold)."""
    q, k, v = _inputs(1, 1, 400, 128, seed=5)
    k[:, :, 200:] = (k[:, :, 200:].astype(np.float32) * 8).astype(ml_dtypes.bfloat16)
    o, lse = attn.attention(q, k, v, causal=causal, return_lse=True)
    expected, expected_lse = attn.reference(q, k, v, causal=causal)
    np.testing.assert_allclose(o.astype(np.float32), expected, atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("rescale_log2", [attn.RESCALE_LOG2, 0.0])
def test_interpreted_error_stays_near_the_bf16_rounding_floor(rescale_log2):
    """Four key blocks of 176 rows: the error against float32 stays within 1.15x that of
    rounding the exact result to bf16 (the floor any bf16 output has), with the default
    rescaling threshold and with O rescaled at every move. A stale row maximum (a threshold of
    8, FlashAttention-4's) made it 1.32x here, and up to 1.5x cuDNN's on the H200 (run 97)."""
    q, k, v = _inputs(2, 2, 704, 128)
    o = attn.attention(q, k, v, key_rows=176, rescale_log2=rescale_log2)
    expected, _ = attn.reference(q, k, v)
    floor = np.abs(expected.astype(ml_dtypes.bfloat16).astype(np.float32) - expected).max()
    assert np.abs(o.astype(np.float32) - expected).max() <= 1.15 * floor


@pytest.mark.parametrize(
    "row_blocks, heads, ctas",
    [(5, 2, 1), (4, 3, 2), (1, 1, 1), (7, 1, 3), (32, 4, 132)],
)
def test_persistent_ctas_take_every_tile_once_in_balanced_pairs(row_blocks, heads, ctas):
    """tile_of's schedule, as the kernel walks it (2 * ceil(items / ctas) halves per CTA, the
    missing halves skipped): every (row block, head, batch) exactly once, each CTA's pair the
    longest and shortest of a head, so every CTA has about the same causal work."""
    batches = 2
    pairs = (row_blocks + 1) // 2
    items = pairs * heads * batches
    seen = []
    for first in range(ctas):
        work = 0
        for j in range(2 * -(-(items - first) // ctas)):
            row_block, head, batch, exists = attn.tile_of.pyfunc(
                j, first, ctas, pairs, row_blocks, heads
            )
            if exists:
                seen.append((row_block, head, batch))
                work += row_block + 1
        if items % ctas == 0 and row_blocks % 2 == 0:
            assert work == items // ctas * (row_blocks + 1)  # causal key blocks, all CTAs alike
    expected = [(r, h, b) for r in range(row_blocks) for h in range(heads) for b in range(batches)]
    assert sorted(seen) == sorted(expected)


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
        (((2, 64, 64), (2, 64, 64)), r"must be \(B, H, S, D\) tensors, got \(2, 64, 64\)"),
    ],
)
def test_unsupported_shapes_are_refused(shapes, message):
    q, k = (np.zeros(s, ml_dtypes.bfloat16) for s in shapes)
    with pytest.raises(ValueError, match=message):
        attn.attention(q, k, k)


@pytest.mark.parametrize("rescale_log2", [-1.0, float("nan")])
def test_rescaling_thresholds_below_zero_are_refused(rescale_log2):
    q, k, v = _inputs(1, 1, 64, 64)
    with pytest.raises(ValueError, match="rescale_log2 must be a number >= 0"):
        attn.attention(q, k, v, rescale_log2=rescale_log2)


@pytest.mark.parametrize("head_dim, key_rows", [(64, 176), (128, 80), (256, 128)])
def test_key_blocks_not_built_are_refused(head_dim, key_rows):
    q = np.zeros((1, 1, 64, head_dim), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=f"key_rows={key_rows} is not built"):
        attn.attention(q, q, q, key_rows=key_rows)


@pytest.mark.parametrize("head_dim, consumers", [(64, 4), (128, 3), (256, 3)])
def test_consumer_counts_not_built_are_refused(head_dim, consumers):
    q = np.zeros((1, 1, 64, head_dim), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=f"consumers={consumers} is not built"):
        attn.attention(q, q, q, consumers=consumers)


@pytest.mark.parametrize(
    "head_dim, causal, key_rows",
    [(64, False, 128), (64, True, 96), (128, False, 128), (128, True, 128), (256, True, 80)],
)
def test_default_key_blocks(head_dim, causal, key_rows):
    """FlashAttention-3's blocks but at D=128 without the causal mask, where 128 rows ran faster
    than its 176 on the H200 at S <= 4096 (run 104)."""
    assert attn.key_block(head_dim, causal, None) == key_rows
    assert attn.key_block(128, causal, 176) == 176  # the other block, when asked for


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_the_sm90a_build_sets_register_budgets_without_spilling(head_dim, causal):
    """The default builds: Q K^T with B from shared memory, head_dim / 16 k-steps of
    m64n{BN}k16; P V with A from registers, FlashAttention-3's one n=D MMA per 16 key rows,
    issued in the loop and once more for the last block; the budgets of the consumer count."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ptxas advisory (serialized wgmma, setmaxnreg ignored)
        ck = attn.compiled(head_dim=head_dim, causal=causal, target="sm_90a")
    assert ck.metadata["local_bytes"] == 0
    assert "STL" not in ck.sass and "LDL" not in ck.sass
    assert ck.metadata["shared_bytes"] <= 232448  # the H200's opt-in shared memory per block
    assert ck.metadata["toolchain"]["linker"].startswith("ptxas")
    producer, consumer = attn.BUDGETS[attn.CONSUMERS[head_dim][0]]
    assert f"USETMAXREG.TRY_ALLOC.CTAPOOL UP0, {consumer:#x}" in ck.sass
    assert f"USETMAXREG.DEALLOC.CTAPOOL {producer:#x}" in ck.sass
    rows = attn.key_block(head_dim, causal)
    forms = {}
    for form, count in ((f"64x{rows}x16", head_dim // 16), (f"64x{head_dim}x16", 2 * rows // 16)):
        forms[f"HGMMA.{form}.F32.BF16"] = forms.get(f"HGMMA.{form}.F32.BF16", 0) + count
    for form, count in forms.items():
        assert ck.sass.count(form) == count, form
    assert ck.sass.count("HGMMA.") == sum(forms.values())  # no other MMA
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ck.sass  # the softmax overlaps the in-flight P V
    # the consumers' turns: named barriers of two warpgroups (0x100 threads), where they take them
    turns = re.search(r"BAR\.(SYNC|ARV)\S* \S+, 0x100", ck.sass) is not None
    assert turns == attn.TURNS[head_dim]


@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_the_softmax_runs_under_this_warpgroups_p_v(head_dim, causal):
    """FlashAttention-3's intra-warpgroup overlap in the SASS: in the loop, every exp2 of the
    softmax comes after the wait for Q K^T (gsb0 0x1) and before the wait for this warpgroup's
    own P V (gsb0 0x0), which ptxas would otherwise hoist above them (``block_boundary``)."""
    sass = attn.compiled(head_dim=head_dim, causal=causal).sass
    lines = sass.splitlines()
    qk_wait = next(i for i, line in enumerate(lines) if "DEPBAR.LE gsb0, 0x1" in line)
    pv_wait = next(
        i for i, line in enumerate(lines) if i > qk_wait and "DEPBAR.LE gsb0, 0x0" in line
    )
    exp2s = [i for i, line in enumerate(lines) if "MUFU.EX2" in line]
    inside = [i for i in exp2s if qk_wait < i < pv_wait]
    assert len(inside) >= attn.key_block(head_dim, causal) // 2  # the block's scores, 2 rows
    assert not [i for i in exp2s if i > pv_wait]
