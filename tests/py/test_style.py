"""The house style that a machine can check: every C++ source file (library, CLI, public
headers, Python binding, C++ tests, fuzzers) is as clang-format (the version `make setup`
pins) formats it with .clang-format, and no line is longer than 120 columns, the limit
.clang-format sets (`make format` formats the tree)."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

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


def clang_format() -> str:
    """The pinned clang-format of the venv (scripts/setup.sh), not whatever is on PATH:
    another version formats differently."""
    exe = pathlib.Path(sys.executable).parent / "clang-format"
    found = str(exe) if exe.exists() else shutil.which("clang-format")
    assert found, "clang-format is not installed (make setup installs it)"
    return found


def test_every_cpp_file_is_clang_formatted():
    files = cpp_files()
    r = subprocess.run([clang_format(), "--dry-run", "--Werror", *map(str, files)], cwd=ROOT,
                       capture_output=True, text=True)
    unformatted = sorted({line.split(":")[0] for line in r.stderr.splitlines() if ": error:" in line})
    assert r.returncode == 0 and unformatted == [], "not clang-formatted (run make format):\n" + "\n".join(
        unformatted[:40]) + r.stderr[-2000:]


# A function defined at column 0 (namespace scope: the tree does not indent namespaces),
# with its name as the group.
_DEFINITION = re.compile(r"^(?:template\s*<.*>\s*)?(?:static\s+|inline\s+|constexpr\s+|\[\[\w+\]\]\s+)*"
                         r"(?!return\b|else\b|namespace\b|using\b|struct\b|class\b|enum\b)"
                         r"[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\s*\(")


def file_local_functions(path: pathlib.Path) -> set:
    """Names of the functions `path` defines with internal linkage: in an anonymous
    namespace or `static` at namespace scope."""
    names, anonymous = set(), 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^namespace\s*\{", line):
            anonymous += 1
        elif anonymous and re.match(r"^\}\s*//\s*namespace\s*$", line):
            anonymous -= 1
        elif (m := _DEFINITION.match(line)) and (anonymous or line.startswith("static ")):
            names.add(m.group(1))
    return names


def test_no_file_local_function_name_is_in_two_library_files():
    """The library compiles as a unity build (CMakeLists.txt, TENSORSEAL_UNITY): 16
    files share one translation unit and one anonymous namespace. Two files' helpers of
    one name with different parameters would be one overload set there, and a call could
    bind to the other file's helper without a diagnostic. So no two library files define
    file-local functions of the same name (the same signature twice would not compile)."""
    where: dict = {}
    for f in (p for p in cpp_files() if p.suffix == ".cc" and p.relative_to(ROOT).parts[0] == "src"):
        for name in file_local_functions(f):
            where.setdefault(name, []).append(str(f.relative_to(ROOT)))
    assert sum(len(v) for v in where.values()) > 200  # the pattern still finds the helpers
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert twice == {}, twice
