"""The seven stages of the demo.  Each takes the shared :class:`Context` and returns a
:class:`StageResult`: what it found (numbers, for the summary) and the files it wrote.

Every stage resumes on its own as far as the pieces allow (trajectory stores skip
stored episodes, the analysis reuses stored labeling runs, synthesis keeps existing
specs); the runner (:mod:`trace_gym.demo.runner`) also skips a stage whose record
says it finished and whose artifacts are still there.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..io import atomic_write_json
from .config import DemoConfig
from .guard import ContextGuard

__all__ = ["Context", "StageResult", "STAGES"]


@dataclass
class StageResult:
    found: dict[str, Any] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    headline: str = ""


@dataclass
class Context:
    """What the stages share: the config, the console, the loaded base policy and earlier results."""

    cfg: DemoConfig
    console: Console
    results: dict[str, StageResult] = field(default_factory=dict)
    _policy: Any = None

    @property
    def out(self) -> Path:
        return self.cfg.out

    @property
    def env_id(self) -> str:
        return f"trace/tau2-{self.cfg.domain}-v0"

    @property
    def store_path(self) -> Path:
        return self.out / "rollouts" / "trajectories.jsonl"

    @property
    def adapters_dir(self) -> Path:
        return self.out / "adapters"

    def progress(self) -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=self.console, transient=True)

    def model_spec(self) -> str:
        """``smollm2``, or the folder of the tiny test model (saved once under ``<out>/models/tiny``)."""
        if self.cfg.model == "smollm2":
            return "smollm2"
        folder = self.out / "models" / "tiny"
        if not (folder / "config.json").exists():
            from ..policies.hf import tiny_test_model

            model, tok = tiny_test_model(self.cfg.seed)
            model.config.max_position_embeddings = 16384  # rotary positions: τ² prompts exceed the default 4096
            tmp = folder.with_name(".tiny.tmp")
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            tmp.replace(folder)
        return str(folder.resolve())

    def gen_options(self) -> dict[str, Any]:
        c = self.cfg
        return {"max_new_tokens": c.max_new_tokens, "temperature": c.temperature, "seed": c.seed, "batch_size": c.batch_size}

    def policy(self) -> Any:
        """The base model as a policy, loaded once (rollouts and calibration share it)."""
        if self._policy is None:
            from ..eval.policies import resolve_policy

            with self.console.status(f"loading {self.cfg.model} …"):
                self._policy = ContextGuard(resolve_policy("base", model=self.model_spec(), **self.gen_options()))
            self._policy.policy_id = self.cfg.model
        return self._policy


def _rel(ctx: Context, p: str | Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


# ----------------------------------------------------------------------------- 1. rollouts
def demo_tasks(domain: str, n: int) -> list[dict[str, Any]]:
    """The first ``n`` train-split tasks on which every flawed variant applies (split order)."""
    from ..analysis.gold import tau2_gold
    from ..tau2.data import domain_dir, load_tasks, read_db_file
    from .flawed import VARIANTS, variants_for

    tasks = load_tasks(domain, split="train")
    db = read_db_file(domain_dir(domain) / "db.json")
    _, writes = tau2_gold(f"trace/tau2-{domain}-v0", str(tasks[0]["id"]))
    full = [t for t in tasks if variants_for(t, writes, db) == list(VARIANTS)]
    rest = [t for t in tasks if t not in full]
    return (full + rest)[:n]


def _model_rollouts(ctx: Context, tasks: list[str], on_episode: Callable[[], None]) -> int:
    """The model on each task once, several tasks in lock step (one env per task) so generation is batched.

    ``collect`` batches seeds of one task; here each batch row is a different task,
    so the envs are made with their ``task_id`` and the episodes stored under the
    same key ``collect`` would use (options ``{"task_id": ...}``).
    """
    import gymnasium as gym

    from ..rollout import TrajectoryStore, episode_key, rollout_batch

    store = TrajectoryStore(ctx.store_path)
    done = store.keys()
    seed = ctx.cfg.seed
    todo = [t for t in tasks if episode_key(ctx.env_id, ctx.cfg.model, seed, {"task_id": t}) not in done]
    policy = ctx.policy() if todo else None
    for _ in range(len(tasks) - len(todo)):
        on_episode()
    kwargs = {**ctx.cfg.env_kwargs, "max_steps": ctx.cfg.env_max_steps}
    for start in range(0, len(todo), ctx.cfg.batch_size):
        chunk = todo[start : start + ctx.cfg.batch_size]
        envs = [gym.make(ctx.env_id, task_id=t, **kwargs) for t in chunk]
        try:
            trajs = rollout_batch(envs, policy, [seed] * len(chunk))
        finally:
            for e in envs:
                e.close()
        for t, task_id in zip(trajs, chunk, strict=True):
            t.options = {"task_id": task_id}
            t.env_id = ctx.env_id
            store.append(t)
            on_episode()
    return len(todo)


def stage_rollouts(ctx: Context) -> StageResult:
    from ..analysis.gold import tau2_gold
    from ..rollout import TrajectoryStore, collect
    from ..tau2.data import domain_dir, read_db_file
    from .flawed import flawed_policy, flawed_script, variants_for

    cfg = ctx.cfg
    tasks = demo_tasks(cfg.domain, cfg.scripted_tasks)
    db = read_db_file(domain_dir(cfg.domain) / "db.json")
    _, writes = tau2_gold(ctx.env_id, str(tasks[0]["id"]))
    plan = [(t, v) for t in tasks for v in variants_for(t, writes, db)]
    base_ids = [str(t["id"]) for t in tasks[: cfg.base_tasks]]
    with ctx.progress() as progress:
        bar = progress.add_task(f"flawed scripted agent on {len(tasks)} train tasks", total=len(plan))
        for task, variant in plan:
            pol = flawed_policy(flawed_script(task, variant, writes, db), variant)
            collect(ctx.env_id, pol, [cfg.seed], store=ctx.store_path, options={"task_id": str(task["id"])},
                    env_kwargs=cfg.env_kwargs, on_episode=lambda _t: progress.advance(bar), on_skip=lambda _s: progress.advance(bar))
        bar2 = progress.add_task(f"{cfg.model} on {len(base_ids)} of those tasks (batch {cfg.batch_size})", total=len(base_ids))
        _model_rollouts(ctx, base_ids, lambda: progress.advance(bar2))
    trajs = TrajectoryStore(ctx.store_path).load()
    by_agent: dict[str, dict[str, int]] = {}
    for t in trajs:
        row = by_agent.setdefault(t.policy_id, {"episodes": 0, "passed": 0})
        row["episodes"] += 1
        row["passed"] += int(t.reward >= 1.0)
    from rich.table import Table

    table = Table(title=f"Stage 1 — trajectories on {ctx.env_id} (train split; offline user, NL assertions not judged)")
    for col in ("agent", "kind", "episodes", "passed (reward 1)"):
        table.add_column(col, justify="left" if col in ("agent", "kind") else "right")
    for pid, row in sorted(by_agent.items()):
        kind = "scripted, deliberate departures" if pid.startswith("flawed-scripted") else "the model under study"
        table.add_row(pid, kind, str(row["episodes"]), str(row["passed"]))
    ctx.console.print(table)
    model_row = by_agent.get(cfg.model, {"episodes": 0, "passed": 0})
    found = {"tasks": [str(t["id"]) for t in tasks], "model_tasks": base_ids, "by_agent": by_agent,
             "context_overflows": ctx.policy().fired if ctx._policy is not None else 0,
             "episodes": len(trajs), "passed": sum(r["passed"] for r in by_agent.values())}
    return StageResult(found, [_rel(ctx, ctx.store_path)],
                       f"{len(trajs)} episodes; {cfg.model} passed {model_row['passed']}/{model_row['episodes']}, "
                       f"scripted passed {found['passed'] - model_row['passed']}/{len(trajs) - model_row['episodes']}")


# ----------------------------------------------------------------------------- 2. analysis
def stage_analysis(ctx: Context) -> StageResult:
    from ..analysis.aggregate import Thresholds
    from ..analysis.labelers import GoldLabeler
    from ..analysis.pipeline import run_analysis
    from ..analysis.report import capabilities_table, plot_capabilities
    from ..analysis.taxonomy import TAXONOMY

    out = ctx.out / "analysis"
    result, doc = run_analysis(ctx.store_path, out, GoldLabeler(), list(TAXONOMY), runs=1, thresholds=Thresholds(k=1),
                               seed=ctx.cfg.seed)
    ctx.console.print(capabilities_table(doc))
    png = plot_capabilities(doc, out / "capabilities.png")
    ctx.console.print(f"selected capabilities: [bold]{', '.join(result.selected) or '(none)'}[/bold]")
    gaps = {s["capability"]: round(s["mean_gap"], 3) for s in doc["capabilities"] if s["selected"]}
    found = {"selected": result.selected, "gaps": gaps, "n_failed": doc["inputs"]["n_failed"], "n_passed": doc["inputs"]["n_passed"]}
    arts = [_rel(ctx, out / "capabilities.json")] + ([_rel(ctx, png)] if png else [])
    return StageResult(found, arts, f"{len(result.selected)} selected: {', '.join(result.selected) or 'none'}")


# ----------------------------------------------------------------------------- 3. synthesis + calibration
def _register(ctx: Context, specs: list[str]) -> list[str]:
    from ..synthesis.register import register_spec_files

    return register_spec_files([Path(p) for p in specs])


def stage_synthesis(ctx: Context) -> StageResult:
    from rich.table import Table

    from ..analysis.pipeline import load_capabilities
    from ..capabilities.calibrate import ReferencePolicy, calibrate
    from ..synthesis import synthesize

    cfg = ctx.cfg
    doc = load_capabilities(ctx.out / "analysis" / "capabilities.json")
    out = ctx.out / "envs"
    outcomes = synthesize(doc, cfg.domain, out, seed=cfg.seed)
    table = Table(title=f"Stage 3 — synthesis for {cfg.domain}")
    for col in ("capability", "status", "spec", "template / reason"):
        table.add_column(col)
    for o in outcomes:
        table.add_row(o.capability, o.status, o.spec_id or "", o.template or "; ".join(o.reasons)[:120])
    ctx.console.print(table)
    made = [o for o in outcomes if o.path][: cfg.max_adapters]
    ids = _register(ctx, [o.path for o in made])  # type: ignore[misc]
    envs = []
    seeds = list(range(cfg.calib_seeds))
    for o, env_id in zip(made, ids, strict=True):
        cal_path = out / f"{o.spec_id}.calibration.json"
        if cal_path.exists():
            summary = json.loads(cal_path.read_text())
        else:
            with ctx.progress() as progress:
                bar = progress.add_task(f"calibrating {env_id} with {cfg.model}", total=len(seeds) * cfg.calib_samples)
                res = calibrate(env_id, ctx.policy(), seeds, cfg.calib_samples, env_kwargs={"max_steps": cfg.cap_max_steps},
                                on_episode=lambda b=bar: progress.advance(b))
            ref = calibrate(env_id, ReferencePolicy(), list(range(max(4, cfg.calib_seeds))), 1)
            summary = {"model": res.summary(), "reference": ref.summary()}
            atomic_write_json(cal_path, summary)
        m = summary["model"]
        ctx.console.print(f"calibration {env_id}: {cfg.model} mean reward {m['mean_reward']:.2f}, success {m['success_rate']:.2f}, "
                          f"constant groups {m['groups_constant']:.2f}; reference solution {summary['reference']['mean_reward']:.2f}")
        envs.append({"capability": o.capability, "env_id": env_id, "spec": o.path, "calibration": str(cal_path),
                     "model_mean_reward": m["mean_reward"], "reference_mean_reward": summary["reference"]["mean_reward"]})
    found = {"outcomes": {o.capability: o.status for o in outcomes}, "envs": envs}
    report = next((p for p in (out / "_synthesis.json", out / "synthesis.json") if p.exists()), out / "_synthesis.json")
    arts = [_rel(ctx, report)] + [_rel(ctx, e["spec"]) for e in envs] + [_rel(ctx, e["calibration"]) for e in envs]
    head = ", ".join(f"{e['env_id']} ({cfg.model} {e['model_mean_reward']:.2f})" for e in envs) or "no capability env synthesized"
    return StageResult(found, arts, head)


def _capability_envs(ctx: Context) -> list[dict[str, Any]]:
    envs = ctx.results["synthesis"].found.get("envs", [])
    _register(ctx, [e["spec"] for e in envs])  # registration is per process: redo it when the stage was resumed
    return envs


def _adapter_name(capability: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in capability.lower()).strip("-")


# ----------------------------------------------------------------------------- 4. training
def stage_training(ctx: Context) -> StageResult:
    from ..train import TrainConfig, train
    from ..train.outputs import read_manifest

    cfg = ctx.cfg
    envs = _capability_envs(ctx)
    trained = []
    for e in envs:
        name = _adapter_name(e["capability"])
        out = ctx.adapters_dir / name
        manifest = read_manifest(ctx.adapters_dir / "manifest.json")
        entry = next((a for a in manifest["adapters"] if a.get("path") == str(out)), None)
        if entry is None or not (out / "adapter_model.safetensors").exists():
            tc = TrainConfig(env_id=e["env_id"], model=ctx.model_spec(), out=str(out), env_kwargs={"max_steps": cfg.cap_max_steps},
                             seed=cfg.seed, num_train_seeds=max(8, cfg.train_steps), max_steps=cfg.train_steps,
                             num_generations=cfg.group_size, seeds_per_step=1, max_new_tokens_per_turn=cfg.train_tokens_per_turn,
                             max_completion_length=cfg.train_completion_tokens, learning_rate=cfg.learning_rate, lora_r=cfg.lora_r,
                             lora_alpha=2 * cfg.lora_r, max_resamples=0, max_turns=cfg.train_max_turns, run_name=f"GRPO {name}", save_steps=0,
                             # ~5k-token prompts: without checkpointing a real model's backward pass needs >24 GB
                             gradient_checkpointing=cfg.model != "tiny")
            ctx.console.print(f"training adapter [bold]{name}[/bold] on {e['env_id']}: {cfg.train_steps} GRPO steps, "
                              f"groups of {cfg.group_size}")
            res = train(tc)
            entry = res.manifest_entry
        curve = entry.get("reward_curve") or []
        trained.append({"name": name, "capability": e["capability"], "env_id": e["env_id"], "path": str(out),
                        "steps": entry.get("steps"), "rollouts": entry.get("rollouts_used"),
                        "reward_first": curve[0][1] if curve else None, "reward_last": curve[-1][1] if curve else None})
        ctx.console.print(f"adapter {name}: {entry.get('steps')} steps, {entry.get('rollouts_used')} rollouts, reward per step "
                          f"{[round(r, 2) for _, r in curve]}")
    arts = [_rel(ctx, ctx.adapters_dir / "manifest.json")] + [_rel(ctx, t["path"]) for t in trained] if trained else []
    head = ", ".join(f"{t['name']} ({t['steps']} steps, reward {t['reward_first']}→{t['reward_last']})" for t in trained)
    return StageResult({"adapters": trained}, arts, head or "no adapter (no capability env)")


# ----------------------------------------------------------------------------- 5. routing
def _reference_trajectories(env_id: str, seeds: list[int]) -> list[Any]:
    import gymnasium as gym

    from ..policies import ScriptedPolicy
    from ..rollout import rollout

    env = gym.make(env_id)
    base = env.unwrapped

    def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        actions = base.reference_actions()
        sent = sum(1 for m in messages if m.get("role") == "assistant" and m.get("name") is None)
        return actions[sent] if sent < len(actions) else "Is there anything else I can help you with?"

    try:
        return [rollout(env, ScriptedPolicy(act, policy_id="reference"), s) for s in seeds]
    finally:
        env.close()


def stage_routing(ctx: Context) -> StageResult:
    from ..analysis.labels import LabelRun
    from ..analysis.pipeline import load_capabilities, trajectory_id
    from ..rollout import TrajectoryStore
    from ..route.base import NO_ADAPTER
    from ..route.build import build_index, routing_accuracy, true_route_labels
    from ..route.retrieval import RetrievalRouter

    cfg = ctx.cfg
    adapters = ctx.results["training"].found.get("adapters", [])
    if not adapters:
        return StageResult({"skipped": "no adapter"}, [], "skipped: no adapter to route to")
    _capability_envs(ctx)
    target = TrajectoryStore(ctx.store_path).load()
    corpora: dict[str, list[Any]] = {}
    for a in adapters:
        corpora[a["name"]] = _reference_trajectories(a["env_id"], list(range(cfg.router_seeds)))
    corpora[NO_ADAPTER] = [t for t in target if t.reward >= 1.0]
    index = build_index(corpora)
    path = ctx.adapters_dir / "router_index"
    index.save(path)
    doc = load_capabilities(ctx.out / "analysis" / "capabilities.json")
    runs = [LabelRun.from_dict(json.loads(p.read_text())["run"]) for p in sorted((ctx.out / "analysis" / "labels").glob("run_*.json"))]
    truth = true_route_labels(doc, runs, {a["capability"]: a["name"] for a in adapters})
    convs = [(t.transcript or t.messages, truth[trajectory_id(t)]) for t in target if trajectory_id(t) in truth]
    rep = routing_accuracy(RetrievalRouter(index), convs)
    counts = Counter(index.labels)
    ctx.console.print(f"router index: {dict(counts)} examples; routing accuracy on the {rep.n} target trajectories "
                      f"(truth = analysis labels): {rep.accuracy:.2f}")
    ctx.console.print(f"confusion (true → predicted): {rep.confusion}")
    report = {"index_examples": dict(counts), **rep.to_dict()}
    atomic_write_json(ctx.out / "routing.json", report)
    arts = [_rel(ctx, path.with_suffix(".json")), _rel(ctx, path.with_suffix(".npy")), _rel(ctx, ctx.out / "routing.json")]
    return StageResult(report, arts, f"accuracy {rep.correct}/{rep.n} = {rep.accuracy:.2f} (index: {dict(counts)})")


# ----------------------------------------------------------------------------- 6. evaluation
def stage_evaluation(ctx: Context) -> StageResult:
    from ..eval.harness import default_tasks, evaluate
    from ..eval.policies import resolve_policy
    from ..eval.report import comparison_table, plot_comparison, report_table

    cfg = ctx.cfg
    tasks = default_tasks(ctx.env_id, "test")[: cfg.eval_tasks]
    specs = ["base"] + (["routed"] if (ctx.adapters_dir / "router_index.json").exists() else [])
    out = ctx.out / "eval"
    reports = []
    kwargs = {**cfg.env_kwargs, "max_steps": cfg.env_max_steps}
    for spec in specs:
        with ctx.console.status(f"loading {spec} policy …"):
            policy = ContextGuard(resolve_policy(spec, model=ctx.model_spec(), adapters=ctx.adapters_dir, **ctx.gen_options()))
        with ctx.progress() as progress:
            bar = progress.add_task(f"eval {spec} on {len(tasks)} test tasks × {cfg.eval_trials}", total=len(tasks) * cfg.eval_trials)
            rep = evaluate(ctx.env_id, policy, tasks, cfg.eval_trials, store=out / spec / "episodes.jsonl", base_seed=cfg.seed,
                           env_kwargs=kwargs, batch_size=min(cfg.batch_size, cfg.eval_trials),
                           on_episode=lambda _t, b=bar: progress.advance(b))
        doc = rep.to_dict()
        doc["spec"] = spec
        doc["context_overflows"] = policy.fired
        if hasattr(policy, "decisions"):
            doc["routing"] = policy.decisions
        atomic_write_json(out / spec / "report.json", doc)
        ctx.console.print(report_table(doc))
        reports.append(doc)
        del policy
    atomic_write_json(out / "comparison.json", {"env_id": ctx.env_id, "tasks": tasks, "trials": cfg.eval_trials, "reports": reports})
    png = plot_comparison(reports, out / "comparison.png")
    if len(reports) > 1:
        ctx.console.print(comparison_table(reports))
    found: dict[str, Any] = {"tasks": tasks, "trials": cfg.eval_trials}
    for r in reports:
        found[r["spec"]] = {"mean_reward": r["mean_reward"], "pass^1": r["pass_hat_k"]["1"]["value"],
                            "context_overflows": r["context_overflows"]}
    arts = [_rel(ctx, out / "comparison.json")] + ([_rel(ctx, png)] if png else [])
    head = "; ".join(f"{r['spec']}: mean reward {r['mean_reward']:.3f}, pass^1 {r['pass_hat_k']['1']['value']:.3f}" for r in reports)
    return StageResult(found, arts, head)


STAGES: list[tuple[str, str, Callable[[Context], StageResult]]] = [
    ("rollouts", "1. base rollouts", stage_rollouts),
    ("analysis", "2. analysis", stage_analysis),
    ("synthesis", "3. synthesis + calibration", stage_synthesis),
    ("training", "4. training (GRPO + LoRA)", stage_training),
    ("routing", "5. routing", stage_routing),
    ("evaluation", "6. evaluation", stage_evaluation),
]
