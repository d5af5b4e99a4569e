"""``trace-gym analyze TRAJECTORIES.jsonl``: find the capabilities whose absence explains failures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DESCRIPTION = """Label every trajectory NA / PRESENT / LACKING per capability and select the capabilities whose
absence explains the failures (coverage >= rho, contrastive gap >= delta, in >= k of the labeling runs).

reads:  TRAJECTORIES (a store written by `trace-gym rollout --out`), or with --run DIR its DIR/rollouts.jsonl
writes: --out DIR (default runs/analysis), or with --run DIR its DIR/analysis/:
          capabilities.json  the candidates, per-run figures, the selection; labels/run_NN.json  one per labeling
          run (stored runs are reused: a rerun resumes); capabilities.png  coverage against gap
        with --run also DIR/stages/analysis.json: the capabilities synthesis will target (the selected ones, at
        most --max-capabilities; when fewer than --min-capabilities pass, the next most often lacking on failures)
next:   trace-gym synthesize --run DIR
"""


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.cli.runs import RUN_HELP

    p = sub.add_parser("analyze", help="2. label trajectories and select the capabilities the agent lacks",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trajectories", nargs="?", help="a trajectory store (.jsonl) written by `trace-gym rollout`")
    p.add_argument("--run", metavar="DIR", help=RUN_HELP)
    p.add_argument("--min-capabilities", type=int, default=1, metavar="N",
                   help="with --run: target at least N capabilities, taking the ones most often lacking on failed "
                        "trajectories when fewer pass the thresholds (default 1; 0: only what passes)")
    p.add_argument("--max-capabilities", type=int, default=None, metavar="N",
                   help="with --run: target at most N of the selected capabilities (default: all)")
    p.add_argument("--labeler", choices=["offline", "llm"], default="offline",
                   help="offline: derive labels from gold actions (τ²-bench); llm: ask a model")
    p.add_argument("--runs", type=int, default=None, help="independent labeling runs N (default: 1 offline, 10 llm)")
    p.add_argument("--out", default=None, help="output folder (capabilities.json, labels/, capabilities.png; default runs/analysis)")
    p.add_argument("--rho", type=float, default=0.10, help="minimum coverage ρ (default 0.10)")
    p.add_argument("--delta", type=float, default=0.20, help="minimum contrastive gap δ (default 0.20)")
    p.add_argument("--k", type=int, default=None, help="runs a capability must pass (default: 80%% of N)")
    p.add_argument("--success", type=float, default=None,
                   help="reward at or above which a trajectory passed (default 1.0; with --run, the run's success)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capabilities", default=None,
                   help="'taxonomy' (built-in), 'discover' (one LLM discovery pass), or a JSON file of capabilities")
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL for --labeler llm (e.g. http://127.0.0.1:8000/v1)")
    p.add_argument("--model", default=None, help="model name at the endpoint")
    p.add_argument("--cassette", default=None, help="record/replay LLM answers in this JSONL file")
    p.add_argument("--replay", action="store_true", help="with --cassette: replay only (no endpoint needed)")
    p.set_defaults(func=_run)


def _client(args):
    from trace_gym.llm import CassetteClient, OpenAIChatClient

    inner = None
    if args.endpoint:
        inner = OpenAIChatClient(args.endpoint, args.model or "default")
    if args.cassette:
        return CassetteClient(args.cassette, "replay" if args.replay else "record", inner, model=args.model)
    if inner is None:
        raise SystemExit("--labeler llm needs --endpoint URL --model NAME (or --cassette FILE --replay)")
    return inner


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trace_gym.cli import UsageError

    console = Console()
    if args.run:
        return _run_in_folder(args, console)
    if not args.trajectories:
        raise UsageError("give a trajectory file (written by `trace-gym rollout --out`) or --run DIR")
    for flag, value in (("--min-capabilities", args.min_capabilities != 1), ("--max-capabilities", args.max_capabilities)):
        if value:
            raise UsageError(f"{flag} chooses what a run synthesizes: give --run DIR")
    out = Path(args.out or "runs/analysis")
    result, _ = _analyze(args, args.trajectories, out, 1.0 if args.success is None else args.success, console)
    console.print(f"selected: {', '.join(result.selected) or '(none)'}")
    return 0


def _analyze(args: argparse.Namespace, trajectories: str, out: Path, success: float, console) -> tuple:
    """Label ``trajectories`` into ``out`` as the flags say: the aggregation result and ``capabilities.json``'s document."""
    from rich.progress import Progress

    from trace_gym.analysis.aggregate import Thresholds
    from trace_gym.analysis.labelers import GoldLabeler
    from trace_gym.analysis.labelers.llm import LLMLabeler, discover_capabilities
    from trace_gym.analysis.labels import Capability
    from trace_gym.analysis.pipeline import items_from_trajectories, run_analysis
    from trace_gym.analysis.report import capabilities_table, plot_capabilities
    from trace_gym.analysis.taxonomy import TAXONOMY
    from trace_gym.cli import UsageError, check_count, input_file
    from trace_gym.io import atomic_write_json
    from trace_gym.rollout import TrajectoryStore

    check_count("--runs", args.runs, high=1000)
    runs = args.runs if args.runs is not None else (1 if args.labeler == "offline" else 10)
    check_count("--k", args.k, high=runs)
    k = args.k if args.k is not None else max(1, round(0.8 * runs))
    thresholds = Thresholds(rho=args.rho, delta=args.delta, k=k, success=success)
    input_file(trajectories, "trajectory file", " (write one with `trace-gym rollout`)")
    trajs = list(TrajectoryStore(trajectories).load())
    if not trajs:
        raise UsageError(f"{trajectories}: no trajectories")
    items = items_from_trajectories(trajs)
    labeler = GoldLabeler() if args.labeler == "offline" else LLMLabeler(_client(args))
    source = args.capabilities or ("taxonomy" if args.labeler == "offline" else "discover")
    if source == "taxonomy":
        caps = list(TAXONOMY)
    elif source == "discover":
        disc = out / "discovery.json"
        if disc.exists():
            caps = [Capability.from_dict(c) for c in json.loads(disc.read_text())["capabilities"]]
            console.print(f"discovery: reusing {disc}")
        else:
            caps, bad = discover_capabilities(_client(args), items, seed=args.seed)
            atomic_write_json(disc, {"capabilities": [c.to_dict() for c in caps], "malformed": bad})
    else:
        caps = [Capability.from_dict(c) for c in json.loads(Path(source).read_text())]
    with Progress(console=console) as progress:
        task = progress.add_task(f"labeling ({labeler.name})", total=runs)

        def on_run(r: int, resumed: bool) -> None:
            progress.update(task, advance=1, description=f"labeling ({labeler.name}) run {r}{' (stored)' if resumed else ''}")

        result, doc = run_analysis(trajectories, out, labeler, caps, runs=runs, thresholds=thresholds,
                                   seed=args.seed, items=items, on_run=on_run)
    console.print(capabilities_table(doc))
    png = plot_capabilities(doc, out / "capabilities.png")
    if sum(doc["malformed"]):
        console.print(f"[yellow]malformed labeler answers per run: {doc['malformed']}; unlabeled pairs: {doc['unlabeled']}[/yellow]")
    console.print(f"wrote {out / 'capabilities.json'}" + (f" and {png}" if png else ""))
    return result, doc


