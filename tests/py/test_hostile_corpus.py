"""Hostile and corrupt input at scale: hundreds of files, every one through `tseal
inspect`, `scan`, `verify` and `canon`.

The corpus is generated in test setup (nothing checked in):
  * attacks made by the real pickler (classes whose __reduce__ returns the attack) as a
    plain pickle, inside torch.save (zip and legacy) and inside a nested
    torch.storage._load_from_bytes payload: os.system, eval, exec, getattr,
    subprocess.Popen, runpy, importlib, operator.attrgetter, functools.partial,
    torch.load, shutil.rmtree, webbrowser.open, ...
  * hand-made hostile shapes (docs/formats/pickle.md and docs/formats/zip.md): STACK_GLOBAL
    operands hidden in the memo, nested _load_from_bytes chains deeper than the limit,
    a TorchScript archive, zip local/central disagreements, entries outside the prefix,
    duplicate names, zip+pickle polyglots, storage numel larger than its record, numel
    overflow, deep nesting, memo bombs and exponential DAGs, huge safetensors header
    lengths, npy object arrays;
  * mutations of small real files of every format: truncations, bit flips, byte splices.

For every file and command: the exit status is 0, 1 or 2 (never a signal); status 2
comes with exactly one line "tseal: error: ..." on stderr (verify: exit 1 comes with one
"CORRUPT f: ..." line on stdout, as docs/cli.md specifies); `scan` gives the right
verdict for the pickler-made attacks (1, dangerous); each run uses under 1 s of CPU
and under 256 MiB of memory (peak RSS of that very process, from wait4); a failed
`canon` leaves no output file and no temp file; `canon` refuses a file with dangerous
globals (exit 1, one "tseal: refused: ... [scan/dangerous-global]" line naming them, no
output), every pickler-made attack among them; and `canon --allow-unsafe` of such a
file writes a copy that still scans dangerous (canonical form never launders a finding).
"""
from __future__ import annotations

import collections
import functools
import io
import json
import os
import pathlib
import pickle
import random
import resource
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import tseal_bin  # noqa: E402

CPU_LIMIT_S = 1.0
RSS_LIMIT_KB = 256 * 1024
AS_LIMIT = 4 << 30  # safety net only; the bound checked is RSS_LIMIT_KB


# ---- attacks made by the real pickler ----------------------------------------------

def _attack(fn, *args):
    class Attack:
        def __reduce__(self):
            return (fn, args)
    return Attack()


def _callables():
    import builtins
    import importlib
    import operator
    import runpy
    import shutil
    import subprocess as sp
    import webbrowser
    return {
        "os_system": (os.system, "touch /tmp/tensorseal-pwned"),
        "posix_popen": (os.popen, "id"),
        "eval": (builtins.eval, "__import__('os').system('id')"),
        "exec": (builtins.exec, "import os"),
        "getattr": (builtins.getattr, _attack(importlib.import_module, "os"), "system"),
        "compile": (builtins.compile, "1", "f", "eval"),
        "subprocess_popen": (sp.Popen, ["id"]),
        "subprocess_check_output": (sp.check_output, ["id"]),
        "runpy": (runpy.run_path, "/tmp/x.py"),
        "importlib": (importlib.import_module, "os"),
        "attrgetter": (operator.attrgetter, "system"),
        "partial": (functools.partial, os.system, "id"),
        "torch_load": (torch.load, "/tmp/x.pt"),
        "rmtree": (shutil.rmtree, "/tmp/nothing-here"),
        "webbrowser": (webbrowser.open, "http://example.invalid"),
        "open": (builtins.open, "/etc/passwd"),
    }


def attack_files(d: pathlib.Path) -> dict:
    """name -> path of files whose scan verdict must be dangerous (exit 1)."""
    out = {}
    for name, (fn, *args) in _callables().items():
        payload = {"weight": torch.ones(2), "x": _attack(fn, *args)}
        for proto in (0, 2, 4, 5):
            p = d / f"attack_{name}_p{proto}.pkl"
            p.write_bytes(pickle.dumps(payload, protocol=proto))
            out[p.name] = p
        p = d / f"attack_{name}.pt"
        torch.save(payload, p)
        out[p.name] = p
        p = d / f"attack_{name}.legacy.pt"
        torch.save(payload, p, _use_new_zipfile_serialization=False)
        out[p.name] = p
        # Nested: a _load_from_bytes payload whose own pickle holds the attack.
        inner = io.BytesIO()
        torch.save(payload, inner, _use_new_zipfile_serialization=False)
        p = d / f"attack_{name}_nested.pkl"
        p.write_bytes(pickle.dumps(_attack(torch.storage._load_from_bytes, inner.getvalue()), protocol=2))
        out[p.name] = p
    return out


