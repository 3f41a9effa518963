#!/usr/bin/env bash
# Packs what the pytest suite of crates/tomors-py and the overhead
# measurement need on the GPU machine (Python 3.12 with numpy, pytest,
# scipy, h5py, tqdm and CuPy already installed; no Rust, no network) into
# DEST (default .pydevice/):
#   wheels/  the abi3 tomors wheel (maturin build --release);
#   bin/examples/fbp_timing.xz  the Rust side of the overhead measurement;
#   bin/foreign_gpu.xz  tomors-cuda's test of the device-to-device accessors;
#   bin/tomors.xz  with WITH_CLI=1: the CLI (test_cli_equal.py compares with
#            it; skipped without it): CPU-only equalities, left out by default
#            to keep the pack small (xz-compressed, unpacked by run.sh);
#   tests/   a copy of crates/tomors-py/tests (the machine may run another
#            checkout's files), scripts/python_overhead.py;
#   run.sh   installs the wheel into /tmp/site, runs pytest with
#            TOMORS_REQUIRE_GPU=1 (GPU tests fail instead of skipping), then
#            scripts/python_overhead.py ROWS REPS on cpu and cuda; writes
#            only under /tmp (kernel and tuning caches too), prints
#            everything to stdout. `run.sh pytest [ARGS]` or
#            `run.sh overhead ROWS REPS cpu|cuda` runs one part.
# Run here after `. scripts/setup.sh`; then on the GPU machine
# `bash DEST/run.sh` (from any directory).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
pack="${1:-.pydevice}"
if [ "$pack" = .pydevice ]; then
  grep -qx '/.pydevice/' "$(git rev-parse --git-path info/exclude)" 2>/dev/null \
    || echo /.pydevice/ >> "$(git rev-parse --git-path info/exclude)"
fi
rm -rf "$pack"
mkdir -p "$pack/wheels" "$pack/bin/examples" "$pack/tests"
py=python3
if [ -x "$CARGO_TARGET_DIR/python-venv/bin/python" ]; then py="$CARGO_TARGET_DIR/python-venv/bin/python"; fi
"$py" -m maturin --version >/dev/null 2>&1 || "$py" -m pip install --quiet --disable-pip-version-check maturin
"$py" -m maturin build --release --quiet -m crates/tomors-py/Cargo.toml -o "$pack/wheels"
cargo build --release --quiet -p tomors-py --example fbp_timing
cp "$CARGO_TARGET_DIR/release/examples/fbp_timing" "$pack/bin/examples/fbp_timing"
# The GPU test of tomors-cuda's device-to-device accessors.
exe=$(cargo test --release -p tomors-cuda --test foreign_gpu --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
cp "$exe" "$pack/bin/foreign_gpu"
bins="$pack/bin/examples/fbp_timing $pack/bin/foreign_gpu"
if [ -n "${WITH_CLI:-}" ]; then
  cargo build --release --quiet --bin tomors
  cp "$CARGO_TARGET_DIR/release/tomors" "$pack/bin/tomors"
  bins="$bins $pack/bin/tomors"
fi
strip $bins 2>/dev/null || true
# xz-compressed (a third of the size); run.sh unpacks them with Python's lzma.
for f in $bins; do
  python3 -c 'import lzma, sys; open(sys.argv[1] + ".xz", "wb").write(lzma.compress(open(sys.argv[1], "rb").read(), preset=6))' "$f"
  rm "$f"
done
cp crates/tomors-py/tests/*.py "$pack/tests/"
cp scripts/python_overhead.py "$pack/"
cat > "$pack/run.sh" <<'RUN'
#!/usr/bin/env bash
# The tomors Python suite and overhead measurement on the GPU machine (see
# scripts/python-device-pack.sh). Writes only under /tmp.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TOMORS_REQUIRE_GPU="${TOMORS_REQUIRE_GPU:-1}"
export TOMORS_CUDA_CACHE=/tmp/tomors-py-cuda-cache TOMORS_TUNING_FILE=/tmp/tomors-py-tuning.tsv
export XDG_CACHE_HOME=/tmp/tomors-py-xdg HOME="${HOME:-/tmp}"
# The tests look for the CLI and the example under $CARGO_TARGET_DIR/release.
mkdir -p /tmp/tomors-py-target/release/examples
for f in tomors examples/fbp_timing foreign_gpu; do
  [ -e "$here/bin/$f.xz" ] || continue
  python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.decompress(open(sys.argv[1], "rb").read()))' \
    "$here/bin/$f.xz" "/tmp/tomors-py-target/release/$f" || exit 2
  chmod +x "/tmp/tomors-py-target/release/$f"
done
export CARGO_TARGET_DIR=/tmp/tomors-py-target
export PYTHONDONTWRITEBYTECODE=1
python3 -c 'import numpy' || { echo "run.sh: this python3 has no numpy" >&2; exit 2; }
rm -rf /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target /tmp/site "$here"/wheels/*.whl || exit 2
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# As in a checkout (conftest.py finds the repository three levels up).
tests=/tmp/tomors-py-repo/crates/tomors-py/tests
rm -rf /tmp/tomors-py-repo && mkdir -p "$(dirname "$tests")" && cp -r "$here/tests" "$tests"
part="${1:-all}"
[ $# -gt 0 ] && shift
rc=0
if [ "$part" = all ] || [ "$part" = pytest ]; then
  echo "## $(date -u +%FT%TZ) pytest (TOMORS_REQUIRE_GPU=$TOMORS_REQUIRE_GPU)"
  nvidia-smi -L 2>/dev/null || true
  python3 -c 'import sys, numpy, tomors, json; print("python", sys.version.split()[0], "numpy", numpy.__version__, "tomors", tomors.__version__, json.dumps(tomors.devices()))'
  python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -1
  (cd "$tests/.." && timeout 80 python3 -m pytest -q -s -rs -p no:cacheprovider tests "$@") || rc=$?
  echo "## pytest exit $rc"
  if [ -x /tmp/tomors-py-target/release/foreign_gpu ]; then
    echo "## $(date -u +%FT%TZ) tomors-cuda test foreign_gpu"
    timeout 30 /tmp/tomors-py-target/release/foreign_gpu --test-threads=1 || rc=$?
  fi
fi
overhead() {
  echo "## $(date -u +%FT%TZ) python_overhead.py $*"
  timeout 40 python3 "$here/python_overhead.py" "$@" || echo "## overhead $* exit $?"
}
if [ "$part" = all ]; then
  overhead 32 10 cpu
  overhead 32 10 cuda
elif [ "$part" = overhead ]; then
  overhead "$@"
fi
exit $rc
RUN
chmod +x "$pack/run.sh"
du -sh "$pack"
size=$(du -sm "$pack" | cut -f1)
if [ "$size" -gt 12 ]; then
  echo "python-device-pack: $pack is $size MiB (> 12 MiB)" >&2
  exit 1
fi
ls -la "$pack/wheels" "$pack/bin"
