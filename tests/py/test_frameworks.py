"""Real producers (issue 31): checkpoints written by the training frameworks' own save
paths (tests/py/producers/frameworks.py: Lightning Trainer + ModelCheckpoint and
Fabric, the Hugging Face Trainer, accelerate, peft, diffusers, sentence-transformers,
torch.ao quantization, torch.compile, swa_utils, torch.export, torch.jit) and a real
Python 2.7 (producers/py2_torch_save.py). For every checkpoint file: tensorseal loads
what torch.load loads, `tseal canon` keeps every value (hash, torch 2.13 and torch 1.13
read it back), `tseal convert` keeps flat tensor dicts, `tseal scan` lists the
globals; and each framework resumes from the canonical rewrite exactly as from the
original."""
from __future__ import annotations

import _compat_pickle
import argparse
import collections
import copyreg
import io
import json
import math
import os
import pathlib
import pickle
import shutil
import subprocess
import zipfile

import numpy as np
import pytest
import safetensors.torch
import torch

import tensorseal
import tensorseal.torch
from conftest import run_tseal
from producers import frameworks as fw

PY2_PRODUCER = pathlib.Path(__file__).parent / "producers" / "py2_torch_save.py"

# Every checkpoint file the producers write, relative to the `produced` root.
TORCH_FILES = [
    "lightning_dictconfig/step=2.ckpt", "lightning_dict/step=2.ckpt", "fabric/fabric.ckpt",
    "hf/checkpoint-2/optimizer.pt", "hf/checkpoint-2/scheduler.pt", "hf/checkpoint-2/rng_state.pth",
    "hf/checkpoint-2/training_args.bin",
    "acc_safe/optimizer.bin", "acc_safe/scheduler.bin", "acc_safe/random_states_0.pkl",
    "acc_safe/custom_checkpoint_0.pkl",
    "acc_bin/pytorch_model.bin", "acc_bin/optimizer.bin", "acc_bin/scheduler.bin", "acc_bin/random_states_0.pkl",
    "acc_bin/custom_checkpoint_0.pkl",
    "peft/bin/adapter_model.bin", "diffusers/bin/diffusion_pytorch_model.bin",
    "torch/quant_dynamic.pt", "torch/quant_fx.pt", "torch/compiled.pt", "torch/swa.pt",
    "py2/py2_checkpoint.pt",
]
SAFETENSORS_FILES = [
    "hf/checkpoint-2/model.safetensors", "acc_safe/model.safetensors", "peft/safe/adapter_model.safetensors",
    "diffusers/safe/diffusion_pytorch_model.safetensors", "diffusers/vae/diffusion_pytorch_model.safetensors",
    "st/model.safetensors",
]
# Files that are a flat {name: tensor} dict: `tseal convert` to .safetensors keeps them.
FLAT = {"acc_bin/pytorch_model.bin", "peft/bin/adapter_model.bin", "diffusers/bin/diffusion_pytorch_model.bin",
        "torch/compiled.pt", "torch/swa.pt"}


def py2_python() -> str:
    """A real Python 2.7 (the one tests/fixtures/gen_pickle.py uses)."""
    for cand in (shutil.which("python2.7"), os.path.expanduser("~/.pyenv/versions/2.7.18/bin/python")):
        if cand and subprocess.run([cand, "-c", "import cPickle"], capture_output=True).returncode == 0:
            return cand
    raise AssertionError("Python 2.7 missing: tests/py/producers/py2_torch_save.py needs it (pyenv 2.7.18)")


