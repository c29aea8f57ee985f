"""Writes DCP checkpoints whose tensors are big enough that tensorseal streams them from
their chunks (src/dcp/reader.cc runs_of), under torchrun (gloo, CPU). Usage:
dcp_wide.py OUT_DIR. Into OUT_DIR: torch_save/, safetensors/ and zstd/ (the same state in
DCP's two serialization formats and through its ZStandard extension) and reference.pt
(rank 0: the full state as plain tensors). DTensors: Shard(0) with uneven chunks,
Shard(1) of a matrix (one run per row and rank), Shard(1) of a 3-d tensor, Shard(0) of
a bfloat16 tensor, Replicate(); a plain tensor."""
from __future__ import annotations

import pathlib
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._extension import ZStandard
from torch.distributed.checkpoint.filesystem import SerializationFormat
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def full_state() -> dict:
    g = torch.Generator().manual_seed(17)
    return {
        "tall": torch.randn(1001, 300, generator=g),               # Shard(0), 501 + 500 rows
        "wide": torch.randn(64, 4096, generator=g),                # Shard(1): 8 KiB per row and rank
        "cube": torch.randn(8, 1000, 64, generator=g),             # Shard(1) of 3 dims
        "half": torch.randn(2048, 512, generator=g).bfloat16(),    # Shard(0), bfloat16
        "rep": torch.randn(300, 300, generator=g),                 # Replicate()
        "plain": torch.arange(5000, dtype=torch.int64),
    }


def main(out: pathlib.Path) -> None:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    state = full_state()
    placements = {"tall": Shard(0), "wide": Shard(1), "cube": Shard(1), "half": Shard(0), "rep": Replicate()}
    for k, p in placements.items():
        state[k] = distribute_tensor(state[k], mesh, [p])
    dcp.save(state, checkpoint_id=str(out / "torch_save"))
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(out / "safetensors"),
                                                        serialization_format=SerializationFormat.SAFETENSORS))
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(out / "zstd"), _extensions=[ZStandard()]))
    if dist.get_rank() == 0:
        torch.save(full_state(), out / "reference.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
