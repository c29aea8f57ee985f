"""Canonical writers (issue: deterministic .pt, whole checkpoints in safetensors,
canonical legacy bytes, tseal canon / convert)."""
from __future__ import annotations

import hashlib
import io
import math
import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

import tensorseal
from conftest import run_tseal, vectors_dir
from torch_producers import CHECKPOINT, NETDEF, run, save_checkpoint, venv_python

HERE = pathlib.Path(__file__).resolve().parent


def sha(p: pathlib.Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def canon(src: pathlib.Path, dst: pathlib.Path, *extra: str) -> pathlib.Path:
    out = run_tseal("canon", src, "-o", dst, *extra)
    assert out.returncode == 0, out.stderr
    return dst


@pytest.fixture(scope="module")
def produced(tmp_path_factory, old_python):
    """The same checkpoint saved by torch 2.13 and 1.13, as zip, legacy and pickle,
    in two processes each, under different names and directories."""
    d = tmp_path_factory.mktemp("produced")
    files = {}
    for version, py in (("t213", venv_python()), ("t113", old_python)):
        for fmt in ("zip", "legacy", "pickle"):
            for run_no in (1, 2):
                sub = d / f"{version}-{fmt}-run{run_no}"
                sub.mkdir()
                ext = "pkl" if fmt == "pickle" else "pt"
                paths = [sub / f"model_{run_no}.{ext}", sub / f"noviews_{run_no}.{ext}"]
                save_checkpoint(py, paths, fmt)
                files[(version, fmt, run_no)] = paths[0]
                files[(version, fmt, run_no, "noviews")] = paths[1]
    return files


def test_inputs_really_differ_in_bytes(produced):
    # The seed's problem, reproduced: same content, different bytes.
    for version in ("t213", "t113"):
        for fmt in ("zip", "legacy", "pickle"):
            assert tensorseal.hash(produced[(version, fmt, 1)]) == tensorseal.hash(produced[(version, fmt, 1, "noviews")])
            a, b = produced[(version, fmt, 1)], produced[(version, fmt, 2)]
            if fmt == "zip":  # zip bytes differ through the archive folder = file name
                assert a.read_bytes() != b.read_bytes()
            assert tensorseal.hash(a) == tensorseal.hash(b)


@pytest.mark.parametrize("variant", ["views", "noviews"])
def test_every_route_gives_identical_canonical_bytes(produced, tmp_path, variant):
    # With views of one storage, zip and legacy files (both torch versions) agree;
    # pickles hold unshared copies of such views (torch loads them unshared too), so
    # they join the comparison for the view-free variant.
    routes = [(k, p) for k, p in produced.items() if (len(k) == 4) == (variant == "noviews")
              and (variant == "noviews" or k[1] != "pickle")]
    assert len(routes) == (12 if variant == "noviews" else 8)
    outs = []
    for i, (key, p) in enumerate(sorted(routes, key=lambda kp: str(kp[0]))):
        out_dir = tmp_path / f"out{i}"
        out_dir.mkdir()
        outs.append(canon(p, out_dir / f"canonical_{i}.pt", "--threads", str(1 + i % 3)))
    digests = {sha(o) for o in outs}
    assert len(digests) == 1, digests
    hashes = {tensorseal.hash(p) for _, p in routes} | {tensorseal.hash(o) for o in outs}
    assert len(hashes) == 1


def test_pickle_views_are_unshared_as_torch_sees_them(produced):
    p = produced[("t213", "pickle", 1)]
    ours = tensorseal.load(p)
    theirs = pickle.loads(p.read_bytes())
    for ck in (ours, theirs):
        assert ck["tied_a"].untyped_storage().data_ptr() == ck["tied_b"].untyped_storage().data_ptr()
        assert ck["slice"].untyped_storage().data_ptr() != ck["tied_a"].untyped_storage().data_ptr()


def test_canonical_pt_loads_in_both_torch_versions_bit_exact(produced, tmp_path, old_python):
    src = produced[("t213", "zip", 1)]
    out = canon(src, tmp_path / "c.pt")
    ref = torch.load(src, weights_only=True)
    for kwargs in ({"weights_only": True}, {"weights_only": True, "mmap": True}):
        got = torch.load(out, **kwargs)
        assert list(got) == list(ref)
        assert type(got["model"]) is type(ref["model"]) and got["model"]._metadata == ref["model"]._metadata
        for k, v in ref.items():
            g = got[k]
            if isinstance(v, torch.Tensor):
                assert type(g) is type(v) and g.dtype == v.dtype and g.shape == v.shape
                assert g.requires_grad == v.requires_grad
                assert g.contiguous().view(torch.uint8).tolist() == v.contiguous().view(torch.uint8).tolist() if v.dim() \
                    else g.reshape(1).view(torch.uint8).tolist() == v.reshape(1).view(torch.uint8).tolist()
            elif isinstance(v, float) and math.isnan(v):
                assert math.isnan(g)
            elif k == "model":
                for n in v:
                    assert torch.equal(g[n], v[n])
            else:
                assert g == v and type(g) is type(v)
        # Tied tensors and views of one storage still share it.
        assert got["tied_a"].untyped_storage().data_ptr() == got["tied_b"].untyped_storage().data_ptr()
        assert got["slice"].untyped_storage().data_ptr() == got["tied_a"].untyped_storage().data_ptr()
    code = ("import sys, torch; ck = torch.load(sys.argv[1]); "
            "print(sorted(k for k in ck), ck['tied_a'].data_ptr() == ck['tied_b'].data_ptr(), "
            "type(ck['model']).__name__, ck['model']._metadata, ck['param'].__class__.__name__, "
            "ck['frozen'].requires_grad, ck['bf16'].float().tolist(), ck['c64'].tolist(), ck['big'])")
    out113 = run(old_python, code, str(out))
    assert "True OrderedDict OrderedDict([('', {'version': 1})]) Parameter False" in out113
    assert str(2 ** 80) in out113


def test_a_lone_slice_stores_only_its_bytes(tmp_path):
    big = torch.arange(1 << 20, dtype=torch.float32)
    secret = big.clone()
    src = tmp_path / "slice.pt"
    torch.save({"s": secret[1000:1002]}, src)  # torch writes the whole 4 MiB storage
    assert src.stat().st_size > 4 << 20
    out = canon(src, tmp_path / "c.pt")
    assert out.stat().st_size < 4096  # only the 8 reachable bytes are stored
    got = torch.load(out, weights_only=True)["s"]
    assert got.tolist() == [1000.0, 1001.0] and got.untyped_storage().nbytes() == 8
    explained = [f for f in tensorseal.read(src).facts if f[0] == "storage.slack"]
    assert explained and "4194296 of 4194304 bytes unused" in explained[0][2]


def test_canon_is_idempotent_and_keeps_content(produced, tmp_path):
    once = canon(produced[("t113", "legacy", 1)], tmp_path / "once.pt")
    twice = canon(once, tmp_path / "twice.pt")
    assert once.read_bytes() == twice.read_bytes()
    assert tensorseal.hash(once) == tensorseal.hash(produced[("t113", "legacy", 1)])


def test_convert_pt_to_safetensors_and_back(produced, tmp_path):
    # Views of one storage are stored as their own elements (stock safetensors sees
    # every name) and recorded as windows of a base view, so sharing comes back.
    src = produced[("t213", "zip", 1)]
    st = tmp_path / "c.safetensors"
    assert run_tseal("convert", src, st).returncode == 0
    assert tensorseal.hash(st) == tensorseal.hash(src)
    from safetensors.torch import load_file
    flat = load_file(st)  # stock safetensors loads the flat tensors
    assert torch.equal(flat["model.weight"], torch.load(src)["model"]["weight"])
    assert "tied_b" not in flat  # tied tensors stored once
    back = tmp_path / "back.pt"
    assert run_tseal("convert", st, back).returncode == 0
    assert back.read_bytes() == canon(src, tmp_path / "direct.pt").read_bytes()


def test_flat_state_dict_converts_to_npz(tmp_path):
    sd = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(4, dtype=torch.int32)}
    src = tmp_path / "sd.pt"
    torch.save(sd, src)
    npz = tmp_path / "sd.npz"
    assert run_tseal("convert", src, npz).returncode == 0
    import numpy as np
    z = np.load(npz)
    assert (z["a"] == sd["a"].numpy()).all() and (z["b"] == sd["b"].numpy()).all()
    assert tensorseal.hash(npz) == tensorseal.hash(src)


