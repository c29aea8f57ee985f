"""torch.float4_e2m1fn_x2 round-trips exactly through every format (issue: fidelity).

safetensors stores an x2 tensor as F4 with its last dimension doubled and its torch
binding reads it back as x2; tensorseal reads it the same way, so dtype, shape, content
hash and diff stay put whatever the route. Files come from torch.save and from
safetensors.torch.save_file."""
from __future__ import annotations

import pytest
import safetensors.torch
import torch

import tensorseal
import tensorseal.safetensors
from conftest import run_tseal


def fp4(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).view(torch.float4_e2m1fn_x2)


def tensors() -> dict:
    return {"w": fp4(4, 3), "v": fp4(5, seed=1), "e": fp4(0, 2), "f": torch.ones(2)}


def same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8)) if a[k].dtype == torch.float4_e2m1fn_x2 \
            else torch.equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("fp4")
    torch.save(tensors(), d / "a.pt")
    safetensors.torch.save_file(tensors(), d / "a.safetensors")
    return d


def test_safetensors_file_reads_as_torch_reads_it(sources):
    want = safetensors.torch.load_file(sources / "a.safetensors")
    same(tensorseal.safetensors.load_file(sources / "a.safetensors"), want)
    same(tensorseal.load(sources / "a.safetensors"), want)
    with tensorseal.safetensors.safe_open(sources / "a.safetensors", "pt") as f:
        same({k: f.get_tensor(k) for k in f.keys()}, want)
    assert tensorseal.hash(sources / "a.safetensors") == tensorseal.hash(sources / "a.pt")


@pytest.mark.parametrize("to", ["safetensors", "pt", "hf-shards", "dcp"])
def test_convert_keeps_dtype_shape_and_hash(sources, tmp_path, to):
    out = tmp_path / ("out" if to in ("hf-shards", "dcp") else f"out.{to}")
    r = run_tseal("convert", sources / "a.pt", out, "--to", to)
    assert r.returncode == 0, r.stderr
    assert tensorseal.hash(out) == tensorseal.hash(sources / "a.pt")
    same(tensorseal.load(out), torch.load(sources / "a.pt"))
    d = run_tseal("diff", sources / "a.pt", out)
    assert d.returncode == 0, d.stdout
    if to == "safetensors":
        # Byte-identical to safetensors' own file of the same tensors, and loadable by it.
        assert out.read_bytes() == (sources / "a.safetensors").read_bytes()
        same(safetensors.torch.load_file(out), tensors())
        back = tmp_path / "back.pt"
        assert run_tseal("convert", out, back).returncode == 0
        same(torch.load(back), tensors())


def test_drop_in_save_matches_safetensors(tmp_path):
    p = tmp_path / "x.safetensors"
    tensorseal.safetensors.save_file(tensors(), p)
    assert p.read_bytes() == safetensors.torch.save(tensors())


def test_odd_f4_stays_packed_fp4(tmp_path):
    """An F4 entry with an odd last dimension has no torch dtype: it reads as packed
    float4_e2m1fn (inspect and hash work) and a torch load says why it cannot."""
    import json
    import struct
    header = json.dumps({"a": {"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 3]}}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    p = tmp_path / "odd.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + b"\x12\x34\x56")
    r = run_tseal("inspect", p, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"][0]["dtype"] == "float4_e2m1fn"
    with pytest.raises(TypeError, match="float4_e2m1fn"):
        tensorseal.load(p)
