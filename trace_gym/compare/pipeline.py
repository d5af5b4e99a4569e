"""TRACE against baselines at an equal rollout budget: a front-end over :mod:`trace_gym.pipeline`.

For one target env, one base model and a rollout budget ``B`` the pipeline builds and
evaluates:

* ``base`` — the base policy;
* ``grpo`` — GRPO+LoRA directly on the target's train tasks, ``B`` rollouts;
* ``gepa`` — GEPA prompt optimization of the agent instruction, ``B`` metric calls
  (:mod:`trace_gym.baselines.gepa_adapter`);
* ``trace`` — base rollouts on the train tasks → offline analysis → synthesized
  capability envs → calibration → one adapter per capability → retrieval routing,
  every rollout of every step charged to ``B``;
* ``single`` — the trace adapter with the best final training reward, without routing;
* ``joint`` and ``oracle`` — reference rows built from TRACE's work (:mod:`trace_gym.compare.reference`): one
  adapter SFT'd on every adapter's demonstrations together (an ablation), and per held-out task the better of
  the base model and each adapter forced on it (an upper reference, not a method).

The settings are a :class:`~trace_gym.compare.config.CompareConfig`; its ``seed`` is the one seed of every
draw of the run.

With ``warm_start`` on (the default for a ToolSandbox-family target with a real model) every
method starts from the same weights: a format-only SFT on reference episodes of capability
envs, merged into the base model (:mod:`trace_gym.pipeline.warm`), made once under
``<out>/warm_start/`` before any method and shown in the ledger as a shared cost charged to
no method.  The base survey (``survey_domains``) runs before it, on the model as given.

TRACE is :func:`trace_gym.pipeline.run_trace` with a :class:`~trace_gym.pipeline.RolloutBudget`.
Each method is evaluated on the held-out tasks with ``trials`` trials per task through
:func:`trace_gym.pipeline.evaluate_policy` (pass^k with bootstrap intervals).  Every stage
goes through a :class:`~trace_gym.pipeline.StageStore` under ``<out>/.../stages/``, so a
killed run continues where it stopped.  ``compare.json`` carries the
configuration, seeds, splits, budget ledgers and every per-task result, enough to redraw
the table and plot without rerunning (:func:`trace_gym.compare.report.render_outputs`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..io import atomic_write_json
from ..pipeline import (
    BudgetExceeded,
    RolloutBudget,
    RolloutJob,
    StageStore,
    Target,
    TracePlan,
    evaluate_policy,
    kept_rollouts,
    plan_train_steps,
    run_trace,
    train_adapter,
    worst_rollouts_per_step,
)
from ..progress import track
from ..tau2.entries import env_id_for
from . import methods as M
from .config import METHODS, CompareConfig
from .reference import (
    IDEAL,
    IDEAL_NOTE,
    JOINT,
    ORACLE_NOTE,
    adapter_stage,
    adapter_store,
    ideal_eval,
    oracle_eval,
    train_joint,
)
from .resume import check_config

__all__ = ["CompareConfig", "run_compare", "run_scaling", "METHODS", "base_survey", "trace_plan", "base_jobs"]

FORMAT = "trace-gym/compare@1"


# ----------------------------------------------------------------------------- evaluation
def _target(cfg: CompareConfig) -> Target:
    """The target as the pipeline sees it (one per target id and kwargs, so the env is asked once)."""
    key = (cfg.target, json.dumps(cfg.env_kwargs, sort_keys=True, default=str), cfg.success)
    if key not in _TARGETS:
        _TARGETS[key] = Target(cfg.target, dict(cfg.env_kwargs), cfg.success)
    return _TARGETS[key]


_TARGETS: dict[tuple[str, str, float | None], Target] = {}


def _evaluate(cfg: CompareConfig, policy: Any, tasks: list[Any], store: Path) -> dict[str, Any]:
    return evaluate_policy(_target(cfg), policy, tasks, cfg.trials, store, base_seed=cfg.evaluation_seed, batch_size=cfg.batch_size)


def base_survey(cfg: CompareConfig, root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Base success per τ² domain and split (``survey_tasks`` tasks of each, one trial), for choosing a target."""
    rows = []
    for domain in cfg.survey_domains:
        target = Target(env_id_for(domain), dict(cfg.env_kwargs))
        train, test, how = M.target_splits(target.env_id, seed=cfg.seed, n_train=cfg.survey_tasks, n_test=cfg.survey_tasks)
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        for split, tasks in (("train", train), ("test", test)):
            rep = evaluate_policy(target, pol, tasks, 1, root / "survey" / f"{domain}-{split}.jsonl", base_seed=cfg.evaluation_seed,
                                  batch_size=cfg.batch_size)
            p1 = rep["pass_hat_k"]["1"]
            rows.append({"domain": domain, "split": split, "n_tasks": len(tasks), "pass1": p1,
                         "mean_reward": rep["mean_reward"], "split_source": how})
            log(f"survey {domain}/{split}: pass^1 {p1['value']:.3f} [{p1['low']:.3f}, {p1['high']:.3f}]")
    best = max(rows, key=lambda r: (r["pass1"]["value"], r["mean_reward"]), default=None)
    all_zero = bool(rows) and all(r["pass1"]["value"] == 0.0 for r in rows)
    return {"model": cfg.model, "user": cfg.env_kwargs.get("user", "offline"), "rows": rows, "all_zero": all_zero,
            "best_domain": best["domain"] if best else None}


