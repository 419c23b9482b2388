"""examples/gemm_bf16.py and examples/gemm_fp8.py on the H200 (torch tensors): tuned launches over
square, skinny and ragged shapes, every kind of configuration forced once (64-row tiles, split-K,
swap-AB, both), against an fp32 torch product; and the tuning reused from the disk cache by a
fresh process. Kept under a minute on the H200: few tuned shapes (each tunes its pruned
candidates), every other config kind forced once on one small shape."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(EXAMPLES.parent / "bench"))

pytestmark = pytest.mark.gpu

SHAPES = [(1024, 1024, 1024), (200, 264, 136), (1, 4096, 4096), (300, 2048, 3000)]
FORCED = [
    dict(BM=64, BN=128, SPLIT=1, SWAP=False),
    dict(BM=64, BN=256, SPLIT=4, SWAP=False),
    dict(BM=128, BN=128, SPLIT=2, SWAP=False),
    dict(BM=128, BN=256, SPLIT=2, SWAP=False),  # setmaxnreg budgets
    dict(BM=128, BN=256, SPLIT=8, SWAP=False),
    dict(BM=128, BN=16, SPLIT=1, SWAP=True),
    dict(BM=128, BN=32, SPLIT=8, SWAP=True),
    dict(BM=128, BN=256, SPLIT=1, SWAP=False, CLUSTER=2),
    dict(BM=128, BN=128, SPLIT=1, SWAP=False, CLUSTER=2),
    dict(BM=64, BN=256, SPLIT=1, SWAP=False, CLUSTER=2),
    # shape-fitted tiles: three consumers; widths past the last 64-column part
    dict(BM=192, BN=176, SPLIT=1, SWAP=False),
    dict(BM=192, BN=192, SPLIT=1, SWAP=False),
    dict(BM=128, BN=208, SPLIT=1, SWAP=False),
    # two consumers of two 64-row fragments each, in setmaxnreg budgets
    dict(BM=256, BN=152, SPLIT=1, SWAP=False),
    # fitted tiles in clusters of two: B's rows multicast in shares cut at 8-row periods
    dict(BM=256, BN=152, SPLIT=1, SWAP=False, CLUSTER=2),
    dict(BM=192, BN=176, SPLIT=1, SWAP=False, CLUSTER=2),
    dict(BM=128, BN=216, SPLIT=1, SWAP=False, CLUSTER=2),
]


def _bf16(torch, m, n, k):
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    return a, b, torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)


def _check_bf16(torch, a, b, c, scale=1.0, ulps=1):
    expected = (scale * (a.float() @ b.float().T)).to(torch.bfloat16).float()
    assert torch.isfinite(c.float()).all()
    # the same fp32 sums in another order: ``ulps`` bf16 rounding steps apart at most
    error = (c.float() - expected).abs()
    limit = expected.abs() * ulps * 2**-7 + 1e-3 * expected.abs().max()
    assert (error <= limit).all(), error.max().item()


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_tuned_bf16_matches_torch(m, n, k):
    torch = pytest.importorskip("torch")
    import gemm_bf16

    a, b, c = _bf16(torch, m, n, k)
    gemm_bf16.launch(a, b, c, torch.cuda.get_device_properties(0).multi_processor_count)
    _check_bf16(torch, a, b, c)


@pytest.mark.parametrize(
    "kind, m, n, k, transposed, inside",
    [
        ("bf16", 300, 517, 203, False, False),  # K, N off the 16-byte rows
        ("bf16", 64, 1000, 4096, True, False),  # B a transposed view
        ("bf16", 130, 264, 136, False, True),  # C inside a wider tensor
        ("fp8", 100, 300, 100, True, True),
    ],
)
def test_launch_stages_what_tma_cannot_describe(kind, m, n, k, transposed, inside):
    torch = pytest.importorskip("torch")
    import gemm_bf16
    import gemm_fp8

    a, b, _ = _bf16(torch, m, n, k)
    if kind == "fp8":
        a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    if transposed:
        b = b.T.contiguous().T
    wide = torch.full((m, n + 3), 7.0, device="cuda", dtype=torch.bfloat16)
    c = wide[:, 1 : n + 1] if inside else torch.full((m, n), float("nan"), device="cuda")
    c = c.to(torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if kind == "bf16":
        gemm_bf16.launch(a, b, c, sms)
    else:
        gemm_fp8.launch(a, b, c, 1.0, 1.0, sms)
    _check_bf16(torch, a, b, c)
    if inside:
        assert (wide[:, [0, n + 1, n + 2]] == 7.0).all()


@pytest.mark.parametrize("values", FORCED, ids=lambda v: "-".join(f"{k}{v[k]}" for k in v))
def test_each_kind_of_bf16_config_matches_torch(values):
    torch = pytest.importorskip("torch")
    import gemm_bf16

    m, n, k = (24, 1000, 1096) if values["SWAP"] else (200, 1032, 1096)
    if values.get("CLUSTER", 1) > 1 or values["BM"] == 256:  # 5 row blocks of 128: 3 cluster
        m = 600  # jobs per column, 1 partial; 3 row tiles of 256, the last with 88 rows
    config = _forced(gemm_bf16, {"CLUSTER": 1, **values})
    a, b, c = _bf16(torch, m, n, k)
    workspace = gemm_bf16.new_workspace(c, m, n)
    for _ in range(3):  # each launch on the workspace the last one left
        c.fill_(float("nan"))
        gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k)
        _check_bf16(torch, a, b, c)
    assert not workspace[1].any().item()  # split-K left its counters zero


@pytest.mark.parametrize("split", [2, 4, 8])
def test_split_k_is_deterministic_and_adds_in_split_order(split):
    """200 launches of a 128x256 split-K config, the splits racing on the GPU: every result
    bit-identical to the first (a missing fence or a wrong count shows as a differing launch);
    and with more than two splits, on operands whose splits' partial sums are 2**24, -2**24
    and 0.25 (the CPU test's), exactly 0.25: the splits add in split order, however they
    arrive."""
    torch = pytest.importorskip("torch")
    import gemm_bf16

    m, n, per = 512, 4096, 512
    k = per * split
    config = _forced(gemm_bf16, dict(BM=128, BN=256, SPLIT=split, SWAP=False, CLUSTER=1))
    a, b, c = _bf16(torch, m, n, k)
    workspace = gemm_bf16.new_workspace(c, m, n)
    gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k)
    first = c.clone()
    _check_bf16(torch, a, b, c)
    differing = 0
    for _ in range(200):
        gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k)
        differing += int(not torch.equal(c, first))
    assert differing == 0
    if split > 2:  # two splits add alike in either order
        a.fill_(1.0)
        b.zero_()
        b[:, :per], b[:, per : 2 * per], b[:, 2 * per : 3 * per] = 2.0**15, -(2.0**15), 2.0**-11
        for _ in range(20):
            c.fill_(float("nan"))
            gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k)
            assert (c.float() == 0.25).all().item()
    assert not workspace[1].any().item()


@pytest.mark.parametrize("split, sms", [(2, 7), (4, 9)])
def test_the_last_partial_waves_tiles_split(split, sms):
    """40 tiles of 128x256 on a persistent grid of ``sms`` CTAs: the whole waves run whole
    tiles, the tiles past them split (``job_split``); three launches on one workspace."""
    torch = pytest.importorskip("torch")
    import gemm_bf16

    m, n, k = 600, 2000, 1096
    config = _forced(gemm_bf16, dict(BM=128, BN=256, SPLIT=split, SWAP=False, CLUSTER=1))
    a, b, c = _bf16(torch, m, n, k)
    workspace = gemm_bf16.new_workspace(c, m, n)
    for _ in range(3):
        c.fill_(float("nan"))
        gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k, sms)
        _check_bf16(torch, a, b, c)
    assert not workspace[1].any().item()


def _forced(gemm_bf16, values):
    """The space's GROUP_M 8 config of ``values``, in clusters of their CLUSTER (which the space
    has for its listed tiles only)."""
    values = dict(values)
    cluster = values.pop("CLUSTER")
    (config,) = [
        c
        for c in gemm_bf16.BF16_SPACE.configs
        if c.kwargs["GROUP_M"] == 8
        and c.kwargs["CLUSTER"] == 1
        and all(c.kwargs[x] == v for x, v in values.items())
    ]
    return gemm_bf16.in_clusters(config, cluster)


def test_clusters_resident_at_once_fill_the_gpu():
    """The persistent grid of a clustered config: as many 2-CTA clusters as the H200 runs at
    once (cuOccupancyMaxActiveClusters), which its 132 SMs nearly fill."""
    torch = pytest.importorskip("torch")
    import gemm_bf16

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    resident = gemm_bf16.resident_clusters(sms, 2)
    print(f"resident 2-CTA clusters: {resident} of {sms} SMs")
    assert 0.9 * sms / 2 <= resident <= sms // 2


@pytest.mark.parametrize("m, n, k", [(2048, 2048, 2048), (300, 520, 208), (16, 2048, 4096)])
def test_tuned_fp8_matches_torch_scaled_mm(m, n, k):
    """Device-tensor scales; the error is at most cuBLAS's (use_fast_accum=False, on operands
    zero-padded to its multiples of 16) plus one bf16 output rounding."""
    torch = pytest.importorskip("torch")
    import gemm_fp8
    from gemm import padded_scaled_mm

    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.tensor(0.75, device="cuda")
    sb = torch.tensor(1.5, device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, c, sa, sb, torch.cuda.get_device_properties(0).multi_processor_count)
    exact = (a.float() @ b.float().T) * (sa * sb)
    cublas = padded_scaled_mm(torch, a, b, sa, sb)
    ours = (c.float() - exact).abs().max().item()
    theirs = (cublas.float() - exact).abs().max().item()
    assert ours <= theirs * 1.05 + exact.abs().max().item() * 2**-8, (ours, theirs)


@pytest.mark.parametrize("stages, bound", [(1, 1.002), (2, 1.03)])
def test_the_promotion_interval_sets_the_mean_error_against_cublas(stages, bound):
    """Promoted after every K-stage (K = 128) the mean error is cuBLAS's (run 91: equal to four
    digits); after every two (the default) it stays within 3% of it (run 91: +1.1%)."""
    torch = pytest.importorskip("torch")
    import gemm_fp8

    torch.manual_seed(3)
    m = n = k = 2048
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, c, promotion_stages=stages)
    exact = a.float() @ b.float().T
    cublas = torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    ours = (c.float() - exact).abs().mean().item()
    theirs = (cublas.float() - exact).abs().mean().item()
    assert ours <= theirs * bound, (ours, theirs)


@pytest.mark.parametrize("width", [192, 256])
@pytest.mark.parametrize("cluster", [1, 2])
def test_fp8_wide_configs_match_scaled_mm(cluster, width):
    """The 128x192 and 128x256 configs with their setmaxnreg budgets (256: each stage promoted
    in two 128-wide pieces), alone and in clusters of two (B's rows multicast in halves), over
    5 row blocks and a ragged N: cuBLAS's error or less."""
    torch = pytest.importorskip("torch")
    import gemm_bf16
    import gemm_fp8
    from gemm import padded_scaled_mm

    m, n, k = 600, 1000, 1152
    torch.manual_seed(cluster)
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    (config,) = [
        c
        for c in gemm_fp8.FP8_SPACE.configs
        if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
        == (128, width, 1, cluster)
    ]
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    workspace = gemm_bf16.new_workspace(c, 1, 4)
    gemm_bf16.run_config(
        gemm_fp8.gemm_fp8_tuned,
        config,
        (a, b, c),
        workspace,
        m,
        n,
        k,
        extra=gemm_fp8.tail_arguments(sa, sb, c),
    )
    exact = (a.float() @ b.float().T) * (sa * sb)
    ours = (c.float() - exact).abs().max().item()
    theirs = (padded_scaled_mm(torch, a, b, sa, sb).float() - exact).abs().max().item()
    assert ours <= theirs * 1.05 + exact.abs().max().item() * 2**-8, (ours, theirs)


def test_a_fresh_process_reuses_the_tuning_within_10_ms(tmp_path, monkeypatch):
    """Tune one shape here, then a new process finds the tuning on disk: the tuning (its lookup)
    takes at most 10 ms; the first launch as a whole (also the kernel's cubin loaded from the
    disk cache) is printed."""
    torch = pytest.importorskip("torch")
    import gemm_bf16

    monkeypatch.setenv("JITTILE_CACHE", "1")  # the suite runs without the disk cache
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))

    m, n, k = 384, 2048, 1024
    a, b, c = _bf16(torch, m, n, k)
    gemm_bf16.launch(a, b, c)
    torch.cuda.synchronize()
    script = (
        "import sys, time, torch; sys.path.insert(0, %r); import gemm_bf16\n"  # noqa: UP031
        "a = torch.randn(%d, %d, device='cuda', dtype=torch.bfloat16)\n"
        "b = torch.randn(%d, %d, device='cuda', dtype=torch.bfloat16)\n"
        "c = torch.empty(%d, %d, device='cuda', dtype=torch.bfloat16); torch.cuda.synchronize()\n"
        "t = time.perf_counter(); gemm_bf16.launch(a, b, c); torch.cuda.synchronize()\n"
        "first = time.perf_counter() - t\n"
        "t = time.perf_counter(); gemm_bf16.launch(a, b, c); torch.cuda.synchronize()\n"
        "print(first * 1e3, (time.perf_counter() - t) * 1e3)\n"
    ) % (str(EXAMPLES), m, k, n, k, m, n)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "JITTILE_PRINT_AUTOTUNING": "1"},
        check=True,
    )
    first_ms, second_ms = (float(x) for x in out.stdout.split())
    found = re.search(r"from the tuning cache \(.*\), ([0-9.]+) ms", out.stderr)
    assert found, out.stderr
    print(
        f"fresh process: tuning {found.group(1)} ms, first launch {first_ms:.2f} ms, "
        f"second {second_ms:.2f} ms"
    )
    assert float(found.group(1)) <= 10, out.stderr
