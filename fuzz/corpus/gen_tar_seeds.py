"""Seed corpus of the tar fuzz target: torch 0.1's tar checkpoints as the test producer
writes them (tests/py/producers/torch_tar.py: Python's tarfile in ustar, GNU and pax
formats, long names, hard links), each read by today's torch.load.

Usage: gen_tar_seeds.py [FUZZ_CORPUS_DIR]   (default: the directory of this script)

tarfile pads an archive to its record size (20 blocks); the seeds use a record of two
blocks (GNU tar's -b 2) so that they stay a few KiB and mutations reach the headers.
"""
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile
import warnings

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "py" / "producers"))
import torch_tar  # noqa: E402

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    warnings.filterwarnings("ignore")
    tarfile.RECORDSIZE = 2 * tarfile.BLOCKSIZE
    out = os.path.join(ROOT, "tar")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        torch_tar.main(tmp)
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".pt"):
                torch.load(os.path.join(tmp, name), weights_only=False)  # torch reads it
                shutil.copy(os.path.join(tmp, name), os.path.join(out, name[:-3]))


if __name__ == "__main__":
    main()
