"""The settings of each TRACE stage, one dataclass per stage, each validated once when made.

:class:`~trace_gym.pipeline.loop.TracePlan` embeds them; the front ends (``trace-gym compare``'s
:class:`~trace_gym.compare.config.CompareConfig`, the demo's :class:`~trace_gym.demo.config.DemoConfig`) build
them from their own flat, stored settings in one method each (``stage_settings``), so that a setting has one
name and one check everywhere.  A value that cannot work is a :class:`ValueError` naming the field.

Older spellings a user may still type, or that run folders written before hold, are mapped to today's names in
one place, :data:`RENAMED` (:func:`current_names`): the stage stores read a recorded fingerprint through it
(:func:`recorded_names`), so a run folder made before a rename still resumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AnalysisSettings", "SynthesisSettings", "CalibrationSettings", "TrainingSettings", "RoutingSettings",
           "RENAMED", "current_names", "recorded_names"]

# RoutingSettings.adapter_choice: which adapters the router offers (pipeline.selection, pipeline.joint)
PER_CAPABILITY = "per-capability"
JOINT_CHOICE = "joint"
ADAPTER_CHOICES = (PER_CAPABILITY, JOINT_CHOICE, "select")

# old name -> the name every configuration now uses for the same setting
RENAMED = {"router_seeds": "routing_seeds"}


def current_names(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with every old name of :data:`RENAMED` spelled as today (order kept); a :class:`ValueError`
    when both spellings of one setting are given."""
    both = sorted(old for old, new in RENAMED.items() if old in settings and new in settings)
    if both:
        raise ValueError(f"{', '.join(f'{old} and {RENAMED[old]}' for old in both)} name the same setting: give one")
    return {RENAMED.get(k, k): v for k, v in settings.items()}


def recorded_names(fingerprint: Any) -> Any:
    """A stage record's fingerprint as today's names spell it: a front end's flat settings, or a stage verb's
    ``{"settings": ..., "after": ...}``; anything else (or a record naming one setting twice) as it is."""
    if not isinstance(fingerprint, dict):
        return fingerprint
    try:
        out = current_names(fingerprint)
        if isinstance(out.get("settings"), dict):
            out["settings"] = current_names(out["settings"])
    except ValueError:
        return fingerprint
    return out


def _count(name: str, value: Any, minimum: int = 0, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{' or null' if optional else ''}, got {value!r}")


def _fraction(name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


@dataclass
class AnalysisSettings:
    """2. analysis: how many capabilities to choose from the failures."""

    min_capabilities: int = 0                    # capabilities chosen even below the analysis thresholds
    max_capabilities: int | None = None

    def __post_init__(self) -> None:
        _count("min_capabilities", self.min_capabilities)
        _count("max_capabilities", self.max_capabilities, optional=True)


@dataclass
class SynthesisSettings:
    """3. synthesis: how many capability envs to make."""

    max_envs: int | None = None

    def __post_init__(self) -> None:
        _count("max_envs", self.max_envs, optional=True)


@dataclass
class CalibrationSettings:
    """4. calibration: how the base model is scored on each env, and the knob search toward a band."""

    cap_env_kwargs: dict[str, Any] = field(default_factory=dict)
    cap_knobs: dict[str, float] = field(default_factory=dict)  # knob settings for every env that declares the knob
    calib_seeds: int = 2
    calib_samples: int = 2
    reference_seeds: int = 0                     # episodes of the spec's reference solution per env (solvability check)
    mastered: float | None = None                # calibration mean reward at which a capability needs no adapter
    band: tuple[float, float] | None = None      # base mean reward to tune each env's knobs toward (paper: 20–60%)
    tune_rounds: int = 0                         # rounds of the knob search (0: measure only)
    tune_episodes: int | None = None             # at most this many episodes of knob search per env (None: no cap)

    def __post_init__(self) -> None:
        for name in ("calib_seeds", "calib_samples", "reference_seeds", "tune_rounds"):
            _count(name, getattr(self, name))
        _count("tune_episodes", self.tune_episodes, optional=True)
        if not isinstance(self.cap_env_kwargs, dict):
            raise ValueError(f"cap_env_kwargs must be a mapping of env keyword arguments, got {self.cap_env_kwargs!r}")
        bad = {k: v for k, v in dict(self.cap_knobs).items()
               if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)}
        if bad:
            raise ValueError(f"cap_knobs maps knob names to numbers, got {bad}")
        if self.mastered is not None:
            _fraction("mastered", self.mastered)
        if self.band is not None:
            if len(self.band) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in self.band):
                raise ValueError(f"band must be two numbers [low, high], got {self.band!r}")
            self.band = (float(self.band[0]), float(self.band[1]))
            if not 0.0 <= self.band[0] <= self.band[1] <= 1.0:
                raise ValueError(f"band must satisfy 0 <= low <= high <= 1, got {list(self.band)}")


