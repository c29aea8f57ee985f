"""The streamed save (StreamedWrite, src/api/stream.cc): a plain dict of at least 64
plain torch tensors saved as .safetensors or .pt is written while it converts. It must
give exactly the bytes the ordinary writer gives (and safetensors' own save, for what
safetensors can save; torch.load reads the .pt), and fall back to the ordinary writer,
or fail as it fails, for everything else, leaving no temp file. `_streamed_writes()`
counts the saves that were streamed, so that each case checks which path it took."""
from __future__ import annotations

import os
import warnings

import pytest
import safetensors.torch as real
import torch
from hypothesis import given, settings, strategies as st

import tensorseal
import tensorseal.safetensors as dropin
from tensorseal import _tensorseal as core
from tensors import SAFETENSORS_DTYPES, random_tensor

warnings.filterwarnings("ignore", message=".*nested tensors is in prototype stage.*")

MANY = 64  # the binding streams dicts of at least this many tensors (convert.h kStreamAtLeast)


def many(n: int = 300, seed: int = 0) -> dict:
    out = {}
    for i in range(n):
        dtype = SAFETENSORS_DTYPES[i % len(SAFETENSORS_DTYPES)]
        shape = [(), (0,), (3,), (2, 5), (4, 1, 3)][(i * 7 + seed) % 5]
        out[f"layer.{(i * 31 + seed) % n}.{dtype}".replace("torch.", "")] = random_tensor(dtype, shape, seed + i)
    return out


def save(obj, path, **kw) -> bool:
    """tensorseal.save; True when the streamed writer wrote the file."""
    before = core._streamed_writes()
    tensorseal.save(obj, path, **kw)
    return core._streamed_writes() == before + 1


def files(d) -> list:
    return sorted(os.listdir(d))


EXTS = ["safetensors", "pt"]


def same_as_torch(path, sd) -> bool:
    back = torch.load(path, weights_only=True)
    return list(back) == list(sd) and all(
        back[k].dtype == v.dtype and back[k].shape == v.shape and torch.equal(
            back[k].reshape(-1).view(torch.uint8), v.contiguous().reshape(-1).view(torch.uint8)) for k, v in sd.items())


def test_many_real_tensors_stream_and_equal_safetensors_save(tmp_path):
    sd = many()
    assert save(sd, tmp_path / "a.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == real.save(sd)
    assert (tmp_path / "a.safetensors").read_bytes() == tensorseal.save_bytes(sd, "safetensors")
    assert save(sd, tmp_path / "b.safetensors", durable=False, metadata={"k": "v", "a": "b\n"})
    assert (tmp_path / "b.safetensors").read_bytes() == tensorseal.save_bytes(
        sd, "safetensors", metadata={"k": "v", "a": "b\n"})
    assert files(tmp_path) == ["a.safetensors", "b.safetensors"]


def test_a_real_models_weights_stream(tmp_path):
    # A real model's parameters as safetensors.torch.load_file gives them: a plain dict
    # of plain tensors (nn.Module.state_dict() is an OrderedDict with _metadata, which
    # is written in the whole-checkpoint form and not streamed).
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(40)], torch.nn.LayerNorm(8))
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert len(sd) >= MANY
    assert save(sd, tmp_path / "m.safetensors")
    assert (tmp_path / "m.safetensors").read_bytes() == real.save(sd)
    back = tensorseal.load(tmp_path / "m.safetensors")
    assert all(torch.equal(back[k], v) for k, v in sd.items())


def test_many_tensors_stream_to_pt_as_the_ordinary_writer_writes_them(tmp_path):
    sd = many()
    assert save(sd, tmp_path / "a.pt")
    assert (tmp_path / "a.pt").read_bytes() == tensorseal.save_bytes(sd, "pt")
    assert same_as_torch(tmp_path / "a.pt", sd)
    assert tensorseal.hash(tmp_path / "a.pt") == tensorseal.hash(sd)
    assert files(tmp_path) == ["a.pt"]


