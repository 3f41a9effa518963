#!/usr/bin/env bash
# psirt2 batch 3 (<= 100 s), on main with tensor3 merged: the voxel pair with the new tensor shape
# (TensorParams::tuned), dv_residual with 16-byte accesses, jp_voxel_ones column sums, VoxelKernel::Auto;
# sirt_bench 512^3/512 (joseph, tensor, sweep; tracked and untracked) + ASTRA in the same call; tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1 TOMORS_CUDA_CACHE=/tmp/psirt2/kcache
D=.gpuq/psirt2; T=/tmp/psirt2; mkdir -p $T/kcache
for f in $D/tests/*.xz $D/bin/*.xz; do b=$(basename $f .xz); xz -dc $f > $T/$b; chmod +x $T/$b; done
S=$(date +%s); el() { echo "=== [$(( $(date +%s) - S )) s] $*"; }
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
el "voxel_gpu"; timeout 30 $T/voxel_gpu-* --test-threads=1 --nocapture 2>&1 | grep -vE "^\s*$|SirtStats"
el "sirt_bench 512 512 10 (kernels; pairs joseph, tensor, sweep; residuals tracked)"
TOMORS_BENCH_PAIRS="joseph;tensor;sweep" timeout 35 $T/sirt_bench 512 512 10 2>&1 | grep -vE "^sirt options"
el "sirt_bench untracked, pairs tensor, joseph (all output)"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_SIRT_TRACK=0 TOMORS_BENCH_PAIRS="tensor;joseph" timeout 15 $T/sirt_bench 512 512 10 2>&1 | grep -vE "^sirt options"
el "astra sirt --n 512 --angles 512 --iters 10"; timeout 25 bash .astra/run.sh sirt --n 512 --angles 512 --iters 10 2>&1 | tail -2
for t in iterative_gpu block_gpu cone_iterative_gpu; do el "$t"; timeout 25 $T/$t-* --test-threads=1 2>&1 | grep -E "^test |test result|panicked|error"; done
el "done"
