"""Shared pytest fixtures: the tseal binary, temp dirs, torch 1.13 interpreter."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import warnings

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


def assert_refused(path, rule: str, what: str) -> None:
    """tensorseal.load refuses `path` with "[rule] what: ..." and `tseal inspect` exits 2
    naming the rule and the file."""
    import re

    import tensorseal
    with pytest.raises(tensorseal.Error, match=re.escape(f"[{rule}] {what}: ")):
        tensorseal.load(path)
    r = run_tseal("inspect", path)
    assert r.returncode == 2 and rule in r.stderr and str(path) in r.stderr


def assert_saved_in_torchs_form(obj, theirs, mine, tmp_path, sharded: bool = False) -> None:
    """`theirs` is torch.save(obj), `mine` tensorseal.torch.save(obj): torch's file
    canonicalised is `mine` byte for byte, all three hash alike, and what tensorseal
    loads from torch's file saves back to the same bytes. `sharded`: obj holds one
    rank's DTensors, whose in-memory hash tensorseal.hash refuses (the files hash as
    what they hold: that rank's parts)."""
    import tensorseal
    import tensorseal.torch
    canon, back = tmp_path / "canon.pt", tmp_path / "back.pt"
    assert run_tseal("canon", theirs, "-o", canon).returncode == 0
    assert canon.read_bytes() == mine.read_bytes()
    assert tensorseal.hash(mine) == tensorseal.hash(theirs)
    if sharded:
        with pytest.raises(tensorseal.InvalidArgumentError, match="tensorseal.dcp.content_hash"):
            tensorseal.hash(obj)
    else:
        assert tensorseal.hash(obj) == tensorseal.hash(theirs)
    tensorseal.torch.save(tensorseal.load(theirs), back)
    assert back.read_bytes() == mine.read_bytes()


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


DCP_PRODUCER = pathlib.Path(__file__).parent / "producers" / "dcp_save.py"


def run_ranks(script: pathlib.Path, out: pathlib.Path, world: int, *args: str) -> None:
    """Runs `script OUT ARGS...` as one plain process (world 1) or under torchrun with
    `world` ranks (gloo, CPU), writing into the empty folder `out`."""
    if world == 1:
        cmd = [sys.executable, str(script), str(out), *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world), "--standalone",
               str(script), str(out), *args]
    # PYTHONFAULTHANDLER: a rank that dies on a signal prints every thread's Python stack.
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    # A rank of these jobs has aborted (SIGABRT, "terminate called without an active
    # exception", during FSDP2 training under gloo) now and then in CI on this loaded
    # 2-core machine, not reproduced in 14 runs under load by hand: such a crash of
    # the producer, not a failed assertion in it, is retried twice at most, and reported
    # as a warning with the crashed rank's stacks.
    for attempt in (1, 2, 3):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        crashed = "Signal 6 (SIGABRT)" in r.stderr or "Signal 11 (SIGSEGV)" in r.stderr or r.returncode < 0
        if r.returncode == 0 or not crashed or attempt == 3:
            break
        warnings.warn(f"{script.name} crashed (attempt {attempt}), retried:\n{r.stderr[-6000:]}")
        shutil.rmtree(out)
        out.mkdir()
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="session")
def dcp_saved(tmp_path_factory) -> dict[int, pathlib.Path]:
    """Real torch.distributed.checkpoint saves (producers/dcp_save.py) in one process and
    under torchrun with 2 and 4 ranks: world size -> folder with the producer's directories (see dcp_save.py)."""
    out = {}
    for world in (1, 2, 4):
        d = tmp_path_factory.mktemp(f"dcp_w{world}")
        run_ranks(DCP_PRODUCER, d, world)
        out[world] = d
    return out


