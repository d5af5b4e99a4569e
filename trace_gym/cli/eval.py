"""``trace-gym eval``: pass^1..pass^K with bootstrap intervals for one or more policies, resumable."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.eval.policies import EVAL_SPEC_HELP

    p = sub.add_parser("eval", help="evaluate policies on a target env: pass^k tables, JSON and PNG")
    p.add_argument("--env", required=True, help="env id, e.g. trace/tau2-retail-v0")
    p.add_argument("--policy", action="append", required=True, help=f"repeatable: {EVAL_SPEC_HELP}")
    p.add_argument("--trials", type=int, default=4, help="trials per task K (pass^1..pass^K)")
    p.add_argument("--tasks", default=None, help="comma-separated task ids / scenario names (default: the split)")
    p.add_argument("--split", default="test", help="τ²-bench split when --tasks is not given (default: test)")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    p.add_argument("--out", default="runs/eval", help="output folder (episodes, reports, comparison)")
    p.add_argument("--model", default="smollm2", help="base model for base/adapter:/routed (default smollm2)")
    p.add_argument("--adapters", default="adapters", help="folder with manifest.json and router_index")
    p.add_argument("--router", choices=["retrieval", "classifier"], default="retrieval")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--seed", type=int, default=0, help="trial j of every task uses seed SEED+j")
    p.add_argument("--batch-size", type=int, default=4,
                   help="episodes played in lock step, their model queries batched (default 4)")
    p.add_argument("--env-kwargs", default=None, help="JSON object of gym.make kwargs (e.g. a user simulator)")
    p.set_defaults(func=_run)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "policy"


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    import trace_gym  # noqa: F401
    from trace_gym.eval.harness import default_tasks, evaluate
    from trace_gym.eval.policies import resolve_policy
    from trace_gym.eval.report import comparison_table, plot_comparison, report_table
    from trace_gym.io import atomic_write_json

    console = Console()
    tasks = args.tasks.split(",") if args.tasks else default_tasks(args.env, args.split)
    if args.limit:
        tasks = tasks[: args.limit]
    env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else None
    out = Path(args.out)
    reports = []
    for spec in args.policy:
        policy = resolve_policy(spec, model=args.model, adapters=args.adapters, router=args.router,
                                max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                greedy=args.greedy or None, seed=args.seed, batch_size=args.batch_size)
        folder = out / _slug(spec)
        with Progress(console=console) as progress:
            bar = progress.add_task(f"{spec}", total=len(tasks) * args.trials)
            rep = evaluate(args.env, policy, tasks, args.trials, store=folder / "episodes.jsonl", base_seed=args.seed,
                           env_kwargs=env_kwargs, batch_size=args.batch_size if getattr(policy, "batchable", True) else 1,
                           on_episode=lambda _t, p=progress, b=bar: p.advance(b))
        doc = rep.to_dict()
        doc["spec"] = spec
        if hasattr(policy, "decisions"):
            doc["routing"] = policy.decisions
        atomic_write_json(folder / "report.json", doc)
        console.print(report_table(doc))
        reports.append(doc)
    atomic_write_json(out / "comparison.json", {"env_id": args.env, "tasks": tasks, "trials": args.trials, "reports": reports})
    png = plot_comparison(reports, out / "comparison.png")
    if len(reports) > 1:
        console.print(comparison_table(reports))
    console.print(f"wrote {out / 'comparison.json'}" + (f" and {png}" if png else ""))
    return 0
