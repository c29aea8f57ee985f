"""tensorseal.dcp — a deterministic, safe, crash-safe storage plugin for
torch.distributed.checkpoint.

    >>> import torch.distributed.checkpoint as dcp
    >>> import tensorseal.dcp
    >>> dcp.save(state_dict, storage_writer=tensorseal.dcp.FileSystemWriter(path))
    >>> dcp.load(state_dict, storage_reader=tensorseal.dcp.FileSystemReader(path))

The writer's directory is byte-identical for the same state dict, world size and
options, whatever the run, path, thread count or machine: each rank writes its items
as canonical torch.save zips in (fqn, offsets) order; ``.metadata`` is the canonical
pickle with no path and a save_id derived from the content (no uuid); a manifest
(``.tensorseal.json``) records every item's checksum and content digest. Stock
``FileSystemReader`` reads it (and ignores the manifest).

Crash safety: ranks write into a staging directory beside the target; after every
rank's write the coordinator writes ``.metadata`` and swaps the whole directory into
place in one rename. A job killed at any moment leaves the previous checkpoint or the
new one, never a mixture; a stale staging directory is removed by the next save.

The reader never runs ``pickle.load``: ``.metadata`` is parsed by the C++ restricted
pickle VM (anything outside DCP's dataclasses and torch's safe set raises
UnsafePickleError); every chunk is checked against the manifest (CorruptFileError
names the file and tensor); BYTE_IO items are scanned before the planner unpickles
them (``weights_only=True``). Stock DCP directories (torch_save and safetensors
formats) load too, resharded to any world size.

All work is in the C++ core; this module adapts DCP's planner objects to it.
"""
from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata, MetadataIndex,
                                                   StorageMeta, TensorProperties, TensorStorageMetadata)
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, SavePlan, SavePlanner, WriteItemType
from torch.distributed.checkpoint.staging import BlockingAsyncStager
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult
from torch.futures import Future

from . import _tensorseal as _core
from ._glue import _torch_dtype, dtype_name
from .errors import UnsupportedError
from .limits import Limits, limit_pairs

__all__ = ["FileSystemWriter", "FileSystemReader", "content_hash", "verify"]

PathLike = Union[str, "os.PathLike[str]"]

# TensorProperties.memory_format <-> DCP's _MEM_FORMAT_ENCODING values.
_MEMORY_FORMATS = (torch.contiguous_format, torch.channels_last, torch.preserve_format)


class _LocalDirectory:
    """checkpoint_id / validate_checkpoint_id of both plugins: a local directory path."""

    path: str

    @property
    def checkpoint_id(self) -> PathLike:
        return self.path

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: PathLike) -> bool:
        return isinstance(checkpoint_id, Path) or "://" not in str(checkpoint_id)


def _planned_entries(metadata: Metadata) -> List[tuple]:
    planner_data = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
    out = []
    for fqn, md in metadata.state_dict_metadata.items():
        path = planner_data.get(fqn)
        path = tuple(path) if path is not None else None
        if isinstance(md, TensorStorageMetadata):
            p = md.properties
            if p.layout != torch.strided:
                raise UnsupportedError(f"tensor '{fqn}' has layout {p.layout}; tensorseal.dcp writes strided tensors",
                                       rule="dcp/write-unrepresentable")
            fmt = _MEMORY_FORMATS.index(p.memory_format) if p.memory_format in _MEMORY_FORMATS else 0
            chunks = [(list(c.offsets), list(c.sizes)) for c in md.chunks]
            out.append((fqn, True, dtype_name(p.dtype), bool(p.requires_grad), bool(p.pin_memory), fmt, list(md.size),
                        chunks, path))
        else:
            out.append((fqn, False, "float32", False, False, 0, [], [], path))
    return out


