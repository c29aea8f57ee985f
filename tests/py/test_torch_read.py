"""tensorseal reads every PyTorch checkpoint the way torch does, without running pickle.

Fixtures: tests/fixtures/gen_torch.py (torch 2.x, this interpreter) and
gen_torch_t113.py (Debian's torch 1.13), run once per session (or taken from
$TENSORSEAL_FIXTURES when ctest made them). For the torch 2.x files tensorseal.load is
compared with torch.load / pickle.load of the same file in this process; for the 1.13
files with the manifest torch 1.13 wrote. Spec: docs/formats/torch-zip.md,
docs/formats/torch-legacy.md.
"""
from __future__ import annotations

import collections
import hashlib
import io
import json
import math
import os
import pathlib
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tensorseal  # noqa: E402
from tensorseal import Global, Opaque  # noqa: E402

from conftest import ROOT, run_tseal  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES))
import gen_torch  # noqa: E402  (the generator's Net/Block classes, for torch.load of whole models)


def _generate(tmp_factory, gen: str, python: str) -> pathlib.Path:
    env_dir = os.environ.get("TENSORSEAL_FIXTURES")
    if env_dir and (pathlib.Path(env_dir) / gen / "manifest.json").exists():
        return pathlib.Path(env_dir) / gen
    out = tmp_factory.mktemp(gen)
    subprocess.run([python, str(FIXTURES / (gen + ".py")), str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def t2(tmp_path_factory) -> pathlib.Path:
    return _generate(tmp_path_factory, "gen_torch", sys.executable)


@pytest.fixture(scope="session")
def t113(tmp_path_factory, old_python) -> pathlib.Path:
    return _generate(tmp_path_factory, "gen_torch_t113", old_python)


def manifest(d: pathlib.Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


@pytest.fixture
def main_classes(monkeypatch):
    """torch.load of a whole model needs __main__.Net / __main__.Block, as it would in
    the script that saved it."""
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "Net", gen_torch.Net, raising=False)
    monkeypatch.setattr(main, "Block", gen_torch.Block, raising=False)


def torch_load(path: pathlib.Path, fmt: str):
    if fmt == "pickle":
        with open(path, "rb") as f:
            return pickle.load(f)
    return torch.load(path, weights_only=False)


def raw(t) -> bytes:
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8).numpy().tobytes()


def same(ours, theirs, path="root"):
    """Structural equality of tensorseal.load's result with torch.load's."""
    if isinstance(theirs, (np.ndarray, np.generic)):
        # A pickled numpy object stays one: the same type (ndarray or the scalar type).
        assert type(ours) is type(theirs), path
        a, o = np.asarray(theirs), np.asarray(ours)
        assert o.shape == a.shape and o.dtype == a.dtype.newbyteorder("="), path
        le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
        assert np.ascontiguousarray(o).astype(o.dtype.newbyteorder("<")).tobytes() == le.tobytes(), path
        return
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), path
        assert ours.dtype == theirs.dtype, path
        assert ours.shape == theirs.shape, path
        assert ours.stride() == theirs.stride(), path
        assert ours.storage_offset() == theirs.storage_offset(), path
        assert ours.requires_grad == theirs.requires_grad, path
        assert isinstance(ours, torch.nn.Parameter) == isinstance(theirs, torch.nn.Parameter), path
        assert raw(ours) == raw(theirs), path
        return
    if isinstance(theirs, torch.nn.Module):
        assert isinstance(ours, Opaque), path
        assert ours.callable == Global(type(theirs).__module__ if type(theirs).__module__ != "gen_torch"
                                       else "__main__", type(theirs).__name__), path
        state = ours.state
        assert isinstance(state, dict), path
        for k in ("_parameters", "_buffers", "_modules", "training"):
            same(state[k], theirs.__dict__[k], path + "." + k)
        assert list(state) == list(theirs.__dict__), path
        return
    if isinstance(theirs, (torch.storage.TypedStorage, torch.UntypedStorage)):
        t = torch.tensor([], dtype=torch.uint8).set_(ours)
        want = torch.tensor([], dtype=theirs.dtype).set_(theirs) if isinstance(theirs, torch.storage.TypedStorage) \
            else torch.tensor([], dtype=torch.uint8).set_(theirs)
        assert raw(t) == raw(want), path
        return
    if isinstance(theirs, dict):
        assert type(ours) is type(theirs), path
        assert list(ours.keys()) == list(theirs.keys()), path  # order too
        assert getattr(ours, "_metadata", None) == getattr(theirs, "_metadata", None), path
        for k in theirs:
            same(ours[k], theirs[k], f"{path}.{k}")
        return
    if isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs), path
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, f"{path}.{i}")
        return
    if isinstance(theirs, float):
        assert isinstance(ours, float), path
        assert struct.pack("<d", ours) == struct.pack("<d", theirs), path  # nan, -0.0
        return
    assert type(ours) is type(theirs), (path, ours, theirs)
    assert ours == theirs, path


