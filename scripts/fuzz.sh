#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs each for
# SECONDS seconds from its seed corpus (fuzz/corpus/<name>/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default: 30 s, every fuzz/*_fuzz.cc)
#   env: FUZZ_JOBS    targets run at once (default 1)
#        FUZZ_OUT     working corpora, logs, crash artifacts (default fuzz/out/)
#        FUZZ_NICE    nice level (default 10)
#        FUZZ_RUNS    also stop a target after this many executions (default: no cap);
#                     the long runs use FUZZ_RUNS=10000000 with SECONDS=1800
#        FUZZ_BUILD   build tree (default build-fuzz/, configured here when absent);
#                     `make test` passes build-asan/, which scripts/sanitize.sh
#                     configures with the fuzz targets (same sanitizers)
#        CC/CXX       compilers (default clang-14 / clang++-14, else clang / clang++)
#
# First every file in fuzz/regressions/<name>/ is replayed through its target (inputs
# that once crashed must stay fixed). Then each target fuzzes; new corpus entries go to
# FUZZ_OUT/<name>/corpus (never into the checked-in seeds), crashes to
# FUZZ_OUT/<name>/crash-*. Prints one line per target (execs, exec/s, cov, ft, crash?)
# and exits 1 if any target crashed, leaked, timed out or failed a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
OUT=${FUZZ_OUT:-fuzz/out}
JOBS=${FUZZ_JOBS:-1}
NICE=${FUZZ_NICE:-10}
RUNS=${FUZZ_RUNS:--1}
BUILD=${FUZZ_BUILD:-build-fuzz}
CMAKE=.venv/bin/cmake; [ -x "$CMAKE" ] || CMAKE=cmake

if [ -z "${CXX:-}" ]; then
  if command -v clang++-14 >/dev/null; then export CC=clang-14 CXX=clang++-14; else export CC=clang CXX=clang++; fi
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  "$CMAKE" -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTENSORSEAL_FUZZ=ON -DTENSORSEAL_SANITIZE=address,undefined \
    -DTENSORSEAL_SHARED=OFF -DTENSORSEAL_TESTS=OFF -DTENSORSEAL_CLI=OFF -DTENSORSEAL_PYTHON=OFF >/dev/null
fi
nice -n "$NICE" "$CMAKE" --build "$BUILD" -j "${BUILD_JOBS:-2}" --target fuzz_all

if (($# == 0)); then
  set --
  for src in fuzz/*_fuzz.cc; do n=$(basename "$src" .cc); set -- "$@" "${n%_fuzz}"; done
fi

# Leaks are bugs too; halt on the first UBSan report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
mkdir -p "$OUT"
# ---- regressions -------------------------------------------------------------------
for t in "$@"; do
  dir=fuzz/regressions/$t
  [ -d "$dir" ] || continue
  files=("$dir"/*)
  [ -e "${files[0]}" ] || continue
  if ! "$BUILD/fuzz/${t}_fuzz" -runs=1 "${files[@]}" >"$OUT/regress.$t.log" 2>&1; then
    echo "REGRESSION  $t: an input in $dir fails again (log: $OUT/regress.$t.log)"
    status=1
  else
    echo "regressions $t: ${#files[@]} inputs pass"
    rm -f "$OUT/regress.$t.log"
  fi
done

# ---- fuzzing -----------------------------------------------------------------------
run_one() {
  local t=$1 dir=$OUT/$1
  mkdir -p "$dir/corpus"
  local seeds=fuzz/corpus/$t
  [ "$t" = safetensors_index ] && seeds=fuzz/corpus/safetensors_header  # same input shape
  [ -d "$seeds" ] || seeds=""
  nice -n "$NICE" "$BUILD/fuzz/${t}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -runs="$RUNS" -timeout=25 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" $seeds >"$dir/log" 2>&1
}
summary() {
  local t=$1 dir=$OUT/$1 rc=$2
  local execs cov ft rate last
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$dir/log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  local verdict=ok
  if [ "$rc" != 0 ]; then
    verdict="FAILED rc=$rc: $(grep -m1 -E 'ERROR: |SUMMARY: |runtime error' "$dir/log" || true) (log: $dir/log)"
  fi
  printf '%-20s execs=%-10s exec/s=%-6s cov=%-6s ft=%-6s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$verdict"
}

running=0
for t in "$@"; do
  [ -x "$BUILD/fuzz/${t}_fuzz" ] || { echo "no such fuzz target: $t" >&2; exit 2; }
  if ((running >= JOBS)); then wait -n || true; running=$((running - 1)); fi
  ( rc=0; run_one "$t" || rc=$?; echo "$rc" >"$OUT/$t/rc" ) &
  running=$((running + 1))
done
wait
echo "fuzz: $SECONDS_PER_TARGET s per target, ASan+UBSan ($BUILD)"
for t in "$@"; do
  rc=$(cat "$OUT/$t/rc" 2>/dev/null || echo "?")
  summary "$t" "$rc"
  [ "$rc" = 0 ] || status=1
done
exit $status
