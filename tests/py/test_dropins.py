"""Drop-ins: tensorseal.torch.save/load against torch.save/load, and
tensorseal.safetensors against the real safetensors package (same calls, same
results)."""
from __future__ import annotations

import collections
import io
import pickle
import subprocess
import sys

import numpy as np
import pytest
import safetensors
import safetensors.torch
import torch

import tensorseal
import tensorseal.safetensors as tss
import tensorseal.torch as tst
from tensors import SAFETENSORS_DTYPES, random_tensor

def bits(t) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def same(a, b) -> bool:
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and bits(a) == bits(b)


def sample_tensors():
    return {f"layer.{i}.w": random_tensor(dt, (3, 2), i) for i, dt in enumerate(SAFETENSORS_DTYPES)}


class UserConfig:
    """A user class referenced by a checkpoint (a global outside torch's safe set)."""


# ---- tensorseal.torch -----------------------------------------------------------------

def test_module_names_do_not_shadow_real_packages():
    assert tst.__name__ == "tensorseal.torch" and tss.__name__ == "tensorseal.safetensors"
    assert tst.torch is torch  # the real torch, imported absolutely inside the drop-in
    assert sys.modules["torch"] is torch and sys.modules["safetensors"] is safetensors
    assert tensorseal.torch is tst and tensorseal.safetensors is tss


def test_import_tensorseal_does_not_import_torch():
    code = "import sys, tensorseal; assert 'torch' not in sys.modules; import tensorseal.torch; " \
           "assert sys.modules['torch'].__name__ == 'torch'; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_torch_save_path_is_canonical_and_loads_in_torch(tmp_path):
    model = torch.nn.Linear(4, 3)
    sd = model.state_dict()
    a, b = tmp_path / "a.pt", tmp_path / "other-name.pt"
    tst.save(sd, a)
    tst.save(sd, b)
    assert a.read_bytes() == b.read_bytes()  # torch.save would differ: the zip prefix is the stem
    back = torch.load(a, weights_only=True)
    assert type(back) is collections.OrderedDict and back._metadata == sd._metadata
    for k in sd:
        assert same(back[k], sd[k])
    torch.nn.Linear(4, 3).load_state_dict(tst.load(a))


def test_torch_save_file_objects(tmp_path):
    sd = {"w": torch.randn(3, 3), "step": 5}
    buf = io.BytesIO()
    tst.save(sd, buf)
    data = buf.getvalue()
    path = tmp_path / "x.pt"
    tst.save(sd, path)
    assert data == path.read_bytes()
    buf.seek(0)
    back = tst.load(buf)
    assert same(back["w"], sd["w"]) and back["step"] == 5
    assert same(torch.load(io.BytesIO(data), weights_only=True)["w"], sd["w"])
    with open(path, "rb") as f:
        assert same(tst.load(f)["w"], sd["w"])


def test_torch_legacy_format(tmp_path):
    sd = {"w": torch.arange(6, dtype=torch.int32)}
    path = tmp_path / "legacy.pt"
    tst.save(sd, path, _use_new_zipfile_serialization=False)
    assert tensorseal.read(path).format == "torch-legacy"
    assert same(torch.load(path, weights_only=True)["w"], sd["w"])
    buf = io.BytesIO()
    tst.save(sd, buf, _use_new_zipfile_serialization=False)
    assert buf.getvalue() == path.read_bytes()


def test_torch_load_reads_torch_saved_files(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    ckpt = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 2}
    for zipfile in (True, False):
        path = tmp_path / f"t{zipfile}.pt"
        torch.save(ckpt, path, _use_new_zipfile_serialization=zipfile)
        ours, theirs = tst.load(path), torch.load(path, weights_only=True)
        assert list(ours["model"]) == list(theirs["model"])
        for k in theirs["model"]:
            assert same(ours["model"][k], theirs["model"][k])
        assert ours["opt"]["param_groups"] == theirs["opt"]["param_groups"]
        assert ours["epoch"] == 2


def test_torch_load_weights_only_and_map_location(tmp_path):
    path = tmp_path / "full.pt"
    torch.save({"net_cls": collections.OrderedDict, "w": torch.ones(2)}, path)
    assert same(tst.load(path)["w"], torch.ones(2))  # OrderedDict class is in the safe set
    evil = tmp_path / "module.pt"
    torch.save({"w": torch.ones(2), "cfg": UserConfig}, evil)  # a user class: unknown global
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        tst.load(evil)
    assert e.value.rule == "scan/unknown-global"
    with pytest.raises(pickle.UnpicklingError):  # what torch raises for the same file
        torch.load(evil, weights_only=True)
    assert isinstance(e.value, pickle.UnpicklingError)
    loose = tst.load(evil, weights_only=False)  # data, never executed
    assert isinstance(loose["cfg"], tensorseal.Global) and loose["cfg"].name == "UserConfig"
    # map_location forms
    assert tst.load(path, map_location="meta")["w"].device.type == "meta"
    assert tst.load(path, map_location=torch.device("cpu"))["w"].device.type == "cpu"
    assert tst.load(path, map_location={"cpu": "meta"})["w"].device.type == "meta"
    seen = []
    out = tst.load(path, map_location=lambda s, loc: seen.append(loc))
    assert seen == ["cpu"] and same(out["w"], torch.ones(2))
    copied = tst.load(path, mmap=False)["w"]
    copied += 1
    assert same(tst.load(path)["w"], torch.ones(2))


