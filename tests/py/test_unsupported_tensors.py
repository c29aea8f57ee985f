"""Tensors whose meaning is more than (storage, dtype, shape, strides) and that tensorseal
does not carry — jagged nested tensors, wrapper subclasses such as DTensor —
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
    yield "jagged", torch.nested.nested_tensor([torch.randn(2), torch.randn(3)], layout=torch.jagged), "jagged"
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
    # The safetensors drop-in refuses with safetensors' own messages (its checks run first).
    with pytest.raises(tensorseal.Error, match="sparse|cannot store|nested"):
        tensorseal.safetensors.save_file({"x": t}, tmp_path / "d.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_dtensor_is_refused(tmp_path):
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor, Replicate, init_device_mesh
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        d = DTensor.from_local(torch.randn(4), mesh, [Replicate()])
        with pytest.raises(TypeError, match="DTensor"):
            tensorseal.save({"x": d}, tmp_path / "x.pt")
        tensorseal.save({"x": d.to_local()}, tmp_path / "x.pt")  # what the message says to do
        assert torch.equal(torch.load(tmp_path / "x.pt")["x"], d.to_local())
    finally:
        dist.destroy_process_group()
