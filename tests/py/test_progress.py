"""Progress on long work: the Python callback (every tool, monotone, ends at the
total, an exception stops the work with nothing written), tqdm on request, and the
CLI's bar — drawn on a terminal (run under a real pty), absent when piped or --quiet.
Also the fsync choice (durable=False / --no-fsync) that writes the same bytes."""
from __future__ import annotations

import os
import pty
import select
import subprocess

import pytest
import torch

import tensorseal
from conftest import run_tseal, tseal_bin

MIB = 1 << 20


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A real torch.save file of 10 MiB of tensors, and its safetensors conversion."""
    d = tmp_path_factory.mktemp("progress")
    g = torch.Generator().manual_seed(7)
    sd = {"w": torch.randn(3 * MIB // 4 * 3, generator=g), "b": torch.randn(MIB // 4, generator=g)}
    pt = d / "m.pt"
    torch.save(sd, pt)
    st = d / "m.safetensors"
    tensorseal.save(sd, st)
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    return {"dir": d, "sd": sd, "pt": pt, "st": st, "nbytes": nbytes}


class Calls(list):
    def __call__(self, done: int, total: int) -> None:
        self.append((done, total))

    def check(self, total: int) -> None:
        assert self, "the callback was never called"
        assert all(t == total for _, t in self), "the total changed within one operation"
        dones = [d for d, _ in self]
        assert dones == sorted(dones), "done went backwards"
        assert dones[-1] == total and max(dones) <= total
        assert len(self) <= 514


def test_every_tool_reports_its_bytes(model, tmp_path):
    n = model["nbytes"]
    cases = [
        ("hash file", lambda cb: tensorseal.hash(model["pt"], progress=cb), n),
        ("hash object", lambda cb: tensorseal.hash(model["sd"], progress=cb), n),
        ("verify", lambda cb: tensorseal.verify(model["pt"], progress=cb), n),
        ("inspect", lambda cb: tensorseal.inspect(model["pt"], progress=cb), 2 * n),
        ("is_canonical", lambda cb: tensorseal.is_canonical(model["st"], progress=cb), n),
        ("diff", lambda cb: tensorseal.diff(model["pt"], model["st"], progress=cb), n),
        ("save", lambda cb: tensorseal.save(model["sd"], tmp_path / "a.pt", progress=cb), n),
        ("save shards", lambda cb: tensorseal.save(model["sd"], tmp_path / "sh", max_shard_size="4MB", progress=cb), n),
        ("save dcp", lambda cb: tensorseal.save(model["sd"], tmp_path / "dcp", world_size=2, progress=cb), n),
    ]
    results = {}
    for name, run, total in cases:
        calls = Calls()
        results[name] = run(calls)
        calls.check(total)
        assert len(calls) > 1, f"{name}: the bar never moved between 0 and the end"
    # Progress never changes a result.
    assert results["hash file"] == tensorseal.hash(model["pt"]) == results["hash object"]
    assert results["verify"]["ok"] and results["is_canonical"]
    assert tensorseal.hash(tmp_path / "sh") == tensorseal.hash(tmp_path / "dcp") == results["hash file"]


def test_an_exception_in_the_callback_stops_the_work(model, tmp_path):
    def stop(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tensorseal.hash(model["pt"], progress=stop)
    for target in (tmp_path / "x.pt", tmp_path / "x.safetensors"):
        with pytest.raises(KeyboardInterrupt):
            tensorseal.save(model["sd"], target, progress=stop)
    with pytest.raises(KeyboardInterrupt):
        tensorseal.save(model["sd"], tmp_path / "shards", max_shard_size="4MB", progress=stop)
    assert os.listdir(tmp_path) == [], "a stopped write left something behind"


def test_progress_true_draws_tqdm_and_bad_values_are_refused(model, capsys):
    import tqdm  # noqa: F401  (installed by make setup: huggingface_hub needs it)
    h = tensorseal.hash(model["pt"], progress=True)
    assert h == tensorseal.hash(model["pt"])
    err = capsys.readouterr().err
    assert "hashing" in err and "100%" in err and "10.0M/10.0M" in err, err
    with pytest.raises(tensorseal.Error, match="progress must be"):
        tensorseal.hash(model["pt"], progress="yes")


def test_durable_false_writes_the_same_bytes(model, tmp_path):
    tensorseal.save(model["sd"], tmp_path / "d.pt")
    tensorseal.save(model["sd"], tmp_path / "n.pt", durable=False)
    assert (tmp_path / "d.pt").read_bytes() == (tmp_path / "n.pt").read_bytes()
    r = run_tseal("canon", model["pt"], "-o", tmp_path / "c.pt", "--no-fsync")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "c.pt").read_bytes() == (tmp_path / "d.pt").read_bytes()


def run_on_pty(*args) -> tuple[int, str, str]:
    """Runs tseal with stderr on a new pseudo-terminal (stdout piped): (status, stdout,
    what the terminal received)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([tseal_bin(), *map(str, args)], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, "tseal hung"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        received += chunk
    out = p.stdout.read().decode()
    status = p.wait(timeout=60)
    os.close(master)
    return status, out, received.decode(errors="replace")


@pytest.mark.parametrize("command", [
    ["hash", "{pt}"], ["verify", "{pt}"], ["inspect", "{pt}"], ["diff", "{pt}", "{st}"],
    ["canon", "--check", "{st}"], ["canon", "{pt}", "-o", "{out}/c.pt"], ["convert", "{pt}", "{out}/c.safetensors"],
])
def test_cli_bar_on_a_terminal_only(model, tmp_path, command):
    args = [a.format(pt=model["pt"], st=model["st"], out=tmp_path) for a in command]
    status, out, tty = run_on_pty(*args)
    assert status == 0, tty
    assert "%" in tty and "MiB" in tty and "/s" in tty and "[" in tty, f"no bar drawn: {tty!r}"
    assert "100%" in tty, "the bar never reached the end"
    assert tty.endswith("\r\x1b[K"), "the bar was not erased before the command's output"
    assert "\x1b" not in out and "%" not in out.replace("100%", "")  # stdout stays clean
    # --quiet: nothing on the terminal; piped stderr: nothing either.
    status, out_quiet, tty_quiet = run_on_pty(*args, "--quiet")
    assert status == 0 and tty_quiet == "" and out_quiet == out
    piped = run_tseal(*args)
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout == out


def test_no_bar_for_git_filters(model, tmp_path):
    # git runs textconv and clean filters with the user's terminal as stderr.
    status, out, tty = run_on_pty("inspect", "--textconv", model["pt"])
    assert status == 0 and tty == "" and out.startswith("format torch-zip")
