#!/usr/bin/env bash
# Issue #23: which part of the clusters' release protocol costs
# (bench/cluster_release_ab.py, hot L2, beside cuBLAS).
#   bash bench/run_cluster_release_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cluster release" 400 "$out/cluster_release_ab_run$run.log" \
    python3 bench/cluster_release_ab.py "$run"
cp "$(result cluster_release_ab)" "$out/" 2>/dev/null
cat "$log"
