"""TRACE's training stage (routing follows in :mod:`trace_gym.pipeline.routing`, evaluation in
:mod:`trace_gym.pipeline.evaluation`).

* :func:`train_capability` — SFT and GRPO+LoRA on one capability env (one adapter), within a
  number of optimizer steps that the caller fixes or :func:`plan_train_steps` derives
  from a rollout budget; :class:`Rehearsal` and :func:`base_successes` say what it rehearses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from .budget import RolloutBudget
from .stages import Rollouts, capability_factory
from .store import StageOutput

__all__ = [
    "Rehearsal", "base_successes", "TrainedAdapter", "Training", "train_capability", "train_adapter", "adapter_train_config",
    "adapter_demonstrations", "replayed_demonstrations", "plan_train_steps", "worst_rollouts_per_step", "kept_rollouts", "STAGE_SAVE_STEPS",
]


# ----------------------------------------------------------------------------- 5. training
STAGE_SAVE_STEPS = 4  # a training stage checkpoints every this many optimizer steps (times num_iterations), so it resumes


def kept_rollouts(out: str | Path) -> int:
    """Rollouts an interrupted training of the adapter at ``out`` keeps when it resumes: those its newest GRPO
    checkpoint had played (0 without one).  A warm start's demonstrations are played, and charged, again."""
    from ..train.trainer import checkpoint_rollout_state, latest_checkpoint

    state = checkpoint_rollout_state(latest_checkpoint(Path(out) / "checkpoints"))
    return int(state.get("stats", {}).get("rollouts", 0)) if state is not None else 0


def worst_rollouts_per_step(train: dict[str, Any]) -> int:
    """The most episodes one optimizer step can play (every group resampled the maximum number of times)."""
    from ..train.config import TrainConfig

    cfg = TrainConfig(**{k: v for k, v in train.items() if k in TrainConfig.field_names()})
    resamples = cfg.max_resamples if cfg.resample_constant_groups else 0
    return cfg.seeds_per_step * cfg.num_generations * (1 + resamples) * cfg.gradient_accumulation_steps


def plan_train_steps(rollouts: int, train: dict[str, Any], max_steps: int | None = None) -> int:
    """Optimizer steps that fit in ``rollouts`` even in the worst case (capped by ``max_steps``)."""
    steps = rollouts // worst_rollouts_per_step(train)
    return min(steps, max_steps) if max_steps is not None else steps


@dataclass(frozen=True)
class Rehearsal:
    """Demonstrations an adapter's supervised warm start rehearses besides its own env's, from three sources
    that compose (any may be empty):

    * the reference episodes of ``envs`` (``per_env`` train-split tasks each, drawn with ``seed``), i.e. what
      the shared format warm start was trained on, so that an adapter keeps what that start taught (e.g.
      saying that a request cannot be done when the tool it needs is not offered);
    * ``episodes``: demonstrations already made, such as the base model's own successful episodes on the
      target's train tasks (:func:`base_successes`), so that it keeps what the base model does well;
    * ``peers``: the demonstrations the other adapters of the same run learn their capabilities from (see
      ``TracePlan.rehearse_peers``), so that an adapter sent a conversation of another capability still
      handles it.

    All were played before or are charged elsewhere (by the shared warm start, by TRACE's base rollouts, by
    the stage of the adapter whose env they come from), so they are not charged to a method's rollout budget
    again.
    """

    envs: tuple[str, ...] = ()
    per_env: int = 0
    seed: int = 0
    episodes: tuple[Any, ...] = ()
    peers: tuple[Any, ...] = ()

    def demonstrations(self) -> list[Any]:
        from ..train.demos import build_demonstrations

        warm = build_demonstrations(list(self.envs), self.per_env, seed=self.seed).demos if self.envs and self.per_env else []
        return [*warm, *self.episodes, *self.peers]


def base_successes(rollouts: Rollouts, threshold: float, policy_ids: set[str] | None = None) -> list[Any]:
    """The successful episodes (reward at or above ``threshold``: the target's success, as the analysis counts
    it) of the rollouts' store as demonstrations (:func:`~trace_gym.train.demos.episode_demonstration`);
    ``policy_ids`` keeps only those policies' episodes (e.g. the base model's).  Only episodes that stop are
    rehearsed: one cut off at the step limit, or one that repeats a tool call it already made
    (:func:`~trace_gym.train.demos.repeated_call`), is left out, as is one that cannot be turned into one."""
    from ..train.demos import episode_demonstration, repeated_call

    out = []
    for t in rollouts.trajectories():
        if (policy_ids is not None and t.policy_id not in policy_ids) or not is_success(t.reward, threshold):
            continue
        if t.truncated or repeated_call(t.messages):
            continue
        demo, _ = episode_demonstration(t)
        if demo is not None:
            out.append(demo)
    return out


