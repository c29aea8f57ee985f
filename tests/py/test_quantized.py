"""Quantized tensors read as tensors, with their quantizer (issue: fidelity).

Files come from torch.save of torch.quantize_per_tensor / quantize_per_channel results
(qint8, quint8, qint32; per-tensor, per-channel on axis 0 and 1, float qparams; a
transposed view), in both formats, and are read back by torch 2.13 and torch 1.13."""
from __future__ import annotations

import json
import subprocess
import warnings

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal

warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def checkpoint() -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g)
    return {
        "pt_qint8": torch.quantize_per_tensor(x, 0.05, 3, torch.qint8),
        "pt_quint8": torch.quantize_per_tensor(x, 0.1, 128, torch.quint8),
        "pt_qint32": torch.quantize_per_tensor(x, 0.001, -7, torch.qint32),
        "pc_axis0": torch.quantize_per_channel(x, torch.rand(4, generator=g, dtype=torch.float64) + 0.01,
                                               torch.arange(4), 0, torch.quint8),
        "pc_axis1": torch.quantize_per_channel(x, torch.rand(6, generator=g, dtype=torch.float64) + 0.01,
                                               torch.arange(6) - 3, 1, torch.qint8),
        "pc_float_qparams": torch.quantize_per_channel(x, torch.rand(4, generator=g) + 0.01,
                                                       torch.rand(4, generator=g), 0, torch.quint8),
        "transposed": torch.quantize_per_tensor(x, 0.05, 0, torch.qint8).t(),
        "plain": x,
    }


def qparams(t: torch.Tensor):
    if t.qscheme() == torch.per_tensor_affine:
        return (t.qscheme(), t.q_scale(), t.q_zero_point())
    return (t.qscheme(), t.q_per_channel_scales().tolist(), t.q_per_channel_zero_points().tolist(),
            t.q_per_channel_axis())


def same(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs)
    for k, b in theirs.items():
        a = ours[k]
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, k
        if b.is_quantized:
            assert a.is_quantized and qparams(a) == qparams(b), k
            assert torch.equal(a.int_repr(), b.int_repr()), k
            assert torch.equal(a.dequantize(), b.dequantize()), k
        else:
            assert torch.equal(a, b), k


@pytest.fixture(scope="module", params=["zip", "legacy"])
def saved(request, tmp_path_factory):
    p = tmp_path_factory.mktemp("q") / f"{request.param}.pt"
    torch.save(checkpoint(), p, _use_new_zipfile_serialization=request.param == "zip")
    return p


def test_load_gives_quantized_tensors(saved):
    same(tensorseal.load(saved), torch.load(saved))  # torch's default weights_only reads them too
    same(tensorseal.torch.load(saved), torch.load(saved))


def test_inspect_lists_each_quantized_tensor_at_its_path(saved):
    r = run_tseal("inspect", saved, "--json")
    assert r.returncode == 0, r.stderr
    rows = {t["path"]: t for t in json.loads(r.stdout)["tensors"]}
    assert set(rows) == set(checkpoint()), sorted(rows)
    assert rows["pt_qint8"]["dtype"] == "qint8" and rows["pc_axis1"]["shape"] == [4, 6]
    assert rows["pt_qint8"]["quantization"] == {"scheme": "per_tensor_affine", "scale": 0.05, "zero_point": 3}
    assert rows["pc_axis1"]["quantization"]["axis"] == 1 and rows["plain"]["quantization"] is None
    assert rows["pc_float_qparams"]["quantization"]["scheme"] == "per_channel_affine_float_qparams"
    assert {r["type"] for r in rows.values()} == {"torch.Tensor"}
    text = run_tseal("inspect", "--textconv", saved).stdout
    assert "tensor pt_qint32: qint32 [4, 6] quantized(per_tensor_affine scale=0.001 zero_point=-7) sha256:" in text
    # The digest is over the integers, as torch's int_repr() has them.
    import hashlib
    want = hashlib.sha256(torch.load(saved)["transposed"].int_repr().contiguous().numpy().tobytes()).hexdigest()
    assert rows["transposed"]["sha256"] == want


