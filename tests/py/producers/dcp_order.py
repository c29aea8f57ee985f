"""Saves a flat state dict with real torch.distributed.checkpoint, keys in the order a
torch.save file gives them. Usage: dcp_order.py OUT_DIR STATE.pt

Single process: dcp.save of the state as loaded. Under `torchrun --nproc_per_node N`
(gloo, CPU): every 2-d float32 tensor becomes a DTensor Shard(0) on a CPU DeviceMesh
(each rank holds and saves its rows), every other tensor stays plain (replicated, saved
once by DCP's deduplication). OUT_DIR is the DCP directory."""
from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp


def main(out: str, state_path: str) -> None:
    state = torch.load(state_path, weights_only=True)  # a dict, in the saved order
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for k, v in state.items():  # assigning to existing keys keeps their order
            if v.dtype == torch.float32 and v.dim() == 2:
                state[k] = distribute_tensor(v, mesh, [Shard(0)])
    dcp.save(state, checkpoint_id=out)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
