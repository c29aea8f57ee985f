"""Crash-safe writes: every write path (tseal convert, canon -o, canon --in-place,
tensorseal.save) replaces its target atomically.

* SIGKILL at random moments during a large write: the target always holds the complete
  old file or the complete new file (sha256), never a torn one; at most the killed
  writer's own temp file is left, and the next writer of that target removes it as soon
  as it opens its own temp file (a writer killed while still reading its input has not
  touched anything yet).
* Out of space (a 1 MiB tmpfs, and RLIMIT_FSIZE which needs no privileges) and a
  read-only directory: exit 2 with a one-line error naming the cause, the old file
  intact, no temp file left.

Rounds: TENSORSEAL_KILL_ROUNDS (default 100 for `tseal convert`, a quarter of that for
the other paths). Each round prints nothing; the summary of outcomes goes to stdout
(`pytest -s`) and the assertions require that kills landed before, during and after
the write.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import random
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import tseal_bin

ROUNDS = int(os.environ.get("TENSORSEAL_KILL_ROUNDS", "100"))
TEMP_MARK = ".tseal-tmp."
PY = sys.executable


def sha(p: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def temps(d: pathlib.Path) -> list:
    return sorted(p.name for p in d.iterdir() if TEMP_MARK in p.name)


def replace_with(target: pathlib.Path, src: pathlib.Path) -> None:
    """Puts src's bytes at target (itself atomically, so a reset is never torn)."""
    tmp = target.with_name(target.name + ".reset")
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        while block := fi.read(1 << 22):
            fo.write(block)
    os.replace(tmp, target)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict:
    """A ~200 MB safetensors file (input), its canonical .pt conversion, a small
    unrelated old .pt, and a ~64 MB non-canonical torch.save file for in-place canon."""
    d = tmp_path_factory.mktemp("big")
    from safetensors.numpy import save_file
    row = np.arange(10 * 1024, dtype=np.float32)
    tensors = {f"layer{i}.weight": np.ascontiguousarray(np.broadcast_to(row + i, (1024, row.size)))
               for i in range(5)}
    src = d / "big.safetensors"
    save_file(tensors, str(src))
    assert src.stat().st_size > 200_000_000
    new_pt = d / "expected.pt"
    subprocess.run([tseal_bin(), "convert", str(src), str(new_pt)], check=True)
    old_pt = d / "old.pt"
    subprocess.run([PY, "-c", "import sys, torch; torch.save({'old': torch.ones(3)}, sys.argv[1])", str(old_pt)],
                   check=True)
    torch_pt = d / "torch_save.pt"
    subprocess.run([PY, "-c", "import sys, torch; torch.save({f'w{i}': torch.arange(4 << 20, dtype=torch.float32) + i"
                    " for i in range(4)}, sys.argv[1])", str(torch_pt)], check=True)
    canon_pt = d / "torch_canon.pt"
    subprocess.run([tseal_bin(), "canon", str(torch_pt), "-o", str(canon_pt)], check=True)
    return {"src": src, "new": new_pt, "old": old_pt, "torch": torch_pt, "canon": canon_pt}


def timed(cmd) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.monotonic() - t0


def kill_cli(cmd):
    """One round for a CLI writer: start it, SIGKILL it after `delay` s, its exit status."""
    def run(delay: float) -> int:
        p = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        rc = p.wait()
        assert rc in (0, -signal.SIGKILL), f"writer exited {rc}: {p.stderr.read()}"
        return rc
    return run


def kill_rounds(work: pathlib.Path, target: pathlib.Path, old: pathlib.Path, new_hash: str, run_round, rounds: int,
                duration: float) -> dict:
    """`rounds` times: reset `target` to `old`, run a writer of `target` and SIGKILL it
    after a random delay in [0, 1.2 * duration]; then check the target and temp files.
    `duration` adapts (shorter after a writer finished before its kill, longer after a
    kill) so that most kills land while the writer runs, whatever the machine's load."""
    old_hash = sha(old)
    rng = random.Random(20240611)
    seen = {"old": 0, "new": 0, "mid_write": 0, "before_write": 0, "finished": 0}
    for i in range(rounds):
        replace_with(target, old)
        before = set(temps(work))
        assert len(before) <= 1, f"round {i}: temp files pile up: {before}"
        if run_round(rng.uniform(0, 1.2 * duration)) == 0:
            seen["finished"] += 1
            duration *= 0.85  # machine load varies: keep most kills inside the write
        else:
            duration *= 1.05
        h = sha(target)
        assert h in (old_hash, new_hash), f"round {i}: target is torn (sha256 {h})"
        seen["old" if h == old_hash else "new"] += 1
        left = set(temps(work))
        own = left - before
        assert len(own) <= 1, f"round {i}: {own}"
        if own or h == new_hash:
            # This round's writer reached its temp file: opening it removed the previous
            # round's dead writer's temp; only its own may remain.
            assert not (before & left), f"round {i}: stale temp not removed: {before & left}"
        else:
            # Killed before it opened its temp (still reading the input, or between
            # removing stale temps and creating its own): it added nothing; a stale
            # temp it did not get to waits for the next writer.
            assert left <= before, f"round {i}: {before} -> {left}"
            seen["before_write"] += 1
        assert len(left) <= 1, f"round {i}: {left}"
        if own:
            seen["mid_write"] += 1
    return seen


