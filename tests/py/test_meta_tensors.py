"""Tensors on torch's meta device (shape and dtype, no data: model skeletons, deferred
init) as torch pickles them: _rebuild_meta_tensor_no_storage(dtype, size, stride,
requires_grad), inside _rebuild_parameter for Parameters. Read as torch reads them,
written back in torch's form, one content hash across containers. Made by real torch."""
from __future__ import annotations

import pickle

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import assert_saved_in_torchs_form


def state():
    return {
        "w": torch.empty(3, 4, device="meta"),
        "t": torch.empty(4, 0, dtype=torch.bfloat16, device="meta").t(),
        "p": torch.nn.Parameter(torch.empty(2, 5, device="meta")),
        "frozen": torch.nn.Parameter(torch.empty(7, device="meta", dtype=torch.int64), requires_grad=False),
        "x": torch.arange(3),
    }


def assert_same(a, b, where):
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert (a.device.type, a.dtype, a.shape, a.stride(), a.requires_grad) == \
            (b.device.type, b.dtype, b.shape, b.stride(), b.requires_grad), where
        if a.device.type != "meta":
            assert torch.equal(a, b), where
    else:
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")


def test_meta_tensors_read_as_torch_reads_them(tmp_path):
    sd = state()
    files = {"zip": tmp_path / "a.pt", "legacy": tmp_path / "b.pt", "pickle": tmp_path / "c.pkl"}
    torch.save(sd, files["zip"])
    torch.save(sd, files["legacy"], _use_new_zipfile_serialization=False)
    files["pickle"].write_bytes(pickle.dumps(sd, protocol=2))
    for kind, f in files.items():
        ref = pickle.loads(f.read_bytes()) if kind == "pickle" else torch.load(f, weights_only=True)
        assert_same(tensorseal.load(f), ref, kind)
        assert_same(ref, sd, kind)
    assert len({tensorseal.hash(f) for f in files.values()}) == 1


def test_meta_tensors_written_in_torchs_form(tmp_path):
    sd = state()
    mine, theirs = tmp_path / "mine.pt", tmp_path / "theirs.pt"
    tensorseal.torch.save(sd, mine)
    torch.save(sd, theirs)
    assert_same(torch.load(mine, weights_only=True), sd, "mine")
    assert_saved_in_torchs_form(sd, theirs, mine, tmp_path)


class BadMeta:
    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        return (torch._utils._rebuild_meta_tensor_no_storage, self.args)


@pytest.mark.parametrize("args", [(torch.float32, (3, 4), (1,), False), (torch.float32, (-1,), (1,), False),
                                  ("float32", (3,), (1,), False), (torch.float32, (3,), (1,), "yes")],
                         ids=["stride_length", "negative_size", "dtype_a_string", "requires_grad_a_string"])
def test_malformed_meta_tensors_are_refused(args, tmp_path):
    p = tmp_path / "bad.pt"
    torch.save({"m": BadMeta(*args)}, p)
    with pytest.raises(tensorseal.Error, match=r"\[torch/bad-rebuild-args\] torch._utils._rebuild_meta_tensor_no_storage"):
        tensorseal.load(p)


@pytest.mark.parametrize("size", [(2**62, 2**62), (2**31, 2**32), (2**62, 4, 0), (0, 2**62, 2**62), (2**62, 1),
                                  (2**63 - 1,)],
                         ids=["u64_overflow", "past_int64", "overflow_before_a_zero", "zero_first", "2^62", "int64_max"])
def test_meta_sizes_load_exactly_where_torch_loads_them(size, tmp_path):
    """A meta tensor has no data, but torch still computes its element count and refuses
    the file when that overflows (uint64 at any step, then int64): tensorseal reads the
    same sizes torch reads and refuses the others with its own one-line error."""
    p = tmp_path / "m.pt"
    torch.save({"m": BadMeta(torch.float32, size, (1,) * len(size), False)}, p)
    try:
        expected = torch.load(p, weights_only=True)["m"]
    except RuntimeError as e:
        assert "numel" in str(e)
        with pytest.raises(tensorseal.Error, match=r"\[torch/bad-rebuild-args\] .*element count overflows int64"):
            tensorseal.load(p)
        with pytest.raises(tensorseal.Error, match=r"element count overflows int64"):
            tensorseal.hash(p)
        return
    got = tensorseal.load(p)["m"]
    assert (got.device.type, got.shape, got.stride()) == ("meta", expected.shape, expected.stride())


def test_inspect_lists_meta_tensors_as_tensors(tmp_path):
    """A meta tensor is one composite record (tensorseal/composite.h, layout "meta"):
    inspect lists it among the tensors with its dtype and shape and no data (0 bytes, no
    parts), as torch.save wrote it."""
    sd = state()
    f = tmp_path / "m.pt"
    torch.save(sd, f)
    report = tensorseal.inspect(f)
    by_path = {t["path"]: t for t in report["tensors"]}
    for name in ("w", "t", "p", "frozen"):
        entry = next(t for p, t in by_path.items() if p.startswith(name))
        assert entry["layout"] == "meta", entry
        assert entry["shape"] == list(sd[name].shape) and entry["nbytes"] == 0 and not entry["parts"]
        assert entry["dtype"] == str(sd[name].dtype).removeprefix("torch.")
    assert by_path["x"].get("layout") in (None, "strided")
