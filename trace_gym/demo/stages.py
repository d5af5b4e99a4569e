"""What the demo adds to the TRACE loop of :mod:`trace_gym.pipeline`: its agents, its sizes and its tables.

:func:`demo_plan` fills a :class:`~trace_gym.pipeline.TracePlan` from a
:class:`~trace_gym.demo.config.DemoConfig`: the base rollouts are the model under study
on train-split tasks (on ToolSandbox its own successes and failures are what the
analysis contrasts), plus, where the config asks for it (τ² targets), the deliberately
flawed scripted agent (every variant on each task, so there are failures with known
causes to contrast with successes); one adapter per synthesized env (at most
``max_adapters``) with a fixed number of GRPO steps.  With the config's warm start on,
the model every stage loads (:meth:`Context.model_spec`, the plan's ``model``) is the
warm start's merged folder (:func:`trace_gym.demo.runner.prepare_model`).
:func:`show` prints what each pipeline stage found as it finishes;
:func:`summarize` turns each stage's typed result into the demo's summary row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..episode import CONTEXT_LENGTH
from ..io import atomic_write_json
from ..pipeline import RolloutJob, Target, TracePlan
from ..render import fit_table
from .config import DemoConfig
from .flawed import demo_tasks
from .guard import ContextGuard

__all__ = ["Context", "ROWS", "WARM_ROW", "rows_for", "demo_plan", "demo_tasks", "show", "summarize", "held_out_route"]

# The demo's summary rows: title and the pipeline stages each covers, in TRACE order.
ROWS: list[tuple[str, str, tuple[str, ...]]] = [
    ("rollouts", "1. base rollouts", ("rollouts",)),
    ("analysis", "2. analysis", ("analysis",)),
    ("synthesis", "3. synthesis + calibration", ("synthesis", "calibration")),
    ("training", "4. training (LoRA: SFT, GRPO)", ("training",)),
    ("routing", "5. routing", ("routing",)),
    ("evaluation", "6. evaluation", ("evaluation",)),
]
# The row of the format warm start, first when the config turns it on.
WARM_ROW: tuple[str, str, tuple[str, ...]] = ("warm_start", "0. format warm start", ("warm_start",))


def rows_for(cfg: DemoConfig) -> list[tuple[str, str, tuple[str, ...]]]:
    """The summary rows of a run of ``cfg``: the warm start's first when it is on."""
    return [WARM_ROW, *ROWS] if cfg.warm_start else list(ROWS)


