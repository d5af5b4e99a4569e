"""``train(config)``: GRPO with LoRA on a trace-gym env, on top of TRL's ``GRPOTrainer``.

The run is TRL's trainer with three pieces supplied by trace-gym: the dataset is a
list of env seeds, the ``rollout_func`` (:class:`~trace_gym.train.rollout_func.EnvRolloutFunc`)
plays G episodes per seed through the env, and the reward function returns the
env's own reward.  PEFT's LoRA wraps the model.  Around it, this module writes the
run folder::

    <out>/adapter_config.json, adapter_model.safetensors   # the PEFT adapter
    <out>/train_config.json                                 # the full config
    <out>/metrics.jsonl                                     # one row per logged step
    <out>/learning_curve.png                                # reward per step
    <out>/checkpoints/checkpoint-<step>/                    # every save_steps steps
    <out>/tensorboard/                                      # with report_to=tensorboard
    <out>/../manifest.json                                  # one entry per adapter

``resume=True`` continues from the newest checkpoint: model, optimizer, scheduler,
RNG states, data order and rollout accounting all come back, so an interrupted and
resumed run reproduces the uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compat import renamed_checkpointing_warnings_hidden
from ..progress import reporting, track
from ..registration import make_env_factory
from .config import TrainConfig
from .models import check_reporter, place_reports
from .outputs import MANIFEST_NAME, MetricsLog, atomic_write_text, plot_learning_curve, update_manifest

__all__ = ["train", "TrainResult", "latest_checkpoint", "checkpoint_rollout_state", "check_resume_config", "env_metadata"]

ROLLOUT_STATE = "trace_gym_rollouts.json"


@dataclass
class TrainResult:
    """What a run produced."""

    out: Path
    steps: int
    rollouts: int
    reward_curve: list[tuple[int, float]] = field(default_factory=list)
    metrics_path: Path | None = None
    plot_path: Path | None = None
    manifest_entry: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    rollout_stats: dict[str, int] = field(default_factory=dict)


def env_metadata(env: Any) -> dict[str, Any]:
    """Capability name and spec hash when the env exposes them (attributes or reset info), else ``None``."""
    base = getattr(env, "unwrapped", env)
    meta: dict[str, Any] = {"capability": None, "spec_hash": None}
    for key in meta:
        value = getattr(base, key, None)
        if callable(value):
            try:
                value = value()
            except Exception:
                value = None
        if value is not None:
            meta[key] = value
    if meta["spec_hash"] is None:
        spec = getattr(base, "cap_spec", None) or getattr(base, "capability_spec", None)
        doc = getattr(spec, "data", None) or getattr(spec, "doc", None)
        if isinstance(doc, dict):  # the spec document, canonical JSON
            meta["spec_hash"] = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
        if meta["capability"] is None and getattr(spec, "id", None):
            meta["capability"] = spec.id
    return meta


def latest_checkpoint(folder: Path) -> Path | None:
    if not folder.is_dir():
        return None
    ckpts = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(ckpts, key=lambda p: int(p.name.split("-")[-1])) if ckpts else None


def checkpoint_rollout_state(ckpt: Path | None) -> dict[str, Any] | None:
    """The rollout function's state a checkpoint saved (what it had played and sampled), or ``None``
    (no checkpoint, or one saved before the state was)."""
    state = ckpt / ROLLOUT_STATE if ckpt is not None else None
    if state is None or not state.is_file():
        return None
    return json.loads(state.read_text(encoding="utf-8"))


def _llamacpp_sampler(cfg: TrainConfig) -> Any:
    """``backend=llamacpp``: the rollout function's sampler, checked before anything is loaded."""
    from ..policies.llamacpp import require_llama_cpp
    from ..policies.model_registry import model_spec
    from .generation import LlamaCppSampler

    require_llama_cpp()  # ModelUnavailableError saying how to install it
    if cfg.sampler_gguf:
        gguf = Path(cfg.sampler_gguf)
        if not gguf.is_file():
            raise FileNotFoundError(f"sampler_gguf: no GGUF file at {gguf}")
    elif (spec := model_spec(cfg.model)) is not None and spec.gguf is not None:
        gguf = spec.gguf()
    else:
        raise ValueError(f"backend=llamacpp samples from the trained model's GGUF: set sampler_gguf=PATH (model "
                         f"{cfg.model!r} has no GGUF trace-gym knows)")
    return LlamaCppSampler(gguf, lookahead=cfg.sampling_lookahead)


