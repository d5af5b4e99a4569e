"""The TRACE loop, readable once and in order.

0. **warm start** (optional, in front of the loop) — a format-only SFT on reference episodes of
   capability envs, merged into the base weights that every later stage loads
   (:func:`~trace_gym.pipeline.warm.run_warm_start`);

1. **rollouts** — the base model (and any other agents) on the target's tasks
   (:func:`~trace_gym.pipeline.stages.play_rollouts`);
2. **analysis** — the capabilities failed trajectories lack (:func:`~trace_gym.pipeline.stages.analyze`);
3. **synthesis** — one capability env per chosen capability (:func:`~trace_gym.pipeline.stages.synthesize_envs`);
4. **calibration** — the base model's score on each (:func:`~trace_gym.pipeline.stages.calibrate_envs`);
5. **training** — one GRPO+LoRA adapter per env to learn (:func:`~trace_gym.pipeline.training.train_capability`);
6. **routing** — the index that picks an adapter, or none, per conversation
   (:func:`~trace_gym.pipeline.routing.build_router`);
7. **evaluation** — pass^k of any policy on held-out tasks (:func:`~trace_gym.pipeline.evaluation.evaluate_policy`,
   :func:`~trace_gym.pipeline.evaluation.evaluate_policies` for several side by side; graded targets are
   also reported per group as mean reward and perfect count, :mod:`~trace_gym.eval.scores`).

:class:`~trace_gym.pipeline.folder.RunFolder` is where a run's files live (the command line's stage verbs
take one with ``--run DIR``).  :func:`~trace_gym.pipeline.loop.run_trace` runs stages 1–6 of a
:class:`~trace_gym.pipeline.loop.TracePlan` through one resumable
:class:`~trace_gym.pipeline.store.StageStore`, charging every learning episode to an
optional :class:`~trace_gym.pipeline.budget.RolloutBudget`.  The pipeline asks the target
env (:class:`~trace_gym.pipeline.target.Target`) for task options, its tool domain and its
success threshold; success is :func:`trace_gym.core.outcome.is_success` and pass^k is
:mod:`trace_gym.eval.metrics`, everywhere.  ``trace-gym demo`` (:mod:`trace_gym.demo`) and
``trace-gym compare`` (:mod:`trace_gym.compare`) are front-ends over this package.
"""

from ..eval.scores import attach_scores, bootstrap_mean, graded_scores, scores_table
from .budget import BudgetedEnv, BudgetExceeded, RolloutBudget
from .evaluation import (
    FORFEIT,
    Evaluation,
    ForfeitOnError,
    evaluate_policies,
    evaluate_policy,
)
from .folder import RunError, RunFolder
from .loop import STAGES, TracePlan, TraceRun, adapter_name, run_trace, training_reserve
from .routing import Routing, build_router
from .stages import (
    Analysis,
    Calibration,
    RolloutJob,
    Rollouts,
    Synthesis,
    analysis_result,
    analyze,
    calibrate_envs,
    capability_factory,
    play_rollouts,
    synthesize_envs,
)
from .store import StageOutput, StageRecord, StageStore
from .target import Target
from .training import (
    Rehearsal,
    TrainedAdapter,
    Training,
    kept_rollouts,
    plan_train_steps,
    train_adapter,
    train_capability,
    worst_rollouts_per_step,
)
from .warm import WarmStart, WarmStartMismatch, WarmStartSettings, finished_warm_start, run_warm_start

__all__ = [
    "STAGES", "TracePlan", "TraceRun", "run_trace", "adapter_name", "training_reserve",
    "StageStore", "StageOutput", "StageRecord", "RunFolder", "RunError",
    "RolloutBudget", "BudgetExceeded", "BudgetedEnv",
    "Target",
    "WarmStartSettings", "WarmStart", "WarmStartMismatch", "run_warm_start", "finished_warm_start",
    "RolloutJob", "Rollouts", "play_rollouts",
    "Analysis", "analyze", "analysis_result",
    "Synthesis", "synthesize_envs", "capability_factory",
    "Calibration", "calibrate_envs",
    "Rehearsal", "TrainedAdapter", "Training", "train_capability", "train_adapter", "kept_rollouts", "plan_train_steps", "worst_rollouts_per_step",
    "Routing", "build_router",
    "Evaluation", "evaluate_policies", "evaluate_policy", "ForfeitOnError", "FORFEIT",
    "graded_scores", "attach_scores", "bootstrap_mean", "scores_table",
]