def train_adapter(*, model: str, seed: int, env_factory: Callable[[], Any], env_id: str, out: Path,
                  steps: int, train: dict[str, Any], run_name: str, warm_demos: int = 0,
                  rehearsal: Rehearsal | None = None) -> dict[str, Any]:
    """GRPO+LoRA for ``steps`` optimizer steps; returns the manifest entry plus timing (``seconds``).

    With ``warm_demos`` > 0 the adapter first gets a supervised warm start on that many reference
    episodes of the env's train split, played through ``env_factory`` (so a budgeted env charges
    one rollout per demonstration), with the ``sft_*`` settings of ``train``; with ``steps`` 0 the
    warm start alone is the adapter.  The entry then records ``demonstrations``.  ``rehearsal`` adds
    its demonstrations (see :class:`Rehearsal`) to that warm start; the entry records ``rehearsed``.

    Both trainings checkpoint every :data:`STAGE_SAVE_STEPS` steps (unless ``train`` sets ``save_steps``) and
    continue from the newest checkpoint under ``out`` when called again after an interruption (the settings
    must be the same); the caller's ledger keeps :func:`kept_rollouts` of the earlier attempt.
    """
    import time

    from ..train import train as run_train
    from ..train.trainer import latest_checkpoint

    cfg = adapter_train_config(model=model, seed=seed, env_id=env_id, out=out, steps=steps, train=train, run_name=run_name)
    if warm_demos <= 0:
        if steps < 1:
            raise ValueError("train_adapter needs steps >= 1 or warm demonstrations")
        res = run_train(cfg, env_factory=env_factory, resume=latest_checkpoint(out / "checkpoints") is not None)
        entry, seconds = dict(res.manifest_entry), res.seconds
    else:
        from ..progress import track
        from ..train.outputs import MANIFEST_NAME, read_manifest, update_manifest
        from ..train.sft import progress_callback, train_with_warm_start, warm_start

        started = time.perf_counter()
        report = adapter_demonstrations(cfg, env_factory, warm_demos)
        if not report.demos:
            raise ValueError(f"no reference episode of {env_id} to warm-start on (skipped: {report.skipped})")
        rehearsed = rehearsal.demonstrations() if rehearsal is not None else []
        demos = list(report.demos) + rehearsed
        bar = track(f"SFT {run_name} on {len(report.demos)} reference episodes"
                    + (f" and {len(rehearsed)} rehearsed" if rehearsed else ""), total=cfg.sft_max_steps or None, unit="steps")
        bar.update(0, note="loading the model, loss before")
        try:
            if steps >= 1:
                res = train_with_warm_start(cfg, demos=demos, env_factory=env_factory, resume=True,
                                            sft_callbacks=[progress_callback(bar)])
                entry = dict(res.manifest_entry)
            else:  # the warm start is the adapter (its manifest entry has kind "sft")
                warm_start(cfg, out=out, demos=demos, manifest=True, callbacks=[progress_callback(bar)],
                           resume=latest_checkpoint(out / "checkpoints") is not None)
                entry = next(a for a in read_manifest(out.parent / MANIFEST_NAME)["adapters"] if a.get("path") == str(out))
        except BaseException:
            bar.close(aborted=True)
            raise
        bar.close()
        entry["demonstrations"] = report.played.get(env_id, len(report.demos))  # charged again on resume
        entry["rehearsed"] = len(rehearsed)
        entry["rehearsed_base"] = len(rehearsal.episodes) if rehearsal is not None else 0  # of them, the base model's
        entry["rehearsed_peers"] = len(rehearsal.peers) if rehearsal is not None else 0  # ... and the other adapters'
        update_manifest(out.parent / MANIFEST_NAME, entry)
        seconds = time.perf_counter() - started
    entry["seconds"] = seconds
    return json.loads(json.dumps(entry, default=str))


def adapter_train_config(*, model: str, seed: int, env_id: str, out: Path, steps: int, train: dict[str, Any],
                         run_name: str) -> Any:
    """The :class:`~trace_gym.train.TrainConfig` of one adapter: ``train``'s trainer settings, the model, seed,
    output folder and ``steps`` optimizer steps (at least one)."""
    from ..progress import active
    from ..train import TrainConfig

    fields = {k: v for k, v in train.items() if k in TrainConfig.field_names()}
    fields.update(env_id=env_id, model=model[3:] if model.startswith("hf:") else model, out=str(out), max_steps=max(steps, 1),
                  seed=seed, run_name=run_name)
    fields.setdefault("save_steps", STAGE_SAVE_STEPS * int(fields.get("num_iterations", 1)))
    fields.setdefault("progress", active() is not None)  # a progress line when the caller shows progress
    fields.setdefault("num_train_seeds", max(64, steps * fields.get("seeds_per_step", 1)))
    return TrainConfig(**fields)


def adapter_demonstrations(cfg: Any, env_factory: Callable[[], Any], n: int) -> Any:
    """The reference episodes an adapter's SFT learns from: ``n`` train-split tasks of ``cfg.env_id`` played through
    ``env_factory`` (a budgeted factory charges one rollout each), from ``sft_seed_start``, every
    ``sft_recover_every``-th a recovered one (:func:`~trace_gym.train.demos.build_demonstrations`'s report)."""
    from ..train.demos import build_demonstrations

    return build_demonstrations([cfg.env_id], n, start=cfg.sft_seed_start, seed=cfg.seed,
                                factories={cfg.env_id: env_factory}, recover_every=cfg.sft_recover_every)


