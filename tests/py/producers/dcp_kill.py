"""Kill test of tensorseal.dcp's crash safety. Usage: dcp_kill.py WORK_DIR TRIALS SEED

Every trial is a 2-rank gloo job (ranks forked from this process, FileStore
rendezvous) saving generation g of a state (every value a function of g) with
tensorseal.dcp.FileSystemWriter to the same WORK_DIR/ckpt. After a random delay
(uniform over 1.2x a measured dcp.save, from the moment both ranks enter it) one random rank gets SIGKILL; the other gets
SIGKILL half a second later unless it finished. Then WORK_DIR/ckpt is loaded in this
process with tensorseal's reader and with torch's FileSystemReader: it must be exactly
the last complete generation or the new one (never a mixture, never unloadable).
Prints one JSON line: {"trials": n, "old": a, "new": b, "bad": [...]}."""
from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

import tensorseal.dcp  # noqa: E402

WORLD = 2


def state(g: int) -> dict:
    """Generation g: every value a function of g."""
    big = torch.arange(64 * 1024, dtype=torch.float32).reshape(256, 256) + g
    return {"gen": g, "big": big, "small": torch.full((16,), float(g))}


def child(work: pathlib.Path, trial: int, g: int, rank: int, ready: int) -> None:
    store = dist.FileStore(str(work / f"store_{trial}"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (WORLD,))
    s = state(g)
    s["big"] = distribute_tensor(s["big"], mesh, [Shard(0)])
    os.write(ready, b"r")  # the kill window is dcp.save itself, not the set-up
    dcp.save(s, storage_writer=tensorseal.dcp.FileSystemWriter(str(work / "ckpt")))
    dist.barrier()
    os._exit(0)


def run(work: pathlib.Path, trial: int, g: int, kill_after: float | None) -> float:
    """Runs one job; returns the seconds from both ranks' readiness to their exit."""
    pids = []
    r, w = os.pipe()
    for rank in range(WORLD):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                child(work, trial, g, rank, w)
            finally:
                os._exit(1)
        pids.append(pid)
    os.close(w)
    got = b""
    while len(got) < WORLD:
        chunk = os.read(r, WORLD)
        if not chunk:
            break
        got += chunk
    os.close(r)
    t0 = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        victim = random.choice(pids)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            if all(os.waitpid(p, os.WNOHANG) != (0, 0) for p in pids if p != victim):
                break
            time.sleep(0.02)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in pids:
        try:
            os.waitpid(p, 0)
        except ChildProcessError:
            pass
    return time.monotonic() - t0


def generation(path: pathlib.Path, reader_cls) -> int:
    """The generation at `path`, loaded with reader_cls; raises if it is not one whole generation."""
    target = {"gen": -1, "big": torch.zeros(256, 256), "small": torch.zeros(16)}
    dcp.load(target, storage_reader=reader_cls(str(path)), no_dist=True)
    g = target["gen"]
    want = state(g)
    if not (torch.equal(target["big"], want["big"]) and torch.equal(target["small"], want["small"])):
        raise AssertionError(f"a mixture: gen {g} with other tensors")
    return g


def main(work: pathlib.Path, trials: int, seed: int) -> None:
    random.seed(seed)
    import warnings
    warnings.filterwarnings("ignore")
    duration = run(work, 0, 0, None)
    assert generation(work / "ckpt", tensorseal.dcp.FileSystemReader) == 0
    complete, old, new, bad = 0, 0, 0, []
    for trial in range(1, trials + 1):
        run(work, trial, trial, random.uniform(0, 1.2 * duration))
        try:
            g1 = generation(work / "ckpt", tensorseal.dcp.FileSystemReader)
            g2 = generation(work / "ckpt", dcp.FileSystemReader)
            if g1 != g2:
                raise AssertionError(f"readers disagree: {g1} vs {g2}")
            if g1 == trial:
                new += 1
                complete = trial
            elif g1 == complete:
                old += 1
            else:
                raise AssertionError(f"generation {g1}, expected {complete} or {trial}")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            bad.append(f"trial {trial}: {type(e).__name__}: {e}")
            break
    print(json.dumps({"trials": trials, "old": old, "new": new, "bad": bad, "save_seconds": round(duration, 3)}))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
