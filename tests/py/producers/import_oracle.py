"""What standard loaders would import from a file, without letting them run anything.

A worker: reads one path per line on stdin and prints one JSON line per path,
{"pickle": [...], "torch": [...], "numpy": [...]}, the globals ("module\\tname", as the
pickle spells them) each loader asked `find_class` for. An audit hook on CPython's
"pickle.find_class" event records the name and raises, so the loader stops there: no
callable is ever returned, nothing is called. The first global of each loader's reading
is what it would import first; with it blocked, a loader that imports more than one
global shows only the first, so the property checked with it is "scan names the first
global every loader would import".

Loaders: pickle.load of the file; torch.load(weights_only=False) (zip, legacy and plain
pickle paths; torch's storage classes never reach find_class); numpy.load(allow_pickle=
True) of a .npy, every member of an .npz. Memory is capped (RLIMIT_AS) so a mutated
length cannot take the machine.
"""
from __future__ import annotations

import json
import resource
import sys

seen: list[str] = []
armed = False


class Blocked(Exception):
    pass


def hook(event, args):
    if armed and event == "pickle.find_class":
        seen.append(f"{args[0]}\t{args[1]}")
        raise Blocked(f"{args[0]}.{args[1]}")


def run(fn) -> list[str]:
    global armed
    seen.clear()
    armed = True
    try:
        fn()
    except BaseException:  # noqa: BLE001 - a broken file is data here
        pass
    finally:
        armed = False
    return list(seen)


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    import pickle
    import warnings

    import numpy as np
    import torch
    warnings.filterwarnings("ignore")
    sys.addaudithook(hook)

    def by_pickle(path):
        with open(path, "rb") as f:
            pickle.load(f)

    def by_numpy(path):
        r = np.load(path, allow_pickle=True)
        if hasattr(r, "files"):
            for k in r.files:
                r[k]

    for line in sys.stdin:
        path = line.rstrip("\n")
        out = {"pickle": run(lambda: by_pickle(path)),
               "torch": run(lambda: torch.load(path, weights_only=False)),
               "numpy": run(lambda: by_numpy(path))}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