def replayed_demonstrations(env: dict[str, Any], n: int, *, model: str, seed: int, train: dict[str, Any],
                            cap_env_kwargs: dict[str, Any]) -> Any:
    """The demonstrations an adapter's own SFT drew from calibrated env ``env`` (:func:`adapter_demonstrations`
    with the same settings), replayed from its reference solutions without a budget: for reuse by whatever
    also trains on them (the joint adapter, the other adapters' rehearsal), since the adapter's stage charged them."""
    from .stages import env_kwargs_for

    cfg = adapter_train_config(model=model, seed=seed, env_id=env["env_id"], out=Path("replayed"), steps=0, train=train,
                               run_name="replayed")
    return adapter_demonstrations(cfg, capability_factory(env["spec"], env_kwargs_for(env, cap_env_kwargs), None, "replayed"), n)


@dataclass
class TrainedAdapter(StageOutput):
    adapter: str                   # the adapter's name (its folder under the adapters dir)
    capability: str
    env_id: str
    path: str = ""
    steps: int = 0
    rollouts: int = 0              # charged to the budget (the trainer's own count without one)
    trainer_rollouts: int | None = None
    final_reward: float = 0.0      # mean reward of the last three steps
    reward_curve: list[Any] = field(default_factory=list)
    train_wall_s: float | None = None
    skipped: str | None = None
    demonstrations: int = 0        # reference episodes of its warm start (charged in ``rollouts``)
    rehearsed: int = 0             # episodes it also rehearsed (not charged): the warm start's, the base model's, the peers'
    rehearsed_base: int = 0        # of them, the base model's own successful train episodes
    rehearsed_peers: int = 0       # ... and the other adapters' demonstrations


@dataclass
class Training(StageOutput):
    adapters: list[TrainedAdapter] = field(default_factory=list)  # trained ones
    skipped: list[TrainedAdapter] = field(default_factory=list)   # below one optimizer step
    joint: TrainedAdapter | None = None  # one adapter on what they all learned from (pipeline.joint), when asked

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Training:
        return cls([TrainedAdapter.from_dict(a) for a in data.get("adapters", [])],
                   [TrainedAdapter.from_dict(a) for a in data.get("skipped", [])],
                   TrainedAdapter.from_dict(data["joint"]) if data.get("joint") else None)

    def artifacts(self) -> list[str]:
        return [a.path for a in self.adapters] + ([self.joint.path] if self.joint is not None else [])


def train_capability(env: dict[str, Any], name: str, adapters_dir: str | Path, *, model: str, seed: int,
                     train: dict[str, Any], steps: int, env_kwargs: dict[str, Any],
                     budget: RolloutBudget | None = None, warm_demos: int = 0,
                     rehearsal: Rehearsal | None = None) -> TrainedAdapter:
    """One adapter on one calibrated capability env; an adapter already in the manifest is kept.

    ``warm_demos`` > 0: a supervised warm start on that many of the env's own reference episodes
    first (charged to the budget, one rollout each; see :func:`train_adapter`), with ``rehearsal``'s
    demonstrations besides them."""
    from ..train.outputs import read_manifest

    stage = f"train:{env['capability']}"
    out = Path(adapters_dir) / name
    entry = next((a for a in read_manifest(Path(adapters_dir) / "manifest.json")["adapters"] if a.get("path") == str(out)), None)
    if entry is not None and not (out / "adapter_model.safetensors").exists():
        entry = None
    if budget is not None:
        budget.start_stage(stage, int(entry.get("rollouts_used") or 0) + int(entry.get("demonstrations") or 0)
                           if entry is not None else kept_rollouts(out))  # an interrupted one resumes
    if entry is None:
        if steps < 1 and warm_demos < 1:
            return TrainedAdapter(name, env["capability"], env["env_id"], skipped="the rollouts left are below one optimizer step")
        factory = capability_factory(env["spec"], env_kwargs, budget, stage)
        entry = train_adapter(model=model, seed=seed, env_factory=factory, env_id=env["env_id"], out=out, steps=steps,
                              train=train, run_name=name, warm_demos=warm_demos, rehearsal=rehearsal)
    curve = entry.get("reward_curve") or []
    tail = [r for _, r in curve[-3:]]
    used = budget.stage_used(stage) if budget is not None else int(entry.get("rollouts_used") or 0)
    grpo_steps = 0 if entry.get("kind") == "sft" else int(entry.get("steps") or steps)
    return TrainedAdapter(name, env["capability"], env["env_id"], str(entry.get("path", out)), grpo_steps,
                          used, entry.get("rollouts_used"), sum(tail) / len(tail) if tail else 0.0, curve,
                          entry.get("seconds"), demonstrations=int(entry.get("demonstrations") or 0),
                          rehearsed=int(entry.get("rehearsed") or 0), rehearsed_base=int(entry.get("rehearsed_base") or 0),
                          rehearsed_peers=int(entry.get("rehearsed_peers") or 0))
