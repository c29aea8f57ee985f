"""DTensors saved by torch.save (issue: fidelity): each rank of an FSDP2 / DTensor job
that calls torch.save(state_dict) writes its DTensors as
_rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, (DTensor, dtype, size, stride,
offset, layout, device, requires_grad), (None, {_local_tensor, _spec})), the spec being
DeviceMesh / placement / TensorMeta objects that torch's weights_only loader allows.
tensorseal reads them as torch.load does, writes them back in torch's form, lists each
as one tensor at its own path (global shape, local part), and scan calls them safe.
Files: every rank's torch.save of real DTensor state (Shard(0), Shard(1), Replicate(),
Shard(2)) and of an FSDP2 model + AdamW state dict, under torchrun with 2 and 4 ranks
(producers/dcp_save.py)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed.tensor  # noqa: F401  (torch.load's weights_only needs it imported)
from torch.distributed.tensor import DTensor

import tensorseal
import tensorseal.torch
from conftest import assert_refused, assert_saved_in_torchs_form, run_tseal

warnings.filterwarnings("ignore", message=".*pickling/unpickling of the DeviceMesh.*")


def rank_files(dcp_saved):
    return [(world, f) for world in (2, 4) for f in sorted(dcp_saved[world].glob("*_rank*.pt"))]


def same(ours, theirs, path="root"):
    assert type(ours) is type(theirs), f"{path}: {type(ours).__name__} != {type(theirs).__name__}"
    if isinstance(theirs, DTensor):
        assert ours.placements == theirs.placements and ours._spec == theirs._spec, path
        assert ours.shape == theirs.shape and ours.stride() == theirs.stride() and ours.dtype == theirs.dtype, path
        assert ours.requires_grad == theirs.requires_grad, path
        assert ours.device_mesh.mesh.tolist() == theirs.device_mesh.mesh.tolist(), path
        assert ours.device_mesh.__dict__.keys() == theirs.device_mesh.__dict__.keys(), path
        assert torch.equal(ours._local_tensor, theirs._local_tensor), path
    elif isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), path
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), path
        for k in theirs:
            same(ours[k], theirs[k], f"{path}.{k}")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs, path


def test_per_rank_torch_save_files_load_as_torch_loads_them(dcp_saved):
    files = rank_files(dcp_saved)
    assert len(files) == 12  # torch_save_rank<r>.pt and fsdp2_rank<r>.pt for 2 + 4 ranks
    for world, f in files:
        theirs = torch.load(f, weights_only=True)
        assert any(isinstance(v, DTensor) for v in (theirs.get("model") or theirs).values()), f
        same(tensorseal.load(f), theirs, f"{world}:{f.name}")
        same(tensorseal.torch.load(f, weights_only=True), theirs, f"{world}:{f.name}")


def test_dtensor_files_save_in_torchs_form(dcp_saved, tmp_path):
    for world, f in rank_files(dcp_saved):
        obj = torch.load(f, weights_only=True)
        mine = tmp_path / f"{world}_{f.name}"
        tensorseal.torch.save(obj, mine)
        same(torch.load(mine, weights_only=True), obj, f"{world}:{f.name}")
        assert_saved_in_torchs_form(obj, f, mine, tmp_path, sharded=True)


def test_inspect_lists_each_dtensor_at_its_own_path(dcp_saved):
    f = dcp_saved[2] / "torch_save_rank1.pt"
    by_path = {t["path"]: t for t in tensorseal.inspect(f)["tensors"]}
    assert sorted(by_path) == ["col", "cube", "plain.bias", "plain.mask", "rep", "row"]
    theirs = torch.load(f, weights_only=True)
    for name in ("row", "col", "rep", "cube"):
        t = by_path[name]
        assert t["layout"] == "dtensor" and t["shape"] == list(theirs[name].shape), name
        assert t["dtype"] == str(theirs[name].dtype).removeprefix("torch."), name
        assert [p["role"] for p in t["parts"]] == ["local_tensor"], name
        assert t["parts"][0]["shape"] == list(theirs[name]._local_tensor.shape), name
    assert by_path["row"]["parts"][0]["shape"] == [4, 6]  # rank 1's half of Shard(0)
    assert "row         float32   [8, 6]     (dtensor of 1 tensor: see --json)" in run_tseal("inspect", f).stdout
    r = run_tseal("scan", f)
    assert r.returncode == 0 and "0 unknown, 0 dangerous" in r.stdout, r.stdout


def test_a_dtensor_in_this_process_saves_as_torch_saves_it(tmp_path):
    """A DTensor of a live (1-rank gloo) job: tensorseal.torch.save writes torch's form,
    tensorseal.save(.pt) too; hash(obj) is the file's."""
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard, init_device_mesh
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        obj = {"w": DTensor.from_local(torch.randn(4, 3), mesh, [Shard(0)]),
               "b": DTensor.from_local(torch.arange(3), mesh, [Replicate()])}
        theirs, mine = tmp_path / "theirs.pt", tmp_path / "mine.pt"
        torch.save(obj, theirs)
        tensorseal.torch.save(obj, mine)
        assert_saved_in_torchs_form(obj, theirs, mine, tmp_path, sharded=True)
        same(tensorseal.load(mine), obj)
    finally:
        dist.destroy_process_group()


class BadDTensor:
    """The DTensor rebuild call with a state torch.save never writes."""

    def __init__(self, local, size=(4,), state=None):
        from torch.distributed.tensor import Replicate
        self.size, self.local = size, local
        self.state = state if state is not None else (None, {"_local_tensor": local, "_spec": Replicate()})

    def __reduce__(self):
        args = (DTensor, torch.float32, self.size, (1,) * len(self.size), 0, torch.strided, torch.device("cpu"), False)
        return (torch._tensor._rebuild_from_type_v2, (torch._utils._rebuild_wrapper_subclass, DTensor, args, self.state))


BAD_DTENSOR = {
    "local_dtype_differs": BadDTensor(torch.ones(4, dtype=torch.int64)),
    "local_larger": BadDTensor(torch.ones(5)),
    "local_other_rank": BadDTensor(torch.ones(2, 2)),
    "no_local_tensor": BadDTensor(torch.ones(4), state=(None, {"_spec": 1})),
    "negative_size": BadDTensor(torch.ones(4), size=(-4,)),
}


@pytest.mark.parametrize("case", sorted(BAD_DTENSOR))
def test_malformed_dtensors_are_refused(case, tmp_path):
    p = tmp_path / f"{case}.pt"
    torch.save({"w": BAD_DTENSOR[case]}, p)
    assert_refused(p, "torch/bad-rebuild-args", "torch._tensor._rebuild_from_type_v2")
