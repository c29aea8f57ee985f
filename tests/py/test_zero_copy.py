"""Zero copy: loaded tensors are the file's mapping (data pointers inside it, RSS not
growing until touched, shared storages shared); saves read tensor memory directly and
release the GIL during I/O and hashing."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
import torch

import tensorseal
import tensorseal.safetensors as tss

MiB = 1 << 20


def mappings_of(path) -> list:
    """(start, end) of every mapping of `path` in this process."""
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out


def inside(ptr: int, nbytes: int, maps: list) -> bool:
    return any(lo <= ptr and ptr + nbytes <= hi for lo, hi in maps)


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("ext", ["safetensors", "pt", "npz"])
def test_tensor_data_lies_in_the_file_mapping(ext, tmp_path):
    tensors = {"a": torch.randn(64, 64), "b": torch.arange(1000, dtype=torch.int64)}
    path = tmp_path / f"m.{ext}"
    tensorseal.save(tensors, path)
    loaded = tensorseal.load(path)
    maps = mappings_of(path)
    assert maps or ext == "npz", "file not mapped"
    for k, t in loaded.items():
        # torch needs element-aligned data: np.savez's layout (which tensorseal's npz
        # writer reproduces byte for byte) puts members at odd offsets, so torch gets a
        # copy there; the aligned formats are views of the mapping.
        assert inside(t.data_ptr(), t.nbytes, maps) == (ext != "npz"), k
        assert t.data_ptr() % t.element_size() == 0, k
        assert torch.equal(t, tensors[k])
    # numpy framework: the arrays view the same mapping.
    arrays = tensorseal.load(path, framework="numpy")
    maps = mappings_of(path)
    for k, a in arrays.items():
        assert inside(a.__array_interface__["data"][0], a.nbytes, maps), k
    # The drop-in loader too.
    st = tss.load_file(path)
    for k, t in st.items():
        assert inside(t.data_ptr(), t.nbytes, mappings_of(path)) == (ext != "npz"), k


def test_mmap_false_is_outside_the_mapping(tmp_path):
    path = tmp_path / "c.safetensors"
    tensorseal.save({"a": torch.randn(256)}, path)
    t = tensorseal.load(path, mmap=False)["a"]
    assert not inside(t.data_ptr(), t.nbytes, mappings_of(path))


_OVERWRITE = """
import sys, torch, tensorseal, tensorseal.torch as tst
path, how = sys.argv[1], sys.argv[2]
torch.save({"w": torch.arange(1_000_000, dtype=torch.float32), "v": torch.ones(3)}, path)
sd = {"drop-in": lambda: tst.load(path), "drop-in mmap=False": lambda: tst.load(path, mmap=False),
      "load mmap=False": lambda: tensorseal.load(path, mmap=False), "drop-in mmap=True": lambda: tst.load(path, mmap=True),
      }[how]()
torch.save({"x": torch.zeros(3)}, path)  # in place: truncates the file, as a training loop's next save does
print(float(sd["w"].double().sum()), float(sd["v"].sum()))
"""


@pytest.mark.parametrize("how", ["drop-in", "drop-in mmap=False", "load mmap=False", "drop-in mmap=True"])
def test_values_read_into_memory_survive_an_in_place_overwrite(how, tmp_path):
    """torch.load (no mmap) copies: saving over the same path afterwards is safe. The
    drop-in's default and mmap=False read the file into memory likewise; mmap=True maps
    it and faults like torch.load(mmap=True) (checked, so the test sees the difference)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _OVERWRITE, str(tmp_path / "c.pt"), how], capture_output=True, text=True)
    if how == "drop-in mmap=True":
        assert r.returncode == -7, (r.returncode, r.stderr[-2000:])  # SIGBUS, as torch.load(mmap=True)
    else:
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.split() == [str(float(sum(range(1_000_000)))), "3.0"]


def test_in_memory_load_keeps_sharing_and_lets_the_file_go(tmp_path):
    base = torch.randn(10, 10)
    path = tmp_path / "s.pt"
    torch.save({"w": base, "w_t": base.t(), "row": base[3]}, path)
    for back in (tensorseal.load(path, mmap=False), tst_load(path)):
        assert not mappings_of(path)
        ptr = back["w"].untyped_storage().data_ptr()
        assert back["w_t"].untyped_storage().data_ptr() == ptr and back["row"].data_ptr() == ptr + 3 * 10 * 4
        assert torch.equal(back["w_t"], base.t()) and torch.equal(back["row"], base[3])
        back["w"][0, 0] = 1234.0  # writable, and the writes never reach the file
    assert torch.equal(torch.load(path, weights_only=True)["w"], base)
    mapped = tst_load(path, mmap=True)
    assert inside(mapped["w"].data_ptr(), mapped["w"].nbytes, mappings_of(path))


