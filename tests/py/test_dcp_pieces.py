"""DCP tensors of several chunks are streamed from the chunks' mapped bytes, not
assembled (src/dcp/reader.cc runs_of, Storage::pieced): hash and convert read the runs
in the tensor's order, a loader joins them on demand. Whatever the path, the values are
the same: checked on real 2-rank dcp.save output (Shard(0) uneven, Shard(1) of 2 and 3
dims, bfloat16, Replicate) in both serialization formats and through zstd (whose chunks
are decompressed, so assembled as before)."""
from __future__ import annotations

import pathlib

import pytest
import torch

import tensorseal
from conftest import run_ranks, run_tseal

PRODUCER = pathlib.Path(__file__).parent / "producers" / "dcp_wide.py"
LAYOUTS = ["torch_save", "safetensors", "zstd"]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    d = tmp_path_factory.mktemp("dcp_wide")
    run_ranks(PRODUCER, d, 2)  # retries a gloo abort (conftest.py)
    return d


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hash_and_convert_of_streamed_tensors_match_the_reference(wide, layout, tmp_path):
    d, ref = wide / layout, wide / "reference.pt"
    assert tensorseal.hash(d) == tensorseal.hash(ref)
    for ext in ("safetensors", "pt"):
        a, b = tmp_path / f"dcp.{ext}", tmp_path / f"ref.{ext}"
        assert run_tseal("convert", d, a).returncode == 0
        assert run_tseal("convert", ref, b).returncode == 0
        assert a.read_bytes() == b.read_bytes(), ext


@pytest.mark.parametrize("layout", LAYOUTS)
def test_loaded_streamed_tensors_are_the_reference(wide, layout):
    ref = torch.load(wide / "reference.pt", weights_only=True)
    got = tensorseal.load(wide / layout)
    assert sorted(got) == sorted(ref)
    for k, want in ref.items():
        assert got[k].dtype == want.dtype and got[k].shape == want.shape and torch.equal(got[k], want), k


def test_diff_of_a_dcp_directory_against_its_reference_is_empty(wide):
    r = run_tseal("diff", wide / "torch_save", wide / "reference.pt")
    assert r.returncode == 0, r.stdout + r.stderr