def test_torch2_files_load_like_torch(t2, main_classes):
    m = manifest(t2)
    assert len(m["files"]) >= 37
    compared = 0
    for f in m["files"]:
        if not f["torch_loads"]:
            continue  # torch cannot read these back; test_inspect_matches_manifest covers them
        path = t2 / f["file"]
        ours = tensorseal.load(path)
        theirs = torch_load(path, f["format"])
        same(ours, theirs, f["file"])
        compared += 1
    assert compared >= 35


def test_tied_weights_share_memory(t2, t113):
    for d in (t2, t113):
        for name in ("tied.pt", "tied.legacy.pt"):
            sd = tensorseal.load(d / name)
            a, b, row = sd["embed.weight"], sd["head.weight"], sd["row"]
            assert a is not b
            assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            assert row.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
            assert sd["again"] is sd["embed.weight"]
            assert torch.equal(row, a[2])


def test_views_keep_offsets_strides_and_share_the_big_storage(t2):
    v = tensorseal.load(t2 / "views.pt")
    big = v["big"]
    for k in ("slice", "strided", "t", "col", "block"):
        assert v[k].untyped_storage().data_ptr() == big.untyped_storage().data_ptr(), k
    assert v["slice"].storage_offset() == 10
    assert v["t"].stride() == (1, 10)
    assert v["expand"].stride() == (0, 1)
    assert v["expand0"].stride() == (0, 0)
    assert torch.equal(v["block"], big.view(10, 10)[2:5, 4:8])


@pytest.mark.parametrize("which", ["t2", "t113"])
def test_inspect_matches_manifest(which, request):
    d = request.getfixturevalue(which)
    for f in manifest(d)["files"]:
        got = tensorseal.inspect(d / f["file"])
        assert got["format"] == f["format"], f["file"]
        firsts = [t for t in got["tensors"] if t["alias_of"] is None]
        assert [(t["path"], t["dtype"], list(t["shape"]), t["sha256"]) for t in firsts] == \
               [(t["path"], t["dtype"], t["shape"], t["sha256"]) for t in f["tensors"]], f["file"]
        # Every path torch.load gives a tensor at, aliases naming their first path.
        assert [{"path": t["path"], "alias_of": t["alias_of"]} for t in got["tensors"]] == f["every_path"], f["file"]


def test_content_hash_same_across_containers_and_torch_versions(t2, t113):
    per_version = {"dtypes", "model", "optim"}  # content differs between torch versions by design
    hashes = collections.defaultdict(dict)
    for tag, d in (("2", t2), ("1.13", t113)):
        for f in manifest(d)["files"]:
            key = (f["group"], tag if f["group"] in per_version else "")
            hashes[key][tag + "/" + f["file"]] = tensorseal.hash(d / f["file"])
    for key, files in hashes.items():
        assert len(set(files.values())) == 1, (key, files)
    sd = hashes[("state_dict", "")]
    assert len(sd) == 6  # zip, legacy, pickle.dumps x torch 2.x, 1.13


