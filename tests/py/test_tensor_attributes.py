"""Tensors with Python attributes (issue: fidelity): torch pickles a tensor's __dict__
through _rebuild_from_type_v2(func, torch.Tensor, args, state) and a Parameter's through
_rebuild_parameter_with_state; torch.load restores them (weights_only too). FSDP1 sets
`_has_been_cloned` on every tensor of a FULL_STATE_DICT (test_dcp_read.py reads a real
one). Files come from torch.save in both formats and at protocols 2 and 4."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal


def checkpoint() -> dict:
    w = torch.arange(6.0).reshape(2, 3)
    w._has_been_cloned = True
    p = torch.nn.Parameter(torch.ones(3))
    p.tag = "bias"
    p.meta = {"lr_scale": 0.5, "groups": [1, 2], "frozen": False}
    tied = torch.arange(4, dtype=torch.int64)
    tied.note = "shared"
    return {"w": w, "p": p, "tied_a": tied, "tied_b": tied, "plain": torch.zeros(2)}


def save(path: pathlib.Path, legacy: bool, protocol: int) -> pathlib.Path:
    torch.save(checkpoint(), path, _use_new_zipfile_serialization=not legacy, pickle_protocol=protocol)
    return path


@pytest.fixture(scope="module", params=[(False, 2), (True, 2), (False, 4), (True, 4)],
                ids=["zip-p2", "legacy-p2", "zip-p4", "legacy-p4"])
def saved(request, tmp_path_factory) -> pathlib.Path:
    legacy, protocol = request.param
    return save(tmp_path_factory.mktemp("attrs") / "a.pt", legacy, protocol)


def same(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs)
    for k, b in theirs.items():
        a = ours[k]
        assert type(a) is type(b), k
        assert a.__dict__ == b.__dict__, (k, a.__dict__, b.__dict__)
        assert a.dtype == b.dtype and torch.equal(a.detach(), b.detach()), k
        assert a.requires_grad == b.requires_grad, k


def test_load_keeps_attributes_as_torch_does(saved):
    want = torch.load(saved, weights_only=False)
    assert want["w"].__dict__ == {"_has_been_cloned": True}
    same(tensorseal.load(saved), want)
    same(tensorseal.load(saved, mmap=False), want)
    same(tensorseal.torch.load(saved), want)  # weights_only=True (the default) restores them too
    got = tensorseal.load(saved)
    assert got["tied_a"] is got["tied_b"]


def test_inspect_lists_the_tensors_at_their_paths(saved):
    paths = [t["path"] for t in tensorseal.inspect(saved)["tensors"]]
    assert paths == ["w", "p", "tied_a", "tied_b", "plain"], paths


def test_canonical_file_keeps_them(saved, tmp_path):
    out = tmp_path / "c.pt"
    r = run_tseal("canon", saved, "-o", out)
    assert r.returncode == 0, r.stderr
    same(torch.load(out, weights_only=False), torch.load(saved, weights_only=False))
    same(torch.load(out), torch.load(saved, weights_only=False))  # canonical files are protocol 2
    assert tensorseal.hash(out) == tensorseal.hash(saved)
    assert run_tseal("canon", "--check", out).returncode == 0


def test_attributes_are_content(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.pt", "b.pt", "c.pt"))
    t = torch.arange(3.0)
    torch.save({"t": t}, a)
    t.x = 1
    torch.save({"t": t}, b)
    t.x = 2
    torch.save({"t": t}, c)
    assert len({tensorseal.hash(p) for p in (a, b, c)}) == 3
    r = run_tseal("diff", b, c)
    assert r.returncode == 1 and "t (attributes)" in r.stdout, r.stdout


def test_safetensors_keeps_them_in_its_structure(saved, tmp_path):
    st = tmp_path / "a.safetensors"
    r = run_tseal("convert", saved, st)
    assert r.returncode == 0, r.stderr
    assert tensorseal.hash(st) == tensorseal.hash(saved)
    same(tensorseal.load(st), torch.load(saved, weights_only=False))
    from safetensors.torch import load_file  # stock safetensors: the flat tensors
    assert torch.equal(load_file(str(st))["w"], torch.arange(6.0).reshape(2, 3))


def test_python_save_round_trips_them(tmp_path):
    ck = checkpoint()
    for name in ("x.pt", "x.safetensors"):
        tensorseal.save(ck, tmp_path / name)
        same(tensorseal.load(tmp_path / name), ck)
    tensorseal.torch.save(ck, tmp_path / "d.pt")
    same(torch.load(tmp_path / "d.pt", weights_only=False), ck)
    assert tensorseal.hash(tmp_path / "x.pt") == tensorseal.hash(ck)


def test_formats_without_python_objects(tmp_path, saved):
    r = run_tseal("convert", saved, tmp_path / "d", "--world-size", "1")
    assert r.returncode == 2 and "[dcp/write-unrepresentable]" in r.stderr and "attributes" in r.stderr, r.stderr
    arrays = tensorseal.load(saved, framework="numpy")  # numpy arrays hold no attributes
    assert isinstance(arrays["w"], np.ndarray)


def test_attribute_holding_a_tensor_is_refused(tmp_path):
    t = torch.arange(3.0)
    t.other = torch.ones(2)
    p = tmp_path / "t.pt"
    torch.save({"t": t}, p)
    assert torch.equal(torch.load(p, weights_only=False)["t"].other, torch.ones(2))
    with pytest.raises(tensorseal.UnsupportedError) as e:
        tensorseal.load(p)
    assert e.value.rule == "torch/unsupported-rebuild" and "'other'" in str(e.value)
    with pytest.raises(tensorseal.Error):
        tensorseal.save({"t": t}, tmp_path / "o.pt")


def test_inspect_and_textconv_name_them(saved):
    tensors = {t["path"]: t for t in tensorseal.inspect(saved)["tensors"]}
    assert tensors["w"]["attributes"] == "{'_has_been_cloned': True}"
    assert tensors["plain"]["attributes"] is None
    r = run_tseal("inspect", "--textconv", saved)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("tensor w:"))
    assert " attributes{'_has_been_cloned': True} sha256:" in line, line
    plain = next(x for x in r.stdout.splitlines() if x.startswith("tensor plain:"))
    assert "attributes" not in plain, plain
