#!/usr/bin/env bash
# Sanitizer builds of the test suite.
#
#   scripts/sanitize.sh [address|thread|all]     (default: address)
#
# address: build-asan/, every library, CLI and test source with
#          -fsanitize=address,undefined (clang-14 when present, else the default
#          compiler), then the whole ctest suite there: fixture generators (real
#          torch/safetensors/numpy under the venv python, not instrumented) and every
#          GoogleTest case. Leaks are errors; any UBSan report aborts the test.
#          Skipped: install_consumer (a plain consumer cannot link an ASan-built library).
#          With clang the tree also holds the libFuzzer targets (TENSORSEAL_FUZZ, a
#          static library): scripts/fuzz.sh with FUZZ_BUILD=build-asan reuses its
#          objects instead of compiling the library a third time.
# thread:  build-tsan/, -fsanitize=thread, the library and tensorseal_thread_tests
#          (tests/cpp/concurrency_test.cc and streamed_write_test.cc, its writer
#          thread); runs the fixture generators those tests need, then every test in
#          it under ThreadSanitizer: any report fails.
# Both trees compile the library as a unity build (TENSORSEAL_UNITY) and keep line
# tables only for debug info: a sanitizer report still names file and line, and the
# library compiles in about half the time.
# env: JOBS (build jobs, default 2), NICE (default 10), CC/CXX.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-address}
JOBS=${JOBS:-2}
NICE=${NICE:-10}
CMAKE=.venv/bin/cmake; [ -x "$CMAKE" ] || CMAKE=cmake
CTEST=.venv/bin/ctest; [ -x "$CTEST" ] || CTEST=ctest
if [ -z "${CXX:-}" ] && command -v clang++-14 >/dev/null; then export CC=clang-14 CXX=clang++-14; fi

configure() {  # dir sanitize extra-args...
  local dir=$1 san=$2 lines=-g1
  shift 2
  [[ "${CXX:-}" == *clang* ]] && lines=-gline-tables-only
  "$CMAKE" -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORSEAL_SANITIZE="$san" \
    -DTENSORSEAL_UNITY=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $lines -DNDEBUG" -DTENSORSEAL_PYTHON=OFF \
    "$@" >/dev/null
}

# ThreadSanitizer (clang 14) cannot map its shadow memory when the kernel randomises
# mmap with more bits than it expects; running without ASLR avoids that.
no_aslr() {
  if setarch "$(uname -m)" -R true 2>/dev/null; then setarch "$(uname -m)" -R "$@"; else "$@"; fi
}

run_address() {
  local fuzz=(-DTENSORSEAL_FUZZ=OFF) targets=(all)
  [[ "${CXX:-}" == *clang* ]] && fuzz=(-DTENSORSEAL_FUZZ=ON -DTENSORSEAL_SHARED=OFF) targets=(all fuzz_all)
  configure build-asan address,undefined -DTENSORSEAL_TESTS=ON -DTENSORSEAL_CLI=ON "${fuzz[@]}"
  nice -n "$NICE" "$CMAKE" --build build-asan -j "$JOBS" --target "${targets[@]}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  (cd build-asan && nice -n "$NICE" "../$CTEST" --output-on-failure -j "$JOBS" -E '^install_consumer$')
  echo "sanitize address: ctest passed under ASan+UBSan (build-asan/)"
}

run_thread() {
  configure build-tsan thread -DTENSORSEAL_TESTS=ON -DTENSORSEAL_CLI=OFF -DTENSORSEAL_FUZZ=OFF
  nice -n "$NICE" "$CMAKE" --build build-tsan -j "$JOBS" --target tensorseal_thread_tests
  (cd build-tsan && "../$CTEST" --output-on-failure -R '^fixture_gen_(torch|torch_t113|safetensors|numpy|numpy_t113)$')
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:exitcode=66}
  TENSORSEAL_FIXTURES=$PWD/build-tsan/fixtures no_aslr nice -n "$NICE" build-tsan/tensorseal_thread_tests
  echo "sanitize thread: tensorseal_thread_tests passed under TSan with no reports (build-tsan/)"
}

case "$MODE" in
  address) run_address ;;
  thread) run_thread ;;
  all) run_address; run_thread ;;
  *) echo "usage: $0 [address|thread|all]" >&2; exit 2 ;;
esac
