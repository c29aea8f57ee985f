"""torch.distributed.checkpoint directories read as one model (docs/formats/dcp.md),
against real producers: dcp.save single-process and under torchrun (gloo, 2 and 4
ranks) with DTensors, FSDP2 + AdamW state, FSDP1 sharded state and both serialization formats
(producers/dcp_save.py), and dcp_to_torch_save as the reference. Hand-made bytes only
for hostile input (a .metadata that runs a command)."""
from __future__ import annotations

import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest
import torch
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

import tensorseal
from conftest import ROOT, run_tseal

LAYOUTS = ("dtensor", "dtensor_st", "model_optim")


@pytest.fixture(scope="session")
def saved(dcp_saved) -> dict[int, pathlib.Path]:
    return dcp_saved


def tseal_hash(path) -> str:
    r = run_tseal("hash", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


def assert_same(a, b, where="root"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.bool else a, b.view(torch.uint8) if b.dtype == torch.bool else b), where
    elif isinstance(a, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}.{i}")
    else:
        assert a == b, where


@pytest.mark.parametrize("world", [1, 2, 4])
def test_values_are_what_dcp_to_torch_save_gives(saved, world):
    d = saved[world]
    ref = torch.load(d / "dtensor.pt", weights_only=False)
    for layout in ("dtensor", "dtensor_st"):
        assert_same(ref, tensorseal.load(d / layout), layout)
    assert_same(torch.load(d / "model_optim.pt", weights_only=False), tensorseal.load(d / "model_optim"))
    # and the producer's full state, saved as plain tensors
    assert_same(torch.load(d / "reference.pt", weights_only=False), tensorseal.load(d / "dtensor"))


def test_one_content_hash_for_every_layout_and_world_size(saved):
    want = tseal_hash(saved[1] / "reference.pt")
    got = {(w, layout): tseal_hash(saved[w] / layout) for w in saved for layout in ("dtensor", "dtensor_st")}
    got.update({(w, "dtensor.pt"): tseal_hash(saved[w] / "dtensor.pt") for w in saved})
    assert set(got.values()) == {want}, got
    # the training state of FSDP2 + AdamW: the DCP directory hashes as its dcp_to_torch_save output
    for w in saved:
        assert tseal_hash(saved[w] / "model_optim") == tseal_hash(saved[w] / "model_optim.pt")


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp1_sharded_state_dict(saved, world):
    """FSDP1's SHARDED_STATE_DICT (ShardedTensor chunks, flat-parameter shards of AdamW
    state): read as dcp_to_torch_save gives it, and the full model it came from."""
    d = saved[world]
    assert_same(torch.load(d / "fsdp1.pt", weights_only=False), tensorseal.load(d / "fsdp1"))
    assert tseal_hash(d / "fsdp1") == tseal_hash(d / "fsdp1.pt")
    full = torch.load(d / "fsdp1_full.pt", weights_only=False)["model"]
    assert_same(full, tensorseal.load(d / "fsdp1")["model"])
    # FULL_STATE_DICT tensors carry FSDP's `_has_been_cloned` (test_tensor_attributes.py)
    ours = tensorseal.load(d / "fsdp1_full.pt")["model"]
    for k, t in full.items():
        assert type(ours[k]) is torch.Tensor and ours[k].__dict__ == t.__dict__ == {"_has_been_cloned": True}, k


def test_directory_and_metadata_path_read_alike(saved):
    d = saved[2] / "dtensor"
    assert tseal_hash(d) == tseal_hash(d / ".metadata")
    r = run_tseal("inspect", "--json", d)
    assert r.returncode == 0, r.stderr
    assert '"format": "dcp"' in r.stdout


def test_dtensor_shards_really_are_chunks(saved):
    r = run_tseal("explain", "--json", saved[1] / "dtensor", saved[4] / "dtensor")
    assert r.returncode == 0, r.stderr
    assert "dcp.chunks" in r.stdout and "row=4" in r.stdout and "col=4" in r.stdout and "cube=4" in r.stdout, r.stdout[:2000]


def test_explain_names_save_id_and_path(saved, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(saved[2] / "dtensor", a)
    import torch.distributed.checkpoint as dcp
    dcp.save(torch.load(saved[2] / "reference.pt", weights_only=False), checkpoint_id=str(b))
    r = run_tseal("explain", a, b)
    assert "dcp.save_id" in r.stdout and "dcp.checkpoint_path" in r.stdout and "dcp.files" in r.stdout, r.stdout
    assert tseal_hash(a) == tseal_hash(b)


def test_diff_dcp_against_single_file_and_shards(saved, tmp_path):
    d = saved[4] / "dtensor"
    assert run_tseal("diff", d, saved[1] / "reference.pt").returncode == 0
    st = tmp_path / "shards"
    flat = {k: v for k, v in tensorseal.load(saved[1] / "reference.pt").items() if isinstance(v, torch.Tensor)}
    tensorseal.save(flat, st, max_shard_size="1KB")
    r = run_tseal("diff", d, st)
    assert r.returncode == 1 and "plain" in r.stdout, r.stdout  # nested vs flat: the diff names it


def test_verify_and_scan_accept_stock_dcp(saved):
    for layout in LAYOUTS:
        d = saved[2] / layout
        r = run_tseal("verify", d)
        assert r.returncode == 0, (layout, r.stdout, r.stderr)
        r = run_tseal("scan", d)
        assert r.returncode == 0, (layout, r.stdout, r.stderr)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_per_rank_metadata_reads_as_one_model(saved, world, tmp_path):
    """dcp.save(use_collectives=False): no .metadata, one __<rank>.metadata per rank,
    each describing only what that rank wrote; the directory is the union."""
    d = saved[world] / "per_rank"
    names = sorted(p.name for p in d.iterdir() if p.name.endswith(".metadata"))
    assert names == sorted(f"__{r}.metadata" for r in range(world)), names
    if world > 1:  # rank 0's own metadata alone does not cover the sharded tensors
        with open(d / "__0.metadata", "rb") as f:
            md0 = pickle.load(f)  # the producer's own file, in a test
        assert len(md0.state_dict_metadata["row"].chunks) == 1
    ref = torch.load(saved[world] / "dtensor.pt", weights_only=False)
    assert_same(ref, tensorseal.load(d))
    assert_same(ref, tensorseal.load(d / f"__{world - 1}.metadata"))
    assert tseal_hash(d) == tseal_hash(saved[world] / "dtensor") == tseal_hash(saved[1] / "reference.pt")
    r = run_tseal("explain", d, saved[world] / "dtensor")
    assert "dcp.metadata_files" in r.stdout and f"{world} per-rank files" in r.stdout, r.stdout
    assert run_tseal("verify", d).returncode == 0
    assert run_tseal("scan", d).returncode == 0
    # canon writes the one-.metadata layout, which stock DCP loads at world size 1.
    out = tmp_path / "canon"
    r = run_tseal("canon", d, "-o", out)
    assert r.returncode == 0, r.stderr
    assert (out / ".metadata").exists() and not list(out.glob("__*.metadata"))
    assert tseal_hash(out) == tseal_hash(d)


def test_per_rank_metadata_with_a_rank_missing(saved, tmp_path):
    d = tmp_path / "per_rank"
    shutil.copytree(saved[4] / "per_rank", d)
    (d / "__2.metadata").unlink()
    refuse(d, "dcp/rank-metadata")
    r = run_tseal("hash", d)
    assert "__2.metadata is missing" in r.stderr, r.stderr
    (d / "__0.metadata").unlink()
    refuse(d, "dcp/rank-metadata")
    refuse(d / "__1.metadata", "dcp/rank-metadata")


def test_per_rank_metadata_that_disagree(saved, tmp_path):
    d = tmp_path / "per_rank"
    shutil.copytree(saved[2] / "per_rank", d)
    with open(d / "__1.metadata", "rb") as f:
        md = pickle.load(f)  # the producer's own file, in a test
    md.state_dict_metadata["rep"].size = torch.Size([11])
    with open(d / "__1.metadata", "wb") as f:
        pickle.dump(md, f)
    refuse(d, "dcp/rank-metadata")
    r = run_tseal("hash", d)
    assert "__1.metadata" in r.stderr and "'rep'" in r.stderr, r.stderr


# ---- hostile and broken directories -------------------------------------------------

def load_md(d: pathlib.Path):
    with open(d / ".metadata", "rb") as f:
        return pickle.load(f)  # our own producer's file, in a test


def save_md(d: pathlib.Path, md) -> None:
    with open(d / ".metadata", "wb") as f:
        pickle.dump(md, f)


def refuse(d, rule: str, exc=tensorseal.CorruptFileError):
    with pytest.raises(exc) as e:
        tensorseal.load(d)
    assert f"[{rule}]" in str(e.value), str(e.value)
    r = run_tseal("hash", d)
    assert r.returncode == 2 and f"[{rule}]" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.fixture
def copy2(saved, tmp_path):
    def make(layout="dtensor"):
        d = tmp_path / layout
        shutil.copytree(saved[2] / layout, d)
        return d
    return make


class Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_metadata_that_runs_a_command_is_refused_and_named(copy2, tmp_path):
    d = copy2()
    marker = tmp_path / "ran"
    md = load_md(d)
    md.storage_meta = Boom(marker)
    save_md(d, md)
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        tensorseal.load(d)
    assert "[dcp/metadata-global]" in str(e.value) and "system" in str(e.value)
    r = run_tseal("scan", d)
    assert r.returncode == 1 and "system" in r.stdout, r.stdout
    assert run_tseal("hash", d).returncode == 2
    assert not marker.exists()


def test_offsets_past_the_file_end(copy2):
    d = copy2()
    md = load_md(d)
    k = next(k for k in md.storage_data if k.fqn == "rep")
    md.storage_data[k].length += 10_000
    save_md(d, md)
    refuse(d, "dcp/storage-bounds")


def test_overlapping_chunks(copy2):
    d = copy2()
    md = load_md(d)
    chunks = md.state_dict_metadata["row"].chunks
    old = chunks[1].offsets
    new = torch.Size([old[0] - 1, old[1]])
    chunks[1] = ChunkStorageMetadata(offsets=new, sizes=chunks[1].sizes)
    k = next(k for k in md.storage_data if k.fqn == "row" and k.offset == old)
    info = md.storage_data.pop(k)
    md.storage_data[type(k)(fqn="row", offset=new, index=k.index)] = info
    save_md(d, md)
    refuse(d, "dcp/chunk-overlap")


def test_gap_between_chunks(copy2):
    d = copy2()
    md = load_md(d)
    md.state_dict_metadata["col"].chunks.pop()
    save_md(d, md)
    refuse(d, "dcp/chunk-gap")


def test_chunk_outside_the_tensor(copy2):
    d = copy2()
    md = load_md(d)
    md.state_dict_metadata["row"].size = torch.Size([3, 6])
    save_md(d, md)
    refuse(d, "dcp/chunk-outside")


def test_dtype_disagreement(copy2):
    d = copy2()
    md = load_md(d)
    md.state_dict_metadata["rep"].properties.dtype = torch.int32
    save_md(d, md)
    refuse(d, "dcp/chunk-mismatch")


def test_safetensors_chunk_longer_than_declared(copy2):
    d = copy2("dtensor_st")
    md = load_md(d)
    k = next(k for k in md.storage_data if k.fqn == "rep")
    md.storage_data[k].length -= 8
    save_md(d, md)
    refuse(d, "dcp/chunk-mismatch")


def test_relative_path_out_of_the_directory(copy2):
    d = copy2()
    md = load_md(d)
    for info in md.storage_data.values():
        if info.relative_path == "__1_0.distcp":
            info.relative_path = "../__1_0.distcp"
    save_md(d, md)
    refuse(d, "dcp/storage-path", tensorseal.UnsafePickleError)


def test_symlink_out_of_the_directory(copy2, tmp_path):
    d = copy2()
    outside = tmp_path / "outside.distcp"
    shutil.move(d / "__1_0.distcp", outside)
    os.symlink(outside, d / "__1_0.distcp")
    refuse(d, "dcp/storage-path", tensorseal.UnsafePickleError)


def test_missing_data_file(copy2):
    d = copy2()
    (d / "__0_0.distcp").unlink()
    refuse(d, "dcp/storage-missing")


def test_truncated_metadata(copy2):
    d = copy2()
    data = (d / ".metadata").read_bytes()
    (d / ".metadata").write_bytes(data[: len(data) // 2])
    r = run_tseal("hash", d)
    assert r.returncode == 2 and "[pickle/" in r.stderr, r.stderr


def test_mistyped_metadata_field(copy2):
    d = copy2()
    md = load_md(d)
    md.state_dict_metadata["rep"].size = "ten"
    save_md(d, md)
    refuse(d, "dcp/metadata-shape")


def test_item_that_is_not_a_torch_save_file(copy2):
    d = copy2()
    md = load_md(d)
    k = next(k for k in md.storage_data if k.fqn == "rep")
    md.storage_data[k].offset += 1
    save_md(d, md)
    refuse(d, "dcp/item-format")


def test_colliding_planner_paths(copy2):
    d = copy2()
    md = load_md(d)
    md.planner_data["rep"] = ("row", "inner")  # "row" is already a tensor
    save_md(d, md)
    refuse(d, "dcp/path-conflict")


def test_list_paths_rebuild_lists(copy2):
    d = copy2()
    md = load_md(d)
    md.planner_data["rep"] = ("seq", 2)
    save_md(d, md)
    got = tensorseal.load(d)
    assert got["seq"][:2] == [None, None] and torch.equal(got["seq"][2], torch.arange(10))


def test_older_torch_names_of_tensor_properties(saved, copy2):
    # torch < 2.2 pickled TensorProperties and its memory-format enum from
    # torch.distributed._shard.sharded_tensor.metadata. Protocol 2 names globals as
    # "module\nname\n" text, so the old names can be put in place byte for byte.
    d = copy2()
    data = pickle.dumps(load_md(d), protocol=2)
    new, old = b"ctorch.distributed.checkpoint.metadata\n", b"ctorch.distributed._shard.sharded_tensor.metadata\n"
    for name, old_name in ((b"TensorProperties\n", b"TensorProperties\n"),
                           (b"_MEM_FORMAT_ENCODING\n", b"MEM_FORMAT_ENCODING\n")):
        assert data.count(new + name) == 1
        data = data.replace(new + name, old + old_name)
    (d / ".metadata").write_bytes(data)
    assert tseal_hash(d) == tseal_hash(saved[2] / "reference.pt")
    r = run_tseal("scan", d)
    assert r.returncode == 0 and "sharded_tensor.metadata.TensorProperties" in r.stdout, r.stdout


@pytest.mark.parametrize("world", [1, 2, 4])
def test_zstd_extension_reads_as_the_same_model(saved, world):
    """FileSystemWriter(_extensions=[ZStandard()]): every item's bytes are a zstd stream
    and its _StorageInfo names the transform; read as the same values and content."""
    d = saved[world] / "dtensor_zstd"
    with open(d / ".metadata", "rb") as f:
        md = pickle.load(f)  # the producer's own file, in a test
    assert {tuple(v.transform_descriptors) for v in md.storage_data.values()} == {("stream.zstd/1",)}
    ref = torch.load(saved[world] / "dtensor.pt", weights_only=False)
    assert_same(ref, tensorseal.load(d))
    assert tseal_hash(d) == tseal_hash(saved[world] / "dtensor")
    r = run_tseal("explain", d, saved[world] / "dtensor")
    assert "torch_save+stream.zstd/1" in r.stdout, r.stdout
    assert run_tseal("verify", d).returncode == 0


def test_corrupt_zstd_item(saved, tmp_path):
    d = tmp_path / "z"
    shutil.copytree(saved[2] / "dtensor_zstd", d)
    md = load_md(d)
    k = next(k for k in md.storage_data if k.fqn == "row")
    info = md.storage_data[k]
    data = bytearray((d / info.relative_path).read_bytes())
    data[info.offset] ^= 0xFF  # the zstd magic number
    (d / info.relative_path).write_bytes(bytes(data))
    refuse(d, "dcp/transform-data")
    # A flipped byte inside the stream (torch writes frames without zstd's checksum)
    # decompresses to other bytes, which the zip's CRC-32 catches.
    data[info.offset] ^= 0xFF
    data[info.offset + info.length // 2] ^= 0xFF
    (d / info.relative_path).write_bytes(bytes(data))
    with pytest.raises(tensorseal.CorruptFileError):
        tensorseal.load(d)
    # a stream cut short
    shutil.rmtree(d)
    shutil.copytree(saved[2] / "dtensor_zstd", d)
    md.storage_data[k].length -= 5
    save_md(d, md)
    refuse(d, "dcp/transform-data")


def test_zstd_item_larger_than_max_alloc(tmp_path):
    """16 MiB of zeros compress to a few KiB: the decompressed size, not the stored
    one, is held against max_alloc."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint._extension import ZStandard
    d = tmp_path / "z"
    dcp.save({"w": torch.zeros(4 * 1024 * 1024)}, storage_writer=dcp.FileSystemWriter(str(d), _extensions=[ZStandard()]))
    assert sum(p.stat().st_size for p in d.glob("*.distcp")) < 1024 * 1024
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(d, limits={"max_alloc": 1024 * 1024})
    assert e.value.rule == "dcp/max-alloc" and "decompresses" in str(e.value), str(e.value)
    assert torch.equal(tensorseal.load(d)["w"], torch.zeros(4 * 1024 * 1024))


def test_a_command_inside_a_zstd_item_is_found_and_never_run(tmp_path):
    """A non-tensor item pickles os.system; compressed, its bytes hide the global from a
    plain byte search, so scan decompresses every zstd frame of the data files."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint._extension import ZStandard
    d, marker = tmp_path / "z", tmp_path / "ran"
    dcp.save({"w": torch.ones(3), "cfg": Boom(marker)},
             storage_writer=dcp.FileSystemWriter(str(d), _extensions=[ZStandard()]))
    assert b"system" not in b"".join(p.read_bytes() for p in d.glob("*.distcp"))
    r = run_tseal("scan", "--json", d)
    assert r.returncode == 1, (r.stdout, r.stderr)
    import json
    found = [f for f in json.loads(r.stdout)["findings"] if f["verdict"] == "dangerous"]
    assert [(f["module"], f["name"]) for f in found] == [("posix", "system")], found
    assert "__0_0.distcp@" in found[0]["where"]
    got = tensorseal.load(d)  # the restricted VM: an inert Opaque, nothing imported or run
    assert torch.equal(got["w"], torch.ones(3)) and isinstance(got["cfg"], tensorseal.Opaque)
    r = run_tseal("canon", d, "-o", tmp_path / "c")
    assert r.returncode == 1 and "posix.system" in r.stderr, r.stderr
    assert not marker.exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize("descriptor", ["stream.lz4/1", "stream.zstd/2", "zstd"])
def test_unknown_transform_descriptors_are_refused(copy2, descriptor):
    d = copy2()
    md = load_md(d)
    k = next(k for k in md.storage_data if k.fqn == "row")
    md.storage_data[k].transform_descriptors = [descriptor]
    save_md(d, md)
    refuse(d, "dcp/transform", tensorseal.UnsupportedError)


def test_more_entries_than_max_entries(copy2):
    d = copy2()
    n = len(load_md(d).state_dict_metadata)
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(d, limits={"max_entries": n - 1})
    assert e.value.rule == "dcp/too-many"
    tensorseal.load(d, limits={"max_entries": 4 * n})  # every chunk fits too


def test_assembled_tensor_larger_than_max_alloc(tmp_path):
    torch.save({"w": torch.arange(256 * 1024, dtype=torch.float32)}, tmp_path / "w.pt")  # 1 MiB
    r = run_tseal("convert", tmp_path / "w.pt", tmp_path / "d", "--world-size", "2")
    assert r.returncode == 0, r.stderr
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(tmp_path / "d", limits={"max_alloc": 512 * 1024})  # each chunk fits, the whole does not
    assert e.value.rule == "dcp/max-alloc" and "'w'" in str(e.value)
    assert torch.equal(tensorseal.load(tmp_path / "d")["w"], torch.arange(256 * 1024, dtype=torch.float32))
