#!/usr/bin/env bash
# Packs what the pytest suite of crates/tomors-py needs on the GPU machine
# (Python 3.12 with numpy and CuPy, no Rust, no network) into .pydevice/:
#   wheels/  the abi3 tomors wheel (maturin build --release) and pytest with
#            its dependencies (iniconfig, pluggy, packaging, pygments) for cp312
#            manylinux x86-64;
#   target/release/tomors  the CLI binary (test_cli_equal.py compares with it);
#   target/release/examples/fbp_timing  the Rust side of the overhead check;
#   run.sh   installs the wheels into /tmp/site and runs pytest with
#            TOMORS_REQUIRE_GPU=1 (GPU tests fail instead of skipping);
#            `run.sh overhead [ROWS REPS cpu|cuda]` runs
#            scripts/python_overhead.py instead.
# numpy is the GPU machine's own (its CuPy needs it); scipy, h5py and tqdm
# are left out to keep the pack small (their tests are skipped with a
# reason). Run here after `. scripts/setup.sh`; then on the GPU machine,
# from the repository root: `bash .pydevice/run.sh` (extra args go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
pack=.pydevice
grep -qx '/.pydevice/' .git/info/exclude 2>/dev/null || echo /.pydevice/ >> "$(git rev-parse --git-path info/exclude)"
rm -rf "$pack"
mkdir -p "$pack/wheels" "$pack/target/release"
py=python3
if [ -x "$CARGO_TARGET_DIR/python-venv/bin/python" ]; then py="$CARGO_TARGET_DIR/python-venv/bin/python"; fi
command -v maturin >/dev/null || "$py" -m pip install --quiet --disable-pip-version-check maturin
maturin build --release --quiet -m crates/tomors-py/Cargo.toml -o "$pack/wheels"
cargo build --release --quiet --bin tomors
cargo build --release --quiet -p tomors-py --example fbp_timing
mkdir -p "$pack/target/release/examples"
cp "$CARGO_TARGET_DIR/release/examples/fbp_timing" "$pack/target/release/examples/"
strip "$pack/target/release/examples/fbp_timing" 2>/dev/null || true
cp "$CARGO_TARGET_DIR/release/tomors" "$pack/target/release/tomors"
strip "$pack/target/release/tomors" 2>/dev/null || true
"$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$pack/wheels" pytest iniconfig pluggy packaging pygments
cat > "$pack/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the tomors pytest suite on the GPU machine (see scripts/python-device-pack.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
python3 -c 'import numpy' || { echo "run.sh: this python3 has no numpy" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$here"/wheels/*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# NVRTC and cuFFT are loaded at run time.
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export CARGO_TARGET_DIR="$here/target"
export TOMORS_REQUIRE_GPU="${TOMORS_REQUIRE_GPU:-1}"
if [ "${1:-}" = overhead ]; then
  shift
  exec python3 "$repo/scripts/python_overhead.py" "$@"
fi
cd "$repo/crates/tomors-py"
python3 -c 'import tomors, json; print("tomors", tomors.__version__, json.dumps(tomors.devices()))'
python3 -m pytest -q -rs -p no:cacheprovider tests "$@"
RUN
chmod +x "$pack/run.sh"
du -sh "$pack"
size=$(du -sm "$pack" | cut -f1)
if [ "$size" -gt 60 ]; then
  echo "python-device-pack: $pack is $size MiB (> 60 MiB)" >&2
  exit 1
fi
ls -la "$pack/wheels"