# ---- tensorseal.safetensors against safetensors ---------------------------------------

def test_save_and_save_file_bytes_equal_safetensors(tmp_path):
    tensors = sample_tensors()
    meta = {"format": "pt"}
    assert tss.save(tensors, metadata=meta) == safetensors.torch.save(tensors, metadata=meta)
    assert tss.save(tensors) == safetensors.torch.save(tensors)
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    tss.save_file(tensors, ours, metadata=meta)
    safetensors.torch.save_file(tensors, theirs, metadata=meta)
    assert ours.read_bytes() == theirs.read_bytes()
    tss.save_file(tensors, str(ours))  # str paths too
    safetensors.torch.save_file(tensors, str(theirs))
    assert ours.read_bytes() == theirs.read_bytes()


def test_load_file_and_load_equal_safetensors(tmp_path):
    tensors = sample_tensors()
    path = tmp_path / "m.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={"k": "v"})
    ours, theirs = tss.load_file(path), safetensors.torch.load_file(path)
    assert set(ours) == set(theirs)
    for k in theirs:
        assert same(ours[k], theirs[k])
    # safetensors.torch.load (bytes) lacks F8_E8M0: compare the rest.
    tensors.pop(next(k for k, v in tensors.items() if v.dtype == torch.float8_e8m0fnu))
    safetensors.torch.save_file(tensors, path, metadata={"k": "v"})
    data = path.read_bytes()
    ours, theirs = tss.load(data), safetensors.torch.load(data)
    assert set(ours) == set(theirs) and all(same(ours[k], theirs[k]) for k in theirs)
    assert tss.load_file(path, device="meta")["layer.0.w"].device.type == "meta"


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_safe_open_parity(framework, tmp_path):
    tensors = {"b": torch.randn(4, 5), "a": torch.arange(12, dtype=torch.int64).reshape(3, 4),
               "c": torch.randn(2, 3, 4).to(torch.float16), "s": torch.tensor(3.5)}
    path = tmp_path / "o.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={"format": framework})
    with safetensors.safe_open(path, framework=framework) as theirs, tss.safe_open(path, framework=framework) as ours:
        assert ours.keys() == theirs.keys()
        assert ours.offset_keys() == theirs.offset_keys()
        assert ours.metadata() == theirs.metadata()
        for k in theirs.keys():
            x, y = ours.get_tensor(k), theirs.get_tensor(k)
            assert type(x) is type(y)
            if framework == "np":
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
            else:
                assert same(x, y)
            sx, sy = ours.get_slice(k), theirs.get_slice(k)
            assert sx.get_shape() == sy.get_shape() and sx.get_dtype() == sy.get_dtype()
        for k, idx in [("b", (slice(1, 3), slice(None))), ("b", (slice(None), 2)), ("a", 1), ("a", slice(0, 2)),
                       ("c", (0, slice(1, 3), slice(None, None))), ("b", (slice(None), slice(2, 4)))]:
            x, y = ours.get_slice(k)[idx], theirs.get_slice(k)[idx]
            if framework == "np":
                assert np.array_equal(x, y) and x.shape == y.shape
            else:
                assert same(x, y)
        with pytest.raises(Exception):
            theirs.get_tensor("missing")
        with pytest.raises(KeyError):
            ours.get_tensor("missing")


def test_safe_open_without_metadata_and_without_context(tmp_path):
    path = tmp_path / "n.safetensors"
    safetensors.torch.save_file({"x": torch.ones(2)}, path)
    f = tss.safe_open(path, "pt")
    assert f.metadata() is None and safetensors.safe_open(path, "pt").metadata() is None
    assert f.keys() == ["x"] and same(f.get_tensor("x"), torch.ones(2))


def test_same_refusals_as_safetensors(tmp_path):
    t = torch.ones(4)
    for bad, exc in [({"a": t, "b": t}, RuntimeError), ({"a": torch.ones(4, 4).t()}, ValueError),
                     ({"a": [1, 2]}, ValueError), ([t], ValueError)]:
        with pytest.raises(exc):
            safetensors.torch.save_file(bad, tmp_path / "x.safetensors")
        with pytest.raises(exc):
            tss.save_file(bad, tmp_path / "y.safetensors")
        with pytest.raises(exc):
            tss.save(bad)
    # Views of one storage that do not overlap are fine for both.
    base = torch.arange(8.0)
    ok = {"lo": base[:4], "hi": base[4:]}
    assert tss.save(ok) == safetensors.torch.save(ok)


def test_safe_open_reads_other_formats(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"w": torch.ones(2, 2), "n": {"b": torch.zeros(1)}}, path)
    with tss.safe_open(path, framework="pt") as f:
        assert f.keys() == ["n.b", "w"]
        assert same(f.get_slice("w")[:, 1], torch.ones(2))


def test_metadata_order_is_canonical(tmp_path):
    tensors = {"x": torch.ones(1)}
    m1 = {"b": "1", "a": "2", "c": "3"}
    m2 = dict(reversed(list(m1.items())))
    assert tss.save(tensors, metadata=m1) == tss.save(tensors, metadata=m2)
    with pytest.raises(ValueError):
        tss.save(tensors, metadata={"a": 1})