class FileSystemWriter(_LocalDirectory, StorageWriter, BlockingAsyncStager):
    """DCP StorageWriter writing tensorseal's canonical DCP layout.

    Options keep the meaning of torch's FileSystemWriter, except:
    ``single_file_per_rank=True`` writes exactly one file per rank (``__<rank>_0.distcp``)
    whatever ``thread_count`` is, so the bytes never depend on it; ``thread_count`` is
    accepted and does not change the output; ``sync_files`` fsyncs every file and the
    directory before the swap; ``overwrite=False`` refuses an existing checkpoint. There
    is one serialization format (canonical torch.save zips) and no stream extensions.
    A target that exists must be a checkpoint directory (only ``.metadata``,
    ``.tensorseal.json`` and ``__*.distcp``); it is replaced as a whole.

    ``content_hash`` (default True): the manifest records the state's content hash
    (XXH3, ``tseal hash --fast`` of the directory, and ``tensorseal.dcp.content_hash(sd,
    algo="xxh3")`` of the live state), made from the digests each rank takes of its
    chunks while writing; only leaf chunks that straddle chunks are read back in
    ``finish``. ``tseal verify`` and ``tensorseal.dcp.verify`` check it.
    """

    def __init__(self, path: PathLike, single_file_per_rank: bool = True, sync_files: bool = True,
                 thread_count: int = 1, per_thread_copy_ahead: int = 10_000_000,
                 cache_staged_state_dict: bool = False, overwrite: bool = True, content_hash: bool = True) -> None:
        StorageWriter.__init__(self)
        BlockingAsyncStager.__init__(self, cache_staged_state_dict=cache_staged_state_dict)
        self.path = os.fspath(path)
        self.single_file_per_rank = single_file_per_rank
        self.sync_files = sync_files
        self.thread_count = thread_count
        self.per_thread_copy_ahead = per_thread_copy_ahead
        self.overwrite = overwrite
        self.content_hash = content_hash

    def reset(self, checkpoint_id: Optional[PathLike] = None) -> None:
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("use_collectives", True) is False:
            raise UnsupportedError("tensorseal.dcp writes one checkpoint per save: use_collectives=False (per-rank "
                                   ".metadata) is not supported", rule="dcp/write-unrepresentable")

    def storage_meta(self) -> Optional[StorageMeta]:
        return None  # .metadata's StorageMeta is written by the core: no path, no uuid

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        # Runs on the coordinator before any rank writes: a fresh staging directory.
        _core.dcp_prepare(self.path, self.overwrite)
        return [dataclasses.replace(p, storage_data=i) for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> "Future[List[WriteResult]]":
        rank = plan.storage_data  # this rank's index, set by the coordinator's prepare_global_plan
        items, index = [], {}
        for wi in plan.items:
            data = planner.resolve_data(wi)
            if wi.type == WriteItemType.BYTE_IO:
                key: Tuple[str, Optional[tuple]] = (wi.index.fqn, None)
                items.append((wi.index.fqn, None, data.getvalue()))
            else:
                t = data.detach()
                if t.device.type != "cpu":
                    t = t.cpu()
                # A view into a larger storage is stored as its own bytes only.
                if t.untyped_storage().nbytes() != t.numel() * t.element_size() or not t.is_contiguous():
                    t = t.clone(memory_format=torch.contiguous_format)
                offsets = list(wi.tensor_data.chunk.offsets)
                key = (wi.index.fqn, tuple(offsets))
                items.append((wi.index.fqn, offsets, t, list(wi.tensor_data.size) if self.content_hash else None))
            index[key] = wi.index
        records = _core.dcp_write_items(self.path, rank, items, self.single_file_per_rank, self.sync_files,
                                        self.thread_count)
        results = []
        for r in records:
            key = (r[0], tuple(r[1]) if r[1] is not None else None)
            results.append(WriteResult(index=index[key], size_in_bytes=r[6], storage_data=r))
        fut: Future = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        records = [wr.storage_data for rank in results for wr in rank]
        _core.dcp_commit(self.path, _planned_entries(metadata), records, self.sync_files, self.content_hash)


class FileSystemReader(_LocalDirectory, StorageReader):
    """DCP StorageReader over tensorseal's C++ reader: never runs pickle.

    ``.metadata`` is read when the reader is made (or reset to a checkpoint_id), so an
    unsafe one raises UnsafePickleError there, before DCP runs; errors while loading
    items reach the caller inside DCP's CheckpointException (``e.failures[rank][0]``).

    ``weights_only`` (default True): a BYTE_IO item whose pickle references a global
    outside the known-safe set raises UnsafePickleError before the planner unpickles
    it (DCP's planner calls ``torch.load(weights_only=False)`` on those bytes).
    """

    def __init__(self, path: PathLike, weights_only: bool = True, limits: Optional[Limits] = None) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.weights_only = weights_only
        self.limits = limits
        self._reader: Any = None
        self._open_if_present()

    def reset(self, checkpoint_id: Optional[PathLike] = None) -> None:
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)
        self._reader = None
        self._open_if_present()

    def _open_if_present(self) -> None:
        # .metadata is parsed here when it exists: DCP's load turns any error of
        # read_metadata into an AssertionError, so an unsafe or corrupt .metadata is
        # reported as itself from the constructor (or reset, which dcp.load calls
        # with checkpoint_id) before DCP runs.
        if any(os.path.isfile(os.path.join(self.path, n)) for n in (".metadata", "__0.metadata")):
            self._core_reader()

    def _core_reader(self) -> Any:
        if self._reader is None:
            self._reader = _core.DcpReader(self.path, limit_pairs(self.limits))
        return self._reader

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        entries, storage, save_id, checkpoint_id, version = self._core_reader().metadata()
        sdm: Dict[str, Any] = {}
        planner_data: Dict[str, Any] = {}
        for fqn, is_tensor, dtype, requires_grad, pin_memory, fmt, size, chunks, path in entries:
            if is_tensor:
                props = TensorProperties(dtype=_torch_dtype(dtype), layout=torch.strided, requires_grad=requires_grad,
                                         memory_format=_MEMORY_FORMATS[fmt] if 0 <= fmt < 3 else torch.contiguous_format,
                                         pin_memory=pin_memory)
                sdm[fqn] = TensorStorageMetadata(
                    properties=props, size=torch.Size(size),
                    chunks=[ChunkStorageMetadata(offsets=torch.Size(o), sizes=torch.Size(s)) for o, s in chunks])
            else:
                sdm[fqn] = BytesStorageMetadata()
            if path is not None:
                planner_data[fqn] = path
        storage_data = {
            MetadataIndex(fqn, offset, index): _StorageInfo(relative_path=file, offset=at, length=length)
            for fqn, offset, index, file, at, length in storage
        }
        return Metadata(state_dict_metadata=sdm, planner_data=planner_data, storage_data=storage_data,
                        storage_meta=StorageMeta(checkpoint_id=checkpoint_id, save_id=save_id), version=version)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self._core_reader()

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> "Future[None]":
        reader = self._core_reader()
        for req in plan.items:
            fqn = req.storage_index.fqn
            if req.type == LoadItemType.BYTE_IO:
                planner.load_bytes(req, io.BytesIO(reader.bytes_item(fqn, self.weights_only)))
                continue
            stored = reader.chunk(fqn, list(req.storage_index.offset or ()))
            for dim, (start, length) in enumerate(zip(req.storage_offsets, req.lengths)):
                if start != 0 or length != stored.size(dim):
                    stored = stored.narrow(dim, start, length)
            target = planner.resolve_tensor(req).detach()
            if target.size() != stored.size():
                raise AssertionError(f"req {req.storage_index} mismatch sizes {target.size()} vs {stored.size()}")
            target.copy_(stored)
            planner.commit_tensor(req, target)
        fut: Future = Future()
        fut.set_result(None)
        return fut


