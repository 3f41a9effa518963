#!/usr/bin/env bash
# psirt2 batch 1 (<= 130 s): the parallel GPU voxel pair (Joseph forward + FBP's sweep / tensor back
# projection): tests vs the CPU voxel pair, sirt_bench 512^3/512 (joseph, voxel sweep, voxel tensor),
# ASTRA SIRT3D_CUDA in the same call, then the regression tests of the touched paths.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1 TOMORS_CUDA_CACHE=/tmp/psirt2/kcache
D=.gpuq/psirt2; T=/tmp/psirt2; mkdir -p $T/kcache
for f in $D/tests/*.xz $D/bin/*.xz; do b=$(basename $f .xz); xz -dc $f > $T/$b; chmod +x $T/$b; done
S=$(date +%s); el() { echo "=== [$(( $(date +%s) - S )) s] $*"; }
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
el "voxel_gpu"; timeout 45 $T/voxel_gpu-* --test-threads=1 --nocapture 2>&1 | grep -vE "^\s*$"
el "sirt_bench 512 512 10 (pairs joseph, sweep, tensor; residuals tracked)"
timeout 50 $T/sirt_bench 512 512 10 2>&1
el "sirt_bench untracked (TOMORS_SIRT_TRACK=0), pairs tensor, sweep, joseph"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_SIRT_TRACK=0 TOMORS_BENCH_PAIRS=tensor,sweep,joseph timeout 20 $T/sirt_bench 512 512 10 2>&1
el "astra sirt --n 512 --angles 512 --iters 10"; timeout 30 bash .astra/run.sh sirt --n 512 --angles 512 --iters 10 2>&1 | tail -3
el "sweep_forward_gpu"; timeout 15 $T/sweep_forward_gpu-* --test-threads=1 2>&1 | grep -E "^test |test result|panicked|error" 
el "iterative_cli (GPU SIRT joseph + voxel vs CPU, refusals)"
TOMORS_BIN=$T/tomors timeout 20 $T/iterative_cli-* --test-threads=1 --nocapture gpu_sirt_matches_cpu_sirt bad_iterative_options 2>&1 | grep -E "^test |test result|panicked|relative L2|error"
el "iterative_gpu"; timeout 30 $T/iterative_gpu-* --test-threads=1 2>&1 | grep -E "^test |test result|panicked|error"
el "done"