def test_slice_of_big_storage_hashes_only_the_slice(t2):
    out = run_tseal("inspect", "--json", t2 / "views.pt")
    assert out.returncode == 0, out.stderr
    by_name = {t["path"]: t for t in json.loads(out.stdout)["tensors"]}
    big = torch.arange(100, dtype=torch.float64).mul(1 / 8).sub(1).float()
    assert by_name["slice"]["sha256"] == hashlib.sha256(big[10:20].numpy().tobytes()).hexdigest()
    assert by_name["slice"]["sha256"] != by_name["big"]["sha256"]
    assert by_name["t"]["sha256"] == hashlib.sha256(big.view(10, 10).t().contiguous().numpy().tobytes()).hexdigest()


def test_inspect_format_field_for_every_format(t2, tmp_path):
    from safetensors.torch import save_file
    save_file({"w": torch.ones(2)}, tmp_path / "a.safetensors")
    np.save(tmp_path / "a.npy", np.arange(3))
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    cases = {t2 / "state_dict.pt": "torch-zip", t2 / "state_dict.legacy.pt": "torch-legacy",
             t2 / "state_dict.pkl": "pickle", tmp_path / "a.safetensors": "safetensors",
             tmp_path / "a.npy": "npy", tmp_path / "a.npz": "npz"}
    for path, fmt in cases.items():
        out = run_tseal("inspect", "--json", path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["format"] == fmt, path
        assert tensorseal.read(path).format == fmt


def test_torch113_values_match_manifest(t113):
    """Values torch 1.13 wrote (leaves included) come back as torch 1.13 described them."""
    for f in manifest(t113)["files"]:
        obj = tensorseal.load(t113 / f["file"])
        for leaf in f["leaves"]:
            v = obj
            for part in leaf["path"].split("."):
                v = v[int(part)] if isinstance(v, (list, tuple)) else v[part if part in v else int(part)]
            if leaf["type"] == "float":
                assert struct.pack(">d", v).hex() == leaf["value"], leaf
            elif leaf["type"] == "int":
                assert str(v) == leaf["value"], leaf
            elif leaf["type"] == "bytes":
                assert bytes(v).hex() == leaf["value"], leaf
            elif leaf["type"] == "set":
                assert sorted(repr(x) for x in v) == leaf["value"], leaf
            else:
                assert v == leaf["value"], leaf
        if f["root"] in ("tensor", "parameter"):
            assert isinstance(obj, torch.Tensor)
            assert isinstance(obj, torch.nn.Parameter) == (f["root"] == "parameter")
        if "metadata" in f:
            assert {k: dict(v) for k, v in obj._metadata.items()} == f["metadata"]


def test_nan_and_negative_zero_survive(t2):
    leaves = tensorseal.load(t2 / "leaves.pt")
    floats = leaves["floats"]
    assert math.isnan(floats[7]) and math.copysign(1, floats[1]) == -1
    assert leaves["bigints"] == [2**63, 2**64 + 1, -2**70, 10**40]
    assert leaves["set"] == {1, 2, 3} and leaves["frozenset"] == frozenset({"a", "b"})
    assert list(leaves) == ["zeta", "alpha", "mid"] + list(leaves)[3:]
    assert type(leaves["od"]) is collections.OrderedDict and leaves["od"]._metadata == {"": {"version": 1}}


@pytest.mark.parametrize("protocol", [1, 2, 3, 4, 5])
def test_legacy_files_of_every_pickle_protocol(tmp_path, protocol):
    # torch.save(..., _use_new_zipfile_serialization=False, pickle_protocol=p): the
    # format is told by the first pickle's value (the magic number), not its bytes.
    # (Protocol 0 writes text persistent ids, which torch.load itself cannot read.)
    sd = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor([1, -2], dtype=torch.int64),
          "step": 3}
    path = tmp_path / f"legacy_p{protocol}.pt"
    torch.save(sd, path, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    ref = torch.load(path, weights_only=False)
    c = tensorseal.read(path)
    assert c.format == "torch-legacy"
    got = tensorseal.load(path)
    assert got["step"] == 3 and all(torch.equal(got[k], ref[k]) and got[k].dtype == ref[k].dtype for k in ("w", "b"))
    assert tensorseal.hash(path) == tensorseal.hash(sd)