# ----------------------------------------------------------------------------- methods
def _grpo(cfg: CompareConfig, B: int, root: Path, train_tasks: list[Any]) -> dict[str, Any]:
    if not cfg.can_train:
        return {"skipped": f"model {cfg.model!r} cannot be trained here (a server, a script or a given policy)", "rollouts": 0}
    budget = RolloutBudget(B, root / "grpo" / "budget.json")
    out = root / "grpo" / "adapters" / "grpo-target"
    budget.start_stage("train", kept_rollouts(out))  # an interrupted training continues from its newest checkpoint
    steps = plan_train_steps(budget.remaining + budget.stage_used("train"), cfg.train_settings, cfg.max_train_steps)
    if steps < 1:
        return {"skipped": f"budget {B} is below one optimizer step ({worst_rollouts_per_step(cfg.train_settings)} rollouts)",
                "rollouts": 0, "budget": budget.to_dict()}
    factory = M.target_factory(cfg.target, cfg.env_kwargs, budget, "train", train_tasks)
    entry = train_adapter(model=cfg.weights_spec, seed=cfg.seed, env_factory=factory, env_id=cfg.target,
                          out=out, steps=steps, train=cfg.train_settings, run_name="grpo-target")
    return {"adapter": entry["path"], "manifest": str(root / "grpo" / "adapters" / "manifest.json"), "steps": steps,
            "rollouts": budget.used, "trainer_rollouts": entry.get("rollouts_used"), "budget": budget.to_dict(),
            "reward_curve": entry.get("reward_curve"), "train_wall_s": entry.get("seconds")}