def tst_load(path, **kw):
    import tensorseal.torch as tst
    return tst.load(path, **kw)


def test_shared_storage_shares_memory_after_load(tmp_path):
    base = torch.randn(10, 10)
    obj = {"w": base, "w_t": base.t(), "row": base[3], "same": base}
    for ext in ("pt", "pth"):  # safetensors: test_api.py::test_safetensors_keeps_views_shared
        path = tmp_path / f"s.{ext}"
        tensorseal.save(obj, path)
        back = tensorseal.load(path)
        ptr = back["w"].untyped_storage().data_ptr()
        assert back["w_t"].untyped_storage().data_ptr() == ptr
        assert back["row"].untyped_storage().data_ptr() == ptr and back["row"].data_ptr() == ptr + 3 * 10 * 4
        assert back["same"] is back["w"]
        assert torch.equal(back["w_t"], base.t()) and torch.equal(back["row"], base[3])
    # Torch-written files with views keep them too.
    path = tmp_path / "torch.pt"
    torch.save(obj, path)
    back = tensorseal.load(path)
    assert back["row"].untyped_storage().data_ptr() == back["w"].untyped_storage().data_ptr()


def test_rss_does_not_grow_until_touched(tmp_path):
    size = 256 * MiB
    path = tmp_path / "big.safetensors"
    tensorseal.save({"big": torch.ones(size // 4)}, path)
    before = rss()
    t = tensorseal.load(path)["big"]
    after_load = rss()
    assert after_load - before < size // 8, (before, after_load)
    assert inside(t.data_ptr(), t.nbytes, mappings_of(path))
    total = float(t.sum())  # touches every page
    after_touch = rss()
    assert total == size // 4
    assert after_touch - before > size // 2, (before, after_touch)
    del t


def test_save_reads_tensor_memory_directly(tmp_path, monkeypatch):
    # No copy through Python: tensor bytes are never converted to Python objects.
    t = torch.randn(1024)
    for name in ("tobytes", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, **k: pytest.fail("tensor data went through Python"),
                            raising=False)
    path = tmp_path / "direct.safetensors"
    tensorseal.save({"t": t}, path)
    monkeypatch.undo()
    assert torch.equal(tensorseal.load(path)["t"], t)


class Counter:
    """A Python thread that counts while it gets the GIL."""

    def __init__(self) -> None:
        self.n = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop:
            self.n += 1

    def __enter__(self) -> "Counter":
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.stop = True
        self.thread.join()


def share_during(fn, attempts: int = 3) -> float:
    """How much of its free-running speed a counting thread keeps while fn runs: about
    1 when fn releases the GIL (less on a loaded machine), near 0 when fn holds it (the
    counter then runs only in the short Python parts of fn). Best of a few attempts, as
    other processes may take the CPU."""
    return max(_share_once(fn) for _ in range(attempts))


def _share_once(fn) -> float:
    with Counter() as c:
        n0, t0 = c.n, time.perf_counter()
        time.sleep(0.2)  # sleeping releases the GIL: the counter's own speed
        rate = (c.n - n0) / (time.perf_counter() - t0)
        n1, t1 = c.n, time.perf_counter()
        fn()
        n, secs = c.n - n1, time.perf_counter() - t1
    assert secs > 0.05, "too fast to measure"
    return n / (rate * secs)


@pytest.fixture(scope="module")
def big_tensor():
    return torch.ones(256 * MiB // 4)


def test_gil_released_during_save(big_tensor, tmp_path):
    path = tmp_path / "g.pt"
    share = share_during(lambda: tensorseal.save({"w": big_tensor}, path, threads=1))
    assert share > 0.15, share
    share = share_during(lambda: tensorseal.save_bytes({"w": big_tensor}, "safetensors", threads=1))
    assert share > 0.15, share


def test_gil_released_during_hash(big_tensor, tmp_path):
    share = share_during(lambda: tensorseal.hash({"w": big_tensor}, threads=1))
    assert share > 0.15, share
    path = tmp_path / "h.safetensors"
    tensorseal.save({"w": big_tensor}, path)
    share = share_during(lambda: tensorseal.hash(path, threads=1))
    assert share > 0.15, share


def test_numpy_save_is_zero_copy_and_canonical(tmp_path):
    a = np.arange(1 << 16, dtype=np.float32)
    path = tmp_path / "n.npy"
    tensorseal.save(a, path)
    np.testing.assert_array_equal(np.load(path), a)
    assert path.read_bytes() == tensorseal.save_bytes(a, "npy")