# ---- The content hash of live sharded state ----

def _group_info(process_group: Any) -> Tuple[Any, int, int]:
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None, 0, 1
    return process_group, dist.get_rank(process_group), dist.get_world_size(process_group)


def _threads_per_rank(threads: int) -> int:
    """`threads`, or (0) this machine's cores divided by the ranks on it (LOCAL_WORLD_SIZE)."""
    if threads > 0:
        return threads
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    return max(1, (os.cpu_count() or 1) // max(1, local))


def _device_for(group: Any) -> Any:
    """Where the all-to-all buffers live: the GPU for NCCL groups, else the CPU."""
    import torch.distributed as dist
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _portable(e: BaseException) -> tuple:
    from .errors import Error
    if isinstance(e, Error):
        return ("tensorseal", e.kind, str(e), e.rule)
    return (type(e).__name__, "", str(e), "")


def _raise_from(rank: int, me: int, failure: tuple, original: Optional[BaseException]) -> None:
    """Every rank raises: a rank that failed its own error, the others the lowest
    failing rank's, as the same class, naming that rank."""
    import builtins
    from .errors import class_for_kind
    if original is not None:
        raise original  # this rank failed too (errors of the shared plan are the same everywhere)
    origin, kind, message, rule = failure
    text = f"rank {rank} failed: {message}"
    if origin == "tensorseal":
        raise class_for_kind(kind)(text, rule)
    cls = getattr(builtins, origin, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    raise cls(text)


def _agree(fn: Any, group: Any, rank: int, world: int) -> List[Any]:
    """fn() on every rank, then every rank's result on every rank (all_gather_object);
    when fn raised on any rank, every rank raises the lowest failing rank's error."""
    original: Optional[BaseException] = None
    try:
        mine: tuple = (True, fn())
    except Exception as e:  # noqa: BLE001 - sent to every rank, then raised
        original = e
        mine = (False, _portable(e))
    if world == 1:
        got = [mine]
    else:
        import torch.distributed as dist
        got = [None] * world
        dist.all_gather_object(got, mine, group=group)
    for r, (ok, value) in enumerate(got):
        if not ok:
            _raise_from(r, rank, value, original)
    return [value for _, value in got]


def _local_tensor(fqn: str, t: Any) -> Any:
    t = t.detach()
    if t.device.type == "meta":
        raise UnsupportedError(f"tensor '{fqn}' is on the meta device: it has no data to hash",
                               rule="dcp/live-state")
    if t.layout != torch.strided or t.is_quantized or t.is_nested:
        raise UnsupportedError(f"tensor '{fqn}' has layout {t.layout}; the live hash covers strided tensors, "
                               "as DCP saves them", rule="dcp/live-state")
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    return t


def _live_items(state_dict: Any) -> list:
    """This rank's leaves as DCP's planner sees them: Stateful values by their
    state_dict(), flattened by DCP's own flatten_state_dict (keys as str, lists of
    tensors by index), each tensor as the blocks this rank holds."""
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict
    from torch.distributed.checkpoint.stateful import Stateful
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.placement_types import Partial
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    try:
        from torch.distributed._shard.sharded_tensor import ShardedTensor
    except ImportError:  # pragma: no cover - torch without the legacy sharding package
        ShardedTensor = ()  # type: ignore[assignment]

    if not isinstance(state_dict, dict):
        raise UnsupportedError(f"a state dict is a dict, not a {type(state_dict).__name__}",
                               rule="dcp/live-state")
    state_dict = {k: (v.state_dict() if isinstance(v, Stateful) else v) for k, v in state_dict.items()}
    flat, mappings = flatten_state_dict(state_dict)
    items = []
    for fqn, value in flat.items():
        path = tuple(mappings[fqn])
        if isinstance(value, DTensor):
            if any(isinstance(p, Partial) for p in value.placements):
                raise UnsupportedError(f"DTensor '{fqn}' has a Partial placement (a pending reduction): its "
                                       "ranks hold addends, not the tensor; redistribute it to Replicate first",
                                       rule="dcp/live-state")
            sizes, offsets = compute_local_shape_and_global_offset(value.shape, value.device_mesh, value.placements)
            blocks = []
            if len(offsets) == len(value.shape):
                blocks.append((list(offsets), list(sizes), _local_tensor(fqn, value.to_local())))
            items.append((fqn, path, (dtype_name(value.dtype), list(value.shape), blocks), None))
        elif ShardedTensor and isinstance(value, ShardedTensor):
            md = value.metadata()
            blocks = [(list(s.metadata.shard_offsets), list(s.metadata.shard_sizes), _local_tensor(fqn, s.tensor))
                      for s in value.local_shards()]
            items.append((fqn, path, (dtype_name(md.tensor_properties.dtype), list(md.size), blocks), None))
        elif isinstance(value, torch.Tensor):
            t = _local_tensor(fqn, value)
            items.append((fqn, path, (dtype_name(t.dtype), list(t.shape), [([0] * t.dim(), list(t.shape), t)]), None))
        else:
            items.append((fqn, path, None, value))
    return items


def content_hash(state_dict: Dict[str, Any], *, process_group: Any = None, algo: str = "sha256",
                 threads: int = 0, round_bytes: int = 16 << 20) -> str:
    """The content hash of the live, sharded state of a job: a collective call (every
    rank of ``process_group`` calls it with its own state dict) that returns, on every
    rank, the digest ``tseal hash`` gives for what ``dcp.save(state_dict)`` writes, and
    so for every layout made from that (``dcp_to_torch_save``, a .pt or .safetensors of
    the full state, HF shards, a DCP at another world size).

    DTensors (any Shard/Replicate placements, uneven shards, 2-D meshes), ShardedTensors,
    plain tensors and every other value are covered; Stateful values count by their
    ``state_dict()``, as dcp.save takes them. No tensor is gathered: each rank hashes
    the 1 MiB leaf chunks its blocks cover, replicated blocks split between their
    holders; only pieces of chunks that straddle ranks move (all-to-all rounds of at
    most ``round_bytes`` per rank). Without torch.distributed initialised it hashes the
    state as one rank.

    ``algo``: "sha256" (``tseal hash``) or "xxh3" (``tseal hash --fast``). ``threads``:
    hashing threads per rank (0: the cores divided by LOCAL_WORLD_SIZE).

    Raises CorruptFileError (rule dcp/replica-mismatch) on every rank when replicas
    differ between ranks (a replicated tensor, or the same value on several ranks),
    naming the tensor and the ranks; InvalidArgumentError / UnsupportedError for state
    DCP cannot save as it is. An error on one rank is raised on every rank.

    >>> digest = tensorseal.dcp.content_hash({"model": model.state_dict(), "step": 7})
    >>> dcp.save({"model": model.state_dict(), "step": 7}, checkpoint_id=path)
    >>> # tseal hash path  ->  the same digest
    """
    from ._glue import hashing, numpy_objects
    if algo not in ("sha256", "xxh3"):
        from .errors import invalid_argument
        raise invalid_argument(f"algo must be 'sha256' or 'xxh3', not {algo!r}")
    group, rank, world = _group_info(process_group)
    threads = _threads_per_rank(threads)

    held: List[Any] = []

    def local_summary() -> str:
        with hashing(), numpy_objects():
            held.append(_core.LiveHash(_live_items(state_dict), algo == "xxh3", threads))
        return held[0].summary()

    summaries = _agree(local_summary, group, rank, world)
    live = held[0]
    _agree(lambda: live.plan(summaries, rank, round_bytes), group, rank, world)
    if world > 1:
        import torch.distributed as dist
        device = _device_for(group)
        while True:
            r = live.next_round()
            if r is None:
                break
            send, send_counts, recv_counts = r
            inp = torch.frombuffer(bytearray(send), dtype=torch.uint8) if send else torch.empty(0, dtype=torch.uint8)
            out = torch.empty(sum(recv_counts), dtype=torch.uint8, device=device)
            dist.all_to_all_single(out, inp.to(device), output_split_sizes=list(recv_counts),
                                   input_split_sizes=list(send_counts), group=group)
            live.receive(out.cpu().numpy().tobytes())
    partials = _agree(live.partial, group, rank, world)
    return live.finish(partials)


def verify(path: PathLike, *, process_group: Any = None, algo: str = "sha256", threads: int = 0,
           limits: Optional[Limits] = None) -> str:
    """Verifies a DCP directory (stock or tensorseal's, saved at any world size) with the
    ranks of ``process_group`` together, and returns its content hash on every rank (the
    digest ``tseal hash`` prints; "xxh3" with ``algo="xxh3"``). A collective call.

    The ranks split the items between them (about 1/N of the bytes each): every item is
    checked once, against the manifest's checksum and digest (tensorseal's writer) or its
    zip CRC (torch's); leaf chunks that straddle items are read by one rank each. The
    manifest's recorded content hash, when there is one, must match the content.
    Without torch.distributed initialised it verifies alone.

    Raises CorruptFileError (a corrupt, missing or extra chunk; dcp/content-hash when the
    recorded hash differs), UnsafePickleError, IoError..., the same on every rank: the
    failing rank raises its own error, the others one naming it.

    >>> digest = tensorseal.dcp.verify("checkpoints/step_100")   # in every rank
    """
    if algo not in ("sha256", "xxh3"):
        from .errors import invalid_argument
        raise invalid_argument(f"algo must be 'sha256' or 'xxh3', not {algo!r}")
    group, rank, world = _group_info(process_group)
    threads = _threads_per_rank(threads)
    directory = os.fspath(path)
    fast = algo == "xxh3"
    pairs = limit_pairs(limits)
    parts = _agree(lambda: _core.dcp_verify_part(directory, rank, world, fast, pairs, threads), group, rank, world)
    return _agree(lambda: _core.dcp_verify_finish(directory, parts, fast, pairs), group, rank, world)[rank]
