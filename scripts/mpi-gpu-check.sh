#!/usr/bin/env bash
# On the GPU machine: tomors under mpirun, 1 vs 2 (and 4) ranks sharing the
# GPU — parallel-beam FBP (2048², 64 slices), the DXchange tooth scan with
# --center auto, cone FDK 256³, and a failing rank; then, with two or more
# GPUs, one rank per GPU against one process on one GPU and one process on
# two (--devices 0,1): FDK 512³ and FBP of 64 slices of 2048². Prints times
# and whether the volumes are identical (else their relative L2 distance).
#
#   scripts/mpi-gpu-check.sh RUNTIME [shared|multi|all]
#     RUNTIME: DIR or DIR.tar.xz from scripts/pack-mpi-runtime.sh;
#     shared: ranks sharing one GPU only; multi: one rank per GPU only;
#     all (default): both. TOMORS_NPY_COMPARE=CMD: compares two differing
#     .npy volumes as `CMD A B` (e.g. "multi_gpu_bench --compare") instead of
#     Python, whose fallback without NumPy is slow on large volumes.
set -u
repo=$(pwd)
rt=${1:?usage: scripts/mpi-gpu-check.sh DIR|DIR.tar.xz [shared|multi|all]}
part=${2:-all}
if [[ $rt == *.tar.xz ]]; then
  tar xJf "$rt" -C /tmp && rt=/tmp/$(basename "$rt" .tar.xz)
