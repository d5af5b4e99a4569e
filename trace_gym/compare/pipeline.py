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
* ``single`` — the trace adapter with the best final training reward, without routing.

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
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    plan_train_steps,
    run_trace,
    train_adapter,
    worst_rollouts_per_step,
)
from ..progress import track
from ..tau2.entries import env_id_for
from . import methods as M
from .resume import check_config

__all__ = ["CompareConfig", "run_compare", "run_scaling", "METHODS", "base_survey", "trace_plan", "base_jobs"]

METHODS = ("base", "grpo", "gepa", "trace", "single")
FORMAT = "trace-gym/compare@1"

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
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seed: int = 0
    eval_seed: int = 1000
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
    router_rule: str = "vote"  # retrieval routing rule: "vote", "gate" or "cover" (see RetrievalRouter)
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
        if self.cap_warm_demos < 0:
            raise ValueError(f"cap_warm_demos must be >= 0, got {self.cap_warm_demos}")
        if "single" in self.methods and "trace" not in self.methods:
            raise ValueError("method 'single' reuses the adapters trained by 'trace'; add 'trace'")
        if self.trace_grpo_steps is not None and self.trace_grpo_steps < 0:
            raise ValueError(f"trace_grpo_steps must be >= 0 (0: SFT-only adapters), got {self.trace_grpo_steps}")
        if self.trace_grpo_steps == 0 and not self.cap_warm_demos and "trace" in self.methods:
            raise ValueError("trace_grpo_steps = 0 trains SFT-only adapters: set cap_warm_demos to how many reference "
                             "episodes each adapter learns from")
        if "trace" in self.methods and self.cap_warm_demos:
            self._check_warm_budget()
        if self.cap_rehearsal and not self.cap_warm_demos:
            raise ValueError("cap_rehearsal adds the warm start's episodes to each adapter's SFT: set cap_warm_demos too")
        if self.cap_rehearsal and "trace" in self.methods and not self.warm_start_on():
            raise ValueError("cap_rehearsal rehearses the shared warm start's episodes: it needs the warm start "
                             "(warm_start true, and a model that can be trained)")
        from ..route.retrieval import RULES

        bad_knobs = {k: v for k, v in self.cap_knobs.items()
                     if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)}
        if bad_knobs:
            raise ValueError(f"cap_knobs maps knob names to numbers, got {bad_knobs}")
        if self.router_rule not in RULES:
            raise ValueError(f"router_rule must be one of {list(RULES)}, got {self.router_rule!r}")
        from ..policies.engine import ENGINES

        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {list(ENGINES)}, got {self.engine!r}")
        from ..pipeline.warm import check_warm_fields

        check_warm_fields(self)
        return self

    def _check_warm_budget(self) -> None:
        """TRACE's budget must hold its base rollouts, calibration, one adapter's warm-start demonstrations and
        routing; raises ``ValueError`` naming what is short and what to pass."""
        n_base = self.base_tasks if self.base_tasks is not None else max(1, int(self.base_fraction * self.budget) // max(1, self.base_samples))
        need = {"base rollouts": n_base * self.base_samples, "calibration": self.calib_seeds * self.calib_samples,
                "warm-start demonstrations": self.cap_warm_demos, "routing": self.routing_seeds}
        if sum(need.values()) > self.budget:
            parts = ", ".join(f"{k} {v}" for k, v in need.items())
            raise ValueError(f"budget {self.budget} is too small for TRACE's capability warm start: it needs "
                             f"{sum(need.values())} rollouts ({parts}); pass a budget of at least {sum(need.values())} "
                             "or a smaller cap_warm_demos")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _RUNTIME}
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
        if not self.can_train or self.model == "tiny":
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
        names = {f.name for f in dataclasses.fields(cls)} - _RUNTIME
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown compare config key(s) {unknown}")
        return cls(**data)


_RUNTIME = {"policy_factory", "reflection_lm", "weights"}



