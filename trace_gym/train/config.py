"""The trainer's configuration: one flat dataclass, loadable from YAML or JSON.

The defaults are TRACE's recipe: no KL penalty (``beta=0``), sampling at
temperature 1.0, asymmetric "clip-higher" ratio clipping (``epsilon_high >
epsilon``), token-level (DAPO) loss normalisation, and groups whose G rollouts
all received the same reward re-drawn on a fresh seed a bounded number of times
(and left out of the loss if they stay constant).  Every knob is a field; the
CLI exposes each one as ``--set name=value``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TrainConfig", "ConfigError", "load_config", "IMPORTANCE_SAMPLING_MODES", "REPORTERS"]

# TRL's importance-sampling correction of vLLM samples (``vllm_importance_sampling``; ``off``: none).
IMPORTANCE_SAMPLING_MODES = ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
REPORTERS = ("none", "tensorboard", "wandb")  # TrainConfig.report_to: where TRL also logs each step


def _tool_formats() -> tuple[str, ...]:
    from ..policies.prompting import TOOL_FORMATS

    return TOOL_FORMATS


class ConfigError(ValueError):
    """A configuration value is missing, unknown or out of range."""


@dataclass
class TrainConfig:
    """Everything one ``trace-gym train`` run needs (all fields have defaults except the three paths)."""

    # What to train on and where to write it.
    env_id: str = ""
    model: str = ""
    out: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    # Data: which seeds a run trains on.
    seed: int = 0  # seeds the trainer, LoRA init, sampling and hint draws
    train_seed_start: int = 0
    num_train_seeds: int = 64

    # GRPO.
    max_steps: int = 50
    num_generations: int = 8  # G rollouts per seed
    seeds_per_step: int = 1  # groups per optimizer step
    # Sequences per forward and backward of the loss (the step's seeds_per_step x num_generations are split into
    # micro-batches whose gradients add up to the same update).  None: the whole batch on a CPU; on a GPU the
    # largest micro-batch whose memory estimate fits the device (trace_gym.train.memory).
    micro_batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    num_iterations: int = 1  # optimisation passes per batch of rollouts
    learning_rate: float = 1e-5
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float = 0.28
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    mask_truncated_completions: bool = False

    # Sampling.
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens_per_turn: int = 256
    max_completion_length: int = 1024  # all agent and environment tokens of one episode after the prompt
    max_turns: int | None = None  # None: the environment's own step limit
    # Reward of an episode cut by the token budget or max_turns before it ended.  None: the env scores
    # it as a step-limit truncation (ToolEnv.truncate), so partial credit the env gives is kept.
    truncated_reward: float | None = None

    # Constant-reward groups.
    resample_constant_groups: bool = True
    max_resamples: int = 2  # extra draws (each on a fresh seed) per constant group
    drop_constant_groups: bool = True  # a group still constant after resampling contributes no loss tokens

    # Hints (environments that report ``hint_shown`` / ``prompt_messages_without_hint``).
    hint_fraction: float | None = None  # share of rollouts asked to show the hint (None: leave it to the env)
    hint_option: str = "hint"  # the reset option that turns the hint on/off

    # Prompt rendering.
    tools_in_prompt: str = "auto"  # auto | template | system | none
    tool_listing: str = "compact"  # compact | json: how a system-message tool list is written (as HFPolicy)
    tool_format: str = "auto"  # auto | hermes | smollm2: how calls are written (auto: the model's own, as HFPolicy)

    # LoRA.
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: list[str] | str = "all-linear"
    lora_bias: str = "none"
    init_adapter: str | None = None  # start from this LoRA adapter folder (same r/alpha/targets) instead of a fresh one

    # Supervised warm start on reference episodes (`train --warm-start`, `trace-gym sft`), same LoRA.
    sft_envs: list[str] = field(default_factory=list)  # env ids to draw demonstrations from (empty: env_id)
    sft_seeds_per_env: int = 32  # train-split tasks per env
    sft_seed_start: int = 0  # first train-split task used
    sft_epochs: float = 1.0
    sft_max_steps: int = 0  # optimizer steps (0: sft_epochs decide)
    sft_learning_rate: float = 2e-4
    sft_batch_size: int = 4
    sft_gradient_accumulation_steps: int = 1
    sft_max_length: int = 4096  # tokens per demonstration (longer ones are cut)
    # exact: plain SFT; detached: the prompt before the first trained token runs once without gradient
    # (its keys and values do not learn: faster, approximate, opt-in).
    sft_prefix_grad: str = "exact"
    # every k-th demonstration shows a recovered mistake where the env allows one (0: none; see train/demos.py)
    sft_recover_every: int = 0

    # Back end.
    # auto | transformers | vllm | llamacpp.  llamacpp: GRPO samples in llama.cpp (a float copy of sampler_gguf with the
    # trained LoRA loaded at every step; needs llama-cpp-python); the loss and the update stay in torch.
    backend: str = "auto"
    sampler_gguf: str | None = None  # the trained model's GGUF for backend=llamacpp (default: smollm2's own)
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    device: str = "auto"  # auto | cpu | cuda
    # Activation checkpointing.  None: on (a 5k-token GRPO backward of SmolLM2-135M needs >24 GB without it on a
    # CPU; on a GPU, batches of 5k-token prompts and 8k-token episodes do not fit a 7B model's activations either).
    gradient_checkpointing: bool | None = None
    # Compute the prompt prefix a group shares once: in the loss (exact: same loss and gradients) and as a
    # KV cache reused across the group's episodes and turns while sampling.
    shared_prefix: bool = True
    # Sampling drafts this many tokens per step by prompt lookup and checks them in one forward (0: off);
    # the samples keep their distribution (each token is drawn from its exact conditional).
    sampling_lookahead: int = 8
    # exact: the shared prefix is trained; detached: its keys and values get no gradient (faster, approximate).
    prefix_grad: str = "exact"
    # How the loss turns the scored tokens' hidden states into log-probs: fused (TRL's chunked LM head: no
    # (tokens x vocab) logits in memory) or full (one float32 projection of all of them: faster on a CPU,
    # where the chunked head has no kernel of its own, for B x completion x vocab x 12 bytes of memory).
    lm_head: str = "fused"
    cpu_threads: int | None = None  # torch intra-op threads on CPU (None: torch's default)

    # vLLM (backend=vllm, or auto with vllm installed and a CUDA GPU): GRPO's sampler is TRL's vLLM engine.
    # colocate: an engine inside the training process, on its GPUs; server: a separate `vllm serve` process
    # (docs/gpu.md), which data-parallel trainers share.
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.3  # colocate: the share of each GPU's memory vLLM takes (weights + KV cache)
    vllm_max_model_length: int | None = None  # colocate: vLLM's context (None: the model's); episodes that fill it end truncated
    vllm_enable_sleep_mode: bool = False  # colocate: vLLM frees its memory while the loss and update run
    vllm_tensor_parallel_size: int = 1  # colocate: GPUs one engine spans
    vllm_server_base_url: str | None = None  # server: e.g. http://10.0.0.2:8000 (None: TRL's default, port 8000 here)
    # TRL's correction for the difference between vLLM's and the trained model's log-probs, with vLLM's own
    # log-probs of the sampled tokens: off | token_truncate | token_mask | sequence_truncate | sequence_mask.
    vllm_importance_sampling: str = "sequence_mask"

    # Outputs.
    save_steps: int = 0  # checkpoint interval in optimizer steps (0: none)
    save_total_limit: int | None = 2
    logging_steps: int = 1
    progress: bool = True
    plot: bool = True
    manifest: bool = True
    run_name: str | None = None
    # Where TRL also sends every logged step (TrainingArguments.report_to): none, tensorboard (event files under
    # <out>/tensorboard/; the `tensorboard` extra) or wandb (Weights & Biases; its package and login are yours).
    report_to: str = "none"

    # ------------------------------------------------------------------ validation
    def validate(self) -> TrainConfig:
        """Raise :class:`ConfigError` for a value that cannot work; return ``self``."""
        problems = self._type_problems()
        if problems:  # range checks below would compare mistyped values
            raise ConfigError("invalid training config:\n  " + "\n  ".join(problems))
        if self.num_generations < 2:
            problems.append(f"num_generations must be >= 2 (GRPO compares rollouts within a group), got {self.num_generations}")
        for name in ("seeds_per_step", "gradient_accumulation_steps", "num_iterations", "max_steps",
                     "max_new_tokens_per_turn", "max_completion_length", "num_train_seeds", "logging_steps"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        batch = self.seeds_per_step * self.num_generations
        if self.micro_batch_size is not None and (self.micro_batch_size < 1 or batch % self.micro_batch_size):
            problems.append(f"micro_batch_size must divide seeds_per_step x num_generations ({batch}), got {self.micro_batch_size}")
        if self.sampling_lookahead < 0:
            problems.append(f"sampling_lookahead must be >= 0, got {self.sampling_lookahead}")
        if self.max_resamples < 0:
            problems.append(f"max_resamples must be >= 0, got {self.max_resamples}")
        if self.save_steps < 0:
            problems.append(f"save_steps must be >= 0, got {self.save_steps}")
        if self.save_steps and self.num_iterations > 1 and self.save_steps % self.num_iterations:
            problems.append(f"save_steps ({self.save_steps}) must be a multiple of num_iterations ({self.num_iterations}): "
                            "a checkpoint between reuses of one rollout batch could not be resumed exactly")
        if self.hint_fraction is not None and not 0.0 <= self.hint_fraction <= 1.0:
            problems.append(f"hint_fraction must be in [0, 1], got {self.hint_fraction}")
        if self.temperature <= 0:
            problems.append(f"temperature must be > 0, got {self.temperature}")
        if self.epsilon < 0 or self.epsilon_high < 0:
            problems.append("epsilon and epsilon_high must be >= 0")
        if self.beta < 0:
            problems.append(f"beta must be >= 0, got {self.beta}")
        if self.lm_head == "full" and not self.shared_prefix:
            problems.append("lm_head=full needs shared_prefix=true (the full head runs in the shared-prefix loss)")
        if self.prefix_grad == "detached" and not self.shared_prefix:
            problems.append("prefix_grad=detached needs shared_prefix=true (the detached prefix is the shared one)")
        for name in ("sft_seeds_per_env", "sft_batch_size", "sft_gradient_accumulation_steps", "sft_max_length"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sft_seed_start < 0 or self.sft_max_steps < 0 or self.sft_recover_every < 0:
            problems.append("sft_seed_start, sft_max_steps and sft_recover_every must be >= 0")
        if not self.sft_epochs > 0 or not self.sft_learning_rate > 0:
            problems.append("sft_epochs and sft_learning_rate must be > 0")
        if self.max_turns is not None and self.max_turns < 1:
            problems.append(f"max_turns must be >= 1 or null, got {self.max_turns}")
        choices = {
            "tools_in_prompt": ("auto", "template", "system", "none"),
            "tool_listing": ("compact", "json"),
            "tool_format": ("auto", *_tool_formats()),
            "backend": ("auto", "transformers", "vllm", "llamacpp"),
            "dtype": ("auto", "float32", "bfloat16", "float16"),
            "device": ("auto", "cpu", "cuda"),
            "scale_rewards": ("group", "batch", "none"),
            "prefix_grad": ("exact", "detached"),
            "lm_head": ("fused", "full"),
            "sft_prefix_grad": ("exact", "detached"),
            "report_to": REPORTERS,
        }
        problems.extend(self._vllm_problems())
        if self.sampler_gguf is not None and self.backend != "llamacpp":
            problems.append(f"sampler_gguf is for backend=llamacpp, got backend={self.backend!r}")
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                problems.append(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if problems:
            raise ConfigError("invalid training config:\n  " + "\n  ".join(problems))
        return self

    def _vllm_problems(self) -> list[str]:
        problems = []
        if self.vllm_mode not in ("colocate", "server"):
            problems.append(f"vllm_mode must be 'colocate' or 'server', got {self.vllm_mode!r}")
        if not 0.0 < self.vllm_gpu_memory_utilization <= 1.0:
            problems.append(f"vllm_gpu_memory_utilization must be in (0, 1], got {self.vllm_gpu_memory_utilization}")
        if self.vllm_max_model_length is not None and self.vllm_max_model_length < 1:
            problems.append(f"vllm_max_model_length must be >= 1 or null, got {self.vllm_max_model_length}")
        if self.vllm_tensor_parallel_size < 1:
            problems.append(f"vllm_tensor_parallel_size must be >= 1, got {self.vllm_tensor_parallel_size}")
        if self.vllm_importance_sampling not in IMPORTANCE_SAMPLING_MODES:
            problems.append(f"vllm_importance_sampling must be one of {IMPORTANCE_SAMPLING_MODES}, got {self.vllm_importance_sampling!r}")
        url = self.vllm_server_base_url
        if url is not None and not url.startswith(("http://", "https://")):
            problems.append(f"vllm_server_base_url must start with http:// or https://, got {url!r}")
        if url is not None and self.vllm_mode != "server":
            problems.append("vllm_server_base_url is for vllm_mode=server")
        return problems

    def _type_problems(self) -> list[str]:
        """Each field whose value is not of its declared type (``lora_r=abc``, ``beta=[1]``)."""
        kinds = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "None": (type(None),)}
        problems = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            allowed: list[type] = []
            for part in str(f.type).split("|"):
                part = part.strip()
                base = part.split("[", 1)[0]
                allowed.extend(kinds.get(base, (dict,) if base == "dict" else (list,) if base == "list" else (object,)))
            ok = isinstance(value, tuple(allowed))
            if isinstance(value, bool) and bool not in allowed:  # True is an int to Python, not to a config
                ok = False
            if ok and isinstance(value, float) and value != value:
                ok = False  # NaN
            if ok and isinstance(value, list) and "list[str]" in str(f.type):
                ok = all(isinstance(v, str) for v in value)
            if not ok:
                problems.append(f"{f.name} must be {f.type}, got {value!r}")
        return problems

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"a training config must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            raise ConfigError(f"unknown config key(s) {unknown}; known keys: {', '.join(cls.field_names())}")
        return cls(**data)

    def with_overrides(self, **changes: Any) -> TrainConfig:
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise ConfigError(f"unknown config key(s) {unknown}")
        return dataclasses.replace(self, **changes)

    def set_from_string(self, assignment: str) -> TrainConfig:
        """Apply one ``name=value`` override; the value is parsed as YAML (``8``, ``0.5``, ``true``, ``[q_proj]``)."""
        import yaml

        if "=" not in assignment:
            raise ConfigError(f"expected name=value, got {assignment!r}")
        name, raw = assignment.split("=", 1)
        name = name.strip()
        if name not in self.field_names():
            raise ConfigError(f"unknown config key {name!r}; known keys: {', '.join(self.field_names())}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: cannot parse {raw!r}: {exc}") from None
        return self.with_overrides(**{name: value})


def load_config(path: str | Path) -> TrainConfig:
    """Read a config from a ``.json``, ``.yaml`` or ``.yml`` file (unknown keys are an error)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from None
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: invalid JSON: {exc}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: invalid YAML: {exc}") from None
    return TrainConfig.from_dict(data)
