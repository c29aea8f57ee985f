"""Saving reads each tensor's fields in the binding (plain CPU tensors directly, every
other kind through the glue's classify). Whatever the route, the saved content must
be what torch itself writes for the same object: the content hash of the in-memory
object equals the hash of torch.save's file (read by the C++ reader, no Python), and
both save routes give the same canonical bytes."""
from __future__ import annotations

import gc

import pytest
import torch

import tensorseal


def objects() -> dict:
    g = torch.Generator().manual_seed(7)
    base = torch.randn(6, 5, generator=g)
    z = torch.randn(4, dtype=torch.complex64, generator=g)
    tagged = torch.arange(3.0)
    tagged.note = "kept"  # attributes: the glue's route
    cases = {
        "dtypes": {str(dt): torch.arange(6).to(dt) for dt in
                   (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
                    torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32)},
        "views": {"t": base.t(), "step": base[::2, 1:], "offset": base[3], "same": base, "expanded":
                  torch.ones(3, 1).expand(3, 4), "scalar": torch.tensor(2.5)},
        "empty": {"a": torch.zeros(0), "b": torch.zeros(0, dtype=torch.int64), "c": torch.zeros(2, 0, 3)},
        "params": {"p": torch.nn.Parameter(torch.ones(2, 2)),
                   "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False),
                   "grad": torch.ones(3, requires_grad=True)},
        "flags": {"conj": z.conj(), "plain": z},
        "negated": {"neg": z.clone().conj().imag},
        "attributes": {"tagged": tagged},
        "nested": {"list": [base, base[1]], "tuple": (base.t(), 3), "inner": {"x": base, 1: torch.zeros(2)}},
    }
    return cases


@pytest.mark.parametrize("case", sorted(objects()))
def test_in_memory_hash_equals_torch_save_file(case, tmp_path):
    obj = objects()[case]
    p = tmp_path / "t.pt"
    torch.save(obj, p)
    assert tensorseal.hash(obj) == tensorseal.hash(p)
    assert tensorseal.save_bytes(obj, "pt") == tensorseal.save_bytes(tensorseal.load(p), "pt")


def test_shared_storage_stays_shared_on_save(tmp_path):
    base = torch.arange(12.0)
    obj = {"a": base[:6], "b": base[6:], "c": base.view(3, 4)}
    p = tmp_path / "s.pt"
    tensorseal.save(obj, p)
    back = torch.load(p, weights_only=True)
    assert back["a"].untyped_storage().data_ptr() == back["c"].untyped_storage().data_ptr()
    assert torch.equal(back["c"], base.view(3, 4))


def test_conjugated_and_negated_views_save_their_values(tmp_path):
    z = torch.tensor([1 + 2j, 3 - 4j])
    p = tmp_path / "c.safetensors"
    tensorseal.save({"im": z.conj().imag, "c": z.conj()}, p)
    back = tensorseal.load(p)
    assert back["im"].tolist() == [-2.0, 4.0]
    assert back["c"].tolist() == [1 - 2j, 3 + 4j]


def test_saving_leaves_the_garbage_collector_as_it_was(tmp_path):
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            tensorseal.save({"a": torch.ones(2)}, tmp_path / "g.safetensors")
            assert gc.isenabled() is enabled
            with pytest.raises(tensorseal.Error):
                tensorseal.save_bytes({"a": object()}, "pt")
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


def test_a_plain_tensor_subclass_saves_its_data():
    class Mine(torch.Tensor):
        pass

    t = torch.arange(4.0).as_subclass(Mine)  # not exactly torch.Tensor: the glue's route
    assert tensorseal.hash({"t": t}) == tensorseal.hash({"t": torch.arange(4.0)})