@pytest.fixture(scope="module", autouse=True)
def _torch_flags_restored():
    """Trainer(deterministic=True) turns on torch's deterministic algorithms for the whole
    process; the tests after this module must not inherit it."""
    det = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(det)


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("frameworks")
    for d in ("lightning_dictconfig", "lightning_dict", "fabric", "hf", "acc_safe", "acc_bin", "peft", "diffusers",
              "st", "torch", "py2"):
        (root / d).mkdir()
    fw.make_lightning(root / "lightning_dictconfig", "dictconfig")
    fw.make_lightning(root / "lightning_dict", "dict")
    fw.make_fabric(root / "fabric")
    fw.make_hf_trainer(root / "hf")
    fw.make_accelerate(root / "acc_safe", safe=True)
    fw.make_accelerate(root / "acc_bin", safe=False)
    fw.make_peft(root / "peft")
    fw.make_diffusers(root / "diffusers")
    fw.make_sentence_transformers(root / "st")
    fw.make_torch_files(root / "torch")
    r = subprocess.run([py2_python(), str(PY2_PRODUCER), str(root / "py2")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return root


@pytest.fixture(scope="module")
def canon(produced, tmp_path_factory) -> pathlib.Path:
    """`tseal canon` of every checkpoint file, at the same relative path."""
    out = tmp_path_factory.mktemp("canon")
    for rel in TORCH_FILES + SAFETENSORS_FILES:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        r = run_tseal("canon", produced / rel, "-o", out / rel)
        assert r.returncode == 0, f"{rel}: {r.stderr}"
    return out


# ---- one deep comparison -------------------------------------------------------------

def _bits(t: torch.Tensor) -> bytes:
    if t.is_quantized:
        t = t.int_repr()
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _qparams(t: torch.Tensor) -> tuple:
    if not t.is_quantized:
        return ()
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return (t.qscheme(), t.q_scale(), t.q_zero_point())
    return (t.qscheme(), _bits(t.q_per_channel_scales()), _bits(t.q_per_channel_zero_points()), t.q_per_channel_axis())


def _names(glob, cls) -> bool:
    return isinstance(glob, tensorseal.Global) and (glob.module, glob.name) == (cls.__module__, cls.__qualname__)


def assert_same(ours, theirs, where: str = "$", seen=None) -> None:
    """`ours` holds the values of `theirs` (what torch.load gave): tensors by dtype, shape,
    quantization and bytes (NaN-safe), containers recursively, numpy arrays by bytes.
    Where torch rebuilt an object of a class outside the containers, `ours` is either
    the same class (compared by its __dict__) or a tensorseal.Opaque whose callable (or
    first argument, for copyreg's reconstructor) names the class."""
    seen = {} if seen is None else seen  # pairs compared (or being compared: cycles), kept alive
    if (id(ours), id(theirs)) in seen:
        return
    seen[id(ours), id(theirs)] = (ours, theirs)
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), f"{where}: {type(ours)}"
        assert (ours.dtype, tuple(ours.shape), type(ours) is torch.nn.Parameter) == (
            theirs.dtype, tuple(theirs.shape), type(theirs) is torch.nn.Parameter), where
        assert _qparams(ours) == _qparams(theirs) and _bits(ours) == _bits(theirs), where
        assert ours.requires_grad == theirs.requires_grad, where
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert ours.tobytes() == theirs.tobytes(), where
    elif isinstance(theirs, dict) and (type(theirs) in (dict, collections.OrderedDict) or type(ours) is type(theirs)):
        assert isinstance(ours, dict), f"{where}: {type(ours)}"
        assert list(ours) == list(theirs), where
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{where}[{k!r}]", seen)
    elif isinstance(theirs, (list, tuple)) and type(theirs).__module__ == "builtins":
        assert type(ours) is type(theirs) and len(ours) == len(theirs), f"{where}: {type(ours)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]", seen)
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours), where
    elif theirs is None or type(theirs) in (bool, int, float, complex, str, bytes, bytearray):
        assert type(ours) is type(theirs) and ours == theirs, f"{where}: {ours!r} != {theirs!r}"
    elif isinstance(theirs, type) or callable(theirs) and hasattr(theirs, "__qualname__"):
        assert _names(ours, theirs) or ours is theirs, f"{where}: {ours!r} for {theirs!r}"
    elif isinstance(ours, tensorseal.Opaque):
        # What pickle would call to rebuild `theirs` at protocol 2 is what tensorseal kept.
        rv = theirs.__reduce_ex__(2)
        func, args = rv[0], tuple(rv[1])
        if func is copyreg.__newobj__:
            func, args = args[0], args[1:]
        assert _names(ours.callable, func), f"{where}: {ours!r} for {type(theirs)}"
        assert_same(tuple(ours.args), args, f"{where}.args", seen)
        if len(rv) > 2 and rv[2] is not None:
            assert ours.has_state, where
            assert_same(ours.state, rv[2], f"{where}.state", seen)
        assert_same(list(ours.list_items), list(rv[3]) if len(rv) > 3 and rv[3] else [], f"{where}.items", seen)
        assert_same([list(kv) for kv in ours.dict_items],
                    [list(kv) for kv in rv[4]] if len(rv) > 4 and rv[4] else [], f"{where}.items", seen)
    elif type(ours) is type(theirs) and hasattr(theirs, "__dict__"):
        assert_same(vars(ours), vars(theirs), f"{where}.__dict__", seen)
    else:
        assert type(ours) is type(theirs) and ours == theirs, f"{where}: {ours!r} != {theirs!r}"


