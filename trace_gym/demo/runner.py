"""Running the demo: the TRACE loop of :mod:`trace_gym.pipeline`, the evaluation, and the closing summary."""

from __future__ import annotations

import os
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from ..eval.report import comparison_table, paired_difference_table, report_table
from ..io import atomic_write_json
from ..pipeline import Evaluation, StageStore, Target, evaluate_policies, run_trace
from ..progress import reporting
from ..render import compact_table, fit_table
from .config import DemoConfig
from .stages import Context, demo_plan, held_out_route, rows_for, show, spread, summarize

__all__ = ["run_demo", "prepare_model", "verdict", "summary_table", "print_summary"]


def verdict(found: dict[str, Any]) -> str:
    """One honest sentence comparing routed with base on the held-out tasks (and, when it was measured, the
    adapter with base on held-out seeds of its own capability env)."""
    text = _target_verdict(found)
    cap = found.get("capability_env")
    adapter = next((k for k in cap or {} if k.startswith("adapter:")), None)
    if cap and adapter and cap.get("base"):
        pd = (cap[adapter].get("vs_first") or {}).get("overall") or {}
        text += (f". On {len(cap['tasks'])} held-out seeds of its own env {cap['env_id']}: base "
                 f"{cap['base']['mean_reward']:.3f} → adapter {cap[adapter]['mean_reward']:.3f}")
        if pd.get("n_tasks"):
            text += f" (paired {pd['value']:+.3f} [{pd['low']:+.3f}, {pd['high']:+.3f}])"
    return text


def _target_verdict(found: dict[str, Any]) -> str:
    base, routed = found.get("base"), found.get("routed")
    if base is None:
        return "no evaluation was run"
    if routed is None:
        return f"only the base model was evaluated (mean reward {base['mean_reward']:.3f}): no adapter to route to"
    d = routed["mean_reward"] - base["mean_reward"]
    nums = (f"base {base['mean_reward']:.3f} → routed {routed['mean_reward']:.3f} mean reward, "
            f"pass^1 {base['pass^1']:.3f} → {routed['pass^1']:.3f}")
    sb, sr = (base.get("scores") or {}).get("overall"), (routed.get("scores") or {}).get("overall")
    if sb and sr:
        nums += f", perfect {sb['perfect']} → {sr['perfect']} of {sb['episodes']}"
        if "floor" in sb:
            nums += f"; refusing everything scores {sb['floor']['mean']:.3f}"
    pd = (routed.get("vs_first") or {}).get("overall")
    if pd and pd.get("n_tasks"):  # the paired interval decides what the sentence says
        nums += (f"; paired difference {pd['value']:+.3f} [95% CI {pd['low']:+.3f}, {pd['high']:+.3f}], "
                 f"{pd['wins']} tasks better, {pd['losses']} worse, {pd['ties']} equal")
        if pd["low"] > 0:
            return f"routed adapters improved on the held-out tasks ({nums})"
        if pd["high"] < 0:
            return f"routed adapters did worse on the held-out tasks ({nums})"
        return (f"no measurable difference on the held-out tasks: the paired interval includes 0, so this is not "
                f"significant ({nums})")
    if d > 1e-9:
        return f"routed adapters scored higher on the held-out tasks, without a paired interval to test it ({nums})"
    if d < -1e-9:
        return f"routed adapters scored lower on the held-out tasks, without a paired interval to test it ({nums})"
    return f"no change on the held-out tasks ({nums})"


