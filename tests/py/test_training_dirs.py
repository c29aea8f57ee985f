"""Training directories (include/tensorseal/training_dir.h, docs/content-hash.md
"Training directories"): a real Hugging Face Trainer checkpoint-N/ and real accelerate
save_state folders (producers/frameworks.py), and a folder holding a DCP directory and
a transformers shard set beside a torch file. `tseal hash|verify|canon DIR`."""
from __future__ import annotations

import hashlib
import os
import pathlib
import pickle
import struct

import pytest
import torch
import torch.distributed.checkpoint as dcp

import tensorseal
from conftest import run_tseal
from producers import frameworks as fw

TAG = b"tensorseal.training-dir.v1"


@pytest.fixture(scope="module", autouse=True)
def _torch_flags_restored():
    det = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(det)


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("training_dirs")
    out = {"hf": fw.make_hf_trainer(root / "hf")}
    for safe in (True, False):
        out[f"acc_{safe}"] = fw.make_accelerate(root / f"acc_{safe}", safe=safe)
    # A folder with a DCP directory and a transformers shard set beside a torch file.
    mixed = root / "mixed"
    (mixed / "model").mkdir(parents=True)
    fw.tiny_bert().save_pretrained(mixed / "model", max_shard_size="20KB")
    dcp.save({"w": torch.arange(12.0).reshape(3, 4), "step": torch.tensor(7)},
             storage_writer=dcp.FileSystemWriter(str(mixed / "optim_dcp")), no_dist=True)
    torch.save({"epoch": 3, "t": torch.ones(2)}, mixed / "extra.pt")
    (mixed / "notes").mkdir()
    (mixed / "notes" / "README.md").write_text("The run's notes (a text file starting with 'T').\n")
    out["mixed"] = mixed
    return out


def lines(r) -> list[tuple[str, str]]:
    assert r.returncode == 0, r.stderr
    return [tuple(line.split("  ", 1)) for line in r.stdout.splitlines()]


