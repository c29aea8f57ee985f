"""torch.nn.Parameters of sparse, nested and meta tensors, made by real torch: torch
pickles each as _rebuild_parameter(<the tensor's rebuild call>, requires_grad,
OrderedDict()), and torch.load(weights_only=True) gives the Parameter back. tensorseal
reads them as torch does, lists each at its own path, and writes them back in torch's
form (one content hash across both writers). The same tensors and Parameters with
Python attributes keep them, in torch's form."""
from __future__ import annotations

import warnings

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import assert_saved_in_torchs_form, run_tseal

warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
warnings.filterwarnings("ignore", message=".*nested.*")


def tensors():
    coo = torch.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [1.5, -2.0, 3.25], (2, 3))
    return {
        "coo": coo,
        "coo_coalesced": coo.coalesce(),
        "csr": torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr(),
        "csc": torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csc(),
        "bsr": torch.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2)),
        "nested": torch.nested.nested_tensor([torch.arange(2.0), torch.arange(3.0)]),
        "meta": torch.empty(2, 3, device="meta"),
    }


KINDS = list(tensors())


def parameter(kind: str, requires_grad: bool) -> torch.nn.Parameter:
    return torch.nn.Parameter(tensors()[kind], requires_grad=requires_grad)


def dense(t: torch.Tensor):
    if t.device.type == "meta":
        return (t.shape, t.stride())
    if t.is_nested:
        return [x.tolist() for x in t.unbind()]
    return t.to_dense().tolist()


def assert_same_parameter(got, expected, where: str) -> None:
    assert type(got) is torch.nn.Parameter, where
    assert (got.layout, got.dtype, got.device.type, got.requires_grad, got.is_nested) == \
        (expected.layout, expected.dtype, expected.device.type, expected.requires_grad, expected.is_nested), where
    assert dense(got.detach()) == dense(expected.detach()), where


@pytest.mark.parametrize("requires_grad", [True, False], ids=["grad", "frozen"])
@pytest.mark.parametrize("kind", KINDS)
def test_composite_parameters_read_as_torch_reads_them(kind, requires_grad, tmp_path):
    f = tmp_path / "p.pt"
    torch.save({"p": parameter(kind, requires_grad), "x": torch.arange(3)}, f)
    expected = torch.load(f, weights_only=True)["p"]
    got = tensorseal.load(f)
    assert_same_parameter(got["p"], expected, kind)
    assert torch.equal(got["x"], torch.arange(3))
    assert run_tseal("verify", f).returncode == 0


@pytest.mark.parametrize("kind", KINDS)
def test_composite_parameters_are_listed_at_their_own_path(kind, tmp_path):
    """One tensor entry at the Parameter's path, not inside its rebuild call."""
    f = tmp_path / "p.pt"
    torch.save({"p": parameter(kind, True)}, f)
    report = tensorseal.inspect(f)
    paths = [t["path"] for t in report["tensors"]]
    assert paths[0] == "p", paths
    assert not any(p.startswith("p.args") for p in paths), paths
    expected_layout = "nested" if kind == "nested" else "meta" if kind == "meta" else tensors()[kind].layout
    assert report["tensors"][0]["layout"] == str(expected_layout).removeprefix("torch."), report["tensors"][0]


@pytest.mark.parametrize("requires_grad", [True, False], ids=["grad", "frozen"])
@pytest.mark.parametrize("kind", KINDS)
def test_composite_parameters_written_in_torchs_form(kind, requires_grad, tmp_path):
    """tensorseal.torch.save keeps the Parameter (it once wrote the bare tensor): torch
    loads a Parameter back, and torch's own file canonicalises to the same bytes."""
    obj = {"p": parameter(kind, requires_grad)}
    theirs, mine = tmp_path / "theirs.pt", tmp_path / "mine.pt"
    torch.save(obj, theirs)
    tensorseal.torch.save(obj, mine)
    assert_same_parameter(torch.load(mine, weights_only=True)["p"], obj["p"], kind)
    assert_saved_in_torchs_form(obj, theirs, mine, tmp_path)


ATTRIBUTES = {"tag": "x", "n": 5, "items": [1, "a", None], "scale": 0.5}


def attributed(kind: str) -> torch.Tensor:
    t = tensors()[kind]
    t.__dict__.update(ATTRIBUTES)
    return t