def run_demo(cfg: DemoConfig, console: Console | None = None) -> dict[str, Any]:
    """Run (or resume) the TRACE loop (:func:`trace_gym.pipeline.run_trace`) and the evaluation; print and write
    ``<out>/summary.json``; return the summary."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import trace_gym  # noqa: F401  (registers the env ids)

    console = console or Console()
    cfg.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(cfg, console)
    console.rule(f"[bold]trace-gym demo[/bold]: {cfg.model} on {cfg.target} → {cfg.out}")
    rows_spec = rows_for(cfg)
    titles = {stage: title for _, title, stages in rows_spec for stage in stages}
    titles.update(synthesis="3a. synthesis", calibration="3b. calibration")

    def starting(msg: str) -> None:  # the store announces each stage it runs
        name = msg.split()[1]
        console.rule(titles.get(name, name))
        if "running again" in msg:
            console.print(f"[yellow]{msg[msg.index('(') + 1 : msg.rindex(')')]}[/yellow]")

    store = StageStore(cfg.out, fingerprint=cfg.to_dict(), log=starting)

    def finished(name: str, result: Any) -> None:
        rec = store.records[name]
        if rec.resumed:
            console.rule(f"{titles.get(name, name)} [dim](done in an earlier run; skipped)[/dim]")
        show(ctx, name, result)
        if not rec.resumed:
            console.print(f"[green]{titles.get(name, name)} done in {rec.seconds:.0f} s[/green] ({rec.cpu_seconds:.0f} CPU s)")

    started = time.perf_counter()
    with reporting(console):  # every long stage shows a progress line (plain lines when not on a terminal)
        prepare_model(ctx, store, on_stage=finished)
        acting = ctx.acting_spec()  # fixed once the model is prepared (a warm start's folder acts on transformers)
        engine = "llama.cpp" if acting.startswith("llamacpp:") else "transformers"
        console.print(f"[dim]acting on {engine} (--engine {cfg.engine}); training on transformers[/dim]")
        plan, extra = demo_plan(ctx)
        run_trace(plan, store, on_stage=finished)
        policies = {"base": lambda: ctx.load("base")}
        if (ctx.adapters_dir / "router_index.json").exists():
            policies["routed"] = lambda: ctx.load("routed")
        target = ctx.eval_target
        tasks = spread(target, "test", cfg.eval_tasks or len(target.task_ids("test")))  # in turn from each report group
        evaluation = store.run("evaluation", lambda: evaluate_policies(
            target, policies, tasks, cfg.eval_trials, cfg.out / "eval", base_seed=cfg.seed,
            batch_size=cfg.batch_size, on_report=lambda doc: console.print(report_table(doc))),
            Evaluation)
        capability = capability_check(ctx, store)
    finished("evaluation", evaluation)
    if len(evaluation.reports) > 1:
        console.print(comparison_table(evaluation.reports))
    console.print(scores_rich_table(evaluation.reports))
    paired = paired_difference_table(evaluation.reports, seed=cfg.seed)
    if paired is not None:
        console.print(paired)
    held_out_route(ctx, evaluation)
    if capability is not None:
        console.rule(f"capability env: base vs adapter on {len(capability.tasks)} held-out seeds")
        for doc in capability.reports:
            console.print(report_table(doc))
        console.print(paired_difference_table(capability.reports, seed=cfg.seed))
    rows = []
    for row, title, stages in rows_spec:
        recs = [store.records[s] for s in stages if s in store.records]
        found, artifacts, headline = summarize(ctx, row, extra)
        rows.append({"stage": row, "title": title, "seconds": round(sum(r.seconds for r in recs), 1),
                     "cpu_seconds": round(sum(r.cpu_seconds for r in recs), 1), "headline": headline, "found": found,
                     "artifacts": artifacts, "resumed": bool(recs) and all(r.resumed for r in recs)})
    if capability is not None:
        from ..eval.scores import paired_scores

        paired = paired_scores(capability.reports, seed=cfg.seed)
        rows[-1]["found"]["capability_env"] = {
            "env_id": capability.reports[0]["env_id"], "tasks": capability.tasks,
            **{d["spec"]: {"mean_reward": d["mean_reward"], **({"vs_first": paired[d["spec"]]} if d["spec"] in paired else {})}
               for d in capability.reports}}
    summary = {
        "config": cfg.to_dict(),
        "acting": acting,  # the policy spec that played every episode (see DemoConfig.engine)
        "stages": rows,
        "total_seconds_this_run": round(time.perf_counter() - started, 1),
        "verdict": verdict(rows[-1]["found"]),
    }
    atomic_write_json(cfg.out / "summary.json", summary)
    print_summary(console, summary, cfg.out / "summary.json")
    return summary


def capability_check(ctx: Context, store: StageStore) -> Evaluation | None:
    """The first adapter against the base model on held-out seeds (the test split) of its own capability env:
    the number the adapter's training moves first.  ``None`` without an adapter or with ``cap_eval_seeds`` 0."""
    training = ctx.results.get("training")
    calibration = ctx.results.get("calibration")
    if not ctx.cfg.cap_eval_seeds or training is None or not training.adapters or calibration is None:
        return None
    from ..pipeline.stages import env_kwargs_for
    from ..synthesis.register import register_spec_files_once

    a = training.adapters[0]
    row = next(e for e in calibration.envs if e["capability"] == a.capability)
    register_spec_files_once([row["spec"]])  # a resumed run registers the synthesized env again
    target = Target(a.env_id, env_kwargs_for(row, {"max_steps": ctx.cfg.cap_max_steps}))
    tasks = target.task_ids("test")[: ctx.cfg.cap_eval_seeds]
    policies = {"base": lambda: ctx.load("base"), f"adapter:{a.adapter}": lambda: ctx.load(f"adapter:{a.adapter}")}
    return store.run("capability_check", lambda: evaluate_policies(
        target, policies, tasks, 1, ctx.out / "eval_capability", base_seed=ctx.cfg.seed, batch_size=ctx.cfg.batch_size),
        Evaluation)


