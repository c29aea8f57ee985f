"""tensorseal's Python API: round trips of every dtype and structure through every
format, torch.load of tensorseal files and tensorseal.load of torch files, whole
checkpoints (Parameters, tied weights, OrderedDict _metadata, optimizer state),
numpy/ml_dtypes, device moves, errors (one class per kind, raised for real cases),
and hash/diff/explain/scan/verify equal to the CLI's --json output."""
from __future__ import annotations

import collections
import importlib
import json
import os
import pickle
import struct

import numpy as np
import pytest
import torch

import tensorseal
from conftest import run_tseal
from tensors import random_tensor

# Every dtype torch 2.13 can hold in a strided CPU tensor and tensorseal names.
ALL_DTYPES = [torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16,
              torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.complex32, torch.complex64, torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2,
              torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu]
LEGACY_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                 torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
SAFETENSORS_DTYPES = [d for d in ALL_DTYPES if d not in (torch.complex32, torch.complex128)]
NUMPY_DTYPES = [torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16,
                torch.int32, torch.int64, torch.float16, torch.float32, torch.float64, torch.complex64,
                torch.complex128]
FORMATS = {"torch-zip": ("pt", ALL_DTYPES), "torch-legacy": ("pt", LEGACY_DTYPES),
           "safetensors": ("safetensors", SAFETENSORS_DTYPES), "npz": ("npz", NUMPY_DTYPES)}


def elem_bytes(t) -> bytes:
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).tobytes()
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def same_tensor(a, b) -> bool:
    return type(a) is type(b) and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and \
        elem_bytes(a) == elem_bytes(b)


# ---- round trips ------------------------------------------------------------------

@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_dtype_round_trips_bit_exactly(fmt, tmp_path):
    ext, dtypes = FORMATS[fmt]
    tensors = {f"t{i}_{str(dt)[6:]}": random_tensor(dt, (3, 4), i) for i, dt in enumerate(dtypes)}
    tensors["scalar"] = random_tensor(torch.float32, (), 99)
    tensors["empty"] = torch.empty((0, 3), dtype=torch.int16)
    path = tmp_path / f"x.{ext}"
    tensorseal.save(tensors, path, format=fmt)
    loaded = tensorseal.load(path)
    assert list(loaded) == list(tensors) or set(loaded) == set(tensors)
    for k, t in tensors.items():
        assert same_tensor(loaded[k], t), k
    # Writers are canonical: saving again gives the same bytes, and so does save_bytes.
    again = tmp_path / f"y.{ext}"
    tensorseal.save(loaded, again, format=fmt)
    assert again.read_bytes() == path.read_bytes() == tensorseal.save_bytes(tensors, fmt)
    assert tensorseal.hash(path) == tensorseal.hash(tensors)


@pytest.mark.parametrize("fmt", ["torch-zip", "torch-legacy"])
def test_torch_loads_tensorseal_files(fmt, tmp_path):
    dtypes = FORMATS[fmt][1]
    sd = collections.OrderedDict((f"w{i}", random_tensor(dt, (2, 3), i)) for i, dt in enumerate(dtypes))
    sd._metadata = {"": {"version": 1}}
    path = tmp_path / "m.pt"
    tensorseal.save(sd, path, format=fmt)
    back = torch.load(path, weights_only=True)
    assert type(back) is collections.OrderedDict and back._metadata == {"": {"version": 1}}
    for k, t in sd.items():
        assert same_tensor(back[k], t)


@pytest.mark.parametrize("zipfile", [True, False])
def test_tensorseal_loads_torch_files(zipfile, tmp_path):
    dtypes = ALL_DTYPES if zipfile else LEGACY_DTYPES
    obj = {"tensors": [random_tensor(dt, (4,), i) for i, dt in enumerate(dtypes)],
           "step": 7, "lr": 1e-3, "name": "run", "flags": (True, None), "big": 2 ** 80}
    path = tmp_path / "t.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=zipfile)
    back = tensorseal.load(path)
    assert {k: v for k, v in back.items() if k != "tensors"} == {k: v for k, v in obj.items() if k != "tensors"}
    for a, b in zip(back["tensors"], obj["tensors"]):
        assert same_tensor(a, b)


def _training_checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied weights
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    opt.step()
    return model, opt


