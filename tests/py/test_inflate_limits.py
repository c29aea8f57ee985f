"""Bounded cost of compressed archives and of huge headers (docs/limits.md,
`max_inflate` / `max_inflate_ratio`):

  * a 4 MB .npz whose member inflates to 4 GiB (a deflate bomb, made here from zeros
    with zlib) is refused by default by every command that reads data (exit 2, one line
    naming the file, the member, the byte offset, the rule zip/inflate-limit and the
    flags) and by the Python API (LimitError), with a small peak RSS: the declared sizes
    refuse it before anything is inflated;
  * --max-inflate / --max-inflate-ratio and the limits= keyword raise and lower it;
  * a real compressed archive (zipfile ZIP_DEFLATED of np.save images, as
    np.savez_compressed writes them) larger than max_inflate passes by default, and its
    members stream: `tseal hash`, `inspect` and `verify` hold a peak RSS far below the
    member's size and give the digests of its stored twin (np.savez);
  * a safetensors file of 200,000 tensors (safetensors.torch.save_file) is inspected and
    hashed in at most 256 MiB.

Peak RSS is the child's own ru_maxrss, taken by a small launcher (plain Python, no
torch): a process forked from pytest would start from pytest's high-water mark. No
assertion is on time (bench/run.py times the refusal and the streamed hash).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import tensorseal
from conftest import tseal_bin

MiB = 1 << 20
GiB = 1 << 30

LAUNCH = r"""
import json, os, sys
out, err, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
print(json.dumps({"rc": rc, "rss_kib": ru.ru_maxrss}))
"""


def run(tmp_path, *args):
    """`tseal args`: (exit status, stdout, stderr, peak RSS in MiB of tseal itself)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    r = subprocess.run([sys.executable, "-S", "-c", LAUNCH, str(out), str(err), tseal_bin(), *map(str, args)],
                       capture_output=True, text=True, check=True)
    res = json.loads(r.stdout)
    return res["rc"], out.read_text(errors="replace"), err.read_text(errors="replace"), res["rss_kib"] / 1024


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "producers"))
from deflate_bomb import write_bomb  # noqa: E402


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    offset = write_bomb(path, 4 * GiB)
    with zipfile.ZipFile(path) as z:  # python's zipfile reads it as a 4 GiB member
        (info,) = z.infolist()
        assert info.file_size == 4 * GiB + 128 and info.compress_type == zipfile.ZIP_DEFLATED
    assert path.stat().st_size < 5 * MiB
    return path, offset


@pytest.mark.parametrize("cmd", ["inspect", "hash", "verify", "canon", "convert"])
def test_bomb_is_refused_by_default_with_bounded_memory(bomb, cmd, tmp_path):
    path, offset = bomb
    extra = {"canon": ["-o", tmp_path / "out.npz"], "convert": [tmp_path / "out.safetensors"]}.get(cmd, [])
    rc, out, err, rss = run(tmp_path, cmd, path, *extra)
    text = out + err
    assert rc in (1, 2), (rc, text)
    assert "[zip/inflate-limit]" in text, text
    for part in (str(path), f"byte {offset}", "'w.npy'", "--max-inflate 268435456", "--max-inflate-ratio 100"):
        assert part in text, (part, text)
    assert rss < 64, (cmd, rss)  # 4 GiB before the limit
    assert not (tmp_path / "out.npz").exists() and not (tmp_path / "out.safetensors").exists()


def test_bomb_is_refused_by_the_python_api(bomb):
    path, _ = bomb
    for call in (tensorseal.load, tensorseal.hash, tensorseal.inspect, tensorseal.read):
        with pytest.raises(tensorseal.LimitError, match=r"\[zip/inflate-limit\]") as e:
            call(path)
        assert e.value.rule == "zip/inflate-limit"


# ---- the flags and the keyword ---------------------------------------------------------

@pytest.fixture(scope="module")
def zeros_npz(tmp_path_factory):
    """np.savez_compressed of 8 MiB of zeros and a small array: ~1000:1."""
    path = tmp_path_factory.mktemp("zeros") / "zeros.npz"
    arrays = {"mask": np.zeros((2048, 1024), np.float32), "bias": np.arange(10, dtype=np.int64)}
    np.savez_compressed(path, **arrays)
    return path, arrays


