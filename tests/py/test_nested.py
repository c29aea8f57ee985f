"""Nested tensors (issue: fidelity). Strided nested tensors are pickled by torch as
_rebuild_nested_tensor(buffer, sizes, strides, offsets) over four plain tensors: read as
the nested tensors torch.load gives, written back in torch's own form, listed by inspect
as one tensor at their own path, and refused when a component lies outside its buffer.
Jagged (NJT) ones are test_jagged.py's. Files come from
torch.save (zip and legacy) and pickle.dumps of torch.nested.nested_tensor results."""
from __future__ import annotations

import io
import json
import pickle
import warnings

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import assert_refused, assert_saved_in_torchs_form, run_tseal

warnings.filterwarnings("ignore", message=".*nested tensors is in prototype stage.*")


def nested_cases():
    g = torch.Generator().manual_seed(3)
    nt = torch.nested.nested_tensor
    return {
        "matrices": nt([torch.randn(2, 3, generator=g), torch.randn(4, 3, generator=g)]),
        "ragged_2d": nt([torch.randn(2, 3, generator=g), torch.randn(1, 5, generator=g)]),
        "vectors_int64": nt([torch.arange(5), torch.arange(2)]),
        "scalars": nt([torch.tensor(1.5), torch.tensor(-2.0)]),
        "zero_rows": nt([torch.zeros(0, 3), torch.ones(2, 3)]),
        "bfloat16": nt([torch.randn(3, generator=g).bfloat16(), torch.randn(4, generator=g).bfloat16()]),
        "transposed": nt([torch.randn(2, 3, generator=g), torch.randn(2, 2, generator=g)]).transpose(1, 2),
    }


def assert_same_nested(a, b, what):
    assert a.is_nested and b.is_nested and a.layout == b.layout == torch.strided, what
    assert a.dtype == b.dtype, what
    ua, ub = a.unbind(), b.unbind()
    assert len(ua) == len(ub), what
    for x, y in zip(ua, ub):
        assert x.shape == y.shape and torch.equal(x, y), what


def save_all_ways(obj, tmp_path, name):
    zip_ = tmp_path / f"{name}.pt"
    legacy = tmp_path / f"{name}.legacy.pt"
    pick = tmp_path / f"{name}.pkl"
    torch.save(obj, zip_)
    torch.save(obj, legacy, _use_new_zipfile_serialization=False)
    pick.write_bytes(pickle.dumps(obj, protocol=2))
    return {"zip": zip_, "legacy": legacy, "pickle": pick}


@pytest.mark.parametrize("case", sorted(nested_cases()))
def test_nested_tensors_load_as_torch_loads_them(case, tmp_path):
    obj = {"n": nested_cases()[case], "x": torch.ones(2)}
    files = save_all_ways(obj, tmp_path, case)
    ref = torch.load(files["zip"], weights_only=True)
    assert_same_nested(ref["n"], obj["n"], case)
    for kind, f in files.items():
        got = tensorseal.load(f)
        assert_same_nested(got["n"], ref["n"], (case, kind))
        assert_same_nested(tensorseal.torch.load(f, weights_only=True)["n"], ref["n"], (case, kind))
        if kind == "legacy":
            # torch's legacy loader runs _rebuild_nested_tensor while unpickling, before
            # it has read the storages' bytes (they follow the pickle): the sizes it sees
            # are uninitialised memory, so it fails (or worse). tensorseal reads the
            # bytes the file holds: the values torch.save was given.
            try:
                theirs = torch.load(f, weights_only=True)
            except RuntimeError:
                continue
            assert_same_nested(theirs["n"], ref["n"], (case, kind))
        elif kind == "pickle":
            assert_same_nested(pickle.loads(f.read_bytes())["n"], ref["n"], (case, kind))
    # One content: the same digest for all three containers.
    assert len({tensorseal.hash(f) for f in files.values()}) == 1


def test_an_empty_nested_tensor_is_refused_as_torch_refuses_it(tmp_path):
    """torch.save writes nested_tensor([]) with 0-d sizes, which torch.load cannot
    build (an internal assert); tensorseal refuses it by rule instead of guessing."""
    p = tmp_path / "e.pt"
    torch.save({"n": torch.nested.nested_tensor([])}, p)
    with pytest.raises(RuntimeError):
        torch.load(p, weights_only=True)
    with pytest.raises(tensorseal.Error, match=r"\[torch/bad-rebuild-args\] torch._utils._rebuild_nested_tensor: "):
        tensorseal.load(p)


@pytest.mark.parametrize("case", sorted(nested_cases()))
def test_nested_tensors_save_in_torchs_form(case, tmp_path):
    obj = {"n": nested_cases()[case]}
    mine, again, theirs = tmp_path / "mine.pt", tmp_path / "again.pt", tmp_path / "theirs.pt"
    tensorseal.torch.save(obj, mine)
    tensorseal.torch.save(obj, again)
    torch.save(obj, theirs)
    assert mine.read_bytes() == again.read_bytes()  # canonical: the same bytes
    assert_same_nested(torch.load(mine, weights_only=True)["n"], obj["n"], case)
    assert_saved_in_torchs_form(obj, theirs, mine, tmp_path)