# ---- hand-made hostile shapes -------------------------------------------------------

def su(s: str) -> bytes:  # SHORT_BINUNICODE
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def binbytes(b: bytes) -> bytes:
    return b"B" + struct.pack("<I", len(b)) + b


def load_from_bytes(payload: bytes) -> bytes:
    return b"\x80\x04" + su("torch.storage") + su("_load_from_bytes") + b"\x93" + binbytes(payload) + b"\x85R."


def zip_bytes(entries, prefix="archive") -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(f"{prefix}/{name}" if prefix else name, data)
    return b.getvalue()


class StoragePickler(pickle.Pickler):
    """pickle.Pickler emitting torch-style persistent ids for Storage markers."""
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Storage) else None


class Storage:
    def __init__(self, *pid):
        self.pid = pid


def _rebuild(storage, offset, size, stride):
    class R:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2, (storage, offset, size, stride, False, collections.OrderedDict()))
    return R()


def torch_zip_with(obj, records) -> bytes:
    b = io.BytesIO()
    StoragePickler(b, protocol=2).dump(obj)
    return zip_bytes([("data.pkl", b.getvalue())] + records + [("version", b"3\n")])


def hostile_shapes(d: pathlib.Path, real: dict) -> None:
    files = {}
    # STACK_GLOBAL whose names come out of the memo (BINPUT/BINGET/MEMOIZE mixed).
    files["memo_stack_global.pkl"] = (b"\x80\x04" + su("posix") + b"\x94" + su("system") + b"q\x05"
                                      + b"0h\x00h\x05\x93" + su("id") + b"\x85R.")
    files["memo_stack_global_long.pkl"] = (b"\x80\x04" + su("builtins") + b"r\x00\x01\x00\x00" + su("eval")
                                           + b"\x94j\x00\x01\x00\x00h\x01\x93" + su("1") + b"\x85R.")
    files["global_opcode_eval.pkl"] = b"cbuiltins\neval\n(V1\ntR."
    files["inst_opcode.pkl"] = b"(S'id'\nios\nsystem\n."
    files["obj_opcode.pkl"] = b"\x80\x02(cos\nsystem\nX\x02\x00\x00\x00idtb."
    files["frame_split.pkl"] = (b"\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00" + su("os") + b"\x95\x09\x00\x00\x00"
                                b"\x00\x00\x00\x00" + su("system") + b"\x93" + su("id") + b"\x85R.")
    files["build_setstate.pkl"] = b"\x80\x02c__main__\nX\n)\x81}X\x01\x00\x00\x00aK\x01sb."
    # Nested _load_from_bytes: attack inside, a chain past max_nested_files, a zip inside.
    evil = b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R."
    files["nested_attack.pkl"] = load_from_bytes(evil)
    chain = evil
    for depth in range(1, 13):
        chain = load_from_bytes(chain)
        if depth in (1, 7, 8, 9, 12):
            files[f"nested_chain_{depth}.pkl"] = chain
    files["nested_zip.pkl"] = load_from_bytes(real["tiny.pt"])
    files["nested_safetensors.pkl"] = load_from_bytes(real["tiny.safetensors"])
    files["nested_npy.pkl"] = load_from_bytes(real["tiny.npy"])
    files["nested_garbage.pkl"] = load_from_bytes(b"\x00" * 64)
    files["nested_self_truncated.pkl"] = load_from_bytes(real["tiny.legacy.pt"][:-10])
    # Zip tricks on a real torch.save file.
    z = real["tiny.pt"]
    cd = z.rfind(b"PK\x01\x02", 0, z.rfind(b"PK\x05\x06"))
    first_cd = z.find(b"PK\x01\x02")
    files["zip_local_name_mismatch.pt"] = z[:30] + b"X" + z[31:]
    lfh_size = z[:18] + b"\xff\xff\xff\x7f" + z[22:]
    files["zip_local_size_mismatch.pt"] = lfh_size
    files["zip_local_crc_mismatch.pt"] = z[:14] + bytes(4) + z[18:]
    files["zip_local_method_deflate.pt"] = z[:8] + b"\x08\x00" + z[10:]
    files["zip_flags_encrypted.pt"] = z[:6] + b"\x01\x08" + z[8:]
    files["zip_central_offset_wild.pt"] = z[:first_cd + 42] + b"\xf0\xff\xff\x7f" + z[first_cd + 46:]
    files["zip_central_size_wild.pt"] = z[:cd + 20] + b"\xff\xff\xff\x7f" + z[cd + 24:]
    files["zip_eocd_count_wild.pt"] = z[:-22 + 10] + b"\xff\xff" + z[-22 + 12:] if z[-22:-18] == b"PK\x05\x06" else z[:-5]
    files["zip_no_eocd.pt"] = z[:z.rfind(b"PK\x05\x06")]
    files["zip_outside_prefix.pt"] = zip_bytes([("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2)),
                                               ("other/data/0", b"\0" * 8), ("archive/version", b"3\n")], prefix="")
    files["zip_dotdot.pt"] = zip_bytes([("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2)),
                                       ("archive/../../etc/x", b"x"), ("archive/version", b"3\n")], prefix="")
    with pytest.warns(UserWarning):
        files["zip_duplicate_names.pt"] = zip_bytes([("data.pkl", pickle.dumps({"a": 1}, protocol=2)),
                                                    ("data.pkl", pickle.dumps({"b": 2}, protocol=2)),
                                                    ("version", b"3\n")])
    files["zip_no_data_pkl.pt"] = zip_bytes([("version", b"3\n")])
    files["zip_empty.pt"] = zip_bytes([])
    files["polyglot_pickle_then_zip.pt"] = pickle.dumps({"a": 1}, protocol=2) + z
    files["polyglot_zip_then_pickle.pt"] = z + evil
    files["polyglot_pickle_in_zip_comment.pt"] = z[:-2] + struct.pack("<H", len(evil)) + evil
    # TorchScript archive (CVE-2025-32434 shape).
    files["torchscript.pt"] = real["torchscript.pt"]
    # Storage records: numel larger than the record, numel overflow, huge shapes.
    st = Storage("storage", torch.FloatStorage, "0", "cpu", 1 << 20)
    files["storage_numel_gt_record.pt"] = torch_zip_with({"w": _rebuild(st, 0, (1 << 20,), (1,))},
                                                         [("data/0", b"\0" * 16)])
    st = Storage("storage", torch.FloatStorage, "0", "cpu", 1 << 62)
    files["storage_numel_overflow.pt"] = torch_zip_with({"w": _rebuild(st, 0, (1 << 62,), (1,))},
                                                        [("data/0", b"\0" * 16)])
    st = Storage("storage", torch.FloatStorage, "0", "cpu", 4)
    files["shape_overflow.pt"] = torch_zip_with({"w": _rebuild(st, 0, (1 << 40, 1 << 40), (1, 1))},
                                                [("data/0", b"\0" * 16)])
    files["stride_out_of_storage.pt"] = torch_zip_with({"w": _rebuild(st, 0, (4,), (1 << 30,))},
                                                       [("data/0", b"\0" * 16)])
    files["negative_offset.pt"] = torch_zip_with({"w": _rebuild(st, -4, (4,), (1,))}, [("data/0", b"\0" * 16)])
    files["storage_key_missing.pt"] = torch_zip_with({"w": _rebuild(st, 0, (4,), (1,))}, [])
    files["storage_bad_type.pt"] = torch_zip_with(
        {"w": _rebuild(Storage("storage", os.system, "0", "cpu", 4), 0, (4,), (1,))}, [("data/0", b"\0" * 16)])
    files["storage_pid_short.pt"] = torch_zip_with({"w": _rebuild(Storage("storage", "x"), 0, (4,), (1,))},
                                                   [("data/0", b"\0" * 16)])
    # Deep nesting, memo bombs, exponential DAGs, huge counts.
    for n in (1000, 100_000):
        files[f"deep_lists_{n}.pkl"] = b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."
        files[f"deep_marks_{n}.pkl"] = b"\x80\x02" + b"(" * n + b"."
    files["deep_tuples.pkl"] = b"\x80\x02" + b")" + b"\x85" * 200_000 + b"."
    files["memo_bomb_puts.pkl"] = b"\x80\x04N" + b"".join(b"r" + struct.pack("<I", i) for i in range(300_000)) + b"."
    files["memo_sparse_index.pkl"] = b"\x80\x04Nr\xff\xff\xff\xffj\xff\xff\xff\xff."
    files["memo_get_missing.pkl"] = b"\x80\x02h\x07."
    dag = b"\x80\x02]q\x00"
    for i in range(1, 80):
        dag += b"]" + b"h" + bytes([(i - 1) % 256]) + b"h" + bytes([(i - 1) % 256]) + b"e" + b"q" + bytes([i % 256])
    files["exponential_dag.pkl"] = dag + b"."
    files["long_binunicode8.pkl"] = b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"abc."
    files["long_binbytes.pkl"] = b"\x80\x03B" + struct.pack("<I", 0xFFFFFFF0) + b"abc."
    files["long_long4.pkl"] = b"\x80\x02\x8b" + struct.pack("<i", 0x7FFFFFF0) + b"\x01."
    files["frame_huge.pkl"] = b"\x80\x04\x95" + struct.pack("<Q", 1 << 60) + b"N."
    files["empty.pkl"] = b""
    files["stop_only.pkl"] = b"."
    files["stack_underflow.pkl"] = b"\x80\x02t."
    files["pop_mark_empty.pkl"] = b"\x80\x021."
    files["setitem_on_list.pkl"] = b"\x80\x02]K\x01K\x02s."
    files["append_on_dict.pkl"] = b"\x80\x02}K\x01a."
    # safetensors headers.
    for n in (1 << 63, (1 << 64) - 1, 100_000_001, 1 << 32, 50):
        files[f"st_header_len_{n}.safetensors"] = struct.pack("<Q", n) + b'{"a":1}'
    big_h = b'{' + b",".join(b'"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(20000)) + b'}'
    files["st_many_entries.safetensors"] = struct.pack("<Q", len(big_h)) + big_h
    for name, h in {
        "st_overlap": b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
        "st_numel_overflow": b'{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}',
        "st_negative_shape": b'{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}',
        "st_bad_dtype": b'{"a":{"dtype":"OBJ","shape":[2],"data_offsets":[0,8]}}',
        "st_deep_json": b'{"__metadata__":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "st_bad_utf8": b'{"\xff\xfe":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        "st_offsets_past_end": b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8000000000]}}',
        "st_metadata_not_str": b'{"__metadata__":{"a":1}}',
        "st_number_overflow": b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":5.9e534}}',
        "st_dup_keys": b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
    }.items():
        files[name + ".safetensors"] = struct.pack("<Q", len(h)) + h + b"\0" * 8
    # npy: object arrays, absurd headers.
    b = io.BytesIO()
    np.save(b, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    files["npy_object.npy"] = b.getvalue()
    b = io.BytesIO()
    np.savez(b, obj=np.array([_attack(os.system, "id")], dtype=object), allow_pickle=True)
    files["npz_object_attack.npz"] = b.getvalue()
    for name, hdr in {
        "npy_shape_overflow": "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "npy_negative": "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
        "npy_code_in_header": "{'descr': __import__('os').system('id'), 'fortran_order': False, 'shape': (1,), }",
        "npy_struct_dtype": "{'descr': [('a', '<f4'), ('b', '|O')], 'fortran_order': False, 'shape': (1,), }",
        "npy_deep_tuple": "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + ", }",
    }.items():
        h = hdr.encode()
        h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
        files[name + ".npy"] = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + b"\0" * 16
    for name, data in files.items():
        (d / name).write_bytes(data)


