"""Canonical files load wherever the original loads (issue 31, class 6).

torch.load(weights_only=True) matches each pickled global by its exact name against
its allowlist, and the frameworks allowlist numpy's objects under the names of the
numpy they run with: transformers' Trainer (`trainer_pt_utils.safe_globals`, used by
`_load_rng_state`) and accelerate (`utils.other.TORCH_SAFE_GLOBALS`, used by
`load_state`) add `np._core.multiarray._reconstruct` under numpy 2, which is
"numpy._core.multiarray._reconstruct". Canon used to rename numpy 2's numpy._core to
numpy 1.x's numpy.core, so the Trainer refused the canonical rng_state.pth and
accelerate silently trained on with the wrong RNG ("Could not load random states").
Canon now keeps the spelling the source pickled (Tensor::numpy_module,
docs/formats/canonical-pt.md). Every file here is made by its real producer: the
Trainer's own _save_rng_state, accelerate's Accelerator.save_state, torch.save of the
RNG states numpy, random and torch give, and torch 1.13 with numpy 1.x (Debian)."""
from __future__ import annotations

import collections
import logging
import pickletools
import random
import shutil
import subprocess
import types
import zipfile

import numpy as np
import pytest
import torch

import tensorseal
from conftest import run_tseal


def canon(src, out):
    r = run_tseal("canon", src, "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def pickled_globals(path) -> set[str]:
    """Every global the file's pickle names, "module.name", read by pickletools."""
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    out, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            out.add(arg.replace(" ", "."))
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":
            out.add(f"{strings[-2]}.{strings[-1]}")
    return out


def trainer_safe_globals():
    from transformers.trainer_pt_utils import safe_globals
    return safe_globals()


def accelerate_safe_globals():
    from accelerate.utils.other import TORCH_SAFE_GLOBALS
    return torch.serialization.safe_globals(TORCH_SAFE_GLOBALS)


# The allowlists a weights_only load runs under: torch's own, the Trainer's, accelerate's.
ALLOWLISTS = {"torch": lambda: torch.serialization.safe_globals([]), "trainer": trainer_safe_globals,
              "accelerate": accelerate_safe_globals}


def weights_only_load(path, allowlist):
    with ALLOWLISTS[allowlist]():
        try:
            return True, torch.load(path, weights_only=True)
        except Exception as e:  # noqa: BLE001 - the refusal is the result
            assert "weights only" in str(e).lower() or "weights_only" in str(e), e
            return False, None


def same(a, b, path="root"):
    """Equal values of the same types all the way down (numpy dtypes included)."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), path
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    else:
        assert a == b, path


def assert_loads_where_the_source_loads(src, out):
    """For every allowlist: weights_only accepts `out` iff it accepts `src`, with equal
    values; numpy's globals are spelled as in the source, and canon adds no global."""
    verdicts = {}
    for allowlist in ALLOWLISTS:
        ok_src, want = weights_only_load(src, allowlist)
        ok_out, got = weights_only_load(out, allowlist)
        assert ok_out == ok_src, (allowlist, ok_src, ok_out)
        if ok_src:
            same(got, want)
        verdicts[allowlist] = ok_src
    same(torch.load(out, weights_only=False), torch.load(src, weights_only=False))
    theirs, ours = pickled_globals(src), pickled_globals(out)
    assert ours <= theirs, ours - theirs
    assert {g for g in ours if g.startswith("numpy")} == {g for g in theirs if g.startswith("numpy")}
    return verdicts


RNG_STATES = {
    "numpy_legacy": lambda: np.random.RandomState(7).get_state(),
    "numpy_pcg64": lambda: np.random.default_rng(7).bit_generator.state,
    "numpy_mt19937": lambda: np.random.Generator(np.random.MT19937(7)).bit_generator.state,
    "python": lambda: random.Random(7).getstate(),
    "torch": lambda: torch.Generator().manual_seed(7).get_state(),
    "np_float64": lambda: {"loss": np.float64(0.25)},  # a scalar: no allowlist has scalar
    "ordered": lambda: collections.OrderedDict(rng=np.random.RandomState(3).get_state(), step=5),
}


@pytest.mark.parametrize("name", sorted(RNG_STATES))
def test_rng_states_load_where_their_source_loads(name, tmp_path):
    src = tmp_path / f"{name}.pt"
    torch.save(RNG_STATES[name](), src)
    out = canon(src, tmp_path / "canon.pt")
    verdicts = assert_loads_where_the_source_loads(src, out)
    # Canonical, idempotent, and the spelling is not content.
    assert run_tseal("canon", "--check", out).returncode == 0
    assert canon(out, tmp_path / "again.pt").read_bytes() == out.read_bytes()
    assert tensorseal.hash(out) == tensorseal.hash(src)
    if name in ("numpy_legacy", "numpy_mt19937", "ordered"):
        assert verdicts == {"torch": False, "trainer": True, "accelerate": True}
        assert "numpy._core.multiarray._reconstruct" in pickled_globals(out)
    elif name == "np_float64":
        assert not any(verdicts.values())
    else:
        assert all(verdicts.values())


def trainer_stub():
    return types.SimpleNamespace(args=types.SimpleNamespace(world_size=1, process_index=0, parallel_mode=None))


def draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_trainer_resumes_rng_from_the_canonical_checkpoint(tmp_path):
    from transformers import Trainer
    ckpt = tmp_path / "checkpoint-1"
    Trainer._save_rng_state(trainer_stub(), str(ckpt))  # the Trainer's own writer
    expected = draws()
    canonical = tmp_path / "canonical"
    shutil.copytree(ckpt, canonical)
    canon(ckpt / "rng_state.pth", canonical / "rng_state.pth")
    assert (canonical / "rng_state.pth").read_bytes() != (ckpt / "rng_state.pth").read_bytes()
    verdicts = assert_loads_where_the_source_loads(ckpt / "rng_state.pth", canonical / "rng_state.pth")
    assert verdicts["trainer"]
    for d in (ckpt, canonical):
        draws()  # move every generator on
        Trainer._load_rng_state(trainer_stub(), str(d))  # the Trainer's own reader
        assert draws() == expected, d


def test_accelerate_load_state_restores_rng_from_the_canonical_checkpoint(tmp_path, caplog):
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = acc.prepare(model, opt)
    orig = tmp_path / "orig"
    acc.save_state(str(orig))
    expected = draws()
    canonical = tmp_path / "canonical"
    shutil.copytree(orig, canonical)
    rng = "random_states_0.pkl"
    canon(orig / rng, canonical / rng)
    assert (canonical / rng).read_bytes() != (orig / rng).read_bytes()
    verdicts = assert_loads_where_the_source_loads(orig / rng, canonical / rng)
    assert verdicts["accelerate"]
    for d in (orig, canonical):
        draws()
        caplog.clear()
        with caplog.at_level(logging.INFO):
            acc.load_state(str(d))
        assert "Could not load random states" not in caplog.text, d
        assert "All random states loaded successfully" in caplog.text, caplog.text
        assert draws() == expected, d


def test_numpy_1_files_keep_numpy_1_names(tmp_path, old_python):
    """torch 1.13 with numpy 1.x pickles numpy.core: the canonical file keeps it, loads
    in torch 1.13 / numpy 1.x, and under numpy 2's allowlists is refused exactly as the
    source is (they name numpy._core)."""
    src = tmp_path / "old.pt"
    code = ("import sys, random, numpy as np, torch; "
            "torch.save({'python': random.Random(7).getstate(), 'numpy': np.random.RandomState(7).get_state(), "
            "'cpu': torch.Generator().manual_seed(7).get_state(), 'loss': np.float64(0.5)}, sys.argv[1])")
    r = subprocess.run([old_python, "-c", code, str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out = canon(src, tmp_path / "canon.pt")
    assert "numpy.core.multiarray._reconstruct" in pickled_globals(out)
    assert not any(g.startswith("numpy._core") for g in pickled_globals(out))
    verdicts = assert_loads_where_the_source_loads(src, out)
    assert not any(verdicts.values())
    # The same states from numpy 2 hash alike; their canonical files differ in the name only.
    new = tmp_path / "new.pt"
    torch.save({"python": random.Random(7).getstate(), "numpy": np.random.RandomState(7).get_state(),
                "cpu": torch.Generator().manual_seed(7).get_state(), "loss": np.float64(0.5)}, new)
    new_out = canon(new, tmp_path / "new_canon.pt")
    assert tensorseal.hash(new) == tensorseal.hash(src) == tensorseal.hash(out) == tensorseal.hash(new_out)
    assert new_out.read_bytes() != out.read_bytes()
    check = ("import sys, torch, numpy as np; d = torch.load(sys.argv[1]); "
             "print(d['numpy'][1].dtype, type(d['loss']).__name__, float(d['loss']), "
             "np.array_equal(d['numpy'][1], np.random.RandomState(7).get_state()[1]))")
    r = subprocess.run([old_python, "-c", check, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["uint32", "float64", "0.5", "True"]
