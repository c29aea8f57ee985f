"""torch 0.1's tar checkpoints (docs/formats/tar.md): read like today's torch.load reads
them, hashed like torch.save of the same objects, and refused with a precise rule when
hostile.

Files come from the producer tests/py/producers/torch_tar.py (Python's tarfile in ustar,
GNU and pax formats, long names, hard links; pickles as torch 0.1's _save wrote them),
through tests/fixtures/gen_tar.py, which proves each with torch.load and re-saves what
torch gave with torch.save. Hostile archives are built with tarfile and pickle where the
container can say it, by patching bytes where it cannot.
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import tarfile
import warnings

import pytest

torch = pytest.importorskip("torch")
import tensorseal  # noqa: E402
import tensorseal.torch  # noqa: E402

from conftest import ROOT, run_tseal  # noqa: E402

FILES = ["ustar.pt", "gnu.pt", "pax.pt", "hardlink.pt"]


@pytest.fixture(scope="session")
def produced(tmp_path_factory) -> pathlib.Path:
    env_dir = os.environ.get("TENSORSEAL_FIXTURES")
    if env_dir and (pathlib.Path(env_dir) / "gen_tar" / "manifest.json").exists():
        return pathlib.Path(env_dir) / "gen_tar"
    out = tmp_path_factory.mktemp("gen_tar")
    subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "gen_tar.py"), str(out)], check=True,
                   capture_output=True)
    return out


def torch_load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated
        return torch.load(path, weights_only=False, **kw)


def _bits(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _tensors(obj, where="$", out=None) -> dict:
    """Every tensor and storage reachable in `obj`, by path."""
    out = {} if out is None else out
    if isinstance(obj, (torch.Tensor, torch.storage.TypedStorage, torch.UntypedStorage)):
        out[where] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _tensors(v, f"{where}[{k!r}]", out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _tensors(v, f"{where}[{i}]", out)
    return out


def _storage_bytes(s) -> tuple:
    u = s.untyped_storage() if isinstance(s, torch.Tensor) else (
        s._untyped_storage if isinstance(s, torch.storage.TypedStorage) else s)
    return u.data_ptr(), u.nbytes()


def assert_same_values(ours, theirs, where="$", layout=True) -> None:
    """Values, dtypes, shapes (`layout`: strides and offsets too) of tensors; storages
    by dtype and bytes; classes by name; containers recursively."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), f"{where}: {type(ours)}"
        assert (ours.dtype, ours.shape, ours.requires_grad) == (theirs.dtype, theirs.shape, theirs.requires_grad), where
        if layout:
            assert (ours.stride(), ours.storage_offset()) == (theirs.stride(), theirs.storage_offset()), where
        assert type(ours) is type(theirs) and _bits(ours) == _bits(theirs), where
    elif isinstance(theirs, torch.storage.TypedStorage):
        assert isinstance(ours, (torch.storage.TypedStorage, torch.UntypedStorage)), f"{where}: {type(ours)}"
        if isinstance(ours, torch.storage.TypedStorage):
            assert ours.dtype == theirs.dtype, where
            ours = ours._untyped_storage
        assert bytes(ours.cpu()) == bytes(theirs._untyped_storage.cpu()), where
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), f"{where}: {type(ours)}"
        for k in theirs:
            assert_same_values(ours[k], theirs[k], f"{where}[{k!r}]", layout)
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), f"{where}: {type(ours)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_values(a, b, f"{where}[{i}]", layout)
    elif isinstance(theirs, type):
        assert ours is theirs or (isinstance(ours, tensorseal.Global) and (ours.module, ours.name) == (
            theirs.__module__, theirs.__qualname__)), f"{where}: {ours!r}"
    else:
        assert type(ours) is type(theirs) and ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def assert_same_sharing(ours, theirs) -> None:
    """Tensors and storages that share memory in torch's result share it in ours, at the
    same byte distance, and no others do."""
    a, b = _tensors(ours), _tensors(theirs)
    assert list(a) == list(b)
    pa = {k: _storage_bytes(v) for k, v in a.items()}
    pb = {k: _storage_bytes(v) for k, v in b.items()}
    keys = list(pb)
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            (ta, na), (ua, ma) = pa[x], pa[y]
            (tb, nb), (ub, mb) = pb[x], pb[y]
            overlap_b = tb < ub + mb and ub < tb + nb and nb and mb
            overlap_a = ta < ua + ma and ua < ta + na and na and ma
            assert bool(overlap_a) == bool(overlap_b), (x, y)
            if overlap_b:
                assert ta - ua == tb - ub, (x, y)


# ---- real files ------------------------------------------------------------------------

@pytest.mark.parametrize("name", FILES)
def test_tensorseal_loads_what_torch_loads(produced, name):
    path = produced / name
    theirs = torch_load(path)
    for ours in (tensorseal.load(path), tensorseal.torch.load(path, weights_only=False),
                 tensorseal.load_bytes(path.read_bytes())):
        assert_same_values(ours, theirs)
        assert_same_sharing(ours, theirs)
    assert tensorseal.read(path).format == "torch-tar"


