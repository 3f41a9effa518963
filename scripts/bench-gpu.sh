#!/usr/bin/env bash
# One GPU benchmark call: every figure of the README with its raw log (issue 15, part 1).
#
# Here (no GPU): build and pack, prepare the peers, then carry them:
#   cargo build --release -p tomors-cuda --examples && ../shared/tools/device-pack -p tomors-cuda
#   mkdir -p .device/ex && cp target/release/examples/{cuda_bench,cone_bench,sirt_bench,cone_sirt_bench,bp_one,bp_levers,fourier_bench,sart_bench} .device/ex/ && strip .device/ex/*
#   ../shared/bench/astra/setup.sh                  # fills .astra/
#   cp -r ../shared/bench/tomocupy .tomocupy && echo /.tomocupy/ >> .git/info/exclude
# On the GPU machine (device tool, carry [".device", ".astra", ".tomocupy"]):
#   bash scripts/bench-gpu.sh [--quick]             # full: < 9 min; --quick: about 2 min
# Writes $OUT/DATE-GPU.json, $OUT/DATE-GPU.md and $OUT/DATE-GPU-raw/*.log ($OUT defaults to docs/runs);
# copy them to docs/runs/, commit, then run scripts/readme-tables.py.
#
# Timing bases (each ratio compares like with like):
#   bp-*      GPU-resident data, no transfers: tomors CUDA events (median), ASTRA BP3D_CUDA wall time around a
#             synchronised call (median) on GPU-resident cupy arrays, tomocupy cupy events (median).
#   fbp-*     host to host (numpy/ndarray in and out), wall time; ASTRA FBP_CUDA per 2D slice × slices.
#   fdk-*     host to host, wall time, warm (module loaded); the CLI figure is a fresh process (file to file).
#   sirt-*    seconds per iteration, host to host (the whole call / iterations) and the device loop.
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0; [[ ${1:-} == --quick ]] && QUICK=1
OUT=${OUT:-docs/runs}
STAMP=$(date -u +%Y-%m-%d-%H%M)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
NAME="$STAMP-${GPU:-nogpu}"; [[ $QUICK == 1 ]] && NAME="$NAME-quick"
RAW="$OUT/$NAME-raw"; mkdir -p "$RAW"
BIN=${TOMORS_BIN:-.device/bin/tomors}; EX=${TOMORS_EX:-.device/ex}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export TOMORS_CUDA_CACHE=${TOMORS_CUDA_CACHE:-/tmp/tomors-bench-cache}
WORK=${WORK:-/tmp/tomors-bench-data}; mkdir -p "$WORK"
STEPS="$RAW/steps.tsv"; : > "$STEPS"
T0=$(date +%s)

# step NAME TIMEOUT_S CMD...: runs CMD, log in $RAW/NAME.log, "name rc wall_s cmd" in steps.tsv.
step() {
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*" >&2
  local t=$(date +%s.%N)
  timeout "$limit" "$@" > "$RAW/$name.log" 2>&1
  local rc=$?
  local w=$(python3 -c "import time;print(f'{time.time()-$t:.3f}')")
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$w" "$*" >> "$STEPS"
  tail -3 "$RAW/$name.log" >&2
}
if [[ $QUICK == 1 ]]; then
  N=1024; S=8; E2E=256; FILE_ROWS=64; CN=256; CA=360; SN=256; SI=5; MODEL_Q=--quick
else
  N=2048; S=32; E2E=2048; FILE_ROWS=256; CN=512; CA=720; SN=512; SI=10; MODEL_Q=--quick
fi

