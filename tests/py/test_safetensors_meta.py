"""A tensor on torch's meta device has no data. The real safetensors 0.8 refuses to
save one (torch's NotImplementedError "Cannot copy out of meta tensor; no data!" from
its copy to the cpu); the drop-ins tensorseal.safetensors.save/save_file refuse it
too, with an exception that is a NotImplementedError and a tensorseal.Error naming the
tensor, and write nothing: no file, no temp file, an old file at the path unchanged.
(tensorseal.save keeps meta tensors, in its structure metadata: test_meta_tensors.py.)"""
from __future__ import annotations

import pytest
import safetensors.torch as real
import torch

import tensorseal
import tensorseal.safetensors as ours

CASES = {
    "one": {"w": torch.empty(3, device="meta")},
    "empty": {"w": torch.empty(0, device="meta")},
    "scalar": {"w": torch.empty((), device="meta")},
    "parameter": {"w": torch.nn.Parameter(torch.empty(2, 5, device="meta"))},
    "after_a_real_tensor": {"a": torch.ones(2), "w": torch.empty(3, 4, dtype=torch.bfloat16, device="meta")},
}


def assert_refused_alike(theirs, mine):
    """Both calls raise NotImplementedError; tensorseal's is a tensorseal.Error naming 'w'."""
    with pytest.raises(NotImplementedError) as t:
        theirs()
    with pytest.raises(NotImplementedError) as m:
        mine()
    assert type(t.value) is NotImplementedError and "meta tensor" in str(t.value)
    assert isinstance(m.value, tensorseal.Error) and isinstance(m.value, tensorseal.InvalidArgumentError)
    assert m.value.rule == "api/invalid-argument"
    assert "tensor 'w' is on the meta device" in str(m.value)
    assert "Cannot copy out of meta tensor; no data!" in str(m.value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_save_file_of_a_meta_tensor_raises_and_writes_nothing(case, tmp_path):
    tensors = CASES[case]
    theirs, mine = tmp_path / "theirs" / "m.safetensors", tmp_path / "mine" / "m.safetensors"
    theirs.parent.mkdir()
    mine.parent.mkdir()
    assert_refused_alike(lambda: real.save_file(tensors, theirs), lambda: ours.save_file(tensors, mine))
    assert not theirs.exists() and not mine.exists()
    assert list(mine.parent.iterdir()) == []  # no temp file left either


@pytest.mark.parametrize("case", sorted(CASES))
def test_save_file_of_a_meta_tensor_leaves_an_old_file_unchanged(case, tmp_path):
    tensors = CASES[case]
    old = {"w": torch.arange(4, dtype=torch.float32)}
    theirs, mine = tmp_path / "theirs" / "m.safetensors", tmp_path / "mine" / "m.safetensors"
    theirs.parent.mkdir()
    mine.parent.mkdir()
    real.save_file(old, theirs)
    ours.save_file(old, mine)
    before = mine.read_bytes()
    assert before == theirs.read_bytes()
    assert_refused_alike(lambda: real.save_file(tensors, theirs), lambda: ours.save_file(tensors, mine))
    assert mine.read_bytes() == before == theirs.read_bytes()
    assert sorted(p.name for p in mine.parent.iterdir()) == ["m.safetensors"]
    assert torch.equal(real.load_file(mine)["w"], old["w"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_save_of_a_meta_tensor_raises(case):
    tensors = CASES[case]
    assert_refused_alike(lambda: real.save(tensors), lambda: ours.save(tensors))


def test_checks_before_the_copy_come_first_as_in_safetensors(tmp_path):
    # safetensors checks contiguity per tensor just before copying it, so a
    # non-contiguous tensor ahead of the meta one is a ValueError, in both.
    tensors = {"b": torch.ones(3, 4).t(), "w": torch.empty(3, device="meta")}
    with pytest.raises(ValueError) as t:
        real.save(tensors)
    with pytest.raises(ValueError) as m:
        ours.save(tensors)
    assert not isinstance(t.value, NotImplementedError) and not isinstance(m.value, NotImplementedError)
    assert "`b`" in str(t.value) and "`b`" in str(m.value)
    # A non-contiguous meta tensor: the contiguity check, in both.
    tensors = {"w": torch.empty(3, 4, device="meta").t()}
    for save in (real.save, ours.save):
        with pytest.raises(ValueError, match="non contiguous tensor: `w`"):
            save(tensors)
