"""tensorseal.safetensors.safe_open is lazy on safetensors files: opening parses and
validates the header only, tensors are made one at a time on get_tensor/get_slice, and
every result and error is what the eager reader gave (and what safetensors gives)."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import safetensors
import safetensors.torch
import torch

import tensorseal
import tensorseal._glue as glue
import tensorseal._tensorseal as core
import tensorseal.safetensors as tss
from tensors import SAFETENSORS_DTYPES, random_tensor

DTYPES = SAFETENSORS_DTYPES


def raw(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def header_file(path, header: dict, data: bytes = b"") -> None:
    h = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


@pytest.fixture
def count_tensors(monkeypatch):
    """Counts the framework tensors the binding makes (glue.make_tensor calls)."""
    calls = []
    real = glue.make_tensor

    def counting(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)
    monkeypatch.setattr(glue, "make_tensor", counting)
    return calls


def test_open_and_keys_make_no_tensor(tmp_path, count_tensors):
    path = tmp_path / "m.safetensors"
    safetensors.torch.save_file({f"layer.{i}.w": torch.full((3,), float(i)) for i in range(200)}, path,
                                metadata={"format": "pt"})
    with tss.safe_open(path, framework="pt") as f:
        assert len(f.keys()) == 200 and f.metadata() == {"format": "pt"}
        assert f.offset_keys()[0] == "layer.0.w"
        assert count_tensors == []
        t = f.get_tensor("layer.7.w")
        assert torch.equal(t, torch.full((3,), 7.0))
        assert len(count_tensors) == 1
        assert f.get_tensor("layer.7.w") is t  # same object every time, as before
        assert f.get_slice("layer.7.w")[1:].tolist() == [7.0, 7.0]
        assert len(count_tensors) == 1
        assert f.get_slice("layer.9.w").get_shape() == [3]
        assert len(count_tensors) == 2


def test_huge_data_section_is_not_read(tmp_path):
    # 16 GiB of tensor data in a sparse file: opening reads the header page only.
    size = 16 << 30
    path = tmp_path / "huge.safetensors"
    header_file(path, {"__metadata__": {"k": "v"}, "big": {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]},
                       "small": {"dtype": "I64", "shape": [2], "data_offsets": [size, size + 16]}})
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) + size + 16)
    with tss.safe_open(path, framework="pt") as f:
        assert f.keys() == ["big", "small"] and f.metadata() == {"k": "v"}
        assert f.get_tensor("small").tolist() == [0, 0]
        s = f.get_slice("big")
        assert s.get_shape() == [size // 4] and s.get_dtype() == "F32"
        assert s[:3].tolist() == [0.0, 0.0, 0.0]


def test_every_tensor_equals_safetensors(tmp_path):
    tensors = {}
    for i, dt in enumerate(DTYPES):
        tensors[f"t.{dt}".replace("torch.", "")] = random_tensor(dt, (3, 5), i)
        tensors[f"s.{i}"] = random_tensor(dt, (), 100 + i)
        tensors[f"e.{i}"] = torch.empty((0, 4), dtype=dt)
    # Names whose code point order differs from naive ideas of order.
    for k, name in enumerate(["é", "z", "ä", "\U0001f600", "a", "A", "~", "a.b", "a.", ""]):
        tensors[name] = torch.full((2,), float(k))
    path = tmp_path / "all.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt", "é": "ü"})
    with safetensors.safe_open(path, framework="pt") as theirs, tss.safe_open(path, framework="pt") as ours:
        assert ours.keys() == list(theirs.keys()) == sorted(tensors)
        assert ours.offset_keys() == theirs.offset_keys()
        assert ours.metadata() == theirs.metadata()
        for k in theirs.keys():
            x, y = ours.get_tensor(k), theirs.get_tensor(k)
            assert x.dtype == y.dtype and x.shape == y.shape and raw(x) == raw(y), k
            sx, sy = ours.get_slice(k), theirs.get_slice(k)
            assert sx.get_shape() == sy.get_shape() and sx.get_dtype() == sy.get_dtype(), k


def test_numpy_framework(tmp_path):
    tensors = {"f": torch.randn(4, 3), "i": torch.arange(6, dtype=torch.int32), "b": torch.tensor([True, False])}
    path = tmp_path / "np.safetensors"
    safetensors.torch.save_file(tensors, path)
    with safetensors.safe_open(path, framework="np") as theirs, tss.safe_open(path, framework="np") as ours:
        assert ours.keys() == list(theirs.keys())
        for k in theirs.keys():
            x, y = ours.get_tensor(k), theirs.get_tensor(k)
            assert type(x) is type(y) and x.dtype == y.dtype and np.array_equal(x, y)


def test_missing_names(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.torch.save_file({"x": torch.ones(2)}, path)
    f = tss.safe_open(path, "pt")
    for bad in ["y", "X", "x "]:  # safetensors' SafetensorError, and KeyError as before
        with pytest.raises(KeyError):
            f.get_tensor(bad)
        with pytest.raises(tss.SafetensorError):
            f.get_slice(bad)
    for bad in [5, None]:  # not a str: TypeError, as safetensors raises
        with pytest.raises(TypeError):
            f.get_tensor(bad)
        with pytest.raises(TypeError):
            f.get_slice(bad)
    assert repr(f) == "safe_open(format='safetensors', tensors=1)"
    assert list(iter(f)) == ["x"]


def eager_error(path):
    """The error the eager reader (read_file) gives."""
    with pytest.raises(tensorseal.Error) as e:
        core.read_tensors(os.fspath(path), "torch")
    return e.value


@pytest.mark.parametrize("header,data", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1],
                                                                         "data_offsets": [12, 16]}}, 16),
    ({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, 8),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, 8),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, 8),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 9),
    ({"a": {"dtype": "F32", "shape": [2]}}, 8),
    ({"__metadata__": {"k": 1}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 8),
    ({"a": [1]}, 0),
])
def test_errors_are_the_eager_readers(tmp_path, header, data):
    path = tmp_path / "bad.safetensors"
    header_file(path, header, b"\0" * data)
    want = eager_error(path)
    with pytest.raises(tensorseal.Error) as got:
        tss.safe_open(path, framework="pt")
    # The eager reader's error, also safetensors' SafetensorError (the drop-in's contract).
    assert isinstance(got.value, type(want)) and isinstance(got.value, tss.SafetensorError)
    assert (got.value.rule, str(got.value), got.value.offset) == (want.rule, str(want), want.offset)


def test_raw_header_errors(tmp_path):
    cases = [b"\x10\0\0\0\0\0\0\0{\"a\":{},\"a\":{}}", b"\x08\0\0\0\0\0\0\0{\"a\":[}",
             b"\xff\xff\xff\xff\0\0\0\0{}", b"\x05\0\0\0\0\0\0\0{\0}  "]
    for i, data in enumerate(cases):
        path = tmp_path / f"raw{i}.safetensors"
        path.write_bytes(data)
        want = eager_error(path)
        with pytest.raises(tensorseal.Error) as got:
            tss.safe_open(path)
        assert isinstance(got.value, type(want)) and isinstance(got.value, tss.SafetensorError)
        assert (got.value.rule, str(got.value)) == (want.rule, str(want))
    with pytest.raises(tensorseal.Error) as got:
        tss.safe_open(tmp_path / "missing.safetensors")
    assert got.value.rule == eager_error(tmp_path / "missing.safetensors").rule


def test_whole_checkpoints_keep_their_tree(tmp_path):
    """A file tensorseal.save wrote from a nested checkpoint: names are tree paths and
    the structure metadata is not shown, as before."""
    ck = {"model": {"w": torch.ones(2, 2), "b": torch.zeros(2)}, "step": 3, "tied": None}
    ck["tied"] = ck["model"]["w"]
    path = tmp_path / "whole.safetensors"
    tensorseal.save(ck, path)
    d = core.read_tensors(os.fspath(path), "torch")
    with tss.safe_open(path, framework="pt") as f:
        assert f.keys() == sorted(name for name, *_ in d["tensors"])
        assert f.metadata() == (dict(d["metadata"]) or None)
        assert torch.equal(f.get_tensor("model.w"), torch.ones(2, 2))
