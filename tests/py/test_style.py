"""The house style that a machine can check: no line of C++ source (library, CLI, public
headers, Python binding, C++ tests, fuzzers) is longer than 120 columns, the limit
.clang-format sets (`make format` rewraps such lines)."""
from __future__ import annotations

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT = 120
PATTERNS = ["src/*.cc", "src/*.h", "cli/*.cc", "cli/*.h", "include/*.h", "python/src/*.cc", "python/src/*.h",
            "tests/cpp/*.cc", "tests/cpp/*.h", "fuzz/*.cc", "fuzz/*.h"]


def cpp_files() -> list:
    out = subprocess.run(["git", "ls-files", *PATTERNS], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / f for f in out.stdout.split()]


def test_clang_format_sets_the_limit():
    text = (ROOT / ".clang-format").read_text()
    assert re.search(rf"^ColumnLimit:\s*{LIMIT}\s*$", text, re.M), text


def test_no_cpp_line_is_longer_than_the_limit():
    files = cpp_files()
    assert len(files) > 100  # the patterns still find the tree
    long = [f"{f.relative_to(ROOT)}:{n}: {len(line)} columns"
            for f in files for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if len(line) > LIMIT]
    assert long == [], "\n".join(long[:40])
