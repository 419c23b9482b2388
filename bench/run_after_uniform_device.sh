#!/usr/bin/env bash
# Issues #23/#24 on the H200 after matrix descriptors became 32-bit words and the consumers'
# warpgroup index a warp-uniform broadcast: bench/gemm.py over every shape (tuned cold, both
# types), then bench/attention_ab.py against BASELINE (examples/attention_fwd.py with the
# per-thread warpgroup index, carried untracked) at the head dimensions D (default 128 64).
#   bash bench/run_after_uniform_device.sh "$OUT" RUN BASELINE [D ...]
baseline=${3:?baseline attention_fwd.py}
source bench/device_env.sh "$1" "$2"
shift 3
[ $# -gt 0 ] || set -- 128 64
run_step "gemm bench" 260 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_bench_run$run.log" >> "$log"
run_step "attention a/b" 250 "$out/attention_ab_run$run.log" \
  python3 bench/attention_ab.py "$run" "$baseline" "$@"
grep "causal=" "$out/attention_ab_run$run.log" >> "$log"
cp "$(result attention_ab)" "$out/" 2>/dev/null
cat "$log"
