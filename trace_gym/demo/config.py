"""How big each stage of the demo is, for the real model and for the tiny test model, per target.

Two kinds of target: **ToolSandbox** (``--target toolsandbox``, the default): the model
plays train-split scenarios itself and its own successes and failures feed the analysis
(a success is a milestone similarity of at least :data:`TOOLSANDBOX_SUCCESS`); and a
**τ²-bench** env (``--target tau2-retail`` or a full env id), where a deliberately flawed
scripted agent supplies the successes and failures a small model cannot produce.

On ToolSandbox the base model is SmolLM2 as shipped: it emits no parseable tool call there,
so its successes are the insufficient-information scenarios (where saying it cannot help
is right) and its failures are everything else; what teaches the selected capability is
TRACE's own training stage, which first fine-tunes each adapter on reference episodes of
its synthesized env (``cap_warm_demos``) and then runs GRPO.  The *format warm start*
(``warm_start``, :mod:`trace_gym.pipeline.warm`), which gives the base model the tool-call
format before anything else, is opt-in: it is how the comparison keeps every method on
the same footing, and it costs more than half of the demo's time budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..policies.model_registry import is_plumbing, model_names

__all__ = ["DemoConfig", "TARGETS", "TOOLSANDBOX_SUCCESS", "resolve_target"]

TOOLSANDBOX = "trace/toolsandbox-v0"
# A ToolSandbox episode counts as a success for the analysis and the router at this milestone similarity:
# most milestones reached (e.g. the right tool with one argument off), not a perfect 1.0, which a small
# model rarely reaches; reports still give the perfect count beside the mean similarity.
TOOLSANDBOX_SUCCESS = 0.7
# short target names of the demo -> env id
TARGETS = {"toolsandbox": TOOLSANDBOX, "tau2-retail": "trace/tau2-retail-v0"}


def resolve_target(name: str) -> str:
    """The env id of a demo target name (a short name of :data:`TARGETS`, or a full env id as given)."""
    if name in TARGETS:
        return TARGETS[name]
    if "/" not in name:
        raise ValueError(f"target must be one of {sorted(TARGETS)} or a full env id, got {name!r}")
    return name


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
    target: str = ""              # the target env id (default: the τ²-bench env of ``domain``)
    model: str = "smollm2"  # smollm2 | tiny
    seed: int = 0
    scripted: bool | None = None  # the flawed scripted agent feeds the analysis (default: every target but ToolSandbox)
    success: float | None = None  # reward that counts as success (default: ToolSandbox TOOLSANDBOX_SUCCESS, else the env's)
    # 1. rollouts on the target (train split)
    scripted_tasks: int = 8       # tasks the flawed scripted agent plays (every variant on each; costs nothing)
    base_tasks: int = 4           # of those, how many the model plays
    base_samples: int = 1         # seeds the model plays each of its tasks with
    env_max_steps: int = 8        # τ² orchestrator steps per model episode (agent + user + tool turns)
    max_new_tokens: int = 64
    temperature: float = 0.7
    batch_size: int = 4
    # 3. calibration of each synthesized env
    calib_seeds: int = 2
    calib_samples: int = 2
    cap_max_steps: int = 4        # capability-env steps per model episode
    band: tuple[float, float] | None = None  # base mean reward each env's knobs are tuned toward (paper: 0.2–0.6)
    tune_rounds: int = 0          # rounds of that knob search (0: calibration only measures)
    tune_episodes: int | None = None  # at most this many episodes of knob search per env (None: no cap)
    min_capabilities: int = 0     # capabilities to synthesize even below the analysis thresholds
    # 4. training
    max_adapters: int = 1
    train_steps: int = 2
    group_size: int = 2
    train_max_turns: int = 1      # agent turns per training rollout
    train_tokens_per_turn: int = 48
    train_completion_tokens: int = 128
    learning_rate: float = 5e-5
    lora_r: int = 8
    gradient_checkpointing: bool | None = None  # None: on for a real model (τ² prompts need it on 24 GB), off for tiny
    # capability warm start: each adapter is first SFT'd on this many reference episodes of its own env's
    # train split (part of TRACE's work, unlike the format warm start below), for ``cap_warm_steps`` steps
    cap_warm_demos: int = 0
    cap_warm_steps: int = 16
    cap_rehearse_base: bool = False  # each adapter's SFT also rehearses the model's own successful episodes of 1.
    # 5. routing
    routing_seeds: int = 6       # reference episodes of each adapter's env in the router index
    router_rule: str = "vote"     # RetrievalRouter's rule ("vote", "gate", "cover", "needs"); the ToolSandbox demo: needs
    # per-capability adapters, a joint one, or whichever the learning tasks prefer ("select", with the needs rule)
    adapter_choice: str = "per-capability"
    cap_warm_recover_every: int = 0  # every Nth demonstration shows a recovered tool error (0: none)
    # 6. evaluation on held-out tasks (test split)
    eval_tasks: int = 2           # held-out tasks, spread over the report groups (0: every task of the test split)
    eval_trials: int = 2
    cap_eval_seeds: int = 0       # held-out seeds of the first adapter's own env, base vs adapter (0: skip)
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"unjudged_nl": "ignore"})
    # 0. format warm start (SFT on reference episodes of capability envs, merged into the base weights; every
    # stage then uses the merged model).  Default: on for ToolSandbox with SmolLM2, off for the tiny model and τ².
    warm_start: bool | None = None
    warm_start_envs: list[str] | None = None  # default: the built-in capability envs of the target's domain
    warm_start_steps: int = 8
    warm_start_seeds: int = 3                 # train-split tasks per env
    warm_start_lr: float = 2e-4
    # what acts (rollouts, calibration, evaluation; training is always transformers): "auto" is llama.cpp where
    # llama-cpp-python is installed and the model has a GGUF copy (SmolLM2), else transformers
    engine: str = "auto"

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if not self.target:
            from ..tau2.entries import env_id_for

            self.target = env_id_for(self.domain)
        self.target = resolve_target(self.target)
        if self.scripted is None:
            self.scripted = self.target != TOOLSANDBOX
        if self.success is None and self.target == TOOLSANDBOX:
            self.success = TOOLSANDBOX_SUCCESS
        if self.band is not None:
            self.band = (float(self.band[0]), float(self.band[1]))
        if self.model not in model_names():
            raise ValueError(f"model must be one of {tuple(model_names())}, got {self.model!r}")
        self.stage_settings()  # each stage's settings checked where they are defined (pipeline.settings)
        from ..policies.engine import ENGINES

        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {list(ENGINES)}, got {self.engine!r}")
        if self.warm_start is None:  # opt-in: the comparison's fairness device, not part of TRACE (see the module doc)
            self.warm_start = False
        from ..pipeline.warm import check_warm_fields

        check_warm_fields(self)

    @classmethod
    def for_run(cls, *, out: str | Path = "runs/demo", domain: str = "retail", model: str = "smollm2", fast: bool = False,
                seed: int = 0, target: str = "toolsandbox", warm_start: bool | None = None,
                engine: str = "auto") -> DemoConfig:
        """The demo's sizes for ``model`` on ``target`` (``--fast``: smaller); ``warm_start`` overrides the default."""
        env_id = resolve_target(target) if target else ""
        if env_id == TOOLSANDBOX:
            return cls._toolsandbox(out=Path(out), model=model, fast=fast, seed=seed, warm_start=warm_start,
                                    engine=engine)
        cfg = cls(out=Path(out), domain=domain, model=model, seed=seed, target=env_id, warm_start=warm_start,
                  engine=engine)
        if fast:
            cfg.scripted_tasks, cfg.base_tasks, cfg.env_max_steps = 6, 1, 2
            cfg.calib_samples, cfg.cap_max_steps = 1, 1
            cfg.train_steps = 1
            cfg.routing_seeds = 4
        if is_plumbing(model):  # plumbing only: minimal sizes so a test runs the whole loop in about a minute
            cfg.scripted_tasks, cfg.base_tasks, cfg.env_max_steps = 4, 2, 4
            cfg.max_new_tokens, cfg.batch_size = 8, 2
            cfg.calib_seeds, cfg.calib_samples, cfg.cap_max_steps = 1, 2, 4
            cfg.max_adapters, cfg.train_steps, cfg.group_size, cfg.train_max_turns = 1, 1, 2, 2
            cfg.train_tokens_per_turn, cfg.train_completion_tokens = 6, 48
            cfg.routing_seeds, cfg.eval_tasks, cfg.eval_trials = 3, 1, 2
        return replace(cfg)  # the sizes above validated as a whole

    @classmethod
    def _toolsandbox(cls, *, out: Path, model: str, fast: bool, seed: int, warm_start: bool | None = None,
                     engine: str = "auto") -> DemoConfig:
        """ToolSandbox sizes: prompts are ~1–2k characters (2–4 tools), so the model plays more episodes than on τ²,
        in batches (decoding reads the weights once per token for the whole batch); no scripted agent; each
        synthesized env's knobs are searched once toward the 20–60% band.  The adapter is SFT-only: 32 of its own
        env's reference episodes (every fourth with a recovered tool error), 24 steps — what made SmolLM2 solve
        capability envs and move ToolSandbox's own scenarios; GRPO after such a warm start lowered the score at CPU
        budgets (``benchmarks/learning_cpu.py``), so the CPU demo trains none.  The evaluation adds the adapter's
        own env on 8 held-out seeds, base vs adapter."""
        cfg = cls(out=out, model=model, seed=seed, target=TOOLSANDBOX, env_kwargs={}, warm_start=warm_start,
                  engine=engine)
        cfg.scripted_tasks, cfg.base_tasks, cfg.base_samples, cfg.env_max_steps = 0, 16, 1, 12
        cfg.max_new_tokens, cfg.temperature, cfg.batch_size = 96, 0.7, 8
        cfg.calib_seeds, cfg.calib_samples, cfg.cap_max_steps = 2, 2, 8
        # one setting beyond the synthesized one: every knob at its easy end when the model is below the band
        cfg.band, cfg.tune_rounds, cfg.tune_episodes, cfg.min_capabilities = (0.2, 0.6), 1, 4, 1
        cfg.max_adapters, cfg.train_steps, cfg.group_size, cfg.train_max_turns = 1, 0, 4, 4
        cfg.train_tokens_per_turn, cfg.train_completion_tokens, cfg.learning_rate = 64, 512, 5e-5
        # the adapter's SFT batches ~1k-token episodes: checkpointing keeps the run's peak memory under 8 GB
        cfg.gradient_checkpointing = True
        cfg.cap_warm_demos, cfg.cap_warm_steps, cfg.warm_start_lr, cfg.cap_warm_recover_every = 32, 24, 4e-4, 4
        # the held-out evaluation plays every scenario of the other fold (fold_b: 64, 14 of them insufficient-
        # information ones), so its paired interval can exclude 0 for a gain a few scenarios would hide
        cfg.routing_seeds, cfg.eval_tasks, cfg.eval_trials, cfg.cap_eval_seeds = 4, 0, 1, 8
        # the comparison's method at the demo's size: the base model keeps every request whose needed tool is not
        # offered (a gate learned from the whole train split and the adapter's env), the adapters take the rest
        cfg.router_rule, cfg.adapter_choice = "needs", "select"
        cfg.cap_rehearse_base = True  # the adapter keeps what the base model does well (refusing, ending)
        if fast:
            cfg.base_tasks, cfg.eval_tasks, cfg.cap_warm_steps, cfg.cap_warm_demos, cfg.cap_eval_seeds = 8, 4, 8, 16, 4
        if is_plumbing(model):  # plumbing only: minimal sizes so a test runs the whole loop quickly
            cfg.base_tasks, cfg.base_samples, cfg.env_max_steps = 8, 1, 4
            cfg.max_new_tokens, cfg.batch_size = 8, 4
            cfg.calib_seeds, cfg.calib_samples, cfg.cap_max_steps, cfg.tune_rounds = 1, 2, 4, 1
            cfg.max_adapters, cfg.train_steps, cfg.group_size, cfg.train_max_turns = 1, 1, 2, 2
            cfg.train_tokens_per_turn, cfg.train_completion_tokens = 6, 48
            cfg.routing_seeds, cfg.eval_tasks, cfg.eval_trials, cfg.cap_eval_seeds = 2, 4, 1, 2
            cfg.cap_warm_demos, cfg.cap_warm_steps, cfg.train_steps = 2, 1, 1
        return replace(cfg)  # the sizes above validated as a whole

    @property
    def train_settings(self) -> dict[str, Any]:
        """The :class:`~trace_gym.train.config.TrainConfig` fields every adapter of the demo trains with."""
        return {"num_train_seeds": max(8, self.train_steps), "num_generations": self.group_size, "seeds_per_step": 1,
                "max_new_tokens_per_turn": self.train_tokens_per_turn, "max_completion_length": self.train_completion_tokens,
                "learning_rate": self.learning_rate, "lora_r": self.lora_r, "lora_alpha": 2 * self.lora_r,
                "max_resamples": 0, "max_turns": self.train_max_turns, "progress": True,
                "sft_max_steps": self.cap_warm_steps, "sft_learning_rate": self.warm_start_lr,
                "sft_prefix_grad": "detached", "sft_recover_every": self.cap_warm_recover_every,
                # ~5k-token τ² prompts: without checkpointing a real model's backward pass needs >24 GB
                "gradient_checkpointing": not is_plumbing(self.model) if self.gradient_checkpointing is None
                else self.gradient_checkpointing}

    def stage_settings(self) -> dict[str, Any]:
        """TRACE's stage settings (:mod:`trace_gym.pipeline.settings`, each validated when made) at the demo's
        sizes, keyed as :class:`~trace_gym.pipeline.TracePlan` embeds them."""
        from ..pipeline.settings import (
            AnalysisSettings,
            CalibrationSettings,
            RoutingSettings,
            SynthesisSettings,
            TrainingSettings,
        )

        return {
            "analysis": AnalysisSettings(min_capabilities=self.min_capabilities,
                                         max_capabilities=self.max_adapters if self.min_capabilities else None),
            "synthesis": SynthesisSettings(max_envs=self.max_adapters),
            "calibration": CalibrationSettings(
                cap_env_kwargs={"max_steps": self.cap_max_steps}, calib_seeds=self.calib_seeds,
                calib_samples=self.calib_samples, reference_seeds=max(4, self.calib_seeds), band=self.band,
                tune_rounds=self.tune_rounds, tune_episodes=self.tune_episodes),
            "training": TrainingSettings(train=self.train_settings, train_steps=self.train_steps,
                                         cap_warm_demos=self.cap_warm_demos, cap_rehearse_base=self.cap_rehearse_base),
            "routing": RoutingSettings(routing_seeds=self.routing_seeds, router_rule=self.router_rule,
                                       adapter_choice=self.adapter_choice),
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        d["band"] = list(self.band) if self.band is not None else None
        return d
