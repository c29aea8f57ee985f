"""Tensors whose meaning is more than (storage, dtype, shape, strides) and that tensorseal
does not carry — wrapper subclasses such as torch's TwoTensor (DTensors are carried:
test_dtensor_torch_save.py) —
are refused by every writer and by hash(obj) with a clear TypeError, never written as a
plain tensor that loses their scale / offsets / shards (torch then fails or, worse,
reads other values). Made by real torch."""
from __future__ import annotations

import pytest
import torch

import tensorseal
import tensorseal.safetensors
import tensorseal.torch as tt


def unsupported():
    x = torch.randn(2, 3)
    # Quantized tensors are carried (tests/py/test_quantized.py).
    # Strided nested tensors are written as torch writes them (tests/py/test_nested.py).
    # Jagged nested tensors too (tests/py/test_jagged.py).
    from torch.testing._internal.two_tensor import TwoTensor
    yield "two_tensor", TwoTensor(x, x * 2), "TwoTensor \\(a tensor subclass wrapping other tensors\\)"
    # Sparse layouts are written as torch writes them (tests/py/test_quantized.py).


@pytest.mark.parametrize("name,t,words", list(unsupported()), ids=[c[0] for c in unsupported()])
def test_refused_everywhere(tmp_path, name, t, words):
    writers = [
        lambda: tt.save({"x": t}, tmp_path / "a.pt"),
        lambda: tensorseal.save({"x": t}, tmp_path / "b.pt"),
        lambda: tensorseal.save({"x": t}, tmp_path / "c.safetensors"),
        lambda: tensorseal.hash({"x": t}),
    ]
    for w in writers:
        with pytest.raises(TypeError, match=words):
            w()
    # The safetensors drop-in refuses as safetensors itself does (its checks run first).
    import safetensors.torch
    with pytest.raises(Exception) as theirs:
        safetensors.torch.save_file({"x": t}, tmp_path / "d.safetensors")
    with pytest.raises(type(theirs.value)) as mine:
        tensorseal.safetensors.save_file({"x": t}, tmp_path / "d.safetensors")
    assert str(mine.value) == str(theirs.value)
    assert list(tmp_path.iterdir()) == []
