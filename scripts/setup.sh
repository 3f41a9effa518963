# Prepares a fresh machine to build tomors. Source it (". scripts/setup.sh") so
# that the CMake it may install is on PATH for the cargo command that follows.
#
# hdf5-metno (features static + zlib) builds libhdf5 from source with CMake ≥ 3.26;
# Debian 12 ships 3.25, so a newer CMake comes from PyPI when needed.
tomors_need_cmake() {
  command -v cmake >/dev/null 2>&1 || return 0
  tomors_v=$(cmake --version | head -1 | awk '{print $3}')
  [ "$(printf '%s\n3.26\n' "$tomors_v" | sort -V | head -1)" != "3.26" ]
}
if tomors_need_cmake; then
  echo "setup: installing CMake >= 3.26 from PyPI" >&2
  python3 -m pip install --quiet --root-user-action=ignore 'cmake>=3.26' 2>/dev/null \
    || python3 -m pip install --quiet 'cmake>=3.26'
  tomors_bin=$(python3 -c 'import cmake; print(cmake.CMAKE_BIN_DIR)')
  export PATH="$tomors_bin:$PATH"
  export CMAKE="$tomors_bin/cmake"
fi
command -v cargo >/dev/null 2>&1 || echo "setup: cargo is missing (install Rust with rustup)" >&2
true