@pytest.mark.parametrize("name", FILES)
def test_hash_equals_torch_save_of_the_same_objects(produced, name, tmp_path):
    path = produced / name
    resaved = produced / (name[:-3] + ".zip.pt")
    r1, r2 = run_tseal("hash", path), run_tseal("hash", resaved)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    assert r1.stdout.split()[0] == r2.stdout.split()[0]
    assert tensorseal.hash(path) == tensorseal.hash(resaved)
    diff = run_tseal("diff", path, resaved)
    assert diff.returncode == 0, diff.stdout + diff.stderr


@pytest.mark.parametrize("name", FILES)
def test_canon_writes_torch_zip_that_torch_loads_alike(produced, name, tmp_path):
    path, out = produced / name, tmp_path / "canon.pt"
    r = run_tseal("canon", path, "-o", out)
    assert r.returncode == 0, r.stderr
    assert tensorseal.read(out).format == "torch-zip"
    # The canonical file keeps values, not layouts: views are written without the bytes
    # of their storage they cannot reach (docs/formats/canonical-pt.md).
    assert_same_values(torch_load(out), torch_load(path), layout=False)
    assert tensorseal.hash(out) == tensorseal.hash(path)
    v = run_tseal("verify", path)
    assert v.returncode in (0, 1), v.stderr
    i = run_tseal("inspect", "--json", path)
    assert i.returncode == 0 and json.loads(i.stdout)["format"] == "torch-tar"


def test_weights_only(produced):
    # torch refuses weights_only=True for the tar format whatever it holds; tensorseal
    # reads a file whose globals are all in its safe set (the legacy storage and
    # tensor classes are in torch's own weights_only allowlist), and refuses one that
    # names a module class.
    with pytest.raises(RuntimeError, match="legacy .tar format"):
        torch.load(produced / "ustar.pt", weights_only=True)
    assert_same_values(tensorseal.torch.load(produced / "ustar.pt"), torch_load(produced / "ustar.pt"))
    with pytest.raises(tensorseal.UnsafePickleError):
        tensorseal.torch.load(produced / "pax.pt")


@pytest.mark.parametrize("name", FILES)
def test_scan_reads_the_members(produced, name):
    r = run_tseal("scan", "--json", produced / name)
    report = json.loads(r.stdout)
    assert "tar" in report["interpretations"]
    if name == "pax.pt":  # torch.nn.Linear, pickled as a module-class persistent id
        assert r.returncode == 1 and report["verdict"] == "unknown"
    else:
        assert r.returncode == 0 and report["verdict"] == "safe", r.stdout


# ---- hostile archives ------------------------------------------------------------------

def _member(tar: tarfile.TarFile, name: str, data: bytes, **attrs) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in attrs.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data))


def _members(path) -> dict:
    """name -> (header offset, data offset) as tarfile reads them."""
    with tarfile.open(path) as t:
        return {m.name: (m.offset, m.offset_data) for m in t.getmembers()}


def _reseal(buf: bytearray, header_at: int) -> None:
    h = buf[header_at:header_at + 512]
    h[148:156] = b" " * 8
    buf[header_at + 148:header_at + 156] = b"%06o\0 " % sum(h)


def _parts(path) -> dict:
    with tarfile.open(path) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isreg() or m.islnk()}


def _archive(path, members, fmt=tarfile.USTAR_FORMAT) -> None:
    with tarfile.open(path, "w", format=fmt) as tar:
        for name, data, attrs in members:
            _member(tar, name, data, **attrs)


