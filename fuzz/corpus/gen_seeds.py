"""Seed corpora for the fuzz targets that have no hand-curated corpus of their own.

Usage: gen_seeds.py [FUZZ_CORPUS_DIR]   (default: the directory of this script)
Run it with torch 2.x (.venv/bin/python) and again with Debian's torch 1.13
(/usr/bin/python3): file names carry the torch major.minor so both sets coexist.

Every seed is written by the real producer (torch.save, pickle.dumps, safetensors,
numpy); nothing here is hand-made bytes. Seeds stay small (a few KiB) so that the
fuzzer's mutations reach the interesting structure.
  torch_zip/           torch.save (zip) of small state dicts, tensors, views, dtypes
  torch_legacy/        the same with _use_new_zipfile_serialization=False
  nested_pickle/       the payloads of torch.storage._load_from_bytes in real
                       pickle.dumps(tensor) streams, plus small torch.save files
  read_bytes/          one of everything (the above, pickle.dumps, safetensors, npy, npz)
  safetensors_header/  u16 data length + header JSON of real safetensors files
  npy_header/          version byte, data length byte + header text of real np.save files
                       (npy_header_fuzz.cc's input shape)
"""
import collections
import io
import os
import pickle
import struct
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
TAG = "t" + "".join(torch.__version__.split(".")[:2])


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{name}_{TAG}"), "wb") as f:
        f.write(data)


def cases():
    g = torch.Generator().manual_seed(7)
    base = torch.randn(4, 6, generator=g)
    sd = collections.OrderedDict(weight=torch.randn(3, 2, generator=g), bias=torch.arange(3, dtype=torch.int64))
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    return {
        "state_dict": sd,
        "tensor": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "views": {"t": base.t(), "row": base[1], "slice": base[:, 2:5], "base": base,
                  "expand": torch.ones(1).expand(3)},
        "dtypes": {str(dt): torch.zeros(2, dtype=dt) for dt in
                   (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                    torch.int16, torch.int32, torch.bool, torch.complex64)},
        "leaves": {"i": 3, "f": 1.5, "s": "x", "b": b"\x00\x01", "n": None, "t": (1, 2),
                   "l": [True, False], "big": 2 ** 70, "z": torch.zeros(0)},
        "param": torch.nn.Parameter(torch.ones(2, 2)),
        "scalar": torch.tensor(2.5),
    }


def torch_save(obj, zip_format):
    b = io.BytesIO()
    torch.save(obj, b, _use_new_zipfile_serialization=zip_format)
    return b.getvalue()


class _Find(pickle.Unpickler):
    """Collects _load_from_bytes payloads without loading anything."""
    def __init__(self, f, out):
        super().__init__(f)
        self.out = out

    def find_class(self, module, name):
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return lambda b: self.out.append(b)
        return super().find_class(module, name)


def main():
    for name, obj in cases().items():
        z = torch_save(obj, True)
        legacy = torch_save(obj, False)
        put("torch_zip", name, z)
        put("torch_legacy", name, legacy)
        put("read_bytes", name + ".pt", z)
        put("read_bytes", name + ".legacy.pt", legacy)
        if name in ("tensor", "scalar", "param", "views", "state_dict"):
            p = pickle.dumps(obj, protocol=2)
            put("read_bytes", name + ".pkl", p)
            found = []
            try:
                _Find(io.BytesIO(p), found).load()
            except Exception:
                pass  # rebuild functions get our list's None; the payloads are collected
            for i, b in enumerate(found[:2]):
                put("nested_pickle", f"{name}_payload{i}", b)
    put("nested_pickle", "tensor.pt", torch_save(torch.arange(4, dtype=torch.int32), True))
    put("nested_pickle", "storage.legacy.pt", torch_save(torch.arange(4, dtype=torch.int16), False))
    put("nested_pickle", "tensor.pkl", pickle.dumps(torch.arange(3, dtype=torch.int8), protocol=2))

    if TAG.startswith("t1"):
        return  # safetensors / numpy 2 seeds come from the venv run
    from safetensors.torch import save
    st = {
        "flat": {"a": torch.ones(2, 3), "b": torch.arange(4, dtype=torch.int64)},
        "dtypes": {"h": torch.zeros(3, dtype=torch.float16), "u": torch.zeros(2, dtype=torch.uint8),
                   "bf": torch.zeros(1, dtype=torch.bfloat16), "s": torch.tensor(1.0)},
        "empty": {"z": torch.zeros(0, 4)},
    }
    for name, d in st.items():
        meta = {"format": "pt"} if name == "flat" else None
        data = save(d, metadata=meta)
        n = struct.unpack("<Q", data[:8])[0]
        put("read_bytes", name + ".safetensors", data)
        put("safetensors_header", name, struct.pack("<H", len(data) - 8 - n) + data[8:8 + n])
    for name, arr in {"f4": np.arange(6, dtype="<f4").reshape(2, 3), "be": np.arange(3, dtype=">i2"),
                      "fortran": np.asfortranarray(np.arange(6, dtype="u1").reshape(2, 3))}.items():
        b = io.BytesIO()
        np.save(b, arr)
        put("read_bytes", name + ".npy", b.getvalue())
    npy_header_seeds()
    b = io.BytesIO()
    np.savez(b, a=np.arange(3), b=np.ones((2, 2), dtype=np.float16))
    put("read_bytes", "savez.npz", b.getvalue())
    b = io.BytesIO()
    np.savez_compressed(b, a=np.arange(5, dtype=np.int8))
    put("read_bytes", "savez_compressed.npz", b.getvalue())


def npy_header_seeds():
    """np.save files as npy_header_fuzz.cc takes them: byte 0 the version - 1, byte 1
    the data length (under 256), then the header text."""
    arrays = {"f4": np.arange(6, dtype="<f4").reshape(2, 3), "be": np.arange(3, dtype=">i2"),
              "fortran": np.asfortranarray(np.arange(6, dtype="u1").reshape(2, 3)), "scalar": np.float64(2.5),
              "empty": np.zeros((0, 3), dtype="<i8"), "c8": np.ones(2, dtype="<c8"),
              "objects": np.array([1, "a"], dtype=object)}
    for name, arr in arrays.items():
        b = io.BytesIO()
        np.save(b, arr, allow_pickle=True)
        raw = b.getvalue()
        major = raw[6]
        n = struct.unpack("<H", raw[8:10])[0] if major == 1 else struct.unpack("<I", raw[8:12])[0]
        start = 10 if major == 1 else 12
        data = len(raw) - start - n
        put("npy_header", name, bytes([major - 1, min(data, 255)]) + raw[start:start + n])


if __name__ == "__main__":
    main()
