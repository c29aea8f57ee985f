"""Hostile PyTorch checkpoints: tensorseal never runs them, names the exact rule they
break, and answers quickly within bounded memory.

Pickles are made by Python's own pickler (classes whose __reduce__ returns the attack)
or by torch itself; only the corruption is done by hand. Every CLI run happens under
an address-space limit (RLIMIT_AS) and a timeout. Spec: docs/formats/torch-zip.md,
docs/formats/torch-legacy.md.
"""
from __future__ import annotations

import collections
import io
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import time
import zipfile

import pytest

torch = pytest.importorskip("torch")
import tensorseal  # noqa: E402

from conftest import tseal_bin  # noqa: E402

MEM_LIMIT = 2 << 30  # bytes of address space a CLI run may use


def tseal(*args, timeout=10):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([tseal_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                         preexec_fn=limit)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds the run took: the bound is on the work done, not on machine load.
    out.seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def rule_of(fn):
    try:
        fn()
    except tensorseal.Error as e:
        return e.rule
    return ""


def fast_rule(data: bytes, limit_s: float = 1.0) -> str:
    t0 = time.process_time()  # CPU time: the bound is on work, not on machine load
    r = rule_of(lambda: tensorseal.load_bytes(data))
    assert time.process_time() - t0 < limit_s, r
    return r


class Cmd:
    """Pickles as os.system(cmd)."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class Nested:
    """Pickles as torch.storage._load_from_bytes(payload), the way a storage does."""

    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return (torch.storage._load_from_bytes, (self.payload,))


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "pwned"


def live_check(path, marker):
    """The payload is real: plain pickle.load in a child process runs it."""
    subprocess.run([sys.executable, "-c", f"import pickle; pickle.load(open({str(path)!r}, 'rb'))"],
                   capture_output=True, timeout=60)
    assert marker.exists(), "the test payload should be live"
    marker.unlink()


def test_reduce_os_system_never_runs(tmp_path, marker):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"w": torch.ones(2), "x": Cmd(f"touch {marker}")}, protocol=2))
    live_check(path, marker)
    inspect = tseal("inspect", "--json", path)
    assert inspect.returncode == 0, inspect.stderr
    scan = tseal("scan", "--json", path)
    assert scan.returncode == 1
    report = json.loads(scan.stdout)
    assert report["verdict"] == "dangerous"
    assert any(g["module"] == "posix" and g["name"] == "system" and g["verdict"] == "dangerous"
               for g in report["findings"])
    obj = tensorseal.load(path)
    assert isinstance(obj["x"], tensorseal.Opaque) and obj["x"].callable == tensorseal.Global("posix", "system")
    tensorseal.hash(path)
    assert not marker.exists()
    assert inspect.seconds < 1 and scan.seconds < 1


def test_torch_save_with_os_system_never_runs(tmp_path, marker):
    for legacy in (False, True):
        path = tmp_path / f"evil{legacy}.pt"
        torch.save({"w": torch.ones(2), "x": Cmd(f"touch {marker}")}, path, _use_new_zipfile_serialization=not legacy)
        assert tseal("inspect", path).returncode == 0
        out = tseal("scan", path)
        assert out.returncode == 1 and "dangerous" in out.stdout
        tensorseal.load(path)
        assert not marker.exists()


def test_stack_global_through_memo(tmp_path, marker):
    # PROTO 4; 'posix' MEMOIZE 'system' MEMOIZE POP POP; BINGET 0 BINGET 1 STACK_GLOBAL;
    # (cmd,) REDUCE STOP: the names reach STACK_GLOBAL only through the memo.
    cmd = f"touch {marker}".encode()
    data = (b"\x80\x04" b"\x8c\x05posix\x94" b"\x8c\x06system\x94" b"00" b"h\x00h\x01\x93" +
            b"\x8c" + bytes([len(cmd)]) + cmd + b"\x85R.")
    path = tmp_path / "memo.pkl"
    path.write_bytes(data)
    live_check(path, marker)
    out = tseal("scan", "--json", path)
    assert out.returncode == 1
    g = json.loads(out.stdout)["findings"]
    assert [(x["module"], x["name"], x["verdict"]) for x in g] == [("posix", "system", "dangerous")]
    tensorseal.load(path)
    assert not marker.exists()


def test_nested_load_from_bytes_with_dangerous_global(tmp_path, marker):
    inner = io.BytesIO()
    torch.save({"x": Cmd(f"touch {marker}")}, inner, _use_new_zipfile_serialization=False)
    path = tmp_path / "nested.pkl"
    path.write_bytes(pickle.dumps({"w": Nested(inner.getvalue())}, protocol=2))
    out = tseal("scan", "--json", path)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    sys_ = [g for g in report["findings"] if g["name"] == "system"]
    assert sys_ and sys_[0]["verdict"] == "dangerous"
    assert "/_load_from_bytes#1 @ " in sys_[0]["where"]
    tensorseal.load(path)
    assert not marker.exists()


def test_nested_files_too_deep(tmp_path):
    payload = io.BytesIO()
    torch.save(torch.ones(1), payload, _use_new_zipfile_serialization=False)
    data = payload.getvalue()
    for _ in range(10):  # Limits::max_nested_files = 8
        data = pickle.dumps(Nested(data), protocol=2)
    assert fast_rule(data) == "torch/nested-files-too-deep"


def test_one_payload_loaded_many_times_is_parsed_once(tmp_path):
    """1500 distinct _load_from_bytes calls on one memo-shared 1 MB payload: torch.load
    would allocate 1.5 GB; tensorseal parses (and copies) the payload once."""
    b = io.BytesIO()
    torch.save(torch.zeros(256 * 1024), b, _use_new_zipfile_serialization=False)
    payload = b.getvalue()
    path = tmp_path / "amplify.pkl"
    path.write_bytes(pickle.dumps([Nested(payload) for _ in range(1500)], protocol=2))
    assert path.stat().st_size < 2 * len(payload)
    out = tseal("scan", path)  # under MEM_LIMIT address space
    assert out.returncode == 0, out.stderr
    assert out.seconds < 1
    t0 = time.process_time()
    root = tensorseal.read(path).root
    assert time.process_time() - t0 < 1
    assert len(root) == 1500 and root[0].untyped_storage().data_ptr() == root[-1].untyped_storage().data_ptr()


def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(path))
    assert rule_of(lambda: tensorseal.read(path)) == "torch-zip/torchscript"
    out = tseal("inspect", path)
    assert out.returncode == 2 and "torch-zip/torchscript" in out.stderr
    # A TorchScript archive is a program: torch.load hands it to torch.jit.load. scan
    # reads its pickles (constants, debug info) and does not call it safe.
    assert tseal("scan", path).returncode == 1


def test_export_archive_is_named_a_program(tmp_path):
    """torch.export.save archives (.pt2) are intact programs, not corrupt checkpoints."""
    path = tmp_path / "m.pt2"
    ep = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),))
    torch.export.save(ep, str(path))
    assert rule_of(lambda: tensorseal.read(path)) == "torch-zip/export-program"
    out = tseal("verify", path)
    assert out.returncode == 2 and "torch-zip/export-program" in out.stderr and "a program" in out.stderr
    assert "CORRUPT" not in out.stdout


# ---- hand-assembled torch zips (python's zipfile + pickler) ---------------------------

class Storage:
    """Stands for a storage in data.pkl: persistent id ('storage', cls, key, 'cpu', numel)."""

    def __init__(self, cls, key, numel):
        self.pid = ("storage", cls, key, "cpu", numel)


class Rebuild:
    def __init__(self, storage, size, stride, offset=0):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, (Storage, RawPid)) else None


def torch_zip(obj, records: dict, version="3\n", extra=None, with_pkl=True) -> bytes:
    pkl = io.BytesIO()
    TorchPickler(pkl, protocol=2).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        if with_pkl:
            z.writestr("archive/data.pkl", pkl.getvalue())
        for k, v in records.items():
            z.writestr(f"archive/data/{k}", v)
        z.writestr("archive/version", version)
        for k, v in (extra or {}).items():
            z.writestr(f"archive/{k}", v)
    return out.getvalue()


def test_hand_assembled_zip_reads():
    good = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 4), (2, 2), (2, 1))},
                     {"0": torch.arange(4, dtype=torch.float32).numpy().tobytes()})
    assert torch.equal(torch.load(io.BytesIO(good), weights_only=True)["w"], torch.arange(4.0).view(2, 2))
    w = tensorseal.load_bytes(good)["w"]
    assert torch.equal(w, torch.arange(4.0).view(2, 2))


def test_storage_larger_than_its_record():
    data = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 1000), (4,), (1,))}, {"0": b"\0" * 16})
    assert fast_rule(data) == "torch/storage-too-small"


def test_storage_numel_overflow():
    data = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 2**62), (4,), (1,))}, {"0": b"\0" * 16})
    assert fast_rule(data) == "file/size-overflow"


def test_view_outside_storage_and_shape_overflow():
    rec = {"0": b"\0" * 16}
    outside = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 4), (4,), (1,), offset=1)}, rec)
    assert fast_rule(outside) == "tensor/view-out-of-bounds"
    huge = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 4), (2**40, 2**40), (1, 1))}, rec)
    assert fast_rule(huge) in ("file/size-overflow", "tensor/view-out-of-bounds")
    negative = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "0", 4), (-1,), (1,))}, rec)
    assert fast_rule(negative) == "tensor/bad-shape"


def test_missing_storage_record_and_unknown_storage_class():
    missing = torch_zip({"w": Rebuild(Storage(torch.FloatStorage, "7", 4), (4,), (1,))}, {"0": b"\0" * 16})
    assert fast_rule(missing) == "torch-zip/missing-storage-record"
    odd = torch_zip({"w": Rebuild(Storage(collections.OrderedDict, "0", 4), (4,), (1,))}, {"0": b"\0" * 16})
    assert fast_rule(odd) == "torch/unknown-storage-type"


def test_records_torch_needs():
    assert fast_rule(torch_zip({"w": 1}, {}, with_pkl=False)) == "torch-zip/no-data-pkl"
    assert fast_rule(torch_zip({"w": 1}, {}, version="99\n")) == "torch-zip/bad-version"
    assert fast_rule(torch_zip({"w": 1}, {}, version="three")) == "torch-zip/bad-version"
    assert fast_rule(torch_zip({"w": 1}, {}, extra={"byteorder": "middle"})) == "torch-zip/bad-byteorder"
    assert tensorseal.load_bytes(torch_zip({"w": 1}, {}, extra={"byteorder": "little"})) == {"w": 1}


class Call:
    """Pickles as fn(*args)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


class RawPid:
    def __init__(self, pid):
        self.pid = pid


def test_malformed_persistent_ids_and_rebuild_calls():
    rec = {"0": b"\0" * 16}
    short = torch_zip({"w": Rebuild(RawPid(("storage", torch.FloatStorage, "0", "cpu")), (4,), (1,))}, rec)
    assert fast_rule(short) == "torch/bad-persistent-id"
    other = torch_zip({"w": Rebuild(RawPid(("module", torch.FloatStorage, "0", "cpu", 4)), (4,), (1,))}, rec)
    assert fast_rule(other) == "torch/bad-persistent-id"
    not_storage = torch_zip({"w": Call(torch._utils._rebuild_tensor_v2, "x", 0, (4,), (1,), False,
                                       collections.OrderedDict())}, {})
    assert fast_rule(not_storage) == "torch/bad-rebuild-args"
    t = Rebuild(Storage(torch.FloatStorage, "0", 4), (4,), (1,))
    with_state = torch_zip({"p": Call(torch._utils._rebuild_parameter_with_state, t, True,
                                      collections.OrderedDict(), {"extra": 1})}, rec)
    assert tensorseal.load_bytes(with_state)["p"].extra == 1  # attributes (test_tensor_attributes.py)
    slots = torch_zip({"p": Call(torch._utils._rebuild_parameter_with_state, t, True,
                                 collections.OrderedDict(), ({"a": 1}, {"b": 2}))}, rec)
    assert fast_rule(slots) == "torch/unsupported-rebuild"
    int_name = torch_zip({"p": Call(torch._utils._rebuild_parameter_with_state, t, True,
                                    collections.OrderedDict(), {1: 2})}, rec)
    assert fast_rule(int_name) == "torch/bad-rebuild-args"
    hooks = torch_zip({"p": Call(torch._utils._rebuild_parameter, t, True, collections.OrderedDict({0: print}))}, rec)
    assert fast_rule(hooks) == "torch/unsupported-rebuild"
    plain = torch_zip({"p": Call(torch._utils._rebuild_parameter_with_state, t, True,
                                 collections.OrderedDict(), {})}, rec)
    assert isinstance(tensorseal.load_bytes(plain)["p"], torch.nn.Parameter)


def test_entry_outside_the_archive_folder():
    good = torch_zip({"w": 1}, {})
    buf = io.BytesIO(good)
    with zipfile.ZipFile(buf, "a") as z:
        z.writestr("other/evil.py", "import os")
    assert fast_rule(buf.getvalue()) == "torch-zip/entry-outside-prefix"


def test_local_header_disagrees_with_central_directory():
    data = bytearray(torch_zip({"w": 1}, {}))
    data[30] ^= 0x20  # first byte of the first local header's name
    assert fast_rule(bytes(data)) == "zip/local-central-mismatch"


# ---- resource exhaustion --------------------------------------------------------------

def test_million_deep_nesting_fails_fast(tmp_path):
    n = 10**6
    data = b"\x80\x02" + b"]" * (n - 1) + b"a" * (n - 2) + b"."
    assert fast_rule(data) == "pickle/max-depth"
    path = tmp_path / "deep.pkl"
    path.write_bytes(data)
    out = tseal("inspect", path)
    assert out.returncode == 2 and "pickle/max-depth" in out.stderr and out.seconds < 1


def test_memo_bomb(tmp_path):
    data = bytearray(b"\x80\x02]q\x00")
    for i in range(64):
        data += b"(h" + bytes([i]) + b"h" + bytes([i]) + b"lq" + bytes([i + 1])
    data += b"."
    assert fast_rule(bytes(data)) == "pickle/max-alloc"
    path = tmp_path / "bomb.pkl"
    path.write_bytes(bytes(data))
    out = tseal("hash", path)
    assert out.returncode == 2 and "pickle/max-alloc" in out.stderr and out.seconds < 1


# ---- truncation and bit flips of real torch files ----------------------------------------

def small_files():
    sd = collections.OrderedDict([("w", torch.arange(4.0).view(2, 2)), ("n", torch.tensor(3))])
    out = {}
    for legacy in (False, True):
        b = io.BytesIO()
        torch.save(sd, b, _use_new_zipfile_serialization=not legacy)
        out["legacy" if legacy else "zip"] = b.getvalue()
    return out


@pytest.mark.parametrize("kind", ["zip", "legacy"])
def test_truncated_at_every_length(kind, tmp_path):
    data = small_files()[kind]
    assert tensorseal.load_bytes(data)["n"].item() == 3
    t0 = time.process_time()
    for n in range(len(data)):
        try:
            tensorseal.load_bytes(data[:n])
        except tensorseal.Error as e:
            assert e.rule and not isinstance(e, tensorseal.InternalError), (n, e)
        else:
            pytest.fail(f"{kind} cut to {n} bytes was accepted")
    assert time.process_time() - t0 < 30
    # The CLI: exit 2 with a one-line message, for a sample of cut points.
    for n in list(range(0, len(data), max(1, len(data) // 25))) + [len(data) - 1]:
        p = tmp_path / f"cut{n}"
        p.write_bytes(data[:n])
        out = tseal("inspect", p)
        assert out.returncode == 2, (n, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1 and "[" in out.stderr, out.stderr


def test_bit_flip_in_zip_data_is_crc_mismatch():
    data = small_files()["zip"]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
    flipped = 0
    for info in infos:
        # The local header's name and extra lengths (torch pads with a local-only extra).
        name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
        start = info.header_offset + 30 + name_len + extra_len
        for i in range(start, start + info.file_size):
            b = bytearray(data)
            b[i] ^= 1 << (i % 8)
            assert fast_rule(bytes(b)) == "zip/crc-mismatch", (info.filename, i)
            flipped += 1
    assert flipped > 50


def test_bit_flips_anywhere_never_crash():
    for kind, data in small_files().items():
        for i in range(len(data)):
            b = bytearray(data)
            b[i] ^= 1 << (i % 8)
            try:
                tensorseal.load_bytes(bytes(b))
            except tensorseal.Error as e:
                assert not isinstance(e, tensorseal.InternalError), (kind, i, e)