def _gepa(cfg: CompareConfig, B: int, root: Path, train_tasks: list[Any]) -> dict[str, Any]:
    from ..baselines.gepa_adapter import TraceGEPAAdapter, default_anchor, optimize_prompt, policy_reflection_lm

    budget = RolloutBudget(B, root / "gepa" / "budget.json")
    budget.start_stage("gepa", 0)  # an interrupted search starts over
    n_val = min(cfg.gepa_val, len(train_tasks))
    if budget.remaining < n_val or n_val == 0:
        return {"skipped": f"budget {B} cannot score the seed prompt on {n_val} validation tasks", "rollouts": 0,
                "budget": budget.to_dict()}
    policy = cfg.base_policy()
    if cfg.reflection_lm is not None:
        lm = cfg.reflection_lm
    else:
        reflector = policy if cfg.reflection is None else M.load_base_policy(cfg.reflection, seed=cfg.seed, **cfg.gen)
        lm = policy_reflection_lm(reflector, seed=cfg.seed)
    anchor = default_anchor(cfg.target, cfg.env_kwargs)
    seed_text = anchor or "You are a helpful agent. Use the tools to complete the user's request exactly."
    bar = track(f"gepa on {cfg.target}", total=budget.remaining, unit="metric calls")
    adapter = TraceGEPAAdapter(_target(cfg).make, policy, anchor=anchor, seed=cfg.seed, budget=budget, stage="gepa",
                               on_episode=bar.tick)
    t0 = time.perf_counter()
    try:
        run = optimize_prompt(adapter, seed_text, list(train_tasks), list(train_tasks[:n_val]),
                              reflection_lm=lm, minibatch=cfg.gepa_minibatch,
                              seed=cfg.seed, log_path=root / "gepa" / "gepa_log.txt")
    except BaseException:
        bar.close(aborted=True)
        raise
    finally:
        bar.close()
        adapter.close()
    return {"result": run.to_dict(), "anchor": anchor, "rollouts": budget.used, "budget": budget.to_dict(),
            "reflection_model": cfg.reflection or cfg.model, "train_wall_s": time.perf_counter() - t0}


def base_jobs(cfg: CompareConfig, tasks: list[Any]) -> list[RolloutJob]:
    """TRACE's base rollouts: the base model on each task, ``base_samples`` seeds each."""
    return [RolloutJob(f"base:{cfg.model}", str(t), cfg.seed + s, None) for t in tasks for s in range(cfg.base_samples)]


def trace_plan(cfg: CompareConfig, budget: RolloutBudget, root: Path, tasks: list[Any],
               learning: list[Any] | None = None) -> TracePlan:
    """The TRACE loop as compare runs it: every rollout charged to ``budget``, files under ``root/trace``;
    ``learning`` is the train split the needs rule's gate learns from (default: ``tasks``)."""
    def base_policy() -> Any:
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        return pol

    return TracePlan(
        target=_target(cfg), root=root / "trace", model=cfg.weights_spec, base_policy=base_policy, jobs=base_jobs(cfg, tasks),
        seed=cfg.seed, batch_size=cfg.batch_size, **cfg.stage_settings(rehearsal=_rehearsal(cfg)),
        name_adapter=lambda i, cap: f"cap-{i}-{cap}", budget=budget,
        learning_tasks=[str(t) for t in (learning if learning is not None else tasks)],
        adapter_policy=lambda name: M.adapter_policy(cfg.acting_spec, root / "trace" / "adapters" / "manifest.json", name,
                                                     seed=cfg.seed, gen=cfg.gen, policy_id=f"adapter:{name}"),
        rollouts_path=root / "trace" / "base_rollouts.jsonl", index_path=root / "trace" / "router_index")


def _rehearsal(cfg: CompareConfig) -> Any:
    """The shared warm start's episodes, for ``cap_rehearsal`` (``None`` when off)."""
    settings = _warm_settings(cfg) if cfg.cap_rehearsal else None
    if settings is None:
        return None
    from ..pipeline.training import Rehearsal

    return Rehearsal(tuple(settings.envs), settings.seeds_per_env, settings.seed)


