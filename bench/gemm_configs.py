"""Every configuration of the tuned GEMMs (examples/gemm_bf16.py, examples/gemm_fp8.py) compiled
for sm_90a without a GPU: registers, shared and local bytes, the GMMA form and count in SASS,
warpgroup waits, and any warning (a ptxas serialization advisory is a JittileWarning). Exits
non-zero if a config fails, spills, or warns.

    PYTHONPATH=$PWD python3 bench/gemm_configs.py [--json FILE]
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def examples():
    import gemm_bf16
    import gemm_fp8

    from jittile import T

    spec = T.Tensor((None, None), "bfloat16")
    fp8 = T.Tensor((None, None), "float8_e4m3fn")
    work = (T.Tensor((None,), "float32"), T.Tensor((None,), "int32"))  # sums, counters
    scale = T.Tensor((1,), "float32")
    one = (gemm_bf16.np.int32(1),) * 3
    return {
        "bf16": (gemm_bf16.gemm_bf16_tuned, (spec, spec, spec, *work, *one)),
        "fp8": (
            gemm_fp8.gemm_fp8_tuned,
            (fp8, fp8, spec, *work, *one, scale, scale, gemm_fp8.PROMOTION_STAGES),
        ),
    }


def gmma_form(sass: str) -> tuple[str, int]:
    forms = [
        line.split("*/")[-1].strip().split()[0]
        for line in sass.splitlines()
        if "GMMA." in line and "*/" in line
    ]
    return (forms[0] if forms else "none"), len(forms)


def main() -> int:
    rows, bad = [], 0
    for kind, (tuned, args) in examples().items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = tuned.compile_all(*args, target="sm_90a")
        for config, ck in compiled.items():
            row = {"kind": kind, **config.kwargs, "block": config.block}
            if not hasattr(ck, "metadata"):
                row["error"] = str(ck)
                bad += 1
            else:
                form, count = gmma_form(ck.sass)
                row.update(
                    {k: ck.metadata[k] for k in ("registers", "shared_bytes", "local_bytes")},
                    gmma=form,
                    gmma_count=count,
                    depbar=ck.sass.count("WARPGROUP.DEPBAR"),
                    warnings=list(ck.metadata.get("lowering_warnings") or []),
                )
                bad += bool(row["local_bytes"] or row["warnings"])
            rows.append(row)
            print(json.dumps(row), flush=True)
        for w in caught:
            print(f"warning ({kind}): {w.message}", flush=True)
            bad += 1
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} configs, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
