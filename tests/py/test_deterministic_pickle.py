"""tensorseal.deterministic_pickle(): pickle.dumps of tensors, storages, Parameters,
state_dicts and whole modules gives the same bytes in every process, and those bytes
load with plain pickle.loads where tensorseal is not importable (the seed's case)."""
from __future__ import annotations

import copy
import hashlib
import io
import json
import multiprocessing
import os
import pathlib
import pickle
import subprocess
import sys
import threading

import pytest
import torch

import tensorseal
from conftest import vectors_dir

# Builds the objects in a fresh process. Allocation noise makes addresses differ.
OBJECTS = r"""
import collections, os, torch
noise = [torch.empty(int.from_bytes(os.urandom(2), "little") + 1) for _ in range(int(os.urandom(1)[0]) % 7 + 1)]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
shared = torch.arange(6, dtype=torch.float32)
OBJECTS = {
    "int_tensor": torch.IntTensor([1]),
    "float_tensor": torch.randn(3, 4),
    "bf16": torch.randn(5).to(torch.bfloat16),
    "uint16": torch.arange(4, dtype=torch.int32).to(torch.uint16),
    "float8": torch.randn(4).to(torch.float8_e4m3fn),
    "view": torch.arange(10.0)[2:7:2],
    "typed_storage": torch.tensor([1, 2, 3], dtype=torch.int16).storage(),
    "untyped_storage": torch.tensor([1.5, 2.5]).untyped_storage(),
    "parameter": torch.nn.Parameter(torch.ones(2, 2)),
    "state_dict": model.state_dict(),
    "module": model,
    "nested": {"a": [shared, shared[1:]], "b": (torch.zeros(0), 3, "x")},
}
"""

CHILD = OBJECTS + r"""
import json, pickle, sys, warnings
warnings.simplefilter("ignore")
import tensorseal
with tensorseal.deterministic_pickle():
    out = {k: pickle.dumps(v).hex() for k, v in OBJECTS.items()}
plain = {k: pickle.dumps(v).hex() for k, v in OBJECTS.items() if k not in ("uint16", "float8")}
print(json.dumps({"det": out, "plain": plain}))
"""


