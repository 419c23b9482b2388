#!/usr/bin/env bash
# Issue #23: the shape-fitted tiles in clusters of two (B multicast in shares cut at 8-row
# periods; cuBLAS runs 152x256 tiles in 1x2 clusters at 3000x5000x2000, run 109). The forced
# fitted and clustered configs' GPU tests, then forced tiles beside cuBLAS, clustered or not
# (hot L2, bench/configs_ab.py, `@2`: in clusters of two).
#   bash bench/run_cluster_fitted_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "forced config tests" 200 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
    tests/test_gpu_gemm.py -k "each_kind or resident"
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "forced tiles" 360 "$out/configs_ab_run$run.log" python3 bench/configs_ab.py "$run" \
    3000x5000x2000:256x152 3000x5000x2000:256x152@2 3000x5000x2000:128x232@2 \
    4097x4104x4096:128x208 4097x4104x4096:128x216@2 4097x4104x4096:256x136@2 \
    3072x5120x2048:256x160@2 3072x5120x2048:128x256 \
    8192x8192x8192:128x256 8192x8192x8192:256x160@2 \
    4096x11008x4096:256x152@2 4096x11008x4096:128x256 \
    6144x6144x6144:256x144@2 6144x6144x6144:128x256
cp "$(result configs_ab)" "$out/" 2>/dev/null
cat "$log"
