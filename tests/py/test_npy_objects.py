"""numpy object arrays (.npy / .npz with dtype |O: the data is a pickle numpy reads with
allow_pickle=True), made by numpy itself: read through the restricted pickle reader,
never run, loaded as numpy object arrays, hashed, scanned and canonicalised."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tensorseal
import tensorseal.torch
from conftest import run_tseal


def _same(a, b):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == object:
            for x, y in zip(a.ravel().tolist(), b.ravel().tolist()):
                _same(x, y)
        else:
            assert np.array_equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b and type(a) is type(b)


def _produced(tmp_path):
    """What packages ship: a dict of arrays saved with np.save (a 0-d object array, as
    face-detection packages do), a ragged list, and an .npz with an object member."""
    files = {}
    files["dict"] = tmp_path / "landmarks.npy"
    np.save(files["dict"], {"bbox": np.arange(8, dtype=np.float32).reshape(2, 4), "names": ["a", "b"], "n": 2})
    files["ragged"] = tmp_path / "ragged.npy"
    ragged = np.empty(3, dtype=object)
    ragged[:] = [np.arange(3), "text", {"k": (1, 2.5)}]
    np.save(files["ragged"], ragged)
    files["npz"] = tmp_path / "mixed.npz"
    np.savez(files["npz"], weights=np.ones((2, 2)), labels=np.array(["x", 3, None], dtype=object))
    return files


def test_object_arrays_load_as_numpy_loads_them(tmp_path):
    for name, path in _produced(tmp_path).items():
        want = np.load(path, allow_pickle=True)
        got = tensorseal.load(path, framework="numpy")
        if name == "npz":
            assert set(got) == set(want.files)
            for k in want.files:
                _same(want[k], got[k])
        else:
            _same(want, got)
            assert got.dtype == object


def test_object_arrays_hash_canon_and_scan(tmp_path):
    for name, path in _produced(tmp_path).items():
        suffix = path.suffix
        a, b = tmp_path / f"{name}.a{suffix}", tmp_path / f"{name}.b{suffix}"
        assert run_tseal("canon", path, "-o", a).returncode == 0, name
        assert run_tseal("canon", a, "-o", b).returncode == 0, name
        assert a.read_bytes() == b.read_bytes(), name
        assert tensorseal.hash(a) == tensorseal.hash(path), name
        want = np.load(path, allow_pickle=True)
        back = np.load(a, allow_pickle=True)
        if name == "npz":
            for k in want.files:
                _same(want[k], back[k])
        else:
            _same(want, back)
        r = run_tseal("scan", path)
        assert r.returncode == 0, (name, r.stdout, r.stderr)  # numpy's own globals only: safe
        assert "_reconstruct" in r.stdout


class _Cwd:
    def __reduce__(self):
        return (os.getcwd, ())


def test_object_array_payload_outside_the_safe_set_is_refused(tmp_path):
    path = tmp_path / "evil.npy"
    arr = np.empty(1, dtype=object)
    arr[0] = _Cwd()
    np.save(path, arr)
    assert np.load(path, allow_pickle=True)[0] == os.getcwd()  # ground truth: numpy calls it
    r = run_tseal("scan", path)
    assert r.returncode == 1 and "getcwd" in r.stdout
    with pytest.raises(tensorseal.UnsafePickleError, match="getcwd"):
        tensorseal.torch.load(path)  # weights_only=True: refused as any pickle is
    got = tensorseal.load(path, framework="numpy")  # inert data: nothing runs
    assert isinstance(got[0], tensorseal.Opaque) and got[0].callable.name == "getcwd"