@pytest.mark.parametrize("kind", KINDS)
def test_composite_tensors_keep_their_attributes_as_torch_does(kind, tmp_path):
    """torch pickles a sparse / nested / meta tensor's attributes as
    _rebuild_from_type_v2(<its rebuild function>, torch.Tensor, <args>, {attributes}):
    tensorseal reads that back as the tensor with its attributes (it once gave an
    Opaque object), lists it at its own path, and writes the same form."""
    obj = {"t": attributed(kind), "x": torch.arange(3)}
    theirs, mine = tmp_path / "theirs.pt", tmp_path / "mine.pt"
    torch.save(obj, theirs)
    expected = torch.load(theirs, weights_only=True)["t"]
    for got in (tensorseal.load(theirs)["t"], tensorseal.torch.load(theirs, weights_only=True)["t"]):
        assert type(got) is torch.Tensor and got.__dict__ == expected.__dict__ == ATTRIBUTES, kind
        assert (got.layout, got.dtype, got.device.type, got.is_nested) == \
            (expected.layout, expected.dtype, expected.device.type, expected.is_nested), kind
        assert dense(got) == dense(expected), kind
    assert run_tseal("verify", theirs).returncode == 0
    assert [t["path"] for t in tensorseal.inspect(theirs)["tensors"]][0] == "t"
    tensorseal.torch.save(obj, mine)
    assert torch.load(mine, weights_only=True)["t"].__dict__ == ATTRIBUTES
    assert_saved_in_torchs_form(obj, theirs, mine, tmp_path)
    # torch's legacy (non-zip) format holds the same call: the same tensor, the same hash.
    legacy = tmp_path / "legacy.pt"
    torch.save(obj, legacy, _use_new_zipfile_serialization=False)
    assert tensorseal.load(legacy)["t"].__dict__ == ATTRIBUTES
    assert tensorseal.hash(legacy) == tensorseal.hash(theirs)
    # In a .safetensors file (the tree in its metadata) they come back too.
    st = tmp_path / "t.safetensors"
    tensorseal.save(obj, st)
    assert tensorseal.load(st)["t"].__dict__ == ATTRIBUTES
    assert tensorseal.hash(st) == tensorseal.hash(theirs)
    # Without the attributes it is another value: another content hash.
    assert tensorseal.hash(theirs) != tensorseal.hash({"t": tensors()[kind], "x": torch.arange(3)})


@pytest.mark.parametrize("kind", KINDS)
def test_composite_parameters_keep_their_attributes_as_torch_does(kind, tmp_path):
    """torch pickles such a Parameter's attributes as _rebuild_parameter_with_state(<the
    tensor's call>, requires_grad, OrderedDict(), {attributes}): tensorseal read it as an
    error and refused to save it; now both keep them, in torch's form."""
    p = parameter(kind, False)
    p.__dict__.update(ATTRIBUTES)
    obj = {"p": p}
    theirs, mine = tmp_path / "theirs.pt", tmp_path / "mine.pt"
    torch.save(obj, theirs)
    expected = torch.load(theirs, weights_only=True)["p"]
    got = tensorseal.load(theirs)["p"]
    assert_same_parameter(got, expected, kind)
    assert got.__dict__ == expected.__dict__ == ATTRIBUTES
    assert run_tseal("verify", theirs).returncode == 0
    tensorseal.torch.save(obj, mine)
    back = torch.load(mine, weights_only=True)["p"]
    assert_same_parameter(back, p, kind)
    assert back.__dict__ == ATTRIBUTES
    assert_saved_in_torchs_form(obj, theirs, mine, tmp_path)


@pytest.mark.parametrize("kind", ["coo", "nested", "meta"])
def test_composite_attributes_holding_a_tensor_are_refused_on_read(kind, tmp_path):
    """As for a plain tensor (test_attribute_holding_a_tensor_is_refused): torch.save
    writes them, tensorseal refuses the file with its rule instead of loading an
    object that is not the tensor."""
    for obj in (tensors()[kind], parameter(kind, True)):
        obj.extra = torch.arange(2)
        f = tmp_path / "t.pt"
        torch.save({"t": obj}, f)
        with pytest.raises(tensorseal.Error, match="attributes on a .*sparse, nested or meta tensor") as e:
            tensorseal.load(f)
        assert e.value.rule == "torch/unsupported-rebuild"
        r = run_tseal("verify", f)
        assert r.returncode == 2 and "torch/unsupported-rebuild" in r.stderr, r.stderr
