"""torch.save of torch 0.1.x: the tar archive torch.load still reads (_legacy_load).

Usage: python torch_tar.py OUTDIR

No torch writes this format any more, so the part of torch 0.1's serialization._save that
decides the bytes is repeated here (docs/formats/tar.md): the object is pickled (protocol
2) with persistent ids str(key) for tensors and storages and (class, source file, source)
for nn.Module classes; `tensors` holds a count, then per tensor the pickle of (key,
storage key, tensor class) and the metadata torch 0.1's _write_metadata wrote (ndim as a
C long, sizes, strides, offset); `storages` a count, then per storage the pickle of (key,
location, storage class) and what _write_file wrote (numel as a C long, the elements),
then the pickle of the storage views (view key, root key, offset, numel). Each member is
written to a temporary file and added with tarfile's TarFile.add (_add_to_tar), in
_save's order: sys_info, pickle, tensors, storages. Keys are addresses, as torch 0.1's
_cdata were. The data comes from real torch 2.x tensors.

Only the archive dialect varies between the files, plus hard links and long names (which
tarfile writes as ustar prefixes, GNU ././@LongLink headers or pax records), to cover what
tarfile can write:
  ustar.pt   USTAR_FORMAT; the state_dict case; an extra member with a ustar prefix
  gnu.pt     GNU_FORMAT; the views case; the object under a long name, `pickle` a hard
             link to it (L and K headers)
  pax.pt     PAX_FORMAT, torch 0.1's own choice (pax mtime records); the storages case;
             `storages` a hard link to a long-named member (pax path and linkpath)
  hardlink.pt  PAX_FORMAT; the state_dict case; `tensors` a hard link to a short name
Also writes zip.pt per case (torch.save of what torch.load gives for the tar file is
made by the tests, not here) and cases.json: {file: case}.
"""
from __future__ import annotations

import collections
import inspect
import json
import os
import pickle
import struct
import sys
import tarfile
import tempfile

import torch

LONG = struct.Struct("<q")  # a C long of the 64-bit Linux machines torch 0.1 ran on
PROTOCOL = 2                # serialization.DEFAULT_PROTOCOL

STORAGE_CLASS = {
    torch.float32: torch.FloatStorage, torch.float64: torch.DoubleStorage, torch.float16: torch.HalfStorage,
    torch.int64: torch.LongStorage, torch.int32: torch.IntStorage, torch.int16: torch.ShortStorage,
    torch.int8: torch.CharStorage, torch.uint8: torch.ByteStorage, torch.bool: torch.BoolStorage,
    torch.bfloat16: torch.BFloat16Storage,
}


def tensor_class(dtype):
    return getattr(torch, STORAGE_CLASS[dtype].__name__.replace("Storage", "Tensor"))


class StorageView:
    """torch 0.1's storage slice (`storage[a:b]`, whose _root_storage() is (root, a)):
    `numel` elements of `base`'s storage from element `offset`."""

    def __init__(self, base: torch.Tensor, offset: int, numel: int) -> None:
        self.base, self.offset, self.numel = base, offset, numel


class ViewTensor:
    """A tensor over a StorageView: torch 0.1's tensor.set_(view, offset, size, stride)."""

    def __init__(self, view: StorageView, offset: int, size, stride) -> None:
        self.view, self.offset, self.size, self.stride = view, offset, tuple(size), tuple(stride)