# ---- mutations of real files -------------------------------------------------------

def real_files(d: pathlib.Path) -> dict:
    """Small files written by the real producers (bytes by name)."""
    from safetensors.torch import save
    g = torch.Generator().manual_seed(3)
    sd = collections.OrderedDict(w=torch.randn(3, 4, generator=g), b=torch.arange(3, dtype=torch.int64))
    out = {}
    buf = io.BytesIO()
    torch.save(sd, buf)
    out["tiny.pt"] = buf.getvalue()
    buf = io.BytesIO()
    torch.save(sd, buf, _use_new_zipfile_serialization=False)
    out["tiny.legacy.pt"] = buf.getvalue()
    out["tiny.pkl"] = pickle.dumps(sd, protocol=2)
    out["tiny.safetensors"] = save(dict(sd), metadata={"format": "pt"})
    buf = io.BytesIO()
    np.save(buf, np.arange(12, dtype=np.float32).reshape(3, 4))
    out["tiny.npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez_compressed(buf, a=np.arange(5), b=np.ones((2, 2), np.float16))
    out["tiny.npz"] = buf.getvalue()

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(M()), buf)  # ScriptModule.save(x) would take str(x) as a file name
    assert buf.getvalue()[:2] == b"PK"
    out["torchscript.pt"] = buf.getvalue()
    for name, data in out.items():
        (d / ("real_" + name)).write_bytes(data)
    return out


