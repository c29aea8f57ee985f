"""inspect lists a tensor at every path torch.load gives it (issue: the same tensor
object under several keys was listed only under the first): aliases carry
"alias_of": <first path>, the same dtype, shape and digest, in JSON, the table, the
textconv form and the manifest. Files made by real torch.save."""
from __future__ import annotations

import collections

import torch

import tensorseal
from conftest import run_tseal


def torch_paths(obj, prefix=""):
    """(path, tensor) for every tensor torch.load's result holds, in order."""
    join = lambda k: f"{prefix}.{k}" if prefix else str(k)  # noqa: E731
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from torch_paths(v, join(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from torch_paths(v, join(i))


def test_every_path_torch_loads_is_listed(tmp_path):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied by assignment, as language models do
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    a = torch.randn(3)
    ckpt = collections.OrderedDict(model=model.state_dict(keep_vars=True), a=a, b=a, pair=[a, torch.ones(2)],
                                   nested={"again": a})
    path = tmp_path / "tied.pt"
    torch.save(ckpt, path)
    loaded = torch.load(path, weights_only=False)
    expected = list(torch_paths(loaded))
    report = tensorseal.inspect(path)
    assert [t["path"] for t in report["tensors"]] == [p for p, _ in expected]
    first = {}
    for t, (p, tensor) in zip(report["tensors"], expected):
        key = tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)
        if key in first:
            assert t["alias_of"] == first[key], p
        else:
            first[key] = p
            assert t["alias_of"] is None
        assert t["dtype"] == str(tensor.dtype).removeprefix("torch.") and t["shape"] == list(tensor.shape)
    assert {t["path"]: t["alias_of"] for t in report["tensors"] if t["alias_of"]} == {
        "model.head.weight": "model.emb.weight", "b": "a", "pair.0": "a", "nested.again": "a"}
    by_path = {t["path"]: t for t in report["tensors"]}
    assert by_path["b"]["sha256"] == by_path["a"]["sha256"]
    # The table says which tensor an alias is; textconv and the manifest list every path.
    table = run_tseal("inspect", path).stdout
    assert "(same tensor as model.emb.weight)" in table and "and 4 more path(s) to the same tensors" in table
    textconv = run_tseal("inspect", "--textconv", path).stdout
    assert "tensor nested.again: float32 [3] sha256:" + by_path["a"]["sha256"] in textconv
    manifest = run_tseal("manifest", path).stdout
    assert '"path": "model.head.weight"' in manifest
