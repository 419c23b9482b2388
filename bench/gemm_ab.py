"""Variants of examples/gemm_bf16.py side by side on the H200, for A/B measurements of one change
to the kernel's text: a copy of the example with some lines replaced, imported under another
name, and the timing of one config of each variant on the same operands (samples interleaved,
each behind a 1 ms GPU spin, errors against an fp32 product)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))


def variant(folder: str, name: str, replacements: dict):
    """examples/gemm_bf16.py with each ``old`` text replaced by ``new``, imported as ``name``."""
    text = (ROOT / "examples" / "gemm_bf16.py").read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path = Path(folder, f"{name}.py")
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def first_config(space, tm: int, tn: int, split: int = 1, cluster: int = 1):
    """The space's first config of a BM x BN tile with this SPLIT and CLUSTER (its deepest ring,
    GROUP_M 8)."""
    return next(
        c
        for c in space.configs
        if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
        == (tm, tn, split, cluster)
    )


def compare(variants, spec: str) -> None:
    """Time ``variants`` ((label, module, cluster size) each) on one ``MxNxK:BMxBN`` spec: the
    space's first unsplit config of that tile, in clusters of the given size, per variant."""
    import common
    import torch

    shape, tile = spec.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    tm, tn = (int(x) for x in tile.split("x"))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float().T
    calls, outputs = {}, {}
    for label, module, cluster in variants:
        v = first_config(
            module.BF16_SPACE, tm, tn
        ).kwargs  # the same tile in clusters of ``cluster`` (4: not in the tuned space)
        config = module.Space._config(tm, tn, v["STAGES"], v["GROUP_M"], 1, False, cluster)
        c = outputs[label] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        w = module.new_workspace(c, 1, 4)
        calls[label] = lambda module=module, config=config, c=c, w=w: module.run_config(
            module.gemm_bf16_tuned, config, (a, b, c), w, m, n, k
        )
    times = common.median_ms(calls, repeat=20)
    for label, c in outputs.items():
        error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
        us = 1e3 * times[label]
        print(
            f"{m}x{n}x{k} {tm}x{tn} {label}: {us:.1f} us, "
            f"{2 * m * n * k / us / 1e6:.0f} TFLOP/s, relative error {error:.2g}",
            flush=True,
        )