@pytest.mark.parametrize("ext", ["pt", "safetensors"])
def test_whole_checkpoint_round_trip(ext, tmp_path):
    model, opt = _training_checkpoint()
    params = dict(model.named_parameters(remove_duplicate=False))
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
            "params": [params["0.weight"], params["1.weight"]], "shape": torch.Size([2, 3]),
            "dtype": torch.bfloat16}
    path = tmp_path / f"ckpt.{ext}"
    tensorseal.save(ckpt, path)
    back = tensorseal.load(path)
    assert type(back["model"]) is collections.OrderedDict
    assert back["model"]._metadata == ckpt["model"]._metadata
    assert list(back["model"]) == list(ckpt["model"])
    # Tied weights share memory after load (safetensors: see test_safetensors_keeps_views_shared);
    # Parameters come back as Parameters; one object saved twice is one object.
    w0, w1 = back["model"]["0.weight"], back["model"]["1.weight"]
    if ext == "pt":
        assert w0.data_ptr() == w1.data_ptr() and w0.untyped_storage().data_ptr() == w1.untyped_storage().data_ptr()
        assert back["params"][0].untyped_storage().data_ptr() == w0.untyped_storage().data_ptr()
    p0, p1 = back["params"]
    assert isinstance(p0, torch.nn.Parameter) and p0.requires_grad and isinstance(p1, torch.nn.Parameter)
    assert p0.untyped_storage().data_ptr() == p1.untyped_storage().data_ptr()  # one Parameter saved twice
    if ext == "pt":
        assert p0 is p1
    assert back["optimizer"]["param_groups"] == ckpt["optimizer"]["param_groups"]
    for k, st in ckpt["optimizer"]["state"].items():
        for name, v in st.items():
            got = back["optimizer"]["state"][k][name]
            assert same_tensor(got, v) if isinstance(v, torch.Tensor) else got == v
    assert back["epoch"] == 3 and back["shape"] == torch.Size([2, 3]) and back["dtype"] is torch.bfloat16
    # The loaded checkpoint restores into fresh objects.
    model2, opt2 = _training_checkpoint()
    model2.load_state_dict(back["model"])
    opt2.load_state_dict(back["optimizer"])
    assert tensorseal.hash(back) == tensorseal.hash(ckpt) == tensorseal.hash(path)


def test_safetensors_keeps_views_shared(tmp_path):
    base = torch.randn(4, 4)
    path = tmp_path / "v.safetensors"
    tensorseal.save({"a": base, "a_again": base.detach(), "row": base[1]}, path)
    back = tensorseal.load(path)
    ptr = back["a"].untyped_storage().data_ptr()
    assert back["a_again"].untyped_storage().data_ptr() == ptr == back["row"].untyped_storage().data_ptr()


def test_mmap_false_copies_and_keeps_sharing(tmp_path):
    t = torch.arange(12, dtype=torch.float32)
    path = tmp_path / "v.pt"
    tensorseal.save({"a": t, "b": t[2:5], "p": torch.nn.Parameter(torch.ones(2))}, path)
    mapped = tensorseal.load(path)
    copied = tensorseal.load(path, mmap=False)
    assert copied["a"].data_ptr() != mapped["a"].data_ptr()
    assert copied["b"].untyped_storage().data_ptr() == copied["a"].untyped_storage().data_ptr()
    assert copied["b"].storage_offset() == 2 and copied["b"].tolist() == [2.0, 3.0, 4.0]
    assert isinstance(copied["p"], torch.nn.Parameter)
    copied["a"][0] = 100  # writable memory of our own
    assert copied["b"].tolist() == [2.0, 3.0, 4.0] and tensorseal.load(path)["a"][0] == 0


def test_device_move_keeps_structure(tmp_path):
    # The meta device stands in for an accelerator: same code path as "cuda".
    t = torch.arange(6, dtype=torch.float32)
    sd = collections.OrderedDict(a=t, b=t.view(2, 3), p=torch.nn.Parameter(torch.ones(3)))
    sd._metadata = {"": {"version": 2}}
    path = tmp_path / "d.pt"
    tensorseal.save(sd, path)
    back = tensorseal.load(path, device="meta")
    assert all(v.device.type == "meta" for v in back.values())
    assert isinstance(back["p"], torch.nn.Parameter) and back["b"].shape == (2, 3)
    assert back._metadata == {"": {"version": 2}}
    if torch.cuda.is_available():  # pragma: no cover - only on GPU machines
        cuda = tensorseal.load(path, device="cuda")
        assert cuda["a"].is_cuda and cuda["a"].untyped_storage().data_ptr() == cuda["b"].untyped_storage().data_ptr()
        assert torch.equal(cuda["b"].cpu(), t.view(2, 3))


