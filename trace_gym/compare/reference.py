"""Reference rows beside the compared methods, built from TRACE's own work: ``joint`` and ``oracle``.

* ``joint`` — the ablation "one adapter for every selected capability, no routing": one LoRA adapter
  SFT'd on the union of the demonstrations TRACE's per-capability adapters trained on (each adapter's
  reference episodes of its capability env, and what they rehearsed: the shared warm start's episodes and,
  with ``cap_rehearse_base``, the base model's successful train episodes), with the same trainer settings
  and ``sft_max_steps`` × the number of adapters SFT steps, evaluated on every held-out task.  It reuses
  TRACE's selected capabilities and charged demonstrations; to rebuild the same demonstrations it replays
  the reference solutions of the capability envs (no model episode), said with its SFT cost in the ledger.
* ``ideal`` — the ideal need gate: per held-out task the joint adapter's episode, or the base model's where
  the task's gold says to refuse (a reference built from the held-out labels, not a method);
* ``oracle`` — an upper reference, not a method: per held-out task, the better (by mean reward over the
  trials) of the base model and each trained TRACE adapter forced on that task, chosen with the held-out
  rewards themselves.  Each adapter gets its own forced evaluation, a resumable stage
  ``eval_adapter:<name>``; ``single`` is the one of the adapter with the best final training reward.

Errors: :class:`ValueError` when a row is asked of a TRACE run that lacks what it needs (no calibration
record, an adapter whose capability env is not among the calibrated ones).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["adapter_stage", "adapter_store", "oracle_eval", "ideal_eval", "combined_eval", "train_joint", "joint_ledger_text",
           "JOINT", "IDEAL", "ORACLE_NOTE", "IDEAL_NOTE"]

JOINT = "joint"  # the joint adapter's name (its folder under ``<root>/joint/adapters``)
IDEAL = "ideal"  # the ideal detector's row
IDEAL_NOTE = ("a reference, not a method: per held-out task the joint adapter's episode, or the base model's where the "
              "task's gold says a needed tool is missing (an ideal need gate, chosen with the held-out labels)")
ORACLE_NOTE = ("an upper reference, not a method: per held-out task the better of the base model and each TRACE "
               "adapter forced on it, chosen with the held-out rewards themselves")


def adapter_stage(name: str) -> str:
    """The stage record of adapter ``name``'s forced evaluation on the held-out tasks."""
    return f"eval_adapter:{name}"


def adapter_store(root: Path, stage: str) -> Path:
    """The episode store of an evaluation stage (``eval_<x>`` → ``<root>/eval/<x>.jsonl``, ``:`` written as ``-``)."""
    return Path(root) / "eval" / f"{stage.removeprefix('eval_').replace(':', '-')}.jsonl"


def oracle_eval(base: dict[str, Any], forced: dict[str, dict[str, Any]], *, seed: int) -> dict[str, Any]:
    """The oracle's evaluation document from the base model's and each adapter's (``forced``: name → its
    evaluation) on the same held-out tasks: per task, the trials of whichever scored the highest mean reward
    (the base model on a tie, then the adapters in order), with pass^k, graded scores and the refusal floor
    recomputed; ``picks`` counts the tasks each source supplied and ``forced`` keeps each adapter's own rewards
    (name → task → trial rewards), so that each adapter forced alone can be reported beside the oracle."""
    sources = {"base": base, **forced}

    def best(t: str) -> str:
        return max(sources, key=lambda n: (sum(sources[n]["rewards"][t]) / max(1, len(sources[n]["rewards"][t])),
                                           -list(sources).index(n)))

    doc = combined_eval(base, sources, best, "oracle", seed=seed)
    doc["forced"] = {name: {t: list(r) for t, r in ev["rewards"].items()} for name, ev in forced.items()}
    return doc


def ideal_eval(base: dict[str, Any], joint: dict[str, Any], refuse: set[str], *, seed: int) -> dict[str, Any]:
    """The ideal detector's evaluation: per held-out task, the base model's trials where the task's right answer
    is to refuse (``refuse``: its gold says so) and the joint adapter's everywhere else."""
    return combined_eval(base, {"base": base, JOINT: joint}, lambda t: "base" if t in refuse else JOINT, IDEAL, seed=seed)


