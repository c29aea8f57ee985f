"""Recursive object graphs (issue: real files, class 1): lists and dicts that hold
themselves, `child.parent = self`, and OmegaConf configs (every node's `_parent` points
back up), made by the real producers (pickle, torch.save, OmegaConf). tensorseal reads
them without running pickle code, keeps identity and cycles, hashes them by
docs/content-hash.md "Recursive values", and canon, scan, diff and explain work on them.
"""
from __future__ import annotations

import io
import pickle
import struct

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal
from producers import recursive_objects as ro

omegaconf = pytest.importorskip("omegaconf")


def _omegaconf_checkpoint(path):
    """A Lightning-style checkpoint: weights plus hyper_parameters as a DictConfig."""
    cfg = omegaconf.OmegaConf.create({"model": {"hidden": 8, "layers": [4, 4], "act": "gelu"},
                                      "optim": {"lr": 1e-3, "betas": [0.9, 0.999]}, "seed": 7})
    torch.manual_seed(0)
    state = {"state_dict": {"w": torch.randn(3, 4), "b": torch.zeros(4)}, "hyper_parameters": cfg,
             "epoch": 2}
    torch.save(state, path)
    return state


def test_recursive_containers_load_with_identity_kept(tmp_path):
    path = tmp_path / "rec.pkl"
    for protocol in (0, 2, 4, 5):
        path.write_bytes(pickle.dumps(ro.containers(), protocol=protocol))
        got = tensorseal.load(path)
        assert got["list"][0] is got["list"], protocol
        assert got["dict"]["me"] is got["dict"], protocol
        assert got["pair"][0] is got["list"] and got["pair"][1][0] is got["list"], protocol
        t = got["tuple"]
        assert isinstance(t, tuple) and t[0][0] is t, protocol  # l = [t]; t = (l,)


def test_recursive_objects_keep_parent_links(tmp_path):
    path = tmp_path / "tree.pt"
    torch.save({"root": ro.tree(), "w": torch.ones(2)}, path)
    want = torch.load(path, weights_only=False)["root"]
    got = tensorseal.torch.load(path, weights_only=False)["root"]
    assert isinstance(got, tensorseal.Opaque)
    kids = got.state["children"]
    assert [k.state["name"] for k in kids] == [k.name for k in want.children]
    assert all(k.state["parent"] is got for k in kids)
    assert kids[0].state["children"][0].state["parent"] is kids[0]


def test_omegaconf_checkpoint_reads_scans_hashes_and_canonicalises(tmp_path):
    src, canon, again = tmp_path / "hp.ckpt", tmp_path / "canon.ckpt", tmp_path / "again.ckpt"
    state = _omegaconf_checkpoint(src)
    got = tensorseal.torch.load(src, weights_only=False)
    assert torch.equal(got["state_dict"]["w"], state["state_dict"]["w"])
    cfg = got["hyper_parameters"]
    content = cfg.state["_content"]
    model = content["model"]
    assert model.state["_parent"] is cfg  # identity of the parent kept
    assert model.state["_content"]["layers"].state["_parent"] is model

    r = run_tseal("scan", src)
    assert r.returncode in (0, 1), r.stderr
    assert "omegaconf.dictconfig.DictConfig" in r.stdout

    assert run_tseal("canon", src, "-o", canon).returncode == 0
    assert run_tseal("canon", canon, "-o", again).returncode == 0
    assert canon.read_bytes() == again.read_bytes()
    assert tensorseal.hash(canon) == tensorseal.hash(src)
    back = torch.load(canon, weights_only=False)  # the real classes, rebuilt by pickle
    assert back["hyper_parameters"] == state["hyper_parameters"]
    assert back["hyper_parameters"].model._get_parent() is back["hyper_parameters"]
    assert torch.equal(back["state_dict"]["w"], state["state_dict"]["w"])

    d = run_tseal("diff", src, canon)
    assert d.returncode == 0, d.stdout + d.stderr
    e = run_tseal("explain", src, canon)
    assert e.returncode == 0, e.stdout + e.stderr


def test_hash_depends_on_the_graph_not_the_pickle_order(tmp_path):
    """The same recursive graph pickled in another order (which changes which edges the
    reader makes back references) hashes alike; a changed graph does not."""
    a, b, c = tmp_path / "a.pkl", tmp_path / "b.pkl", tmp_path / "c.pkl"
    parent = ro.tree()
    child = parent.children[0]
    a.write_bytes(pickle.dumps({"p": parent, "c": child}, protocol=2))  # the parent met first
    b.write_bytes(pickle.dumps({"c": child, "p": parent}, protocol=2))  # the child met first
    assert a.read_bytes() != b.read_bytes()
    assert tensorseal.hash(a) == tensorseal.hash(b)
    assert run_tseal("hash", a).stdout.split()[0] == run_tseal("hash", b).stdout.split()[0]
    parent.children[1].name = "other"
    c.write_bytes(pickle.dumps({"p": parent, "c": child}, protocol=2))
    assert tensorseal.hash(c) != tensorseal.hash(a)