# ---- every file ------------------------------------------------------------------------

def torch_load(path):
    return torch.load(path, weights_only=False, map_location="cpu")


@pytest.mark.parametrize("rel", TORCH_FILES)
def test_tensorseal_loads_what_torch_loads(produced, rel):
    want = torch_load(produced / rel)
    assert_same(tensorseal.torch.load(produced / rel, weights_only=False), want)
    assert_same(tensorseal.load(produced / rel), want)


@pytest.mark.parametrize("rel", SAFETENSORS_FILES)
def test_tensorseal_loads_what_safetensors_loads(produced, canon, rel):
    want = safetensors.torch.load_file(produced / rel)
    assert_same(tensorseal.load(produced / rel), want)
    assert_same(safetensors.torch.load_file(canon / rel), want)
    assert tseal_hash(canon / rel) == tseal_hash(produced / rel)
    assert_verified_and_equal(produced / rel, canon / rel)


def assert_verified_and_equal(src, out) -> None:
    """`tseal verify` passes both files and `tseal diff` finds no value changed."""
    for path in (src, out):
        r = run_tseal("verify", path)
        assert r.returncode == 0, f"{path}: {r.stdout[-500:]} {r.stderr[-500:]}"
    d = run_tseal("diff", src, out)
    assert d.returncode == 0, d.stdout[-1000:] + d.stderr[-500:]


def tseal_hash(path) -> str:
    r = run_tseal("hash", path)
    assert r.returncode == 0, f"{path}: {r.stderr}"
    return r.stdout.split()[0]


@pytest.mark.parametrize("rel", TORCH_FILES)
def test_canon_keeps_every_value(produced, canon, rel):
    assert tseal_hash(canon / rel) == tseal_hash(produced / rel)
    assert_verified_and_equal(produced / rel, canon / rel)
    want = torch_load(produced / rel)
    assert_same(torch_load(canon / rel), want)
    assert_same(tensorseal.torch.load(canon / rel, weights_only=False), want)


@pytest.mark.parametrize("rel", TORCH_FILES)
def test_weights_only_accepts_alike(produced, canon, rel):
    """torch.load(weights_only=True) reads the canonical rewrite wherever it reads the
    original, and where it refuses the original only for its encoding (a Python 2
    pickle); it refuses the rewrite where the original names a global outside its safe
    set. tensorseal.torch.load's default weights_only=True gives torch's values for
    every file whose globals scan classes safe (numpy's array reconstruction among
    them: docs/security.md), and refuses the others."""
    full = torch_load(produced / rel)
    try:
        assert_same(torch.load(produced / rel, weights_only=True), full)
    except pickle.UnpicklingError as e:
        if "Unsupported global" in str(e):
            with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
                torch.load(canon / rel, weights_only=True)
        else:
            assert_same(torch.load(canon / rel, weights_only=True), full)
    else:
        assert_same(torch.load(canon / rel, weights_only=True), full)
    if scan_verdict(produced / rel) == "safe":
        assert_same(tensorseal.torch.load(produced / rel), full)
    else:
        with pytest.raises(tensorseal.UnsafePickleError):
            tensorseal.torch.load(produced / rel)


