#!/usr/bin/env bash
# tidy3 batch 1: the tests whose code paths the removed switches touched, and
# cone_sirt_bench at 256^3 (and 512^3 voxel-pair SIRT) for the default's speed.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1
D=/tmp/tidy3; rm -rf $D; mkdir -p $D
xz -dc .gpuq/tidy3/t.tar.xz | tar xf - -C $D
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u
echo "=== cone_sirt_bench 256 360 5 3"
timeout 40 $D/bin/cone_sirt_bench 256 360 5 3; echo "rc=$?"
for t in cone_iterative_gpu cone_fold_iterative_gpu cone_half_gpu cone_slab_gpu sirt_early_gpu det_gpu art_gpu fourier_gpu iterative_gpu; do
  echo "=== $t"
  timeout 30 $D/tests/$t-* --test-threads=1 --nocapture 2>&1 | grep -v "^$"; echo "rc=${PIPESTATUS[0]}"
done
echo "=== cone_sirt_bench 512 512 3 2 (voxel pair SIRT only)"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_SIRT_PAIRS=voxel timeout 25 $D/bin/cone_sirt_bench 512 512 3 2; echo "rc=$?"
date -u
