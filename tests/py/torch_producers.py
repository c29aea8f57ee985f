"""Scripts run in fresh processes (torch 2.13 in the venv, torch 1.13 under
/usr/bin/python3) to make real checkpoints for the tests."""
from __future__ import annotations

import subprocess
import sys
import textwrap

# A model class importable from the tests' directory (python path set by callers).
NETDEF = textwrap.dedent('''
    import torch
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.head = torch.nn.Linear(3, 2)
            self.head.weight = self.fc.weight  # tied (same Parameter object)
            self.register_buffer("steps", torch.tensor(5))
            self.cfg = {"lr": 0.1, "layers": [4, 3, 2], "name": "net"}
        def forward(self, x):
            return self.fc(x)
''')

# Builds the same checkpoint in any torch version: deterministic values, views,
# tied tensors, Parameters, nested non-tensor leaves.
CHECKPOINT = textwrap.dedent('''
    import collections, math, torch
    def checkpoint(views=True):
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
        # pickle.dumps gives every distinct tensor its own storage copy (torch's own
        # loader returns them unshared), so the view-free variant exists to compare
        # pickles with zip/legacy files.
        one = base if views else base.clone()
        two = base if views else base.clone()
        lin = collections.OrderedDict()
        lin["weight"] = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5.5
        lin["bias"] = torch.tensor([-0.0, 1.5, float("inf")])
        lin._metadata = collections.OrderedDict([("", {"version": 1})])
        return {
            "model": lin,
            "tied_a": base, "tied_b": base,
            "slice": one[1:3, 2:5], "transposed": two.t(),
            "param": torch.nn.Parameter(torch.ones(2, 2) * 0.25),
            "frozen": torch.nn.Parameter(torch.zeros(3), requires_grad=False),
            "ints": torch.arange(5, dtype=torch.int64), "flags": torch.tensor([True, False]),
            "half": torch.linspace(-2, 2, 5).to(torch.float16), "bf16": torch.linspace(-2, 2, 5).to(torch.bfloat16),
            "c64": torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64), "scalar": torch.tensor(3.25),
            "empty": torch.zeros(0, 3),
            "epoch": 7, "lr": 3e-4, "name": "run-1", "betas": (0.9, 0.999), "layers": [1, 2, 3], "none": None,
            "big": 2 ** 80, "nan": float("nan"),
        }
''')


def run(python: str, code: str, *args: str, cwd: str | None = None, env: dict | None = None) -> str:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def save_checkpoint(python: str, paths: list, fmt: str) -> None:
    """Saves checkpoint(views=True) to paths[0] and checkpoint(views=False) to
    paths[1] in one process. fmt: zip | legacy | pickle."""
    code = CHECKPOINT + textwrap.dedent('''
        import sys, pickle
        fmt = sys.argv[1]
        for path, views in zip(sys.argv[2:], (True, False)):
            ck = checkpoint(views)
            if fmt == "zip":
                torch.save(ck, path)
            elif fmt == "legacy":
                torch.save(ck, path, _use_new_zipfile_serialization=False)
            else:
                open(path, "wb").write(pickle.dumps(ck))
    ''')
    run(python, code, fmt, *map(str, paths))


def venv_python() -> str:
    return sys.executable