def test_seed_vectors_canonicalise_to_identical_loadable_bytes(tmp_path):
    v = vectors_dir()
    a = canon(v / "seed_pickle_torch15_run1.bin", tmp_path / "a.pt")
    b = canon(v / "seed_pickle_torch15_run2.bin", tmp_path / "b.pt")
    assert (v / "seed_pickle_torch15_run1.bin").read_bytes() != (v / "seed_pickle_torch15_run2.bin").read_bytes()
    assert a.read_bytes() == b.read_bytes()
    t = torch.load(a, weights_only=True)
    assert t.dtype == torch.int32 and t.tolist() == [1]


def test_full_module_pickle_reemitted_faithfully(tmp_path):
    (tmp_path / "netdef.py").write_text(NETDEF)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run(venv_python(), "import torch, netdef; torch.manual_seed(0); m = netdef.Net(); torch.save(m, 'm.pt'); "
        "import pickle; open('m.pkl', 'wb').write(pickle.dumps(m))", cwd=str(tmp_path), env=env)
    a = canon(tmp_path / "m.pt", tmp_path / "ca.pt")
    b = canon(tmp_path / "m.pkl", tmp_path / "cb.pt")
    assert a.read_bytes() == b.read_bytes()
    out = run(venv_python(), "import torch, netdef, sys; m = torch.load(sys.argv[1], weights_only=False); "
              "r = torch.load('m.pt', weights_only=False); x = torch.randn(2, 4); "
              "print(type(m).__name__, m.cfg, torch.equal(m(x), r(x)), m.head.weight is m.fc.weight, int(m.steps))",
              str(a), cwd=str(tmp_path), env=env)
    assert out.strip() == "Net {'lr': 0.1, 'layers': [4, 3, 2], 'name': 'net'} True True 5"