def near_structures():
    """Dicts of MANY tensors that differ from `base` in one name, dtype, shape or rank
    only: the streamed .pt reuses the last save's pickle for the same names, dtypes and
    shapes (stream.cc StandInPickle), and must not for any of these. Each has the same
    number of entries and of bytes, so only the pickle tells them apart."""
    def base(**change):
        sd = {"a": random_tensor(torch.float32, (2, 3), 100), "b": random_tensor(torch.float32, (4,), 101)}
        sd.update({f"p{i}": random_tensor(torch.float32, (2, 3), i) for i in range(MANY - 2)})
        sd.update(change)
        return sd
    return {
        "base": base(),
        "a name": {("q0" if k == "p0" else k): v for k, v in base().items()},
        "a dtype of the same size": base(a=random_tensor(torch.int32, (2, 3), 100)),
        "a shape of the same size": base(a=random_tensor(torch.float32, (3, 2), 100)),
        # dims in a row 2 3 | 4 | 2 3 ... read as 2 | 3 4 ... and as 2 | 4 2 | 3 ...
        "a rank (the same dims in a row)": base(a=random_tensor(torch.float32, (2,), 100),
                                                b=random_tensor(torch.float32, (3, 4), 101)),
        "ranks that shift the next shape": base(a=random_tensor(torch.float32, (2,), 100),
                                                b=random_tensor(torch.float32, (4, 2), 101)),
        "an order": dict(reversed(list(base().items()))),
    }


def test_a_save_of_another_structure_never_reuses_the_last_pickle(tmp_path):
    cases = near_structures()
    # Each right after each (itself included, with other contents): the file is always
    # what the ordinary writer writes for that dict.
    for i, (first, then) in enumerate((a, b) for a in cases for b in cases):
        assert save(cases[first], tmp_path / "first.pt"), first
        sd = {k: v + i if v.dtype != torch.int32 else v * i for k, v in cases[then].items()}
        p = tmp_path / "then.pt"
        assert save(sd, p), then
        assert p.read_bytes() == tensorseal.save_bytes(sd, "pt"), (first, then)
        assert same_as_torch(p, sd), (first, then)


def test_threads_saving_different_structures_write_their_own_bytes(tmp_path):
    import concurrent.futures
    cases = list(near_structures().values())
    jobs = [(i, cases[i % len(cases)]) for i in range(24)]

    def one(job):
        i, sd = job
        p = tmp_path / f"{i}.pt"
        tensorseal.save(sd, p)
        return p.read_bytes() == tensorseal.save_bytes(sd, "pt")

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, jobs))


@pytest.mark.parametrize("ext", EXTS)
def test_views_are_written_as_their_elements(tmp_path, ext):
    base = torch.arange(4000, dtype=torch.float32).reshape(40, 100)
    sd = {f"t{i}": random_tensor(torch.int16, (3, 3), i) for i in range(MANY)}
    sd["transposed"] = torch.arange(60, dtype=torch.float64).reshape(6, 10).T  # strided
    sd["slice"] = torch.arange(100, dtype=torch.int32)[10:20]  # offset into a larger storage
    sd["row"] = base[7]  # one row of a large tensor no other entry uses
    assert save(sd, tmp_path / f"v.{ext}")
    assert (tmp_path / f"v.{ext}").read_bytes() == tensorseal.save_bytes(sd, ext)
    back = tensorseal.load(tmp_path / f"v.{ext}")
    assert all(torch.equal(back[k], v) for k, v in sd.items())
    # An expanded view (stride 0): safetensors writes its elements, a .pt the span it
    # reaches with its strides (the ordinary writer).
    sd["expanded"] = torch.arange(3, dtype=torch.int64).expand(4, 3)
    assert save(sd, tmp_path / f"x.{ext}") == (ext == "safetensors")
    assert (tmp_path / f"x.{ext}").read_bytes() == tensorseal.save_bytes(sd, ext)


def test_the_safetensors_dropin_streams_byte_identical(tmp_path):
    sd = many(200, seed=3)
    sd["a_view"] = torch.arange(50, dtype=torch.float32)[5:25]
    before = core._streamed_writes()
    dropin.save_file(sd, tmp_path / "d.safetensors")
    assert core._streamed_writes() == before + 1
    real.save_file(sd, tmp_path / "r.safetensors")
    assert (tmp_path / "d.safetensors").read_bytes() == (tmp_path / "r.safetensors").read_bytes()


