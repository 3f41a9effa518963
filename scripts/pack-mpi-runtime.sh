#!/usr/bin/env bash
# Copies an MPI build of tomors (stripped, as DIR/bin/tomors) with the MPI
# runtime it needs — the launcher (mpiexec.hydra, hydra_pmi_proxy) and the
# shared libraries of the launcher and of the binary, glibc excepted — into
# DIR, and packs DIR as DIR.tar.xz (≈ 12 MB), for a machine of the same OS
# without package access (the GPU machine). There:
#   PATH=DIR/bin:$PATH LD_LIBRARY_PATH=DIR/lib:$LD_LIBRARY_PATH mpirun -n 2 DIR/bin/tomors recon …
# or scripts/mpi-gpu-check.sh DIR.tar.xz (1 vs 2 ranks sharing the GPU).
#
#   cargo build --release -p tomors-cli --features mpi
#   scripts/pack-mpi-runtime.sh DIR [BINARY]      (BINARY: target/release/tomors)
set -euo pipefail
dir=${1:?usage: scripts/pack-mpi-runtime.sh DIR [BINARY]}
bin=${2:-target/release/tomors}
mkdir -p "$dir/bin" "$dir/lib"
cp "$bin" "$dir/bin/tomors" && strip "$dir/bin/tomors"
for exe in mpiexec.hydra hydra_pmi_proxy; do
  cp -L "$(command -v "$exe")" "$dir/bin/"
done
ln -sf mpiexec.hydra "$dir/bin/mpirun"
ln -sf mpiexec.hydra "$dir/bin/mpiexec"
for f in "$bin" "$dir/bin/mpiexec.hydra" "$dir/bin/hydra_pmi_proxy"; do
  ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so*) ;;
      *) cp -Ln "$lib" "$dir/lib/" ;;
    esac
  done
done
tar cJf "$dir.tar.xz" -C "$(dirname "$dir")" "$(basename "$dir")"
du -sh "$dir" "$dir.tar.xz" >&2