def check_outcomes(name: str, seen: dict, rounds: int) -> None:
    print(f"\n{name}: {rounds} SIGKILLs -> {seen}")
    assert seen["old"] >= 1 and seen["new"] >= 1, seen
    assert seen["mid_write"] >= max(1, rounds // 5), f"too few kills landed during the write: {seen}"


def final_write_cleans(work: pathlib.Path, cmd) -> None:
    subprocess.run(cmd, check=True, capture_output=True)
    assert temps(work) == [], "a successful write must remove dead writers' temp files"


def test_convert_sigkill(big, tmp_path):
    target = tmp_path / "out.pt"
    cmd = [tseal_bin(), "convert", str(big["src"]), str(target)]
    replace_with(target, big["old"])
    duration = max(timed(cmd) for _ in range(2))
    seen = kill_rounds(tmp_path, target, big["old"], sha(big["new"]),
                       kill_cli(cmd), ROUNDS, duration)
    check_outcomes(f"tseal convert ({duration:.2f} s per write)", seen, ROUNDS)
    final_write_cleans(tmp_path, cmd)
    assert sha(target) == sha(big["new"])


def test_canon_output_sigkill(big, tmp_path):
    target = tmp_path / "out.safetensors"
    cmd = [tseal_bin(), "canon", str(big["src"]), "-o", str(target)]
    old = tmp_path / "old.safetensors"
    subprocess.run([tseal_bin(), "convert", str(big["old"]), str(old)], check=True)
    replace_with(target, old)
    duration = max(timed(cmd) for _ in range(2))
    n = max(4, ROUNDS // 4)
    seen = kill_rounds(tmp_path, target, old, sha(big["src"]), kill_cli(cmd),
                       n, duration)
    check_outcomes(f"tseal canon -o ({duration:.2f} s per write)", seen, n)
    final_write_cleans(tmp_path, cmd)


def test_canon_in_place_sigkill(big, tmp_path):
    target = tmp_path / "model.pt"
    cmd = [tseal_bin(), "canon", "--in-place", str(target)]
    replace_with(target, big["torch"])
    duration = max(timed(cmd) for _ in range(1))
    n = max(4, ROUNDS // 4)
    seen = kill_rounds(tmp_path, target, big["torch"], sha(big["canon"]),
                       kill_cli(cmd), n, duration)
    check_outcomes(f"tseal canon --in-place ({duration:.2f} s per write)", seen, n)
    replace_with(target, big["torch"])
    final_write_cleans(tmp_path, cmd)
    assert sha(target) == sha(big["canon"])


# A helper process that loads the input once, then per round forks a child that runs
# tensorseal.save and SIGKILLs it after the delay the test sends ("<delay>\n" -> "<rc>\n";
# "-1" lets the child finish and reports how long the save took).
SAVER = r"""
import os, signal, sys, time, tensorseal
src, dst = sys.argv[1], sys.argv[2]
obj = tensorseal.load(src, framework="numpy")
print("ready", flush=True)
for line in sys.stdin:
    delay = float(line)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            tensorseal.save(obj, dst, format="torch-zip")
        finally:
            os._exit(0)
    if delay >= 0:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    _, st = os.waitpid(pid, 0)
    rc = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
    print(rc if delay >= 0 else time.monotonic() - t0, flush=True)
"""


def test_python_save_sigkill(big, tmp_path):
    target = tmp_path / "saved.pt"
    replace_with(target, big["old"])
    p = subprocess.Popen([PY, "-c", SAVER, str(big["src"]), str(target)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"

        def ask(delay: float) -> float:
            p.stdin.write(f"{delay}\n")
            p.stdin.flush()
            return float(p.stdout.readline())

        duration = ask(-1)
        new_hash = sha(target)
        assert new_hash != sha(big["old"])
        n = max(4, ROUNDS // 4)
        seen = kill_rounds(tmp_path, target, big["old"], new_hash, lambda d: int(ask(d)), n, duration)
        check_outcomes(f"tensorseal.save ({duration:.2f} s per write)", seen, n)
    finally:
        p.stdin.close()
        p.wait(timeout=60)


def test_live_writers_temp_is_left_alone(big, tmp_path):
    """A temp file whose pid is alive belongs to a running writer: never removed."""
    target = tmp_path / "x.safetensors"
    live = tmp_path / f".x.safetensors{TEMP_MARK}{os.getpid()}.12345"
    dead_pid = subprocess.Popen(["true"]).pid
    time.sleep(0.2)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(dead_pid, 0)
    dead = tmp_path / f".x.safetensors{TEMP_MARK}{dead_pid}.6789"
    other = tmp_path / f".y.safetensors{TEMP_MARK}{dead_pid}.6789"  # another target's
    for p in (live, dead, other):
        p.write_bytes(b"partial")
    subprocess.run([tseal_bin(), "convert", str(big["old"]), str(target)], check=True)
    assert live.exists() and other.exists() and not dead.exists()


# ---- out of space / read-only ----------------------------------------------------

def can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    d = pathlib.Path("/tmp") / f"tseal-mount-probe-{os.getpid()}"
    d.mkdir(exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(d)])
    d.rmdir()
    return ok


@contextlib.contextmanager
def tmpfs(d: pathlib.Path, size: str):
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)])


@pytest.fixture(scope="module")
def medium(tmp_path_factory) -> pathlib.Path:
    """A 4 MiB safetensors file: bigger than the 1 MiB tmpfs."""
    d = tmp_path_factory.mktemp("medium")
    from safetensors.numpy import save_file
    p = d / "m.safetensors"
    save_file({"w": np.arange(1 << 20, dtype=np.float32)}, str(p))
    return p


def assert_failed_cleanly(out, old: pathlib.Path, old_hash: str, words) -> None:
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tseal: error:"), out.stderr
    assert any(w in lines[0] for w in words), lines[0]
    assert sha(old) == old_hash, "the old file must survive a failed write"
    assert temps(old.parent) == [], temps(old.parent)


@pytest.mark.skipif(not can_mount(), reason="needs root and tmpfs mounts (RLIMIT_FSIZE variant runs anyway)")
def test_enospc_tmpfs(medium, big, tmp_path):
    with tmpfs(tmp_path / "small", "1m") as d:
        target = d / "out.pt"
        replace_with(target, big["old"])
        h = sha(target)
        for cmd in ([tseal_bin(), "convert", str(medium), str(target)],
                    [tseal_bin(), "canon", str(medium), "-o", str(d / "out.safetensors")]):
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert_failed_cleanly(out, target, h, ["No space left on device"])
        assert not (d / "out.safetensors").exists()
        # In place: the file itself fits, its rewrite (a second copy) does not.
        (d / "filler").write_bytes(b"\0" * (600 << 10))
        inplace = d / "m.pt"
        subprocess.run([PY, "-c", "import sys, torch; torch.save({'w': torch.arange(80_000, dtype=torch.float32)},"
                        " sys.argv[1])", str(inplace)], check=True)
        hi = sha(inplace)
        out = subprocess.run([tseal_bin(), "canon", "--in-place", str(inplace)], capture_output=True, text=True)
        assert_failed_cleanly(out, inplace, hi, ["No space left on device"])
        # The Python writer raises (an exception, not a crash) and leaves the old file.
        code = ("import sys, numpy as np, tensorseal\n"
                "try:\n  tensorseal.save({'w': np.zeros(1 << 20, np.float32)}, sys.argv[1])\n"
                "except Exception as e:\n  print(type(e).__name__, e); sys.exit(3)\n")
        r = subprocess.run([PY, "-c", code, str(target)], capture_output=True, text=True)
        assert r.returncode == 3 and "No space left on device" in r.stdout, (r.returncode, r.stdout, r.stderr)
        assert sha(target) == h and temps(d) == []
        # Space back: the same write succeeds and leaves no temp.
        (d / "filler").unlink()
        subprocess.run([tseal_bin(), "convert", str(big["old"]), str(d / "again.pt")], check=True)
        assert temps(d) == []


def test_file_size_limit(medium, big, tmp_path):
    """RLIMIT_FSIZE makes write() fail (EFBIG) partway, like a full disk: no privileges needed."""
    target = tmp_path / "out.pt"
    replace_with(target, big["old"])
    h = sha(target)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    for cmd in ([tseal_bin(), "convert", str(medium), str(target)],
                [tseal_bin(), "canon", "--in-place", str(target)]):
        if cmd[1] == "canon":  # make the in-place input too big to rewrite under the limit
            subprocess.run([tseal_bin(), "convert", str(medium), str(target)], check=True)
            h = sha(target)
        out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit, timeout=60)
        assert_failed_cleanly(out, target, h, ["File too large", "write failed"])


@contextlib.contextmanager
def read_only_dir(d: pathlib.Path):
    """A directory nobody can create files in: chmod 555 for normal users; as root
    (which ignores permissions) a tmpfs remounted read-only."""
    if os.geteuid() != 0:
        d.mkdir()
        yield d, lambda: d.chmod(0o555)
        d.chmod(0o755)
        return
    if not can_mount():
        pytest.skip("root without mount rights: no way to make a read-only directory")
    with tmpfs(d, "16m"):
        yield d, lambda: subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)


def test_read_only_directory(big, medium, tmp_path):
    with read_only_dir(tmp_path / "ro") as (d, freeze):
        target = d / "out.pt"
        replace_with(target, big["old"])
        freeze()
        h = sha(target)
        for cmd in ([tseal_bin(), "convert", str(medium), str(target)],
                    [tseal_bin(), "canon", "--in-place", str(target)],
                    [tseal_bin(), "canon", str(medium), "-o", str(d / "new.safetensors")]):
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert_failed_cleanly(out, target, h, ["Read-only file system", "Permission denied"])
            assert "temp file" in out.stderr
        assert not (d / "new.safetensors").exists()