def scan_verdict(path) -> str:
    r = run_tseal("scan", "--json", path)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["verdict"]


# torch 1.13 loads each original and its canonical rewrite and compares them itself.
OLD_TORCH_COMPARE = r"""
import json, sys, torch
def flat(v, where, out):
    if isinstance(v, torch.Tensor):
        t = (v.int_repr() if v.is_quantized else v).detach()
        out.append((where, str(v.dtype), list(v.shape), t.contiguous().view(-1).numpy().tobytes().hex()))
    elif isinstance(v, dict):
        for k in v: flat(v[k], where + "[%r]" % (k,), out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v): flat(x, where + "[%d]" % i, out)
    elif v is None or isinstance(v, (bool, int, float, str, bytes)):
        out.append((where, repr(v)))
    else:
        out.append((where, type(v).__module__ + "." + type(v).__qualname__))
    return out
res = {}
for a, b in zip(sys.argv[1::2], sys.argv[2::2]):
    got = []
    for p in (a, b):
        try:
            got.append(flat(torch.load(p, map_location="cpu"), "$", []))
        except Exception as e:
            got.append("%s: %s" % (type(e).__name__, str(e)[:300]))
    res[a] = {"orig": got[0] if isinstance(got[0], str) else "ok", "canon": got[1] if isinstance(got[1], str) else "ok",
              "equal": got[0] == got[1]}
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def old_torch_reads(produced, canon, old_python) -> dict:
    args = [str(p) for rel in TORCH_FILES for p in (produced / rel, canon / rel)]
    r = subprocess.run([old_python, "-c", OLD_TORCH_COMPARE, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return {pathlib.Path(k).relative_to(produced).as_posix(): v for k, v in json.loads(r.stdout).items()}


# The originals torch 1.13 cannot read either, and why: classes of packages that
# Debian's Python lacks (lightning, omegaconf, transformers), or a zip torch 2.x wrote
# with a newer storage layout. Asserted, so the list cannot go stale.
OLD_TORCH_CANNOT_READ = {
    "lightning_dictconfig/step=2.ckpt": "ModuleNotFoundError",
    "hf/checkpoint-2/training_args.bin": "ModuleNotFoundError",
    # numpy 2 pickles name numpy._core, which Debian's numpy 1.24 lacks.
    "hf/checkpoint-2/rng_state.pth": "ModuleNotFoundError: No module named 'numpy._core'",
    "acc_safe/random_states_0.pkl": "ModuleNotFoundError: No module named 'numpy._core'",
    "acc_bin/random_states_0.pkl": "ModuleNotFoundError: No module named 'numpy._core'",
}


@pytest.mark.parametrize("rel", TORCH_FILES)
def test_torch_113_reads_the_canonical_file(old_torch_reads, rel):
    got = old_torch_reads[rel]
    if rel in OLD_TORCH_CANNOT_READ:
        assert got["orig"].startswith(OLD_TORCH_CANNOT_READ[rel]), got
        return
    assert got["orig"] == "ok", got
    assert got["canon"] == "ok" and got["equal"], got


@pytest.mark.parametrize("rel", sorted(FLAT))
def test_convert_to_safetensors_keeps_the_tensors(produced, tmp_path, rel):
    want = torch_load(produced / rel)
    assert all(isinstance(v, torch.Tensor) for v in want.values()) and want
    out = tmp_path / "flat.safetensors"
    r = run_tseal("convert", produced / rel, out)
    assert r.returncode == 0, r.stderr
    got = safetensors.torch.load_file(out)
    assert sorted(got) == sorted(want)
    for k in want:
        assert_same(got[k], want[k].detach(), k)
    assert tseal_hash(out) == tseal_hash(produced / rel)


class _Recorder(pickle.Unpickler):
    """Lists the globals a pickle names, building nothing real."""

    def __init__(self, f) -> None:
        super().__init__(f)
        self.names: set = set()

    def find_class(self, module, name):
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol 2's Python 2 names, as pickle maps them
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        self.names.add((module, name))
        return _Stub

    def persistent_load(self, pid):
        return None


class _Stub:
    def __new__(cls, *a, **k):
        return object.__new__(cls)

    def __init__(self, *a, **k) -> None:
        pass

    def __call__(self, *a, **k):
        return _Stub()

    def __setstate__(self, state) -> None:
        pass

    def __setitem__(self, k, v) -> None:
        pass

    def append(self, v) -> None:
        pass

    def extend(self, v) -> None:
        pass


def pickled_globals(path: pathlib.Path) -> set:
    data = path.read_bytes()
    if data[:2] == b"PK":
        with zipfile.ZipFile(path) as z:
            streams = [z.read(n) for n in z.namelist() if n.endswith("data.pkl")]
    else:
        streams = [data]
    names: set = set()
    for s in streams:
        f = io.BytesIO(s)
        for _ in range(4 if s is data else 1):  # a legacy file: magic, version, sys_info, object
            rec = _Recorder(f)
            rec.load()
            names |= rec.names
    return names


@pytest.mark.parametrize("rel", TORCH_FILES)
def test_scan_lists_the_globals(produced, rel):
    r = run_tseal("scan", "--json", produced / rel)
    assert r.returncode in (0, 1), r.stderr
    found = {(f["module"], f["name"]) for f in json.loads(r.stdout)["findings"]}
    assert pickled_globals(produced / rel) <= found, sorted(pickled_globals(produced / rel) - found)


# ---- what torch gives as objects: the producers' own types -------------------------------

def test_rebuilt_objects_are_opaque_and_name_their_class(produced):
    args = tensorseal.load(produced / "hf/checkpoint-2/training_args.bin")
    assert isinstance(args, tensorseal.Opaque) and _names(args.callable, type(torch_load(
        produced / "hf/checkpoint-2/training_args.bin")))
    assert args.callable.name == "TrainingArguments"
    ckpt = tensorseal.load(produced / "lightning_dictconfig/step=2.ckpt")
    cfg = ckpt["hyper_parameters"]
    assert isinstance(cfg, tensorseal.Opaque) and cfg.callable == tensorseal.Global("omegaconf.dictconfig",
                                                                                    "DictConfig")
    plain = tensorseal.load(produced / "lightning_dict/step=2.ckpt")["hyper_parameters"]
    assert plain == {"hidden": 8, "act": "relu", "betas": [0.9, 0.999]}
    back = torch_load(produced / "lightning_dictconfig/step=2.ckpt")["hyper_parameters"]
    assert back == fw.lit_config()


def test_quantized_and_wrapped_state_dicts_have_their_keys(produced):
    dyn = tensorseal.load(produced / "torch/quant_dynamic.pt")
    packed = dyn["0._packed_params._packed_params"]
    assert packed[0].dtype == torch.qint8 and packed[0].is_quantized
    fx = tensorseal.load(produced / "torch/quant_fx.pt")
    assert fx["conv.weight"].qscheme() == torch.per_channel_affine
    assert list(tensorseal.load(produced / "torch/compiled.pt")) == ["_orig_mod.weight", "_orig_mod.bias"]
    swa = tensorseal.load(produced / "torch/swa.pt")
    assert int(swa["n_averaged"]) == 2 and "module.0.weight" in swa


# ---- programs, not checkpoints -------------------------------------------------------

def test_export_and_torchscript_archives_are_named_programs(produced):
    pt2, jit = produced / "torch/exported.pt2", produced / "torch/scripted.pt"
    for path, rule in ((pt2, "torch-zip/export-program"), (jit, "torch-zip/torchscript")):
        with pytest.raises(tensorseal.Error) as e:
            tensorseal.read(path)
        assert e.value.rule == rule
        out = run_tseal("verify", path)
        assert out.returncode == 2 and rule in out.stderr and "CORRUPT" not in out.stdout, out.stderr
        scan = run_tseal("scan", path)
        assert scan.returncode in (0, 1), scan.stderr
    assert "a program" in run_tseal("verify", pt2).stderr
    assert run_tseal("scan", jit).returncode == 1  # a program: never called safe
    assert torch.jit.load(str(jit))(torch.ones(1, 3)).shape == (1, 2)


# ---- Python 2 era ------------------------------------------------------------------------

def test_py2_checkpoint_values(produced):
    want = json.loads((produced / "py2/py2_expected.json").read_text())
    got = tensorseal.torch.load(produced / "py2/py2_checkpoint.pt", weights_only=False)
    sd = got["state_dict"]
    assert sd["conv1.weight"].tolist() == [want["conv1.weight"][:3], want["conv1.weight"][3:]]
    assert sd["fc.weight_t"].stride() == (1, 4) and torch.equal(sd["fc.weight_t"], sd["fc.weight"].t())
    assert sd["fc.tail"].tolist() == want["fc"][8:]
    assert sd["fc.weight"].untyped_storage().data_ptr() == sd["fc.weight_t"].untyped_storage().data_ptr()
    assert sd["bn.running_mean"].dtype == torch.float64 and sd["bn.running_mean"].tolist() == want["bn.running_mean"]
    assert got["note"] == "caf\xe9 \u2713" and got["arch"] == "lenet" and got["tags"] == ("py2", 2, None)
    assert tensorseal.read(produced / "py2/py2_checkpoint.pt").format == "torch-legacy"


def test_py2_latin1_str_is_refused_like_torch(produced):
    """A Python 2 str that is not UTF-8, under torch.load's default encoding."""
    path = produced / "py2/py2_latin1.pt"
    with pytest.raises(UnicodeDecodeError):
        torch.load(path, weights_only=False)
    with pytest.raises(tensorseal.Error, match=r"pickle/py2-string-encoding"):
        tensorseal.load(path)
    with pytest.raises(tensorseal.Error, match=r"pickle/py2-string-encoding"):
        tensorseal.torch.load(path, weights_only=False)


