"""Jagged nested tensors (NJT, layout torch.jagged; issue: fidelity). torch pickles one
as _rebuild_from_type_v2(_rebuild_njt, NestedTensor, ({values, offsets, lengths,
_ragged_idx, _metadata_cache, requires_grad},), {attributes}), with torch._dynamo's
records (_DimRange) among the attributes of its inner tensors. tensorseal reads it as the
NestedTensor torch.load builds, writes it back in torch's own form, lists it as one
tensor at its own path, and refuses arguments torch would not check. Files come from
torch.save (zip and legacy) and pickle.dumps of torch.nested results."""
from __future__ import annotations

import hashlib
import pickle
import warnings

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import assert_refused, assert_saved_in_torchs_form, run_tseal

warnings.filterwarnings("ignore", message=".*is_fx_tracing.*")


def jagged_cases():
    g = torch.Generator().manual_seed(5)
    nt = lambda ts, **kw: torch.nested.nested_tensor(ts, layout=torch.jagged, **kw)  # noqa: E731
    from_jagged = torch.nested.nested_tensor_from_jagged
    values = torch.randn(9, 3, generator=g)
    return {
        "vectors": nt([torch.arange(3.0), torch.arange(5.0)]),
        "matrices": nt([torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)]),
        "int64": nt([torch.arange(4), torch.arange(1)]),
        "bfloat16": nt([torch.randn(2, 2, generator=g).bfloat16(), torch.randn(1, 2, generator=g).bfloat16()]),
        "requires_grad": nt([torch.randn(3, generator=g), torch.randn(2, generator=g)], requires_grad=True),
        "int32_offsets": from_jagged(values, torch.tensor([0, 4, 9], dtype=torch.int32)),
        "with_lengths": from_jagged(values, torch.tensor([0, 3, 6]), lengths=torch.tensor([2, 3])),
        "seqlen_cache": from_jagged(values, torch.tensor([0, 2, 9]), min_seqlen=2, max_seqlen=7),
        "narrow": torch.nested.narrow(torch.randn(3, 10, generator=g), 1, torch.tensor([0, 1, 2]),
                                      torch.tensor([3, 4, 5]), layout=torch.jagged),
        "transposed": nt([torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)]).transpose(1, 2),
    }


def assert_same_jagged(a, b, what, strides=True):
    """`strides`: the values' memory layout too (a canonical file stores every tensor
    contiguous: a transposed NJT comes back with the same elements, contiguous)."""
    assert type(a) is type(b) and a.layout == b.layout == torch.jagged, what
    assert a.dtype == b.dtype and a.requires_grad == b.requires_grad and a._ragged_idx == b._ragged_idx, what
    assert a._values.shape == b._values.shape and (not strides or a._values.stride() == b._values.stride()), what
    assert torch.equal(a._values.detach(), b._values.detach()), what
    assert a._offsets.dtype == b._offsets.dtype and torch.equal(a._offsets, b._offsets), what
    assert (a._lengths is None) == (b._lengths is None), what
    if a._lengths is not None:
        assert torch.equal(a._lengths, b._lengths), what
    assert {k: v.shape for k, v in a._metadata_cache.items()} == {k: v.shape for k, v in b._metadata_cache.items()}
    # The Python attributes torch.load restores, on the NJT and on its inner tensors.
    assert a.__dict__.keys() == b.__dict__.keys(), what
    assert a._values.__dict__ == b._values.__dict__, what
    for k in a._metadata_cache:
        assert a._metadata_cache[k].__dict__ == b._metadata_cache[k].__dict__, what
    for x, y in zip(a.detach().unbind(), b.detach().unbind()):
        assert x.shape == y.shape and torch.equal(x, y), what


def save_all_ways(obj, tmp_path, name):
    files = {"zip": tmp_path / f"{name}.pt", "legacy": tmp_path / f"{name}.legacy.pt", "pickle": tmp_path / f"{name}.pkl"}
    torch.save(obj, files["zip"])
    torch.save(obj, files["legacy"], _use_new_zipfile_serialization=False)
    files["pickle"].write_bytes(pickle.dumps(obj, protocol=2))
    return files


@pytest.mark.parametrize("case", sorted(jagged_cases()))
def test_jagged_tensors_load_as_torch_loads_them(case, tmp_path):
    obj = {"n": jagged_cases()[case], "x": torch.ones(2)}
    files = save_all_ways(obj, tmp_path, case)
    for kind, f in files.items():
        ref = pickle.loads(f.read_bytes()) if kind == "pickle" else torch.load(f, weights_only=True)
        assert_same_jagged(ref["n"], obj["n"], (case, kind, "torch"))
        assert_same_jagged(tensorseal.load(f)["n"], ref["n"], (case, kind))
        assert_same_jagged(tensorseal.torch.load(f, weights_only=True)["n"], ref["n"], (case, kind))
    assert len({tensorseal.hash(f) for f in files.values()} | {tensorseal.hash(obj)}) == 1


