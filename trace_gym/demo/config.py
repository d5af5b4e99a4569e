"""How big each stage of the demo is, for the real model and for the tiny test model."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoConfig", "MODELS"]

MODELS = ("smollm2", "tiny")


@dataclass
class DemoConfig:
    """Sizes chosen so the loop fits ~15 minutes on an otherwise idle 2-core CPU with SmolLM2-135M (``--fast``: less).

    Prompts are ~2,400 tokens (retail policy plus a compact tool list).  The policy
    keeps the KV cache of shared prefixes, so a model turn costs its new tokens plus
    decoding (a few seconds for a batch); a GRPO step, which must backpropagate
    through whole prompts, is the expensive part (~2 min for a group of 2 on CPU).
    The scripted agent's episodes cost nothing.
    """

    out: Path = Path("runs/demo")
    domain: str = "retail"
    model: str = "smollm2"  # smollm2 | tiny
    seed: int = 0
    # 1. rollouts on the target (train split)
    scripted_tasks: int = 8       # tasks the flawed scripted agent plays (every variant on each; costs nothing)
    base_tasks: int = 4           # of those, how many the model plays
    env_max_steps: int = 8        # τ² orchestrator steps per model episode (agent + user + tool turns)
    max_new_tokens: int = 64
    temperature: float = 0.7
    batch_size: int = 4
    # 3. calibration of each synthesized env
    calib_seeds: int = 2
    calib_samples: int = 2
    cap_max_steps: int = 4        # capability-env steps per model episode
    # 4. training
    max_adapters: int = 1
    train_steps: int = 2
    group_size: int = 2
    train_max_turns: int = 1      # agent turns per training rollout
    train_tokens_per_turn: int = 48
    train_completion_tokens: int = 128
    learning_rate: float = 5e-5
    lora_r: int = 8
    # 5. routing
    router_seeds: int = 6
    # 6. evaluation on held-out tasks (test split)
    eval_tasks: int = 2
    eval_trials: int = 2
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"unjudged_nl": "ignore"})

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")

    @classmethod
    def for_run(cls, *, out: str | Path = "runs/demo", domain: str = "retail", model: str = "smollm2", fast: bool = False,
                seed: int = 0) -> DemoConfig:
        cfg = cls(out=Path(out), domain=domain, model=model, seed=seed)
        if fast:
            cfg.scripted_tasks, cfg.base_tasks, cfg.env_max_steps = 6, 1, 2
            cfg.calib_samples, cfg.cap_max_steps = 1, 1
            cfg.train_steps = 1
            cfg.router_seeds = 4
        if model == "tiny":  # plumbing only: minimal sizes so a test runs the whole loop in about a minute
            cfg.scripted_tasks, cfg.base_tasks, cfg.env_max_steps = 4, 2, 4
            cfg.max_new_tokens, cfg.batch_size = 8, 2
            cfg.calib_seeds, cfg.calib_samples, cfg.cap_max_steps = 1, 2, 4
            cfg.max_adapters, cfg.train_steps, cfg.group_size, cfg.train_max_turns = 1, 1, 2, 2
            cfg.train_tokens_per_turn, cfg.train_completion_tokens = 6, 48
            cfg.router_seeds, cfg.eval_tasks, cfg.eval_trials = 3, 1, 2
        return cfg

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d