@pytest.mark.parametrize("encoding", ["latin1", "bytes"])
@pytest.mark.parametrize("name", ["py2_latin1.pt", "py2_checkpoint.pt"])
def test_py2_str_encoding_like_torch(produced, name, encoding):
    """torch.load(encoding=...) decodes each Python 2 str with that codec ("bytes" keeps
    them bytes, dict keys too; torch still decodes the persistent ids' b'storage' tags
    itself); tensorseal.torch.load gives the same values."""
    path = produced / "py2" / name
    want = torch.load(path, weights_only=False, encoding=encoding)
    arch = {"py2_latin1.pt": "caf\xe9", "py2_checkpoint.pt": "lenet"}[name]
    if encoding == "bytes":
        assert want[b"arch"] == arch.encode("latin1") and want["note"] == "caf\xe9 \u2713"  # u"" stays str
    else:
        assert want["arch"] == arch
    assert_same(tensorseal.torch.load(path, weights_only=False, encoding=encoding), want)


# ---- resume from the canonical rewrite ------------------------------------------------

@pytest.mark.parametrize("kind", ["dictconfig", "dict"])
def test_lightning_resumes_from_the_canonical_checkpoint(produced, canon, tmp_path, kind):
    rel = f"lightning_{kind}/step=2.ckpt"
    losses_o, weights_o = fw.lit_resume(tmp_path / "o", kind, produced / rel)
    losses_c, weights_c = fw.lit_resume(tmp_path / "c", kind, canon / rel)
    assert len(losses_o) == 1  # one step after step 2
    assert_same(losses_c, losses_o)
    assert_same(weights_c, weights_o)
    cls = fw.LitDictConfig if kind == "dictconfig" else fw.LitPlainDict
    a = cls.load_from_checkpoint(produced / rel, weights_only=False)
    b = cls.load_from_checkpoint(canon / rel, weights_only=False)
    assert a.hparams == b.hparams
    assert_same(b.state_dict(), a.state_dict())