def test_max_inflate_flags_lower_and_raise_the_limit(zeros_npz, tmp_path):
    path, _ = zeros_npz
    assert run(tmp_path, "inspect", path)[0] == 0  # 8 MiB: under the default max_inflate
    rc, _, err, _ = run(tmp_path, "inspect", "--max-inflate", MiB, path)
    assert rc == 2 and err.count("\n") == 1 and "[zip/inflate-limit]" in err and "'mask.npy'" in err, err
    assert run(tmp_path, "hash", "--max-inflate", MiB, "--max-inflate-ratio", 1032, path)[0] == 0
    rc, _, err, _ = run(tmp_path, "hash", "--max-inflate", 8 * MiB, "--max-inflate-ratio", 0, path)
    assert rc == 2 and "[zip/inflate-limit]" in err, err  # ratio 0: max_inflate is a hard cap
    helptext = subprocess.run([tseal_bin(), "inspect", "--help"], capture_output=True, text=True).stdout
    assert "--max-inflate" in helptext and "--max-inflate-ratio" in helptext


def test_limits_keyword(zeros_npz):
    path, arrays = zeros_npz
    assert tensorseal.Limits.defaults()["max_inflate"] == 256 * MiB
    assert tensorseal.Limits.defaults()["max_inflate_ratio"] == 100
    with pytest.raises(tensorseal.LimitError, match=r"\[zip/inflate-limit\]"):
        tensorseal.load(path, limits={"max_inflate": MiB})
    with pytest.raises(tensorseal.LimitError, match=r"\[zip/inflate-limit\]"):
        tensorseal.hash(path, limits=tensorseal.Limits(max_inflate=MiB))
    got = tensorseal.load(path, limits=tensorseal.Limits(max_inflate=MiB, max_inflate_ratio=1032))
    for k, a in arrays.items():
        np.testing.assert_array_equal(np.asarray(got[k]), a)
    # One buffer of a member (Python's arrays) is an allocation: under max_alloc.
    with pytest.raises(tensorseal.LimitError, match=r"\[zip/entry-too-large\]"):
        tensorseal.load(path, limits={"max_alloc": MiB})
    assert tensorseal.hash(path, limits={"max_alloc": MiB}) == tensorseal.hash(path)  # streamed: no buffer


# ---- a real large compressed archive: streamed ----------------------------------------

@pytest.fixture(scope="module")
def large_npz(tmp_path_factory):
    """160 MiB of float32 weights (float16-rounded normal values, ~1.5:1), DEFLATED by
    zipfile as np.savez_compressed writes members (compresslevel 1 to keep set-up
    short), and its stored twin from np.savez."""
    d = tmp_path_factory.mktemp("large")
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(40 * MiB, dtype=np.float32) * 0.02).astype(np.float16).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    deflated = d / "weights.npz"
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for key, a in (("w", w), ("b", b)):
            with z.open(f"{key}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    stored = d / "weights_stored.npz"
    np.savez(stored, w=w, b=b)
    return deflated, stored, w.nbytes


def test_large_compressed_archive_streams_in_bounded_memory(large_npz, tmp_path):
    deflated, stored, nbytes = large_npz
    assert nbytes > tensorseal.Limits.defaults()["max_inflate"] / 2
    with zipfile.ZipFile(deflated) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
    rc, out, err, rss = run(tmp_path, "hash", deflated)
    assert rc == 0, err
    assert out.split()[0] == run(tmp_path, "hash", stored)[1].split()[0]
    assert rss < 64, rss  # the member is 160 MiB
    rc, out, err, rss = run(tmp_path, "inspect", "--json", deflated)
    assert rc == 0, err
    twin = json.loads(run(tmp_path, "inspect", "--json", stored)[1])
    mine = json.loads(out)
    assert mine["content_hash"] == twin["content_hash"] and mine["tensors"] == twin["tensors"]
    assert rss < 64, rss
    rc, out, err, rss = run(tmp_path, "verify", deflated)
    assert rc == 0, out + err
    assert rss < 64, rss


def test_large_compressed_archive_past_max_inflate(tmp_path):
    """Past max_inflate, an archive passes by default while it inflates at most 100 times
    its compressed size; a zero-filled one (about 1000:1) needs the limit raised."""
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, z=np.zeros(300 * MiB // 4, np.float32))
    rc, _, err, rss = run(tmp_path, "hash", path)
    assert rc == 2 and "[zip/inflate-limit]" in err and rss < 64, (err, rss)
    rc, out, err, rss = run(tmp_path, "hash", "--max-inflate", GiB, path)
    assert rc == 0 and rss < 64, (err, rss)
    assert out.split()[0] == tensorseal.hash(path, limits={"max_inflate": GiB})


# ---- a safetensors header of 200,000 tensors ---------------------------------------------

def test_200k_tensor_safetensors_header_in_256_mib(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    path = tmp_path / "many.safetensors"
    save_file({f"model.layers.{i}.weight": torch.full((2,), float(i)) for i in range(200_000)}, str(path))
    for args in (["inspect", path], ["inspect", "--json", path], ["hash", path]):
        rc, out, err, rss = run(tmp_path, *args)
        assert rc == 0, err
        assert rss <= 256, (args, rss)
    assert out.split()[0] == tensorseal.hash(path)