def test_in_place_is_atomic_and_requires_flag(tmp_path):
    p = tmp_path / "x.pt"
    torch.save({"w": torch.ones(3)}, p)
    before = p.read_bytes()
    out = run_tseal("canon", p)
    assert out.returncode == 2 and p.read_bytes() == before
    assert run_tseal("canon", p, "--in-place").returncode == 0
    assert p.read_bytes() != before and tensorseal.hash(p) == tensorseal.hash({"w": torch.ones(3)})
    assert [f.name for f in tmp_path.iterdir()] == ["x.pt"]  # no temp files left


def test_canonical_legacy_bytes_load_in_torch(tmp_path):
    sd = {"w": torch.arange(4, dtype=torch.float64), "p": torch.nn.Parameter(torch.ones(2))}
    b1 = tensorseal.save_bytes(sd, "torch-legacy")
    b2 = tensorseal.save_bytes({"w": torch.arange(4, dtype=torch.float64), "p": torch.nn.Parameter(torch.ones(2))},
                               "torch-legacy")
    assert b1 == b2
    got = torch.load(io.BytesIO(b1), weights_only=True)
    assert torch.equal(got["w"], sd["w"]) and isinstance(got["p"], torch.nn.Parameter)


ROUNDTRIP_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                    torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
                    torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", ROUNDTRIP_DTYPES, ids=str)
def test_roundtrip_through_torch_load_bit_exact(dtype, tmp_path):
    n = 64 * torch.empty((), dtype=dtype).element_size()
    raw = torch.arange(n, dtype=torch.int64).mul(37).remainder(256).to(torch.uint8)
    t = raw.view(dtype).reshape(8, -1) if dtype != torch.bool else (raw % 2).bool().reshape(8, -1)
    if dtype == torch.float32:  # a NaN payload and -0.0
        t.view(torch.int32)[0, 0] = 0x7FC01234
        t[0, 1] = -0.0
    p = tmp_path / "r.pt"
    tensorseal.save({"t": t, "tt": t.t()}, p)
    got = torch.load(p, weights_only=True)
    for k, ref in (("t", t), ("tt", t.t())):
        assert got[k].dtype == dtype
        assert got[k].contiguous().view(torch.uint8).tolist() == ref.contiguous().view(torch.uint8).tolist()


# Pinned canonical bytes: any change to the canonical .pt or safetensors layout must be
# deliberate (docs/formats/canonical-pt.md: bump the format version) and update these.
GOLDEN = {
    "pt": "da44a3aaf3070fac54efb4a9777237ada88434fd17d40994241134e4589128bb",
    "safetensors": "400ff43e27650e9f064941e172636cd9747f8a0fb49217df8c6c9547ee21cb54",
}


def golden_checkpoint():
    ns: dict = {}
    exec(CHECKPOINT, ns)
    ck = ns["checkpoint"]()
    ck["f8"] = torch.linspace(-1, 1, 8).to(torch.float8_e4m3fn)
    ck["u16"] = torch.tensor([1, 2, 65535], dtype=torch.int32).to(torch.uint16)
    return ck


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_golden_canonical_bytes(fmt, tmp_path):
    p = tmp_path / f"g.{fmt}"
    tensorseal.save(golden_checkpoint(), p)
    digest = sha(p)
    # Same bytes from another process and thread count.
    q = tmp_path / f"h.{fmt}"
    run(venv_python(), "import sys; sys.path.insert(0, sys.argv[2]); import test_canonical as t, tensorseal; "
        "tensorseal.save(t.golden_checkpoint(), sys.argv[1], threads=1)", str(q), str(HERE))
    assert sha(q) == digest
    assert GOLDEN[fmt] == digest, f"canonical {fmt} bytes changed: {digest}"