# ----------------------------------------------------------------------------- evaluation
def _target(cfg: CompareConfig) -> Target:
    """The target as the pipeline sees it (one per target id and kwargs, so the env is asked once)."""
    key = (cfg.target, json.dumps(cfg.env_kwargs, sort_keys=True, default=str), cfg.success)
    if key not in _TARGETS:
        _TARGETS[key] = Target(cfg.target, dict(cfg.env_kwargs), cfg.success)
    return _TARGETS[key]


_TARGETS: dict[tuple[str, str, float | None], Target] = {}


def _evaluate(cfg: CompareConfig, policy: Any, tasks: list[Any], store: Path) -> dict[str, Any]:
    return evaluate_policy(_target(cfg), policy, tasks, cfg.trials, store, base_seed=cfg.eval_seed, batch_size=cfg.batch_size)


def base_survey(cfg: CompareConfig, root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Base success per τ² domain and split (``survey_tasks`` tasks of each, one trial), for choosing a target."""
    rows = []
    for domain in cfg.survey_domains:
        target = Target(env_id_for(domain), dict(cfg.env_kwargs))
        train, test, how = M.target_splits(target.env_id, seed=cfg.seed, n_train=cfg.survey_tasks, n_test=cfg.survey_tasks)
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        for split, tasks in (("train", train), ("test", test)):
            rep = evaluate_policy(target, pol, tasks, 1, root / "survey" / f"{domain}-{split}.jsonl", base_seed=cfg.eval_seed,
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
    budget.start_stage("train", 0)  # an interrupted training starts over
    steps = plan_train_steps(budget.remaining, cfg.train, cfg.max_train_steps)
    if steps < 1:
        return {"skipped": f"budget {B} is below one optimizer step ({worst_rollouts_per_step(cfg.train)} rollouts)",
                "rollouts": 0, "budget": budget.to_dict()}
    factory = M.target_factory(cfg.target, cfg.env_kwargs, budget, "train", train_tasks)
    entry = train_adapter(model=cfg.weights_spec, seed=cfg.seed, env_factory=factory, env_id=cfg.target,
                          out=root / "grpo" / "adapters" / "grpo-target", steps=steps, train=cfg.train, run_name="grpo-target")
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


def trace_plan(cfg: CompareConfig, budget: RolloutBudget, root: Path, tasks: list[Any]) -> TracePlan:
    """The TRACE loop as compare runs it: every rollout charged to ``budget``, files under ``root/trace``."""
    def base_policy() -> Any:
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        return pol

    return TracePlan(
        target=_target(cfg), root=root / "trace", model=cfg.weights_spec, base_policy=base_policy, jobs=base_jobs(cfg, tasks),
        seed=cfg.seed, min_capabilities=cfg.min_capabilities, max_capabilities=cfg.max_capabilities,
        cap_env_kwargs=cfg.cap_env_kwargs, cap_knobs=dict(cfg.cap_knobs), calib_seeds=cfg.calib_seeds, calib_samples=cfg.calib_samples, mastered=cfg.mastered,
        band=tuple(cfg.band) if cfg.band else None, tune_rounds=cfg.tune_rounds,
        train=cfg.train, max_train_steps=cfg.max_train_steps if cfg.trace_grpo_steps is None else cfg.trace_grpo_steps,
        warm_demos=cfg.cap_warm_demos, rehearsal=_rehearsal(cfg),
        name_adapter=lambda i, cap: f"cap-{i}-{cap}",
        routing_seeds=cfg.routing_seeds, router_rule=cfg.router_rule, embedder=cfg.embedder, budget=budget,
        rollouts_path=root / "trace" / "base_rollouts.jsonl", index_path=root / "trace" / "router_index")


def _rehearsal(cfg: CompareConfig) -> Any:
    """The shared warm start's episodes, for ``cap_rehearsal`` (``None`` when off)."""
    settings = _warm_settings(cfg) if cfg.cap_rehearsal else None
    if settings is None:
        return None
    from ..pipeline.learn import Rehearsal

    return Rehearsal(tuple(settings.envs), settings.seeds_per_env, settings.seed)


def _trace(cfg: CompareConfig, B: int, root: Path, train_tasks: list[Any], st: StageStore) -> dict[str, Any]:
    """TRACE through :func:`trace_gym.pipeline.run_trace` (each stage resumable); returns the method's summary."""
    if not cfg.can_train:
        return {"skipped": f"model {cfg.model!r} cannot be trained here (a server, a script or a given policy)", "rollouts": 0}
    budget = RolloutBudget(B, root / "trace" / "budget.json")
    n_base_tasks = cfg.base_tasks if cfg.base_tasks is not None else max(1, int(cfg.base_fraction * B) // max(1, cfg.base_samples))
    tasks = train_tasks[:n_base_tasks]
    if budget.total < len(tasks) * cfg.base_samples or not tasks:
        return {"skipped": f"budget {B} cannot cover the base rollouts", "rollouts": 0, "budget": budget.to_dict()}
    run = run_trace(trace_plan(cfg, budget, root, tasks), st, prefix="trace_")
    if run.skipped:
        return {"skipped": run.skipped, "rollouts": 0, "budget": budget.to_dict()}
    out: dict[str, Any] = {}
    for name in ("rollouts", "analysis", "synthesis", "calibration", "routing"):
        res = getattr(run, name)
        if res is not None:
            out["base_rollouts" if name == "rollouts" else name] = res.to_dict()
    out["adapters"] = [a.to_dict() for a in run.adapters]
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
    if method == "single":
        best = _best(adapters)
        return (M.adapter_policy(cfg.acting_spec, manifest, best["adapter"], seed=cfg.seed, gen=gen,
                                 policy_id=f"single:{Path(root).name}:{best['adapter']}"),
                f"adapter {best['adapter']} (best final training reward), no routing")
    from ..route.index import RouterIndex
    from ..route.policy import RoutedPolicy
    from ..route.retrieval import RetrievalRouter

    if result.get("routing", {}).get("skipped"):  # no router: the best adapter answers every conversation
        best = _best(adapters)
        return (M.adapter_policy(cfg.acting_spec, manifest, best["adapter"], seed=cfg.seed, gen=gen,
                                 policy_id=f"trace:{Path(root).name}:{best['adapter']}"),
                f"{result['routing']['skipped']}; adapter {best['adapter']} for every conversation")
    ap = M.adapter_policy(cfg.acting_spec, manifest, None, seed=cfg.seed, gen=gen, policy_id="adapters")
    router = RetrievalRouter(RouterIndex.load(result["routing"]["index"]))
    pol = RoutedPolicy(ap, router, {a["adapter"]: a["adapter"] for a in adapters})
    pol.policy_id = f"trace:{Path(root).name}"
    return pol, f"{len(adapters)} adapter(s) with retrieval routing"


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
        if "single" in cfg.methods:
            trained["single"] = trained["trace"]
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
        elif method in ("trace", "single") and not res.get("adapters"):
            ev = {"eval": eval_base()["eval"], "note": res.get("note", "no adapter: the base model")}
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
        trained["trace"]["held_out_routing"] = M.held_out_routing_of(trained["trace"], out / "eval" / "base.jsonl")
    doc = {"format": FORMAT, "config": cfg.to_dict(), "target": cfg.target, "budget": B, "seeds": {
        "seed": cfg.seed, "eval_seed": cfg.eval_seed, "trials": cfg.trials}, "splits": splits, "survey": survey,
        "methods": results, "details": trained, "warm_start": warm,
        "stages": {"ran": shared_st.ran + st.ran if root != out else st.ran + shared_st.ran,
                   "skipped": shared_st.skipped + st.skipped if root != out else st.skipped + shared_st.skipped}}
    atomic_write_json(root / "compare.json", doc)
    render_outputs(doc, root)
    return doc


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
