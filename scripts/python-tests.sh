#!/usr/bin/env bash
# Builds and installs the Python package (crates/tomors-py, through maturin
# as the PEP 517 backend) into a virtual environment under target/, then runs
# its pytest suite. Run after `. scripts/setup.sh` (CMake for libhdf5); .ci/run
# and the README's test command call it after the cargo tests.
#
# The build reuses the workspace's target/ (cargo's release artefacts of the
# cargo tests), so only the extension module itself is compiled here.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$CARGO_TARGET_DIR/python-venv"
if [ ! -x "$venv/bin/python" ]; then
  # --system-site-packages: reuse numpy/scipy already installed on the machine.
  python3 -m venv --system-site-packages "$venv" || rm -rf "$venv"
fi
if [ -x "$venv/bin/python" ]; then
  py="$venv/bin/python"
else
  # No venv module (Debian without python3-venv): the interpreter's own site.
  echo "python-tests: no venv available; installing into $(command -v python3)" >&2
  py=python3
  export PIP_ROOT_USER_ACTION=ignore
fi
"$py" -m pip install --quiet --disable-pip-version-check maturin numpy pytest scipy h5py tqdm
# maturin's PEP 517 hooks run the `maturin` executable: the venv's, on PATH.
export PATH="$(dirname "$py"):$PATH"
# No build isolation: maturin comes from the venv (no second download).
"$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./crates/tomors-py
"$py" -c 'import tomors; print("tomors", tomors.__version__, "for Python from", tomors.__file__)'
set +e
(cd crates/tomors-py && "$py" -m pytest -q -rs tests)
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "python-tests: pytest collected no tests (crates/tomors-py/tests missing?)" >&2
fi
exit "$rc"