def fallbacks():
    """Dicts of >= MANY tensors the stream must not write itself, and why."""
    def with_(extra):
        sd = {f"w{i}": random_tensor(torch.float32, (2, 2), i) for i in range(MANY)}
        sd.update(extra)
        return sd
    shared = torch.arange(10, dtype=torch.float32)
    neg = torch._neg_view(torch.arange(4, dtype=torch.float32))
    attr = torch.ones(2)
    attr.note = "kept"
    return {
        "tied (one tensor twice)": with_({"a": shared, "b": shared}),
        "two views of one storage": with_({"a": shared[:5], "b": shared[5:]}),
        "requires_grad": with_({"g": torch.ones(3, requires_grad=True)}),
        "a Parameter": with_({"p": torch.nn.Parameter(torch.ones(2))}),
        "a negative view": with_({"n": neg}),
        "a tensor with attributes": with_({"x": attr}),
        "a non-tensor value": with_({"step": 3}),
        "an OrderedDict": __import__("collections").OrderedDict(with_({})),
        # Plain torch.Tensors that are not strided dense ones: a strided nested tensor's
        # shape raises in torch, so the first look at the dict must rule it out first.
        "a nested tensor": with_({"n": torch.nested.nested_tensor([torch.ones(2), torch.zeros(3)])}),
        "a jagged nested tensor": with_({"j": torch.nested.nested_tensor([torch.ones(2), torch.zeros(3)],
                                                                           layout=torch.jagged)}),
        "a sparse tensor": with_({"s": torch.eye(3).to_sparse()}),
        "a CSR tensor": with_({"c": torch.eye(3).to_sparse_csr()}),
        "a conjugated view": with_({"z": torch.arange(6.0).view(torch.complex64).conj()}),
    }


@pytest.mark.parametrize("ext", EXTS)
@pytest.mark.parametrize("case", list(fallbacks()))
def test_what_the_stream_cannot_promise_is_written_the_ordinary_way(tmp_path, case, ext):
    obj = fallbacks()[case]
    assert not save(obj, tmp_path / f"f.{ext}")
    assert (tmp_path / f"f.{ext}").read_bytes() == tensorseal.save_bytes(obj, ext)
    assert files(tmp_path) == [f"f.{ext}"]


def test_errors_are_the_ordinary_writers_and_leave_nothing(tmp_path):
    sd = many(100)
    sd["__metadata__"] = torch.ones(1)
    with pytest.raises(tensorseal.Error) as e:
        tensorseal.save(sd, tmp_path / "r.safetensors")
    assert e.value.rule == "safetensors/reserved-name"
    # An error while the dict converts (a tensor attribute holding a tensor): the
    # stream's temp file goes too.
    bad = torch.ones(2)
    bad.other = torch.zeros(1)
    sd = many(100)
    sd["bad"] = bad
    for ext in EXTS:
        with pytest.raises(tensorseal.Error):
            tensorseal.save(sd, tmp_path / f"b.{ext}")
    assert files(tmp_path) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SAFETENSORS_DTYPES), st.lists(st.integers(0, 3), max_size=3)),
                min_size=MANY, max_size=MANY + 40), st.integers(0, 2**16))
def test_streamed_bytes_are_safetensors_bytes(tmp_path_factory, rows, seed):
    sd = {f"{(i * 7919) % len(rows)}/{dt}": random_tensor(dt, tuple(shape), seed + i)
          for i, (dt, shape) in enumerate(rows)}
    p = tmp_path_factory.mktemp("s") / "h.safetensors"
    assert save(sd, p)
    assert p.read_bytes() == real.save(sd)
    p = p.with_suffix(".pt")
    assert save(sd, p)
    assert p.read_bytes() == tensorseal.save_bytes(sd, "pt")
    assert same_as_torch(p, sd)


@pytest.mark.parametrize("ext", EXTS)
def test_a_write_failing_partway_leaves_the_old_file_and_no_temp(tmp_path, ext):
    # RLIMIT_FSIZE (no privileges needed) makes the writer thread's pwritev fail with
    # EFBIG partway, as a full disk would; the ordinary writer then fails the same way.
    import resource
    import signal
    import subprocess
    import sys
    target = tmp_path / f"out.{ext}"
    target.write_bytes(b"old")
    code = ("import sys, torch, tensorseal\n"
            "sd = {f't{i}': torch.full((4096,), float(i)) for i in range(300)}\n"  # 4.7 MiB
            "try:\n  tensorseal.save(sd, sys.argv[1])\n"
            "except Exception as e:\n  print(type(e).__name__, e); sys.exit(3)\n")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    r = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True,
                       preexec_fn=limit, timeout=120, env={**os.environ})
    assert r.returncode == 3 and "File too large" in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert target.read_bytes() == b"old"
    assert files(tmp_path) == [f"out.{ext}"]