def test_self_referencing_dict_round_trips_through_save(tmp_path):
    d = {"name": "me", "w": torch.arange(3.0)}
    d["self"] = d
    out = tmp_path / "d.pt"
    tensorseal.torch.save(d, out)
    back = torch.load(out, weights_only=False)
    assert back["self"] is back and torch.equal(back["w"], d["w"])
    mine = tensorseal.torch.load(out, weights_only=False)
    assert mine["self"] is mine
    assert tensorseal.hash(out) == tensorseal.hash(d)


def test_recursive_tuple_saved_and_loaded_as_cpython_does(tmp_path):
    src = tmp_path / "t.pkl"
    src.write_bytes(pickle.dumps(ro.containers()["tuple"], protocol=2))
    canon = tmp_path / "t.pt"
    r = run_tseal("canon", src, "-o", canon)
    assert r.returncode == 0, r.stderr
    back = torch.load(canon, weights_only=False)
    assert isinstance(back, tuple) and back[0][0] is back
    assert tensorseal.hash(canon) == tensorseal.hash(src)


def test_dag_bomb_behind_a_cycle_stays_bounded(tmp_path):
    """A recursive list that then receives a DAG bomb (each level holds the previous one
    twice: 2^60 values expanded), pickled by CPython: refused by max_alloc at once."""
    bomb: object = None
    for _ in range(60):
        bomb = (bomb, bomb)
    l: list = []
    l.append(l)
    l.append(bomb)
    path = tmp_path / "bomb.pkl"
    path.write_bytes(pickle.dumps(l, protocol=2))
    with pytest.raises(tensorseal.Error, match=r"pickle/max-alloc"):
        tensorseal.load(path)
    r = run_tseal("hash", path)
    assert r.returncode == 2 and "pickle/max-alloc" in r.stderr


def test_hash_expansion_through_back_references_is_bounded(tmp_path):
    """2^20 paths reach a back reference to a node with 5,000 containers below it: the
    hash would expand 5 * 10^9 containers; it stops with hash/recursion-expansion."""
    t: list = []
    c0 = [t]
    t.extend([c0, [[] for _ in range(5000)]])
    c = c0
    for _ in range(20):
        c = [c, c]
    path = tmp_path / "wide.pkl"
    path.write_bytes(pickle.dumps([t, c], protocol=2))
    got = tensorseal.load(path)
    assert got[0][0][0] is got[0]
    r = run_tseal("hash", path)
    assert r.returncode == 2 and "hash/recursion-expansion" in r.stderr


def _late_chain(n: int) -> bytes:
    """L0 ... Ln, each placed in a tuple before it receives the next: a chain n deep
    built only by late changes (the recorded heights stay 2)."""
    out = [b"\x80\x02]r" + struct.pack("<I", 0) + b"0"]
    for i in range(1, n + 1):
        out.append(b"]r" + struct.pack("<I", i) + b"\x850")            # Li into a tuple
        out.append(b"j" + struct.pack("<I", i - 1) + b"j" + struct.pack("<I", i) + b"a0")  # L(i-1).append(Li)
    out.append(b"j" + struct.pack("<I", 0) + b".")
    return b"".join(out)


@pytest.mark.parametrize("stream, rule", [
    (b"\x80\x02}q\x00h\x00h\x00s.", "pickle/(late-mutation|unhashable-key)"),  # a dict as its own key
    (_late_chain(1200), "pickle/max-depth"),  # over max_depth only once measured exactly
])
def test_hostile_recursion_is_refused(tmp_path, stream, rule):
    path = tmp_path / "hostile.pkl"
    path.write_bytes(stream)
    with pytest.raises(tensorseal.Error, match=rule):
        tensorseal.load(path)
    r = run_tseal("scan", path)
    assert r.returncode == 2


def test_late_chain_within_limits_reads():
    stream = _late_chain(500)
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "chain.pkl")
        with open(p, "wb") as f:
            f.write(stream)
        got = tensorseal.load(p)
    depth = 0
    while got:
        got = got[0]
        depth += 1
    assert depth == 500
