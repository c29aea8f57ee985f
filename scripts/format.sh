#!/usr/bin/env bash
# Rewraps, with .clang-format (Google style, 120 columns), every line of C++ source
# longer than 120 columns, and only those: the code around them keeps its layout.
# Usage: scripts/format.sh [FILE...]   (default: every tracked C++ file)
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-.venv/bin/clang-format}
files=("$@")
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'cli/*.cc' 'cli/*.h' 'include/*.h' 'python/src/*.cc' \
    'python/src/*.h' 'tests/cpp/*.cc' 'tests/cpp/*.h' 'fuzz/*.cc' 'fuzz/*.h')
fi
for f in "${files[@]}"; do
  lines=$(awk 'length > 120 { printf " --lines=%d:%d", FNR, FNR }' "$f")
  if [ -n "$lines" ]; then
    # shellcheck disable=SC2086
    "$CLANG_FORMAT" -i $lines "$f"
    echo "formatted $f"
  fi
done
