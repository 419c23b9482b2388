#!/usr/bin/env bash
# Issue #23: what a cluster of two costs (the same tile alone, in a cluster with B multicast, in
# a cluster without it) and the short shapes' untried tiles (128x64, 64x64, 64x32 with sixteen
# stages), beside cuBLAS, hot L2 (bench/cluster_cost_ab.py).
#   bash bench/run_cluster_cost_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cluster cost" 540 "$out/cluster_cost_ab_run$run.log" python3 bench/cluster_cost_ab.py "$run"
cp "$(result cluster_cost_ab)" "$out/" 2>/dev/null
cat "$log"
