"""Canonical layouts whose readers keep no dict order (safetensors, hf-shards, DCP) are a
function of the content and the user metadata (docs/content-hash.md "Canonical layouts"):
one state dict, built with its keys in another insertion order for every source (torch.save
zip and legacy, safetensors, huggingface_hub and tensorseal shards, .npz, DCP saved by real
torch.distributed.checkpoint with 1 and 4 ranks), converts to the same bytes in every file
of a safetensors file, a shard directory of several shards and DCP directories of 2 and 4
ranks. A .pt keeps its dict order: torch.load gives it back."""
from __future__ import annotations

import json
import pathlib
import random

import numpy as np
import pytest
import torch

huggingface_hub = pytest.importorskip("huggingface_hub")
import safetensors.torch  # noqa: E402

import tensorseal  # noqa: E402
from conftest import run_ranks, run_tseal  # noqa: E402

PRODUCER = pathlib.Path(__file__).parent / "producers" / "dcp_order.py"

# Names whose bytewise order differs from a natural one ("10" < "2", "H" < "h", "." < "_");
# 2-d float32 tensors are DTensor Shard(0) in the 4-rank DCP save (7 and 40 rows: uneven).
SPECS = [("embed.weight", torch.float32, (40, 16)),  # 2560 bytes > 2KB: a shard of its own
         ("layers.10.attn.weight", torch.float32, (16, 16)), ("layers.2.attn.weight", torch.float32, (16, 16)),
         ("layers.10.attn.bias", torch.float16, (16,)), ("layers.2.attn.bias", torch.float16, (16,)),
         ("layers.2.norm", torch.float64, (16,)), ("head.weight", torch.float32, (7, 16)),
         ("head.bias", torch.float32, (7,)), ("Head.scale", torch.float64, (3,)), ("head_steps", torch.int64, (9,)),
         ("mask", torch.bool, (5,)), ("codes", torch.int8, (11,)), ("scalar", torch.float32, ()),
         ("empty", torch.int32, (0, 4))]
KEYS = [k for k, _, _ in SPECS]
SHARD = "2KB"

# Source -> how it is written; each gets its own key order (ORDERS[i] for the i-th).
SOURCES = ["zip.pt", "legacy.pt", "plain.safetensors", "tseal_shards", "arrays.npz", "dcp_1", "dcp_4", "hub_shards",
           "meta.safetensors"]
# Sources whose files carry user metadata: huggingface_hub writes {"format": "pt"} in every
# shard, and so does this safetensors file. It is content of safetensors and shards
# outputs (each shard keeps it); DCP keeps none.
WITH_METADATA = {"hub_shards", "meta.safetensors"}
TARGETS = {"safetensors": ["model.safetensors"], "shards": ["shards", "--shards", SHARD],
           "dcp_2": ["dcp", "--world-size", "2"], "dcp_4": ["dcp", "--world-size", "4"]}


def _orders() -> list[list[str]]:
    out = []
    for seed in range(len(SOURCES)):
        keys = list(KEYS)
        random.Random(seed).shuffle(keys)
        out.append(keys)
    assert len({tuple(o) for o in out} | {tuple(sorted(KEYS))}) == len(out) + 1
    return out


ORDERS = _orders()


def state(order: list[str]) -> dict:
    g = torch.Generator().manual_seed(31)
    made = {}
    for name, dtype, shape in SPECS:  # values never depend on the order
        raw = torch.randn(shape, generator=g, dtype=torch.float64) * 8
        made[name] = (raw > 0) if dtype == torch.bool else raw.to(dtype)
    return {k: made[k].clone() for k in order}


