"""tensorseal.lightning.CheckpointIO with real Lightning on the CPU: canonical, atomic
.ckpt files that resume exactly as stock ones do, that stock Lightning reads, read back
without unpickling (OmegaConf hyperparameters included), and hostile ones refused."""
from __future__ import annotations

import glob
import os
import pickle

import pytest
import torch

import tensorseal
from conftest import run_tseal

L = pytest.importorskip("lightning")
omegaconf = pytest.importorskip("omegaconf")
import tensorseal.lightning  # noqa: E402  (needs lightning)


@pytest.fixture(autouse=True)
def _torch_flags_restored():
    """Trainer(deterministic=...) and seed_everything change torch's global state; later
    tests must not inherit it."""
    det = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(det)


class Regressor(L.LightningModule):
    def __init__(self, cfg=None, **kw):
        super().__init__()
        self.save_hyperparameters(cfg if cfg is not None else kw)
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        self.losses = []

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=0.01)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]


def _data():
    g = torch.Generator().manual_seed(1)
    ds = torch.utils.data.TensorDataset(torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g))
    return torch.utils.data.DataLoader(ds, batch_size=4)


def _config():
    return omegaconf.OmegaConf.create({"model": {"hidden": 8, "act": "relu"}, "optim": {"lr": 0.01}, "seed": 3})


def _fit(root, *, steps, plugin=True, cfg=True, ckpt_path=None):
    """Trains `steps` steps from seed 0 (or resumes from ckpt_path); returns the module
    and the checkpoint ModelCheckpoint wrote last."""
    L.seed_everything(0, verbose=False)
    model = Regressor(_config()) if cfg else Regressor(hidden=8, lr=0.01)
    trainer = L.Trainer(max_steps=steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(root), accelerator="cpu",
                        plugins=[tensorseal.lightning.CheckpointIO()] if plugin else None,
                        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=str(root / "ckpt"), every_n_train_steps=2,
                                                                      save_top_k=-1)])
    # Stock Lightning resumes with torch.load(weights_only=True), which refuses its own
    # OmegaConf hyperparameters: the stock reference run has to trust the file.
    trainer.fit(model, _data(), ckpt_path=ckpt_path, weights_only=None if plugin else False)
    ckpts = sorted(glob.glob(str(root / "ckpt" / "*.ckpt")), key=os.path.getmtime)
    return model, ckpts[-1] if ckpts else None


@pytest.mark.parametrize("cfg", [True, False], ids=["omegaconf", "dict"])
def test_checkpoints_are_canonical_and_stock_lightning_reads_them(tmp_path, cfg):
    _, a = _fit(tmp_path / "a", steps=2, cfg=cfg)
    os.rename(tmp_path / "a", tmp_path / "first")
    _, b = _fit(tmp_path / "a", steps=2, cfg=cfg)  # the same run again, in the same place
    a = a.replace(str(tmp_path / "a"), str(tmp_path / "first"))
    assert open(a, "rb").read() == open(b, "rb").read()  # two seeded runs: identical bytes
    assert run_tseal("canon", b, "--check").returncode == 0
    assert not [p for p in os.listdir(tmp_path / "a" / "ckpt") if not p.endswith(".ckpt")]  # no temp files left
    # Stock Lightning: load_from_checkpoint through torch.load gives the real hyperparameters.
    model = Regressor.load_from_checkpoint(b, weights_only=False)
    assert model.hparams["model"]["hidden"] == 8 if cfg else model.hparams["hidden"] == 8
    stock = torch.load(b, weights_only=False)
    if cfg:
        assert stock["hyper_parameters"] == _config()
    mine = tensorseal.lightning.CheckpointIO().load_checkpoint(b)
    assert mine.keys() == stock.keys()
    for k, v in stock["state_dict"].items():
        assert torch.equal(mine["state_dict"][k], v)
    assert mine["optimizer_states"][0]["param_groups"][0]["lr"] == stock["optimizer_states"][0]["param_groups"][0]["lr"]
    if cfg:
        hp = mine["hyper_parameters"]
        assert isinstance(hp, tensorseal.Opaque)
        assert hp.state["_content"]["model"].state["_parent"] is hp  # the graph, inert, cycles kept


@pytest.mark.parametrize("plugin_save", [True, False], ids=["tensorseal-ckpt", "stock-ckpt"])
def test_resume_gives_the_same_next_losses_as_stock(tmp_path, plugin_save):
    """Train 2 steps, save; resume to 4 steps with the plugin from its own or a stock
    checkpoint, and with stock Lightning from a stock one: the same losses."""
    _, ckpt = _fit(tmp_path / "base", steps=2, plugin=plugin_save)
    _, stock_ckpt = _fit(tmp_path / "stock", steps=2, plugin=False)
    resumed, _ = _fit(tmp_path / "r1", steps=4, plugin=True, ckpt_path=ckpt)
    reference, _ = _fit(tmp_path / "r2", steps=4, plugin=False, ckpt_path=stock_ckpt)
    assert len(resumed.losses) == 2 and resumed.losses == reference.losses
    for (n, p), (_, q) in zip(resumed.named_parameters(), reference.named_parameters()):
        assert torch.equal(p, q), n


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_stock_resume_refuses_its_own_omegaconf_checkpoint_the_plugin_reads_it(tmp_path):
    """What users hit: stock Lightning's weights_only resume refuses the DictConfig it
    saved itself; the plugin resumes from that very file without unpickling it."""
    _, stock_ckpt = _fit(tmp_path / "stock", steps=2, plugin=False)
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(max_steps=3, logger=False, enable_progress_bar=False, accelerator="cpu",
                        default_root_dir=str(tmp_path / "s2"))
    with pytest.raises(pickle.UnpicklingError, match="DictConfig"):
        trainer.fit(Regressor(_config()), _data(), ckpt_path=stock_ckpt)
    resumed, _ = _fit(tmp_path / "p", steps=3, plugin=True, ckpt_path=stock_ckpt)
    assert len(resumed.losses) == 1


def test_hostile_checkpoint_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    ckpt = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": _Marker(str(marker))}, ckpt)
    torch.load(ckpt, weights_only=False)  # ground truth: the stock loader runs it
    assert marker.exists()
    marker.unlink()
    with pytest.raises(tensorseal.UnsafePickleError, match=r"dangerous-global.*io\.open"):
        tensorseal.lightning.CheckpointIO().load_checkpoint(ckpt)
    assert not marker.exists()
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(max_steps=1, logger=False, enable_progress_bar=False, accelerator="cpu",
                        default_root_dir=str(tmp_path), plugins=[tensorseal.lightning.CheckpointIO()])
    with pytest.raises(pickle.UnpicklingError):
        trainer.fit(Regressor(_config()), _data(), ckpt_path=str(ckpt))
    assert not marker.exists()
