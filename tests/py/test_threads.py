"""Thread safety: 16 threads loading, hashing, diffing and saving the same and
different files give exactly the single-threaded results."""
from __future__ import annotations

import concurrent.futures as cf
import hashlib

import pytest
import torch

import tensorseal
import tensorseal.safetensors as tss
import tensorseal.torch as tst

THREADS = 16


def digest(obj) -> str:
    """A digest of a loaded object's structure and tensor bytes."""
    h = hashlib.sha256()

    def walk(path, o):
        if isinstance(o, torch.Tensor):
            h.update(f"{path}:{o.dtype}:{tuple(o.shape)}:{type(o).__name__}".encode())
            h.update(o.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(f"{path}.{k}", v)
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(f"{path}.{i}", v)
        else:
            h.update(f"{path}={o!r}".encode())

    walk("", obj)
    return h.hexdigest()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("threads")
    out = []
    for i in range(6):
        torch.manual_seed(i)
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
        obj = {"model": model.state_dict(), "step": i, "extra": [torch.randn(100, dtype=torch.float64)]}
        ext = ["pt", "safetensors", "pt"][i % 3]
        path = d / f"f{i}.{ext}"
        if i % 3 == 2:
            torch.save(obj, path)  # a torch-written file among ours
        else:
            tensorseal.save(obj, path)
        out.append(path)
    return out


def run_all(jobs):
    with cf.ThreadPoolExecutor(THREADS) as ex:
        return list(ex.map(lambda job: job(), jobs))


def test_concurrent_loads_and_hashes_match_single_thread(files):
    single = {p: (digest(tensorseal.load(p)), tensorseal.hash(p), tensorseal.hash(p, fast=True)) for p in files}
    jobs = []
    for rep in range(8):
        for p in files:  # same files from many threads, and different files at once
            jobs.append(lambda p=p: (p, "load", digest(tensorseal.load(p))))
            jobs.append(lambda p=p: (p, "hash", tensorseal.hash(p)))
            jobs.append(lambda p=p: (p, "fast", tensorseal.hash(p, fast=True, threads=2)))
            jobs.append(lambda p=p: (p, "load-copy", digest(tensorseal.load(p, mmap=False))))
    for p, kind, value in run_all(jobs):
        want = single[p]
        assert value == {"load": want[0], "load-copy": want[0], "hash": want[1], "fast": want[2]}[kind], (p, kind)


def test_concurrent_dropins_and_tools(files):
    st = [p for p in files if p.suffix == ".safetensors"][0]
    pt = files[0]
    single_st = digest(tss.load_file(st))
    single_pt = digest(tst.load(pt))
    single_diff = tensorseal.diff(files[0], files[3])
    single_scan = tensorseal.scan(files[2])
    jobs = []
    for _ in range(16):
        jobs.append(lambda: ("st", digest(tss.load_file(st))))
        jobs.append(lambda: ("pt", digest(tst.load(pt))))
        jobs.append(lambda: ("diff", tensorseal.diff(files[0], files[3])))
        jobs.append(lambda: ("scan", tensorseal.scan(files[2])))
    want = {"st": single_st, "pt": single_pt, "diff": single_diff, "scan": single_scan}
    for kind, value in run_all(jobs):
        assert value == want[kind], kind


def test_concurrent_saves_are_identical(files, tmp_path):
    objs = [tensorseal.load(p) for p in files]
    expected = [tensorseal.save_bytes(o, "torch-zip") for o in objs]
    jobs = []
    for rep in range(4):
        for i, o in enumerate(objs):
            path = tmp_path / f"out{rep}_{i}.pt"
            jobs.append(lambda i=i, o=o, path=path: (i, tensorseal.save(o, path) or path.read_bytes()))
            jobs.append(lambda i=i, o=o: (i, tensorseal.save_bytes(o, "torch-zip")))
    for i, data in run_all(jobs):
        assert data == expected[i]


def test_concurrent_deterministic_pickle():
    import pickle
    t = torch.randn(50)
    with tensorseal.deterministic_pickle():
        expected = pickle.dumps(t)

    def job():
        with tensorseal.deterministic_pickle():
            return pickle.dumps(t)

    assert set(run_all([job] * 64)) == {expected}
    assert not tensorseal.is_enabled()
