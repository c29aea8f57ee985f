#!/usr/bin/env bash
# Formats C++ source with .clang-format (Google style, 120 columns), the pinned
# clang-format of `make setup`; tests/py/test_style.py checks every file is formatted.
# Usage: scripts/format.sh [FILE...]   (default: every tracked C++ file)
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-.venv/bin/clang-format}
files=("$@")
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'cli/*.cc' 'cli/*.h' 'include/*.h' 'python/src/*.cc' \
    'python/src/*.h' 'tests/cpp/*.cc' 'tests/cpp/*.h' 'fuzz/*.cc' 'fuzz/*.h')
fi
"$CLANG_FORMAT" -i "${files[@]}"