def test_numpy_framework_uses_ml_dtypes(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    tensors = {"bf16": random_tensor(torch.bfloat16, (3,), 1), "f8": random_tensor(torch.float8_e4m3fn, (5,), 2),
               "f8b": random_tensor(torch.float8_e5m2, (2, 2), 3), "i": torch.arange(4)}
    path = tmp_path / "np.safetensors"
    tensorseal.save(tensors, path)
    arrays = tensorseal.load(path, framework="numpy")
    assert arrays["bf16"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert arrays["f8"].dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert arrays["f8b"].dtype == np.dtype(ml_dtypes.float8_e5m2) and arrays["f8b"].shape == (2, 2)
    for k, t in tensors.items():
        assert elem_bytes(arrays[k]) == elem_bytes(t)
    # numpy in, same canonical bytes and hash as the torch tensors.
    assert tensorseal.save_bytes(arrays, "safetensors") == path.read_bytes()
    assert tensorseal.hash(arrays) == tensorseal.hash(path)
    copied = tensorseal.load(path, framework="numpy", mmap=False)
    assert copied["i"].flags.writeable and elem_bytes(copied["i"]) == elem_bytes(tensors["i"])


def test_load_bytes_and_save_bytes():
    obj = {"w": torch.randn(3), "n": 1}
    for fmt in ("torch-zip", "torch-legacy", "safetensors"):
        if fmt == "safetensors":
            obj = {"w": obj["w"]}
        data = tensorseal.save_bytes(obj, fmt)
        back = tensorseal.load_bytes(data)
        assert same_tensor(back["w"], obj["w"])


# ---- errors: one class per kind, each raised by a real case ----------------------------

def test_error_classes_derive_from_error():
    for cls in (tensorseal.CorruptFileError, tensorseal.UnsafePickleError, tensorseal.UnsupportedError,
                tensorseal.LimitError, tensorseal.IoError, tensorseal.InvalidArgumentError,
                tensorseal.InternalError):
        assert issubclass(cls, tensorseal.Error)
    assert issubclass(tensorseal.IoError, OSError) and issubclass(tensorseal.InvalidArgumentError, ValueError)
    assert issubclass(tensorseal.UnsafePickleError, pickle.UnpicklingError)


def test_corrupt_file_error(tmp_path):
    path = tmp_path / "c.safetensors"
    tensorseal.save({"w": torch.ones(4)}, path)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(tensorseal.CorruptFileError) as e:
        tensorseal.load(path)
    err = e.value
    assert err.file == str(path) and err.rule.startswith("safetensors/") and err.rule in str(err)
    assert str(path) in str(err)


def test_corrupt_error_carries_offset(tmp_path):
    path = tmp_path / "h.safetensors"
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    header += b" " * (-len(header) % 8)
    body = struct.pack("<Q", len(header)) + header + b"\0" * 4  # 4 of 8 data bytes
    path.write_bytes(body)
    with pytest.raises(tensorseal.CorruptFileError) as e:
        tensorseal.load(path)
    err = e.value
    end = len(body)  # where the missing data bytes should have been
    assert (err.rule, err.file, err.offset) == ("safetensors/buffer-length", str(path), end)
    assert str(err) == f"{path}: byte {end}: [safetensors/buffer-length] {err.detail}"


def test_limit_error_from_header_length(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 41) + b"{}")
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(path)
    assert (e.value.rule, e.value.offset) == ("safetensors/header-too-large", 0)


def test_unsupported_error(tmp_path):
    path = tmp_path / "u.bin"
    path.write_bytes(b"definitely not a checkpoint format" * 4)
    with pytest.raises(tensorseal.UnsupportedError) as e:
        tensorseal.load(path)
    assert e.value.rule == "detect/unknown-format" and e.value.file == str(path)


def test_io_error(tmp_path):
    missing = tmp_path / "missing.pt"
    with pytest.raises(tensorseal.IoError) as e:
        tensorseal.load(missing)
    assert e.value.rule.startswith("io/") and isinstance(e.value, OSError)


def test_invalid_argument_error(tmp_path):
    with pytest.raises(tensorseal.InvalidArgumentError):
        tensorseal.save({"m": torch.nn.Linear(2, 2)}, tmp_path / "x.pt")  # a module is code, not data
    with pytest.raises(tensorseal.InvalidArgumentError):
        tensorseal.save({"w": torch.ones(1)}, tmp_path / "x.unknownext")
    with pytest.raises(tensorseal.InvalidArgumentError):
        tensorseal.save_bytes({"w": torch.ones(1)}, "no-such-format")


def test_a_str_that_is_not_utf8_is_refused_clearly(tmp_path):
    # A lone surrogate (what surrogateescape decoding and pickle's surrogatepass give):
    # tensorseal's text is UTF-8, so it is refused as a key, as a value and in a dict of
    # 64+ tensors (the streamed save), with nothing written.
    lone = "w\udc80"
    cases = [{lone: torch.ones(1)}, {"w": lone}, {f"{lone}{i}": torch.ones(1) for i in range(70)}]
    for obj in cases:
        for ext in ("pt", "safetensors"):
            with pytest.raises(tensorseal.InvalidArgumentError, match=r"holds a lone surrogate: tensorseal's text is"):
                tensorseal.save(obj, tmp_path / f"x.{ext}")
        with pytest.raises(tensorseal.InvalidArgumentError, match="lone surrogate"):
            tensorseal.hash(obj)
    for metadata in ({lone: "v"}, {"k": lone}):
        with pytest.raises(tensorseal.InvalidArgumentError, match="holds a lone surrogate"):
            tensorseal.save({"w": torch.ones(1)}, tmp_path / "m.safetensors", metadata=metadata)
        with pytest.raises(tensorseal.InvalidArgumentError, match="holds a lone surrogate"):
            tensorseal.save_bytes({"w": torch.ones(1)}, "safetensors", metadata=metadata)
        with pytest.raises(tensorseal.InvalidArgumentError, match="holds a lone surrogate"):
            tensorseal.safetensors.save({"w": torch.ones(1)}, metadata=metadata)  # the drop-in too
    with pytest.raises(tensorseal.InvalidArgumentError, match="metadata keys and values are str, not int"):
        tensorseal.save({"w": torch.ones(1)}, tmp_path / "m.safetensors", metadata={"k": 1})
    assert list(tmp_path.iterdir()) == []


def test_limit_error(tmp_path):
    # A pickle nesting lists 5000 deep: far past Limits::max_depth (1000).
    data = b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b"."
    path = tmp_path / "deep.pkl"
    path.write_bytes(data)
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(path)
    assert "depth" in e.value.rule


def test_unsafe_pickle_error(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "x": Evil()}, path)
    # tensorseal.load never runs it: the call stays data.
    obj = tensorseal.load(path)
    assert isinstance(obj["x"], tensorseal.Opaque) and obj["x"].callable.name == "system"
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        tensorseal.torch.load(path)  # weights_only=True, like torch.load
    assert e.value.rule == "scan/dangerous-global" and e.value.file == str(path)
    assert "system" in str(e.value)


