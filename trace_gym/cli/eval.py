"""``trace-gym eval``: pass^1..pass^K with bootstrap intervals for one or more policies, resumable."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DESCRIPTION = """Play each policy on every task --trials times and report pass^1..pass^K with bootstrap intervals,
the mean reward per report group, the refusal floor where the target asks for one, and, for two or more
policies, the paired difference against the first.

reads:  --env and the policies' models (base, adapter:NAME and routed load --model with --adapters/manifest.json
        and router_index); with --run DIR the run's target and model (DIR/run.json) and its adapters and router
        (DIR/adapters/, built by `trace-gym sft|train --run` and `trace-gym route --run`)
writes: --out DIR (default runs/eval; with --run, DIR/eval): <policy>/episodes.jsonl (every episode, appended:
        a rerun plays only the missing ones), <policy>/report.json, comparison.json and comparison.png
"""


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.cli.runs import RUN_HELP
    from trace_gym.eval.policies import EVAL_SPEC_HELP, add_policy_options

    p = sub.add_parser("eval", help="6. evaluate policies on a target env: pass^k tables, JSON and PNG",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default=None, help="env id, e.g. trace/tau2-retail-v0 (with --run: the run's target)")
    p.add_argument("--run", metavar="DIR", help=RUN_HELP)
    p.add_argument("--policy", action="append", required=True, help=f"repeatable: {EVAL_SPEC_HELP}")
    p.add_argument("--trials", type=int, default=4, help="trials per task K (pass^1..pass^K)")
    p.add_argument("--tasks", default=None, help="comma-separated task ids, as the env's task source names them "
                   "(τ²-bench task ids, ToolSandbox scenario names, capability scenario seeds; default: the split)")
    p.add_argument("--split", default=None,
                   help="the split whose tasks to play when --tasks is not given (default: the env's default split, "
                        "e.g. test for τ²-bench retail, base for τ²-bench mock and ToolSandbox)")
    p.add_argument("--per-group", type=int, default=None, metavar="N",
                   help="the first N tasks of each report group (a sample with every kind of task)")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    p.add_argument("--out", default=None, help="output folder (episodes, reports, comparison; default runs/eval)")
    add_policy_options(p)
    p.add_argument("--seed", type=int, default=0, help="trial j of every task uses seed SEED+j")
    p.add_argument("--batch-size", type=int, default=None,
                   help="episodes played in lock step, their model queries batched (default 4, or the run's)")
    p.add_argument("--env-kwargs", default=None, help="JSON object of gym.make kwargs (e.g. a user simulator)")
    p.add_argument("--exclude-groups", default=None, metavar="G1,G2",
                   help="comma-separated report groups to leave out (e.g. insufficient_information on ToolSandbox)")
    p.add_argument("--exclude-refusal-credited", action="store_true",
                   help="leave out the groups where refusing everything already scores >= 0.5 (for numbers that "
                        "claim learning)")
    p.add_argument("--floor", action=argparse.BooleanOptionalAction, default=None,
                   help="report the refusal floor beside the numbers (default: when the target asks for it, "
                        "e.g. ToolSandbox)")
    p.set_defaults(func=_run)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "policy"


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    import trace_gym  # noqa: F401
    from trace_gym.eval.harness import default_tasks, evaluate
    from trace_gym.eval.policies import MAX_NEW_TOKENS, resolve_policy
    from trace_gym.eval.report import comparison_table, paired_difference_table, plot_comparison, report_table
    from trace_gym.eval.scores import paired_scores
    from trace_gym.io import atomic_write_json
    from trace_gym.policies.base import supports
    from trace_gym.progress import reporting

    console = Console()
    from trace_gym.cli import MAX_EPISODES, UsageError, check_count, check_policy_file, env_kwargs_arg

    check_count("--trials", args.trials)
    check_count("--limit", args.limit)
    check_count("--per-group", args.per_group)
    check_count("--batch-size", args.batch_size)
    check_count("--seed", args.seed, low=0, high=2**32 - 1)
    for spec in args.policy:
        check_policy_file(spec)
    if args.run:
        success, gen = _from_run(args)
        env_kwargs = args.env_kwargs
    else:
        if not args.env:
            raise UsageError("give --env ENV_ID (or --run DIR to evaluate a run)")
        success, gen = 1.0, {k: v for k, v in (("max_new_tokens", args.max_new_tokens), ("batch_size", args.batch_size))
                             if v is not None}
        env_kwargs = env_kwargs_arg(args.env_kwargs)
    gen.setdefault("max_new_tokens", MAX_NEW_TOKENS)
    batch_size = gen.setdefault("batch_size", 4)
    tasks = args.tasks.split(",") if args.tasks else default_tasks(args.env, args.split, env_kwargs)
    if args.per_group is not None:
        from trace_gym.core.tasks import task_source_for, tasks_per_group

        tasks = tasks_per_group(task_source_for(args.env, env_kwargs), tasks, args.per_group)
    if args.limit is not None:
        tasks = tasks[: args.limit]
    planned = args.trials * len(tasks) * len(args.policy)
    if planned > MAX_EPISODES:
        raise UsageError(f"{args.trials} trials x {len(tasks)} tasks x {len(args.policy)} policies is {planned:,} episodes, "
                         f"more than one command plays (at most {MAX_EPISODES:,}); split the run")
    exclude = [g for g in (args.exclude_groups or "").split(",") if g]
    if args.exclude_refusal_credited:
        from trace_gym.eval.floor import refusal_credited_groups

        exclude += [g for g in refusal_credited_groups(args.env, tasks, env_kwargs=env_kwargs, base_seed=args.seed)
                    if g not in exclude]
    if exclude:
        from trace_gym.core.tasks import task_groups, task_source_for

        source = task_source_for(args.env, env_kwargs)
        if all(set(exclude) & set(task_groups(source, t)) for t in tasks):
            raise UsageError(f"--exclude-groups {','.join(exclude)} leaves no task to evaluate")
    out = Path(args.out or "runs/eval")
    reports = []
    for spec in args.policy:
        try:
            policy = resolve_policy(spec, model=args.model, adapters=args.adapters, router=args.router,
                                    **{"temperature": args.temperature, "greedy": args.greedy or None, **gen,
                                       "seed": args.seed, "batch_size": batch_size})
        except (ValueError, FileNotFoundError) as exc:
            raise UsageError(f"--policy {spec}: {exc}") from None
        folder = out / _slug(spec)
        with reporting(Console(stderr=True)):  # evaluate() shows its progress line on stderr
            rep = evaluate(args.env, policy, tasks, args.trials, store=folder / "episodes.jsonl", base_seed=args.seed,
                           success=success, env_kwargs=env_kwargs,
                           batch_size=batch_size if supports(policy, "batchable") else 1,
                           floor=args.floor, exclude_groups=exclude)
        doc = rep.to_dict()
        doc["spec"] = spec
        if hasattr(policy, "decisions"):
            doc["routing"] = policy.decisions
        atomic_write_json(folder / "report.json", doc)
        console.print(report_table(doc))
        reports.append(doc)
    atomic_write_json(out / "comparison.json", {"env_id": args.env, "tasks": tasks, "trials": args.trials,
                                                "excluded_groups": exclude, "reports": reports,
                                                "paired": paired_scores(reports, seed=args.seed)})
    png = plot_comparison(reports, out / "comparison.png")
    if len(reports) > 1:
        console.print(comparison_table(reports))
        console.print(paired_difference_table(reports, seed=args.seed))
    console.print(f"wrote {out / 'comparison.json'}" + (f" and {png}" if png else ""))
    return 0


def _from_run(args: argparse.Namespace) -> tuple[float, dict]:
    """``eval --run DIR``: fill ``args`` (env, its kwargs, model, adapters, out) from the run; the run's success
    threshold and its generation options (each overridden by the flag given here)."""
    from trace_gym.cli.runs import generation, open_run, refuse_with_run, use_run_specs

    refuse_with_run(args, env=args.env, env_kwargs=args.env_kwargs, adapters=args.adapters, out=args.out)
    run = open_run(args.run)
    use_run_specs(run)  # a policy or task may be one of the run's capability envs
    target = run.target()
    args.env, args.env_kwargs = target.env_id, dict(target.env_kwargs)
    args.model = args.model or run.settings()["policy"]
    args.adapters, args.out = str(run.adapters), str(run.eval)
    gen = {k: v for k, v in generation(run, args).items() if k != "seed"}  # trial j plays with seed --seed + j
    return target.threshold, gen