def run_child(code: str, env_extra=None) -> str:
    env = dict(os.environ, PYTHONWARNINGS="ignore", **(env_extra or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture(scope="module")
def two_runs():
    runs = [json.loads(run_child(CHILD, {"PYTHONHASHSEED": seed})) for seed in ("1", "2")]
    return runs


def test_same_bytes_in_two_fresh_processes(two_runs):
    a, b = two_runs
    for k in a["det"]:
        assert a["det"][k] == b["det"][k], k


def test_plain_pickle_differs_without_it(two_runs):
    # The problem being solved: stock pickles embed memory addresses as storage keys.
    a, b = two_runs
    differing = [k for k in a["plain"] if a["plain"][k] != b["plain"][k]]
    assert "int_tensor" in differing and "module" in differing


def test_seed_case_exact_code(two_runs):
    data = bytes.fromhex(two_runs[0]["det"]["int_tensor"])
    t = pickle.loads(data)
    assert t.dtype == torch.int32 and t.tolist() == [1]
    # Same content as the seed's two torch 1.5 pickles (which differ from each other).
    vectors = vectors_dir()
    seeds = sorted(vectors.glob("seed_pickle_torch15_run*.bin")) if vectors.exists() else []
    if seeds:
        hashes = {tensorseal.hash(tensorseal.load_bytes(p.read_bytes())) for p in seeds}
        assert hashes == {tensorseal.hash(tensorseal.load_bytes(data))}


SEED_SAVE = r"""
import io, sys, torch, tensorseal.torch as tst
f = io.BytesIO()
tst.save(torch.IntTensor([1]), f, _use_new_zipfile_serialization=sys.argv[1] == "zip")  # the seed's code, drop-in
print(f.getvalue().hex())
"""


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_seed_torch_save_is_deterministic_with_the_dropin(fmt):
    outs = set()
    for seed in ("1", "2"):
        r = subprocess.run([sys.executable, "-c", SEED_SAVE, fmt], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONHASHSEED=seed))
        assert r.returncode == 0, r.stderr[-2000:]
        outs.add(r.stdout.strip())
    assert len(outs) == 1
    t = torch.load(io.BytesIO(bytes.fromhex(outs.pop())), weights_only=True)
    assert t.dtype == torch.int32 and t.tolist() == [1]


LOADER = r"""
import sys
sys.modules["tensorseal"] = None  # importing tensorseal now fails: loads must not need it
import pickle, json, torch, warnings
warnings.simplefilter("ignore")
try:
    import tensorseal
    raise SystemExit("tensorseal importable")
except ImportError:
    pass
out = {}
for line in sys.stdin:
    name, hexdata = line.split()
    obj = pickle.loads(bytes.fromhex(hexdata))
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, (torch.storage.TypedStorage, torch.UntypedStorage)):
        obj = {"storage": torch.tensor([], dtype=torch.uint8).set_(obj if isinstance(obj, torch.UntypedStorage)
                                                                   else obj._untyped_storage)}
    if isinstance(obj, torch.Tensor):
        obj = {"t": obj}
    flat = {}
    def walk(p, o):
        if isinstance(o, torch.Tensor):
            flat[p] = [str(o.dtype), list(o.shape), o.detach().contiguous().view(-1).view(torch.uint8).tolist()]
        elif isinstance(o, dict):
            for k, v in o.items(): walk(p + "." + str(k), v)
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o): walk(p + "." + str(i), v)
    walk(name, obj)
    out[name] = flat
print(json.dumps(out))
"""


def test_bytes_load_without_tensorseal(two_runs):
    det = two_runs[0]["det"]
    for data in det.values():
        assert b"tensorseal" not in bytes.fromhex(data)
    r = subprocess.run([sys.executable, "-c", LOADER], input="".join(f"{k} {v}\n" for k, v in det.items()),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = json.loads(r.stdout)
    assert set(loaded) == set(det)
    # The values are the ones a stock pickle round trip gives.
    ns: dict = {}
    exec(OBJECTS, ns)
    objs = ns["OBJECTS"]
    int_t = loaded["int_tensor"]["int_tensor.t"]
    assert int_t == ["torch.int32", [1], [1, 0, 0, 0]]
    ft = objs["float_tensor"]
    assert loaded["float_tensor"]["float_tensor.t"][2] == ft.view(-1).view(torch.uint8).tolist()
    u16 = loaded["uint16"]["uint16.t"]
    assert u16[0] == "torch.uint16" and u16[2] == objs["uint16"].view(torch.uint8).tolist()
    assert loaded["view"]["view.t"][1] == [3]
    sd = loaded["module"]
    assert set(sd) == {f"module.{k}" for k in objs["module"].state_dict()}
    assert sd["module.0.weight"][2] == objs["module"].state_dict()["0.weight"].view(-1).view(torch.uint8).tolist()
    assert loaded["typed_storage"]["typed_storage.storage"][2] == [1, 0, 2, 0, 3, 0]


def test_torch_113_loads_the_bytes(two_runs, tmp_path):
    py = "/usr/bin/python3"
    probe = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    assert probe.returncode == 0, "make setup installs Debian's python3-torch (torch 1.13): " + probe.stderr[-500:]
    data = two_runs[0]["det"]["int_tensor"]
    code = "import pickle, sys; t = pickle.loads(bytes.fromhex(sys.argv[1])); print(t.dtype, t.tolist())"
    r = subprocess.run([py, "-c", code, data], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "torch.int32 [1]", r.stderr[-2000:]


# ---- in-process behaviour ---------------------------------------------------------

def test_round_trip_values_in_process():
    t = torch.randn(3, 3)
    p = torch.nn.Parameter(torch.randn(2))
    sd = torch.nn.Linear(2, 2).state_dict()
    with tensorseal.deterministic_pickle():
        b1 = pickle.dumps((t, p, sd))
        b2 = pickle.dumps((t, p, sd))
        assert pickle.dumps(torch.IntTensor([1])) == pickle.dumps(torch.IntTensor([1]))
    assert b1 == b2
    t2, p2, sd2 = pickle.loads(b1)
    assert torch.equal(t2, t) and isinstance(p2, torch.nn.Parameter) and torch.equal(p2, p)
    assert all(torch.equal(sd2[k], sd[k]) for k in sd)


def test_patch_is_restored_and_nests():
    typed = torch.storage.TypedStorage.__dict__["__reduce__"]
    assert "__reduce__" not in torch.storage.UntypedStorage.__dict__
    assert not tensorseal.is_enabled()
    with tensorseal.deterministic_pickle():
        tensorseal.enable()
        with tensorseal.deterministic_pickle():
            assert tensorseal.is_enabled()
        tensorseal.disable()
        assert tensorseal.is_enabled() and torch.storage.TypedStorage.__dict__["__reduce__"] is not typed
    assert not tensorseal.is_enabled()
    assert torch.storage.TypedStorage.__dict__["__reduce__"] is typed
    assert "__reduce__" not in torch.storage.UntypedStorage.__dict__
    tensorseal.disable()  # unmatched disable: no-op
    assert torch.storage.TypedStorage.__dict__["__reduce__"] is typed


def test_restored_after_exception():
    typed = torch.storage.TypedStorage.__dict__["__reduce__"]
    with pytest.raises(ZeroDivisionError):
        with tensorseal.deterministic_pickle():
            1 / 0
    assert torch.storage.TypedStorage.__dict__["__reduce__"] is typed and not tensorseal.is_enabled()


def test_thread_safe_enable_disable():
    typed = torch.storage.TypedStorage.__dict__["__reduce__"]
    t = torch.arange(5, dtype=torch.int32)
    with tensorseal.deterministic_pickle():
        expected = pickle.dumps(t)
    errors = []

    def worker():
        try:
            for _ in range(50):
                with tensorseal.deterministic_pickle():
                    if pickle.dumps(t) != expected:
                        errors.append("bytes differ")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert torch.storage.TypedStorage.__dict__["__reduce__"] is typed and not tensorseal.is_enabled()


def test_deepcopy_and_module_copy():
    model = torch.nn.Linear(3, 3)
    with tensorseal.deterministic_pickle():
        clone = copy.deepcopy(model)
        t = torch.randn(4)
        tc = copy.deepcopy(t)
        s = copy.deepcopy(t.untyped_storage())
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), clone.parameters()))
    assert torch.equal(t, tc) and tc.data_ptr() != t.data_ptr() and s.nbytes() == 16


