"""`tseal scan`: exit 0 when every global is known-safe, 1 for unknown or dangerous
globals, 2 when the file cannot be read; JSON output shape. Files are made by real
torch / pickle in each test. Spec: docs/cli.md, include/tensorseal/scan.h."""
from __future__ import annotations

import json
import os
import pickle

import pytest

torch = pytest.importorskip("torch")

from conftest import run_tseal  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)


class Cmd:
    def __reduce__(self):
        return (os.system, ("true",))


def scan(path, *extra):
    return run_tseal("scan", *extra, path)


def test_plain_state_dict_is_safe(tmp_path):
    for legacy in (False, True):
        p = tmp_path / f"sd{legacy}.pt"
        torch.save(torch.nn.Linear(3, 2).state_dict(), p, _use_new_zipfile_serialization=not legacy)
        out = scan(p)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.startswith(f"{p}: safe (")
    p = tmp_path / "sd.pkl"
    p.write_bytes(pickle.dumps(torch.nn.Linear(3, 2).state_dict()))
    assert scan(p).returncode == 0  # nested _load_from_bytes payloads are safe too


def test_full_model_is_unknown(tmp_path, monkeypatch):
    import sys
    monkeypatch.setattr(Net, "__module__", "__main__")
    monkeypatch.setattr(sys.modules["__main__"], "Net", Net, raising=False)
    for legacy in (False, True):
        p = tmp_path / f"model{legacy}.pt"
        torch.save(Net(), p, _use_new_zipfile_serialization=not legacy)
        out = scan(p, "--json")
        assert out.returncode == 1
        r = json.loads(out.stdout)
        assert r["verdict"] == "unknown"
        net = [g for g in r["findings"] if (g["module"], g["name"]) == ("__main__", "Net")]
        assert net and net[0]["verdict"] == "unknown"
        assert all(g["verdict"] != "dangerous" for g in r["findings"])


def test_dangerous_payload(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"x": Cmd()}, p)
    out = scan(p)
    assert out.returncode == 1
    assert "dangerous" in out.stdout.splitlines()[0]


def test_garbage_is_exit_2(tmp_path):
    for name, data in [("garbage.bin", os.urandom(64).replace(b"\x80", b"\x00").replace(b"P", b"Q")),
                       ("empty.pt", b""), ("text.pt", b"hello world\n"),
                       ("cut.pt", b"PK\x03\x04" + b"\0" * 40)]:
        p = tmp_path / name
        p.write_bytes(data)
        out = scan(p)
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert out.stdout == "" and out.stderr.strip(), name


def test_json_shape(tmp_path):
    p = tmp_path / "sd.pt"
    torch.save({"w": torch.ones(2), "x": Cmd()}, p)
    out = scan(p, "--json")
    r = json.loads(out.stdout)
    assert list(r) == ["file", "format", "verdict", "findings", "interpretations", "incomplete"]
    assert r["interpretations"] == ["zip"] and r["incomplete"] is False
    assert r["file"] == str(p) and r["format"] == "torch-zip" and r["verdict"] == "dangerous"
    for g in r["findings"]:
        assert list(g) == ["module", "name", "verdict", "count", "where", "reason"]
        assert g["verdict"] in ("safe", "unknown", "dangerous")
        assert isinstance(g["count"], int) and g["count"] >= 1
        assert g["where"].startswith(str(p) + "/sd/data.pkl @ ") and g["reason"]  # file/member @ offset
    names = [(g["module"], g["name"]) for g in r["findings"]]
    assert ("torch._utils", "_rebuild_tensor_v2") in names and ("posix", "system") in names
    assert len(names) == len(set(names))  # one finding per global, with a count
