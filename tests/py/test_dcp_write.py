"""Canonical torch.distributed.checkpoint directories (docs/formats/dcp.md "Writing"):
`tseal convert --to dcp [--world-size N]` and `tensorseal.save(obj, dir, world_size=N)`,
checked with stock torch.distributed.checkpoint (dcp.load, dcp_to_torch_save) on the
real producers' saves of the conftest fixture `dcp_saved`."""
from __future__ import annotations

import pathlib
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

import tensorseal
from conftest import run_tseal

warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def tseal_hash(path) -> str:
    r = run_tseal("hash", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


def tree_bytes(d: pathlib.Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def blank(v):
    if isinstance(v, torch.Tensor):
        return torch.full_like(v, 0) if v.dtype != torch.bool else torch.zeros_like(v)
    if isinstance(v, dict):
        return {k: blank(x) for k, x in v.items()}
    return None


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("world", [1, 2, 4])
def test_stock_dcp_load_reads_it_bit_exact(dcp_saved, tmp_path, world):
    ref_path = dcp_saved[1] / "reference.pt"
    out = tmp_path / "ckpt"
    r = run_tseal("convert", ref_path, out, "--world-size", str(world))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [".metadata"] + [f"__{i}_0.distcp" for i in range(world)]
    ref = torch.load(ref_path, weights_only=False)
    target = blank(ref)
    dcp.load(target, checkpoint_id=str(out))  # stock FileSystemReader, no process group
    assert same(target, ref)
    dcp_to_torch_save(str(out), str(tmp_path / "consolidated.pt"))
    assert tseal_hash(tmp_path / "consolidated.pt") == tseal_hash(ref_path) == tseal_hash(out)


def test_same_content_same_bytes_from_every_layout(dcp_saved, tmp_path):
    sources = [dcp_saved[1] / "reference.pt", dcp_saved[2] / "dtensor", dcp_saved[4] / "dtensor_st",
               dcp_saved[1] / "dtensor"]
    trees = []
    for i, src in enumerate(sources):
        out = tmp_path / f"out{i}"
        r = run_tseal("convert", src, out, "--to", "dcp", "--world-size", "2")
        assert r.returncode == 0, r.stderr
        trees.append(tree_bytes(out))
    assert all(t == trees[0] for t in trees), [sorted(t) for t in trees]
    # the Python API writes the same bytes; the uuid save_id is derived from the content
    tensorseal.save(torch.load(sources[0], weights_only=False), tmp_path / "py", world_size=2)
    assert tree_bytes(tmp_path / "py") == trees[0]
    md = trees[0][".metadata"]
    assert str(tmp_path).encode() not in md and b"checkpoint_id" in md


def test_training_state_round_trips(dcp_saved, tmp_path):
    # FSDP2 + AdamW state from torchrun (4 ranks) -> canonical DCP for 2 ranks -> stock load
    src = dcp_saved[4] / "model_optim"
    out = tmp_path / "canon"
    assert run_tseal("convert", src, out, "--world-size", "2").returncode == 0
    ref = torch.load(dcp_saved[4] / "model_optim.pt", weights_only=False)
    dcp_to_torch_save(str(out), str(tmp_path / "back.pt"))
    assert same(torch.load(tmp_path / "back.pt", weights_only=False), ref)
    assert tseal_hash(out) == tseal_hash(src)


@pytest.mark.parametrize("obj,why", [
    ({0: torch.zeros(2)}, "not a str"),
    ({"a": torch.zeros(2), "opt": {}}, "empty dict"),
    ({"w": torch.nn.Parameter(torch.zeros(2))}, "Parameter"),
])
def test_what_dcp_would_change_is_refused(tmp_path, obj, why):
    with pytest.raises(tensorseal.InvalidArgumentError) as e:
        tensorseal.save(obj, tmp_path / "x", world_size=2)
    assert "[dcp/write-unrepresentable]" in str(e.value) and why in str(e.value)
    assert not (tmp_path / "x").exists() and list(tmp_path.iterdir()) == []


def test_refuses_to_replace_a_foreign_directory(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    r = run_tseal("convert", tmp_path / "nothing.pt", target, "--to", "dcp")
    assert r.returncode == 2
    torch.save({"w": torch.zeros(2)}, tmp_path / "w.pt")
    r = run_tseal("convert", tmp_path / "w.pt", target, "--to", "dcp")
    assert r.returncode == 2 and "[dcp/write-target]" in r.stderr, r.stderr
    assert (target / "notes.txt").read_text() == "mine"
    # a previous DCP write is replaced as a whole
    out = tmp_path / "d"
    assert run_tseal("convert", tmp_path / "w.pt", out, "--world-size", "4").returncode == 0
    assert run_tseal("convert", tmp_path / "w.pt", out, "--world-size", "1").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [".metadata", "__0_0.distcp"]


def test_canon_keeps_dcp_a_dcp_directory(dcp_saved, tmp_path):
    for world in (2, 4):
        out = tmp_path / f"canon{world}"
        r = run_tseal("canon", dcp_saved[world] / "dtensor", "-o", out)
        assert r.returncode == 0, r.stderr
        assert sorted(p.name for p in out.iterdir()) == [".metadata"] + [f"__{i}_0.distcp" for i in range(world)]
        again = tmp_path / f"again{world}"
        assert run_tseal("convert", dcp_saved[1] / "reference.pt", again, "--world-size", str(world)).returncode == 0
        assert tree_bytes(out) == tree_bytes(again)
        assert tseal_hash(out) == tseal_hash(dcp_saved[world] / "dtensor")
