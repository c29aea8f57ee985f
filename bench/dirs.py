"""Directory checkpoints: hash / convert / canon of a DCP directory saved by 2 ranks and of
Hugging Face shards, against the tools people use for them. Usage (`make bench` runs it):

    bench/dirs.py [--size-mib 2048] [--repeats 3] [--tseal build/tseal] [--out bench/dirs.json]

Inputs (real producers, on tmpfs when there is room, else bench/work/dirs):
  dcp/     torch.distributed.checkpoint.save under `torchrun --nproc_per_node 2` (gloo):
           64 float32 tensors [rows, 1024] as DTensors Shard(0), --size-mib in all
  shards/  huggingface_hub.save_torch_state_dict of the same tensors, max_shard_size a
           quarter of the size (512MB at 2 GiB: 5 shards)
Operations and competitors (every round each once, order rotated per round, after a
warm-up round; outputs removed outside the timing):
  hash     tseal hash DIR                 | sha256sum of every file of DIR
  convert  tseal convert DIR out.safetensors | dcp_to_torch_save (dcp) / load_file of every
           shard + save_file (shards), timed inside Python after imports | cp -r DIR
  canon    tseal canon DIR -o OUT         | cp -r DIR
CLI rows: wall time from spawn to exit. Output: markdown tables (median, min, max, GiB/s,
ratio = competitor median / tensorseal median) and every run in --out (JSON)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spread  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MAKE_DCP = r"""
import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
rows = int(sys.argv[2]) * 1024 * 1024 // (64 * 1024 * 4)
g = torch.Generator().manual_seed(0)
sd = {f"layer{i:02d}.weight": distribute_tensor(torch.randn(rows, 1024, generator=g), mesh, [Shard(0)]) for i in range(64)}
dcp.save(sd, checkpoint_id=sys.argv[1])
dist.barrier()  # no rank tears gloo down while another still talks to it
dist.destroy_process_group()
"""

MAKE_SHARDS = r"""
import sys, torch, huggingface_hub
rows = int(sys.argv[2]) * 1024 * 1024 // (64 * 1024 * 4)
g = torch.Generator().manual_seed(0)
sd = {f"layer{i:02d}.weight": torch.randn(rows, 1024, generator=g) for i in range(64)}
huggingface_hub.save_torch_state_dict(sd, sys.argv[1], max_shard_size=f"{max(1, int(sys.argv[2]) // 4)}MB")
"""

# Python competitors: print the seconds of the call alone (imports excluded).
DCP_TO_TORCH_SAVE = r"""
import sys, time
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
t = time.perf_counter(); dcp_to_torch_save(sys.argv[1], sys.argv[2]); print(time.perf_counter() - t)
"""
SHARDS_TO_ONE = r"""
import glob, os, sys, time
from safetensors.torch import load_file, save_file
t = time.perf_counter()
sd = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.safetensors"))):
    sd.update(load_file(f))
save_file(sd, sys.argv[2])
print(time.perf_counter() - t)
"""


def scratch(need: int) -> str:
    """A new directory of its own (two runs never share one), on tmpfs when it has room."""
    if os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free > need:
        return tempfile.mkdtemp(prefix="tseal-bench-dirs-", dir="/dev/shm")
    os.makedirs(os.path.join(HERE, "work"), exist_ok=True)
    return tempfile.mkdtemp(prefix="dirs-", dir=os.path.join(HERE, "work"))


def produce(argv: list, env: dict) -> None:
    """Runs a producer; on failure exits naming it with the tail of its stderr. A rank
    killed by a signal (torch's gloo has aborted in teardown on a loaded 2-core machine:
    "terminate called without an active exception") is retried, twice at most, saying so."""
    for attempt in (1, 2, 3):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode == 0:
            return
        crashed = "Signal 6 (SIGABRT)" in r.stderr or "Signal 11 (SIGSEGV)" in r.stderr or r.returncode < 0
        if attempt < 3 and crashed:
            print(f"producer crashed, retrying: {r.stderr.strip().splitlines()[0][:200]}", file=sys.stderr)
            continue
        sys.exit(f"producer failed (exit {r.returncode}): {' '.join(argv[:6])} ...\n{r.stderr[-4000:]}")


def wall(argv: list) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def inner(code: str, *args: str) -> float:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    return float(out.stdout.strip().splitlines()[-1])


def files(d: str) -> list:
    return sorted(os.path.join(d, f) for f in os.listdir(d))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tseal", default=os.path.join(ROOT, "build", "tseal"))
    p.add_argument("--out", default=os.path.join(HERE, "dirs.json"))
    args = p.parse_args()
    total = args.size_mib * 1024 * 1024
    root = scratch(total * 5)
    try:
        return run(args, total, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, total: int, root: str) -> int:
    inputs = {"dcp": os.path.join(root, "dcp"), "shards": os.path.join(root, "shards")}
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    produce([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
             "--no-python", sys.executable, "-c", MAKE_DCP, inputs["dcp"], str(args.size_mib)], env)
    os.makedirs(inputs["shards"])
    produce([sys.executable, "-c", MAKE_SHARDS, inputs["shards"], str(args.size_mib)], env)
    out = os.path.join(root, "out")
    ts = args.tseal

    def clean() -> None:
        if os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.remove(out)

    def ops(layout: str) -> dict:
        d = inputs[layout]
        py = (lambda: inner(DCP_TO_TORCH_SAVE, d, out)) if layout == "dcp" else (lambda: inner(SHARDS_TO_ONE, d, out))
        pyname = "dcp_to_torch_save" if layout == "dcp" else "load_file + save_file"
        return {
            "hash": {"tseal hash": lambda: wall([ts, "hash", d]),
                     "sha256sum (all files)": lambda: wall(["sha256sum", *files(d)])},
            "convert": {"tseal convert": lambda: wall([ts, "convert", d, out + ".safetensors"]),
                        pyname: py, "cp -r": lambda: wall(["cp", "-r", d, out])},
            "canon": {"tseal canon": lambda: wall([ts, "canon", d, "-o", out]),
                      "cp -r": lambda: wall(["cp", "-r", d, out])},
        }

    times: dict = {}
    for layout in inputs:
        for op, table in ops(layout).items():
            names = list(table)
            times.setdefault(layout, {})[op] = {n: [] for n in names}
            for rnd in range(args.repeats + 1):
                k = rnd % len(names)
                for name in names[k:] + names[:k]:
                    dt = table[name]()
                    clean()
                    if os.path.exists(out + ".safetensors"):
                        os.remove(out + ".safetensors")
                    if rnd > 0:
                        times[layout][op][name].append(dt)
    lines = [f"Directory checkpoints, {total / 2**30:.2f} GiB, {args.repeats} runs after a warm-up, scratch {root}", ""]
    for layout, by_op in times.items():
        for op, by_name in by_op.items():
            lines += spread.table(f"{layout} {op}", by_name, total)
    print("\n".join(lines))
    with open(args.out, "w") as f:
        json.dump({"bytes": total, "repeats": args.repeats, "scratch": root, "times": times}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
