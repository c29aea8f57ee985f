"""tensorseal.torch.load(weights_only=True) reads some files torch's weights_only loader
refuses for their encoding (pickle protocols 4/5, plain pickles, legacy files of newer
dtypes): an allowance in what it parses, never in which globals it allows (README,
"Drop-ins")."""
from __future__ import annotations

import io
import os
import pickle

import pytest
import torch

import tensorseal
import tensorseal.torch as tst


class Attack:
    def __reduce__(self):
        return (os.system, ("true",))


def saved(obj, how: str) -> bytes:
    b = io.BytesIO()
    if how.startswith("zip"):
        torch.save(obj, b, pickle_protocol=int(how[-1]))
    elif how.startswith("legacy"):
        torch.save(obj, b, pickle_protocol=int(how[-1]), _use_new_zipfile_serialization=False)
    else:
        b.write(pickle.dumps(obj, protocol=int(how[-1])))
    return b.getvalue()


@pytest.mark.parametrize("how", ["zip4", "zip5", "legacy4", "legacy5", "pickle4", "pickle5"])
def test_protocols_torch_refuses_are_read(how):
    obj = {"w": torch.arange(4.0), "n": 3}
    data = saved(obj, how)
    with pytest.raises(Exception):
        torch.load(io.BytesIO(data), weights_only=True)
    got = tst.load(io.BytesIO(data), weights_only=True)
    assert torch.equal(got["w"], obj["w"]) and got["n"] == 3


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2])
def test_legacy_files_of_newer_dtypes_are_read(dtype):
    t = torch.arange(4).to(dtype)
    data = saved({"t": t}, "legacy2")
    with pytest.raises(Exception):
        torch.load(io.BytesIO(data), weights_only=False)
    got = tst.load(io.BytesIO(data), weights_only=True)
    assert got["t"].dtype == dtype and torch.equal(got["t"].view(torch.uint8), t.view(torch.uint8))


@pytest.mark.parametrize("how", ["zip4", "zip5", "legacy4", "legacy5", "pickle4", "pickle5"])
def test_the_safe_set_is_not_wider(how):
    data = saved({"w": torch.ones(1), "x": Attack()}, how)
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        tst.load(io.BytesIO(data), weights_only=True)
    assert e.value.rule == "scan/dangerous-global"
