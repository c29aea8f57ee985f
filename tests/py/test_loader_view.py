"""scan sees what the loader sees (docs/security.md): every class of file where a
standard loader's reading differs from a naive one, built in test setup by real
producers (pickle at several protocols, torch.save, numpy, zipfile, tarfile), each

  * proven live: the real loader (pickle.load / torch.load(weights_only=False) /
    numpy.load(allow_pickle=True) / zipfile) runs its payload in a throwaway
    subprocess, whose only effect is creating a marker file;
  * scanned by `tseal scan --json`: exit 1, verdict "dangerous", the payload's global
    named, within 1 s of CPU and 256 MiB of memory;
  * refused by `tseal inspect` where the file is ambiguous or broken (exit 2, the rule).
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
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_hostile_corpus import CPU_LIMIT_S, RSS_LIMIT_KB, Launcher  # noqa: E402


class Touch:
    """Unpickling it creates the file named by `path` (through builtins.exec)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').close()",))


def benign_pt(name="archive") -> bytes:
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4.0)}, buf)
    return buf.getvalue()


def rezip(src: bytes, extra_first=(), extra_last=(), compression=zipfile.ZIP_STORED) -> bytes:
    """The members of torch archive `src` rewritten by zipfile, with extra members."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(src)) as zin, zipfile.ZipFile(out, "w", compression) as zout:
        for name, data in extra_first:
            zout.writestr(name, data)
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
        for name, data in extra_last:
            zout.writestr(name, data)
    return out.getvalue()


def safetensors_pickle_polyglot(data: bytes) -> bytes:
    """A safetensors file with one uint8 tensor holding `data`, whose bytes are also a
    pickle that runs `data` (which starts with POP). The header length starts BINBYTES,
    whose operand skips to a metadata string made of SHORT_BINSTRING + POP skips (all
    printable, so the JSON stays valid) that ends on the tensor data."""
    k = len(data)
    prefix = ('{"w":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]},"__metadata__":{"p":"' % (k, k)).encode()
    skip = 3 + len(prefix)  # BINBYTES' operand: from byte 5 up to the string's first byte
    header = 0x42 + 256 * skip  # b"B" + the operand's little-endian bytes
    pos, end, tail = 8 + len(prefix), 8 + header, b'"}}'
    body = b""
    while end - pos > 130:
        body += b"U~" + b"~" * 126 + b"0"
        pos += 129
    last = end - pos - 2  # the last skip covers the end of the JSON
    body += b"U" + bytes([last]) + b"~" * (last - len(tail))
    out = struct.pack("<Q", header) + prefix + body + tail + data
    assert len(out) == 8 + header + k
    return out


def prefix_of(pt: bytes) -> str:
    return zipfile.ZipFile(io.BytesIO(pt)).namelist()[0].split("/")[0]


# Each case: file bytes, the loader that runs it ("pickle", "torch", "numpy", "zipfile-pkl"),
# the global scan must name, and the rule inspect must refuse with (None: readable).
def build_cases(d: pathlib.Path, marker: pathlib.Path) -> dict:
    evil = pickle.dumps(Touch(marker), protocol=2)
    pt = benign_pt()
    pre = prefix_of(pt)
    cases = {}

    # torch (miniz) looks names up ignoring case: which of data.pkl / Data.pkl it loads
    # depends on the directory's order (here: the later one).
    cases["case_collision"] = (rezip(pt, extra_last=[(f"{pre}/Data.pkl", evil)]), "torch", "builtins.exec",
                               "zip/case-insensitive-duplicate")

    # A second archive in the first one's comment, one stray byte after it: zipfile reads
    # the last end record (the hidden archive), the first one spans to the end.
    hidden = io.BytesIO()
    with zipfile.ZipFile(hidden, "w") as z:
        z.writestr(f"{pre}/data.pkl", evil)
    tail = hidden.getvalue() + b"\0"
    eocd = pt.rfind(b"PK\x05\x06")
    two_ends = pt[:eocd + 20] + struct.pack("<H", len(tail)) + tail
    cases["two_end_records"] = (two_ends, "zipfile-pkl", "builtins.exec", "zip/ambiguous-end-of-central-directory")

    # Members torch never reads: numpy.load opens the archive as an npz and unpickles an
    # object array; a stray .pkl is what a script could pick up.
    obj = io.BytesIO()
    np.save(obj, np.array([Touch(marker)], dtype=object), allow_pickle=True)
    cases["object_npy_member"] = (rezip(pt, extra_last=[(f"{pre}/extra.npy", obj.getvalue())]), "numpy",
                                  "builtins.exec", None)
    cases["other_pkl_member"] = (rezip(pt, extra_last=[(f"{pre}/other.pkl", evil)]), "zipfile-other",
                                 "builtins.exec", None)

    # Duplicate data.pkl (zipfile writes it with a warning); the later one is what
    # zipfile returns.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dup = rezip(pt, extra_last=[(f"{pre}/data.pkl", evil)])
    cases["duplicate_data_pkl"] = (dup, "zipfile-pkl", "builtins.exec", "zip/duplicate-name")

    # A pickle followed by a torch archive: torch.load sees no zip magic at byte 0 and
    # unpickles; zipfile sees the archive.
    cases["pickle_then_zip"] = (evil + pt, "torch", "builtins.exec", "pickle-file/trailing-data")

    # The payload before a broken byte: pickle.load runs it, then fails.
    cases["payload_then_garbage"] = (evil[:-1] + b"\xff", "pickle", "builtins.exec", "pickle/unknown-opcode")

    # A global whose name is computed at load time: STACK_GLOBAL('os', encode('flfgrz', 'rot13')).
    computed = (b"\x80\x04\x8c\x02os\x8c\x07_codecs\x8c\x06encode\x93\x8c\x06flfgrz\x8c\x05rot13\x86R"
                b"\x93\x8c\x04true\x85R.")
    cases["computed_global"] = (computed, None, "<computed>", "pickle/stack-global-operands")

    # A nested torch file built by _codecs.encode(str, 'utf-8') (a protocol-0 pickle is
    # ASCII, so its UTF-8 encoding is itself) inside a _load_from_bytes call.
    inner = pickle.dumps(Touch(marker), protocol=0).decode("ascii")
    nested = (b"\x80\x02ctorch.storage\n_load_from_bytes\nc_codecs\nencode\n"
              + b"X" + struct.pack("<I", len(inner)) + inner.encode("utf-8")
              + b"X\x05\x00\x00\x00utf-8\x86R\x85R.")
    cases["nested_built_by_codecs"] = (nested, "pickle", "builtins.exec", None)

    # torch's tar format: tarfile members storages/tensors/pickle. tensorseal reads it
    # (docs/formats/tar.md): inspect shows the payload as inert data, scan flags it.
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in (("storages", pickle.dumps(0, 2) + pickle.dumps([], 2)), ("tensors", pickle.dumps(0, 2)),
                           ("pickle", evil)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    cases["tar_format"] = (tbuf.getvalue(), "torch", "builtins.exec", None)

    # A valid safetensors file that is also a pickle (safetensors_pickle_polyglot):
    # torch.load of any name reads it as a legacy file and runs the payload first.
    cases["safetensors_and_pickle"] = (safetensors_pickle_polyglot(b"0" + pickle.dumps(Touch(marker), protocol=0)),
                                       "torch", "builtins.exec", "detect/ambiguous")

    # Object .npy on its own: read as data (its pickle through the restricted reader,
    # test_npy_objects.py), so inspect has nothing to refuse; scan must flag it.
    cases["object_npy"] = (obj.getvalue(), "numpy", "builtins.exec", None)

    out = {}
    for name, (data, loader, glob, rule) in cases.items():
        p = d / f"{name}.bin"
        p.write_bytes(data)
        out[name] = (p, loader, glob, rule)
    return out


LOADERS = {
    "pickle": "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))",
    "torch": "import torch,sys; torch.load(sys.argv[1], weights_only=False)",
    "numpy": "import numpy,sys; z=numpy.load(sys.argv[1], allow_pickle=True); [z[k] for k in z.files]",
    "zipfile-pkl": ("import pickle,sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); "
                    "pickle.loads(z.read([n for n in z.namelist() if n.endswith('data.pkl')][-1]))"),
    "zipfile-other": ("import pickle,sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); "
                      "pickle.loads(z.read([n for n in z.namelist() if n.endswith('other.pkl')][0]))"),
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("loader_view")
    marker = d / "marker"
    return build_cases(d, marker), marker


def test_every_case_is_live_in_its_loader(cases):
    files, marker = cases
    for name, (path, loader, _, _) in files.items():
        if loader is None:
            continue
        marker.unlink(missing_ok=True)
        subprocess.run([sys.executable, "-c", LOADERS[loader], str(path)], capture_output=True, timeout=120)
        assert marker.exists(), f"{name}: the {loader} loader did not run the payload; the case proves nothing"
    marker.unlink(missing_ok=True)


def test_scan_flags_every_case_within_bounds(cases, tmp_path):
    files, marker = cases
    launcher = Launcher(tmp_path)
    failures = []
    try:
        for name, (path, _, glob, _) in files.items():
            rc, out, err, cpu, rss = launcher.run(["scan", "--json", path])
            if rc != 1:
                failures.append(f"{name}: scan exit {rc}: {out[:300]} {err[:300]}")
                continue
            r = json.loads(out)
            names = [f"{f['module']}.{f['name']}" for f in r["findings"]]
            if r["verdict"] != "dangerous" or not any(n.startswith(glob) for n in names):
                failures.append(f"{name}: verdict {r['verdict']}, findings {names}")
            if cpu > CPU_LIMIT_S or rss > RSS_LIMIT_KB:
                failures.append(f"{name}: {cpu:.2f} s CPU, {rss // 1024} MiB")
    finally:
        launcher.close()
    assert not marker.exists(), "scanning ran a payload"
    assert not failures, "\n".join(failures)


def test_inspect_refuses_what_loaders_read_differently(cases):
    files, _ = cases
    for name, (path, _, _, rule) in files.items():
        if rule is None:
            continue
        r = subprocess.run([tseal(), "inspect", str(path)], capture_output=True, text=True)
        assert r.returncode == 2 and f"[{rule}]" in r.stderr, f"{name}: {r.returncode} {r.stderr}"


def tseal():
    from conftest import tseal_bin
    return tseal_bin()


def test_incomplete_scan_keeps_the_evidence(cases):
    files, _ = cases
    r = subprocess.run([tseal(), "scan", "--json", str(files["payload_then_garbage"][0])], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    j = json.loads(r.stdout)
    assert j["incomplete"] is True and "pickle/" in j["error"], j
    assert j["verdict"] == "dangerous"


def test_polyglot_reports_every_interpretation(cases):
    files, _ = cases
    r = subprocess.run([tseal(), "scan", "--json", str(files["pickle_then_zip"][0])], capture_output=True, text=True)
    j = json.loads(r.stdout)
    assert set(j["interpretations"]) >= {"pickle", "zip"}, j
    r = subprocess.run([tseal(), "scan", "--json", str(files["tar_format"][0])], capture_output=True, text=True)
    assert json.loads(r.stdout)["interpretations"] == ["tar"]


def test_ambiguous_file_reads_with_an_explicit_format(cases):
    """The safetensors reading is still there for whoever asks for it, as safetensors
    itself reads the file; what would run the payload refuses it."""
    import safetensors.numpy
    import tensorseal
    import tensorseal.safetensors
    import tensorseal.torch
    path = cases[0]["safetensors_and_pickle"][0]
    want = safetensors.numpy.load_file(str(path))["w"]
    r = subprocess.run([tseal(), "inspect", "--format", "safetensors", "--json", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"][0]["path"] == "w"
    r = subprocess.run([tseal(), "hash", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and "[detect/ambiguous]" in r.stderr and "exec" in r.stderr, r.stderr
    r = subprocess.run([tseal(), "hash", "--format", "pt", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and "[detect/format-mismatch]" in r.stderr, r.stderr
    for load in (lambda: tensorseal.load(path), lambda: tensorseal.torch.load(path, weights_only=False)):
        with pytest.raises(tensorseal.UnsafePickleError) as e:
            load()
        assert e.value.rule == "detect/ambiguous"
    np.testing.assert_array_equal(tensorseal.load(path, format="safetensors", framework="numpy")["w"], want)
    np.testing.assert_array_equal(tensorseal.safetensors.load_file(path)["w"].numpy(), want)
    assert tensorseal.hash(path, format="safetensors") == tensorseal.hash({"w": want})


def test_header_bytes_that_are_a_harmless_pickle_stay_readable(tmp_path):
    """A real safetensors header whose length bytes start NEWTRUE, STOP: pickle.load
    returns True and imports nothing, so the file is not ambiguous."""
    import safetensors.numpy
    import tensorseal
    p = tmp_path / "m.safetensors"
    save = lambda n: safetensors.numpy.save_file({"w": np.arange(4, dtype=np.float32)}, str(p),  # noqa: E731
                                                 metadata={"pad": "x" * n})
    save(0)
    start = 0x2E88 - struct.unpack("<Q", p.read_bytes()[:8])[0] - 8
    for n in range(start, start + 24):
        save(n)
        if p.read_bytes()[:2] == b"\x88.":
            break
    else:
        pytest.fail("no metadata length gives the header length 0x2e88")
    assert pickle.loads(p.read_bytes()) is True
    np.testing.assert_array_equal(tensorseal.load(p, framework="numpy")["w"], np.arange(4, dtype=np.float32))


def test_benign_files_stay_safe(tmp_path):
    """The wider reading must not cost false alarms on real files."""
    p = tmp_path / "m.pt"
    torch.save({"w": torch.randn(64, 64), "step": 3, "opt": {"lr": 0.1}}, p)
    np.savez(tmp_path / "a.npz", x=np.arange(10), y=np.ones((3, 3)))
    torch.save({"w": torch.arange(3)}, tmp_path / "l.pt", _use_new_zipfile_serialization=False)
    for f in ("m.pt", "a.npz", "l.pt"):
        r = subprocess.run([tseal(), "scan", "--json", str(tmp_path / f)], capture_output=True, text=True)
        assert r.returncode == 0, (f, r.stdout, r.stderr)
        assert json.loads(r.stdout)["incomplete"] is False


def test_frozenset_dag_costs_nothing(tmp_path):
    """A memo DAG of nested frozensets (each level holds the previous twice): keys are
    encoded once per node, so the cost is linear, not exponential."""
    ops = bytearray(b"\x80\x04")
    ops += b"\x91\x94"  # EMPTY_FROZENSET, MEMOIZE -> memo 0
    for i in range(60):
        ops += b"(h" + bytes([i]) + b"h" + bytes([i]) + b"\x85\x91\x94"  # frozenset({s, (s,)})
    ops += b"."
    p = tmp_path / "fs.pkl"
    p.write_bytes(bytes(ops))
    assert len(ops) < 600
    launcher = Launcher(tmp_path)
    try:
        for cmd in ("scan", "inspect"):
            rc, out, err, cpu, rss = launcher.run([cmd, p])
            assert rc in (0, 2) and cpu < CPU_LIMIT_S and rss < RSS_LIMIT_KB, (cmd, rc, cpu, rss, err)
    finally:
        launcher.close()


def test_zip_bomb_pickle_stops_at_the_budget(tmp_path):
    """A deflated data.pkl that inflates to 1 GiB: refused at max_pickle_inflate by
    reading and scanning, streamed, in bounded memory."""
    pt = benign_pt()
    pre = prefix_of(pt)
    p = tmp_path / "bomb.pt"
    with zipfile.ZipFile(io.BytesIO(pt)) as zin, zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for info in zin.infolist():
            if info.filename.endswith("data.pkl"):
                with z.open(info.filename, "w", force_zip64=True) as w:
                    w.write(b"\x80\x02(")
                    chunk = b"N" * (16 << 20)
                    for _ in range(64):
                        w.write(chunk)
            else:
                z.writestr(info.filename, zin.read(info))
    assert p.stat().st_size < 8 << 20
    launcher = Launcher(tmp_path)
    try:
        for cmd in ("scan", "inspect"):
            rc, out, err, cpu, rss = launcher.run([cmd, p])
            assert rc == 2 and "max_pickle_inflate" in err, (cmd, rc, err)
            assert cpu < CPU_LIMIT_S and rss < RSS_LIMIT_KB, (cmd, cpu, rss)
    finally:
        launcher.close()