def test_errors_pickle_with_their_fields(tmp_path):
    with pytest.raises(tensorseal.IoError) as e:
        tensorseal.load(tmp_path / "nope.safetensors")
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is tensorseal.IoError and back.rule == e.value.rule and back.file == e.value.file


# ---- tools: same results as the CLI ---------------------------------------------------

@pytest.fixture()
def pair(tmp_path):
    torch.manual_seed(1)
    sd = {"a": torch.randn(8, 8), "b": torch.arange(5), "c": torch.randn(3)}
    a = tmp_path / "a.pt"
    torch.save(sd, a)
    changed = dict(sd, a=sd["a"].to(torch.bfloat16).to(torch.float32), c=sd["c"] + 1)
    b = tmp_path / "b.safetensors"
    tensorseal.save(changed, b)
    return a, b


def _cli_json(*args):
    r = run_tseal(*args, "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_hash_matches_cli(pair):
    a, b = pair
    for p in (a, b):
        r = run_tseal("hash", p)
        assert r.stdout.split()[0] == tensorseal.hash(p)
        r = run_tseal("hash", "--fast", p)
        assert r.stdout.split()[0] == tensorseal.hash(p, fast=True)


def test_cli_hash_of_many_files_prints_each_in_order_and_reports_the_bad_one(pair, tmp_path):
    a, b = pair
    bad = tmp_path / "bad.pt"
    data = bytearray(a.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a tensor record: a CRC mismatch
    bad.write_bytes(bytes(data))
    files = [a, bad, b, tmp_path / "absent.pt", a]
    for flags in ((), ("--threads", "1"), ("--fast",)):
        r = run_tseal("hash", *flags, *files)
        assert r.returncode == 2
        fast = "--fast" in flags
        assert r.stdout.splitlines() == [f"{tensorseal.hash(p, fast=fast)}  {p}" for p in (a, b, a)]
        errors = r.stderr.splitlines()
        assert len(errors) == 2 and str(bad) in errors[0] and "absent.pt" in errors[1], r.stderr
        assert all(e.startswith("tseal: error: ") for e in errors)


def test_diff_matches_cli(pair):
    a, b = pair
    assert tensorseal.diff(str(a), str(b)) == _cli_json("diff", a, b)
    assert tensorseal.diff(a, b, atol=1e-2) == _cli_json("diff", a, b, "--atol", "0.01")
    same = tensorseal.diff(a, a)
    assert same == _cli_json("diff", a, a)


def test_diff_of_objects(pair):
    a, _ = pair
    loaded = tensorseal.load(a)
    report = tensorseal.diff(a, loaded)
    assert report["file_a"] == str(a) and report["file_b"] == "<object>" and report["equal"] is True
    assert {**report, "file_b": str(a)} == tensorseal.diff(a, a)
    changed = dict(loaded, b=loaded["b"] + 1)
    r = tensorseal.diff(loaded, changed)
    assert r["equal"] is False and [t["path"] for t in r["tensors"] if not t["equal"]] == ["b"]


def test_diff_writes_report(pair, tmp_path):
    a, b = pair
    html = tmp_path / "r.html"
    tensorseal.diff(a, b, report=html)
    assert html.read_text().lstrip().lower().startswith("<!doctype html")


def test_explain_matches_cli(pair, tmp_path):
    a, b = pair
    assert tensorseal.explain(a, b) == _cli_json("explain", a, b)
    # The classic case: the same state_dict saved by torch under two names.
    sd = {"w": torch.ones(3)}
    x, y = tmp_path / "x.pt", tmp_path / "y.pt"
    torch.save(sd, x)
    torch.save(sd, y)
    ours = tensorseal.explain(x, y)
    assert ours == _cli_json("explain", x, y)
    assert any("prefix" in d["topic"] for d in ours["differences"])


def test_scan_matches_cli(tmp_path):
    path = tmp_path / "s.pt"
    torch.save({"w": torch.ones(2), "f": collections.Counter(a=1)}, path)
    assert tensorseal.scan(path) == _cli_json("scan", path)
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R.")
    res = tensorseal.scan(evil)
    assert res == _cli_json("scan", evil) and res["verdict"] == "dangerous"


def test_verify_matches_cli(pair, tmp_path):
    a, b = pair
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b.read_bytes()[:-1])
    res = tensorseal.verify(a, b, bad)
    r = run_tseal("verify", a, b, bad, "--json")
    assert res == json.loads(r.stdout)
    assert res["ok"] is False and [f["status"] for f in res["files"]] == ["ok", "ok", "corrupt"]


def test_inspect_matches_cli(pair):
    for p in pair:
        assert tensorseal.inspect(p) == _cli_json("inspect", p)


def test_read_exposes_facts_and_globals(pair):
    a, _ = pair
    c = tensorseal.read(a)
    assert c.format == "torch-zip" and c.file == str(a)
    assert any(topic == "zip.prefix" for topic, _, _ in c.facts)
    assert ("torch._utils", "_rebuild_tensor_v2") in {(m, n) for m, n, _ in c.globals}


def test_typed_package():
    pkg = os.path.dirname(tensorseal.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    tst = importlib.import_module("tensorseal.torch")
    tss = importlib.import_module("tensorseal.safetensors")
    assert tst.load.__doc__ and tss.safe_open.__doc__
    assert tensorseal.torch is tst and tensorseal.safetensors is tss
    # Submodules never shadow the real packages.
    import safetensors
    assert torch.__name__ == "torch" and safetensors.__name__ == "safetensors"


def test_bare_storages_round_trip(tmp_path):
    import warnings
    t = torch.arange(4, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated in torch
        obj = {"s": t.storage(), "t": t, "u": torch.ones(3).untyped_storage()}
        path = tmp_path / "st.pt"
        torch.save(obj, path)
        back = tensorseal.load(path)
        # Bare storages come back untyped (the modern torch storage), sharing memory.
        assert isinstance(back["s"], torch.UntypedStorage) and back["s"].nbytes() == 16
        assert back["s"].data_ptr() == back["t"].untyped_storage().data_ptr()
        assert bytes(back["u"]) == bytes(obj["u"])
        # Saving a typed storage keeps its dtype; torch reads it back.
        ours = tmp_path / "ours.pt"
        tensorseal.save(obj, ours)
        again = torch.load(ours, weights_only=True)
        assert again["s"].tolist() == [0, 1, 2, 3] and again["s"].dtype == torch.int32
    assert tensorseal.hash(ours) == tensorseal.hash(path) == tensorseal.hash(obj)


def test_numpy_when_torch_is_not_importable(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "n.safetensors"
    tensorseal.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2, dtype=torch.bfloat16)},
                    path)
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, tensorseal\n"
            "d = tensorseal.load(sys.argv[1])\n"
            "assert 'torch' not in {type(v).__module__.split('.')[0] for v in d.values()}\n"
            "print(type(d['w']).__name__, d['w'].tolist(), d['b'].dtype, tensorseal.hash(d) == tensorseal.hash(sys.argv[1]))")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[0] == "ndarray [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] bfloat16 True"


