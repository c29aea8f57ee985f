"""`tseal canon` refuses files whose pickles reference dangerous globals unless
--allow-unsafe; `tseal verify` reports the globals verdict beside integrity (JSON
`globals` / `unsafe_globals`, a DANGEROUS line in text) without changing its exit status."""
from __future__ import annotations

import json
import os

import torch

import tensorseal
from conftest import run_tseal


class Attack:
    """What a malicious checkpoint holds: os.system run at load time."""

    def __reduce__(self):
        return (os.system, ("true",))


class EvalAttack:
    def __reduce__(self):
        return (eval, ("1",))


def attack_file(tmp_path):
    path = tmp_path / "attack.pt"
    torch.save({"w": torch.ones(2), "x": Attack(), "y": EvalAttack()}, path)
    return path


def test_canon_refuses_dangerous_globals(tmp_path):
    src = attack_file(tmp_path)
    out = tmp_path / "out.pt"
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tseal: refused: ")
    assert "[scan/dangerous-global]" in lines[0] and str(src) in lines[0]
    assert "posix.system" in lines[0] and "builtins.eval" in lines[0] and "--allow-unsafe" in lines[0]
    assert r.stdout == "" and not out.exists()
    # In place too: the input is left as it was.
    before = src.read_bytes()
    assert run_tseal("canon", "--in-place", src).returncode == 1
    assert src.read_bytes() == before


def test_allow_unsafe_writes_a_copy_that_still_scans_dangerous(tmp_path):
    src = attack_file(tmp_path)
    out = tmp_path / "out.pt"
    r = run_tseal("canon", src, "-o", out, "--allow-unsafe")
    assert r.returncode == 0, r.stderr
    assert tensorseal.scan(out)["verdict"] == "dangerous"
    assert tensorseal.hash(out) == tensorseal.hash(src)


def test_canon_of_unknown_globals_is_not_refused(tmp_path):
    """A user class is unknown, not dangerous: canon rewrites it as before."""
    src = tmp_path / "model.pt"
    torch.save({"net": torch.nn.Linear(2, 2)}, src)
    assert tensorseal.scan(src)["verdict"] == "unknown"
    r = run_tseal("canon", src, "-o", tmp_path / "c.pt")
    assert r.returncode == 0, r.stderr


def test_verify_reports_globals_separately(tmp_path):
    clean = tmp_path / "clean.pt"
    torch.save({"w": torch.ones(2)}, clean)
    model = tmp_path / "model.pt"
    torch.save({"net": torch.nn.Linear(2, 2)}, model)
    bad = attack_file(tmp_path)
    r = run_tseal("verify", clean, model, bad, "--json")
    assert r.returncode == 0, r.stderr  # integrity: all intact
    files = {os.path.basename(f["file"]): f for f in json.loads(r.stdout)["files"]}
    assert [files[n]["status"] for n in ("clean.pt", "model.pt", "attack.pt")] == ["ok"] * 3
    assert files["clean.pt"]["globals"] == "safe" and files["clean.pt"]["unsafe_globals"] == []
    assert files["model.pt"]["globals"] == "unknown"
    assert {g["verdict"] for g in files["model.pt"]["unsafe_globals"]} == {"unknown"}
    assert files["attack.pt"]["globals"] == "dangerous"
    dangerous = {g["global"] for g in files["attack.pt"]["unsafe_globals"] if g["verdict"] == "dangerous"}
    assert dangerous == {"posix.system", "builtins.eval"}
    assert all(g["where"] for g in files["attack.pt"]["unsafe_globals"])
    # Python gives the same report.
    assert tensorseal.verify(bad)["files"][0]["globals"] == "dangerous"

    r = run_tseal("verify", clean, bad)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == f"OK  {clean}" and lines[1] == f"OK  {bad}"
    assert lines[2].startswith(f"DANGEROUS  {bad}: ") and "posix.system" in lines[2] and "builtins.eval" in lines[2]
    assert len(lines) == 3


def test_verify_of_unreadable_file_has_no_globals_verdict(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"PK\x03\x04 not a zip")
    r = run_tseal("verify", junk, "--json")
    f = json.loads(r.stdout)["files"][0]
    assert f["status"] != "ok" and f["globals"] is None and f["unsafe_globals"] == []
