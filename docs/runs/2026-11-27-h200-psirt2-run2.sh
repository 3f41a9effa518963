#!/usr/bin/env bash
# psirt2 batch 2 (<= 100 s): voxel pair with the sweep packed straight from the interleaved sinograms
# (jp_pack_sweep2) and one shared flat scratch; per-kernel breakdown of one voxel (tensor) SIRT call
# (nsys, else ncu durations); jp_forward's ncu metrics; ASTRA in the same call; block/art/line tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TOMORS_REQUIRE_GPU=1 TOMORS_CUDA_CACHE=/tmp/psirt2/kcache
D=.gpuq/psirt2; T=/tmp/psirt2; mkdir -p $T/kcache
for f in $D/tests/*.xz $D/bin/*.xz; do b=$(basename $f .xz); xz -dc $f > $T/$b; chmod +x $T/$b; done
S=$(date +%s); el() { echo "=== [$(( $(date +%s) - S )) s] $*"; }
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
el "voxel_gpu"; timeout 25 $T/voxel_gpu-* --test-threads=1 --nocapture 2>&1 | grep -vE "^\s*$|SirtStats"
el "sirt_bench 512 512 10 (kernels; pairs joseph, sweep, tensor; residuals tracked)"
timeout 40 $T/sirt_bench 512 512 10 2>&1 | grep -vE "^sirt options"
el "sirt_bench untracked, pairs tensor, sweep"
TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_SIRT_TRACK=0 TOMORS_BENCH_PAIRS="tensor;sweep" timeout 15 $T/sirt_bench 512 512 10 2>&1 | grep "^bench"
el "astra sirt --n 512 --angles 512 --iters 10"; timeout 25 bash .astra/run.sh sirt --n 512 --angles 512 --iters 10 2>&1 | tail -2
for t in block_gpu art_gpu line_gpu; do el "$t"; timeout 20 $T/$t-* --test-threads=1 2>&1 | grep -E "^test |test result|panicked"; done
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  el "nsys: per-kernel times of the voxel tensor SIRT (warm-up 2 it. + 2 calls of 10 it.)"
  TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_BENCH_PAIRS=tensor timeout 30 $NSYS profile -o $T/prof --force-overwrite true --trace cuda --sample none --cpuctxsw none $T/sirt_bench 512 512 10 2>&1 | grep "^bench"
  timeout 25 $NSYS stats --report cuda_gpu_kern_sum --format csv $T/prof.nsys-rep 2>&1 | cut -d, -f1-9 | head -24
else
  el "ncu durations (no nsys): 24 launches of the voxel tensor SIRT after the warm-up"
  TOMORS_BENCH_SKIP_KERNELS=1 TOMORS_BENCH_PAIRS=tensor timeout 35 /usr/local/cuda/bin/ncu --launch-skip 30 --launch-count 24 --metrics gpu__time_duration.sum $T/sirt_bench 512 512 4 2>&1 | grep -E "^  [a-z_]+|gpu__time_duration" | paste - - | sed -E 's/ +/ /g' | head -30
fi
M=gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
for s in long_scoreboard short_scoreboard lg_throttle mio_throttle wait not_selected math_pipe_throttle; do M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
el "ncu jp_forward (512^3, 512 angles, default tuning)"
TOMORS_BENCH_SKIP_SIRT=1 TOMORS_BENCH_VOXEL=" " timeout 25 /usr/local/cuda/bin/ncu -k regex:jp_forward --launch-skip 1 --launch-count 1 --metrics $M $T/sirt_bench 512 512 10 2>&1 | grep -E "ERROR|[a-z_]+__[a-z_]" | sed -E 's/ +/ /g'
el "done"
