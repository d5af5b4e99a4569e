"""The TRACE loop, in order, as resumable stages.

:func:`run_trace` plays the base model on the target (1. rollouts), finds the
capabilities its failures lack (2. analysis), synthesizes one capability env per chosen
capability (3. synthesis), scores the base model on each (4. calibration), trains one
LoRA adapter per env it has not mastered (5. training) and builds the router that sends
each conversation to an adapter or to none (6. routing; with ``router_outcomes`` it also learns from which of
the base model and each adapter scored best on train tasks, :mod:`trace_gym.pipeline.outcomes`).  Evaluation (7.) of the routed
adapters against the base model is :func:`trace_gym.pipeline.evaluation.evaluate_policy`,
which the front-ends call for every policy they compare.

Every stage goes through one :class:`~trace_gym.pipeline.store.StageStore`, so a killed
run continues with its first unfinished stage, and (with a
:class:`~trace_gym.pipeline.budget.RolloutBudget`) every episode played while learning
is charged to the budget.  ``trace-gym demo`` and ``trace-gym compare`` are front-ends
that fill a :class:`TracePlan` and present the results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..policies.base import supports
from .budget import RolloutBudget
from .folder import RunFolder
from .outcomes import OutcomeRouting
from .routing import Routing, build_router
from .settings import AnalysisSettings, CalibrationSettings, RoutingSettings, SynthesisSettings, TrainingSettings
from .stages import (
    Analysis,
    Calibration,
    RolloutJob,
    Rollouts,
    Synthesis,
    analyze,
    calibrate_envs,
    env_kwargs_for,
    play_rollouts,
    synthesize_envs,
)
from .store import StageStore
from .target import Target
from .training import (
    Rehearsal,
    Training,
    base_successes,
    plan_train_steps,
    replayed_demonstrations,
    train_capability,
    worst_rollouts_per_step,
)

__all__ = ["TracePlan", "TraceRun", "run_trace", "training_reserve", "rehearsal_of", "STAGES"]

STAGES = ("rollouts", "analysis", "synthesis", "calibration", "training", "routing")


def adapter_name(capability: str) -> str:
    """A folder-safe adapter name for a capability."""
    return "".join(ch if ch.isalnum() else "-" for ch in capability.lower()).strip("-")


@dataclass
class TracePlan:
    """What one TRACE run does, and where its files go (all under ``root`` unless given)."""

    target: Target
    root: Path
    model: str                                   # what the trainer loads: a model name or folder
    # the model under study as a policy: loaded (called) when first needed, shared by rollouts and calibration, and
    # closed (when it can be) before training, so that its engine's memory is free while the trainer runs
    base_policy: Callable[[], Any]
    jobs: list[RolloutJob]                       # 1. the episodes to play on the target (model and any others)
    seed: int = 0
    batch_size: int = 1                          # episodes played in lock step
    # the settings of stages 2.–6. (pipeline.settings), each validated when made
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    synthesis: SynthesisSettings = field(default_factory=SynthesisSettings)
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    routing: RoutingSettings = field(default_factory=RoutingSettings)
    name_adapter: Callable[[int, str], str] = lambda i, cap: adapter_name(cap)
    # the needs rule's gate learns from these learning tasks of the target (default: the tasks of ``jobs``) and from
    # ``need_examples`` train tasks of each adapter's env (pipeline.gate)
    learning_tasks: list[str] | None = None
    # a trained adapter by name as a policy acting with it alone (routing from outcomes, adapter_choice "select")
    adapter_policy: Callable[[str], Any] | None = None
    budget: RolloutBudget | None = None
    # where files go
    rollouts_path: Path | None = None
    analysis_dir: Path | None = None
    specs_dir: Path | None = None
    adapters_dir: Path | None = None
    index_path: Path | None = None

    def __post_init__(self) -> None:
        for name, kind in (("analysis", AnalysisSettings), ("synthesis", SynthesisSettings),
                           ("calibration", CalibrationSettings), ("training", TrainingSettings),
                           ("routing", RoutingSettings)):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"TracePlan.{name} must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")
        self.root = Path(self.root)
        folder = RunFolder(self.root)  # the layout of a run folder, shared with the command line's stage verbs
        self.rollouts_path = Path(self.rollouts_path or folder.rollouts)
        self.analysis_dir = Path(self.analysis_dir or folder.analysis)
        self.specs_dir = Path(self.specs_dir or folder.specs)
        self.adapters_dir = Path(self.adapters_dir or folder.adapters)
        self.index_path = Path(self.index_path or self.adapters_dir / folder.index.name)


@dataclass
class TraceRun:
    """The results of the stages that ran; ``note`` says why the loop stopped early, if it did."""

    rollouts: Rollouts | None = None
    analysis: Analysis | None = None
    synthesis: Synthesis | None = None
    calibration: Calibration | None = None
    training: Training | None = None
    routing: Routing | None = None
    note: str | None = None
    skipped: str | None = None

    @property
    def adapters(self) -> list[Any]:
        return list(self.training.adapters) if self.training is not None else []


def run_trace(plan: TracePlan, store: StageStore, *, prefix: str = "",
              on_stage: Callable[[str, Any], None] | None = None,
              on_episode: Callable[[str], None] | None = None) -> TraceRun:
    """Run (or resume) the TRACE stages of ``plan`` in order; ``on_stage(name, result)`` follows each one.

    Stages are stored as ``<prefix><name>``.  ``on_episode(stage)`` ticks after every
    episode played (progress bars).
    """
    run = TraceRun()
    budget = plan.budget
    loaded: list[Any] = []

    def policy() -> Any:
        if not loaded:
            loaded.append(plan.base_policy())
        return loaded[0]

    def release() -> None:
        while loaded:
            done = loaded.pop()
            if supports(done, "close"):
                done.close()

    def stage(name: str, fn: Callable[[], Any], result_type: type) -> Any:
        result = store.run(prefix + name, fn, result_type)
        if on_stage is not None:
            on_stage(name, result)
        return result

    def tick(name: str) -> Callable[[], None] | None:
        return (lambda: on_episode(name)) if on_episode else None

    if plan.target.domain is None:
        run.skipped = (f"{plan.target.env_id} offers no tool domain to synthesize capability environments for: "
                       "TRACE falls back to the base model")
        return run
    jobs = [dataclasses.replace(j, policy=policy) if j.policy is None else j for j in plan.jobs]
    # 1. rollouts: the base model (and any other agents) on the target's tasks
    run.rollouts = stage("rollouts", lambda: play_rollouts(plan.target, jobs, plan.rollouts_path, budget=budget,
                                                           batch_size=plan.batch_size, on_episode=tick("rollouts")), Rollouts)
    # 2. analysis: the capabilities failed trajectories lack and passed ones show
    run.analysis = stage("analysis", lambda: analyze(run.rollouts, plan.analysis_dir, seed=plan.seed,
                                                     threshold=plan.target.threshold, min_capabilities=plan.analysis.min_capabilities,
                                                     max_capabilities=plan.analysis.max_capabilities), Analysis)
    # 3. synthesis: one capability env per chosen capability, same tools and policy as the target
    run.synthesis = stage("synthesis", lambda: synthesize_envs(run.analysis, plan.target.domain, plan.specs_dir,
                                                               seed=plan.seed, max_envs=plan.synthesis.max_envs), Synthesis)
    if not run.synthesis.envs:
        run.note = "no capability env could be synthesized for this target: TRACE falls back to the base model"
        return run
    # 4. calibration: how the base model does on each env (a mastered capability needs no adapter)
    cal = plan.calibration
    n_cal = len(run.synthesis.envs) * cal.calib_seeds * cal.calib_samples
    if budget is not None and not store.done(prefix + "calibration") and n_cal > budget.remaining:
        run.note = f"calibration needs {n_cal} rollouts, {budget.remaining} left: TRACE falls back to the base model"
        return run
    run.calibration = stage("calibration", lambda: calibrate_envs(
        run.synthesis, policy, seed=plan.seed, seeds=cal.calib_seeds, samples=cal.calib_samples, env_kwargs=cal.cap_env_kwargs,
        budget=budget, batch_size=plan.batch_size, reference_seeds=cal.reference_seeds, mastered=cal.mastered,
        band=cal.band, tune_rounds=cal.tune_rounds, tune_reserve=training_reserve(plan, len(run.synthesis.envs)),
        tune_episodes=cal.tune_episodes, set_knobs=cal.cap_knobs,
        on_episode=on_episode and (lambda _env: on_episode("calibration"))), Calibration)
    release()  # no later stage plays the base model: its memory goes back before the trainer loads one
    # 5. training: one GRPO+LoRA adapter per env still to learn
    run.training = stage("training", lambda: _train_all(plan, run.calibration, rehearsal_of(plan, run.rollouts)), Training)
    if not run.training.adapters:
        run.note = "no adapter was trained (budget or all capabilities mastered): TRACE falls back to the base model"
        return run
    # 6. routing: the index that sends each conversation to an adapter or to none
    specs = {e["capability"]: e["spec"] for e in run.calibration.envs}
    tuned = {e["capability"]: env_kwargs_for(e, cal.cap_env_kwargs) for e in run.calibration.envs}
    routing = plan.routing
    joint = run.training.joint.adapter if run.training.joint is not None else None
    run.routing = stage("routing", lambda: build_router(
        run.training.adapters, specs, run.rollouts, run.analysis, plan.index_path, target=plan.target, seed=plan.seed,
        seeds=routing.routing_seeds, env_kwargs=cal.cap_env_kwargs, embedder=routing.embedder, budget=budget,
        env_kwargs_by_capability=tuned, rule=routing.router_rule, outcomes=outcome_routing(plan),
        learning_tasks=plan.learning_tasks or list(dict.fromkeys(j.task for j in plan.jobs)), joint=joint,
        adapter_choice=routing.adapter_choice, need_examples=routing.need_examples, selection=adapter_selection(plan)),
        Routing)
    return run


def adapter_selection(plan: TracePlan) -> Any:
    """What the routing stage plays to choose between per-capability adapters and the joint one (``None`` unless
    ``adapter_choice`` is "select"); ``ValueError`` when the plan cannot load an adapter as a policy."""
    if plan.routing.adapter_choice != "select":
        return None
    if plan.adapter_policy is None:
        raise ValueError("adapter_choice 'select' plays the trained adapters on learning tasks: the plan needs "
                         "adapter_policy (a trained adapter by name as a policy)")
    from .selection import AdapterSelection

    return AdapterSelection(plan.routing.select_tasks, plan.adapter_policy, plan.adapters_dir / "selection.jsonl", plan.batch_size)


def outcome_routing(plan: TracePlan) -> OutcomeRouting | None:
    """What the routing stage plays to learn from outcomes (``None`` with ``router_outcomes`` 0); ``ValueError``
    when the plan cannot load an adapter as a policy."""
    if plan.routing.router_outcomes <= 0:
        return None
    if plan.adapter_policy is None:
        raise ValueError("router_outcomes plays the trained adapters on train tasks: the plan needs adapter_policy "
                         "(a trained adapter by name as a policy)")
    return OutcomeRouting(plan.routing.router_outcomes, list(plan.jobs), plan.adapter_policy,
                          plan.adapters_dir / "routing_outcomes.jsonl", plan.batch_size)


def training_reserve(plan: TracePlan, n_envs: int) -> int:
    """Rollouts the calibration's knob search must leave for training and routing ``n_envs`` envs: each env's
    warm-start demonstrations, its fixed optimizer steps (or one, when the budget sets them) in the worst case,
    and its routing episodes.  0 without a budget."""
    if plan.budget is None:
        return 0
    training = plan.training
    steps = training.train_steps if training.train_steps is not None else 1
    return n_envs * (training.cap_warm_demos + steps * worst_rollouts_per_step(training.train) + routing_share(plan))


def routing_share(plan: TracePlan) -> int:
    """Rollouts the routing stage plays per adapter: its reference episodes and its outcome episodes."""
    return plan.routing.routing_seeds + max(0, plan.routing.router_outcomes)


def rehearsal_of(plan: TracePlan, rollouts: Rollouts) -> Rehearsal | None:
    """What each adapter's SFT rehearses: the plan's ``rehearsal``, with ``cap_rehearse_base`` also the successful
    episodes (by the target's success threshold) of the jobs that play the model under study (those without a
    policy of their own) among ``rollouts``."""
    if not plan.training.cap_rehearse_base:
        return plan.training.rehearsal
    own = {j.policy_id for j in plan.jobs if j.policy is None}
    episodes = tuple(base_successes(rollouts, plan.target.threshold, own))
    return dataclasses.replace(plan.training.rehearsal or Rehearsal(), episodes=episodes)


def _train_all(plan: TracePlan, calibration: Calibration, rehearsal: Rehearsal | None) -> Training:
    """An adapter per env to learn; with a budget each gets an equal share of what is left after routing's reserve."""
    budget, training = plan.budget, plan.training
    todo = [e for e in calibration.envs if e["train"]]
    share = None
    if budget is not None:
        kept = sum(budget.stage_used(f"train:{e['capability']}") for e in todo)  # a resumed stage's earlier adapters
        share = (budget.remaining + kept - len(todo) * routing_share(plan)) // max(1, len(todo))
    peers = _peer_demonstrations(plan, todo, share) if training.cap_rehearse_peers else {}
    out = Training()
    for i, e in enumerate(todo):
        demos = training.cap_warm_demos
        if training.train_steps is not None:
            steps = training.train_steps
        else:
            left = budget.remaining + budget.stage_used(f"train:{e['capability']}") if budget is not None else 0
            avail = min(share or 0, left)
            demos = demos if avail >= demos else 0  # the warm start's demonstrations come out of the same share
            steps = plan_train_steps(avail - demos, training.train, training.max_train_steps)
        train, mine = training.train, rehearsal
        others = [d for cap, ds in peers.items() if cap != e["capability"] for d in ds]
        if demos and others:
            mine = dataclasses.replace(rehearsal or Rehearsal(), peers=tuple(others))
            if training.train.get("sft_max_steps"):  # as many passes over the larger set as over its own
                train = {**training.train, "sft_max_steps": int(training.train["sft_max_steps"]) * len(peers)}
        a = train_capability(e, plan.name_adapter(i, e["capability"]), plan.adapters_dir, model=plan.model, seed=plan.seed,
                             train=train, steps=steps, env_kwargs=env_kwargs_for(e, plan.calibration.cap_env_kwargs), budget=budget,
                             warm_demos=demos, rehearsal=mine if demos else None)
        (out.skipped if a.skipped else out.adapters).append(a)
    if plan.routing.adapter_choice != "per-capability" and len(out.adapters) > 1:
        from .joint import train_joint

        out.joint = train_joint(out.adapters, {e["capability"]: e for e in calibration.envs}, plan.adapters_dir,
                                model=plan.model, seed=plan.seed, train=training.train,
                                cap_env_kwargs=plan.calibration.cap_env_kwargs, rehearsal=rehearsal)
    return out


def _peer_demonstrations(plan: TracePlan, todo: list[dict[str, Any]], share: int | None) -> dict[str, list[Any]]:
    """Per capability to learn, the demonstrations its own adapter's SFT is built from (the reference episodes of
    its env, as :func:`~trace_gym.pipeline.training.adapter_demonstrations` draws them), for the other adapters to
    rehearse; replayed from the envs' reference solutions without a budget, since each adapter's own stage charges
    them.  Only the envs whose adapter gets demonstrations (its share covers them) take part."""
    training = plan.training
    demos = training.cap_warm_demos
    if not demos or (share is not None and training.train_steps is None and share < demos):
        return {}
    return {e["capability"]: list(replayed_demonstrations(e, demos, model=plan.model, seed=plan.seed, train=training.train,
                                                          cap_env_kwargs=plan.calibration.cap_env_kwargs).demos)
            for e in todo}
