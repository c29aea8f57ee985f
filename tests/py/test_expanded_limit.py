"""View bombs (docs/limits.md, `max_expanded_bytes`): torch.save keeps an expand()ed
tensor as its small storage with a stride of 0, so a file of a few hundred bytes can
describe terabytes, and everything that walks the elements (hash, diff, verify, a write
without views) would pay for them. The bound is on the bytes a tensor describes beyond
its storage's:

  * torch.save of torch.zeros(1).expand(2**40) (zip and legacy formats) is refused by
    every command that reads data, by default, in well under a second: exit 2, one line
    naming the file, the rule tensor/expanded-too-large, the shape and the flag;
  * the Python API raises LimitError with that rule;
  * a real expanded buffer (16 MiB described over 16 bytes) reads, hashes and converts
    by default, equal to torch's own view, and is refused when the limit is lowered
    below what it describes beyond its storage (flag and keyword), and accepted at it;
  * the same bound holds for the views tensorseal's .safetensors structure restores;
  * views without elements keep whatever strides torch gave them: canon lays them out
    without overflowing, and a zero-size shape whose strides cannot fit int64 is refused.
"""
from __future__ import annotations

import subprocess

import pytest
import torch

import tensorseal
from conftest import tseal_bin

BOMB_SHAPE = 2**40


@pytest.fixture(params=["zip", "legacy"])
def bomb(request, tmp_path):
    p = tmp_path / f"bomb_{request.param}.pt"
    torch.save({"w": torch.zeros(1).expand(BOMB_SHAPE)}, p,
               _use_new_zipfile_serialization=request.param == "zip")
    assert p.stat().st_size < 2000
    return p


@pytest.mark.parametrize("cmd", [["hash"], ["inspect"], ["verify"], ["convert", "{out}"], ["canon", "-o", "{out}"], ["diff", "{bomb}"]])
def test_view_bomb_is_refused_by_every_command(bomb, cmd, tmp_path):
    out = tmp_path / "out.safetensors"
    args = [a.format(out=out, bomb=bomb) for a in cmd]
    r = subprocess.run([tseal_bin(), args[0], str(bomb), *args[1:]], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(bomb) in lines[0] and "[tensor/expanded-too-large]" in lines[0]
    assert f"shape [{BOMB_SHAPE}]" in lines[0] and "--max-expanded-bytes" in lines[0]
    assert not out.exists()


def test_view_bomb_raises_limit_error(bomb):
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.hash(bomb)
    assert e.value.rule == "tensor/expanded-too-large"
    with pytest.raises(tensorseal.LimitError):
        tensorseal.load(bomb)


@pytest.fixture
def expanded(tmp_path):
    """16 MiB described over 16 bytes: what a broadcast buffer saves."""
    t = torch.arange(4, dtype=torch.float32).expand(1 << 20, 4)
    p = tmp_path / "expanded.pt"
    torch.save({"mask": t}, p)
    return p, t


def test_real_expanded_buffer_reads_by_default(expanded, tmp_path):
    p, t = expanded
    got = tensorseal.load(p)["mask"]
    assert got.stride() == t.stride() and torch.equal(got, t)
    out = tmp_path / "mask.safetensors"
    r = subprocess.run([tseal_bin(), "convert", str(p), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert tensorseal.hash(out) == tensorseal.hash(p)


def test_limit_is_on_the_bytes_beyond_the_storage(expanded):
    p, t = expanded
    beyond = t.numel() * t.element_size() - t.untyped_storage().nbytes()
    assert tensorseal.hash(p, limits={"max_expanded_bytes": beyond})
    with pytest.raises(tensorseal.LimitError, match=r"\[tensor/expanded-too-large\]"):
        tensorseal.hash(p, limits=tensorseal.Limits(max_expanded_bytes=beyond - 1))
    r = subprocess.run([tseal_bin(), "hash", str(p), "--max-expanded-bytes", str(beyond - 1)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "[tensor/expanded-too-large]" in r.stderr
    r = subprocess.run([tseal_bin(), "hash", str(p), "--max-expanded-bytes", str(beyond)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_default_is_in_the_limits_table():
    assert tensorseal.Limits.defaults()["max_expanded_bytes"] == 1 << 32
    helptext = subprocess.run([tseal_bin(), "inspect", "--help"], capture_output=True, text=True).stdout
    assert "--max-expanded-bytes" in helptext


def test_safetensors_structure_views_are_bounded(tmp_path):
    """tensorseal's .safetensors keeps a view of a stored base in its structure
    metadata; restoring it is bounded the same way."""
    base = torch.arange(4, dtype=torch.float32)
    p = tmp_path / "views.safetensors"
    tensorseal.save({"base": base, "wide": base.expand(1 << 16, 4)}, p)
    got = tensorseal.load(p)
    assert torch.equal(got["wide"], base.expand(1 << 16, 4))
    with pytest.raises(tensorseal.LimitError, match=r"\[tensor/expanded-too-large\]"):
        tensorseal.load(p, limits={"max_expanded_bytes": 1000})


# ---- views without elements ------------------------------------------------------------
# torch keeps any strides on a tensor without elements and torch.save writes them; the
# canonical writer lays such a tensor out without overflowing 64-bit arithmetic
# (fuzz/regressions/tar/empty-view-stride-overflow: a stride of 6e18 times a size of 3).

@pytest.mark.parametrize("shape, stride", [((0, 3), (6075440856070881281, 1)),
                                           ((3, 0), (6075440856070881281, 1)),
                                           ((0, 2**40, 2**40), (1, 1, 1))])
def test_empty_views_with_huge_strides_round_trip(tmp_path, shape, stride):
    src, out = tmp_path / "e.pt", tmp_path / "canon.pt"
    torch.save({"e": torch.empty(0).as_strided(shape, stride)}, src)
    r = subprocess.run([tseal_bin(), "canon", str(src), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    back = torch.load(out, weights_only=True)["e"]
    assert back.shape == torch.Size(shape) and back.numel() == 0
    assert tensorseal.hash(out) == tensorseal.hash(src)


def test_zero_size_shape_whose_strides_overflow_is_refused(tmp_path):
    """Hostile bytes: a safetensors entry of shape [0, 2^40, 2^40] has no data, but no
    row-major strides fit int64 (torch: "Stride calculation overflowed")."""
    import json
    import struct
    header = json.dumps({"x": {"dtype": "F32", "shape": [0, 2**40, 2**40], "data_offsets": [0, 0]}}).encode()
    p = tmp_path / "zero.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header)
    r = subprocess.run([tseal_bin(), "hash", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and "[safetensors/size-overflow]" in r.stderr and "strides overflow" in r.stderr, r.stderr
    assert str(p) in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_dcp_metadata_of_a_zero_size_shape_whose_strides_overflow_is_refused(tmp_path):
    """torch.distributed.checkpoint saves an as_strided view of shape (0, 2**62, 4);
    no row-major strides of that shape fit int64, so reading its .metadata is refused
    with the file and the rule."""
    import torch.distributed.checkpoint as dcp
    d = tmp_path / "ckpt"
    dcp.save({"e": torch.empty(0).as_strided((0, 2**62, 4), (1, 1, 1))}, checkpoint_id=str(d), no_dist=True)
    r = subprocess.run([tseal_bin(), "hash", str(d)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert str(d / ".metadata") in r.stderr and "[dcp/metadata-shape]" in r.stderr
    assert "strides overflow 64 bits" in r.stderr and len(r.stderr.strip().splitlines()) == 1
