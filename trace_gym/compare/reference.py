"""Reference rows beside the compared methods, built from TRACE's own work: ``joint`` and ``oracle``.

* ``joint`` — the ablation "one adapter for every selected capability, no routing": one LoRA adapter
  SFT'd on the union of the demonstrations TRACE's per-capability adapters trained on (each adapter's
  reference episodes of its capability env, and what they rehearsed: the shared warm start's episodes and,
  with ``cap_rehearse_base``, the base model's successful train episodes), with the same trainer settings
  and ``sft_max_steps`` × the number of adapters SFT steps, evaluated on every held-out task.  It reuses
  TRACE's selected capabilities and charged demonstrations; to rebuild the same demonstrations it replays
  the reference solutions of the capability envs (no model episode), said with its SFT cost in the ledger.
* ``oracle`` — an upper reference, not a method: per held-out task, the better (by mean reward over the
  trials) of the base model and each trained TRACE adapter forced on that task, chosen with the held-out
  rewards themselves.  Each adapter gets its own forced evaluation, a resumable stage
  ``eval_adapter:<name>``; ``single`` is the one of the adapter with the best final training reward.

Errors: :class:`ValueError` when a row is asked of a TRACE run that lacks what it needs (no calibration
record, an adapter whose capability env is not among the calibrated ones).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["adapter_stage", "adapter_store", "oracle_eval", "train_joint", "joint_ledger_text", "JOINT", "ORACLE_NOTE"]

JOINT = "joint"  # the joint adapter's name (its folder under ``<root>/joint/adapters``)
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
    recomputed; ``picks`` counts the tasks each source supplied."""
    from ..eval.harness import EvalReport
    from ..eval.scores import graded_scores

    sources = {"base": base, **forced}
    tasks = list(base["rewards"])
    for name, ev in forced.items():
        if set(ev["rewards"]) != set(tasks):
            raise ValueError(f"adapter {name} was evaluated on other held-out tasks than the base model")
    results, rewards, ended, picks = {}, {}, {}, dict.fromkeys(sources, 0)
    for t in tasks:
        best = max(sources, key=lambda n: (sum(sources[n]["rewards"][t]) / max(1, len(sources[n]["rewards"][t])),
                                           -list(sources).index(n)))
        src = sources[best]
        results[t], rewards[t] = list(src["results"][t]), list(src["rewards"][t])
        ended[t] = list((src.get("ended") or {}).get(t) or [])
        picks[best] += 1
    groups: dict[str, list[str]] = {}
    for t, gs in (base.get("task_groups") or {}).items():
        for g in gs:
            groups.setdefault(g, []).append(t)
    floor = dict((base.get("refusal_floor") or {}).get("rewards") or {})
    rep = EvalReport(base.get("env_id", ""), "oracle", int(base["trials"]), results, rewards, groups, floor=floor,
                     ended=ended if all(ended.values()) else {})
    doc = rep.to_dict()
    doc["scores"] = graded_scores(doc, seed=seed)
    doc["eval_wall_s"] = 0.0
    doc["picks"] = picks
    return doc


def train_joint(cfg: Any, trace: dict[str, Any], root: Path, plan: Any) -> dict[str, Any]:
    """The ``joint`` adapter (module docstring) under ``<root>/joint/adapters/joint``; returns its summary.

    ``trace`` is TRACE's summary (its adapters and calibration), ``plan`` the :class:`~trace_gym.pipeline.TracePlan`
    it ran with (its rehearsal is rebuilt from it)."""
    from ..pipeline.learn import adapter_train_config, replayed_demonstrations
    from ..pipeline.loop import rehearsal_of
    from ..pipeline.stages import Rollouts
    from ..progress import track
    from ..train.sft import progress_callback, warm_start

    adapters = [a for a in trace.get("adapters") or [] if int(a.get("demonstrations") or 0) > 0]
    if not adapters:
        return {"skipped": "TRACE trained no adapter with demonstrations: nothing to train a joint adapter on",
                "rollouts": 0}
    envs = {e["capability"]: e for e in (trace.get("calibration") or {}).get("envs") or []}
    missing = [a["capability"] for a in adapters if a["capability"] not in envs]
    if missing:
        raise ValueError(f"TRACE's calibration record lacks the capability env(s) {missing} its adapters trained on")
    out = Path(root) / JOINT / "adapters" / JOINT
    per_adapter = int(cfg.train.get("sft_max_steps") or 0)
    train = {**cfg.train_settings, **({"sft_max_steps": per_adapter * len(adapters)} if per_adapter else {})}
    started = time.perf_counter()
    demos, played, tc = [], 0, None
    for a in adapters:
        e = envs[a["capability"]]
        tc = adapter_train_config(model=cfg.weights_spec, seed=cfg.seed, env_id=e["env_id"], out=out, steps=0,
                                  train=train, run_name=JOINT)
        report = replayed_demonstrations(e, int(a["demonstrations"]), model=cfg.weights_spec, seed=cfg.seed, train=train,
                                         cap_env_kwargs=cfg.cap_env_kwargs)
        demos += report.demos
        played += sum(report.played.values())
    rehearsal = rehearsal_of(plan, Rollouts.from_dict(trace["base_rollouts"])) if trace.get("base_rollouts") else plan.rehearsal
    rehearsed = rehearsal.demonstrations() if rehearsal is not None else []
    bar = track(f"SFT {JOINT} on {len(demos)} reference episodes" + (f" and {len(rehearsed)} rehearsed" if rehearsed else ""),
                total=tc.sft_max_steps or None, unit="steps")
    try:
        warm_start(tc, out=out, demos=[*demos, *rehearsed], manifest=True, callbacks=[progress_callback(bar)])
    except BaseException:
        bar.close(aborted=True)
        raise
    bar.close()
    grpo = any(int(a.get("steps") or 0) > 0 for a in adapters)
    return {"adapter": str(out), "manifest": str(out.parent / "manifest.json"), "capabilities": [a["capability"] for a in adapters],
            "demonstrations": len(demos), "rehearsed": len(rehearsed), "replayed": played, "sft_steps": tc.sft_max_steps,
            "rollouts": int(trace.get("rollouts") or 0), "train_wall_s": time.perf_counter() - started,
            "note": (f"one adapter SFT'd on the {len(demos)} demonstrations of TRACE's {len(adapters)} adapter(s) together"
                     + (f" and the {len(rehearsed)} they rehearsed" if rehearsed else "")
                     + f", {tc.sft_max_steps or 'epoch-based'} SFT steps, no routing (an ablation)"
                     + ("; no GRPO (TRACE's adapters had GRPO steps after their SFT)" if grpo else ""))}


def joint_ledger_text(joint: dict[str, Any]) -> str:
    """The joint adapter's ledger cell: what it reuses of TRACE and what it adds."""
    return (f"reuses TRACE's {joint.get('rollouts', 0)} rollouts (its selected capabilities and charged demonstrations); "
            f"beyond them: {joint.get('replayed', 0)} reference episodes of the capability envs replayed to rebuild the same "
            f"demonstrations (reference solutions, no model episode, not charged), {joint.get('rehearsed', 0)} rehearsed "
            f"episodes (not charged again), {joint.get('sft_steps') or 'epoch-based'} SFT steps "
            f"({float(joint.get('train_wall_s') or 0):.0f} s)")
