"""A differential property of `tseal scan` (issue 32): over mutated zips, .npy headers
and pickles, if any standard loader would import a global, scan names it.

hypothesis mutates real files (pickle.dumps at every protocol, torch.save zip and legacy
files, np.save / np.savez of plain, structured and object arrays): byte flips, inserts,
cuts, GLOBAL / STACK_GLOBAL fragments spliced in, zip members renamed, recompressed
(stored, deflate, bzip2, LZMA), added or mutated, .npy headers rewritten with other
descr spellings and versions. The oracle (producers/import_oracle.py, one long-lived
worker) loads each file with pickle.load, torch.load(weights_only=False) and
numpy.load(allow_pickle=True) under an audit hook that records every global the
loader asks find_class for and stops it there, so nothing runs.

The property, for each global a loader would import: scan exits 0 or 1 and names it
(as spelled, or under the Python 3 name CPython maps a Python 2 name to); or scan
fails closed (exit 2) and the global is one the safe set has. Failures shrink to a
minimal file, written beside the test's tmp dir."""
from __future__ import annotations

import _compat_pickle
import collections
import io
import json
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from conftest import tseal_bin  # noqa: E402

HERE = pathlib.Path(__file__).parent
EXAMPLES = int(os.environ.get("TSEAL_DIFF_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Oracle:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, str(HERE / "producers" / "import_oracle.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def imports(self, path) -> dict:
        self.p.stdin.write(f"{path}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the oracle worker died")
        return json.loads(line)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


@pytest.fixture(scope="module")
def oracle():
    o = Oracle()
    yield o
    o.close()


_verdicts: dict = {}


def verdict(module: str, name: str, tmp: pathlib.Path) -> str:
    """scan's class of one global, read from a one-global pickle."""
    key = (module, name)
    if key not in _verdicts:
        p = tmp / "one-global.pkl"
        p.write_bytes(b"\x80\x04\x8c" + bytes([len(module.encode())]) + module.encode() + b"\x8c" +
                      bytes([len(name.encode())]) + name.encode() + b"\x93.")
        out = subprocess.run([tseal_bin(), "scan", "--json", str(p)], capture_output=True, text=True)
        _verdicts[key] = json.loads(out.stdout)["verdict"] if out.returncode in (0, 1) else "error"
    return _verdicts[key]


def py3_names(module: str, name: str) -> set:
    """The spelling, and the one CPython's find_class maps a Python 2 name to."""
    out = {(module, name)}
    if (module, name) in _compat_pickle.NAME_MAPPING:
        out.add(_compat_pickle.NAME_MAPPING[(module, name)])
    elif module in _compat_pickle.IMPORT_MAPPING:
        out.add((_compat_pickle.IMPORT_MAPPING[module], name))
    return out


def check(path: pathlib.Path, oracle: Oracle, tmp: pathlib.Path) -> None:
    wanted = {tuple(g.split("\t", 1)) for gs in oracle.imports(path).values() for g in gs}
    if not wanted:
        return
    out = subprocess.run([tseal_bin(), "scan", "--json", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1, 2), out.stderr
    named = set()
    if out.returncode in (0, 1):
        named = {(f["module"], f["name"]) for f in json.loads(out.stdout)["findings"]}
    for module, name in sorted(wanted):
        if py3_names(module, name) & named:
            continue
        keep = tmp.parent / f"scan-differential-{path.name}"
        keep.write_bytes(path.read_bytes())
        assert out.returncode == 2 and verdict(module, name, tmp) == "safe", (
            f"a loader imports {module}.{name} from {keep}; scan exit {out.returncode}, named {sorted(named)}, "
            f"{out.stderr.strip()}")


# ---- seeds, made by the real producers -----------------------------------------------


class Marker:
    """Pickles as os.system('true'): the oracle blocks it before anything runs."""
    def __reduce__(self):
        return (os.system, ("true",))


def _objects():
    sd = torch.nn.Linear(3, 2).state_dict()
    return [
        {"a": [1, 2.5, None, True], "b": (3, "x", b"raw"), "c": {1, 2}, "d": frozenset([3])},
        collections.OrderedDict(k=1, c=collections.Counter("abca")),
        sd,
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([{"a": 1}, [2]], dtype=object),
        {"m": Marker(), "w": 1},
        [1 + 2j, 1 << 80, bytearray(b"z")],
    ]


def _seeds() -> dict:
    out = {"pickle": [], "zip": [], "npy": []}
    for obj in _objects():
        for proto in range(6):
            out["pickle"].append(pickle.dumps(obj, protocol=proto))
        if not isinstance(obj, np.ndarray):
            for zip_format in (True, False):
                b = io.BytesIO()
                torch.save(obj, b, _use_new_zipfile_serialization=zip_format)
                (out["zip"] if zip_format else out["pickle"]).append(b.getvalue())
    rec = np.zeros(2, dtype=[("id", "<i4"), ("x", "<f8")])
    for arrays in ({"w": np.ones(3)}, {"o": np.array([collections.OrderedDict(a=1)], dtype=object), "r": rec},
                   {"m": np.array([Marker()], dtype=object), "w": np.zeros(2, np.float16)}):
        b = io.BytesIO()
        np.savez(b, **arrays)
        out["zip"].append(b.getvalue())
    for arr in (np.arange(4.0), rec, np.array([Marker()], dtype=object)):
        b = io.BytesIO()
        np.save(b, arr, allow_pickle=True)
        out["npy"].append(b.getvalue())
    return out


SEEDS = _seeds()
GLOBALS = [("posix", "system"), ("os", "system"), ("builtins", "eval"), ("__builtin__", "eval"),
           ("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"), ("torch", "storage._load_from_bytes"),
           ("numpy.core.multiarray", "_reconstruct"), ("copy_reg", "_reconstructor"), ("torch.serialization", "os.system"),
           ("mylib.models", "Config"), ("operator", "attrgetter")]


def global_fragment(module: str, name: str, stack: bool) -> bytes:
    if stack:
        m, n = module.encode(), name.encode()
        return b"\x8c" + bytes([len(m)]) + m + b"\x8c" + bytes([len(n)]) + n + b"\x93"
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


@st.composite
def mutations(draw, data: bytes) -> bytes:
    """A few byte-level edits of `data`."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "global", "global", "global", "global"]))
        at = draw(st.integers(0, max(len(b), 1) - 1)) if b else 0
        if op == "flip" and b:
            b[at] = draw(st.integers(0, 255))
        elif op == "insert":
            b[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and b:
            del b[at:at + draw(st.integers(1, 8))]
        elif op == "cut":
            del b[at:]
        else:
            module, name = draw(st.sampled_from(GLOBALS))
            b[at:at] = global_fragment(module, name, draw(st.booleans()))
    return bytes(b)


@st.composite
def mutated_pickles(draw) -> bytes:
    return draw(mutations(draw(st.sampled_from(SEEDS["pickle"]))))


METHODS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]


@st.composite
def mutated_zips(draw) -> bytes:
    seed = draw(st.sampled_from(SEEDS["zip"]))
    if draw(st.integers(0, 9)) == 0:
        return draw(mutations(seed))  # raw bytes: broken directories, CRCs, offsets
    with zipfile.ZipFile(io.BytesIO(seed)) as z:
        members = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(members) - 1))
        name, data = members[i]
        op = draw(st.sampled_from(["rename", "mutate", "add", "method"]))
        if op == "rename":
            name = draw(st.sampled_from([name.upper(), name.lower(), name.rsplit(".", 1)[0], name + ".npy",
                                         name + ".pkl", "x"]))
        elif op == "mutate":
            data = draw(mutations(data))
        elif op == "add":
            members.append((draw(st.sampled_from(["extra.pkl", "extra", "X.NPY", "inner.pt"])),
                            draw(st.sampled_from(SEEDS["pickle"] + SEEDS["npy"] + SEEDS["zip"]))))
        members[i] = (name, data)
    method = draw(st.sampled_from(METHODS))
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for name, data in members:
            if name not in z.namelist():
                z.writestr(name, data)
    return b.getvalue()


DESCRS = ["'<f8'", "'|O'", "'O'", "'object'", "'<O8'", "'i4,O'", "'(2,)O'", "'\\x4f'", "u'O'", "\"O\"",
          "[('a', '<i4'), ('b', '|O')]", "[('a', '<i4'), ('b', '<f8')]", "('|O', (2,))", "('<f4', (2,))",
          "[('s', [('o', 'O')])]", "'o' 'bject'", "[('\u00e9', 'O')]"]


@st.composite
def mutated_npys(draw) -> bytes:
    seed = draw(st.sampled_from(SEEDS["npy"]))
    version = draw(st.sampled_from([1, 2, 3]))
    descr = draw(st.sampled_from(DESCRS))
    shape = draw(st.sampled_from(["(1,)", "(2,)", "()", "(1L,)"]))
    text = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, draw(st.sampled_from(["False", "True"])),
                                                                 shape)
    if draw(st.integers(0, 3)) == 0:
        text = draw(mutations(text.encode("utf-8"))).decode("latin-1")
    h = text.encode("latin-1" if version < 3 else "utf-8", errors="replace")
    prefix = 10 if version == 1 else 12
    h += b" " * ((64 - (prefix + len(h) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(h) & 0xFFFF) if version == 1 else struct.pack("<I", len(h))
    data = draw(st.sampled_from([pickle.dumps(Marker(), protocol=2), pickle.dumps(Marker(), protocol=0),
                                 seed[seed.index(b"\n", 10) + 1:],
                                 pickle.dumps(np.array([collections.Counter()], dtype=object), protocol=4)]))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


@pytest.mark.parametrize("kind,strategy,suffix", [("pickles", mutated_pickles, ".pkl"),
                                                   ("zips", mutated_zips, ".npz"),
                                                   ("npy_headers", mutated_npys, ".npy")])
def test_scan_names_what_loaders_import(kind, strategy, suffix, oracle, tmp_path):
    path = tmp_path / f"mutated-{kind}{suffix}"

    @SETTINGS
    @given(strategy())
    def prop(data):
        path.write_bytes(data)
        check(path, oracle, tmp_path)

    prop()