def test_fabric_loads_the_canonical_checkpoint(produced, canon):
    a = fw.fabric_resume(produced / "fabric/fabric.ckpt")
    b = fw.fabric_resume(canon / "fabric/fabric.ckpt")
    assert a[0] == 2 and a[1] == {"lr": 1e-2}
    assert_same(b, a)


def canon_dir(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A copy of a checkpoint directory with every checkpoint file in it canonicalised."""
    shutil.copytree(src, dst)
    for p in sorted(dst.iterdir()):
        if p.suffix in (".pt", ".pth", ".bin", ".pkl", ".safetensors"):
            tmp = p.with_name(p.name + ".canon")
            r = run_tseal("canon", p, "-o", tmp)
            assert r.returncode == 0, f"{p.name}: {r.stderr}"
            os.replace(tmp, p)
    return dst


def test_hf_trainer_resumes_from_the_canonical_checkpoint(produced, tmp_path):
    ckpt = produced / "hf/checkpoint-2"
    assert {p.name for p in ckpt.iterdir()} >= {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth",
                                                 "training_args.bin", "trainer_state.json"}
    copy = canon_dir(ckpt, tmp_path / "canon" / "checkpoint-2")
    assert (copy / "optimizer.pt").read_bytes() != (ckpt / "optimizer.pt").read_bytes()  # rewritten
    losses_o, weights_o = fw.hf_resume(tmp_path / "o", ckpt)
    losses_c, weights_c = fw.hf_resume(tmp_path / "c", copy)
    assert len(losses_o) == 3  # trainer_state.json's two logged steps, then the resumed one
    assert losses_c == losses_o
    assert_same(weights_c, weights_o)
    start = safetensors.torch.load_file(ckpt / "model.safetensors")
    assert any(not torch.equal(weights_o[k], v) for k, v in start.items())  # the resumed step trained


@pytest.mark.parametrize("safe", [True, False])
def test_accelerate_loads_the_canonical_state(produced, tmp_path, safe):
    src = produced / ("acc_safe" if safe else "acc_bin")
    copy = canon_dir(src, tmp_path / "canon")
    a = fw.acc_resume(src)
    b = fw.acc_resume(copy)
    assert a[4]["step"] == 2
    assert_same(b, a)


@pytest.mark.parametrize("rel, outputs", [("peft/safe", fw.peft_outputs), ("peft/bin", fw.peft_outputs),
                                          ("diffusers/safe", fw.unet_outputs), ("diffusers/bin", fw.unet_outputs),
                                          ("diffusers/vae", fw.vae_outputs), ("st", fw.st_outputs)])
def test_framework_loads_the_canonical_save(produced, tmp_path, rel, outputs):
    """PeftModel / UNet2DModel.from_pretrained and SentenceTransformer(dir) load the
    canonical rewrite of their save_pretrained / save folder to the same outputs."""
    copy = canon_dir(produced / rel, tmp_path / "canon")
    assert_same(outputs(copy), outputs(produced / rel))


def test_deep_compare_sees_differences():
    """assert_same fails on what it must: one flipped bit, a dtype, a NaN against a
    number, a key order, an Opaque of another class or with other state."""
    nan = torch.tensor([1.0, float("nan")])
    assert_same({"a": nan.clone(), "b": [1, (2.0, "x")]}, {"a": nan, "b": [1, (2.0, "x")]})
    flipped = nan.clone()
    flipped.view(torch.int32)[0] ^= 1
    args = argparse.Namespace(lr=0.1, name="run")
    for ours, theirs in [(flipped, nan), (nan.double(), nan), (torch.tensor([1.0, 2.0]), nan),
                         ({"b": 1, "a": 2}, {"a": 2, "b": 1}), ([1], (1,)), (1, True),
                         (tensorseal.Opaque(tensorseal.Global("argparse", "ArgumentParser"), ()), args),
                         (tensorseal.Opaque(tensorseal.Global("argparse", "Namespace"), (), how=1,
                                            state={"lr": 0.2, "name": "run"}, has_state=True), args)]:
        with pytest.raises(AssertionError):
            assert_same(ours, theirs)
    assert_same(tensorseal.Opaque(tensorseal.Global("argparse", "Namespace"), (), how=1,
                                  state={"lr": 0.1, "name": "run"}, has_state=True), args)