step gpu 20 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.sm --format=csv
# Kernel cache: the same small reconstruction in two fresh processes, cache emptied first.
rm -rf "$TOMORS_CUDA_CACHE"
step cache-phantom 60 "$BIN" phantom --size 256 --angles 256 --rows 16 --out-dir "$WORK/small" --overwrite
rm -f "$WORK/small/rec"*.npy
step cache-first 120 "$BIN" recon "$WORK/small/projections.npy" --angles "$WORK/small/angles.npy" --backend cuda --out "$WORK/small/rec1.npy"
step cache-second 120 "$BIN" recon "$WORK/small/projections.npy" --angles "$WORK/small/angles.npy" --backend cuda --out "$WORK/small/rec2.npy"
# Back-projection kernels: prediction beside measurement, N bins × N angles → S slices of N².
step bp-model 240 "$BIN" model --size $N --slices $S $MODEL_Q --reps 3
# FBP host to host (library; main kernel table at N too).
step fbp-e2e 200 "$EX/cuda_bench" --sizes $N --e2e-slices $E2E
# FBP file to file (CLI, fresh process): FILE_ROWS slices of N² from N angles.
# The fastest FBP mode within a stated error (--kernel fast: half math, 8 slices per block) and the
# gridding method (--method fourier, warp gather, W = 4), both host to host, pageable arrays.
[[ -x "$EX/bp_levers" ]] && step fbp-e2e-fast 150 "$EX/bp_levers" --n $N --e2e-slices $E2E --warm 32 --e2e "fast:linear/0"
# The exact line-sweep kernel (--kernel sweep; not Auto's choice yet), host to host, same case.
[[ -x "$EX/bp_levers" && -z ${SKIP_SWEEP:-} ]] && step fbp-e2e-sweep 150 "$EX/bp_levers" --n $N --e2e-slices $E2E --warm 128 --e2e "sweep:linear/0"
[[ -x "$EX/fourier_bench" ]] && step fourier-e2e 150 "$EX/fourier_bench" --sizes $N --slices $E2E --reps 2 --host pageable --configs warp:4
step fbp-file-phantom 200 "$BIN" phantom --size $N --angles $N --rows $FILE_ROWS --out-dir "$WORK/par" --overwrite
step fbp-file 200 "$BIN" recon "$WORK/par/projections.npy" --angles "$WORK/par/angles.npy" --backend cuda --out "$WORK/par/rec.npy"
rm -rf "$WORK/par"
# FDK: library (cone_bench, 512³/720) and CLI (fresh process, file to file).
step fdk-lib 120 "$EX/cone_bench"
step fdk-cli-phantom 200 "$BIN" phantom --geometry cone --size $CN --angles $CA --sod 1000 --odd 500 --pixel-size 3 --out-dir "$WORK/cone" --overwrite
step fdk-cli 120 "$BIN" recon "$WORK/cone/projections.npy" --angles "$WORK/cone/angles.npy" --geometry cone --sod 1000 --odd 500 --pixel-size 3 --backend cuda --out "$WORK/cone/rec.npy"
rm -rf "$WORK/cone"
# SIRT per iteration.
[[ -x "$EX/sart_bench" ]] && step sart 60 "$EX/sart_bench" 256 256 16 5
# Both pairs: the voxel pair with the tensor kernel (ASTRA's pairing) and the Joseph pair (the exact default).
step sirt-parallel 120 env TOMORS_BENCH_PAIRS="joseph;tensor" "$EX/sirt_bench" $SN $SN $SI
step sirt-cone 120 "$EX/cone_sirt_bench" 256 360 5 3
[[ $QUICK == 0 ]] && step sirt-cone-512 200 "$EX/cone_sirt_bench" 512 512 3 2
# CPU back projection (same machine, all cores).
step cpu-bp 120 "$BIN" bench --backend cpu --sizes 1024 --slices 16 --reps 1 --interp linear
# ASTRA, same call.
if [[ -d .astra ]]; then
  step astra-bp 200 bash .astra/run.sh bp --n $N --angles $N --slices $S
  step astra-fbp2d 120 bash .astra/run.sh fbp2d --n $N --angles $N
  step astra-fdk 120 bash .astra/run.sh fdk --n $CN --angles $CA
  step astra-sirt 200 bash .astra/run.sh sirt --n $SN --angles $SN --iters $SI
  # Cone SIRT3D_CUDA and FP3D/BP3D on cone_sirt_bench's geometry (run.sh above installed .astra/site).
  export ASTRA_SITE=$PWD/.astra/site ASTRA_SHIM=$PWD/.astra/libcufft.so.11 PYTHONUNBUFFERED=1
  export CUFFT12_PATH=${CUFFT12_PATH:-$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcufft.so.12 2>/dev/null)}
  step astra-sart 90 python3 scripts/astra_sart.py --n 256 --angles 256 --slices 16 --sweeps 5
  step astra-sirt-cone 120 python3 scripts/astra_cone_sirt.py --n 256 --angles 360 --iters 5
  [[ $QUICK == 0 ]] && step astra-sirt-cone-512 200 python3 scripts/astra_cone_sirt.py --n 512 --angles 512 --iters 3 --reps 2
else
  echo "no .astra/: ASTRA skipped" | tee "$RAW/astra-skipped.log" >&2
fi
# tomocupy lprec / fourierrec / linerec (GPU-resident, 32 slices of 2048² from 2048 angles).
if [[ -d .tomocupy && $QUICK == 0 ]]; then
  mkdir -p "$RAW/tomocupy"
  OUT="$(cd "$RAW/tomocupy" && pwd)" step tomocupy 300 bash .tomocupy/run.sh
else
  echo "tomocupy skipped (no .tomocupy/ or --quick)" | tee "$RAW/tomocupy-skipped.log" >&2
fi
echo "total_s=$(( $(date +%s) - T0 ))" >&2
python3 scripts/bench_gpu_report.py "$RAW" "$OUT/$NAME" --quick $QUICK
