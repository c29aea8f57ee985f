"""Python complex values (builtins.complex, allowed by torch's weights_only loader):
torch pickles them as REDUCE(builtins.complex, (real, imag)). tensorseal reads them as
complex values in every container torch writes, loads them as Python complex, saves
them as torch/pickle do, hashes them with their own tag and shows them in diff."""
from __future__ import annotations

import io
import json
import math
import pickle
import struct
import zipfile

import pytest
import torch

import tensorseal
import tensorseal.torch as tst
from conftest import run_tseal

NAN = float("nan")
INF = float("inf")


def values() -> dict:
    return {
        "z": complex(1, 2),
        "neg_zero": complex(-0.0, -0.0),
        "pure_imag": 3j,
        "real_only": complex(2.5, 0.0),
        "inf_nan": complex(INF, NAN),
        "tiny": complex(5e-324, -1.7976931348623157e308),
        "in_list": [1j, 2.0, complex(0, -1)],
        "in_tuple": (complex(7, 8),),
        "with_tensor": {"w": torch.tensor([1.0, 2.0]), "scale": complex(0.5, -0.25)},
    }


def bits(c: complex) -> tuple:
    return struct.pack("<dd", c.real, c.imag)


def same(a, b) -> bool:
    """Equal values with equal types; complex and floats compared by their bits."""
    if type(a) is not type(b):
        return False
    if isinstance(a, complex):
        return bits(a) == bits(b)
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def save_as(obj, path, how: str) -> None:
    if how == "zip":
        torch.save(obj, path)
    elif how == "legacy":
        torch.save(obj, path, _use_new_zipfile_serialization=False)
    else:
        path.write_bytes(pickle.dumps(obj, protocol=int(how[len("pickle"):])))


@pytest.mark.parametrize("how", ["zip", "legacy", "pickle0", "pickle2", "pickle4", "pickle5"])
def test_complex_read_as_torch_reads_it(tmp_path, how):
    path = tmp_path / f"c.{how}"
    save_as(values(), path, how)
    ref = pickle.loads(path.read_bytes()) if how.startswith("pickle") else torch.load(path, weights_only=True)
    got = tensorseal.load(path)
    assert same(got, ref)
    assert type(got["z"]) is complex and math.isnan(got["inf_nan"].imag)
    # The globals are known-safe (torch's weights_only allows builtins.complex).
    assert tensorseal.scan(path)["verdict"] == "safe"


def test_saved_like_torch_saves_it(tmp_path):
    """tensorseal.torch.save writes complex exactly as torch.save / pickle protocol 2 do."""
    obj = {"c": complex(1, 2), "i": complex(3, -0.0)}
    ours, theirs = io.BytesIO(), io.BytesIO()
    tst.save(obj, ours)
    torch.save(obj, theirs)
    pkl = {n: zipfile.ZipFile(io.BytesIO(b.getvalue())).read("archive/data.pkl") for n, b in
           (("ours", ours), ("theirs", theirs))}
    assert pkl["ours"] == pkl["theirs"]
    # Which is CPython's own protocol-2 pickle of the same dict.
    assert pkl["ours"] == pickle.dumps(obj, protocol=2)
    back = torch.load(io.BytesIO(ours.getvalue()), weights_only=True)
    assert same(back, obj)


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_round_trip_through_tensorseal_writers(tmp_path, fmt):
    obj = values()
    path = tmp_path / f"v.{fmt}"
    tensorseal.save(obj, path)
    got = tensorseal.load(path)
    assert same(got, obj)
    if fmt == "pt":
        assert same(torch.load(path, weights_only=True), obj)
    assert tensorseal.hash(path) == tensorseal.hash(obj)


def test_content_hash_tells_complex_apart():
    h = tensorseal.hash
    assert h({"a": 1 + 2j}) == h({"a": complex(1.0, 2.0)})
    distinct = [{"a": 1 + 2j}, {"a": 1 + 3j}, {"a": (1.0, 2.0)}, {"a": [1.0, 2.0]}, {"a": 1.0}, {"a": 1 + 0j},
                {"a": complex(1, -0.0)}, {"a": complex(-0.0, 0.0)}, {"a": 0j}]
    assert len({h(d) for d in distinct}) == len(distinct)


def test_canon_keeps_complex_and_diff_shows_it(tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save({"scale": complex(1, 2), "w": torch.ones(2)}, a)
    torch.save({"scale": complex(1, -2), "w": torch.ones(2)}, b)
    out = tmp_path / "canon.pt"
    r = run_tseal("canon", a, "-o", out)
    assert r.returncode == 0, r.stderr
    assert same(torch.load(out, weights_only=True), torch.load(a, weights_only=True))
    assert tensorseal.hash(out) == tensorseal.hash(a) != tensorseal.hash(b)
    r = run_tseal("diff", a, b, "--json")
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    text = json.dumps(report)
    assert "(1+2j)" in text and "(1-2j)" in text
    assert run_tseal("diff", a, out).returncode == 0


def test_complex_in_opaque_forms_stays_opaque(tmp_path):
    """complex('1+2j') (a str argument) is not a value tensorseal computes: it stays an
    object, and the file still loads."""
    class FromText:
        def __reduce__(self):
            return (complex, ("1+2j",))
    path = tmp_path / "s.pt"
    torch.save({"c": FromText()}, path)
    got = tensorseal.load(path)
    assert not isinstance(got["c"], complex)


def test_canonical_file_loads_in_torch_1_13(tmp_path, old_python):
    """The canonical .pt with complex values loads in torch 1.13 to the same bits (with
    weights_only=False: 1.13's allowlist lacks builtins.complex, for its own files too);
    and torch 1.13's own save of them reads in tensorseal."""
    import subprocess
    obj = {"z": complex(1, 2), "n": complex(-0.0, NAN), "l": [3j]}
    ours = tmp_path / "ours.pt"
    tensorseal.save(obj, ours)
    theirs = tmp_path / "theirs.pt"
    code = ("import sys, struct, torch\n"
            "d = torch.load(sys.argv[1], weights_only=False)\n"
            "print(d['z'], struct.pack('<dd', d['n'].real, d['n'].imag).hex(), d['l'])\n"
            "torch.save({'z': complex(1, 2), 'n': complex(-0.0, float('nan')), 'l': [3j]}, sys.argv[2])\n")
    r = subprocess.run([old_python, "-c", code, str(ours), str(theirs)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["(1+2j)", bits(complex(-0.0, NAN)).hex(), "[3j]"]
    assert same(tensorseal.load(theirs), obj)
