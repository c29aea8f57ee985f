"""A real torchrun job (gloo, CPU) for tensorseal.dcp.content_hash, the collective hash
of live sharded state. Usage: live_hash_job.py OUT_DIR

Every rank builds the same state (fixed seeds): DTensors Shard(0), Shard(1) (several
leaf chunks, so every chunk straddles ranks), uneven Shard(0), Replicate(), a 3-d
Shard(2), plain tensors, non-tensor values, and a small transformer under FSDP2
fully_shard + AdamW after 2 steps (model and optimizer state via get_state_dict). It
hashes the live state, saves it, and writes into OUT_DIR:
  stock/        dcp.save with torch's FileSystemWriter
  ts/           dcp.save with tensorseal.dcp.FileSystemWriter
  stock.pt      (rank 0) dcp_to_torch_save(stock/)
  full.pt       (rank 0) the full state as plain tensors (torch.save)
  flat.safetensors, hf/   (rank 0) the flat tensor part, full, as one safetensors file
                and as huggingface_hub shards (max_shard_size 1MB)
  fsdp1/        an FSDP1 model + AdamW, SHARDED_STATE_DICT (ShardedTensors), by dcp.save
  mesh2/        (4 ranks) a 2x2 mesh (dp x tp): DTensors on both mesh dims and an MLP
                under tensor parallelism + FSDP2 with AdamW, saved by dcp.save
  result_<rank>.json  what this rank's calls returned or raised (see main)"""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

import tensorseal
import tensorseal.dcp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from dcp_plugin_job import build, plain, train  # noqa: E402
from dcp_save import fsdp1_trained  # noqa: E402


def error_of(fn) -> dict:
    """What fn() raised (class, message, seconds taken); fails if it returned."""
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - recorded for the test
        return {"type": type(e).__name__, "message": str(e), "is_tensorseal": isinstance(e, tensorseal.Error),
                "seconds": time.monotonic() - t0}
    raise AssertionError("no error raised")


def big_state(mesh) -> dict:
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    g = torch.Generator().manual_seed(5)
    return {
        "big_row": distribute_tensor(torch.randn(1000, 700, generator=g), mesh, [Shard(0)]),  # 2.7 MiB
        "big_col": distribute_tensor(torch.randn(600, 1000, generator=g), mesh, [Shard(1)]),  # columns
        "uneven": distribute_tensor(torch.randn(7, 5, generator=g), mesh, [Shard(0)]),
        "uneven_col": distribute_tensor(torch.randn(3, 9, generator=g, dtype=torch.float64), mesh, [Shard(1)]),
        "big_rep": distribute_tensor(torch.randn(600, 600, generator=g), mesh, [Replicate()]),
        # rows at 1 MiB boundaries: tensorseal's writer reuses its chunks' digests
        "aligned": distribute_tensor(torch.randn(1024, 1024, generator=g), mesh, [Shard(0)]),
        "f16": distribute_tensor(torch.randn(2048, 300, generator=g).half(), mesh, [Shard(1)]),
    }


def mesh2_state(out: pathlib.Path, rank: int) -> dict:
    """A 2x2 (dp, tp) mesh: DTensors placed on both dims, and an MLP under TP + FSDP2."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    g = torch.Generator().manual_seed(9)
    state = {
        "s0s1": distribute_tensor(torch.randn(6, 10, generator=g), mesh, [Shard(0), Shard(1)]),
        "rs0": distribute_tensor(torch.randn(9, 4, generator=g), mesh, [Replicate(), Shard(0)]),
        "s1r": distribute_tensor(torch.randn(5, 600, generator=g), mesh, [Shard(1), Replicate()]),
        "s0s0": distribute_tensor(torch.randn(700, 800, generator=g), mesh, [Shard(0), Shard(0)]),
    }
    torch.manual_seed(4)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    parallelize_module(mlp, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(mlp, mesh=mesh["dp"])
    optim = torch.optim.AdamW(mlp.parameters(), lr=1e-2)
    for _ in range(2):
        mlp(torch.ones(4, 8)).sum().backward()
        optim.step()
        optim.zero_grad()
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(mlp, optim)
    state["mlp"] = msd
    state["mlp_optim"] = osd
    return state


def fsdp1_state() -> dict:
    """An FSDP1 model + AdamW after a step, SHARDED_STATE_DICT (ShardedTensors)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import StateDictType
    model, optim = fsdp1_trained()
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        return {"model": model.state_dict(), "optim": FSDP.optim_state_dict(model, optim)}