def test_canonical_file_loads_in_torch_and_keeps_the_hash(saved, tmp_path, old_python):
    out = tmp_path / "c.pt"
    r = run_tseal("canon", saved, "-o", out)
    assert r.returncode == 0, r.stderr
    same(torch.load(out), torch.load(saved))
    assert tensorseal.hash(out) == tensorseal.hash(saved) and tensorseal.is_canonical(out)
    code = ("import sys, torch; d = torch.load(sys.argv[1]); q = d['pc_axis1']; "
            "print(q.dtype, q.qscheme(), q.q_per_channel_axis(), d['pt_qint32'].q_zero_point(), "
            "d['pc_float_qparams'].qscheme())")
    r = subprocess.run([old_python, "-c", code, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["torch.qint8", "torch.per_channel_affine", "1", "-7",
                                "torch.per_channel_affine_float_qparams"]


def test_save_keeps_scale_and_zero_point(saved, tmp_path):
    loaded = tensorseal.load(saved)
    for save in (tensorseal.torch.save, tensorseal.save):
        out = tmp_path / f"{save.__module__}.pt"
        save(loaded, out)
        same(torch.load(out), torch.load(saved))
        assert tensorseal.hash(out) == tensorseal.hash(saved)
    # From torch objects directly, as torch.save would take them.
    direct = tmp_path / "direct.pt"
    tensorseal.torch.save(checkpoint(), direct)
    same(torch.load(direct), checkpoint())


def test_hash_and_diff_see_the_quantizer(tmp_path):
    x = torch.randn(8)
    a, b, c = tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "c.pt"
    qa = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    qb = torch._make_per_tensor_quantized_tensor(qa.int_repr(), 0.2, 0)  # same integers, other scale
    torch.save({"q": qa}, a)
    torch.save({"q": qb}, b)
    torch.save({"q": qa.int_repr()}, c)
    assert len({tensorseal.hash(p) for p in (a, b, c)}) == 3
    r = run_tseal("diff", a, b)
    assert r.returncode == 1 and "(quantization)" in r.stdout and "scale=0.1" in r.stdout, r.stdout


def test_formats_without_quantization_refuse_clearly(saved, tmp_path):
    for out in (tmp_path / "x.safetensors", tmp_path / "x.npz"):
        r = run_tseal("convert", saved, out)
        assert r.returncode == 2 and ("qint8" in r.stderr or "quint8" in r.stderr), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not out.exists()


def test_packed_quantized_dtypes_are_refused_by_rule(tmp_path):
    """quint4x2 (two values per byte) is not carried: one line naming the dtype and
    torch/unsupported-rebuild, exit 2, never a wrong value."""
    p = tmp_path / "q4.pt"
    torch.save({"q": torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint4x2)}, p)
    r = run_tseal("inspect", p)
    assert r.returncode == 2 and "[torch/unsupported-rebuild]" in r.stderr and "quint4x2" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_python_save_to_safetensors_refuses_and_writes_nothing(tmp_path):
    import tensorseal.safetensors
    q = torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8)
    with pytest.raises(tensorseal.Error, match="qint8"):
        tensorseal.save({"q": q}, tmp_path / "a.safetensors")
    with pytest.raises(tensorseal.Error, match="cannot store"):
        tensorseal.safetensors.save_file({"q": q}, tmp_path / "b.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_sparse_tensors_round_trip_exactly(tmp_path):
    """Sparse layouts stay opaque objects in the core (their parts are plain tensors):
    canon rewrites them so torch loads the same sparse tensors, and the Python loader
    builds the sparse tensors torch.load gives."""
    g = torch.Generator().manual_seed(1)
    d = torch.randn(4, 5, generator=g) * (torch.rand(4, 5, generator=g) > 0.6)
    sd = {"coo": d.to_sparse(), "csr": d.to_sparse_csr(), "csc": d.to_sparse_csc(),
          "bsr": d.to_sparse_bsr((2, 1)), "bsc": d.to_sparse_bsc((2, 1))}
    src, out = tmp_path / "s.pt", tmp_path / "c.pt"
    torch.save(sd, src)
    # tensorseal.load gives sparse tensors, as torch.load does (invariants checked).
    got = tensorseal.load(src)
    for k, t in sd.items():
        assert got[k].layout == t.layout and torch.equal(got[k].to_dense(), d), k
    # Indices outside the size are refused, not handed out.
    bad = tmp_path / "bad.pt"
    torch.save({"coo": torch.sparse_coo_tensor(torch.tensor([[0, 9]]), torch.ones(2), (3,))}, bad)
    with pytest.raises(RuntimeError):
        tensorseal.load(bad)
    assert run_tseal("canon", src, "-o", out).returncode == 0
    back = torch.load(out)
    for k, t in sd.items():
        assert back[k].layout == t.layout and torch.equal(back[k].to_dense(), d), k
    assert tensorseal.hash(out) == tensorseal.hash(src)
    # Saved from Python (torch objects or loaded ones) in torch's own form: same content.
    for obj in (sd, got):
        mine = tmp_path / "mine.pt"
        tensorseal.torch.save(obj, mine)
        back = torch.load(mine)
        assert all(back[k].layout == t.layout and torch.equal(back[k].to_dense(), d) for k, t in sd.items())
        assert tensorseal.hash(mine) == tensorseal.hash(src) == tensorseal.hash(obj)


class Rebuild:
    """torch.save writes `_rebuild_qtensor(storage, 0, (2, 3), (3, 1), params, False,
    hooks)` for it, with a real qint8 storage: quantizer parameters torch's own
    Tensor.__reduce_ex__ never writes (hostile or damaged files)."""

    def __init__(self, params, hooks=None):
        q = torch.quantize_per_tensor(torch.arange(6.0).reshape(2, 3), 0.5, 0, torch.qint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.storage = q.storage()  # a TypedStorage of dtype qint8, as torch saves it
        self.params = params
        self.hooks = hooks if hooks is not None else __import__("collections").OrderedDict()

    def __reduce__(self):
        return (torch._utils._rebuild_qtensor, (self.storage, 0, (2, 3), (3, 1), self.params, False, self.hooks))


MALFORMED_QUANTIZERS = {
    "axis_outside_the_dims": ((torch.per_channel_affine, torch.ones(2, dtype=torch.float64),
                               torch.zeros(2, dtype=torch.int64), 5), "torch/bad-rebuild-args"),
    "scales_per_channel_wrong_length": ((torch.per_channel_affine, torch.ones(3, dtype=torch.float64),
                                         torch.zeros(3, dtype=torch.int64), 0), "torch/bad-rebuild-args"),
    "scales_not_numbers": ((torch.per_channel_affine, "0.5", torch.zeros(2, dtype=torch.int64), 0),
                           "torch/bad-rebuild-args"),
    "per_tensor_missing_zero_point": ((torch.per_tensor_affine, 0.5), "torch/bad-rebuild-args"),
    "qscheme_a_string": (("per_tensor_affine", 0.5, 0), "torch/bad-rebuild-args"),
    "symmetric_scheme": ((torch.per_tensor_symmetric, 0.5, 0), "torch/unsupported-rebuild"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_QUANTIZERS))
def test_malformed_quantizer_parameters_are_refused_by_rule(case, tmp_path):
    params, rule = MALFORMED_QUANTIZERS[case]
    p = tmp_path / f"{case}.pt"
    torch.save({"q": Rebuild(params)}, p)
    with pytest.raises(Exception):  # torch cannot build these either
        torch.load(p, weights_only=False)
    with pytest.raises(tensorseal.Error) as e:
        tensorseal.load(p)
    assert e.value.rule == rule, (case, e.value)
    r = run_tseal("inspect", str(p))
    assert r.returncode == 2 and f"[{rule}]" in r.stderr, r.stderr


def test_backward_hooks_on_a_quantized_tensor_are_refused(tmp_path):
    """torch attaches the hooks (calling them later); tensorseal keeps no callables."""
    import collections
    p = tmp_path / "hooks.pt"
    torch.save({"q": Rebuild((torch.per_tensor_affine, 0.5, 0), collections.OrderedDict({0: print}))}, p)
    assert torch.load(p, weights_only=False)["q"].q_scale() == 0.5
    with pytest.raises(tensorseal.UnsupportedError) as e:
        tensorseal.load(p)
    assert e.value.rule == "torch/unsupported-rebuild" and "backward hooks" in str(e.value)


def test_torch113_csr_files_read_as_torch_113_reads_them(tmp_path, old_python):
    """torch 1.10-1.13 pickled a CSR tensor as _rebuild_sparse_csr_tensor(layout, data),
    which torch 2 no longer has; the arguments are those torch 2 gives
    _rebuild_sparse_tensor. Read as that call: the CSR tensor torch 1.13 loads, the
    content hash of the same tensor saved by torch 2, a canonical file torch 2 loads."""
    code = ("import sys, torch; e = torch.tensor([[0., 2., 0.], [1., 0., 3.]]).to_sparse_csr(); "
            "torch.save({'csr': e}, sys.argv[1]); "
            "torch.save({'csr': e}, sys.argv[2], _use_new_zipfile_serialization=False)")
    old_zip, old_legacy = tmp_path / "old.pt", tmp_path / "old_legacy.pt"
    r = subprocess.run([old_python, "-c", code, str(old_zip), str(old_legacy)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert b"_rebuild_sparse_csr_tensor" in old_legacy.read_bytes()
    want = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]).to_sparse_csr()
    new = tmp_path / "new.pt"
    torch.save({"csr": want}, new)
    for f in (old_zip, old_legacy):
        got = tensorseal.load(f)["csr"]
        assert got.layout == torch.sparse_csr and torch.equal(got.to_dense(), want.to_dense())
        assert tensorseal.hash(f) == tensorseal.hash(new)
        out = tmp_path / f"canon_{f.name}"
        assert run_tseal("canon", f, "-o", out).returncode == 0
        assert out.read_bytes() == run_canon_bytes(new, tmp_path)
        assert torch.equal(torch.load(out, weights_only=True)["csr"].to_dense(), want.to_dense())


def run_canon_bytes(f, tmp_path) -> bytes:
    out = tmp_path / f"canon_of_{f.name}"
    assert run_tseal("canon", f, "-o", out).returncode == 0
    return out.read_bytes()


@pytest.mark.parametrize("case", ["coo_layout", "three_parts"])
def test_malformed_torch113_csr_calls_are_refused(case, tmp_path, old_python):
    """torch 1.13's pickler with the rebuild call torch never writes for a tensor."""
    code = ("import sys, torch\n"
            "e = torch.eye(2).to_sparse_csr()\n"
            "parts = (e.crow_indices(), e.col_indices(), e.values(), e.size())\n"
            "class Bad:\n"
            "    def __reduce__(self):\n"
            "        if sys.argv[2] == 'coo_layout':\n"
            "            return (torch._utils._rebuild_sparse_csr_tensor, (torch.sparse_coo, parts))\n"
            "        return (torch._utils._rebuild_sparse_csr_tensor, (torch.sparse_csr, parts[:3]))\n"
            "torch.save({'x': Bad()}, sys.argv[1])\n")
    p = tmp_path / f"{case}.pt"
    r = subprocess.run([old_python, "-c", code, str(p), case], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    with pytest.raises(tensorseal.Error, match=r"\[torch/bad-rebuild-args\] torch._utils._rebuild_sparse_csr_tensor: "):
        tensorseal.load(p)
