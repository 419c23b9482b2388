"""Attention forward on the H200: jittile's examples/attention_fwd.py vs torch SDPA's cuDNN and
flash (FlashAttention-2) backends (and FlashAttention-3's ``flash_attn_interface`` where
installed), bf16 (B, H, S, D), causal and not. TFLOP/s from the median of CUDA-event timings,
the contenders' samples interleaved (causal counts half the FLOPs), each sample gated behind a
GPU spin (``common.median_ms``) so that the events see device time only; every contender's host
microseconds per call, with the GPU kept busy (``common.host_us``), beside it (``host_us``: what
an ungated short shape would add); every output's max error against a float32 reference (on
the first batch entry's heads, to keep the reference small).
jittile's other builds of each shape's head dimension (``attention_fwd.other_builds``: another
key block, consumer count, turn-taking) are timed beside its default, named by their options
(``jittile_key_rows96``, ``jittile_consumers2``, ``jittile_turnsFalse``).

    PYTHONPATH=$PWD python3 bench/attention.py [RUN [D ...]]  # bench/results/attention_runRUN.json

Head dimensions after the run number keep only those shapes (and kernels): ``... 49 256``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
import common  # noqa: E402

# (B, H, H_kv, S, D)
SHAPES = (
    (4, 32, 32, 4096, 128),
    (2, 32, 32, 8192, 128),
    (4, 32, 32, 4096, 64),
    (16, 16, 16, 1024, 128),
    (4, 16, 16, 4096, 256),
    (2, 16, 16, 8192, 256),
    (2, 32, 32, 3000, 128),
    (2, 32, 8, 4096, 128),
)
REFERENCE_HEADS = 4
# ~1 ms: longer than any contender's host time per call (each row's host_us), so that every
# sample's events see device time only
SPIN_CYCLES = common.SPIN_CYCLES
HOST_CALLS = 20  # calls per host-time sample: queued behind its spin even at the longest shapes


def contenders(torch):
    """name -> fn(q, k, v, causal) for every contender importable here."""
    import attention_fwd
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        def run(q, k, v, causal):
            grouped = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}  # torch >= 2.5
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, **grouped
                )

        return run

    found = {
        "jittile": lambda q, k, v, causal: attention_fwd.attention(q, k, v, causal=causal),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
    }
    try:
        from flash_attn_interface import flash_attn_func

        def fa3(q, k, v, causal):
            out = flash_attn_func(*(x.transpose(1, 2) for x in (q, k, v)), causal=causal)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

        found["flash_attn_3"] = fa3
    except ImportError:
        pass
    return found


def other_builds(head_dim: int, causal: bool) -> dict:
    """name -> fn(q, k, v, causal) for jittile's other builds at this head dimension."""
    import attention_fwd

    def build(options):
        return lambda q, k, v, causal: attention_fwd.attention(q, k, v, causal=causal, **options)

    return {
        "jittile_" + "_".join(f"{key}{value}" for key, value in options.items()): build(options)
        for options in attention_fwd.other_builds(head_dim, causal)
    }


def reference(torch, q, k, v, causal):
    """float32 attention of the first batch entry's first REFERENCE_HEADS heads."""
    heads = min(REFERENCE_HEADS, q.shape[1])
    group = q.shape[1] // k.shape[1]
    q = q[:1, :heads].float()
    k, v = (x[:1].float().repeat_interleave(group, 1)[:, :heads] for x in (k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[2]
        scores = scores.masked_fill(
            torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    return torch.softmax(scores, -1) @ v


def measure(torch, shape, causal: bool, found: dict) -> dict:
    batch, heads, kv_heads, seq, head_dim = shape
    torch.manual_seed(seq + head_dim)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (
        torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
        for _ in range(2)
    )
    expected = reference(torch, q, k, v, causal)
    flops = 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)
    row = {"B": batch, "H": heads, "H_kv": kv_heads, "S": seq, "D": head_dim, "causal": causal}
    calls = {}
    for name, fn in {**found, **other_builds(head_dim, causal)}.items():
        try:
            out = fn(q, k, v, causal)
            torch.cuda.synchronize()
        except Exception as exc:  # a backend without this shape (D=256, GQA...): recorded
            row[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            continue
        heads_checked = expected.shape[1]
        error = (out[:1, :heads_checked].float() - expected).abs().max().item()
        row[name] = {"max_abs_error": error}
        calls[name] = (lambda fn: lambda: fn(q, k, v, causal))(fn)  # noqa: B023
    for name, ms in common.median_ms(calls, cycles=SPIN_CYCLES).items():
        host = common.host_us(torch, calls[name], HOST_CALLS)
        row[name].update(ms=ms, tflops=flops / ms / 1e9, host_us=host)
    for name in calls:
        for base in ("sdpa_cudnn", "sdpa_flash"):
            if "tflops" in row.get(base, {}):
                row[name][f"vs_{base}"] = row[name]["tflops"] / row[base]["tflops"]
    return row


def main() -> None:
    import attention_fwd
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "00"
    head_dims = tuple(int(d) for d in sys.argv[2:]) or attention_fwd.HEAD_DIMS
    found = contenders(torch)
    results = []
    for shape in (shape for shape in SHAPES if shape[-1] in head_dims):
        for causal in (False, True):
            row = measure(torch, shape, causal, found)
            results.append(row)
            print(
                f"{'x'.join(map(str, shape))} causal={causal}: "
                + ", ".join(
                    f"{name} "
                    + (
                        f"{row[name]['tflops']:.0f} TFLOP/s err {row[name]['max_abs_error']:.2g}"
                        f" host {row[name]['host_us']:.0f} us"
                        if "tflops" in row[name]
                        else row[name]["error"][:60]
                    )
                    for name, entry in row.items()
                    if isinstance(entry, dict)
                ),
                flush=True,
            )
    kernels = {}
    for head_dim in head_dims:
        for causal, key_rows in (
            (c, r) for c in (False, True) for r in attention_fwd.KEY_ROWS[head_dim]
        ):
            ck = attention_fwd.compiled(head_dim, causal, key_rows=key_rows)
            kernels[f"D{head_dim}{'_causal' if causal else ''}_BN{key_rows}"] = {
                **{
                    key: ck.metadata[key]
                    for key in (
                        "registers",
                        "local_bytes",
                        "shared_bytes",
                        "spill_stores",
                        "spill_loads",
                    )
                },
                "linker": ck.metadata["toolchain"]["linker"],
                "setmaxnreg_sass": [
                    line.split(";")[0].split("*/")[-1].strip()
                    for line in ck.sass.splitlines()
                    if "USETMAXREG" in line
                ],
                "sass_hgmma": ck.sass.count("HGMMA."),
            }
    common.save(
        f"attention_run{run}",
        {"spin_cycles": SPIN_CYCLES, "kernels": kernels, "results": results},
    )


if __name__ == "__main__":
    main()