@pytest.mark.parametrize("case", sorted(jagged_cases()))
def test_jagged_tensors_save_in_torchs_form(case, tmp_path):
    obj = {"n": jagged_cases()[case]}
    mine, again, theirs = tmp_path / "mine.pt", tmp_path / "again.pt", tmp_path / "theirs.pt"
    tensorseal.torch.save(obj, mine)
    tensorseal.torch.save(obj, again)
    torch.save(obj, theirs)
    assert mine.read_bytes() == again.read_bytes()
    assert_same_jagged(torch.load(mine, weights_only=True)["n"], obj["n"], case, strides=False)
    assert_saved_in_torchs_form(obj, theirs, mine, tmp_path)


def test_a_jagged_tensor_keeps_its_type_through_safetensors_and_numpy(tmp_path):
    """A .safetensors file holds flat tensors: tensorseal.save keeps the NJT as its parts
    plus tensorseal.structure (read back as the NJT, same content hash); the safetensors
    drop-in refuses it with safetensors' own ValueError (it calls it sparse); numpy has no jagged tensor (stays the call)."""
    import tensorseal.safetensors
    nj = jagged_cases()["matrices"]
    p = tmp_path / "a.safetensors"
    tensorseal.save({"n": nj}, p)
    assert_same_jagged(tensorseal.load(p)["n"], nj, "safetensors")
    assert tensorseal.hash(p) == tensorseal.hash({"n": nj})
    with pytest.raises(ValueError, match=r"You are trying to save a sparse tensors: `\['n'\]`"):
        tensorseal.safetensors.save_file({"n": nj}, tmp_path / "b.safetensors")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.safetensors"]
    as_numpy = tensorseal.load(p, framework="numpy")["n"]
    assert isinstance(as_numpy, tensorseal.Opaque) and as_numpy.args[0].name == "_rebuild_njt"


def test_inspect_and_scan_see_one_jagged_tensor(tmp_path):
    nj = jagged_cases()["with_lengths"]
    p = tmp_path / "n.pt"
    torch.save({"n": nj, "w": torch.ones(3)}, p)
    doc = tensorseal.inspect(p)
    by_path = {t["path"]: t for t in doc["tensors"]}
    assert sorted(by_path) == ["n", "w"]
    n = by_path["n"]
    assert n["layout"] == "jagged" and n["shape"] == [2] and n["dtype"] == "float32" and n["sha256"] is None
    assert [x["role"] for x in n["parts"]] == ["values", "offsets", "lengths"]
    assert n["parts"][0]["shape"] == [9, 3]
    assert n["parts"][0]["sha256"] == hashlib.sha256(nj._values.numpy().tobytes()).hexdigest()
    assert "(jagged of 3 tensors: see --json)" in run_tseal("inspect", p).stdout
    r = run_tseal("scan", p)
    assert r.returncode == 0 and "0 unknown, 0 dangerous" in r.stdout, r.stdout


class BadJagged:
    """What NestedTensor.__reduce_ex__ never writes: the rebuild call with these
    keyword arguments (values: 6 rows)."""

    def __init__(self, **kwargs):
        base = {"values": torch.arange(6.0), "offsets": torch.tensor([0, 2, 6]), "lengths": None, "_ragged_idx": 1,
                "_metadata_cache": {}, "requires_grad": False}
        base.update(kwargs)
        self.kwargs = {k: v for k, v in base.items() if v is not ...}

    def __reduce__(self):
        from torch.nested._internal.nested_tensor import NestedTensor, _rebuild_njt
        return (torch._tensor._rebuild_from_type_v2, (_rebuild_njt, NestedTensor, (self.kwargs,), {}))


BAD_JAGGED = {
    "offset_past_the_end": BadJagged(offsets=torch.tensor([0, 2, 7])),
    "offsets_decrease": BadJagged(offsets=torch.tensor([0, 4, 2])),
    "negative_offset": BadJagged(offsets=torch.tensor([-1, 2, 6])),
    "length_past_the_end": BadJagged(offsets=torch.tensor([0, 4, 6]), lengths=torch.tensor([2, 3])),
    "lengths_not_one_per_component": BadJagged(lengths=torch.tensor([2])),
    "offsets_float": BadJagged(offsets=torch.tensor([0.0, 2.0, 6.0])),
    "offsets_2d": BadJagged(offsets=torch.tensor([[0, 2, 6]])),
    "ragged_idx_outside": BadJagged(_ragged_idx=2),
    "no_values": BadJagged(values=...),
    "unknown_keyword": BadJagged(extra=1),
    "unknown_cache_entry": BadJagged(_metadata_cache={"other": torch.ones(1)}),
}


@pytest.mark.parametrize("case", sorted(BAD_JAGGED))
def test_malformed_jagged_tensors_are_refused(case, tmp_path):
    p = tmp_path / f"{case}.pt"
    torch.save({"n": BAD_JAGGED[case]}, p)
    assert_refused(p, "torch/bad-rebuild-args", "torch._tensor._rebuild_from_type_v2")
