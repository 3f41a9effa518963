#!/usr/bin/env bash
# psirt2 batch 3b (<= 60 s): sirt_bench 512^3/512 on main with tensor3 merged (pairs joseph, tensor,
# sweep; tracked, then tensor and joseph untracked) + ASTRA SIRT3D_CUDA in the same call.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1 TOMORS_CUDA_CACHE=/tmp/psirt2/kcache
D=.gpuq/psirt2; T=/tmp/psirt2; mkdir -p $T/kcache
for f in $D/bin/*.xz; do b=$(basename $f .xz); xz -dc $f > $T/$b; chmod +x $T/$b; done
S=$(date +%s); el() { echo "=== [$(( $(date +%s) - S )) s] $*"; }
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
el "sirt_bench 512 512 10, residuals tracked, pairs joseph, tensor, sweep"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_BENCH_PAIRS="joseph;tensor;sweep" timeout 20 $T/sirt_bench 512 512 10 2>&1 | grep -vE "^sirt options"
el "sirt_bench untracked, pairs tensor, joseph"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_SIRT_TRACK=0 TOMORS_BENCH_PAIRS="tensor;joseph" timeout 12 $T/sirt_bench 512 512 10 2>&1 | grep -vE "^sirt options"
el "astra sirt --n 512 --angles 512 --iters 10"; timeout 20 bash .astra/run.sh sirt --n 512 --angles 512 --iters 10 2>&1 | tail -2
el "done"
