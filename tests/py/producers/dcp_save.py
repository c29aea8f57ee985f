"""Writes DCP checkpoints with real torch.distributed.checkpoint, under torchrun (gloo,
CPU) or as a single process. Usage: dcp_save.py OUT_DIR

Under `torchrun --nproc_per_node N` it writes, into OUT_DIR:
  dtensor/         DTensors Shard(0), Shard(1), Replicate() and a 3-d Shard(2) on a
                   CPU DeviceMesh, plain tensors, non-tensor items (default torch_save format)
  dtensor_st/      the same state, SerializationFormat.SAFETENSORS
  per_rank/        the same state, use_collectives=False: one __<rank>.metadata per rank
  dtensor_zstd/    the same state through DCP's ZStandard extension (every item a zstd stream)
                   (each rank's own shards and its own copy of every replicated item)
  model_optim/     a small transformer's model + AdamW optimizer state (step tensors),
                   via torch.distributed.checkpoint.state_dict (FSDP2 fully_shard where it runs)
  reference.pt     the full state of dtensor/ as plain tensors (rank 0, torch.save)
  model_optim.pt   dcp_to_torch_save(model_optim/) (rank 0, after the save)
  fsdp1/           an FSDP1 model + AdamW state, SHARDED_STATE_DICT (ShardedTensor chunks)
  fsdp1.pt         dcp_to_torch_save(fsdp1/) (rank 0)
  fsdp1_full.pt    the FSDP1 model's FULL_STATE_DICT by torch.save (rank 0): tensors
                   with FSDP's `_has_been_cloned` attribute
  torch_save_rank<r>.pt   each rank's torch.save of the dtensor/ state (its DTensors)
  fsdp2_rank<r>.pt        each rank's torch.save of model_optim/'s state dicts
Single process (no torchrun): the same layouts with world size 1 (no fsdp1*).
The state is a pure function of fixed seeds, so every world size saves the same values."""
from __future__ import annotations

import os
import pathlib
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import SerializationFormat
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def full_state() -> dict:
    g = torch.Generator().manual_seed(11)
    return {
        "row": torch.randn(8, 6, generator=g),                  # Shard(0)
        "col": torch.randn(4, 8, generator=g).to(torch.bfloat16),  # Shard(1)
        "rep": torch.arange(10, dtype=torch.int64),              # Replicate()
        "cube": torch.randn(2, 3, 8, generator=g, dtype=torch.float64),  # Shard(2)
        "plain": {"bias": torch.randn(5, generator=g), "mask": torch.tensor([True, False, True])},
        "step": 7,
        "meta": {"name": "tiny", "lrs": [0.1, 0.01]},
    }


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.emb = torch.nn.Embedding(16, 8)
        self.layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.layer(self.emb(x)))


def main(out: pathlib.Path) -> None:
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    state = full_state()
    if distributed:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (world,))
        state["row"] = distribute_tensor(state["row"], mesh, [Shard(0)])
        state["col"] = distribute_tensor(state["col"], mesh, [Shard(1)])
        state["rep"] = distribute_tensor(state["rep"], mesh, [Replicate()])
        state["cube"] = distribute_tensor(state["cube"], mesh, [Shard(2)])
    dcp.save(state, checkpoint_id=str(out / "dtensor"))
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(out / "dtensor_st"),
                                                        serialization_format=SerializationFormat.SAFETENSORS))
    dcp.save(state, checkpoint_id=str(out / "per_rank"), use_collectives=False)
    from torch.distributed.checkpoint._extension import ZStandard
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(out / "dtensor_zstd"), _extensions=[ZStandard()]))
    if rank == 0:
        torch.save(full_state(), out / "reference.pt")
    if distributed:
        torch.save(state, out / f"torch_save_rank{rank}.pt")

    model = Tiny()
    if distributed:
        try:
            from torch.distributed.fsdp import fully_shard
            fully_shard(model, mesh=mesh)
        except Exception as e:  # FSDP2 needs features this CPU build may lack
            print(f"fully_shard unavailable on CPU: {e}", file=sys.stderr)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        loss = model(torch.arange(12).reshape(2, 6) % 16).sum()
        loss.backward()
        optim.step()
        optim.zero_grad()
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(model, optim)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(out / "model_optim"))
    if distributed:
        torch.save({"model": msd, "optim": osd}, out / f"fsdp2_rank{rank}.pt")
    if distributed:
        fsdp1(out, rank)
        dist.barrier()
    if rank == 0:
        dcp_to_torch_save(str(out / "model_optim"), str(out / "model_optim.pt"))
        dcp_to_torch_save(str(out / "dtensor"), str(out / "dtensor.pt"))
        if distributed:
            dcp_to_torch_save(str(out / "fsdp1"), str(out / "fsdp1.pt"))
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


def fsdp1_trained():
    """(model, optim): a small FSDP1 (FullyShardedDataParallel) model + AdamW after one step."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    torch.manual_seed(5)
    model = FSDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)),
                 device_id=torch.device("cpu"), use_orig_params=True)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.arange(16, dtype=torch.float32).reshape(2, 8)).sum().backward()
    optim.step()
    return model, optim


def fsdp1(out: pathlib.Path, rank: int) -> None:
    """FSDP1 (FullyShardedDataParallel): SHARDED_STATE_DICT through DCP (ShardedTensor
    chunks) into fsdp1/, and FULL_STATE_DICT through torch.save (rank 0) into
    fsdp1_full.pt: every tensor of that carries FSDP's `_has_been_cloned` attribute."""
    import warnings
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType
    warnings.filterwarnings("ignore")  # FSDP1 is deprecated in favour of fully_shard
    model, optim = fsdp1_trained()
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        dcp.save({"model": model.state_dict(), "optim": FSDP.optim_state_dict(model, optim)},
                 checkpoint_id=str(out / "fsdp1"))
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        full = {"model": model.state_dict()}
    if rank == 0:
        torch.save(full, out / "fsdp1_full.pt")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
