"""Compressed .npz members stay compressed through canon (issue 31, class 7).

np.savez_compressed writes DEFLATED members; canon used to write them STORED, and one
real file grew from 0.66 to 5.2 MiB. Canon now deflates them with tensorseal's own
encoder (docs/formats/npy.md, "Compressed members"), whose bytes are pinned. Files
come from numpy itself: numpy 2 (project venv) and numpy 1.x (Debian python3)."""
from __future__ import annotations

import hashlib
import subprocess
import zipfile

import numpy as np
import pytest

import tensorseal
from conftest import run_tseal

# The arrays, built the same way by both numpy versions (legacy RandomState streams
# are stable across releases): what a training run's .npz holds — a sparse mask,
# small counts, rounded statistics, float16 embeddings, raw float32 noise.
ARRAYS = """
import numpy as np
def arrays():
    r = np.random.RandomState(31)
    mask = (r.random_sample((512, 512)) > 0.97).astype(np.uint8)
    counts = (r.poisson(3.0, size=(200000,))).astype(np.int64)
    stats = np.round(r.standard_normal((256, 256)), 2).astype(np.float64)
    emb = r.standard_normal((300, 128)).astype(np.float16)
    noise = r.standard_normal((20000,)).astype(np.float32)
    ids = np.repeat(np.arange(1000, dtype=np.int32), 50)
    return {"mask": mask, "counts": counts, "stats": stats, "emb": emb, "noise": noise, "ids": ids}
"""
namespace: dict = {}
exec(ARRAYS, namespace)
arrays = namespace["arrays"]

# sha256 of the canonical bytes of np.savez_compressed(arrays()): the encoder
# (src/zip/deflate.cc) and the npz profile together. A change is a format change.
GOLDEN = "sha256:5fa50bd8c55c9ffc5c71067dabc3bc7c25d13dad05b76e27ab3f61d8b0a14280"


def sha(p) -> str:
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def canon(src, out):
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def compressed(tmp_path_factory):
    d = tmp_path_factory.mktemp("npzc")
    src = d / "src.npz"
    np.savez_compressed(src, **arrays())
    return src


def test_canon_keeps_savez_compressed_compressed(compressed, tmp_path):
    stored = tmp_path / "stored.npz"
    np.savez(stored, **arrays())
    a, b = canon(compressed, tmp_path / "a.npz"), canon(compressed, tmp_path / "b.npz")
    assert a.read_bytes() == b.read_bytes()  # two runs, one file
    with zipfile.ZipFile(a) as z:
        assert z.testzip() is None
        assert [i.compress_type for i in z.infolist()] == [zipfile.ZIP_DEFLATED] * len(arrays())
        assert [i.filename for i in z.infolist()] == sorted(k + ".npy" for k in arrays())
    with np.load(a) as got:
        for k, v in arrays().items():
            assert got[k].dtype == v.dtype and np.array_equal(got[k], v), k
    size, src_size = a.stat().st_size, compressed.stat().st_size
    assert size <= src_size * 1.15, (size, src_size)  # close to zlib's default level
    assert size < stored.stat().st_size / 2
    assert tensorseal.hash(a) == tensorseal.hash(compressed) == tensorseal.hash(stored)
    assert run_tseal("canon", "--check", a).returncode == 0
    assert canon(a, tmp_path / "again.npz").read_bytes() == a.read_bytes()  # idempotent
    # A stored npz stays stored (byte-identical to np.savez of the sorted arrays).
    sorted_stored = tmp_path / "sorted.npz"
    np.savez(sorted_stored, **dict(sorted(arrays().items())))
    assert canon(stored, tmp_path / "s.npz").read_bytes() == sorted_stored.read_bytes()


def test_compressed_npz_canonical_bytes_are_one_file(compressed, tmp_path, old_python):
    # numpy 1.x's np.savez_compressed, keys in reverse order.
    old = tmp_path / "old.npz"
    code = ARRAYS + "\nimport sys\na = arrays()\nnp.savez_compressed(sys.argv[1], **dict(reversed(list(a.items()))))\n" \
        "print(np.__version__)"
    r = subprocess.run([old_python, "-c", code, str(old)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("1."), r.stdout
    ours = canon(compressed, tmp_path / "new_c.npz")
    theirs = canon(old, tmp_path / "old_c.npz")
    assert ours.read_bytes() == theirs.read_bytes()
    # numpy 1.x reads the canonical file.
    check = ARRAYS + "\nimport sys\nz = np.load(sys.argv[1])\n" \
        "print(all(np.array_equal(z[k], v) and z[k].dtype == v.dtype for k, v in arrays().items()))"
    r = subprocess.run([old_python, "-c", check, str(ours)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr[-2000:]


def test_compressed_npz_golden_digest(compressed, tmp_path):
    out = canon(compressed, tmp_path / "g.npz")
    assert "sha256:" + sha(out) == GOLDEN, f"canonical compressed npz bytes changed: {sha(out)}"