def oracle_digest(d: pathlib.Path, checkpoints: dict[str, str]) -> str:
    """docs/content-hash.md "Training directories", computed independently: the listed
    checkpoint digests, and SHA-256 of the bytes of every other file."""
    entries = []
    for p in d.rglob("*"):
        rel = p.relative_to(d).as_posix()
        if not p.is_file() or any(rel == c or rel.startswith(c + "/") for c in checkpoints):
            continue
        if any(rel in members for members in LAYOUT_MEMBERS.get(d.name, {}).values()):
            continue
        entries.append((rel, "file", "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()))
    for rel, digest in checkpoints.items():
        entries.append((rel, "layout" if rel in LAYOUT_MEMBERS.get(d.name, {}) else "checkpoint", digest))
    h = hashlib.sha256(TAG + struct.pack("<Q", len(entries)))
    for rel, kind, digest in sorted(entries, key=lambda e: e[0].encode()):
        for field in (kind.encode(), rel.encode(), digest.encode()):
            h.update(struct.pack("<Q", len(field)) + field)
    return "sha256:" + h.hexdigest()


LAYOUT_MEMBERS: dict[str, dict[str, list[str]]] = {}


@pytest.mark.parametrize("which", ["hf", "acc_True", "acc_False", "mixed"])
def test_hash_lists_each_checkpoint_and_the_directory(produced, which):
    d = produced[which]
    got = lines(run_tseal("hash", d))
    *entries, (dir_digest, dir_name) = got
    assert dir_name == f"{d}/"
    listed = {pathlib.Path(name).relative_to(d).as_posix(): digest for digest, name in entries}
    if which == "hf":
        assert set(listed) == {"model.safetensors", "optimizer.pt", "rng_state.pth", "scheduler.pt",
                               "training_args.bin"}  # config.json, trainer_state.json: files
    if which == "mixed":
        index = next((d / "model").glob("*.index.json")).name
        assert set(listed) == {"extra.pt", "optim_dcp", f"model/{index}"}  # notes/README.md: a file
        shards = sorted(p.name for p in (d / "model").glob("model-*.safetensors"))
        assert len(shards) > 1
        LAYOUT_MEMBERS["mixed"] = {"optim_dcp": [f"optim_dcp/{p.name}" for p in (d / "optim_dcp").iterdir()],
                                   f"model/{index}": [f"model/{s}" for s in shards]}
        # A layout's digest is its content hash: the shard set's equals its merged state's.
        assert listed["optim_dcp"] == tensorseal.hash(d / "optim_dcp")
        assert listed[f"model/{index}"] == tensorseal.hash(d / "model")
    for rel, digest in listed.items():
        if not (d / rel).is_dir() and not rel.endswith(".index.json"):
            assert digest == tensorseal.hash(d / rel), rel
    assert dir_digest == oracle_digest(d, listed)
    # --fast: the same entries under XXH3.
    fast = lines(run_tseal("hash", "--fast", d))
    assert [n for _, n in fast] == [n for _, n in got] and all(x.startswith("xxh3:") for x, _ in fast)


def test_the_directory_digest_is_pinned(tmp_path):
    # Golden bytes: a fixed tensor file and a fixed JSON file.
    d = tmp_path / "run"
    d.mkdir()
    tensorseal.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, d / "w.safetensors")
    (d / "state.json").write_bytes(b'{"step": 1}\n')
    (dir_digest, _), = [x for x in lines(run_tseal("hash", d, tmp_path / "run" / "w.safetensors")) if x[1].endswith("/")]
    assert dir_digest == "sha256:" + GOLDEN_DIR
    assert dir_digest == oracle_digest(d, {"w.safetensors": tensorseal.hash(d / "w.safetensors")})


GOLDEN_DIR = "9178e7ea092507d34fa51a5f0e9e4f444d29dd1702b3b013bfe35d9107d6901b"


def test_canon_dir_resumes_the_trainer_exactly(produced, tmp_path):
    src = produced["hf"]
    out, again = tmp_path / "canon" / "checkpoint-2", tmp_path / "again" / "checkpoint-2"
    for o in (out, again):
        o.parent.mkdir()
        r = run_tseal("canon", src, "-o", o)
        assert r.returncode == 0, r.stderr
    for p in src.iterdir():
        assert (out / p.name).read_bytes() == (again / p.name).read_bytes(), p.name  # deterministic
        if p.suffix == ".json":
            assert (out / p.name).read_bytes() == p.read_bytes()  # copied byte for byte
        else:
            assert run_tseal("canon", "--check", out / p.name).returncode == 0, p.name
    assert (out / "optimizer.pt").read_bytes() != (src / "optimizer.pt").read_bytes()  # rewritten
    assert lines(run_tseal("hash", out))[-1][0] == lines(run_tseal("hash", src))[-1][0]
    losses_o, weights_o = fw.hf_resume(tmp_path / "o", src)
    losses_c, weights_c = fw.hf_resume(tmp_path / "c", out)
    assert len(losses_o) == 3 and losses_c == losses_o
    assert all(torch.equal(weights_c[k], v) for k, v in weights_o.items())


@pytest.mark.parametrize("safe", [True, False])
def test_canon_dir_resumes_accelerate_exactly(produced, tmp_path, safe):
    src = produced[f"acc_{safe}"]
    out = tmp_path / "canon"
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 0, r.stderr
    a, b = fw.acc_resume(src), fw.acc_resume(out)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[3] == b[3]  # RNG draws, loss, lr
    assert all(torch.equal(a[2][k], v) for k, v in b[2].items())
    assert a[4]["step"] == b[4]["step"] == 2 and torch.equal(a[4]["ema"], b[4]["ema"])


def test_canon_dir_keeps_layouts_loadable(produced, tmp_path):
    src = produced["mixed"]
    out = tmp_path / "out"
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 0, r.stderr
    assert (out / "notes" / "README.md").read_bytes() == (src / "notes" / "README.md").read_bytes()
    index = next((src / "model").glob("*.index.json")).name
    assert (out / "model" / index).read_bytes() == (src / "model" / index).read_bytes()
    target = {"w": torch.zeros(3, 4), "step": torch.tensor(0)}
    dcp.load(target, storage_reader=dcp.FileSystemReader(str(out / "optim_dcp")), no_dist=True)
    assert torch.equal(target["w"], torch.arange(12.0).reshape(3, 4)) and int(target["step"]) == 7
    from transformers import BertForSequenceClassification
    a = BertForSequenceClassification.from_pretrained(src / "model").state_dict()
    b = BertForSequenceClassification.from_pretrained(out / "model").state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert lines(run_tseal("hash", out))[-1][0] == lines(run_tseal("hash", src))[-1][0]


def test_verify_dir_checks_every_checkpoint_and_the_digest(produced, tmp_path):
    src = produced["hf"]
    digest = lines(run_tseal("hash", src))[-1][0]
    r = run_tseal("verify", src, "--expect", digest)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == f"OK  {src}/: 5 checkpoint(s), 2 other file(s)"
    r = run_tseal("verify", src, "--expect", "sha256:" + "0" * 64)
    assert r.returncode == 1 and f"CORRUPT  {src}/: digest {digest}" in r.stdout
    # A flipped byte inside a tensor record: that file and the directory are CORRUPT.
    bad = tmp_path / "bad"
    r = run_tseal("canon", src, "-o", bad)
    assert r.returncode == 0, r.stderr
    raw = bytearray((bad / "optimizer.pt").read_bytes())
    raw[len(raw) // 2] ^= 0x40  # inside the Adam moments of the embedding, the largest records
    (bad / "optimizer.pt").write_bytes(bytes(raw))
    r = run_tseal("verify", bad)
    assert r.returncode in (1, 2) and "optimizer.pt" in r.stdout + r.stderr
    assert f"{bad}/: 1 of 5 checkpoint(s) failed" in r.stdout


def test_a_model_directory_is_still_one_checkpoint(produced, tmp_path):
    # save_pretrained without sharding: model.safetensors beside config.json is read as
    # that one checkpoint, as before (one line, no directory digest).
    d = tmp_path / "model"
    fw.tiny_bert().save_pretrained(d)
    got = lines(run_tseal("hash", d))
    assert got == [(tensorseal.hash(d / "model.safetensors"), str(d))]


def test_hostile_and_unsafe_directories_write_nothing(produced, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    torch.save({"w": torch.ones(2)}, src / "model.pt")

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (src / "rng_state.pth").write_bytes(pickle.dumps(Evil(), protocol=2))
    out = tmp_path / "out"
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 1 and "tseal: refused:" in r.stderr and "rng_state.pth" in r.stderr
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())
    # An existing, non-empty target is not replaced.
    (src / "rng_state.pth").unlink()
    torch.save({"x": torch.zeros(1)}, src / "other.pt")
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 2 and "[dir/target]" in r.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    # A symlink inside is refused by every command.
    (src / "link.pt").symlink_to(src / "model.pt")
    for cmd in (["hash", src], ["verify", src], ["canon", src, "-o", tmp_path / "o2"]):
        r = run_tseal(*cmd)
        assert r.returncode == 2 and "[dir/entry]" in r.stderr and "link.pt" in r.stderr, (cmd, r.stderr)
    assert not (tmp_path / "o2").exists()
