"""conj and neg views: torch records the lazy bits of z.conj(), z.conj().imag and
torch._neg_view(x) in the metadata argument of _rebuild_tensor_v2 over the storage's
raw values. tensorseal must read the views torch reads (same bits, same values, one
storage with their base), in every container torch writes, and write canonical files
torch reads back to those views."""
from __future__ import annotations

import io
import pickle
import subprocess
import zipfile

import pytest
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal


def views() -> dict:
    def z() -> torch.Tensor:  # a fresh storage per entry: torch refuses one storage viewed as two dtypes
        return torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0j, float("nan") + 1j], dtype=torch.complex64)

    z64 = z()
    z128 = torch.tensor([1.25 - 2j, -3 + 4.5j], dtype=torch.complex128)
    zh = torch.tensor([1 + 2j, -3 - 4j], dtype=torch.complex32)
    out = {
        "conj64": z64.conj(),
        "conj128": z128.conj(),
        "conj32": zh.conj(),
        "imag_of_conj": z().conj().imag,        # a float32 view with the neg bit
        "real_of_conj": z().conj().real,        # no bit
        "conj_strided": torch.tensor([[1 + 1j, 2 - 2j], [3 + 3j, 4 - 4j]]).conj().t(),
    }
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        out[f"neg_{dt}".replace("torch.", "")] = torch._neg_view(torch.tensor([1.5, -2.0, 0.0, float("inf")], dtype=dt))
    out["neg_of_conj"] = torch._neg_view(z64.conj())
    return out


def resolved(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_conj().resolve_neg()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = resolved(a).contiguous(), resolved(b).contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and a.view(torch.uint8).equal(b.view(torch.uint8))


def saved(tmp_path, how: str):
    obj = views()
    path = tmp_path / f"views.{how}"
    if how == "zip":
        torch.save(obj, path)
        return obj, path
    # torch's legacy storages cannot hold complex32 (no typed storage class), and its
    # legacy loader cannot read a complex storage viewed as float: torch itself fails
    # to load those, so they are left out there.
    obj = {k: v for k, v in obj.items() if k != "conj32" and (how != "legacy" or "_of_conj" not in k)}
    if how == "legacy":
        torch.save(obj, path, _use_new_zipfile_serialization=False)
    else:
        path.write_bytes(pickle.dumps(obj, protocol=int(how[-1])))
    return obj, path


@pytest.mark.parametrize("how", ["zip", "legacy", "pickle2", "pickle4"])
def test_views_read_as_torch_reads_them(tmp_path, how):
    obj, path = saved(tmp_path, how)
    ref = pickle.loads(path.read_bytes()) if how.startswith("pickle") else torch.load(path, weights_only=False)
    got = tensorseal.load(path)
    assert set(got) == set(ref) == set(obj)
    for k in obj:
        assert same_bits(got[k], ref[k]), k
        # The lazy bits stay as torch reads them: the view keeps sharing its raw storage.
        assert (got[k].is_conj(), got[k].is_neg()) == (ref[k].is_conj(), ref[k].is_neg()), k
    # The content hash is the hash of the values torch sees.
    assert tensorseal.hash(path) == tensorseal.hash({k: resolved(v) for k, v in ref.items()})
    # A canonical copy carries those values into torch, and is what saving them writes.
    out = tmp_path / "canonical.pt"
    r = run_tseal("canon", path, "-o", out)
    assert r.returncode == 0, r.stderr
    back = torch.load(out, weights_only=True)
    for k in obj:
        assert same_bits(back[k], ref[k]), k
    assert tensorseal.hash(out) == tensorseal.hash(path)


def test_signs_flip_exactly_as_torch():
    # The imaginary part of a conj view is negated, NaN payloads and signed zeros kept.
    z = torch.tensor([0j, complex(-0.0, -0.0), complex(float("nan"), float("-nan"))], dtype=torch.complex64)
    buf = io.BytesIO()
    torch.save({"c": z.conj(), "n": torch._neg_view(z)}, buf)
    got = tensorseal.load_bytes(buf.getvalue())
    ref = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert same_bits(got["c"], ref["c"]) and same_bits(got["n"], ref["n"])


class _Rebuild:
    """Pickles as _rebuild_tensor_v2 with a metadata dict torch would not write."""

    def __init__(self, meta):
        self.meta = meta

    def __reduce__(self):
        import collections
        s = torch.tensor([1.0, 2.0]).untyped_storage()
        typed = torch.storage.TypedStorage(wrap_storage=s, dtype=torch.float32, _internal=True)
        return (torch._utils._rebuild_tensor_v2, (typed, 0, (2,), (1,), False, collections.OrderedDict(), self.meta))


@pytest.mark.parametrize("meta,rule", [({"sparse_dim": 1}, "torch/unsupported-rebuild"),
                                       ({"conj": True}, "torch/unsupported-rebuild"),
                                       ({"neg": 1}, "torch/bad-rebuild-args")])
def test_metadata_not_understood_is_refused(tmp_path, meta, rule):
    path = tmp_path / "odd.pt"
    torch.save({"w": _Rebuild(meta)}, path)
    with pytest.raises(tensorseal.Error) as e:
        tensorseal.load(path)
    assert e.value.rule == rule
    r = run_tseal("inspect", path)
    assert r.returncode == 2 and f"[{rule}]" in r.stderr


def sharing_state() -> dict:
    z = torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0j, float("nan") + 1j], dtype=torch.complex64)
    x = torch.tensor([1.5, -2.0, 0.0, float("inf"), -0.0])
    return {"z": z, "c": z.conj(), "nc": torch._neg_view(z.conj()), "x": x, "n": torch._neg_view(x[1:])}