fi
rt=$(cd "$rt" && pwd)
export PATH=$rt/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$rt/lib
T=$rt/bin/tomors
nvidia-smi -L; mpirun --version | head -2
cd /tmp
cmpf() {
  if cmp -s "$1" "$2"; then echo "$1 $2: IDENTICAL"
  elif [[ -n ${TOMORS_NPY_COMPARE:-} ]]; then $TOMORS_NPY_COMPARE "$1" "$2"; else
    python3 - "$1" "$2" <<'PY'
import sys
try:
    import numpy as np
    a = np.load(sys.argv[1]).astype(np.float64); b = np.load(sys.argv[2]).astype(np.float64)
    print(sys.argv[1], sys.argv[2], "DIFFER: rel L2 %.3e max %.3e" % (np.linalg.norm(a - b) / np.linalg.norm(a), abs(a - b).max()))
except ImportError:
    import array
    def load(p):
        d = open(p, 'rb').read(); h = 10 + int.from_bytes(d[8:10], 'little'); a = array.array('f'); a.frombytes(d[h:]); return a
    a, b = load(sys.argv[1]), load(sys.argv[2])
    n = sum(x * x for x in a); d = sum((x - y) ** 2 for x, y in zip(a, b)); m = max(abs(x - y) for x, y in zip(a, b))
    print(sys.argv[1], sys.argv[2], "DIFFER: rel L2 %.3e max %.3e" % ((d / n) ** 0.5, m))
PY
  fi
}
tm() { local t0=$(date +%s.%N); "$@" > /tmp/last.log 2>&1; local rc=$?; local t1=$(date +%s.%N); grep -E "wrote|error|GU/s|backend|rank 0 on" /tmp/last.log | sed 's/\x1b\[[0-9;]*m//g' | tail -4; echo "  rc=$rc wall $(python3 -c "print('%.2f s' % ($t1 - $t0))")"; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [[ $part != multi ]]; then
echo "== parallel FBP, 64 slices of 2048^2 from 1800 projections"
$T -q phantom --size 2048 --rows 64 --angles 1800 --out-dir p
for i in 1 2; do
  tm $T recon p/projections.npy --backend cuda --out one$i.npy
  tm mpirun -n 2 $T recon p/projections.npy --backend cuda --out two$i.npy
  tm mpirun -n 4 $T recon p/projections.npy --backend cuda --out four$i.npy
done
cmpf one1.npy two1.npy; cmpf one1.npy four1.npy; cmpf one1.npy one2.npy
echo "== tooth.h5 (DXchange), --center auto, GPU"
tm $T recon $repo/crates/tomors-io/tests/data/tooth.h5 --center auto --backend cuda --out t1.npy
tm mpirun -n 2 $T recon $repo/crates/tomors-io/tests/data/tooth.h5 --center auto --backend cuda --out t2.npy
cmpf t1.npy t2.npy
echo "== cone FDK 256^3 from 360 projections"
C="--geometry cone --sod 800 --odd 400 --pixel-size 1.5"
$T -q phantom $C --size 256 --angles 360 --out-dir c
tm $T recon c/projections.npy $C --backend cuda --out f1.npy
tm mpirun -n 2 $T recon c/projections.npy $C --backend cuda --out f2.npy
tm $T recon c/projections.npy $C --backend cpu --out f0.npy
cmpf f1.npy f2.npy; cmpf f0.npy f2.npy
echo "== a failing rank on the GPU"
TOMORS_MPI_FAIL_RANK=1 mpirun -n 2 $T recon p/projections.npy --backend cuda --out fail.npy 2>&1 | grep -E "^error" ; echo "rc=${PIPESTATUS[0]}"; ls -a /tmp | grep -E "fail|partial" || echo "nothing left"
fi
[[ $part == shared ]] && exit 0
# One rank per GPU: the rank's GPU is its local rank (each rank logs its
# device under TOMORS_LOG=info); against one process on GPU 0 and one
# process on every GPU (--devices 0,1).
tmr() { local t0=$(date +%s.%N); "$@" > /tmp/last.log 2>&1; local rc=$?; local t1=$(date +%s.%N); sed 's/\x1b\[[0-9;]*m//g' /tmp/last.log | grep -E "wrote|error|rank [0-9]+: |backend:|reconstructed|rank 0 on|on [0-9]+ ranks \(z-slabs" | sed 's/^.*\(INFO\|WARN\|ERROR\) //' | head -7; echo "  rc=$rc wall $(python3 -c "print('%.2f s' % ($t1 - $t0))")"; }
echo "== one rank per GPU ($ngpu GPUs)"
if (( ngpu < 2 )); then
  echo "skipping: $ngpu GPU; one rank per GPU needs at least 2"
  exit 0
fi
export TOMORS_LOG=info
rm -rf pm cm g[12]_[12].npy r2_[12].npy h[12]_[12].npy s2_[12].npy
echo "-- cone FDK 512^3 from 720 projections"
C="--geometry cone --sod 800 --odd 400 --pixel-size 1.5"
$T -q phantom $C --size 512 --angles 720 --out-dir cm
for i in 1 2; do
  echo "run $i: one process, GPU 0"; tmr $T recon cm/projections.npy $C --backend cuda --devices 0 --out h1_$i.npy
  echo "run $i: one process, GPUs 0,1"; tmr $T recon cm/projections.npy $C --backend cuda --devices 0,1 --out h2_$i.npy
  echo "run $i: mpirun -n 2, one rank per GPU"; tmr mpirun -n 2 $T recon cm/projections.npy $C --backend cuda --out s2_$i.npy
done
cmpf h1_1.npy h2_1.npy; cmpf h1_1.npy s2_1.npy; cmpf h2_1.npy s2_2.npy
echo "-- parallel FBP, 64 slices of 2048^2 from 1800 projections"
$T -q phantom --size 2048 --rows 64 --angles 1800 --out-dir pm
for i in 1 2; do
  echo "run $i: one process, GPU 0"; tmr $T recon pm/projections.npy --backend cuda --devices 0 --out g1_$i.npy
  echo "run $i: one process, GPUs 0,1"; tmr $T recon pm/projections.npy --backend cuda --devices 0,1 --out g2_$i.npy
  echo "run $i: mpirun -n 2, one rank per GPU"; tmr mpirun -n 2 $T recon pm/projections.npy --backend cuda --out r2_$i.npy
done
cmpf g1_1.npy g2_1.npy; cmpf g1_1.npy r2_1.npy; cmpf g2_1.npy r2_2.npy