def _run_in_folder(args: argparse.Namespace, console) -> int:
    """``analyze --run DIR``: the run's rollouts into ``DIR/analysis`` and the stage ``analysis``."""
    from trace_gym.cli import check_count
    from trace_gym.cli.runs import need, open_run, refuse_with_run, run_stage
    from trace_gym.pipeline import Analysis, Rollouts, analysis_result

    refuse_with_run(args, trajectories=args.trajectories, out=args.out)
    check_count("--min-capabilities", args.min_capabilities, low=0, high=100)
    check_count("--max-capabilities", args.max_capabilities, high=100)
    run = open_run(args.run)
    rollouts = need(run, "rollouts", Rollouts)
    success = args.success if args.success is not None else run.target().threshold
    settings = {k: getattr(args, k) for k in ("labeler", "runs", "rho", "delta", "k", "seed", "capabilities", "endpoint",
                                              "model", "min_capabilities", "max_capabilities")}

    def analyze() -> Analysis:
        _, doc = _analyze(args, rollouts.path, run.analysis, success, console)
        return analysis_result(doc, run.analysis, min_capabilities=args.min_capabilities,
                               max_capabilities=args.max_capabilities, plot=False)

    res, _ = run_stage(run, "analysis", analyze, Analysis, settings={**settings, "success": success}, after=("rollouts",))
    console.print(f"{res.n_failed} failed and {res.n_passed} passed trajectories (reward ≥ {success:g}); "
                  f"selected: {', '.join(res.selected) or '(none)'}", highlight=False)
    if res.fallback:
        console.print(f"fewer than {args.min_capabilities} passed the thresholds: also targeting "
                      f"{', '.join(res.fallback)} (most often lacking on failed trajectories)", highlight=False)
    if not res.chosen:
        console.print("no capability to target: the run stops here (play more tasks, or lower --rho/--delta)")
        return 1
    console.print(f"synthesis will target: {', '.join(res.chosen)}; next: trace-gym synthesize --run {args.run}",
                  highlight=False)
    return 0