def hostile_cases(produced, d: pathlib.Path) -> list:
    """(file, rule, byte offset) for one input per hostile shape."""
    src = produced / "ustar.pt"
    parts = _parts(src)
    at = _members(src)
    cases = []

    p = d / "bad_checksum.pt"  # a name byte changed, the checksum left alone
    b = bytearray(src.read_bytes())
    b[at["tensors"][0] + 1] ^= 0x20
    p.write_bytes(b)
    cases.append((p, "tar/bad-checksum", at["tensors"][0] + 148))

    p = d / "size_past_end.pt"  # the storages member claims 4 GiB
    b = bytearray(src.read_bytes())
    b[at["storages"][0] + 124:at["storages"][0] + 136] = b"%011o\0" % (4 << 30)
    _reseal(b, at["storages"][0])
    p.write_bytes(b)
    cases.append((p, "tar/truncated", at["storages"][0] + 124))

    p = d / "negative_size.pt"  # GNU base-256, negative
    b = bytearray(src.read_bytes())
    b[at["pickle"][0] + 124:at["pickle"][0] + 136] = b"\xff" * 11 + b"\x00"
    _reseal(b, at["pickle"][0])
    p.write_bytes(b)
    cases.append((p, "tar/negative-size", at["pickle"][0] + 124))

    p = d / "traversal.pt"
    _archive(p, [("../storages", parts["storages"], {}), ("tensors", parts["tensors"], {}),
                 ("pickle", parts["pickle"], {})])
    cases.append((p, "tar/unsafe-name", 0))

    p = d / "pax_size_lies.pt"  # a pax size that disagrees with the header's
    _archive(p, [("storages", parts["storages"], {"pax_headers": {"size": "3"}}), ("tensors", parts["tensors"], {}),
                 ("pickle", parts["pickle"], {})], tarfile.PAX_FORMAT)
    cases.append((p, "tar/pax-size-mismatch", _members(p)["storages"][1] - 512 + 124))

    p = d / "duplicate.pt"
    _archive(p, [("storages", parts["storages"], {}), ("tensors", parts["tensors"], {}),
                 ("pickle", parts["pickle"], {}), ("pickle", pickle.dumps(0), {})])
    with tarfile.open(p) as t:
        second = [m.offset for m in t.getmembers() if m.name == "pickle"][1]
    cases.append((p, "tar/duplicate-member", second))

    p = d / "no_pickle.pt"
    _archive(p, [("storages", parts["storages"], {}), ("tensors", parts["tensors"], {})])
    with tarfile.open(p) as t:
        last = t.getmembers()[-1]
    cases.append((p, "torch-tar/missing-member", last.offset_data + (last.size + 511) // 512 * 512))

    p = d / "huge_count.pt"  # 2**40 tensors declared
    count = pickle.dumps(pickle.loads(parts["tensors"]), protocol=2)  # the count pickle torch 0.1 wrote
    assert parts["tensors"].startswith(count)
    tensors = pickle.dumps(1 << 40, protocol=2) + parts["tensors"][len(count):]
    _archive(p, [("storages", parts["storages"], {}), ("tensors", tensors, {}), ("pickle", parts["pickle"], {})])
    cases.append((p, "torch-tar/bad-count", _members(p)["tensors"][1]))
    return cases


def test_hostile_archives_are_refused_with_rule_and_offset(produced, tmp_path):
    d = tmp_path / "hostile"
    d.mkdir()
    for path, rule, offset in hostile_cases(produced, d):
        r = run_tseal("inspect", path)
        assert r.returncode == 2, (path.name, r.stdout, r.stderr)
        assert f"{path}: byte {offset}: [{rule}]" in r.stderr, (path.name, r.stderr)
        out = tmp_path / (path.name + ".canon")
        c = run_tseal("canon", path, "-o", out)
        assert c.returncode == 2 and not out.exists(), (path.name, c.stderr)
        with pytest.raises(tensorseal.Error, match=rf"\[{rule}\]"):
            tensorseal.load(path)


# ---- scan ------------------------------------------------------------------------------

class _Cmd:
    def __reduce__(self):
        return (os.system, ("true",))


def test_scan_reads_members_by_their_tarfile_names(produced, tmp_path):
    # A pax path names the member torch reads as `storages`; its ustar name is another.
    # The storage-views pickle after the records runs os.system under torch.load.
    parts = _parts(produced / "ustar.pt")
    views = pickle.dumps([], protocol=2)
    assert parts["storages"].endswith(views)
    storages = parts["storages"][:-len(views)] + pickle.dumps(_Cmd(), protocol=2)
    p = tmp_path / "renamed.pt"
    _archive(p, [("innocent", storages, {"pax_headers": {"path": "storages"}}), ("tensors", parts["tensors"], {}),
                 ("pickle", parts["pickle"], {})], tarfile.PAX_FORMAT)
    with tarfile.open(p) as t:
        assert t.getnames()[0] == "storages"
    r = run_tseal("scan", "--json", p)
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["verdict"] == "dangerous", r.stdout
    assert any((f["module"], f["name"]) == ("posix", "system") and "/storages @ " in f["where"]
               for f in report["findings"]), report["findings"]


def test_scan_keeps_what_members_before_a_broken_header_reference(produced, tmp_path):
    # tarfile stops at a header it cannot parse and torch.load still runs the members
    # before it; reading refuses the archive, scan reports the payload and the error.
    parts = _parts(produced / "ustar.pt")
    p = tmp_path / "broken.pt"
    _archive(p, [("storages", parts["storages"], {}), ("tensors", parts["tensors"], {}),
                 ("pickle", pickle.dumps(_Cmd(), protocol=2), {}), ("notes", b"x", {})])
    b = bytearray(p.read_bytes())
    notes = _members(p)["notes"][0]
    b[notes + 1] ^= 0x20
    p.write_bytes(b)
    r = run_tseal("scan", "--json", p)
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["verdict"] == "dangerous" and report["incomplete"], r.stdout
    assert "[tar/bad-checksum]" in report["error"], report
    i = run_tseal("inspect", p)
    assert i.returncode == 2 and f"byte {notes + 148}: [tar/bad-checksum]" in i.stderr, i.stderr
