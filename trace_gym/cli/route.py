"""``trace-gym route --run DIR``: build the router of a run (TRACE stage 6), as the pipeline builds it."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "ROUTER_RULE"]

# The routing rule a run's router uses unless --rule says otherwise (one of trace_gym.route.retrieval.RULES): the
# kept comparison preset's, the need gate (docs/pipeline.md#the-need-gate).
ROUTER_RULE = "needs"

DESCRIPTION = f"""Build the router that sends each conversation to one capability adapter, or to none (the base model).

The index holds, per adapter, the reference solutions of its capability env and the run's own failed
episodes that the analysis labelled as lacking its capability; under "none", the episodes the base model
passed. Embeddings come from all-MiniLM-L6-v2 (offline) unless --embedder names another model. The rule
(--rule, default {ROUTER_RULE}) is stored with the index, so every router loaded from it routes alike.
With "needs", a need gate first sends a conversation to the base model when a tool its request needs is
not offered; it learns from the tasks the run's rollouts played (the target's gold says which to refuse:
some of each are needed) and from each adapter env's tasks with a tool withheld.

reads:  DIR/stages/training.json (the adapters), DIR/stages/calibration.json (their envs), DIR/specs/,
        DIR/rollouts.jsonl and DIR/analysis/ (the run's own episodes and their labels)
writes: DIR/adapters/router_index.json and router_index.npy (what `eval --policy routed` loads),
        DIR/stages/routing.json (the index's examples per adapter and its routing accuracy on the run's
        episodes, with each one's own example and left out)
next:   trace-gym eval --run DIR --policy base --policy routed --split test
"""


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.route.retrieval import RULES

    p = sub.add_parser("route", help="5. build the router of a run: which adapter, or none, takes a conversation",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", metavar="DIR", required=True, help="the run folder (what this verb reads and writes there "
                   "is said above)")
    p.add_argument("--rule", choices=RULES, default=ROUTER_RULE,
                   help=f"how the nearest examples decide (default {ROUTER_RULE}; see docs/pipeline.md#the-stages)")
    p.add_argument("--seeds", type=int, default=4, help="reference episodes of each adapter's env in the index (default 4)")
    p.add_argument("--embedder", default=None, metavar="MODEL",
                   help="sentence-transformers model name or folder (default: the offline all-MiniLM-L6-v2)")
    p.add_argument("--seed", type=int, default=0, help="first seed of the reference episodes")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trace_gym.cli import check_count
    from trace_gym.cli.runs import need, open_run, run_stage, use_run_specs
    from trace_gym.pipeline import Analysis, Calibration, Rollouts, Routing, Training, build_router
    from trace_gym.pipeline.stages import env_kwargs_for

    console = Console()
    check_count("--seeds", args.seeds, high=10_000)
    run = open_run(args.run)
    training = need(run, "training", Training)
    calibration, rollouts, analysis = (need(run, "calibration", Calibration), need(run, "rollouts", Rollouts),
                                       need(run, "analysis", Analysis))
    use_run_specs(run)
    target = run.target()
    specs = {e["capability"]: e["spec"] for e in calibration.envs}
    tuned = {e["capability"]: env_kwargs_for(e, {}) for e in calibration.envs}

    learning = _played_tasks(target, rollouts)

    def route() -> Routing:
        return build_router(training.adapters, specs, rollouts, analysis, run.index, target=target, seed=args.seed,
                            seeds=args.seeds, env_kwargs={}, embedder=args.embedder, env_kwargs_by_capability=tuned,
                            rule=args.rule, learning_tasks=learning)

    try:
        res, _ = run_stage(run, "routing", route, Routing, after=("training", "calibration", "rollouts", "analysis"),
                           settings={"rule": args.rule, "seeds": args.seeds, "embedder": args.embedder, "seed": args.seed})
    except ValueError as exc:
        if args.rule != "needs":
            raise
        console.print(f"[red]error:[/red] {exc}; build the router with --rule cover instead", highlight=False)
        return 2
    _show(console, res)
    if res.skipped:
        return 1
    console.print(f"next: trace-gym eval --run {args.run} --policy base --policy routed --split test", highlight=False)
    return 0


def _played_tasks(target: Any, rollouts: Any) -> list[str]:
    """The target's tasks the run's rollouts played, in play order (what the need gate learns from)."""
    src = target.source
    ids = (src.task_id_of(t.reset_info or {}, t.options) for t in rollouts.trajectories())
    return list(dict.fromkeys(i for i in ids if i is not None))


def _show(console: Any, res: Any) -> None:
    if res.skipped:
        console.print(f"[red]no router:[/red] {res.skipped}")
        return
    loo = f"; leaving each one's own example out: {res.loo_accuracy:.2f}" if res.loo_accuracy is not None else ""
    console.print(f"router index {res.index}: {res.index_examples} examples, rule {res.rule}", highlight=False)
    console.print(f"routing accuracy on the run's {res.n} episodes (truth: the analysis labels): {res.accuracy:.2f}{loo}",
                  highlight=False)
    console.print(f"confusion (label → routed to): {res.confusion}", highlight=False, markup=False)
    for line in res.missing:
        console.print(f"[yellow]warning:[/yellow] {line}", highlight=False)
