#!/usr/bin/env bash
# On the GPU machine: ncu counters of the back-projection kernels for the
# performance model in docs/perf-notes.md (2048 bins x 2048 angles -> 2048^2,
# GPU-resident data, the second launch of each configuration, clocks left
# alone). Needs .device/bin/bp_one (the tomors-cuda example) and ncu.
#   bash scripts/device/profile_kernels.sh OUTDIR
set -u
out=${1:-/tmp/prof}; mkdir -p "$out"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
if [ -z "$ncu" ]; then echo "no ncu on this machine"; exit 0; fi
metrics=gpu__time_duration.sum
metrics+=,sm__sass_thread_inst_executed.sum
metrics+=,sm__sass_thread_inst_executed_op_fp32_pred_on.sum
metrics+=,sm__sass_inst_executed_op_shared_ld.sum
metrics+=,sm__sass_data_bytes_mem_shared_op_ld.sum
metrics+=,smsp__inst_executed_pipe_xu.sum
metrics+=,smsp__inst_executed_pipe_tex.sum
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_tex.avg.pct_of_peak_sustained_active
while read -r kernel interp slices; do
  [ -z "$kernel" ] && continue
  tag=$(echo "$kernel-$interp" | tr -c 'A-Za-z0-9\n-' '_')
  echo "== $kernel $interp ($slices slices)"
  "$ncu" --clock-control none --launch-skip 1 --launch-count 1 -k regex:bp_ --metrics "$metrics" \
    --csv --print-units base .device/bin/bp_one "$kernel" "$interp" 2048 "$slices" 1 > "$out/$tag.csv" 2> "$out/$tag.err"
  echo "rc $? $(wc -l < "$out/$tag.csv") lines"
  grep -h '^"' "$out/$tag.csv" | grep -v '"ID"' | sed "s|^|$kernel,$interp,$slices,|" >> "$out/all.csv"
done <<'LIST'
standard linear 1
tex-opt-float2 linear 2
tex-opt-half4 nearest 4
alu@t64,s16,a1,r1,b2 linear 1
alu-float2@t64,s16,a1,r1,b2 linear 2
alu-float2@t64,s16,a0,r1,b2 nearest 2
alu-half4@t64,s16,a0,r0,b1 nearest 4
alu-half4@t32,s16,a1,r0,b4 linear 4
alu-float2@t64,s16,a0,r1,b1,o1 linear 2
hybrid-float2@t64,s16,a1,r1,b2,h3 linear 2
LIST
