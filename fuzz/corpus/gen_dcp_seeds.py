"""Seeds for the dcp fuzz target (fuzz/dcp_fuzz.cc), written by real dcp.save in one
process: u32 LE length of .metadata, .metadata, then __0_0.distcp; the tensorseal.dcp
writer's seeds put "TSM1", u32 LE length and .tensorseal.json before __0_0.distcp.

Usage: gen_dcp_seeds.py [FUZZ_CORPUS_DIR]   (default: the directory of this script)"""
import os
import struct
import sys
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import SerializationFormat

warnings.filterwarnings("ignore")
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "dcp")
os.makedirs(OUT, exist_ok=True)

states = {
    "flat": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2, dtype=torch.int64)},
    "nested": {"m": {"w": torch.zeros(2, 2, dtype=torch.bfloat16)}, "step": 3, "l": [torch.ones(1), 2]},
    "scalar": {"s": torch.tensor(1.5, dtype=torch.float64), "name": "x"},
}
for name, sd in states.items():
    for fmt in (SerializationFormat.TORCH_SAVE, SerializationFormat.SAFETENSORS):
        with tempfile.TemporaryDirectory() as d:
            dcp.save(sd, storage_writer=dcp.FileSystemWriter(d, serialization_format=fmt))
            md = open(os.path.join(d, ".metadata"), "rb").read()
            data = open(os.path.join(d, "__0_0.distcp"), "rb").read()
        with open(os.path.join(OUT, f"{name}_{fmt.value}"), "wb") as f:
            f.write(struct.pack("<I", len(md)) + md + data)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
import tensorseal.dcp  # noqa: E402

for name, sd in states.items():
    with tempfile.TemporaryDirectory() as d:
        target = os.path.join(d, "ckpt")
        dcp.save(sd, storage_writer=tensorseal.dcp.FileSystemWriter(target, sync_files=False), no_dist=True)
        md = open(os.path.join(target, ".metadata"), "rb").read()
        manifest = open(os.path.join(target, ".tensorseal.json"), "rb").read()
        data = open(os.path.join(target, "__0_0.distcp"), "rb").read()
    with open(os.path.join(OUT, f"{name}_tensorseal"), "wb") as f:
        f.write(struct.pack("<I", len(md)) + md + b"TSM1" + struct.pack("<I", len(manifest)) + manifest + data)
