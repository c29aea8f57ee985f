"""torch.nn.Parameters of sparse, nested and meta tensors, made by real torch: torch
pickles each as _rebuild_parameter(<the tensor's rebuild call>, requires_grad,
OrderedDict()), and torch.load(weights_only=True) gives the Parameter back. tensorseal
reads them as torch does, lists each at its own path, writes them back in torch's form
(one content hash across both writers), and refuses the attributes it cannot write
instead of dropping them."""
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


@pytest.mark.parametrize("kind", KINDS)
def test_attributes_on_composite_tensors_are_refused_not_dropped(kind, tmp_path):
    """torch pickles a sparse / nested / meta tensor's attributes through
    _rebuild_from_type_v2, a form tensorseal does not write: the save is refused and
    nothing is written (tensorseal once wrote the tensor without them)."""
    t = tensors()[kind]
    t.tag = "x"
    p = parameter(kind, True)
    p.tag = "x"
    for obj in ({"t": t}, {"p": p}):
        with pytest.raises(TypeError, match="with attributes"):
            tensorseal.torch.save(obj, tmp_path / "out.pt")
        with pytest.raises(TypeError, match="with attributes"):
            tensorseal.save(obj, tmp_path / "out.safetensors")
    assert list(tmp_path.iterdir()) == []
