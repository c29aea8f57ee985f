"""numpy objects inside torch checkpoints keep their type (issue: fidelity).

Training checkpoints hold numpy objects next to tensors: np.random.get_state() (a tuple
with a uint32 ndarray), np.float64 losses, index arrays. torch.load gives them back as
numpy objects; so must tensorseal.load, canon must write them back as numpy objects,
and the content hash must tell an array from a tensor. Files are made by torch.save
(both formats, protocols 2, 4 and 5) and read back by torch 2.13 / numpy 2 and by torch
1.13 / numpy 1.x."""
from __future__ import annotations

import pickle
import subprocess

import numpy as np
import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal


def checkpoint() -> dict:
    rng = np.random.RandomState(1234)
    return {
        "model": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)},
        "rng": rng.get_state(),
        "loss": np.float64(0.125),
        "step": np.int64(7),
        "flag": np.bool_(True),
        "half": np.float16(-2.5),
        "idx": np.arange(5, dtype=np.int32),
        "grid": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        "big_endian": np.arange(4, dtype=">i4"),
        "zero_d": np.array(3.5),
        "empty": np.zeros((0, 2), dtype=np.uint8),
        "cplx": np.array([1 + 2j, -3j], dtype=np.complex64),
    }


def same(a, b, path="root"):
    """Equal values and the same Python types all the way down (numpy dtype included)."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") and a.shape == b.shape, path
        assert np.array_equal(np.asarray(a), np.asarray(b)), path
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), path
    else:
        assert a == b, path


SAVES = {
    "zip2": dict(),
    "zip4": dict(pickle_protocol=4),
    "legacy2": dict(_use_new_zipfile_serialization=False),
    "legacy4": dict(_use_new_zipfile_serialization=False, pickle_protocol=4),
    # Protocol 5: numpy pickles contiguous arrays as _frombuffer(buffer, dtype, shape, order).
    "zip5": dict(pickle_protocol=5),
    "legacy5": dict(_use_new_zipfile_serialization=False, pickle_protocol=5),
}


@pytest.fixture(scope="module", params=sorted(SAVES))
def saved(request, tmp_path_factory):
    p = tmp_path_factory.mktemp("np") / f"{request.param}.pt"
    torch.save(checkpoint(), p, **SAVES[request.param])
    return p


def test_load_gives_numpy_objects_as_torch_does(saved):
    want = torch.load(saved, weights_only=False)
    got = tensorseal.load(saved)
    same(got, want)
    assert isinstance(got["rng"][1], np.ndarray) and got["rng"][1].dtype == np.uint32
    assert type(got["loss"]) is np.float64
    np.random.RandomState().set_state(got["rng"])  # usable as numpy's own state
    rows = {t["path"]: t for t in tensorseal.inspect(saved)["tensors"]}
    assert rows["rng.1"]["type"] == "numpy.ndarray" and rows["loss"]["type"] == "numpy.generic"
    assert rows["model.w"]["type"] == "torch.Tensor"
    # numpy's reconstruction functions (protocol 5's _frombuffer too) are known-safe.
    r = run_tseal("scan", saved)
    assert r.returncode == 0, r.stdout + r.stderr


def test_canonical_file_keeps_numpy_objects(saved, tmp_path):
    out = tmp_path / "canon.pt"
    r = run_tseal("canon", saved, "-o", out)
    assert r.returncode == 0, r.stderr
    want = torch.load(saved, weights_only=False)
    same(torch.load(out, weights_only=False), want)
    same(tensorseal.load(out), want)
    assert tensorseal.hash(out) == tensorseal.hash(saved)
    # numpy's reconstructions, not torch tensors, are in the canonical pickle, under the
    # module names this numpy (2) pickled them with (test_canon_names.py).
    data = out.read_bytes()
    assert b"_reconstruct" in data and b"numpy._core.multiarray" in data and b"numpy.core" not in data


def test_canonical_file_loads_in_torch_113_iff_the_source_does(saved, tmp_path, old_python):
    """numpy 2 pickles its objects under numpy._core, which numpy 1.x cannot import: the
    source does not load in torch 1.13 / numpy 1.x, nor does its canonical file, which
    keeps the source's names (numpy 1.x's own files load there canonicalised:
    test_canon_names.py::test_numpy_1_files_keep_numpy_1_names)."""
    out = tmp_path / "canon.pt"
    assert run_tseal("canon", saved, "-o", out).returncode == 0
    code = "import sys, torch; torch.load(sys.argv[1])"
    for p in (saved, out):
        r = subprocess.run([old_python, "-c", code, str(p)], capture_output=True, text=True)
        assert r.returncode != 0 and "numpy._core" in r.stderr, (p, r.stderr[-2000:])


def test_hash_tells_a_numpy_array_from_a_tensor(tmp_path):
    as_np, as_t = tmp_path / "np.pt", tmp_path / "t.pt"
    torch.save({"a": np.arange(3, dtype=np.float32)}, as_np)
    torch.save({"a": torch.arange(3, dtype=torch.float32)}, as_t)
    assert tensorseal.hash(as_np) != tensorseal.hash(as_t)
    scalar, zero_d = tmp_path / "s.pt", tmp_path / "z.pt"
    torch.save({"a": np.float32(1)}, scalar)
    torch.save({"a": np.array(1, dtype=np.float32)}, zero_d)
    assert len({tensorseal.hash(scalar), tensorseal.hash(zero_d), tensorseal.hash(as_np)}) == 3
    # diff names the change of type.
    r = run_tseal("diff", as_np, as_t)
    assert r.returncode == 1 and "(type)" in r.stdout and "numpy.ndarray" in r.stdout, r.stdout


def test_torch_save_drop_in_writes_numpy_objects_as_torch_save_does(tmp_path):
    tree = checkpoint()
    out, ref = tmp_path / "x.pt", tmp_path / "ref.pt"
    tensorseal.torch.save(tree, out)
    torch.save(tree, ref)
    same(torch.load(out, weights_only=False), torch.load(ref, weights_only=False))
    assert tensorseal.hash(out) == tensorseal.hash(ref)


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_loaded_numpy_objects_save_back_as_numpy_objects(saved, tmp_path, fmt):
    loaded = tensorseal.load(saved)
    out = tmp_path / f"x.{fmt}"
    tensorseal.save(loaded, out)
    want = torch.load(saved, weights_only=False)
    same(tensorseal.load(out), want)
    if fmt == "pt":
        same(torch.load(out, weights_only=False), want)
    assert tensorseal.hash(out) == tensorseal.hash(saved) == tensorseal.hash(loaded)


def test_a_new_array_given_to_tensorseal_save_is_a_tensor(tmp_path):
    """numpy is one of tensorseal's frameworks: an array the caller made is a tensor
    (a plain safetensors file, the hash of the same torch tensor)."""
    import safetensors.numpy
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    p = tmp_path / "w.safetensors"
    tensorseal.save(arrays, p)
    assert p.read_bytes() == safetensors.numpy.save(arrays)
    assert tensorseal.hash(arrays) == tensorseal.hash({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)})


def test_convert_to_safetensors_and_back_keeps_types(saved, tmp_path):
    st, pt = tmp_path / "x.safetensors", tmp_path / "y.pt"
    assert run_tseal("convert", saved, st).returncode == 0
    assert run_tseal("convert", st, pt).returncode == 0
    want = torch.load(saved, weights_only=False)
    same(torch.load(pt, weights_only=False), want)
    assert len({tensorseal.hash(p) for p in (saved, st, pt)}) == 1


def test_numpy_subclasses_and_object_arrays_are_not_read_as_arrays(tmp_path):
    p = tmp_path / "m.pt"
    torch.save({"m": np.matrix([[1, 2]]), "o": np.array([{"a": 1}], dtype=object)}, p)
    got = tensorseal.load(p)
    # Not silently an ndarray: np.matrix would lose its type.
    assert not isinstance(got["m"], (np.ndarray, torch.Tensor))
    # An object array is one, holding its objects as the restricted reader read them.
    assert isinstance(got["o"], np.ndarray) and got["o"].dtype == object and got["o"][0] == {"a": 1}
