"""Lightning checkpoints through tensorseal: canonical, atomic, never unpickled.

``Trainer(plugins=[tensorseal.lightning.CheckpointIO()])`` makes every ``.ckpt`` the
Trainer writes canonical (the bytes depend only on the content: two seeded runs give
identical files), written atomically (temp file, fsync, rename), and read back through
tensorseal's restricted pickle reader with every CRC checked: ``pickle.load`` never runs.
Stock Lightning (``torch.load``) reads the files, and the plugin reads stock ones.

Lightning is optional, like torch: ``pip install tensorseal[lightning]``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Optional, Tuple, Union

import lightning.pytorch.plugins.io as _lightning_io

from . import _api
from . import torch as _torch
from .errors import error

__all__ = ["CheckpointIO"]

# Classes a Lightning checkpoint holds as plain data besides torch's: hyperparameters
# as OmegaConf configs (the nodes and their metadata) or Lightning's AttributeDict, the
# defaultdicts of loops and callbacks, and the type references OmegaConf records. They
# stay inert on load (tensorseal.Opaque / tensorseal.Global: nothing is imported);
# listing them only lets the file through the check that refuses everything else.
DATA_CLASSES: Tuple[str, ...] = (
    "omegaconf.dictconfig.DictConfig", "omegaconf.listconfig.ListConfig", "omegaconf.base.ContainerMetadata",
    "omegaconf.base.Metadata", "omegaconf.nodes.AnyNode", "omegaconf.nodes.StringNode",
    "omegaconf.nodes.IntegerNode", "omegaconf.nodes.FloatNode", "omegaconf.nodes.BooleanNode",
    "omegaconf.nodes.EnumNode", "omegaconf.nodes.BytesNode", "omegaconf.nodes.PathNode",
    "omegaconf.nodes.InterpolationResultNode", "lightning.fabric.utilities.data.AttributeDict",
    "pytorch_lightning.utilities.parsing.AttributeDict", "lightning.pytorch.utilities.parsing.AttributeDict",
    "collections.defaultdict", "typing.Any", "builtins.dict", "builtins.list", "builtins.tuple", "builtins.int",
    "builtins.float", "builtins.str", "builtins.bool", "builtins.object", "pathlib.PosixPath",
    "pathlib.WindowsPath", "argparse.Namespace",
)


class CheckpointIO(_lightning_io.CheckpointIO):
    """A ``lightning.pytorch.plugins.io.CheckpointIO`` that saves with
    :func:`tensorseal.torch.save` and loads with :func:`tensorseal.torch.load`.

    Saving: the checkpoint dict is written as the zip format ``torch.save`` writes, in
    tensorseal's canonical form, atomically. Objects that are not tensors or plain data
    (OmegaConf hyperparameters, ``defaultdict``, the ``hparams_type`` class) are saved
    by their ``__reduce_ex__(2)``, as ``torch.save`` saves them.

    Loading: the file is scanned first; a global outside torch's safe set and
    ``allow`` is refused (:class:`tensorseal.UnsafePickleError`) before anything is
    read, and nothing is ever imported or run. The other objects come back as inert
    :class:`tensorseal.Opaque` data, which is what resuming needs (the weights, the
    optimizer, scheduler, loop and callback states are plain data) and which saves
    again as the same object.

    Args:
        allow: qualified names (``"module.Class"``) let through besides torch's safe
            set; default ``tensorseal.lightning.DATA_CLASSES`` (OmegaConf nodes,
            Lightning's AttributeDict, defaultdict, the type references OmegaConf records).

    Raises:
        UnsafePickleError: on load, the checkpoint names a global outside the safe set
            and ``allow``.
        CorruptFileError: on load, the checkpoint breaks its format's rules (a CRC, a
            record, a pickle opcode).
        InvalidArgumentError: on save, the checkpoint holds an object pickle could not
            save either (a lambda, a local class).

    Example:
        >>> import lightning as L, tensorseal.lightning
        >>> trainer = L.Trainer(plugins=[tensorseal.lightning.CheckpointIO()])
        >>> trainer.fit(model, ckpt_path="last.ckpt")   # resume: read without unpickling
    """

    def __init__(self, allow: Iterable[str] = DATA_CLASSES) -> None:
        super().__init__()
        self.allow = frozenset(allow)

    def save_checkpoint(self, checkpoint: Dict[str, Any], path: Union[str, os.PathLike],
                        storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError("tensorseal.lightning.CheckpointIO does not take storage_options")
        parent = os.path.dirname(os.fspath(path))
        if parent:
            os.makedirs(parent, exist_ok=True)
        _torch.save(checkpoint, path, objects=True)

    def load_checkpoint(self, path: Union[str, os.PathLike], map_location: Optional[Any] = None,
                        weights_only: Optional[bool] = None) -> Dict[str, Any]:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
        report = _api.scan(path)
        refused = {f"{f['module']}.{f['name']}": f["verdict"] for f in report.get("findings", [])
                   if f["verdict"] != "safe" and f"{f['module']}.{f['name']}" not in self.allow}
        if refused:
            rule = "scan/dangerous-global" if "dangerous" in refused.values() else "scan/unknown-global"
            raise error(rule, f"refused to load: the checkpoint references {', '.join(sorted(refused))} "
                              "(outside torch's safe set and CheckpointIO.allow)", os.fspath(path))
        return _torch.load(path, map_location=map_location, weights_only=False)

    def remove_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        if os.path.isfile(path):
            os.remove(path)