def main(out: pathlib.Path) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    state, model, optim = build(world)
    train(model, optim)
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(model, optim)
    mesh = init_device_mesh("cpu", (world,))
    sd = {"state": state, "big": big_state(mesh), "model": msd, "optim": osd, "epoch": 3, "tags": ("a", 1)}
    res: dict = {"rank": rank, "world": world}
    res["sha256"] = tensorseal.dcp.content_hash(sd)
    res["xxh3"] = tensorseal.dcp.content_hash(sd, algo="xxh3")
    res["small_rounds"] = tensorseal.dcp.content_hash(sd, round_bytes=1 << 20)
    res["state_only"] = tensorseal.dcp.content_hash({"state": state, "big": sd["big"]})
    flat = dict(sd["big"])
    flat.update({f"model.{k}": v for k, v in msd.items()})
    res["flat"] = tensorseal.dcp.content_hash(flat)

    dcp.save(sd, storage_writer=dcp.FileSystemWriter(str(out / "stock")))
    dcp.save(sd, storage_writer=tensorseal.dcp.FileSystemWriter(str(out / "ts")))
    full = plain(sd)
    full_flat = plain(flat)
    if rank == 0:
        torch.save(full, out / "full.pt")
        import safetensors.torch
        from huggingface_hub import save_torch_state_dict
        safetensors.torch.save_file({k: v.contiguous() for k, v in full_flat.items()}, out / "flat.safetensors")
        (out / "hf").mkdir()
        save_torch_state_dict(full_flat, out / "hf", max_shard_size="1MB")
    dist.barrier()
    if rank == 0:
        dcp_to_torch_save(str(out / "stock"), str(out / "stock.pt"))

    # Collective verification of every DCP layout, then of a corrupted copy.
    res["verify_ts"] = tensorseal.dcp.verify(out / "ts")
    res["verify_stock"] = tensorseal.dcp.verify(out / "stock")
    res["verify_fast"] = tensorseal.dcp.verify(out / "ts", algo="xxh3")
    if rank == 0:
        import shutil
        for name in ("ts", "stock"):
            shutil.copytree(out / name, out / f"{name}_bad")
            data = max((out / f"{name}_bad").glob("*.distcp"), key=lambda f: f.stat().st_size)
            b = bytearray(data.read_bytes())
            b[len(b) // 2] ^= 0x10
            data.write_bytes(bytes(b))
    dist.barrier()
    res["verify_ts_bad"] = error_of(lambda: tensorseal.dcp.verify(out / "ts_bad"))
    res["verify_stock_bad"] = error_of(lambda: tensorseal.dcp.verify(out / "stock_bad"))
    res["verify_missing"] = error_of(lambda: tensorseal.dcp.verify(out / "nothing_here"))

    # tensorseal.hash of sharded state refuses: a per-rank digest is not the content.
    res["hash_refused"] = error_of(lambda: tensorseal.hash(sd))

    # Replicas that differ: a Replicate() DTensor, a plain tensor, a non-tensor value.
    local = torch.zeros(4) if rank != 1 else torch.ones(4)
    rep = DTensor.from_local(local, mesh, [Replicate()], run_check=False)
    res["diverged_dtensor"] = error_of(lambda: tensorseal.dcp.content_hash({"w": {"rep": rep}, "ok": 1}))
    res["diverged_plain"] = error_of(
        lambda: tensorseal.dcp.content_hash({"t": torch.arange(3) + (rank == world - 1)}))
    res["diverged_value"] = error_of(lambda: tensorseal.dcp.content_hash({"lr": 0.1 if rank != 1 else 0.2}))
    # One rank raising (a value DCP cannot save on rank 1 only): every rank raises.
    res["one_rank_raises"] = error_of(
        lambda: tensorseal.dcp.content_hash({"x": (lambda: 0) if rank == 1 else 0, "big": sd["big"]}))
    # The collectives are still aligned afterwards.
    res["again"] = tensorseal.dcp.content_hash(sd)

    s1 = fsdp1_state()
    res["fsdp1"] = tensorseal.dcp.content_hash(s1)
    res["hash_refused_sharded_tensor"] = error_of(lambda: tensorseal.hash(s1))
    res["fsdp1_sharded_tensors"] = sum(type(v).__name__ == "ShardedTensor" for v in s1["model"].values())
    dcp.save(s1, storage_writer=dcp.FileSystemWriter(str(out / "fsdp1")))

    if world == 4:
        s2 = mesh2_state(out, rank)
        res["mesh2"] = tensorseal.dcp.content_hash(s2)
        dcp.save(s2, storage_writer=dcp.FileSystemWriter(str(out / "mesh2")))
        full2 = plain(s2)
        if rank == 0:
            torch.save(full2, out / "mesh2.pt")
    dist.barrier()
    (out / f"result_{rank}.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