@dataclass
class TrainingSettings:
    """5. training: one LoRA adapter per capability env still to learn."""

    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields every adapter trains with
    train_steps: int | None = None               # fixed optimizer steps per adapter (None: as many as the budget allows)
    max_train_steps: int | None = None           # at most this many GRPO steps per adapter (0: SFT-only adapters)
    cap_warm_demos: int = 0                      # reference episodes of its own env each adapter is first SFT'd on
    rehearsal: Any = None                        # the shared warm start's episodes each adapter's SFT also keeps
    cap_rehearse_base: bool = False              # ... and the model's own successful episodes of 1. (not charged again)
    # ... and the other adapters' demonstrations (charged in their own stages), for sft_max_steps × the envs it learns from
    cap_rehearse_peers: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.train, dict):
            raise ValueError(f"train must be a mapping of TrainConfig fields, got {self.train!r}")
        _count("train_steps", self.train_steps, optional=True)
        _count("max_train_steps", self.max_train_steps, optional=True)
        _count("cap_warm_demos", self.cap_warm_demos)
        for name in ("cap_rehearse_base", "cap_rehearse_peers"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")


@dataclass
class RoutingSettings:
    """6. routing: the index that sends each conversation to an adapter or to none, and which adapters it offers."""

    routing_seeds: int = 2                       # reference episodes of each adapter's env in the index
    router_rule: str = "vote"                    # RetrievalRouter's rule, stored with the index
    need_examples: int = 24                      # train tasks of each adapter's env the needs rule's gate reads
    # routing from outcomes: each adapter also plays the first N train tasks of 1. (charged), and the router learns
    # from which of the base model and the adapters scored best on each (pipeline.outcomes)
    router_outcomes: int = 0
    embedder: str | None = None
    # "per-capability" adapters, or also one "joint" adapter on what they all learned from (pipeline.joint); with the
    # needs rule "joint" routes every conversation the gate passes to it and "select" lets the learning tasks choose
    # (pipeline.selection: ``select_tasks`` of them played by each candidate, charged to routing)
    adapter_choice: str = PER_CAPABILITY
    select_tasks: int = 16

    def __post_init__(self) -> None:
        from ..route.retrieval import RULES

        _count("routing_seeds", self.routing_seeds)
        _count("router_outcomes", self.router_outcomes)
        _count("select_tasks", self.select_tasks, 1)
        _count("need_examples", self.need_examples, 1)
        if self.router_rule not in RULES:
            raise ValueError(f"router_rule must be one of {list(RULES)}, got {self.router_rule!r}")
        if self.adapter_choice not in ADAPTER_CHOICES:
            raise ValueError(f"adapter_choice must be one of {list(ADAPTER_CHOICES)}, got {self.adapter_choice!r}")
        if self.adapter_choice == "select" and self.router_rule != "needs":
            raise ValueError("adapter_choice 'select' plays both candidates where the needs rule's gate passes: set "
                             "router_rule 'needs'")
