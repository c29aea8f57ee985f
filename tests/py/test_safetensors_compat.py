"""tensorseal vs the real safetensors 0.8 and torch 2.13: byte identity of the writer,
reading safetensors-written files, round trips of every dtype and odd value."""
from __future__ import annotations

import hashlib
import json
import struct

import pytest
import torch
from hypothesis import given, settings, strategies as st
from safetensors.torch import load_file, save, save_file

import tensorseal
from conftest import run_tseal
from tensors import SAFETENSORS_DTYPES, random_tensor

def elem_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else \
        t.reshape(1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", SAFETENSORS_DTYPES, ids=str)
def test_writer_is_byte_identical_to_safetensors(dtype, tmp_path):
    tensors = {"b": random_tensor(dtype, (3, 5), 1), "a": random_tensor(dtype, (7,), 2),
               "scalar": random_tensor(dtype, (), 3), "empty": random_tensor(dtype, (0, 4), 4)}
    ours = tensorseal.save_bytes(tensors, "safetensors")
    theirs = save(tensors)
    assert ours == theirs
    tensorseal.save(tensors, tmp_path / "x.safetensors")
    assert (tmp_path / "x.safetensors").read_bytes() == theirs


def test_mixed_dtypes_and_one_metadata_key_identical():
    tensors = {f"t{i}": random_tensor(dt, (2, 3), i) for i, dt in enumerate(SAFETENSORS_DTYPES)}
    meta = {"format": "pt"}
    assert tensorseal.save_bytes(tensors, "safetensors", metadata=meta) == save(tensors, metadata=meta)


def test_metadata_keys_sorted_where_safetensors_order_is_random():
    tensors = {"w": torch.ones(2)}
    meta = {"zeta": "1", "alpha": "2", "mid": "3"}
    ours = tensorseal.save_bytes(tensors, "safetensors", metadata=meta)
    n = struct.unpack("<Q", ours[:8])[0]
    header = json.loads(ours[8:8 + n])
    assert list(header["__metadata__"].keys()) == ["alpha", "mid", "zeta"]
    # Same tensors and metadata as safetensors would store, whatever its order.
    theirs = save(tensors, metadata=meta)
    m = struct.unpack("<Q", theirs[:8])[0]
    assert json.loads(theirs[8:8 + m]) == header
    # And the order is stable across calls (safetensors' is not guaranteed to be).
    assert all(tensorseal.save_bytes(tensors, "safetensors", metadata=dict(reversed(list(meta.items())))) == ours
               for _ in range(3))


def test_reads_safetensors_written_files(tmp_path):
    tensors = {f"layer.{i}.w": random_tensor(dt, (4, 2), i) for i, dt in enumerate(SAFETENSORS_DTYPES)}
    path = tmp_path / "m.safetensors"
    save_file(tensors, path, metadata={"format": "pt"})
    loaded = tensorseal.load(path)
    assert set(loaded) == set(tensors)
    for k, t in tensors.items():
        assert loaded[k].dtype == t.dtype and loaded[k].shape == t.shape
        assert elem_bytes(loaded[k]) == elem_bytes(t)
    info = tensorseal.inspect(path)
    assert info["format"] == "safetensors" and info["metadata"] == {"format": "pt"}
    for e in info["tensors"]:
        assert e["sha256"] == hashlib.sha256(elem_bytes(tensors[e["path"]])).hexdigest()


def test_tensorseal_files_load_in_safetensors_and_torch(tmp_path):
    tensors = {"a": torch.randn(5, 5), "b": torch.arange(10, dtype=torch.int64),
               "c": torch.randn(3).to(torch.bfloat16)}
    path = tmp_path / "out.safetensors"
    tensorseal.save(tensors, path)
    back = load_file(path)
    for k, t in tensors.items():
        assert torch.equal(back[k], t) and back[k].dtype == t.dtype


def test_noncontiguous_and_shared_inputs_are_written_as_their_elements(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    tensors = {"t": base.t(), "s": base[1:3, 2:5]}  # strided views of one storage
    path = tmp_path / "v.safetensors"
    tensorseal.save(tensors, path)
    back = load_file(path)
    assert torch.equal(back["t"], base.t()) and torch.equal(back["s"], base[1:3, 2:5])
    assert tensorseal.hash(path) == tensorseal.hash({k: v.contiguous() for k, v in tensors.items()})


def test_mmap_load_is_zero_copy(tmp_path):
    path = tmp_path / "z.safetensors"
    save_file({"w": torch.randn(256, 256)}, path)
    w = tensorseal.load(path)["w"]
    # The data pointer lies inside a mapping of the file (not a heap copy): two loads
    # of the same file map separately, and a copy made with mmap=False differs.
    copy = tensorseal.load(path, mmap=False)["w"]
    assert torch.equal(w, copy)
    assert w.untyped_storage().data_ptr() != copy.untyped_storage().data_ptr()
    maps = open("/proc/self/maps").read().splitlines()
    ptr = w.data_ptr()
    owner = [m for m in maps if int(m.split()[0].split("-")[0], 16) <= ptr < int(m.split()[0].split("-")[1], 16)]
    assert owner and owner[0].endswith(str(path))


def test_cli_inspect_json_matches_python(tmp_path):
    path = tmp_path / "c.safetensors"
    save_file({"x": torch.randn(3, 4), "y": torch.zeros(2, dtype=torch.int32)}, path)
    out = run_tseal("inspect", "--json", path, check=True)
    j = json.loads(out.stdout)
    assert j["format"] == "safetensors"
    assert j["content_hash"] == tensorseal.hash(path)
    assert {t["path"] for t in j["tensors"]} == {"x", "y"}
    assert all(list(t) == ["path", "dtype", "shape", "nbytes", "sha256", "alias_of", "type", "quantization",
                                     "attributes", "layout", "parts"] for t in j["tensors"])
    line = run_tseal("hash", path, check=True).stdout
    assert line == f"{tensorseal.hash(path)}  {path}\n"


def test_cli_error_is_one_line_with_file_offset_rule(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    out = run_tseal("inspect", bad)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert str(bad) in lines[0] and "byte 0" in lines[0] and "[safetensors/header-too-large]" in lines[0]
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(bad)
    assert e.value.rule == "safetensors/header-too-large" and e.value.offset == 0


# ---- property-based round trips --------------------------------------------------

special_f32 = st.sampled_from([0.0, -0.0, float("inf"), float("-inf"), 1e-45, -1e-45, 1.17549435e-38, 3.4e38])
nan_payloads = st.integers(min_value=0x7F800001, max_value=0x7FFFFFFF)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(SAFETENSORS_DTYPES),
       shape=st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple),
       seed=st.integers(0, 2**31 - 1))
def test_roundtrip_any_dtype_shape(tmp_path_factory, dtype, shape, seed):
    t = random_tensor(dtype, shape, seed)
    path = tmp_path_factory.mktemp("rt") / "r.safetensors"
    tensorseal.save({"t": t}, path)
    for back in (tensorseal.load(path)["t"], load_file(path)["t"]):
        assert back.dtype == t.dtype and back.shape == t.shape
        assert elem_bytes(back) == elem_bytes(t)
    assert path.read_bytes() == save({"t": t})


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(special_f32, st.floats(width=32, allow_nan=False)), min_size=1, max_size=64),
       payload=nan_payloads)
def test_roundtrip_bit_exact_special_floats(tmp_path_factory, values, payload):
    t = torch.tensor(values, dtype=torch.float32)
    bits = t.view(torch.int32).clone()
    bits[0] = payload - (1 << 32) if payload >= 1 << 31 else payload  # a NaN with a payload
    t = bits.view(torch.float32)
    path = tmp_path_factory.mktemp("nan") / "n.safetensors"
    tensorseal.save({"t": t}, path)
    back = tensorseal.load(path)["t"]
    assert torch.equal(back.view(torch.int32), bits)
