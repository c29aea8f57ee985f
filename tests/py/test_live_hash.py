"""tensorseal.dcp.content_hash, the collective content hash of live sharded state
(docs/content-hash.md "Sharded state"), in real torchrun jobs (gloo, CPU):
producers/live_hash_job.py at 2 and 4 ranks. The digest every rank returns must equal
`tseal hash` of every layout saved from that state: DCP by torch's writer and by
tensorseal's, dcp_to_torch_save, the full state as one .pt, the flat tensors as one
.safetensors and as huggingface_hub shards; FSDP2 and FSDP1 model + optimizer state, a
2x2 (dp x tp) mesh; replicas that differ and a rank that raises give every rank an error."""
from __future__ import annotations

import json
import pathlib

import pytest
import torch

import tensorseal
import tensorseal.dcp
from conftest import run_ranks, run_tseal

JOB = pathlib.Path(__file__).parent / "producers" / "live_hash_job.py"


def _job(out: pathlib.Path, world: int) -> list[dict]:
    out.mkdir(parents=True)
    run_ranks(JOB, out, world)  # retries a gloo abort (conftest.py)
    return [json.loads((out / f"result_{k}.json").read_text()) for k in range(world)]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[int, tuple[pathlib.Path, list[dict]]]:
    root = tmp_path_factory.mktemp("live_hash")
    return {w: (root / f"w{w}", _job(root / f"w{w}", w)) for w in (2, 4)}


def tseal_hash(path: pathlib.Path, *flags: str) -> str:
    r = run_tseal("hash", *flags, path)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


def one(results: list[dict], key: str) -> str:
    values = {r[key] for r in results}
    assert len(values) == 1, f"ranks returned different {key}: {values}"
    return values.pop()


@pytest.mark.parametrize("world", [2, 4])
def test_live_hash_equals_every_saved_layout(jobs, world):
    out, results = jobs[world]
    live = one(results, "sha256")
    for layout in ("stock", "ts", "stock.pt", "full.pt"):
        assert tseal_hash(out / layout) == live, layout
    assert one(results, "small_rounds") == live  # 1 MiB rounds: many exchanges, one digest
    assert one(results, "again") == live         # after the failed calls below
    fast = one(results, "xxh3")
    assert fast.startswith("xxh3:") and tseal_hash(out / "ts", "--fast") == fast
    assert tseal_hash(out / "stock", "--fast") == fast
    # tensorseal's writer records the hash in its manifest, made from its own digests.
    assert json.loads((out / "ts" / ".tensorseal.json").read_text())["content_hash"] == fast
    flat = one(results, "flat")
    assert tseal_hash(out / "flat.safetensors") == flat
    assert tseal_hash(out / "hf") == flat and len(list((out / "hf").glob("*.safetensors"))) > 1


def test_live_hash_does_not_depend_on_the_world_size(jobs):
    assert one(jobs[2][1], "state_only") == one(jobs[4][1], "state_only")


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp1_sharded_tensors(jobs, world):
    out, results = jobs[world]
    assert all(r["fsdp1_sharded_tensors"] >= 2 for r in results)
    assert tseal_hash(out / "fsdp1") == one(results, "fsdp1")


def test_two_dimensional_mesh_fsdp_times_tp(jobs):
    out, results = jobs[4]
    live = one(results, "mesh2")
    assert tseal_hash(out / "mesh2") == live
    assert tseal_hash(out / "mesh2.pt") == live


@pytest.mark.parametrize("world", [2, 4])
def test_verify_expect(jobs, world):
    out, results = jobs[world]
    live = one(results, "sha256")
    for layout in ("ts", "stock", "full.pt"):
        r = run_tseal("verify", "--expect", live, out / layout)
        assert r.returncode == 0, r.stdout + r.stderr
    wrong = "sha256:" + ("0" * 64)
    r = run_tseal("verify", "--expect", wrong, out / "ts")
    assert r.returncode == 1 and "verify/expect-mismatch" in r.stdout and live in r.stdout, r.stdout
    r = run_tseal("verify", "--expect", one(results, "xxh3"), out / "stock")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_tseal("verify", "--expect", "sha256:1234", out / "ts")
    assert r.returncode == 2 and "not a content hash" in r.stderr


