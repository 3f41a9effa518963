#!/usr/bin/env bash
# Disk to disk at full speed (issue 17, part 8): `tomors recon scan.h5 --out vol.h5` file to file on
# the GPU machine, with the stage rates and the overlap the pipelined stream achieves.
#
# Here (no GPU): build and pack the binaries
#   /work/gpuq/pack.sh disk --bin tomors
#   cargo build --release -p tomors-io --example disk_scan && cp target/release/examples/disk_scan /work/main/.gpuq/disk/bin/
# On the GPU machine (16 cores, no Rust):
#   bash scripts/bench-disk.sh [small|medium|full]     # small ≈ 20 s, medium ≈ 50 s, full ≈ 130 s
# Environment: TOMORS_BIN, DISK_SCAN_BIN (the binaries), WORK (scratch folder, default /tmp/tomors-disk),
# MEM (the --memory of the runs), BACKEND (cuda).
#
# Steps: generate a DXchange HDF5 scan (uint16, flats, darks, theta) with disk_scan; sync and drop the page
# cache (when allowed: root); `tomors recon` HDF5 → HDF5 on the GPU, timed with the final `sync`; the
# log's stage line (read, preprocess, reconstruct, write, wall, overlap); then a quarter of the rows
# pipelined, sequential (TOMORS_STREAM=sequential), and pipelined through the HDF5 library instead of
# the direct reads and writes (TOMORS_HDF5_DIRECT=0); then the back projection alone (`tomors bench`).
set -uo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-small}
BIN=${TOMORS_BIN:-.gpuq/disk/bin/tomors}
GEN=${DISK_SCAN_BIN:-.gpuq/disk/bin/disk_scan}
WORK=${WORK:-/tmp/tomors-disk}
BACKEND=${BACKEND:-cuda}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export TOMORS_CUDA_CACHE=${TOMORS_CUDA_CACHE:-/tmp/tomors-disk-cache}
case $SIZE in
  small)  NA=512;  NR=128;  NC=1024; MEM=${MEM:-600M} ;;
  medium) NA=2048; NR=256;  NC=2048; MEM=${MEM:-3G} ;;
  full)   NA=2048; NR=1024; NC=2048; MEM=${MEM:-4G} ;;
  *) echo "usage: bench-disk.sh [small|medium|full]" >&2; exit 2 ;;
esac
T0=$(date +%s.%N)
now() { python3 -c "import time; print(f'{time.time():.3f}')" 2>/dev/null || date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.2f}')" 2>/dev/null || echo "?"; }
drop_caches() {
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "page cache dropped"; else echo "page cache NOT dropped (not allowed)"; fi
}
echo "=== bench-disk $SIZE: $NA projections × $NR rows × $NC columns (uint16), --memory $MEM; $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
rm -rf "$WORK"; mkdir -p "$WORK"
df -h "$WORK" | tail -1
"$BIN" --version 2>&1 | head -1

echo "=== generate"
t=$(now)
"$GEN" "$WORK/scan.h5" $NA $NR $NC || exit 1
sync
echo "generated and synced in $(since $t) s; $(du -h "$WORK/scan.h5" | cut -f1)"

# recon NAME "VAR=VALUE ..." ARGS...: one file-to-file run with those environment variables
# (TOMORS_STREAM=sequential, TOMORS_HDF5_DIRECT=0) from a cold page cache, wall time with the final sync.
recon() {
  local name=$1 envs=$2; shift 2
  rm -f "$WORK/$name.h5"
  drop_caches
  echo "=== recon $name: $envs tomors recon $WORK/scan.h5 --out $WORK/$name.h5 --backend $BACKEND --memory $MEM $*"
  local t=$(now)
  env $envs "$BIN" recon "$WORK/scan.h5" --out "$WORK/$name.h5" --backend "$BACKEND" --memory "$MEM" "$@" 2>&1 \
    | sed -e 's/\x1b\[[0-9;]*m//g'
  local rc=${PIPESTATUS[0]}
  local t_run=$(since $t)
  sync
  echo "recon $name: rc $rc; process ended at $t_run s, with sync $(since $t) s; output $(du -h "$WORK/$name.h5" 2>/dev/null | cut -f1)"
  rm -f "$WORK/$name.h5"
}

recon all "TOMORS_STREAM=pipelined"
Q=$((NR / 4))
recon quarter-pipelined "TOMORS_STREAM=pipelined" --slices 0:$Q
recon quarter-sequential "TOMORS_STREAM=sequential" --slices 0:$Q
recon quarter-pipelined-via-hdf5 "TOMORS_STREAM=pipelined TOMORS_HDF5_DIRECT=0" --slices 0:$Q

echo "=== back projection alone (tomors bench, $NC bins × $NC angles, 32 slices)"
"$BIN" bench --backend "$BACKEND" --sizes $NC --slices 32 --interp linear --reps 3 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' | tail -8
rm -rf "$WORK"
echo "=== bench-disk $SIZE done in $(since $T0) s"