def _base_tasks(cfg: CompareConfig, B: int, train_tasks: list[Any]) -> list[Any]:
    """The train tasks TRACE plays the base model on (``base_tasks``, else enough for ``base_fraction`` of ``B``)."""
    n = cfg.base_tasks if cfg.base_tasks is not None else max(1, int(cfg.base_fraction * B) // max(1, cfg.base_samples))
    return train_tasks[:n]


def _trace(cfg: CompareConfig, B: int, root: Path, train_tasks: list[Any], st: StageStore) -> dict[str, Any]:
    """TRACE through :func:`trace_gym.pipeline.run_trace` (each stage resumable); returns the method's summary."""
    if not cfg.can_train:
        return {"skipped": f"model {cfg.model!r} cannot be trained here (a server, a script or a given policy)", "rollouts": 0}
    budget = RolloutBudget(B, root / "trace" / "budget.json")
    tasks = _base_tasks(cfg, B, train_tasks)
    if budget.total < len(tasks) * cfg.base_samples or not tasks:
        return {"skipped": f"budget {B} cannot cover the base rollouts", "rollouts": 0, "budget": budget.to_dict()}
    run = run_trace(trace_plan(cfg, budget, root, tasks, train_tasks), st, prefix="trace_")
    if run.skipped:
        return {"skipped": run.skipped, "rollouts": 0, "budget": budget.to_dict()}
    out: dict[str, Any] = {}
    for name in ("rollouts", "analysis", "synthesis", "calibration", "routing"):
        res = getattr(run, name)
        if res is not None:
            out["base_rollouts" if name == "rollouts" else name] = res.to_dict()
    out["adapters"] = [a.to_dict() for a in run.adapters]
    if run.training is not None and run.training.joint is not None:
        out["joint"] = run.training.joint.to_dict()
    if run.note:
        out["note"] = run.note
    if cfg.trace_grpo_steps == 0 and run.adapters:
        out["note"] = (out.get("note", "") + "; " if out.get("note") else "") + (
            f"SFT-only adapters (trace_grpo_steps = 0): each learned from {cfg.cap_warm_demos} reference episodes of its "
            "capability env, no GRPO (at CPU budgets GRPO after the warm start lowered the score: learning_cpu.py)")
    ledger = RolloutBudget(B, root / "trace" / "budget.json")
    out["rollouts"] = ledger.used
    out["budget"] = ledger.to_dict()
    return out


# ----------------------------------------------------------------------------- policies for evaluation
def _best(adapters: list[dict[str, Any]]) -> dict[str, Any]:
    return max(adapters, key=lambda a: (a["final_reward"], -adapters.index(a)))


def _policy_for(method: str, cfg: CompareConfig, result: dict[str, Any], root: Path) -> tuple[Any, str]:
    """The evaluated policy of a method and a note on what it is."""
    gen = cfg.gen
    if method == "base":
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        return pol, "base model"
    if method == "grpo":
        return M.adapter_policy(cfg.acting_spec, result["manifest"], "grpo-target", seed=cfg.seed, gen=gen,
                                policy_id=f"grpo:{Path(root).name}"), "GRPO+LoRA on the target"
    if method == JOINT:
        return (M.adapter_policy(cfg.acting_spec, result["manifest"], JOINT, seed=cfg.seed, gen=gen,
                                 policy_id=f"joint:{Path(root).name}"), result["note"])
    if method == "gepa":
        from ..baselines.gepa_adapter import SystemPromptPolicy

        base = cfg.base_policy()
        text = result["result"]["best_candidate"]["system_prompt"]
        pol = SystemPromptPolicy(base, text, result.get("anchor"))
        pol.policy_id = f"gepa:{Path(root).name}:{pol.policy_id.rsplit(':', 1)[-1]}"
        return pol, "GEPA-optimized instruction"
    adapters = result.get("adapters") or []
    if not adapters:
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        return pol, result.get("note", "no adapters: base model")
    manifest = root / "trace" / "adapters" / "manifest.json"
    if method.startswith("adapter:"):  # one TRACE adapter forced on every conversation
        name = method.removeprefix("adapter:")
        return (M.adapter_policy(cfg.acting_spec, manifest, name, seed=cfg.seed, gen=gen,
                                 policy_id=f"adapter:{Path(root).name}:{name}"), f"adapter {name} forced on every held-out task")
    from ..route.index import RouterIndex
    from ..route.policy import RoutedPolicy
    from ..route.retrieval import RetrievalRouter

    if method == "classifier":
        return (M.classifier_policy(cfg.acting_spec, cfg.weights_spec, manifest, result, seed=cfg.seed, gen=gen,
                                    policy_id=f"classifier:{Path(root).name}"),
                f"{len(adapters)} adapter(s) routed by the base model as a classifier over their capabilities")

    if result.get("routing", {}).get("skipped"):  # no router: the best adapter answers every conversation
        best = _best(adapters)
        return (M.adapter_policy(cfg.acting_spec, manifest, best["adapter"], seed=cfg.seed, gen=gen,
                                 policy_id=f"trace:{Path(root).name}:{best['adapter']}"),
                f"{result['routing']['skipped']}; adapter {best['adapter']} for every conversation")
    ap = M.adapter_policy(cfg.acting_spec, manifest, None, seed=cfg.seed, gen=gen, policy_id="adapters")
    index = RouterIndex.load(result["routing"]["index"])
    router = RetrievalRouter(index)
    names = [a["adapter"] for a in adapters] + ([result["joint"]["adapter"]] if result.get("joint") else [])
    pol = RoutedPolicy(ap, router, {n: n for n in names})  # the needs rule may route to the joint adapter
    pol.policy_id = f"trace:{Path(root).name}"
    joint = " and the joint adapter" if result.get("joint") else ""
    return pol, f"{len(adapters)} adapter(s){joint}, routed by rule {index.settings.get('rule', 'vote')!r}"


# ----------------------------------------------------------------------------- driver
def _splits(cfg: CompareConfig) -> dict[str, Any]:
    if cfg.train_tasks is not None and cfg.test_tasks is not None:
        return {"train": list(cfg.train_tasks), "test": list(cfg.test_tasks), "source": "given in the config"}
    train, test, how = M.target_splits(cfg.target, seed=cfg.seed, n_train=cfg.n_train_tasks, n_test=cfg.n_test_tasks,
                                       train_split=cfg.train_split, test_split=cfg.test_split)
    return {"train": train, "test": test, "source": how}


def _resolve_target(cfg: CompareConfig, out: Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    if not cfg.survey_domains:
        if cfg.target == "auto":
            raise ValueError("target 'auto' needs survey_domains to choose from")
        return None
    survey = StageStore(out, log=log).run("survey", lambda: base_survey(cfg, out, log))
    if survey["all_zero"]:
        log(f"base success is 0 on every surveyed domain and split for {cfg.model}")
    if cfg.target == "auto":
        cfg.target = env_id_for(survey["best_domain"])
        log(f"target: {cfg.target} (highest base pass^1 in the survey)")
    return survey


def _warm_settings(cfg: CompareConfig) -> Any:
    """The shared warm start's settings, or ``None`` when this comparison has none (see ``CompareConfig.warm_start``)."""
    if not cfg.warm_start_on():
        return None
    from ..pipeline.warm import WarmStartSettings, domain_capability_envs

    envs = list(cfg.warm_start_envs) if cfg.warm_start_envs is not None else domain_capability_envs(cfg.target)
    return WarmStartSettings(model=M.train_model_name(cfg.model), envs=envs, seeds_per_env=cfg.warm_start_seeds,
                             steps=cfg.warm_start_steps, learning_rate=cfg.warm_start_lr, seed=cfg.seed).validate()


def _warm_start(cfg: CompareConfig, settings: Any, out: Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The shared format warm start (``<out>/warm_start/``, once for every budget); sets ``cfg.weights``.

    A finished one with the same settings is reused.  Returns its summary for the ledger, or ``None`` when off.
    """
    cfg.weights = None
    if settings is None:
        return None
    from ..pipeline.warm import WarmStart, run_warm_start

    store = StageStore(out, fingerprint=settings.to_dict(), log=log)
    ws = store.run("warm_start", lambda: run_warm_start(settings, out / "warm_start"), WarmStart)
    cfg.weights = ws.model
    return {**ws.to_dict(), "shared": True, "rollouts": 0}


def run_compare(cfg: CompareConfig, *, log: Callable[[str], None] = print, budget_dir: Path | None = None,
                shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or resume) one comparison at ``cfg.budget``; writes and returns ``compare.json``'s content."""
    from .report import render_outputs

    cfg.validate()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    survey = shared.get("survey") if shared else _resolve_target(cfg, out, log)
    warm_settings = _warm_settings(cfg)
    if warm_settings is not None:  # a warm start made with other settings is refused before anything is written
        from ..pipeline.warm import finished_warm_start

        finished_warm_start(out / "warm_start", warm_settings)
    splits = StageStore(out, log=log).run("splits", lambda: _splits(cfg))
    root = budget_dir or out
    check_config(cfg, root, log)
    warm = _warm_start(cfg, warm_settings, out, log)  # every method below starts from the same weights
    st = StageStore(root, log=log)
    B = cfg.budget
    results: dict[str, dict[str, Any]] = {}
    trained: dict[str, dict[str, Any]] = {}
    if "grpo" in cfg.methods:
        trained["grpo"] = st.run("grpo", lambda: _grpo(cfg, B, root, splits["train"]))
    if "gepa" in cfg.methods:
        trained["gepa"] = st.run("gepa", lambda: _gepa(cfg, B, root, splits["train"]))
    if "trace" in cfg.methods:
        trained["trace"] = _trace(cfg, B, root, splits["train"], st)
        for m in ("single", "oracle"):
            if m in cfg.methods:
                trained[m] = trained["trace"]
        if JOINT in cfg.methods:
            trained[JOINT] = trained["trace"] if trained["trace"].get("skipped") else st.run(JOINT, lambda: train_joint(
                cfg, trained["trace"], root, trace_plan(cfg, None, root, _base_tasks(cfg, B, splits["train"]), splits["train"])))
        for m in ("classifier", IDEAL):
            if m in cfg.methods:
                trained[m] = trained["trace"]
    forced = _forced_evals(cfg, trained.get("trace") or {}, root, splits["test"], st)
    shared_st = StageStore(out, log=log)  # the base model's score does not depend on B

    def eval_base() -> dict[str, Any]:
        def do() -> dict[str, Any]:
            policy, note = _policy_for("base", cfg, {}, root)
            return {"eval": _evaluate(cfg, policy, splits["test"], out / "eval" / "base.jsonl"), "note": note}

        return shared_st.run("eval_base", do)

    for method in cfg.methods:
        res = trained.get(method, {"rollouts": 0})
        if method == "base":
            ev = eval_base()
        elif res.get("skipped"):  # nothing was learned: the method is the base model
            ev = {"eval": eval_base()["eval"], "note": f"base model ({res['skipped']})"}
        elif method in ("trace", "single", "oracle", "classifier", IDEAL) and not res.get("adapters"):
            ev = {"eval": eval_base()["eval"], "note": res.get("note", "no adapter: the base model")}
        elif method == "single":
            best = _best(res["adapters"])["adapter"]
            ev = {"eval": forced[best]["eval"], "note": f"adapter {best} (best final training reward), no routing"}
        elif method == "oracle":
            oracle = oracle_eval(eval_base()["eval"], {n: f["eval"] for n, f in forced.items()}, seed=cfg.evaluation_seed)
            picks = ", ".join(f"{n} {k}" for n, k in oracle["picks"].items())
            ev = {"eval": oracle, "note": f"{ORACLE_NOTE} (tasks from each: {picks})"}
        elif method == IDEAL:
            joint = results.get(JOINT) or {}
            if joint.get("skipped") or not joint.get("eval"):
                ev = {"eval": eval_base()["eval"], "note": "no joint adapter: the base model"}
            else:
                refuse = {str(t) for t in splits["test"] if _target(cfg).source.gold(str(t)).refuse}
                ev = {"eval": ideal_eval(eval_base()["eval"], joint["eval"], refuse, seed=cfg.evaluation_seed),
                      "note": IDEAL_NOTE}
        else:
            def do_eval(method: str = method, res: dict[str, Any] = res) -> dict[str, Any]:
                policy, note = _policy_for(method, cfg, res, root)
                ev = _evaluate(cfg, policy, splits["test"], root / "eval" / f"{method}.jsonl")
                return {"eval": ev, "note": note}

            ev = st.run(f"eval_{method}", do_eval)
        results[method] = {"method": method, "rollouts": int(res.get("rollouts", 0)), "budget": B,
                           "train_wall_s": _train_wall(res), "note": ev["note"], "eval": ev["eval"],
                           "skipped": res.get("skipped")}
    if results.get("trace") and trained.get("trace", {}).get("adapters"):  # routing on the held-out tasks
        index = (trained["trace"].get("routing") or {}).get("index")
        if index:
            from ..pipeline.gate import held_out_gate

            trained["trace"]["held_out_gate"] = held_out_gate(index, _target(cfg).make, [str(t) for t in splits["test"]],
                                                              seed=cfg.evaluation_seed)
        trained["trace"]["held_out_routing"] = M.held_out_routing_of(trained["trace"], out / "eval" / "base.jsonl",
                                                                       seed=cfg.seed)
    doc = {"format": FORMAT, "config": cfg.to_dict(), "target": cfg.target, "budget": B, "seeds": {
        "seed": cfg.seed, "eval_seed": cfg.evaluation_seed, "trials": cfg.trials}, "splits": splits, "survey": survey,
        "methods": results, "details": trained, "warm_start": warm,
        "stages": {"ran": shared_st.ran + st.ran if root != out else st.ran + shared_st.ran,
                   "skipped": shared_st.skipped + st.skipped if root != out else st.skipped + shared_st.skipped}}
    atomic_write_json(root / "compare.json", doc)
    render_outputs(doc, root)
    return doc


def _forced_evals(cfg: CompareConfig, trace: dict[str, Any], root: Path, tasks: list[Any],
                  st: StageStore) -> dict[str, dict[str, Any]]:
    """Each TRACE adapter forced on every held-out task, one stage ``eval_adapter:<name>`` each: every adapter for
    ``oracle``, the best one for ``single`` (a stored ``eval_single`` of an earlier run is that adapter's)."""
    adapters = trace.get("adapters") or []
    if trace.get("skipped") or not adapters or not {"single", "oracle"} & set(cfg.methods):
        return {}
    best = _best(adapters)["adapter"]
    names = [a["adapter"] for a in adapters] if "oracle" in cfg.methods else [best]
    out = {}
    for name in names:
        def do(name: str = name) -> dict[str, Any]:
            earlier, _ = st.lookup("eval_single")
            if name == best and earlier is not None:
                return earlier["result"]
            policy, note = _policy_for(f"adapter:{name}", cfg, trace, root)
            return {"eval": _evaluate(cfg, policy, tasks, adapter_store(root, adapter_stage(name))), "note": note}

        out[name] = st.run(adapter_stage(name), do)
    return out


def _train_wall(res: dict[str, Any]) -> float:
    total = float(res.get("train_wall_s") or 0.0)
    for a in res.get("adapters") or []:
        total += float(a.get("train_wall_s") or 0.0)
    return total


def run_scaling(cfg: CompareConfig, budgets: list[int], *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The comparison at several budgets (each in ``<out>/B<budget>/``) and a score-vs-rollouts summary."""
    from .report import render_scaling

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    survey = _resolve_target(cfg, out, log)
    runs = []
    for b in sorted(set(budgets)):
        c = dataclasses.replace(cfg, budget=b)
        runs.append(run_compare(c, log=log, budget_dir=out / f"B{b}", shared={"survey": survey}))
    doc = {"format": FORMAT + "/scaling", "config": cfg.to_dict(), "target": cfg.target, "budgets": sorted(set(budgets)),
           "survey": survey, "runs": [{"budget": r["budget"], "methods": r["methods"]} for r in runs]}
    atomic_write_json(out / "scaling.json", doc)
    render_scaling(doc, out)
    return doc


__all__ += ["BudgetExceeded"]
