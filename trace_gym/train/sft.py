"""Supervised warm start: LoRA SFT on reference episodes, on TRL's ``SFTTrainer``.

:func:`warm_start` builds demonstrations (:mod:`trace_gym.train.demos`: whole reference
episodes of ``cfg.sft_envs``, or of ``cfg.env_id``, on train-split tasks), renders them
as the policy renders its prompts, and trains the LoRA adapter that
:func:`~trace_gym.train.models.wrap_lora` makes from the same config GRPO uses, on the
assistant tokens only.  It writes::

    <out>/adapter_config.json, adapter_model.safetensors   # the PEFT adapter
    <out>/warm_start.json                                   # what was trained on, loss before/after
    <out>/sft_metrics.jsonl                                 # one row per logged step
    <out>/sft_config.json                                   # the full config (checked on resume)
    <out>/checkpoints/checkpoint-<step>/                    # every save_steps steps
    <out>/tensorboard/                                      # with report_to=tensorboard

``resume=True`` continues from the newest checkpoint exactly as ``train`` does (model,
optimizer, scheduler, RNG states and data order come back), so an interrupted and resumed
warm start ends with the adapter and record of the uninterrupted one.

:func:`train_with_warm_start` (``trace-gym train --warm-start``) runs it into
``<out>/warm_start/`` and then GRPO on that adapter (``init_adapter``), so ``<out>`` holds
one adapter and one manifest entry, with the warm start recorded under ``warm_start``.

A *format-only* warm start takes its demonstrations from envs other than the target
(``sft_envs``): every method of a comparison can start from the same one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError, TrainConfig
from .demos import Demonstration, build_demonstrations, demo_token_count, tokenize_demonstration
from .models import check_reporter, place_reports
from .outputs import MANIFEST_NAME, MetricsLog, atomic_write_text, update_manifest

__all__ = ["WarmStartResult", "warm_start", "train_with_warm_start", "demo_loss", "sft_record_key", "WARM_START_DIR",
           "RECORD_NAME", "merge_and_save", "progress_callback"]

WARM_START_DIR = "warm_start"
RECORD_NAME = "warm_start.json"
CONFIG_NAME = "sft_config.json"
SFT_STATE = "trace_gym_sft.json"  # in each checkpoint: the loss measured before training
# the config fields a warm start depends on: a resumed run reuses a finished warm start only when they agree
_SFT_FIELDS = ("model", "env_id", "env_kwargs", "seed", "tools_in_prompt", "tool_listing", "tool_format", "lora_r", "lora_alpha",
               "lora_dropout", "lora_target_modules", "lora_bias", "sft_envs", "sft_seeds_per_env", "sft_seed_start",
               "sft_epochs", "sft_max_steps", "sft_learning_rate", "sft_batch_size", "sft_gradient_accumulation_steps",
               "sft_max_length", "sft_prefix_grad", "sft_recover_every", "dtype")


@dataclass
class WarmStartResult:
    """What a warm start produced."""

    out: Path
    steps: int
    demos: int
    record: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def sft_record_key(cfg: TrainConfig) -> dict[str, Any]:
    """The config fields a warm start depends on."""
    d = cfg.to_dict()
    return {k: d[k] for k in _SFT_FIELDS}


def demo_loss(model: Any, rows: Sequence[dict[str, Any]]) -> float:
    """Mean negative log-likelihood per assistant token of tokenized demonstrations (no gradient)."""
    import torch

    from .shared_prefix import scored_nll

    device = next(model.parameters()).device
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row["input_ids"]], device=device)
            mask = torch.tensor(row["assistant_masks"][1:], device=device, dtype=torch.bool)
            if not bool(mask.any()):
                continue
            total += float(scored_nll(model, {"input_ids": ids}, torch.where(mask, ids[0, 1:], -100)[None]))
            count += int(mask.sum())
    if was_training:
        model.train()
    return total / count if count else float("nan")


def _sft_args(cfg: TrainConfig, out: Path, device: str, dtype: Any) -> Any:
    from trl import SFTConfig

    from .models import run_arguments

    kwargs: dict[str, Any] = dict(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=cfg.sft_batch_size,
        gradient_accumulation_steps=cfg.sft_gradient_accumulation_steps,
        num_train_epochs=cfg.sft_epochs,
        max_steps=cfg.sft_max_steps or -1,
        learning_rate=cfg.sft_learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=0,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_length=cfg.sft_max_length,
        packing=False,
        assistant_only_loss=False,  # the mask comes with the data (assistant_masks), not from the template
        completion_only_loss=False,
        logging_steps=1,
        save_strategy="steps" if cfg.save_steps else "no",
        save_steps=cfg.save_steps or 500,
        save_total_limit=cfg.save_total_limit,
        **run_arguments(cfg, SFTConfig, device, dtype),
    )
    return SFTConfig(**kwargs)


def _detached_prompt_trainer(base: type) -> type:
    """``base`` (TRL's SFTTrainer) whose loss runs each batch's prompt once without gradient
    (:func:`~trace_gym.train.shared_prefix.detached_prompt_loss`; ``sft_prefix_grad="detached"``)."""
    from .shared_prefix import detached_prompt_loss

    class DetachedPromptSFTTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            loss = detached_prompt_loss(model, inputs["input_ids"], inputs["attention_mask"], inputs["labels"],
                                        num_items=num_items_in_batch)
            return (loss, None) if return_outputs else loss

    return DetachedPromptSFTTrainer


def _rows(cfg: TrainConfig, tokenizer: Any, demos: Sequence[Demonstration]) -> list[dict[str, Any]]:
    from .chat import ChatRenderer

    renderer = ChatRenderer(tokenizer, cfg.tools_in_prompt, cfg.tool_listing, cfg.tool_format)
    rows = [tokenize_demonstration(renderer, d, cfg.sft_max_length) for d in demos]
    return [r for r in rows if any(r["assistant_masks"])]


def warm_start(
    cfg: TrainConfig,
    *,
    out: str | Path | None = None,
    model: Any = None,
    tokenizer: Any = None,
    demos: Sequence[Demonstration] | None = None,
    manifest: bool | None = None,
    loss_sample: int = 16,
    callbacks: Sequence[Any] | None = None,
    resume: bool = False,
) -> WarmStartResult:
    """SFT a LoRA adapter on reference episodes (see the module docstring); returns what it wrote.

    ``out`` defaults to ``cfg.out``; ``demos`` overrides building them from the envs;
    ``model``/``tokenizer`` override loading ``cfg.model`` (a passed model gets its LoRA
    layers removed again afterwards, so it can be reused).  ``manifest`` (default
    ``cfg.manifest``) adds an entry for the adapter to ``<out>/../manifest.json``.  The loss
    on up to ``loss_sample`` demonstrations is measured before and after training.
    ``callbacks`` are extra ``transformers`` trainer callbacks (e.g. a progress line).
    ``cfg.save_steps`` checkpoints every that many steps; ``resume`` continues from the newest
    checkpoint under ``<out>/checkpoints`` (one must exist, made with the same settings).
    """
    import datasets
    from datasets import Dataset
    from transformers.trainer_callback import TrainerCallback
    from trl import SFTTrainer

    from ..compat import renamed_checkpointing_warnings_hidden
    from .models import load_model_and_tokenizer, resolve_device, resolve_dtype, wrap_lora

    cfg.validate()
    check_reporter(cfg.report_to)
    folder = Path(out or cfg.out)
    if not str(out or cfg.out):
        raise ValueError("warm_start needs an output folder (cfg.out or out=)")
    ckpt = _resume_point(folder, cfg, resume)
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    if device == "cpu" and cfg.cpu_threads:
        import torch

        torch.set_num_threads(int(cfg.cpu_threads))
    own_model = model is None
    if own_model:
        if not cfg.model:
            raise ValueError("TrainConfig.model is required (or pass model and tokenizer)")
        model, tokenizer = load_model_and_tokenizer(cfg.model, seed=cfg.seed, dtype=dtype)
    elif tokenizer is None:
        raise ValueError("pass tokenizer together with model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    demos, skipped, rows = _demonstrations(cfg, tokenizer, demos)

    with renamed_checkpointing_warnings_hidden():
        peft_model = wrap_lora(model, cfg)
    if next(peft_model.parameters()).device.type != device:
        peft_model.to(device)
    sample = rows[:loss_sample]
    state_file = ckpt / SFT_STATE if ckpt is not None else None
    if state_file is not None and state_file.is_file():  # measured on the same starting adapter before the interruption
        loss_before = float(json.loads(state_file.read_text())["loss_before"])
    else:
        loss_before = demo_loss(peft_model, sample)
    folder.mkdir(parents=True, exist_ok=True)
    metrics = MetricsLog(folder / "sft_metrics.jsonl")
    if ckpt is not None:
        metrics.truncate_after(int(ckpt.name.split("-")[-1]))
    else:
        metrics.reset()
    atomic_write_text(folder / CONFIG_NAME, json.dumps(cfg.to_dict(), indent=2) + "\n")

    class _Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "loss" in logs:
                metrics.append({"step": int(state.global_step), **{k: v for k, v in logs.items() if isinstance(v, (int, float))}})

        def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
            saved = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and saved.is_dir():
                atomic_write_text(saved / SFT_STATE, json.dumps({"loss_before": loss_before}))

    args = _sft_args(cfg, folder, device, dtype)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # no progress bar per dataset preparation stage
    try:
        with renamed_checkpointing_warnings_hidden():
            trainer_class = _detached_prompt_trainer(SFTTrainer) if cfg.sft_prefix_grad == "detached" else SFTTrainer
            trainer = trainer_class(model=peft_model, args=args, train_dataset=Dataset.from_list(rows),
                                    processing_class=tokenizer, callbacks=[_Log(), *(callbacks or [])])
    finally:
        if bars:
            datasets.enable_progress_bars()
    place_reports(trainer, folder)
    with renamed_checkpointing_warnings_hidden():
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # the losses go to sft_metrics.jsonl, not printed dicts
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt is not None else None)
    trained = trainer.accelerator.unwrap_model(trainer.model)
    trained.save_pretrained(str(folder))
    loss_after = demo_loss(trained, sample)
    record = _record(cfg, demos, rows, skipped, int(trainer.state.global_step), loss_before, loss_after, started)
    atomic_write_text(folder / RECORD_NAME, json.dumps(record, indent=2) + "\n")
    if manifest if manifest is not None else cfg.manifest:
        update_manifest(folder.parent / MANIFEST_NAME, {
            "name": folder.name, "path": str(folder), "capability": None, "env_id": cfg.env_id or None,
            "spec_hash": None, "base_model": cfg.model or None, "config": cfg.to_dict(), "steps": record["steps"],
            "rollouts_used": 0, "reward_curve": [], "created": record["created"], "kind": "sft", "warm_start": record,
        })
    if not own_model:  # give the caller's model back without LoRA layers
        trained.unload()
    return WarmStartResult(out=folder, steps=record["steps"], demos=len(rows), record=record,
                           seconds=time.perf_counter() - started)


def _resume_point(folder: Path, cfg: TrainConfig, resume: bool) -> Path | None:
    """The checkpoint a resumed warm start continues from (checked against the saved config); ``None`` without
    ``resume``."""
    from .trainer import check_resume_config, latest_checkpoint

    ckpt = latest_checkpoint(folder / "checkpoints") if resume else None
    if resume and ckpt is None:
        raise FileNotFoundError(f"--resume: no warm-start checkpoint under {folder / 'checkpoints'} (--save-steps N "
                                "writes them); start without --resume")
    if ckpt is not None:
        check_resume_config(folder / CONFIG_NAME, cfg, _SFT_FIELDS)
    return ckpt


def _demonstrations(cfg: TrainConfig, tokenizer: Any, demos: Sequence[Demonstration] | None,
                    ) -> tuple[Sequence[Demonstration], dict[str, list[str]], list[dict[str, Any]]]:
    """``(demonstrations, skipped tasks per env, tokenized rows)``: ``demos`` as given, else built from the envs
    of ``cfg`` (``sft_envs``, or ``env_id``)."""
    env_ids = list(cfg.sft_envs) or ([cfg.env_id] if cfg.env_id else [])
    skipped: dict[str, list[str]] = {}
    if demos is None:
        if not env_ids:
            raise ConfigError("a warm start needs demonstrations: set sft_envs (or env_id)")
        report = build_demonstrations(env_ids, cfg.sft_seeds_per_env, start=cfg.sft_seed_start,
                                      env_kwargs={cfg.env_id: cfg.env_kwargs} if cfg.env_id else None, seed=cfg.seed,
                                      recover_every=cfg.sft_recover_every)
        demos, skipped = report.demos, report.skipped
    rows = _rows(cfg, tokenizer, demos)
    if not rows:
        raise ValueError(f"no demonstration to train on (envs {env_ids}; skipped: {skipped})")
    return demos, skipped, rows


def _record(cfg: TrainConfig, demos: Sequence[Demonstration], rows: list[dict[str, Any]], skipped: dict[str, list[str]],
            steps: int, loss_before: float, loss_after: float, started: float) -> dict[str, Any]:
    """What ``warm_start.json`` says of a finished warm start."""
    envs = sorted({d.env_id for d in demos})
    return {
        "envs": envs,
        "demonstrations": len(rows),
        "recovered": sum(1 for d in demos if d.untrained),
        "per_env": {e: sum(1 for d in demos if d.env_id == e) for e in envs},
        "tasks": [f"{d.env_id}#{d.task_id}" for d in demos],
        "skipped": skipped,
        **demo_token_count(rows),
        "steps": steps,
        "loss_before": round(loss_before, 6),
        "loss_after": round(loss_after, 6),
        "config": sft_record_key(cfg),
        "seconds": round(time.perf_counter() - started, 1),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _finished_warm_start(folder: Path, cfg: TrainConfig) -> bool:
    """Whether ``folder`` holds a finished warm start of this config (a different one is refused)."""
    record_file = folder / RECORD_NAME
    if not record_file.is_file() or not (folder / "adapter_config.json").is_file():
        return False
    record = json.loads(record_file.read_text())
    want = json.loads(json.dumps(sft_record_key(cfg)))
    changed = sorted(k for k, v in want.items() if record.get("config", {}).get(k) != v)
    if changed:
        raise ConfigError(f"--resume: the warm start in {folder} was trained with other settings ({', '.join(changed)} "
                          "changed); resume with the same settings, or start without --resume")
    return True


def progress_callback(bar: Any) -> Any:
    """A ``transformers`` trainer callback that moves a :mod:`trace_gym.progress` tracker: the step count
    and the latest logged loss as its note."""
    from transformers.trainer_callback import TrainerCallback

    class _Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            bar.update(int(state.global_step))

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and isinstance(logs.get("loss"), (int, float)):
                bar.update(note=f"loss {logs['loss']:.3f}")

    return _Progress()


def train_with_warm_start(cfg: TrainConfig, *, resume: bool = False, callbacks: list[Any] | None = None,
                          demos: Sequence[Demonstration] | None = None, env_factory: Any = None,
                          sft_callbacks: list[Any] | None = None) -> Any:
    """SFT warm start into ``<out>/warm_start/``, then GRPO on that adapter into ``<out>``.

    Returns GRPO's :class:`~trace_gym.train.trainer.TrainResult`, whose manifest entry
    carries the warm start's record under ``warm_start``.  With ``resume``, a finished warm
    start of the same settings is reused (other settings: :class:`ConfigError`) and GRPO
    continues from its newest checkpoint, or starts from the warm start when it has none.
    ``demos`` overrides building the demonstrations from the envs; ``env_factory`` makes
    GRPO's envs (as :func:`~trace_gym.train.trainer.train`'s).  ``callbacks`` go to GRPO's trainer,
    ``sft_callbacks`` to the warm start's.
    """
    from .trainer import latest_checkpoint, train

    cfg.validate()
    if not cfg.out:
        raise ValueError("TrainConfig.out (the adapter folder) is required")
    if cfg.init_adapter:
        raise ConfigError("--warm-start trains the adapter GRPO starts from: leave init_adapter unset")
    out = Path(cfg.out)
    ws = out / WARM_START_DIR
    if not (resume and _finished_warm_start(ws, cfg)):  # an interrupted warm start continues from its checkpoint
        warm_start(cfg, out=ws, manifest=False, demos=demos, callbacks=sft_callbacks,
                   resume=resume and latest_checkpoint(ws / "checkpoints") is not None)
    record = json.loads((ws / RECORD_NAME).read_text())
    grpo_cfg = cfg.with_overrides(init_adapter=str(ws))
    has_ckpt = latest_checkpoint(out / "checkpoints") is not None
    result = train(grpo_cfg, resume=resume and has_ckpt, callbacks=callbacks, env_factory=env_factory)
    result.manifest_entry["warm_start"] = {"path": str(ws), **{k: v for k, v in record.items() if k != "tasks"}}
    if grpo_cfg.manifest:
        update_manifest(out.parent / MANIFEST_NAME, result.manifest_entry)
    return result


def merge_and_save(cfg: TrainConfig, adapter: str | Path, out: str | Path, *, model: Any = None, tokenizer: Any = None) -> Path:
    """The base model of ``cfg`` with the LoRA adapter in ``adapter`` merged into its weights, saved as a plain
    model folder (weights and tokenizer) at ``out``: written into a temporary sibling folder, then renamed.

    ``model``/``tokenizer`` override loading ``cfg.model`` (the model is changed in place).  An
    existing ``out`` is replaced.  The folder loads like any model (``from_pretrained``), without PEFT.
    """
    import shutil

    from ..compat import renamed_checkpointing_warnings_hidden
    from .models import load_lora, load_model_and_tokenizer, resolve_device, resolve_dtype

    out = Path(out)
    if model is None:
        if not cfg.model:
            raise ValueError("TrainConfig.model is required (or pass model and tokenizer)")
        model, tokenizer = load_model_and_tokenizer(cfg.model, seed=cfg.seed,
                                                    dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device)))
    elif tokenizer is None:
        raise ValueError("pass tokenizer together with model")
    with renamed_checkpointing_warnings_hidden():
        merged = load_lora(model, str(adapter), cfg).merge_and_unload()
    tmp = out.with_name(f".{out.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    merged.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return out
