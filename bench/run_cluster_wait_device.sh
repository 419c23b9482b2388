#!/usr/bin/env bash
# Issue #23: the clusters' barrier wait: try_wait, a test_wait spin, a suspend-time hint
# (bench/cluster_wait_ab.py, hot L2, beside cuBLAS).
#   bash bench/run_cluster_wait_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cluster wait" 400 "$out/cluster_wait_ab_run$run.log" \
    python3 bench/cluster_wait_ab.py "$run"
cp "$(result cluster_wait_ab)" "$out/" 2>/dev/null
cat "$log"
