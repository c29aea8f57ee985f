"""canon and convert verify the input's zip CRC32s on a second thread while they write
(tensorseal::convert_file): a flipped bit in tensor data must still be refused with the
reader's own rule, naming the file, exit 2, and leave nothing at the target, neither a
file nor a directory nor a temp file beside it. Sources: a real torch.save file, a
2-rank dcp.save directory and huggingface_hub .bin shards."""
from __future__ import annotations

import io
import os
import pathlib
import shutil
import struct
import zipfile

import huggingface_hub
import pytest
import torch

from conftest import run_tseal


def flip_in_record(path: pathlib.Path, record_suffix: str) -> None:
    """Flips one bit in the middle of the data of the zip record whose name ends with
    `record_suffix` (a storage of tensor data)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(record_suffix))
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    at = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def flip_in_chunk(path: pathlib.Path, needle: bytes) -> None:
    """Flips one bit inside the first occurrence of `needle` (a chunk's tensor bytes)."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at > 0, path
    data[at + len(needle) // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def sources(dcp_saved, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("corrupt")
    g = torch.Generator().manual_seed(3)
    state = {f"w{i}": torch.randn(64, 256, generator=g) for i in range(4)}
    pt = root / "model.pt"
    torch.save(state, pt)
    flip_in_record(pt, "data/2")
    shards = root / "shards"
    shards.mkdir()
    huggingface_hub.save_torch_state_dict(state, shards, max_shard_size="100KB", safe_serialization=False)
    flip_in_record(sorted(shards.glob("*.bin"))[-1], "data/0")
    dcp = root / "dcp"
    shutil.copytree(dcp_saved[2] / "dtensor", dcp)
    ref = torch.load(dcp_saved[2] / "reference.pt", weights_only=True)
    flip_in_chunk(dcp / "__1_0.distcp", ref["row"][-1].numpy().tobytes())  # rank 1 holds the last rows
    return {"pt": pt, "shards": shards, "dcp": dcp}


def left_beside(out: pathlib.Path) -> list:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(("." + out.name, out.name)))


HOW = [("convert", "out.safetensors"), ("convert", "out.pt"), ("convert", "out_dcp", "--to", "dcp"),
       ("convert", "out_shards", "--shards", "1MB"), ("canon", "-o", "canon_out")]
# The DCP state holds non-tensor items, which shards cannot hold (refused before reading data).
CASES = [(s, h) for s in ("pt", "shards", "dcp") for h in HOW if not (s == "dcp" and "--shards" in h)]


@pytest.mark.parametrize("source,how", CASES)
def test_corrupt_tensor_data_is_refused_and_nothing_is_written(sources, source, how, tmp_path):
    args = [a if not a.startswith(("out", "canon_out")) else str(tmp_path / a) for a in how]
    out = pathlib.Path(next(a for a in args if a.startswith(str(tmp_path))))
    args.insert(1, str(sources[source]))
    r = run_tseal(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "[zip/crc-mismatch]" in r.stderr, r.stderr
    assert str(sources[source]) in r.stderr, r.stderr
    assert left_beside(out) == [], left_beside(out)
    assert os.listdir(tmp_path) == []


def test_the_same_sources_unflipped_convert(dcp_saved, tmp_path):
    """The control: the 2-rank DCP directory itself converts, so the refusals above are the flipped bit's."""
    out = tmp_path / "ok.safetensors"
    r = run_tseal("convert", dcp_saved[2] / "dtensor", out)
    assert r.returncode == 0, r.stderr
    assert run_tseal("hash", out).stdout.split()[0] == run_tseal("hash", dcp_saved[2] / "dtensor").stdout.split()[0]