def assert_shares_as_torch(got: dict, ref: dict) -> None:
    assert set(got) == set(ref)
    for k in ref:
        assert same_bits(got[k], ref[k]), k
        assert (got[k].is_conj(), got[k].is_neg()) == (ref[k].is_conj(), ref[k].is_neg()), k
        assert got[k].storage_offset() == ref[k].storage_offset() and got[k].stride() == ref[k].stride(), k
    ptr = {k: t.untyped_storage().data_ptr() for k, t in got.items()}
    assert ptr["z"] == ptr["c"] == ptr["nc"] and ptr["x"] == ptr["n"] and ptr["z"] != ptr["x"]


OLD_TORCH_LOAD = "import sys, torch; torch.load(sys.argv[1], weights_only=True)"


def test_conj_views_share_their_base_everywhere(tmp_path, old_python):
    # docs/formats/canonical-pt.md: a conj/neg view keeps sharing its base's storage in
    # tensorseal.load, tseal canon and tensorseal.torch.save, as torch 2.x's load gives it.
    src = tmp_path / "views.pt"
    torch.save(sharing_state(), src)
    ref = torch.load(src, weights_only=True)
    assert_shares_as_torch(tensorseal.load(src), ref)

    out = tmp_path / "canonical.pt"
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 0, r.stderr
    records = [n for n in zipfile.ZipFile(out).namelist() if "/data/" in n]
    assert len(records) == 2, records  # one storage for z's views, one for x's
    for kwargs in ({"weights_only": True}, {"weights_only": True, "mmap": True}):
        assert_shares_as_torch(torch.load(out, **kwargs), ref)
    # torch 1.13 has no metadata argument (and its own torch.save drops the conj bit):
    # it refuses the canonical file loudly, exactly as it refuses torch 2.13's source.
    for path in (src, out):
        r = subprocess.run([old_python, "-c", OLD_TORCH_LOAD, str(path)], capture_output=True, text=True)
        assert r.returncode != 0 and "takes 6 positional arguments but 7 were given" in r.stderr, r.stderr[-2000:]
    assert tensorseal.hash(out) == tensorseal.hash(src) == tensorseal.hash({k: resolved(v) for k, v in ref.items()})

    # Saving the live views writes the same canonical bytes, and keeps the sharing.
    live = tmp_path / "live.pt"
    tensorseal.torch.save(sharing_state(), live)
    assert live.read_bytes() == out.read_bytes()
    assert_shares_as_torch(tensorseal.torch.load(live), ref)


def test_a_view_of_another_dtype_is_written_by_value(tmp_path):
    # z.conj().imag views z's complex storage as float32 with the neg bit: no torch
    # storage holds both dtypes' views, so the float view gets its own storage, values kept.
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    obj = {"z": z, "im": z.conj().imag}
    path = tmp_path / "mixed.pt"
    tensorseal.torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    assert torch.equal(back["z"], z) and torch.equal(back["im"].resolve_neg(), torch.tensor([-2.0, 4.0]))
    assert tensorseal.hash(path) == tensorseal.hash({k: resolved(v) for k, v in obj.items()})