def combined_eval(base: dict[str, Any], sources: dict[str, dict[str, Any]], pick: Any, policy: str, *,
                  seed: int) -> dict[str, Any]:
    """One evaluation document made of several on the same held-out tasks: per task, the trials of the source
    ``pick(task)`` names, with pass^k, graded scores and the refusal floor recomputed; ``picks`` counts the tasks
    each source supplied.  ``ValueError`` when a source was evaluated on other tasks than ``base``."""
    from ..eval.harness import EvalReport
    from ..eval.scores import graded_scores

    tasks = list(base["rewards"])
    for name, ev in sources.items():
        if set(ev["rewards"]) != set(tasks):
            raise ValueError(f"{name} was evaluated on other held-out tasks than the base model")
    results, rewards, ended, picks = {}, {}, {}, dict.fromkeys(sources, 0)
    for t in tasks:
        chosen = pick(t)
        src = sources[chosen]
        results[t], rewards[t] = list(src["results"][t]), list(src["rewards"][t])
        ended[t] = list((src.get("ended") or {}).get(t) or [])
        picks[chosen] += 1
    groups: dict[str, list[str]] = {}
    for t, gs in (base.get("task_groups") or {}).items():
        for g in gs:
            groups.setdefault(g, []).append(t)
    floor = dict((base.get("refusal_floor") or {}).get("rewards") or {})
    rep = EvalReport(base.get("env_id", ""), policy, int(base["trials"]), results, rewards, groups, floor=floor,
                     ended=ended if all(ended.values()) else {})
    doc = rep.to_dict()
    doc["scores"] = graded_scores(doc, seed=seed)
    doc["eval_wall_s"] = 0.0
    doc["picks"] = picks
    return doc


def train_joint(cfg: Any, trace: dict[str, Any], root: Path, plan: Any) -> dict[str, Any]:
    """The ``joint`` adapter (module docstring); returns its summary.

    ``trace`` is TRACE's summary (its adapters and calibration), ``plan`` the :class:`~trace_gym.pipeline.TracePlan`
    it ran with (its rehearsal is rebuilt from it).  When TRACE trained a joint adapter itself
    (``adapter_choice``), that one is the row; otherwise it is trained here under ``<root>/joint/adapters/joint``
    (:func:`trace_gym.pipeline.joint.train_joint`)."""
    from ..pipeline.joint import train_joint as train_one
    from ..pipeline.loop import rehearsal_of
    from ..pipeline.stages import Rollouts
    from ..pipeline.training import TrainedAdapter
    from ..train.outputs import read_manifest

    if trace.get("joint"):
        made = TrainedAdapter.from_dict(trace["joint"])
        manifest = Path(made.path).parent / "manifest.json"
    else:
        adapters = [TrainedAdapter.from_dict(a) for a in trace.get("adapters") or []]
        if not any(a.demonstrations > 0 for a in adapters):
            return {"skipped": "TRACE trained no adapter with demonstrations: nothing to train a joint adapter on",
                    "rollouts": 0}
        envs = {e["capability"]: e for e in (trace.get("calibration") or {}).get("envs") or []}
        rehearsal = rehearsal_of(plan, Rollouts.from_dict(trace["base_rollouts"])) if trace.get("base_rollouts") else plan.training.rehearsal
        made = train_one(adapters, envs, Path(root) / JOINT / "adapters", model=cfg.weights_spec, seed=cfg.seed,
                         train=cfg.train_settings, cap_env_kwargs=cfg.cap_env_kwargs, rehearsal=rehearsal, name=JOINT)
        manifest = Path(root) / JOINT / "adapters" / "manifest.json"
    entry = next(a for a in read_manifest(manifest)["adapters"] if a.get("path") == made.path)
    caps = list(entry.get("capabilities") or made.capability.split("+"))
    steps = entry.get("sft_max_steps") or entry.get("steps")
    grpo = any(int(a.get("steps") or 0) > 0 for a in trace.get("adapters") or [])
    return {"adapter": made.path, "manifest": str(manifest), "capabilities": caps, "demonstrations": made.demonstrations,
            "rehearsed": made.rehearsed, "replayed": int(entry.get("replayed") or 0), "sft_steps": steps,
            "rollouts": int(trace.get("rollouts") or 0), "train_wall_s": float(made.train_wall_s or 0.0),
            "in_trace": bool(trace.get("joint")),
            "note": (f"one adapter SFT'd on the {made.demonstrations} demonstrations of TRACE's {len(caps)} adapter(s) "
                     "together" + (f" and the {made.rehearsed} they rehearsed" if made.rehearsed else "")
                     + f", {steps or 'epoch-based'} SFT steps, no routing (an ablation)"
                     + ("; no GRPO (TRACE's adapters had GRPO steps after their SFT)" if grpo else ""))}


def joint_ledger_text(joint: dict[str, Any]) -> str:
    """The joint adapter's ledger cell: what it reuses of TRACE and what it adds."""
    return (f"reuses TRACE's {joint.get('rollouts', 0)} rollouts (its selected capabilities and charged demonstrations); "
            f"beyond them: {joint.get('replayed', 0)} reference episodes of the capability envs replayed to rebuild the same "
            f"demonstrations (reference solutions, no model episode, not charged), {joint.get('rehearsed', 0)} rehearsed "
            f"episodes (not charged again), {joint.get('sft_steps') or 'epoch-based'} SFT steps "
            f"({float(joint.get('train_wall_s') or 0):.0f} s)")