@pytest.mark.parametrize("world", [2, 4])
def test_replicas_that_differ_raise_on_every_rank(jobs, world):
    _, results = jobs[world]
    others = ", ".join(str(k) for k in range(world) if k != 1)
    last = ", ".join(str(k) for k in range(world - 1))
    for r in results:
        e = r["diverged_dtensor"]
        assert e["type"] == "CorruptFileError" and "dcp/replica-mismatch" in e["message"]
        assert "'w.rep'" in e["message"] and f"{'ranks' if world > 2 else 'rank'} {others} / rank 1" in e["message"]
        e = r["diverged_plain"]
        assert "'t'" in e["message"] and f"/ rank {world - 1}" in e["message"] and last in e["message"]
        e = r["diverged_value"]
        assert "the value 'lr' differs" in e["message"] and e["is_tensorseal"]


@pytest.mark.parametrize("world", [2, 4])
def test_one_rank_raising_reaches_every_rank(jobs, world):
    _, results = jobs[world]
    for r in results:
        e = r["one_rank_raises"]
        assert e["type"] == "InvalidArgumentError" and "builtins.function" in e["message"]
        assert e["message"].startswith("rank 1 failed: ") == (r["rank"] != 1)
        assert e["seconds"] < 60


def test_hash_of_sharded_state_is_refused(jobs):
    for r in jobs[2][1]:
        for key, cls in (("hash_refused", "DTensor"), ("hash_refused_sharded_tensor", "ShardedTensor")):
            e = r[key]
            assert e["type"] == "InvalidArgumentError" and "tensorseal.dcp.content_hash" in e["message"], e
            assert f"a {cls} holds only this rank's part" in e["message"]


def test_single_process_content_hash_is_dcps_reading():
    """Without torch.distributed: the state as one rank, as DCP reads it back (plain
    tensors; int keys become str, as DCP's flatten_state_dict makes them)."""
    w = torch.nn.Parameter(torch.randn(300, 1000))
    state = {"model": {"w": w, "b": torch.arange(5)}, "opt": {3: "x"}, "step": 2, "pair": (1, torch.ones(2))}
    want = tensorseal.hash({"model": {"w": w.detach(), "b": torch.arange(5)}, "opt": {"3": "x"}, "step": 2,
                            "pair": (1, torch.ones(2))})
    assert tensorseal.dcp.content_hash(state) == want
    with pytest.raises(tensorseal.InvalidArgumentError):
        tensorseal.dcp.content_hash(state, algo="md5")
    with pytest.raises(tensorseal.UnsupportedError, match="meta device"):
        tensorseal.dcp.content_hash({"m": torch.empty(3, device="meta")})


def test_manifest_hash_is_checked_by_verify(jobs, tmp_path):
    out, results = jobs[2]
    d = tmp_path / "ts"
    import shutil
    shutil.copytree(out / "ts", d)
    r = run_tseal("verify", "--json", d)
    assert r.returncode == 0 and json.loads(r.stdout)["files"][0]["content_hash_checked"] is True
    manifest = json.loads((d / ".tensorseal.json").read_text())
    manifest["content_hash"] = "xxh3:" + "0" * 32
    (d / ".tensorseal.json").write_text(json.dumps(manifest, indent=1) + "\n")
    r = run_tseal("verify", d)
    assert r.returncode == 1 and "verify/content-hash-mismatch" in r.stdout, r.stdout + r.stderr
    manifest["content_hash"] = "sha1:abc"
    (d / ".tensorseal.json").write_text(json.dumps(manifest, indent=1) + "\n")
    r = run_tseal("verify", d)
    assert r.returncode != 0 and "dcp/manifest" in r.stdout + r.stderr


@pytest.mark.parametrize("world", [2, 4])
def test_collective_verify(jobs, world):
    """tensorseal.dcp.verify: the ranks split the items and return the content hash;
    a flipped bit in a chunk (tensorseal's manifest checksum, torch's zip CRC) or a
    missing directory raises on every rank."""
    _, results = jobs[world]
    live = one(results, "sha256")
    assert one(results, "verify_ts") == live and one(results, "verify_stock") == live
    assert one(results, "verify_fast") == one(results, "xxh3")
    for key, rule in (("verify_ts_bad", "dcp/checksum"), ("verify_stock_bad", "zip/crc-mismatch"),
                      ("verify_missing", "dcp/storage-missing")):
        failed = set()
        for r in results:
            e = r[key]
            assert e["type"] == "CorruptFileError" and f"[{rule}]" in e["message"], e
            if e["message"].startswith("rank "):
                failed.add(int(e["message"].split()[1]))
        assert len(failed) <= 1  # the others name the one rank whose items broke


def test_collective_verify_single_process(jobs):
    out, results = jobs[2]
    assert tensorseal.dcp.verify(out / "ts") == one(results, "sha256")
    assert tensorseal.dcp.verify(out / "stock", algo="xxh3") == one(results, "xxh3")
