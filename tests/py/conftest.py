"""Shared pytest fixtures: the tseal binary, temp dirs, torch 1.13 interpreter."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tseal_bin() -> str:
    env = os.environ.get("TSEAL_BIN")
    if env:
        return env
    built = ROOT / "build" / "tseal"
    if built.exists():
        return str(built)
    found = shutil.which("tseal")
    assert found, "tseal binary not found: run `make build` or set TSEAL_BIN"
    return found


@pytest.fixture(scope="session")
def tseal() -> str:
    return tseal_bin()


def run_tseal(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([tseal_bin(), *map(str, args)], capture_output=True, text=True, check=check)


@pytest.fixture(scope="session")
def old_python() -> str:
    """Debian's /usr/bin/python3 with torch 1.13 (installed by `make setup`)."""
    py = "/usr/bin/python3"
    out = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("1.13"), f"torch 1.13 missing: {out.stderr[-300:]}"
    return py


def vectors_dir() -> pathlib.Path:
    """The seed's two byte strings, kept in the repository."""
    return ROOT / "tests" / "fixtures" / "vectors"
