"""The TRACE loop, in order, as resumable stages.

:func:`run_trace` plays the base model on the target (1. rollouts), finds the
capabilities its failures lack (2. analysis), synthesizes one capability env per chosen
capability (3. synthesis), scores the base model on each (4. calibration), trains one
LoRA adapter per env it has not mastered (5. training) and builds the router that sends
each conversation to an adapter or to none (6. routing; with ``router_outcomes`` it also learns from which of
the base model and each adapter scored best on train tasks, :mod:`trace_gym.pipeline.outcomes`).  Evaluation (7.) of the routed
adapters against the base model is :func:`trace_gym.pipeline.learn.evaluate_policy`,
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

from .budget import RolloutBudget
from .folder import RunFolder
from .learn import (
    Rehearsal,
    Training,
    base_successes,
    plan_train_steps,
    replayed_demonstrations,
    train_capability,
    worst_rollouts_per_step,
)
from .outcomes import OutcomeRouting
from .routing import Routing, build_router
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
    base_policy: Callable[[], Any]               # the model under study as a policy, loaded when first needed
    jobs: list[RolloutJob]                       # 1. the episodes to play on the target (model and any others)
    seed: int = 0
    batch_size: int = 1                          # episodes played in lock step
    # 2. analysis
    min_capabilities: int = 0
    max_capabilities: int | None = None
    # 3. synthesis
    max_envs: int | None = None
    # 4. calibration
    cap_env_kwargs: dict[str, Any] = field(default_factory=dict)
    cap_knobs: dict[str, float] = field(default_factory=dict)  # knob settings for every env that declares the knob
    calib_seeds: int = 2
    calib_samples: int = 2
    reference_seeds: int = 0                     # episodes of the spec's reference solution per env (solvability check)
    mastered: float | None = None                # calibration mean reward at which a capability needs no adapter
    band: tuple[float, float] | None = None      # base mean reward to tune each env's knobs toward (paper: 20–60%)
    tune_rounds: int = 0                         # rounds of the knob search (0: measure only)
    tune_episodes: int | None = None             # at most this many episodes of knob search per env (None: no cap)
    # 5. training
    train: dict[str, Any] = field(default_factory=dict)
    train_steps: int | None = None               # fixed optimizer steps per adapter (None: as many as the budget allows)
    warm_demos: int = 0                          # reference episodes of its own env each adapter is first SFT'd on
    rehearsal: Rehearsal | None = None           # the shared warm start's episodes each adapter's SFT also keeps
    rehearse_base: bool = False                  # ... and the model's own successful episodes of 1. (not charged again)
    # ... and the other adapters' demonstrations (charged in their own stages), for sft_max_steps × the envs it learns from
    rehearse_peers: bool = False
    max_train_steps: int | None = None
    name_adapter: Callable[[int, str], str] = lambda i, cap: adapter_name(cap)
    # ... and, unless "per-capability", one joint adapter on what they all learned from (pipeline.joint); with the
    # needs rule, "joint" routes every conversation the gate passes to it and "select" lets the learning tasks choose
    # (pipeline.selection: ``select_tasks`` of them played by each candidate, charged to routing)
    adapter_choice: str = "per-capability"
    select_tasks: int = 16
    # 6. routing
    routing_seeds: int = 2
    router_rule: str = "vote"                    # RetrievalRouter's rule, stored with the index
    # the needs rule's gate learns from these learning tasks of the target (default: the tasks of ``jobs``) and from
    # ``need_examples`` train tasks of each adapter's env (pipeline.gate)
    learning_tasks: list[str] | None = None
    need_examples: int = 24
    # routing from outcomes: each adapter also plays the first N train tasks of 1. (charged), and the router learns
    # from which of the base model and the adapters scored best on each (pipeline.outcomes); needs adapter_policy
    router_outcomes: int = 0
    adapter_policy: Callable[[str], Any] | None = None  # a trained adapter by name as a policy acting with it alone
    embedder: str | None = None
    budget: RolloutBudget | None = None
    # where files go
    rollouts_path: Path | None = None
    analysis_dir: Path | None = None
    specs_dir: Path | None = None
    adapters_dir: Path | None = None
    index_path: Path | None = None

    def __post_init__(self) -> None:
        from .selection import ADAPTER_CHOICES

        if self.adapter_choice not in ADAPTER_CHOICES:
            raise ValueError(f"adapter_choice must be one of {list(ADAPTER_CHOICES)}, got {self.adapter_choice!r}")
        if self.adapter_choice == "select" and self.router_rule != "needs":
            raise ValueError("adapter_choice 'select' plays both candidates where the needs rule's gate passes: set "
                             "router_rule 'needs'")
        if self.select_tasks < 1 or self.need_examples < 1:
            raise ValueError(f"select_tasks and need_examples must be >= 1, got {self.select_tasks}, {self.need_examples}")
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
                                                     threshold=plan.target.threshold, min_capabilities=plan.min_capabilities,
                                                     max_capabilities=plan.max_capabilities), Analysis)
    # 3. synthesis: one capability env per chosen capability, same tools and policy as the target
    run.synthesis = stage("synthesis", lambda: synthesize_envs(run.analysis, plan.target.domain, plan.specs_dir,
                                                               seed=plan.seed, max_envs=plan.max_envs), Synthesis)
    if not run.synthesis.envs:
        run.note = "no capability env could be synthesized for this target: TRACE falls back to the base model"
        return run
    # 4. calibration: how the base model does on each env (a mastered capability needs no adapter)
    n_cal = len(run.synthesis.envs) * plan.calib_seeds * plan.calib_samples
    if budget is not None and not store.done(prefix + "calibration") and n_cal > budget.remaining:
        run.note = f"calibration needs {n_cal} rollouts, {budget.remaining} left: TRACE falls back to the base model"
        return run
    run.calibration = stage("calibration", lambda: calibrate_envs(
        run.synthesis, policy, seed=plan.seed, seeds=plan.calib_seeds, samples=plan.calib_samples, env_kwargs=plan.cap_env_kwargs,
        budget=budget, batch_size=plan.batch_size, reference_seeds=plan.reference_seeds, mastered=plan.mastered,
        band=plan.band, tune_rounds=plan.tune_rounds, tune_reserve=training_reserve(plan, len(run.synthesis.envs)),
        tune_episodes=plan.tune_episodes, set_knobs=plan.cap_knobs,
        on_episode=on_episode and (lambda _env: on_episode("calibration"))), Calibration)
    # 5. training: one GRPO+LoRA adapter per env still to learn
    run.training = stage("training", lambda: _train_all(plan, run.calibration, rehearsal_of(plan, run.rollouts)), Training)
    if not run.training.adapters:
        run.note = "no adapter was trained (budget or all capabilities mastered): TRACE falls back to the base model"
        return run
    # 6. routing: the index that sends each conversation to an adapter or to none
    specs = {e["capability"]: e["spec"] for e in run.calibration.envs}
    tuned = {e["capability"]: env_kwargs_for(e, plan.cap_env_kwargs) for e in run.calibration.envs}
    joint = run.training.joint.adapter if run.training.joint is not None else None
    run.routing = stage("routing", lambda: build_router(
        run.training.adapters, specs, run.rollouts, run.analysis, plan.index_path, target=plan.target, seed=plan.seed,
        seeds=plan.routing_seeds, env_kwargs=plan.cap_env_kwargs, embedder=plan.embedder, budget=budget,
        env_kwargs_by_capability=tuned, rule=plan.router_rule, outcomes=outcome_routing(plan),
        learning_tasks=plan.learning_tasks or list(dict.fromkeys(j.task for j in plan.jobs)), joint=joint,
        adapter_choice=plan.adapter_choice, need_examples=plan.need_examples, selection=adapter_selection(plan)), Routing)
    return run


def adapter_selection(plan: TracePlan) -> Any:
    """What the routing stage plays to choose between per-capability adapters and the joint one (``None`` unless
    ``adapter_choice`` is "select"); ``ValueError`` when the plan cannot load an adapter as a policy."""
    if plan.adapter_choice != "select":
        return None
    if plan.adapter_policy is None:
        raise ValueError("adapter_choice 'select' plays the trained adapters on learning tasks: the plan needs "
                         "adapter_policy (a trained adapter by name as a policy)")
    from .selection import AdapterSelection

    return AdapterSelection(plan.select_tasks, plan.adapter_policy, plan.adapters_dir / "selection.jsonl", plan.batch_size)


def outcome_routing(plan: TracePlan) -> OutcomeRouting | None:
    """What the routing stage plays to learn from outcomes (``None`` with ``router_outcomes`` 0); ``ValueError``
    when the plan cannot load an adapter as a policy."""
    if plan.router_outcomes <= 0:
        return None
    if plan.adapter_policy is None:
        raise ValueError("router_outcomes plays the trained adapters on train tasks: the plan needs adapter_policy "
                         "(a trained adapter by name as a policy)")
    return OutcomeRouting(plan.router_outcomes, list(plan.jobs), plan.adapter_policy,
                          plan.adapters_dir / "routing_outcomes.jsonl", plan.batch_size)


def training_reserve(plan: TracePlan, n_envs: int) -> int:
    """Rollouts the calibration's knob search must leave for training and routing ``n_envs`` envs: each env's
    warm-start demonstrations, its fixed optimizer steps (or one, when the budget sets them) in the worst case,
    and its routing episodes.  0 without a budget."""
    if plan.budget is None:
        return 0
    steps = plan.train_steps if plan.train_steps is not None else 1
    return n_envs * (plan.warm_demos + steps * worst_rollouts_per_step(plan.train) + routing_share(plan))


def routing_share(plan: TracePlan) -> int:
    """Rollouts the routing stage plays per adapter: its reference episodes and its outcome episodes."""
    return plan.routing_seeds + max(0, plan.router_outcomes)


def rehearsal_of(plan: TracePlan, rollouts: Rollouts) -> Rehearsal | None:
    """What each adapter's SFT rehearses: the plan's ``rehearsal``, with ``rehearse_base`` also the successful
    episodes (by the target's success threshold) of the jobs that play the model under study (those without a
    policy of their own) among ``rollouts``."""
    if not plan.rehearse_base:
        return plan.rehearsal
    own = {j.policy_id for j in plan.jobs if j.policy is None}
    episodes = tuple(base_successes(rollouts, plan.target.threshold, own))
    return dataclasses.replace(plan.rehearsal or Rehearsal(), episodes=episodes)


def _train_all(plan: TracePlan, calibration: Calibration, rehearsal: Rehearsal | None) -> Training:
    """An adapter per env to learn; with a budget each gets an equal share of what is left after routing's reserve."""
    budget = plan.budget
    todo = [e for e in calibration.envs if e["train"]]
    share = None
    if budget is not None:
        kept = sum(budget.stage_used(f"train:{e['capability']}") for e in todo)  # a resumed stage's earlier adapters
        share = (budget.remaining + kept - len(todo) * routing_share(plan)) // max(1, len(todo))
    peers = _peer_demonstrations(plan, todo, share) if plan.rehearse_peers else {}
    out = Training()
    for i, e in enumerate(todo):
        demos = plan.warm_demos
        if plan.train_steps is not None:
            steps = plan.train_steps
        else:
            left = budget.remaining + budget.stage_used(f"train:{e['capability']}") if budget is not None else 0
            avail = min(share or 0, left)
            demos = demos if avail >= demos else 0  # the warm start's demonstrations come out of the same share
            steps = plan_train_steps(avail - demos, plan.train, plan.max_train_steps)
        train, mine = plan.train, rehearsal
        others = [d for cap, ds in peers.items() if cap != e["capability"] for d in ds]
        if demos and others:
            mine = dataclasses.replace(rehearsal or Rehearsal(), peers=tuple(others))
            if plan.train.get("sft_max_steps"):  # as many passes over the larger set as over its own
                train = {**plan.train, "sft_max_steps": int(plan.train["sft_max_steps"]) * len(peers)}
        a = train_capability(e, plan.name_adapter(i, e["capability"]), plan.adapters_dir, model=plan.model, seed=plan.seed,
                             train=train, steps=steps, env_kwargs=env_kwargs_for(e, plan.cap_env_kwargs), budget=budget,
                             warm_demos=demos, rehearsal=mine if demos else None)
        (out.skipped if a.skipped else out.adapters).append(a)
    if plan.adapter_choice != "per-capability" and len(out.adapters) > 1:
        from .joint import train_joint

        out.joint = train_joint(out.adapters, {e["capability"]: e for e in calibration.envs}, plan.adapters_dir,
                                model=plan.model, seed=plan.seed, train=plan.train, cap_env_kwargs=plan.cap_env_kwargs,
                                rehearsal=rehearsal)
    return out


def _peer_demonstrations(plan: TracePlan, todo: list[dict[str, Any]], share: int | None) -> dict[str, list[Any]]:
    """Per capability to learn, the demonstrations its own adapter's SFT is built from (the reference episodes of
    its env, as :func:`~trace_gym.pipeline.learn.adapter_demonstrations` draws them), for the other adapters to
    rehearse; replayed from the envs' reference solutions without a budget, since each adapter's own stage charges
    them.  Only the envs whose adapter gets demonstrations (its share covers them) take part."""
    if not plan.warm_demos or (share is not None and plan.train_steps is None and share < plan.warm_demos):
        return {}
    return {e["capability"]: list(replayed_demonstrations(e, plan.warm_demos, model=plan.model, seed=plan.seed,
                                                          train=plan.train, cap_env_kwargs=plan.cap_env_kwargs).demos)
            for e in todo}
