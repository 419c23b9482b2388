#!/usr/bin/env bash
# Issue #23: a cluster's launch against its protocol, and the 128x128 pipeline's latency margin
# (bench/cluster_launch_ab.py, hot L2, beside cuBLAS).
#   bash bench/run_cluster_launch_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cluster launch" 400 "$out/cluster_launch_ab_run$run.log" \
    python3 bench/cluster_launch_ab.py "$run"
cp "$(result cluster_launch_ab)" "$out/" 2>/dev/null
cat "$log"
