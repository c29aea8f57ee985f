"""Consolidating a directory checkpoint into one file and back stays in bounded
anonymous memory (docs/formats/dcp.md "Reading", docs/limits.md): tensors of several
DCP chunks are assembled in scratch files (io/scratch.h), every other tensor is a view
of its mapped file. Measured: the peak RssAnon of the `tseal` process, sampled from
/proc every 2 ms, must stay under 64 MiB + one chunk while it moves 384 MiB."""
from __future__ import annotations

import pathlib
import subprocess
import threading
import time

import pytest
import torch

from conftest import tseal_bin

MIB = 1 << 20
CHUNK = 32 * MIB  # a 128 MiB tensor over 4 ranks


def peak_anon(argv: list) -> tuple[int, subprocess.CompletedProcess]:
    p = subprocess.Popen([tseal_bin(), *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        status = pathlib.Path(f"/proc/{p.pid}/status")
        while p.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("RssAnon:"):
                        peak[0] = max(peak[0], int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            time.sleep(0.002)

    t = threading.Thread(target=sample)
    t.start()
    out, err = p.communicate(timeout=600)
    t.join()
    return peak[0], subprocess.CompletedProcess(argv, p.returncode, out, err)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("dirmem")
    g = torch.Generator().manual_seed(5)
    sd = {f"layer{i}.weight": torch.randn(32 * 1024, 1024, generator=g) for i in range(3)}  # 3 x 128 MiB
    torch.save(sd, d / "src.pt")
    return d


def run_bounded(argv: list) -> str:
    peak, r = peak_anon(argv)
    assert r.returncode == 0, r.stderr
    assert 0 < peak <= 64 * MIB + CHUNK, f"{argv[0]}: peak anonymous memory {peak / MIB:.1f} MiB"
    return r.stdout


def test_dcp_and_shards_to_one_file_and_back_in_bounded_memory(big):
    src = big / "src.pt"
    want = run_bounded(["hash", src]).split()[0]
    run_bounded(["convert", src, big / "dcp", "--world-size", "4"])
    assert run_bounded(["hash", big / "dcp"]).split()[0] == want  # 3 tensors of 4 chunks each
    run_bounded(["convert", big / "dcp", big / "one.safetensors"])
    run_bounded(["convert", big / "dcp", big / "one.pt"])
    run_bounded(["convert", src, big / "shards", "--shards", "200MB"])
    run_bounded(["convert", big / "shards", big / "two.safetensors"])
    for f in ("one.safetensors", "one.pt", "two.safetensors", "shards"):
        assert run_bounded(["hash", big / f]).split()[0] == want, f
