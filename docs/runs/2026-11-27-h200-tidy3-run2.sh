#!/usr/bin/env bash
# tidy3 batch 2: the final test binaries (shared cone fixtures, IterativeResult::from_report in
# the one- and multi-device cone SIRT) and cone_sirt_bench at 256^3 once more.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1
D=/tmp/tidy3; rm -rf $D; mkdir -p $D
xz -dc .gpuq/tidy3/t.tar.xz | tar xf - -C $D
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u
for t in cone_iterative_gpu cone_fold_iterative_gpu cone_half_gpu cone_slab_gpu multi_gpu_iterative sirt_early_gpu det_gpu block_gpu; do
  echo "=== $t"
  timeout 25 $D/tests/$t-* --test-threads=1 --nocapture 2>&1 | grep -v "^$"; echo "rc=${PIPESTATUS[0]}"
done
echo "=== cone_sirt_bench 256 360 5 3"
timeout 30 $D/bin/cone_sirt_bench 256 360 5 3; echo "rc=$?"
date -u