def contents(path: pathlib.Path) -> dict[str, bytes]:
    """Every file's bytes, by its path under `path` ("." for a file)."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def tseal_ok(*args) -> None:
    r = run_tseal(*args)
    assert r.returncode == 0, r.stderr


def tseal_hash(path) -> str:
    r = run_tseal("hash", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("order_sources")
    sd = {name: state(order) for name, order in zip(SOURCES, ORDERS)}
    p = {name: root / name for name in SOURCES}
    torch.save(sd["zip.pt"], p["zip.pt"])
    torch.save(sd["legacy.pt"], p["legacy.pt"], _use_new_zipfile_serialization=False)
    safetensors.torch.save_file(sd["plain.safetensors"], p["plain.safetensors"])
    safetensors.torch.save_file(sd["meta.safetensors"], p["meta.safetensors"], metadata={"format": "pt"})
    tensorseal.save(sd["tseal_shards"], p["tseal_shards"], max_shard_size=SHARD)
    p["hub_shards"].mkdir()
    huggingface_hub.save_torch_state_dict(sd["hub_shards"], p["hub_shards"], max_shard_size=SHARD)
    np.savez(p["arrays.npz"], **{k: v.numpy() for k, v in sd["arrays.npz"].items()})
    for world in (1, 4):
        name = f"dcp_{world}"
        torch.save(sd[name], root / f"{name}.state.pt")
        p[name].mkdir()
        run_ranks(PRODUCER, p[name], world, str(root / f"{name}.state.pt"))
    return p


@pytest.fixture(scope="module")
def converted(sources, tmp_path_factory) -> dict[tuple[str, str], pathlib.Path]:
    root = tmp_path_factory.mktemp("order_converted")
    out = {}
    for src, path in sources.items():
        for target, (name, *flags) in TARGETS.items():
            dest = root / src.replace(".", "_") / target / name
            dest.parent.mkdir(parents=True)
            tseal_ok("convert", path, dest, *flags)
            out[src, target] = dest
    return out


def test_sources_hold_the_keys_in_different_orders(sources):
    for name in ("zip.pt", "legacy.pt", "arrays.npz", "dcp_1"):  # readers that give the saved order
        assert list(tensorseal.load(sources[name])) == ORDERS[SOURCES.index(name)], name
    assert len({tuple(tensorseal.load(p)) for p in sources.values()}) >= 6
    assert len(list(sources["dcp_4"].glob("*.distcp"))) == 4
    # huggingface_hub splits its (shuffled) order otherwise than the name order does, so
    # the shards target really re-splits.
    hub = json.loads((sources["hub_shards"] / "model.safetensors.index.json").read_text())["weight_map"]
    mine = json.loads((sources["tseal_shards"] / "model.safetensors.index.json").read_text())["weight_map"]
    assert hub != mine and len(set(hub.values())) > 2


@pytest.mark.parametrize("target", TARGETS)
def test_every_source_order_converts_to_the_same_bytes(converted, target):
    """Byte-identical outputs, every file, from every source with the same user metadata
    (for DCP, which keeps no metadata: from every source)."""
    groups: dict[bool, list[str]] = {}
    for src in SOURCES:
        keeps_metadata = target in ("safetensors", "shards")
        groups.setdefault(keeps_metadata and src in WITH_METADATA, []).append(src)
    for members in groups.values():
        want = contents(converted[members[0], target])
        for src in members[1:]:
            got = contents(converted[src, target])
            assert sorted(got) == sorted(want), (src, members[0])
            for f in want:
                assert got[f] == want[f], f"{target}: {src} and {members[0]} differ in {f}"
    if target == "shards":
        assert len(list(converted["zip.pt", target].glob("model-*.safetensors"))) >= 3
    if target.startswith("dcp"):
        assert len(groups) == 1
        assert len(list(converted["zip.pt", target].glob("*.distcp"))) == int(target[-1])


def test_one_content_hash_for_every_source_and_output(sources, converted):
    want = tensorseal.hash(state(sorted(KEYS)))
    for name, path in sources.items():
        assert tseal_hash(path) == want, name
    for key, path in converted.items():
        assert tseal_hash(path) == want, key


def test_canon_of_order_free_sources_is_their_canonical_layout(sources, converted, tmp_path):
    """canon keeps a DCP directory's world size and a shard directory's split (a layout,
    not an order): from tensorseal's own shards and DCP saves of any order it gives the
    bytes convert gives."""
    for src, want in [("dcp_4", converted["zip.pt", "dcp_4"]), ("plain.safetensors", converted["zip.pt", "safetensors"]),
                      ("meta.safetensors", converted["hub_shards", "safetensors"]),
                      ("tseal_shards", converted["arrays.npz", "shards"])]:
        out = tmp_path / src.replace(".", "_")
        tseal_ok("canon", sources[src], "-o", out)
        assert contents(out) == contents(want), src
    one = tmp_path / "dcp_1_by_convert"
    tseal_ok("convert", sources["legacy.pt"], one, "--world-size", "1")
    tseal_ok("canon", sources["dcp_1"], "-o", tmp_path / "dcp_1")
    assert contents(tmp_path / "dcp_1") == contents(one)
    assert contents(sources["tseal_shards"]) == contents(converted["zip.pt", "shards"])  # Python save: the same


def test_canon_of_pt_keeps_dict_order(sources, tmp_path):
    """torch.load gives a .pt's dict order back, so canon keeps it (nested dicts too): two
    orders, two canonical files, one content hash."""
    outs = []
    for i, reverse in enumerate((False, True)):
        inner = state(ORDERS[i])
        obj = {"model": inner, "epoch": 3, "optim": {"lr": 0.1, "betas": (0.9, 0.99)}}
        if reverse:
            obj = dict(reversed(list(obj.items())))
        src, canon = tmp_path / f"src{i}.pt", tmp_path / f"canon{i}.pt"
        torch.save(obj, src, _use_new_zipfile_serialization=not reverse)  # a zip and a legacy file
        tseal_ok("canon", src, "-o", canon)
        back = torch.load(canon, weights_only=True)
        assert list(back) == list(obj) and list(back["model"]) == ORDERS[i]
        assert list(tensorseal.load(canon)["model"]) == ORDERS[i]
        again = tmp_path / f"again{i}.pt"
        tseal_ok("canon", canon, "-o", again)
        assert again.read_bytes() == canon.read_bytes()
        outs.append(canon)
    assert outs[0].read_bytes() != outs[1].read_bytes()
    assert tseal_hash(outs[0]) == tseal_hash(outs[1])