@dataclass
class Context:
    """What the demo's pieces share: the config, the console and what the stages found."""

    cfg: DemoConfig
    console: Console
    results: dict[str, Any] = field(default_factory=dict)
    weights: str | None = None  # the warm start's merged model folder, once made: "the model" from then on

    @property
    def out(self) -> Path:
        return self.cfg.out

    @property
    def adapters_dir(self) -> Path:
        return self.out / "adapters"

    @cached_property
    def target(self) -> Target:
        """The target as the scripted agent plays it (no step limit of its own)."""
        return Target(self.cfg.target, dict(self.cfg.env_kwargs), self.cfg.success)

    @cached_property
    def eval_target(self) -> Target:
        """The target as the model plays it: with the demo's step limit."""
        return Target(self.cfg.target, {**self.cfg.env_kwargs, "max_steps": self.cfg.env_max_steps}, self.cfg.success)

    def model_spec(self) -> str:
        """The model every stage loads: the warm start's merged folder once made, else :meth:`base_spec`."""
        return self.weights or self.base_spec()

    def warm_settings(self) -> Any:
        """The warm start's settings: from the base model, on the configured envs (default: the built-in
        capability envs of the target's domain)."""
        from ..pipeline.warm import WarmStartSettings, domain_capability_envs

        c = self.cfg
        envs = list(c.warm_start_envs) if c.warm_start_envs is not None else domain_capability_envs(c.target)
        return WarmStartSettings(model=self.base_spec(), envs=envs, seeds_per_env=c.warm_start_seeds,
                                 steps=c.warm_start_steps, learning_rate=c.warm_start_lr, seed=c.seed)

    def base_spec(self) -> str:
        """The model's name (``smollm2``), or for a plumbing model (``tiny``) the folder it is saved to once
        (``<out>/models/<name>``)."""
        from ..policies.model_registry import require_model

        spec = require_model(self.cfg.model)
        if not spec.plumbing:
            return spec.name
        folder = self.out / "models" / spec.name
        if not (folder / "config.json").exists():
            model, tok = spec.load(self.cfg.seed, None, None)
            model.config.max_position_embeddings = 16384  # rotary positions: τ² prompts exceed the default 4096
            tmp = folder.with_name(f".{spec.name}.tmp")
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            tmp.replace(folder)
        return str(folder.resolve())

    def acting_spec(self) -> str:
        """What acts (rollouts, calibration, evaluation): :meth:`model_spec` on the configured engine
        (:func:`~trace_gym.policies.engine.acting_spec`; a warm start's merged folder runs on transformers)."""
        from ..policies.engine import acting_spec

        return acting_spec(self.model_spec(), self.cfg.engine)

    def gen_options(self) -> dict[str, Any]:
        c = self.cfg
        opts = {"max_new_tokens": c.max_new_tokens, "temperature": c.temperature, "seed": c.seed, "batch_size": c.batch_size}
        from ..policies.model_registry import require_model

        # the model's own sampling (SmolLM2's), also when it is loaded from the warm start's folder
        return require_model(c.model).with_sampling(opts)

    def load(self, spec: str) -> Any:
        """A policy (``base`` or ``routed``) kept inside the model's context window."""
        from ..eval.policies import resolve_policy

        with self.console.status(f"loading {spec} policy …"):
            return ContextGuard(resolve_policy(spec, model=self.acting_spec(), adapters=self.adapters_dir,
                                               **self.gen_options()))

    def adapter_policy(self, name: str) -> Any:
        """The model acting with trained adapter ``name`` alone (the routing stage's selection plays it)."""
        return self.load(f"adapter:{name}")

    def policy(self) -> Any:
        """The base model as a new policy (the TRACE loop loads it once for rollouts and calibration, and closes it
        before training)."""
        policy = self.load("base")
        policy.policy_id = self.cfg.model
        return policy


