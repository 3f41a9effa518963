#!/usr/bin/env bash
# Installs what the MPI build of tomors needs on a fresh Debian 12 machine
# (run as root, or with sudo available):
#   - MPICH with its headers and mpirun (libmpich-dev, mpich). MPICH is the
#     choice here: its launcher (Hydra) runs as root and oversubscribes
#     cores without extra flags, where Open MPI needs --allow-run-as-root
#     (or OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1) and
#     --oversubscribe;
#   - libclang and clang, which the mpi crate's build (bindgen) uses to read
#     the MPI headers; pkg-config, which finds the MPI library.
# Then: cargo build --release -p tomors-cli --features mpi
set -euo pipefail
need=()
command -v mpirun >/dev/null 2>&1 || need+=(mpich)
[ -e /usr/include/x86_64-linux-gnu/mpich/mpi.h ] || [ -e /usr/include/mpich/mpi.h ] \
  || ls /usr/include/*/mpich/mpi.h >/dev/null 2>&1 || need+=(libmpich-dev)
# libclang itself (libclang.so*, libclang-NN.so*), not libclang-cpp, which
# clang's other packages bring and bindgen cannot use.
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ls /usr/lib/*/libclang-[0-9]*.so* >/dev/null 2>&1 \
  || need+=(libclang-dev clang)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-mpi: installing ${need[*]}" >&2
  sudo_=""
  [ "$(id -u)" -eq 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
fi
mpirun --version 2>/dev/null | head -2 >&2 || true