def test_torch_save_under_context_unchanged():
    sd = {"w": torch.randn(3)}
    before = io.BytesIO()
    torch.save(sd, before)
    with tensorseal.deterministic_pickle():
        inside = io.BytesIO()
        torch.save(sd, inside)
    # torch.save pickles storages as persistent ids, not through __reduce__.
    assert inside.getvalue() == before.getvalue()
    assert torch.equal(torch.load(io.BytesIO(inside.getvalue()))["w"], sd["w"])


def test_shared_storages_pickle_each_view():
    base = torch.arange(4, dtype=torch.int64)
    with tensorseal.deterministic_pickle():
        a, b = pickle.loads(pickle.dumps([base, base[1:]]))
    assert a.tolist() == [0, 1, 2, 3] and b.tolist() == [1, 2, 3]


def _child_digest(_: int) -> str:
    import warnings
    warnings.simplefilter("ignore")
    ns: dict = {}
    exec(OBJECTS, ns)
    with tensorseal.deterministic_pickle():
        return hashlib.sha256(b"".join(pickle.dumps(v) for v in ns["OBJECTS"].values())).hexdigest()


def test_multiprocessing_spawn_children_agree():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        digests = pool.map(_child_digest, range(4))
    assert len(set(digests)) == 1
    assert digests[0] == _child_digest(0)


def test_docs_mention_torch_save_determinism():
    doc = tensorseal.deterministic_pickle.__doc__ or ""
    module_doc = sys.modules["tensorseal._pickle"].__doc__ or ""
    assert "torch.save" in module_doc and "pickle.loads" in doc
    assert pathlib.Path(tensorseal.__file__).exists()