def _grpo_args(cfg: TrainConfig, out: Path, device: str, dtype: Any, micro_batch: int | None = None) -> Any:
    """TRL's ``GRPOConfig`` for ``cfg``; ``micro_batch``: sequences per forward and backward (default: the step's
    whole batch), each step's batch of rollouts then split into accumulated micro-batches."""
    from trl import GRPOConfig

    from .models import run_arguments

    use_vllm = uses_vllm(cfg, device)
    batch = cfg.seeds_per_step * cfg.num_generations
    micro = micro_batch or cfg.micro_batch_size or batch
    if batch % micro:
        raise ValueError(f"a micro-batch of {micro} sequences does not divide the step's {batch}")
    kwargs: dict[str, Any] = dict(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=micro,
        num_generations=cfg.num_generations,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps * (batch // micro),
        num_iterations=cfg.num_iterations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        mask_truncated_completions=cfg.mask_truncated_completions,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps,
        logging_steps=cfg.logging_steps,
        save_strategy="steps" if cfg.save_steps else "no",
        save_steps=cfg.save_steps or 500,
        save_total_limit=cfg.save_total_limit,
        use_vllm=use_vllm,
        log_completions=False,
        remove_unused_columns=False,
        **run_arguments(cfg, GRPOConfig, device, dtype),
    )
    if use_vllm:
        from .vllm import grpo_vllm_arguments

        kwargs.update(grpo_vllm_arguments(cfg))
    return GRPOConfig(**kwargs)


def uses_vllm(cfg: TrainConfig, device: str) -> bool:
    """Whether GRPO samples with vLLM: ``backend=vllm`` (an error without the ``vllm`` package), or ``auto`` with
    the package installed and a CUDA device."""
    import importlib.util

    if cfg.backend not in ("auto", "vllm"):
        return False
    have = importlib.util.find_spec("vllm") is not None
    if cfg.backend == "vllm" and not have:
        raise RuntimeError("backend=vllm needs the vllm package: pip install 'trace-gym[vllm]' (see docs/gpu.md)")
    return have and (cfg.backend == "vllm" or device == "cuda")


def _skipping_trainer_class(base: type) -> type:
    """``GRPOTrainer`` that skips the model on a batch whose completion tokens are all masked out.

    Groups whose rewards stayed constant are dropped by masking their tokens; when every
    group of a batch is dropped the loss is exactly zero, so the forward and backward
    passes over multi-thousand-token prompts would only burn time.  A zero loss tied to
    the trainable parameters takes their place (zero gradients: the same update).
    """

    class SkippingGRPOTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            mask = inputs.get("completion_mask") if isinstance(inputs, dict) else None
            if mask is not None and not return_outputs and int(mask.sum()) == 0:
                import torch

                params = [p for p in model.parameters() if p.requires_grad]
                zero = torch.zeros((), device=mask.device)
                self.skipped_batches = getattr(self, "skipped_batches", 0) + 1
                return sum((p.sum() for p in params), zero) * 0.0
            return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    return SkippingGRPOTrainer


def grpo_trainer_class(base: type | None = None) -> type:
    """trace-gym's ``GRPOTrainer``: shared-prefix loss (:mod:`~trace_gym.train.shared_prefix`) and all-masked batch skipping.

    Instances take four extra attributes: ``shared_prefix`` (bool, default on),
    ``prefix_grad`` (``"exact"``/``"detached"``), ``lm_head`` (``"fused"``/``"full"``) and
    ``shared_prefix_min_tokens``.
    """
    from .shared_prefix import SharedPrefixTrainerMixin

    if base is None:
        from trl import GRPOTrainer

        base = GRPOTrainer

    class TraceGRPOTrainer(SharedPrefixTrainerMixin, _skipping_trainer_class(base)):  # type: ignore[misc, valid-type]
        pass

    return TraceGRPOTrainer


def _callback_class():
    from transformers import TrainerCallback

    class TraceRunCallback(TrainerCallback):
        """Metrics JSONL + a progress line (:mod:`trace_gym.progress`) + rollout state in checkpoints."""

        def __init__(self, rollout_func: Any, metrics: MetricsLog, description: str, start_step: int = 0):
            self.rollout_func = rollout_func
            self.metrics = metrics
            self.description = description
            self.start_step = start_step
            self.bar: Any = None
            self.last_reward: float | None = None

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001
            self.bar = track(self.description, total=int(state.max_steps or args.max_steps), unit="steps")
            self.bar.start_at(self.start_step)

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if not state.is_world_process_zero or not logs or "loss" not in logs and "reward" not in logs:
                return
            row = {"step": int(state.global_step), "rollouts": int(self.rollout_func.stats.rollouts)}
            row.update({k: v for k, v in logs.items() if isinstance(v, (int, float))})
            self.metrics.append(row)
            if "reward" in logs:
                self.last_reward = float(logs["reward"])
                if self.bar is not None:  # logs come after the step's on_step_end
                    self.bar.update(reward=self.last_reward)

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            if self.bar is not None:
                self.bar.update(int(state.global_step), reward=self.last_reward,
                                note=f"{int(self.rollout_func.stats.rollouts)} rollouts")

        def on_train_end(self, args, state, control, **kwargs):  # noqa: ANN001
            if self.bar is not None:
                self.bar.close()

        def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
            # The rollout accounting is summed across processes, so every process holds the same state.
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and ckpt.is_dir():
                atomic_write_text(ckpt / ROLLOUT_STATE, json.dumps(self.rollout_func.state_dict()))

    return TraceRunCallback


# Fields that may change between an interrupted run and its resumption without breaking exactness.
# (shared_prefix: the shared and the unshared loss are the same computation.)
_RESUME_FREE = {"max_steps", "progress", "plot", "manifest", "save_steps", "save_total_limit", "cpu_threads", "logging_steps", "run_name",
                "report_to", "shared_prefix"}


def check_resume_config(path: Path, cfg: TrainConfig, fields: Collection[str] | None = None) -> None:
    """Refuse to resume a run whose saved config (``path``) differs from ``cfg`` in a field that changes
    the result: ``fields`` (the fields the run depends on), or by default every field but :data:`_RESUME_FREE`."""
    from .config import ConfigError

    if not path.exists():
        return
    old = json.loads(path.read_text())
    now = json.loads(json.dumps(cfg.to_dict()))  # tuples as lists, as the saved file has them
    compared = set(fields) if fields is not None else set(now) - _RESUME_FREE
    changed = sorted(k for k, v in now.items() if k in compared and k in old and old[k] != v)
    if changed:
        free = "" if fields is not None else " (only max_steps, save_steps and display options may change)"
        raise ConfigError(f"--resume with a different config than the checkpointed run: {', '.join(changed)} changed; "
                          f"resume with the same settings{free}")


def _reward_curve(rows: list[dict[str, Any]]) -> list[tuple[int, float]]:
    return [(int(r["step"]), float(r["reward"])) for r in rows if r.get("reward") is not None]


def learning_signal(stats: Any) -> dict[str, Any]:
    """``constant_group_fraction`` (groups whose G episodes all had one reward, after resampling) and ``learned``.

    A constant group has zero advantage, so it adds nothing to the loss: a run whose
    every group was constant (or that played none) learned nothing.
    """
    groups = int(getattr(stats, "groups", 0))
    constant = int(getattr(stats, "constant_groups", 0))
    fraction = constant / groups if groups else 1.0
    return {"constant_group_fraction": round(fraction, 4), "learned": groups > 0 and constant < groups}


def warn_nothing_learned(entry: dict[str, Any], out: Path, init_adapter: str | None = None) -> None:
    """The loud end-of-run line for a run whose every group had a constant reward (``init_adapter``: the
    adapter the run started from, which it then still is)."""
    from rich.console import Console

    stats = entry.get("rollout_stats") or {}
    same = f"the adapter is still the one it started from ({init_adapter})" if init_adapter else "the adapter is the base model"
    Console(stderr=True).print(
        f"[bold red]warning:[/bold red] nothing was learned in {out}: every group had a constant reward "
        f"({stats.get('constant_groups', 0)}/{stats.get('groups', 0)} groups), so the GRPO loss was 0 and {same}. Make the env easier (difficulty knobs, hint_fraction), sample more (num_generations, "
        "temperature) or check the reward with `trace-gym calibrate`.", soft_wrap=True)


def _is_main_process() -> bool:
    """Process 0 of a ``torchrun``/``accelerate launch`` job (or a single process): the one that writes files."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def _rollout_function(cfg: TrainConfig, env_factory: Callable[[], Any], sampler: Any) -> Any:
    from .rollout_func import EnvRolloutFunc

    return EnvRolloutFunc(env_factory, cfg, sampler=sampler)


def _probe(cfg: TrainConfig, env_factory: Callable[[], Any], rollout: Any, tokenizer: Any) -> tuple[dict[str, Any], int]:
    """The env's metadata (:func:`env_metadata`) and the prompt length in tokens of its first training seed."""
    from .episodes import prompt_messages

    env = env_factory()
    try:
        obs, info = env.reset(seed=cfg.train_seed_start)
        messages, tools, _ = prompt_messages(obs, info)
        return env_metadata(env), len(rollout.renderer(tokenizer).prompt_ids(messages, tools))
    finally:
        env.close()


def _memory_plan(cfg: TrainConfig, model: Any, prompt_tokens: int, device: str, use_vllm: bool, main: bool) -> Any:
    """The run's :class:`~trace_gym.train.memory.MemoryEstimate` at its micro-batch (:func:`~trace_gym.train.memory.plan_memory`),
    printed on stderr by process 0."""
    from rich.console import Console

    from .memory import device_memory, plan_memory

    sharded = any(os.environ.get(v, "").lower() == "true" for v in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"))
    copy = not use_vllm and cfg.backend != "llamacpp" and not sharded  # the transformers sampler's merged copy
    est = plan_memory(cfg, model, device=device, prompt_tokens=prompt_tokens, use_vllm=use_vllm, sampler_copy=copy,
                      device_total=device_memory(device))
    if main:
        Console(stderr=True).print(est.line(), soft_wrap=True, highlight=False, markup=False)
    return est


def _model_with_lora(cfg: TrainConfig, model: Any, tokenizer: Any, dtype: Any) -> tuple[Any, Any, Any]:
    """``(model, tokenizer, the model wrapped with LoRA)``: ``cfg.model`` loaded unless ``model`` is given."""
    from .chat import ChatRenderer
    from .models import load_model_and_tokenizer, wrap_lora

    if model is None:
        if not cfg.model:
            raise ValueError("TrainConfig.model is required (or pass model and tokenizer)")
        model, tokenizer = load_model_and_tokenizer(cfg.model, seed=cfg.seed, dtype=dtype)
    elif tokenizer is None:
        raise ValueError("pass tokenizer together with model")
    # a chat template that cannot carry tool calls fails now (ChatTemplateError), before the run folder is written
    ChatRenderer(tokenizer, cfg.tools_in_prompt, cfg.tool_listing, cfg.tool_format)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    with renamed_checkpointing_warnings_hidden():  # PEFT asks the model is_gradient_checkpointing
        return model, tokenizer, wrap_lora(model, cfg)


def train(
    cfg: TrainConfig,
    *,
    model: Any = None,
    tokenizer: Any = None,
    env_factory: Callable[[], Any] | None = None,
    resume: bool = False,
    callbacks: list[Any] | None = None,
) -> TrainResult:
    """Run GRPO+LoRA as configured; see the module docstring for what is written where.

    ``model``/``tokenizer`` override loading ``cfg.model`` (the model is wrapped with
    LoRA here); ``env_factory`` overrides ``gym.make(cfg.env_id)``.  A memory estimate
    (:mod:`~trace_gym.train.memory`) is printed before the first step.  When the run ends,
    or fails, its vLLM engine (if any) is freed (:func:`~trace_gym.train.vllm.release_vllm`).

    Under ``accelerate launch``/``torchrun`` (data parallel) every process plays its
    share of the groups and trains on them; the rollout accounting is summed across
    processes, and only process 0 writes the run folder.
    """
    from trl import GRPOTrainer

    from .models import resolve_device, resolve_dtype
    from .rollout_func import env_reward, seed_dataset
    from .vllm import install_weight_sync, release_vllm

    cfg.validate()
    check_reporter(cfg.report_to)
    if not cfg.out:
        raise ValueError("TrainConfig.out (the adapter folder) is required")
    if env_factory is None:
        if not cfg.env_id:
            raise ValueError("TrainConfig.env_id is required (or pass env_factory)")
        env_factory = make_env_factory(cfg.env_id, cfg.env_kwargs)
    sampler = _llamacpp_sampler(cfg) if cfg.backend == "llamacpp" else None  # its errors before any model loads
    out = Path(cfg.out)
    ckpt = latest_checkpoint(out / "checkpoints") if resume else None
    if resume and ckpt is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {out / 'checkpoints'}; start without --resume")
    if ckpt is not None:
        check_resume_config(out / "train_config.json", cfg)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    if device == "cpu" and cfg.cpu_threads:
        import torch

        torch.set_num_threads(int(cfg.cpu_threads))

    model, tokenizer, peft_model = _model_with_lora(cfg, model, tokenizer, dtype)

    rollout = _rollout_function(cfg, env_factory, sampler)
    meta, prompt_tokens = _probe(cfg, env_factory, rollout, tokenizer)
    main = _is_main_process()
    metrics = MetricsLog(out / "metrics.jsonl")
    start_step = 0
    if ckpt is not None:
        start_step = int(ckpt.name.split("-")[-1])
        saved = checkpoint_rollout_state(ckpt)
        if saved is not None:
            rollout.load_state_dict(saved)
        if main:
            metrics.truncate_after(start_step)
    elif main:
        metrics.reset()
    if main:
        atomic_write_text(out / "train_config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    memory = _memory_plan(cfg, peft_model, prompt_tokens, device, uses_vllm(cfg, device), main)
    args = _grpo_args(cfg, out, device, dtype, micro_batch=memory.sequences)
    dataset = seed_dataset(range(cfg.train_seed_start, cfg.train_seed_start + cfg.num_train_seeds))
    cb = _callback_class()(rollout, metrics, f"train {cfg.run_name or out.name}", start_step)
    with renamed_checkpointing_warnings_hidden():
        trainer = grpo_trainer_class(GRPOTrainer)(
            model=peft_model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout,
            callbacks=[cb, *(callbacks or [])],
        )
    place_reports(trainer, out)
    try:
        trainer.shared_prefix = bool(cfg.shared_prefix)
        trainer.prefix_grad = cfg.prefix_grad
        trainer.lm_head = cfg.lm_head
        if args.use_vllm:
            install_weight_sync(trainer)
        from transformers.trainer_callback import PrinterCallback

        # every logged step goes to metrics.jsonl (and the progress line, when on), not to printed dicts on stdout
        trainer.remove_callback(PrinterCallback)
        # the progress line joins the caller's display when one is open
        with renamed_checkpointing_warnings_hidden(), reporting(enabled=cfg.progress and main):
            trainer.train(resume_from_checkpoint=str(ckpt) if ckpt is not None else None)
        trainer.accelerator.wait_for_everyone()
        main = trainer.accelerator.is_main_process
        if main:
            trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(out))
        steps = int(trainer.state.global_step)
    finally:
        if sampler is not None:
            sampler.close()  # the llama.cpp engine and its merged weights
        release_vllm(trainer)
    return _finish(cfg, out, meta, model, rollout, metrics, steps, main, started)


def _finish(cfg: TrainConfig, out: Path, meta: dict[str, Any], model: Any, rollout: Any, metrics: MetricsLog, steps: int,
            main: bool, started: float) -> TrainResult:
    """The end of a run: its learning curve, its manifest entry (process 0 writes both) and its result."""
    curve = _reward_curve(metrics.rows())
    plot = None
    if cfg.plot and curve and main:
        plot = plot_learning_curve([s for s, _ in curve], [r for _, r in curve], out / "learning_curve.png",
                                   title=f"{cfg.env_id or 'env'} / {cfg.model or 'model'}")
    entry = {
        "name": out.name,
        "path": str(out),
        "capability": meta.get("capability"),
        "env_id": cfg.env_id or None,
        "spec_hash": meta.get("spec_hash"),
        "base_model": cfg.model or getattr(getattr(model, "config", None), "_name_or_path", None),
        "config": cfg.to_dict(),
        "steps": steps,
        "rollouts_used": rollout.stats.rollouts,
        "rollout_stats": rollout.stats.to_dict(),
        **learning_signal(rollout.stats),
        "reward_curve": [[s, r] for s, r in curve],
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if cfg.manifest and main:
        update_manifest(out.parent / MANIFEST_NAME, entry)
    if main and not entry["learned"]:
        warn_nothing_learned(entry, out, cfg.init_adapter)
    return TrainResult(
        out=out, steps=steps, rollouts=rollout.stats.rollouts, reward_curve=curve, metrics_path=metrics.path,
        plot_path=plot, manifest_entry=entry, seconds=time.perf_counter() - started, rollout_stats=rollout.stats.to_dict(),
    )
