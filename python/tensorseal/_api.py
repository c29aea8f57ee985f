"""The package's functions (re-exported by ``tensorseal``). All format logic is in the
C++ core; this module converts arguments and results."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from . import _tensorseal as _core
from .errors import invalid_argument
from .limits import LimitsArg, limit_pairs
from .objects import Opaque

PathLike = Union[str, "os.PathLike[str]"]
# progress=: a callable(done, total) in bytes, True for a tqdm bar, or None/False.
ProgressArg = Union[None, bool, Callable[[int, int], Any]]


@contextlib.contextmanager
def _progress(progress: ProgressArg, desc: str) -> Iterator[Optional[Callable[[int, int], Any]]]:
    """The callback the core calls for ``progress=`` (bytes done, bytes in all), serialised
    and under the GIL; with ``True`` a tqdm bar (closed when the work ends or fails)."""
    if progress is None or progress is False:
        yield None
        return
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            warnings.warn("progress=True draws a tqdm bar, and tqdm is not installed", stacklevel=3)
            yield None
            return
        bar = tqdm(desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False)

        def update(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.update(done - bar.n)
            if done == total:
                bar.refresh()  # fast work ends inside tqdm's redraw interval: show the end

        try:
            yield update
        finally:
            bar.close()
        return
    if not callable(progress):
        raise invalid_argument(f"progress must be a callable(done, total), True or None, not {type(progress).__name__}")
    yield progress


def _default_framework() -> str:
    try:
        import torch  # noqa: F401
        return "torch"
    except ImportError:
        return "numpy"


def _framework(framework: Optional[str]) -> str:
    if framework is None:
        return _default_framework()
    f = {"pt": "torch", "np": "numpy"}.get(framework, framework)
    if f not in ("torch", "numpy"):
        raise invalid_argument(f"unknown framework {framework!r} (use 'torch' or 'numpy')")
    return f


def _format_for(path: Union[PathLike, str], format: Optional[str]) -> str:
    if format is not None:
        return format  # a name or alias of the format table; the core resolves and checks it
    fmt = _core.format_for_extension(os.fspath(path))
    if fmt == "unknown":
        raise invalid_argument("cannot tell the format from the extension; pass format=", os.fspath(path))
    return fmt


def formats() -> List[Dict[str, Any]]:
    """The format table: one dict per format with ``name``, ``aliases``, ``extensions``,
    ``description``, ``writable``, ``canonical`` (the format ``canon`` writes for it),
    ``directory`` and ``options`` (its writer's keywords of save(), as (name, help)),
    in detection order."""
    return _core.formats()


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


class Checkpoint:
    """Everything tensorseal read from a file: the content and container facts.

    Attributes: ``format`` ("torch-zip", "safetensors", ...), ``file``, ``root`` (the
    content), ``metadata`` (safetensors ``__metadata__``), ``facts`` (container facts
    as ``(topic, where, value)``, what ``explain`` compares) and ``globals`` (every
    global the file's pickles reference, as ``(module, name, where)``).
    """

    def __init__(self, d: Dict[str, Any]) -> None:
        self.format: str = d["format"]
        self.file: str = d["file"]
        self.root: Any = d.get("root")
        self.metadata: Dict[str, str] = dict(d["metadata"])
        self.facts: List[Tuple[str, str, str]] = list(d["facts"])
        self.globals: List[Tuple[str, str, str]] = list(d["globals"])

    def __repr__(self) -> str:
        return f"Checkpoint(format={self.format!r}, file={self.file!r})"


def read(path: PathLike, *, framework: Optional[str] = None, verify: bool = True,
         limits: LimitsArg = None, format: Optional[str] = None) -> Checkpoint:
    """Reads any supported file (format detected from its content) into a Checkpoint.
    ``limits``: resource limits of the read (:class:`tensorseal.Limits` or a dict).
    ``format``: read the file as this format (a name or alias of ``formats()``) instead
    of detecting it, as load()."""
    return Checkpoint(_core.read_file(os.fspath(path), _framework(framework), verify, limits=limit_pairs(limits),
                                      format=format or ""))


def load(path: PathLike, *, mmap: bool = True, device: str = "cpu", framework: Optional[str] = None,
         verify: bool = True, limits: LimitsArg = None, format: Optional[str] = None) -> Any:
    """Loads a checkpoint of any supported format without executing pickle code.

    Returns the whole content: nested dicts/lists, optimizer state, ``Parameter``\\ s
    (as Parameters), OrderedDicts with their ``_metadata``; tensors that share a
    storage in the file share memory after loading (tied weights stay tied).

    ``mmap=True``: tensors are views of the file's memory map (no copy; pages are read
    when touched; the mapping is private, writes never reach the file). The file must
    then not be rewritten in place or truncated while they live (pages past a new end
    fault with SIGBUS, as after ``torch.load(mmap=True)``); replacing it (rename, as
    ``tensorseal.save`` does) is safe.
    ``mmap=False``: the file is read into memory (copied on all cores) and nothing
    refers to it afterwards. ``device``: torch device to move
    tensors to (sharing is kept). ``framework``: "torch" (default when torch is
    installed) or "numpy" (bf16/float8 through ``ml_dtypes``). ``verify``: check the
    zip CRC32s of torch files (reads every byte once). ``limits``: resource limits of
    the read (:class:`tensorseal.Limits` or a dict; docs/limits.md). ``format``: the
    interpretation, a name or alias of ``formats()`` ("safetensors", "pt", ...); by
    default the format is detected from the content, and a file whose bytes are also a
    pickle importing something (a safetensors/npy + pickle polyglot, which pickle.load
    and torch.load would run) is refused with rule ``detect/ambiguous`` (docs/security.md).
    """
    fw = _framework(framework)
    if fw == "numpy" and device != "cpu":
        raise invalid_argument(f"numpy arrays live on the cpu, not {device!r}")
    root = _core.read_file(os.fspath(path), fw, verify, limits=limit_pairs(limits), format=format or "",
                           in_memory=not mmap)["root"]
    if device != "cpu":
        root = _materialise(root, device)
    return root


def load_bytes(data: Union[bytes, bytearray, memoryview], *, framework: Optional[str] = None,
               name: str = "<bytes>", limits: LimitsArg = None, format: Optional[str] = None) -> Any:
    """Like load(), from bytes in memory (copied once into a buffer the tensors view)."""
    return _core.read_bytes(bytes(data), name, _framework(framework), limits=limit_pairs(limits),
                            format=format or "")["root"]


def _format_options(path: PathLike, format: Optional[str],
                    options: Dict[str, Any]) -> Tuple[Optional[str], List[Tuple[str, str]]]:
    """save()'s format keywords as the core's (name, text) pairs, and the format they
    imply: each is an option of one format's writer (the ``options`` of its row in
    ``formats()``), which ``format``, when given, must name (or alias)."""
    pairs = []
    for key, value in options.items():
        owner = next((r["name"] for r in _core.formats() for name, _ in r["options"] if name == key), None)
        if owner is None:
            raise TypeError(f"save() got an unexpected keyword argument {key!r}")
        if value is None:
            continue
        if format is not None and _core.format_named(format) != owner:
            raise invalid_argument(f"{key} writes {owner}, not {format!r}", os.fspath(path))
        format = owner
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise invalid_argument(f"{key} must be a number or a string, not {type(value).__name__}", os.fspath(path))
        if not isinstance(value, str) and value <= 0:
            raise invalid_argument(f"{key} must be positive, not {value!r}", os.fspath(path))
        pairs.append((key, str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)))
    return format, pairs


def save(obj: Any, path: PathLike, format: Optional[str] = None, *,
         metadata: Optional[Dict[str, str]] = None, threads: int = 0,
         durable: bool = True, progress: ProgressArg = None, **options: Union[int, str, None]) -> None:
    """Writes ``obj`` canonically: the bytes depend only on the content.

    ``obj``: a tensor, array, or any nesting of dicts/OrderedDicts/lists/tuples with
    tensors, Parameters, numbers, strings, dtypes (a state_dict, optimizer state, a
    whole training checkpoint). The format comes from ``format`` (a name or alias of a
    writable format of ``formats()``: "safetensors", "torch-zip" / "pt", "torch-legacy"
    / "legacy", "npz", "npy") or the file extension. The write
    is atomic (temp file, fsync, rename). Tensor data is read straight from the
    tensors' memory (no copy through Python, and no copy before the kernel's); the GIL
    is released while writing. Python objects are released before save returns; the
    C++ copy of the object tree is freed on a helper thread. A plain dict of 64 or more
    plain tensors saved as .safetensors or .pt is written while it is converted: a
    helper thread copies each tensor into the file as soon as it is read (the same
    bytes).

    ``**options``: the options of a format's writer, by the names its row in
    ``formats()`` lists; each implies its format:

    ``max_shard_size`` (or ``format="hf-shards"``): ``path`` becomes a directory of
    Hugging Face safetensors shards (``model-0000N-of-0000M.safetensors`` +
    ``model.safetensors.index.json``) of at most that many tensor bytes each: an int,
    or a string with a decimal unit as huggingface_hub reads it ("5GB", "500MB");
    default "5GB". ``obj`` must be a flat dict of named tensors; the split runs over
    the names sorted bytewise, so the bytes never depend on the dict's order
    (docs/formats/hf-shards.md). The directory is written as a whole.

    ``world_size`` (or ``format="dcp"``): ``path`` becomes a canonical
    torch.distributed.checkpoint directory that ``dcp.load`` reads, its tensors split
    on dim 0 over that many ranks' files (default 1; docs/formats/dcp.md).

    ``durable=False`` skips the fsync of the file and its directory (``tseal
    --no-fsync``): the write stays atomic (never a half-written file at ``path``), but
    a power loss soon after may lose it. ``progress``: a callable(done, total) called
    with tensor bytes written, or True for a tqdm bar.
    """
    format, pairs = _format_options(path, format, options)
    with _progress(progress, f"writing {os.fspath(path)}") as cb:
        _core.write_file(obj, os.fspath(path), _format_for(path, format), sorted((metadata or {}).items()), threads,
                         options=pairs, fsync=bool(durable), progress=cb)


def save_bytes(obj: Any, format: str, *, metadata: Optional[Dict[str, str]] = None, threads: int = 0) -> bytes:
    """The canonical bytes save() would write in ``format``."""
    return _core.write_bytes(obj, _format_for("", format), sorted((metadata or {}).items()), threads)


def hash(path_or_obj: Any, *, fast: bool = False, threads: int = 0, limits: LimitsArg = None,
         progress: ProgressArg = None, format: Optional[str] = None) -> str:
    """Content hash ("sha256:<hex>"; "xxh3:<hex>" with fast=True) of a file or of an
    in-memory object, as ``tseal hash`` prints it. Independent of container, layout,
    dict order and file name. The GIL is released while hashing. ``limits``: resource
    limits of reading the file. ``progress``: a callable(done, total) called with bytes
    hashed, or True for a tqdm bar. ``format``: read the file as this format (load()).

    A DTensor or ShardedTensor in ``path_or_obj`` raises InvalidArgumentError: each rank
    holds only its part, so use the collective ``tensorseal.dcp.content_hash``."""
    pairs = limit_pairs(limits)
    with _progress(progress, "hashing") as cb:
        if _is_path(path_or_obj):
            return _core.hash_file(os.fspath(path_or_obj), fast, threads, pairs, progress=cb, format=format or "")
        from ._glue import hashing
        with hashing():
            return _core.hash_object(path_or_obj, fast, threads, progress=cb)


def inspect(path: PathLike, *, threads: int = 0, limits: LimitsArg = None, progress: ProgressArg = None,
            format: Optional[str] = None) -> Dict[str, Any]:
    """What ``tseal inspect --json`` prints, as a dict: file, format, content_hash,
    tensors (path, dtype, shape, nbytes, sha256) and metadata (schema: docs/cli.md).
    ``progress``: a callable(done, total) in bytes digested, or True for a tqdm bar.
    ``format``: read the file as this format (load(); ``tseal inspect --format``)."""
    with _progress(progress, "inspecting") as cb:
        return json.loads(_core.inspect_json(os.fspath(path), threads, limit_pairs(limits), progress=cb,
                                             format=format or ""))


def is_canonical(path: PathLike, *, threads: int = 0, limits: LimitsArg = None, progress: ProgressArg = None) -> bool:
    """True when the file's bytes already are the canonical bytes ``tseal canon`` would
    write for it (in its own format family): what ``tseal canon --check FILE`` tests.
    Raises ``tensorseal.Error`` for unreadable input; writes nothing."""
    with _progress(progress, "checking") as cb:
        return bool(_core.is_canonical(os.fspath(path), threads, limit_pairs(limits), progress=cb))


def _operand(x: Any) -> Tuple[Any, str]:
    return (os.fspath(x), os.fspath(x)) if _is_path(x) else (x, "<object>")


def diff(a: Any, b: Any, *, atol: float = 0.0, rtol: float = 0.0, ulp: int = 0, threads: int = 0,
         report: Optional[PathLike] = None, limits: LimitsArg = None, progress: ProgressArg = None) -> Dict[str, Any]:
    """Compares two checkpoints value by value: what ``tseal diff A B --json`` prints,
    as a dict (schema: docs/cli.md). ``a`` and ``b`` are paths or in-memory objects.
    ``report``: also write the self-contained HTML report there. ``limits``: resource
    limits of reading the files."""
    oa, na = _operand(a)
    ob, nb = _operand(b)
    with _progress(progress, "comparing") as cb:
        return json.loads(_core.diff_json(oa, ob, na, nb, float(atol), float(rtol), int(ulp), threads,
                                          os.fspath(report) if report is not None else "", limit_pairs(limits),
                                          progress=cb))


def explain(a: Any, b: Any, *, limits: LimitsArg = None) -> Dict[str, Any]:
    """Why the bytes of two checkpoints differ: what ``tseal explain A B --json`` prints,
    as a dict. ``a`` and ``b`` are paths (or in-memory objects: then only content is
    compared, there are no bytes or container facts)."""
    oa, na = _operand(a)
    ob, nb = _operand(b)
    return json.loads(_core.explain_json(oa, ob, na, nb, limit_pairs(limits)))


def scan(path: PathLike, *, limits: LimitsArg = None) -> Dict[str, Any]:
    """Every global the file's pickles reference, classed safe/unknown/dangerous: what
    ``tseal scan FILE --json`` prints, as a dict. Never executes anything."""
    return json.loads(_core.scan_json(os.fspath(path), limit_pairs(limits)))


def verify(*paths: PathLike, threads: int = 0, limits: LimitsArg = None, progress: ProgressArg = None) -> Dict[str, Any]:
    """Full validation (structure, every tensor, every checksum, embedded content hash):
    what ``tseal verify FILE... --json`` prints, as a dict ``{"ok", "files": [...]}``.
    Problems are reported, not raised."""
    if not paths:
        raise invalid_argument("verify() needs at least one path")
    with _progress(progress, "verifying") as cb:
        return json.loads(_core.verify_json([os.fspath(p) for p in paths], threads, limit_pairs(limits), progress=cb))


# ---- walking loaded objects -------------------------------------------------------

def _map_tensors(obj: Any, fn: Callable[[Any], Any], memo: Optional[Dict[int, Any]] = None) -> Any:
    """Rebuilds the containers of a loaded object with ``fn`` applied to every leaf.
    An object referenced twice stays one object (and cycles are kept)."""
    if memo is None:
        memo = {}
    key = id(obj)
    if key in memo:
        return memo[key]
    t = type(obj)
    if t in (dict, collections.OrderedDict, collections.Counter):
        out: Any = t()
        memo[key] = out
        for k, v in obj.items():
            out[k] = _map_tensors(v, fn, memo)
        for k, v in getattr(obj, "__dict__", {}).items():
            setattr(out, k, _map_tensors(v, fn, memo))
        return out
    if t is list:
        out = []
        memo[key] = out
        out.extend(_map_tensors(v, fn, memo) for v in obj)
        return out
    if t is tuple:
        out = tuple(_map_tensors(v, fn, memo) for v in obj)
    elif t in (set, frozenset):
        out = t(_map_tensors(v, fn, memo) for v in obj)
    elif t is Opaque:
        out = Opaque(_map_tensors(obj.callable, fn, memo), _map_tensors(obj.args, fn, memo),
                     _map_tensors(obj.kwargs, fn, memo), obj.how, _map_tensors(obj.state, fn, memo),
                     obj.has_state, [_map_tensors(v, fn, memo) for v in obj.list_items],
                     [(_map_tensors(k, fn, memo), _map_tensors(v, fn, memo)) for k, v in obj.dict_items])
    else:
        out = fn(obj)
    memo[key] = out
    return out


def _retarget(t: Any, storage: Any) -> Any:
    """A tensor with ``t``'s view (dtype, offset, shape, strides) over ``storage``."""
    import torch
    from ._glue import empty_quantized, with_flags
    dev = storage.device
    if not t.is_quantized:
        out = torch.empty((0,), dtype=t.dtype, device=dev)
    elif t.qscheme() == torch.per_tensor_affine:  # the same quantizer over the new storage
        out = empty_quantized(t.dtype, t.q_scale(), t.q_zero_point(), None, None, 0, dev)
    else:
        out = empty_quantized(t.dtype, 0.0, 0, t.q_per_channel_scales().to(dev), t.q_per_channel_zero_points().to(dev),
                              t.q_per_channel_axis(), dev)
    out.set_(storage, t.storage_offset(), t.shape, t.stride())
    out = with_flags(out, t.requires_grad, isinstance(t, torch.nn.Parameter))
    out.__dict__.update(t.__dict__)  # Python attributes (Tensor::attributes) stay
    return out


def _materialise(obj: Any, device: str) -> Any:
    """Moves loaded torch tensors to ``device``, keeping shared storages shared,
    Parameters Parameters and OrderedDict attributes."""
    import torch
    moved: Dict[Any, Any] = {}

    def move(s: Any) -> Any:
        key = (s.data_ptr(), s.nbytes()) if s.data_ptr() else id(s)
        if key not in moved:
            flat = torch.empty((0,), dtype=torch.uint8, device=s.device)
            flat.set_(s, 0, (s.nbytes(),), (1,))
            moved[key] = flat.to(device=device).untyped_storage()
        return moved[key]

    def fix(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return _retarget(x, move(x.untyped_storage()))
        if isinstance(x, torch.storage.TypedStorage):
            return torch.storage.TypedStorage(wrap_storage=move(x._untyped_storage), dtype=x.dtype, _internal=True)
        if isinstance(x, torch.UntypedStorage):
            return move(x)
        return x

    return _map_tensors(obj, fix)
