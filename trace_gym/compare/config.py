"""The comparison's settings: :class:`CompareConfig`, stored with every result as ``compare.json``'s ``config``.

Every field is validated by :meth:`CompareConfig.validate` (a :class:`ValueError` naming the field and what to
pass).  ``seed`` is the one seed of the whole comparison: the warm start, TRACE's base rollouts, analysis,
synthesis, calibration, training and routing, every method's sampling and the evaluation's trial seeds
(``eval_seed``, by default ``seed + 1000``) all derive from it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..policies.model_registry import is_plumbing
from . import methods as M

__all__ = ["CompareConfig", "METHODS", "DEFAULT_METHODS", "DEFAULT_TRAIN", "EVAL_SEED_OFFSET", "TRAIN_SEED_STRIDE"]

# ``joint``, ``oracle`` and ``ideal`` are reference rows built from TRACE's work (see :mod:`trace_gym.compare.reference`);
# ``classifier`` is TRACE's adapters routed by the paper's classifier router (the base model scoring the labels)
METHODS = ("base", "grpo", "gepa", "trace", "classifier", "single", "joint", "oracle", "ideal")
DEFAULT_METHODS = ("base", "grpo", "gepa", "trace", "single")  # the reference rows are asked for by name
EVAL_SEED_OFFSET = 1000  # the evaluation's trial seeds start at seed + this (1000 at seed 0, as runs made before)
TRAIN_SEED_STRIDE = 10_000  # GRPO's env seeds start at seed × this unless ``train`` sets train_seed_start (0 at seed 0)

DEFAULT_TRAIN = {"num_generations": 4, "seeds_per_step": 1, "max_resamples": 1, "max_new_tokens_per_turn": 128,
                 "max_completion_length": 1024, "learning_rate": 2e-5, "lora_r": 16, "lora_alpha": 32}


@dataclass
class CompareConfig:
    """Everything one comparison needs; the JSON of it is stored with the results."""

    target: str = "trace/tau2-retail-v0"  # or "auto": the τ² domain where the base model scores highest
    model: str = "smollm2"
    budget: int = 64
    out: str = "runs/compare"
    trials: int = 2
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    seed: int = 0  # the one seed of the whole comparison (module docstring)
    eval_seed: int | None = None  # seed of trial 0 on the held-out tasks (None: seed + EVAL_SEED_OFFSET)
    n_train_tasks: int | None = None
    n_test_tasks: int | None = None
    train_split: str = "train"  # the target's split every method learns from (e.g. fold_b to swap ToolSandbox's folds)
    test_split: str = "test"    # the held-out split every method is evaluated on (e.g. fold_a)
    train_tasks: list[Any] | None = None  # explicit task lists (override the split)
    test_tasks: list[Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    success: float | None = None  # reward that counts as success on the target (None: the env's own threshold)
    cap_env_kwargs: dict[str, Any] = field(default_factory=dict)
    gen: dict[str, Any] = field(default_factory=lambda: {"max_new_tokens": 256, "temperature": 0.7})
    train: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_TRAIN))
    max_train_steps: int | None = None
    batch_size: int = 1
    # TRACE
    base_tasks: int | None = None  # train tasks the base model is rolled out on (default: enough for a quarter of B)
    base_samples: int = 1
    base_fraction: float = 0.25
    calib_seeds: int = 2
    calib_samples: int = 2
    routing_seeds: int = 2
    min_capabilities: int = 1
    max_capabilities: int = 3
    mastered: float = 0.9  # calibration mean reward at which a capability needs no adapter
    band: list[float] | None = None  # base mean reward each capability env's knobs are tuned toward (e.g. [0.2, 0.6])
    tune_rounds: int = 0  # rounds of that knob search, charged to the budget (0: calibration only measures)
    # TRACE only: knob settings for every capability env that declares the knob (others ignore it), e.g.
    # {"withheld_weight": 0.33}: the ToolSandbox envs' requests whose needed tool is not offered
    cap_knobs: dict[str, float] = field(default_factory=dict)
    # TRACE only: each capability adapter is first SFT'd on this many reference episodes of its own env (train
    # split, the ``sft_*`` settings of ``train``), charged to TRACE's budget one rollout each (0: GRPO alone).
    cap_warm_demos: int = 0
    # TRACE only: GRPO steps per capability adapter after its warm start (None: as many as the budget allows, up to
    # max_train_steps; 0: SFT-only adapters, said in the method's note)
    trace_grpo_steps: int | None = None
    # TRACE only: each adapter's SFT also keeps the shared warm start's reference episodes (not charged again;
    # needs the warm start and cap_warm_demos), so that it keeps what that start taught, refusals included.
    cap_rehearsal: bool = False
    # TRACE only: each adapter's SFT also trains on the base model's own successful episodes among TRACE's base
    # rollouts on the train split (reward at or above the target's success threshold: its refusals and closings
    # included), so that it keeps what the base model does well; not charged again (already played and charged).
    # Needs cap_warm_demos (the SFT they join).
    cap_rehearse_base: bool = False
    # TRACE only: each adapter's SFT also rehearses the other adapters' demonstrations (the reference episodes of
    # their envs, charged in their own stages), for sft_max_steps × the envs it then learns from, so that a
    # conversation routed to it from another capability is still handled.  Needs cap_warm_demos.
    cap_rehearse_peers: bool = False
    router_rule: str = "vote"  # retrieval routing rule: "vote", "gate", "cover" or "needs" (see RetrievalRouter)
    # TRACE only: "per-capability" adapters, or also one "joint" adapter on what they all learned from (the needs rule
    # routes to it), or "select": whichever of the two does better on learning tasks (pipeline.selection, charged)
    adapter_choice: str = "per-capability"
    select_tasks: int = 16   # learning tasks each candidate plays under "select"
    need_examples: int = 24  # train tasks of each adapter's env the needs rule's gate reads (pipeline.gate)
    # TRACE only: routing learned from outcomes.  N > 0: the routing stage also plays each trained adapter on the
    # first N train tasks of TRACE's base rollouts (charged to TRACE's budget, N × adapters rollouts) and adds one
    # example per task labelled with whichever of the base model and the adapters scored best (ties: the base
    # model); the nearest such example decides, else router_rule does (pipeline.outcomes, RetrievalRouter)
    router_outcomes: int = 0
    embedder: str | None = None
    # what acts for every method (rollouts, calibration, evaluation; training stays on transformers): "auto" is
    # llama.cpp where llama-cpp-python is installed and the weights have a GGUF copy (SmolLM2's own, not a warm
    # start's merged folder), else transformers (policies.engine.acting_spec)
    engine: str = "auto"
    # GEPA
    gepa_minibatch: int = 3
    gepa_val: int = 4
    reflection: str | None = None  # policy spec of the reflection model (default: the base model)
    # base survey before the comparison
    survey_domains: list[str] = field(default_factory=list)
    survey_tasks: int = 5
    # format warm start, shared by every method (:mod:`trace_gym.pipeline.warm`): SFT on reference episodes of
    # capability envs (never the evaluation scenarios), merged into the base weights that every method then loads.
    # None: on for a ToolSandbox-family target with a trainable model other than ``tiny``, off otherwise.
    warm_start: bool | None = None
    warm_start_envs: list[str] | None = None  # default: the built-in capability envs of the target's domain
    warm_start_steps: int = 8
    warm_start_seeds: int = 3                 # train-split tasks per env
    warm_start_lr: float = 2e-4
    # Programmatic use only (not stored): ``(seed) -> policy`` replacing the model's loading, e.g. a
    # scripted or remote agent.  Methods that train need a loadable model and are skipped with it.
    policy_factory: Callable[[int], Any] | None = field(default=None, repr=False, compare=False)
    reflection_lm: Callable[[Any], str] | None = field(default=None, repr=False, compare=False)
    # Set by the warm start (not stored): the merged model folder every method loads instead of ``model``.
    weights: str | None = field(default=None, repr=False, compare=False)

    def validate(self) -> CompareConfig:
        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise ValueError(f"unknown method(s) {bad}; choose from {list(METHODS)}")
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")
        if self.trials < 1:
            raise ValueError(f"trials must be >= 1, got {self.trials}")
        self.stage_settings()  # each stage's settings checked where they are defined (pipeline.settings)
        for m in ("single", "joint", "oracle", "ideal", "classifier"):
            if m in self.methods and "trace" not in self.methods:
                raise ValueError(f"method {m!r} reuses the adapters (or capabilities) trained by 'trace'; add 'trace'")
        if "joint" in self.methods and not self.cap_warm_demos:
            raise ValueError("method 'joint' SFTs one adapter on the demonstrations TRACE's adapters trained on: set "
                             "cap_warm_demos (TRACE's adapters have none without it)")
        if self.eval_seed is not None and (not isinstance(self.eval_seed, int) or isinstance(self.eval_seed, bool)):
            raise ValueError(f"eval_seed must be an integer or null (seed + {EVAL_SEED_OFFSET}), got {self.eval_seed!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.cap_rehearse_base and not self.cap_warm_demos:
            raise ValueError("cap_rehearse_base adds the base model's successful episodes to each adapter's SFT: set "
                             "cap_warm_demos too (the adapters have no SFT without it)")
        if self.cap_rehearse_peers and not self.cap_warm_demos:
            raise ValueError("cap_rehearse_peers adds the other adapters' demonstrations to each adapter's SFT: set "
                             "cap_warm_demos too (the adapters have no SFT without it)")
        if self.trace_grpo_steps is not None and self.trace_grpo_steps < 0:
            raise ValueError(f"trace_grpo_steps must be >= 0 (0: SFT-only adapters), got {self.trace_grpo_steps}")
        if self.trace_grpo_steps == 0 and not self.cap_warm_demos and "trace" in self.methods:
            raise ValueError("trace_grpo_steps = 0 trains SFT-only adapters: set cap_warm_demos to how many reference "
                             "episodes each adapter learns from")
        if "trace" in self.methods and self.router_outcomes > self._n_base_tasks():
            raise ValueError(f"router_outcomes = {self.router_outcomes} plays the adapters on that many of TRACE's "
                             f"{self._n_base_tasks()} base tasks; pass router_outcomes <= {self._n_base_tasks()} or "
                             "more base_tasks")
        if "trace" in self.methods and (self.cap_warm_demos or self.router_outcomes):
            self._check_warm_budget()
        if self.cap_rehearsal and not self.cap_warm_demos:
            raise ValueError("cap_rehearsal adds the warm start's episodes to each adapter's SFT: set cap_warm_demos too")
        if self.cap_rehearsal and "trace" in self.methods and not self.warm_start_on():
            raise ValueError("cap_rehearsal rehearses the shared warm start's episodes: it needs the warm start "
                             "(warm_start true, and a model that can be trained)")
        if "ideal" in self.methods and "joint" not in self.methods:
            raise ValueError("method 'ideal' takes the joint adapter's evaluation where no needed tool is missing: add 'joint'")
        from ..policies.engine import ENGINES

        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {list(ENGINES)}, got {self.engine!r}")
        from ..pipeline.warm import check_warm_fields

        check_warm_fields(self)
        return self

    def stage_settings(self, rehearsal: Any = None) -> dict[str, Any]:
        """TRACE's stage settings (:mod:`trace_gym.pipeline.settings`, each validated when made) as this
        comparison sets them, keyed as :class:`~trace_gym.pipeline.TracePlan` embeds them; ``rehearsal``: the
        shared warm start's episodes each adapter's SFT keeps (``cap_rehearsal``)."""
        from ..pipeline.settings import (
            AnalysisSettings,
            CalibrationSettings,
            RoutingSettings,
            SynthesisSettings,
            TrainingSettings,
        )

        return {
            "analysis": AnalysisSettings(min_capabilities=self.min_capabilities, max_capabilities=self.max_capabilities),
            "synthesis": SynthesisSettings(),
            "calibration": CalibrationSettings(
                cap_env_kwargs=self.cap_env_kwargs, cap_knobs=dict(self.cap_knobs), calib_seeds=self.calib_seeds,
                calib_samples=self.calib_samples, mastered=self.mastered, band=self.band or None,
                tune_rounds=self.tune_rounds),
            # trace_grpo_steps is TRACE's own cap on GRPO steps; max_train_steps also caps the grpo method
            "training": TrainingSettings(
                train=self.train_settings, cap_warm_demos=self.cap_warm_demos, rehearsal=rehearsal,
                max_train_steps=self.max_train_steps if self.trace_grpo_steps is None else self.trace_grpo_steps,
                cap_rehearse_base=self.cap_rehearse_base, cap_rehearse_peers=self.cap_rehearse_peers),
            "routing": RoutingSettings(
                routing_seeds=self.routing_seeds, router_rule=self.router_rule, need_examples=self.need_examples,
                router_outcomes=self.router_outcomes, embedder=self.embedder, adapter_choice=self.adapter_choice,
                select_tasks=self.select_tasks),
        }

    def _n_base_tasks(self) -> int:
        """The train tasks TRACE plays the base model on (``base_tasks``, else enough for ``base_fraction`` of B)."""
        return self.base_tasks if self.base_tasks is not None else max(1, int(self.base_fraction * self.budget) // max(1, self.base_samples))

    def _check_warm_budget(self) -> None:
        """TRACE's budget must hold its base rollouts, calibration, one adapter's warm-start demonstrations and
        routing (its reference episodes and, with ``router_outcomes``, its outcome episodes); raises ``ValueError``
        naming what is short and what to pass."""
        need = {"base rollouts": self._n_base_tasks() * self.base_samples,
                "calibration": self.calib_seeds * self.calib_samples,
                "warm-start demonstrations": self.cap_warm_demos, "routing": self.routing_seeds}
        if self.router_outcomes:
            need["routing from outcomes"] = self.router_outcomes
        if sum(need.values()) > self.budget:
            parts = ", ".join(f"{k} {v}" for k, v in need.items())
            what = " or ".join(k for k, v in (("cap_warm_demos", self.cap_warm_demos),
                                               ("router_outcomes", self.router_outcomes)) if v)
            raise ValueError(f"budget {self.budget} is too small for TRACE with one adapter: it needs "
                             f"{sum(need.values())} rollouts ({parts}); pass a budget of at least {sum(need.values())} "
                             f"or a smaller {what}")

    @property
    def evaluation_seed(self) -> int:
        """The seed of trial 0 on the held-out tasks: ``eval_seed``, else ``seed + EVAL_SEED_OFFSET``."""
        return self.eval_seed if self.eval_seed is not None else self.seed + EVAL_SEED_OFFSET

    @property
    def train_settings(self) -> dict[str, Any]:
        """``train`` as every trained adapter gets it: GRPO's env seeds start at ``seed`` × :data:`TRAIN_SEED_STRIDE`
        (``train_seed_start``, unless ``train`` sets it), so another seed trains on other episodes."""
        return {"train_seed_start": self.seed * TRAIN_SEED_STRIDE, **self.train}

    def to_dict(self) -> dict[str, Any]:
        """The stored settings (``eval_seed`` as the value in use, so a stored run of seed 0 reads 1000 as before)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _RUNTIME}
        out["eval_seed"] = self.evaluation_seed
        out = json.loads(json.dumps(out, default=str))
        if self.policy_factory is not None:
            out["policy_factory"] = getattr(self.policy_factory, "__qualname__", repr(self.policy_factory))
        return out

    @property
    def weights_spec(self) -> str:
        """What every method loads: the warm start's merged folder once made, else ``model``."""
        return self.weights or self.model

    @property
    def acting_spec(self) -> str:
        """What acts: :attr:`weights_spec` on :attr:`engine` (:func:`~trace_gym.policies.engine.acting_spec`)."""
        from ..policies.engine import acting_spec

        return acting_spec(self.weights_spec, self.engine)

    def warm_start_on(self) -> bool:
        """Whether this comparison starts with the shared format warm start (see ``warm_start``)."""
        if self.warm_start is not None:
            return bool(self.warm_start) and self.can_train
        if not self.can_train or is_plumbing(self.model):
            return False
        from ..pipeline.warm import target_record

        rec = target_record(self.target)
        return rec is not None and rec["family"] == "toolsandbox"

    def base_policy(self) -> Any:
        """A fresh base policy (``policy_factory`` when set, else the model loaded with ``gen``)."""
        if self.policy_factory is not None:
            return self.policy_factory(self.seed)
        return M.load_base_policy(self.acting_spec, seed=self.seed, **self.gen)

    @property
    def can_train(self) -> bool:
        return self.policy_factory is None and M.trainable(self.model)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompareConfig:
        """A comparison's settings from a stored ``config`` or a ``--config``/``--set`` mapping (older spellings of
        a setting read as today's, :data:`~trace_gym.pipeline.settings.RENAMED`)."""
        from ..pipeline.settings import current_names

        data = current_names(data)
        names = {f.name for f in dataclasses.fields(cls)} - _RUNTIME
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown compare config key(s) {unknown}")
        return cls(**data)


_RUNTIME = {"policy_factory", "reflection_lm", "weights"}
