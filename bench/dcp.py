"""dcp.save / dcp.load with tensorseal.dcp vs torch's FileSystemWriter/Reader, in one
torchrun job. Usage (what `make bench` runs):

    torchrun --nproc_per_node 2 bench/dcp.py [--size-mib 1024] [--repeats 5] [--out bench/dcp.json]

State: 64 float32 tensors [rows, 1024] of --size-mib in all, each a DTensor Shard(0)
over the ranks (each rank holds half), plus a step counter (a BYTE_IO item).
Competitors, every round each once in an order rotated by one per round, after one
warm-up round; every save goes to a fresh directory (the previous one removed outside
the timing), sync_files=True for all (the default of both writers):
  save  tensorseal.dcp.FileSystemWriter | FileSystemWriter (torch_save) | FileSystemWriter
        (safetensors)
        | tensorseal.dcp.FileSystemWriter(content_hash=False) (the manifest's hash costs the difference)
  hash  tensorseal.dcp.content_hash of the live state (sha256, collective) | dcp.save of it
  verify  tensorseal.dcp.verify of tensorseal's save on all ranks (xxh3; sha256) | tseal verify /
        tseal hash of it as one process on rank 0 (all cores)
  load  tensorseal.dcp.FileSystemReader of its own save | FileSystemReader of the torch_save
        save | tensorseal.dcp.FileSystemReader of the torch_save and of the safetensors save
        (torch 2.13's FileSystemReader cannot read the safetensors format: its torch.load
        with weights_only=True refuses the bytes)
Time: rank 0's wall clock from a barrier before the call to a barrier after it. Output:
a markdown table (median, min, max; ratio = competitor median / tensorseal median) and
every run in --out (JSON)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import SerializationFormat

import tensorseal.dcp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spread  # noqa: E402

warnings.filterwarnings("ignore")


def scratch_dir(need: int) -> str:
    shm = "/dev/shm"
    if os.path.isdir(shm) and shutil.disk_usage(shm).free > need * 2:
        return os.path.join(shm, "tseal-bench-dcp")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "work", "dcp")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "dcp.json"))
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    n = 64
    rows = max(world, args.size_mib * 1024 * 1024 // (n * 1024 * 4))
    g = torch.Generator().manual_seed(0)
    state = {f"layer{i:02d}.weight": distribute_tensor(torch.randn(rows, 1024, generator=g), mesh, [Shard(0)])
             for i in range(n)}
    state["step"] = 1000
    total = n * rows * 1024 * 4
    root = scratch_dir(total * 4)
    if rank == 0:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    dist.barrier()

    counter = [0]

    def fresh(tag: str) -> str:
        counter[0] += 1
        return os.path.join(root, f"{tag}-{counter[0]}")

    latest: dict = {}

    def save(tag: str, make_writer) -> None:
        path = fresh(tag)
        dist.barrier()
        t0 = time.perf_counter()
        dcp.save(state, storage_writer=make_writer(path))
        dist.barrier()
        dt = time.perf_counter() - t0
        old = latest.get(tag)
        latest[tag] = path
        if rank == 0 and old:
            shutil.rmtree(old, ignore_errors=True)
        dist.barrier()
        return dt

    target = {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else 0) for k, v in state.items()}

    def load(tag: str, make_reader) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        dcp.load(target, storage_reader=make_reader(latest[tag]))
        dist.barrier()
        return time.perf_counter() - t0

    savers = {
        "tensorseal.dcp": ("ts", lambda p: tensorseal.dcp.FileSystemWriter(p)),
        "tensorseal.dcp (no content hash)": ("tn", lambda p: tensorseal.dcp.FileSystemWriter(p, content_hash=False)),
        "torch torch_save": ("st", lambda p: dcp.FileSystemWriter(p)),
        "torch safetensors": ("sf", lambda p: dcp.FileSystemWriter(
            p, serialization_format=SerializationFormat.SAFETENSORS)),
    }
    loaders = {
        "tensorseal.dcp": ("ts", lambda p: tensorseal.dcp.FileSystemReader(p)),
        "torch (torch_save dir)": ("st", lambda p: dcp.FileSystemReader(p)),
        "tensorseal.dcp (torch_save dir)": ("st", lambda p: tensorseal.dcp.FileSystemReader(p)),
        "tensorseal.dcp (safetensors dir)": ("sf", lambda p: tensorseal.dcp.FileSystemReader(p)),
    }
    tseal = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "tseal")

    def timed(fn) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        return time.perf_counter() - t0

    def alone(cmd: list) -> None:
        # A single process on rank 0 (all cores' threads); the others wait at the barrier.
        if rank == 0:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    hashers = {
        "tensorseal.dcp.content_hash (live, sha256)": (None, lambda _: timed(lambda: tensorseal.dcp.content_hash(state))),
        "dcp.save (torch torch_save)": ("st", lambda _: save("st", savers["torch torch_save"][1])),
    }
    verifiers = {
        "tensorseal.dcp.verify (xxh3)": ("ts", lambda p: timed(lambda: tensorseal.dcp.verify(p, algo="xxh3"))),
        "tseal verify (one process)": ("ts", lambda p: timed(lambda: alone([tseal, "verify", "-q", p]))),
        "tensorseal.dcp.verify (sha256)": ("ts", lambda p: timed(lambda: tensorseal.dcp.verify(p))),
        "tseal hash (one process, sha256)": ("ts", lambda p: timed(lambda: alone([tseal, "hash", "-q", p]))),
    }
    times: dict = {"save": {k: [] for k in savers}, "load": {k: [] for k in loaders},
                   "hash": {k: [] for k in hashers}, "verify": {k: [] for k in verifiers}}
    hash_table = {k: (tag, fn) for k, (tag, fn) in hashers.items()}
    verify_table = {k: (tag, fn) for k, (tag, fn) in verifiers.items()}
    for rnd in range(args.repeats + 1):
        for op, table, fn in (("save", savers, save), ("load", loaders, load),
                              ("hash", hash_table, lambda tag, f: f(tag)),
                              ("verify", verify_table, lambda tag, f: f(latest[tag]))):
            names = list(table)
            k = rnd % len(names)
            for name in names[k:] + names[:k]:
                tag, make = table[name]
                dt = fn(tag, make)
                if rnd > 0:  # round 0 warms up
                    times[op][name].append(dt)
    ok = all(torch.equal(target[k].to_local(), state[k].to_local()) for k in state if k != "step")
    if rank == 0:
        lines = [f"dcp.save / dcp.load, {total / 2**30:.2f} GiB over {world} ranks (Shard(0) DTensors), "
                 f"{args.repeats} runs after a warm-up, scratch {root}; loaded values equal: {ok}", ""]
        for op in ("save", "load", "hash", "verify"):
            lines += spread.table(op, times[op], total)
        print("\n".join(lines))
        with open(args.out, "w") as f:
            json.dump({"bytes": total, "world": world, "repeats": args.repeats, "scratch": root, "times": times,
                       "values_equal": ok, "torch": torch.__version__}, f, indent=1)
        shutil.rmtree(root, ignore_errors=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
