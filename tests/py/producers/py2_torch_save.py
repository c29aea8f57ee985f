"""torch.save of the Python 2 era, run by a real Python 2.7 (cPickle, protocol 2).

Usage: python2.7 py2_torch_save.py OUTDIR

No torch exists for Python 2.7 here, so the part of torch 0.3's serialization._save that
decides the bytes is repeated below (docs/formats/torch-legacy.md "Layout"): the magic
number, 1001, sys_info, the object pickled with persistent ids
('storage', <class>, key, 'cpu', numel, None), the sorted key list, then per storage
numel:u64le and the elements. Tensors are torch 0.3's `_rebuild_tensor(storage,
offset, size, stride)` (v1); every str is a Python 2 str (SHORT_BINSTRING), as torch
0.3 on Python 2 wrote it. Writes:
  py2_checkpoint.pt   a training checkpoint (state_dict, optimizer, epoch, arch...)
  py2_latin1.pt       the same with a Python 2 str that is not UTF-8 ('caf\\xe9')
  py2_expected.json   the values written, as lists, for the reader to check
"""
import array
import collections
import cPickle
import json
import os
import random
import struct
import sys
import types

MAGIC_NUMBER = 0x1950a86a20f9469cfc6c
PROTOCOL_VERSION = 1001

torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils
torch._utils = torch_utils


class Storage(object):
    """A typed storage: `typecode` elements, saved as numel:u64le + raw bytes."""
    typecode = None

    def __init__(self, values):
        self.values = array.array(self.typecode, values)

    def write_file(self, f):
        f.write(struct.pack("<Q", len(self.values)))
        f.write(self.values.tostring())


def _storage_class(name, typecode):
    cls = type(name, (Storage,), {"typecode": typecode})
    cls.__module__ = "torch"
    setattr(torch, name, cls)
    return cls


FloatStorage = _storage_class("FloatStorage", "f")
DoubleStorage = _storage_class("DoubleStorage", "d")
LongStorage = _storage_class("LongStorage", "l")


def _rebuild_tensor(storage, storage_offset, size, stride):
    raise RuntimeError("never called: this process only pickles")


_rebuild_tensor.__module__ = "torch._utils"
torch_utils._rebuild_tensor = _rebuild_tensor


class Tensor(object):
    """torch 0.3's __reduce__: (_rebuild_tensor, (storage, offset, size, stride))."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride))

    def __reduce__(self):
        return (_rebuild_tensor, self.args)


def contiguous(storage, size):
    stride, acc = [], 1
    for n in reversed(size):
        stride.insert(0, acc)
        acc *= n
    return Tensor(storage, 0, size, stride)


def save(obj, path):
    storages = {}
    keys = {}

    def persistent_id(o):
        if isinstance(o, Storage):
            key = keys.setdefault(id(o), str(140000000000 + 64 * len(keys)))  # str(root._cdata)
            storages[key] = o
            return ("storage", type(o), key, "cpu", len(o.values), None)
        return None

    with open(path, "wb") as f:
        cPickle.dump(MAGIC_NUMBER, f, 2)
        cPickle.dump(PROTOCOL_VERSION, f, 2)
        cPickle.dump(dict(protocol_version=PROTOCOL_VERSION, little_endian=sys.byteorder == "little",
                          type_sizes=dict(short=2, int=4, long=8)), f, 2)
        pickler = cPickle.Pickler(f, 2)
        pickler.persistent_id = persistent_id
        pickler.dump(obj)
        order = sorted(storages)
        cPickle.dump(order, f, 2)
        for key in order:
            storages[key].write_file(f)


def main():
    out = sys.argv[1]
    rnd = random.Random(0)
    conv_w = [rnd.gauss(0, 1) for _ in range(2 * 3)]
    bias = [rnd.gauss(0, 1) for _ in range(3)]
    fc = [rnd.uniform(-1, 1) for _ in range(12)]  # one storage: fc.weight and its transpose
    w64 = [rnd.random() for _ in range(4)]
    fc_storage = FloatStorage(fc)
    state = collections.OrderedDict([
        ("conv1.weight", contiguous(FloatStorage(conv_w), (2, 3))),
        ("conv1.bias", contiguous(FloatStorage(bias), (3,))),
        ("fc.weight", Tensor(fc_storage, 0, (3, 4), (4, 1))),
        ("fc.weight_t", Tensor(fc_storage, 0, (4, 3), (1, 4))),
        ("fc.tail", Tensor(fc_storage, 8, (4,), (1,))),
        ("bn.running_mean", contiguous(DoubleStorage(w64), (4,))),
        ("bn.steps", contiguous(LongStorage([3, 1, 4, 1, 5]), (5,))),
    ])
    ckpt = {"epoch": 3, "arch": "lenet", "best_prec1": 71.25, "state_dict": state,
            "optimizer": {"state": {}, "param_groups": [{"lr": 0.1, "momentum": 0.9, "nesterov": False,
                                                          "params": [140234567891234, 140234567891300]}]},
            u"note": u"caf\xe9 \u2713", "tags": ("py2", 2L, None)}
    save(ckpt, os.path.join(out, "py2_checkpoint.pt"))
    ckpt["arch"] = "caf\xe9"  # a latin-1 byte string: not UTF-8
    save(ckpt, os.path.join(out, "py2_latin1.pt"))
    expected = {"conv1.weight": array.array("f", conv_w).tolist(), "conv1.bias": array.array("f", bias).tolist(),
                "fc": array.array("f", fc).tolist(), "bn.running_mean": w64}
    with open(os.path.join(out, "py2_expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
