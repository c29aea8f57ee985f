#!/usr/bin/env python3
"""tensorseal benchmark: `make bench` (SIZE=small for a < 1 minute run).

Drives the `tseal` CLI and the Python API against torch, safetensors, numpy and the
system tools on the same files, in the same run, alternating competitors; prints a
markdown table per operation and workload plus a table of the targets, and writes
bench/results.json. Method (details in bench/README.md):

- Each operation runs once per competitor as a warm-up, then --repeats times, the
  competitors in a rotated order each round (so drift and noise spread over all).
- CLI competitors (tseal, cp, sha256sum, openssl) are child processes: time is the
  wall time from spawn to exit (process start included), peak RSS is ru_maxrss from
  os.wait4. Python competitors run inside one long-lived worker (bench/worker.py; it
  imports torch once): time is perf_counter around the call, peak RSS is the growth
  of VmHWM over the RSS just before the call (VmHWM reset via /proc/self/clear_refs).
- Peak anonymous memory (heap, not file-backed or tmpfs pages) is sampled from
  /proc/<pid>/status RssAnon every ~2 ms while the operation runs (Python rows: growth
  over RssAnon before the call). A spike shorter than the interval can be missed.
- Caches are warm: every input is read once before timing and lives in the page cache.
- Outputs go to a tmpfs scratch folder when there is room (so save/canon/convert
  measure the software, not this machine's disk), else bench/work/out.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MiB = 1 << 20
GiB = 1 << 30

# Which workloads each operation runs on, and the tensorseal row the ratios refer to.
PLAN = [
    ("save", ["a", "b", "c"], "tensorseal.save (.safetensors)"),
    ("save-over", ["a", "b"], "tensorseal.save (.safetensors)"),
    ("save-ext4", ["a", "b"], "tensorseal.save (.safetensors)"),
    ("save-ext4-over", ["a"], "tensorseal.save (.safetensors)"),
    ("load", ["a", "b", "c"], "tensorseal.load (.safetensors, mmap)"),
    ("lazy", ["b"], "tensorseal safe_open + keys()"),
    ("hash", ["a", "c", "d"], "tseal hash"),
    ("canon", ["a", "d"], "tseal canon"),
    ("convert", ["a", "d"], "tseal convert"),
    ("diff", ["a"], "tseal diff"),
    ("hash-npz", ["e"], "tseal hash"),
    ("bomb", ["e"], "tseal inspect (refused)"),
]
OP_TITLES = {
    "save": "save (in-memory tensors -> new file on tmpfs)",
    "save-over": "save over an existing file (tmpfs)",
    "save-ext4": "save to a new file on the disk (ext4)",
    "save-ext4-over": "save over an existing file on the disk (ext4)",
    "load": "load and touch every byte",
    "lazy": "lazy open + list keys",
    "hash": "content hash",
    "canon": "canon .pt -> .pt",
    "convert": "convert .pt -> .safetensors",
    "diff": "diff of two checkpoints",
    "hash-npz": "content hash of a compressed .npz (members inflated as they stream)",
    "bomb": "a deflate bomb refused (docs/limits.md, max_inflate)",
}
WORKLOAD_TITLES = {
    "a": "(a) {n} float32 tensors, {size}",
    "b": "(b) {n} small tensors, mixed dtypes, {size}",
    "c": "(c) all-MiniLM-L6-v2 model.safetensors, {n} tensors, {size}",
    "d": "(d) {n} float32 tensors, {size} (memory-bound cases)",
    "e": "(e) np.savez_compressed of {n} float32 tensors, {size} inflated; a 4 MB .npz inflating to 4 GiB",
}


def human(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.1f} MiB"


# ---- measuring --------------------------------------------------------------------

class Sampler:
    """Polls /proc/<pid>/status for RssAnon/VmRSS until stopped; keeps the maxima."""

    def __init__(self, pid: int, interval: float = 0.002) -> None:
        self.pid, self.interval = pid, interval
        self.max_anon = 0
        self.max_rss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> None:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        self.max_anon = max(self.max_anon, int(line.split()[1]))
                    elif line.startswith("VmRSS:"):
                        self.max_rss = max(self.max_rss, int(line.split()[1]))
            self.samples += 1
        except (OSError, ValueError):
            pass

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(self.interval)

    def __enter__(self) -> "Sampler":
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()


class Worker:
    def __init__(self, python: str) -> None:
        env = dict(os.environ)
        # glibc raises its mmap threshold after the first large free (up to 32 MiB) and
        # then keeps freed tensors in the heap: RSS would not fall between runs and the
        # next run's growth would read 0. A fixed threshold (glibc's initial 128 KiB)
        # makes every run allocate fresh pages, as in a fresh process.
        env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
        env.setdefault("MALLOC_TRIM_THRESHOLD_", "131072")
        self.p = subprocess.Popen([python, os.path.join(HERE, "worker.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        self.hello = self._read()
        self.pid = self.p.pid

    def _read(self) -> Dict[str, Any]:
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("bench worker died (see its stderr above)")
        msg = json.loads(line)
        if "error" in msg:
            sys.stderr.write(msg.get("traceback", ""))
            raise RuntimeError(f"bench worker: {msg['error']}")
        return msg

    def call(self, **msg: Any) -> Dict[str, Any]:
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.call(cmd="exit")
        except Exception:
            pass
        self.p.wait(timeout=30)


def run_cli(argv: List[str], ok_codes: Tuple[int, ...] = (0,)) -> Dict[str, Any]:
    err_path = os.path.join(Bench.scratch_dir, "stderr.txt")
    with open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        with Sampler(p.pid) as s:
            _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t0
    p.returncode = rc = os.waitstatus_to_exitcode(status)
    if rc not in ok_codes:
        with open(err_path, errors="replace") as f:
            raise RuntimeError(f"{' '.join(argv)} exited {rc}: {f.read()[-2000:]}")
    return {"seconds": dt, "cpu_seconds": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024, "peak_anon_mib": s.max_anon / 1024,
            "anon_samples": s.samples}


def run_py(worker: Worker, name: str) -> Dict[str, Any]:
    with Sampler(worker.pid) as s:
        r = worker.call(cmd="run", competitor=name)
    peak = (r["hwm_kib"] - r["rss_before_kib"]) / 1024 if r.get("hwm_kib") is not None else None
    return {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"], "peak_rss_mib": peak,
            "peak_anon_mib": max(0, s.max_anon - r["anon_before_kib"]) / 1024, "anon_samples": s.samples}


# ---- the benchmark -----------------------------------------------------------------

class Bench:
    scratch_dir = ""

    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.tseal = os.path.abspath(args.tseal)
        self.work = os.path.abspath(os.path.join(args.work, args.size))
        self.workloads: Dict[str, Dict[str, Any]] = {}
        self.results: List[Dict[str, Any]] = []
        self.worker: Optional[Worker] = None

    # -- set-up --
    def need_bytes(self) -> Tuple[int, int]:
        """(input bytes on disk, largest output) for the chosen size."""
        if self.a.size == "small":
            return 400 * MiB, 128 * MiB
        return 9 * GiB, 4 * GiB + 64 * MiB

    def choose_scratch(self) -> str:
        disk_need, out_need = self.need_bytes()
        os.makedirs(self.work, exist_ok=True)
        free = shutil.disk_usage(self.work).free
        if free < disk_need + 2 * GiB:
            raise SystemExit(f"bench: {human(free)} free under {self.work}, need {human(disk_need + 2 * GiB)}")
        if self.a.scratch != "auto":
            d = os.path.abspath(self.a.scratch)
        else:
            d = os.path.join(self.work, "out")
            shm = "/dev/shm"
            if os.path.isdir(shm) and os.access(shm, os.W_OK):
                avail = _meminfo().get("MemAvailable", 0) * 1024
                # room for the output in tmpfs plus torch's in-memory copy plus the input's page cache
                if shutil.disk_usage(shm).free > out_need * 1.2 and avail > 3 * out_need + 2 * GiB:
                    d = os.path.join(shm, f"tensorseal-bench-{os.getpid()}")
        os.makedirs(d, exist_ok=True)
        Bench.scratch_dir = d
        return d

    def disk_scratch(self) -> str:
        """Outputs of the save-ext4 ops: beside the inputs, on the disk (not tmpfs)."""
        d = os.path.join(self.work, "out-disk")
        os.makedirs(d, exist_ok=True)
        return d

    def generate(self, wl: str) -> None:
        stamp = os.path.join(self.work, f"{wl}.json")
        if os.path.exists(stamp):
            with open(stamp) as f:
                info = json.load(f)
            if all(os.path.exists(p) for p in info["files"].values()):
                self.workloads[wl] = info
                return
        t0 = time.perf_counter()
        info = self.worker.call(cmd="generate", workload=wl, dir=self.work, size=self.a.size)
        info["generate_seconds"] = time.perf_counter() - t0
        with open(stamp, "w") as f:
            json.dump(info, f)
        self.workloads[wl] = info
        log(f"generated workload {wl} in {info['generate_seconds']:.1f} s: "
            f"{info['info']['tensors']} tensors, {human(info['info']['nbytes'])}")

    def warm(self, paths: List[str]) -> None:
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                while f.read(16 * MiB):
                    pass

    # -- competitors --
    def competitors(self, op: str, wl: str, py_names: List[str]) -> List[Tuple[str, Any]]:
        files = self.workloads[wl]["files"]
        out = Bench.scratch_dir
        t = self.tseal
        c: List[Tuple[str, Any]] = []
        if op == "hash":
            src = files["hash"]
            c += [("tseal hash", [t, "hash", src]),
                  ("tseal hash --threads 1", [t, "hash", "--threads", "1", src]),
                  ("tseal hash --fast", [t, "hash", "--fast", src]),
                  ("openssl dgst -sha256", ["openssl", "dgst", "-sha256", src]),
                  ("sha256sum", ["sha256sum", src])]
        elif op == "canon":
            c += [("tseal canon", [t, "canon", files["pt"], "-o", os.path.join(out, "cli-out.pt")]),
                  ("tseal canon --no-fsync", [t, "canon", "--no-fsync", files["pt"], "-o", os.path.join(out, "cli-out.pt")]),
                  ("cp (the limit)", ["cp", files["pt"], os.path.join(out, "cli-out.pt")])]
        elif op == "convert":
            c += [("tseal convert", [t, "convert", files["pt"], os.path.join(out, "cli-out.safetensors")]),
                  ("cp (the limit)", ["cp", files["pt"], os.path.join(out, "cli-out.safetensors")])]
        elif op == "diff":
            c += [("tseal diff", [t, "diff", files["pt"], files["pt2"]])]
        elif op == "hash-npz":
            # Raw I/O of the same file for scale: reading it (cat) and hashing its bytes.
            c += [("tseal hash", [t, "hash", files["npz"]]),
                  ("tseal hash --threads 1", [t, "hash", "--threads", "1", files["npz"]]),
                  ("tseal inspect", [t, "inspect", files["npz"]]),
                  ("cat (raw read)", ["cat", files["npz"]]),
                  ("sha256sum (raw read + SHA-256)", ["sha256sum", files["npz"]])]
        elif op == "bomb":
            c += [("tseal inspect (refused)", [t, "inspect", files["bomb"]]),
                  ("tseal hash (refused)", [t, "hash", files["bomb"]]),
                  ("cat (raw read)", ["cat", files["bomb"]])]
        return c + [(n, None) for n in py_names]

    def measure(self, op: str, wl: str, ref: str) -> None:
        files = dict(self.workloads[wl]["files"])
        if op == "hash":
            files["hash"] = files["pt"] if wl == "d" else files["safetensors"]
        self.workloads[wl]["files"] = files
        need = {"save": ["safetensors"], "save-over": ["safetensors"], "save-ext4": ["safetensors"],
                "save-ext4-over": ["safetensors"], "load": ["safetensors", "pt", "npz"], "lazy": ["safetensors", "pt"],
                "hash": ["hash"], "canon": ["pt"], "convert": ["pt"], "diff": ["pt", "pt2"],
                "hash-npz": ["npz"], "bomb": ["bomb"]}[op]
        self.warm([files[k] for k in need])
        scratch = self.disk_scratch() if "ext4" in op else Bench.scratch_dir
        reply = self.worker.call(cmd="setup", op=op, files=files, scratch=scratch)
        py, row_bytes = reply["competitors"], reply.get("bytes", {})
        comps = self.competitors(op, wl, py)
        runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n, _ in comps}

        # Memory warm (bench/worker.py prefault): room for the outputs and copies of the run.
        warm_bytes = 2 * self.workloads[wl]["info"]["nbytes"] if op not in ("hash", "lazy", "diff", "hash-npz",
                                                                              "bomb") else 0

        def once(name: str, argv: Any) -> Dict[str, Any]:
            if warm_bytes:
                self.worker.call(cmd="prefault", bytes=warm_bytes)
            if argv is None:
                return run_py(self.worker, name)
            r = run_cli(argv, ok_codes=(0, 1) if op == "diff" else (0, 2) if op == "bomb" else (0,))
            for f in os.listdir(Bench.scratch_dir):
                if f.startswith("cli-out"):
                    os.unlink(os.path.join(Bench.scratch_dir, f))
            return r

        t0 = time.perf_counter()
        for _ in range(self.a.warmup):
            for name, argv in comps:
                once(name, argv)
        for r in range(self.a.repeats):
            k = r % len(comps)
            for name, argv in comps[k:] + comps[:k]:
                runs[name].append(once(name, argv))
        self.worker.call(cmd="teardown")
        wl_bytes = self.workloads[wl]["info"]["nbytes"]
        ref_med = statistics.median(x["seconds"] for x in runs[ref])
        ref_cpu = statistics.median(x["cpu_seconds"] for x in runs[ref])
        for name, argv in comps:
            secs = [x["seconds"] for x in runs[name]]
            med = statistics.median(secs)
            cpu = statistics.median(x["cpu_seconds"] for x in runs[name])
            nbytes = row_bytes.get(name, wl_bytes)
            scale = wl_bytes / nbytes  # ratios compare time per byte
            rss = [x["peak_rss_mib"] for x in runs[name] if x["peak_rss_mib"] is not None]
            self.results.append({
                "op": op, "workload": wl, "competitor": name, "kind": "cli" if argv else "python",
                "tensorseal": name.startswith(("tseal", "tensorseal")),
                "argv": [os.path.relpath(x, ROOT) if os.path.isabs(x) and x.startswith(ROOT) else x
                         for x in argv] if argv else None,
                "runs": len(secs), "seconds": secs, "median_s": med, "min_s": min(secs), "max_s": max(secs),
                "cpu_s": cpu,
                "bytes": nbytes, "throughput_gib_s": nbytes / med / GiB if med > 0 else None,
                "ratio_to_tensorseal": med * scale / ref_med if ref_med > 0 else None,
                "cpu_ratio_to_tensorseal": cpu * scale / ref_cpu if ref_cpu > 0 else None, "reference": ref,
                "peak_rss_mib": max(rss) if rss else None,
                "peak_anon_mib": max(x["peak_anon_mib"] for x in runs[name]),
                "anon_samples_min": min(x["anon_samples"] for x in runs[name]),
            })
        log(f"{op} {wl}: {len(comps)} competitors x {self.a.warmup}+{self.a.repeats} runs "
            f"in {time.perf_counter() - t0:.1f} s")

    def run(self) -> Dict[str, Any]:
        started = time.time()
        load_before = os.getloadavg()
        scratch = self.choose_scratch()
        ops = [(op, [w for w in wls if w in self.a.workloads], ref) for op, wls, ref in PLAN
               if op in self.a.ops]
        needed = sorted({w for _, wls, _ in ops for w in wls})
        self.worker = Worker(self.a.python)
        try:
            for wl in needed:
                self.generate(wl)
            for op, wls, ref in ops:
                for wl in wls:
                    self.measure(op, wl, ref)
            meta = self.meta(started, load_before, scratch)
        finally:
            self.worker.close()
            if scratch.startswith("/dev/shm/"):
                shutil.rmtree(scratch, ignore_errors=True)
        micro = run_micro(self.a) if self.a.micro else None
        meta["duration_s"] = round(time.time() - started, 1)
        return {
            "meta": meta,
            "workloads": {k: {"title": workload_title(k, v["info"]), **v["info"]} for k, v in self.workloads.items()},
            "results": self.results,
            "targets": targets(self.results, self.workloads),
            "micro": micro,
        }

    def meta(self, started: float, load_before: Tuple[float, ...], scratch: str) -> Dict[str, Any]:
        def fs_type(path: str) -> str:
            try:
                return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", path], capture_output=True,
                                      text=True).stdout.split("\n")[0].strip()
            except OSError:
                return "?"
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
        except OSError:
            pass
        return {
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.time() - started, 1),
            "size": self.a.size, "warmup": self.a.warmup, "repeats": self.a.repeats,
            "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
            "mem_total_gib": round(_meminfo().get("MemTotal", 0) / GiB * 1024, 1),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "cpu_pressure_some_avg60": _psi_cpu(),
            "page_cache": "warm (inputs read once before timing; no cache dropping)",
            "memory": "warm (before each run of save/load/canon/convert, up to twice the workload's bytes of free "
                      "memory touched and freed: this VM returns free pages to its host)",
            "drop_caches_writable": os.access("/proc/sys/vm/drop_caches", os.W_OK),
            "inputs": {"dir": os.path.relpath(self.work, ROOT), "fs": fs_type(self.work)},
            "outputs": {"dir": scratch, "fs": fs_type(scratch)},
            "disk_outputs": {"dir": os.path.relpath(self.disk_scratch(), ROOT), "fs": fs_type(self.disk_scratch())},
            "tseal": os.path.relpath(self.tseal, ROOT),
            "versions": {k: v for k, v in self.worker.hello.items() if k not in ("ready", "pid")},
            "python": sys.version.split()[0],
            "method": {
                "time": "median of the measured runs after warm-up; competitors alternate (rotated order per round)",
                "cli_time": "wall time spawn->exit of the child (process start included)",
                "python_time": "perf_counter around the call inside one long-lived worker (import time excluded)",
                "peak_rss": "cli: ru_maxrss from os.wait4; python: VmHWM (reset via /proc/self/clear_refs) minus "
                            "VmRSS before the call",
                "peak_anon": "max of /proc/<pid>/status RssAnon sampled every ~2 ms (python: minus RssAnon before)",
                "cpu": "user+sys CPU seconds of the process (all threads) during the operation, median; "
                       "robust to a loaded machine where wall time includes waiting for a core",
                "throughput": "tensor bytes of the workload / median time (GiB/s), for every row",
                "ratio": "competitor median / tensorseal median in the same run (>1: tensorseal is faster)",
            },
        }


def _psi_cpu() -> Optional[float]:
    """Share of the last minute in which some runnable task waited for a CPU (%)."""
    try:
        with open("/proc/pressure/cpu") as f:
            first = f.readline().split()
        return float(dict(x.split("=") for x in first[1:])["avg60"])
    except (OSError, KeyError, ValueError):
        return None


def _meminfo() -> Dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def workload_title(wl: str, info: Dict[str, Any]) -> str:
    return WORKLOAD_TITLES[wl].format(n=info["tensors"], size=human(info["nbytes"]))


# ---- targets --------------------------------------------------------------------

def targets(results: List[Dict[str, Any]], workloads: Dict[str, Any]) -> List[Dict[str, Any]]:
    by = {(r["op"], r["workload"], r["competitor"]): r for r in results}
    out: List[Dict[str, Any]] = []

    def add(op: str, wl: str, what: str, ts: str, other: str, kind: str, limit: float) -> None:
        a, b = by.get((op, wl, ts)), by.get((op, wl, other))
        if not a or not b:
            return
        # Time per byte (rows may process different byte counts: numpy copy <= 1 GiB).
        ta, tb = a["median_s"] / a["bytes"], b["median_s"] / b["bytes"]
        ca, cb = a["cpu_s"] / a["bytes"], b["cpu_s"] / b["bytes"]
        # The spread: the same ratio in each round (every competitor runs once per round).
        rounds = [(x / a["bytes"], y / b["bytes"]) for x, y in zip(a["seconds"], b["seconds"])]
        if kind == "speed>=":   # tensorseal throughput / other throughput >= limit
            value, cpu_value = tb / ta, (cb / ca if ca > 0 else None)
            per_round = [y / x for x, y in rounds if x > 0]
            ok = value >= limit
        else:                  # tensorseal time / other time <= limit
            value, cpu_value = ta / tb, (ca / cb if cb > 0 else None)
            per_round = [x / y for x, y in rounds if y > 0]
            ok = value <= limit
        out.append({"op": op, "workload": wl, "target": what, "tensorseal": ts, "versus": other,
                    "value": round(value, 3), "cpu_value": round(cpu_value, 3) if cpu_value is not None else None,
                    "spread": [round(min(per_round), 3), round(max(per_round), 3)] if per_round else None,
                    "limit": limit, "kind": kind, "met": ok})

    for wl in "abc":
        # Many small tensors (b): the per-tensor work is in Python objects, 0.7x is the goal.
        raw = 0.7 if wl == "b" else 0.85
        for ts in ("tensorseal.save (.safetensors)", "tensorseal.save (.pt)"):
            add("save", wl, f"throughput >= {raw}x raw write()", ts, "raw write() loop", "speed>=", raw)
            add("save", wl, "time <= 0.5x torch.save", ts, "torch.save", "time<=", 0.5)
            add("save", wl, "time <= 0.8x save_file", ts, "safetensors save_file", "time<=", 0.8)
            add("save", wl, "durable: throughput >= 0.9x raw write() + fsync", ts, "raw write() loop + fsync",
                "speed>=", 0.9)
            add("save", wl, "durable=False: throughput >= 0.9x raw write()", ts.replace(")", ", durable=False)"),
                "raw write() loop", "speed>=", 0.9)
        add("save", wl, "drop-in faster than torch.save", "tensorseal.torch.save (drop-in)", "torch.save", "time<=", 1.0)
        add("load", wl, "drop-in (in memory) load + touch <= 0.5x torch.load", "tensorseal.torch.load (drop-in, .pt)",
            "torch.load", "time<=", 0.5)
        add("load", wl, "drop-in mmap=True load + touch <= 1.2x torch.load(mmap=True)",
            "tensorseal.torch.load (drop-in, .pt, mmap=True)", "torch.load(mmap=True)", "time<=", 1.2)
        add("load", wl, "verified .pt load + touch <= 1.2x torch.load(mmap=True)", "tensorseal.load (.pt, mmap)",
            "torch.load(mmap=True)", "time<=", 1.2)
        ts = "tensorseal.load (.safetensors, mmap)"
        add("load", wl, "time <= 0.5x torch.load", ts, "torch.load", "time<=", 0.5)
        add("load", wl, "time <= 1.0x load_file", ts, "safetensors load_file", "time<=", 1.0)
        add("lazy", wl, "time <= 0.5x safe_open + keys()", "tensorseal safe_open + keys()",
            "safetensors safe_open + keys()", "time<=", 0.5)
        for op in ("save-over", "save-ext4", "save-ext4-over"):
            raw = 0.7 if wl == "b" else 0.9
            for ts in ("tensorseal.save (.safetensors)", "tensorseal.save (.pt)"):
                add(op, wl, f"durable: throughput >= {raw}x raw write() + fsync", ts, "raw write() loop + fsync",
                    "speed>=", raw)
            add(op, wl, f"durable=False: throughput >= {raw}x raw write()", "tensorseal.save (.safetensors, durable=False)",
                "raw write() loop", "speed>=", raw)
            add(op, wl, "durable=False faster than torch.save", "tensorseal.save (.safetensors, durable=False)",
                "torch.save", "time<=", 1.0)
    for wl in "acd":
        add("hash", wl, "SHA-256 >= 1.8x one-core OpenSSL (hashlib)", "tseal hash", "hashlib.sha256 (1 core)",
            "speed>=", 1.8)
        add("hash", wl, "fast >= 0.8x memory bandwidth (numpy copy)", "tseal hash --fast", "numpy copy (memcpy)",
            "speed>=", 0.8)
    for wl in "ad":
        for op, ts, rt in (("canon", "tseal canon", "torch.load + torch.save"),
                           ("convert", "tseal convert", "torch.load + save_file")):
            add(op, wl, "throughput >= 0.8x cp", ts, "cp (the limit)", "speed>=", 0.8)
            add(op, wl, f"time <= 1/3 {rt}", ts, rt, "time<=", 1 / 3)
    # Compressed .npz (e): the streamed hash within 2x reading and hashing the file's
    # bytes (inflating costs about as much again); the bomb refused in the time of
    # reading its 4 MB; both with the anonymous memory of a few windows, whatever the
    # members (peak RSS of a child starts at the harness's own, ~32 MiB).
    if "e" in workloads:
        add("hash-npz", "e", "streamed hash <= 2x sha256sum of the file", "tseal hash",
            "sha256sum (raw read + SHA-256)", "time<=", 2.0)
        for op, ts in (("hash-npz", "tseal hash"), ("hash-npz", "tseal inspect"), ("bomb", "tseal inspect (refused)")):
            r = by.get((op, "e", ts))
            if r:
                out.append({"op": op, "workload": "e", "target": "peak anon <= 64 MiB", "tensorseal": ts,
                            "versus": None, "value": round(r["peak_anon_mib"], 1), "limit": 64, "kind": "MiB<=",
                            "met": r["peak_anon_mib"] <= 64})
        r = by.get(("bomb", "e", "tseal inspect (refused)"))
        if r:
            out.append({"op": "bomb", "workload": "e", "target": "refused in < 1 s (slowest run)",
                        "tensorseal": r["competitor"], "versus": None, "value": round(r["max_s"], 3),
                        "cpu_value": round(r["cpu_s"], 3), "spread": [round(r["min_s"], 3), round(r["max_s"], 3)],
                        "limit": 1.0, "kind": "s<=", "met": r["max_s"] < 1.0})
    # Memory: hash/canon/convert of workload d: peak anonymous memory <= 64 MiB + largest tensor.
    if "d" in workloads:
        largest = workloads["d"]["info"]["largest"] / MiB
        for op, ts in (("hash", "tseal hash"), ("canon", "tseal canon"), ("convert", "tseal convert")):
            r = by.get((op, "d", ts))
            if r:
                out.append({"op": op, "workload": "d", "target": f"peak anon <= 64 MiB + largest tensor "
                            f"({largest:.0f} MiB)", "tensorseal": ts, "versus": None,
                            "value": round(r["peak_anon_mib"], 1), "limit": 64 + largest, "kind": "MiB<=",
                            "met": r["peak_anon_mib"] <= 64 + largest})
    return out


# ---- the baseline -----------------------------------------------------------------
#
# bench/baseline.json holds the medians and target ratios of one full run on the
# reference machine (written with --write-baseline). Each later run of the same size
# prints them side by side: a tensorseal row more than 15 % slower whose fastest run
# is slower than the baseline's slowest is marked as a regression.

def _key(*parts: str) -> str:
    return " | ".join(parts)


def baseline_of(doc: Dict[str, Any]) -> Dict[str, Any]:
    m = doc["meta"]
    return {
        "meta": {k: m[k] for k in ("date", "size", "repeats", "cpu", "cores", "loadavg_before",
                                   "cpu_pressure_some_avg60", "versions")},
        "rows": {_key(r["op"], r["workload"], r["competitor"]): {k: float(f"{r[k]:.4g}") for k in ("median_s", "min_s", "max_s")}
                 for r in doc["results"]},
        "targets": {_key(t["op"], t["workload"], t["target"], t["tensorseal"]): t["value"] for t in doc["targets"]},
    }


def compare(doc: Dict[str, Any], base: Dict[str, Any]) -> Dict[str, Any]:
    rows = []
    for r in doc["results"]:
        if not r["tensorseal"]:
            continue
        b = base["rows"].get(_key(r["op"], r["workload"], r["competitor"]))
        if not b:
            continue
        change = r["median_s"] / b["median_s"] if b["median_s"] > 0 else None
        rows.append({"op": r["op"], "workload": r["workload"], "competitor": r["competitor"],
                     "baseline_s": b["median_s"], "now_s": r["median_s"], "change": round(change, 3) if change else None,
                     "regression": bool(change and change > 1.15 and r["min_s"] > b["max_s"])})
    tg = []
    for t in doc["targets"]:
        b = base["targets"].get(_key(t["op"], t["workload"], t["target"], t["tensorseal"]))
        if b is not None:
            tg.append({"op": t["op"], "workload": t["workload"], "target": t["target"], "baseline": b,
                       "now": t["value"], "met": t["met"]})
    return {"baseline_date": base["meta"]["date"], "rows": rows, "targets": tg}


# ---- micro benchmarks -------------------------------------------------------------

def run_micro(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    exe = os.path.join(os.path.dirname(os.path.abspath(args.tseal)), "bench", "micro", "tensorseal_micro")
    if not os.path.exists(exe) and args.build_micro:
        build = os.path.dirname(os.path.abspath(args.tseal))
        cmake = os.path.join(ROOT, ".venv", "bin", "cmake")
        cmake = cmake if os.path.exists(cmake) else "cmake"
        log("building the Google Benchmark microbenchmarks (TENSORSEAL_BENCH=ON)")
        r = subprocess.run([cmake, "-S", ROOT, "-B", build, "-DTENSORSEAL_BENCH=ON"], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([cmake, "--build", build, "--target", "tensorseal_micro", "-j", "1"],
                               capture_output=True, text=True)
        if r.returncode != 0:
            log("microbenchmarks not built: " + (r.stderr or r.stdout)[-1500:])
            return None
    if not os.path.exists(exe):
        log(f"microbenchmarks skipped: {exe} not built (configure with -DTENSORSEAL_BENCH=ON)")
        return None
    r = subprocess.run([exe, "--benchmark_format=json", f"--benchmark_min_time={args.micro_min_time}",
                        "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("microbenchmarks failed: " + r.stderr[-1500:])
        return None
    return json.loads(r.stdout)


# ---- output -----------------------------------------------------------------------

def fmt(x: Optional[float], nd: int = 3) -> str:
    if x is None:
        return "-"
    return f"{x:.{nd}f}" if abs(x) < 100 else f"{x:.0f}"


def markdown(doc: Dict[str, Any]) -> str:
    m = doc["meta"]
    lines = [f"# tensorseal benchmark ({m['size']}, {m['date']})", "",
             f"{m['cores']} cores ({m['cpu']}), {m['mem_total_gib']} GiB RAM; load average "
             f"{m['loadavg_before'][0]:.1f} before, {m['loadavg_after'][0]:.1f} after, CPU pressure "
             f"{m['cpu_pressure_some_avg60']}% (shared machine: expect noise; CPU s is the steadier column). Page cache: {m['page_cache']}. Inputs on {m['inputs']['fs']}, outputs on "
             f"{m['outputs']['fs']}. {m['warmup']} warm-up + {m['repeats']} measured runs per competitor, "
             f"alternating. Ratio = competitor time / tensorseal time (> 1: tensorseal faster). "
             f"Peak RSS / anon: CLI rows whole process; Python rows growth during the call.", ""]
    seen = []
    for r in doc["results"]:
        key = (r["op"], r["workload"])
        if key not in seen:
            seen.append(key)
    for op, wl in seen:
        rows = [r for r in doc["results"] if (r["op"], r["workload"]) == (op, wl)]
        lines += [f"## {OP_TITLES[op]} — {doc['workloads'][wl]['title']}", "",
                  "| competitor | median s | min s | max s | GiB/s | × tensorseal | CPU s | peak RSS MiB | peak anon MiB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            name = f"**{r['competitor']}**" if r["tensorseal"] else r["competitor"]
            lines.append(f"| {name} | {fmt(r['median_s'])} | {fmt(r['min_s'])} | {fmt(r['max_s'])} | "
                         f"{fmt(r['throughput_gib_s'], 2)} | {fmt(r['ratio_to_tensorseal'], 2)} | {fmt(r['cpu_s'])} | "
                         f"{fmt(r['peak_rss_mib'], 0)} | {fmt(r['peak_anon_mib'], 0)} |")
        lines.append("")
    if doc["targets"]:
        lines += ["## Targets (same run)", "",
                  "Measured = the ratio the target names, from median wall times (per byte); CPU = the same "
                  "ratio from CPU seconds (not a target; steadier on a loaded machine, blind to parallelism).", "",
                  "Spread = the lowest and highest of the same ratio taken round by round (every competitor "
                  "runs once per round).", "",
                  "| op | workload | target | tensorseal row | measured | spread | CPU | met |",
                  "|---|---|---|---|---:|---:|---:|---|"]
        for t in doc["targets"]:
            sp = t.get("spread")
            spread = f"{sp[0]}–{sp[1]}" if sp else "-"
            lines.append(f"| {t['op']} | {t['workload']} | {t['target']} | {t['tensorseal']} | "
                         f"{t['value']} | {spread} | {fmt(t.get('cpu_value'), 3)} | {'yes' if t['met'] else '**no**'} |")
        lines.append("")
    cmp_ = doc.get("baseline")
    if cmp_:
        lines += [f"## Against the baseline (bench/baseline.json, {cmp_['baseline_date']})", "",
                  "tensorseal rows: median now / median then (> 1: slower now). A regression: more than 15 % "
                  "slower and even the fastest run now slower than the slowest then.", "",
                  "| op | workload | tensorseal row | then s | now s | now / then | |", "|---|---|---|---:|---:|---:|---|"]
        for r in cmp_["rows"]:
            lines.append(f"| {r['op']} | {r['workload']} | {r['competitor']} | {fmt(r['baseline_s'])} | "
                         f"{fmt(r['now_s'])} | {fmt(r['change'], 2)} | {'**regression**' if r['regression'] else ''} |")
        lines += ["", "| op | workload | target | then | now | met now |", "|---|---|---|---:|---:|---|"]
        for t in cmp_["targets"]:
            lines.append(f"| {t['op']} | {t['workload']} | {t['target']} | {t['baseline']} | {t['now']} | "
                         f"{'yes' if t['met'] else '**no**'} |")
        lines.append("")
    if doc.get("micro"):
        lines += ["## Microbenchmarks (Google Benchmark, median of 3)", "", "| benchmark | time | throughput |",
                  "|---|---:|---:|"]
        for b in doc["micro"].get("benchmarks", []):
            if b.get("aggregate_name") != "median":
                continue
            bps = b.get("bytes_per_second")
            lines.append(f"| {b['run_name']} | {b['real_time']:.1f} {b['time_unit']} | "
                         f"{(bps / GiB if bps else 0):.2f} GiB/s |")
        lines.append("")
    return "\n".join(lines)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=["small", "full"], default="full")
    p.add_argument("--quick", action="store_true", help="no warm-up, one run each (smoke test)")
    p.add_argument("--repeats", type=int, default=None,
                   help="measured runs per competitor (default: full 5, small 3, quick 1)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--ops", default=",".join(op for op, _, _ in PLAN))
    p.add_argument("--workloads", default="abcde")
    p.add_argument("--tseal", default=os.environ.get("TSEAL", os.path.join(ROOT, "build", "tseal")))
    p.add_argument("--python", default=sys.executable, help="interpreter for the worker")
    p.add_argument("--work", default=os.path.join(HERE, "work"), help="inputs go under WORK/SIZE")
    p.add_argument("--scratch", default="auto", help="output folder (auto: tmpfs when there is room)")
    p.add_argument("--out", default=os.path.join(HERE, "results.json"))
    p.add_argument("--keep", action="store_true", help="keep the generated inputs for the next run")
    p.add_argument("--micro", action=argparse.BooleanOptionalAction, default=None,
                   help="run the Google Benchmark microbenchmarks (default: on for full)")
    p.add_argument("--build-micro", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--micro-min-time", type=float, default=0.2)
    p.add_argument("--render", metavar="RESULTS_JSON", help="only print the markdown of an earlier results.json")
    p.add_argument("--baseline", default=os.path.join(HERE, "baseline.json"),
                   help="compare with this earlier run (same size only; default bench/baseline.json)")
    p.add_argument("--write-baseline", action="store_true", help="make this run the baseline (--baseline's path)")
    a = p.parse_args(argv)
    if a.render:
        with open(a.render) as f:
            print(markdown(json.load(f)))
        return 0
    a.ops = [x for x in a.ops.split(",") if x]
    a.workloads = list(a.workloads)
    if a.quick:  # smoke test: every competitor once, numbers not meant to be read
        a.warmup = 0
    if a.repeats is None:
        a.repeats = 1 if a.quick else 3 if a.size == "small" else 5
    if a.micro is None:
        a.micro = a.size == "full" and not a.quick
    if not os.path.exists(a.tseal):
        raise SystemExit(f"bench: {a.tseal} not found (make build)")
    b = Bench(a)
    try:
        doc = b.run()
    finally:
        if not a.keep:
            shutil.rmtree(b.work, ignore_errors=True)
    if os.path.exists(a.baseline):
        with open(a.baseline) as f:
            base = json.load(f)
        if base["meta"]["size"] == a.size:
            doc["baseline"] = compare(doc, base)
    if a.write_baseline:
        with open(a.baseline, "w") as f:
            json.dump(baseline_of(doc), f, indent=1, sort_keys=True)
            f.write("\n")
        log(f"wrote the baseline {os.path.relpath(a.baseline)}")
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(markdown(doc))
    log(f"wrote {os.path.relpath(a.out)} in {doc['meta']['duration_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
