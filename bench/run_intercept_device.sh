#!/usr/bin/env bash
# Run 63: where short GEMMs lose (bench/gemm_intercept.py at 1024x1024 and 256x8192 over K; Nsight
# Compute on the 1024^3 128x128 config and on cuBLAS). Usage: OUT=folder bash bench/run_intercept_device.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_CACHE_DIR=/tmp/jc
log=$OUT/device_run63.log
timeout 100 python3 bench/gemm_intercept.py 63 1024 1024 > $log 2>&1
echo "intercept1 rc=$?" >> $log
cp bench/results/gemm_intercept_run63.json $OUT/gemm_intercept_run63_1024.json
timeout 100 python3 bench/gemm_intercept.py 63 256 8192 >> $log 2>&1
echo "intercept2 rc=$?" >> $log
cp bench/results/gemm_intercept_run63.json $OUT/gemm_intercept_run63_256.json
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
timeout 90 ncu --clock-control none -k regex:gemm_bf16_tuned --launch-skip 3 --launch-count 1 $S python3 bench/gemm_one_config.py 1024 1024 1024 128 128 > $OUT/ncu_run63.log 2>&1
echo "ncu1 rc=$?" >> $log
timeout 90 ncu --clock-control none -k regex:'nvjet|sm90|cutlass|gemm' --launch-skip 8 --launch-count 1 --section SpeedOfLight python3 bench/gemm_one_config.py 1024 1024 1024 128 128 >> $OUT/ncu_run63.log 2>&1
echo "ncu2 rc=$?" >> $log
