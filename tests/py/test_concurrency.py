"""Concurrency from Python: threads calling the public API on the same and different
files at once get exactly the single-threaded results, and concurrent writers of one
target (threads and processes) leave one complete file and no temp files.

The C++ side (many std::threads sharing Checkpoints, under ThreadSanitizer) is
tests/cpp/concurrency_test.cc; tests/py/test_threads.py covers torch-object loading.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import io
import json
import os
import pickle
import random
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tensorseal  # noqa: E402

from conftest import tseal_bin  # noqa: E402

THREADS = 16


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Small files of every format, written by the real producers."""
    from safetensors.torch import save_file
    d = tmp_path_factory.mktemp("conc")
    g = torch.Generator().manual_seed(11)
    out = []
    for i in range(4):
        sd = collections.OrderedDict((f"layer{j}.weight", torch.randn(16, 8 + i, generator=g)) for j in range(3))
        sd["step"] = torch.tensor(i)
        p = d / f"sd{i}.pt"
        torch.save(sd, p)
        out.append(p)
        p = d / f"sd{i}.legacy.pt"
        torch.save(sd, p, _use_new_zipfile_serialization=False)
        out.append(p)
        p = d / f"sd{i}.pkl"
        p.write_bytes(pickle.dumps(sd, protocol=2))
        out.append(p)
        p = d / f"sd{i}.safetensors"
        save_file({k: v.contiguous() for k, v in sd.items()}, str(p))
        out.append(p)
        p = d / f"a{i}.npy"
        np.save(p, np.arange(100 + i, dtype=np.float32))
        out.append(p)
        p = d / f"z{i}.npz"
        np.savez(p, a=np.arange(10 + i), b=np.ones((3, i + 1), np.float16))
        out.append(p)
    return out


def results(path, threads=1):
    """Everything the read-only API says about one file (and its neighbour)."""
    obj = tensorseal.load(path, framework="numpy")
    return {
        "hash": tensorseal.hash(path, threads=threads),
        "fast": tensorseal.hash(path, fast=True, threads=threads),
        "object_hash": tensorseal.hash(obj, threads=threads),
        "inspect": tensorseal.inspect(path, threads=threads),
        "scan": json.dumps(tensorseal.scan(path), sort_keys=True, default=str),
        "verify": tensorseal.verify(path, threads=threads)["ok"],
        "bytes_hash": tensorseal.hash(tensorseal.load_bytes(open(path, "rb").read(), framework="numpy"),
                                      threads=threads),
    }


def test_threads_match_single_threaded(files):
    want = {p: results(p) for p in files}
    pairs = [(files[i], files[(i + 3) % len(files)]) for i in range(len(files))]
    want_diff = {pair: tensorseal.diff(*pair, threads=1) for pair in pairs}
    for p, r in want.items():  # the expected values are meaningful
        assert r["verify"] and r["hash"].startswith("sha256:") and r["object_hash"] == r["hash"] == r["bytes_hash"], p

    def worker(seed):
        rng = random.Random(seed)
        order = list(files) * 2
        rng.shuffle(order)
        bad = []
        for p in order:
            got = results(p, threads=seed % 3)  # 0: the library's own workers on top
            if got != want[p]:
                bad.append((str(p), {k: (want[p][k], got[k]) for k in got if got[k] != want[p][k]}))
        for pair in rng.sample(pairs, len(pairs)):
            if tensorseal.diff(*pair, threads=seed % 2) != want_diff[pair]:
                bad.append(("diff", str(pair)))
        return bad

    with cf.ThreadPoolExecutor(THREADS) as ex:
        bad = [b for r in ex.map(worker, range(THREADS)) for b in r]
    assert not bad, bad[:5]


def test_same_object_many_threads(files):
    """One loaded object hashed and saved from many threads at once (shared buffers)."""
    obj = tensorseal.load(files[0], framework="numpy")
    want_hash = tensorseal.hash(obj, threads=1)
    want_bytes = {f: tensorseal.save_bytes(obj, f) for f in ("torch-zip", "safetensors")}

    def worker(i):
        f = ("torch-zip", "safetensors")[i % 2]
        return tensorseal.hash(obj, threads=i % 3) == want_hash and tensorseal.save_bytes(obj, f) == want_bytes[f]

    with cf.ThreadPoolExecutor(THREADS) as ex:
        assert all(ex.map(worker, range(THREADS * 4)))


def temps(d):
    return [p.name for p in d.iterdir() if ".tseal-tmp." in p.name]


def test_concurrent_writers_one_target(files, tmp_path):
    """Threads and processes writing the same path at once: the path always ends up as
    one complete file from one of the writers, and no temp file is left."""
    objs = [tensorseal.load(p, framework="numpy") for p in files if p.suffix == ".safetensors"]
    hashes = {tensorseal.hash(o, threads=1) for o in objs}
    target = tmp_path / "shared.pt"
    for _ in range(5):
        with cf.ThreadPoolExecutor(len(objs) * 2) as ex:
            list(ex.map(lambda o: tensorseal.save(o, target), objs * 2))
        assert tensorseal.hash(target) in hashes
        assert tensorseal.verify(target)["ok"]
        assert temps(tmp_path) == []
    sources = [p for p in files if p.suffix == ".safetensors"]
    for _ in range(3):
        procs = [subprocess.Popen([tseal_bin(), "convert", str(s), str(target)]) for s in sources * 2]
        assert [p.wait() for p in procs] == [0] * len(procs)
        assert tensorseal.hash(target) in hashes
        assert temps(tmp_path) == []