def prepare_model(ctx: Context, store: StageStore, on_stage: Any = None) -> str:
    """The model every later stage loads: with the config's warm start on, the merged model it makes (or an
    earlier run made: the stage ``warm_start`` of ``store``); else the base model.  Sets ``ctx.weights``."""
    if ctx.cfg.warm_start:
        from ..pipeline.warm import WarmStart, run_warm_start

        ws = store.run("warm_start", lambda: run_warm_start(ctx.warm_settings(), ctx.out / "warm_start"), WarmStart)
        if on_stage is not None:
            on_stage("warm_start", ws)
        else:
            ctx.results["warm_start"] = ws
        ctx.weights = ws.model
    return ctx.model_spec()


def scores_rich_table(reports: list[dict[str, Any]]) -> Table:
    """Mean reward [95% CI] · perfect/episodes per report group, one column per evaluated policy, refusal floor last."""
    from ..eval.scores import scores_table

    rows = scores_table({d["spec"]: d["scores"] for d in reports if d.get("scores")}, "group", stacked=True)
    table = compact_table("held-out tasks per group: mean reward [95% CI], perfect/episodes, ended",
                          "refusal floor: what refusing every request scores on the same tasks (mean, perfect/tasks)")
    table.show_lines = True
    for i, col in enumerate(rows[0]):
        table.add_column(col, justify="left" if i == 0 else "right")
    for r in rows[1:]:
        table.add_row(*r, style="bold" if r[0] == "overall" else None)
    return fit_table(table, rows[0][0])


def summary_table(summary: dict[str, Any]) -> Table:
    """The closing table: one row per stage (what it found, wall and CPU seconds) and the verdict; fits 80 columns."""
    cfg = summary["config"]
    rows = summary["stages"]
    table = Table(title=f"TRACE demo summary ({cfg['model']}, {cfg['target']})", show_lines=True)
    table.add_column("stage", max_width=15)  # titles wrap, leaving the room to the ids in what was found
    table.add_column("what it found")
    table.add_column("s (CPU s)", justify="right")
    for r in rows:
        secs = f"{r['seconds']:.0f} ({r.get('cpu_seconds', 0):.0f})" + ("\nearlier run" if r["resumed"] else "")
        table.add_row(r["title"], r["headline"], secs)
    total = f"{sum(r['seconds'] for r in rows):.0f} ({sum(r.get('cpu_seconds', 0) for r in rows):.0f})"
    table.add_row("total", summary["verdict"], total, style="bold")
    return fit_table(table, "s (CPU s)")


def print_summary(console: Console, summary: dict[str, Any], path: Any) -> None:
    """The closing table, then every stage's artifacts, one path per line (never cut)."""
    console.print(summary_table(summary))
    console.print("[bold]artifacts[/bold]")
    for r in summary["stages"]:
        for a in r["artifacts"]:
            console.print(f"  {r['title'].split(' ', 1)[-1]}: {a}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"  summary: {path}", markup=False, highlight=False, soft_wrap=True)