def mutations(d: pathlib.Path, real: dict) -> None:
    rng = random.Random(8)
    for name, data in real.items():
        if name == "torchscript.pt":
            continue
        n = len(data)
        for cut in sorted({1, 7, 8, 9, 30, n // 3, n // 2, n - 22, n - 1} | {rng.randrange(n) for _ in range(8)}):
            (d / f"trunc{cut}_{name}").write_bytes(data[:cut])
        for i in range(20):
            b = bytearray(data)
            for _ in range(1 + i % 4):
                b[rng.randrange(n)] ^= 1 << rng.randrange(8)
            (d / f"flip{i}_{name}").write_bytes(bytes(b))
        for i in range(10):
            other = real[rng.choice(sorted(real))]
            a, l = rng.randrange(n), rng.randrange(1, 64)
            s = rng.randrange(max(1, len(other) - l))
            (d / f"splice{i}_{name}").write_bytes(data[:a] + other[s:s + l] + data[a + l:])


# ---- the runs ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    real = real_files(d)
    attacks = attack_files(d)
    hostile_shapes(d, real)
    mutations(d, real)
    files = sorted(p for p in d.iterdir() if p.is_file())
    assert len(files) >= 300, len(files)
    return {"files": files, "attacks": attacks, "dir": d}


# Peak RSS is measured by a small launcher process (plain Python, no torch): a child's
# ru_maxrss starts at the RSS of the process it was forked from (the kernel carries the
# high-water mark across fork and exec), so tseal forked straight from pytest (torch
# loaded, ~150 MiB) would report pytest's size, not its own.
LAUNCHER = r"""
import json, os, resource, sys
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (req["as"], req["as"]))
            for fd, path in ((1, req["out"]), (2, req["err"])):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(f, fd)
            os.execv(req["argv"][0], req["argv"])
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    print(json.dumps({"rc": rc, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss}), flush=True)
"""


class Launcher:
    def __init__(self, scratch: pathlib.Path):
        self.p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.out, self.err = scratch / "stdout", scratch / "stderr"

    def run(self, args):
        """Runs tseal; returns (exit status or -signal, stdout, stderr, CPU s, peak RSS KiB)."""
        req = {"argv": [tseal_bin(), *map(str, args)], "as": AS_LIMIT, "out": str(self.out), "err": str(self.err)}
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        r = json.loads(self.p.stdout.readline())
        return (r["rc"], self.out.read_text(errors="replace"), self.err.read_text(errors="replace"), r["cpu"],
                r["rss"])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


COMMANDS = ("inspect", "scan", "verify", "canon")


def test_hostile_corpus(corpus, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    launcher = Launcher(tmp_path)
    run_tseal = launcher.run
    base_rc, _, _, _, base_rss = run_tseal(["--version"])
    assert base_rc == 0
    failures = []
    stats = collections.Counter()
    worst_cpu, worst_rss = (0.0, ""), (0, "")
    for f in corpus["files"]:
        for cmd in COMMANDS:
            target = out_dir / (f.name + ".canon")
            args = [cmd, f] + (["-o", target, "--threads", "1"] if cmd == "canon" else [])
            if cmd == "verify":
                args += ["--threads", "1"]
            rc, out, err, cpu, rss = run_tseal(args)
            where = f"{cmd} {f.name}"
            stats[(cmd, rc)] += 1
            worst_cpu = max(worst_cpu, (cpu, where))
            worst_rss = max(worst_rss, (rss, where))
            if rc not in (0, 1, 2):
                failures.append(f"{where}: exit {rc} (signal or unexpected status); stderr: {err[-300:]}")
                continue
            if cmd == "inspect" and rc == 1:
                failures.append(f"{where}: exit 1 is not a status of {cmd}")
            if cmd == "canon" and rc == 1:
                lines = err.strip().splitlines()
                if len(lines) != 1 or not lines[0].startswith("tseal: refused: ") or \
                        "[scan/dangerous-global]" not in lines[0] or out.strip():
                    failures.append(f"{where}: canon exit 1 is not one 'tseal: refused:' line: {err[-300:]!r}")
            if cmd == "canon" and f.name in corpus["attacks"] and rc == 0:
                failures.append(f"{where}: canon of a pickler-made attack was not refused")
            if cmd == "verify" and rc == 1:
                # A corrupt file is a finding on stdout: "CORRUPT f: ...".
                lines = out.strip().splitlines()
                if len(lines) != 1 or not lines[0].startswith("CORRUPT ") or err.strip():
                    failures.append(f"{where}: verify output is not one 'CORRUPT' line: {out[-300:]!r} {err[-200:]!r}")
            elif rc == 2:
                lines = err.strip().splitlines()
                if len(lines) != 1 or not lines[0].startswith("tseal: error:"):
                    failures.append(f"{where}: error output is not one 'tseal: error:' line: {err[-400:]!r}")
                if "[internal]" in err:
                    failures.append(f"{where}: internal error: {err.strip()}")
            if cpu > CPU_LIMIT_S:
                failures.append(f"{where}: {cpu:.2f} s CPU (limit {CPU_LIMIT_S})")
            if rss > RSS_LIMIT_KB:
                failures.append(f"{where}: peak RSS {rss // 1024} MiB (limit {RSS_LIMIT_KB // 1024})")
            if cmd == "scan" and f.name in corpus["attacks"] and rc != 1:
                failures.append(f"{where}: scan exit {rc}, a pickler-made attack must be flagged (1); {out[:200]}{err}")
            if cmd == "scan" and f.name in corpus["attacks"] and rc == 1 and ": dangerous (" not in out.split("\n")[0]:
                failures.append(f"{where}: verdict is not dangerous: {out.splitlines()[0]}")
            if cmd == "canon":
                if rc != 0 and target.exists():
                    failures.append(f"{where}: failed canon left {target.name}")
                if rc == 0 and not target.exists():
                    failures.append(f"{where}: canon exit 0 but no output")
                if rc == 1:  # refused: forced through, the copy must keep the finding
                    rc1, _, err1, _, _ = run_tseal(args + ["--allow-unsafe"])
                    if rc1 != 0 or not target.exists():
                        failures.append(f"{where}: canon --allow-unsafe exit {rc1}: {err1[-300:]!r}")
                    else:
                        rc2, out2, _, _, _ = run_tseal(["scan", target])
                        if rc2 != 1 or ": dangerous (" not in out2.split("\n")[0]:
                            failures.append(f"{where}: canonical output of a dangerous file scans exit {rc2}: {out2[:200]}")
                target.unlink(missing_ok=True)
            leftovers = [p.name for p in out_dir.iterdir()]
            if leftovers:
                failures.append(f"{where}: files left in the output directory: {leftovers}")
                for p in out_dir.iterdir():
                    p.unlink()
    launcher.close()
    n = len(corpus["files"])
    print(f"\nhostile corpus: {n} files x {len(COMMANDS)} commands; exit statuses {dict(sorted(stats.items()))}; "
          f"max CPU {worst_cpu[0]:.3f} s ({worst_cpu[1]}); max RSS {worst_rss[0] // 1024} MiB ({worst_rss[1]}); "
          f"tseal --version: {base_rss // 1024} MiB")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])
    # The corpus must actually be hostile: most of it is rejected somewhere.
    assert stats[("inspect", 2)] >= n // 3, stats