def test_inspect_lists_a_nested_tensor_at_its_own_path(tmp_path):
    nt = nested_cases()["ragged_2d"]
    p = tmp_path / "n.pt"
    torch.save({"n": nt, "alias": nt, "w": torch.ones(3)}, p)
    doc = tensorseal.inspect(p)
    by_path = {t["path"]: t for t in doc["tensors"]}
    assert sorted(by_path) == ["alias", "n", "w"]
    n = by_path["n"]
    assert n["layout"] == "nested" and n["shape"] == [2] and n["dtype"] == "float32" and n["sha256"] is None
    args = nt.__reduce_ex__(2)[1]
    assert [p["role"] for p in n["parts"]] == ["buffer", "sizes", "strides", "offsets"]
    assert [p["shape"] for p in n["parts"]] == [list(a.shape) for a in args]
    assert n["nbytes"] == sum(a.numel() * a.element_size() for a in args)
    import hashlib
    assert n["parts"][0]["sha256"] == hashlib.sha256(args[0].numpy().tobytes()).hexdigest()
    assert by_path["alias"]["alias_of"] == "n" and by_path["alias"]["parts"] == n["parts"]
    assert by_path["w"]["layout"] == "strided" and by_path["w"]["parts"] is None
    text = run_tseal("inspect", "--textconv", p).stdout
    assert "tensor n: float32 [2] nested(buffer float32 [11] sha256:" in text
    assert "value n." not in text  # the rebuild call's arguments are not listed as values
    human = run_tseal("inspect", p).stdout
    assert "(nested of 4 tensors: see --json)" in human


def test_inspect_lists_sparse_tensors_at_their_own_paths(tmp_path):
    d = torch.eye(3)
    p = tmp_path / "s.pt"
    torch.save({"coo": d.to_sparse(), "csr": d.to_sparse_csr(), "csc": d.to_sparse_csc(),
                "bsr": d.to_sparse_bsr((1, 1)), "bsc": d.to_sparse_bsc((1, 1))}, p)
    doc = json.loads(run_tseal("inspect", "--json", p).stdout)
    by_path = {t["path"]: t for t in doc["tensors"]}
    assert sorted(by_path) == ["bsc", "bsr", "coo", "csc", "csr"]
    roles = {k: [x["role"] for x in t["parts"]] for k, t in by_path.items()}
    assert roles == {"coo": ["indices", "values"], "csr": ["crow_indices", "col_indices", "values"],
                     "bsr": ["crow_indices", "col_indices", "values"],
                     "csc": ["ccol_indices", "row_indices", "values"],
                     "bsc": ["ccol_indices", "row_indices", "values"]}
    assert all(t["layout"] == "sparse_" + k and t["shape"] == [3, 3] and t["dtype"] == "float32"
               for k, t in by_path.items())


class BadNested:
    """torch.save writes _rebuild_nested_tensor(buffer, sizes, strides, offsets) with
    these arguments: what torch's own Tensor.__reduce_ex__ never writes."""

    def __init__(self, sizes, strides, offsets, buffer=None):
        self.args = (torch.arange(6.0) if buffer is None else buffer, torch.tensor(sizes), torch.tensor(strides),
                     torch.tensor(offsets))

    def __reduce__(self):
        return (torch._utils._rebuild_nested_tensor, self.args)


BAD_NESTED = {
    "component_past_the_end": BadNested([[2, 3], [2, 3]], [[3, 1], [3, 1]], [0, 3]),
    "huge_size": BadNested([[1 << 40]], [[1]], [0]),
    "negative_offset": BadNested([[2]], [[1]], [-1]),
    "negative_stride": BadNested([[2]], [[-1]], [1]),
    "offsets_not_one_per_row": BadNested([[2], [2]], [[1], [1]], [0]),
    "buffer_not_flat": BadNested([[2]], [[1]], [0], buffer=torch.ones(2, 3)),
    "sizes_float": BadNested([[2.0]], [[1]], [0]),
}


@pytest.mark.parametrize("case", sorted(BAD_NESTED))
def test_malformed_nested_tensors_are_refused(case, tmp_path):
    p = tmp_path / f"{case}.pt"
    torch.save({"n": BAD_NESTED[case]}, p)
    assert_refused(p, "torch/bad-rebuild-args", "torch._utils._rebuild_nested_tensor")


def test_safetensors_files_keep_a_nested_tensor_only_as_tensorseal_structure(tmp_path):
    """A .safetensors file holds flat tensors: tensorseal.save keeps the nested tensor
    as its four parts plus the tensorseal.structure metadata (read back as the nested
    tensor, same content hash); the safetensors drop-in refuses it as safetensors does."""
    import tensorseal.safetensors
    nt = nested_cases()["matrices"]
    p = tmp_path / "a.safetensors"
    tensorseal.save({"n": nt}, p)
    assert_same_nested(tensorseal.load(p)["n"], nt, "safetensors")
    assert tensorseal.hash(p) == tensorseal.hash({"n": nt})
    with pytest.raises(tensorseal.Error, match="nested"):
        tensorseal.safetensors.save_file({"n": nt}, tmp_path / "b.safetensors")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.safetensors"]


def test_empty_components_over_an_empty_buffer_load_as_torch_loads_them(tmp_path):
    """torch.save of a nested tensor whose components are all empty (found by the
    differential test's hypothesis run): its component strides reach past the empty
    buffer, but an empty component reaches no element, and torch.load reads it."""
    n = torch.nested.nested_tensor([torch.empty(1, 0, 2), torch.empty(1, 0, 2)])
    f = tmp_path / "n.pt"
    torch.save({"n": n}, f)
    expected = torch.load(f, weights_only=True)["n"]
    got = tensorseal.load(f)["n"]
    assert [t.shape for t in got.unbind()] == [t.shape for t in expected.unbind()] == [(1, 0, 2)] * 2
    assert run_tseal("verify", f).returncode == 0