def _rel(p: str | Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def spread(target: Target, split: str, n: int) -> list[str]:
    """``n`` task ids of ``split``, taken in turn from each report group (split order within a group)."""
    by_group: dict[str, list[str]] = {}
    for t in target.task_ids(split):
        by_group.setdefault(target.source.group(t), []).append(t)
    out: list[str] = []
    queues = [list(v) for _, v in sorted(by_group.items())]
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def _jobs(ctx: Context) -> tuple[list[RolloutJob], list[dict[str, Any]], list[str]]:
    """The flawed scripted agent (each variant on each task, when the config asks for it), then the model on
    ``base_tasks`` train tasks, ``base_samples`` seeds each."""
    cfg = ctx.cfg
    if not cfg.scripted:
        base_ids = spread(ctx.target, "train", cfg.base_tasks)
        jobs = [RolloutJob(cfg.model, tid, cfg.seed + s, None, {"max_steps": cfg.env_max_steps})
                for tid in base_ids for s in range(cfg.base_samples)]
        return jobs, [{"id": t} for t in base_ids], base_ids
    from .flawed import flawed_policy, flawed_script, task_database, variants_for, write_tools

    tasks = demo_tasks(cfg.target, cfg.scripted_tasks)
    db = task_database(cfg.target)
    writes = write_tools(cfg.target, tasks[0]["id"])
    jobs = []
    for t in tasks:
        for v in variants_for(t, writes, db):
            jobs.append(RolloutJob(f"flawed-scripted:{v}", str(t["id"]), cfg.seed, flawed_policy(flawed_script(t, v, writes, db), v)))
    base_ids = [str(t["id"]) for t in tasks[: cfg.base_tasks]]
    jobs += [RolloutJob(cfg.model, tid, cfg.seed + s, None, {"max_steps": cfg.env_max_steps})
             for tid in base_ids for s in range(cfg.base_samples)]
    return jobs, tasks, base_ids


def demo_plan(ctx: Context) -> tuple[TracePlan, dict[str, Any]]:
    """The demo's :class:`~trace_gym.pipeline.TracePlan` and what the rollouts row reports about its tasks."""
    cfg = ctx.cfg
    jobs, tasks, base_ids = _jobs(ctx)
    plan = TracePlan(
        target=ctx.target, root=ctx.out, model=ctx.model_spec(), base_policy=ctx.policy, jobs=jobs, seed=cfg.seed,
        batch_size=cfg.batch_size, **cfg.stage_settings(),
        learning_tasks=ctx.target.task_ids("train") if cfg.router_rule == "needs" else None,
        adapter_policy=ctx.adapter_policy if cfg.adapter_choice == "select" else None,
        rollouts_path=ctx.out / "rollouts" / "trajectories.jsonl", specs_dir=ctx.out / "envs")
    return plan, {"tasks": [str(t["id"]) for t in tasks], "model_tasks": base_ids}


# ----------------------------------------------------------------------------- what each stage found
def show(ctx: Context, name: str, result: Any) -> None:
    """Print what a pipeline stage found (its table or one line)."""
    cfg, console = ctx.cfg, ctx.console
    ctx.results[name] = result
    if name == "warm_start":
        console.print(f"warm start: {result.headline()} ({', '.join(result.envs)})", highlight=False)
        console.print(f"every later stage loads the merged model {_rel(result.model)}", markup=False, highlight=False,
                      soft_wrap=True)
    elif name == "rollouts":
        caption = ("passed: reward 1" if ctx.target.threshold >= 1.0
                   else f"passed: reward ≥ {ctx.target.threshold:g} (milestone similarity)")
        table = Table(title=f"Stage 1 — trajectories on {cfg.target} (train split; offline user"
                            f"{', NL assertions not judged' if cfg.scripted else ''})", caption=caption)
        for col in ("agent", "episodes", "passed"):
            table.add_column(col, justify="left" if col == "agent" else "right")
        for pid, row in sorted(result.by_policy.items()):
            kind = "scripted, deliberate departures" if pid.startswith("flawed-scripted") else "the model under study"
            table.add_row(Text(pid).append(f"\n{kind}", style="dim"), str(row["episodes"]), str(row["passed"]))
        console.print(fit_table(table, "agent", "episodes", "passed"))
    elif name == "analysis":
        from ..analysis.report import capabilities_table

        console.print(capabilities_table(json.loads(Path(result.capabilities_json).read_text(encoding="utf-8"))))
        console.print(f"selected capabilities: [bold]{', '.join(result.selected) or '(none)'}[/bold]")
    elif name == "synthesis":
        table = Table(title=f"Stage 3 — synthesis for {ctx.target.domain}")
        for col in ("capability · spec", "status", "template / reason"):
            table.add_column(col)
        for o in result.outcomes:
            table.add_row(Text(o["capability"]).append(f"\n{o['spec_id'] or ''}", style="dim"), o["status"],
                          o["template"] or "; ".join(o["reasons"])[:120])
        console.print(fit_table(table, "status"))
    elif name == "calibration":
        for e in result.envs:
            ref = e["reference_mean_reward"]
            tuned = ""
            if e.get("difficulty"):
                kept = f"chose {e['difficulty']}" if e.get("tune_changed", True) else "kept the synthesized knobs"
                why = f"; {e['tune_stopped']}" if e.get("tune_stopped") else ""
                tuned = (f" (as synthesized {e['untuned_mean_reward']:.2f}; the knob search toward the band compared "
                         f"{e.get('tune_settings', '?')} settings and {kept}{why})")
            elif e.get("tune_stopped"):
                tuned = f" ({e['tune_stopped']})"
            band = "" if "in_band" not in e else (" — in the band" if e["in_band"] else " — outside the band")
            console.print(f"calibration {e['env_id']}: {cfg.model} mean reward {e['mean_reward']:.2f}{tuned}{band}, "
                          f"success {e['success_rate']:.2f}, constant groups {e['groups_constant']:.2f}; reference "
                          f"solution {'–' if ref is None else format(ref, '.2f')}")
    elif name == "training":
        for a in result.adapters:
            if a.demonstrations and not a.steps:
                console.print(f"adapter {a.adapter}: SFT only, on {a.demonstrations} reference episodes of its env "
                              f"({cfg.cap_warm_steps} steps; no GRPO: at CPU budgets GRPO after the warm start lowered "
                              "the score, see benchmarks/learning_cpu.py)")
                continue
            warm = f"warm start on {a.demonstrations} reference episodes of its env, then " if a.demonstrations else ""
            console.print(f"adapter {a.adapter}: {warm}{a.steps} GRPO steps, {a.trainer_rollouts or 0} rollouts, reward per step "
                          f"{[round(r, 2) for _, r in a.reward_curve]}")
    elif name == "routing":
        report = {"index_examples": result.index_examples, "n": result.n, "correct": result.correct,
                  "accuracy": result.accuracy, "confusion": result.confusion, "loo_correct": result.loo_correct,
                  "loo_confusion": result.loo_confusion}
        atomic_write_json(ctx.out / "routing.json", report)
        loo = f"; with each one's own example left out: {result.loo_accuracy:.2f}" if result.loo_accuracy is not None else ""
        console.print(f"router index: {result.index_examples} examples; routing accuracy on the {result.n} target "
                      f"trajectories (truth = analysis labels): {result.accuracy:.2f}{loo}")
        console.print(f"confusion (true → predicted): {result.confusion}")
        if result.loo_confusion:
            console.print(f"left out (true → predicted): {result.loo_confusion}")
        for line in result.missing:
            console.print(f"[yellow]warning:[/yellow] {line}", highlight=False)


def held_out_route(ctx: Context, evaluation: Any) -> dict[str, Any] | None:
    """Where the router sent the held-out tasks against where the analysis says they belong (labels of the
    base model's own held-out episodes); printed as a confusion table and written to ``routing_held_out.json``.
    ``None`` when no routed policy was evaluated."""
    from ..eval.floor import RefusalPolicy
    from ..pipeline.routing import held_out_routing
    from ..rollout import TrajectoryStore

    r = ctx.results
    routing, training, analysis = r.get("routing"), r.get("training"), r.get("analysis")
    specs = [d["spec"] for d in evaluation.reports]
    if "routed" not in specs or routing is None or routing.skipped or training is None or analysis is None:
        return None
    store = ctx.out / "eval" / "base" / "episodes.jsonl"
    base = [t for t in TrajectoryStore(store).load() if t.policy_id != RefusalPolicy.policy_id]
    rep = held_out_routing(base, analysis, training.adapters, routing.index, seed=ctx.cfg.seed)
    atomic_write_json(ctx.out / "routing_held_out.json", rep)
    table = Table(title=f"routing of the {rep['n']} held-out episodes: analysis label (rows) → routed to (columns)")
    cols = sorted({p for row in rep["confusion"].values() for p in row} | set(rep["confusion"]))
    table.add_column("label")
    for c in cols:
        table.add_column(c, justify="right")
    for truth in sorted(rep["confusion"]):
        table.add_row(truth, *[str(rep["confusion"][truth].get(c, 0)) for c in cols])
    table.caption = f"accuracy {rep['correct']}/{rep['n']} = {rep['accuracy']:.2f}"
    ctx.console.print(fit_table(table, "label"))
    return rep


def _curve_ends(a: Any) -> tuple[Any, Any]:
    return (a.reward_curve[0][1], a.reward_curve[-1][1]) if a.reward_curve else (None, None)


def summarize(ctx: Context, row: str, extra: dict[str, Any]) -> tuple[dict[str, Any], list[str], str]:
    """``(found, artifacts, headline)`` of one demo row from the pipeline's stage results."""
    cfg, r = ctx.cfg, ctx.results
    if row == "warm_start":
        res = r["warm_start"]
        found = {k: v for k, v in res.to_dict().items() if k != "record"}
        return found, [_rel(res.record), _rel(res.model)], res.headline()
    if row == "rollouts":
        res = r["rollouts"]
        model = res.by_policy.get(cfg.model, {"episodes": 0, "passed": 0})
        found = {**extra, "by_agent": res.by_policy, "episodes": res.n, "passed": res.passed,
                 "context_overflows": sum(t.termination_reason == CONTEXT_LENGTH for t in res.trajectories())}
        head = f"{res.n} episodes; {cfg.model} passed {model['passed']}/{model['episodes']}"
        if cfg.scripted:
            head += f", scripted passed {res.passed - model['passed']}/{res.n - model['episodes']}"
        return found, [_rel(res.path)], head
    if row == "analysis":
        res = r["analysis"]
        found = {"selected": res.selected, "gaps": res.gaps, "n_failed": res.n_failed, "n_passed": res.n_passed}
        return found, [_rel(a) for a in res.artifacts()], f"{len(res.selected)} selected: {', '.join(res.selected) or 'none'}"
    if row == "synthesis":
        syn, cal = r["synthesis"], r.get("calibration")
        envs = [{"capability": e["capability"], "env_id": e["env_id"], "spec": e["spec"], "calibration": e["calibration"],
                 "model_mean_reward": e["mean_reward"], "reference_mean_reward": e["reference_mean_reward"],
                 **{k: e[k] for k in ("difficulty", "untuned_mean_reward", "in_band") if k in e}}
                for e in (cal.envs if cal is not None else [])]
        arts = ([_rel(syn.report)] if syn.report else []) + [_rel(e["spec"]) for e in envs] + [_rel(e["calibration"]) for e in envs]
        head = ", ".join(f"{e['env_id']} ({cfg.model} {e['model_mean_reward']:.2f})" for e in envs) or "no capability env synthesized"
        return {"outcomes": {o["capability"]: o["status"] for o in syn.outcomes}, "envs": envs}, arts, head
    if row == "training":
        adapters = r["training"].adapters if r.get("training") is not None else []
        trained = [{"name": a.adapter, "capability": a.capability, "env_id": a.env_id, "path": a.path, "steps": a.steps,
                    "rollouts": a.trainer_rollouts, "reward_first": _curve_ends(a)[0], "reward_last": _curve_ends(a)[1]}
                   for a in adapters]
        arts = [_rel(ctx.adapters_dir / "manifest.json")] + [_rel(t["path"]) for t in trained] if trained else []
        for t, a in zip(trained, adapters, strict=True):
            t["demonstrations"] = a.demonstrations
        head = ", ".join(f"{t['name']} (SFT only, {t['demonstrations']} reference episodes)" if not t["steps"] else
                         f"{t['name']} ({t['steps']} steps, reward {t['reward_first']}→{t['reward_last']})" for t in trained)
        return {"adapters": trained}, arts, head or "no adapter (no capability env)"
    if row == "routing":
        res = r.get("routing")
        if res is None or res.skipped:
            return {"skipped": "no adapter" if res is None else res.skipped}, [], "skipped: no adapter to route to"
        found = {"index_examples": res.index_examples, "n": res.n, "correct": res.correct, "accuracy": res.accuracy,
                 "confusion": res.confusion, "loo_correct": res.loo_correct}
        arts = [_rel(a) for a in res.artifacts()] + [_rel(ctx.out / "routing.json")]
        return found, arts, f"accuracy {res.correct}/{res.n} = {res.accuracy:.2f} (index: {res.index_examples})"
    res = r["evaluation"]
    found = {"tasks": res.tasks, "trials": res.trials}
    from ..eval.scores import paired_scores

    paired = paired_scores(res.reports, seed=ctx.cfg.seed)
    for d in res.reports:
        found[d["spec"]] = {"mean_reward": d["mean_reward"], "pass^1": d["pass_hat_k"]["1"]["value"],
                            "context_overflows": d.get("context_overflows", 0), "scores": d.get("scores"),
                            **({"vs_first": paired[d["spec"]]} if d["spec"] in paired else {})}
    head = "; ".join(f"{d['spec']}: mean reward {d['mean_reward']:.3f}, pass^1 {d['pass_hat_k']['1']['value']:.3f}"
                     for d in res.reports)
    return found, [_rel(a) for a in res.artifacts()], head
