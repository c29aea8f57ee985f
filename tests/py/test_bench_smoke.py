"""Smoke test of the benchmark harness (bench/run.py): one small run of every operation
and competitor, checking that results.json and the markdown table have them all.
No timing assertions: the numbers of a CI machine mean nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TSEAL = os.environ.get("TSEAL", os.path.join(ROOT, "build", "tseal"))

EXPECTED = {
    "save": {"tensorseal.save (.safetensors)", "tensorseal.save (.pt)", "torch.save", "safetensors save_file",
             "numpy.savez", "raw write() loop", "raw write() loop + fsync", "tensorseal.save (.safetensors, durable=False)",
             "tensorseal.save (.pt, durable=False)", "tensorseal.torch.save (drop-in)"},
    **{op: {"tensorseal.save (.safetensors)", "tensorseal.save (.safetensors, durable=False)", "tensorseal.save (.pt)",
            "torch.save", "safetensors save_file", "raw write() loop", "raw write() loop + fsync"}
       for op in ("save-over", "save-ext4", "save-ext4-over")},
    "load": {"tensorseal.load (.safetensors, mmap)", "tensorseal.load (.pt, mmap)", "torch.load",
             "torch.load(mmap=True)", "safetensors load_file", "numpy.load (.npz)", "raw read() loop",
             "tensorseal.torch.load (drop-in, .pt)", "tensorseal.torch.load (drop-in, .pt, mmap=True)"},
    "lazy": {"tensorseal safe_open + keys()", "tensorseal.load (mmap) + keys()", "safetensors safe_open + keys()",
             "torch.load(mmap=True) + keys()"},
    "hash": {"tseal hash", "tseal hash --threads 1", "tseal hash --fast", "openssl dgst -sha256", "sha256sum",
             "tensorseal.hash (API)", "tensorseal.hash fast (API)", "hashlib.sha256 (1 core)", "numpy copy (memcpy)"},
    "canon": {"tseal canon", "tseal canon --no-fsync", "cp (the limit)", "torch.load + torch.save", "torch.load(mmap) + torch.save"},
    "convert": {"tseal convert", "cp (the limit)", "torch.load + save_file", "torch.load(mmap) + save_file"},
    "diff": {"tseal diff", "torch.load + torch.equal", "torch.load(mmap) + torch.equal"},
    "hash-npz": {"tseal hash", "tseal hash --threads 1", "tseal inspect", "cat (raw read)",
                 "sha256sum (raw read + SHA-256)", "tensorseal.hash (API)", "numpy.load (.npz) + touch"},
    "bomb": {"tseal inspect (refused)", "tseal hash (refused)", "cat (raw read)", "tensorseal.load (refused)"},
}
WORKLOADS = {"save": "abc", "save-over": "ab", "save-ext4": "ab", "save-ext4-over": "a", "load": "abc", "lazy": "b", "hash": "acd", "canon": "ad", "convert": "ad", "diff": "a",
             "hash-npz": "e", "bomb": "e"}


@pytest.mark.skipif(not os.path.exists(TSEAL), reason=f"{TSEAL} not built")
def test_bench_small_quick(tmp_path):
    out = tmp_path / "results.json"
    base = tmp_path / "baseline.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--size", "small", "--quick",
                        "--tseal", TSEAL, "--work", str(tmp_path / "work"), "--out", str(out), "--no-micro",
                        "--baseline", str(base), "--write-baseline"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(out.read_text())
    # The baseline this run wrote holds every row and target; compared with itself, no
    # row changed and nothing regressed.
    b = json.loads(base.read_text())
    assert b["meta"]["size"] == "small"
    assert len(b["rows"]) == len(doc["results"]) and len(b["targets"]) == len(doc["targets"])
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import run as bench_run
    finally:
        sys.path.pop(0)
    same = bench_run.compare(doc, b)
    assert same["rows"] and all(x["regression"] is False and abs(x["change"] - 1) < 0.01 for x in same["rows"])
    slower = json.loads(json.dumps(doc))
    for row in slower["results"]:
        row["median_s"] *= 2
        row["min_s"] = row["max_s"] * 1.5
    assert all(x["regression"] for x in bench_run.compare(slower, b)["rows"])
    assert "## Against the baseline" in bench_run.markdown(dict(doc, baseline=same))
    assert all(t["spread"] is not None for t in doc["targets"] if t["kind"] != "MiB<=")
    got = {}
    for row in doc["results"]:
        got.setdefault((row["op"], row["workload"]), set()).add(row["competitor"])
        assert row["runs"] >= 1 and row["median_s"] > 0 and row["min_s"] <= row["median_s"] <= row["max_s"]
        assert row["throughput_gib_s"] > 0 and row["ratio_to_tensorseal"] > 0
        assert row["peak_anon_mib"] is not None
    for op, names in EXPECTED.items():
        for wl in WORKLOADS[op]:
            assert got.get((op, wl)) == names, (op, wl, got.get((op, wl)))
    # Every target names rows that exist, and the memory targets are there for workloads d and e.
    assert {(t["op"], t["workload"]) for t in doc["targets"] if t["kind"] == "MiB<="} == {
        ("hash", "d"), ("canon", "d"), ("convert", "d"), ("hash-npz", "e"), ("bomb", "e")}
    assert all(isinstance(t["met"], bool) for t in doc["targets"])
    meta = doc["meta"]
    assert meta["size"] == "small" and meta["page_cache"].startswith("warm") and len(meta["loadavg_before"]) == 3
    # The markdown on stdout has a table per operation and workload, and the targets.
    for op in EXPECTED:
        assert r.stdout.count("| **t") >= 1
    assert r.stdout.count("\n## ") == len(got) + 1  # the baseline was written after this run
    assert "## Targets" in r.stdout
    # Inputs are deleted after the run (no --keep).
    assert not (tmp_path / "work" / "small").exists()


def test_dcp_bench_small(tmp_path):
    """bench/dcp.py (torchrun, 2 ranks) at 8 MiB: every competitor timed, values equal."""
    out = tmp_path / "dcp.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                        os.path.join(ROOT, "bench", "dcp.py"), "--size-mib", "8", "--repeats", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert doc["values_equal"] is True and doc["world"] == 2
    assert set(doc["times"]["save"]) == {"tensorseal.dcp", "tensorseal.dcp (no content hash)", "torch torch_save",
                                         "torch safetensors"}
    assert set(doc["times"]["hash"]) == {"tensorseal.dcp.content_hash (live, sha256)", "dcp.save (torch torch_save)"}
    assert set(doc["times"]["verify"]) == {"tensorseal.dcp.verify (xxh3)", "tseal verify (one process)",
                                           "tensorseal.dcp.verify (sha256)", "tseal hash (one process, sha256)"}
    assert set(doc["times"]["load"]) == {"tensorseal.dcp", "torch (torch_save dir)", "tensorseal.dcp (torch_save dir)",
                                         "tensorseal.dcp (safetensors dir)"}
    assert all(len(v) == 1 for op in doc["times"].values() for v in op.values())
    assert "| tensorseal.dcp |" in r.stdout


@pytest.mark.skipif(not os.path.exists(TSEAL), reason=f"{TSEAL} not built")
def test_dirs_bench_small(tmp_path):
    """bench/dirs.py at 16 MiB: a real 2-rank DCP save and hub shards, every competitor once."""
    out = tmp_path / "dirs.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "dirs.py"), "--size-mib", "16", "--repeats", "1",
                        "--tseal", TSEAL, "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(out.read_text())
    want = {"hash": {"tseal hash", "sha256sum (all files)"}, "canon": {"tseal canon", "cp -r"}}
    for layout, py in (("dcp", "dcp_to_torch_save"), ("shards", "load_file + save_file")):
        assert {op: set(v) for op, v in doc["times"][layout].items()} == {
            **want, "convert": {"tseal convert", py, "cp -r"}}, doc["times"][layout]
    assert "| dcp convert |" in r.stdout