def test_extension_stub_lists_every_binding():
    import ast
    core = importlib.import_module("tensorseal._tensorseal")
    stub = os.path.join(os.path.dirname(tensorseal.__file__), "_tensorseal.pyi")
    tree = ast.parse(open(stub).read())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound = {k for k in dir(core) if not k.startswith("_") and callable(getattr(core, k))}
    assert declared == bound, "regenerate python/tensorseal/_tensorseal.pyi (python -m nanobind.stubgen)"


def by_name_directory(rows) -> set:
    return {r["name"] for r in rows if r["directory"]}


def test_formats_table_is_the_cores():
    rows = tensorseal.formats()
    names = [r["name"] for r in rows]
    # detection order: zips, then tar archives (torch.load tries tarfile before pickle),
    # fixed magic numbers; a DCP .metadata (a pickle naming DCP's Metadata class) before
    # plain pickles; the shard index (JSON) last
    assert names == ["npz", "torch-zip", "torch-tar", "npy", "torch-legacy", "safetensors", "dcp", "pickle",
                     "hf-shards"]
    assert by_name_directory(rows) == {"dcp", "hf-shards"}
    by_name = {r["name"]: r for r in rows}
    assert by_name["torch-zip"]["aliases"] == ["pt", "pth", "torch"]
    assert by_name["torch-legacy"]["canonical"] == "torch-zip" and not by_name["pickle"]["writable"]
    assert by_name["torch-tar"]["canonical"] == "torch-zip" and not by_name["torch-tar"]["writable"]
    # Every alias the table lists is accepted by save(format=...).
    sd = {"w": torch.arange(3, dtype=torch.float32)}
    for r in rows:
        for name in [r["name"], *r["aliases"]]:
            if r["writable"] and r["name"] != "npy" and not r["directory"]:
                assert tensorseal.hash(tensorseal.load_bytes(tensorseal.save_bytes(sd, name))) == tensorseal.hash(sd)
    with pytest.raises(tensorseal.InvalidArgumentError):
        tensorseal.save_bytes(sd, "pickle")


def test_zero_size_tensors_of_different_dtypes_save(tmp_path):
    # Empty tensors all sit at one address (or none); they are not one storage.
    sd = {"a": torch.zeros(0), "b": torch.zeros(0, dtype=torch.int64), "c": torch.zeros(0, 3, dtype=torch.bfloat16)}
    for ext in ("pt", "safetensors"):
        path = tmp_path / f"empty.{ext}"
        tensorseal.save(sd, path)
        back = torch.load(path, weights_only=True) if ext == "pt" else tensorseal.load(path)
        assert {k: (v.dtype, tuple(v.shape)) for k, v in back.items()} == \
            {k: (v.dtype, tuple(v.shape)) for k, v in sd.items()}
    assert tensorseal.hash(tmp_path / "empty.pt") == tensorseal.hash(tmp_path / "empty.safetensors") == tensorseal.hash(sd)