class Saver:
    """torch 0.1's _save: persistent ids while pickling, then the tensors and storages."""

    def __init__(self) -> None:
        self.tensors = {}   # key -> tensor (torch.Tensor or ViewTensor), in first-use order
        self.storages = {}  # key -> (bytes, dtype) of root storages, or StorageView
        self.classes = {}
        self.kept = []      # objects whose addresses stand for storages without data

    def storage_key(self, s: torch.UntypedStorage, dtype) -> int:
        key = s.data_ptr()
        if key == 0:  # no data (an empty storage): an address of its own, as _cdata was
            self.kept.append(object())
            key = id(self.kept[-1])
        if key not in self.storages:
            self.storages[key] = (torch.empty(0, dtype=torch.uint8).set_(s).numpy().tobytes(), dtype)
        return key

    def persistent_id(self, obj):
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            if obj in self.classes:
                return None
            self.classes[obj] = True
            return (obj, inspect.getsourcefile(obj), inspect.getsource(obj))
        if isinstance(obj, (torch.Tensor, ViewTensor)):
            self.tensors[id(obj)] = obj
            return str(id(obj))
        if isinstance(obj, torch.storage.TypedStorage):
            return str(self.storage_key(obj._untyped_storage, obj.dtype))
        if isinstance(obj, StorageView):
            self.storages[id(obj)] = obj
            return str(id(obj))
        return None

    def pickle_objects(self, f, obj) -> None:
        pickler = pickle.Pickler(f, protocol=PROTOCOL)
        pickler.persistent_id = self.persistent_id
        pickler.dump(obj)

    def save_tensors(self, f) -> None:
        pickle.dump(len(self.tensors), f, protocol=PROTOCOL)
        for key, t in self.tensors.items():
            if isinstance(t, ViewTensor):
                self.storages[id(t.view)] = t.view
                storage_id, dtype = id(t.view), t.view.base.dtype
                size, stride, offset = t.size, t.stride, t.offset
            else:
                storage_id, dtype = self.storage_key(t.untyped_storage(), t.dtype), t.dtype
                size, stride, offset = tuple(t.shape), t.stride(), t.storage_offset()
            pickle.dump((key, storage_id, tensor_class(dtype)), f, protocol=PROTOCOL)
            f.write(LONG.pack(len(size)))
            f.write(b"".join(LONG.pack(n) for n in size))
            f.write(b"".join(LONG.pack(n) for n in stride))
            f.write(LONG.pack(offset))

    def save_storages(self, f) -> None:
        views, roots = [], {}
        for key, s in list(self.storages.items()):
            if isinstance(s, StorageView):
                root = self.storage_key(s.base.untyped_storage(), s.base.dtype)
                roots[root] = self.storages[root]
                views.append((key, root, s.offset, s.numel))
        for v in views:
            del self.storages[v[0]]
        self.storages.update(roots)
        pickle.dump(len(self.storages), f, protocol=PROTOCOL)
        for key, (data, dtype) in self.storages.items():
            pickle.dump((key, "cpu", STORAGE_CLASS[dtype]), f, protocol=PROTOCOL)
            f.write(LONG.pack(len(data) // torch.empty(0, dtype=dtype).element_size()))
            f.write(data)
        pickle.dump(views, f, protocol=PROTOCOL)


def sys_info(f) -> None:
    pickle.dump(dict(protocol_version=1000, little_endian=sys.byteorder == "little",
                     type_sizes=dict(short=2, int=4, long=LONG.size)), f, protocol=PROTOCOL)


def add(tar: tarfile.TarFile, name: str, write) -> None:
    """_add_to_tar: the member written to a temporary file, added under `name`."""
    tmp = tempfile.NamedTemporaryFile(delete=False)
    write(tmp)
    tmp.close()
    tar.add(tmp.name, arcname=name)
    os.remove(tmp.name)


def add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime, info.mode = tarfile.LNKTYPE, target, 1_500_000_000, 0o644
    tar.addfile(info)


# A name longer than 100 bytes: a ustar prefix, a GNU long name or a pax path.
LONG_DIR = "checkpoint/" + "members-of-the-object-pickle-written-under-a-long-name-" * 2


def save(obj, path, fmt, *, pickle_as=None, storages_as=None, tensors_as=None, extra=None) -> None:
    """Writes `obj` as torch 0.1 did. `*_as`: write that member under another name and
    add the member torch reads as a hard link to it, after it. `extra`: (name, bytes) of
    one more member."""
    s = Saver()
    with tarfile.open(path, mode="w:", format=fmt) as tar:
        add(tar, "sys_info", sys_info)
        add(tar, pickle_as or "pickle", lambda f: s.pickle_objects(f, obj))
        if pickle_as:
            add_link(tar, "pickle", pickle_as)
        add(tar, tensors_as or "tensors", s.save_tensors)
        if tensors_as:
            add_link(tar, "tensors", tensors_as)
        add(tar, storages_as or "storages", s.save_storages)
        if storages_as:
            add_link(tar, "storages", storages_as)
        if extra:
            add(tar, extra[0], lambda f: f.write(extra[1]))


def state_dict_case():
    g = torch.Generator().manual_seed(7)
    w = torch.randn(4, 3, generator=g)
    sd = collections.OrderedDict()
    sd["fc.weight"] = w
    sd["fc.bias"] = torch.randn(4, generator=g, dtype=torch.float64)
    sd["head.weight"] = w                      # tied: the same tensor twice
    sd["fc.weight_t"] = w.t()                  # a view: same storage, other strides
    sd["rows"] = w[1:3]                        # a view with a storage offset
    sd["steps"] = torch.tensor(12345678901, dtype=torch.int64)  # 0-d
    sd["empty"] = torch.zeros(0, 3)
    sd["half"] = torch.randn(5, generator=g).half()
    sd["bf16"] = torch.randn(2, 2, generator=g).bfloat16()
    sd["bytes"] = torch.arange(250, 256, dtype=torch.uint8)
    sd["chars"] = torch.tensor([-128, 0, 127], dtype=torch.int8)
    sd["shorts"] = torch.tensor([-32768, 7], dtype=torch.int16)
    sd["ints"] = torch.tensor([[1, -2], [3, 2**31 - 1]], dtype=torch.int32)
    sd["mask"] = torch.tensor([True, False, True])
    return sd


def views_case():
    base = torch.arange(24, dtype=torch.float32)
    grid = base.view(4, 6)
    return {"base": base, "grid": grid, "cols": grid[:, 1::2], "diag": grid.diagonal(),
            "list": [grid[0], grid[3]], "tuple": (base[5:9], 3.5, "text", None)}


def storages_case():
    base = torch.arange(10, dtype=torch.float64)
    view = StorageView(base, 2, 6)
    return {"base": base, "storage": torch.DoubleStorage([1.0, 2.0, 3.0]), "view_storage": view,
            "over_view": ViewTensor(view, 1, (2, 2), (2, 1)), "arch": torch.nn.Linear, "epoch": 3}


CASES = {"state_dict": state_dict_case, "views": views_case, "storages": storages_case}


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    files = {
        "ustar.pt": ("state_dict", dict(fmt=tarfile.USTAR_FORMAT,
                                        extra=("notes/" + "n" * 90 + "/" + "readme-" * 10 + ".txt", b"hello\n"))),
        "gnu.pt": ("views", dict(fmt=tarfile.GNU_FORMAT, pickle_as=LONG_DIR + "object.pickle")),
        "pax.pt": ("storages", dict(fmt=tarfile.PAX_FORMAT, storages_as=LONG_DIR + "storages.data")),
        "hardlink.pt": ("state_dict", dict(fmt=tarfile.PAX_FORMAT, tensors_as="tensor-metadata")),
    }
    for name, (case, kw) in files.items():
        save(CASES[case](), os.path.join(out, name), kw.pop("fmt"), **kw)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({name: case for name, (case, _) in files.items()}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
